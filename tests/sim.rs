//! The sans-IO core in a simulated network, with virtual time: two sites,
//! each a `Multipath` (numbering, probes, scheduler, failover) and a
//! `ReorderBuffer`, joined by seeded links with delay, rate, a drop-tail
//! queue and loss. A paced source on site A offers traffic to site B; B asks
//! for lost packets again and A resends them from its log. Runs in
//! milliseconds of real time per simulated second, deterministically.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use mptun_core::{
    Multipath, PathId, PathState, Policy, Probe, ReorderBuffer, ReorderConfig, ReorderStats,
    SentLog, Seq, Trailer, Verdict,
};

const PACKET: usize = 1400;
const MS: Duration = Duration::from_millis(1);

/// A seeded xorshift generator: the simulation's only randomness.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One direction of one path.
#[derive(Clone)]
struct Link {
    rate_bps: f64,
    delay: Duration,
    loss: f64,
    queue_limit: Duration,
    busy_until: Option<Instant>,
    up: bool,
}

impl Link {
    fn new(rate_mbit: f64, delay_ms: u64, loss: f64) -> Link {
        Link {
            rate_bps: rate_mbit * 1e6,
            delay: Duration::from_millis(delay_ms),
            loss,
            queue_limit: Duration::from_millis(50),
            busy_until: None,
            up: true,
        }
    }

    /// Return when a packet sent now arrives, or `None` if it is lost.
    fn send(&mut self, now: Instant, len: usize, rng: &mut Rng) -> Option<Instant> {
        if !self.up {
            return None;
        }
        let start = self.busy_until.map_or(now, |b| b.max(now));
        if start.saturating_duration_since(now) > self.queue_limit {
            return None; // drop-tail
        }
        let done = start + Duration::from_secs_f64(len as f64 * 8.0 / self.rate_bps);
        self.busy_until = Some(done);
        if rng.next_f64() < self.loss {
            return None;
        }
        Some(done + self.delay)
    }
}

/// A path: one link each way.
struct SimPath {
    to_b: Link,
    to_a: Link,
}

enum Payload {
    Data(Trailer),
    Probe(Probe, u32),
    /// Lost sequence numbers of the sender's epoch, asked for again.
    Nack(u32, Vec<Seq>),
}

/// What is on the wire: arrival times, and what arrives.
#[derive(Default)]
struct Wire {
    due: BinaryHeap<Reverse<(Instant, u64)>>,
    in_flight: std::collections::HashMap<u64, Arrival>,
    order: u64,
}

impl Wire {
    /// Send `len` bytes over `link`; they arrive unless the link drops them.
    fn send(&mut self, link: &mut Link, now: Instant, len: usize, rng: &mut Rng, what: Arrival) {
        if let Some(at) = link.send(now, len, rng) {
            self.order += 1;
            self.due.push(Reverse((at, self.order)));
            self.in_flight.insert(self.order, what);
        }
    }

    fn next_due(&self) -> Option<Instant> {
        self.due.peek().map(|Reverse((t, _))| *t)
    }

    /// Take the next arrival due by `now`.
    fn arrival(&mut self, now: Instant) -> Option<Arrival> {
        while let Some(&Reverse((t, id))) = self.due.peek() {
            if t > now {
                return None;
            }
            self.due.pop();
            if let Some(arrival) = self.in_flight.remove(&id) {
                return Some(arrival);
            }
        }
        None
    }
}

struct Arrival {
    to_b: bool,
    path: PathId,
    payload: Payload,
}

/// Results of a run.
#[derive(Debug, Default)]
struct Report {
    offered: u64,
    delivered: u64,
    /// Delivered packets per 100 ms bucket.
    per_tick: Vec<u64>,
    stats: ReorderStats,
    hold_p99: Option<Duration>,
    /// Time from a cut to the path being marked down at the sender.
    down_after: Option<Duration>,
    /// Packets the sender resent on request.
    resent: u64,
    shares: Vec<f64>,
}

