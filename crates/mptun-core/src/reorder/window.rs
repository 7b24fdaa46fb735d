//! The window of sequence numbers the reorder buffer spans, and the packets
//! held in it.

use std::collections::VecDeque;
use std::time::Instant;

use crate::seq::Seq;

/// A packet waiting for an earlier one, or the mark of one handed out
/// before those (`packet` is `None`, see [`Window::mark_passed`]).
pub(crate) struct Held<P> {
    pub packet: Option<P>,
    pub arrived: Instant,
}

/// A held packet's place in the arrival order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Arrived {
    pub at: Instant,
    pub seq: Seq,
    /// When it would be released anyway, if it is a TCP segment held to
    /// its flow's one round trip (see [`crate::equalize`]).
    pub due: Option<Instant>,
}

/// Slots for the sequence numbers from `next` on, each empty (a gap) or
/// holding a packet, and the held packets' arrival order.
pub(crate) struct Window<P> {
    /// Next sequence number to deliver.
    next: Seq,
    /// `slots[i]` is sequence number `next + i`. The front is always empty
    /// (otherwise it would have been released) or absent.
    slots: VecDeque<Option<Held<P>>>,
    /// Every held packet in arrival order, oldest first; the front is the
    /// packet whose gap has waited longest. Entries whose sequence was
    /// passed are removed lazily from the front.
    arrivals: VecDeque<Arrived>,
}

impl<P> Window<P> {
    pub fn new() -> Self {
        Window {
            next: Seq(0),
            slots: VecDeque::new(),
            arrivals: VecDeque::new(),
        }
    }

    /// Return the next sequence number to deliver.
    pub fn next(&self) -> Seq {
        self.next
    }

    /// Return the first sequence number past the slots.
    pub fn end(&self) -> Seq {
        self.next.plus(self.slots.len() as u32)
    }

    /// Forget everything and deliver from `seq` on.
    pub fn restart(&mut self, seq: Seq) {
        self.next = seq;
        self.slots.clear();
        self.arrivals.clear();
    }

    /// Return how many packets are held.
    pub fn held(&self) -> usize {
        self.arrivals.len()
    }

    /// Return the packet that has waited longest.
    pub fn oldest(&self) -> Option<Arrived> {
        self.arrivals.front().copied()
    }

    /// Return whether `seq` is held.
    pub fn holds(&self, seq: Seq) -> bool {
        let offset = seq.distance_from(self.next);
        usize::try_from(offset)
            .ok()
            .and_then(|i| self.slots.get(i))
            .is_some_and(Option::is_some)
    }

    /// Return whether the next sequence number is a gap with packets held
    /// behind it.
    pub fn front_is_gap(&self) -> bool {
        matches!(self.slots.front(), Some(None))
    }

    /// Hold `packet` as `seq` (within the window's capacity, after `next`),
    /// arrived at `now` and due then if `due`; hand it back if it is held
    /// already.
    pub fn hold(
        &mut self,
        seq: Seq,
        packet: P,
        now: Instant,
        due: Option<Instant>,
    ) -> Result<(), P> {
        let offset = usize::try_from(seq.distance_from(self.next)).unwrap_or(0);
        if self.slots.len() <= offset {
            self.slots.resize_with(offset + 1, || None);
        }
        if self.slots[offset].is_some() {
            return Err(packet);
        }
        self.slots[offset] = Some(Held {
            packet: Some(packet),
            arrived: now,
        });
        self.arrivals.push_back(Arrived { at: now, seq, due });
        Ok(())
    }

    /// Mark `seq` (within the window's capacity, after `next`) as handed
    /// out already, arrived at `now`: no gap, and nothing that waits.
    /// Return whether it was neither held nor marked.
    pub fn mark_passed(&mut self, seq: Seq, now: Instant) -> bool {
        let offset = usize::try_from(seq.distance_from(self.next)).unwrap_or(0);
        if self.slots.len() <= offset {
            self.slots.resize_with(offset + 1, || None);
        }
        if self.slots[offset].is_some() {
            return false;
        }
        self.slots[offset] = Some(Held {
            packet: None,
            arrived: now,
        });
        true
    }

    /// Step past `next`: return what was held there (`None` for a gap).
    pub fn advance(&mut self) -> Option<Held<P>> {
        let front = self.slots.pop_front().flatten();
        self.next = self.next.next();
        front
    }

    /// Step past every sequence number before `target`, handing each slot's
    /// sequence number and what it held (`None` for a gap) to `step`;
    /// return how many gaps lay beyond the slots. Costs the slots held, not
    /// the distance: `target` may be any distance ahead.
    pub fn skip_to(&mut self, target: Seq, mut step: impl FnMut(Seq, Option<Held<P>>)) -> u64 {
        while self.next.is_before(target) && !self.slots.is_empty() {
            let seq = self.next;
            let held = self.advance();
            step(seq, held);
        }
        let beyond = u64::try_from(target.distance_from(self.next)).unwrap_or(0);
        if beyond > 0 {
            self.next = target;
        }
        beyond
    }

    /// Step past every held packet (or mark) at the front, handing each to
    /// `release`.
    pub fn advance_contiguous(&mut self, mut release: impl FnMut(Held<P>)) {
        while let Some(Some(_)) = self.slots.front() {
            if let Some(held) = self.advance() {
                release(held);
            }
        }
        while self
            .arrivals
            .front()
            .is_some_and(|a| a.seq.is_before(self.next))
        {
            self.arrivals.pop_front();
        }
    }
}
