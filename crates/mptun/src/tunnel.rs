//! The I/O edge: the TUN device, one UDP socket per path, and the tasks that
//! move packets between them through the sans-IO core.
//!
//! Tasks, and what they own:
//! - one TUN reader: numbers each packet and picks its path ([`Multipath`]),
//!   seals it with that path's session and sends it on that path's socket;
//! - one receiver per path: opens datagrams with the path's session and
//!   hands packets to the [`ReorderBuffer`], writing what it releases to the
//!   TUN device while holding the buffer's lock, so two paths can never
//!   interleave their writes out of order; it sends the NACKs the buffer
//!   asks for, and resends from the [`SentLog`] what the peer's NACKs ask
//!   for;
//! - one reorder timer: skips gaps once they have been held long enough;
//! - one monitor: sends the probes that measure every path, marks paths down
//!   and up, logs those changes, and adapts the reorder hold time;
//! - one WireGuard timer: handshakes, rekeys and keepalives of every path.
//!
//! Each path's session has a mutex of its own (the TUN reader seals while the
//! path's receiver opens), so paths do not contend with each other.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::Context;
use mptun_core::control::{PROBE_LEN, SHIM_LEN};
use mptun_core::repair::{decode_nack, encode_nack, NACK_MAX, NACK_MAX_LEN};
use mptun_core::{
    Kind, Multipath, PathId, PathState, Policy, Probe, ReorderBuffer, SentLog, Seq, Trailer,
    Verdict, TRAILER_LEN,
};
use mptun_wg::{Opened, PathSession, SessionConfig};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;
use tokio::sync::Notify;
use tracing::{debug, info, warn};
use tun_rs::AsyncDevice;

use crate::config::{Config, PathConfig, Scheduler};
use crate::counters::{PathCounters, TunCounters};

/// Socket buffer size asked for on every path; generous because a burst
/// striped over paths arrives on all of them at once.
const SOCKET_BUFFER: usize = 4 << 20;

/// How often WireGuard's timers run, as boringtun expects.
const WG_TICK: Duration = Duration::from_millis(250);

/// Ticks between handshake initiations while a path has no session.
const RETRY_TICKS: u64 = 4;

/// Largest datagram or TUN packet handled.
const MAX_PACKET: usize = 65_535;

/// Lock a mutex, carrying on if a task panicked while holding it: the state
/// behind every mutex here stays consistent between statements.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One path's socket, session and state.
pub(crate) struct PathIo {
    pub id: PathId,
    pub socket: UdpSocket,
    pub local: SocketAddr,
    pub session: Mutex<PathSession>,
    /// The peer's address for this path: configured, or learned from the
    /// last authenticated datagram (WireGuard's roaming).
    endpoint: Mutex<Option<SocketAddr>>,
    /// Whether the WireGuard session was established at the last look.
    established: AtomicBool,
    pub counters: PathCounters,
}

impl PathIo {
    pub fn endpoint(&self) -> Option<SocketAddr> {
        *lock(&self.endpoint)
    }

    fn learn_endpoint(&self, from: SocketAddr) {
        let mut ep = lock(&self.endpoint);
        if *ep != Some(from) {
            info!(path = %self.id, endpoint = %from, "peer endpoint learned");
            *ep = Some(from);
        }
    }

    /// Tell the monitor when the session comes or goes.
    fn note_session(&self, shared: &Shared, established: bool) {
        if self.established.swap(established, Relaxed) != established {
            lock(&shared.multipath).set_session(Instant::now(), self.id, established);
            shared.monitor_wake.notify_one();
        }
    }

    /// Seal `plain` (trailer included) and send it, if the path has a
    /// session and a peer address; return whether it went out. A failed
    /// send is counted here.
    async fn seal_and_send(&self, plain: &[u8], sealed: &mut [u8]) -> bool {
        let sealed_len = lock(&self.session).seal(plain, sealed).map(<[u8]>::len);
        let (Some(n), Some(to)) = (sealed_len, self.destination()) else {
            return false;
        };
        let sent = self.socket.send_to(&sealed[..n], to).await.is_ok();
        if !sent {
            self.counters.send_errors.bump();
        }
        sent
    }

    /// Address to send to, mapped to IPv6 when the socket is dual-stack.
    fn destination(&self) -> Option<SocketAddr> {
        let ep = self.endpoint()?;
        Some(match (self.local, ep) {
            (SocketAddr::V6(_), SocketAddr::V4(v4)) => {
                SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port())
            }
            _ => ep,
        })
    }
}

