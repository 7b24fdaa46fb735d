//! The TOML configuration file: its schema, and validation that names the
//! file and the key of every problem.

use std::fmt;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use mptun_core::{DscpSet, ReorderConfig, MAX_PATHS};
use mptun_wg::keys::{decode_key, KeyError, Secret};
use serde::Deserialize;

use crate::privileges::RunAs;
use ipnet::IpNet;

/// A problem with a config file: which file, which key, what is wrong.
#[derive(Debug, thiserror::Error)]
pub struct ConfigError {
    /// The config file, as given on the command line.
    pub file: String,
    /// The key in TOML dotted form (`path[2].endpoint`), empty when the
    /// problem is with the file as a whole.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}: {}: {}", self.file, self.key, self.message)
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawConfig {
    interface: RawInterface,
    peer: RawPeer,
    #[serde(default)]
    path: Vec<RawPath>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawInterface {
    private_key: Option<String>,
    private_key_file: Option<String>,
    #[serde(default)]
    address: Vec<String>,
    name: Option<String>,
    mtu: Option<u32>,
    txqueuelen: Option<u32>,
    table: Option<toml::Value>,
    fwmark: Option<u32>,
    metrics_listen: Option<String>,
    reorder_hold_ms: Option<u64>,
    low_latency_dscp: Option<Vec<toml::Value>>,
    scheduler: Option<String>,
    user: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawPeer {
    public_key: String,
    #[serde(default)]
    allowed_ips: Vec<String>,
    persistent_keepalive: Option<u16>,
    preshared_key: Option<String>,
    preshared_key_file: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawPath {
    name: Option<String>,
    listen_port: Option<u16>,
    endpoint: Option<String>,
    bind: Option<String>,
    bind_interface: Option<String>,
    weight: Option<u32>,
}

/// Whether `mptun up` manages routes for the peer's allowed IPs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// Add a route to the TUN device for each allowed IP in the main table,
    /// and for a default route (`0.0.0.0/0`, `::/0`) one in table
    /// [`Interface::fwmark`] with policy rules, as wg-quick does.
    Auto,
    /// Add the routes to this table and no rules.
    Number(u32),
    /// Add no routes; the operator routes.
    Off,
}

/// The table and mark wg-quick uses for a default route when none is set.
pub const DEFAULT_FWMARK: u32 = 51820;

/// How packets are spread over the paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduler {
    /// Each packet to the path where it arrives soonest, from measured delay,
    /// rate and queue; `weight` caps a path's share.
    Adaptive,
    /// Static weighted round-robin over the paths that are up.
    RoundRobin,
}

/// A validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// The file it was read from, as given.
    pub file: String,
    /// The local side.
    pub interface: Interface,
    /// The remote site.
    pub peer: Peer,
    /// One entry per path, in file order; `PathId(i)` is `paths[i]`.
    pub paths: Vec<PathConfig>,
    /// Whether a private or pre-shared key is written in the file itself,
    /// which then must be as private as a key file.
    pub secrets_inline: bool,
}

/// `[interface]`: the local side.
#[derive(Clone, Debug)]
pub struct Interface {
    /// Static private key.
    pub private_key: Secret,
    /// Addresses on the TUN device.
    pub addresses: Vec<IpNet>,
    /// TUN device name.
    pub name: String,
    /// TUN MTU if configured; else derived from the paths when the tunnel
    /// starts ([`crate::mtu`]).
    pub mtu: Option<u16>,
    /// Packets the kernel queues for us on the TUN device before dropping.
    pub txqueuelen: u32,
    /// Route management.
    pub table: Table,
    /// Mark on the paths' packets (SO_MARK), so that policy routing keeps
    /// them out of the tunnel: `interface.fwmark`, or [`DEFAULT_FWMARK`]
    /// when a default route goes through the tunnel.
    pub fwmark: Option<u32>,
    /// Reorder buffer limits; `hold` is the most the adaptive hold may be.
    pub reorder: ReorderConfig,
    /// DSCP values of TCP traffic the peer does not hold to the farthest
    /// path's delay.
    pub low_latency_dscp: DscpSet,
    /// How packets are spread over the paths.
    pub scheduler: Scheduler,
    /// Who the daemon runs as once the tunnel is up; root if `None`.
    pub user: Option<RunAs>,
    /// Where to serve OpenMetrics text at `/metrics`, if anywhere.
    pub metrics_listen: Option<SocketAddr>,
}

/// `[peer]`: the remote site.
#[derive(Clone, Debug)]
pub struct Peer {
    /// Static public key.
    pub public_key: [u8; 32],
    /// Inner addresses the peer may send from and that are routed to it.
    pub allowed_ips: Vec<IpNet>,
    /// Keepalive interval in seconds.
    pub persistent_keepalive: Option<u16>,
    /// Optional pre-shared key.
    pub preshared_key: Option<Secret>,
}

impl Peer {
    /// Return whether `ip` is in the peer's allowed IPs: the peer may send
    /// from it, and packets to it go to the peer.
    pub fn allows(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.allowed_ips.iter().any(|net| net.contains(&ip))
    }
}

/// `[[path]]`: one WireGuard session on one UDP socket.
#[derive(Clone, Debug)]
pub struct PathConfig {
    /// What the operator calls it (an uplink, a provider), for status and
    /// metrics.
    pub name: Option<String>,
    /// Local UDP port; 0 picks one.
    pub listen_port: u16,
    /// Where the peer's socket for this path is, if known in advance.
    pub endpoint: Option<SocketAddr>,
    /// The endpoint as written, when it names a host: looked up again while
    /// the path is down (the host may have moved), as wireguard-tools'
    /// reresolve-dns does.
    pub endpoint_name: Option<String>,
    /// Local address to bind.
    pub bind: Option<IpAddr>,
    /// Local interface to bind (SO_BINDTODEVICE).
    pub bind_interface: Option<String>,
    /// Share of packets: a cap with the adaptive scheduler, the share with
    /// round-robin; `None` when not configured.
    pub weight: Option<u32>,
}

impl PathConfig {
    /// Return whether this path's outer packets may be IPv6.
    pub fn may_be_ipv6(&self) -> bool {
        match (self.endpoint, self.bind) {
            (Some(ep), _) => ep.is_ipv6(),
            (None, Some(bind)) => bind.is_ipv6(),
            // An unbound socket is dual-stack and could end up talking IPv6.
            (None, None) => true,
        }
    }
}

/// Default length of the TUN device's transmit queue, where packets wait
/// for mptun to read them. The kernel's 500 is about 20 ms at 300 Mbit/s,
/// less than a busy host can keep mptun from reading. The queue fills only
/// while mptun falls behind (the TUN driver orphans its packets, so TCP
/// small queues do not bound it), and each packet more is latency then:
/// 1000, as on Ethernet devices.
pub const TXQUEUELEN_DEFAULT: u32 = 1000;
const TXQUEUELEN_MIN: u32 = 16;
const TXQUEUELEN_MAX: u32 = 100_000;

/// Things worth telling the operator that do not stop the config from
/// loading.
pub type Warnings = Vec<String>;

impl Config {
    /// Read and validate a config file. Relative key file paths are taken
    /// relative to the config file's folder.
    pub fn load(path: &Path) -> Result<(Config, Warnings), ConfigError> {
        Self::load_with(path, &system_resolver)
    }

