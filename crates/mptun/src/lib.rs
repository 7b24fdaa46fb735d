//! mptun, the program: configuration, the I/O edge and the operator's
//! commands around the sans-IO core in `mptun-core`.

pub mod config;
pub mod counters;
pub mod driver;
#[cfg(test)]
mod fake;
pub mod import;
pub mod io;
pub mod metrics;
pub mod mtu;
pub mod net;
pub mod privileges;
pub mod status;
pub mod systemd;
pub mod tun;
pub mod tunnel;
pub mod udp;

/// Return this run's epoch: the time now, in ms since 1970, wrapped to 32
/// bits. The peer follows only a later epoch (in serial-number order) than
/// the one it follows, so a restart must give a later one; a replayed packet
/// from before the restart cannot.
pub fn run_epoch() -> u32 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    since.as_millis() as u32
}
