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
        paths_in_use: PathSet(0b111),
        kind: Kind::Data,
        congested: false,
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
