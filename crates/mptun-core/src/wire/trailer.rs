//! The mptun trailer: what mptun adds to every packet it sends over a path.
//!
//! The trailer is appended to the inner IP packet *before* WireGuard
//! encryption, so it is authenticated and never travels in cleartext: a
//! forged sequence number could otherwise stall or flush the reorder buffer.
//! It sits at the end rather than the front because boringtun only accepts
//! plaintext that starts like an IP packet and hands back the bytes after the
//! IP total length untouched; the receiver finds the trailer by counting back
//! from the end of the plaintext.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                   global sequence number                      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                    path sequence number                       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                        sender epoch                           |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                  sent at (µs, sender's clock)                 |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |          global sequence number sent before on this path      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |        paths in use           | flags |H|P|C|version| kind  |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! All fields are big-endian. The epoch is chosen at random when a sender
//! starts, so a receiver can tell a restarted peer (whose sequence numbers
//! start again at zero) from a stale packet. "Paths in use" is the set of
//! paths the sender is striping over (bit i for path i): a gap in the global
//! order is lost once every one of them has delivered past it, since each
//! path delivers in the order it was sent. In a probe, it is the set of
//! paths whose delays the receiver holds TCP segments to (see
//! [`crate::equalize`]); an older sender puts every path it uses there.
//!
//! "Sent at" is the low 32 bits of the sender's clock (the one its probes
//! carry) when a data packet was first sent; a repair carries the
//! original's. With the probes' one-way delays it tells the receiver how
//! long the packet was under way (see [`crate::equalize`]). 0 in probes and
//! NACKs.
//!
//! With flag P, the next word is the global sequence number of the data
//! packet sent on the same path just before this one: if it has not
//! arrived, it was lost on the way, and the receiver knows it at once
//! rather than when the farthest path has delivered past it too.
//!
//! Flag C (congested) says the path's queue was near overflowing when the
//! packet was sent, and so was every other path's the sender could use
//! (deep, and near the depth where it overflowed before): a packet
//! missing just before it on the same path was most likely dropped at that
//! queue, and the tunnel has no room left, so the receiver leaves such a
//! loss to the inner flow instead of asking for it again (see
//! [`crate::reorder`]).
//!
//! Flag H (held) marks a TCP segment the sender spread as one the receiver
//! holds, once in order, until it has been under way as long as a packet
//! on the farthest path (see [`crate::equalize`]). The sender decides, so
//! the two sites never disagree on which segments were spread that way.

use super::{read_u16, read_u32, WireError};
use crate::path::PathSet;
use crate::seq::Seq;

/// Bytes the trailer adds to every packet.
pub const TRAILER_LEN: usize = 24;

/// Version of the trailer layout, in the high nibble of the last byte.
/// Version 2 added flag C, version 3 the send time and the previous packet
/// on the path, version 4 probe trains and their report in probes: an
/// older peer would misread every packet or refuse every probe, so the two
/// refuse each other outright instead. Version 5 added flag H: an older
/// receiver would hold every TCP segment, a newer one none of an older
/// sender's.
pub const VERSION: u8 = 5;

/// Byte offsets of the fields, within the trailer.
mod field {
    use core::ops::Range;
    pub const SEQ: Range<usize> = 0..4;
    pub const PATH_SEQ: Range<usize> = 4..8;
    pub const EPOCH: Range<usize> = 8..12;
    pub const SENT_US: Range<usize> = 12..16;
    pub const PREVIOUS: Range<usize> = 16..20;
    pub const PATHS_IN_USE: Range<usize> = 20..22;
    pub const FLAGS: usize = 22;
    pub const VERSION_KIND: usize = 23;
}

/// Flag bit: the path had a standing queue when the packet was sent.
const FLAG_CONGESTED: u8 = 0x01;
/// Flag bit: the previous packet on the path is given.
const FLAG_PREVIOUS: u8 = 0x02;
/// Flag bit: the receiver holds the packet until it is as old as one on
/// the farthest path.
const FLAG_HELD: u8 = 0x04;

/// What a packet carries, in the low nibble of the last byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// An inner IP packet for the TUN device.
    Data = 1,
    /// A probe (see [`super::probe`]), never delivered to the TUN device.
    Probe = 2,
    /// A request to resend lost data packets (see [`super::nack`]), never
    /// delivered to the TUN device.
    Nack = 3,
    /// A packet of a probe train (see [`super::train`]), never delivered to
    /// the TUN device.
    Train = 4,
    /// Half of the parity of a run of data packets on the path (see
    /// [`super::parity`]), never delivered to the TUN device. Added without
    /// a new version: a receiver that does not know it refuses it as it
    /// would any unknown kind, and only goes without what it repairs.
    Parity = 5,
}

