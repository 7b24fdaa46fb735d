//! The messages mptun adds to WireGuard's plaintext, one module each.
//!
//! Everything here travels inside a path's WireGuard session: it is
//! authenticated and never in cleartext. Every decoder takes bytes that an
//! authenticated peer chose, so each checks lengths once, up front, and
//! returns a small `Copy` error; none panics on any input.
//!
//! - [`trailer`]: the 24 bytes after every plaintext (sequence numbers,
//!   epoch, send time, flags, kind).
//! - [`shim`]: the IPv4 header that makes a probe or NACK look like an IP
//!   packet to boringtun.
//! - [`probe`]: path measurement, both ways.
//! - [`train`]: padded packets sent back to back, whose spacing gives a
//!   path's bottleneck rate.
//! - [`nack`]: a request to resend lost data packets.
//! - [`parity`]: the XOR of a run of data packets on one path, to rebuild
//!   one lost without a repair.
//! - [`ip`]: the little of an inner IP header mptun reads.

pub mod ip;
pub mod nack;
pub mod parity;
pub mod probe;
pub mod shim;
pub mod trailer;
pub mod train;

pub use nack::{Nack, NACK_MAX, NACK_MAX_LEN};
pub use parity::{Parity, PARITY_HEADER_LEN, PARITY_MAX_COUNT};
pub use probe::{Probe, PROBE_LEN};
pub use trailer::{Kind, Trailer, TRAILER_LEN};
pub use train::Train;

/// Why bytes could not be read as an mptun message. Small and `Copy`: the
/// message is dropped and counted, never logged one by one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Too few bytes, or a length that does not match what the header says.
    BadLength,
    /// A trailer layout this build does not know.
    UnknownVersion,
    /// A message kind this build does not know.
    UnknownKind,
    /// Trailer flags set that this build does not know.
    UnknownFlags,
    /// A control message whose IPv4 shim header is not ours.
    BadShim,
}

/// Read the big-endian `u16` at `range` (two bytes, in bounds).
fn read_u16(bytes: &[u8], range: core::ops::Range<usize>) -> u16 {
    let mut word = [0; 2];
    word.copy_from_slice(&bytes[range]);
    u16::from_be_bytes(word)
}

/// Read the big-endian `u32` at `range` (four bytes, in bounds).
fn read_u32(bytes: &[u8], range: core::ops::Range<usize>) -> u32 {
    let mut word = [0; 4];
    word.copy_from_slice(&bytes[range]);
    u32::from_be_bytes(word)
}

/// Read the big-endian `u64` at `range` (eight bytes, in bounds).
fn read_u64(bytes: &[u8], range: core::ops::Range<usize>) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&bytes[range]);
    u64::from_be_bytes(word)
}
