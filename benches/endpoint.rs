//! Two `Endpoint`s back to back in memory, without crypto: what one site's
//! core costs per packet, sending and receiving.
//!
//! Each iteration hands a batch of full-size (1400-byte) inner packets to
//! site A's [`Endpoint::handle_tun`], moves every plaintext A transmits to
//! site B's [`Endpoint::handle_datagrams`] on its path, takes what B
//! delivers with [`Endpoint::poll_deliver`], and moves B's probes back to
//! A. Virtual time advances one microsecond per packet (about 11 Gbit/s);
//! timers run when `poll_timeout` says so. Delivered buffers are handed in
//! again as the next packets, so nothing is allocated once warm.
//!
//! Paths: 1, 3 and 8, all up with equal delay; batch sizes 1 and 64 (what
//! one TUN read gives without and with offload). Throughput is packets
//! through both sites per second, on one core.

use std::hint::black_box;
use std::time::{Duration, Instant};

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mptun_core::{Endpoint, EndpointConfig, PacketBuf, PathId};

const PACKET_LEN: usize = 1400;
const PATH_COUNTS: [usize; 3] = [1, 3, 8];
const BATCHES: [usize; 2] = [1, 64];

/// Two sites, every path up, and the buffers in circulation.
struct Pair {
    a: Endpoint,
    b: Endpoint,
    now: Instant,
    /// Packets to hand to A next.
    packets: Vec<PacketBuf>,
    transmits: Vec<PacketBuf>,
    delivered: Vec<PacketBuf>,
}

impl Pair {
    fn new(paths: usize, batch: usize) -> Pair {
        let t0 = Instant::now();
        let mut a = Endpoint::new(t0, EndpointConfig::new(1, paths));
        let mut b = Endpoint::new(t0, EndpointConfig::new(2, paths));
        for i in 0..paths {
            a.set_session(t0, PathId(i as u8), true);
            b.set_session(t0, PathId(i as u8), true);
        }
        let packets = (0..batch)
            .map(|_| {
                let mut p = vec![0u8; PACKET_LEN];
                p[0] = 0x45;
                p[2..4].copy_from_slice(&(PACKET_LEN as u16).to_be_bytes());
                PacketBuf::copy_of(&p)
            })
            .collect();
        let mut pair = Pair {
            a,
            b,
            now: t0,
            packets: Vec::new(),
            transmits: Vec::new(),
            delivered: packets,
        };
        // A second of probes, so that every path is measured and up.
        for _ in 0..1000 {
            pair.now += Duration::from_millis(1);
            pair.timers();
            pair.exchange();
        }
        pair
    }

    fn timers(&mut self) {
        for site in [&mut self.a, &mut self.b] {
            if site.poll_timeout().is_some_and(|t| t <= self.now) {
                site.handle_timeout(self.now);
            }
        }
    }

    /// Move what each side transmits to the other, on its path.
    fn exchange(&mut self) {
        while let Some(path) = self.a.poll_transmit(&mut self.transmits) {
            self.b.handle_datagrams(self.now, path, &mut self.transmits);
        }
        while let Some(path) = self.b.poll_transmit(&mut self.transmits) {
            self.a.handle_datagrams(self.now, path, &mut self.transmits);
        }
        self.b.poll_deliver(&mut self.delivered);
    }

    /// One batch through both sites; return how many were delivered.
    fn step(&mut self) -> usize {
        std::mem::swap(&mut self.packets, &mut self.delivered);
        let n = self.packets.len();
        self.now += Duration::from_micros(n as u64);
        self.timers();
        self.a.handle_tun(self.now, &mut self.packets);
        self.exchange();
        n
    }
}

fn bench_endpoint(c: &mut Criterion) {
    for batch in BATCHES {
        let mut group = c.benchmark_group(format!("endpoint/batch_{batch}"));
        group.throughput(Throughput::Elements(batch as u64));
        for paths in PATH_COUNTS {
            // Checked once, outside the timing: every packet comes out, and
            // every path carries some.
            let mut check = Pair::new(paths, batch);
            for _ in 0..20_000 / batch {
                check.step();
            }
            assert_eq!(check.delivered.len(), batch, "packets lost");
            for i in 0..paths {
                let sent = check.a.path_stats(PathId(i as u8)).tx_packets;
                assert!(sent > 0, "{paths} paths: path {i} unused");
            }
            group.bench_with_input(BenchmarkId::new("paths", paths), &paths, |bench, &paths| {
                let mut pair = Pair::new(paths, batch);
                bench.iter(|| black_box(pair.step()));
            });
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = common::quick();
    targets = bench_endpoint
}
criterion_main!(benches);