    /// [`load`](Self::load) without looking host names up, as `mptun check`
    /// does so that it works offline.
    pub fn load_offline(path: &Path) -> Result<(Config, Warnings), ConfigError> {
        Self::load_with(path, &|_| {
            Err("looked up by `mptun up`, not by `check`".into())
        })
    }

    fn load_with(path: &Path, resolve: Resolver) -> Result<(Config, Warnings), ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: file.clone(),
            key: String::new(),
            message: format!("cannot read config file: {e}"),
        })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let (config, mut warnings) = Self::parse_with(&text, &file, &base, resolve)?;
        if config.secrets_inline {
            warn_if_readable(path, &mut warnings);
        }
        Ok((config, warnings))
    }

    /// Validate config text; `file` names it in errors, `base` is the folder
    /// relative key file paths start from. Endpoint host names are looked up
    /// with the system's resolver.
    pub fn parse(text: &str, file: &str, base: &Path) -> Result<(Config, Warnings), ConfigError> {
        Self::parse_with(text, file, base, &system_resolver)
    }

    /// [`parse`](Self::parse), looking endpoint host names up with
    /// `resolve`.
    pub fn parse_with(
        text: &str,
        file: &str,
        base: &Path,
        resolve: Resolver,
    ) -> Result<(Config, Warnings), ConfigError> {
        let err = |key: &str, message: String| ConfigError {
            file: file.to_string(),
            key: key.to_string(),
            message,
        };
        if crate::import::looks_like_wg_quick(text) {
            return Err(err(
                "",
                "this looks like a wg-quick config: try `mptun import` (one file per tunnel)"
                    .into(),
            ));
        }
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            // Where and what, never the line itself: it may hold a key.
            let at = e.span().map_or(String::new(), |span| {
                let before = &text[..span.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                format!("line {line}, column {column}: ")
            });
            err("", format!("{at}{}", e.message().trim().replace('\n', " ")))
        })?;
        let mut warnings = Warnings::new();

        // [interface]
        let i = &raw.interface;
        let private_key = match (&i.private_key, &i.private_key_file) {
            (Some(_), Some(_)) => {
                return Err(err(
                    "interface",
                    "set either private-key or private-key-file, not both".into(),
                ))
            }
            (None, None) => {
                return Err(err(
                    "interface",
                    "missing private-key-file (or private-key); create one with `mptun genkey`"
                        .into(),
                ))
            }
            (Some(text), None) => Secret::new(
                decode_key(text).map_err(|e| key_err("interface.private-key", e, &err))?,
            ),
            (None, Some(p)) => Secret::new(read_key_file(
                base,
                p,
                "interface.private-key-file",
                &err,
                &mut warnings,
            )?),
        };
        let mut addresses = Vec::new();
        for (n, a) in i.address.iter().enumerate() {
            addresses.push(parse_net(a).map_err(|m| err(&format!("interface.address[{n}]"), m))?);
        }
        let name = i.name.clone().unwrap_or_else(|| "mptun0".to_string());
        if name.is_empty()
            || name.len() > 15
            || name.contains(['/', ' '])
            || name.contains(char::is_whitespace)
        {
            return Err(err(
                "interface.name",
                format!("invalid interface name {name:?}: 1 to 15 characters, no '/' or spaces"),
            ));
        }
        let table = match &i.table {
            None => Table::Auto,
            Some(toml::Value::String(s)) if s == "auto" => Table::Auto,
            Some(toml::Value::String(s)) if s == "off" => Table::Off,
            Some(toml::Value::Integer(n)) if (1..=i64::from(u32::MAX)).contains(n) => {
                Table::Number(*n as u32)
            }
            Some(other) => {
                return Err(err(
                    "interface.table",
                    format!("must be \"auto\", \"off\" or a table number, not {other}"),
                ))
            }
        };
        if i.fwmark == Some(0) {
            return Err(err(
                "interface.fwmark",
                "must not be 0 (0 is no mark); leave it out for 51820".into(),
            ));
        }
        let scheduler = match i.scheduler.as_deref() {
            None | Some("adaptive") => Scheduler::Adaptive,
            Some("round-robin") => Scheduler::RoundRobin,
            Some(other) => {
                return Err(err(
                    "interface.scheduler",
                    format!("must be \"adaptive\" or \"round-robin\", not {other:?}"),
                ))
            }
        };
        let user = match &i.user {
            None => None,
            Some(name) => Some(RunAs::lookup(name).map_err(|m| err("interface.user", m))?),
        };
        let metrics_listen = match &i.metrics_listen {
            None => None,
            Some(text) => Some(text.parse::<SocketAddr>().map_err(|_| {
                err(
                    "interface.metrics-listen",
                    format!("invalid address {text:?}: expected ip:port, e.g. 127.0.0.1:9586"),
                )
            })?),
        };
        let mut reorder = ReorderConfig::default();
        if let Some(ms) = i.reorder_hold_ms {
            if !(1..=10_000).contains(&ms) {
                return Err(err(
                    "interface.reorder-hold-ms",
                    format!("must be 1 to 10000, not {ms}"),
                ));
            }
            reorder.hold = Duration::from_millis(ms);
        }
        let low_latency_dscp = match &i.low_latency_dscp {
            None => DscpSet::LOW_LATENCY,
            Some(values) => {
                let mut set = DscpSet::default();
                for (n, value) in values.iter().enumerate() {
                    let dscp = parse_dscp(value)
                        .ok_or_else(|| err(&format!("interface.low-latency-dscp[{n}]"), format!(
                            "{value} is not a DSCP: expected 0 to 63 or a class name (ef, va, le, cs0 to cs7, af11 to af43)"
                        )))?;
                    set.insert(dscp);
                }
                set
            }
        };

        // [peer]
        let p = &raw.peer;
        let public_key =
            decode_key(&p.public_key).map_err(|e| key_err("peer.public-key", e, &err))?;
        let mut allowed_ips = Vec::new();
        for (n, a) in p.allowed_ips.iter().enumerate() {
            let net = parse_net(a).map_err(|m| err(&format!("peer.allowed-ips[{n}]"), m))?;
            allowed_ips.push(net.trunc());
        }
        if allowed_ips.is_empty() {
            warnings.push(format!(
                "{file}: peer.allowed-ips is empty: every packet from the peer will be dropped"
            ));
        }
        let preshared_key = match (&p.preshared_key, &p.preshared_key_file) {
            (Some(_), Some(_)) => {
                return Err(err(
                    "peer",
                    "set either preshared-key or preshared-key-file, not both".into(),
                ))
            }
            (Some(text), None) => Some(Secret::new(
                decode_key(text).map_err(|e| key_err("peer.preshared-key", e, &err))?,
            )),
            (None, Some(path)) => Some(Secret::new(read_key_file(
                base,
                path,
                "peer.preshared-key-file",
                &err,
                &mut warnings,
            )?)),
            (None, None) => None,
        };
        if p.persistent_keepalive == Some(0) {
            warnings.push(format!(
                "{file}: peer.persistent-keepalive = 0 turns keepalives off"
            ));
        }
        let persistent_keepalive = p.persistent_keepalive.filter(|&s| s > 0);

        // [[path]]
        if raw.path.is_empty() || raw.path.len() > MAX_PATHS {
            return Err(err(
                "path",
                format!(
                    "need 1 to {MAX_PATHS} [[path]] tables, found {}",
                    raw.path.len()
                ),
            ));
        }
        let mut paths = Vec::new();
        for (n, rp) in raw.path.iter().enumerate() {
            let key = |field: &str| format!("path[{n}].{field}");
            let endpoint = match &rp.endpoint {
                None => None,
                Some(text) => match parse_endpoint(text).map_err(|m| err(&key("endpoint"), m))? {
                    Endpoint::Address(addr) => Some(addr),
                    Endpoint::Name => match resolve(text) {
                        Ok(addr) => Some(addr),
                        Err(e) => {
                            warnings.push(format!(
                                "{file}: {}: {e}; until it resolves the path waits and looks it up again in the background",
                                key("endpoint")
                            ));
                            None
                        }
                    },
                },
            };
            let bind = match &rp.bind {
                None => None,
                Some(text) => Some(
                    text.parse::<IpAddr>()
                        .map_err(|_| err(&key("bind"), format!("invalid IP address {text:?}")))?,
                ),
            };
            if let (Some(ep), Some(b)) = (endpoint, bind) {
                if ep.is_ipv4() != b.is_ipv4() {
                    return Err(err(
                        &key("bind"),
                        format!("{b} and endpoint {ep} are of different IP versions"),
                    ));
                }
            }
            if let Some(dev) = &rp.bind_interface {
                if dev.is_empty() || dev.len() > 15 {
                    return Err(err(
                        &key("bind-interface"),
                        format!("invalid interface name {dev:?}"),
                    ));
                }
            }
            let weight = rp.weight;
            if let Some(weight) = weight.filter(|w| !(1..=1000).contains(w)) {
                return Err(err(
                    &key("weight"),
                    format!("must be 1 to 1000, not {weight}"),
                ));
            }
            let listen_port = rp.listen_port.unwrap_or(0);
            if listen_port == 0 && rp.endpoint.is_none() {
                return Err(err(
                    &key("listen-port"),
                    "a path without an endpoint must have a fixed listen-port for the peer to reach".into(),
                ));
            }
            if listen_port != 0 {
                if let Some(other) = paths.iter().position(|q: &PathConfig| {
                    q.listen_port == listen_port
                        && q.bind == bind
                        && q.bind_interface == rp.bind_interface
                }) {
                    return Err(err(
                        &key("listen-port"),
                        format!("port {listen_port} is already used by path[{other}]"),
                    ));
                }
            }
            let endpoint_name = rp
                .endpoint
                .clone()
                .filter(|text| text.parse::<SocketAddr>().is_err());
            if let Some(name) = &rp.name {
                if name.is_empty() || name.len() > 64 || name.chars().any(char::is_control) {
                    return Err(err(
                        &key("name"),
                        "must be 1 to 64 characters, none of them control characters".into(),
                    ));
                }
            }
            paths.push(PathConfig {
                name: rp.name.clone(),
                listen_port,
                endpoint,
                endpoint_name,
                bind,
                bind_interface: rp.bind_interface.clone(),
                weight,
            });
        }

        // With table = "auto", a route in the main table for a network that
        // holds an endpoint would send the tunnel's own packets into the
        // tunnel. A default route is kept from doing so by the paths' mark.
        let default_route = allowed_ips.iter().any(|net| net.prefix_len() == 0);
        if table == Table::Auto {
            for (n, path) in paths.iter().enumerate() {
                let Some(ep) = path.endpoint else { continue };
                if let Some(net) = allowed_ips
                    .iter()
                    .filter(|net| net.prefix_len() > 0)
                    .find(|net| net.contains(&ep.ip().to_canonical()))
                {
                    return Err(err(
                        "peer.allowed-ips",
                        format!(
                            "{net} contains path[{n}].endpoint {ep}; routing it into the tunnel would loop. \
                             Narrow allowed-ips, or set interface.table = \"off\" and route it yourself"
                        ),
                    ));
                }
            }
        }

        let fwmark = match i.fwmark {
            Some(mark) => Some(mark),
            None if table == Table::Auto && default_route => Some(DEFAULT_FWMARK),
            None => None,
        };
        if table == Table::Auto && default_route && user.is_some() {
            return Err(err(
                "interface.user",
                "a default route through the tunnel adds policy rules that only root can \
                 remove at exit: run as root, or set table and route yourself"
                    .into(),
            ));
        }

        let needs_v6_min = addresses.iter().any(|a| a.addr().is_ipv6());
        let mtu = match i.mtu {
            Some(m) => {
                let min = if needs_v6_min { 1280 } else { 576 };
                let max = u32::from(crate::mtu::MAX_MTU);
                if !(min..=max).contains(&m) {
                    return Err(err(
                        "interface.mtu",
                        format!(
                            "must be {min} to {max} (what one UDP datagram carries with \
                             WireGuard's and mptun's overhead), not {m}"
                        ),
                    ));
                }
                Some(m as u16)
            }
            None => None,
        };
        let txqueuelen = match i.txqueuelen {
            Some(n) if !(TXQUEUELEN_MIN..=TXQUEUELEN_MAX).contains(&n) => {
                return Err(err(
                    "interface.txqueuelen",
                    format!("must be {TXQUEUELEN_MIN} to {TXQUEUELEN_MAX}, not {n}"),
                ));
            }
            Some(n) => n,
            None => TXQUEUELEN_DEFAULT,
        };

        let config = Config {
            file: file.to_string(),
            interface: Interface {
                private_key,
                addresses,
                name,
                mtu,
                txqueuelen,
                table,
                fwmark,
                reorder,
                low_latency_dscp,
                scheduler,
                user,
                metrics_listen,
            },
            peer: Peer {
                public_key,
                allowed_ips,
                persistent_keepalive,
                preshared_key,
            },
            paths,
            secrets_inline: i.private_key.is_some() || raw.peer.preshared_key.is_some(),
        };
        Ok((config, warnings))
    }
}

