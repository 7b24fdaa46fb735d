//! `mptun import`: wg-quick configs, one per tunnel of an ECMP setup, into
//! one mptun config with a `[[path]]` per tunnel.

use std::fmt::Write as _;

use anyhow::{bail, Context};
use mptun_core::TRAILER_LEN;

/// One wg-quick file, as far as mptun can use it.
#[derive(Debug, Default)]
struct WgQuick {
    file: String,
    private_key: Option<String>,
    listen_port: Option<String>,
    addresses: Vec<String>,
    mtu: Option<String>,
    table: Option<String>,
    peers: Vec<WgPeer>,
    /// `Key = value` lines mptun does not carry over, as written.
    left_out: Vec<String>,
}

#[derive(Debug, Default)]
struct WgPeer {
    public_key: Option<String>,
    preshared_key: Option<String>,
    allowed_ips: Vec<String>,
    endpoint: Option<String>,
    persistent_keepalive: Option<String>,
}

/// Return whether `text` looks like a wg-quick config rather than mptun's
/// TOML: `[Interface]` (capitalized) or a `PrivateKey =` line.
pub fn looks_like_wg_quick(text: &str) -> bool {
    text.lines().map(str::trim).any(|line| {
        line.eq_ignore_ascii_case("[Interface]") && line != "[interface]"
            || line
                .split_once('=')
                .is_some_and(|(key, _)| key.trim() == "PrivateKey")
    })
}

fn split_list(value: &str) -> impl Iterator<Item = String> + '_ {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn parse(text: &str, file: &str) -> anyhow::Result<WgQuick> {
    let mut conf = WgQuick {
        file: file.to_string(),
        ..WgQuick::default()
    };
    let mut section = None;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = || format!("{file}: line {}", n + 1);
        if line.starts_with('[') {
            section = match line.to_ascii_lowercase().as_str() {
                "[interface]" => Some(false),
                "[peer]" => {
                    conf.peers.push(WgPeer::default());
                    Some(true)
                }
                _ => bail!(
                    "{}: unknown section (wg-quick has [Interface] and [Peer])",
                    at()
                ),
            };
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            bail!("{}: expected `Key = value`", at());
        };
        let (key, value) = (key.trim(), value.trim().to_string());
        match (section, key.to_ascii_lowercase().as_str()) {
            (None, _) => bail!("{}: a key before [Interface] or [Peer]", at()),
            (Some(false), "privatekey") => conf.private_key = Some(value),
            (Some(false), "listenport") => conf.listen_port = Some(value),
            (Some(false), "address") => conf.addresses.extend(split_list(&value)),
            (Some(false), "mtu") => conf.mtu = Some(value),
            (Some(false), "table") => conf.table = Some(value),
            (Some(false), _) => conf.left_out.push(format!("{key} = {value}")),
            (Some(true), k) => {
                let peer = conf.peers.last_mut().context("a peer key outside [Peer]")?;
                match k {
                    "publickey" => peer.public_key = Some(value),
                    "presharedkey" => peer.preshared_key = Some(value),
                    "allowedips" => peer.allowed_ips.extend(split_list(&value)),
                    "endpoint" => peer.endpoint = Some(value),
                    "persistentkeepalive" => peer.persistent_keepalive = Some(value),
                    _ => conf.left_out.push(format!("[Peer] {key} = {value}")),
                }
            }
        }
    }
    Ok(conf)
}

/// The values of `all` in order, each once.
fn unique<'a>(all: impl Iterator<Item = &'a String>) -> Vec<&'a String> {
    let mut seen = Vec::new();
    for value in all {
        if !seen.contains(&value) {
            seen.push(value);
        }
    }
    seen
}

