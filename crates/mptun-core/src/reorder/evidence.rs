//! Loss evidence: what each path has delivered, from which the reorder
//! buffer knows that a gap is lost rather than late.
//!
//! Each path delivers in the order it was sent (one queue, one socket, one
//! worker on each side), so once a path has delivered a packet, nothing
//! sent on it earlier can still be in flight there. The sender names the
//! paths that may still deliver an earlier packet; a gap all of them have
//! delivered past is lost.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::{Duration, Instant};

use super::Arrival;
use crate::path::{PathSet, MAX_PATHS};
use crate::seq::Seq;

/// Most spans of congestion losses remembered; a span is forgotten once
/// delivery has passed it.
const MAX_CONGESTED_SPANS: usize = 256;

/// Sequence numbers strictly between `after` and `before` among which a
/// congested path lost `missing` packets.
#[derive(Clone, Copy, Debug)]
struct CongestedSpan {
    after: Seq,
    before: Seq,
    missing: u32,
}

/// What each path has delivered, and when.
#[derive(Clone, Debug, Default)]
pub(crate) struct LossEvidence {
    /// When each path last delivered.
    heard: [Option<Instant>; MAX_PATHS],
    /// Highest sequence number each path has delivered.
    highest: [Option<Seq>; MAX_PATHS],
    /// The highest sequence number any path delivered.
    highest_seen: Option<Seq>,
    /// The paths the sender stripes over, as of its latest packet.
    in_use: PathSet,
    /// When each path last joined `in_use`: a path the sender just took up
    /// again has not been silent, its first packets are on their way.
    joined: [Option<Instant>; MAX_PATHS],
    /// Where a congested path lost packets: it skipped path sequence
    /// numbers just before a packet sent into a standing queue. Oldest
    /// first.
    congested_spans: VecDeque<CongestedSpan>,
    /// When the packet before the one being taken in arrived.
    last_arrival: Option<Instant>,
}

impl LossEvidence {
    /// Forget everything: a new sender run.
    pub fn clear(&mut self) {
        *self = LossEvidence::default();
    }

    /// Take in what an arriving packet says: its path delivered up to it,
    /// and what the sender stripes over now. A packet from before `next`
    /// (late, or a copy) says nothing of the gaps still open, and a number
    /// left that far behind would, once `next` moved on by half the number
    /// space, compare as far ahead.
    pub fn note(&mut self, now: Instant, arrival: &Arrival, next: Seq) {
        let Some(i) = Some(arrival.path.index()).filter(|&i| i < MAX_PATHS) else {
            return;
        };
        self.heard[i] = Some(now);
        if arrival.seq.is_before(next) {
            return;
        }
        if arrival.dropped_at_queue > 0 {
            if let Some(after) = self.highest[i] {
                // Packets sent on this path between the last one it
                // delivered and this one are missing; this one met a
                // standing queue, and so, most likely, did they: they were
                // dropped there.
                if self.congested_spans.len() == MAX_CONGESTED_SPANS {
                    self.congested_spans.pop_front();
                }
                self.congested_spans.push_back(CongestedSpan {
                    after,
                    before: arrival.seq,
                    missing: arrival.dropped_at_queue,
                });
            }
        }
        if self.highest[i].is_none_or(|h| h.is_before(arrival.seq)) {
            self.highest[i] = Some(arrival.seq);
        }
        if self.highest_seen.is_none_or(|h| !arrival.seq.is_before(h)) {
            self.highest_seen = Some(arrival.seq);
            for p in arrival.paths_in_use.iter() {
                if !self.in_use.contains(p) {
                    self.joined[p.index()] = Some(now);
                }
            }
            self.in_use = arrival.paths_in_use;
        }
    }

    /// Note that the packet being taken in arrived at `now`: the next one's
    /// predecessor.
    pub fn arrived(&mut self, now: Instant) {
        self.last_arrival = Some(now);
    }

    /// Return when the last packet arrived.
    pub fn last_arrival(&self) -> Option<Instant> {
        self.last_arrival
    }

    /// Return whether every path the sender stripes over has delivered past
    /// `gap`: a path it stripes over but that never delivered is waited for
    /// until the hold time.
    pub fn all_past(&self, gap: Seq) -> bool {
        self.in_use
            .iter()
            .all(|p| self.highest[p.index()].is_some_and(|h| gap.is_before(h)))
    }

