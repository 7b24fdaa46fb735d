//! Two monitors exchanging probes over paths of fixed one-way delays, in
//! virtual time.

use super::*;

const MS: Duration = Duration::from_millis(1);

struct Pair {
    t0: Instant,
    a: Multipath,
    b: Multipath,
    /// One-way delay per path; `None` cuts the path.
    delays: Vec<Option<Duration>>,
    /// Per path: only the direction from A to B is cut.
    cut_to_b: Vec<bool>,
    /// Probes in flight: arrival time, to-B?, path, probe, epoch.
    wire: Vec<(Instant, bool, PathId, Probe, u32)>,
}

impl Pair {
    fn new(delays_ms: &[u64]) -> Pair {
        let t0 = Instant::now();
        let n = delays_ms.len();
        let mut a = Multipath::new(t0, 1, n, Policy::adaptive(None));
        let mut b = Multipath::new(t0 + 3 * MS, 2, n, Policy::adaptive(None));
        for i in 0..n {
            a.set_session(t0, PathId(i as u8), true);
            b.set_session(t0, PathId(i as u8), true);
        }
        Pair {
            t0,
            a,
            b,
            delays: delays_ms
                .iter()
                .map(|&d| Some(Duration::from_millis(d)))
                .collect(),
            cut_to_b: vec![false; n],
            wire: Vec::new(),
        }
    }

    /// Run both sides' probes and timers until `until_ms`, 1 ms steps.
    fn run(&mut self, from_ms: u64, until_ms: u64) {
        for ms in from_ms..until_ms {
            let now = self.t0 + Duration::from_millis(ms);
            for to_b in [true, false] {
                let side = if to_b { &mut self.a } else { &mut self.b };
                side.handle_timeout(now);
                while let Some((path, probe, trailer)) = side.poll_probe(now) {
                    let cut = to_b && self.cut_to_b[path.index()];
                    if let (Some(d), false) = (self.delays[path.index()], cut) {
                        self.wire.push((now + d, to_b, path, probe, trailer.epoch));
                    }
                }
            }
            let (due, later): (Vec<_>, Vec<_>) = self.wire.drain(..).partition(|w| w.0 <= now);
            self.wire = later;
            for (_, to_b, path, probe, epoch) in due {
                let side = if to_b { &mut self.b } else { &mut self.a };
                side.handle_probe(now, path, epoch, &probe);
            }
        }
    }

    /// As [`run`](Self::run), with both sides sending 200 Mbit/s of data
    /// (not delivered; it only makes their paths busy).
    fn run_busy(&mut self, from_ms: u64, until_ms: u64) {
        for ms in from_ms..until_ms {
            let now = self.t0 + Duration::from_millis(ms);
            for side in [&mut self.a, &mut self.b] {
                for _ in 0..20 {
                    side.handle_outbound(now, 1250);
                }
            }
            self.run(ms, ms + 1);
        }
    }
}

#[test]
fn probes_measure_rtt_and_relative_delay() {
    let mut pair = Pair::new(&[5, 30]);
    pair.run(0, 2000);
    let fast = pair.a.estimate(PathId(0));
    let slow = pair.a.estimate(PathId(1));
    assert!((fast.srtt_ms.unwrap() - 10.0).abs() < 1.5, "{fast:?}");
    assert!((slow.srtt_ms.unwrap() - 60.0).abs() < 1.5, "{slow:?}");
    assert!(fast.owd_rel_ms.unwrap().abs() < 0.5, "{fast:?}");
    assert!((slow.owd_rel_ms.unwrap() - 25.0).abs() < 0.5, "{slow:?}");
    assert!((slow.owd_in_rel_ms.unwrap() - 25.0).abs() < 0.5, "{slow:?}");
    assert_eq!(pair.a.state(PathId(0)), PathState::Up);
    assert_eq!(pair.b.state(PathId(1)), PathState::Up);
    // The receiver waits for a gap about as long as the delay spread.
    let hold = pair.b.hold_hint(pair.t0 + 2000 * MS).unwrap();
    assert!(hold >= 25 * MS && hold <= 30 * MS, "{hold:?}");
}

#[test]
fn idle_paths_cost_at_most_ten_probes_a_second() {
    let mut pair = Pair::new(&[5, 5, 5]);
    let mut sent = 0;
    for ms in 0..10_000u64 {
        let now = pair.t0 + Duration::from_millis(ms);
        pair.a.handle_timeout(now);
        while pair.a.poll_probe(now).is_some() {
            sent += 1;
        }
    }
    assert!(sent <= 3 * 10 * 10 + 3, "{sent} probes in 10 s on 3 paths");
}

