//! The lab: two sites in network namespaces joined by emulated (or
//! `tbf`-shaped) paths, with `mptun up` on both, and measurements through
//! them. Used by the `mptun-lab` program (`mptun lab` runs it) and by the
//! end-to-end tests. Kept out of the daemon, which links neither the
//! emulator nor the charts.

pub mod machine;
pub mod plot;
pub mod rtt;
pub mod run;
pub mod scenario;
pub mod sites;
pub mod soak;
pub mod sweep;
pub mod udp;
pub mod wireguard;

pub use rtt::{tcp_request_rtt_ms, TOS_EF};
pub use sites::{ping, Iperf, PingResult, Site, Sites, TcpResult};
pub use udp::{udp_stream, UdpResult};

/// Return the `mptun` program the lab runs on its sites: `MPTUN_EXE`, or
/// the one beside this program (for a test, beside its folder of tests).
pub fn mptun_exe() -> anyhow::Result<std::path::PathBuf> {
    use anyhow::Context;
    if let Some(exe) = std::env::var_os("MPTUN_EXE") {
        return Ok(exe.into());
    }
    let me = std::env::current_exe().context("find this program")?;
    let dir = me.parent().context("this program's folder")?;
    [dir.join("mptun"), dir.join("../mptun")]
        .into_iter()
        .find(|p| p.is_file())
        .with_context(|| {
            format!(
                "no mptun beside {}: build it (cargo build --release) or set MPTUN_EXE",
                me.display()
            )
        })
}
