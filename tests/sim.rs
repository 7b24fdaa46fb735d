//! Two real `Endpoint`s in a simulated network, with virtual time: their
//! encoded plaintexts cross seeded links (`mptun-netem`'s model: delay,
//! jitter, rate, a drop-tail queue, loss, cuts), both ways. Site A offers a
//! paced flow to site B, and B a lighter one back (as ACKs would be); each
//! side checks that what it delivers is in order. Runs in milliseconds of
//! real time per simulated second, deterministically for a seed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use mptun_core::{Endpoint, EndpointConfig, PacketBuf, PathId, PathState, ReorderStats};
use mptun_netem::model::{Direction, DirectionConfig};

const PACKET: usize = 1400;
/// What B sends back per packet of A's: one small packet in ten.
const REVERSE_EVERY: u64 = 10;
const REVERSE_PACKET: usize = 100;
/// Outer bytes a plaintext costs on a link: WireGuard, UDP and IPv4.
const OUTER: usize = 32 + 8 + 20;
const MS: Duration = Duration::from_millis(1);

/// An IPv4 packet of `len` bytes carrying `n`.
fn packet(len: usize, n: u64) -> PacketBuf {
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[20..28].copy_from_slice(&n.to_be_bytes());
    PacketBuf::copy_of(&p)
}

fn number(p: &PacketBuf) -> u64 {
    let mut n = [0; 8];
    n.copy_from_slice(&p.packet()[20..28]);
    u64::from_be_bytes(n)
}

/// A path's setting: rate (Mbit/s), one-way delay (ms) and loss from A to
/// B; B to A has the same rate and delay and no loss.
#[derive(Clone, Copy)]
struct PathSpec {
    rate_mbit: f64,
    delay_ms: u64,
    jitter_ms: u64,
    loss: f64,
}

fn path(rate_mbit: f64, delay_ms: u64, loss: f64) -> PathSpec {
    PathSpec {
        rate_mbit,
        delay_ms,
        jitter_ms: 0,
        loss,
    }
}

fn direction(spec: PathSpec, loss: f64, seed: u64) -> Direction {
    let config = DirectionConfig {
        delay: Duration::from_millis(spec.delay_ms),
        jitter: Duration::from_millis(spec.jitter_ms),
        loss,
        rate_bps: Some((spec.rate_mbit * 1e6) as u64),
        ..DirectionConfig::default()
    };
    Direction::new(config, seed)
}

/// A timed change to a path, applied in both directions.
#[derive(Clone, Copy)]
enum Change {
    Cut(usize),
    Restore(usize),
}

/// What is on the wire: arrival times and what arrives, in order.
#[derive(Default)]
struct Wire {
    due: BinaryHeap<Reverse<(Instant, u64)>>,
    in_flight: std::collections::HashMap<u64, (bool, PathId, u64, PacketBuf)>,
    order: u64,
}

impl Wire {
    fn next_due(&self) -> Option<Instant> {
        self.due.peek().map(|Reverse((t, _))| *t)
    }

    /// Take the arrivals due by `now`: to B?, path, the link's cut epoch
    /// when sent, plaintext.
    fn take_due(&mut self, now: Instant) -> Vec<(bool, PathId, u64, PacketBuf)> {
        let mut due = Vec::new();
        while let Some(&Reverse((t, id))) = self.due.peek() {
            if t > now {
                break;
            }
            self.due.pop();
            if let Some(arrival) = self.in_flight.remove(&id) {
                due.push(arrival);
            }
        }
        due
    }
}

/// One site: its endpoint, and what it delivered.
struct Site {
    endpoint: Endpoint,
    delivered: u64,
    last: Option<u64>,
}

impl Site {
    /// Record what the endpoint delivers, checking that it is in order.
    fn deliver(&mut self, name: &str, per_tick: Option<(&mut Vec<u64>, Duration)>) {
        let mut out = Vec::new();
        self.endpoint.poll_deliver(&mut out);
        for p in &out {
            let n = number(p);
            if let Some(last) = self.last {
                assert!(n > last, "{name} delivered {n} after {last}: out of order");
            }
            self.last = Some(n);
        }
        self.delivered += out.len() as u64;
        if let Some((ticks, at)) = per_tick {
            if let Some(bucket) = ticks.get_mut((at.as_millis() / 100) as usize) {
                *bucket += out.len() as u64;
            }
        }
    }
}

/// Results of a run.
#[derive(Debug, Default)]
struct Report {
    offered: u64,
    delivered: u64,
    offered_back: u64,
    delivered_back: u64,
    /// Packets B delivered per 100 ms.
    per_tick: Vec<u64>,
    stats: ReorderStats,
    hold_p99: Option<Duration>,
    /// Time from a cut to the path being marked down at A.
    down_after: Option<Duration>,
    /// Packets A resent on B's request.
    resent: u64,
    /// Each path's share of A's packets.
    shares: Vec<f64>,
}

