//! The sans-IO core of mptun, a multipath WireGuard tunnel.
//!
//! Nothing here touches a socket, a clock or the OS random number generator:
//! time comes in as an argument and deadlines go out as return values, so the
//! logic that decides where packets go and in what order they come out can be
//! tested with virtual time, deterministically.
//!
//! ```text
//!  TUN read ──> Sender::handle_outbound ──> (path, Trailer) ──> [packet|trailer]
//!                 (seq, path_seq, epoch;                          │ WireGuard
//!                  WeightedRoundRobin)                            │ session of
//!                                                                 ▼ that path
//!                                                              UDP socket
//!                                                                 │
//!  TUN write <── ReorderBuffer::poll_release <── Trailer::decode_suffix
//!                 (in order; gaps held at most                (authenticated
//!                  `hold`, then skipped)                       plaintext)
//! ```

pub mod path;
pub mod reorder;
pub mod scheduler;
pub mod sender;
pub mod seq;
pub mod wire;

pub use path::{PathId, PathSet, MAX_PATHS};
pub use reorder::{DropReason, ReorderBuffer, ReorderConfig, ReorderStats, Verdict};
pub use scheduler::WeightedRoundRobin;
pub use sender::Sender;
pub use seq::Seq;
pub use wire::{Kind, Trailer, WireError, TRAILER_LEN};
