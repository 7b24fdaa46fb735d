//! The sans-IO core of mptun, a multipath WireGuard tunnel.
//!
//! Nothing here touches a socket, a clock or the OS random number generator:
//! time comes in as an argument and deadlines go out as return values, so the
//! logic that decides where packets go and in what order they come out can be
//! tested with virtual time, deterministically.
//!
//! ```text
//!  TUN read ─> Multipath::handle_outbound ─> (path, Trailer) ─> [packet|trailer]
//!              (seq, path_seq, epoch; the path          │ sealed by that path's
//!               where it arrives soonest)               ▼ WireGuard session
//!                                                    UDP socket ── probes ──┐
//!                                                       │                   │
//!  TUN write <─ ReorderBuffer::poll_release <─ Trailer::decode_suffix       │
//!               (in order; a gap is released    (authenticated)             │
//!                on loss evidence or after an                               │
//!                adaptive hold)                                             │
//!  Multipath::handle_probe <── RTT, one-way delays, rate, loss, liveness <──┘
//! ```
//!
//! A gap the receiver knows is lost goes back to the sender as a NACK
//! ([`repair`]); the sender resends the packet from its [`SentLog`] on the
//! path where it arrives soonest, and the reorder buffer waits one repair
//! time for it instead of releasing the gap.

pub mod control;
pub mod estimate;
pub mod multipath;
pub mod path;
pub mod reorder;
pub mod repair;
pub mod scheduler;
pub mod seq;
pub mod wire;

pub use control::Probe;
pub use multipath::{Multipath, PathEstimate, PathEvent, PathState, Policy};
pub use path::{PathId, PathSet, MAX_PATHS};
pub use reorder::{DropReason, HoldHistogram, ReorderBuffer, ReorderConfig, ReorderStats, Verdict};
pub use repair::SentLog;
pub use scheduler::WeightedRoundRobin;
pub use seq::Seq;
pub use wire::{Kind, Trailer, WireError, TRAILER_LEN};