impl Report {
    /// Goodput from A to B in Mbit/s between two times (seconds).
    fn mbps(&self, from: f64, to: f64) -> f64 {
        let (a, b) = ((from * 10.0) as usize, (to * 10.0) as usize);
        let ticks = &self.per_tick[a.min(self.per_tick.len())..b.min(self.per_tick.len())];
        ticks.iter().sum::<u64>() as f64 * PACKET as f64 * 8.0 / (to - from) / 1e6
    }

    fn fraction(&self) -> f64 {
        self.delivered as f64 / self.offered as f64
    }
}

struct Sim {
    seed: u64,
    paths: Vec<PathSpec>,
    offered_mbit: f64,
    seconds: f64,
    changes: Vec<(f64, Change)>,
    /// Seconds at the end with nothing new sent, for what is in flight to
    /// arrive.
    tail: f64,
}

impl Sim {
    fn new(seed: u64, paths: &[PathSpec], offered_mbit: f64, seconds: f64) -> Sim {
        Sim {
            seed,
            paths: paths.to_vec(),
            offered_mbit,
            seconds,
            changes: Vec::new(),
            tail: 0.0,
        }
    }

    fn run(self) -> Report {
        let t0 = Instant::now();
        let n = self.paths.len();
        let mut to_b: Vec<Direction> = Vec::new();
        let mut to_a: Vec<Direction> = Vec::new();
        for (i, &spec) in self.paths.iter().enumerate() {
            let seed = self.seed.wrapping_mul(1000).wrapping_add(i as u64);
            to_b.push(direction(spec, spec.loss, seed));
            to_a.push(direction(spec, 0.0, seed ^ 0x5eed));
        }
        let new_site = |epoch| {
            let mut endpoint = Endpoint::new(t0, EndpointConfig::new(epoch, n));
            for i in 0..n {
                endpoint.set_session(t0, PathId(i as u8), true);
            }
            Site {
                endpoint,
                delivered: 0,
                last: None,
            }
        };
        let (mut a, mut b) = (new_site(1), new_site(2));
        let mut wire = Wire::default();
        let interval = Duration::from_secs_f64(PACKET as f64 * 8.0 / (self.offered_mbit * 1e6));
        let end = t0 + Duration::from_secs_f64(self.seconds);
        let last_send = end - Duration::from_secs_f64(self.tail);
        let mut next_send = t0 + 500 * MS; // let probes measure first
        let mut report = Report {
            per_tick: vec![0; (self.seconds * 10.0).ceil() as usize + 1],
            ..Report::default()
        };
        let mut changes = self.changes.clone();
        changes.sort_by(|x, y| x.0.total_cmp(&y.0));
        let mut changes = changes.into_iter().peekable();
        let mut cut_at: Option<(Instant, usize)> = None;
        let mut now = t0;
        let mut out = Vec::new();
        while now < end {
            // The next thing to happen.
            let mut next = if next_send < last_send {
                next_send
            } else {
                end
            };
            for t in [
                wire.next_due(),
                a.endpoint.poll_timeout(),
                b.endpoint.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            {
                next = next.min(t.max(now));
            }
            if let Some(&(at, _)) = changes.peek() {
                next = next.min(t0 + Duration::from_secs_f64(at));
            }
            now = next.max(now);

            while let Some(&(at, change)) = changes.peek() {
                if t0 + Duration::from_secs_f64(at) > now {
                    break;
                }
                changes.next();
                let (p, up) = match change {
                    Change::Cut(p) => {
                        cut_at = Some((now, p));
                        (p, false)
                    }
                    Change::Restore(p) => (p, true),
                };
                to_b[p].set_up(up);
                to_a[p].set_up(up);
            }
            if let Some((at, p)) = cut_at {
                if report.down_after.is_none()
                    && a.endpoint.state(PathId(p as u8)) == PathState::Down
                {
                    report.down_after = Some(now - at);
                }
            }

            // Timers on both sides.
            for site in [&mut a, &mut b] {
                if site.endpoint.poll_timeout().is_some_and(|t| t <= now) {
                    site.endpoint.handle_timeout(now);
                }
            }

            // The sources: every packet due now, in one batch per side.
            let mut batch = Vec::new();
            let mut back = Vec::new();
            while next_send <= now && next_send < last_send {
                report.offered += 1;
                batch.push(packet(PACKET, report.offered));
                if report.offered.is_multiple_of(REVERSE_EVERY) {
                    report.offered_back += 1;
                    back.push(packet(REVERSE_PACKET, report.offered_back));
                }
                next_send += interval;
            }
            a.endpoint.handle_tun(now, &mut batch);
            b.endpoint.handle_tun(now, &mut back);

            // Arrivals, one batch per path and side; what a cut link had in
            // flight is lost.
            let due = wire.take_due(now);
            for to_b_side in [true, false] {
                for i in 0..n {
                    let links = if to_b_side { &to_b } else { &to_a };
                    let mut batch: Vec<PacketBuf> = due
                        .iter()
                        .filter(|(t, p, epoch, _)| {
                            *t == to_b_side && p.index() == i && *epoch == links[i].epoch()
                        })
                        .map(|(_, _, _, buf)| buf.clone())
                        .collect();
                    if batch.is_empty() {
                        continue;
                    }
                    let site = if to_b_side { &mut b } else { &mut a };
                    site.endpoint
                        .handle_datagrams(now, PathId(i as u8), &mut batch);
                }
            }

            // What both sides send, onto the links.
            for (from_a, site) in [(true, &mut a), (false, &mut b)] {
                while let Some(path) = site.endpoint.poll_transmit(&mut out) {
                    let link = if from_a {
                        &mut to_b[path.index()]
                    } else {
                        &mut to_a[path.index()]
                    };
                    for buf in out.drain(..) {
                        if let Some(at) = link.handle_arrival(now, buf.len() + OUTER) {
                            wire.order += 1;
                            wire.due.push(Reverse((at, wire.order)));
                            wire.in_flight
                                .insert(wire.order, (from_a, path, link.epoch(), buf));
                        }
                    }
                }
            }
            b.deliver("B", Some((&mut report.per_tick, now - t0)));
            a.deliver("A", None);
            while let Some(e) = a.endpoint.poll_event() {
                if std::env::var_os("SIM_TRACE").is_some() {
                    eprintln!("  {:?} {e:?} {:?}", now - t0, a.endpoint.estimate(e.path));
                }
            }
        }
        for i in 0..n {
            let id = PathId(i as u8);
            eprintln!(
                "  path {i}: {:?} {:?}",
                a.endpoint.state(id),
                a.endpoint.estimate(id)
            );
        }
        report.delivered = b.delivered;
        report.delivered_back = a.delivered;
        report.stats = b.endpoint.reorder_stats();
        report.hold_p99 = b.endpoint.waits().quantile(0.99);
        let sent: Vec<u64> = (0..n)
            .map(|i| {
                let s = a.endpoint.path_stats(PathId(i as u8));
                report.resent += s.resent;
                s.tx_packets - s.resent
            })
            .collect();
        let total: u64 = sent.iter().sum();
        report.shares = sent
            .iter()
            .map(|&s| s as f64 / total.max(1) as f64)
            .collect();
        report
    }
}

fn run(name: &str, sim: Sim) -> Report {
    let seed = sim.seed;
    let report = sim.run();
    eprintln!(
        "{name} (seed {seed}): {:.2}% delivered ({:.2}% back), shares {:?}, repaired {} of {} asked ({} resent), skipped {} lost / {} timeout, hold p99 {:?}, down after {:?}",
        100.0 * report.fraction(),
        100.0 * report.delivered_back as f64 / report.offered_back.max(1) as f64,
        report.shares.iter().map(|s| (s * 100.0).round()).collect::<Vec<_>>(),
        report.stats.repaired,
        report.stats.repairs_requested,
        report.resent,
        report.stats.skipped_loss,
        report.stats.skipped_timeout,
        report.hold_p99,
        report.down_after
    );
    report
}

#[test]
fn equal_paths_carry_what_is_offered_in_order() {
    let r = run("equal", Sim::new(1, &[path(100.0, 5, 0.0); 3], 270.0, 5.0));
    assert!(r.fraction() > 0.97, "delivered {:.3}", r.fraction());
    for share in &r.shares {
        assert!((share - 1.0 / 3.0).abs() < 0.08, "{:?}", r.shares);
    }
}

#[test]
fn skewed_rtt_paths_add_up_with_a_short_hold() {
    // 10 ms and 80 ms RTT.
    let r = run(
        "rtt skew",
        Sim::new(2, &[path(100.0, 5, 0.0), path(100.0, 40, 0.0)], 180.0, 5.0),
    );
    assert!(r.fraction() > 0.97, "delivered {:.3}", r.fraction());
    let p99 = r.hold_p99.expect("something waited");
    assert!(
        p99 <= 35 * MS + 5 * MS,
        "hold p99 {p99:?} > delay spread + 5 ms"
    );
}

#[test]
fn skewed_rate_paths_get_shares_by_capacity() {
    let r = run(
        "rate skew",
        Sim::new(
            3,
            &[
                path(200.0, 10, 0.0),
                path(100.0, 10, 0.0),
                path(50.0, 10, 0.0),
            ],
            315.0,
            5.0,
        ),
    );
    assert!(r.fraction() > 0.97, "delivered {:.3}", r.fraction());
    assert!(
        r.shares[0] > r.shares[1] && r.shares[1] > r.shares[2],
        "{:?}",
        r.shares
    );
}

#[test]
fn a_lossy_path_is_repaired_and_a_very_lossy_one_set_aside() {
    for (loss, seed) in [(0.01, 4), (0.05, 5)] {
        // The lossy path is the fastest, so the scheduler wants it first.
        let paths = [
            path(100.0, 2, loss),
            path(100.0, 5, 0.0),
            path(100.0, 5, 0.0),
        ];
        let r = run(
            &format!("{}% loss", loss * 100.0),
            Sim::new(seed, &paths, 180.0, 6.0),
        );
        let s = r.stats;
        assert!(
            s.repairs_requested > 0,
            "the lossy path was never used: {:?}",
            r.shares
        );
        // Gaps are found lost on evidence: every one is either repaired or
        // released at once, hardly any waits for the timer.
        let gaps = s.repaired + s.skipped_loss + s.skipped_timeout;
        assert!(
            (s.repaired + s.skipped_loss) as f64 >= 0.95 * gaps as f64,
            "{s:?}"
        );
        if loss < 0.02 {
            // Worth keeping: nearly every loss is repaired.
            assert!(r.shares[0] > 0.25, "lossy path dropped {:?}", r.shares);
            assert!(
                s.repaired as f64 >= 0.98 * s.repairs_requested as f64,
                "{s:?}"
            );
            assert!(r.fraction() > 0.995, "delivered {:.4}", r.fraction());
        } else {
            // Too many repairs to wait for: set aside, and the clean paths
            // carry what is offered.
            assert!(r.shares[0] < 0.2, "lossy path kept {:?}", r.shares);
            assert!(
                r.mbps(3.0, 6.0) > 0.97 * 180.0,
                "{:.1} Mbit/s at {loss}",
                r.mbps(3.0, 6.0)
            );
        }
    }
}

#[test]
fn a_blackholed_path_fails_over_within_300_ms() {
    let mut sim = Sim::new(6, &[path(100.0, 5, 0.0); 3], 180.0, 6.0);
    sim.changes = vec![(3.0, Change::Cut(1))];
    let r = run("blackhole", sim);
    let down = r.down_after.expect("never marked down");
    assert!(down <= 300 * MS, "down after {down:?}");
    // What the dead path took down with it was asked for and resent.
    assert!(r.stats.repaired > 0, "{:?}", r.stats);
    assert!(r.fraction() > 0.995, "delivered {:.4}", r.fraction());
    // Within a second of the cut, the survivors carry what is offered.
    assert!(
        r.mbps(4.0, 6.0) > 0.95 * 180.0,
        "{:.1} Mbit/s",
        r.mbps(4.0, 6.0)
    );
}

#[test]
fn a_flapping_path_neither_stalls_nor_reorders_the_flow() {
    // The flapping path is the fastest, so it is in use whenever it is up.
    let mut sim = Sim::new(
        7,
        &[
            path(100.0, 2, 0.0),
            path(100.0, 5, 0.0),
            path(100.0, 5, 0.0),
        ],
        180.0,
        8.0,
    );
    sim.changes = (0..6)
        .flat_map(|k| {
            let t = 1.0 + k as f64;
            [(t, Change::Cut(0)), (t + 0.5, Change::Restore(0))]
        })
        .collect();
    let r = run("flapping", sim);
    assert!(
        r.shares[0] > 0.02,
        "the flapping path was not used: {:?}",
        r.shares
    );
    // In-order delivery is checked on every packet; the flow keeps nearly
    // all that is offered despite a path dying six times: what it had in
    // flight is resent on the others.
    assert!(r.fraction() > 0.99, "delivered {:.3}", r.fraction());
    for second in 1..8 {
        let mbps = r.mbps(second as f64, second as f64 + 1.0);
        assert!(mbps > 100.0, "second {second}: {mbps:.1} Mbit/s");
    }
}

#[test]
fn a_constant_rate_stream_at_half_the_capacity_of_unequal_paths_loses_nothing() {
    // Video, RTP or QUIC at a steady rate: half of 50 + 40 + 30 Mbit/s,
    // more than the best path carries, over paths of 5, 20 and 35 ms with a
    // little jitter. Nothing may be lost, in either direction.
    let jittery = |rate, delay| PathSpec {
        jitter_ms: 1,
        ..path(rate, delay, 0.0)
    };
    let paths = [jittery(50.0, 5), jittery(40.0, 20), jittery(30.0, 35)];
    let mut sim = Sim::new(8, &paths, 60.0, 10.0);
    sim.tail = 1.0;
    let r = run("constant rate", sim);
    assert_eq!(r.delivered, r.offered, "{:?}", r.stats);
    assert_eq!(r.delivered_back, r.offered_back, "back: {:?}", r.stats);
}
