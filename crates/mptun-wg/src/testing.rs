//! Two sessions of one path talking to each other in memory, for tests and
//! benchmarks: no sockets, fixed keys.

use std::net::{IpAddr, Ipv4Addr};

use crate::{keys, PathSession, SessionConfig};

/// Where the peer's datagrams come from in these in-memory exchanges.
pub const PEER_ADDR: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));

/// The two ends' session configs: fixed keys, a pre-shared key.
pub fn configs() -> (SessionConfig, SessionConfig) {
    let a_key = keys::private_key_from_random([1; 32]);
    let b_key = keys::private_key_from_random([2; 32]);
    let a = SessionConfig {
        private_key: keys::Secret::new(a_key),
        peer_public_key: keys::public_key(&b_key),
        preshared_key: Some(keys::Secret::new([9; 32])),
        persistent_keepalive: None,
    };
    let b = SessionConfig {
        private_key: keys::Secret::new(b_key),
        peer_public_key: keys::public_key(&a_key),
        ..a.clone()
    };
    (a, b)
}

/// Two sessions of one path, one on each end, not yet handshaken.
pub fn pair() -> (PathSession, PathSession) {
    let (a, b) = configs();
    (PathSession::new(&a, 0), PathSession::new(&b, 0))
}

/// Run the handshake by passing datagrams back and forth until both ends
/// have a session; return whether they do.
pub fn handshake(a: &mut PathSession, b: &mut PathSession) -> bool {
    let mut out = vec![0u8; 2048];
    let mut to_b: Vec<Vec<u8>> = Vec::new();
    a.initiate(&mut out, |d| to_b.push(d.to_vec()));
    for _ in 0..4 {
        let mut to_a = Vec::new();
        for d in to_b.drain(..) {
            b.open(PEER_ADDR, &d, &mut out, |r| to_a.push(r.to_vec()));
        }
        for d in to_a {
            a.open(PEER_ADDR, &d, &mut out, |r| to_b.push(r.to_vec()));
        }
    }
    a.is_established() && b.is_established()
}
