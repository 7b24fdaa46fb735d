//! The data packets sent lately, kept to resend what the peer asks for.
//!
//! A path that loses 1% of its packets costs an inner TCP flow far more than
//! 1% of its rate: CUBIC halves its window at every loss, and a flow striped
//! over three paths sees every path's losses. The receiver learns of a loss
//! within about one packet time (every path has delivered past the gap, see
//! [`crate::reorder`]) and asks for it in a [NACK](crate::wire::nack); one
//! round trip of the fastest path later the packet can be there, resent from
//! this log on a path that is not losing it, and the inner flow sees a short
//! delay instead of a loss.

use crate::path::PathId;
use crate::seq::Seq;

struct Slot {
    seq: Seq,
    /// The path it was sent on.
    path: PathId,
    /// When, µs on our clock (the trailer's "sent at").
    sent_us: u32,
    packet: Vec<u8>,
    /// Resent already: a NACK goes out on two paths, and one resend is
    /// enough.
    resent: bool,
    /// The path and time (µs, as `sent_us`) of its latest copy: where it
    /// was sent, or resent.
    latest: (PathId, u32),
}

/// The data packets sent lately, by global sequence number, in a ring.
///
/// It spans as many packets as the receiver's reorder window: a NACK for
/// anything older comes too late to help.
pub struct SentLog {
    slots: Vec<Slot>,
}

impl SentLog {
    /// A log of the last `capacity` packets (at least one).
    pub fn new(capacity: usize) -> Self {
        SentLog {
            slots: (0..capacity.max(1))
                .map(|_| Slot {
                    seq: Seq(0),
                    path: PathId(0),
                    sent_us: 0,
                    packet: Vec::new(),
                    resent: true, // empty: nothing to resend
                    latest: (PathId(0), 0),
                })
                .collect(),
        }
    }

    fn index(&self, seq: Seq) -> usize {
        seq.0 as usize % self.slots.len()
    }

    fn slot(&mut self, seq: Seq) -> &mut Slot {
        let i = self.index(seq);
        &mut self.slots[i]
    }

    /// Remember the inner packet sent as `seq` on `path` at `sent_us`, in
    /// place of the oldest.
    pub fn record(&mut self, seq: Seq, path: PathId, sent_us: u32, packet: &[u8]) {
        let slot = self.slot(seq);
        slot.seq = seq;
        slot.path = path;
        slot.sent_us = sent_us;
        slot.packet.clear();
        slot.packet.extend_from_slice(packet);
        slot.resent = false;
        slot.latest = (path, sent_us);
    }

    /// Return the packet sent as `seq` to resend it, with the path that
    /// lost it and when it was sent, unless it has left the log or was
    /// resent already.
    pub fn take_for_resend(&mut self, seq: Seq) -> Option<(PathId, u32, &[u8])> {
        let slot = self.slot(seq);
        if slot.seq != seq || slot.resent {
            return None;
        }
        slot.resent = true;
        Some((slot.path, slot.sent_us, &slot.packet))
    }

    /// Return whether `seq` is in the log (resent or not): not if it has
    /// left it, or was never sent.
    pub fn holds(&self, seq: Seq) -> bool {
        let slot = &self.slots[self.index(seq)];
        slot.seq == seq && !slot.packet.is_empty()
    }

    /// Note that the copy of `seq` taken for resend went on `path` at
    /// `at_us`.
    pub fn resent_on(&mut self, seq: Seq, path: PathId, at_us: u32) {
        let slot = self.slot(seq);
        if slot.seq == seq {
            slot.latest = (path, at_us);
        }
    }