impl Report {
    /// Goodput in Mbit/s between two times (seconds).
    fn mbps(&self, from: f64, to: f64) -> f64 {
        let (a, b) = ((from * 10.0) as usize, (to * 10.0) as usize);
        let packets: u64 = self.per_tick[a.min(self.per_tick.len())..b.min(self.per_tick.len())]
            .iter()
            .sum();
        packets as f64 * PACKET as f64 * 8.0 / (to - from) / 1e6
    }
}

/// A timed change to a path, applied in both directions.
#[derive(Clone, Copy)]
enum Change {
    Cut(usize),
    Restore(usize),
}

struct Sim {
    seed: u64,
    paths: Vec<SimPath>,
    offered_mbit: f64,
    seconds: f64,
    changes: Vec<(f64, Change)>,
}

impl Sim {
    fn new(seed: u64, paths: &[(f64, u64, f64)], offered_mbit: f64, seconds: f64) -> Sim {
        Sim {
            seed,
            paths: paths
                .iter()
                .map(|&(rate, delay, loss)| SimPath {
                    to_b: Link::new(rate, delay, loss),
                    // The reverse direction carries probes only here.
                    to_a: Link::new(rate, delay, 0.0),
                })
                .collect(),
            offered_mbit,
            seconds,
            changes: Vec::new(),
        }
    }

