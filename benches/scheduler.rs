//! Path choice per outbound packet, against the number of paths.
//!
//! [`Sender::handle_outbound`] runs once for every packet read from the TUN
//! device: it builds the set of usable paths, asks the smooth weighted
//! round-robin for a path (a linear scan over every path) and numbers the
//! packet. Its cost grows with the path count, so it is measured with 2, 4,
//! 8 and 16 paths (16 is `MAX_PATHS`), all usable, all of weight 1. The
//! bare [`WeightedRoundRobin::pick`] is measured alongside to show what the
//! numbering and the path set add. Throughput is packets per second.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mptun_core::{PathId, Sender, WeightedRoundRobin, MAX_PATHS};

const PATH_COUNTS: [usize; 4] = [2, 4, 8, 16];

fn bench_scheduler(c: &mut Criterion) {
    // What the driver would look up per path; behind `black_box` so the
    // compiler cannot fold the usability check away.
    let usable = [true; MAX_PATHS];

    let mut group = c.benchmark_group("scheduler/handle_outbound");
    group.throughput(Throughput::Elements(1));
    for n in PATH_COUNTS {
        let weights = vec![1u32; n];
        // Checked once, outside the timing: equal weights share evenly.
        let mut check = Sender::new(7, &weights);
        let mut counts = vec![0usize; n];
        for _ in 0..n * 100 {
            let (path, _) = check.handle_outbound(|_| true).expect("a usable path");
            counts[path.index()] += 1;
        }
        assert!(counts.iter().all(|&c| c == 100), "uneven shares {counts:?}");

        group.bench_with_input(BenchmarkId::from_parameter(n), &weights, |b, weights| {
            let mut sender = Sender::new(7, weights);
            b.iter(|| {
                let usable = black_box(&usable);
                black_box(sender.handle_outbound(|p: PathId| usable[p.index()]))
            });
        });
    }
    group.finish();

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
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench_scheduler
}
criterion_main!(benches);
