//! What the endpoint task, the path workers and the status server share:
//! the messages between the tasks, what each path's worker publishes, and
//! the sizes of batches and buffers.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use mptun_core::{PacketBuf, PathId};

use crate::config::Config;
use crate::counters::PathCounters;

/// Packets read from the TUN device in one go: what one offloaded read of
/// 64 KB can split into.
pub(crate) const TUN_BATCH: usize = tun_rs::IDEAL_BATCH_SIZE;
/// Room kept in front of every packet buffer, for a header the I/O edge may
/// need to write there.
pub(crate) const HEADROOM: usize = 16;
/// Batches that may wait for one path's worker.
pub(crate) const PATH_QUEUE: usize = 256;
/// Batches that may wait for the endpoint task.
pub(crate) const ENDPOINT_QUEUE: usize = 1024;

/// Read the clock: the runtime's, which tests can stop and move by hand,
/// so that the driver runs on virtual time there.
pub(crate) fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Lock a mutex, carrying on if a task panicked while holding it: the state
/// behind every mutex here stays consistent between statements.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
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
    pub counters: PathCounters,
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

    /// Note the last handshake's time, as of now, and count a new one: one
    /// more than a second later than the one noted (the time is worked
    /// out afresh on every tick, to the millisecond).
    pub(crate) fn set_handshake(&self, at: Option<Instant>, rtt_ms: Option<u32>) {
        let mut handshake = lock(&self.handshake);
        let newer = match (handshake.0, at) {
            (None, Some(_)) => true,
            (Some(before), Some(at)) => at > before + std::time::Duration::from_secs(1),
            _ => false,
        };
        if newer {
            self.counters.handshakes.add(1);
        }
        *handshake = (at, rtt_ms);
    }
}

/// From the endpoint task to a path's worker.
pub(crate) enum ToPath {
    /// Plaintexts to seal and send, in order.
    Send(Vec<PacketBuf>),
    /// Start a fresh WireGuard handshake.
    Rehandshake,
}

/// From the tunnel to the endpoint task, during a reload.
pub(crate) struct Reconfigure {
    /// Paths to stop using at once: their workers are about to stop.
    pub closing: Vec<PathId>,
    /// The new config, once the workers for it run; paths past its last
    /// are retired.
    pub config: Option<Arc<Config>>,
    /// Paths given a new worker, added or changed in place: the queue to
    /// it and what it publishes.
    pub opened: Vec<super::Opened>,
    /// Answered once the endpoint task has taken the change.
    pub applied: tokio::sync::oneshot::Sender<()>,
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
    /// Packets dropped because a path's worker queue was full.
    pub dropped_path_queue_full: u64,
}

/// Return the size of the packet buffers for a TUN MTU.
pub(crate) fn buf_capacity(mtu: u16) -> usize {
    HEADROOM + usize::from(mtu) + mptun_core::TRAILER_LEN
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
