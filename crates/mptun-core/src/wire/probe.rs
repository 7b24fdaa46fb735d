//! Probes: what each side sends on every path to measure it.
//!
//! A probe travels like data, through the path's WireGuard session, so it is
//! authenticated and never in cleartext, but it is never delivered to the
//! TUN device. It sits behind a [`shim`](super::shim) header; the trailer
//! (kind [`Kind::Probe`](super::Kind::Probe)) follows as for data.
//!
//! Every probe also carries feedback on the last probe received from the
//! peer on the same path, so one message per interval serves both ways:
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  20-byte IPv4 header, protocol 253, total length 20 + 72      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                     probe number                              |
//! |                  send time, µs (64 bits)                      |
//! |            echoed probe number (last one received)            |
//! |       echoed probe's send time, µs, peer's clock (64 bits)    |
//! |     echoed probe's arrival time here, µs, our clock (64 bits)  |
//! |       data packets received on this path (64 bits)            |
//! |         data bytes received on this path (64 bits)            |
//! |            highest path sequence number received              |
//! |        last probe train received on this path (its number)    |
//! |    its bytes after the first packet's arrival, to the last's  |
//! |        µs from the first packet's arrival to the last's       |
//! |   path sequence numbers missed at a full queue (64 bits)      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Times are microseconds on each side's own clock, from an arbitrary start.
//! A round trip needs no common clock: now minus the echoed send time, minus
//! how long the probe waited at the peer (this probe's send time minus the
//! echoed arrival time, both on the peer's clock). A one-way delay sample
//! (arrival on one clock minus send on the other) is off by the same unknown
//! clock offset on every path, so differences between paths are exact.

use super::{read_u32, read_u64, shim, WireError};
use crate::seq::Seq;

/// Length of a probe's body after the shim.
pub const PROBE_LEN: usize = 72;

/// Byte offsets of the fields, within the body after the shim.
mod field {
    use core::ops::Range;
    pub const NUMBER: Range<usize> = 0..4;
    pub const SENT_US: Range<usize> = 4..12;
    pub const ECHO_NUMBER: Range<usize> = 12..16;
    pub const ECHO_SENT_US: Range<usize> = 16..24;
    pub const ECHO_ARRIVED_US: Range<usize> = 24..32;
    pub const RX_PACKETS: Range<usize> = 32..40;
    pub const RX_BYTES: Range<usize> = 40..48;
    pub const RX_HIGHEST_PATH_SEQ: Range<usize> = 48..52;
    pub const TRAIN_NUMBER: Range<usize> = 52..56;
    pub const TRAIN_BYTES: Range<usize> = 56..60;
    pub const TRAIN_SPAN_US: Range<usize> = 60..64;
    pub const RX_MISSED_AT_QUEUE: Range<usize> = 64..72;
}

/// One probe with its piggybacked feedback.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Probe {
    /// Number of this probe on this path, from 1.
    pub number: u32,
    /// When it was sent, µs on the sender's clock.
    pub sent_us: u64,
    /// The last probe received from the peer on this path (0: none yet).
    pub echo_number: u32,
    /// That probe's `sent_us`, on the peer's clock.
    pub echo_sent_us: u64,
    /// When that probe arrived here, µs on this sender's clock.
    pub echo_arrived_us: u64,
    /// Data packets received on this path so far.
    pub rx_packets: u64,
    /// Inner bytes of those packets.
    pub rx_bytes: u64,
    /// Highest path sequence number received on this path.
    pub rx_highest_path_seq: Seq,
    /// The last [probe train](super::train) the peer received whole on
    /// this path (0: none yet).
    pub train_number: u32,
    /// Bytes of that train that arrived after its first packet.
    pub train_bytes: u32,
    /// µs from the arrival of its first packet to that of its last.
    pub train_span_us: u32,
    /// Path sequence numbers missing next to a data packet that arrived
    /// behind a queue, so far: what a full queue dropped, which the loss
    /// of the path does not count.
    pub rx_missed_at_queue: u64,
}

impl Probe {
    /// Length of a probe, shim included.
    pub const LEN: usize = shim::SHIM_LEN + PROBE_LEN;

