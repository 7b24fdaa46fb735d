//! Control messages: the probes each side sends on every path to measure it.
//!
//! A probe travels like data, through the path's WireGuard session, so it is
//! authenticated and never in cleartext, but it is never delivered to the
//! TUN device. boringtun only accepts plaintext shaped like an IP packet, so
//! the probe is wrapped in a minimal IPv4 header (protocol 253, reserved for
//! experiments by RFC 3692) whose total length covers the probe; the trailer
//! (kind `Control`) follows as for data.
//!
//! Every probe also carries feedback on the last probe received from the
//! peer on the same path, so one message per interval serves both ways:
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  20-byte IPv4 header, protocol 253, total length 20 + 52      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                     probe number                              |
//! |                  send time, µs (64 bits)                      |
//! |            echoed probe number (last one received)            |
//! |       echoed probe's send time, µs, peer's clock (64 bits)    |
//! |     echoed probe's arrival time here, µs, our clock (64 bits)  |
//! |       data packets received on this path (64 bits)            |
//! |         data bytes received on this path (64 bits)            |
//! |            highest path sequence number received              |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Times are microseconds on each side's own clock, from an arbitrary start.
//! A round trip needs no common clock: now minus the echoed send time, minus
//! how long the probe waited at the peer (this probe's send time minus the
//! echoed arrival time, both on the peer's clock). A one-way delay sample
//! (arrival on one clock minus send on the other) is off by the same unknown
//! clock offset on every path, so differences between paths are exact.

use crate::seq::Seq;

/// Length of the IPv4 shim header.
pub const SHIM_LEN: usize = 20;
/// Length of a probe's body after the shim.
pub const PROBE_LEN: usize = 52;
/// IP protocol number in the shim: 253, for experimentation (RFC 3692).
pub const SHIM_PROTOCOL: u8 = 253;

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
}

/// Why a probe could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlError {
    /// Not the length of a probe.
    BadLength,
    /// The shim header is not ours.
    BadShim,
}

impl Probe {
    /// Write shim header and probe into `buf` (at least `SHIM_LEN +
    /// PROBE_LEN` bytes); return the length written.
    pub fn encode(&self, buf: &mut [u8]) -> usize {
        let total = SHIM_LEN + PROBE_LEN;
        let out = &mut buf[..total];
        out.fill(0);
        out[0] = 0x45; // IPv4, 5-word header
        out[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        out[8] = 1; // TTL: never routed anywhere
        out[9] = SHIM_PROTOCOL;
        let b = &mut out[SHIM_LEN..];
        b[0..4].copy_from_slice(&self.number.to_be_bytes());
        b[4..12].copy_from_slice(&self.sent_us.to_be_bytes());
        b[12..16].copy_from_slice(&self.echo_number.to_be_bytes());
        b[16..24].copy_from_slice(&self.echo_sent_us.to_be_bytes());
        b[24..32].copy_from_slice(&self.echo_arrived_us.to_be_bytes());
        b[32..40].copy_from_slice(&self.rx_packets.to_be_bytes());
        b[40..48].copy_from_slice(&self.rx_bytes.to_be_bytes());
        b[48..52].copy_from_slice(&self.rx_highest_path_seq.0.to_be_bytes());
        total
    }

    /// Read a probe from the inner packet of a control message (shim header
    /// included).
    pub fn decode(packet: &[u8]) -> Result<Probe, ControlError> {
        if packet.len() != SHIM_LEN + PROBE_LEN {
            return Err(ControlError::BadLength);
        }
        if packet[0] != 0x45 || packet[9] != SHIM_PROTOCOL {
            return Err(ControlError::BadShim);
        }
        let b = &packet[SHIM_LEN..];
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| (u64::from(u32_at(i)) << 32) | u64::from(u32_at(i + 4));
        Ok(Probe {
            number: u32_at(0),
            sent_us: u64_at(4),
            echo_number: u32_at(12),
            echo_sent_us: u64_at(16),
            echo_arrived_us: u64_at(24),
            rx_packets: u64_at(32),
            rx_bytes: u64_at(40),
            rx_highest_path_seq: Seq(u32_at(48)),
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
        }
    }

    #[test]
    fn encodes_golden_bytes() {
        let mut buf = [0xaa; 80];
        assert_eq!(sample().encode(&mut buf), 72);
        let golden: [u8; 72] = [
            0x45, 0, 0, 72, 0, 0, 0, 0, 1, 253, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // shim
            0, 0, 0, 7, // number
            1, 2, 3, 4, 5, 6, 7, 8, // sent
            0, 0, 0, 6, // echo number
            0, 0, 0, 0, 0, 0, 0, 99, // echo sent
            0, 0, 0, 0, 0, 0, 0x05, 0xdc, // echo arrived
            0, 0, 0, 0, 0, 0, 0x03, 0xe8, // rx packets
            0, 0, 0, 0, 0, 0x15, 0x5c, 0xc0, // rx bytes
            0xff, 0xff, 0xff, 0xf0, // highest path seq
        ];
        assert_eq!(buf[..72], golden);
        assert_eq!(Probe::decode(&golden), Ok(sample()));
    }

    #[test]
    fn rejects_what_is_not_a_probe() {
        let mut buf = [0u8; 72];
        sample().encode(&mut buf);
        assert_eq!(Probe::decode(&buf[..71]), Err(ControlError::BadLength));
        let mut tcp = buf;
        tcp[9] = 6;
        assert_eq!(Probe::decode(&tcp), Err(ControlError::BadShim));
    }
}
