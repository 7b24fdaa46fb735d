//! Routes for the peer's allowed IPs, added with iproute2 as wg-quick does.

use std::process::Command;

use anyhow::{bail, Context};
use tracing::{info, warn};

use crate::config::{Config, Table};
use ipnet::IpNet;

/// The routes `mptun up` added, removed again by [`remove`](Self::remove).
pub struct Routes {
    device: String,
    added: Vec<IpNet>,
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let output = Command::new("ip")
        .args(args)
        .output()
        .context("run `ip` (is iproute2 installed?)")?;
    if !output.status.success() {
        bail!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

fn family(net: IpNet) -> &'static str {
    if net.addr().is_ipv4() {
        "-4"
    } else {
        "-6"
    }
}

impl Routes {
    /// Route each allowed IP to the TUN device, unless `table = "off"` or
    /// the kernel already routes it there as the network of an address.
    pub fn add(config: &Config) -> anyhow::Result<Routes> {
        let mut routes = Routes {
            device: config.interface.name.clone(),
            added: Vec::new(),
        };
        if config.interface.table == Table::Off {
            return Ok(routes);
        }
        for &net in &config.peer.allowed_ips {
            if config.interface.addresses.iter().any(|a| a.trunc() == net) {
                continue;
            }
            let dest = net.trunc().to_string();
            if let Err(e) = ip(&[family(net), "route", "add", &dest, "dev", &routes.device]) {
                routes.remove();
                return Err(e.context(format!("add route {dest} (peer.allowed-ips)")));
            }
            info!(route = %dest, device = %routes.device, "route added");
            routes.added.push(net);
        }
        Ok(routes)
    }

    /// Leave the routes to the kernel, which removes them with the TUN
    /// device: for a daemon that can no longer run `ip`.
    pub fn leave_to_device(&mut self) {
        self.added.clear();
    }

    /// Remove the routes this run added.
    pub fn remove(&mut self) {
        for net in self.added.drain(..) {
            let dest = net.trunc().to_string();
            if let Err(e) = ip(&[family(net), "route", "del", &dest, "dev", &self.device]) {
                warn!(route = %dest, error = %e, "could not remove route");
            }
        }
    }
}

impl Drop for Routes {
    fn drop(&mut self) {
        self.remove();
    }
}
