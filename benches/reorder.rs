//! The receive-side reorder buffer under the arrival patterns it meets.
//!
//! Every packet received on any path goes through
//! [`ReorderBuffer::handle_packet`] before it reaches the TUN device, so the
//! buffer's per-packet cost caps the tunnel's packet rate. These benches feed
//! it full-size (1420-byte) packets the way the driver does: one receive
//! buffer, the packet delivered straight from it on `DeliverNow`, then
//! `poll_release` drained (each released buffer handed back with `recycle`)
//! and the timer run when `poll_timeout` says so. Time is virtual: one
//! `Instant` taken at setup, one microsecond added per arrival (about
//! 10 Gbit/s of 1420-byte packets); nothing sleeps.
//!
//! Patterns, each 10,000 packets sent per iteration:
//! - `in_order`: two paths, round-robin, arriving in the order sent; every
//!   packet goes straight through.
//! - `reordered_pairs`: two paths, every adjacent pair swapped on arrival;
//!   half the packets wait for one other.
//! - `reordered_win16`: four paths, round-robin; within each window of 16
//!   the four paths' packets arrive in a seeded pseudo-random interleaving
//!   (each path still in its own order, as a path delivers).
//! - `loss_2pct`: three paths, round-robin, every 50th packet lost; gaps are
//!   released on evidence, once each of the three paths has delivered past.
//! - `skew64`: two paths alternating, path 0 running 64 of its packets ahead
//!   of path 1 (128 sequence numbers), so some 64 packets are held at any
//!   time.
//!
//! The buffer is reused across iterations, as in a long-running tunnel:
//! sequence numbers and virtual time carry on from one iteration to the
//! next, so the spare-buffer pool is warm. Each pattern is checked once
//! before timing (every packet not lost comes out, in order, with no
//! timeout, overflow or drop) and every timed iteration checks the count,
//! so a broken path cannot be measured silently.
//!
//! Throughput is reported in packets (elements) and bytes received per
//! second; for `loss_2pct` only the packets that arrived count.

use std::hint::black_box;
use std::time::{Duration, Instant};

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mptun_core::{Kind, PathId, PathSet, ReorderBuffer, ReorderConfig, Seq, Trailer, Verdict};

/// Inner packet size: a full-size packet on a 1500-byte path MTU.
const PACKET_LEN: usize = 1420;

/// Packets the sender sends per iteration.
const PACKETS: u32 = 10_000;

/// Virtual time between two arrivals.
const TICK: Duration = Duration::from_micros(1);

const EPOCH: u32 = 0x5eed;

/// One packet as it arrives: its path and its place in the sender's order
/// (relative to the iteration's first sequence number).
#[derive(Clone, Copy)]
struct Arrival {
    path: PathId,
    seq: u32,
    path_seq: u32,
}

/// An arrival schedule, built once outside the timing.
struct Pattern {
    name: &'static str,
    paths_in_use: PathSet,
    arrivals: Vec<Arrival>,
    /// Packets each path was given by the sender (lost ones included), to
    /// advance the per-path numbering between iterations.
    sent_per_path: Vec<u32>,
    /// Sequence numbers sent but never arriving.
    lost: Vec<u32>,
}

impl Pattern {
    /// Build a pattern of `PACKETS` packets striped round-robin over `paths`
    /// paths, arriving in the order `order` puts them in and without those
    /// `lost` returns true for.
    fn new(
        name: &'static str,
        paths: u8,
        order: impl FnOnce(&mut Vec<Arrival>),
        lost: impl Fn(u32) -> bool,
    ) -> Self {
        let mut sent_per_path = vec![0u32; usize::from(paths)];
        let mut arrivals = Vec::with_capacity(PACKETS as usize);
        let mut lost_seqs = Vec::new();
        for seq in 0..PACKETS {
            let path = PathId((seq % u32::from(paths)) as u8);
            let path_seq = sent_per_path[path.index()];
            sent_per_path[path.index()] += 1;
            if lost(seq) {
                lost_seqs.push(seq);
            } else {
                arrivals.push(Arrival {
                    path,
                    seq,
                    path_seq,
                });
            }
        }
        order(&mut arrivals);
        let mut paths_in_use = PathSet::default();
        for p in 0..paths {
            paths_in_use.insert(PathId(p));
        }
        Pattern {
            name,
            paths_in_use,
            arrivals,
            sent_per_path,
            lost: lost_seqs,
        }
    }