    /// Write shim header and probe into `buf` (at least [`Probe::LEN`]
    /// bytes); return the length written.
    pub fn encode(&self, buf: &mut [u8]) -> usize {
        shim::write(buf, Self::LEN as u16);
        let b = &mut buf[shim::SHIM_LEN..Self::LEN];
        b[field::NUMBER].copy_from_slice(&self.number.to_be_bytes());
        b[field::SENT_US].copy_from_slice(&self.sent_us.to_be_bytes());
        b[field::ECHO_NUMBER].copy_from_slice(&self.echo_number.to_be_bytes());
        b[field::ECHO_SENT_US].copy_from_slice(&self.echo_sent_us.to_be_bytes());
        b[field::ECHO_ARRIVED_US].copy_from_slice(&self.echo_arrived_us.to_be_bytes());
        b[field::RX_PACKETS].copy_from_slice(&self.rx_packets.to_be_bytes());
        b[field::RX_BYTES].copy_from_slice(&self.rx_bytes.to_be_bytes());
        b[field::RX_HIGHEST_PATH_SEQ].copy_from_slice(&self.rx_highest_path_seq.0.to_be_bytes());
        b[field::TRAIN_NUMBER].copy_from_slice(&self.train_number.to_be_bytes());
        b[field::TRAIN_BYTES].copy_from_slice(&self.train_bytes.to_be_bytes());
        b[field::TRAIN_SPAN_US].copy_from_slice(&self.train_span_us.to_be_bytes());
        b[field::RX_MISSED_AT_QUEUE].copy_from_slice(&self.rx_missed_at_queue.to_be_bytes());
        Self::LEN
    }

    /// Read a probe from the inner packet of a probe message (shim header
    /// included).
    pub fn decode(packet: &[u8]) -> Result<Probe, WireError> {
        if packet.len() != Self::LEN {
            return Err(WireError::BadLength);
        }
        let b = shim::body(packet)?;
        Ok(Probe {
            number: read_u32(b, field::NUMBER),
            sent_us: read_u64(b, field::SENT_US),
            echo_number: read_u32(b, field::ECHO_NUMBER),
            echo_sent_us: read_u64(b, field::ECHO_SENT_US),
            echo_arrived_us: read_u64(b, field::ECHO_ARRIVED_US),
            rx_packets: read_u64(b, field::RX_PACKETS),
            rx_bytes: read_u64(b, field::RX_BYTES),
            rx_highest_path_seq: Seq(read_u32(b, field::RX_HIGHEST_PATH_SEQ)),
            train_number: read_u32(b, field::TRAIN_NUMBER),
            train_bytes: read_u32(b, field::TRAIN_BYTES),
            train_span_us: read_u32(b, field::TRAIN_SPAN_US),
            rx_missed_at_queue: read_u64(b, field::RX_MISSED_AT_QUEUE),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Probe {
        Probe {
            number: 7,
            sent_us: 0x0102_0304_0506_0708,
            echo_number: 6,
            echo_sent_us: 99,
            echo_arrived_us: 1500,
            rx_packets: 1000,
            rx_bytes: 1_400_000,
            rx_highest_path_seq: Seq(0xffff_fff0),
            train_number: 2,
            train_bytes: 16_500,
            train_span_us: 0x0102_0304,
            rx_missed_at_queue: 300,
        }
    }

    #[test]
    fn encodes_golden_bytes() {
        let mut buf = [0xaa; 100];
        assert_eq!(sample().encode(&mut buf), 92);
        let golden: [u8; 92] = [
            0x45, 0, 0, 92, 0, 0, 0, 0, 1, 253, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // shim
            0, 0, 0, 7, // number
            1, 2, 3, 4, 5, 6, 7, 8, // sent
            0, 0, 0, 6, // echo number
            0, 0, 0, 0, 0, 0, 0, 99, // echo sent
            0, 0, 0, 0, 0, 0, 0x05, 0xdc, // echo arrived
            0, 0, 0, 0, 0, 0, 0x03, 0xe8, // rx packets
            0, 0, 0, 0, 0, 0x15, 0x5c, 0xc0, // rx bytes
            0xff, 0xff, 0xff, 0xf0, // highest path seq
            0, 0, 0, 2, // train number
            0, 0, 0x40, 0x74, // train bytes
            1, 2, 3, 4, // train span
            0, 0, 0, 0, 0, 0, 0x01, 0x2c, // missed at a queue
        ];
        assert_eq!(buf[..92], golden);
        assert_eq!(Probe::decode(&golden), Ok(sample()));
    }

    #[test]
    fn rejects_what_is_not_a_probe() {
        let mut buf = [0u8; 92];
        sample().encode(&mut buf);
        assert_eq!(Probe::decode(&buf[..91]), Err(WireError::BadLength));
        let mut tcp = buf;
        tcp[9] = 6;
        assert_eq!(Probe::decode(&tcp), Err(WireError::BadShim));
    }
}
