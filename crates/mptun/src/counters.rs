//! Counters a path's worker keeps, for the status server.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use mptun_wg::OpenError;
use serde::{Deserialize, Serialize};

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

/// Socket and WireGuard counters of one path.
#[derive(Default, Debug)]
pub struct PathCounters {
    /// Datagrams the socket failed to send.
    pub send_errors: Counter,
    /// Errors reading the socket.
    pub recv_errors: Counter,
    /// Datagrams WireGuard rejected, by reason.
    pub rejected: RejectCounters,
    /// Handshake initiations taken; like cookie replies, they prove no
    /// address, so neither moves the endpoint.
    pub initiations: Counter,
    /// Cookie replies taken.
    pub cookie_replies: Counter,
    /// Handshakes completed.
    pub handshakes: Counter,
    /// Datagrams sent, and their bytes (sealed, as `wg show` counts).
    pub tx_datagrams: Counter,
    pub tx_datagram_bytes: Counter,
    /// Datagrams received, rejected ones included, and their bytes.
    pub rx_datagrams: Counter,
    pub rx_datagram_bytes: Counter,
}

/// Rejected datagrams by reason; see [`OpenError`].
#[derive(Default, Debug)]
pub struct RejectCounters {
    malformed: Counter,
    unauthenticated: Counter,
    replayed: Counter,
    no_session: Counter,
    under_load: Counter,
}

impl RejectCounters {
    /// Count one rejection.
    pub fn count(&self, e: OpenError) {
        match e {
            OpenError::Malformed => self.malformed.add(1),
            OpenError::Unauthenticated => self.unauthenticated.add(1),
            OpenError::Replayed => self.replayed.add(1),
            OpenError::NoSession => self.no_session.add(1),
            OpenError::UnderLoad => self.under_load.add(1),
        }
    }

    /// Snapshot for status output.
    pub fn snapshot(&self) -> RejectSnapshot {
        RejectSnapshot {
            malformed: self.malformed.get(),
            unauthenticated: self.unauthenticated.get(),
            replayed: self.replayed.get(),
            no_session: self.no_session.get(),
            under_load: self.under_load.get(),
        }
    }
}

/// Datagrams of one path WireGuard rejected, by reason.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct RejectSnapshot {
    pub malformed: u64,
    pub unauthenticated: u64,
    pub replayed: u64,
    pub no_session: u64,
    pub under_load: u64,
}

impl RejectSnapshot {
    /// Return the total.
    pub fn total(&self) -> u64 {
        self.malformed + self.unauthenticated + self.replayed + self.no_session + self.under_load
    }
}
