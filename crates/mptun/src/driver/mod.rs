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

mod endpoint_task;
mod shared;
mod worker;

use std::sync::Arc;

use anyhow::Context;
use mptun_core::{Endpoint, EndpointConfig, PathId, Policy};
use mptun_wg::{PathSession, SessionConfig};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tracing::info;

use crate::config::{Config, PathConfig, Scheduler};
use crate::io::{PathSocket, TunDevice};
use crate::mtu::TunMtu;
use crate::status::StatusRequest;
use endpoint_task::EndpointTask;
use shared::{buf_capacity, ENDPOINT_QUEUE, PATH_QUEUE};
pub(crate) use shared::{now, PathInfo};
use shared::{Reconfigure, ToEndpoint, ToPath};
use worker::PathWorker;

/// Choose the scheduler from the config: adaptive unless round-robin is
/// asked for; configured weights are caps (adaptive) or shares (round-robin).
pub(crate) fn scheduling_policy(config: &Config) -> Policy {
    let weights: Vec<u32> = config.paths.iter().map(|p| p.weight.unwrap_or(1)).collect();
    let any_weight = config.paths.iter().any(|p| p.weight.is_some());
    match config.interface.scheduler {
        Scheduler::Adaptive => Policy::adaptive(any_weight.then_some(weights.as_slice())),
        Scheduler::RoundRobin => Policy::RoundRobin(mptun_core::WeightedRoundRobin::new(&weights)),
    }
}

/// The endpoint's settings from the config.
fn endpoint_config(config: &Config, epoch: u32, mtu: u16) -> EndpointConfig {
    EndpointConfig {
        policy: scheduling_policy(config),
        reorder: config.interface.reorder,
        buf_capacity: buf_capacity(mtu),
        low_latency: config.interface.low_latency_dscp,
        ..EndpointConfig::new(epoch, config.paths.len())
    }
}

/// The driver's tasks, running.
pub(crate) struct Driver {
    /// The endpoint task and one worker per path. None ends unless it
    /// failed for good, or a reload stopped it (a cancelled worker).
    pub tasks: JoinSet<anyhow::Result<()>>,
    /// Where the status server asks for snapshots.
    pub status: mpsc::Sender<StatusRequest>,
    reconfigure: mpsc::Sender<Reconfigure>,
    to_endpoint: mpsc::Sender<ToEndpoint>,
    /// Each path's worker, to stop it.
    workers: Vec<Option<WorkerHandle>>,
    session_config: SessionConfig,
    buf_capacity: usize,
}

/// A running worker: stop it with [`Driver::stop_path`].
struct WorkerHandle {
    abort: tokio::task::AbortHandle,
    /// Closed once the worker and its socket are dropped.
    stopped: oneshot::Receiver<()>,
}

/// A path's worker, built but not running, and the queue to it.
pub(crate) struct NewPath<S> {
    worker: PathWorker<S>,
    to_path: mpsc::Sender<ToPath>,
    stopped: oneshot::Receiver<()>,
}

impl<S> NewPath<S> {
    /// What the worker will publish about the path.
    pub fn info(&self) -> Arc<PathInfo> {
        self.worker.info.clone()
    }

    fn opened(&self) -> Opened {
        (self.worker.id, self.to_path.clone(), self.info())
    }
}

/// What the endpoint task needs to use a path's worker.
pub(crate) type Opened = (PathId, mpsc::Sender<ToPath>, Arc<PathInfo>);

impl Driver {
    /// Start the endpoint task and one worker per path over `tun` and
    /// `sockets` (one per configured path, in order).
    pub fn spawn<T: TunDevice, S: PathSocket>(
        config: Arc<Config>,
        epoch: u32,
        tun: T,
        mtu: TunMtu,
        sockets: Vec<S>,
    ) -> anyhow::Result<Driver> {
        let (to_endpoint, from_paths) = mpsc::channel(ENDPOINT_QUEUE);
        let (status_tx, status_rx) = mpsc::channel(4);
        let (reconfigure_tx, reconfigure_rx) = mpsc::channel(4);
        let mut driver = Driver {
            tasks: JoinSet::new(),
            status: status_tx,
            reconfigure: reconfigure_tx,
            to_endpoint,
            workers: Vec::new(),
            session_config: session_config(&config),
            buf_capacity: buf_capacity(mtu.mtu),
        };
        let mut to_paths = Vec::new();
        let mut infos = Vec::new();
        let mut workers = Vec::new();
        for (n, (socket, pc)) in sockets.into_iter().zip(&config.paths).enumerate() {
            let path = driver.new_path(PathId(n as u8), socket, pc)?;
            let (_, to_path, info) = path.opened();
            to_paths.push(to_path);
            infos.push(info);
            workers.push(path);
        }
        let now = now();
        let task = EndpointTask {
            endpoint: Endpoint::new(now, endpoint_config(&config, epoch, mtu.mtu)),
            config,
            tun,
            mtu,
            paths: infos,
            to_paths,
            from_paths,
            status: status_rx,
            reconfigure: reconfigure_rx,
            started: now,
            changes: Vec::new(),
        };
        driver.tasks.spawn(task.run());
        for path in workers {
            driver.start_worker(path);
        }
        Ok(driver)
    }