    fn run(mut self) -> Report {
        let t0 = Instant::now();
        let n = self.paths.len();
        let mut rng = Rng(self.seed.max(1));
        let mut a = Multipath::new(t0, 1, n, Policy::adaptive(None));
        let mut b = Multipath::new(t0, 2, n, Policy::adaptive(None));
        for i in 0..n {
            a.set_session(t0, PathId(i as u8), true);
            b.set_session(t0, PathId(i as u8), true);
        }
        let mut rx = ReorderBuffer::new(ReorderConfig::default());
        let mut sent = SentLog::new(ReorderConfig::default().capacity);
        let mut wire = Wire::default();
        let interval = Duration::from_secs_f64(PACKET as f64 * 8.0 / (self.offered_mbit * 1e6));
        let end = t0 + Duration::from_secs_f64(self.seconds);
        let mut next_send = t0 + Duration::from_millis(500); // let probes measure first
        let mut report = Report {
            per_tick: vec![0; (self.seconds * 10.0).ceil() as usize + 1],
            ..Report::default()
        };
        let mut sent_per_path = vec![0u64; n];
        let mut expected_seq = None::<u32>;
        let mut changes = self.changes.clone();
        changes.sort_by(|x, y| x.0.total_cmp(&y.0));
        let mut changes = changes.into_iter().peekable();
        let mut cut_at: Option<(Instant, usize)> = None;
        let mut now = t0;
        while now < end {
            // The next thing to happen.
            let mut next = next_send.min(end);
            if let Some(t) = wire.next_due() {
                next = next.min(t);
            }
            for deadline in [a.poll_timeout(), b.poll_timeout(), rx.poll_timeout()]
                .into_iter()
                .flatten()
            {
                next = next.min(deadline.max(now));
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
                match change {
                    Change::Cut(p) => {
                        self.paths[p].to_b.up = false;
                        self.paths[p].to_a.up = false;
                        cut_at = Some((now, p));
                    }
                    Change::Restore(p) => {
                        self.paths[p].to_b.up = true;
                        self.paths[p].to_a.up = true;
                    }
                }
            }
            if let Some((at, p)) = cut_at {
                if report.down_after.is_none() && a.state(PathId(p as u8)) == PathState::Down {
                    report.down_after = Some(now - at);
                }
            }

            // Timers and probes on both sides.
            for to_b in [true, false] {
                let side = if to_b { &mut a } else { &mut b };
                side.handle_timeout(now);
                while let Some((path, probe, trailer)) = side.poll_probe(now) {
                    let link = if to_b {
                        &mut self.paths[path.index()].to_b
                    } else {
                        &mut self.paths[path.index()].to_a
                    };
                    let probe = Arrival {
                        to_b,
                        path,
                        payload: Payload::Probe(probe, trailer.epoch),
                    };
                    wire.send(link, now, 100, &mut rng, probe);
                }
            }
            while let Some(e) = a.poll_event() {
                if std::env::var_os("SIM_TRACE").is_some() {
                    eprintln!(
                        "  {:?} {:?} {:?} {:?}",
                        now - t0,
                        e,
                        a.estimate(e.path).queue_ms,
                        a.estimate(e.path).rate_mbps
                    );
                }
            }
            rx.set_hold_hint(b.hold_hint(now));
            rx.set_repair_hint(b.repair_hint());
            rx.handle_timeout(now);
            send_nacks(&mut rx, &b, &mut self.paths, &mut wire, now, &mut rng);

            // The source.
            while next_send <= now && next_send < end {
                report.offered += 1;
                if let Some((path, trailer)) = a.handle_outbound(next_send, PACKET) {
                    sent_per_path[path.index()] += 1;
                    sent.record(trailer.seq, path, &trailer.seq.0.to_be_bytes());
                    send_data(
                        &mut self.paths,
                        &mut wire,
                        next_send,
                        &mut rng,
                        path,
                        trailer,
                    );
                }
                next_send += interval;
            }

            // Arrivals.
            while let Some(arrival) = wire.arrival(now) {
                match arrival.payload {
                    Payload::Probe(probe, epoch) => {
                        let side = if arrival.to_b { &mut b } else { &mut a };
                        side.handle_probe(now, arrival.path, epoch, &probe);
                    }
                    Payload::Data(trailer) => {
                        b.handle_data_received(now, arrival.path, &trailer, PACKET);
                        let seq_bytes = trailer.seq.0.to_be_bytes();
                        if rx.handle_packet(now, arrival.path, &trailer, &seq_bytes)
                            == Verdict::DeliverNow
                        {
                            deliver(&mut report, &mut expected_seq, trailer.seq.0, now - t0);
                        }
                        send_nacks(&mut rx, &b, &mut self.paths, &mut wire, now, &mut rng);
                    }
                    Payload::Nack(epoch, seqs) => {
                        if epoch != a.epoch() {
                            continue;
                        }
                        for seq in seqs {
                            let Some((lost_on, _)) = sent.take_for_resend(seq) else {
                                continue;
                            };
                            report.resent += 1;
                            if let Some((path, trailer)) =
                                a.handle_repair(now, seq, PACKET, lost_on)
                            {
                                send_data(&mut self.paths, &mut wire, now, &mut rng, path, trailer);
                            }
                        }
                    }
                }
            }
            while let Some(p) = rx.poll_release() {
                let seq = u32::from_be_bytes([p[0], p[1], p[2], p[3]]);
                deliver(&mut report, &mut expected_seq, seq, now - t0);
            }
        }
        for i in 0..n {
            eprintln!(
                "  path {i}: {:?} {:?}",
                a.state(PathId(i as u8)),
                a.estimate(PathId(i as u8))
            );
        }
        report.stats = rx.stats();
        report.hold_p99 = rx.waits().quantile(0.99);
        let total: u64 = sent_per_path.iter().sum();
        report.shares = sent_per_path
            .iter()
            .map(|&s| s as f64 / total.max(1) as f64)
            .collect();
        report
    }
}

/// Send a data packet from A to B on `path` at `at`.
fn send_data(
    paths: &mut [SimPath],
    wire: &mut Wire,
    at: Instant,
    rng: &mut Rng,
    path: PathId,
    trailer: Trailer,
) {
    let data = Arrival {
        to_b: true,
        path,
        payload: Payload::Data(trailer),
    };
    wire.send(&mut paths[path.index()].to_b, at, PACKET, rng, data);
}

