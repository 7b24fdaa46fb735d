//! The driver: moves bytes between the TUN device, the [`Endpoint`] and the
//! paths' WireGuard sessions and sockets. It makes no protocol decision.
//!
//! Outbound, in four stages:
//!
//! 1. The endpoint task reads a batch of inner packets from the TUN device
//!    and drops those whose destination is not in `peer.allowed-ips`
//!    (WireGuard's cryptokey routing).
//! 2. [`Endpoint::handle_tun`] numbers each, picks its path and logs it for
//!    repairs; [`Endpoint::poll_transmit`] hands out the plaintexts (packet
//!    and trailer) grouped by path.
//! 3. Each path's batch goes over a bounded queue to that path's worker. A
//!    full queue drops the batch, counted: the endpoint task never waits on
//!    one slow path.
//! 4. The worker seals each plaintext with its path's WireGuard session and
//!    sends runs of equal-size datagrams in one call.
//!
//! Inbound, in four stages:
//!
//! 1. A path's worker receives a batch of datagrams, opens each with its
//!    session (answering handshakes on the spot) and learns the peer's
//!    address from those that authenticate.
//! 2. The plaintexts go over one bounded queue, shared by all workers, to
//!    the endpoint task.
//! 3. [`Endpoint::handle_datagrams`] puts data in order, takes probes and
//!    answers NACKs; [`Endpoint::poll_deliver`] hands out what is in order.
//! 4. The endpoint task drops what comes from a source outside
//!    `peer.allowed-ips` and writes the rest to the TUN device.
//!
//! Who owns what: the endpoint task owns the [`Endpoint`], the TUN device
//! and the TUN counters; each worker owns its path's session and socket. So
//! N paths seal and open on up to N cores, and nothing is locked per packet.
//! What the status server reads of a path (its peer address, handshake,
//! socket counters) is in that path's [`PathInfo`], written by its worker.
//! Buffers travel with the packets in them: a worker keeps the plaintext
//! buffers it sealed for what it opens next, and hands the spare ones back.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::Context;
use mptun_core::{
    BufPool, Endpoint, EndpointConfig, PacketBuf, PathChange, PathEvent, PathId, Policy,
};
use mptun_wg::{PathSession, SessionConfig};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tracing::{info, warn};

use crate::config::{Config, Scheduler};
use crate::io::{PathSocket, TunDevice};
use crate::status::Status;
use crate::worker::PathWorker;

/// Packets read from the TUN device in one go.
pub(crate) const TUN_BATCH: usize = 64;
/// Room kept in front of every packet buffer, for a header the I/O edge may
/// need to write there.
pub(crate) const HEADROOM: usize = 16;
/// Batches that may wait for one path's worker.
const PATH_QUEUE: usize = 256;
/// Batches that may wait for the endpoint task.
const ENDPOINT_QUEUE: usize = 1024;
/// How often a path down for long is offered a fresh WireGuard handshake.
const REHANDSHAKE_EVERY: Duration = Duration::from_secs(1);
/// Buffers the endpoint task keeps for reading the TUN device.
const POOL_KEEP: usize = 4096;

/// Read the clock: the runtime's, which tests can stop and move by hand,
/// so that the driver runs on virtual time there.
pub(crate) fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Lock a mutex, carrying on if a task panicked while holding it: the state
/// behind every mutex here stays consistent between statements.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A counter bumped by one task and read by the status server.
#[derive(Default, Debug)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Add `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Relaxed);
    }

    /// Read the current value.
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// What the status server reads of one path, written by its worker.
#[derive(Debug)]
pub(crate) struct PathInfo {
    pub id: PathId,
    pub local: SocketAddr,
    /// The peer's address for this path: configured, or learned from the
    /// last authenticated datagram (WireGuard's roaming).
    endpoint: Mutex<Option<SocketAddr>>,
    /// When the last handshake completed, and its round trip, as of the
    /// worker's last timer tick.
    handshake: Mutex<(Option<Instant>, Option<u32>)>,
    pub counters: crate::counters::PathCounters,
}

