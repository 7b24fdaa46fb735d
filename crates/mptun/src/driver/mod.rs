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
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tracing::info;

use crate::config::{Config, Scheduler};
use crate::io::{PathSocket, TunDevice};
use crate::mtu::TunMtu;
use crate::status::StatusRequest;
use endpoint_task::EndpointTask;
use shared::{buf_capacity, ENDPOINT_QUEUE, PATH_QUEUE};
pub(crate) use shared::{now, PathInfo};
use worker::PathWorker;

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
fn endpoint_config(config: &Config, epoch: u32, mtu: u16) -> EndpointConfig {
    EndpointConfig {
        policy: scheduling_policy(config),
        reorder: config.interface.reorder,
        buf_capacity: buf_capacity(mtu),
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
        mtu: TunMtu,
        sockets: Vec<S>,
    ) -> anyhow::Result<Driver> {
        let session_config = SessionConfig {
            private_key: config.interface.private_key.clone(),
            peer_public_key: config.peer.public_key,
            preshared_key: config.peer.preshared_key.clone(),
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
        let buf_capacity = buf_capacity(mtu.mtu);
        for (n, (socket, from_endpoint)) in sockets.into_iter().zip(path_queues).enumerate() {
            let worker = PathWorker {
                id: PathId(n as u8),
                session: PathSession::new(&session_config, n as u8),
                socket,
                paths: paths.clone(),
                from_endpoint,
                to_endpoint: to_endpoint.clone(),
                buf_capacity,
                endpoint_name: config.paths[n].endpoint_name.clone(),
            };
            tasks.spawn(worker.run());
        }
        drop(to_endpoint);
        let task = EndpointTask {
            endpoint: Endpoint::new(now, endpoint_config(&config, epoch, mtu.mtu)),
            config,
            tun,
            mtu,
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

#[cfg(test)]
mod tests;
