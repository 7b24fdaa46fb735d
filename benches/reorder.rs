//! The receive-side reorder buffer under the arrival patterns it meets.
//!
//! Every packet received on any path goes through
//! [`ReorderBuffer::handle_packet`] before it reaches the TUN device, so the
//! buffer's per-packet cost caps the tunnel's packet rate. These benches feed
//! it full-size (1420-byte) packets the way the endpoint does: each in its
//! own buffer from a pool, moved into the buffer and out of
//! `poll_release`, back to the pool, with the timer run when
//! `poll_timeout` says so. Time is virtual: one
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
//! next, so the buffer pool is warm. Each pattern is checked once
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
use mptun_core::{
    Arrival, BufPool, PacketBuf, PathId, PathSet, ReorderBuffer, ReorderConfig, Seq, Verdict,
};

/// Inner packet size: a full-size packet on a 1500-byte path MTU.
const PACKET_LEN: usize = 1420;

/// Packets the sender sends per iteration.
const PACKETS: u32 = 10_000;

/// Virtual time between two arrivals.
const TICK: Duration = Duration::from_micros(1);

/// One packet as it arrives: its path and its place in the sender's order
/// (relative to the iteration's first sequence number).
#[derive(Clone, Copy)]
struct Arrives {
    path: PathId,
    seq: u32,
}

/// An arrival schedule, built once outside the timing.
struct Pattern {
    name: &'static str,
    paths_in_use: PathSet,
    arrivals: Vec<Arrives>,
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
        order: impl FnOnce(&mut Vec<Arrives>),
        lost: impl Fn(u32) -> bool,
    ) -> Self {
        let mut arrivals = Vec::with_capacity(PACKETS as usize);
        let mut lost_seqs = Vec::new();
        for seq in 0..PACKETS {
            let path = PathId((seq % u32::from(paths)) as u8);
            if lost(seq) {
                lost_seqs.push(seq);
            } else {
                arrivals.push(Arrives { path, seq });
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
                let mut queues: Vec<Vec<Arrives>> = vec![Vec::new(); 4];
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
            let (p0, p1): (Vec<Arrives>, Vec<Arrives>) = a.iter().partition(|x| x.path.0 == 0);
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

/// The receive side of a tunnel: one reorder buffer, a pool of packet
/// buffers, and the numbering of the next iteration.
struct Driver {
    buf: ReorderBuffer<PacketBuf>,
    pool: BufPool,
    start: Instant,
    elapsed: Duration,
    base_seq: u32,
}

impl Driver {
    /// A fresh buffer, primed for `pattern`.
    ///
    /// A new buffer starts from the sequence number it is told, and a
    /// pattern may well start with a reordered packet; so one packet, number
    /// 0 on path 0, goes first and the patterns start at 1.
    fn new(pattern: &Pattern) -> Self {
        let start = Instant::now();
        let mut driver = Driver {
            buf: ReorderBuffer::new(ReorderConfig::default()),
            pool: BufPool::new(PACKET_LEN, 16_384),
            start,
            elapsed: Duration::ZERO,
            base_seq: 1,
        };
        let first = Arrival {
            path: PathId(0),
            seq: Seq(0),
            paths_in_use: pattern.paths_in_use,
            previous_on_path: None,
            dropped_at_queue: 0,
            due: None,
            unordered: false,
        };
        let packet = driver.packet(0);
        let verdict = driver.buf.handle_packet(driver.start, &first, packet);
        assert_eq!(verdict.ok(), Some(Verdict::InOrder));
        drain(&mut driver.buf, &mut driver.pool, &mut |_| {});
        driver
    }

    /// A full-size IPv4 packet from the pool, its sequence number stamped
    /// in (the identification and flags bytes) so the check can read the
    /// order back: the write stands in for the socket's receive.
    fn packet(&mut self, seq: u32) -> PacketBuf {
        let mut p = self.pool.take(0);
        if p.len() < PACKET_LEN {
            p.extend_from_slice(&[0; PACKET_LEN][p.len()..]);
            p.packet_mut()[0] = 0x45;
            p.packet_mut()[2..4].copy_from_slice(&(PACKET_LEN as u16).to_be_bytes());
        }
        p.packet_mut()[4..8].copy_from_slice(&seq.to_be_bytes());
        p
    }

    /// Feed one iteration of `pattern`; pass every packet delivered, in
    /// order, to `deliver`; return how many were delivered.
    fn run(&mut self, pattern: &Pattern, mut deliver: impl FnMut(&[u8])) -> usize {
        let mut delivered = 0;
        for a in &pattern.arrivals {
            self.elapsed += TICK;
            let now = self.start + self.elapsed;
            let seq = self.base_seq.wrapping_add(a.seq);
            let arrival = Arrival {
                path: a.path,
                seq: Seq(seq),
                paths_in_use: pattern.paths_in_use,
                previous_on_path: None,
                dropped_at_queue: 0,
                due: None,
                unordered: false,
            };
            let packet = self.packet(seq);
            if let Err((_, packet)) = self.buf.handle_packet(now, &arrival, packet) {
                self.pool.put(packet);
            }
            delivered += drain(&mut self.buf, &mut self.pool, &mut deliver);
            if self.buf.poll_timeout().is_some_and(|t| t <= now) {
                self.buf.handle_timeout(now);
                delivered += drain(&mut self.buf, &mut self.pool, &mut deliver);
            }
        }
        self.base_seq = self.base_seq.wrapping_add(PACKETS);
        delivered
    }
}

fn drain(
    buf: &mut ReorderBuffer<PacketBuf>,
    pool: &mut BufPool,
    deliver: &mut impl FnMut(&[u8]),
) -> usize {
    let mut n = 0;
    while let Some(packet) = buf.poll_release() {
        deliver(packet.packet());
        n += 1;
        pool.put(packet);
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
        ),
        (0, 0, 0, 0),
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