/// A DSCP as a number (0 to 63) or a class name: `ef`, `va`, `le`, `cs0`
/// to `cs7`, `af11` to `af43` (any case).
fn parse_dscp(value: &toml::Value) -> Option<u8> {
    let name = match value {
        toml::Value::Integer(n) => return u8::try_from(*n).ok().filter(|&n| n < 64),
        toml::Value::String(name) => name.to_ascii_lowercase(),
        _ => return None,
    };
    let digit = |c: u8, range: std::ops::RangeInclusive<u8>| {
        let d = c.wrapping_sub(b'0');
        range.contains(&d).then_some(d)
    };
    match name.as_bytes() {
        b"ef" => Some(46),
        b"va" => Some(44),
        b"le" => Some(1),
        [b'c', b's', n] => digit(*n, 0..=7).map(|n| 8 * n),
        [b'a', b'f', class, drop] => Some(8 * digit(*class, 1..=4)? + 2 * digit(*drop, 1..=3)?),
        _ => None,
    }
}

fn key_err(key: &str, e: KeyError, err: &impl Fn(&str, String) -> ConfigError) -> ConfigError {
    err(key, e.to_string())
}

fn read_key_file(
    base: &Path,
    path: &str,
    key: &str,
    err: &impl Fn(&str, String) -> ConfigError,
    warnings: &mut Warnings,
) -> Result<[u8; 32], ConfigError> {
    let full: PathBuf = base.join(path);
    let text = std::fs::read_to_string(&full)
        .map_err(|e| err(key, format!("cannot read {}: {e}", full.display())))?;
    warn_if_readable(&full, warnings);
    decode_key(&text).map_err(|e| err(key, format!("{}: {e}", full.display())))
}