    /// Build the worker for path `id` on `socket`, not started yet: see
    /// [`reconfigure`](Self::reconfigure).
    pub fn new_path<S: PathSocket>(
        &self,
        id: PathId,
        socket: S,
        pc: &PathConfig,
    ) -> anyhow::Result<NewPath<S>> {
        let local = socket
            .local_addr()
            .with_context(|| format!("{id}: local address"))?;
        match pc.endpoint {
            Some(endpoint) => info!(path = %id, %local, %endpoint, "listening"),
            None => info!(path = %id, %local, "listening; waiting for the peer to connect"),
        }
        let (to_path, from_endpoint) = mpsc::channel(PATH_QUEUE);
        let (stopped_tx, stopped) = oneshot::channel();
        let worker = PathWorker {
            id,
            session: PathSession::new(&self.session_config, id.0),
            socket,
            info: Arc::new(PathInfo::new(id, local, pc.endpoint)),
            from_endpoint,
            to_endpoint: self.to_endpoint.clone(),
            buf_capacity: self.buf_capacity,
            endpoint_name: pc.endpoint_name.clone(),
            _stopped: stopped_tx,
        };
        Ok(NewPath {
            worker,
            to_path,
            stopped,
        })
    }

    fn start_worker<S: PathSocket>(&mut self, path: NewPath<S>) {
        let i = path.worker.id.index();
        let abort = self.tasks.spawn(path.worker.run());
        if self.workers.len() <= i {
            self.workers.resize_with(i + 1, || None);
        }
        self.workers[i] = Some(WorkerHandle {
            abort,
            stopped: path.stopped,
        });
    }

    /// Stop path `id`'s worker and wait until its socket is closed.
    pub async fn stop_path(&mut self, id: PathId) {
        if let Some(worker) = self.workers.get_mut(id.index()).and_then(Option::take) {
            worker.abort.abort();
            let _ = worker.stopped.await;
        }
    }

    /// Have the endpoint task stop sending on `paths`, before their workers
    /// are stopped, so that no packet is handed to a worker going away.
    pub async fn close_paths(&self, paths: Vec<PathId>) {
        self.send(paths, None, Vec::new()).await;
    }

    /// Hand the endpoint task a reloaded config and the paths built for it,
    /// and start their workers once it has taken them: a worker whose
    /// session came up sooner would tell it of a path it does not have yet,
    /// or is about to start afresh, and the path would never carry data.
    pub async fn reconfigure<S: PathSocket>(
        &mut self,
        config: Arc<Config>,
        paths: Vec<NewPath<S>>,
    ) {
        let opened = paths.iter().map(NewPath::opened).collect();
        self.send(Vec::new(), Some(config), opened).await;
        for path in paths {
            self.start_worker(path);
        }
    }

    /// Send a change to the endpoint task and wait until it is taken.
    async fn send(&self, closing: Vec<PathId>, config: Option<Arc<Config>>, opened: Vec<Opened>) {
        let (applied, taken) = oneshot::channel();
        let change = Reconfigure {
            closing,
            config,
            opened,
            applied,
        };
        if self.reconfigure.send(change).await.is_ok() {
            let _ = taken.await;
        }
    }

    /// The sessions' settings for a config (the same on every path).
    pub fn set_session_config(&mut self, config: &Config) {
        self.session_config = session_config(config);
    }
}

fn session_config(config: &Config) -> SessionConfig {
    SessionConfig {
        private_key: config.interface.private_key.clone(),
        peer_public_key: config.peer.public_key,
        preshared_key: config.peer.preshared_key.clone(),
        persistent_keepalive: config.peer.persistent_keepalive,
    }
}

#[cfg(test)]
mod tests;
