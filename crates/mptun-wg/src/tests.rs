//! Two sessions talking to each other in memory, pinning the boringtun
//! behaviour the trailer relies on.

use mptun_core::{Kind, PathSet, Seq, Trailer, TRAILER_LEN};

use super::*;

use crate::testing::{pair, PEER_ADDR};

fn handshake(a: &mut PathSession, b: &mut PathSession) {
    assert!(crate::testing::handshake(a, b), "handshake failed");
}

/// A minimal IPv4 header with the given total length, then zero payload.
fn ipv4_packet(total_len: u16) -> Vec<u8> {
    let mut p = vec![0u8; usize::from(total_len)];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&total_len.to_be_bytes());
    p[12..16].copy_from_slice(&[10, 77, 0, 1]);
    p[16..20].copy_from_slice(&[10, 77, 0, 2]);
    p
}

fn sample_trailer() -> Trailer {
    Trailer {
        seq: Seq(0xfeed_f00d),
        path_seq: Seq(3),
        epoch: 77,
        sent_us: 1_000,
        previous_on_path: Some(Seq(0xfeed_f00c)),
        paths_in_use: PathSet(0b111),
        kind: Kind::Data,
        congested: false,
        held: false,
    }
}

#[test]
fn trailer_travels_inside_the_encryption_and_comes_back_intact() {
    let (mut a, mut b) = pair();
    handshake(&mut a, &mut b);

    let mut plaintext = ipv4_packet(40);
    let trailer = sample_trailer();
    let mut t = [0u8; TRAILER_LEN];
    trailer.encode(&mut t);
    plaintext.extend_from_slice(&t);

    let mut sealed = vec![0u8; PathSession::sealed_len(plaintext.len())];
    let datagram = a.seal(&plaintext, &mut sealed).unwrap().to_vec();
    // boringtun does not pad: exactly the plaintext plus 32 bytes.
    assert_eq!(datagram.len(), plaintext.len() + WG_DATA_OVERHEAD);
    // The trailer is nowhere in cleartext.
    assert!(!datagram.windows(TRAILER_LEN).any(|w| w == t));

    let mut out = vec![0u8; 2048];
    let opened = b.open(PEER_ADDR, &datagram, &mut out, |_| {
        panic!("no reply expected")
    });
    assert_eq!(
        opened,
        Opened::Plaintext {
            len: plaintext.len()
        }
    );
    assert_eq!(out[..plaintext.len()], plaintext);
    assert_eq!(
        Trailer::decode_suffix(&out[..plaintext.len()]),
        Ok((trailer, 40))
    );
}

#[test]
fn tampered_trailer_is_rejected_by_the_aead() {
    let (mut a, mut b) = pair();
    handshake(&mut a, &mut b);
    let mut plaintext = ipv4_packet(20);
    let mut t = [0u8; TRAILER_LEN];
    sample_trailer().encode(&mut t);
    plaintext.extend_from_slice(&t);
    let mut sealed = vec![0u8; 2048];
    let mut datagram = a.seal(&plaintext, &mut sealed).unwrap().to_vec();
    // Flip a bit where the trailer's ciphertext is (just before the tag).
    let at = datagram.len() - 16 - 4;
    datagram[at] ^= 1;
    let mut out = vec![0u8; 2048];
    assert!(matches!(
        b.open(PEER_ADDR, &datagram, &mut out, |_| {}),
        Opened::Rejected(OpenError::Unauthenticated)
    ));
}

#[test]
fn garbage_and_truncated_datagrams_are_rejected_without_panic() {
    let (mut a, mut b) = pair();
    handshake(&mut a, &mut b);
    let mut plaintext = ipv4_packet(100);
    plaintext.extend_from_slice(&[0u8; TRAILER_LEN]);
    let mut sealed = vec![0u8; 2048];
    let datagram = a.seal(&plaintext, &mut sealed).unwrap().to_vec();
    let mut out = vec![0u8; 2048];
    for len in 0..datagram.len() {
        assert!(!matches!(
            b.open(PEER_ADDR, &datagram[..len], &mut out, |_| {}),
            Opened::Plaintext { .. }
        ));
    }
    assert!(matches!(
        b.open(PEER_ADDR, &[4, 0, 0, 0, 1, 2, 3], &mut out, |_| {}),
        Opened::Rejected(_)
    ));
}

/// Two sessions of paths `a_path` and `b_path`, one on each end, and the
/// second end's config.
fn pair_of_paths(a_path: u8, b_path: u8) -> (PathSession, PathSession, SessionConfig) {
    let (a, b) = crate::testing::configs();
    (
        PathSession::new(&a, a_path),
        PathSession::new(&b, b_path),
        b,
    )
}

