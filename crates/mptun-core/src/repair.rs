//! Loss repair: the receiver asks for data packets it knows are lost, and
//! the sender resends them from a log of what it sent lately.
//!
//! A path that loses 1% of its packets costs an inner TCP flow far more than
//! 1% of its rate: CUBIC halves its window at every loss, and a flow striped
//! over three paths sees every path's losses. The receiver learns of a loss
//! within about one packet time (every path has delivered past the gap, see
//! [`crate::reorder`]), so one round trip of the fastest path later the
//! packet can be there, resent on a path that is not losing it, and the
//! inner flow sees a short delay instead of a loss.
//!
//! A NACK travels like a probe: through a path's WireGuard session, in a
//! minimal IPv4 shim (protocol 253), with trailer kind [`Kind::Nack`]:
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  20-byte IPv4 header, protocol 253, total length 24 + 4 x n   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |           epoch of the data sender asked (not our own)        |
//! |           lost global sequence number 1                       |
//! |           ...                                                 |
//! |           lost global sequence number n (n <= NACK_MAX)       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! The epoch keeps a NACK meant for a sender's previous run from fetching
//! whatever its new run numbered the same.
//!
//! [`Kind::Nack`]: crate::wire::Kind::Nack

use crate::control::{ControlError, SHIM_LEN, SHIM_PROTOCOL};
use crate::path::PathId;
use crate::seq::Seq;

/// Most sequence numbers in one NACK.
pub const NACK_MAX: usize = 64;

/// Longest NACK, shim included.
pub const NACK_MAX_LEN: usize = SHIM_LEN + 4 + 4 * NACK_MAX;

/// Write a NACK for `seqs` (at most [`NACK_MAX`]) of the sender run `epoch`
/// into `buf` (at least [`NACK_MAX_LEN`] bytes); return the length written.
pub fn encode_nack(epoch: u32, seqs: &[Seq], buf: &mut [u8]) -> usize {
    let seqs = &seqs[..seqs.len().min(NACK_MAX)];
    let total = SHIM_LEN + 4 + 4 * seqs.len();
    let out = &mut buf[..total];
    out[..SHIM_LEN].fill(0);
    out[0] = 0x45; // IPv4, 5-word header
    out[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    out[8] = 1; // TTL: never routed anywhere
    out[9] = SHIM_PROTOCOL;
    out[SHIM_LEN..SHIM_LEN + 4].copy_from_slice(&epoch.to_be_bytes());
    for (chunk, seq) in out[SHIM_LEN + 4..].chunks_exact_mut(4).zip(seqs) {
        chunk.copy_from_slice(&seq.0.to_be_bytes());
    }
    total
}

/// Read a NACK (shim included): the epoch it is for, and the lost sequence
/// numbers.
pub fn decode_nack(packet: &[u8]) -> Result<(u32, impl Iterator<Item = Seq> + '_), ControlError> {
    if packet.len() < SHIM_LEN + 4 || packet.len() > NACK_MAX_LEN || !packet.len().is_multiple_of(4)
    {
        return Err(ControlError::BadLength);
    }
    if packet[0] != 0x45 || packet[9] != SHIM_PROTOCOL {
        return Err(ControlError::BadShim);
    }
    let word = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let epoch = word(&packet[SHIM_LEN..]);
    let seqs = packet[SHIM_LEN + 4..]
        .chunks_exact(4)
        .map(move |c| Seq(word(c)));
    Ok((epoch, seqs))
}

struct Slot {
    seq: Seq,
    /// The path it was sent on.
    path: PathId,
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

    /// Remember the inner packet sent as `seq` on `path`, in place of the
    /// oldest.
    pub fn record(&mut self, seq: Seq, path: PathId, packet: &[u8]) {
        let slot = self.slot(seq);
        slot.seq = seq;
        slot.path = path;
        slot.packet.clear();
        slot.packet.extend_from_slice(packet);
        slot.resent = false;
    }

    /// Return the packet sent as `seq` to resend it, with the path that
    /// lost it, unless it has left the log or was resent already.
    pub fn take_for_resend(&mut self, seq: Seq) -> Option<(PathId, &[u8])> {
        let slot = self.slot(seq);
        if slot.seq != seq || slot.resent {
            return None;
        }
        slot.resent = true;
        Some((slot.path, &slot.packet))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nack_round_trips_and_keeps_its_epoch() {
        let mut buf = [0xaa; NACK_MAX_LEN];
        let seqs = [Seq(7), Seq(0xffff_fffe), Seq(9)];
        let len = encode_nack(0xdead_beef, &seqs, &mut buf);
        assert_eq!(len, 20 + 4 + 12);
        assert_eq!(&buf[20..28], &[0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 7]);
        let (epoch, got) = decode_nack(&buf[..len]).unwrap();
        assert_eq!(epoch, 0xdead_beef);
        assert_eq!(got.collect::<Vec<_>>(), seqs);
    }

    #[test]
    fn a_nack_is_cut_to_its_maximum_and_malformed_ones_are_refused() {
        let mut buf = [0u8; NACK_MAX_LEN + 16];
        let many: Vec<Seq> = (0..100).map(Seq).collect();
        let len = encode_nack(1, &many, &mut buf);
        assert_eq!(len, NACK_MAX_LEN);
        assert_eq!(decode_nack(&buf[..len]).unwrap().1.count(), NACK_MAX);
        assert_eq!(
            decode_nack(&buf[..len - 1]).err(),
            Some(ControlError::BadLength)
        );
        assert_eq!(
            decode_nack(&buf[..NACK_MAX_LEN + 4]).err(),
            Some(ControlError::BadLength)
        );
        assert_eq!(decode_nack(&buf[..20]).err(), Some(ControlError::BadLength));
        buf[9] = 6;
        assert_eq!(decode_nack(&buf[..len]).err(), Some(ControlError::BadShim));
    }

    #[test]
    fn the_log_resends_each_recent_packet_once() {
        let mut log = SentLog::new(4);
        for n in 0..6u32 {
            log.record(Seq(n), PathId(n as u8 % 2), &[n as u8; 3]);
        }
        // 0 and 1 were overwritten by 4 and 5.
        assert_eq!(log.take_for_resend(Seq(1)), None);
        let five = Some((PathId(1), &[5u8; 3][..]));
        assert_eq!(log.take_for_resend(Seq(5)), five);
        assert_eq!(log.take_for_resend(Seq(5)), None, "resent twice");
        let two = Some((PathId(0), &[2u8; 3][..]));
        assert_eq!(log.take_for_resend(Seq(2)), two);
        assert_eq!(log.take_for_resend(Seq(6)), None, "never sent");
        assert_eq!(SentLog::new(0).take_for_resend(Seq(0)), None);
    }
}
