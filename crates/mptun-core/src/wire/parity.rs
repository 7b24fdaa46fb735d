//! Parity: one half of the XOR of a run of data packets sent on one path,
//! from which the receiver rebuilds one of them lost on the way without
//! waiting a round trip for its repair (see [`crate::parity`]).
//!
//! The XOR runs over each packet's whole plaintext, trailer included, the
//! shorter ones padded with zeros. It travels in two halves, each a message
//! of its own behind a [`shim`](super::shim) header with trailer kind
//! [`Kind::Parity`](super::Kind::Parity): a whole one would be longer than
//! the longest data packet by the shim, this header and the trailer, and
//! the longest data packet is what the path's MTU allows.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |   20-byte IPv4 header, protocol 253, total length 30 + bytes  |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |          path sequence number of the first packet             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |        packets covered        |   XOR of their lengths        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     half      |   reserved    |  XOR of the bytes, this half  |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//! |                             ...                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Half 0 carries the first `ceil(n / 2)` bytes of the `n`-byte XOR, half 1
//! the rest. The packets covered are consecutive on their path, from the
//! first one named.

use super::{read_u16, read_u32, shim, WireError};
use crate::seq::Seq;

/// Bytes before the XOR, shim included.
pub const PARITY_HEADER_LEN: usize = shim::SHIM_LEN + field::BYTES;
/// Most packets one parity covers.
pub const PARITY_MAX_COUNT: u16 = 64;

/// Byte offsets of the fields, within the body after the shim.
mod field {
    use core::ops::Range;
    pub const FIRST: Range<usize> = 0..4;
    pub const COUNT: Range<usize> = 4..6;
    pub const LEN_XOR: Range<usize> = 6..8;
    pub const HALF: usize = 8;
    pub const RESERVED: usize = 9;
    pub const BYTES: usize = 10;
}

/// One half of a parity, as read from a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parity<'a> {
    /// Path sequence number of the first packet covered.
    pub first: Seq,
    /// Packets covered, from `first` on.
    pub count: u16,
    /// XOR of the covered packets' lengths.
    pub len_xor: u16,
    /// 0 for the first half of the XOR, 1 for the second.
    pub half: u8,
    /// This half of the XOR.
    pub bytes: &'a [u8],
}

impl Parity<'_> {
    /// Write this half into `buf` (at least [`PARITY_HEADER_LEN`] plus its
    /// bytes long); return the length written.
    pub fn encode(&self, buf: &mut [u8]) -> usize {
        let total = PARITY_HEADER_LEN + self.bytes.len();
        shim::write(buf, total as u16);
        let body = &mut buf[shim::SHIM_LEN..total];
        body[field::FIRST].copy_from_slice(&self.first.0.to_be_bytes());
        body[field::COUNT].copy_from_slice(&self.count.to_be_bytes());
        body[field::LEN_XOR].copy_from_slice(&self.len_xor.to_be_bytes());
        body[field::HALF] = self.half;
        body[field::RESERVED] = 0;
        body[field::BYTES..].copy_from_slice(self.bytes);
        total
    }

    /// Read one half (shim included).
    pub fn decode(packet: &[u8]) -> Result<Parity<'_>, WireError> {
        let body = shim::body(packet)?;
        if body.len() <= field::BYTES {
            return Err(WireError::BadLength);
        }
        let count = read_u16(body, field::COUNT);
        let half = body[field::HALF];
        if count == 0 || count > PARITY_MAX_COUNT || half > 1 || body[field::RESERVED] != 0 {
            return Err(WireError::BadLength);
        }
        Ok(Parity {
            first: Seq(read_u32(body, field::FIRST)),
            count,
            len_xor: read_u16(body, field::LEN_XOR),
            half,
            bytes: &body[field::BYTES..],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parity_half_round_trips() {
        let half = Parity {
            first: Seq(0xffff_fffe),
            count: 3,
            len_xor: 0x0102,
            half: 1,
            bytes: &[9, 8, 7],
        };
        let mut buf = [0xaa; 64];
        let len = half.encode(&mut buf);
        assert_eq!(len, 20 + 10 + 3);
        let golden: [u8; 33] = [
            0x45, 0, 0, 33, 0, 0, 0, 0, 1, 253, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // shim
            0xff, 0xff, 0xff, 0xfe, // first
            0, 3, 0x01, 0x02, // count, length XOR
            1, 0, // half, reserved
            9, 8, 7, // bytes
        ];
        assert_eq!(buf[..len], golden);
        assert_eq!(Parity::decode(&buf[..len]), Ok(half));
    }

    #[test]
    fn malformed_parity_is_refused() {
        let half = Parity {
            first: Seq(1),
            count: 2,
            len_xor: 0,
            half: 0,
            bytes: &[1],
        };
        let mut buf = [0u8; 64];
        let len = half.encode(&mut buf);
        let refused = |edit: &dyn Fn(&mut [u8]), len: usize| {
            let mut b = buf;
            edit(&mut b);
            Parity::decode(&b[..len]).err()
        };
        assert_eq!(refused(&|_| {}, len - 1), Some(WireError::BadLength));
        assert_eq!(refused(&|b| b[25] = 0, len), Some(WireError::BadLength));
        assert_eq!(refused(&|b| b[24] = 1, len), Some(WireError::BadLength));
        assert_eq!(refused(&|b| b[28] = 2, len), Some(WireError::BadLength));
        assert_eq!(refused(&|b| b[29] = 1, len), Some(WireError::BadLength));
        assert_eq!(refused(&|b| b[9] = 6, len), Some(WireError::BadShim));
        assert_eq!(refused(&|_| {}, 12), Some(WireError::BadLength));
    }
}
