//! How deep a path's queue may be before it overflows, as learned from
//! its overflows.

use std::time::{Duration, Instant};

use super::estimators::WindowedMax;

/// How long the deepest queue met is remembered: longer than the few
/// probe intervals between sending into a queue and hearing what of it
/// was lost.
const PEAK_WINDOW: Duration = Duration::from_millis(500);
/// Share of the deepest queue met before an overflow that the scheduler
/// fills the path to from then on.
const LIMIT_SHARE: f64 = 0.8;
/// No limit below this: a few packets' worth of jitter must not shut a
/// path.
const LIMIT_FLOOR_US: f64 = 5000.0;
/// How fast a limit rises again while the path does not overflow, µs per
/// second: the buffer may be deeper than the overflow said (the inner flow
/// may have burst into it).
const LIMIT_RISE_US_PER_S: f64 = 2000.0;
/// The queue, µs, a path that never overflowed is trusted with when it
/// has not been seen to hold a deeper one: its buffer is not known, and a
/// burst of late repairs (a dead path's packets in flight) would otherwise
/// queue an idle small path far past it. Well under the 50 ms a
/// moderately buffered link holds at its rate.
const UNPROVEN_US: f64 = 20_000.0;

/// The queue at which a path is full, if it ever overflowed.
#[derive(Clone, Debug)]
pub(crate) struct QueueLimit {
    /// The deepest queue the echoes met lately, µs.
    peak: WindowedMax,
    /// The limit when it was set, and when.
    limit: Option<(f64, Instant)>,
    /// Times the path overflowed, for status output.
    overflows: u64,
}

impl Default for QueueLimit {
    fn default() -> Self {
        QueueLimit {
            peak: WindowedMax::new(PEAK_WINDOW),
            limit: None,
            overflows: 0,
        }
    }
}

impl QueueLimit {
    /// An echo at `now` met a queue of `queued_us`.
    pub fn met(&mut self, now: Instant, queued_us: f64) {
        self.peak.update(now, queued_us);
    }

    /// The path overflowed: fill it to a little less than the deepest
    /// queue met lately.
    pub fn overflowed(&mut self, now: Instant) {
        self.overflows = self.overflows.saturating_add(1);
        self.peak.expire(now);
        let Some(peak) = self.peak.get() else {
            return;
        };
        let limit = (peak * LIMIT_SHARE).max(LIMIT_FLOOR_US);
        if self.limit_us(now).is_none_or(|l| limit < l) {
            self.limit = Some((limit, now));
        }
    }

    /// Return the queue above which the path is full at `now`, µs.
    pub fn limit_us(&self, now: Instant) -> Option<f64> {
        let (limit, at) = self.limit?;
        let rise = now.saturating_duration_since(at).as_secs_f64() * LIMIT_RISE_US_PER_S;
        Some(limit + rise)
    }

    /// Return how deep the path's queue may be made at `now`, µs, by
    /// what may as well not be sent: the limit if the path overflowed,
    /// else the deepest queue met lately, which it held, and at least
    /// [`UNPROVEN_US`].
    pub fn room_us(&mut self, now: Instant) -> f64 {
        if let Some(limit) = self.limit_us(now) {
            return limit;
        }
        self.peak.expire(now);
        self.peak.get().unwrap_or(0.0).max(UNPROVEN_US)
    }

    /// Return how many times the path overflowed.
    pub fn overflows(&self) -> u64 {
        self.overflows
    }

    /// Forget the limit: the path went down and may come back another.
    /// The count of overflows stays.
    pub fn reset(&mut self) {
        *self = QueueLimit {
            overflows: self.overflows,
            ..QueueLimit::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_is_a_little_under_the_deepest_queue_met_and_rises_again() {
        let t0 = crate::tests::t0();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut q = QueueLimit::default();
        q.overflowed(at(0));
        assert_eq!(q.limit_us(at(0)), None, "no queue met: no limit");
        for (ms, queued_us) in [(0, 10_000.0), (100, 30_000.0), (200, 20_000.0)] {
            q.met(at(ms), queued_us);
        }
        q.overflowed(at(300));
        assert_eq!(q.limit_us(at(300)), Some(24_000.0));
        // A shallower overflow lowers it; a deeper one, later, does not
        // raise it.
        q.met(at(900), 10_000.0);
        q.overflowed(at(1000));
        assert_eq!(q.limit_us(at(1000)), Some(8_000.0));
        q.met(at(1100), 40_000.0);
        q.overflowed(at(1100));
        assert_eq!(q.limit_us(at(1100)), Some(8_200.0));
        // Without an overflow it rises by 2 ms a second.
        assert_eq!(q.limit_us(at(2100)), Some(10_200.0));
    }

    #[test]
    fn a_limit_is_never_below_a_few_packets_of_jitter() {
        let t0 = crate::tests::t0();
        let mut q = QueueLimit::default();
        q.met(t0, 1000.0);
        q.overflowed(t0);
        assert_eq!(q.limit_us(t0), Some(LIMIT_FLOOR_US));
    }

    #[test]
    fn a_path_that_never_overflowed_has_room_for_what_it_held_lately() {
        let t0 = crate::tests::t0();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut q = QueueLimit::default();
        assert_eq!(q.room_us(at(0)), UNPROVEN_US, "nothing met: the default");
        q.met(at(0), 45_000.0);
        assert_eq!(q.room_us(at(100)), 45_000.0, "it held 45 ms");
        assert_eq!(q.room_us(at(600)), UNPROVEN_US, "not lately");
        q.met(at(700), 30_000.0);
        q.overflowed(at(700));
        assert_eq!(q.room_us(at(700)), 24_000.0, "the limit once it overflowed");
    }
}