    /// Return, oldest first, the packets whose latest copy went on `path`
    /// at or after `since_us` (within the last half hour of the clock) and
    /// that the peer cannot see it misses or asked for already, and let
    /// each be resent once more: that path died and took them with it. The
    /// peer sees a gap once a packet numbered after it arrives, and asks
    /// for it; what went after the newest packet sent on another path, and
    /// the repairs the path took, it waits for in vain. What it asked for
    /// while the path was not known dead either went there again or was
    /// not sent at all (too late then): its latest copy is still there, and
    /// it is not asked for twice.
    pub fn lost_with(&mut self, path: PathId, since_us: u32) -> Vec<Seq> {
        let newest_elsewhere = self
            .slots
            .iter()
            .filter(|slot| slot.path != path && !slot.packet.is_empty())
            .map(|slot| slot.seq)
            .reduce(|a, b| if a.is_before(b) { b } else { a });
        let mut lost: Vec<Seq> = Vec::new();
        for slot in &mut self.slots {
            let (on, at_us) = slot.latest;
            // Wrapping µs: a later time is less than 2^31 µs ahead.
            let after = at_us.wrapping_sub(since_us) < 1 << 31;
            let unseen =
                slot.path != path || newest_elsewhere.is_none_or(|n| n.is_before(slot.seq));
            if on == path && after && (unseen || slot.resent) && !slot.packet.is_empty() {
                slot.resent = false;
                lost.push(slot.seq);
            }
        }
        // All within the log's span of each other: any one orders them.
        if let Some(&base) = lost.first() {
            lost.sort_by_key(|s| s.distance_from(base));
        }
        lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_resends_each_recent_packet_once() {
        let mut log = SentLog::new(4);
        for n in 0..6u32 {
            log.record(Seq(n), PathId(n as u8 % 2), n * 10, &[n as u8; 3]);
        }
        // 0 and 1 were overwritten by 4 and 5.
        assert_eq!(log.take_for_resend(Seq(1)), None);
        let five = Some((PathId(1), 50, &[5u8; 3][..]));
        assert_eq!(log.take_for_resend(Seq(5)), five);
        assert_eq!(log.take_for_resend(Seq(5)), None, "resent twice");
        let two = Some((PathId(0), 20, &[2u8; 3][..]));
        assert_eq!(log.take_for_resend(Seq(2)), two);
        assert_eq!(log.take_for_resend(Seq(6)), None, "never sent");
        assert_eq!(SentLog::new(0).take_for_resend(Seq(0)), None);
    }

    #[test]
    fn a_dead_path_s_packets_the_peer_cannot_miss_are_resent_once_more() {
        let mut log = SentLog::new(16);
        // 0..5 alternate between paths 0 and 1, then 5..8 go on path 0,
        // 10 µs apart.
        for n in 0..8u32 {
            let path = if n < 5 { n as u8 % 2 } else { 0 };
            log.record(Seq(n), PathId(path), n * 10, &[n as u8; 3]);
        }
        // 1, lost on path 1, was resent on path 0 at 80 µs.
        assert!(log.take_for_resend(Seq(1)).is_some());
        log.resent_on(Seq(1), PathId(0), 80);
        // Path 0 died. Since 20 µs it took 2, whose gap the peer sees once
        // 3 arrives; 4 to 7, after 3, the newest packet that went
        // elsewhere; and the repair of 1. 0 went before.
        assert_eq!(
            log.lost_with(PathId(0), 20),
            vec![Seq(1), Seq(4), Seq(5), Seq(6), Seq(7)]
        );
        assert!(log.take_for_resend(Seq(1)).is_some(), "resent once more");
        assert_eq!(log.take_for_resend(Seq(1)), None);
        // 2 was asked for meanwhile, and its repair went nowhere (too late
        // then) or on path 0 again: once path 0 is down it goes once more.
        let mut log = SentLog::new(16);
        for n in 0..8u32 {
            let path = if n < 5 { n as u8 % 2 } else { 0 };
            log.record(Seq(n), PathId(path), n * 10, &[n as u8; 3]);
        }
        assert!(log.take_for_resend(Seq(2)).is_some());
        assert_eq!(
            log.lost_with(PathId(0), 20),
            vec![Seq(2), Seq(4), Seq(5), Seq(6), Seq(7)]
        );
        // The clock wraps: µs just before the wrap are before those after.
        let mut log = SentLog::new(4);
        log.record(Seq(7), PathId(2), u32::MAX - 5, &[7]);
        log.record(Seq(8), PathId(2), 4, &[8]);
        assert_eq!(log.lost_with(PathId(2), u32::MAX - 1), vec![Seq(8)]);
        assert_eq!(log.lost_with(PathId(2), u32::MAX - 9), vec![Seq(7), Seq(8)]);
    }
}