/// The reorder buffer, and the deadline its timer task sleeps until, under
/// one lock: a receiver wakes the timer only when a gap needs skipping
/// sooner than that. Waking it for every buffered packet costs a context
/// switch per packet, which the CPU budget of a gateway cannot spare.
pub(crate) struct Receiver {
    pub buffer: ReorderBuffer,
    /// `None` while the timer waits with no deadline.
    timer_deadline: Option<Instant>,
}

/// State shared by all tasks of one running tunnel.
pub(crate) struct Shared {
    pub config: Config,
    pub tun: AsyncDevice,
    pub paths: Vec<PathIo>,
    pub multipath: Mutex<Multipath>,
    pub receiver: Mutex<Receiver>,
    /// What was sent lately, for resending what the peer asks for again.
    sent: Mutex<SentLog>,
    reorder_wake: Notify,
    monitor_wake: Notify,
    pub tun_counters: TunCounters,
    pub started: Instant,
}

impl Shared {
    fn allowed(&self, ip: IpAddr) -> bool {
        self.config
            .peer
            .allowed_ips
            .iter()
            .any(|net| net.contains(ip))
    }

    /// Write released packets to the TUN device. Called with the reorder
    /// buffer locked, which is what keeps the writes in order.
    fn write_released(&self, rx: &mut Receiver) {
        while let Some(packet) = rx.buffer.poll_release() {
            self.write_tun(&packet);
            rx.buffer.recycle(packet);
        }
    }

    /// Wake the reorder timer if the buffer now has a deadline earlier than
    /// the one the timer sleeps until.
    fn rearm_reorder_timer(&self, rx: &mut Receiver) {
        let Some(next) = rx.buffer.poll_timeout() else {
            return;
        };
        if rx.timer_deadline.is_none_or(|armed| next < armed) {
            rx.timer_deadline = Some(next);
            self.reorder_wake.notify_one();
        }
    }

    fn write_tun(&self, packet: &[u8]) {
        // A TUN write hands the packet to the kernel's receive path and does
        // not block; `try_send` keeps it synchronous under the lock.
        match self.tun.try_send(packet) {
            Ok(_) => self.tun_counters.written_packets.bump(),
            Err(_) => self.tun_counters.write_errors.bump(),
        }
    }
}

