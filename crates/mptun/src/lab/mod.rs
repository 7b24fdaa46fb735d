//! The lab: two sites in network namespaces joined by emulated (or
//! `tbf`-shaped) paths, with `mptun up` on both, and measurements through
//! them. Used by `mptun lab` and by the end-to-end tests.

pub mod plot;
pub mod run;
pub mod scenario;
pub mod sites;
pub mod soak;
pub mod sweep;
pub mod wireguard;

pub use sites::{ping, Iperf, PingResult, Site, Sites, TcpResult, UdpResult};
