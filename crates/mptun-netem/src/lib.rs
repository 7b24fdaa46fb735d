//! `mptun-netem`: a traffic-agnostic userspace link emulator for kernels
//! without the netem qdisc.
//!
//! - [`model`]: sans-IO per-direction link model (delay, jitter with FIFO
//!   order, uniform and Gilbert-Elliott loss, rate limit with a bounded
//!   drop-tail queue, up/down), driven with explicit time.
//! - [`forwarder`]: Linux AF_PACKET edge that bridges the two interfaces of
//!   each path in the middle namespace using the model.
//! - [`spec`] / [`control`]: configuration file format and stdin commands of
//!   the `mptun-netem` binary.
//! - [`topology`]: namespace/veth lab builder (emulated or `tbf`-only) for
//!   lab runners and the acceptance benchmark.

pub mod control;
pub mod forwarder;
pub mod model;
pub mod spec;
pub mod topology;

pub use model::{Dir, Direction, DirectionConfig, GilbertElliott, LinkModel};
pub use spec::{DirSpec, PathSpec, Spec};
pub use topology::{Topology, TopologyOptions};

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum NetemError {
    /// The message includes the OS error, so it is not also exposed as
    /// `source()` (that would print it twice in anyhow chains).
    #[error("{context}: {err}")]
    Io {
        context: String,
        err: std::io::Error,
    },
    #[error("invalid spec: {0}")]
    Spec(String),
    #[error("invalid command: {0}")]
    Command(String),
    #[error("{0}")]
    Setup(String),
}

impl NetemError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        NetemError::Io {
            context: context.into(),
            err: source,
        }
    }
}
