//! Path choice per outbound packet, against the number of paths.
//!
//! [`Multipath::handle_outbound`] runs once for every packet read from the
//! TUN device: it builds the set of usable paths, picks one and numbers the
//! packet. Both policies are measured with 2, 4, 8 and 16 paths (16 is
//! `MAX_PATHS`), all up: the adaptive earliest-arrival scheduler (which
//! drains each path's queue model) and static weighted round-robin. The
//! bare [`WeightedRoundRobin::pick`] is measured alongside to show what the
//! numbering and the path set add. Throughput is packets per second.

use std::hint::black_box;
use std::time::{Duration, Instant};

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mptun_core::{Multipath, PathId, Policy, WeightedRoundRobin};

const PATH_COUNTS: [usize; 4] = [2, 4, 8, 16];

/// A sender with every path's session up, at time `t0`.
fn sender(t0: Instant, n: usize, policy: Policy) -> Multipath {
    let mut mp = Multipath::new(t0, 7, n, policy);
    for i in 0..n {
        mp.set_session(t0, PathId(i as u8), true);
    }
    mp
}

fn bench_scheduler(c: &mut Criterion) {
    let t0 = Instant::now();
    for (name, policy) in [
        (
            "adaptive",
            Box::new(|_: usize| Policy::adaptive(None)) as Box<dyn Fn(usize) -> Policy>,
        ),
        (
            "round_robin",
            Box::new(|n| Policy::RoundRobin(WeightedRoundRobin::new(&vec![1; n]))),
        ),
    ] {
        let mut group = c.benchmark_group(format!("scheduler/{name}"));
        group.throughput(Throughput::Elements(1));
        for n in PATH_COUNTS {
            // Checked once, outside the timing: offered more than all the
            // paths together carry (a packet a microsecond), every path
            // gets packets. (The adaptive scheduler leaves a path idle
            // while the others suffice.)
            let mut check = sender(t0, n, policy(n));
            let mut counts = vec![0usize; n];
            for k in 0..n * 100 {
                let at = t0 + Duration::from_micros(k as u64);
                let (path, _) = check.handle_outbound(at, 1420).expect("a usable path");
                counts[path.index()] += 1;
            }
            assert!(
                counts.iter().all(|&c| c > 0),
                "{name}: unused paths {counts:?}"
            );

            group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
                let mut mp = sender(t0, n, policy(n));
                // Virtual time advancing 10 µs a packet: ~1.1 Gbit/s offered.
                let mut now = t0;
                b.iter(|| {
                    now += Duration::from_micros(10);
                    black_box(mp.handle_outbound(black_box(now), 1420))
                });
            });
        }
        group.finish();
    }

    let usable = [true; mptun_core::MAX_PATHS];
    let mut group = c.benchmark_group("scheduler/wrr_pick");
    group.throughput(Throughput::Elements(1));
    for n in PATH_COUNTS {
        let weights = vec![1u32; n];
        group.bench_with_input(BenchmarkId::from_parameter(n), &weights, |b, weights| {
            let mut wrr = WeightedRoundRobin::new(weights);
            b.iter(|| {
                let usable = black_box(&usable);
                black_box(wrr.pick(|p: PathId| usable[p.index()]))
            });
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::quick();
    targets = bench_scheduler
}
criterion_main!(benches);