/// The decoded trailer of one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trailer {
    /// Position in the sender's single, global order across all paths.
    pub seq: Seq,
    /// Position in the order of packets sent on this one path.
    pub path_seq: Seq,
    /// Random identity of the sender's run; changes when the peer restarts.
    pub epoch: u32,
    /// When a data packet was first sent, µs on the sender's clock,
    /// wrapping.
    pub sent_us: u32,
    /// The data packet sent on the same path just before this one, if any
    /// (flag P); on a probe, the last one sent on its path.
    pub previous_on_path: Option<Seq>,
    /// Paths the sender is striping over when it sent this packet.
    pub paths_in_use: PathSet,
    /// What the packet carries.
    pub kind: Kind,
    /// The path's queue, and every other's the sender could use, was near
    /// overflowing when this was sent (flag C): a loss just before it there
    /// may be the queue's.
    pub congested: bool,
    /// A TCP segment the receiver holds, once in order, until it is as old
    /// as a packet on the farthest path (flag H).
    pub held: bool,
}

impl Trailer {
    /// A trailer for a probe or NACK: they are not numbered.
    pub fn control(kind: Kind, epoch: u32, paths_in_use: PathSet) -> Trailer {
        Trailer {
            seq: Seq(0),
            path_seq: Seq(0),
            epoch,
            sent_us: 0,
            previous_on_path: None,
            paths_in_use,
            kind,
            congested: false,
            held: false,
        }
    }

    /// Write the trailer into the first [`TRAILER_LEN`] bytes of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than [`TRAILER_LEN`]; callers size their buffers.
    pub fn encode(&self, buf: &mut [u8]) {
        let out = &mut buf[..TRAILER_LEN];
        out[field::SEQ].copy_from_slice(&self.seq.0.to_be_bytes());
        out[field::PATH_SEQ].copy_from_slice(&self.path_seq.0.to_be_bytes());
        out[field::EPOCH].copy_from_slice(&self.epoch.to_be_bytes());
        out[field::SENT_US].copy_from_slice(&self.sent_us.to_be_bytes());
        let previous = self.previous_on_path.unwrap_or(Seq(0));
        out[field::PREVIOUS].copy_from_slice(&previous.0.to_be_bytes());
        out[field::PATHS_IN_USE].copy_from_slice(&self.paths_in_use.0.to_be_bytes());
        let flag = |set: bool, bit: u8| if set { bit } else { 0 };
        out[field::FLAGS] = flag(self.congested, FLAG_CONGESTED)
            | flag(self.previous_on_path.is_some(), FLAG_PREVIOUS)
            | flag(self.held, FLAG_HELD);
        out[field::VERSION_KIND] = (VERSION << 4) | self.kind as u8;
    }

    /// Append the trailer to `buf`.
    pub fn append_to(&self, buf: &mut Vec<u8>) {
        let at = buf.len();
        buf.resize(at + TRAILER_LEN, 0);
        self.encode(&mut buf[at..]);
    }

