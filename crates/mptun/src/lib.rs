//! mptun, the program: configuration, the I/O edge and the operator's
//! commands around the sans-IO core in `mptun-core`.

pub mod config;
pub mod counters;
pub mod driver;
#[cfg(test)]
mod fake;
pub mod io;
pub mod ipnet;
pub mod lab;
pub mod mtu;
pub mod net;
pub mod status;
pub mod tun;
pub mod tunnel;
pub mod udp;

/// Return a random `u32` from the OS, for a sender epoch.
pub fn random_epoch() -> anyhow::Result<u32> {
    let mut bytes = [0u8; 4];
    getrandom::getrandom(&mut bytes)
        .map_err(|e| anyhow::anyhow!("OS random number generator: {e}"))?;
    Ok(u32::from_ne_bytes(bytes))
}