/// Read wg-quick configs, one per tunnel to the same peer with the same
/// private key, and return one mptun config (TOML) with a path per tunnel.
pub fn import(files: &[(String, String)]) -> anyhow::Result<String> {
    if files.is_empty() {
        bail!("give one or more wg-quick config files");
    }
    let mut confs = Vec::new();
    for (file, text) in files {
        let conf = parse(text, file)?;
        if conf.private_key.is_none() {
            bail!("{file}: [Interface] has no PrivateKey");
        }
        match conf.peers.len() {
            1 => {}
            0 => bail!("{file}: no [Peer]"),
            n => bail!(
                "{file}: {n} [Peer] sections: mptun joins two sites, one peer; import the tunnels to one peer at a time"
            ),
        }
        if conf.peers[0].public_key.is_none() {
            bail!("{file}: [Peer] has no PublicKey");
        }
        confs.push(conf);
    }
    let first = &confs[0];
    let same = |what: &str, get: &dyn Fn(&WgQuick) -> Option<String>| -> anyhow::Result<()> {
        if let Some(other) = confs.iter().find(|c| get(c) != get(first)) {
            bail!(
                "{} and {} have different {what}: the tunnels of one mptun share one key pair and one peer",
                first.file,
                other.file
            );
        }
        Ok(())
    };
    same("private keys", &|c| c.private_key.clone())?;
    same("peers (PublicKey)", &|c| c.peers[0].public_key.clone())?;
    same("PresharedKeys", &|c| c.peers[0].preshared_key.clone())?;

    let names: Vec<&str> = confs.iter().map(|c| c.file.as_str()).collect();
    let mut o = String::new();
    let _ = writeln!(o, "# Imported by `mptun import` from {}.", names.join(", "));
    let _ = writeln!(
        o,
        "# It holds the private key: keep it mode 600 (umask 077 before writing it)."
    );
    let _ = writeln!(o, "\n[interface]");
    let _ = writeln!(
        o,
        "private-key = {:?}",
        first.private_key.as_deref().unwrap_or_default()
    );
    let addresses = unique(confs.iter().flat_map(|c| &c.addresses));
    let _ = writeln!(o, "address = {addresses:?}");
    let mtus: Vec<u32> = confs
        .iter()
        .filter_map(|c| c.mtu.as_deref()?.parse().ok())
        .collect();
    if let Some(mtu) = mtus.iter().min() {
        let _ = writeln!(
            o,
            "# The paths' MTU less mptun's {TRAILER_LEN}-byte trailer: leave mtu out and mptun derives it."
        );
        let _ = writeln!(o, "mtu = {}", mtu.saturating_sub(TRAILER_LEN as u32));
    }
    // The first tunnel routes in an ECMP setup; the others say Table = off.
    match first
        .table
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None | Some("auto") => {}
        Some("off") => {
            let _ = writeln!(o, "table = \"off\"");
        }
        Some(number) => {
            let _ = writeln!(o, "table = {number}");
        }
    }

    let peer = &first.peers[0];
    let _ = writeln!(o, "\n[peer]");
    let _ = writeln!(
        o,
        "public-key = {:?}",
        peer.public_key.as_deref().unwrap_or_default()
    );
    if let Some(psk) = &peer.preshared_key {
        let _ = writeln!(o, "preshared-key = {psk:?}");
    }
    let allowed = unique(confs.iter().flat_map(|c| &c.peers[0].allowed_ips));
    let _ = writeln!(o, "allowed-ips = {allowed:?}");
    if let Some(keepalive) = confs
        .iter()
        .filter_map(|c| {
            c.peers[0]
                .persistent_keepalive
                .as_deref()?
                .parse::<u16>()
                .ok()
        })
        .filter(|&k| k > 0)
        .min()
    {
        let _ = writeln!(o, "persistent-keepalive = {keepalive}");
    }

    for c in &confs {
        let _ = writeln!(o, "\n[[path]] # {}", c.file);
        if let Some(port) = &c.listen_port {
            let _ = writeln!(o, "listen-port = {port}");
        }
        if let Some(endpoint) = &c.peers[0].endpoint {
            let _ = writeln!(o, "endpoint = {endpoint:?}");
        }
    }

    let mut notes = Vec::new();
    for c in &confs {
        for line in &c.left_out {
            notes.push(format!("{}: {line}", c.file));
        }
        if c.table.is_some() && !std::ptr::eq(c, first) {
            notes.push(format!(
                "{}: Table = {}: mptun routes once, as {} said",
                c.file,
                c.table.as_deref().unwrap_or_default(),
                first.file
            ));
        }
    }
    if !notes.is_empty() {
        let _ = writeln!(
            o,
            "\n# Not carried over (mptun runs no hooks and sets no DNS; do it another way):"
        );
        for note in notes {
            let _ = writeln!(o, "#   {note}");
        }
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Table};

    const KEY_A: &str = "yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=";
    const KEY_B: &str = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";
    const PEER: &str = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=";

    fn wg(port: u16, table: &str, key: &str, peer: &str) -> String {
        format!(
            "[Interface]\nPrivateKey = {key}\nListenPort = {port}\nAddress = 10.9.{}.1/31\n{table}\
             PostUp = iptables -A FORWARD -i %i -j ACCEPT\nDNS = 10.0.0.53\n\n\
             [Peer]\nPublicKey = {peer}\nAllowedIPs = 10.9.0.0/16, 192.168.7.0/24\n\
             Endpoint = 192.0.2.1:{port} # the far gateway\nPersistentKeepalive = 25\n",
            port - 5000
        )
    }

    #[test]
    fn two_tunnels_become_two_paths_of_one_config() {
        let files = [
            ("wg0.conf".to_string(), wg(5000, "", KEY_A, PEER)),
            (
                "wg1.conf".to_string(),
                wg(5001, "Table = off\n", KEY_A, PEER),
            ),
        ];
        let text = import(&files).unwrap();
        let (config, _) = Config::parse_with(&text, "imported", std::path::Path::new("."), &|_| {
            Err("no DNS here".into())
        })
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(config.paths.len(), 2);
        assert_eq!(config.paths[0].listen_port, 5000);
        assert_eq!(
            config.paths[1].endpoint,
            Some("192.0.2.1:5001".parse().unwrap())
        );
        assert_eq!(config.interface.addresses.len(), 2);
        assert_eq!(config.peer.allowed_ips.len(), 2);
        assert_eq!(config.peer.persistent_keepalive, Some(25));
        assert_eq!(config.interface.table, Table::Auto);
        assert!(text.contains("wg0.conf: PostUp = iptables"), "{text}");
        assert!(text.contains("wg1.conf: DNS = 10.0.0.53"), "{text}");
        assert!(text.contains("wg1.conf: Table = off"), "{text}");
    }

    #[test]
    fn the_smallest_tunnel_mtu_less_the_trailer_becomes_the_tun_mtu() {
        // A tunnel MTU set tight to its link (1440 over IPv4 on 1500)
        // leaves no room for more: mptun's packets carry the trailer too.
        let with_mtu = |port, mtu| {
            wg(port, "", KEY_A, PEER).replace("[Peer]", &format!("MTU = {mtu}\n\n[Peer]"))
        };
        let files = [
            ("wg0.conf".to_string(), with_mtu(5000, 1440)),
            ("wg1.conf".to_string(), with_mtu(5001, 1420)),
        ];
        let text = import(&files).unwrap();
        let (config, _) = Config::parse_with(&text, "imported", std::path::Path::new("."), &|_| {
            Err("no DNS here".into())
        })
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(config.interface.mtu, Some(1420 - 24), "{text}");
    }

    #[test]
    fn tunnels_with_other_keys_or_peers_are_refused_by_name() {
        let other_key = [
            ("wg0.conf".to_string(), wg(5000, "", KEY_A, PEER)),
            ("wg1.conf".to_string(), wg(5001, "", KEY_B, PEER)),
        ];
        let e = import(&other_key).unwrap_err().to_string();
        assert!(
            e.contains("wg0.conf and wg1.conf have different private keys"),
            "{e}"
        );
        assert!(!e.contains(KEY_A) && !e.contains(KEY_B), "{e}");
        let other_peer = [
            ("wg0.conf".to_string(), wg(5000, "", KEY_A, PEER)),
            ("wg1.conf".to_string(), wg(5001, "", KEY_A, KEY_B)),
        ];
        let e = import(&other_peer).unwrap_err().to_string();
        assert!(e.contains("different peers"), "{e}");
        let two_peers = format!("{}[Peer]\nPublicKey = {KEY_B}\n", wg(5000, "", KEY_A, PEER));
        let e = import(&[("wg0.conf".into(), two_peers)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("wg0.conf: 2 [Peer] sections"), "{e}");
    }

    #[test]
    fn a_wg_quick_file_is_recognized() {
        assert!(looks_like_wg_quick(&wg(5000, "", KEY_A, PEER)));
        assert!(!looks_like_wg_quick(
            "[interface]\nprivate-key = \"x\"\n[peer]\npublic-key = \"y\"\n"
        ));
    }
}
