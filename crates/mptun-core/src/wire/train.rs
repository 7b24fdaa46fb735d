//! Probe trains: padded packets a side sends back to back on a path, whose
//! spacing on arrival gives the path's bottleneck rate before data needs
//! the path (the peer reports it in its [`probes`](super::probe)).
//!
//! A train packet travels like a probe, behind a [`shim`](super::shim)
//! header whose total length covers the padding; the trailer (kind
//! [`Kind::Train`](super::Kind::Train)) follows as for data:
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  20-byte IPv4 header, protocol 253, total length of the packet |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                     train number                              |
//! |     index in the train        |    packets in the train       |
//! |                  zeros, up to the total length                |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use super::{ip, read_u16, read_u32, shim, WireError};

/// Length of a train packet's header after the shim.
pub const TRAIN_HEADER_LEN: usize = 8;

/// Byte offsets of the fields, within the body after the shim.
mod field {
    use core::ops::Range;
    pub const NUMBER: Range<usize> = 0..4;
    pub const INDEX: Range<usize> = 4..6;
    pub const COUNT: Range<usize> = 6..8;
}

/// One packet of a probe train.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Train {
    /// Number of the train on this path, from 1.
    pub number: u32,
    /// Position of this packet in the train, from 0.
    pub index: u16,
    /// Packets in the train.
    pub count: u16,
}

impl Train {
    /// Shortest train packet, shim included.
    pub const MIN_LEN: usize = shim::SHIM_LEN + TRAIN_HEADER_LEN;

    /// Write a train packet of `len` bytes (at least [`Train::MIN_LEN`], at
    /// most `buf`'s length and 65535), shim header and padding included,
    /// into `buf`; return the length written.
    pub fn encode(&self, buf: &mut [u8], len: usize) -> usize {
        let len = len.clamp(Self::MIN_LEN, buf.len().min(usize::from(u16::MAX)));
        shim::write(buf, len as u16);
        let b = &mut buf[shim::SHIM_LEN..len];
        b[field::NUMBER].copy_from_slice(&self.number.to_be_bytes());
        b[field::INDEX].copy_from_slice(&self.index.to_be_bytes());
        b[field::COUNT].copy_from_slice(&self.count.to_be_bytes());
        b[TRAIN_HEADER_LEN..].fill(0);
        len
    }

    /// Read a train packet from the inner packet of a train message (shim
    /// header included).
    pub fn decode(packet: &[u8]) -> Result<Train, WireError> {
        if packet.len() < Self::MIN_LEN {
            return Err(WireError::BadLength);
        }
        let b = shim::body(packet)?;
        if ip::packet_len(packet) != Some(packet.len()) {
            return Err(WireError::BadLength);
        }
        let count = read_u16(b, field::COUNT);
        let index = read_u16(b, field::INDEX);
        if index >= count {
            return Err(WireError::BadLength);
        }
        Ok(Train {
            number: read_u32(b, field::NUMBER),
            index,
            count,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_padded_packet_round_trips_and_says_its_length() {
        let train = Train {
            number: 3,
            index: 15,
            count: 16,
        };
        let mut buf = [0xaa; 1200];
        assert_eq!(train.encode(&mut buf, 1100), 1100);
        assert_eq!(&buf[..4], &[0x45, 0, 0x04, 0x4c], "IPv4, 1100 bytes");
        assert_eq!(&buf[20..28], &[0, 0, 0, 3, 0, 15, 0, 16]);
        assert!(buf[28..1100].iter().all(|&b| b == 0), "padding is zeros");
        assert_eq!(Train::decode(&buf[..1100]), Ok(train));
        assert_eq!(train.encode(&mut buf, 5), Train::MIN_LEN);
        assert_eq!(Train::decode(&buf[..Train::MIN_LEN]), Ok(train));
    }

    #[test]
    fn short_packets_and_indexes_past_the_count_are_refused() {
        let mut buf = [0; 64];
        let n = Train {
            number: 1,
            index: 0,
            count: 1,
        }
        .encode(&mut buf, 64);
        assert_eq!(Train::decode(&buf[..n - 40]), Err(WireError::BadLength));
        assert_eq!(Train::decode(&buf[..n - 1]), Err(WireError::BadLength));
        for (index, count) in [(1, 1), (0, 0), (u16::MAX, 2)] {
            Train {
                number: 1,
                index,
                count,
            }
            .encode(&mut buf, 64);
            assert_eq!(Train::decode(&buf[..n]), Err(WireError::BadLength));
        }
        buf[9] = 6;
        assert_eq!(Train::decode(&buf[..n]), Err(WireError::BadShim));
    }
}
