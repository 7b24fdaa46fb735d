//! Repairs: lost packets asked for again, and how long their repair is
//! waited for.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::hold::{GivenUp, Learned};
use crate::seq::Seq;

/// Most repairs awaited at once: half the default window, more than a path
/// that dies takes down with it; beyond this, losses are released at once.
const MAX_AWAITING: usize = 4096;

/// A repair asked for and not received yet.
#[derive(Clone, Copy, Debug)]
struct Awaited {
    gap: Seq,
    asked: Instant,
    /// Whether the path that carried it delivered past it: lost for
    /// certain, not only late on a path that fell silent.
    certain: bool,
}

/// The repairs asked for and the wait for them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Repairs {
    /// How long a repair is expected to take, if repairs are asked for.
    hint: Option<Duration>,
    /// How long the repairs seen so far took, with headroom.
    learned: Learned,
    /// Repairs asked for and not received yet, in sequence order, none
    /// before the window's `next`.
    awaiting: VecDeque<Awaited>,
    /// Sequence numbers given up on while their repair was awaited.
    unrepaired: GivenUp,
    /// Every gap before this was looked at for loss evidence.
    cursor: Seq,
    /// Lost sequence numbers to ask the sender for, not taken yet.
    asked: Vec<Seq>,
}

impl Repairs {
    pub fn set_hint(&mut self, hint: Option<Duration>) {
        self.hint = hint;
    }

    /// Return how long a repair is waited for, if repairs are asked for:
    /// the larger of the hint and what repairs took so far, within `max`.
    pub fn wait(&self, max: Duration) -> Option<Duration> {
        let hint = self.hint?;
        Some(hint.max(self.learned.value).min(max))
    }

    /// Start over at `seq`: a new sender run.
    pub fn restart(&mut self, seq: Seq) {
        self.cursor = seq;
        self.asked.clear();
        self.awaiting.clear();
        self.unrepaired.clear();
    }

    /// Take the sequence numbers to ask the sender for.
    pub fn take_asked(&mut self) -> Vec<Seq> {
        std::mem::take(&mut self.asked)
    }

    /// Return the next gap to look at for loss evidence, at or after
    /// `next`, if it is before `evident`, and move past it.
    pub fn next_to_judge(&mut self, next: Seq, evident: Seq) -> Option<Seq> {
        if self.cursor.is_before(next) {
            self.cursor = next;
        }
        if !self.cursor.is_before(evident) {
            return None;
        }
        let gap = self.cursor;
        self.cursor = gap.next();
        Some(gap)
    }

    /// Find `gap` (not before `next`) among the awaited repairs, or where
    /// it would go: they are in sequence order, and there may be thousands
    /// when a path dies, so search, do not scan.
    fn index(&self, gap: Seq, next: Seq) -> Result<usize, usize> {
        let key = gap.distance_from(next);
        self.awaiting
            .binary_search_by_key(&key, |a| a.gap.distance_from(next))
    }

    /// Ask for `gap` at `now`, lost for `certain` or not, unless that was
    /// done already; return whether it was asked for now.
    pub fn ask(&mut self, gap: Seq, now: Instant, next: Seq, certain: bool) -> bool {
        if self.awaiting.len() >= MAX_AWAITING {
            return false;
        }
        let Err(at) = self.index(gap, next) else {
            return false;
        };
        self.awaiting.insert(
            at,
            Awaited {
                gap,
                asked: now,
                certain,
            },
        );
        self.asked.push(gap);
        true
    }

    /// Ask for `gap` without awaiting its repair: nothing waits for it.
    pub fn ask_unawaited(&mut self, gap: Seq) {
        self.asked.push(gap);
    }

    /// `seq` arrived at `now`: if its repair was awaited, it came in time;
    /// return whether it was.
    pub fn arrived(&mut self, seq: Seq, now: Instant, next: Seq) -> bool {
        let Ok(i) = self.index(seq, next) else {
            return false;
        };
        if let Some(a) = self.awaiting.remove(i) {
            self.learned
                .learn(now, now.saturating_duration_since(a.asked));
        }
        true
    }

    /// When a repair asked for at `asked` is overdue.
    pub fn due(&self, asked: Instant, max: Duration) -> Instant {
        asked + self.wait(max).unwrap_or(Duration::ZERO)
    }

