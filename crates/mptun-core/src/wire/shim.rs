//! The IPv4 header in front of a probe or NACK.
//!
//! boringtun only accepts plaintext shaped like an IP packet, and truncates
//! what it hands back to the IP total length. So a control message is
//! wrapped in a minimal IPv4 header whose total length covers the message;
//! the trailer follows as for data. Protocol 253 is reserved for experiments
//! (RFC 3692), and a TTL of 1 means it is never routed anywhere, should it
//! ever reach an IP stack.

use super::WireError;

/// Length of the shim header.
pub const SHIM_LEN: usize = 20;
/// IP protocol number in the shim: 253, for experimentation (RFC 3692).
pub const SHIM_PROTOCOL: u8 = 253;

/// Byte offsets of the fields mptun sets, within the header.
mod field {
    use core::ops::Range;
    pub const VERSION_IHL: usize = 0;
    pub const TOTAL_LEN: Range<usize> = 2..4;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
}

/// IPv4, a five-word header.
const VERSION_IHL: u8 = 0x45;

/// Write a shim header for a message of `total` bytes (header included)
/// into the first [`SHIM_LEN`] bytes of `buf`.
pub fn write(buf: &mut [u8], total: u16) {
    let out = &mut buf[..SHIM_LEN];
    out.fill(0);
    out[field::VERSION_IHL] = VERSION_IHL;
    out[field::TOTAL_LEN].copy_from_slice(&total.to_be_bytes());
    out[field::TTL] = 1;
    out[field::PROTOCOL] = SHIM_PROTOCOL;
}

/// Check that `packet` starts with a shim header, and return what follows
/// it.
pub fn body(packet: &[u8]) -> Result<&[u8], WireError> {
    if packet.len() < SHIM_LEN {
        return Err(WireError::BadLength);
    }
    if packet[field::VERSION_IHL] != VERSION_IHL || packet[field::PROTOCOL] != SHIM_PROTOCOL {
        return Err(WireError::BadShim);
    }
    Ok(&packet[SHIM_LEN..])
}