impl PathInfo {
    pub fn new(id: PathId, local: SocketAddr, endpoint: Option<SocketAddr>) -> Self {
        PathInfo {
            id,
            local,
            endpoint: Mutex::new(endpoint),
            handshake: Mutex::new((None, None)),
            counters: Default::default(),
        }
    }

    pub fn endpoint(&self) -> Option<SocketAddr> {
        *lock(&self.endpoint)
    }

    pub(crate) fn set_endpoint(&self, endpoint: SocketAddr) {
        *lock(&self.endpoint) = Some(endpoint);
    }

    /// Return when the last handshake completed and its round trip in ms.
    pub fn handshake(&self) -> (Option<Instant>, Option<u32>) {
        *lock(&self.handshake)
    }

    pub(crate) fn set_handshake(&self, at: Option<Instant>, rtt_ms: Option<u32>) {
        *lock(&self.handshake) = (at, rtt_ms);
    }
}

/// From the endpoint task to a path's worker.
pub(crate) enum ToPath {
    /// Plaintexts to seal and send, in order.
    Send(Vec<PacketBuf>),
    /// Start a fresh WireGuard handshake.
    Rehandshake,
}

/// From a path's worker to the endpoint task.
pub(crate) enum ToEndpoint {
    /// Plaintexts the path's session opened.
    Opened {
        path: PathId,
        plaintexts: Vec<PacketBuf>,
    },
    /// The path's session came up (with a peer address to send to) or went.
    Session { path: PathId, established: bool },
    /// Buffers a worker had more of than it needs.
    Spare(Vec<PacketBuf>),
}

/// A request for a status snapshot, answered by the endpoint task.
pub(crate) type StatusRequest = oneshot::Sender<Status>;

/// Counters of the TUN side, kept by the endpoint task.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TunCounters {
    /// Packets read from the TUN device.
    pub read_packets: u64,
    /// Packets written to the TUN device.
    pub written_packets: u64,
    /// Packets the TUN device refused.
    pub write_errors: u64,
    /// Read packets dropped because their destination is not in the peer's
    /// allowed IPs.
    pub dropped_disallowed_destination: u64,
    /// Received packets dropped because their inner source address is not in
    /// the peer's allowed IPs.
    pub dropped_disallowed_source: u64,
    /// Batches dropped because a path's worker queue was full.
    pub dropped_path_queue_full: u64,
    /// Packets in those batches.
    pub dropped_path_queue_full_packets: u64,
}

/// The endpoint task: owns the [`Endpoint`] and the TUN device.
pub(crate) struct EndpointTask<T> {
    pub config: Arc<Config>,
    pub endpoint: Endpoint,
    pub tun: T,
    pub paths: Arc<Vec<PathInfo>>,
    pub to_paths: Vec<mpsc::Sender<ToPath>>,
    pub from_paths: mpsc::Receiver<ToEndpoint>,
    pub status: mpsc::Receiver<StatusRequest>,
    pub started: Instant,
}

