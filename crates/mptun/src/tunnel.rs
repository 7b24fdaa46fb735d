//! A running tunnel: the real TUN device and sockets, the routes, the
//! driver's tasks (see [`crate::driver`]) and the status server.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use anyhow::Context;
use mptun_core::PathId;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::task::JoinSet;
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

/// A running tunnel: [`shutdown`](Self::shutdown) it to tear down.
pub struct Tunnel {
    tasks: JoinSet<anyhow::Result<()>>,
    routes: crate::net::Routes,
    status: Option<crate::status::StatusServer>,
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
        let driver = Driver::spawn(Arc::new(config), epoch, tun, mtu, sockets)?;
        let status = match crate::status::StatusServer::start(&name, driver.status.clone()) {
            Ok(server) => Some(server),
            Err(e) => {
                warn!(error = %format!("{e:#}"), "`mptun show` will not work");
                None
            }
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
            tasks: driver.tasks,
            routes,
            status,
            name,
        })
    }

    /// Wait until one of the tunnel's tasks ends, which it does only when
    /// something failed for good; return what.
    pub async fn failed(&mut self) -> anyhow::Error {
        match self.tasks.join_next().await {
            Some(Ok(Ok(()))) => anyhow::anyhow!("a task of the tunnel stopped"),
            Some(Ok(Err(e))) => e,
            Some(Err(e)) => anyhow::Error::new(e).context("a task of the tunnel died"),
            None => anyhow::anyhow!("the tunnel has no tasks"),
        }
    }

    /// Stop every task, remove the routes, and close the TUN device (which
    /// deletes it).
    pub async fn shutdown(mut self) {
        self.status = None;
        self.tasks.shutdown().await;
        self.routes.remove();
        info!(interface = %self.name, "tunnel down");
    }
}
