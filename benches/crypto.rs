//! One path's WireGuard seal and open, with real crypto, per packet size.
//!
//! Each packet mptun carries is sealed by the sending path's [`PathSession`]
//! and opened by the receiving one (ChaCha20-Poly1305 through boringtun),
//! which is expected to dominate the per-packet CPU cost of the tunnel.
//! Two sessions are handshaken in memory, then each iteration takes an IPv4
//! packet of 64, 512 or 1420 bytes (the inner packet's total length), with
//! the 16-byte mptun trailer appended as the driver does, seals it on one
//! side and opens it on the other; `seal` alone is measured too (open is
//! roughly the difference). Sealing and opening in the same iteration keeps
//! WireGuard's counters in order for the replay window.
//!
//! A session is never left to expire mid-run (no timers are ticked, so
//! boringtun keeps it), but should a seal not give a data message or an
//! open not give the packet back, the pair is handshaken anew and the event
//! counted and reported rather than timed as a result. Every size is
//! checked once before timing: the packet and trailer come back intact.
//!
//! Throughput is the inner packet's bytes per second.

use std::hint::black_box;

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mptun_core::{Kind, PathSet, Seq, Trailer, TRAILER_LEN};
use mptun_wg::testing::{self, pair, PEER_ADDR};
use mptun_wg::{Opened, PathSession};

const SIZES: [u16; 3] = [64, 512, 1420];

/// WireGuard message type of a transport data message.
const WG_DATA: u8 = 4;

/// Two established sessions of one path.
fn handshaken_pair() -> (PathSession, PathSession) {
    let (mut a, mut b) = pair();
    assert!(testing::handshake(&mut a, &mut b), "handshake failed");
    (a, b)
}

/// An IPv4 packet of `total_len` bytes (header, zero payload) followed by
/// an mptun trailer: the plaintext the driver seals.
fn plaintext(total_len: u16) -> Vec<u8> {
    let mut p = vec![0u8; usize::from(total_len)];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&total_len.to_be_bytes());
    p[8] = 64; // TTL
    p[9] = 17; // UDP
    p[12..16].copy_from_slice(&[10, 77, 0, 1]);
    p[16..20].copy_from_slice(&[10, 77, 0, 2]);
    let trailer = Trailer {
        seq: Seq(1),
        path_seq: Seq(1),
        epoch: 77,
        sent_us: 1_000,
        previous_on_path: Some(Seq(0)),
        paths_in_use: PathSet(0b11),
        kind: Kind::Data,
        congested: false,
        held: false,
    };
    let mut t = [0u8; TRAILER_LEN];
    trailer.encode(&mut t);
    p.extend_from_slice(&t);
    p
}

/// A sending and a receiving session and their buffers.
struct Link {
    a: PathSession,
    b: PathSession,
    sealed: Vec<u8>,
    opened: Vec<u8>,
    /// Times the sessions had to be handshaken again.
    rehandshakes: u64,
}

impl Link {
    fn new() -> Self {
        let (a, b) = handshaken_pair();
        Link {
            a,
            b,
            sealed: vec![0u8; PathSession::sealed_len(2048)],
            opened: vec![0u8; 2048],
            rehandshakes: 0,
        }
    }

    fn rehandshake(&mut self) {
        (self.a, self.b) = handshaken_pair();
        self.rehandshakes += 1;
    }

    /// Seal `plaintext` on `a` and open it on `b`; return the inner packet's
    /// length, or `None` (after handshaking again) if either step failed.
    fn seal_open(&mut self, plaintext: &[u8]) -> Option<usize> {
        let ok = match self.a.seal(plaintext, &mut self.sealed) {
            Some(datagram) if datagram.first() == Some(&WG_DATA) => {
                match self.b.open(PEER_ADDR, datagram, &mut self.opened, |_| {}) {
                    Opened::Plaintext { len } => Some(len),
                    _ => None,
                }
            }
            _ => None,
        };
        if ok.is_none() {
            self.rehandshake();
        }
        ok
    }

    /// Seal `plaintext` on `a` only; return the datagram's length, or `None`
    /// (after handshaking again) if no data message came out.
    fn seal(&mut self, plaintext: &[u8]) -> Option<usize> {
        let ok = match self.a.seal(plaintext, &mut self.sealed) {
            Some(datagram) if datagram.first() == Some(&WG_DATA) => Some(datagram.len()),
            _ => None,
        };
        if ok.is_none() {
            self.rehandshake();
        }
        ok
    }
}

/// Check once, outside the timing, that a packet of `size` makes the round
/// trip intact, trailer included.
fn check(size: u16, plaintext: &[u8]) {
    let (mut a, mut b) = handshaken_pair();
    let mut sealed = vec![0u8; PathSession::sealed_len(plaintext.len())];
    let datagram = a.seal(plaintext, &mut sealed).expect("a datagram").to_vec();
    assert_eq!(datagram.first(), Some(&WG_DATA));
    let mut out = vec![0u8; 2048];
    match b.open(PEER_ADDR, &datagram, &mut out, |_| {}) {
        Opened::Plaintext { len } => {
            assert_eq!(out[..len], plaintext[..]);
            let (_, body) = Trailer::decode_suffix(&out[..len]).expect("trailer");
            assert_eq!(body, usize::from(size));
        }
        other => panic!("size {size}: expected a plaintext, got {other:?}"),
    }
}

fn report_rehandshakes(what: &str, size: u16, link: &Link) {
    if link.rehandshakes > 0 {
        eprintln!(
            "warning: crypto/{what}/{size}: sessions handshaken again {} times",
            link.rehandshakes
        );
    }
}

fn bench_crypto(c: &mut Criterion) {
    let mut group = c.benchmark_group("crypto/seal_open");
    for size in SIZES {
        let plaintext = plaintext(size);
        check(size, &plaintext);
        group.throughput(Throughput::Bytes(u64::from(size)));
        let mut link = Link::new();
        group.bench_with_input(BenchmarkId::from_parameter(size), &plaintext, |b, p| {
            b.iter(|| black_box(link.seal_open(black_box(p))));
        });
        report_rehandshakes("seal_open", size, &link);
    }
    group.finish();

    let mut group = c.benchmark_group("crypto/seal");
    for size in SIZES {
        let plaintext = plaintext(size);
        group.throughput(Throughput::Bytes(u64::from(size)));
        let mut link = Link::new();
        group.bench_with_input(BenchmarkId::from_parameter(size), &plaintext, |b, p| {
            b.iter(|| black_box(link.seal(black_box(p))));
        });
        report_rehandshakes("seal", size, &link);
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::quick();
    targets = bench_crypto
}
criterion_main!(benches);
