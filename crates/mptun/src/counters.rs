//! Counters shared between the I/O tasks and `mptun show`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use mptun_wg::OpenError;
use serde::Serialize;

/// A counter bumped from any task.
#[derive(Default, Debug)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Add one.
    pub fn bump(&self) {
        self.0.fetch_add(1, Relaxed);
    }

    /// Add `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Relaxed);
    }

    /// Read the current value.
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// Counters of one path.
#[derive(Default, Debug)]
pub struct PathCounters {
    /// Data packets sealed and sent.
    pub tx_packets: Counter,
    /// Inner bytes of those packets.
    pub tx_bytes: Counter,
    /// Data packets received and authenticated.
    pub rx_packets: Counter,
    /// Inner bytes of those packets.
    pub rx_bytes: Counter,
    /// Data packets resent on this path because the peer asked for them.
    pub resent: Counter,
    /// Probes received from the peer.
    pub rx_probes: Counter,
    /// Control messages that were not valid probes or NACKs.
    pub bad_probes: Counter,
    /// Datagrams the socket failed to send.
    pub send_errors: Counter,
    /// Errors reading the socket.
    pub recv_errors: Counter,
    /// Datagrams rejected, by reason.
    pub rejected: RejectCounters,
}

/// Rejected datagrams by reason; see [`OpenError`].
#[derive(Default, Debug)]
pub struct RejectCounters {
    malformed: Counter,
    unauthenticated: Counter,
    replayed: Counter,
    no_session: Counter,
    under_load: Counter,
    bad_trailer: Counter,
    length_mismatch: Counter,
}

impl RejectCounters {
    /// Count one rejection.
    pub fn count(&self, e: OpenError) {
        match e {
            OpenError::Malformed => self.malformed.bump(),
            OpenError::Unauthenticated => self.unauthenticated.bump(),
            OpenError::Replayed => self.replayed.bump(),
            OpenError::NoSession => self.no_session.bump(),
            OpenError::UnderLoad => self.under_load.bump(),
            OpenError::Trailer(_) => self.bad_trailer.bump(),
            OpenError::LengthMismatch => self.length_mismatch.bump(),
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
            bad_trailer: self.bad_trailer.get(),
            length_mismatch: self.length_mismatch.get(),
        }
    }
}

/// Rejected datagrams of one path, by reason.
#[derive(Clone, Copy, Debug, Default, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct RejectSnapshot {
    pub malformed: u64,
    pub unauthenticated: u64,
    pub replayed: u64,
    pub no_session: u64,
    pub under_load: u64,
    pub bad_trailer: u64,
    pub length_mismatch: u64,
}

impl RejectSnapshot {
    /// Return the total.
    pub fn total(&self) -> u64 {
        self.malformed
            + self.unauthenticated
            + self.replayed
            + self.no_session
            + self.under_load
            + self.bad_trailer
            + self.length_mismatch
    }
}

/// Counters of the TUN side.
#[derive(Default, Debug)]
pub struct TunCounters {
    /// Packets read from the TUN device.
    pub read_packets: Counter,
    /// Packets written to the TUN device.
    pub written_packets: Counter,
    /// Read packets dropped because no path was up.
    pub dropped_no_path: Counter,
    /// Read packets dropped because they were not IPv4 or IPv6.
    pub dropped_not_ip: Counter,
    /// Read packets dropped because their destination is not in the peer's
    /// allowed IPs.
    pub dropped_disallowed_destination: Counter,
    /// Received packets dropped because their inner source address is not in
    /// the peer's allowed IPs.
    pub dropped_disallowed_source: Counter,
    /// Packets the TUN device refused.
    pub write_errors: Counter,
}
