//! The sans-IO core driven through simulated paths with virtual time: a
//! sender striping over paths of different delays, and the receiver putting
//! the packets back in order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use mptun_core::{PathId, ReorderBuffer, ReorderConfig, Sender, Trailer, Verdict};

/// A packet in flight: arrival time (µs from start), order of sending, path,
/// trailer.
type InFlight = Reverse<(u64, u64, u8, TrailerKey)>;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct TrailerKey(u32, u32, u16);

/// Send `packets` at `interval_us` over paths with these one-way delays
/// (µs), dropping the packets whose index `lose` returns true for, and
/// return the order the receiver delivered them in plus its counters.
fn simulate(
    delays_us: &[u64],
    packets: u32,
    interval_us: u64,
    lose: impl Fn(u32) -> bool,
) -> (Vec<u32>, mptun_core::ReorderStats) {
    let t0 = Instant::now();
    let at = |us: u64| t0 + Duration::from_micros(us);
    let mut sender = Sender::new(99, &vec![1; delays_us.len()]);
    let mut receiver = ReorderBuffer::new(ReorderConfig::default());
    let mut wire: BinaryHeap<InFlight> = BinaryHeap::new();
    let mut delivered = Vec::new();
    let mut order = 0u64;
    let mut now = 0u64;
    let mut next_send = 0u64;
    let mut sent = 0u32;
    loop {
        // Next event: a send, an arrival, or the reorder timer.
        let arrival = wire.peek().map(|Reverse((t, ..))| *t);
        let timer = receiver
            .poll_timeout()
            .map(|d| d.duration_since(t0).as_micros() as u64);
        let send = (sent < packets).then_some(next_send);
        let Some(next) = [arrival, timer, send].into_iter().flatten().min() else {
            break;
        };
        now = now.max(next);
        if send == Some(now) {
            let (path, trailer) = sender.handle_outbound(|_| true).expect("a path");
            if !lose(sent) {
                let key = TrailerKey(trailer.seq.0, trailer.path_seq.0, trailer.paths_in_use.0);
                wire.push(Reverse((now + delays_us[path.index()], order, path.0, key)));
                order += 1;
            }
            sent += 1;
            next_send += interval_us;
        } else if arrival == Some(now) {
            let Some(Reverse((_, _, path, TrailerKey(seq, path_seq, in_use)))) = wire.pop() else {
                break;
            };
            let trailer = Trailer {
                seq: mptun_core::Seq(seq),
                path_seq: mptun_core::Seq(path_seq),
                epoch: 99,
                paths_in_use: mptun_core::PathSet(in_use),
                kind: mptun_core::Kind::Data,
            };
            if receiver.handle_packet(at(now), PathId(path), &trailer, &seq.to_be_bytes())
                == Verdict::DeliverNow
            {
                delivered.push(seq);
            }
        } else {
            receiver.handle_timeout(at(now));
        }
        while let Some(p) = receiver.poll_release() {
            delivered.push(u32::from_be_bytes([p[0], p[1], p[2], p[3]]));
        }
    }
    (delivered, receiver.stats())
}

#[test]
fn skewed_paths_deliver_everything_in_order() {
    // 5, 15 and 30 ms one-way; a packet every 100 µs.
    let (delivered, stats) = simulate(&[5_000, 15_000, 30_000], 20_000, 100, |_| false);
    assert_eq!(delivered, (0..20_000).collect::<Vec<_>>());
    assert_eq!(stats.skipped_loss + stats.skipped_timeout, 0);
    assert!(
        stats.buffered > 10_000,
        "the skew must have caused reordering"
    );
}

#[test]
fn losses_are_released_on_evidence_not_by_the_timer() {
    let lost = |i: u32| i % 97 == 5;
    let (delivered, stats) = simulate(&[5_000, 15_000, 30_000], 20_000, 100, lost);
    let expected: Vec<u32> = (0..20_000).filter(|&i| !lost(i)).collect();
    assert_eq!(delivered, expected);
    assert_eq!(stats.skipped_loss, 20_000 / 97 + 1);
    assert_eq!(stats.skipped_timeout, 0);
}