/// Build the UDP socket of one path.
fn bind_path_socket(id: PathId, path: &PathConfig) -> anyhow::Result<UdpSocket> {
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
    set_buffer_sizes(&socket);
    socket.set_nonblocking(true)?;
    socket
        .bind(&addr.into())
        .with_context(|| format!("{id}: bind UDP {addr}"))?;
    UdpSocket::from_std(socket.into()).with_context(|| format!("{id}: register socket"))
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

/// Create the TUN device with its addresses, MTU and queue length, up.
fn create_tun(config: &Config) -> anyhow::Result<AsyncDevice> {
    let i = &config.interface;
    let tun = tun_rs::DeviceBuilder::new()
        .name(&i.name)
        .mtu(i.mtu)
        .tx_queue_len(i.txqueuelen)
        .enable(true)
        .build_async()
        .with_context(|| {
            format!(
                "create TUN device {:?} (is another mptun using that name?)",
                i.name
            )
        })?;
    for a in &i.addresses {
        match a.addr {
            IpAddr::V4(v4) => tun.add_address_v4(v4, a.prefix),
            IpAddr::V6(v6) => tun.add_address_v6(v6, a.prefix),
        }
        .with_context(|| format!("add address {a} to {}", i.name))?;
    }
    Ok(tun)
}

/// A running tunnel: drop or [`shutdown`](Self::shutdown) it to tear down.
pub struct Tunnel {
    shared: Arc<Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    routes: crate::net::Routes,
    status: Option<crate::status::StatusServer>,
}

impl Tunnel {
    /// Bring the tunnel up: TUN device, sockets, routes, tasks.
    pub async fn start(config: Config, epoch: u32) -> anyhow::Result<Tunnel> {
        let session_config = SessionConfig {
            private_key: config.interface.private_key,
            peer_public_key: config.peer.public_key,
            preshared_key: config.peer.preshared_key,
            persistent_keepalive: config.peer.persistent_keepalive,
        };
        let mut paths = Vec::new();
        for (n, pc) in config.paths.iter().enumerate() {
            let id = PathId(n as u8);
            let socket = bind_path_socket(id, pc)?;
            let local = socket.local_addr()?;
            paths.push(PathIo {
                id,
                socket,
                local,
                session: Mutex::new(PathSession::new(&session_config, n as u8)),
                endpoint: Mutex::new(pc.endpoint),
                established: AtomicBool::new(false),
                counters: PathCounters::default(),
            });
        }
        let tun = create_tun(&config)?;
        let routes = crate::net::Routes::add(&config)?;
        let policy = scheduling_policy(&config);
        let shared = Arc::new(Shared {
            multipath: Mutex::new(Multipath::new(
                Instant::now(),
                epoch,
                config.paths.len(),
                policy,
            )),
            receiver: Mutex::new(Receiver {
                buffer: ReorderBuffer::new(config.interface.reorder),
                timer_deadline: None,
            }),
            // A NACK for what the peer's reorder window has passed comes too
            // late to help: the log spans no more than that window.
            sent: Mutex::new(SentLog::new(config.interface.reorder.capacity)),
            reorder_wake: Notify::new(),
            monitor_wake: Notify::new(),
            tun,
            paths,
            tun_counters: TunCounters::default(),
            started: Instant::now(),
            config,
        });
        for path in &shared.paths {
            match path.endpoint() {
                Some(endpoint) => {
                    info!(path = %path.id, local = %path.local, %endpoint, "listening")
                }
                None => {
                    info!(path = %path.id, local = %path.local, "listening; waiting for the peer to connect")
                }
            }
        }

        let mut tasks = vec![
            tokio::spawn(tun_to_paths(shared.clone())),
            tokio::spawn(reorder_timer(shared.clone())),
            tokio::spawn(monitor(shared.clone())),
            tokio::spawn(wireguard_timers(shared.clone())),
        ];
        for n in 0..shared.paths.len() {
            tasks.push(tokio::spawn(path_to_tun(shared.clone(), n)));
        }
        let status = match crate::status::StatusServer::start(shared.clone()) {
            Ok(server) => Some(server),
            Err(e) => {
                warn!(error = %format!("{e:#}"), "`mptun show` will not work");
                None
            }
        };
        Ok(Tunnel {
            shared,
            tasks,
            routes,
            status,
        })
    }

    /// Stop every task, remove the routes, and close the TUN device (which
    /// deletes it).
    pub async fn shutdown(mut self) {
        self.status = None;
        for task in &self.tasks {
            task.abort();
        }
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
        self.routes.remove();
        info!(interface = %self.shared.config.interface.name, "tunnel down");
    }
}

/// TUN device to paths: number, schedule, seal, send.
async fn tun_to_paths(shared: Arc<Shared>) {
    let mut buf = vec![0u8; MAX_PACKET + TRAILER_LEN];
    let mut sealed = vec![0u8; PathSession::sealed_len(MAX_PACKET + TRAILER_LEN)];
    let counters = &shared.tun_counters;
    loop {
        let n = match shared.tun.recv(&mut buf[..MAX_PACKET]).await {
            Ok(n) => n,
            Err(e) => {
                warn!(error = %e, "reading the TUN device failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        counters.read_packets.bump();
        let destination = match inner_destination(&buf[..n]) {
            Some(ip) => ip,
            None => {
                counters.dropped_not_ip.bump();
                continue;
            }
        };
        if !shared.allowed(destination) {
            // Cryptokey routing, as WireGuard does: only what the peer may
            // receive is sent to it.
            counters.dropped_disallowed_destination.bump();
            continue;
        }
        let picked = lock(&shared.multipath).handle_outbound(Instant::now(), n);
        let Some((path_id, trailer)) = picked else {
            counters.dropped_no_path.bump();
            continue;
        };
        lock(&shared.sent).record(trailer.seq, path_id, &buf[..n]);
        send_data(&shared, path_id, &trailer, &mut buf, n, &mut sealed).await;
    }
}

/// Seal the inner packet `buf[..n]` with `trailer` appended (`buf` has room
/// for it) and send it on `path_id`.
async fn send_data(
    shared: &Shared,
    path_id: PathId,
    trailer: &Trailer,
    buf: &mut [u8],
    n: usize,
    sealed: &mut [u8],
) {
    trailer.encode(&mut buf[n..n + TRAILER_LEN]);
    let path = &shared.paths[path_id.index()];
    if path.seal_and_send(&buf[..n + TRAILER_LEN], sealed).await {
        path.counters.tx_packets.bump();
        path.counters.tx_bytes.add(n as u64);
    }
}

/// Resend the data packets a NACK from the peer asks for, each on the path
/// where it arrives soonest, other than the one that lost it.
async fn resend(shared: &Shared, nack: &[u8], buf: &mut [u8], sealed: &mut [u8]) -> bool {
    let Ok((epoch, seqs)) = decode_nack(nack) else {
        return false;
    };
    let our_epoch = lock(&shared.multipath).epoch();
    if epoch != our_epoch {
        return true; // for a run of ours before a restart: nothing to resend
    }
    for seq in seqs {
        let Some((lost_on, n)) = lock(&shared.sent)
            .take_for_resend(seq)
            .map(|(path, packet)| {
                buf[..packet.len()].copy_from_slice(packet);
                (path, packet.len())
            })
        else {
            continue;
        };
        let picked = lock(&shared.multipath).handle_repair(Instant::now(), seq, n, lost_on);
        if let Some((path_id, trailer)) = picked {
            shared.paths[path_id.index()].counters.resent.bump();
            send_data(shared, path_id, &trailer, buf, n, sealed).await;
        }
    }
    true
}

/// Ask the peer for the packets the reorder buffer found lost, on the paths
/// the monitor picks for NACKs.
async fn send_nacks(shared: &Shared, lost: &[Seq], epoch: u32) {
    let (paths, trailer) = {
        let mp = lock(&shared.multipath);
        let trailer = Trailer {
            seq: Seq(0),
            path_seq: Seq(0),
            epoch: mp.epoch(),
            paths_in_use: mp.paths_in_use(),
            kind: Kind::Nack,
            congested: false,
        };
        (mp.nack_paths(), trailer)
    };
    let mut plain = [0u8; NACK_MAX_LEN + TRAILER_LEN];
    let mut sealed = vec![0u8; PathSession::sealed_len(plain.len())];
    for chunk in lost.chunks(NACK_MAX) {
        let len = encode_nack(epoch, chunk, &mut plain);
        trailer.encode(&mut plain[len..len + TRAILER_LEN]);
        for path_id in paths.iter() {
            shared.paths[path_id.index()]
                .seal_and_send(&plain[..len + TRAILER_LEN], &mut sealed)
                .await;
        }
    }
}

/// Return the destination address of an IPv4 or IPv6 packet.
fn inner_destination(packet: &[u8]) -> Option<IpAddr> {
    match packet.first()? >> 4 {
        4 if packet.len() >= 20 => Some(IpAddr::from(<[u8; 4]>::try_from(&packet[16..20]).ok()?)),
        6 if packet.len() >= 40 => Some(IpAddr::from(<[u8; 16]>::try_from(&packet[24..40]).ok()?)),
        _ => None,
    }
}

/// One path's socket to the TUN device: open, check, reorder, write.
async fn path_to_tun(shared: Arc<Shared>, index: usize) {
    let path = &shared.paths[index];
    let mut buf = vec![0u8; MAX_PACKET];
    let mut out = vec![0u8; MAX_PACKET];
    let mut resend_buf = vec![0u8; MAX_PACKET + TRAILER_LEN];
    let mut resend_sealed = vec![0u8; PathSession::sealed_len(MAX_PACKET + TRAILER_LEN)];
    loop {
        let (n, from) = match path.socket.recv_from(&mut buf).await {
            Ok(x) => x,
            Err(e) => {
                // ICMP errors surface here on some kernels; the path's other
                // traffic, and every other path, carry on.
                path.counters.recv_errors.bump();
                debug!(path = %path.id, error = %e, "receive error");
                continue;
            }
        };
        let from = SocketAddr::new(from.ip().to_canonical(), from.port());
        let mut replies: Vec<Vec<u8>> = Vec::new();
        let (opened, established) = {
            let mut session = lock(&path.session);
            let opened = session.open(from.ip(), &buf[..n], &mut out, |r| replies.push(r.to_vec()));
            (opened, session.is_established())
        };
        match opened {
            Opened::Rejected(e) => {
                path.counters.rejected.count(e);
                continue;
            }
            Opened::CookieChallenge => {}
            Opened::Control => path.learn_endpoint(from),
            Opened::Packet {
                packet, trailer, ..
            } if trailer.kind == Kind::Control => {
                path.learn_endpoint(from);
                match Probe::decode(packet) {
                    Ok(probe) => {
                        lock(&shared.multipath).handle_probe(
                            Instant::now(),
                            path.id,
                            trailer.epoch,
                            &probe,
                        );
                        path.counters.rx_probes.bump();
                    }
                    Err(_) => path.counters.bad_probes.bump(),
                }
            }
            Opened::Packet {
                packet, trailer, ..
            } if trailer.kind == Kind::Nack => {
                path.learn_endpoint(from);
                if !resend(&shared, packet, &mut resend_buf, &mut resend_sealed).await {
                    path.counters.bad_probes.bump();
                }
            }
            Opened::Packet {
                packet,
                source,
                trailer,
            } => {
                path.learn_endpoint(from);
                if !shared.allowed(source) {
                    shared.tun_counters.dropped_disallowed_source.bump();
                } else {
                    path.counters.rx_packets.bump();
                    path.counters.rx_bytes.add(packet.len() as u64);
                    lock(&shared.multipath).handle_data_received(
                        Instant::now(),
                        path.id,
                        &trailer,
                        packet.len(),
                    );
                    if let Some((lost, epoch)) = deliver(&shared, path.id, &trailer, packet) {
                        send_nacks(&shared, &lost, epoch).await;
                    }
                }
            }
        }
        for reply in &replies {
            if path.socket.send_to(reply, from).await.is_err() {
                path.counters.send_errors.bump();
            }
        }
        path.note_session(&shared, established && path.endpoint().is_some());
    }
}

/// Hand a data packet to the reorder buffer and write what it releases;
/// return the sequence numbers it found lost, and the sender epoch they
/// belong to, for a NACK.
fn deliver(
    shared: &Shared,
    path: PathId,
    trailer: &Trailer,
    packet: &[u8],
) -> Option<(Vec<Seq>, u32)> {
    let mut rx = lock(&shared.receiver);
    match rx
        .buffer
        .handle_packet(Instant::now(), path, trailer, packet)
    {
        Verdict::DeliverNow => shared.write_tun(packet),
        Verdict::Buffered => shared.rearm_reorder_timer(&mut rx),
        Verdict::Dropped(_) => {}
    }
    shared.write_released(&mut rx);
    take_nacks(shared, &mut rx)
}

/// Take the sequence numbers the reorder buffer found lost, and the sender
/// epoch they belong to, for a NACK.
fn take_nacks(shared: &Shared, rx: &mut Receiver) -> Option<(Vec<Seq>, u32)> {
    let lost = rx.buffer.poll_nacks();
    // A gap now waiting for its repair may be due sooner than the hold.
    if !lost.is_empty() {
        shared.rearm_reorder_timer(rx);
    }
    Some((lost, rx.buffer.epoch()?)).filter(|(lost, _)| !lost.is_empty())
}

/// Skip gaps in the reorder buffer once they have been held long enough.
async fn reorder_timer(shared: Arc<Shared>) {
    loop {
        let deadline = {
            let mut rx = lock(&shared.receiver);
            rx.timer_deadline = rx.buffer.poll_timeout();
            rx.timer_deadline
        };
        match deadline {
            Some(at) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at.into()) => {
                        let nacks = {
                            let mut rx = lock(&shared.receiver);
                            rx.buffer.handle_timeout(Instant::now());
                            shared.write_released(&mut rx);
                            take_nacks(&shared, &mut rx)
                        };
                        if let Some((lost, epoch)) = nacks {
                            send_nacks(&shared, &lost, epoch).await;
                        }
                    }
                    _ = shared.reorder_wake.notified() => {}
                }
            }
            None => shared.reorder_wake.notified().await,
        }
    }
}

/// WireGuard's timers for every path, and each path's up/down state.
async fn wireguard_timers(shared: Arc<Shared>) {
    let mut out = vec![0u8; 2048];
    // Start handshakes at once rather than on the first packet, so paths are
    // up before traffic arrives.
    for path in &shared.paths {
        let mut initiation = Vec::new();
        lock(&path.session).initiate(&mut out, |d| initiation = d.to_vec());
        if let (false, Some(to)) = (initiation.is_empty(), path.destination()) {
            let _ = path.socket.send_to(&initiation, to).await;
        }
    }
    let mut interval = tokio::time::interval(WG_TICK);
    let mut ticks: u64 = 0;
    loop {
        interval.tick().await;
        ticks += 1;
        for path in &shared.paths {
            let mut datagrams: Vec<Vec<u8>> = Vec::new();
            let retry = ticks.is_multiple_of(RETRY_TICKS);
            let wants_handshake =
                retry && lock(&shared.multipath).wants_handshake(Instant::now(), path.id);
            let established = {
                let mut session = lock(&path.session);
                let alive = session.tick(&mut out, |d| datagrams.push(d.to_vec()));
                if retry && (!session.is_established() || wants_handshake) {
                    // WireGuard retries a handshake every 5 s, and only
                    // notices a restarted peer after 15 s of silence; for a
                    // peer that was not listening yet, or that lost our
                    // session (its probes' echoes stopped), that is a
                    // needless outage of the path.
                    session.initiate_now(&mut out, |d| datagrams.push(d.to_vec()));
                }
                alive && session.is_established()
            };
            let to = path.destination();
            if let Some(to) = to {
                for d in &datagrams {
                    if path.socket.send_to(d, to).await.is_err() {
                        path.counters.send_errors.bump();
                    }
                }
            }
            path.note_session(&shared, established && to.is_some());
        }
    }
}

/// Choose the scheduler from the config: adaptive unless round-robin is
/// asked for; configured weights are caps (adaptive) or shares (round-robin).
fn scheduling_policy(config: &Config) -> Policy {
    let weights: Vec<u32> = config.paths.iter().map(|p| p.weight.unwrap_or(1)).collect();
    let any_weight = config.paths.iter().any(|p| p.weight.is_some());
    match config.interface.scheduler {
        Scheduler::Adaptive => Policy::adaptive(any_weight.then_some(weights.as_slice())),
        Scheduler::RoundRobin => Policy::RoundRobin(mptun_core::WeightedRoundRobin::new(&weights)),
    }
}

/// Probe every path, act on what the probes tell, and log path changes.
async fn monitor(shared: Arc<Shared>) {
    let mut plain = vec![0u8; SHIM_LEN + PROBE_LEN + TRAILER_LEN];
    let mut sealed = vec![0u8; PathSession::sealed_len(plain.len())];
    loop {
        let now = Instant::now();
        let mut probes = Vec::new();
        let mut events = Vec::new();
        let (hold, repair, next) = {
            let mut mp = lock(&shared.multipath);
            mp.handle_timeout(now);
            while let Some(probe) = mp.poll_probe(now) {
                probes.push(probe);
            }
            while let Some(event) = mp.poll_event() {
                events.push(event);
            }
            (mp.hold_hint(now), mp.repair_hint(), mp.poll_timeout())
        };
        for (path_id, probe, trailer) in probes {
            let len = probe.encode(&mut plain);
            trailer.encode(&mut plain[len..len + TRAILER_LEN]);
            shared.paths[path_id.index()]
                .seal_and_send(&plain[..len + TRAILER_LEN], &mut sealed)
                .await;
        }
        for event in events {
            log_path_event(&shared, event);
        }
        {
            let mut rx = lock(&shared.receiver);
            rx.buffer.set_hold_hint(hold);
            rx.buffer.set_repair_hint(repair);
            shared.rearm_reorder_timer(&mut rx);
        }
        let sleep_until = next.unwrap_or(now + WG_TICK).min(now + WG_TICK);
        tokio::select! {
            _ = tokio::time::sleep_until(sleep_until.into()) => {}
            _ = shared.monitor_wake.notified() => {}
        }
    }
}

fn log_path_event(shared: &Shared, event: mptun_core::PathEvent) {
    let path = event.path;
    let endpoint = shared.paths[path.index()]
        .endpoint()
        .map(|e| e.to_string())
        .unwrap_or_default();
    match event.state {
        PathState::Up => info!(%path, %endpoint, "path up"),
        PathState::Down => {
            warn!(%path, %endpoint, silent_ms = (event.detail * 1000.0) as u64, "path down: probes unanswered")
        }
        PathState::SetAside => warn!(
            %path,
            loss_pct = format!("{:.2}", event.detail * 100.0),
            "path set aside: losing packets while another path is clean; will retry"
        ),
        PathState::NoSession => warn!(%path, "path down: no WireGuard session"),
        PathState::Unconfirmed => {}
    }
}