    /// Read the trailer at the end of `plaintext`; return it and the length of
    /// what precedes it.
    pub fn decode_suffix(plaintext: &[u8]) -> Result<(Trailer, usize), WireError> {
        let body_len = plaintext
            .len()
            .checked_sub(TRAILER_LEN)
            .ok_or(WireError::BadLength)?;
        let t = &plaintext[body_len..];
        if t[field::VERSION_KIND] >> 4 != VERSION {
            return Err(WireError::UnknownVersion);
        }
        let kind = match t[field::VERSION_KIND] & 0x0f {
            1 => Kind::Data,
            2 => Kind::Probe,
            3 => Kind::Nack,
            4 => Kind::Train,
            5 => Kind::Parity,
            _ => return Err(WireError::UnknownKind),
        };
        let flags = t[field::FLAGS];
        if flags & !(FLAG_CONGESTED | FLAG_PREVIOUS | FLAG_HELD) != 0 {
            return Err(WireError::UnknownFlags);
        }
        let trailer = Trailer {
            seq: Seq(read_u32(t, field::SEQ)),
            path_seq: Seq(read_u32(t, field::PATH_SEQ)),
            epoch: read_u32(t, field::EPOCH),
            sent_us: read_u32(t, field::SENT_US),
            previous_on_path: (flags & FLAG_PREVIOUS != 0)
                .then(|| Seq(read_u32(t, field::PREVIOUS))),
            paths_in_use: PathSet(read_u16(t, field::PATHS_IN_USE)),
            kind,
            congested: flags & FLAG_CONGESTED != 0,
            held: flags & FLAG_HELD != 0,
        };
        Ok((trailer, body_len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOLDEN: [u8; TRAILER_LEN] = [
        0x01, 0x02, 0x03, 0x04, // seq
        0xff, 0xff, 0xff, 0xfe, // path seq
        0xde, 0xad, 0xbe, 0xef, // epoch
        0x00, 0x01, 0x86, 0xa0, // sent at 100 000 µs
        0x01, 0x02, 0x03, 0x01, // previous on the path
        0x80, 0x05, // paths in use: 0, 2, 15
        0x02, // flags: P
        0x51, // version 5, kind data
    ];

    fn golden_trailer() -> Trailer {
        Trailer {
            seq: Seq(0x0102_0304),
            path_seq: Seq(0xffff_fffe),
            epoch: 0xdead_beef,
            sent_us: 100_000,
            previous_on_path: Some(Seq(0x0102_0301)),
            paths_in_use: PathSet(0x8005),
            kind: Kind::Data,
            congested: false,
            held: false,
        }
    }

    #[test]
    fn encodes_golden_bytes() {
        let mut buf = [0xaa; TRAILER_LEN];
        golden_trailer().encode(&mut buf);
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn decodes_trailer_after_payload() {
        let mut plaintext = vec![0x45, 0, 0, 20];
        plaintext.extend_from_slice(&GOLDEN);
        let (trailer, body_len) = Trailer::decode_suffix(&plaintext).unwrap();
        assert_eq!(trailer, golden_trailer());
        assert_eq!(body_len, 4);
    }

    #[test]
    fn carries_the_congested_flag() {
        let mut buf = [0; TRAILER_LEN];
        let congested = Trailer {
            congested: true,
            ..golden_trailer()
        };
        congested.encode(&mut buf);
        assert_eq!(buf[22], 0x03);
        assert_eq!(Trailer::decode_suffix(&buf), Ok((congested, 0)));
    }

    #[test]
    fn carries_the_held_flag() {
        let mut buf = [0; TRAILER_LEN];
        let held = Trailer {
            held: true,
            ..golden_trailer()
        };
        held.encode(&mut buf);
        assert_eq!(buf[22], 0x06);
        assert_eq!(Trailer::decode_suffix(&buf), Ok((held, 0)));
    }

    #[test]
    fn a_first_packet_on_its_path_has_no_previous() {
        let mut buf = [0; TRAILER_LEN];
        let first = Trailer {
            previous_on_path: None,
            ..golden_trailer()
        };
        first.encode(&mut buf);
        assert_eq!(buf[16..20], [0; 4]);
        assert_eq!(buf[22], 0x00);
        assert_eq!(Trailer::decode_suffix(&buf), Ok((first, 0)));
    }

    #[test]
    fn rejects_malformed_trailers() {
        assert_eq!(
            Trailer::decode_suffix(&GOLDEN[1..]),
            Err(WireError::BadLength)
        );
        let mut bad = GOLDEN;
        bad[23] = 0x41;
        assert_eq!(Trailer::decode_suffix(&bad), Err(WireError::UnknownVersion));
        bad[23] = 0x5f;
        assert_eq!(Trailer::decode_suffix(&bad), Err(WireError::UnknownKind));
        bad = GOLDEN;
        bad[22] = 8;
        assert_eq!(Trailer::decode_suffix(&bad), Err(WireError::UnknownFlags));
    }

    #[test]
    fn never_panics_on_any_short_or_random_input() {
        // A cheap exhaustive-ish sweep: every length up to two trailers, every
        // value of the kind byte.
        for len in 0..=2 * TRAILER_LEN {
            for last in 0..=255u8 {
                let mut buf = vec![0u8; len];
                if let Some(b) = buf.last_mut() {
                    *b = last;
                }
                let _ = Trailer::decode_suffix(&buf);
            }
        }
    }
}
