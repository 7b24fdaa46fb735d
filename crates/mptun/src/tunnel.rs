//! A running tunnel: the real TUN device and sockets, the routes, the
//! driver's tasks (see [`crate::driver`]) and the status server.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use mptun_core::PathId;
use socket2::{Domain, Protocol, Socket, Type};
use tracing::{debug, info, warn};

use crate::config::{Config, PathConfig};
use crate::driver::Driver;
use crate::mtu::{tun_mtu, MtuSource};
use crate::tun::Tun;
use crate::udp::UdpPath;

/// Socket buffer size asked for on every path; generous because a burst
/// striped over paths arrives on all of them at once.
const SOCKET_BUFFER: usize = 4 << 20;

/// Build the UDP socket of one path.
fn bind_path_socket(id: PathId, path: &PathConfig, fwmark: Option<u32>) -> anyhow::Result<UdpPath> {
    let bind_ip = match (path.bind, path.endpoint) {
        (Some(ip), _) => ip,
        (None, Some(SocketAddr::V4(_))) => IpAddr::from([0u8; 4]),
        (None, _) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    let addr = SocketAddr::new(bind_ip, path.listen_port);
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))
        .with_context(|| format!("{id}: create UDP socket"))?;
    if addr.is_ipv6() && path.bind.is_none() {
        // Dual-stack, so a responder is reachable over either IP version.
        socket
            .set_only_v6(false)
            .with_context(|| format!("{id}: make socket dual-stack"))?;
    }
    if let Some(dev) = &path.bind_interface {
        socket
            .bind_device(Some(dev.as_bytes()))
            .with_context(|| format!("{id}: bind to interface {dev:?} (SO_BINDTODEVICE)"))?;
    }
    if let Some(mark) = fwmark {
        // Policy routing keeps marked packets out of the tunnel.
        socket
            .set_mark(mark)
            .with_context(|| format!("{id}: mark packets {mark} (SO_MARK)"))?;
    }
    set_buffer_sizes(&socket);
    socket.set_nonblocking(true)?;
    socket
        .bind(&addr.into())
        .with_context(|| format!("{id}: bind UDP {addr}"))?;
    let socket = UdpPath::new(socket.into()).with_context(|| format!("{id}: set up UDP socket"))?;
    let (gso, gro) = (socket.gso_segments(), socket.gro_segments());
    if gso > 1 && gro > 1 {
        debug!(path = %id, gso, gro, "UDP offload: datagrams per send and per receive");
    } else {
        info!(path = %id, gso, gro, "UDP offload unavailable: one datagram per send or receive buffer");
    }
    Ok(socket)
}

/// Ask for large socket buffers, past `net.core.[rw]mem_max` when running as
/// root (SO_*BUFFORCE), as wireguard-go does.
fn set_buffer_sizes(socket: &Socket) {
    use std::os::fd::AsRawFd;
    let fd = socket.as_raw_fd();
    let size = SOCKET_BUFFER as libc::c_int;
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        // SAFETY: fd is a valid socket for the duration of the call and the
        // option value points at a live c_int of the size passed.
        let forced = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                force,
                (&size as *const libc::c_int).cast(),
                4,
            )
        };
        if forced != 0 {
            // SAFETY: as above.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    plain,
                    (&size as *const libc::c_int).cast(),
                    4,
                );
            }
        }
    }
}

/// Create the TUN device with its addresses, MTU and queue length, up; with
/// the kernel's segmentation offloads where it has them.
fn create_tun(config: &Config, mtu: u16) -> anyhow::Result<Tun> {
    let i = &config.interface;
    let build = |offload: bool| {
        tun_rs::DeviceBuilder::new()
            .name(&i.name)
            .mtu(mtu)
            .tx_queue_len(i.txqueuelen)
            .offload(offload)
            .enable(true)
            .build_async()
    };
    let dev = match build(true) {
        Ok(dev) => dev,
        Err(e) => {
            debug!(error = %e, "TUN device with offload");
            build(false)
        }
        .with_context(|| {
            format!(
                "create TUN device {:?} (is another mptun using that name?)",
                i.name
            )
        })?,
    };
    for a in &i.addresses {
        match a.addr() {
            IpAddr::V4(v4) => dev.add_address_v4(v4, a.prefix_len()),
            IpAddr::V6(v6) => dev.add_address_v6(v6, a.prefix_len()),
        }
        .with_context(|| format!("add address {a} to {}", i.name))?;
    }
    let tun = Tun::new(dev);
    if tun.offload() {
        debug!("TUN offload: reads split segments, writes coalesce them");
    } else {
        warn!("TUN offload unavailable: one packet per read and write");
    }
    Ok(tun)
}

/// How long a reload waits for a restarted path's handshake before it
/// restarts the next one.
const RESTART_WAIT: Duration = Duration::from_secs(5);

/// Return whether two configs of a path use the same socket and peer
/// address, so that the path can keep running.
fn same_socket(a: &PathConfig, b: &PathConfig) -> bool {
    a.listen_port == b.listen_port
        && a.endpoint == b.endpoint
        && a.endpoint_name == b.endpoint_name
        && a.bind == b.bind
        && a.bind_interface == b.bind_interface
}