/// Return the size of the packet buffers for a TUN MTU.
pub(crate) fn buf_capacity(mtu: u16) -> usize {
    HEADROOM + usize::from(mtu) + mptun_core::TRAILER_LEN
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

/// The endpoint's settings from the config.
fn endpoint_config(config: &Config, epoch: u32) -> EndpointConfig {
    EndpointConfig {
        policy: scheduling_policy(config),
        reorder: config.interface.reorder,
        buf_capacity: buf_capacity(config.interface.mtu),
        ..EndpointConfig::new(epoch, config.paths.len())
    }
}

/// The driver's tasks, running.
pub(crate) struct Driver {
    /// The endpoint task and one worker per path. None ends unless it
    /// failed for good.
    pub tasks: JoinSet<anyhow::Result<()>>,
    /// Where the status server asks for snapshots.
    pub status: mpsc::Sender<StatusRequest>,
}

impl Driver {
    /// Start the endpoint task and one worker per path over `tun` and
    /// `sockets` (one per configured path, in order).
    pub fn spawn<T: TunDevice, S: PathSocket>(
        config: Arc<Config>,
        epoch: u32,
        tun: T,
        sockets: Vec<S>,
    ) -> anyhow::Result<Driver> {
        let session_config = SessionConfig {
            private_key: config.interface.private_key,
            peer_public_key: config.peer.public_key,
            preshared_key: config.peer.preshared_key,
            persistent_keepalive: config.peer.persistent_keepalive,
        };
        let mut infos = Vec::new();
        for (n, (socket, pc)) in sockets.iter().zip(&config.paths).enumerate() {
            let id = PathId(n as u8);
            let local = socket
                .local_addr()
                .with_context(|| format!("{id}: local address"))?;
            match pc.endpoint {
                Some(endpoint) => info!(path = %id, %local, %endpoint, "listening"),
                None => info!(path = %id, %local, "listening; waiting for the peer to connect"),
            }
            infos.push(PathInfo::new(id, local, pc.endpoint));
        }
        let paths = Arc::new(infos);
        let (to_paths, path_queues): (Vec<_>, Vec<_>) = (0..sockets.len())
            .map(|_| mpsc::channel(PATH_QUEUE))
            .unzip();
        let (to_endpoint, from_paths) = mpsc::channel(ENDPOINT_QUEUE);
        let (status_tx, status_rx) = mpsc::channel(4);
        let now = now();
        let mut tasks = JoinSet::new();
        let buf_capacity = buf_capacity(config.interface.mtu);
        for (n, (socket, from_endpoint)) in sockets.into_iter().zip(path_queues).enumerate() {
            let worker = PathWorker {
                id: PathId(n as u8),
                session: PathSession::new(&session_config, n as u8),
                socket,
                paths: paths.clone(),
                from_endpoint,
                to_endpoint: to_endpoint.clone(),
                buf_capacity,
            };
            tasks.spawn(worker.run());
        }
        drop(to_endpoint);
        let task = EndpointTask {
            endpoint: Endpoint::new(now, endpoint_config(&config, epoch)),
            config,
            tun,
            paths: paths.clone(),
            to_paths,
            from_paths,
            status: status_rx,
            started: now,
        };
        tasks.spawn(task.run());
        Ok(Driver {
            tasks,
            status: status_tx,
        })
    }
}

impl<T: TunDevice> EndpointTask<T> {
    /// Run until the TUN device fails for good or every path worker is gone.
    pub async fn run(mut self) -> anyhow::Result<()> {
        let mut pool = BufPool::new(buf_capacity(self.config.interface.mtu), POOL_KEEP);
        let mut counters = TunCounters::default();
        let mut batch: Vec<PacketBuf> = Vec::with_capacity(TUN_BATCH);
        let mut out: Vec<PacketBuf> = Vec::with_capacity(TUN_BATCH);
        let mut spare_vecs: Vec<Vec<PacketBuf>> = Vec::new();
        let mut rehandshake = tokio::time::interval(REHANDSHAKE_EVERY);
        rehandshake.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut tun_failures = 0u32;
        loop {
            let deadline = self.endpoint.poll_timeout();
            tokio::select! {
                biased;
                message = self.from_paths.recv() => {
                    let Some(message) = message else {
                        anyhow::bail!("every path worker stopped");
                    };
                    let now = now();
                    match message {
                        ToEndpoint::Opened { path, mut plaintexts } => {
                            self.endpoint.handle_datagrams(now, path, &mut plaintexts);
                            spare_vecs.push(plaintexts);
                        }
                        ToEndpoint::Session { path, established } => {
                            self.endpoint.set_session(now, path, established);
                        }
                        ToEndpoint::Spare(mut bufs) => {
                            pool.put_all(&mut bufs);
                            spare_vecs.push(bufs);
                        }
                    }
                }
                read = self.tun.read(&mut pool, HEADROOM, &mut batch, TUN_BATCH) => {
                    match read {
                        Ok(()) => tun_failures = 0,
                        Err(e) => {
                            tun_failures += 1;
                            if tun_failures == 1 {
                                warn!(error = %e, "reading the TUN device failed");
                            }
                            if tun_failures >= 100 {
                                return Err(anyhow::Error::new(e).context("reading the TUN device"));
                            }
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        }
                    }
                    counters.read_packets += batch.len() as u64;
                    let before = batch.len();
                    // Cryptokey routing, as WireGuard does: only what the
                    // peer may receive is sent to it.
                    let config = &self.config;
                    batch.retain(|p| {
                        mptun_core::wire::ip::destination(p.packet())
                            .is_none_or(|ip| config.peer.allows(ip))
                    });
                    counters.dropped_disallowed_destination += (before - batch.len()) as u64;
                    self.endpoint.handle_tun(now(), &mut batch);
                }
                _ = sleep_until(deadline) => {
                    self.endpoint.handle_timeout(now());
                }
                _ = rehandshake.tick() => {
                    let now = now();
                    for (i, to_path) in self.to_paths.iter().enumerate() {
                        if self.endpoint.wants_handshake(now, PathId(i as u8)) {
                            let _ = to_path.try_send(ToPath::Rehandshake);
                        }
                    }
                }
                Some(request) = self.status.recv() => {
                    let _ = request.send(crate::status::snapshot(self.config.as_ref(), &self.endpoint, &self.paths, &counters, self.started));
                }
            }
            self.flush_transmits(&mut spare_vecs, &mut counters);
            self.endpoint.poll_deliver(&mut out);
            if !out.is_empty() {
                self.write_tun(&mut out, &mut counters);
                pool.put_all(&mut out);
            }
            while let Some(event) = self.endpoint.poll_event() {
                log_path_event(&self.paths, event);
            }
        }
    }

    /// Hand each path's plaintexts to its worker.
    fn flush_transmits(
        &mut self,
        spare_vecs: &mut Vec<Vec<PacketBuf>>,
        counters: &mut TunCounters,
    ) {
        loop {
            let mut batch = spare_vecs.pop().unwrap_or_default();
            batch.clear();
            let Some(path) = self.endpoint.poll_transmit(&mut batch) else {
                spare_vecs.push(batch);
                break;
            };
            let n = batch.len() as u64;
            if let Err(e) = self.to_paths[path.index()].try_send(ToPath::Send(batch)) {
                counters.dropped_path_queue_full += 1;
                counters.dropped_path_queue_full_packets += n;
                if let ToPath::Send(batch) = e.into_inner() {
                    spare_vecs.push(batch);
                }
            }
        }
        spare_vecs.truncate(64);
    }

    /// Write in-order packets to the TUN device, but those from a source the
    /// peer may not use.
    fn write_tun(&mut self, out: &mut Vec<PacketBuf>, counters: &mut TunCounters) {
        let before = out.len();
        let config = &self.config;
        out.retain(|p| {
            mptun_core::wire::ip::source(p.packet()).is_some_and(|ip| config.peer.allows(ip))
        });
        counters.dropped_disallowed_source += (before - out.len()) as u64;
        let refused = self.tun.write(out);
        counters.written_packets += (out.len() - refused) as u64;
        counters.write_errors += refused as u64;
    }
}

/// Sleep until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

fn log_path_event(paths: &[PathInfo], event: PathEvent) {
    let path = event.path;
    let endpoint = paths
        .get(path.index())
        .and_then(PathInfo::endpoint)
        .map(|e| e.to_string())
        .unwrap_or_default();
    match event.change {
        PathChange::Up => info!(%path, %endpoint, "path up"),
        PathChange::Down { silent } => {
            warn!(%path, %endpoint, silent_ms = silent.as_millis() as u64, "path down: probes unanswered")
        }
        PathChange::SetAside { loss } => warn!(
            %path,
            loss_pct = format!("{:.2}", loss * 100.0),
            "path set aside: losing packets while another path is clean; will retry"
        ),
        PathChange::NoSession => warn!(%path, "path down: no WireGuard session"),
    }
}

/// Address to send to, mapped to IPv6 when the socket is dual-stack.
pub(crate) fn destination(local: SocketAddr, endpoint: SocketAddr) -> SocketAddr {
    match (local, endpoint) {
        (SocketAddr::V6(_), SocketAddr::V4(v4)) => {
            SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port())
        }
        _ => endpoint,
    }
}

#[cfg(test)]
mod tests;