    /// Return the sequence number every path the sender stripes over has
    /// delivered up to, leaving out those silent for `quiet` at `now`, and
    /// whether none was left out.
    ///
    /// A silent path is left out: if it died, it took its packets in flight
    /// with it, and it will never deliver past them to say so. If it is
    /// only slow, its packet comes twice, and the first copy fills the gap.
    /// When a burst starts after a pause, every path has been silent, and
    /// none of them is dead for it: a path is silent only if others went on
    /// delivering after it stopped, for half of `quiet` at least. Nor is a
    /// path the sender has just taken up again: its silence counts from
    /// then.
    pub fn evident(&self, now: Instant, quiet: Duration) -> Option<(Seq, bool)> {
        let talked_until = self.last_arrival.unwrap_or(now);
        let silent = |heard: Instant| {
            now.saturating_duration_since(heard) >= quiet
                && talked_until.saturating_duration_since(heard) >= quiet / 2
        };
        let mut evident: Option<Seq> = None;
        let mut every_path = true;
        for p in self.in_use.iter() {
            let heard = self.heard[p.index()].max(self.joined[p.index()]);
            if heard.is_none_or(silent) {
                every_path = false;
                continue;
            }
            let Some(h) = self.highest[p.index()] else {
                continue;
            };
            evident = Some(match evident {
                Some(e) if e.is_before(h) => e,
                _ => h,
            });
        }
        evident.map(|e| (e, every_path))
    }

    /// Start charging gaps, from `from` on and in order, to the places
    /// where congested paths lost packets (see [`Charges::charge`]).
    pub fn congestion_charges(&mut self, from: Seq) -> Charges<'_> {
        let mut pending: Vec<usize> = (0..self.congested_spans.len())
            .filter(|&i| self.congested_spans[i].missing > 0)
            .collect();
        // The earliest start last, to be taken from the end.
        pending.sort_by_key(|&i| {
            Reverse((
                self.congested_spans[i].after.distance_from(from),
                Reverse(i),
            ))
        });
        Charges {
            spans: &mut self.congested_spans,
            from,
            pending,
            active: BinaryHeap::new(),
        }
    }

    /// Forget the spans delivery has passed.
    pub fn passed(&mut self, next: Seq) {
        while self
            .congested_spans
            .front()
            .is_some_and(|span| span.before.is_before(next))
        {
            self.congested_spans.pop_front();
        }
    }
}

/// Charges gaps, taken in order, to the spans where congested paths lost
/// packets: one pass costs O((gaps + spans) log spans), where asking each
/// gap of every span cost their product (a hostile peer could make that
/// 8192 gaps times 256 spans for every packet).
pub(crate) struct Charges<'a> {
    spans: &'a mut VecDeque<CongestedSpan>,
    /// Where the pass starts: positions are counted from it.
    from: Seq,
    /// Spans with losses left that no gap has passed the start of yet,
    /// the earliest start last.
    pending: Vec<usize>,
    /// Spans whose start the gaps have passed, by end, then age.
    active: BinaryHeap<Reverse<(i64, usize)>>,
}

impl Charges<'_> {
    /// Whether `gap` lies where a congested path lost packets, and is one
    /// of as many gaps there as it lost: a loss on another path may fall in
    /// the same stretch, and is repaired unless it comes first.
    ///
    /// Each gap takes the span that ends first among those around it:
    /// congested paths' spans overlap, and a gap charged to a wider span
    /// would leave a later loss there, past the narrower one's end, with
    /// nothing to excuse it.
    pub fn charge(&mut self, gap: Seq) -> bool {
        let at = gap.distance_from(self.from);
        while let Some(&i) = self.pending.last() {
            if self.spans[i].after.distance_from(self.from) >= at {
                break;
            }
            self.pending.pop();
            self.active
                .push(Reverse((self.spans[i].before.distance_from(self.from), i)));
        }
        while let Some(&Reverse((end, i))) = self.active.peek() {
            if end > at && self.spans[i].missing > 0 {
                self.spans[i].missing -= 1;
                return true;
            }
            self.active.pop();
        }
        false
    }
}
