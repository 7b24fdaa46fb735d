//! The sans-IO core of mptun, a multipath WireGuard tunnel.
//!
//! Nothing here touches a socket, a clock or the OS random number generator:
//! time comes in as an argument and deadlines go out as return values, so the
//! logic that decides where packets go and in what order they come out can be
//! tested with virtual time, deterministically. One [`Endpoint`] is one
//! site's side of a tunnel:
//!
//! ```text
//!  TUN read ──> Endpoint::handle_tun ──> number, pick the path where it
//!                                        arrives soonest, log for repairs
//!                    poll_transmit <──── [packet | trailer] per path
//!                         │  (the I/O edge seals with the path's WireGuard
//!                         ▼   session and sends on the path's socket)
//!  ~~~~~~~~~~~~~~~~~~~~~~~~~~~~ network ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//!                         │  (opened by the path's session)
//!                         ▼
//!  Endpoint::handle_datagrams ──> data: reorder buffer (in order; a lost
//!                                       gap is NACKed, or released)
//!                                 probe: delay, rate, loss, liveness
//!                                 NACK: resend from the sent log
//!  TUN write <── poll_deliver
//! ```
//!
//! Modules, from the wire up: [`wire`] (the bytes), [`seq`] (sequence
//! numbers), [`path`] (one path's state), [`paths`] (decisions across
//! paths), [`scheduler`], [`sent_log`], [`reorder`], [`buf`] (packet
//! buffers), and [`endpoint`], which ties them together.

#![forbid(unsafe_code)]

pub mod buf;
pub mod endpoint;
mod equalize;
pub mod parity;
pub mod path;
pub mod paths;
pub mod reorder;
pub mod scheduler;
pub mod sent_log;
pub mod seq;
pub mod wire;

pub use buf::{BufPool, PacketBuf};
pub use endpoint::{Endpoint, EndpointConfig, EndpointStats, PathStats, RefusedStats};
pub use equalize::DscpSet;
pub use path::{PathChange, PathEstimate, PathEvent, PathId, PathSet, PathState, MAX_PATHS};
pub use reorder::{
    Arrival, DropReason, HoldHistogram, ReorderBuffer, ReorderConfig, ReorderStats, Verdict,
    WaitEnd,
};
pub use scheduler::{Policy, WeightedRoundRobin};
pub use sent_log::SentLog;
pub use seq::Seq;
pub use wire::{Kind, Trailer, WireError, TRAILER_LEN};

#[cfg(test)]
mod tests {
    use std::time::Instant;

    /// The one clock reading of the unit tests: every other time in them is
    /// an offset from it.
    #[allow(clippy::disallowed_methods)]
    pub fn t0() -> Instant {
        Instant::now()
    }
}
