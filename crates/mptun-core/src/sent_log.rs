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
                })
                .collect(),
        }
    }

    fn slot(&mut self, seq: Seq) -> &mut Slot {
        let i = seq.0 as usize % self.slots.len();
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
}