/// Return the keys that differ between `old` and `new` and cannot change
/// while the tunnel runs.
fn fixed_changes(old: &Config, new: &Config) -> Vec<&'static str> {
    let (i, j) = (&old.interface, &new.interface);
    let (p, q) = (&old.peer, &new.peer);
    let psk = |c: &Config| c.peer.preshared_key.as_ref().map(|k| *k.bytes());
    [
        (
            i.private_key.bytes() != j.private_key.bytes(),
            "interface.private-key",
        ),
        (i.addresses != j.addresses, "interface.address"),
        (i.name != j.name, "interface.name"),
        (i.mtu != j.mtu, "interface.mtu"),
        (i.txqueuelen != j.txqueuelen, "interface.txqueuelen"),
        (i.table != j.table, "interface.table"),
        (i.fwmark != j.fwmark, "interface.fwmark"),
        (i.reorder != j.reorder, "interface.reorder-hold-ms"),
        (
            i.low_latency_dscp != j.low_latency_dscp,
            "interface.low-latency-dscp",
        ),
        (i.scheduler != j.scheduler, "interface.scheduler"),
        (i.user != j.user, "interface.user"),
        (
            i.metrics_listen != j.metrics_listen,
            "interface.metrics-listen",
        ),
        (p.public_key != q.public_key, "peer.public-key"),
        (psk(old) != psk(new), "peer.preshared-key"),
        (p.allowed_ips != q.allowed_ips, "peer.allowed-ips"),
    ]
    .into_iter()
    .filter_map(|(differs, key)| differs.then_some(key))
    .collect()
}

/// A running tunnel: [`shutdown`](Self::shutdown) it to tear down.
pub struct Tunnel {
    driver: Driver,
    /// The config in force: the last one loaded, or reloaded.
    config: Arc<Config>,
    routes: crate::net::Routes,
    status: Option<crate::status::StatusServer>,
    metrics: Option<crate::metrics::MetricsServer>,
    /// What came of reloads, for `mptun show` and `mptun reload`.
    reloads: Arc<std::sync::Mutex<crate::status::Reloads>>,
    name: String,
}

impl Tunnel {
    /// Bring the tunnel up: TUN device, sockets, routes, tasks.
    pub async fn start(config: Config, epoch: u32) -> anyhow::Result<Tunnel> {
        let mut sockets = Vec::new();
        for (n, pc) in config.paths.iter().enumerate() {
            sockets.push(bind_path_socket(
                PathId(n as u8),
                pc,
                config.interface.fwmark,
            )?);
        }
        let mtu = tun_mtu(&config);
        match &mtu.source {
            MtuSource::Configured { fits } if u32::from(mtu.mtu) > *fits => warn!(
                mtu = mtu.mtu,
                fits,
                "interface.mtu is more than fits the paths' MTU: outer packets will be fragmented"
            ),
            source => info!(mtu = mtu.mtu, %source, "TUN MTU"),
        }
        let tun = create_tun(&config, mtu.mtu)?;
        let mut routes = crate::net::Routes::add(&config)?;
        let name = config.interface.name.clone();
        let user = config.interface.user.clone();
        let config = Arc::new(config);
        let driver = Driver::spawn(config.clone(), epoch, tun, mtu, sockets)?;
        let reloads = Arc::default();
        let snapshots = crate::status::Snapshots {
            requests: driver.status.clone(),
            reloads: Arc::clone(&reloads),
        };
        let status = match crate::status::StatusServer::start(&name, snapshots.clone()) {
            Ok(server) => Some(server),
            Err(e) => {
                warn!(error = %format!("{e:#}"), "`mptun show` will not work");
                None
            }
        };
        let metrics = match config.interface.metrics_listen {
            Some(addr) => Some(crate::metrics::MetricsServer::start(addr, snapshots).await?),
            None => None,
        };
        if let Some(user) = &user {
            if let Some(status) = &status {
                status.hand_to(user)?;
            }
            user.become_user()
                .with_context(|| format!("drop root for user {:?}", user.name))?;
            routes.leave_to_device();
            info!(user = %user.name, uid = user.uid, "running as an unprivileged user, with no capabilities");
        }
        Ok(Tunnel {
            driver,
            config,
            routes,
            status,
            metrics,
            reloads,
            name,
        })
    }

    /// Wait until one of the tunnel's tasks ends, which it does only when
    /// something failed for good; return what.
    pub async fn failed(&mut self) -> anyhow::Error {
        loop {
            return match self.driver.tasks.join_next().await {
                // A path's worker a reload stopped.
                Some(Err(e)) if e.is_cancelled() => continue,
                Some(Ok(Ok(()))) => anyhow::anyhow!("a task of the tunnel stopped"),
                Some(Ok(Err(e))) => e,
                Some(Err(e)) => anyhow::Error::new(e).context("a task of the tunnel died"),
                None => anyhow::anyhow!("the tunnel has no tasks"),
            };
        }
    }

