//! Two endpoints exchanging their encoded plaintexts over paths of fixed
//! one-way delays, in virtual time.

use super::*;
use crate::path::delivery::{Delivery, LossContext};
use crate::path::PathChange;
use crate::paths::{repair_past_due, LOSS_CLEAN};
use crate::wire::nack::Nack;

const MS: Duration = Duration::from_millis(1);
const EPOCH_A: u32 = 1;
const EPOCH_B: u32 = 2;

/// An IPv4 packet of `len` bytes (at least a header's 20).
fn ip_packet(len: usize) -> PacketBuf {
    let len = len.max(20);
    let mut bytes = vec![0u8; len];
    bytes[0] = 0x45;
    bytes[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    bytes[12..16].copy_from_slice(&[10, 0, 0, 1]);
    bytes[16..20].copy_from_slice(&[10, 0, 0, 2]);
    PacketBuf::copy_of(&bytes)
}

/// An IPv4 TCP segment of `len` bytes, data after a 20-byte TCP header.
fn tcp_segment(len: usize) -> PacketBuf {
    let mut bytes = ip_packet(len.max(41)).packet().to_vec();
    bytes[9] = 6;
    bytes[32] = 0x50;
    PacketBuf::copy_of(&bytes)
}

/// The same with the type of service byte `tos` (DSCP and ECN).
fn tcp_segment_marked(len: usize, tos: u8) -> PacketBuf {
    let mut bytes = tcp_segment(len).packet().to_vec();
    bytes[1] = tos;
    PacketBuf::copy_of(&bytes)
}

/// A plaintext as a path's session would open it: `body` and a trailer.
fn plaintext(body: &PacketBuf, trailer: &Trailer) -> PacketBuf {
    let mut buf = body.clone();
    append_trailer(&mut buf, trailer);
    buf
}

fn data_trailer(seq: u32, path_seq: u32, epoch: u32) -> Trailer {
    Trailer {
        seq: Seq(seq),
        path_seq: Seq(path_seq),
        epoch,
        sent_us: 0,
        previous_on_path: None,
        paths_in_use: PathSet(0b11),
        kind: Kind::Data,
        congested: false,
        held: false,
    }
}

fn trailer_of(buf: &PacketBuf) -> Trailer {
    Trailer::decode_suffix(buf.packet()).expect("a trailer").0
}

#[derive(Clone, Copy)]
enum Side {
    A,
    B,
}

struct Pair {
    t0: Instant,
    /// The latest time the pair was run to or sent at.
    now: Instant,
    a: Endpoint,
    b: Endpoint,
    /// One-way delay per path; `None` cuts the path.
    delays: Vec<Option<Duration>>,
    /// Per path: only the direction from A to B is cut.
    cut_to_b: Vec<bool>,
    /// Whether A's probes are lost on the way to B (at a full queue).
    lose_probes_to_b: bool,
    /// Whether data crosses the paths; otherwise it only makes them busy.
    carry_data: bool,
    /// Data packets from A lost on the way.
    lose: fn(&Trailer) -> bool,
    /// In flight: arrival time, to B?, path, plaintext.
    wire: Vec<(Instant, bool, PathId, PacketBuf)>,
    /// The trailers of the data A sent, in order.
    sent: Vec<(PathId, Trailer)>,
    /// What B delivered, by the first byte after the IPv4 header.
    delivered: Vec<PacketBuf>,
}

impl Pair {
    fn new(delays_ms: &[u64]) -> Pair {
        let t0 = crate::tests::t0();
        let n = delays_ms.len();
        let mut a = Endpoint::new(t0, EndpointConfig::new(EPOCH_A, n));
        let mut b = Endpoint::new(t0 + 3 * MS, EndpointConfig::new(EPOCH_B, n));
        for i in 0..n {
            a.set_session(t0, PathId(i as u8), true);
            b.set_session(t0, PathId(i as u8), true);
        }
        Pair {
            t0,
            now: t0,
            a,
            b,
            delays: delays_ms
                .iter()
                .map(|&d| Some(Duration::from_millis(d)))
                .collect(),
            cut_to_b: vec![false; n],
            lose_probes_to_b: false,
            carry_data: false,
            lose: |_| false,
            wire: Vec::new(),
            sent: Vec::new(),
            delivered: Vec::new(),
        }
    }

    fn at(&self, ms: u64) -> Instant {
        self.t0 + Duration::from_millis(ms)
    }

    /// Put what one side has to send on the wire.
    fn flush(&mut self, to_b: bool, now: Instant) {
        let mut out = Vec::new();
        loop {
            let side = if to_b { &mut self.a } else { &mut self.b };
            let Some(path) = side.poll_transmit(&mut out) else {
                break;
            };
            for buf in out.drain(..) {
                let trailer = trailer_of(&buf);
                if trailer.kind == Kind::Data {
                    if to_b {
                        self.sent.push((path, trailer));
                    }
                    if !self.carry_data || (to_b && (self.lose)(&trailer)) {
                        continue;
                    }
                }
                if to_b && self.lose_probes_to_b && trailer.kind == Kind::Probe {
                    continue;
                }
                let cut = to_b && self.cut_to_b[path.index()];
                if let (Some(d), false) = (self.delays[path.index()], cut) {
                    self.wire.push((now + d, to_b, path, buf));
                }
            }
        }
    }

    /// Run both sides' timers, 1 ms steps, and carry what they send.
    fn run(&mut self, from_ms: u64, until_ms: u64) {
        for ms in from_ms..until_ms {
            let now = self.at(ms);
            self.now = now;
            self.a.handle_timeout(now);
            self.flush(true, now);
            self.b.handle_timeout(now);
            self.flush(false, now);
            self.arrive(now);
        }
    }

    /// What A knows of `path` now.
    fn estimate(&self, path: u8) -> PathEstimate {
        self.a.estimate(PathId(path), self.now)
    }

    fn arrive(&mut self, now: Instant) {
        let (due, later): (Vec<_>, Vec<_>) = self.wire.drain(..).partition(|w| w.0 <= now);
        self.wire = later;
        for (at, to_b, path, buf) in due {
            let side = if to_b { &mut self.b } else { &mut self.a };
            side.handle_datagrams(at, path, &mut vec![buf]);
        }
        self.b.poll_deliver(&mut self.delivered);
        self.flush(true, now);
        self.flush(false, now);
    }

    /// Send a data packet of `len` bytes from A at `now`; return its path
    /// and trailer.
    fn send(&mut self, now: Instant, len: usize) -> Option<(PathId, Trailer)> {
        self.send_packet(now, ip_packet(len))
    }

    /// Send `packet` from A at `now`; return its path and trailer.
    fn send_packet(&mut self, now: Instant, packet: PacketBuf) -> Option<(PathId, Trailer)> {
        self.now = now;
        let before = self.sent.len();
        self.a.handle_tun(now, &mut vec![packet]);
        self.flush(true, now);
        self.sent[before..].last().copied()
    }

    /// Run `ms`, a millisecond at a time, calling `each` first; return the
    /// first millisecond after which `side` had `path` down.
    fn first_down(
        &mut self,
        side: Side,
        path: PathId,
        ms: std::ops::Range<u64>,
        mut each: impl FnMut(&mut Pair, Instant),
    ) -> Option<u64> {
        for ms in ms {
            each(self, self.at(ms));
            self.run(ms, ms + 1);
            let endpoint = match side {
                Side::A => &self.a,
                Side::B => &self.b,
            };
            if endpoint.state(path) == PathState::Down {
                return Some(ms);
            }
        }
        None
    }

    /// As [`run`](Self::run), with both sides sending 200 Mbit/s of data.
    fn run_busy(&mut self, from_ms: u64, until_ms: u64) {
        for ms in from_ms..until_ms {
            let now = self.at(ms);
            for _ in 0..20 {
                self.send(now, 1250);
                self.b.handle_tun(now, &mut vec![ip_packet(1250)]);
            }
            self.run(ms, ms + 1);
        }
    }
}

#[test]
fn probes_measure_rtt_and_relative_delay() {
    let mut pair = Pair::new(&[5, 30]);
    pair.run(0, 2000);
    let fast = pair.estimate(0);
    let slow = pair.estimate(1);
    assert!((fast.srtt_ms.unwrap() - 10.0).abs() < 1.5, "{fast:?}");
    assert!((slow.srtt_ms.unwrap() - 60.0).abs() < 1.5, "{slow:?}");
    assert!(fast.owd_rel_ms.unwrap().abs() < 0.5, "{fast:?}");
    assert!((slow.owd_rel_ms.unwrap() - 25.0).abs() < 0.5, "{slow:?}");
    assert!((slow.owd_in_rel_ms.unwrap() - 25.0).abs() < 0.5, "{slow:?}");
    assert_eq!(pair.a.state(PathId(0)), PathState::Up);
    assert_eq!(pair.b.state(PathId(1)), PathState::Up);
    // The receiver waits for a gap about as long as the delay spread.
    let hold = pair.b.hold();
    assert!(hold >= 25 * MS && hold <= 30 * MS, "{hold:?}");
}

#[test]
fn idle_paths_cost_at_most_ten_probes_a_second() {
    let mut pair = Pair::new(&[5, 5, 5]);
    let sent =
        |pair: &Pair| -> u64 { (0..3).map(|i| pair.a.path_stats(PathId(i)).tx_probes).sum() };
    // Once up, each path is probed fast for half a second, so that both
    // sides measure its jitter: fifty-odd probes, once.
    pair.run(0, 1000);
    let first_second = sent(&pair);
    assert!(
        first_second <= 3 * 60,
        "{first_second} probes in the first second on 3 paths"
    );
    pair.run(1000, 10_000);
    let after = sent(&pair) - first_second;
    assert!(
        after <= 3 * 10 * 9 + 3,
        "{after} probes in the next 9 s on 3 paths"
    );
}

#[test]
fn each_path_sends_three_trains_when_its_session_comes_up() {
    let mut pair = Pair::new(&[5, 30]);
    let mut trains = [0usize; 2];
    let mut lens = Vec::new();
    for ms in 0..2000 {
        let now = pair.at(ms);
        pair.a.handle_timeout(now);
        let mut out = Vec::new();
        while let Some(path) = pair.a.poll_transmit(&mut out) {
            for buf in out.drain(..) {
                if trailer_of(&buf).kind == Kind::Train {
                    trains[path.index()] += 1;
                    lens.push(buf.len());
                }
            }
        }
    }
    assert_eq!(trains, [48, 48], "3 trains of 16 packets a path");
    assert!(lens.iter().all(|&l| l == 1100 + TRAILER_LEN), "{lens:?}");
    // A session that comes up again sends them again.
    pair.a.set_session(pair.at(2000), PathId(1), false);
    pair.a.set_session(pair.at(2001), PathId(1), true);
    pair.a.handle_timeout(pair.at(2001));
    let mut out = Vec::new();
    let mut again = [0usize; 2];
    while let Some(path) = pair.a.poll_transmit(&mut out) {
        again[path.index()] += out
            .drain(..)
            .filter(|b| trailer_of(b).kind == Kind::Train)
            .count();
    }
    assert_eq!(again, [0, 16]);
}

#[test]
fn a_train_handed_over_late_in_one_batch_is_timed_as_the_socket_received_it() {
    // B's process stalled while A's first train on path 0 arrived, 100 µs
    // apart, and read all sixteen packets in one batch 20 ms later.
    let mut pair = Pair::new(&[5, 30]);
    let t0 = pair.at(0);
    pair.a.handle_timeout(t0);
    let mut out = Vec::new();
    let mut train = Vec::new();
    while let Some(path) = pair.a.poll_transmit(&mut out) {
        train.extend(
            out.drain(..)
                .filter(|b| path == PathId(0) && trailer_of(b).kind == Kind::Train),
        );
    }
    assert_eq!(train.len(), 16);
    let len = train[0].len() - TRAILER_LEN;
    for (i, buf) in (0u64..).zip(train.iter_mut()) {
        buf.set_received(Some(t0 + 5 * MS + Duration::from_micros(100 * i)));
    }
    let handed = t0 + 25 * MS;
    pair.b.handle_datagrams(handed, PathId(0), &mut train);
    // B's next probe on the path reports the train as it arrived.
    let mut report = None;
    for ms in 25..200 {
        pair.b.handle_timeout(pair.at(ms));
        while let Some(path) = pair.b.poll_transmit(&mut out) {
            for buf in out.drain(..) {
                let (trailer, body) = Trailer::decode_suffix(buf.packet()).expect("a trailer");
                if path == PathId(0) && trailer.kind == Kind::Probe {
                    let probe = Probe::decode(&buf.packet()[..body]).expect("a probe");
                    report = report.or((probe.train_number == 1).then_some(probe));
                }
            }
        }
    }
    let probe = report.expect("the train reported");
    assert_eq!(probe.train_bytes, 15 * len as u32);
    assert_eq!(probe.train_span_us, 1500);
}

#[test]
fn a_cut_path_is_down_within_300_ms_and_back_when_restored() {
    let mut pair = Pair::new(&[5, 30]);
    pair.run(0, 1000);
    while pair.a.poll_event().is_some() {}
    pair.delays[1] = None;
    let cut = 1000;
    let down_at = pair
        .first_down(Side::A, PathId(1), cut..cut + 1000, |_, _| {})
        .expect("never marked down");
    pair.run(down_at + 1, cut + 1000);
    let down_after = down_at - cut;
    assert!(down_after <= 300, "down after {down_after} ms");
    assert_eq!(
        pair.a.state(PathId(0)),
        PathState::Up,
        "the good path stays up"
    );
    let event = pair.a.poll_event().expect("a down event");
    assert_eq!(event.path, PathId(1));
    assert!(
        matches!(event.change, PathChange::Down { silent } if silent >= 120 * MS),
        "{event:?}"
    );
    assert!(pair.a.poll_event().is_none(), "logged once");

    pair.delays[1] = Some(30 * MS);
    pair.run(2000, 2500);
    assert_eq!(pair.a.state(PathId(1)), PathState::Up);
}

/// Cut path 1 (30 ms) of `pair` at 1 s, restore it once A marks it down,
/// and run a second more; return when it was marked down (ms).
fn cut_and_restore_path_1(pair: &mut Pair) -> u64 {
    pair.delays[1] = None;
    let down_at = pair
        .first_down(Side::A, PathId(1), 1000..2000, |_, _| {})
        .expect("never marked down");
    pair.delays[1] = Some(30 * MS);
    pair.run(down_at + 1, down_at + 1000);
    down_at
}

#[test]
fn a_lossy_path_back_from_down_keeps_the_loss_measured_before() {
    // A path that lost 0.6% before a cut loses as much after it; read as
    // clean, it would carry data until thousands of packets said again
    // what was known.
    let mut pair = Pair::new(&[5, 30]);
    pair.run(0, 1000);
    pair.a.paths.path_mut(PathId(1)).delivery.set_loss(0.006);
    let down_at = cut_and_restore_path_1(&mut pair);
    assert_eq!(pair.a.state(PathId(1)), PathState::Up);
    let loss = pair.a.estimate(PathId(1), pair.at(down_at + 1000)).loss;
    assert_eq!(loss, 0.006);
}

#[test]
fn a_set_aside_path_back_from_down_says_it_stays_set_aside() {
    // "Up" after the outage would tell an operator nothing true: the
    // loss it was set aside for is still there.
    let mut pair = Pair::new(&[5, 30]);
    pair.run(0, 1000);
    while pair.a.poll_event().is_some() {}
    let at = pair.at(1000);
    let path = pair.a.paths.path_mut(PathId(1));
    path.liveness.set_aside(at);
    path.liveness.set(PathState::SetAside);
    cut_and_restore_path_1(&mut pair);
    let events: Vec<PathChange> = std::iter::from_fn(|| pair.a.poll_event())
        .map(|e| e.change)
        .collect();
    assert!(
        matches!(
            events[..],
            [PathChange::Down { .. }, PathChange::BackSetAside]
        ),
        "{events:?}"
    );
    assert_eq!(pair.a.state(PathId(1)), PathState::SetAside);
}

/// Set A's `path` aside at `at` for a 2% loss.
fn set_aside_for_loss(pair: &mut Pair, path: PathId, at: Instant) {
    let path = pair.a.paths.path_mut(path);
    path.delivery.set_loss(0.02);
    path.liveness.set_aside(at);
    path.liveness.set(PathState::SetAside);
}

/// Run `pair` 1 s, set path 0 aside for a 2% loss beside the clean path
/// 1, and clear the events.
fn set_path_0_aside(pair: &mut Pair) {
    pair.run(0, 1000);
    set_aside_for_loss(pair, PathId(0), pair.at(1000));
    while pair.a.poll_event().is_some() {}
    assert_eq!(pair.a.usable(), PathSet(0b10));
}

/// Assert that path 0, set aside, is back for data with its loss kept,
/// after `first` (path 1's change).
fn assert_path_0_recalled(pair: &mut Pair, at: Instant, first: fn(&PathChange) -> bool) {
    let events: Vec<PathChange> = std::iter::from_fn(|| pair.a.poll_event())
        .map(|e| e.change)
        .collect();
    assert!(
        events.len() == 2 && first(&events[0]) && events[1] == PathChange::Recalled,
        "{events:?}"
    );
    assert_eq!(pair.a.state(PathId(0)), PathState::Up);
    assert_eq!(pair.a.usable(), PathSet(0b01));
    assert_eq!(pair.a.estimate(PathId(0), at).loss, 0.02);
}

#[test]
fn a_set_aside_path_carries_data_while_the_clean_one_is_down() {
    // Set aside for the clean path beside it, a lossy path is all there
    // is once that one is cut; its loss is kept, to set it aside again
    // once the clean path is back.
    let mut pair = Pair::new(&[5, 30]);
    set_path_0_aside(&mut pair);
    pair.delays[1] = None;
    let down_at = pair
        .first_down(Side::A, PathId(1), 1000..2000, |_, _| {})
        .expect("never marked down");
    let at = pair.at(down_at);
    assert_path_0_recalled(&mut pair, at, |e| matches!(e, PathChange::Down { .. }));
}

#[test]
fn a_set_aside_path_carries_data_once_the_clean_one_s_session_is_gone() {
    // As when the clean path is removed from the config.
    let mut pair = Pair::new(&[5, 30]);
    set_path_0_aside(&mut pair);
    let at = pair.at(1001);
    pair.a.set_session(at, PathId(1), false);
    assert_path_0_recalled(&mut pair, at, |e| *e == PathChange::NoSession);
}

#[test]
fn light_load_takes_the_fast_path_and_heavy_load_spills_over() {
    let mut pair = Pair::new(&[5, 30]);
    pair.run(0, 1000);
    let now = pair.at(1000);
    // A trickle: 10 packets spaced 10 ms apart all go the fast way.
    for k in 0..10u32 {
        let (path, _) = pair.send(now + k * 10 * MS, 1400).unwrap();
        assert_eq!(path, PathId(0));
    }
    // A burst of 2000 packets at once: the fast path's queue passes 25 ms
    // (100 Mbit/s assumed: ~220 packets), then the slow path is earlier.
    let later = now + 200 * MS;
    let slow = (0..2000)
        .filter(|_| pair.send(later, 1400).unwrap().0 == PathId(1))
        .count();
    assert!(slow > 500 && slow < 1000, "{slow} of 2000 on the slow path");
}

#[test]
fn numbering_is_global_and_per_path() {
    let mut pair = Pair::new(&[5, 5]);
    pair.run(0, 500);
    let now = pair.at(500);
    let mut per_path = [0u32; 2];
    for seq in 0..100 {
        let (path, t) = pair.send(now, 1400).unwrap();
        assert_eq!(t.seq, Seq(seq));
        assert_eq!(t.path_seq, Seq(per_path[path.index()]));
        assert_eq!(t.epoch, EPOCH_A);
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

/// A NACK from B asking A for `seqs` of A's run `epoch`.
fn nack(epoch: u32, seqs: &[Seq]) -> PacketBuf {
    let mut buf = PacketBuf::new(crate::wire::NACK_MAX_LEN + TRAILER_LEN, 0);
    buf.fill(0, crate::wire::NACK_MAX_LEN, |b| {
        Nack::encode(epoch, seqs, b)
    });
    append_trailer(
        &mut buf,
        &Trailer::control(Kind::Nack, EPOCH_B, PathSet(0b111)),
    );
    buf
}

#[test]
fn a_repair_keeps_its_number_avoids_a_lossy_path_and_claims_no_path() {
    // Path 0 is the fastest but losing packets; path 2 is fast and clean.
    let mut pair = Pair::new(&[3, 30, 5]);
    pair.run(0, 1000);
    pair.a.paths.path_mut(PathId(0)).delivery.set_loss(0.05);
    let now = pair.at(1000);
    let (lost_on, first) = pair.send(now, 1400).unwrap();
    assert_eq!(lost_on, PathId(0));
    pair.a
        .handle_datagrams(now, PathId(1), &mut vec![nack(EPOCH_A, &[Seq(0)])]);
    pair.flush(true, now);
    let &(path, resent) = pair.sent.last().unwrap();
    assert_eq!(path, PathId(2), "repair on the lossy or the slow path");
    assert_eq!(resent.seq, Seq(0));
    assert_eq!(resent.path_seq, Seq(0), "path 2's first packet");
    assert_eq!(resent.kind, Kind::Data);
    assert_eq!(pair.a.path_stats(PathId(2)).resent, 1);
    // Asked again, it is not resent twice.
    pair.a
        .handle_datagrams(now, PathId(1), &mut vec![nack(EPOCH_A, &[Seq(0)])]);
    pair.flush(true, now);
    assert_eq!(pair.a.path_stats(PathId(2)).resent, 1);
    // Nor on the path that lost it, while another can take it.
    assert_eq!(pair.a.paths.usable_for_repair(PathId(2)), PathSet(0b010));
    // New data is numbered on: the repair took no global number. The
    // receiver is not told to wait on path 2 for later packets.
    let (_, next) = pair.send(now, 1400).unwrap();
    assert_eq!(next.seq, Seq(1));
    assert!(
        !next.paths_in_use.contains(PathId(2)),
        "{:?}",
        next.paths_in_use
    );
    assert_eq!(first.paths_in_use, PathSet(0b001));
    // NACKs go on the two paths with the shortest round trip.
    assert_eq!(pair.b.paths.nack_paths(), PathSet(0b101));
    let hint = pair.b.paths.repair_hint().unwrap();
    // A round trip of the slowest path (60 ms): the NACK the near way and
    // the repair, which may have to come the far way, with margins.
    assert!(hint >= 60 * MS && hint <= 90 * MS, "{hint:?}");
}

#[test]
fn a_repair_also_takes_a_near_lossy_path_when_the_clean_ones_are_far() {
    // Path 0 is near and losing packets; path 1, the only clean one, is
    // 27 ms further: a repair there alone comes after the receiver, who
    // waits about a round trip of path 0, gave up on it.
    let mut pair = Pair::new(&[3, 30]);
    pair.run(0, 1000);
    pair.a.paths.path_mut(PathId(0)).delivery.set_loss(0.03);
    let now = pair.at(1000);
    let (lost_on, _) = pair.send(now, 1400).unwrap();
    assert_eq!(lost_on, PathId(0));
    pair.a
        .handle_datagrams(now, PathId(0), &mut vec![nack(EPOCH_A, &[Seq(0)])]);
    pair.flush(true, now);
    let repairs: Vec<PathId> = pair.sent[1..].iter().map(|&(path, _)| path).collect();
    assert_eq!(repairs.len(), 2, "{repairs:?}");
    assert!(repairs.contains(&PathId(0)) && repairs.contains(&PathId(1)));
    assert!(pair.sent[1..].iter().all(|(_, t)| t.seq == Seq(0)));
    // With a clean path about as near, one copy is enough (see above).
    let mut pair = Pair::new(&[3, 4]);
    pair.run(0, 1000);
    pair.a.paths.path_mut(PathId(0)).delivery.set_loss(0.03);
    let now = pair.at(1000);
    pair.send(now, 1400).unwrap();
    pair.a
        .handle_datagrams(now, PathId(0), &mut vec![nack(EPOCH_A, &[Seq(0)])]);
    pair.flush(true, now);
    assert_eq!(pair.sent.len(), 2, "{:?}", pair.sent);
    assert_eq!(pair.sent[1].0, PathId(1));
}

#[test]
fn repairs_a_small_clean_path_cannot_bring_in_time_take_the_path_that_lost_them() {
    // Path 1, the only clean one, carries 1 Mbit/s: a repair waits 11 ms
    // behind each one queued before it. The peer waits for a repair about
    // a round trip of the slowest path and a margin: 20 ms at most behind
    // a NACK that came the near way. Queued there, repairs past the first
    // few would come after it stopped waiting.
    let mut pair = Pair::new(&[3, 5]);
    pair.run(0, 1000);
    pair.a.paths.path_mut(PathId(0)).delivery.set_loss(0.03);
    let small = pair.a.paths.path_mut(PathId(1));
    small.delivery.set_train_rate(Some(125_000.0));
    let now = pair.at(1000);
    for _ in 0..20 {
        assert_eq!(pair.send(now, 1400).unwrap().0, PathId(0));
    }
    let lost: Vec<Seq> = (0..20).map(Seq).collect();
    pair.a
        .handle_datagrams(now, PathId(0), &mut vec![nack(EPOCH_A, &lost)]);
    pair.flush(true, now);
    let repairs = &pair.sent[20..];
    let on = |path| repairs.iter().filter(|(p, _)| *p == PathId(path)).count();
    assert!(
        on(1) >= 1 && on(1) <= 2,
        "{} of 20 on the small path",
        on(1)
    );
    for seq in &lost {
        assert!(
            repairs.iter().any(|(_, t)| t.seq == *seq),
            "{seq:?} not resent"
        );
    }
}

#[test]
fn a_repair_late_wherever_it_goes_takes_one_path_only() {
    // 20 ms one way on the nearest path, the others 10 and 20 ms farther:
    // a repair asked for comes after the receiver has given up on its
    // gap and after the flow's reordering window, whatever the path (see
    // `PathTable::repair_useful_us`). It goes the soonest way among the
    // clean paths, path 0, and no second copy goes on path 1, which lost
    // it: when a path dies with its packets in flight, a second copy of
    // each would only deepen the queues the others wait behind.
    let mut pair = Pair::new(&[30, 20, 30, 40]);
    pair.run(0, 1000);
    let now = pair.at(1000);
    let (lost_on, lost) = pair.send(now, 1400).unwrap();
    assert_eq!(lost_on, PathId(1));
    assert!(pair
        .a
        .paths
        .repair_useful_us(now)
        .is_some_and(|us| us <= 0.0));
    for (path, queue_ms) in [(0, 5), (2, 8)] {
        let p = pair.a.paths.path_mut(PathId(path));
        p.delivery.set_train_rate(Some(1_250_000.0));
        p.add_to_queue(now, 1250 * queue_ms);
    }
    let before = pair.sent.len();
    pair.a
        .handle_datagrams(now, PathId(1), &mut vec![nack(EPOCH_A, &[lost.seq])]);
    pair.flush(true, now);
    let repairs: Vec<PathId> = pair.sent[before..].iter().map(|&(path, _)| path).collect();
    assert_eq!(repairs, vec![PathId(0)]);
}

#[test]
fn late_repairs_fill_a_path_that_never_overflowed_only_so_far() {
    // As above, but paths 0 to 2 are full where they overflowed, and path
    // 3, the idle one, has never overflowed: late repairs go there until
    // they would queue it 20 ms deep, and the rest are left to the flow
    // rather than queued past a buffer nobody measured.
    let mut pair = Pair::new(&[30, 20, 30, 40]);
    pair.run(0, 1000);
    let now = pair.at(1000);
    let mut lost = Vec::new();
    while lost.len() < 40 {
        let (path, packet) = pair.send(now, 1400).unwrap();
        if path == PathId(1) {
            lost.push(packet.seq);
        }
    }
    for path in 0..3 {
        let p = pair.a.paths.path_mut(PathId(path));
        p.queue_limit.met(now, 6000.0);
        p.queue_limit.overflowed(now);
        p.add_to_queue(now, 100_000);
        assert!(p.full(now));
    }
    // 1 Mbit/s: 20 ms is 2500 bytes, room for one repair and no more.
    let idle = pair.a.paths.path_mut(PathId(3));
    idle.delivery.set_train_rate(Some(125_000.0));
    assert_eq!(idle.queue_limit.limit_us(now), None);
    let before = pair.sent.len();
    pair.a
        .handle_datagrams(now, PathId(1), &mut vec![nack(EPOCH_A, &lost)]);
    pair.flush(true, now);
    let repairs: Vec<PathId> = pair.sent[before..].iter().map(|&(path, _)| path).collect();
    assert_eq!(repairs, vec![PathId(3)]);
    assert_eq!(pair.a.stats().repairs_too_late, 39);
}

#[test]
fn no_repair_joins_a_queue_as_deep_as_where_its_path_overflowed() {
    // Path 1, the clean one, overflowed at a 6 ms queue and is filled
    // past that: the repair goes on the lossy path that lost it.
    let mut pair = Pair::new(&[3, 5]);
    pair.run(0, 1000);
    pair.a.paths.path_mut(PathId(0)).delivery.set_loss(0.03);
    let now = pair.at(1000);
    let clean = pair.a.paths.path_mut(PathId(1));
    clean.queue_limit.met(now, 6000.0);
    clean.queue_limit.overflowed(now);
    clean.add_to_queue(now, 100_000);
    assert!(clean.full(now));
    assert_eq!(pair.send(now, 1400).unwrap().0, PathId(0));
    pair.a
        .handle_datagrams(now, PathId(0), &mut vec![nack(EPOCH_A, &[Seq(0)])]);
    pair.flush(true, now);
    let repairs: Vec<PathId> = pair.sent[1..].iter().map(|&(path, _)| path).collect();
    assert_eq!(repairs, vec![PathId(0)]);
}

#[test]
fn what_a_nack_asks_for_and_is_not_resent_is_counted_by_why() {
    // Asked for after 8192 more were sent (the log's span), then one
    // asked for twice (a NACK goes out on two paths): only the first is
    // a repair not sent.
    let mut pair = Pair::new(&[3, 5]);
    pair.run(0, 1000);
    let span = ReorderConfig::default().capacity as u32;
    for n in 0..=span {
        pair.send(pair.at(1000 + u64::from(n) / 8), 100).unwrap();
    }
    let now = pair.at(2100);
    let newest = Seq(span);
    pair.a.handle_datagrams(
        now,
        PathId(0),
        &mut vec![
            nack(EPOCH_A, &[Seq(0)]),
            nack(EPOCH_A, &[newest]),
            nack(EPOCH_A, &[newest]),
        ],
    );
    pair.flush(true, now);
    let resent: Vec<Seq> = pair.sent[span as usize + 1..]
        .iter()
        .map(|(_, t)| t.seq)
        .collect();
    assert_eq!(resent, vec![newest]);
    assert_eq!(
        (pair.a.stats().repairs_gone, pair.a.stats().repairs_too_late),
        (1, 0)
    );
    // Every path queued seconds deep: no repair comes while it is of use.
    let now = pair.at(2101);
    pair.send(now, 1400).unwrap();
    for path in [PathId(0), PathId(1)] {
        pair.a.paths.path_mut(path).add_to_queue(now, 50_000_000);
    }
    let before = pair.sent.len();
    pair.a
        .handle_datagrams(now, PathId(0), &mut vec![nack(EPOCH_A, &[Seq(span + 1)])]);
    pair.flush(true, now);
    assert_eq!(pair.sent.len(), before, "{:?}", &pair.sent[before..]);
    assert_eq!(
        (pair.a.stats().repairs_gone, pair.a.stats().repairs_too_late),
        (1, 1)
    );
}

#[test]
fn what_a_dead_path_took_and_was_asked_for_too_late_goes_once_it_is_down() {
    // Lab sweep seed 10531, #17: the big clean path (0) is cut while the
    // lossy one (2) is set aside. B asks for what path 0 took; the small
    // clean path (1) is queued so deep that no repair would come before B
    // stopped waiting, and none is sent. Once path 0 is down, path 2 is
    // back: what B asked for goes there, however late, as long as it has
    // room. Linux's own retransmission of it, while another path still
    // delivers, took one segment per retransmission timeout for seconds.
    let mut pair = Pair::new(&[5, 30, 40]);
    pair.run(0, 1000);
    let now = pair.at(1000);
    set_aside_for_loss(&mut pair, PathId(2), now);
    let lost: Vec<Seq> = (0..20)
        .map(|_| {
            let (path, trailer) = pair.send(now, 1400).unwrap();
            assert_eq!(path, PathId(0));
            trailer.seq
        })
        .collect();
    // The next packet goes on path 1, so B sees the gap and asks.
    pair.a
        .paths
        .path_mut(PathId(0))
        .add_to_queue(now, 10_000_000);
    assert_eq!(pair.send(now, 1400).unwrap().0, PathId(1));
    pair.a.paths.path_mut(PathId(0)).queue.clear();
    pair.a
        .paths
        .path_mut(PathId(1))
        .add_to_queue(now, 50_000_000);
    // Path 0's echoes are late already: no data goes there.
    pair.delays[0] = None;
    pair.a.paths.path_mut(PathId(0)).liveness.mark_echo_late();
    pair.a
        .handle_datagrams(now, PathId(1), &mut vec![nack(EPOCH_A, &lost)]);
    pair.flush(true, now);
    assert_eq!(pair.a.stats().repairs_too_late, 20);
    let sent_before = pair.sent.len();
    // Path 1 stays queued as deep as it held lately; path 2's queue is
    // deeper than a repair asked for now may wait, and has room.
    let down_at = pair.first_down(Side::A, PathId(0), 1000..2000, |pair, now| {
        for (path, queued_us, held_us) in [(1, 2e6, 2e6), (2, 2e5, 4e5)] {
            let p = pair.a.paths.path_mut(PathId(path));
            p.queue_limit.met(now, held_us);
            let short_us = queued_us - p.model_queue_us(now);
            if short_us > 0.0 {
                p.add_to_queue(now, (short_us * p.rate()) as usize);
            }
        }
    });
    assert!(down_at.is_some(), "never marked down");
    let resent: Vec<(PathId, Seq)> = pair.sent[sent_before..]
        .iter()
        .map(|(path, t)| (*path, t.seq))
        .collect();
    assert_eq!(
        resent,
        lost.iter().map(|&seq| (PathId(2), seq)).collect::<Vec<_>>()
    );
}

#[test]
fn a_nack_for_a_run_before_a_restart_resends_nothing() {
    let mut pair = Pair::new(&[5, 5]);
    pair.run(0, 500);
    let now = pair.at(500);
    pair.send(now, 1400).unwrap();
    pair.a
        .handle_datagrams(now, PathId(0), &mut vec![nack(EPOCH_A + 1, &[Seq(0)])]);
    pair.flush(true, now);
    assert_eq!(pair.a.stats().nacks_for_old_run, 1);
    assert_eq!(pair.sent.len(), 1, "resent for another run");
}

/// Send 500 packets from A over `delays_ms`, 5 a millisecond, losing the
/// first copy of 10 (wherever it goes; its repair is not), and run until
/// everything has arrived; return the pair.
fn lose_one_packet_once(delays_ms: &[u64]) -> Pair {
    let mut pair = Pair::new(delays_ms);
    pair.carry_data = true;
    pair.run(0, 1000);
    let mut lost_once = false;
    for ms in 1000..1100 {
        let now = pair.at(ms);
        for _ in 0..5 {
            let before = pair.sent.len();
            pair.a.handle_tun(now, &mut vec![ip_packet(1000)]);
            pair.flush(true, now);
            if !lost_once && pair.sent[before..].iter().any(|(_, t)| t.seq == Seq(10)) {
                // Take it back off the wire.
                let n = pair.wire.len();
                pair.wire
                    .retain(|w| !(w.1 && trailer_of(&w.3).seq == Seq(10)));
                assert_eq!(pair.wire.len(), n - 1);
                lost_once = true;
            }
        }
        pair.run(ms, ms + 1);
    }
    pair.run(1100, 1200);
    assert!(lost_once);
    assert_eq!(pair.delivered.len(), 500, "{:?}", pair.b.reorder_stats());
    pair
}

#[test]
fn lost_data_is_asked_for_resent_and_delivered_in_order() {
    // 35 ms apart: the packets behind the loss wait about that long for
    // the far path anyway, and the repair comes within that wait.
    let pair = lose_one_packet_once(&[5, 40]);
    let stats = pair.b.reorder_stats();
    assert_eq!(
        (stats.repairs_requested, stats.repaired, stats.repaired_late),
        (1, 1, 0),
        "{stats:?}"
    );
}

#[test]
fn a_repair_that_would_hold_the_packets_behind_it_past_the_hold_is_handed_out_late() {
    // 3 ms apart: the hold is a few milliseconds, a repair takes a round
    // trip. Held for it, every packet behind the loss would wait that
    // round trip; the inner flow takes a packet a little out of order for
    // reordering, and a loss for congestion.
    let pair = lose_one_packet_once(&[5, 8]);
    let stats = pair.b.reorder_stats();
    assert_eq!(
        (stats.repairs_requested, stats.repaired, stats.repaired_late),
        (1, 0, 1),
        "{stats:?}"
    );
    let wait = pair.b.waits().quantile(1.0).expect("something waited");
    assert!(wait <= pair.b.reorder.hold() + MS, "waited {wait:?}");
    // Once on path 1, and once more on path 0, where it arrives 3 ms sooner.
    let resent: Vec<u64> = (0..2)
        .map(|i| pair.a.path_stats(PathId(i)).resent)
        .collect();
    assert_eq!(resent, vec![1, 1]);
}

#[test]
fn a_repair_that_comes_late_passes_the_segments_held_behind_it() {
    // Paths 20 and 60 ms one way; TCP segments are held to 60 ms. The
    // flow takes the far path for one segment in ten until one is lost
    // there, and only the near one after, so the segments behind the loss
    // came the near way. They wait 20 ms past their due time for its
    // repair, which takes the near path's 40 ms round trip and comes
    // late, into segments held for up to 40 ms more: behind them, its
    // flow would see the gap it fills that much longer, past its
    // reordering window, and take it for a loss.
    let mut pair = Pair::new(&[20, 60]);
    pair.run(0, 2000);
    pair.carry_data = true;
    let marked = |n: u16| {
        let mut bytes = tcp_segment(1000).packet().to_vec();
        bytes[40..42].copy_from_slice(&n.to_be_bytes());
        PacketBuf::copy_of(&bytes)
    };
    let (mut n, mut lost) = (0u16, None);
    let (mut came, mut delivered) = (None, None);
    for ms in 2000..2500u64 {
        // One a millisecond goes the near way; every tenth millisecond
        // until the loss, a second one queues behind it there, and takes
        // the far one.
        let burst = if ms >= 2300 {
            0
        } else if ms % 10 == 0 && lost.is_none() {
            2
        } else {
            1
        };
        for _ in 0..burst {
            let (path, trailer) = pair.send_packet(pair.at(ms), marked(n)).expect("sent");
            assert!(trailer.held);
            if lost.is_none() && ms >= 2100 && path == PathId(1) {
                let before = pair.wire.len();
                pair.wire
                    .retain(|w| !(w.1 && trailer_of(&w.3).seq == trailer.seq));
                assert_eq!(pair.wire.len(), before - 1);
                lost = Some(n);
            }
            n += 1;
        }
        pair.run(ms, ms + 1);
        if came.is_none() && pair.b.reorder_stats().repaired_late == 1 {
            came = Some(ms);
        }
        let lost = lost.map(|n| n.to_be_bytes());
        if delivered.is_none()
            && pair
                .delivered
                .iter()
                .any(|p| lost.is_some_and(|n| p.packet()[40..42] == n))
        {
            delivered = Some(ms);
        }
    }
    let stats = pair.b.reorder_stats();
    assert_eq!(
        (stats.skipped_timeout, stats.repaired_late),
        (1, 1),
        "{stats:?}"
    );
    assert_eq!(pair.delivered.len(), usize::from(n));
    assert!(came.is_some());
    assert_eq!(delivered, came, "delivered, and its repair came, at ms");
}

#[test]
fn a_run_s_first_packet_lost_alone_is_asked_for_once_its_path_s_probe_names_it() {
    // The acknowledgement of a flow's first flight may be the run's first
    // data packet and go alone. Lost, nothing of the run has arrived to
    // show a gap: the flow would wait for its retransmission timeout.
    let mut pair = Pair::new(&[5, 40]);
    pair.carry_data = true;
    pair.run(0, 1000);
    let (path, first) = pair.send(pair.at(1000), 100).expect("sent");
    assert_eq!(first.seq, Seq(0));
    let n = pair.wire.len();
    pair.wire
        .retain(|w| !(w.1 && w.2 == path && trailer_of(&w.3).seq == first.seq));
    assert_eq!(pair.wire.len(), n - 1);
    pair.run(1000, 1100);
    let stats = pair.b.reorder_stats();
    assert_eq!(pair.delivered.len(), 1, "{stats:?}");
    assert_eq!(stats.repairs_requested, 1, "{stats:?}");
}

/// Send two flights of ten packets from A, 500 ms apart, the first one's
/// last packet lost; with `probes_name_it` false, no probe of its path
/// names it (lost, or from a peer that does not). Return B's stats.
fn lose_a_flight_s_last_packet(probes_name_it: bool) -> ReorderStats {
    let mut pair = Pair::new(&[5, 40]);
    pair.carry_data = true;
    pair.run(0, 1000);
    let flight = |pair: &mut Pair, ms: u64| {
        let now = pair.at(ms);
        for _ in 0..10 {
            pair.send(now, 1000);
        }
    };
    flight(&mut pair, 1000);
    let (path, last) = *pair.sent.last().expect("the flight was sent");
    let n = pair.wire.len();
    pair.wire
        .retain(|w| !(w.1 && w.2 == path && trailer_of(&w.3).seq == last.seq));
    assert_eq!(pair.wire.len(), n - 1);
    for ms in 1000..1500 {
        pair.run(ms, ms + 1);
        if !probes_name_it {
            for (_, to_b, _, buf) in pair.wire.iter_mut().filter(|w| w.1) {
                let (mut trailer, len) = Trailer::decode_suffix(buf.packet()).expect("a trailer");
                if *to_b && trailer.kind == Kind::Probe {
                    trailer.previous_on_path = None;
                    trailer.encode(&mut buf.packet_mut()[len..]);
                }
            }
        }
    }
    flight(&mut pair, 1500);
    pair.run(1500, 2000);
    assert_eq!(pair.delivered.len(), 20, "{:?}", pair.b.reorder_stats());
    pair.b.reorder_stats()
}

/// Send 100 packets from A over a path of `delay_ms` that A measured
/// losing `loss`, 1 ms apart, the 31st lost on the way; return the pair
/// once all is delivered.
fn lose_one_on_a_measured_path(delay_ms: u64, loss: f64) -> Pair {
    lose_one_on_a_path(delay_ms, Some(loss))
}

/// As [`lose_one_on_a_measured_path`], the path's loss measured or, with
/// `None`, not known yet.
fn lose_one_on_a_path(delay_ms: u64, loss: Option<f64>) -> Pair {
    // The first send only: a repair has the next number on the path.
    lose_on_a_path(delay_ms, loss, 1, |t| {
        t.seq == Seq(30) && t.path_seq == Seq(30)
    })
}

/// Send 100 milliseconds of `per_ms` packets from A over a path of
/// `delay_ms` that A measured losing `loss` (or, with `None`, whose loss
/// is not known yet), those `lost` lost on the way; return the pair once
/// all is delivered.
fn lose_on_a_path(
    delay_ms: u64,
    loss: Option<f64>,
    per_ms: usize,
    lost: fn(&Trailer) -> bool,
) -> Pair {
    let mut pair = Pair::new(&[delay_ms]);
    pair.carry_data = true;
    pair.run(0, 1000);
    if let Some(loss) = loss {
        pair.a
            .paths
            .path_mut(PathId(0))
            .delivery
            .set_loss_over(loss, 5000);
    }
    pair.lose = lost;
    for ms in 1000..1100 {
        for _ in 0..per_ms {
            pair.send(pair.at(ms), 1000);
        }
        pair.run(ms, ms + 1);
    }
    pair.run(1100, 1300);
    let sent = 100 * per_ms;
    assert_eq!(pair.delivered.len(), sent, "{:?}", pair.b.reorder_stats());
    pair
}

/// Return the state of path 1 of two `delay_ms` away, a fifth of path
/// 0's rate, once its loss over every span, the queue's drops left out,
/// reads `random_loss` over 3000 packets, its loss judged over spans with
/// no queue still unknown, and path 0 is known clean.
fn state_at_random_loss(delay_ms: u64, random_loss: f64) -> PathState {
    let mut pair = Pair::new(&[delay_ms, delay_ms]);
    pair.run(0, 1000);
    let paths = &mut pair.a.paths;
    let clean = &mut paths.path_mut(PathId(0)).delivery;
    clean.set_loss_over(0.0, 5000);
    clean.set_train_rate(Some(30e6));
    let lossy = &mut paths.path_mut(PathId(1)).delivery;
    lossy.set_train_rate(Some(6e6));
    lossy.set_random_loss_over(random_loss, 3000);
    pair.run(1000, 1300);
    pair.a.state(PathId(1))
}

#[test]
fn a_path_surely_beyond_repair_is_set_aside_before_spans_without_a_queue_judge_it() {
    // Simulated sweep seed 4987 #27: a 53 Mbit/s path losing 1%, its
    // repairs 80 ms too late, beside a clean 250 Mbit/s one. A flow in
    // slow start sent into its queue in nearly every span, and the path's
    // loss stood on 179 packets while 3100 crossed it: each loss a window
    // cut for the flow until it was set aside at 3.9 s.
    assert_eq!(state_at_random_loss(50, 0.01), PathState::SetAside);
    // A few per thousand, read low where a queue stands, waits to be judged...
    assert_eq!(state_at_random_loss(50, 0.003), PathState::Up);
    // ...and a path whose repairs come in time is kept.
    assert_eq!(state_at_random_loss(2, 0.01), PathState::Up);
}

#[test]
fn a_packet_lost_on_a_lossy_path_is_rebuilt_from_its_run_s_parity() {
    // 1% lost: a parity after every 9 packets, or 10 ms. The one lost is
    // rebuilt as its run's parity comes, not a 60 ms round trip later, and
    // what came behind it waits no longer.
    let pair = lose_one_on_a_measured_path(30, 0.01);
    let (a, b) = (pair.a.path_stats(PathId(0)), pair.b.path_stats(PathId(0)));
    assert_eq!(b.rebuilt, 1);
    assert_eq!(b.refused, RefusedStats::default());
    // At a packet a millisecond a run of 9 is complete before 10 ms: two
    // halves per 9 of the 101 packets (the repair among them), no more.
    assert!(
        a.tx_parity > 0 && a.tx_parity <= 2 * 101_u64.div_ceil(9),
        "{a:?}"
    );
    assert_eq!(a.tx_parity, b.rx_parity);
    let wait = pair.b.waits().quantile(1.0).expect("something waited");
    assert!(wait <= 20 * MS, "waited {wait:?}");
}

#[test]
fn losses_ten_packets_apart_on_a_lossy_path_are_each_rebuilt_from_its_run_s_parity() {
    // 1% lost: runs of 9, so no two of nine losses ten packets apart share
    // one, and each is rebuilt as its run's parity comes. Sized for a fifth
    // of a loss, runs of 19 would hold two of them, one left to a repair a
    // 60 ms round trip away while everything behind it waits. (First
    // sends only: the 40 ms of them are sent before any resend takes the
    // path's next number.)
    let pair = lose_on_a_path(30, Some(0.01), 2, |t| {
        t.seq == t.path_seq && (30..=110).contains(&t.seq.0) && t.seq.0 % 10 == 0
    });
    assert_eq!(pair.b.path_stats(PathId(0)).rebuilt, 9);
    let wait = pair.b.waits().quantile(1.0).expect("something waited");
    assert!(wait <= 20 * MS, "waited {wait:?}");
}

#[test]
fn a_clean_path_carries_no_parity_and_its_losses_are_repaired() {
    let pair = lose_one_on_a_measured_path(30, 0.0);
    let (a, b) = (pair.a.path_stats(PathId(0)), pair.b.path_stats(PathId(0)));
    assert_eq!((a.tx_parity, b.rebuilt), (0, 0));
    assert_eq!(pair.b.reorder_stats().repairs_requested, 1);
}

#[test]
fn a_loss_before_the_path_s_loss_is_known_is_rebuilt_from_its_run_s_parity() {
    // A flow's first flights cross a path before its loss is known. 30 ms
    // away, a repair comes a 60 ms round trip after the loss shows, long
    // after RACK's reordering window; the run's parity, 10 ms at most.
    let pair = lose_one_on_a_path(30, None);
    let (a, b) = (pair.a.path_stats(PathId(0)), pair.b.path_stats(PathId(0)));
    assert_eq!(b.rebuilt, 1, "{:?}", pair.b.reorder_stats());
    assert!(a.tx_parity > 0, "{a:?}");
    let wait = pair.b.waits().quantile(1.0).expect("something waited");
    assert!(wait <= 20 * MS, "waited {wait:?}");
    // 1 ms away a repair would come within the window by the delays alone,
    // but in slow start the queues it meets make it late (lab sweep seed
    // 6547 #4: 221 Mbit/s losing 2.9% 1.5 ms beyond a clean 287, each
    // early loss a spurious retransmission, and a window cut at a few
    // hundred packets). Parity there too, in the path's first flights.
    let pair = lose_one_on_a_path(1, None);
    let a = pair.a.path_stats(PathId(0));
    assert!(a.tx_parity > 0, "{a:?}");
    let stats = pair.b.reorder_stats();
    assert_eq!(stats.skipped_loss + stats.skipped_timeout, 0, "{stats:?}");
}

#[test]
fn a_near_path_of_unknown_loss_carries_parity_only_in_its_first_flights() {
    // A packet every 2 ms: by 2.5 s its loss, judged over 1000 packets
    // once it settles, is still not known.
    let mut pair = Pair::new(&[1]);
    pair.carry_data = true;
    pair.run(0, 1000);
    let parity_at = |pair: &Pair| pair.a.path_stats(PathId(0)).tx_parity;
    let mut first_second = 0;
    for ms in (1000..2500).step_by(2) {
        pair.send(pair.at(ms), 1000);
        pair.run(ms, ms + 2);
        if ms == 1998 {
            first_second = parity_at(&pair);
        }
    }
    assert!(first_second > 0, "no parity in the path's first second");
    // Its repairs come in time: past its first flights, none.
    let after = parity_at(&pair) - first_second;
    assert!(after <= 1, "{after} parity halves after the first second");
    // A pause starts another flow's first flights.
    pair.run(2500, 3000);
    for ms in 3000..3100 {
        pair.send(pair.at(ms), 1000);
        pair.run(ms, ms + 1);
    }
    assert!(
        parity_at(&pair) > first_second + after,
        "none after a pause"
    );
}

#[test]
fn a_small_near_path_of_unknown_loss_carries_no_parity_in_its_first_flights() {
    // A sixth of the capacity: what a loss there costs the flow is not
    // worth a sixteenth of every path's first second.
    let mut pair = Pair::new(&[1, 1]);
    pair.run(0, 1000);
    let now = pair.at(1000);
    for (i, rate) in [(0, 30e6), (1, 6e6)] {
        let path = pair.a.paths.path_mut(PathId(i));
        path.delivery.set_train_rate(Some(rate));
        path.busy_since = Some(now);
        path.last_data_sent = Some(now);
    }
    let paths = &pair.a.paths;
    assert_eq!(
        paths.parity_run(now, PathId(0)),
        Some(crate::parity::UNKNOWN_LOSS_RUN)
    );
    assert_eq!(paths.parity_run(now, PathId(1)), None);
}

#[test]
fn a_path_whose_loss_is_known_only_over_every_span_carries_the_parity_it_calls_for() {
    // A flow in slow start queues every path it uses, and its spans there
    // are not judged: the loss over every span, less the queue's drops, is
    // what is known of the path. That is the loss the path is judged by
    // (set aside or kept), taking the parity it calls for to rebuild most
    // of it, so the path has to carry that parity.
    let mut pair = Pair::new(&[1, 1]);
    pair.run(0, 1000);
    let now = pair.at(1000);
    for (i, random) in [(0, 0.018), (1, 0.0005)] {
        let path = pair.a.paths.path_mut(PathId(i));
        path.delivery.set_random_loss_over(random, 1500);
        path.delivery.set_loss_over(0.0, 0);
    }
    let paths = &pair.a.paths;
    assert_eq!(
        paths.parity_run(now, PathId(0)),
        crate::parity::run_for_loss(0.018, crate::paths::LOSS_CLEAN)
    );
    assert!(paths.parity_run(now, PathId(0)).is_some());
    assert_eq!(paths.parity_run(now, PathId(1)), None);
}

#[test]
fn a_flight_s_last_packet_lost_is_repaired_in_time_once_its_path_s_probe_names_it() {
    // A TCP flow's first flights come a round trip apart. The loss of a
    // flight's last packet on a path would show only when the next
    // flight's first packet there arrives, while the packets behind it on
    // the far path wait for it, and their flow's round trip grows.
    let stats = lose_a_flight_s_last_packet(true);
    assert_eq!(
        (
            stats.repaired,
            stats.repaired_late,
            stats.skipped_loss,
            stats.skipped_timeout
        ),
        (1, 0, 0, 0),
        "{stats:?}"
    );
}

#[test]
fn a_flight_s_last_packet_lost_is_handed_out_late_once_the_next_flight_shows_it() {
    // Where no probe names it, the loss shows after a pause: released as
    // lost then, it would cost the flow a retransmission timeout and its
    // slow start.
    let stats = lose_a_flight_s_last_packet(false);
    assert_eq!(
        (stats.repaired_late, stats.skipped_loss),
        (1, 1),
        "{stats:?}"
    );
}

#[test]
fn a_fresh_path_comes_up_once_without_flapping() {
    let mut pair = Pair::new(&[1, 1]);
    let mut events = Vec::new();
    for ms in 0..1000 {
        pair.run(ms, ms + 1);
        while let Some(e) = pair.a.poll_event() {
            events.push((ms, e.path.0, e.change));
        }
    }
    assert_eq!(
        events,
        vec![
            (events[0].0, 0, PathChange::Up),
            (events[1].0, 1, PathChange::Up)
        ],
        "{events:?}"
    );
}

#[test]
fn probe_clocks_drifting_apart_do_not_flap_a_path() {
    // The peer's probes run 1% slow: now and then two of ours arrive between
    // two of its probes, and an echo is 200 ms old. That is no failure.
    let t0 = crate::tests::t0();
    let mut a = Endpoint::new(t0, EndpointConfig::new(EPOCH_A, 1));
    let mut b = Endpoint::new(t0, EndpointConfig::new(EPOCH_B, 1));
    a.set_session(t0, PathId(0), true);
    b.set_session(t0, PathId(0), true);
    let mut wire: Vec<(u64, bool, PacketBuf)> = Vec::new();
    let mut out = Vec::new();
    for us in (0..20_000_000u64).step_by(100) {
        let now_a = t0 + Duration::from_micros(us);
        let now_b = t0 + Duration::from_micros(us * 100 / 101);
        a.handle_timeout(now_a);
        while a.poll_transmit(&mut out).is_some() {
            wire.extend(out.drain(..).map(|p| (us + 5_000, true, p)));
        }
        b.handle_timeout(now_b);
        while b.poll_transmit(&mut out).is_some() {
            wire.extend(out.drain(..).map(|p| (us + 5_000, false, p)));
        }
        let (due, later): (Vec<_>, Vec<_>) = wire.drain(..).partition(|w| w.0 <= us);
        wire = later;
        for (_, to_b, probe) in due {
            if to_b {
                b.handle_datagrams(now_b, PathId(0), &mut vec![probe]);
            } else {
                a.handle_datagrams(now_a, PathId(0), &mut vec![probe]);
            }
        }
    }
    let mut events = Vec::new();
    while let Some(e) = a.poll_event() {
        events.push(e.change);
    }
    assert_eq!(events, vec![PathChange::Up], "flapped: {events:?}");
}

#[test]
fn an_idle_path_that_becomes_busy_is_not_taken_for_dead() {
    // One of A's probes is lost on an idle path: its last echo grows up to
    // two idle probe intervals old, which is no failure. Data starts then;
    // from then on the path is probed faster, and is judged by that only
    // once a probe sent faster had time to be echoed.
    for start_ms in (100..=200).step_by(10) {
        let mut pair = Pair::new(&[5]);
        pair.carry_data = true;
        pair.run(0, 2000);
        pair.lose_probes_to_b = true;
        pair.run(2000, 2100);
        pair.lose_probes_to_b = false;
        let start = pair.at(2000 + start_ms);
        let down = pair.first_down(Side::A, PathId(0), 2100..3000, |pair, now| {
            if now >= start {
                pair.send(now, 100);
            }
        });
        assert_eq!(down, None, "data from {start_ms} ms after the loss");
    }
}

#[test]
fn the_queue_model_follows_echoes_down_as_well_as_up() {
    // One path, its rate unmeasured (100 Mbit/s assumed), fed at that rate
    // after a 40 ms burst: only the echoes can tell how much of the burst
    // is really still queued. Its loss known clean, no parity rides along.
    let mut pair = Pair::new(&[5]);
    pair.run(0, 999);
    pair.a
        .paths
        .path_mut(PathId(0))
        .delivery
        .set_loss_over(0.0, 5000);
    pair.run(999, 1000);
    let t = pair.at(1000);
    for _ in 0..400 {
        pair.send(t, 1250);
    }
    let model_ms = |pair: &Pair| pair.estimate(0).model_queue_ms;
    assert!((model_ms(&pair) - 40.0).abs() < 1.0, "{}", model_ms(&pair));
    let feed = |pair: &mut Pair, from_ms: u64, until_ms: u64| {
        for ms in from_ms..until_ms {
            for _ in 0..10 {
                pair.send(pair.at(ms), 1250);
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
        let data = plaintext(&ip_packet(200), &data_trailer(k as u32, k as u32, EPOCH_A));
        pair.b
            .handle_datagrams(pair.at(ms), PathId(1), &mut vec![data]);
        pair.run(ms, ms + 50);
    }
    let now = pair.at(1500);
    let on_path_1 = (0..200)
        .filter(|_| pair.send(now, 1250).unwrap().0 == PathId(1))
        .count();
    assert!(on_path_1 >= 60, "{on_path_1} of 200 on path 1");
}

#[test]
fn a_slow_path_is_measured_within_tens_of_milliseconds_of_queueing() {
    // Path 1 carries 10 Mbit/s through a standing queue. A flow in slow
    // start doubles every round trip: had the scheduler to wait the full
    // span of a rate sample (80 ms) it would go on crediting the path with
    // the initial guess (100 Mbit/s) and overrun its queue first.
    let mut pair = Pair::new(&[5, 5]);
    // Long enough idle for the path's jitter to be measured (none), so
    // that the queue is not taken for jitter.
    pair.run(0, 1500);
    // 3 ms of queue, standing before the data (A's own probes, 10 a second
    // while A sends nothing, take a few hundred ms to show it).
    pair.delays[1] = Some(8 * MS);
    pair.run(1500, 1900);
    for (k, ms) in (1900..1960u64).enumerate() {
        let data = plaintext(&ip_packet(1210), &data_trailer(k as u32, k as u32, EPOCH_A));
        pair.b
            .handle_datagrams(pair.at(ms), PathId(1), &mut vec![data]);
        pair.run(ms, ms + 1);
    }
    let rate = pair.estimate(1).rate_mbps;
    assert!(
        rate.is_some_and(|r| (7.0..14.0).contains(&r)),
        "rate {rate:?} Mbit/s"
    );
}

#[test]
fn packets_sent_into_a_standing_queue_say_so() {
    // The receiver leaves a loss just before such a packet to the inner
    // flow; before the queue shows, and once it is gone, losses are repaired.
    let mut pair = Pair::new(&[5]);
    pair.run(0, 1000);
    let congested = |pair: &mut Pair, ms: u64| pair.send(pair.at(ms), 1250).unwrap().1.congested;
    assert!(!congested(&mut pair, 1000));
    pair.delays[0] = Some(20 * MS); // 15 ms of queue
    pair.run(1000, 1200);
    assert!(congested(&mut pair, 1200));
    pair.delays[0] = Some(7 * MS);
    pair.run(1200, 1400);
    assert!(!congested(&mut pair, 1400));
}

#[test]
fn a_standing_queue_says_congested_only_when_no_other_path_has_room() {
    // A loss at one path's queue while another path has room is repaired
    // (on that one): left to the inner flow, it would make the flow back
    // off before it ever reaches the path with room.
    let mut pair = Pair::new(&[5, 40]);
    pair.run(0, 1000);
    let send = |pair: &mut Pair, ms: u64| pair.send(pair.at(ms), 1250).unwrap();
    // Each step runs long enough for an idle probe (every 100 ms) to cross
    // and its echo to come back on the peer's next, whatever their phase.
    pair.delays[0] = Some(20 * MS); // 15 ms of queue: still sooner than path 1
    pair.run(1000, 1300);
    let (path, trailer) = send(&mut pair, 1300);
    assert_eq!(path, PathId(0));
    assert!(!trailer.congested, "path 1 has room");
    pair.delays[1] = Some(60 * MS); // 20 ms of queue on path 1 too
    pair.run(1300, 1700);
    let (path, trailer) = send(&mut pair, 1700);
    assert_eq!(path, PathId(0));
    assert!(trailer.congested, "every path is queued");
}

#[test]
fn traffic_leaves_a_silent_busy_path_long_before_it_is_down() {
    // Both sides send on both paths (data one way, its ACKs the other), so
    // both probe every 10 ms. A light flow may sit entirely on one path;
    // when that path dies, waiting the full down time (over 100 ms) would
    // stall the flow into a retransmission timeout.
    let mut pair = Pair::new(&[5, 5]);
    pair.run_busy(0, 1000);
    assert_eq!(pair.a.usable(), PathSet(0b11));
    pair.delays[0] = None;
    let mut left_at = None;
    for ms in 1000..1300 {
        pair.run_busy(ms, ms + 1);
        if left_at.is_none() && pair.a.usable() == PathSet(0b10) {
            left_at = Some(ms - 1000);
            assert_eq!(pair.a.state(PathId(0)), PathState::Up, "not down yet");
            assert!(pair.estimate(0).echo_late);
            assert_eq!(pair.a.paths.nack_paths(), PathSet(0b10));
        }
    }
    assert_eq!(pair.a.state(PathId(0)), PathState::Down);
    assert!(!pair.estimate(0).echo_late, "down, not late");
    let left_after = left_at.expect("path 0 kept in use");
    assert!(left_after <= 60, "left after {left_after} ms");
    assert_eq!(pair.estimate(0).late_echoes, 1);
    // Back at the first echo once the path works again.
    pair.delays[0] = Some(5 * MS);
    pair.run_busy(1300, 1500);
    assert_eq!(pair.a.usable(), PathSet(0b11));
    assert_eq!(pair.estimate(0).late_echoes, 1, "no flapping");
}

#[test]
fn when_every_path_is_late_data_and_nacks_still_go_out() {
    // Both paths stall at once (say, the uplink they share): none is down
    // yet, and one that is late beats none at all.
    let mut pair = Pair::new(&[5, 5]);
    pair.run_busy(0, 1000);
    pair.delays = vec![None, None];
    pair.run(1000, 1080);
    assert!(pair.estimate(0).echo_late && pair.estimate(1).echo_late);
    assert_eq!(pair.a.state(PathId(0)), PathState::Up);
    assert_eq!(pair.a.usable(), PathSet(0b11));
    assert_eq!(pair.a.paths.nack_paths(), PathSet(0b11));
    assert!(pair.send(pair.at(1080), 1250).is_some());
}

#[test]
fn a_path_that_only_brings_data_is_probed_fast() {
    // B sends nothing on the path, but its probes carry the echoes and
    // receive counts A's scheduler corrects its queue model by: at the idle
    // rate, A's model of the path would drift for 100 ms at a time.
    let mut pair = Pair::new(&[5]);
    pair.run(0, 1000);
    let probes = |pair: &Pair| pair.b.path_stats(PathId(0)).tx_probes;
    let before = probes(&pair);
    for ms in 1000..1500u64 {
        let k = ms as u32 - 1000;
        let data = plaintext(&ip_packet(1250), &data_trailer(k, k, EPOCH_A));
        pair.b
            .handle_datagrams(pair.at(ms), PathId(0), &mut vec![data]);
        pair.run(ms, ms + 1);
    }
    let busy = probes(&pair) - before;
    assert!((45..=55).contains(&busy), "{busy} probes in 500 ms");
    pair.run(1500, 2500);
    // Fast for the first 100 ms, then ten a second.
    let idle = probes(&pair) - before - busy;
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
        assert_eq!(pair.a.usable(), PathSet(0b01), "at {ms} ms");
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
    pair.carry_data = true;
    pair.lose = |t| t.congested && t.path_seq.0 % 10 == 0;
    for ms in 1000..3000u64 {
        let queued = (ms / 100) % 2 == 0;
        pair.delays[0] = Some(if queued { 20 * MS } else { 5 * MS });
        for _ in 0..10 {
            pair.send(pair.at(ms), 1250).unwrap();
        }
        pair.run(ms, ms + 1);
    }
    let flagged = pair.sent.iter().any(|(_, t)| t.congested);
    assert!(flagged, "no packet met the queue");
    let loss = pair.estimate(0).loss;
    assert!(loss < LOSS_CLEAN, "loss {loss}");
}

#[test]
fn a_restarted_peer_is_followed_once_its_old_run_goes_quiet() {
    let t0 = crate::tests::t0();
    let mut config = EndpointConfig::new(EPOCH_B, 2);
    config.epoch_quiet = 100 * MS;
    let mut b = Endpoint::new(t0, config);
    let feed = |b: &mut Endpoint, ms: u64, path: u8, seq: u32, epoch: u32| {
        let data = plaintext(
            &ip_packet(40 + seq as usize % 100),
            &data_trailer(seq, seq, epoch),
        );
        b.handle_datagrams(
            t0 + Duration::from_millis(ms),
            PathId(path),
            &mut vec![data],
        );
        let mut out = Vec::new();
        b.poll_deliver(&mut out);
        out.iter().map(PacketBuf::len).collect::<Vec<_>>()
    };
    let len = |seq: usize| 40 + seq % 100;
    for seq in 5000..5003 {
        assert_eq!(feed(&mut b, 0, 0, seq, 7), vec![len(seq as usize)]);
    }
    // 5003 was on path 1 and lost in the crash.
    assert_eq!(feed(&mut b, 1, 0, 5004, 7), Vec::<usize>::new());
    // The restarted peer counts from zero under a new epoch. Too soon after
    // the old one was heard: could be a straggler, refused.
    assert!(feed(&mut b, 50, 0, 0, 8).is_empty());
    assert_eq!(b.path_stats(PathId(0)).refused.foreign_epoch, 1);
    // Once the old one has been quiet long enough, the new one is followed,
    // and what the old one left behind is delivered first. The new run's
    // first packet, 0, was refused: it is given up once both paths have
    // delivered past it.
    assert_eq!(feed(&mut b, 101, 0, 1, 8), vec![len(5004)]);
    assert_eq!(feed(&mut b, 102, 1, 2, 8), vec![len(1), len(2)]);
    assert_eq!(b.peer_epoch(), Some(8));
    assert_eq!(b.stats().epoch_changes, 1);
    assert_eq!(b.reorder_stats().skipped_restart, 1);
    // A straggler from the dead run is now the foreign one.
    assert!(feed(&mut b, 103, 1, 5005, 7).is_empty());
    assert_eq!(b.path_stats(PathId(1)).refused.foreign_epoch, 1);
    // Epochs only move forward: the dead run's packet, replayed once the
    // new one is quiet, does not bring it back; a later run is taken.
    assert!(feed(&mut b, 400, 1, 5006, 7).is_empty());
    assert_eq!(b.peer_epoch(), Some(8));
    assert_eq!(feed(&mut b, 600, 0, 0, 9), vec![len(0)]);
    assert_eq!(b.peer_epoch(), Some(9));
    // An earlier run (a peer whose clock went back) only after three
    // minutes of quiet, when nothing sealed for the old one still opens.
    assert!(feed(&mut b, 800, 0, 0, 8).is_empty());
    assert_eq!(b.peer_epoch(), Some(9));
    feed(&mut b, 181_000, 0, 0, 8);
    assert_eq!(b.peer_epoch(), Some(8));
}

#[test]
fn what_is_not_for_the_tunnel_is_refused_and_counted() {
    let t0 = crate::tests::t0();
    let mut a = Endpoint::new(t0, EndpointConfig::new(EPOCH_A, 1));
    // Not IP, and no path yet.
    a.handle_tun(
        t0,
        &mut vec![PacketBuf::copy_of(&[0x15; 60]), ip_packet(100)],
    );
    assert_eq!(
        (a.stats().dropped_not_ip, a.stats().dropped_no_path),
        (1, 1)
    );

    let refused = |a: &mut Endpoint, plaintext: PacketBuf| {
        let before = a.path_stats(PathId(0)).refused;
        a.handle_datagrams(t0, PathId(0), &mut vec![plaintext]);
        let after = a.path_stats(PathId(0)).refused;
        [
            after.bad_trailer - before.bad_trailer,
            after.length_mismatch - before.length_mismatch,
            after.bad_probe - before.bad_probe,
            after.bad_nack - before.bad_nack,
        ]
    };
    // A plain WireGuard peer: an IP packet, no trailer.
    assert_eq!(refused(&mut a, ip_packet(100)), [1, 0, 0, 0]);
    // Bytes between the IP packet and the trailer.
    let mut padded = ip_packet(100);
    padded.extend_from_slice(&[0; 3]);
    assert_eq!(
        refused(&mut a, plaintext(&padded, &data_trailer(0, 0, EPOCH_B))),
        [0, 1, 0, 0]
    );
    // Probe, train and NACK kinds whose bodies are not.
    let probe = Trailer::control(Kind::Probe, EPOCH_B, PathSet(1));
    assert_eq!(
        refused(&mut a, plaintext(&ip_packet(84), &probe)),
        [0, 0, 1, 0]
    );
    let train = Trailer::control(Kind::Train, EPOCH_B, PathSet(1));
    assert_eq!(
        refused(&mut a, plaintext(&ip_packet(1100), &train)),
        [0, 0, 1, 0]
    );
    let nack = Trailer::control(Kind::Nack, EPOCH_B, PathSet(1));
    assert_eq!(
        refused(&mut a, plaintext(&ip_packet(28), &nack)),
        [0, 0, 0, 1]
    );
    // Nothing of it reached the TUN device or went out.
    let mut out = Vec::new();
    a.poll_deliver(&mut out);
    assert!(out.is_empty());
    assert_eq!(a.poll_transmit(&mut out), None);
}

#[test]
fn a_path_added_live_carries_data_once_its_session_is_up() {
    let mut pair = Pair::new(&[5, 5]);
    pair.carry_data = true;
    pair.run_busy(0, 500);
    // Both sides add a third path (a reload of both configs).
    assert!(pair.a.open_path(PathId(2)));
    assert!(pair.b.open_path(PathId(2)));
    assert!(
        !pair.a.open_path(PathId(4)),
        "paths are added one past the last"
    );
    pair.delays.push(Some(5 * MS));
    pair.cut_to_b.push(false);
    pair.run_busy(500, 700);
    assert_eq!(pair.a.path_count(), 3);
    assert!(
        pair.sent[pair.sent.len() - 500..]
            .iter()
            .all(|(p, _)| *p != PathId(2)),
        "no data before the session is up"
    );
    let now = pair.at(700);
    pair.a.set_session(now, PathId(2), true);
    pair.b.set_session(now, PathId(2), true);
    let before = pair.sent.len();
    pair.run_busy(700, 1500);
    let on_new = pair.sent[before..]
        .iter()
        .filter(|(p, _)| *p == PathId(2))
        .count();
    let share = on_new as f64 / (pair.sent.len() - before) as f64;
    assert!(
        share > 0.2,
        "the new path carried {share:.2} of the packets"
    );
    // Delivered in order, nothing lost to the change.
    let skipped = pair.b.reorder_stats().skipped_timeout + pair.b.reorder_stats().skipped_loss;
    assert_eq!(skipped, 0, "{:?}", pair.b.reorder_stats());
}

#[test]
fn a_repair_is_waited_for_past_the_due_time_a_quarter_of_the_held_round_trip() {
    // Paths 5 and 60 ms one way: a held flow's round trip is the least
    // (10 ms) and the spread (55 ms); a quarter of it is 16 ms. Paths 5
    // and 30 ms: 8 ms.
    let past_due = |delays: &[u64]| {
        let mut pair = Pair::new(delays);
        pair.run(0, 2000);
        let now = pair.at(2000);
        let spread = pair.b.paths.equalize_wait(now, pair.b.max_equalize);
        repair_past_due(pair.b.paths.least_round_trip(), spread).as_millis()
    };
    assert!(
        (15..=17).contains(&past_due(&[5, 60])),
        "{}",
        past_due(&[5, 60])
    );
    assert!(
        (8..=9).contains(&past_due(&[5, 30])),
        "{}",
        past_due(&[5, 30])
    );
}

#[test]
fn tcp_segments_that_came_the_near_way_are_held_to_the_far_one_and_counted() {
    let mut pair = Pair::new(&[5, 30]);
    pair.run(0, 2000);
    let wait = pair
        .b
        .equalize_wait()
        .expect("the paths' delays are measured");
    assert!(
        (24..=26).contains(&wait.as_millis()),
        "holds TCP for {wait:?}"
    );
    pair.carry_data = true;
    let mut near = 0;
    for ms in 2000..2040 {
        let (path, _) = pair
            .send_packet(pair.at(ms), tcp_segment(1000))
            .expect("sent");
        near += usize::from(path == PathId(0));
        pair.send(pair.at(ms), 1000).expect("sent");
        pair.run(ms, ms + 1);
    }
    assert!(near > 0, "no segment took the near path");
    // The segments that came the near way are held until they have been
    // under way 30 ms; the others, and the packets that are not TCP, are
    // not.
    pair.run(2040, 2200);
    assert_eq!(pair.delivered.len(), 80);
    assert_eq!(pair.b.stats().equalized, near as u64);
    assert_eq!(pair.b.equalizing(), 0);
}

#[test]
fn tcp_segments_in_a_low_latency_class_go_the_nearest_way_unheld() {
    // An interactive flow (ssh marks its sessions AF21 or EF) keeps the
    // near path's 5 ms; a bulk one is held to the far path's 30.
    let mut pair = Pair::new(&[5, 30]);
    pair.run(0, 2000);
    pair.carry_data = true;
    for (k, tos) in [0xb8, 0x48, 0xb8, 0x48].into_iter().enumerate() {
        let ms = 2000 + 10 * k as u64;
        let (path, trailer) = pair
            .send_packet(pair.at(ms), tcp_segment_marked(200, tos))
            .expect("sent");
        assert_eq!(path, PathId(0), "tos {tos:#x}");
        assert!(!trailer.held, "tos {tos:#x}");
        pair.run(ms, ms + 7);
        assert_eq!(
            pair.delivered.len(),
            k + 1,
            "tos {tos:#x} not there by 6 ms"
        );
    }
    assert_eq!(pair.a.stats().low_latency_segments, 4);
    assert_eq!(pair.b.stats().equalized, 0);
    // Unmarked, and CS1 (scp's): held.
    for (k, tos) in [0x00, 0x20].into_iter().enumerate() {
        let ms = 2100 + 50 * k as u64;
        let (_, trailer) = pair
            .send_packet(pair.at(ms), tcp_segment_marked(200, tos))
            .expect("sent");
        assert!(trailer.held, "tos {tos:#x}");
        pair.run(ms, ms + 7);
        assert_eq!(pair.delivered.len(), 4 + k, "tos {tos:#x} not held");
        pair.run(ms + 7, ms + 40);
        assert_eq!(pair.delivered.len(), 5 + k, "tos {tos:#x} held too long");
    }
    assert_eq!(pair.b.stats().equalized, 2);
    assert_eq!(pair.a.stats().low_latency_segments, 4);
}

/// A bare TCP ACK: a 20-byte TCP header and no data.
fn tcp_ack() -> PacketBuf {
    let mut bytes = tcp_segment(41).packet()[..40].to_vec();
    bytes[2..4].copy_from_slice(&40u16.to_be_bytes());
    bytes[33] = 0x10;
    PacketBuf::copy_of(&bytes)
}

/// Send `packet()` from A every ms for 100 ms, the 50th lost on the way,
/// its repairs too; return B's stats.
fn lose_one_of_a_stream(packet: fn() -> PacketBuf) -> ReorderStats {
    let mut pair = Pair::new(&[5, 30]);
    pair.carry_data = true;
    pair.run(0, 1000);
    // Both known clean: no parity rebuilds the loss.
    for i in 0..2 {
        let path = pair.a.paths.path_mut(PathId(i));
        path.delivery.set_loss_over(0.0, 5000);
    }
    pair.lose = |t| t.seq == Seq(50);
    for ms in 1000..1100 {
        pair.send_packet(pair.at(ms), packet()).expect("sent");
        pair.run(ms, ms + 1);
    }
    pair.run(1100, 1300);
    pair.b.reorder_stats()
}

#[test]
fn a_bare_ack_is_delivered_at_once_behind_a_lost_one() {
    // An ACK lost on the way says nothing the next one does not: waiting
    // for its repair would delay the next by a round trip, and the flow's
    // round trip with it, which CUBIC's HyStart reads as a full pipe.
    let stats = lose_one_of_a_stream(tcp_ack);
    assert_eq!((stats.buffered, stats.passed), (0, 49), "{stats:?}");
    // Segments with data (here unheld, in a low-latency class) still wait
    // for what was lost before them.
    let stats = lose_one_of_a_stream(|| tcp_segment_marked(200, 0xb8));
    assert!(stats.buffered > 0, "{stats:?}");
    assert_eq!(stats.passed, 0, "{stats:?}");
}

#[test]
fn tcp_keeps_off_a_path_too_small_to_be_worth_it() {
    // The near path's trains arrived at 4 Mbit/s, under a tenth of the
    // far one's 100. A segment lost on it would stall the flow for a
    // repair, and the little it adds is not worth that: TCP's segments
    // take the far path, idle or not. Pings, a low-latency class and bare
    // ACKs (which pass the gaps before them) still go the nearest way.
    let mut pair = Pair::new(&[5, 30]);
    pair.run(0, 2000);
    pair.a.paths.as_mut_slice()[0]
        .delivery
        .set_train_rate(Some(0.5e6));
    let now = pair.at(2000);
    for packet in [tcp_segment(1200), tcp_segment(1200)] {
        let (path, _) = pair.send_packet(now, packet).expect("sent");
        assert_eq!(path, PathId(1));
    }
    let (path, _) = pair.send(now, 100).expect("sent");
    assert_eq!(path, PathId(0), "a ping");
    let (path, _) = pair
        .send_packet(now, tcp_segment_marked(200, 0xb8))
        .expect("sent");
    assert_eq!(path, PathId(0), "an EF segment");
    let (path, _) = pair.send_packet(now, tcp_ack()).expect("sent");
    assert_eq!(path, PathId(0), "an ACK");
    // A path a tenth of the other's or more takes its share.
    pair.a.paths.as_mut_slice()[0]
        .delivery
        .set_train_rate(Some(1.25e6));
    let usable = pair.a.paths.usable();
    assert!(pair.a.paths.tcp_paths(now, usable).contains(PathId(0)));
}

#[test]
fn acks_that_outgrow_the_nearest_path_spill_over_at_a_short_queue() {
    // A bulk flow's ACKs, one every 50 µs, on a near path that drains one
    // in 80: queued there until it is as late as the far path, 25 ms,
    // every round trip the flow times would grow by that. Spilled at a
    // 1 ms queue instead, the near path still carries what it drains,
    // about 50 µs of every 80, and the least round trip holds.
    let mut pair = Pair::new(&[5, 30]);
    pair.run(0, 2000);
    pair.a.paths.as_mut_slice()[0]
        .delivery
        .set_train_rate(Some(0.5e6));
    let mut near = 0;
    for k in 0..200 {
        let now = pair.at(2000) + Duration::from_micros(50 * k);
        let (path, _) = pair.send_packet(now, tcp_ack()).expect("sent");
        near += usize::from(path == PathId(0));
        let queue = pair.a.paths.as_mut_slice()[0].model_queue_us(now);
        assert!(queue < 2000.0, "{queue} µs queued on the near path");
    }
    assert!(
        (100..=160).contains(&near),
        "{near} of 200 on the near path"
    );
}

#[test]
fn one_ack_in_four_takes_a_path_about_as_near_as_the_nearest() {
    // ACKs a ms apart, never queued: the nearest path takes three in four,
    // and the fourth goes 1 ms further, where it keeps the flow's window
    // moving if the nearest dies. A path 25 ms further would raise the
    // round trip of a flow whose ACKs come sparsely: it takes none.
    let count = |delays: &[u64]| {
        let mut pair = Pair::new(delays);
        pair.run(0, 2000);
        let mut on = [0; 2];
        for ms in 2000..2100 {
            let (path, _) = pair.send_packet(pair.at(ms), tcp_ack()).expect("sent");
            on[path.index()] += 1;
        }
        on
    };
    assert_eq!(count(&[5, 6]), [75, 25]);
    assert_eq!(count(&[5, 30]), [100, 0]);
}

/// Feed `delivery` five of the peer's reports 100 ms apart from `now`,
/// each `packets` and `bytes` more received, the echoes having met
/// `queued_us` of queue (no jitter measured).
fn report_delivered(
    delivery: &mut Delivery,
    now: Instant,
    packets: u32,
    bytes: u64,
    queued_us: f64,
) {
    let settled = LossContext {
        congested: false,
        settled: true,
    };
    for i in 0..5u32 {
        let probe = Probe {
            sent_us: 10_000_000 + u64::from(i) * 100_000,
            rx_packets: u64::from(i) * u64::from(packets),
            rx_bytes: u64::from(i) * bytes,
            rx_highest_path_seq: Seq(i * packets),
            ..Probe::default()
        };
        let at = now + Duration::from_millis(u64::from(i) * 100);
        delivery.handle_report(at, &probe, queued_us, Some(0.0), settled);
    }
}

#[test]
fn tcp_keeps_off_a_far_small_path_that_would_raise_its_round_trip_for_little() {
    // Lab sweep seed 9311, #1: 15 Mbit/s 64 ms beyond a 171 and a 195
    // Mbit/s path, whose trains read 95 and 22 (the jitter spread them).
    // At a tenth of those it took TCP, the flow's round trip rose from 27
    // ms to 92, and the flow, slowed, never filled the near paths: 0.14 of
    // the best path.
    let mut pair = Pair::new(&[13, 13, 77]);
    pair.run(0, 2000);
    let trains = [11.9e6, 2.75e6, 1.875e6];
    for (path, rate) in pair.a.paths.as_mut_slice().iter_mut().zip(trains) {
        path.delivery.set_train_rate(Some(rate));
    }
    let far_share = |pair: &mut Pair, at: u64| {
        let mut far = 0;
        for k in 0..100 {
            let now = pair.at(at) + Duration::from_micros(50 * k);
            let (path, _) = pair.send_packet(now, tcp_segment(1200)).expect("sent");
            far += usize::from(path == PathId(2));
        }
        far
    };
    assert_eq!(far_share(&mut pair, 2000), 0);
    // Nor once a jittery near path is taken for a smaller one: its jitter
    // read as a queue while a flow sent it 50 Mbit/s, half its trains.
    let now = pair.at(2100);
    let delivery = &mut pair.a.paths.as_mut_slice()[0].delivery;
    report_delivered(delivery, now, 500, 625_000, 3_000.0);
    let capacity = delivery.capacity();
    assert!((capacity - 6.25e6).abs() < 1.0, "{capacity}");
    assert_eq!(far_share(&mut pair, 2600), 0);
    // A far path big enough for the round trip it adds takes its share.
    pair.a.paths.as_mut_slice()[2]
        .delivery
        .set_train_rate(Some(5e6));
    assert!(far_share(&mut pair, 2700) > 0);
}

#[test]
fn a_big_path_measured_behind_a_deep_queue_counts_at_that_not_at_its_trains() {
    // Lab sweep seed 3671, #16: 52 Mbit/s 9 ms beyond a 367 Mbit/s path
    // whose trains read 449-929 (bunched up on the way). Counted at
    // those, the small path stayed under a tenth of it and off TCP all
    // run, though the flow soon measured the big one at 346 behind a
    // 27-51 ms queue: 318-327 Mbit/s against 362 when it took its share.
    let mut pair = Pair::new(&[21, 30]);
    pair.run(0, 2000);
    let paths = pair.a.paths.as_mut_slice();
    paths[0].delivery.set_train_rate(Some(116e6));
    paths[1].delivery.set_train_rate(Some(7e6));
    let takes_tcp = |pair: &Pair, at: u64| {
        let paths = &pair.a.paths;
        paths.tcp_paths(pair.at(at), paths.usable())
    };
    assert!(!takes_tcp(&pair, 2000).contains(PathId(1)));
    // The flow fills the big path: 43 MB/s delivered, a 20 ms queue.
    let now = pair.at(2000);
    let delivery = &mut pair.a.paths.as_mut_slice()[0].delivery;
    report_delivered(delivery, now, 3_000, 4_300_000, 20_000.0);
    let capacity = delivery.capacity();
    assert!((capacity - 43e6).abs() < 1.0, "{capacity}");
    assert!(takes_tcp(&pair, 2500).contains(PathId(1)));
}

#[test]
fn a_far_path_joins_tcp_only_with_a_margin_over_what_keeps_it_there() {
    // A path near the share the round trip's rise asks of it, admitted
    // and dropped as the near path's queue moves the round trip, raises
    // and lowers the hold under the flow's window: joining asks 1.3 times
    // the share staying does. Here 15 ms beyond a 40 ms round trip, a
    // rise of 1.375: staying asks 0.117 of the near path, joining 0.152.
    let mut pair = Pair::new(&[20, 35]);
    pair.run(0, 2000);
    let set_trains = |pair: &mut Pair, far: f64| {
        let paths = pair.a.paths.as_mut_slice();
        paths[0].delivery.set_train_rate(Some(24e6));
        paths[1].delivery.set_train_rate(Some(far));
    };
    let far_share = |pair: &mut Pair, at: u64| {
        let mut far = 0;
        // Twice what the near path drains, so that it queues.
        for k in 0..50 {
            let now = pair.at(at) + Duration::from_micros(50 * k);
            for _ in 0..2 {
                let (path, _) = pair.send_packet(now, tcp_segment(1200)).expect("sent");
                far += usize::from(path == PathId(1));
            }
        }
        far
    };
    // Too small: kept off long enough that TCP is held to the near path.
    set_trains(&mut pair, 1e6);
    assert_eq!(far_share(&mut pair, 2000), 0);
    pair.run(2000, 4500);
    assert_eq!(far_share(&mut pair, 4500), 0);
    // 0.133 of the near path: enough to stay, not to join.
    set_trains(&mut pair, 3.2e6);
    assert_eq!(far_share(&mut pair, 4600), 0);
    // 0.167 joins, and at 0.133 again stays.
    set_trains(&mut pair, 4e6);
    assert!(far_share(&mut pair, 4700) > 0);
    set_trains(&mut pair, 3.2e6);
    assert!(far_share(&mut pair, 4800) > 0);
}

#[test]
fn a_far_path_that_would_more_than_double_the_round_trip_joins_tcp_only_from_the_start() {
    // Lab sweep seed 8761, #3, BBR: 35 Mbit/s 60.5 ms beyond a 111
    // Mbit/s path at 2 ms. Where the far path was among TCP's paths from
    // the flow's start, BBR measured its least round trip with the hold
    // in it and made 116-121 Mbit/s. Where it joined mid-flow (the near
    // path's smoothed round trip, risen from 4 to 17 ms in slow start's
    // overshoot, let it) the hold went from 5 to 63 ms under BBR's window,
    // twice its rate times the 4 ms round trip, and the flow fell to
    // 25-56. Seed 2929, #22, the same: 69 Mbit/s 67 ms beyond 191 at 3
    // ms, BBR at 20 Mbit/s. A path that would more than double the least
    // round trip with the hold in it does not join; one TCP took from
    // the start stays.
    let mut pair = Pair::new(&[2, 62]);
    pair.run(0, 2000);
    let takes_tcp = |pair: &mut Pair, at: u64, far: f64| {
        let now = pair.at(at);
        let paths = &mut pair.a.paths;
        let slice = paths.as_mut_slice();
        slice[0].delivery.set_train_rate(Some(92e6));
        slice[1].delivery.set_train_rate(Some(far));
        paths.tcp_paths(now, paths.usable()).contains(PathId(1))
    };
    assert!(takes_tcp(&mut pair, 2000, 40e6));
    let wait = |pair: &Pair| pair.b.equalize_wait().expect("measured").as_millis();
    assert!((59..=61).contains(&wait(&pair)), "{}", wait(&pair));
    // Kept off long enough that TCP is held to the near path only, it
    // does not join a flow under way again at twice the share that would
    // let it, and joins once no flow is.
    assert!(!takes_tcp(&mut pair, 2000, 1e6));
    pair.run(2000, 4500);
    assert!(wait(&pair) < 2, "{}", wait(&pair));
    assert!(!takes_tcp(&mut pair, 4500, 1e6));
    pair.send_packet(pair.at(4500), tcp_segment(1200));
    assert!(!takes_tcp(&mut pair, 4500, 90e6));
    assert!(!takes_tcp(&mut pair, 6400, 90e6));
    assert!(takes_tcp(&mut pair, 6600, 90e6));
}

#[test]
fn tcp_is_held_to_the_farthest_path_it_takes_once_it_kept_off_a_far_one_a_while() {
    // The farthest path turns out too small for TCP. The peer holds TCP
    // segments to it for a while still (were it taken again, the flow's
    // round trip would rise and CUBIC would leave slow start), then only
    // to the farthest path TCP takes, which the probes tell it.
    let mut pair = Pair::new(&[5, 30, 60]);
    pair.run(0, 2000);
    let wait = |pair: &Pair| pair.b.equalize_wait().expect("measured").as_millis();
    assert!((54..=56).contains(&wait(&pair)), "{}", wait(&pair));
    pair.a.paths.as_mut_slice()[2]
        .delivery
        .set_train_rate(Some(0.5e6));
    pair.run(2000, 3000);
    assert!((54..=56).contains(&wait(&pair)), "{}", wait(&pair));
    pair.run(3000, 4500);
    assert!((24..=26).contains(&wait(&pair)), "{}", wait(&pair));
    // The sender spreads segments over the two as held that long, so the
    // far one of them still takes its share.
    let mut far = 0;
    for k in 0..50 {
        let now = pair.at(4500) + Duration::from_micros(100 * k);
        for _ in 0..2 {
            let (path, _) = pair.send_packet(now, tcp_segment(1200)).expect("sent");
            assert_ne!(path, PathId(2));
            far += usize::from(path == PathId(1));
        }
    }
    assert!((40..=60).contains(&far), "{far} of 100 on the 30 ms path");
}

#[test]
fn idle_traffic_that_wants_low_latency_keeps_the_nearest_of_six_paths() {
    // Pings and an interactive (EF) TCP flow, a packet every 50 ms over
    // six paths 2 to 80 ms away, arrive in the nearest path's 2 ms: the
    // tunnel adds under a millisecond (the pair's step). Unmarked TCP is
    // held to the farthest path's 80.
    let mut pair = Pair::new(&[40, 2, 12, 80, 25, 60]);
    pair.run(0, 2000);
    pair.carry_data = true;
    for k in 0..20u64 {
        let ms = 2000 + 50 * k;
        let packet = if k % 2 == 0 {
            ip_packet(84)
        } else {
            tcp_segment_marked(120, 0xb8)
        };
        let (path, _) = pair.send_packet(pair.at(ms), packet).expect("sent");
        assert_eq!(path, PathId(1), "packet {k}");
        pair.run(ms, ms + 3);
        assert_eq!(pair.delivered.len(), k as usize + 1, "packet {k} late");
        pair.run(ms + 3, ms + 50);
    }
    pair.send_packet(pair.at(3000), tcp_segment(120))
        .expect("sent");
    pair.run(3000, 3070);
    assert_eq!(pair.delivered.len(), 20, "an unmarked segment not held");
    pair.run(3070, 3090);
    assert_eq!(pair.delivered.len(), 21);
}

#[test]
fn held_tcp_segments_take_the_far_path_before_the_near_one_queues() {
    // A TCP segment is held until it is as old as one on the farthest
    // path, so an empty far path brings it just as soon as an empty near
    // one. Were its own bytes' time counted against it, the far path would
    // carry nothing until the near one queued as deep as the paths are
    // apart (25 ms). Two segments every 100 µs: twice what one path drains
    // at the rate guessed for both.
    let mut pair = Pair::new(&[5, 30]);
    pair.run(0, 2000);
    let mut far = 0;
    for k in 0..50 {
        let now = pair.at(2000) + Duration::from_micros(100 * k);
        for _ in 0..2 {
            let (path, _) = pair.send_packet(now, tcp_segment(1200)).expect("sent");
            far += usize::from(path == PathId(1));
        }
    }
    assert!((40..=60).contains(&far), "{far} of 100 on the far path");
    // Packets that are not held still go the soonest way.
    pair.run(2000, 2500);
    let now = pair.at(2500);
    let near = (0..20)
        .filter(|_| pair.send(now, 1200).expect("sent").0 == PathId(0))
        .count();
    assert_eq!(near, 20);
}

#[test]
fn a_far_path_is_confirmed_before_it_could_be_taken_for_dead() {
    // 80 ms each way. A's session (the initiator's) comes up first, B's
    // when A's first packet reaches it. Each side echoes the other's probe
    // in its next one, up to the idle interval (100 ms) later, so a first
    // echo may come a round trip and that interval after the session: more
    // than a measured path of this round trip is let stay silent.
    let mut pair = Pair::new(&[80]);
    let path = PathId(0);
    pair.b.set_session(pair.t0, path, false);
    let mut up_at = [None, None];
    for ms in 0..1000 {
        if ms == 80 {
            let now = pair.at(ms);
            pair.b.set_session(now, path, true);
        }
        pair.run(ms, ms + 1);
        for (side, endpoint) in [&pair.a, &pair.b].into_iter().enumerate() {
            assert_ne!(
                endpoint.state(path),
                PathState::Down,
                "side {side} at {ms} ms"
            );
            if up_at[side].is_none() && endpoint.state(path) == PathState::Up {
                up_at[side] = Some(ms);
            }
        }
    }
    // Within a round trip and the idle interval of each side's session.
    assert!(
        up_at[0].is_some_and(|ms| ms <= 160 + 100),
        "A up at {up_at:?}"
    );
    assert!(
        up_at[1].is_some_and(|ms| ms <= 80 + 160 + 100),
        "B up at {up_at:?}"
    );
    for endpoint in [&mut pair.a, &mut pair.b] {
        while let Some(event) = endpoint.poll_event() {
            assert!(
                !matches!(event.change, PathChange::Down { .. }),
                "{event:?}"
            );
        }
    }
}

#[test]
fn a_path_whose_probes_are_lost_at_a_queue_its_data_crosses_stays_up() {
    // A's data overflows the queue from A to B, which drops every probe of
    // A's but lets data through: B hears no echo, but nothing says its own
    // direction failed. It keeps the path up, for at most a second.
    let mut pair = Pair::new(&[20]);
    pair.carry_data = true;
    pair.run(0, 1000);
    let path = PathId(0);
    pair.lose_probes_to_b = true;
    let down_at = pair.first_down(Side::B, path, 1000..2500, |pair, now| {
        pair.send(now, 1250);
    });
    // A second after the last echo, which came up to a probe interval and
    // a round trip before the loss began.
    let down_after = down_at.expect("never down") - 1000;
    assert!(
        (800..1100).contains(&down_after),
        "down after {down_after} ms"
    );
    assert_eq!(
        pair.a.state(path),
        PathState::Up,
        "B's reports say A's data arrives"
    );
}

#[test]
fn our_direction_failing_is_down_in_time_while_the_peer_s_data_still_comes() {
    // A's direction is cut; B's data still reaches A, and so do B's probes,
    // with an echo that goes stale: A is down as soon as without the data.
    let mut pair = Pair::new(&[20]);
    pair.carry_data = true;
    pair.run(0, 1000);
    pair.cut_to_b[0] = true;
    let down_at = pair.first_down(Side::A, PathId(0), 1000..1500, |pair, now| {
        pair.b.handle_tun(now, &mut vec![ip_packet(1250)]);
    });
    let down_after = down_at.expect("never down") - 1000;
    assert!(down_after <= 300, "down after {down_after} ms");
}