#[test]
fn a_cut_path_is_down_within_300_ms_and_back_when_restored() {
    let mut pair = Pair::new(&[5, 30]);
    pair.run(0, 1000);
    while pair.a.poll_event().is_some() {}
    pair.delays[1] = None;
    let cut = 1000;
    let mut down_at = None;
    for ms in cut..cut + 1000 {
        pair.run(ms, ms + 1);
        if down_at.is_none() && pair.a.state(PathId(1)) == PathState::Down {
            down_at = Some(ms - cut);
        }
    }
    let down_after = down_at.expect("never marked down");
    assert!(down_after <= 300, "down after {down_after} ms");
    assert_eq!(
        pair.a.state(PathId(0)),
        PathState::Up,
        "the good path stays up"
    );
    let event = pair.a.poll_event().expect("a down event");
    assert_eq!((event.path, event.state), (PathId(1), PathState::Down));
    assert!(pair.a.poll_event().is_none(), "logged once");

    pair.delays[1] = Some(30 * MS);
    pair.run(2000, 2500);
    assert_eq!(pair.a.state(PathId(1)), PathState::Up);
}

#[test]
fn light_load_takes_the_fast_path_and_heavy_load_spills_over() {
    let mut pair = Pair::new(&[5, 30]);
    pair.run(0, 1000);
    let now = pair.t0 + 1000 * MS;
    // A trickle: 10 packets spaced 10 ms apart all go the fast way.
    for k in 0..10u32 {
        let (path, _) = pair.a.handle_outbound(now + k * 10 * MS, 1400).unwrap();
        assert_eq!(path, PathId(0));
    }
    // A burst of 2000 packets at once: the fast path's queue passes 25 ms
    // (100 Mbit/s assumed: ~220 packets), then the slow path is earlier.
    let later = now + 200 * MS;
    let slow = (0..2000)
        .filter(|_| pair.a.handle_outbound(later, 1400).unwrap().0 == PathId(1))
        .count();
    assert!(slow > 500 && slow < 1000, "{slow} of 2000 on the slow path");
}

#[test]
fn numbering_is_global_and_per_path() {
    let mut pair = Pair::new(&[5, 5]);
    pair.run(0, 500);
    let now = pair.t0 + 500 * MS;
    let mut per_path = [0u32; 2];
    for seq in 0..100 {
        let (path, t) = pair.a.handle_outbound(now, 1400).unwrap();
        assert_eq!(t.seq, Seq(seq));
        assert_eq!(t.path_seq, Seq(per_path[path.index()]));
        // The receiver is told which paths may still deliver: the one this
        // packet takes and those used lately.
        assert!(t.paths_in_use.contains(path));
        if per_path.iter().all(|&n| n > 0) {
            assert_eq!(t.paths_in_use, PathSet(0b11));
        }
        per_path[path.index()] += 1;
    }
    assert!(per_path[0] > 20 && per_path[1] > 20, "{per_path:?}");
}

#[test]
fn a_repair_keeps_its_number_avoids_a_lossy_path_and_claims_no_path() {
    // Path 0 is the fastest but losing packets; path 2 is fast and clean.
    let mut pair = Pair::new(&[3, 30, 5]);
    pair.run(0, 1000);
    pair.a.paths[0].loss = 0.05;
    let now = pair.t0 + 1000 * MS;
    let (_, first) = pair.a.handle_outbound(now, 1400).unwrap();
    let (path, resent) = pair.a.handle_repair(now, Seq(0), 1400, PathId(0)).unwrap();
    assert_eq!(path, PathId(2), "repair on the lossy or the slow path");
    // Nor on the path that lost it, while another can take it.
    let (other, _) = pair.a.handle_repair(now, Seq(0), 1400, PathId(2)).unwrap();
    assert_eq!(other, PathId(1));
    assert_eq!(resent.seq, Seq(0));
    assert_eq!(resent.path_seq, Seq(0), "path 2's first packet");
    assert_eq!(resent.kind, Kind::Data);
    // New data is numbered on: the repair took no global number. The
    // receiver is not told to wait on path 2 for later packets.
    let (_, next) = pair.a.handle_outbound(now, 1400).unwrap();
    assert_eq!(next.seq, Seq(1));
    assert!(
        !next.paths_in_use.contains(PathId(2)),
        "{:?}",
        next.paths_in_use
    );
    assert_eq!(first.paths_in_use, PathSet(0b001));
    // NACKs go on the two paths with the shortest round trip.
    assert_eq!(pair.b.nack_paths(), PathSet(0b101));
    let hint = pair.b.repair_hint().unwrap();
    // About a round trip of the fastest path (6 ms), with margins.
    assert!(hint >= 7 * MS && hint <= 18 * MS, "{hint:?}");
}

