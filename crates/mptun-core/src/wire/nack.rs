//! NACKs: the receiver asks the sender to resend data packets it knows are
//! lost (see [`crate::reorder`] for how it knows, and [`crate::endpoint`]
//! for the resend).
//!
//! A NACK travels like a probe: through a path's WireGuard session, behind a
//! [`shim`](super::shim) header, with trailer kind
//! [`Kind::Nack`](super::Kind::Nack):
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

use super::{read_u32, shim, WireError};
use crate::seq::Seq;

/// Most sequence numbers in one NACK.
pub const NACK_MAX: usize = 64;

/// Longest NACK, shim included.
pub const NACK_MAX_LEN: usize = shim::SHIM_LEN + field::SEQS + 4 * NACK_MAX;

/// Byte offsets of the fields, within the body after the shim.
mod field {
    use core::ops::Range;
    pub const EPOCH: Range<usize> = 0..4;
    /// Where the sequence numbers start, four bytes each.
    pub const SEQS: usize = 4;
}

/// A NACK as read from a packet: the sender run it is for, and the lost
/// sequence numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nack<'a> {
    /// The epoch of the data sender the NACK asks.
    pub epoch: u32,
    seqs: &'a [u8],
}

impl<'a> Nack<'a> {
    /// Write a NACK for `seqs` (at most [`NACK_MAX`]; more are left out) of
    /// the sender run `epoch` into `buf` (at least [`NACK_MAX_LEN`] bytes);
    /// return the length written.
    pub fn encode(epoch: u32, seqs: &[Seq], buf: &mut [u8]) -> usize {
        let seqs = &seqs[..seqs.len().min(NACK_MAX)];
        let total = shim::SHIM_LEN + field::SEQS + 4 * seqs.len();
        shim::write(buf, total as u16);
        let body = &mut buf[shim::SHIM_LEN..total];
        body[field::EPOCH].copy_from_slice(&epoch.to_be_bytes());
        for (chunk, seq) in body[field::SEQS..].chunks_exact_mut(4).zip(seqs) {
            chunk.copy_from_slice(&seq.0.to_be_bytes());
        }
        total
    }

    /// Read a NACK (shim included).
    pub fn decode(packet: &'a [u8]) -> Result<Nack<'a>, WireError> {
        let body = shim::body(packet)?;
        if body.len() < field::SEQS
            || packet.len() > NACK_MAX_LEN
            || !(body.len() - field::SEQS).is_multiple_of(4)
        {
            return Err(WireError::BadLength);
        }
        Ok(Nack {
            epoch: read_u32(body, field::EPOCH),
            seqs: &body[field::SEQS..],
        })
    }

    /// Return the lost sequence numbers asked for.
    pub fn seqs(&self) -> impl Iterator<Item = Seq> + 'a {
        self.seqs.chunks_exact(4).map(|c| Seq(read_u32(c, 0..4)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nack_round_trips_and_keeps_its_epoch() {
        let mut buf = [0xaa; NACK_MAX_LEN];
        let seqs = [Seq(7), Seq(0xffff_fffe), Seq(9)];
        let len = Nack::encode(0xdead_beef, &seqs, &mut buf);
        assert_eq!(len, 20 + 4 + 12);
        let golden: [u8; 36] = [
            0x45, 0, 0, 36, 0, 0, 0, 0, 1, 253, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // shim
            0xde, 0xad, 0xbe, 0xef, // epoch
            0, 0, 0, 7, 0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 9, // lost
        ];
        assert_eq!(buf[..len], golden);
        let nack = Nack::decode(&buf[..len]).unwrap();
        assert_eq!(nack.epoch, 0xdead_beef);
        assert_eq!(nack.seqs().collect::<Vec<_>>(), seqs);
    }

    #[test]
    fn a_nack_is_cut_to_its_maximum_and_malformed_ones_are_refused() {
        let mut buf = [0u8; NACK_MAX_LEN + 16];
        let many: Vec<Seq> = (0..100).map(Seq).collect();
        let len = Nack::encode(1, &many, &mut buf);
        assert_eq!(len, NACK_MAX_LEN);
        assert_eq!(Nack::decode(&buf[..len]).unwrap().seqs().count(), NACK_MAX);
        let refused = |packet: &[u8]| Nack::decode(packet).err();
        assert_eq!(refused(&buf[..len - 1]), Some(WireError::BadLength));
        assert_eq!(
            refused(&buf[..NACK_MAX_LEN + 4]),
            Some(WireError::BadLength)
        );
        assert_eq!(refused(&buf[..20]), Some(WireError::BadLength));
        assert_eq!(refused(&buf[..10]), Some(WireError::BadLength));
        buf[9] = 6;
        assert_eq!(refused(&buf[..len]), Some(WireError::BadShim));
    }
}