    /// Packets that come out of the buffer per iteration.
    fn expected_out(&self) -> usize {
        self.arrivals.len()
    }

    fn throughput(&self) -> Throughput {
        let n = self.arrivals.len() as u64;
        Throughput::ElementsAndBytes {
            elements: n,
            bytes: n * PACKET_LEN as u64,
        }
    }
}

/// A small, seeded PRNG (xorshift64*), so the pattern is the same each run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn patterns() -> Vec<Pattern> {
    let in_order = Pattern::new("in_order", 2, |_| {}, |_| false);

    let reordered_pairs = Pattern::new(
        "reordered_pairs",
        2,
        |a| {
            for pair in a.chunks_exact_mut(2) {
                pair.swap(0, 1);
            }
        },
        |_| false,
    );

    let reordered_win16 = Pattern::new(
        "reordered_win16",
        4,
        |a| {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
            for window in a.chunks_exact_mut(16) {
                // Four per-path queues (each in path order); repeatedly take
                // the head of a randomly chosen non-empty one.
                let mut queues: Vec<Vec<Arrival>> = vec![Vec::new(); 4];
                for arrival in window.iter().rev() {
                    queues[arrival.path.index()].push(*arrival);
                }
                for slot in window.iter_mut() {
                    let non_empty: Vec<usize> = (0..4).filter(|&q| !queues[q].is_empty()).collect();
                    let q = non_empty[rng.below(non_empty.len())];
                    *slot = queues[q].pop().expect("non-empty queue");
                }
            }
        },
        |_| false,
    );

    // Every 50th packet lost; offset so the iteration does not end on a gap.
    let loss_2pct = Pattern::new("loss_2pct", 3, |_| {}, |seq| seq % 50 == 17);

    const SKEW: usize = 64;
    let skew64 = Pattern::new(
        "skew64",
        2,
        |a| {
            let (p0, p1): (Vec<Arrival>, Vec<Arrival>) = a.iter().partition(|x| x.path.0 == 0);
            a.clear();
            // Path 0 alone for its first SKEW packets, then the two paths
            // alternate, then path 1's last SKEW packets arrive alone.
            a.extend_from_slice(&p0[..SKEW]);
            for (i, x) in p1.iter().enumerate() {
                a.push(*x);
                if let Some(y) = p0.get(SKEW + i) {
                    a.push(*y);
                }
            }
        },
        |_| false,
    );

    vec![
        in_order,
        reordered_pairs,
        reordered_win16,
        loss_2pct,
        skew64,
    ]
}

/// The receive side of a tunnel: one reorder buffer, one receive buffer,
/// and the numbering of the next iteration.
struct Driver {
    buf: ReorderBuffer,
    start: Instant,
    elapsed: Duration,
    base_seq: u32,
    base_path_seq: Vec<u32>,
    rx: Vec<u8>,
}

impl Driver {
    /// A fresh buffer, primed for `pattern`.
    ///
    /// A new buffer starts from whichever sequence number it hears first,
    /// and a pattern may well start with a reordered packet; so one packet,
    /// number 0 on path 0, goes first and the patterns start at 1.
    fn new(pattern: &Pattern) -> Self {
        let mut rx = vec![0u8; PACKET_LEN];
        rx[0] = 0x45;
        rx[2..4].copy_from_slice(&(PACKET_LEN as u16).to_be_bytes());
        let mut driver = Driver {
            buf: ReorderBuffer::new(ReorderConfig::default()),
            start: Instant::now(),
            elapsed: Duration::ZERO,
            base_seq: 1,
            base_path_seq: vec![0; pattern.sent_per_path.len()],
            rx,
        };
        let first = Trailer {
            seq: Seq(0),
            path_seq: Seq(0),
            epoch: EPOCH,
            paths_in_use: pattern.paths_in_use,
            kind: Kind::Data,
            congested: false,
        };
        let verdict = driver
            .buf
            .handle_packet(driver.start, PathId(0), &first, &driver.rx);
        assert_eq!(verdict, Verdict::DeliverNow);
        driver.base_path_seq[0] = 1;
        driver
    }