#[test]
fn a_fresh_path_comes_up_once_without_flapping() {
    let mut pair = Pair::new(&[1, 1]);
    let mut events = Vec::new();
    for ms in 0..1000 {
        pair.run(ms, ms + 1);
        while let Some(e) = pair.a.poll_event() {
            events.push((ms, e.path.0, e.state));
        }
    }
    assert_eq!(
        events,
        vec![
            (events[0].0, 0, PathState::Up),
            (events[1].0, 1, PathState::Up)
        ],
        "{events:?}"
    );
}

#[test]
fn probe_clocks_drifting_apart_do_not_flap_a_path() {
    // The peer's probes run 1% slow: now and then two of ours arrive between
    // two of its probes, and an echo is 200 ms old. That is no failure.
    let t0 = Instant::now();
    let mut a = Multipath::new(t0, 1, 1, Policy::adaptive(None));
    let mut b = Multipath::new(t0, 2, 1, Policy::adaptive(None));
    a.set_session(t0, PathId(0), true);
    b.set_session(t0, PathId(0), true);
    let mut wire: Vec<(u64, bool, Probe)> = Vec::new();
    for us in (0..20_000_000u64).step_by(100) {
        let now_a = t0 + Duration::from_micros(us);
        let now_b = t0 + Duration::from_micros(us * 100 / 101);
        a.handle_timeout(now_a);
        while let Some((_, probe, _)) = a.poll_probe(now_a) {
            wire.push((us + 5_000, true, probe));
        }
        b.handle_timeout(now_b);
        while let Some((_, probe, _)) = b.poll_probe(now_b) {
            wire.push((us + 5_000, false, probe));
        }
        let (due, later): (Vec<_>, Vec<_>) = wire.drain(..).partition(|w| w.0 <= us);
        wire = later;
        for (_, to_b, probe) in due {
            if to_b {
                b.handle_probe(now_b, PathId(0), 1, &probe);
            } else {
                a.handle_probe(now_a, PathId(0), 2, &probe);
            }
        }
    }
    let mut events = Vec::new();
    while let Some(e) = a.poll_event() {
        events.push(e.state);
    }
    assert_eq!(events, vec![PathState::Up], "flapped: {events:?}");
}

#[test]
fn the_queue_model_follows_echoes_down_as_well_as_up() {
    // One path, its rate unmeasured (100 Mbit/s assumed), fed at that rate
    // after a 40 ms burst: only the echoes can tell how much of the burst
    // is really still queued.
    let mut pair = Pair::new(&[5]);
    pair.run(0, 1000);
    let t = pair.t0 + 1000 * MS;
    for _ in 0..400 {
        pair.a.handle_outbound(t, 1250);
    }
    let model_ms = |pair: &Pair| pair.a.estimate(PathId(0)).model_queue_ms;
    assert!((model_ms(&pair) - 40.0).abs() < 1.0, "{}", model_ms(&pair));
    let feed = |pair: &mut Pair, from_ms: u64, until_ms: u64| {
        for ms in from_ms..until_ms {
            for _ in 0..10 {
                pair.a
                    .handle_outbound(pair.t0 + Duration::from_millis(ms), 1250);
            }
            pair.run(ms, ms + 1);
        }
    };
    // The probes meet no queue: the path drained faster than assumed.
    feed(&mut pair, 1000, 1300);
    assert!(model_ms(&pair) < 5.0, "model {} ms", model_ms(&pair));
    // Now they meet 20 ms of queue.
    pair.delays[0] = Some(25 * MS);
    feed(&mut pair, 1300, 1600);
    assert!(
        (model_ms(&pair) - 20.0).abs() < 5.0,
        "model {} ms",
        model_ms(&pair)
    );
}

