//! How long packets waited in the reorder buffer.

use std::time::Duration;

/// How long packets waited in the buffer: 0.25 ms buckets up to 250 ms,
/// then one for everything longer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HoldHistogram {
    buckets: Vec<u64>,
}

impl Default for HoldHistogram {
    fn default() -> Self {
        HoldHistogram {
            buckets: vec![0; HOLD_BUCKETS + 1],
        }
    }
}

const HOLD_BUCKET_US: u64 = 250;
const HOLD_BUCKETS: usize = 1000;

impl HoldHistogram {
    pub(crate) fn record(&mut self, held: Duration) {
        let bucket = (held.as_micros() as u64 / HOLD_BUCKET_US) as usize;
        self.buckets[bucket.min(HOLD_BUCKETS)] += 1;
    }

    /// Return the buckets that recorded a wait, as (bucket, waits): bucket
    /// `i` holds waits under `(i + 1) * 250` µs, the last one everything
    /// longer. For a reader to take differences of (see [`since`]).
    ///
    /// [`since`]: Self::since
    pub fn nonzero_buckets(&self) -> Vec<(u32, u64)> {
        self.buckets
            .iter()
            .enumerate()
            .filter(|&(_, &n)| n > 0)
            .map(|(i, &n)| (i as u32, n))
            .collect()
    }

    /// Return how many waits were at most `bound`, to the 0.25 ms bucket:
    /// those of the buckets whose upper end is not past it.
    pub fn count_below(&self, bound: Duration) -> u64 {
        let whole = (bound.as_micros() as u64 / HOLD_BUCKET_US) as usize;
        self.buckets[..whole.min(HOLD_BUCKETS)].iter().sum()
    }

    /// Return how many waits were longer than `bound`: those
    /// [`count_below`](Self::count_below) leaves out.
    pub fn count_above(&self, bound: Duration) -> u64 {
        self.count() - self.count_below(bound)
    }

    /// Rebuild a histogram from [`nonzero_buckets`](Self::nonzero_buckets);
    /// buckets out of range count in the last one.
    pub fn from_buckets(buckets: &[(u32, u64)]) -> Self {
        let mut histogram = HoldHistogram::default();
        for &(i, n) in buckets {
            histogram.buckets[(i as usize).min(HOLD_BUCKETS)] += n;
        }
        histogram
    }

    /// Return the waits recorded after `earlier`, a copy of this histogram
    /// taken before: the hold over a stretch of time, such as a flow's
    /// steady state without its start.
    pub fn since(&self, earlier: &HoldHistogram) -> HoldHistogram {
        HoldHistogram {
            buckets: self
                .buckets
                .iter()
                .zip(&earlier.buckets)
                .map(|(now, before)| now.saturating_sub(*before))
                .collect(),
        }
    }

    /// Return how many waits were recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Return the recorded waits added up, each taken at the middle of its
    /// bucket.
    pub fn sum(&self) -> Duration {
        let us: u64 = (0..)
            .zip(&self.buckets)
            .map(|(i, &n)| n.saturating_mul(i * HOLD_BUCKET_US + HOLD_BUCKET_US / 2))
            .fold(0, u64::saturating_add);
        Duration::from_micros(us)
    }

    /// Return the wait that fraction `q` (0 to 1) of the recorded waits did
    /// not exceed, to the bucket's upper edge; `None` if nothing waited.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(Duration::from_micros((i as u64 + 1) * HOLD_BUCKET_US));
            }
        }
        None
    }
}

/// What ended a packet's wait: what became of the last gap before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitEnd {
    /// The gap's own packet (or its parity's rebuild) came: reordering,
    /// a packet on a path farther or more queued than the one behind it.
    Reordered,
    /// A repair asked for filled the gap.
    Repaired,
    /// The gap was given up on: lost, waited for the hold, or skipped to
    /// make room or at the peer's restart.
    GivenUp,
}

impl WaitEnd {
    /// Every kind, in the order status reports them.
    pub const ALL: [WaitEnd; 3] = [WaitEnd::Reordered, WaitEnd::Repaired, WaitEnd::GivenUp];
}

/// How long packets waited, in all and by what ended each wait.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Waits {
    all: HoldHistogram,
    by_end: [HoldHistogram; 3],
}

impl Waits {
    pub fn record(&mut self, end: WaitEnd, held: Duration) {
        self.all.record(held);
        self.by_end[end as usize].record(held);
    }

    pub fn all(&self) -> &HoldHistogram {
        &self.all
    }

    pub fn ended_by(&self, end: WaitEnd) -> &HoldHistogram {
        &self.by_end[end as usize]
    }
}