#[test]
fn each_path_has_its_own_preshared_key() {
    let psk = [9; 32];
    let keys: Vec<[u8; 32]> = (0..4).map(|i| path_psk(Some(&psk), i)).collect();
    for (i, a) in keys.iter().enumerate() {
        for b in &keys[i + 1..] {
            assert_ne!(a, b);
        }
        assert_ne!(a, &psk);
    }
    assert_ne!(path_psk(None, 0), path_psk(Some(&psk), 0));
    // Both sites must derive the same key: pinned, as a wire format is.
    assert_eq!(
        path_psk(None, 0)[..8],
        PATH0_PSK_WITHOUT_KEY[..],
        "{:02x?}",
        path_psk(None, 0)
    );
    // Sessions of the same path agree; of different paths they do not.
    let (mut a, mut b, _) = pair_of_paths(1, 1);
    assert!(crate::testing::handshake(&mut a, &mut b));
    let (mut a, mut b, _) = pair_of_paths(0, 1);
    assert!(!crate::testing::handshake(&mut a, &mut b));
}

/// The first bytes of `path_psk(None, 0)`, as Python's
/// `hashlib.blake2s(b"mptun path psk v1\x00", key=bytes(32))` gives them.
const PATH0_PSK_WITHOUT_KEY: [u8; 8] = [0xf2, 0x46, 0x77, 0xe5, 0x3c, 0xbb, 0xf4, 0x72];

#[test]
fn a_handshake_initiation_replayed_on_another_path_proves_no_address() {
    // Path 0's initiation, captured and sent to path 1's session: its
    // timestamp is new to path 1, so boringtun answers it; but it must not
    // pass for the live peer's address.
    let (mut a0, _, b_config) = pair_of_paths(0, 0);
    let mut b1 = PathSession::new(&b_config, 1);
    let mut out = vec![0u8; 2048];
    let mut initiation = Vec::new();
    a0.initiate(&mut out, |d| initiation = d.to_vec());
    assert_eq!(initiation.first(), Some(&1));
    let opened = b1.open(PEER_ADDR, &initiation, &mut out, |_| {});
    assert_eq!(opened, Opened::Initiation);
    // A response or data proves the peer is there.
    let (mut a, mut b) = pair();
    let mut to_b = Vec::new();
    a.initiate(&mut out, |d| to_b.push(d.to_vec()));
    let mut to_a = Vec::new();
    assert_eq!(
        b.open(PEER_ADDR, &to_b[0], &mut out, |r| to_a.push(r.to_vec())),
        Opened::Initiation
    );
    let response = to_a.remove(0);
    assert_eq!(response.first(), Some(&2));
    assert_eq!(
        a.open(PEER_ADDR, &response, &mut out, |_| {}),
        Opened::Control
    );
}

#[test]
fn an_accepted_cookie_reply_proves_no_address() {
    // The peer is under load (a limiter of 0 handshakes), so it answers our
    // initiation with a cookie reply, which our session takes.
    use std::sync::Arc;

    use boringtun::noise::rate_limiter::RateLimiter;

    let a_key = keys::private_key_from_random([1; 32]);
    let b_key = keys::private_key_from_random([2; 32]);
    let config = SessionConfig {
        private_key: keys::Secret::new(a_key),
        peer_public_key: keys::public_key(&b_key),
        preshared_key: None,
        persistent_keepalive: None,
    };
    let mut a = PathSession::new(&config, 0);
    let b_public = x25519::PublicKey::from(keys::public_key(&b_key));
    let mut b = Tunn::new(
        x25519::StaticSecret::from(b_key),
        x25519::PublicKey::from(keys::public_key(&a_key)),
        Some(path_psk(None, 0)),
        None,
        0,
        Some(Arc::new(RateLimiter::new(&b_public, 0))),
    );
    let mut out = vec![0u8; 2048];
    let mut initiation = Vec::new();
    a.initiate(&mut out, |d| initiation = d.to_vec());
    let mut reply = vec![0u8; 2048];
    let cookie = match b.decapsulate(Some(PEER_ADDR), &initiation, &mut reply) {
        TunnResult::WriteToNetwork(d) => d.to_vec(),
        _ => panic!("no cookie reply from a peer under load"),
    };
    assert_eq!(cookie.first(), Some(&COOKIE_REPLY));
    assert_eq!(a.open(PEER_ADDR, &cookie, &mut out, |_| {}), Opened::Cookie);
}