#[test]
fn a_trickle_through_a_queue_does_not_pass_for_the_path_capacity() {
    // Path 1 shows 3 ms of queue while carrying a trickle (one small packet
    // per 50 ms): that says nothing of its capacity, and must not keep it
    // from carrying its share when load comes.
    let mut pair = Pair::new(&[5, 5]);
    pair.run(0, 1000);
    pair.delays[1] = Some(8 * MS);
    for (k, ms) in (1000..1500u64).step_by(50).enumerate() {
        let trailer = Trailer {
            seq: Seq(k as u32),
            path_seq: Seq(k as u32),
            epoch: 1,
            paths_in_use: PathSet(0b10),
            kind: Kind::Data,
            congested: false,
        };
        pair.b.handle_data_received(
            pair.t0 + Duration::from_millis(ms),
            PathId(1),
            &trailer,
            200,
        );
        pair.run(ms, ms + 50);
    }
    let now = pair.t0 + 1500 * MS;
    let on_path_1 = (0..200)
        .filter(|_| pair.a.handle_outbound(now, 1250).unwrap().0 == PathId(1))
        .count();
    assert!(on_path_1 >= 60, "{on_path_1} of 200 on path 1");
}

#[test]
fn a_capacity_read_too_low_is_forgotten_when_probes_meet_no_queue() {
    // Path 1's capacity was read at 8 Mbit/s (a trickle taken for a
    // queue); it really drains whatever it is given, as its probes show.
    let mut pair = Pair::new(&[5, 5]);
    pair.run(0, 1000);
    pair.a.paths[1].rate.update(pair.t0 + 1000 * MS, 1e6);
    let mut on_path_1 = 0;
    for ms in 1000..1500u64 {
        // 200 Mbit/s: more than path 0 is assumed to carry.
        for _ in 0..20 {
            let now = pair.t0 + Duration::from_millis(ms);
            let (path, _) = pair.a.handle_outbound(now, 1250).unwrap();
            if ms >= 1300 && path == PathId(1) {
                on_path_1 += 1;
            }
        }
        pair.run(ms, ms + 1);
    }
    assert!(on_path_1 >= 1200, "{on_path_1} of 4000 on path 1");
}

#[test]
fn packets_sent_into_a_standing_queue_say_so() {
    // The receiver leaves a loss just before such a packet to the inner
    // flow; before the queue shows, and once it is gone, losses are repaired.
    let mut pair = Pair::new(&[5]);
    pair.run(0, 1000);
    let send = |pair: &mut Pair, ms: u64| {
        let now = pair.t0 + Duration::from_millis(ms);
        pair.a.handle_outbound(now, 1250).unwrap().1.congested
    };
    assert!(!send(&mut pair, 1000));
    pair.delays[0] = Some(20 * MS); // 15 ms of queue
    pair.run(1000, 1200);
    assert!(send(&mut pair, 1200));
    pair.delays[0] = Some(7 * MS);
    pair.run(1200, 1400);
    assert!(!send(&mut pair, 1400));
}

#[test]
fn traffic_leaves_a_silent_busy_path_long_before_it_is_down() {
    // Both sides send on both paths (data one way, its ACKs the other), so
    // both probe every 10 ms. A light flow may sit entirely on one path;
    // when that path dies, waiting the full down time (over 100 ms) would
    // stall the flow into a retransmission timeout.
    let mut pair = Pair::new(&[5, 5]);
    pair.run_busy(0, 1000);
    assert_eq!(pair.a.paths_in_use(), PathSet(0b11));
    pair.delays[0] = None;
    let mut left_at = None;
    for ms in 1000..1300 {
        pair.run_busy(ms, ms + 1);
        if left_at.is_none() && pair.a.paths_in_use() == PathSet(0b10) {
            left_at = Some(ms - 1000);
            assert_eq!(pair.a.state(PathId(0)), PathState::Up, "not down yet");
            assert!(pair.a.estimate(PathId(0)).echo_late);
            assert_eq!(pair.a.nack_paths(), PathSet(0b10));
        }
    }
    assert_eq!(pair.a.state(PathId(0)), PathState::Down);
    assert!(!pair.a.estimate(PathId(0)).echo_late, "down, not late");
    let left_after = left_at.expect("path 0 kept in use");
    assert!(left_after <= 60, "left after {left_after} ms");
    assert_eq!(pair.a.estimate(PathId(0)).late_echoes, 1);
    // Back at the first echo once the path works again.
    pair.delays[0] = Some(5 * MS);
    pair.run_busy(1300, 1500);
    assert_eq!(pair.a.paths_in_use(), PathSet(0b11));
    assert_eq!(pair.a.estimate(PathId(0)).late_echoes, 1, "no flapping");
}

