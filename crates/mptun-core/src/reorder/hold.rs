//! How long a gap is waited for: the hold.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::seq::Seq;

/// Time over which a wait learned from a large reordering falls most of the
/// way (1 - 1/e) back to what the gaps since call for.
const FORGET: Duration = Duration::from_secs(10);

/// Sequence numbers remembered after being given up on, to recognise them
/// if they turn up late after all.
const REMEMBERED: usize = 64;

/// A wait learned from how long gaps stayed open: raised at once by a longer
/// one, brought down towards shorter ones over [`FORGET`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Learned {
    pub value: Duration,
    at: Option<Instant>,
}

impl Learned {
    /// Learn from a gap filled at `now` after staying open for `open`.
    pub fn learn(&mut self, now: Instant, open: Duration) {
        let target = open * 5 / 4 + Duration::from_millis(1);
        let elapsed = self
            .at
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        self.at = Some(now);
        if target > self.value {
            self.value = target;
        } else {
            // Forget over seconds, not over packets: at tens of thousands of
            // gaps a second, forgetting per gap undoes a lesson within
            // milliseconds, and the next late packet is lost again.
            let fraction = (elapsed.as_secs_f64() / FORGET.as_secs_f64()).min(1.0);
            self.value -= (self.value - target).mul_f64(fraction);
        }
    }
}

/// A bounded list of sequence numbers given up on, to recognise one that
/// turns up after all.
#[derive(Clone, Debug, Default)]
pub(crate) struct GivenUp(VecDeque<Seq>);

impl GivenUp {
    pub fn note(&mut self, seq: Seq) {
        if self.0.len() == REMEMBERED {
            self.0.pop_front();
        }
        self.0.push_back(seq);
    }

    /// Return whether `seq` was given up on, and forget it.
    pub fn take(&mut self, seq: Seq) -> bool {
        match self.0.iter().position(|&s| s == seq) {
            Some(i) => {
                self.0.remove(i);
                true
            }
            None => false,
        }
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }
}

/// The wait in force for gaps that may be reordering rather than loss.
#[derive(Clone, Debug)]
pub(crate) struct Hold {
    /// The configured maximum.
    max: Duration,
    /// The hold the paths' measured delay spread calls for, if known.
    hint: Option<Duration>,
    /// The hold the reordering seen so far calls for: how long gaps that
    /// did get filled stayed open, with headroom; doubled when a packet
    /// arrives after its gap was given up on.
    learned: Learned,
    /// Sequence numbers given up on by the timer.
    timed_out: GivenUp,
}

impl Hold {
    pub fn new(max: Duration) -> Self {
        Hold {
            max,
            hint: None,
            learned: Learned::default(),
            timed_out: GivenUp::default(),
        }
    }

    pub fn set_hint(&mut self, hint: Option<Duration>) {
        self.hint = hint;
    }

    /// Return how long a gap is waited for now: without a hint the maximum;
    /// with one, the larger of the hint and what the reordering seen calls
    /// for, within the maximum.
    pub fn get(&self) -> Duration {
        match self.hint {
            None => self.max,
            Some(hint) => hint.max(self.learned.value).min(self.max),
        }
    }

    /// A gap was filled at `now` by the packet itself, after `open`.
    pub fn learn(&mut self, now: Instant, open: Duration) {
        self.learned.learn(now, open);
    }

    /// The timer gave up on `seq`.
    pub fn timed_out(&mut self, seq: Seq) {
        self.timed_out.note(seq);
    }

    /// `seq`, given up on as lost, came late as a repair: a copy of it
    /// that comes later still says nothing of how far paths reorder.
    pub fn repaired_late(&mut self, seq: Seq) {
        self.timed_out.take(seq);
    }

    /// `seq` arrived after it was passed; if the timer had given up on it,
    /// it was too early: wait longer from now on.
    pub fn late(&mut self, seq: Seq) {
        if self.timed_out.take(seq) {
            self.learned.value = (self.learned.value.max(self.get()) * 2).min(self.max);
        }
    }
}