/// Send what the receiver found lost back to the sender, on the paths its
/// monitor picks for NACKs.
fn send_nacks(
    rx: &mut ReorderBuffer,
    b: &Multipath,
    paths: &mut [SimPath],
    wire: &mut Wire,
    now: Instant,
    rng: &mut Rng,
) {
    let nacks = rx.poll_nacks();
    if nacks.is_empty() {
        return;
    }
    let epoch = rx.epoch().unwrap_or(0);
    for path in b.nack_paths().iter() {
        let nack = Arrival {
            to_b: false,
            path,
            payload: Payload::Nack(epoch, nacks.clone()),
        };
        wire.send(&mut paths[path.index()].to_a, now, 100, rng, nack);
    }
}

/// Record a delivery, checking that order is strictly increasing.
fn deliver(report: &mut Report, expected: &mut Option<u32>, seq: u32, at: Duration) {
    if let Some(last) = *expected {
        assert!(seq > last, "delivered {seq} after {last}: out of order");
    }
    *expected = Some(seq);
    report.delivered += 1;
    let tick = (at.as_millis() / 100) as usize;
    if let Some(bucket) = report.per_tick.get_mut(tick) {
        *bucket += 1;
    }
}

fn run(name: &str, sim: Sim) -> Report {
    let seed = sim.seed;
    let report = sim.run();
    eprintln!(
        "{name} (seed {seed}): {:.2}% delivered, shares {:?}, repaired {} of {} asked ({} resent), skipped {} lost / {} timeout, hold p99 {:?}, down after {:?}",
        100.0 * report.delivered as f64 / report.offered.max(1) as f64,
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

fn fraction(report: &Report) -> f64 {
    report.delivered as f64 / report.offered as f64
}

#[test]
fn equal_paths_carry_what_is_offered_in_order() {
    let r = run("equal", Sim::new(1, &[(100.0, 5, 0.0); 3], 270.0, 5.0));
    assert!(fraction(&r) > 0.97, "delivered {:.3}", fraction(&r));
    for share in &r.shares {
        assert!((share - 1.0 / 3.0).abs() < 0.08, "{:?}", r.shares);
    }
}

#[test]
fn skewed_rtt_paths_add_up_with_a_short_hold() {
    // 10 ms and 80 ms RTT.
    let r = run(
        "rtt skew",
        Sim::new(2, &[(100.0, 5, 0.0), (100.0, 40, 0.0)], 180.0, 5.0),
    );
    assert!(fraction(&r) > 0.97, "delivered {:.3}", fraction(&r));
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
            &[(200.0, 10, 0.0), (100.0, 10, 0.0), (50.0, 10, 0.0)],
            315.0,
            5.0,
        ),
    );
    assert!(fraction(&r) > 0.97, "delivered {:.3}", fraction(&r));
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
        let paths = [(100.0, 2, loss), (100.0, 5, 0.0), (100.0, 5, 0.0)];
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
            assert!(fraction(&r) > 0.995, "delivered {:.4}", fraction(&r));
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
    let mut sim = Sim::new(6, &[(100.0, 5, 0.0); 3], 180.0, 6.0);
    sim.changes = vec![(3.0, Change::Cut(1))];
    let r = run("blackhole", sim);
    let down = r.down_after.expect("never marked down");
    assert!(down <= 300 * MS, "down after {down:?}");
    // What the dead path took down with it was asked for and resent.
    assert!(r.stats.repaired > 0, "{:?}", r.stats);
    assert!(fraction(&r) > 0.995, "delivered {:.4}", fraction(&r));
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
        &[(100.0, 2, 0.0), (100.0, 5, 0.0), (100.0, 5, 0.0)],
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
    assert!(fraction(&r) > 0.99, "delivered {:.3}", fraction(&r));
    for second in 1..8 {
        let mbps = r.mbps(second as f64, second as f64 + 1.0);
        assert!(mbps > 100.0, "second {second}: {mbps:.1} Mbit/s");
    }
}