    /// Feed one iteration of `pattern`; pass every packet delivered, in
    /// order, to `deliver`; return how many were delivered.
    fn run(&mut self, pattern: &Pattern, mut deliver: impl FnMut(&[u8])) -> usize {
        let mut delivered = 0;
        for a in &pattern.arrivals {
            self.elapsed += TICK;
            let now = self.start + self.elapsed;
            let seq = self.base_seq.wrapping_add(a.seq);
            // Stamp the sequence number into the payload (the IPv4
            // identification and flags bytes) so the check can read the
            // order back; the write stands in for the socket's receive.
            self.rx[4..8].copy_from_slice(&seq.to_be_bytes());
            let trailer = Trailer {
                seq: Seq(seq),
                path_seq: Seq(self.base_path_seq[a.path.index()].wrapping_add(a.path_seq)),
                epoch: EPOCH,
                paths_in_use: pattern.paths_in_use,
                kind: Kind::Data,
                congested: false,
            };
            if self.buf.handle_packet(now, a.path, &trailer, &self.rx) == Verdict::DeliverNow {
                deliver(&self.rx);
                delivered += 1;
            }
            delivered += drain(&mut self.buf, &mut deliver);
            if self.buf.poll_timeout().is_some_and(|t| t <= now) {
                self.buf.handle_timeout(now);
                delivered += drain(&mut self.buf, &mut deliver);
            }
        }
        self.base_seq = self.base_seq.wrapping_add(PACKETS);
        for (base, sent) in self.base_path_seq.iter_mut().zip(&pattern.sent_per_path) {
            *base = base.wrapping_add(*sent);
        }
        delivered
    }
}

fn drain(buf: &mut ReorderBuffer, deliver: &mut impl FnMut(&[u8])) -> usize {
    let mut n = 0;
    while let Some(packet) = buf.poll_release() {
        deliver(&packet);
        n += 1;
        buf.recycle(packet);
    }
    n
}

/// Run a few iterations of `pattern` outside the timing and check that
/// every packet not lost came out, once, in order, with nothing skipped but
/// the losses and nothing left held.
fn check(pattern: &Pattern) {
    const ROUNDS: u32 = 3;
    let mut driver = Driver::new(pattern);
    let mut got = Vec::new();
    for _ in 0..ROUNDS {
        driver.run(pattern, |p| {
            got.push(u32::from_be_bytes(p[4..8].try_into().expect("4 bytes")));
        });
        assert_eq!(
            driver.buf.held_len(),
            0,
            "{}: packets left held",
            pattern.name
        );
    }
    let mut expected = Vec::new();
    for round in 0..ROUNDS {
        let base = 1 + round * PACKETS;
        expected.extend(
            (0..PACKETS)
                .filter(|s| pattern.lost.binary_search(s).is_err())
                .map(|s| base + s),
        );
    }
    assert!(got == expected, "{}: wrong delivery order", pattern.name);
    let stats = driver.buf.stats();
    assert_eq!(
        stats.skipped_loss,
        u64::from(ROUNDS) * pattern.lost.len() as u64,
        "{}: {stats:?}",
        pattern.name
    );
    assert_eq!(
        (
            stats.skipped_timeout,
            stats.skipped_overflow,
            stats.dropped_stale,
            stats.dropped_duplicate,
            stats.dropped_foreign_epoch,
        ),
        (0, 0, 0, 0, 0),
        "{}: {stats:?}",
        pattern.name
    );
}

fn bench_reorder(c: &mut Criterion) {
    let mut group = c.benchmark_group("reorder");
    for pattern in patterns() {
        check(&pattern);
        group.throughput(pattern.throughput());
        let expected = pattern.expected_out();
        group.bench_with_input(
            BenchmarkId::from_parameter(pattern.name),
            &pattern,
            |b, pattern| {
                let mut driver = Driver::new(pattern);
                b.iter(|| {
                    let n = driver.run(pattern, |p| {
                        black_box(p);
                    });
                    assert_eq!(n, expected, "{}: packets missing", pattern.name);
                });
            },
        );
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::quick();
    targets = bench_reorder
}
criterion_main!(benches);
