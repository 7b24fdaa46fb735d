//! Routes for the peer's allowed IPs, added with iproute2 as wg-quick does.

use std::process::Command;

use anyhow::{bail, Context};
use tracing::{info, warn};

use crate::config::{Config, Table};
use ipnet::IpNet;

/// The routes `mptun up` added, removed again by [`remove`](Self::remove).
pub struct Routes {
    device: String,
    added: Vec<Route>,
    /// `ip` arguments that delete each policy rule added.
    rules: Vec<Vec<String>>,
}

fn ip<S: AsRef<std::ffi::OsStr> + AsRef<str>>(args: &[S]) -> anyhow::Result<()> {
    let output = Command::new("ip")
        .args(args)
        .output()
        .context("run `ip` (is iproute2 installed?)")?;
    if !output.status.success() {
        bail!(
            "`ip {}` failed: {}",
            args.iter()
                .map(AsRef::<str>::as_ref)
                .collect::<Vec<_>>()
                .join(" "),
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
    /// the kernel already routes it there as the network of an address. A
    /// default route (`0.0.0.0/0`, `::/0`) with `table = "auto"` goes into
    /// table `fwmark`, looked up by everything not marked `fwmark` (the
    /// paths' own packets are), while the main table's more specific routes
    /// still win: wg-quick's rules.
    pub fn add(config: &Config) -> anyhow::Result<Routes> {
        let mut routes = Routes {
            device: config.interface.name.clone(),
            added: Vec::new(),
            rules: Vec::new(),
        };
        let table = match config.interface.table {
            Table::Off => return Ok(routes),
            Table::Auto => None,
            Table::Number(n) => Some(n.to_string()),
        };
        for &net in &config.peer.allowed_ips {
            if config.interface.addresses.iter().any(|a| a.trunc() == net) {
                continue;
            }
            let policy = match (&table, config.interface.fwmark) {
                (None, Some(mark)) if net.prefix_len() == 0 => Some(mark.to_string()),
                _ => None,
            };
            let in_table = table.clone().or(policy.clone());
            let route = Route {
                net,
                table: in_table,
            };
            if let Err(e) = ip(&route.args("add", &routes.device)) {
                routes.remove();
                return Err(e.context(format!("add route {} (peer.allowed-ips)", net.trunc())));
            }
            info!(route = %net.trunc(), device = %routes.device, table = route.table.as_deref().unwrap_or("main"), "route added");
            routes.added.push(route);
            if let Some(mark) = policy {
                if let Err(e) = routes.add_policy_rules(net, &mark) {
                    routes.remove();
                    return Err(e);
                }
            }
        }
        Ok(routes)
    }

    fn add_policy_rules(&mut self, net: IpNet, mark: &str) -> anyhow::Result<()> {
        let f = family(net);
        for rule in [
            ["not", "fwmark", mark, "table", mark].as_slice(),
            ["table", "main", "suppress_prefixlength", "0"].as_slice(),
        ] {
            let with = |verb| [[f, "rule", verb].as_slice(), rule].concat();
            ip(&with("add")).with_context(|| format!("add policy rule for {}", net.trunc()))?;
            info!(rule = %rule.join(" "), "policy rule added");
            self.rules
                .push(with("del").into_iter().map(str::to_string).collect());
        }
        if net.addr().is_ipv4() {
            // Replies to the paths' marked packets must pass reverse path
            // filtering, as wg-quick arranges.
            let _ = std::fs::write("/proc/sys/net/ipv4/conf/all/src_valid_mark", "1");
        }
        Ok(())
    }

    /// Leave the routes to the kernel, which removes them with the TUN
    /// device: for a daemon that can no longer run `ip`.
    pub fn leave_to_device(&mut self) {
        self.added.clear();
    }

    /// Remove the rules and routes this run added.
    pub fn remove(&mut self) {
        for rule in self.rules.drain(..) {
            let args: Vec<&str> = rule.iter().map(String::as_str).collect();
            if let Err(e) = ip(&args) {
                warn!(error = %e, "could not remove policy rule");
            }
        }
        for route in self.added.drain(..) {
            if let Err(e) = ip(&route.args("del", &self.device)) {
                warn!(route = %route.net.trunc(), error = %e, "could not remove route");
            }
        }
    }
}

/// One route this run added.
struct Route {
    net: IpNet,
    /// Its table; the main one if `None`.
    table: Option<String>,
}

impl Route {
    fn args<'a>(&'a self, verb: &'a str, device: &'a str) -> Vec<String> {
        let mut args: Vec<String> = [family(self.net), "route", verb]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend([self.net.trunc().to_string(), "dev".into(), device.into()]);
        if let Some(table) = &self.table {
            args.extend(["table".into(), table.clone()]);
        }
        args
    }
}

impl Drop for Routes {
    fn drop(&mut self) {
        self.remove();
    }
}