/// Warn if `file`, which holds a secret, is readable by group or others.
fn warn_if_readable(file: &Path, warnings: &mut Warnings) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(file) {
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            warnings.push(format!(
                "{} holds a key and is readable by group or others (mode {:o}); run `chmod 600 {}`",
                file.display(),
                mode & 0o777,
                file.display()
            ));
        }
    }
}

/// Look up a `host:port` endpoint's address (the host is not an IP
/// address); an error says why not, for the operator.
pub type Resolver<'a> = &'a dyn Fn(&str) -> Result<SocketAddr, String>;

/// Parse `addr/prefix`; a bare address is a host route (/32 or /128), as
/// wg-quick takes it.
fn parse_net(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("invalid IP network {text:?}: expected addr/prefix, e.g. 10.0.0.0/24"))
}

/// Look a `host:port` up with the system's resolver, now, once.
pub fn system_resolver(text: &str) -> Result<SocketAddr, String> {
    let mut addrs = text
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {text:?}: {e}"))?;
    addrs
        .next()
        .ok_or_else(|| format!("cannot resolve {text:?}: no addresses"))
}

/// What an endpoint as written is.
enum Endpoint {
    Address(SocketAddr),
    /// `hostname:port`, to look up.
    Name,
}

/// Parse `ip:port`, `[ipv6]:port` or `hostname:port`.
fn parse_endpoint(text: &str) -> Result<Endpoint, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(Endpoint::Address(addr));
    }
    if text.parse::<IpAddr>().is_ok() {
        return Err(format!("invalid socket address {text:?}: missing :port"));
    }
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err(format!(
            "invalid socket address {text:?}: expected host:port"
        ));
    };
    if host.is_empty() || port.parse::<u16>().is_err() || host.parse::<IpAddr>().is_ok() {
        return Err(format!(
            "invalid socket address {text:?}: expected host:port"
        ));
    }
    Ok(Endpoint::Name)
}

#[cfg(test)]
mod tests;