#[test]
fn when_every_path_is_late_data_and_nacks_still_go_out() {
    // Both paths stall at once (say, the uplink they share): none is down
    // yet, and one that is late beats none at all.
    let mut pair = Pair::new(&[5, 5]);
    pair.run_busy(0, 1000);
    pair.delays = vec![None, None];
    pair.run(1000, 1080);
    assert!(pair.a.estimate(PathId(0)).echo_late && pair.a.estimate(PathId(1)).echo_late);
    assert_eq!(pair.a.state(PathId(0)), PathState::Up);
    assert_eq!(pair.a.paths_in_use(), PathSet(0b11));
    assert_eq!(pair.a.nack_paths(), PathSet(0b11));
    let now = pair.t0 + 1080 * MS;
    assert!(pair.a.handle_outbound(now, 1250).is_some());
}

#[test]
fn a_path_that_only_brings_data_is_probed_fast() {
    // B sends nothing on the path, but its probes carry the echoes and
    // receive counts A's scheduler corrects its queue model by: at the idle
    // rate, A's model of the path would drift for 100 ms at a time.
    let mut pair = Pair::new(&[5]);
    pair.run(0, 1000);
    let before = pair.b.paths[0].probes_sent;
    for ms in 1000..1500u64 {
        let trailer = Trailer {
            seq: Seq(ms as u32),
            path_seq: Seq(ms as u32),
            epoch: 1,
            paths_in_use: PathSet(0b1),
            kind: Kind::Data,
            congested: false,
        };
        let now = pair.t0 + Duration::from_millis(ms);
        pair.b.handle_data_received(now, PathId(0), &trailer, 1250);
        pair.run(ms, ms + 1);
    }
    let probes = pair.b.paths[0].probes_sent - before;
    assert!((45..=55).contains(&probes), "{probes} probes in 500 ms");
    pair.run(1500, 2500);
    // Fast for the first 100 ms, then ten a second.
    let idle = pair.b.paths[0].probes_sent - before - probes;
    assert!(idle <= 20, "{idle} probes in the idle second after");
}

#[test]
fn a_path_back_from_down_is_up_only_when_our_direction_works_too() {
    let mut pair = Pair::new(&[5, 5]);
    pair.run_busy(0, 1000);
    pair.delays[1] = None;
    pair.run_busy(1000, 1500);
    assert_eq!(pair.a.state(PathId(1)), PathState::Down);
    // B's direction comes back first: its probes echo the last probe of
    // ours it had before the cut, which says nothing of ours now.
    pair.delays[1] = Some(5 * MS);
    pair.cut_to_b[1] = true;
    for ms in 1500..2000 {
        pair.run_busy(ms, ms + 1);
        assert_eq!(pair.a.paths_in_use(), PathSet(0b01), "at {ms} ms");
    }
    pair.cut_to_b[1] = false;
    pair.run_busy(2000, 2300);
    assert_eq!(pair.a.state(PathId(1)), PathState::Up);
}

#[test]
fn drops_at_a_standing_queue_are_not_the_path_s_loss_after_the_queue_is_gone() {
    // The inner flow fills path 0's queue for 100 ms, which drops one
    // packet in ten there, then backs off for 100 ms; and again. Judged
    // when the queue has gone, those drops would pass for a lossy path
    // and set it aside.
    let mut pair = Pair::new(&[5]);
    pair.run(0, 1000);
    let mut in_flight: Vec<(Instant, Trailer)> = Vec::new();
    for ms in 1000..3000u64 {
        let now = pair.t0 + Duration::from_millis(ms);
        let queued = (ms / 100) % 2 == 0;
        pair.delays[0] = Some(if queued { 20 * MS } else { 5 * MS });
        let delay = pair.delays[0].unwrap_or_default();
        for _ in 0..10 {
            let (_, trailer) = pair.a.handle_outbound(now, 1250).unwrap();
            let dropped = trailer.congested && trailer.path_seq.0 % 10 == 0;
            if !dropped {
                in_flight.push((now + delay, trailer));
            }
        }
        in_flight.retain(|(at, trailer)| {
            let due = *at <= now;
            if due {
                pair.b.handle_data_received(*at, PathId(0), trailer, 1250);
            }
            !due
        });
        pair.run(ms, ms + 1);
    }
    let flagged = pair.a.paths[0].last_congested.is_some();
    assert!(flagged, "no packet met the queue");
    let loss = pair.a.estimate(PathId(0)).loss;
    assert!(loss < LOSS_CLEAN, "loss {loss}");
}