    /// Take a reloaded config without stopping the paths it leaves alone:
    /// paths past the last are retired, new ones added, changed ones (or
    /// all, when the keepalive changed) restarted one at a time, each given
    /// up to [`RESTART_WAIT`] to come back before the next; weights apply at
    /// once. A config that changes what cannot change live is refused and
    /// the one in force stays. Return what changed.
    pub async fn reload(&mut self, new: anyhow::Result<Config>) -> anyhow::Result<String> {
        let outcome = match new {
            Ok(config) => self.apply(config).await,
            Err(e) => Err(e),
        };
        let mut reloads = self.reloads.lock().unwrap_or_else(|p| p.into_inner());
        reloads.count += 1;
        match &outcome {
            Ok(summary) => {
                reloads.last_summary = Some(summary.clone());
                reloads.last_error = None;
            }
            Err(e) => reloads.last_error = Some(format!("{e:#}")),
        }
        outcome
    }

    async fn apply(&mut self, new: Config) -> anyhow::Result<String> {
        let old = self.config.clone();
        let fixed = fixed_changes(&old, &new);
        if !fixed.is_empty() {
            anyhow::bail!(
                "{} cannot change while the tunnel runs (restart it for that); the config in force stays",
                fixed.join(", ")
            );
        }
        let keepalive_changed = old.peer.persistent_keepalive != new.peer.persistent_keepalive;
        let kept = old.paths.len().min(new.paths.len());
        let changed: Vec<usize> = (0..kept)
            .filter(|&n| keepalive_changed || !same_socket(&old.paths[n], &new.paths[n]))
            .collect();
        let new = Arc::new(new);
        // Bind the added paths first: if one cannot be, nothing changes.
        let mut added = Vec::new();
        for n in old.paths.len()..new.paths.len() {
            added.push(bind_path_socket(
                PathId(n as u8),
                &new.paths[n],
                new.interface.fwmark,
            )?);
        }
        let retired: Vec<PathId> = (new.paths.len()..old.paths.len())
            .map(|n| PathId(n as u8))
            .collect();
        self.driver.close_paths(retired.clone()).await;
        for id in retired {
            self.driver.stop_path(id).await;
            info!(path = %id, "path removed");
        }
        self.driver.set_session_config(&new);
        for &n in &changed {
            let id = PathId(n as u8);
            self.driver.close_paths(vec![id]).await;
            self.driver.stop_path(id).await;
            let socket = bind_path_socket(id, &new.paths[n], new.interface.fwmark)?;
            let path = self.driver.new_path(id, socket, &new.paths[n])?;
            let info = path.info();
            self.driver.reconfigure(new.clone(), vec![path]).await;
            info!(path = %id, "path restarted with its new settings");
            let deadline = tokio::time::Instant::now() + RESTART_WAIT;
            while info.handshake().0.is_none() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let mut paths = Vec::new();
        for (socket, n) in added.into_iter().zip(old.paths.len()..) {
            paths.push(
                self.driver
                    .new_path(PathId(n as u8), socket, &new.paths[n])?,
            );
            info!(path = %PathId(n as u8), "path added");
        }
        self.driver.reconfigure(new.clone(), paths).await;
        let summary = format!(
            "{} path(s): {} added, {} removed, {} restarted",
            new.paths.len(),
            new.paths.len().saturating_sub(old.paths.len()),
            old.paths.len().saturating_sub(new.paths.len()),
            changed.len()
        );
        self.config = new;
        Ok(summary)
    }

    /// Stop every task, remove the routes, and close the TUN device (which
    /// deletes it).
    pub async fn shutdown(mut self) {
        self.status = None;
        self.metrics = None;
        self.driver.tasks.shutdown().await;
        self.routes.remove();
        info!(interface = %self.name, "tunnel down");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra_interface: &str, keepalive: u16, paths: &[u16]) -> Config {
        let mut text = format!(
            "[interface]\nprivate-key = \"dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=\"\n\
             address = [\"10.77.0.1/24\"]\n{extra_interface}\n\
             [peer]\npublic-key = \"hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=\"\n\
             allowed-ips = [\"10.77.0.0/24\"]\npersistent-keepalive = {keepalive}\n"
        );
        for port in paths {
            text.push_str(&format!(
                "[[path]]\nlisten-port = {port}\nendpoint = \"192.0.2.1:{port}\"\n"
            ));
        }
        Config::parse(&text, "t.toml", std::path::Path::new("/x"))
            .unwrap()
            .0
    }

    #[test]
    fn only_paths_weights_and_keepalive_change_live() {
        let old = config("", 10, &[5000, 5001]);
        assert!(fixed_changes(&old, &config("", 25, &[5000, 5001, 5002])).is_empty());
        assert_eq!(
            fixed_changes(&old, &config("mtu = 1300\ntable = \"off\"", 10, &[5000])),
            ["interface.mtu", "interface.table"]
        );
        let moved = config("", 10, &[5000, 5009]);
        assert!(same_socket(&old.paths[0], &moved.paths[0]));
        assert!(!same_socket(&old.paths[1], &moved.paths[1]));
    }
}