    /// When the repair asked for `gap` is overdue, if it was asked for.
    pub fn deadline(&self, gap: Seq, next: Seq, max: Duration) -> Option<Instant> {
        let a = self.awaiting.get(self.index(gap, next).ok()?)?;
        Some(self.due(a.asked, max))
    }

    /// Return whether `gap` was asked for as lost for certain.
    pub fn certain(&self, gap: Seq, next: Seq) -> bool {
        self.index(gap, next)
            .ok()
            .and_then(|i| self.awaiting.get(i))
            .is_some_and(|a| a.certain)
    }

    /// Return the gaps before `seq` whose repair is still due at `now`,
    /// with when each was asked for.
    pub fn due_before(
        &self,
        seq: Seq,
        now: Instant,
        max: Duration,
    ) -> impl Iterator<Item = (Seq, Instant)> + '_ {
        self.awaiting
            .iter()
            .take_while(move |a| a.gap.is_before(seq))
            .filter(move |a| self.due(a.asked, max) > now)
            .map(|a| (a.gap, a.asked))
    }

    /// `gap` was given up on while its repair was awaited.
    pub fn given_up(&mut self, gap: Seq) {
        self.unrepaired.note(gap);
    }

    /// `seq` arrived after it was passed; if it was a repair given up on,
    /// it took longer than waited: wait longer from now on.
    pub fn late(&mut self, seq: Seq, max: Duration) {
        if self.unrepaired.take(seq) {
            if let Some(wait) = self.wait(max) {
                self.learned.value = (wait * 3 / 2).min(max);
            }
        }
    }

    /// Forget the repairs of sequence numbers before `next`.
    pub fn passed(&mut self, next: Seq) {
        while self.awaiting.front().is_some_and(|a| a.gap.is_before(next)) {
            self.awaiting.pop_front();
        }
    }
}

/// Most losses remembered for late delivery: as many as repairs are awaited
/// at once. A loss forgotten before its repair comes is one the inner flow
/// has to recover itself.
const WANTED_LATE_MAX: usize = MAX_AWAITING;

/// Losses released while asked for, to be handed out late if their repair
/// comes: when each was asked for, by sequence number (every arriving
/// packet is looked up), and in the order asked, to forget the oldest
/// first. An entry of the order whose number is no longer wanted, or was
/// asked for again since, is skipped.
#[derive(Clone, Debug, Default)]
pub(crate) struct WantedLate {
    asked: HashMap<Seq, Instant>,
    order: VecDeque<(Seq, Instant)>,
}

impl WantedLate {
    /// Remember `gap`, asked for at `asked`; return whether it was not
    /// already. Once only: its repair may come twice, and only one copy may
    /// be handed out.
    pub fn note(&mut self, gap: Seq, asked: Instant) -> bool {
        if self.asked.contains_key(&gap) {
            return false;
        }
        while self.asked.len() >= WANTED_LATE_MAX {
            self.forget_oldest();
        }
        self.asked.insert(gap, asked);
        self.order.push_back((gap, asked));
        true
    }

    /// Forget those asked for longer ago than `max`, the longest a repair
    /// is waited for: theirs is not coming (the NACK or the repair was
    /// lost).
    pub fn forget_overdue(&mut self, now: Instant, max: Duration) {
        while let Some(&(_, asked)) = self.order.front() {
            if now.saturating_duration_since(asked) <= max {
                break;
            }
            self.forget_oldest();
        }
    }

    fn forget_oldest(&mut self) {
        if let Some((seq, asked)) = self.order.pop_front() {
            if self.asked.get(&seq) == Some(&asked) {
                self.asked.remove(&seq);
            }
        }
    }

    /// Forget `seq`; return whether it was wanted.
    pub fn take(&mut self, seq: Seq) -> bool {
        if self.asked.is_empty() {
            // Nothing lost lately: the common case, without a hash.
            self.order.clear();
            return false;
        }
        self.asked.remove(&seq).is_some()
    }

    /// Return whether `seq` is wanted late.
    pub fn contains(&self, seq: Seq) -> bool {
        self.asked.contains_key(&seq)
    }

    pub fn clear(&mut self) {
        self.asked.clear();
        self.order.clear();
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.asked.is_empty()
    }
}
