//! Two real `Endpoint`s in a simulated network, with virtual time: their
//! encoded plaintexts cross seeded links (`mptun-netem`'s model: delay,
//! jitter, rate, a drop-tail queue, loss, cuts), both ways. Site A offers a
//! paced flow to site B, and B a lighter one back (as ACKs would be); each
//! side checks that what it delivers is in order. Runs in milliseconds of
//! real time per simulated second, deterministically for a seed.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::{Duration, Instant};

use mptun_core::{
    Endpoint, EndpointConfig, HoldHistogram, PacketBuf, PathChange, PathEstimate, PathId,
    PathState, ReorderStats, WaitEnd, TRAILER_LEN,
};
use mptun_netem::model::{Direction, DirectionConfig};

const PACKET: usize = 1400;
/// What B sends back per packet of A's: one small packet in ten.
const REVERSE_EVERY: u64 = 10;
const REVERSE_PACKET: usize = 100;
/// A bare TCP acknowledgement of the window flow, as the tunnel sees one
/// (what path it takes and that it waits for no gap depend on it).
const ACK_PACKET: usize = 80;
/// Outer bytes a plaintext costs on a link: WireGuard, UDP and IPv4.
const OUTER: usize = 32 + 8 + 20;
const MS: Duration = Duration::from_millis(1);

/// How a flow over one path alone, the baseline mptun is measured
/// against, crosses it.
#[derive(Clone, Copy, Debug)]
enum Baseline {
    /// Straight over the path, as the lab's "best path" row: a TCP segment
    /// sent bare carries 1448 bytes of payload in a 1500-byte frame
    /// (timestamps on), one through mptun 1364 (its MTU, 1416, is what
    /// WireGuard, UDP, IPv4 and the trailer leave), so the path alone gets
    /// 6% more from it than mptun over it can.
    Bare,
    /// Through one WireGuard tunnel, as the lab's "WireGuard, one tunnel"
    /// row: the inner packet and WireGuard's bytes, not the trailer.
    WireGuard,
}

impl Baseline {
    /// What a data packet and an ACK of the flow cost the link, for the
    /// goodput of one of mptun's inner packets.
    fn frames(self) -> (usize, usize) {
        match self {
            Baseline::Bare => ((PACKET + TRAILER_LEN + OUTER) * 1364 / 1448, ACK_PACKET),
            Baseline::WireGuard => (PACKET + OUTER, ACK_PACKET + OUTER),
        }
    }
}

/// An IPv4 packet of `len` bytes carrying `n`.
fn packet(len: usize, n: u64) -> PacketBuf {
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[20..28].copy_from_slice(&n.to_be_bytes());
    PacketBuf::copy_of(&p)
}

/// A TCP segment with data, `len` bytes in all, carrying `n`.
fn segment(len: usize, n: u64) -> PacketBuf {
    let mut p = packet(len, n).packet().to_vec();
    p[9] = 6; // TCP
    p[32] = 0x50; // a 20-byte TCP header
    PacketBuf::copy_of(&p)
}

fn number(p: &PacketBuf) -> u64 {
    let mut n = [0; 8];
    n.copy_from_slice(&p.packet()[20..28]);
    u64::from_be_bytes(n)
}

/// Most segments one TUN write coalesces: 64 KB.
const COALESCED_MAX: usize = 65_535 / PACKET;

/// The numbers of what B delivered at one instant, in the runs the TUN
/// device's offload writes as one super-packet each: consecutive segments,
/// up to [`COALESCED_MAX`]. B's TCP takes each run as one segment, and so
/// acknowledges a burst once, not every second packet of it: a burst that
/// waited behind a gap gives one round-trip sample, not one per two packets.
fn coalesced_runs(delivered: &[PacketBuf]) -> Vec<Vec<u64>> {
    let mut runs: Vec<Vec<u64>> = Vec::new();
    for n in delivered.iter().map(number) {
        match runs.last_mut() {
            Some(run) if run.len() < COALESCED_MAX && run.last().is_some_and(|&l| l + 1 == n) => {
                run.push(n)
            }
            _ => runs.push(vec![n]),
        }
    }
    runs
}

/// A path's setting: rate (Mbit/s), one-way delay (ms) and loss from A to
/// B; B to A has the same: a path loses both ways, as the lab's emulator
/// does, ACKs too.
#[derive(Clone, Copy)]
struct PathSpec {
    rate_mbit: f64,
    delay_ms: f64,
    jitter_ms: f64,
    loss: f64,
}

fn path(rate_mbit: f64, delay_ms: u64, loss: f64) -> PathSpec {
    PathSpec {
        rate_mbit,
        delay_ms: delay_ms as f64,
        jitter_ms: 0.0,
        loss,
    }
}

fn direction(spec: PathSpec, loss: f64, seed: u64) -> Direction {
    let config = DirectionConfig {
        delay: Duration::from_secs_f64(spec.delay_ms / 1e3),
        jitter: Duration::from_secs_f64(spec.jitter_ms / 1e3),
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
    /// When the next arrivals are handed over, where that is drawn late.
    release_at: Option<Instant>,
    rng: u64,
}

/// Step `state`, a linear congruential generator's, and return it: the
/// simulation's own draws, apart from the links' seeded ones.
fn next_random(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *state
}

/// How arrivals are handed over: at once by default; the lab's emulator
/// wakes when the first is due, a little late on a busy host, and hands
/// over with it what is due within its slack, so that a short train on a
/// fast path arrives in bunches.
#[derive(Clone, Copy, Default)]
struct Release {
    slack: Duration,
    /// Most a wake-up is late, drawn uniformly for each.
    late: Duration,
}

impl Release {
    /// As the lab's emulator hands arrivals over: what is due within a
    /// quarter millisecond of waking, its wake-ups up to `late` late.
    fn lab(late: Duration) -> Release {
        Release {
            slack: Duration::from_micros(250),
            late,
        }
    }
}

impl Wire {
    fn next_due(&self) -> Option<Instant> {
        self.due.peek().map(|Reverse((t, _))| *t)
    }

    /// Return when arrivals are next handed over.
    fn next_release(&mut self, release: Release) -> Option<Instant> {
        let head = self.next_due()?;
        if release.late.is_zero() {
            return Some(head);
        }
        if self.release_at.is_none() {
            let draw = (next_random(&mut self.rng) >> 11) as f64 / (1u64 << 53) as f64;
            self.release_at = Some(head + release.late.mul_f64(draw));
        }
        self.release_at
    }

    /// Take the arrivals handed over at `now`, if any are.
    fn take_released(
        &mut self,
        now: Instant,
        release: Release,
    ) -> Vec<(bool, PathId, u64, PacketBuf)> {
        if self.next_release(release).is_none_or(|t| t > now) {
            return Vec::new();
        }
        self.release_at = None;
        self.take_due(now + release.slack)
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
    /// Record what the endpoint delivers, checking that it is in order but
    /// for repairs handed out late; return it.
    fn deliver(
        &mut self,
        name: &str,
        per_tick: Option<(&mut Vec<u64>, Duration)>,
    ) -> Vec<PacketBuf> {
        let mut out = Vec::new();
        self.endpoint.poll_deliver(&mut out);
        for p in &out {
            if mptun_core::wire::ip::is_bare_tcp_ack(p.packet()) {
                continue; // a bare ACK passes the gaps before it
            }
            let n = number(p);
            match self.last {
                Some(last) if n == last => panic!(
                    "{name} delivered {n} twice {:?}",
                    self.endpoint.reorder_stats()
                ),
                Some(last) if n < last => {
                    assert!(
                        self.endpoint.reorder_stats().repaired_late > 0,
                        "{name} delivered {n} after {last}: out of order"
                    );
                    continue; // a late repair
                }
                _ => {}
            }
            self.last = Some(n);
        }
        self.delivered += out.len() as u64;
        if let Some((ticks, at)) = per_tick {
            if let Some(bucket) = ticks.get_mut((at.as_millis() / 100) as usize) {
                *bucket += out.len() as u64;
            }
        }
        out
    }
}

/// What site A offers.
#[derive(Clone, Copy, Debug)]
enum Source {
    /// A constant rate (Mbit/s), whatever arrives; B sends one small
    /// packet back per [`REVERSE_EVERY`].
    Paced(f64),
    /// A window-based bulk flow, as an inner TCP: B acknowledges every
    /// second packet it delivers, or a coalesced run of them at once (see
    /// [`coalesced_runs`]), through the tunnel, and says when it
    /// delivered past a gap; A's window grows as CUBIC's does and shrinks by
    /// 30% at a loss of a packet sent since the last decrease (once per
    /// window, as Linux's recovery), and leaves slow start early when the
    /// round trip grows as Linux's HyStart sees it (or as BBR's model of
    /// the path says, see [`Bbr`]). Lost packets are not sent again: this
    /// models how fast the flow goes, not what it delivers.
    Window(Cc),
}

/// The inner TCP's congestion control, as the lab's scenarios name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cc {
    Cubic,
    Bbr,
}

impl Cc {
    fn of(scenario: &mptun_lab::scenario::Scenario) -> Cc {
        if scenario.congestion_control == "bbr" {
            Cc::Bbr
        } else {
            Cc::Cubic
        }
    }
}

/// CUBIC's constant and multiplicative decrease (RFC 9438).
const CUBIC_C: f64 = 0.4;
const CUBIC_BETA: f64 = 0.7;
/// Without an acknowledgement for this long, the window starts over.
const RTO: Duration = Duration::from_secs(1);
/// Linux's HyStart (delay test): from a window of 16, slow start ends in
/// the round whose first 8 round trips all exceed the least one seen by an
/// eighth of it, at least 4 ms and at most 16.
const HYSTART_LOW_WINDOW: f64 = 16.0;
const HYSTART_SAMPLES: u32 = 8;
const HYSTART_MIN_RISE: Duration = Duration::from_millis(4);
const HYSTART_MAX_RISE: Duration = Duration::from_millis(16);
/// B's TCP acknowledges a segment left alone this long (Linux's least
/// delayed-ACK timeout): the tail of a flight whose last acknowledgement
/// was lost is acknowledged, and the sender does not wait out its RTO.
const DELAYED_ACK: Duration = Duration::from_millis(40);

/// A's window-based sender.
struct WindowSender {
    cwnd: f64,
    ssthresh: f64,
    /// Highest packet number B delivered, as acknowledged.
    acked: u64,
    /// A decrease is taken once per window: not again until this number is
    /// acknowledged.
    recover: u64,
    /// The window CUBIC grows back towards, the time it takes to reach it,
    /// and when growth started from there.
    w_max: f64,
    k: f64,
    epoch: Option<Instant>,
    last_progress: Instant,
    /// Send time of each packet not yet acknowledged, oldest first.
    sent_at: VecDeque<Instant>,
    /// Least round trip seen, and HyStart's round: the last packet of it,
    /// and the least round trip among its first samples.
    min_rtt: Option<Duration>,
    round_end: u64,
    round_min: Option<Duration>,
    round_samples: u32,
    /// Off (`SIM_HYSTART=0`), slow start lasts until the first loss: to
    /// measure how much of a result HyStart's exit decided.
    hystart: bool,
    /// The window at which HyStart's delay test first ended slow start.
    delay_exit_window: Option<f64>,
    /// The window's state before the last decrease, and how many packets
    /// were taken for lost since it and how many of those came after all:
    /// when every one did, the decrease was spurious and is undone, as
    /// Linux undoes a recovery its D-SACKs show needless, a round trip
    /// after the decrease.
    before_decrease: Option<Decrease>,
    episode_lost: u64,
    episode_late: u64,
    /// BBR's model of the path, when it sets the window and the pace
    /// instead of CUBIC.
    bbr: Option<Bbr>,
}

/// What a decrease of the window changed, to be undone.
#[derive(Clone, Copy)]
struct Decrease {
    cwnd: f64,
    ssthresh: f64,
    w_max: f64,
    k: f64,
    epoch: Option<Instant>,
    /// When the decrease was taken.
    at: Instant,
}

impl WindowSender {
    fn new(now: Instant, cc: Cc, seed: u64) -> Self {
        WindowSender {
            bbr: (cc == Cc::Bbr).then(|| Bbr::new(now, seed)),
            cwnd: 10.0,
            ssthresh: f64::MAX,
            acked: 0,
            recover: 0,
            w_max: 0.0,
            k: 0.0,
            epoch: None,
            last_progress: now,
            sent_at: VecDeque::new(),
            min_rtt: None,
            round_end: 0,
            round_min: None,
            round_samples: 0,
            hystart: std::env::var("SIM_HYSTART").map_or(true, |v| v != "0"),
            delay_exit_window: None,
            before_decrease: None,
            episode_lost: 0,
            episode_late: 0,
        }
    }

    /// Take the `sent`th packet sent, at `now`.
    fn on_send(&mut self, now: Instant, sent: u64) {
        if let Some(bbr) = self.bbr.as_mut() {
            let in_flight_before = sent.saturating_sub(1).saturating_sub(self.acked);
            bbr.on_send(now, in_flight_before);
        }
        self.sent_at.push_back(now);
    }

    /// HyStart's delay test, with the round trip of the newest packet
    /// acknowledged: whether slow start is over.
    fn hystart_exit(&mut self, rtt: Duration, sent: u64) -> bool {
        let min = *self.min_rtt.get_or_insert(rtt);
        self.min_rtt = Some(min.min(rtt));
        if self.acked > self.round_end {
            self.round_end = sent;
            self.round_min = None;
            self.round_samples = 0;
        }
        if !self.hystart || self.cwnd < HYSTART_LOW_WINDOW || self.round_samples >= HYSTART_SAMPLES
        {
            return false;
        }
        self.round_samples += 1;
        let round_min = self.round_min.map_or(rtt, |m| m.min(rtt));
        self.round_min = Some(round_min);
        let rise = (min / 8).clamp(HYSTART_MIN_RISE, HYSTART_MAX_RISE);
        self.round_samples == HYSTART_SAMPLES && round_min > min + rise
    }

    /// How many packets the window allows in flight beyond those there,
    /// `sent` having been sent so far.
    fn allowance(&self, sent: u64) -> u64 {
        let in_flight = sent.saturating_sub(self.acked);
        (self.cwnd as u64).saturating_sub(in_flight)
    }

    /// Whether one more packet may leave at `now`: the window has room and,
    /// under BBR, the pace allows it.
    fn may_send(&self, now: Instant, sent: u64) -> bool {
        self.allowance(sent) > 0 && self.bbr.as_ref().is_none_or(|b| b.pace_allows(now))
    }

    /// When the pace next lets a packet leave, if the window has room for
    /// one (never under CUBIC, which sends as acknowledgements come).
    fn paced_at(&self, sent: u64) -> Option<Instant> {
        let bbr = self.bbr.as_ref()?;
        (self.allowance(sent) > 0).then(|| bbr.paced_at())
    }

    fn on_ack(&mut self, now: Instant, ack: FlowAck, sent: u64) {
        if self.bbr.is_some() {
            self.on_ack_bbr(now, ack, sent);
            return;
        }
        let acked = ack.highest;
        if acked > self.acked {
            let newly = (acked - self.acked) as f64;
            let mut newest_sent = None;
            for _ in self.acked..acked {
                newest_sent = self.sent_at.pop_front().or(newest_sent);
            }
            self.acked = acked;
            self.last_progress = now;
            let rtt = newest_sent.map(|t| now - t);
            if self.cwnd < self.ssthresh && rtt.is_some_and(|rtt| self.hystart_exit(rtt, sent)) {
                // CUBIC grows on from here as from a decrease to this window.
                self.delay_exit_window.get_or_insert(self.cwnd);
                self.ssthresh = self.cwnd;
                self.w_max = self.cwnd;
                self.k = 0.0;
                self.epoch = Some(now);
            }
            if self.cwnd < self.ssthresh {
                self.cwnd += newly;
            } else if let Some(epoch) = self.epoch {
                let t = (now - epoch).as_secs_f64();
                let target = CUBIC_C * (t - self.k).powi(3) + self.w_max;
                // At least Reno's one packet per window.
                self.cwnd = (self.cwnd + newly / self.cwnd).max(target);
            }
        }
        // As Linux's recovery: a loss of a packet sent before the last
        // decrease is part of the episode that decrease answered, however
        // late the reorder buffer gives up on it.
        if ack.lost.is_some_and(|n| n > self.recover) {
            self.before_decrease = Some(Decrease {
                cwnd: self.cwnd,
                ssthresh: self.ssthresh,
                w_max: self.w_max,
                k: self.k,
                epoch: self.epoch,
                at: now,
            });
            (self.episode_lost, self.episode_late) = (0, 0);
            self.w_max = self.cwnd;
            self.k = (self.w_max * (1.0 - CUBIC_BETA) / CUBIC_C).cbrt();
            self.cwnd = (self.cwnd * CUBIC_BETA).max(2.0);
            self.ssthresh = self.cwnd;
            self.epoch = Some(now);
            self.recover = sent;
        }
        self.episode_lost += ack.lost_count;
        self.episode_late += ack.late_count;
        // Linux learns a loss was spurious from the D-SACK of its
        // retransmission, sent as the decrease was taken: a round trip
        // after it at the earliest.
        let undo_after = self.min_rtt.unwrap_or_default();
        if self.episode_lost > 0 && self.episode_late >= self.episode_lost {
            let due = |d: &mut Decrease| now >= d.at + undo_after;
            if let Some(d) = self.before_decrease.take_if(due) {
                self.cwnd = self.cwnd.max(d.cwnd);
                self.ssthresh = self.ssthresh.max(d.ssthresh);
                (self.w_max, self.k, self.epoch) = (d.w_max, d.k, d.epoch);
            }
        }
    }

    /// BBR's part of [`on_ack`](Self::on_ack): the packets newly
    /// acknowledged feed its model, which sets the window.
    fn on_ack_bbr(&mut self, now: Instant, ack: FlowAck, sent: u64) {
        let Some(bbr) = self.bbr.as_mut() else {
            return;
        };
        let in_flight_before = sent.saturating_sub(self.acked);
        let newly = ack.highest.saturating_sub(self.acked);
        for _ in 0..newly {
            self.sent_at.pop_front();
        }
        if newly > 0 {
            self.acked = ack.highest;
            self.last_progress = now;
        }
        let in_flight = sent.saturating_sub(self.acked);
        let rtt = bbr.on_ack(
            now,
            BbrAck {
                newly,
                delivered: ack.delivered,
                in_flight,
                in_flight_before,
                lost: ack.lost_count,
                first_lost: ack.lost,
                sent,
                acked: self.acked,
            },
            &mut self.cwnd,
        );
        if let Some(rtt) = rtt {
            self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        }
        // For the trace: slow start is BBR's startup.
        if bbr.full_bw_reached && self.ssthresh == f64::MAX {
            self.ssthresh = self.cwnd;
        }
    }

    fn rto_at(&self, sent: u64) -> Option<Instant> {
        (sent > self.acked).then_some(self.last_progress + RTO)
    }

    fn on_rto(&mut self, now: Instant, sent: u64) {
        if let Some(bbr) = self.bbr.as_mut() {
            bbr.on_rto(&mut self.cwnd);
            self.sent_at.clear();
            self.acked = sent;
            self.recover = sent;
            self.last_progress = now;
            return;
        }
        self.w_max = self.cwnd;
        self.k = (self.w_max * (1.0 - CUBIC_BETA) / CUBIC_C).cbrt();
        self.sent_at.clear();
        self.cwnd = 2.0;
        self.ssthresh = 2.0;
        self.before_decrease = None;
        self.epoch = Some(now);
        // What was in flight is gone.
        self.acked = sent;
        self.recover = sent;
        self.last_progress = now;
    }
}

/// BBR's gains (Linux's tcp_bbr.c, version 1, the kernel's `bbr`): startup
/// paces and fills at 2/ln 2, drain paces at its inverse, and probing for
/// bandwidth cycles the pace through eight phases of a least round trip
/// each with a window of twice the path's estimated capacity.
const BBR_HIGH_GAIN: f64 = 2.885;
const BBR_CWND_GAIN: f64 = 2.0;
const BBR_PACING_GAINS: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// The bottleneck rate is the highest delivery rate of this many rounds.
const BBR_BW_ROUNDS: u64 = 10;
/// Startup ends when three rounds in a row did not raise it by a quarter.
const BBR_FULL_BW_GROWTH: f64 = 1.25;
const BBR_FULL_BW_ROUNDS: u32 = 3;
/// The least round trip is kept this long; when it expires the flow drains
/// to a window of four packets for at least this long and a round, to
/// measure it again.
const BBR_MIN_RTT_LIFE: Duration = Duration::from_secs(10);
const BBR_PROBE_RTT_FOR: Duration = Duration::from_millis(200);
const BBR_MIN_CWND: f64 = 4.0;
const BBR_INIT_CWND: f64 = 10.0;
/// Linux paces 1% below the rate the gain asks.
const BBR_PACING_MARGIN: f64 = 0.99;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BbrMode {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

/// What one packet's send left for its delivery-rate sample: how much had
/// been delivered and when, and when the packet delivered last before it
/// had been sent (Linux's `tcp_rate_skb_sent`).
#[derive(Clone, Copy)]
struct BbrSent {
    at: Instant,
    delivered: u64,
    delivered_at: Instant,
    first_sent_at: Instant,
}

/// What an acknowledgement tells [`Bbr`].
struct BbrAck {
    /// Packets newly acknowledged (the highest delivered moved by this
    /// many), and how many were delivered in all.
    newly: u64,
    delivered: u64,
    /// Packets in flight after it and before it.
    in_flight: u64,
    in_flight_before: u64,
    /// Packets it reports lost, and the first of them.
    lost: u64,
    first_lost: Option<u64>,
    /// Packets sent so far, and the highest acknowledged.
    sent: u64,
    acked: u64,
}

/// Linux's BBR (version 1) as the inner flow's congestion control: the
/// window is twice the estimated bandwidth-delay product (its largest
/// delivery rate over ten rounds times its least round trip over ten
/// seconds) and packets leave at a pace. A loss does not lower its model;
/// Linux's recovery holds the window to what is in flight for a round and
/// gives it back at its end (see [`Bbr::update_recovery`]). Its long-term
/// policer detection and its allowance for aggregated acknowledgements are
/// not modelled.
struct Bbr {
    mode: BbrMode,
    /// The largest delivery-rate sample (packets/s) of each of the last
    /// rounds, with its round.
    bw_samples: VecDeque<(u64, f64)>,
    round: u64,
    next_round_delivered: u64,
    full_bw: f64,
    full_bw_rounds: u32,
    full_bw_reached: bool,
    min_rtt: Option<Duration>,
    min_rtt_at: Instant,
    probe_rtt_done_at: Option<Instant>,
    probe_rtt_round_done: bool,
    cycle_index: usize,
    cycle_start: Instant,
    /// Packets per second, and when the pace lets the next one leave.
    pacing_rate: f64,
    next_send_at: Instant,
    /// One record per packet in flight, oldest first.
    sent: VecDeque<BbrSent>,
    /// Packets delivered in all, when that last grew, and when the packet
    /// acknowledged then had been sent.
    delivered: u64,
    delivered_at: Instant,
    first_sent_at: Instant,
    prior_cwnd: f64,
    /// Probe-RTT is over: the window before it is given back.
    restore_prior: bool,
    seen_rtt: bool,
    /// Linux's recovery: whether one is under way, the packet whose
    /// acknowledgement ends its round, whether that round is the second
    /// (the one the retransmissions went in), and whether the window
    /// holds what is in flight (its first round).
    in_recovery: bool,
    recover: u64,
    retransmitted: bool,
    conservation: bool,
    /// Where the probing cycle starts, drawn as Linux draws it.
    rng: u64,
}

impl Bbr {
    fn new(now: Instant, seed: u64) -> Self {
        Bbr {
            mode: BbrMode::Startup,
            bw_samples: VecDeque::new(),
            round: 0,
            next_round_delivered: 0,
            full_bw: 0.0,
            full_bw_rounds: 0,
            full_bw_reached: false,
            min_rtt: None,
            min_rtt_at: now,
            probe_rtt_done_at: None,
            probe_rtt_round_done: false,
            cycle_index: 0,
            cycle_start: now,
            // Until a round trip is measured, Linux assumes 1 ms.
            pacing_rate: BBR_HIGH_GAIN * BBR_INIT_CWND / 1e-3,
            next_send_at: now,
            sent: VecDeque::new(),
            delivered: 0,
            delivered_at: now,
            first_sent_at: now,
            prior_cwnd: 0.0,
            restore_prior: false,
            seen_rtt: false,
            in_recovery: false,
            recover: 0,
            retransmitted: false,
            conservation: false,
            rng: seed ^ 0xbb5,
        }
    }

    fn bw(&self) -> f64 {
        self.bw_samples.iter().map(|&(_, b)| b).fold(0.0, f64::max)
    }

    /// How many packets Linux sends at once at this pace (its TSO burst:
    /// a millisecond's worth, 2 to 45 packets).
    fn quantum(&self) -> f64 {
        (self.pacing_rate * 1e-3).clamp(2.0, 45.0).floor()
    }

    fn pace_allows(&self, now: Instant) -> bool {
        now >= self.paced_at()
    }

    /// The pace is kept per packet, a burst of [`quantum`](Self::quantum)
    /// allowed ahead of it.
    fn paced_at(&self) -> Instant {
        let ahead = (self.quantum() - 1.0) / self.pacing_rate;
        self.next_send_at
            .checked_sub(Duration::from_secs_f64(ahead))
            .unwrap_or(self.next_send_at)
    }

    fn on_send(&mut self, now: Instant, in_flight: u64) {
        if in_flight == 0 {
            // From idle, the rate samples start over.
            self.first_sent_at = now;
            self.delivered_at = now;
        }
        self.sent.push_back(BbrSent {
            at: now,
            delivered: self.delivered,
            delivered_at: self.delivered_at,
            first_sent_at: self.first_sent_at,
        });
        self.next_send_at =
            self.next_send_at.max(now) + Duration::from_secs_f64(1.0 / self.pacing_rate);
    }

    /// The window for `gain` times the estimated bandwidth-delay product,
    /// with three bursts for the pace's quantization.
    fn target_cwnd(&self, gain: f64) -> f64 {
        match self.min_rtt {
            Some(rtt) if self.bw() > 0.0 => {
                gain * self.bw() * rtt.as_secs_f64() + 3.0 * self.quantum()
            }
            _ => BBR_INIT_CWND,
        }
    }

    fn pacing_gain(&self) -> f64 {
        match self.mode {
            BbrMode::Startup => BBR_HIGH_GAIN,
            BbrMode::Drain => 1.0 / BBR_HIGH_GAIN,
            BbrMode::ProbeBw => BBR_PACING_GAINS[self.cycle_index],
            BbrMode::ProbeRtt => 1.0,
        }
    }

    fn cwnd_gain(&self) -> f64 {
        match self.mode {
            BbrMode::Startup | BbrMode::Drain => BBR_HIGH_GAIN,
            BbrMode::ProbeBw | BbrMode::ProbeRtt => BBR_CWND_GAIN,
        }
    }

    /// Take an acknowledgement at `now`; set `cwnd`. Return the round trip
    /// it measured, if any.
    fn on_ack(&mut self, now: Instant, ack: BbrAck, cwnd: &mut f64) -> Option<Duration> {
        // The rate sample, from the newest packet acknowledged.
        let mut newest = None;
        for _ in 0..ack.newly {
            newest = self.sent.pop_front().or(newest);
        }
        let mut round_start = false;
        let mut rtt = None;
        self.delivered = self.delivered.max(ack.delivered);
        if let Some(p) = newest {
            self.delivered_at = now;
            self.first_sent_at = p.at;
            if p.delivered >= self.next_round_delivered {
                self.next_round_delivered = self.delivered;
                self.round += 1;
                round_start = true;
            }
            let sample = now.saturating_duration_since(p.at);
            rtt = Some(sample);
            if !self.seen_rtt && !sample.is_zero() {
                // Linux paces the initial window over the first round trip
                // it measures (the handshake's, there).
                self.seen_rtt = true;
                self.pacing_rate = BBR_HIGH_GAIN * BBR_INIT_CWND / sample.as_secs_f64();
            }
            let interval =
                p.at.saturating_duration_since(p.first_sent_at)
                    .max(now.saturating_duration_since(p.delivered_at));
            // Linux drops a sample over less than the least round trip.
            let valid = self.min_rtt.is_none_or(|m| interval >= m) && !interval.is_zero();
            if valid {
                let rate =
                    self.delivered.saturating_sub(p.delivered) as f64 / interval.as_secs_f64();
                match self.bw_samples.back_mut() {
                    Some((r, max)) if *r == self.round => *max = max.max(rate),
                    _ => self.bw_samples.push_back((self.round, rate)),
                }
            }
            let round = self.round;
            self.bw_samples.retain(|&(r, _)| r + BBR_BW_ROUNDS > round);
            // The least round trip, and when it is due again.
            let expired = now.saturating_duration_since(self.min_rtt_at) > BBR_MIN_RTT_LIFE;
            if self.min_rtt.is_none_or(|m| sample <= m) || expired {
                self.min_rtt = Some(sample);
                self.min_rtt_at = now;
            }
            if expired && self.mode != BbrMode::ProbeRtt {
                self.mode = BbrMode::ProbeRtt;
                self.save_cwnd(*cwnd);
                self.probe_rtt_done_at = None;
            }
        }
        if round_start {
            self.conservation = false;
        }
        if round_start && !self.full_bw_reached {
            let bw = self.bw();
            if bw >= self.full_bw * BBR_FULL_BW_GROWTH {
                self.full_bw = bw;
                self.full_bw_rounds = 0;
            } else {
                self.full_bw_rounds += 1;
                self.full_bw_reached = self.full_bw_rounds >= BBR_FULL_BW_ROUNDS;
            }
        }
        self.update_mode(now, &ack, round_start);
        // The pace: in startup it only rises.
        let rate = self.pacing_gain() * self.bw() * BBR_PACING_MARGIN;
        if rate > 0.0 && (self.full_bw_reached || rate > self.pacing_rate) {
            self.pacing_rate = rate;
        }
        self.set_cwnd(&ack, cwnd);
        rtt
    }

    fn update_mode(&mut self, now: Instant, ack: &BbrAck, round_start: bool) {
        if self.mode == BbrMode::ProbeBw {
            let full_length = self
                .min_rtt
                .is_some_and(|m| now.saturating_duration_since(self.cycle_start) > m);
            let gain = BBR_PACING_GAINS[self.cycle_index];
            let next = if gain > 1.0 {
                full_length
                    && (ack.lost > 0 || ack.in_flight_before as f64 >= self.target_cwnd(gain))
            } else if gain < 1.0 {
                full_length || ack.in_flight_before as f64 <= self.target_cwnd(1.0)
            } else {
                full_length
            };
            if next {
                self.cycle_index = (self.cycle_index + 1) % BBR_PACING_GAINS.len();
                self.cycle_start = now;
            }
        }
        if self.mode == BbrMode::Startup && self.full_bw_reached {
            self.mode = BbrMode::Drain;
        }
        if self.mode == BbrMode::Drain && ack.in_flight as f64 <= self.target_cwnd(1.0) {
            self.enter_probe_bw(now);
        }
        if self.mode == BbrMode::ProbeRtt {
            match self.probe_rtt_done_at {
                None if ack.in_flight as f64 <= BBR_MIN_CWND => {
                    self.probe_rtt_done_at = Some(now + BBR_PROBE_RTT_FOR);
                    self.probe_rtt_round_done = false;
                    self.next_round_delivered = self.delivered;
                }
                Some(done) => {
                    self.probe_rtt_round_done |= round_start;
                    if self.probe_rtt_round_done && now > done {
                        self.min_rtt_at = now;
                        self.restore_prior = true;
                        if self.full_bw_reached {
                            self.enter_probe_bw(now);
                        } else {
                            self.mode = BbrMode::Startup;
                        }
                    }
                }
                None => {}
            }
        }
    }

    fn enter_probe_bw(&mut self, now: Instant) {
        self.mode = BbrMode::ProbeBw;
        // Linux starts in any phase but the one that drains: 2 to 7, or 0.
        let draw = ((next_random(&mut self.rng) >> 33) % 7) as usize;
        self.cycle_index = (BBR_PACING_GAINS.len() - 1 - draw + 1) % BBR_PACING_GAINS.len();
        self.cycle_start = now;
    }

    fn save_cwnd(&mut self, cwnd: f64) {
        self.prior_cwnd =
            if self.restore_prior || self.in_recovery || self.mode == BbrMode::ProbeRtt {
                self.prior_cwnd.max(cwnd)
            } else {
                cwnd
            };
    }

    /// Linux's recovery, without the retransmissions: it starts at a loss
    /// of a packet sent after the last one began and lasts until what was
    /// in flight when the losses were resent is acknowledged, two rounds
    /// here. Return whether it starts and whether it ends with `ack`.
    fn update_recovery(&mut self, ack: &BbrAck) -> (bool, bool) {
        if !self.in_recovery {
            let starts = ack.first_lost.is_some_and(|n| n > self.recover);
            if starts {
                (self.in_recovery, self.retransmitted) = (true, false);
                self.recover = ack.sent;
            }
            return (starts, false);
        }
        if ack.acked <= self.recover {
            return (false, false);
        }
        if !self.retransmitted {
            self.retransmitted = true;
            self.recover = ack.sent;
            return (false, false);
        }
        self.in_recovery = false;
        (false, true)
    }

    /// Set the window as `bbr_set_cwnd` does: a loss takes its packets off
    /// it; a recovery's first round holds it to what is in flight (packet
    /// conservation) and its end gives back the window from before; else
    /// it grows by what is acknowledged up to the target.
    fn set_cwnd(&mut self, ack: &BbrAck, cwnd: &mut f64) {
        let newly = ack.newly as f64;
        if ack.lost > 0 {
            *cwnd = (*cwnd - ack.lost as f64).max(1.0);
        }
        let (starts, ends) = self.update_recovery(ack);
        if starts {
            self.save_cwnd(*cwnd);
            self.conservation = true;
            self.next_round_delivered = self.delivered;
            *cwnd = ack.in_flight as f64 + newly;
        } else if ends {
            self.conservation = false;
            *cwnd = cwnd.max(self.prior_cwnd);
        }
        if self.conservation {
            *cwnd = cwnd.max(ack.in_flight as f64 + newly);
        } else if ack.newly > 0 {
            self.grow_cwnd(newly, cwnd);
        }
        if self.mode == BbrMode::ProbeRtt {
            *cwnd = cwnd.min(BBR_MIN_CWND);
        }
    }

    fn grow_cwnd(&mut self, newly: f64, cwnd: &mut f64) {
        if std::mem::take(&mut self.restore_prior) {
            *cwnd = cwnd.max(self.prior_cwnd);
        }
        let mut target = self.target_cwnd(self.cwnd_gain());
        if self.mode == BbrMode::ProbeBw && self.cycle_index == 0 {
            target += 2.0;
        }
        if self.full_bw_reached {
            *cwnd = (*cwnd + newly).min(target);
        } else if *cwnd < target || self.delivered < BBR_INIT_CWND as u64 {
            *cwnd += newly;
        }
        *cwnd = cwnd.max(BBR_MIN_CWND);
    }

    /// A timeout: the window starts from one packet, and the window before
    /// is given back at the next acknowledgement, as Linux's BBR does when
    /// the loss state ends.
    fn on_rto(&mut self, cwnd: &mut f64) {
        self.save_cwnd(*cwnd);
        self.restore_prior = true;
        (self.in_recovery, self.conservation) = (false, false);
        self.full_bw = 0.0;
        self.full_bw_rounds = 0;
        self.sent.clear();
        *cwnd = 1.0;
    }
}

/// B's side of the window flow: what it delivered, and when a packet it
/// delivered past counts as lost, as Linux's RACK decides: at once until
/// a packet has come late (three duplicate acknowledgements do it), and
/// once missing for a quarter of the flow's least round trip once one
/// has (RACK's reordering window once reordering was seen). A packet that
/// comes later than that was taken for lost all the same, and Linux
/// undoes the recovery it started a round trip later (see
/// [`WindowSender`]). RACK's window widens on D-SACKs; that is not
/// modelled: modelled, the simulation strayed further from the lab.
#[derive(Default)]
struct FlowReceiver {
    highest: u64,
    /// Packets delivered past and not come yet, with when, oldest first.
    missing: VecDeque<(u64, Instant)>,
    /// Since the last acknowledgement: the first packet taken for lost,
    /// how many were, and how many taken for lost before came after all.
    lost: Option<u64>,
    lost_count: u64,
    late_count: u64,
    /// Packets delivered since the last acknowledgement, and when the
    /// first of them was.
    unacked: u32,
    unacked_since: Option<Instant>,
    reordering_seen: bool,
    delivered: u64,
}

impl FlowReceiver {
    /// Take packet `n`, delivered at `now`.
    fn deliver(&mut self, now: Instant, n: u64) {
        self.delivered += 1;
        if n <= self.highest {
            // Late, whether or not taken for lost already (then the
            // sender learns it from a D-SACK).
            self.reordering_seen = true;
            match self.missing.iter().position(|&(m, _)| m == n) {
                Some(i) => {
                    self.missing.remove(i);
                }
                None => self.late_count += 1,
            }
            return;
        }
        self.missing.extend((self.highest + 1..n).map(|m| (m, now)));
        self.highest = n;
        self.unacked += 1;
        self.unacked_since.get_or_insert(now);
    }

    /// Take for lost what has been missing longer than the reordering
    /// window, given the sender's least round trip.
    fn judge(&mut self, now: Instant, min_rtt: Option<Duration>) {
        let window = match min_rtt {
            Some(rtt) if self.reordering_seen => rtt / 4,
            _ => Duration::ZERO,
        };
        while let Some(&(m, at)) = self.missing.front() {
            if now.saturating_duration_since(at) < window {
                break;
            }
            self.missing.pop_front();
            self.lost = self.lost.or(Some(m));
            self.lost_count += 1;
        }
    }

    /// An acknowledgement once two packets or more were delivered since
    /// the last, or one was [`DELAYED_ACK`] ago: asked after each segment
    /// B's TCP takes in, and when [`ack_due`](Self::ack_due) comes.
    fn poll_ack(&mut self, now: Instant) -> Option<FlowAck> {
        if self.unacked < 2 && self.ack_due().is_none_or(|due| now < due) {
            return None;
        }
        self.unacked = 0;
        self.unacked_since = None;
        Some(FlowAck {
            highest: self.highest,
            lost: self.lost.take(),
            lost_count: std::mem::take(&mut self.lost_count),
            late_count: std::mem::take(&mut self.late_count),
            delivered: self.delivered,
        })
    }

    /// When a segment left unacknowledged is acknowledged anyway.
    fn ack_due(&self) -> Option<Instant> {
        self.unacked_since.map(|since| since + DELAYED_ACK)
    }
}

/// An acknowledgement of the window flow, from B.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
struct FlowAck {
    /// The highest packet number B delivered.
    highest: u64,
    /// The first packet taken for lost since the last acknowledgement.
    lost: Option<u64>,
    /// How many were taken for lost since then...
    lost_count: u64,
    /// ...and how many of those taken for lost before came after all.
    late_count: u64,
    /// How many packets B delivered in all, for BBR's delivery rate
    /// (Linux counts what was acknowledged or selectively acknowledged,
    /// not what a gap passed over).
    delivered: u64,
}

/// How long SIM_TRACE shows the window flow unless it gives the seconds
/// (`SIM_TRACE=8`), and how often.
const TRACE_WINDOW_FOR: Duration = Duration::from_millis(3000);
const TRACE_WINDOW_EVERY: Duration = Duration::from_millis(25);

/// How much later than the paths' coming up the simulated data's clock
/// starts (`SIM_FLOW_LATER`, seconds; 0 unless given). The lab's flows
/// start some three seconds after its paths come up, the simulation's half
/// a second after: this measures what that difference moves.
fn flow_later() -> Duration {
    std::env::var("SIM_FLOW_LATER")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map_or(Duration::ZERO, Duration::from_secs_f64)
}

/// How mptun's arrivals are handed over in the sweep
/// (`SIM_RELEASE_LATE_US=L`): as the lab's emulator does, what is due
/// within a quarter millisecond of the first at once, its wake-ups up to L
/// µs late; unless given, each as it falls due.
fn sweep_release() -> Release {
    std::env::var("SIM_RELEASE_LATE_US")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(Release::default(), |late_us| {
            Release::lab(Duration::from_micros(late_us))
        })
}

/// Whether mptun's paths from B to A keep their delay but not their
/// jitter (`SIM_BACK_STEADY=1`; off unless given): what the jitter under
/// the flow's ACKs costs it. The paths alone keep theirs.
fn back_steady() -> bool {
    std::env::var("SIM_BACK_STEADY").is_ok_and(|v| v != "0")
}

/// One line of SIM_TRACE: the window, the round trip of the oldest packet
/// in flight, and per path the queue measured and modelled (ms), the
/// rate the scheduler assumes and the one the probe trains arrived at
/// (Mbit/s), the packets sent and resent, and the loss estimated.
fn trace_window(at: Duration, w: &WindowSender, a: &mut Endpoint, paths: usize, now: Instant) {
    let mut line = format!(
        "  {at:?} window {:.0}{} oldest in flight {:?} |",
        w.cwnd,
        if w.cwnd < w.ssthresh {
            " (slow start)"
        } else {
            ""
        },
        w.sent_at.front().map(|&t| now - t),
    );
    if let Some(b) = w.bbr.as_ref() {
        line += &format!(
            " bbr {:?} round {} bw {:.0} pace {:.0} min_rtt {:?} |",
            b.mode,
            b.round,
            b.bw() * PACKET as f64 * 8e-6,
            b.pacing_rate * PACKET as f64 * 8e-6,
            b.min_rtt,
        );
    }
    for i in 0..paths {
        let e = a.estimate(PathId(i as u8), now);
        let rate = e.rate_mbps.map_or("-".to_string(), |r| format!("{r:.0}"));
        let train = e.train_mbps.map_or("-".to_string(), |r| format!("{r:.0}"));
        let st = a.path_stats(PathId(i as u8));
        line += &format!(
            " q {:.1}/{:.1} r {rate} t {train} tx {}/{} l {:.2}%;",
            e.queue_ms,
            e.model_queue_ms,
            st.tx_packets,
            st.resent,
            e.loss * 100.0
        );
    }
    eprintln!("{line}");
}

/// An acknowledgement from B, a bare TCP ACK: its own number, then
/// `ack`'s fields in its options (numbers start at 1; a lost packet 0 is
/// none).
fn ack(number: u64, ack: FlowAck) -> PacketBuf {
    let mut p = vec![0u8; ACK_PACKET];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(ACK_PACKET as u16).to_be_bytes());
    p[9] = 6; // TCP
    p[20..28].copy_from_slice(&number.to_be_bytes());
    p[32] = 0xf0; // a 60-byte TCP header: the fields below are its options
    p[33] = 0x10; // ACK
    for (at, word) in [
        (40, ack.highest),
        (48, ack.lost.unwrap_or(0)),
        (56, ack.lost_count),
        (64, ack.late_count),
        (72, ack.delivered),
    ] {
        p[at..at + 8].copy_from_slice(&word.to_be_bytes());
    }
    PacketBuf::copy_of(&p)
}

fn read_ack(p: &PacketBuf) -> FlowAck {
    let word = |at: usize| {
        let mut n = [0; 8];
        n.copy_from_slice(&p.packet()[at..at + 8]);
        u64::from_be_bytes(n)
    };
    FlowAck {
        highest: word(40),
        lost: Some(word(48)).filter(|&n| n != 0),
        lost_count: word(56),
        late_count: word(64),
        delivered: word(72),
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
    /// The same, of what waited after the data's first second, as the lab
    /// reports it.
    hold_p99_steady: Option<Duration>,
    /// What waited after the data's first second, by what ended the wait
    /// (in [`WaitEnd::ALL`]'s order).
    waits_ended_steady: Vec<HoldHistogram>,
    /// Time from a cut to the path being marked down at A.
    down_after: Option<Duration>,
    /// Per path, when A first set it aside for its loss, counted from the
    /// flow's start.
    set_aside_after: Vec<Option<Duration>>,
    /// Per path, how many times A set it aside.
    set_asides: Vec<u32>,
    /// Times either site marked a path down.
    downs: u32,
    /// Packets A resent on B's request.
    resent: u64,
    /// Each path's share of A's packets.
    shares: Vec<f64>,
    /// The window flow's window when HyStart's delay test first ended its
    /// slow start, if it did.
    delay_exit_window: Option<f64>,
    /// What A knew of each path at the end.
    estimates: Vec<PathEstimate>,
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

/// Put what `endpoint` sends at `now` onto `links` (its side's, one per
/// path).
fn transmit(
    now: Instant,
    from_a: bool,
    endpoint: &mut Endpoint,
    links: &mut [Direction],
    wire: &mut Wire,
    out: &mut Vec<PacketBuf>,
) {
    while let Some(path) = endpoint.poll_transmit(out) {
        let link = &mut links[path.index()];
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

struct Sim {
    seed: u64,
    paths: Vec<PathSpec>,
    source: Source,
    seconds: f64,
    changes: Vec<(f64, Change)>,
    /// Seconds at the end with nothing new sent, for what is in flight to
    /// arrive.
    tail: f64,
    release: Release,
}

impl Sim {
    fn new(seed: u64, paths: &[PathSpec], offered_mbit: f64, seconds: f64) -> Sim {
        Sim {
            seed,
            paths: paths.to_vec(),
            source: Source::Paced(offered_mbit),
            seconds,
            changes: Vec::new(),
            tail: 0.0,
            release: Release::default(),
        }
    }

    /// A window-based bulk flow, as an inner TCP's, for `seconds`.
    fn window(seed: u64, paths: &[PathSpec], seconds: f64) -> Sim {
        Sim {
            source: Source::Window(Cc::Cubic),
            ..Sim::new(seed, paths, 0.0, seconds)
        }
    }

    /// The same, with `cc` as its congestion control.
    fn window_with(seed: u64, paths: &[PathSpec], seconds: f64, cc: Cc) -> Sim {
        Sim {
            source: Source::Window(cc),
            ..Sim::new(seed, paths, 0.0, seconds)
        }
    }

    fn run(self) -> Report {
        let t0 = Instant::now();
        // The paths come up at `t0`; the data's start, the changes, the
        // end and what is counted when go by `origin`.
        let origin = t0 + flow_later();
        let n = self.paths.len();
        let mut to_b: Vec<Direction> = Vec::new();
        let mut to_a: Vec<Direction> = Vec::new();
        for (i, &spec) in self.paths.iter().enumerate() {
            let seed = self.seed.wrapping_mul(1000).wrapping_add(i as u64);
            to_b.push(direction(spec, spec.loss, seed));
            let back = if back_steady() {
                PathSpec {
                    jitter_ms: 0.0,
                    ..spec
                }
            } else {
                spec
            };
            to_a.push(direction(back, spec.loss, seed ^ 0x5eed));
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
        let mut wire = Wire {
            rng: self.seed,
            ..Wire::default()
        };
        let interval = match self.source {
            Source::Paced(mbit) => Duration::from_secs_f64(PACKET as f64 * 8.0 / (mbit * 1e6)),
            Source::Window(_) => Duration::MAX,
        };
        let mut window = match self.source {
            Source::Window(cc) => Some(WindowSender::new(origin, cc, self.seed)),
            Source::Paced(_) => None,
        };
        let mut flow_at_b = FlowReceiver::default();
        let end = origin + Duration::from_secs_f64(self.seconds);
        let last_send = end - Duration::from_secs_f64(self.tail);
        let data_from = origin + 500 * MS; // let probes measure first
        let mut next_send = data_from;
        let mut report = Report {
            per_tick: vec![0; (self.seconds * 10.0).ceil() as usize + 1],
            set_aside_after: vec![None; self.paths.len()],
            set_asides: vec![0; self.paths.len()],
            ..Report::default()
        };
        let mut changes = self.changes.clone();
        changes.sort_by(|x, y| x.0.total_cmp(&y.0));
        let mut changes = changes.into_iter().peekable();
        let mut cut_at: Option<(Instant, usize)> = None;
        let mut now = t0;
        let mut out = Vec::new();
        // SIM_TRACE=1: path events, and the window flow's first seconds as
        // its sender and A's scheduler see them.
        let trace_var = std::env::var("SIM_TRACE").ok();
        let trace = trace_var.is_some();
        let trace_for = trace_var
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|s| *s > 1.0 && s.is_finite())
            .map_or(TRACE_WINDOW_FOR, Duration::from_secs_f64);
        let mut next_trace = t0;
        // B's waits at the end of the data's first second.
        let mut first_second_waits = None;
        let mut first_second_ended: Vec<HoldHistogram> = Vec::new();
        // B's waits and counters at SIM_TRACE's line before.
        let mut traced_waits = b.endpoint.waits().clone();
        let mut traced_stats = b.endpoint.reorder_stats();
        while now < end {
            // The next thing to happen.
            let mut next = if window.is_none() && next_send < last_send {
                next_send
            } else {
                end
            };
            if let Some(w) = &window {
                if report.offered == 0 {
                    next = next.min(next_send);
                }
                if let Some(rto) = w.rto_at(report.offered) {
                    next = next.min(rto);
                }
                if let Some(paced) = w.paced_at(report.offered).filter(|_| now < last_send) {
                    next = next.min(paced.max(next_send));
                }
                if let Some(due) = flow_at_b.ack_due() {
                    next = next.min(due);
                }
            }
            // Nothing below touches either endpoint before its timers run.
            let timers = [a.endpoint.poll_timeout(), b.endpoint.poll_timeout()];
            for t in [wire.next_release(self.release), timers[0], timers[1]]
                .into_iter()
                .flatten()
            {
                next = next.min(t.max(now));
            }
            if let Some(&(at, _)) = changes.peek() {
                next = next.min(origin + Duration::from_secs_f64(at));
            }
            now = next.max(now);
            if first_second_waits.is_none() && now >= data_from + Duration::from_secs(1) {
                first_second_waits = Some(b.endpoint.waits().clone());
                first_second_ended = WaitEnd::ALL
                    .iter()
                    .map(|&end| b.endpoint.waits_ended_by(end).clone())
                    .collect();
            }

            while let Some(&(at, change)) = changes.peek() {
                if origin + Duration::from_secs_f64(at) > now {
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
            for (site, timer) in [&mut a, &mut b].into_iter().zip(timers) {
                if timer.is_some_and(|t| t <= now) {
                    site.endpoint.handle_timeout(now);
                }
            }

            // The sources: every packet due now, in one batch per side.
            let mut batch = Vec::new();
            let mut back = Vec::new();
            while window.is_none() && next_send <= now && next_send < last_send {
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
            let mut arrivals: [Vec<Vec<PacketBuf>>; 2] = Default::default();
            for side in &mut arrivals {
                side.resize_with(n, Vec::new);
            }
            for (to_b_side, p, epoch, buf) in wire.take_released(now, self.release) {
                let links = if to_b_side { &to_b } else { &to_a };
                if epoch == links[p.index()].epoch() {
                    arrivals[usize::from(to_b_side)][p.index()].push(buf);
                }
            }
            for to_b_side in [true, false] {
                for (i, batch) in arrivals[usize::from(to_b_side)].iter_mut().enumerate() {
                    if batch.is_empty() {
                        continue;
                    }
                    let site = if to_b_side { &mut b } else { &mut a };
                    site.endpoint.handle_datagrams(now, PathId(i as u8), batch);
                }
            }

            // What both sides send, onto the links.
            transmit(now, true, &mut a.endpoint, &mut to_b, &mut wire, &mut out);
            transmit(now, false, &mut b.endpoint, &mut to_a, &mut wire, &mut out);
            let at_b = b.deliver(
                "B",
                Some((&mut report.per_tick, now.saturating_duration_since(origin))),
            );
            let at_a = a.deliver("A", None);
            if let Some(w) = window.as_mut() {
                let mut flow_acks = Vec::new();
                for run in coalesced_runs(&at_b) {
                    for &n in &run {
                        flow_at_b.deliver(now, n);
                        flow_at_b.judge(now, w.min_rtt);
                    }
                    flow_acks.extend(flow_at_b.poll_ack(now));
                }
                // A segment left alone.
                flow_acks.extend(flow_at_b.poll_ack(now));
                let mut acks = flow_acks
                    .into_iter()
                    .map(|flow_ack| {
                        report.offered_back += 1;
                        ack(report.offered_back, flow_ack)
                    })
                    .collect();
                b.endpoint.handle_tun(now, &mut acks);
                let slow_start = w.cwnd < w.ssthresh;
                for p in &at_a {
                    w.on_ack(now, read_ack(p), report.offered);
                }
                if trace && slow_start && w.cwnd >= w.ssthresh {
                    eprintln!("  {:?} slow start over at {:.0} packets; least round trip {:?}, round's {:?}", now - t0, w.cwnd, w.min_rtt, w.round_min);
                }
                if trace && now >= next_trace && now - t0 < trace_for {
                    next_trace = now + TRACE_WINDOW_EVERY;
                    trace_window(now - t0, w, &mut a.endpoint, n, now);
                    // What B held since the line before: the hold bar's p99 is made there.
                    let waits = b.endpoint.waits().since(&traced_waits);
                    let stats = b.endpoint.reorder_stats();
                    eprintln!(
                        "    at B: hold {:?}; {} waits, p99 {:?}, max {:?}; {} requested, {} repaired, {} late, {} skipped lost, {} timed out; not resent by A so far: {} gone, {} too late",
                        b.endpoint.hold(),
                        waits.count(),
                        waits.quantile(0.99),
                        waits.quantile(1.0),
                        stats.repairs_requested - traced_stats.repairs_requested,
                        stats.repaired - traced_stats.repaired,
                        stats.repaired_late - traced_stats.repaired_late,
                        stats.skipped_loss - traced_stats.skipped_loss,
                        stats.skipped_timeout - traced_stats.skipped_timeout,
                        a.endpoint.stats().repairs_gone,
                        a.endpoint.stats().repairs_too_late,
                    );
                    traced_waits = b.endpoint.waits().clone();
                    traced_stats = stats;
                }
                if w.rto_at(report.offered).is_some_and(|t| t <= now) {
                    w.on_rto(now, report.offered);
                }
                let mut data = Vec::new();
                if now >= next_send && now < last_send {
                    while w.may_send(now, report.offered) {
                        report.offered += 1;
                        w.on_send(now, report.offered);
                        data.push(segment(PACKET, report.offered));
                    }
                }
                a.endpoint.handle_tun(now, &mut data);
                // Acks and what they clock out leave at once, not at the top
                // of the next round.
                transmit(now, true, &mut a.endpoint, &mut to_b, &mut wire, &mut out);
                transmit(now, false, &mut b.endpoint, &mut to_a, &mut wire, &mut out);
            }
            while let Some(e) = a.endpoint.poll_event() {
                if matches!(e.change, PathChange::Down { .. }) {
                    report.downs += 1;
                }
                if matches!(e.change, PathChange::SetAside { .. }) {
                    let at = &mut report.set_aside_after[e.path.index()];
                    at.get_or_insert(now.saturating_duration_since(data_from));
                    report.set_asides[e.path.index()] += 1;
                }
                if trace {
                    eprintln!(
                        "  {:?} {e:?} {:?}",
                        now - t0,
                        a.endpoint.estimate(e.path, now)
                    );
                }
            }
            while let Some(e) = b.endpoint.poll_event() {
                if matches!(e.change, PathChange::Down { .. }) {
                    report.downs += 1;
                }
                if trace {
                    eprintln!("  {:?} at B: {e:?}", now - t0);
                }
            }
        }
        for (i, link) in to_b.iter().enumerate() {
            let id = PathId(i as u8);
            let link = link.stats();
            eprintln!(
                "  path {i}: {:?} {:?}; dropped {} at the queue, {} at random; {} parity halves, {} rebuilt",
                a.endpoint.state(id),
                a.endpoint.estimate(id, now),
                link.drop_queue_full,
                link.drop_loss,
                a.endpoint.path_stats(id).tx_parity,
                b.endpoint.path_stats(id).rebuilt,
            );
        }
        report.delivered = b.delivered;
        report.delivered_back = a.delivered;
        if trace {
            eprintln!("  at A, what B sent: {:?}", a.endpoint.reorder_stats());
        }
        report.stats = b.endpoint.reorder_stats();
        report.hold_p99 = b.endpoint.waits().quantile(0.99);
        report.hold_p99_steady = first_second_waits
            .as_ref()
            .and_then(|earlier| b.endpoint.waits().since(earlier).quantile(0.99));
        report.waits_ended_steady = WaitEnd::ALL
            .iter()
            .zip(&first_second_ended)
            .map(|(&end, earlier)| b.endpoint.waits_ended_by(end).since(earlier))
            .collect();
        let sent: Vec<u64> = (0..n)
            .map(|i| {
                let s = a.endpoint.path_stats(PathId(i as u8));
                report.resent += s.resent;
                s.tx_packets - s.resent
            })
            .collect();
        report.estimates = (0..n)
            .map(|i| a.endpoint.estimate(PathId(i as u8), now))
            .collect();
        report.delay_exit_window = window.as_ref().and_then(|w| w.delay_exit_window);
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
        "{name} (seed {seed}): {:.2}% delivered ({:.2}% back), shares {:?}, repaired {} of {} asked ({} late, {} resent), skipped {} lost / {} timeout, hold p99 {:?}, down after {:?}, {} downs",
        100.0 * report.fraction(),
        100.0 * report.delivered_back as f64 / report.offered_back.max(1) as f64,
        report.shares.iter().map(|s| (s * 100.0).round()).collect::<Vec<_>>(),
        report.stats.repaired,
        report.stats.repairs_requested,
        report.stats.repaired_late,
        report.resent,
        report.stats.skipped_loss,
        report.stats.skipped_timeout,
        report.hold_p99,
        report.down_after,
        report.downs
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
    for (loss, seed) in [(0.03, 4), (0.15, 5)] {
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
        // Gaps are found lost on evidence: every one is either repaired (in
        // time, or handed out late when the packets behind it have waited
        // the hold) or released at once; hardly any is given up unasked.
        let repaired = s.repaired + s.repaired_late;
        let gaps = s.repaired + s.skipped_loss + s.skipped_timeout;
        assert!(
            (repaired + s.skipped_loss) as f64 >= 0.95 * gaps as f64,
            "{s:?}"
        );
        if loss < 0.1 {
            // Worth keeping: nearly every loss is repaired.
            assert!(r.shares[0] > 0.25, "lossy path dropped {:?}", r.shares);
            assert!(
                repaired as f64 >= 0.98 * s.repairs_requested as f64,
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
    assert!(
        r.stats.repaired + r.stats.repaired_late > 0,
        "{:?}",
        r.stats
    );
    assert!(r.fraction() > 0.995, "delivered {:.4}", r.fraction());
    // Within a second of the cut, the survivors carry what is offered.
    assert!(
        r.mbps(4.0, 6.0) > 0.95 * 180.0,
        "{:.1} Mbit/s",
        r.mbps(4.0, 6.0)
    );
}

/// Lab sweep seed 6, #5 (simulated): the flow's ACKs take the small path,
/// where they arrive a hair sooner than behind the big path's data, and
/// it is cut from 3.5 s to 6 s. Return the run and what the big path
/// carried alone.
fn ack_path_cut(name: &str, seed: u64) -> (Report, f64) {
    let paths = [spec(8.0, 64.0, 3.0, 0.005), spec(138.0, 63.0, 0.0, 0.0)];
    let mut sim = Sim::window(seed, &paths, 10.5);
    sim.changes = vec![(3.5, Change::Cut(0)), (6.0, Change::Restore(0))];
    let alone = path_alone_window(seed, paths[1], 10.5, &[], Baseline::WireGuard, Cc::Cubic)
        .mbps(0.5, 10.5);
    (run(name, sim), alone)
}

#[test]
fn the_acks_a_cut_path_took_down_are_resent_and_the_flow_goes_on() {
    // Its data was all ACKed on the cut path until B marked it down 290
    // ms later, and then nothing was left to ACK: A's window stayed full
    // until its retransmission timeout, a second later. B resends what it
    // sent on the path since its newest echoed probe left, none of which
    // A can know it misses.
    let (mut stalled, mut all, mut alone) = (0.0, 0.0, 0.0);
    let seeds = [604, 10604, 20604];
    for seed in seeds {
        let (r, big_alone) = ack_path_cut("ACKs on a cut path", seed);
        stalled += r.mbps(3.5, 4.5);
        all += r.mbps(0.5, 10.5);
        alone += big_alone;
    }
    let runs = seeds.len() as f64;
    let (stalled, all, alone) = (stalled / runs, all / runs, alone / runs);
    let said = format!(
        "{stalled:.1} Mbit/s in the second after the cut, {all:.1} over 10 s, {alone:.1} over the big path alone (means of {runs} seeds)"
    );
    eprintln!("ACKs on a cut path: {said}");
    // Without the resend: 8.5, 73.7 and 118.5. With it, the burst A's
    // window lets out at once when the ACKs come overflows the big path,
    // and the flow cuts its window: 59.5 and 101.0. With one ACK in four
    // on the big path as well (see the next test), the flow hardly
    // notices the cut: 128.1 and 116.1.
    assert!(stalled >= 0.25 * alone, "{said}");
    assert!(all >= 0.75 * alone, "{said}");
}

#[test]
fn acks_keep_coming_while_the_path_they_take_is_cut_and_not_yet_down() {
    // One ACK in four takes the big path, which is as near and clean, and
    // keeps the window moving in the 290 ms before B marks the small one
    // down.
    let (mut before_down, mut alone) = (0.0, 0.0);
    let seeds = [605, 10605, 20605];
    for seed in seeds {
        let (r, big_alone) = ack_path_cut("ACKs on a cut path, not yet down", seed);
        before_down += r.mbps(3.6, 3.8);
        alone += big_alone;
    }
    let runs = seeds.len() as f64;
    let (before_down, alone) = (before_down / runs, alone / runs);
    let said = format!(
        "{before_down:.1} Mbit/s from 100 to 300 ms after the cut, {alone:.1} over the big path alone (means of {runs} seeds)"
    );
    eprintln!("ACKs on a cut path, not yet down: {said}");
    // Without the spare ACKs: 0.0 Mbit/s; with them, 127.7 (118.5 alone).
    assert!(before_down >= 0.5 * alone, "{said}");
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
fn a_flow_keeps_its_round_trip_and_its_repairs_while_a_far_path_is_cut() {
    // Lab sweep seed 9127, #5: a clean 224 Mbit/s path 32.5 ms away, cut
    // from 3.5 to 5.5 s, beside a 299 Mbit/s one 9.5 ms away losing 1.7%.
    // Cut, the far path left the hold: the flow's round trip fell from
    // its 46 ms to the near path's 20, under a window sized for 46, and a
    // repair's 20 ms round trip was no longer within the patience, so
    // every loss there reached the flow as one: simulated, CUBIC fell
    // from 1047 packets to 67. Once the far path was back, the near one,
    // its repairs judged against that spread, was set aside, and the flow
    // made 63-84 Mbit/s for the rest of the run in the lab. Now the cut
    // path keeps its place in the hold while it is down.
    let paths = [spec(224.0, 32.5, 5.0, 0.0), spec(299.0, 9.5, 2.0, 0.017)];
    let mut after = Vec::new();
    for seed in 3211..=3222 {
        let mut sim = Sim::window(seed, &paths, 10.0);
        sim.changes = vec![(4.0, Change::Cut(0)), (6.0, Change::Restore(0))];
        let r = run("far path cut beside a lossy one", sim);
        let (before, cut) = (r.mbps(2.0, 4.0), r.mbps(4.5, 6.0));
        after.push(r.mbps(6.5, 10.0));
        eprintln!(
            "seed {seed}: {before:.1} Mbit/s before the cut, {cut:.1} during, {:.1} once it is back",
            after[after.len() - 1]
        );
    }
    // Without: 27-68 Mbit/s once the far path is back, 48 on average.
    let mean = after.iter().sum::<f64>() / after.len() as f64;
    assert!(
        mean >= paths[0].rate_mbit / 3.0,
        "{mean:.1} Mbit/s on average once the far path is back"
    );
}

#[test]
fn a_flow_back_on_its_big_near_path_after_a_cut_is_not_held_for_a_far_one() {
    // Lab sweep seed 10957, #13: a clean 317 Mbit/s path 8 ms away, cut
    // from 3 to 5.5 s, beside a clean 91 Mbit/s one 25.5 ms away and a
    // 54 Mbit/s one losing 1.9%, set aside. Cut, the flow's window fell
    // to what the 91 carries (1780 packets to 559 in the lab); back, held
    // for the 91's delay, it made 180-226 Mbit/s to the end of the run,
    // CUBIC regrowing its window over seconds. On the near path alone
    // that window fills it.
    let paths = [
        spec(54.0, 39.5, 1.5, 0.019),
        spec(91.0, 25.5, 0.0, 0.0),
        spec(317.0, 8.0, 3.0, 0.0),
    ];
    let mut after = Vec::new();
    for seed in 4401..=4406 {
        let mut sim = Sim::window(seed, &paths, 10.0);
        sim.changes = vec![(3.0, Change::Cut(2)), (5.5, Change::Restore(2))];
        let r = run("big near path cut and back", sim);
        let back_mbps = r.mbps(6.5, 10.0);
        after.push(back_mbps);
        let back: Vec<String> = (11..20)
            .map(|half| {
                format!(
                    "{:.0}",
                    r.mbps(f64::from(half) / 2.0, f64::from(half + 1) / 2.0)
                )
            })
            .collect();
        eprintln!(
            "seed {seed}: {:.1} Mbit/s before the cut, {:.1} once the big path is back (by half second: {})",
            r.mbps(1.0, 3.0),
            back_mbps,
            back.join(" ")
        );
    }
    let alone =
        path_alone_window(1, paths[2], 10.0, &[], Baseline::WireGuard, Cc::Cubic).mbps(1.0, 10.0);
    // Without: 221-268 Mbit/s once it is back, 235 on average, against
    // 304 over the big path alone.
    let mean = after.iter().sum::<f64>() / after.len() as f64;
    assert!(
        mean >= 0.9 * alone,
        "{mean:.1} Mbit/s on average once the big path is back, {alone:.1} over it alone"
    );
}

#[test]
fn a_path_set_aside_for_its_loss_carries_the_flow_while_the_clean_big_one_is_cut() {
    // Lab sweep seed 8167, #10: a lossy 60 Mbit/s path, set aside beside
    // a clean 141 Mbit/s one, stayed aside while the big path was cut for
    // three seconds, and the flow had a 9 Mbit/s path alone: 30-40 Mbit/s
    // over the run against 89 for the big path alone. The lossy path here
    // has 45 Mbit/s, under a quarter of the capacity: one with more is
    // judged by what its parity leaves, and kept.
    let paths = [
        spec(9.0, 59.0, 0.0, 0.0),
        spec(141.0, 43.5, 3.5, 0.0),
        spec(45.0, 45.0, 4.0, 0.012),
    ];
    let mut during = Vec::new();
    for seed in 3231..=3238 {
        let mut sim = Sim::window(seed, &paths, 10.0);
        sim.changes = vec![(4.0, Change::Cut(1)), (7.0, Change::Restore(1))];
        let r = run("big clean path cut beside a lossy one", sim);
        let mbps = r.mbps(4.5, 7.0);
        eprintln!(
            "seed {seed}: {mbps:.1} Mbit/s while the big path is cut, set aside {:?} times, first after {:?}",
            r.set_asides[2], r.set_aside_after[2]
        );
        if r.set_aside_after[2].is_some_and(|t| t < Duration::from_secs(4)) {
            during.push(mbps);
        }
    }
    assert!(
        during.len() >= 4,
        "the lossy path was set aside before the cut in {} seeds",
        during.len()
    );
    // Without: 2.6-8.0 Mbit/s, the small path alone; with, 12-47.
    let mean = during.iter().sum::<f64>() / during.len() as f64;
    assert!(
        mean >= 2.0 * paths[0].rate_mbit,
        "{mean:.1} Mbit/s on average while the big path is cut"
    );
}

#[test]
fn a_constant_rate_stream_at_half_the_capacity_of_unequal_paths_loses_nothing() {
    // Video, RTP or QUIC at a steady rate: half of 50 + 40 + 30 Mbit/s,
    // more than the best path carries, over paths of 5, 20 and 35 ms with a
    // little jitter. Nothing may be lost, in either direction.
    let jittery = |rate, delay| PathSpec {
        jitter_ms: 1.0,
        ..path(rate, delay, 0.0)
    };
    let paths = [jittery(50.0, 5), jittery(40.0, 20), jittery(30.0, 35)];
    let mut sim = Sim::new(8, &paths, 60.0, 10.0);
    sim.tail = 1.0;
    let r = run("constant rate", sim);
    assert_eq!(r.delivered, r.offered, "{:?}", r.stats);
    assert_eq!(r.delivered_back, r.offered_back, "back: {:?}", r.stats);
}

/// A path with jitter.
fn jittery(rate_mbit: f64, delay_ms: u64, jitter_ms: u64, loss: f64) -> PathSpec {
    PathSpec {
        jitter_ms: jitter_ms as f64,
        ..path(rate_mbit, delay_ms, loss)
    }
}

/// A frame on a path alone: arrival time, order sent; then to B?, the link's
/// cut epoch when sent, the packet's number (data) and the acknowledgement
/// (acks).
type PathAloneFrame = (Instant, u64, bool, u64, u64, FlowAck);

/// A window-based bulk flow over one path alone, crossing it as
/// `baseline` says: what one TCP flow gets from the path without mptun.
/// Only `per_tick`, `offered` and `delivered` are filled in.
fn path_alone_window(
    seed: u64,
    spec: PathSpec,
    seconds: f64,
    changes: &[(f64, bool)],
    baseline: Baseline,
    cc: Cc,
) -> Report {
    let (data_frame, ack_frame) = baseline.frames();
    let t0 = Instant::now();
    let mut to_b = direction(spec, spec.loss, seed);
    let mut to_a = direction(spec, spec.loss, seed ^ 0x5eed);
    let mut due: BinaryHeap<Reverse<PathAloneFrame>> = BinaryHeap::new();
    let mut order = 0u64;
    let send_ack = |to_a: &mut Direction,
                    due: &mut BinaryHeap<Reverse<PathAloneFrame>>,
                    order: &mut u64,
                    now: Instant,
                    flow_ack: FlowAck| {
        if let Some(at) = to_a.handle_arrival(now, ack_frame) {
            *order += 1;
            due.push(Reverse((at, *order, false, to_a.epoch(), 0, flow_ack)));
        }
    };
    let mut sender = WindowSender::new(t0, cc, seed);
    let mut report = Report {
        per_tick: vec![0; (seconds * 10.0).ceil() as usize + 1],
        ..Report::default()
    };
    let mut flow_at_b = FlowReceiver::default();
    let mut changes = changes.to_vec();
    changes.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut changes = changes.into_iter().peekable();
    let start = t0 + 500 * MS;
    let end = t0 + Duration::from_secs_f64(seconds);
    let mut now = start;
    while now < end {
        while let Some(&(at, up)) = changes.peek() {
            if t0 + Duration::from_secs_f64(at) > now {
                break;
            }
            changes.next();
            to_b.set_up(up);
            to_a.set_up(up);
        }
        while let Some(&Reverse((at, _, to_b_side, epoch, n, ack))) = due.peek() {
            if at > now {
                break;
            }
            due.pop();
            let link_epoch = if to_b_side {
                to_b.epoch()
            } else {
                to_a.epoch()
            };
            if epoch != link_epoch {
                continue; // in flight when the path was cut
            }
            if to_b_side {
                flow_at_b.deliver(now, n);
                flow_at_b.judge(now, sender.min_rtt);
                report.delivered += 1;
                if let Some(bucket) = report
                    .per_tick
                    .get_mut(((now - t0).as_millis() / 100) as usize)
                {
                    *bucket += 1;
                }
                if let Some(flow_ack) = flow_at_b.poll_ack(now) {
                    send_ack(&mut to_a, &mut due, &mut order, now, flow_ack);
                }
            } else {
                sender.on_ack(now, ack, report.offered);
            }
        }
        // A segment left alone.
        if let Some(flow_ack) = flow_at_b.poll_ack(now) {
            send_ack(&mut to_a, &mut due, &mut order, now, flow_ack);
        }
        if sender.rto_at(report.offered).is_some_and(|t| t <= now) {
            sender.on_rto(now, report.offered);
        }
        // The window only opens as acknowledgements come, or as BBR's pace
        // allows.
        {
            while sender.may_send(now, report.offered) {
                report.offered += 1;
                // CUBIC's sends are not timed on the path alone, so it
                // runs without HyStart's round-trip samples there.
                if cc == Cc::Bbr {
                    sender.on_send(now, report.offered);
                }
                if let Some(at) = to_b.handle_arrival(now, data_frame) {
                    order += 1;
                    due.push(Reverse((
                        at,
                        order,
                        true,
                        to_b.epoch(),
                        report.offered,
                        FlowAck::default(),
                    )));
                }
            }
        }
        let mut next = end;
        if let Some(Reverse((at, ..))) = due.peek() {
            next = next.min(*at);
        }
        if let Some(rto) = sender.rto_at(report.offered) {
            next = next.min(rto);
        }
        if let Some(paced) = sender.paced_at(report.offered) {
            next = next.min(paced);
        }
        if let Some(ack_due) = flow_at_b.ack_due() {
            next = next.min(ack_due);
        }
        if let Some(&(at, _)) = changes.peek() {
            next = next.min(t0 + Duration::from_secs_f64(at));
        }
        now = next.max(now);
    }
    report
}

/// Run a bulk flow over `paths` through the tunnel, and through one
/// WireGuard tunnel over the best of them alone, and assert that mptun is
/// at least 0.95 of it, in goodput after the first seconds. Measured
/// against WireGuard, not the path straight: these cases weigh the
/// scheduling, not the 24 bytes of trailer every packet carries (see
/// [`Baseline`]).
fn assert_bulk_reaches_the_best_path(name: &str, seed: u64, paths: &[PathSpec], best: usize) {
    let (all, alone) = bulk_and_best_path(name, seed, paths, best);
    assert!(
        all >= 0.95 * alone,
        "{name}: {all:.1} Mbit/s over {} paths, {alone:.1} over the best alone",
        paths.len()
    );
}

/// Assert that a 10 s transfer, measured from its first half second as the
/// lab's sweep measures it (slow start included), reaches 0.95 of the same
/// transfer through WireGuard over the best of `paths` alone.
fn assert_transfer_reaches_the_best_path(name: &str, seed: u64, paths: &[PathSpec], best: usize) {
    let (all, alone) = flow_and_best_path(name, seed, paths, best, 0.5, 10.5, Cc::Cubic);
    assert!(
        all >= 0.95 * alone,
        "{name}: {all:.1} Mbit/s over {} paths, {alone:.1} over the best alone",
        paths.len()
    );
}

/// Return the goodput, Mbit/s after the first seconds, of a bulk flow
/// through the tunnel over `paths`, and of one through WireGuard over the
/// best of them alone.
fn bulk_and_best_path(name: &str, seed: u64, paths: &[PathSpec], best: usize) -> (f64, f64) {
    flow_and_best_path(name, seed, paths, best, 5.0, 20.0, Cc::Cubic)
}

/// Return the goodput, Mbit/s from `from` to `to` seconds, of a flow
/// with congestion control `cc` through the tunnel over `paths`, and of
/// one through WireGuard over the best of them alone.
fn flow_and_best_path(
    name: &str,
    seed: u64,
    paths: &[PathSpec],
    best: usize,
    from: f64,
    to: f64,
    cc: Cc,
) -> (f64, f64) {
    let all = run(name, Sim::window_with(seed, paths, to, cc));
    let alone = path_alone_window(seed, paths[best], to, &[], Baseline::WireGuard, cc);
    let (all, alone) = (all.mbps(from, to), alone.mbps(from, to));
    eprintln!("{name}: {all:.1} Mbit/s over all paths, {alone:.1} over the best alone");
    (all, alone)
}

#[test]
#[ignore = "fails today: 15 of 20 seeds reach 0.8 of the sum (20 with SIM_BACK_STEADY=1); steadying each ACK to the top of its path's jitter passed 20 of 20 but cost the simulated sweep; the scheduler work of issue 14"]
fn acks_on_a_jittery_path_do_not_end_slow_start() {
    // Simulated sweep seed 7717 #7: four clean paths of 580 Mbit/s in all,
    // the two nearest jittering by 4.5-5 ms. The flow's ACKs come back on
    // those, and its round trip moves with their jitter, slowly (a path's
    // jitter keeps its packets in order): eight high samples in a round
    // were a full pipe to HyStart, which ended slow start at 182 packets;
    // CUBIC grew to 490 in the ten seconds, 53 Mbit/s.
    let paths = [
        spec(135.0, 16.5, 5.0, 0.0),
        spec(183.0, 19.5, 4.5, 0.0),
        spec(180.0, 40.0, 0.0, 0.0),
        spec(102.0, 34.5, 0.0, 0.0),
    ];
    assert_seeds_reach_the_sum("jittery ACKs", &paths, 7701..7721, 0.8, 18);
}

/// Assert that at least `at_least` of `seeds` give a 10 s flow over
/// `paths`, from its first second, `fraction` of the sum of WireGuard over
/// each path alone: where a flow leaves slow start is chance, so a row is
/// judged over many.
fn assert_seeds_reach_the_sum(
    name: &str,
    paths: &[PathSpec],
    seeds: std::ops::Range<u64>,
    fraction: f64,
    at_least: usize,
) {
    let count = seeds.clone().count();
    let reached = seeds
        .filter(|&seed| {
            let all = run(name, Sim::window(seed, paths, 10.0)).mbps(1.0, 10.0);
            let sum: f64 = paths
                .iter()
                .map(|&p| {
                    path_alone_window(seed, p, 10.0, &[], Baseline::WireGuard, Cc::Cubic)
                        .mbps(1.0, 10.0)
                })
                .sum();
            eprintln!("{name}, seed {seed}: {all:.1} Mbit/s over all, {sum:.1} the sum alone");
            all >= fraction * sum
        })
        .count();
    assert!(
        reached >= at_least,
        "{reached} of {count} seeds reach {fraction} of the sum"
    );
}

#[test]
fn a_bulk_flow_uses_a_far_fast_path_beside_a_near_slow_one() {
    // 150 Mbit/s 15 ms further away than 40 Mbit/s: earliest arrival alone
    // fills the near path until its queue is 15 ms deep, and the flow,
    // backing off at its losses, never reaches the far one.
    let paths = [jittery(150.0, 50, 2, 0.0), jittery(40.0, 35, 2, 0.0)];
    assert_bulk_reaches_the_best_path("near slow, far fast", 11, &paths, 0);
}

#[test]
fn a_bulk_flow_uses_the_biggest_path_among_four_unequal_ones() {
    let paths = [
        jittery(80.0, 80, 0, 0.01),
        jittery(100.0, 2, 5, 0.0),
        jittery(10.0, 5, 0, 0.0),
        jittery(200.0, 35, 0, 0.0),
    ];
    assert_bulk_reaches_the_best_path("four unequal", 12, &paths, 3);
}

const fn spec(rate_mbit: f64, delay_ms: f64, jitter_ms: f64, loss: f64) -> PathSpec {
    PathSpec {
        rate_mbit,
        delay_ms,
        jitter_ms,
        loss,
    }
}

#[test]
fn a_big_path_a_little_further_away_is_not_starved_by_a_near_jittery_one() {
    // Sweep seed 1, #15. The near 13 Mbit/s path's 4 ms of jitter looks
    // like a queue the model does not have; were its capacity then
    // forgotten or never known, the path would be taken for 100 Mbit/s,
    // overrun, and the flow's losses would keep it from the 204 Mbit/s
    // path. Whether one run's flow loses there early is chance, so the
    // scenario is judged over several.
    let paths = [
        spec(7.0, 79.5, 3.5, 0.0),
        spec(13.0, 14.0, 4.0, 0.0),
        spec(32.0, 38.5, 0.0, 0.0),
        spec(204.0, 35.5, 0.0, 0.0),
    ];
    let seeds = 110..119;
    let reached = seeds
        .clone()
        .filter(|&seed| {
            let (all, alone) = bulk_and_best_path("near jittery, big further", seed, &paths, 3);
            all >= 0.95 * alone
        })
        .count();
    assert!(
        reached >= 7,
        "{reached} of {} seeds reach the best path",
        seeds.count()
    );
}

#[test]
fn slow_paths_are_known_from_their_trains_before_data_needs_them() {
    // Sweep seed 1123, #12, as the lab runs it. Taken for 100 Mbit/s until
    // they carry data, the small far paths were overrun as soon as a flow
    // in slow start reached them, and their queues ended its slow start at
    // half the paths' bandwidth-delay product.
    let paths = [
        spec(148.0, 13.0, 0.0, 0.0),
        spec(11.0, 64.5, 0.0, 0.0),
        spec(84.0, 11.0, 0.0, 0.0),
        spec(68.0, 14.5, 0.0, 0.0),
        spec(7.0, 49.0, 2.5, 0.028),
        spec(36.0, 79.0, 0.0, 0.023),
    ];
    // No data before the end: only the trains measure the paths.
    let report = run("trains", Sim::new(5, &paths, 1.0, 0.5));
    for (i, (path, estimate)) in paths.iter().zip(&report.estimates).enumerate() {
        let train = estimate.train_mbps.unwrap_or(f64::NAN);
        eprintln!("path {i}: trains {train:.1} Mbit/s of {}", path.rate_mbit);
        // Below the path's rate by the headers the inner bytes leave out.
        assert!(
            (0.8 * path.rate_mbit..=1.1 * path.rate_mbit).contains(&train),
            "path {i}: trains {train:.1} Mbit/s of {}",
            path.rate_mbit
        );
        assert!(estimate.rate_mbps.is_none(), "path {i} carried data");
    }
}

#[test]
fn fast_paths_are_known_from_their_trains_where_arrivals_come_in_bunches() {
    // Sweep seed 8839, #24 and #18's big paths, as the lab runs them: its
    // emulator hands over what is due within a quarter millisecond of
    // waking at once, so a short train crossing a fast path in half a
    // millisecond arrived in uneven bunches and read up to eight times the
    // path's rate (352 Mbit/s read at 2809). Counted at that, a path's
    // first queued samples cannot be judged against its trains.
    let paths = [
        spec(352.0, 64.5, 0.0, 0.0),
        spec(277.0, 30.5, 0.0, 0.0),
        spec(181.0, 30.0, 0.0, 0.0),
        spec(54.0, 51.5, 0.0, 0.024),
    ];
    let mut off = Vec::new();
    for seed in 1..=10 {
        let sim = Sim {
            release: Release::lab(Duration::from_micros(200)),
            ..Sim::new(seed, &paths, 1.0, 1.5)
        };
        let report = run("bunched arrivals", sim);
        for (i, (path, estimate)) in paths.iter().zip(&report.estimates).enumerate() {
            let train = estimate.train_mbps.unwrap_or(f64::NAN);
            // Below the path's rate by the headers the inner bytes leave out.
            if !(0.8 * path.rate_mbit..=1.1 * path.rate_mbit).contains(&train) {
                off.push((seed, i, train.round()));
            }
        }
    }
    assert!(off.is_empty(), "seed, path, trains' Mbit/s: {off:?}");
}

#[test]
fn jittery_paths_are_not_taken_for_slow_ones_in_slow_start() {
    // Sweep seed 2, #4. While the flow is small, a few packets a probe
    // interval, probes on the three jittery paths meet delays a few ms
    // above the least: taken for a standing queue, the path's capacity
    // would be set to what the flow sent on it (1 to 3 Mbit/s), the
    // slow paths overrun, and the flow leave slow start at a third of the
    // best path.
    let paths = [
        spec(5.0, 20.5, 0.0, 0.0),
        spec(74.0, 73.0, 1.5, 0.0),
        spec(69.0, 30.5, 4.0, 0.0),
        spec(11.0, 30.0, 0.0, 0.01),
        spec(64.0, 39.0, 4.5, 0.0),
        spec(179.0, 75.0, 0.0, 0.0),
    ];
    let report = run("jittery, big and small", Sim::window(203, &paths, 10.0));
    for i in [1, 2, 4] {
        let rate = report.estimates[i].rate_mbps.unwrap_or(0.0);
        assert!(
            rate >= 0.5 * paths[i].rate_mbit,
            "path {i}: {rate:.1} Mbit/s of {}",
            paths[i].rate_mbit
        );
    }
}

#[test]
fn a_big_jittery_path_is_not_measured_by_the_little_a_flow_in_slow_start_sends() {
    // Sweep seed 1, #1. Early in slow start the far 352 Mbit/s path
    // carries a few packets a probe interval, and its 2 ms of jitter reads
    // as a queue before the jitter itself is measured: its capacity was
    // set to what was sent (1 Mbit/s), the flow's packets went to the near
    // path's queue, and slow start ended early: 0.44 of the best path.
    // The trains read it at over 100 Mbit/s.
    let paths = [spec(131.0, 36.0, 0.0, 0.0), spec(352.0, 70.5, 2.0, 0.0)];
    assert_measured_in_slow_start("big jittery far path", 120..126, &paths, 1, 50.0);
}

/// Assert that over `paths`, with each of `seeds`, path `path` is measured
/// at `at_least_mbit` or more 1.5 s into a bulk flow.
fn assert_measured_in_slow_start(
    name: &str,
    seeds: std::ops::Range<u64>,
    paths: &[PathSpec],
    path: usize,
    at_least_mbit: f64,
) {
    for seed in seeds {
        let report = run(name, Sim::window(seed, paths, 1.5));
        let estimate = &report.estimates[path];
        let rate = estimate.rate_mbps.unwrap_or(f64::NAN);
        assert!(
            rate >= at_least_mbit,
            "seed {seed}: path {path} taken for {rate:.1} Mbit/s, trains {:?}",
            estimate.train_mbps
        );
    }
}

#[test]
fn a_big_jittery_path_is_not_measured_by_the_few_steps_of_jitter_seen_before_a_flow() {
    // Sweep seed 1, run 2, #29. The flow starts a few probes after the
    // paths come up, and from then on keeps them busy: the jitter of the
    // 364 Mbit/s path (3.5 ms) was the mean of two or three steps, a
    // fraction of it, and the trains, spread by that jitter, read it at
    // under 40 Mbit/s. Its jitter taken for a queue set its capacity to
    // the little the flow sent early (9 Mbit/s): 0.1 of the best path.
    let paths = [
        spec(364.0, 24.0, 3.5, 0.0),
        spec(33.0, 22.5, 5.0, 0.0),
        spec(8.0, 49.0, 0.0, 0.0),
    ];
    // Still in slow start: measured at a half to all of its rate, more
    // than twice the other two together.
    assert_measured_in_slow_start("big jittery near path", 20128..20134, &paths, 0, 100.0);
}

#[test]
fn a_big_jittery_path_is_not_read_as_a_small_one_by_a_flow_at_once() {
    // Sweep seed 2411, #16: 0.44 of the 376 Mbit/s path alone, the flow
    // starting half a second after the paths came up. Its short trains,
    // spread by ±4.5 ms of jitter, read it at 33 Mbit/s, and the long
    // train that would have read it at the initial guess or more was never
    // sent: each site measures its direction's jitter from the echoes in
    // the other's probes, and the first to have it slowed to the idle
    // probe rate, leaving the other short of steps; and the mean of the
    // first few steps, a fraction of the jitter, made the one train that
    // crossed within the jitter look slower than it. Taken for 33 Mbit/s,
    // the path was shunned and the flow left slow start at the two small
    // paths' queues.
    let paths = [
        spec(21.0, 32.0, 1.5, 0.0),
        spec(15.0, 12.0, 3.0, 0.0),
        spec(376.0, 18.5, 4.5, 0.0),
    ];
    let mut low = Vec::new();
    for seed in 241100..241140 {
        let report = run(
            "big jittery path, flow at once",
            Sim::window(seed, &paths, 0.6),
        );
        let train = report.estimates[2].train_mbps.unwrap_or(0.0);
        // Half the initial guess: below it, a queued delivery-rate sample
        // of the little sent early can be taken for the capacity.
        if train < 50.0 {
            low.push((seed, train));
        }
    }
    assert!(low.is_empty(), "read by its trains at: {low:?}");
}

#[test]
fn a_big_jittery_path_is_measured_by_a_train_longer_than_its_jitter() {
    // Lab sweep seed 5581, #13: 0.40 of the 303 Mbit/s path alone. Its
    // ±4.5 ms of jitter spread each 16-packet train over up to 9 ms, and
    // the trains read 20-110 Mbit/s; taken for that, the path was
    // starved while the flow overran the two small far ones, and CUBIC,
    // leaving slow start at a few hundred packets, kept to that window
    // for the rest of the transfer. A train long enough to span twice
    // the jitter at the initial guess reads it at that guess or more.
    let paths = [
        spec(21.0, 51.0, 0.0, 0.0),
        spec(28.0, 76.0, 5.0, 0.0),
        spec(303.0, 26.0, 4.5, 0.0),
    ];
    for seed in 1301..1304 {
        let (all, alone) = flow_and_best_path(
            "big jittery near path",
            seed,
            &paths,
            2,
            0.5,
            10.5,
            Cc::Cubic,
        );
        assert!(
            all >= 0.8 * alone,
            "seed {seed}: {all:.1} Mbit/s over the three paths, {alone:.1} over the big one alone"
        );
    }
}

#[test]
fn a_loss_at_one_path_s_queue_is_repaired_while_others_have_room() {
    // Sweep seed 1, #10. The near paths fill first; losses at their
    // queues are repaired on the paths with room rather than left to the
    // inner flow, which would otherwise back off before the far 110 and
    // 84 Mbit/s paths carry anything.
    let paths = [
        spec(29.0, 71.0, 0.0, 0.0),
        spec(12.0, 7.0, 2.0, 0.018),
        spec(110.0, 47.0, 1.0, 0.0),
        spec(84.0, 40.0, 0.0, 0.0),
        spec(7.0, 58.5, 0.0, 0.0),
        spec(125.0, 17.0, 0.0, 0.0),
    ];
    assert_bulk_reaches_the_best_path("six, near ones small", 109, &paths, 5);
}

#[test]
fn a_bulk_flow_keeps_off_a_path_too_small_to_be_worth_its_losses() {
    // Sweep seed 6, #4: 218 Mbit/s, and 6 Mbit/s 11 ms nearer with 2.6%
    // random loss. Every few milliseconds a segment lost on the small path
    // holds the flow for its repair's round trip; the flow leaves slow
    // start at a few dozen packets and gets 10-30 Mbit/s. The small
    // path would add 3%: TCP keeps off it. What is still missing to the
    // best path alone is the end of slow start: the big path's queue
    // overflows by thousands of packets, and their repairs, sent the
    // soonest way, overflow the small path in turn.
    let paths = [spec(218.0, 62.5, 0.0, 0.0), spec(6.0, 51.0, 1.5, 0.026)];
    let (all, alone) = bulk_and_best_path("big, and small lossy nearer", 603, &paths, 0);
    assert!(
        all >= 0.75 * alone,
        "{all:.1} Mbit/s over both paths, {alone:.1} over the big one alone"
    );
}

#[test]
fn a_clean_path_s_overflow_in_slow_start_is_left_to_the_flow() {
    // Simulated sweep seed 6, #4, and lab sweep seed 5077, #23: a big
    // clean path, and a small one losing 2.6% at random that TCP keeps
    // off. The big path's queue overflows by thousands of packets at the
    // end of slow start; with the small path idle beside it, the drops
    // were taken for ours to repair. The repairs, sent the soonest way,
    // overflowed the small path in turn, and in the lab the packets
    // behind the gaps waited for them up to the 100 ms hold.
    let paths = [spec(218.0, 62.5, 0.0, 0.0), spec(6.0, 51.0, 1.5, 0.026)];
    let (mut resent, mut lost) = (0, 0);
    for seed in 600..606 {
        let report = run(
            "big and clean, small and lossy",
            Sim::window_with(seed, &paths, 20.0, Cc::Cubic),
        );
        resent += report.resent;
        lost += report.stats.skipped_loss;
    }
    assert!(
        resent * 10 <= lost,
        "{resent} packets resent for {lost} lost: the big path's overflow was repaired"
    );
}

#[test]
fn a_big_lossy_path_s_losses_at_its_standing_queue_are_repaired_beside_small_clean_ones() {
    // Simulated sweep seed 7151, #13: 368 Mbit/s losing 1.9% at random,
    // beside small paths TCP keeps off. The flow keeps a standing queue on
    // the big path, and its random losses there are not the queue's:
    // left to the flow, each cuts its window (0.55-0.57 of the path's
    // rate on these seeds, against 0.87-0.91 repaired).
    let paths = [
        spec(368.0, 64.0, 3.0, 0.019),
        spec(14.0, 50.0, 0.0, 0.018),
        spec(7.0, 26.0, 1.0, 0.0),
        spec(9.0, 2.0, 2.0, 0.0),
    ];
    for seed in 710..713 {
        let report = run(
            "big and lossy, small and clean",
            Sim::window_with(seed, &paths, 20.0, Cc::Cubic),
        );
        let goodput = report.mbps(5.0, 20.0);
        assert!(
            goodput >= 0.7 * 368.0,
            "seed {seed}: {goodput:.1} Mbit/s, of 368 over the big lossy path"
        );
    }
}

#[test]
fn a_small_steady_path_nearer_than_the_big_one_adds_to_it() {
    // Lab sweep seed 11071 #28: 286 Mbit/s at 54 ms, and a clean 18 at
    // 46.5 ms with 2.5 ms of jitter, a sixteenth of the big path. Kept off
    // TCP as too small, it left the flow on the big path alone, where the
    // tunnel's own bytes cap it at 0.94 of TCP over the path with no
    // tunnel (lab: 236 Mbit/s against 250). What the small path carries
    // the peer holds for the big one's 7.5 ms more anyway, so it costs the
    // flow no round trip, and adds its rate: 1.04 of WireGuard over the
    // big path on most seeds, and about 0.98 on the big path alone. Some
    // seeds overflow the small path and gain little, hence the mean.
    let paths = [spec(18.0, 46.5, 2.5, 0.0), spec(286.0, 54.0, 0.0, 0.0)];
    let ratios: Vec<f64> = (4501..4513)
        .map(|seed| {
            let (all, alone) =
                flow_and_best_path("small near, big far", seed, &paths, 1, 3.0, 10.0, Cc::Cubic);
            all / alone
        })
        .collect();
    let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
    assert!(
        mean >= 1.015,
        "over both paths, {mean:.3} of WireGuard over the big one on average ({ratios:.3?})"
    );
}

#[test]
fn a_small_path_beside_a_big_one_not_yet_filled_is_judged_by_the_big_one_s_trains() {
    // Simulated sweep seed 1, #28: 303 Mbit/s at 74.5 ms, and 12 Mbit/s
    // at 14.5 ms with 3 ms of jitter and 2.7% random loss. The flow never
    // queued the big path, whose capacity stayed at the 100 Mbit/s guess
    // though its trains said 281, so the small path counted for 12% and
    // took TCP; overrun in slow start, it ended slow start at 519
    // packets, and the flow got 81 Mbit/s against 266 over the big path
    // alone. Whether the first overflow comes early is chance, so the
    // scenario is judged over several seeds.
    let paths = [spec(303.0, 74.5, 0.0, 0.0), spec(12.0, 14.5, 3.0, 0.027)];
    let seeds = 120..130;
    let reached = seeds
        .clone()
        .filter(|&seed| {
            let (all, alone) =
                flow_and_best_path("big far, small near", seed, &paths, 0, 1.0, 10.0, Cc::Cubic);
            all >= 0.9 * alone
        })
        .count();
    assert!(
        reached >= 9,
        "{reached} of {} seeds reach 0.9 of the big path alone",
        seeds.count()
    );
}

#[test]
fn a_lossy_path_whose_repairs_come_too_late_is_set_aside() {
    // Sweep seed 8443, #3: the biggest path (311 Mbit/s) is the farthest
    // and loses 2.4%; a repair takes the 67 ms round trip of the nearest
    // path, far beyond the 40 ms spread and the margin, so every loss
    // there reaches the inner flow. In the lab, where it carried 67-93% of
    // the bytes, CUBIC got 0.11-0.57 of the clean 138 Mbit/s path alone;
    // set aside, 1.02. (The share is asserted, not the goodput: until the
    // simulated flow undid a spurious decrease a round trip late, as Linux
    // does, it forgave late repairs and would not show the cost.)
    let paths = [
        spec(311.0, 73.5, 1.0, 0.024),
        spec(16.0, 33.5, 2.5, 0.0),
        spec(138.0, 46.5, 4.0, 0.0),
    ];
    assert_share_below("far big lossy", &paths, [3001, 3002, 3003], 0, 0.3);
}

#[test]
fn a_big_lossy_path_is_kept_where_the_clean_ones_are_far_smaller() {
    // Lab sweep seed 9631, #24: a 325 Mbit/s path 68.5 ms away losing 2.3%
    // beside a clean 19 Mbit/s one. Set aside as beyond repair, it left
    // a BBR flow the small path, into which BBR kept pacing at the big
    // one's rate for rounds: 76 Mbit/s in the lab against 223 for
    // WireGuard over the lossy path alone. Set aside only for clean paths
    // worth a quarter of it (the far big lossy path of
    // `a_lossy_path_whose_repairs_come_too_late_is_set_aside`, beside
    // clean paths worth half of it, still is).
    let paths = [spec(19.0, 46.0, 1.5, 0.0), spec(325.0, 68.5, 4.0, 0.023)];
    for seed in [9631, 9632, 9633] {
        let (got, alone) =
            flow_and_best_path("big lossy, bbr", seed, &paths, 1, 0.5, 10.5, Cc::Bbr);
        assert!(
            got >= 0.8 * alone,
            "seed {seed}: {got:.1} Mbit/s, {alone:.1} over the lossy path alone"
        );
    }
}

#[test]
fn an_idle_path_losing_a_few_percent_is_not_taken_for_dead() {
    // Lab sweep seed 1201, #20: a 252 Mbit/s path losing 2.4%, set aside,
    // was logged down and up again at both sites several times a run. An
    // idle path is probed ten times a second each way, and a probe and
    // the next echo lost in a row, a few times a minute at 3% each way,
    // went over the 290 ms of silence allowed: 23 downs in these four
    // minutes. Now three in a row are needed, a few times an hour.
    let paths = [spec(100.0, 10.0, 0.0, 0.0), spec(100.0, 50.0, 4.0, 0.03)];
    let mut downs = 0;
    for seed in 3191..=3194 {
        let r = run("idle lossy", Sim::new(seed, &paths, 0.01, 60.0));
        eprintln!("seed {seed}: {} downs", r.downs);
        downs += r.downs;
    }
    // Each site's, for the four minutes.
    assert!(downs <= 4, "{downs} downs");
    // Cut, it is still down within a probe interval more than a busy or
    // clean path.
    let mut sim = Sim::new(3195, &paths, 0.01, 40.0);
    sim.changes = vec![(30.0, Change::Cut(1))];
    let down = run("idle lossy cut", sim).down_after;
    assert!(down.is_some_and(|t| t <= 400 * MS), "down after {down:?}");
}

#[test]
fn a_path_losing_a_few_percent_beyond_repair_is_set_aside_within_its_first_few_hundred_packets() {
    // Lab sweep seed 1201, #4: four paths 61.5-75.5 ms away, a repair a
    // 123 ms round trip against a 14 ms spread; the 22 Mbit/s one loses
    // 2.6%. Its loss was judged over its first thousand packets, which it
    // carried in over three seconds, each loss a window cut for CUBIC at
    // a 130 ms round trip: 47-61 Mbit/s in the lab against 76 for the
    // 87 Mbit/s path alone. Judged as soon as it lost more than a clean
    // path would but rarely, 65-104. Simulated, the path was set aside 3.3
    // to 4.6 s into the flow, and the flow had 0.74 of the best path alone
    // on average over the first ten seeds; then 1.9 to 3.1 s, and 0.88.
    // Over all fifty that was 1.3 to 3.7 s (median 2.0), 75.2 Mbit/s on
    // average: a flow that keeps the queues standing sends a packet into
    // one in nearly every span, and no such span was judged. Judged where
    // the queue dropped nothing, 1.3 to 2.2 s (median 1.8), 79.3 Mbit/s.
    let paths = [
        spec(15.0, 75.5, 0.0, 0.0),
        spec(29.0, 61.5, 0.0, 0.0),
        spec(22.0, 71.5, 0.0, 0.026),
        spec(87.0, 66.0, 0.0, 0.0),
    ];
    let seeds = 3181..=3230;
    let mut asides = Vec::new();
    let mut goodputs = Vec::new();
    for seed in seeds {
        let r = run("lossy beyond repair", Sim::window(seed, &paths, 6.0));
        let aside = r.set_aside_after[2];
        eprintln!(
            "seed {seed}: set aside after {aside:?}, {:.1} Mbit/s",
            r.mbps(0.5, 6.0)
        );
        let aside = aside.unwrap_or(Duration::MAX);
        assert!(aside < 3250 * MS, "seed {seed}: set aside after {aside:?}");
        asides.push(aside);
        goodputs.push(r.mbps(0.5, 6.0));
    }
    asides.sort();
    let median = asides[asides.len() / 2];
    assert!(median < 2500 * MS, "median set aside after {median:?}");
    let goodput = goodputs.iter().sum::<f64>() / goodputs.len() as f64;
    let alone =
        path_alone_window(3181, paths[3], 6.0, &[], Baseline::WireGuard, Cc::Cubic).mbps(0.5, 6.0);
    assert!(
        goodput >= 0.8 * alone,
        "{goodput:.1} Mbit/s on average, {alone:.1} over the best alone"
    );
}

#[test]
fn a_near_lossy_path_whose_repairs_come_within_the_reordering_window_is_kept() {
    // Lab sweep seed 2929, #22, without its far 69 Mbit/s path: 191 Mbit/s
    // 3 ms away losing 2.4%, beside three small clean paths. TCP takes the
    // near path alone, so a repair comes a round trip (6 ms) after the
    // packets behind its loss were handed out: late by less than a quarter
    // of the flow's round trip, which RACK takes for reordering. The path
    // was set aside all the same (in 5 of these 6 seeds, 3.4-5.6 s in), as
    // if each loss reached the flow, which was left the small paths: 117
    // Mbit/s on average, 158 kept. In the lab, a BBR flow on #22 itself fell
    // to 20 Mbit/s when the path was set aside.
    let paths = [
        spec(10.0, 12.5, 0.0, 0.0),
        spec(20.0, 69.0, 1.5, 0.0),
        spec(23.0, 17.5, 0.0, 0.0),
        spec(191.0, 3.0, 0.0, 0.024),
    ];
    let mut goodput = 0.0;
    for seed in 3201..=3206 {
        let r = run("near lossy", Sim::window(seed, &paths, 8.0));
        let aside = r.set_aside_after[3];
        eprintln!(
            "seed {seed}: set aside after {aside:?}, {:.1} Mbit/s",
            r.mbps(0.5, 8.0)
        );
        assert_eq!(aside, None, "seed {seed}");
        goodput += r.mbps(0.5, 8.0) / 6.0;
    }
    // What the repairs leave the path: about 1 - 2p of its rate, less the
    // tunnel's overhead and the flow's own losses at its queue.
    assert!(goodput >= 0.75 * 191.0, "{goodput:.1} Mbit/s on average");
}

/// Return how many of `seeds` give a flow over `paths` that `passes`, given
/// its report and its goodput and that of one through WireGuard over path
/// `best` alone, both Mbit/s from half a second to `seconds`: where a flow
/// leaves slow start is chance, so a row is judged over many draws.
fn draws_passing(
    name: &str,
    paths: &[PathSpec],
    best: usize,
    seeds: std::ops::Range<u64>,
    seconds: f64,
    passes: impl Fn(&Report, f64, f64) -> bool,
) -> usize {
    seeds
        .filter(|&seed| {
            let r = run(name, Sim::window(seed, paths, seconds));
            let alone = path_alone_window(seed, paths[best], seconds, &[], Baseline::WireGuard, Cc::Cubic);
            let (all, alone) = (r.mbps(0.5, seconds), alone.mbps(0.5, seconds));
            eprintln!(
                "{name}, seed {seed}: {all:.1} Mbit/s, shares {:?}, {alone:.1} over the best path alone; slow start ended on delay at {:?} packets",
                r.shares, r.delay_exit_window
            );
            passes(&r, all, alone)
        })
        .count()
}

#[test]
fn a_big_path_losing_a_few_per_thousand_beyond_repair_carries_what_its_parity_rebuilds() {
    // Lab sweep seed 3313, #14: the 227 Mbit/s path loses 0.3% and a
    // repair takes the nearest path's 93 ms round trip against a 26.5 ms
    // spread. Kept with every loss left to its repair, it carried 28-48%
    // of the bytes and its few late repairs a second, each a congestion
    // signal, brought CUBIC down from 540 Mbit/s to 44 within 3 s: 82-175
    // Mbit/s over 10 s, against 287 for the clean 349 Mbit/s path alone.
    // Set aside, 144-254. With a parity after every 32 packets there only
    // one loss in ten or so is left to a repair, and the path, over a
    // third of the capacity, is kept: 245-316 in the lab. The simulated
    // flow, whose RACK window does not widen on D-SACKs as Linux's does,
    // backs off at more of those late repairs than Linux: it reads the row
    // below the path set aside, so what is asserted is that the path is
    // used and the flow does not collapse. Where slow start ends decides
    // each draw: 18 of these 20 pass, 14 without the parity a path whose
    // repairs come late sends before its loss is known.
    let paths = [
        spec(349.0, 73.0, 5.0, 0.0),
        spec(6.0, 64.5, 5.0, 0.009),
        spec(227.0, 69.5, 3.0, 0.003),
        spec(18.0, 46.5, 2.5, 0.0),
    ];
    let seeds = 3141..3161;
    let count = seeds.clone().count();
    let passed = draws_passing(
        "few per thousand",
        &paths,
        0,
        seeds,
        10.5,
        |r, all, alone| r.shares[2] > 0.3 && all >= 2.0 / 3.0 * alone,
    );
    assert!(
        passed >= 17,
        "{passed} of {count} draws use the lossy path and reach 2/3 of the best"
    );
}

#[test]
fn a_near_lossy_path_with_a_quarter_of_the_capacity_carries_what_its_parity_rebuilds() {
    // Lab sweep seed 10741, #13: the nearest path, 113 Mbit/s of 400,
    // loses 1.3%, and its parity after every 6 packets leaves under a
    // tenth of that (0.1%) to the repairs. Judged by its whole loss, it was
    // set aside in slow start once the queue there put its repairs a
    // millisecond past what the flow takes for reordering, and carried 2%
    // of the bytes: 171-220 Mbit/s in the lab, 228-281 with it.
    let paths = [
        spec(113.0, 29.5, 1.0, 0.013),
        spec(158.0, 76.0, 0.0, 0.0),
        spec(20.0, 58.5, 4.5, 0.0),
        spec(109.0, 61.0, 2.0, 0.0),
    ];
    let seeds = 4301..4321;
    let count = seeds.clone().count();
    let passed = draws_passing(
        "near lossy quarter",
        &paths,
        1,
        seeds,
        10.5,
        |r, all, alone| r.shares[0] > 0.15 && all >= 1.5 * alone,
    );
    assert!(
        passed >= 17,
        "{passed} of {count} draws use the lossy path and reach 1.5 times the best"
    );
}

#[test]
fn a_path_busy_for_part_of_a_span_is_not_measured_at_what_it_carried() {
    // Lab sweep seed 7440, #24. In slow start a flow comes in flights a
    // round trip (160 ms) apart; a span of the 37 Mbit/s path's reports
    // that read a queue at its end, as a flight passed, carried 11 Mbit/s:
    // the path's first measurement. Taken for its capacity (its probe
    // trains said 34), it had the path shunned and the 59 Mbit/s one
    // overrun, and the flow left slow start early. Whether it does in one
    // run is chance, so the paths are judged over several.
    let paths = [spec(59.0, 78.5, 4.5, 0.0), spec(37.0, 79.5, 0.0, 0.0)];
    assert_seeds_reach_the_sum("part busy", &paths, 2401..2421, 0.9, 16);
}

#[test]
fn a_big_path_is_counted_at_its_trains_rate_before_the_flow_fills_it() {
    // Lab sweep seed 5417, #1. The 354 Mbit/s path's trains said 328, but
    // until the flow had measured it the scheduler counted it at the 100
    // Mbit/s guess: its modelled queue grew three times too fast, slow
    // start's flights spilled onto the 52 and 65 Mbit/s paths, their
    // queues rose, and HyStart ended slow start at 1764 packets, 294
    // Mbit/s of a 449 sum (the lab: 303).
    let paths = [
        spec(113.0, 58.0, 0.0, 0.003),
        spec(52.0, 22.0, 0.0, 0.001),
        spec(11.0, 51.5, 0.0, 0.0),
        spec(5.0, 48.5, 0.0, 0.0),
        spec(65.0, 27.0, 0.0, 0.0),
        spec(354.0, 36.0, 0.0, 0.0),
    ];
    assert_seeds_reach_the_sum("trains' rate", &paths, 5401..5421, 0.8, 16);
}

#[test]
fn acks_come_back_the_near_way_when_the_near_paths_are_too_small_for_tcp() {
    // Simulated sweep seed 2611, #4: the 202 Mbit/s path is the farthest,
    // with 5 ms of jitter, and the three nearer ones are small. TCP keeps
    // off the two nearest; kept to the TCP paths, the ACKs came back over
    // the 70.5 and 54 ms ones as well, and every round trip the flow timed
    // moved with their jitter and difference: HyStart ended slow start at
    // a few dozen packets, 11 Mbit/s. ACKs now take any path, the nearest
    // while its queue is short.
    let paths = [
        spec(202.0, 70.5, 5.0, 0.0),
        spec(16.0, 54.0, 3.0, 0.0),
        spec(13.0, 38.5, 0.0, 0.0),
        spec(12.0, 7.5, 0.0, 0.0),
    ];
    let seeds = 2611..2621;
    let reached = seeds
        .clone()
        .filter(|&seed| {
            let all = run("far big", Sim::window(seed, &paths, 10.0)).mbps(1.0, 10.0);
            let alone =
                path_alone_window(seed, paths[0], 10.0, &[], Baseline::WireGuard, Cc::Cubic)
                    .mbps(1.0, 10.0);
            eprintln!(
                "far big, seed {seed}: {all:.1} Mbit/s over all, {alone:.1} over the big one"
            );
            all >= 0.6 * alone
        })
        .count();
    assert!(
        reached >= 8,
        "{reached} of {} seeds reach 0.6 of the big path alone",
        seeds.count()
    );
}

#[test]
fn a_bbr_flow_alone_keeps_most_of_a_lossy_path_where_cubic_cannot() {
    // Lab sweep seed 8761, #11: Linux's BBR over the 188 Mbit/s path alone,
    // 68 ms one way and 2.9% random loss, made 140 Mbit/s. BBR does not
    // read loss as congestion, CUBIC does; the path-alone baseline of a
    // bbr row is only right if the model keeps that difference.
    let lossy = spec(188.0, 68.0, 2.0, 0.029);
    for seed in [8761, 8762, 8763] {
        let bbr =
            path_alone_window(seed, lossy, 10.5, &[], Baseline::Bare, Cc::Bbr).mbps(0.5, 10.5);
        let cubic =
            path_alone_window(seed, lossy, 10.5, &[], Baseline::Bare, Cc::Cubic).mbps(0.5, 10.5);
        eprintln!("lossy path alone, seed {seed}: bbr {bbr:.1} Mbit/s, cubic {cubic:.1}");
        assert!(bbr >= 0.6 * 188.0, "seed {seed}: bbr {bbr:.1} Mbit/s");
        assert!(
            cubic < 0.25 * bbr,
            "seed {seed}: cubic {cubic:.1}, bbr {bbr:.1} Mbit/s"
        );
    }
}

#[test]
fn a_bbr_flow_over_two_equal_paths_gets_their_sum() {
    // Striping with inner BBR where nothing is in its way: equal rates and
    // delays, so the hold adds nothing BBR would read as a longer round trip.
    let paths = [spec(100.0, 20.0, 0.0, 0.0), spec(100.0, 20.0, 0.0, 0.0)];
    for seed in [1, 2, 3] {
        let (all, alone) = flow_and_best_path("bbr equal", seed, &paths, 0, 0.5, 10.5, Cc::Bbr);
        assert!(
            all >= 1.8 * alone,
            "seed {seed}: {all:.1} Mbit/s, one path {alone:.1}"
        );
    }
}

/// Assert that over a 10 s transfer over `paths`, with each of `seeds`,
/// `path` carries less than `share` of the packets.
fn assert_share_below(name: &str, paths: &[PathSpec], seeds: [u64; 3], path: usize, share: f64) {
    for seed in seeds {
        let r = run(name, Sim::window(seed, paths, 10.5));
        assert!(
            r.shares[path] < share,
            "{name}, seed {seed}: shares {:?}",
            r.shares
        );
    }
}

#[test]
fn a_small_near_lossy_path_beside_a_clean_one_five_times_its_size_is_set_aside() {
    // Lab sweep seed 10007, #14 (without its cut): the near 62 Mbit/s path
    // losing 2.6% with 3.5 ms of jitter beside a clean 302 Mbit/s one. Its
    // repairs come in time at its least round trip, not at its smoothed
    // one; kept, a tenth of its repairs came late and CUBIC had 0.43-0.89
    // of the big path alone over six simulated runs, 0.70-1.09 in seven
    // in the lab. It can add at most a fifth to the big path.
    let paths = [
        spec(62.0, 21.0, 3.5, 0.026),
        spec(302.0, 38.5, 0.0, 0.0),
        spec(7.0, 45.0, 4.5, 0.009),
    ];
    assert_share_below("small near lossy", &paths, [3241, 3242, 3243], 0, 0.05);
}

#[test]
fn a_lossy_path_far_beyond_the_nearest_is_set_aside() {
    // Sweep seed 2611, #8: the repair of a loss on the 65 Mbit/s path is
    // asked for as the path's next packet arrives, 26 ms after the nearest
    // path's would, and takes the nearest path's 41 ms round trip more:
    // 67 ms, against the packets behind it, which wait the 36-52 ms spread
    // and the margin. The nearest path's own round trip is within that,
    // and the path was kept to 10% loss; in the lab, in runs where it
    // carried 6-8% of the bytes, CUBIC got 0.29-0.67 of the 297 Mbit/s
    // path alone.
    let paths = [
        spec(13.0, 24.5, 4.5, 0.027),
        spec(297.0, 20.5, 0.0, 0.0),
        spec(5.0, 72.5, 0.0, 0.0),
        spec(65.0, 46.5, 0.0, 0.026),
        spec(220.0, 56.5, 0.0, 0.0),
    ];
    assert_share_below("far lossy", &paths, [3101, 3102, 3103], 3, 0.06);
}

#[test]
fn a_path_that_only_overflows_is_not_judged_lossy() {
    // Sweep seed 8443, #29, its run 2: four lossless paths 6 ms apart that
    // the flow overruns. Drops at a full queue that the echoes showed no
    // queue for yet (they lag a round trip) were judged the path's own
    // loss, 10-23%, and the 49 Mbit/s path was set aside. The peer tells
    // such drops from random ones by the queue the packets around them met.
    let paths = [
        spec(49.0, 64.0, 0.0, 0.0),
        spec(254.0, 68.0, 3.0, 0.0),
        spec(6.0, 66.5, 1.0, 0.0),
        spec(24.0, 70.0, 1.5, 0.0),
    ];
    let r = run("lossless, overrun", Sim::window(864_328, &paths, 10.5));
    for (i, e) in r.estimates.iter().enumerate() {
        // Clean, as the endpoint counts a path clean for its repairs.
        assert!(e.loss < 0.002, "path {i}: {e:?}");
    }
}

#[test]
fn a_lost_ack_whose_repair_cannot_come_in_time_holds_nothing_back() {
    // Sweep seed 5, #9. The nearest path (205 Mbit/s, 32.5 ms) loses 2.9%
    // both ways, ACKs too; a repair takes its 65 ms round trip, more than
    // the 38.5 ms spread and the margin. What was behind a loss (ACKs,
    // which are not held, included) waited for its repair all the same,
    // and the flow left slow start at 9 and again at 208 packets: 0.42-0.61
    // of the 77 Mbit/s path alone in the sweep, 0.17-0.37 here.
    let paths = [
        spec(77.0, 71.0, 3.0, 0.0),
        spec(6.0, 54.5, 0.0, 0.0),
        spec(69.0, 47.5, 4.0, 0.01),
        spec(205.0, 32.5, 0.0, 0.029),
    ];
    // Which of the near path's packets are lost, and so where the flow's
    // losses fall in slow start, moves one draw between 0.5 and 1.4 of
    // the path alone: the middle of nine draws is what the rule decides.
    let mut ratios: Vec<f64> = (501..510)
        .map(|seed| {
            let name = "near lossy, repairs slower than the spread";
            let (all, alone) = flow_and_best_path(name, seed, &paths, 0, 0.5, 10.5, Cc::Cubic);
            all / alone
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    assert!(
        ratios[ratios.len() / 2] >= 0.95,
        "median of the draws below 0.95 of the best path: {ratios:.2?}"
    );
}

#[test]
fn tcp_is_held_only_as_long_as_the_farthest_path_it_takes() {
    // Sweep seed 1, #15. The 7 Mbit/s path 44 ms beyond the big one is
    // too small for TCP, which keeps off it; held to it all the same, every
    // segment waited 44 ms more than the paths that carry the flow needed,
    // and the flow got 0.85-0.88 of the 204 Mbit/s path alone.
    let paths = [
        spec(7.0, 79.5, 3.5, 0.0),
        spec(13.0, 14.0, 4.0, 0.0),
        spec(32.0, 38.5, 0.0, 0.0),
        spec(204.0, 35.5, 0.0, 0.0),
    ];
    // The wait costs most in slow start, which a transfer measured as the
    // sweep measures it includes.
    assert_transfer_reaches_the_best_path("far small path TCP keeps off", 114, &paths, 3);
}

#[test]
fn a_far_jittery_path_does_not_end_slow_start_early() {
    // Sweep seed 7151, #18, without its cut. The far path's jitter of
    // ±5 ms keeps its packets in order: sparse, they come from 48 ms on;
    // dense, each waits for the latest before it, near 58. Segments held
    // only until the least of that set the flow's least round trip in its
    // first flights, and HyStart read the rise as a full pipe (slow start
    // over at 94 packets): 0.23-0.44 of the big path alone in 10 of these
    // 12 draws, 1.12-1.37 in all of them held to the top of the jitter.
    let paths = [spec(42.0, 7.0, 0.0, 0.0), spec(121.0, 53.0, 5.0, 0.0)];
    for seed in 7181..7193 {
        let (all, alone) = flow_and_best_path(
            "far jittery big path",
            seed,
            &paths,
            1,
            0.5,
            10.5,
            Cc::Cubic,
        );
        assert!(
            all >= 0.85 * alone,
            "seed {seed}: {all:.1} Mbit/s over both paths, {alone:.1} over the big one alone"
        );
    }
}

#[test]
fn a_repair_is_waited_for_as_long_as_another_path_takes_to_bring_it() {
    // Sweep seed 2, #12. The flow's first losses are on the nearest path
    // (16 Mbit/s, overrun in slow start); their repairs come by another,
    // a few ms further. Given up after the nearest path's own round trip,
    // they reach the inner flow, which leaves slow start at 140 packets
    // and never reaches the 244 Mbit/s path.
    assert_bulk_reaches_the_best_path("near small, big further", 211, &NEAR_SMALL, 2);
}

#[test]
fn a_near_path_is_filled_only_as_deep_as_its_buffer_held() {
    // Sweep seed 2, #25. The near paths' buffers are shallower than the
    // 261 Mbit/s path is further away: filled until their queue is that
    // deep, they overflow again and again, each loss a repair and a round
    // trip of hold. Filled to a little less than where they overflowed,
    // they leave the rest to the paths further out.
    let paths = [
        spec(97.0, 21.5, 0.0, 0.023),
        spec(92.0, 9.0, 1.5, 0.0),
        spec(145.0, 29.0, 0.0, 0.0),
        spec(5.0, 3.5, 0.0, 0.0),
        spec(261.0, 49.5, 0.0, 0.0),
    ];
    assert_bulk_reaches_the_best_path("near shallow, big further", 224, &paths, 4);
}

/// Sweep seed 2, #12: small paths near, big ones further out.
const NEAR_SMALL: [PathSpec; 5] = [
    spec(8.0, 71.5, 4.0, 0.0),
    spec(16.0, 7.5, 0.0, 0.0),
    spec(244.0, 39.0, 1.5, 0.0),
    spec(21.0, 8.0, 0.0, 0.0),
    spec(141.0, 10.0, 1.0, 0.0),
];

#[test]
fn a_path_that_overflowed_shows_how_deep_it_is_filled() {
    // Slow start overruns the near small paths. What the scheduler learned
    // of them is what an operator sees: a fill limit for each path that
    // overflowed, none for a path that never did.
    let report = run("near small, shown", Sim::window(211, &NEAR_SMALL, 20.0));
    assert!(
        report.estimates.iter().any(|e| e.overflows > 0),
        "no path overflowed: {:#?}",
        report.estimates
    );
    for e in &report.estimates {
        match (e.overflows, e.queue_limit_ms) {
            (0, limit) => assert_eq!(limit, None, "a limit without an overflow"),
            (_, Some(limit)) => assert!((5.0..200.0).contains(&limit), "limit {limit} ms"),
            (_, None) => panic!("an overflowed path has no limit: {e:?}"),
        }
    }
}

/// A lab sweep scenario, as the simulation runs it: its paths, and its cut
/// and restore (seconds from the simulation's start, which is half a second
/// before the flow's).
fn from_lab(scenario: &mptun_lab::scenario::Scenario) -> (Vec<PathSpec>, Vec<(f64, Change)>) {
    let paths = scenario
        .path
        .iter()
        .map(|p| PathSpec {
            rate_mbit: p.rate_mbit.unwrap_or(1000.0),
            delay_ms: p.delay_ms,
            jitter_ms: p.jitter_ms,
            loss: p.loss_pct / 100.0,
        })
        .collect();
    let changes = scenario
        .event
        .iter()
        .filter_map(|e| {
            let path = e.path.checked_sub(1)?;
            let change = match e.action.as_deref() {
                Some("down") => Change::Cut(path),
                Some("up") => Change::Restore(path),
                _ => return None,
            };
            Some((e.at + 0.5, change))
        })
        .collect();
    (paths, changes)
}

/// How mptun did on one drawn scenario.
struct SweepRow {
    mptun: f64,
    best: f64,
    /// One WireGuard tunnel over the best path.
    wireguard_best: f64,
    sum: f64,
    hold_p99_ms: f64,
    spread_ms: f64,
}

/// `lossless_every`: mptun's paths have no random loss and carry one
/// packet in this many less (the baselines keep theirs), an upper bound
/// on forward error correction with one parity packet per that many.
fn sweep_row(
    number: usize,
    seed: u64,
    scenario: &mptun_lab::scenario::Scenario,
    lossless_every: Option<u64>,
) -> SweepRow {
    const SECONDS: f64 = 10.5;
    let (paths, changes) = from_lab(scenario);
    let tunnel: Vec<PathSpec> = match lossless_every {
        Some(k) => paths
            .iter()
            .map(|&p| PathSpec {
                loss: 0.0,
                rate_mbit: p.rate_mbit * (1.0 - 1.0 / k.max(2) as f64),
                ..p
            })
            .collect(),
        None => paths.clone(),
    };
    // The BBR model reads the lab's paths alone well but mptun over them
    // higher than the lab (README, "The simulated sweep"): BBR rows run
    // CUBIC unless SIM_BBR=1.
    let cc = if std::env::var("SIM_BBR").is_ok_and(|v| v == "1") {
        Cc::of(scenario)
    } else {
        Cc::Cubic
    };
    let mut sim = Sim::window_with(seed, &tunnel, SECONDS, cc);
    sim.changes = changes.clone();
    sim.release = sweep_release();
    let r = run(&format!("sweep #{number}"), sim);
    let mptun = r.mbps(0.5, SECONDS);
    let cuts_of = |i: usize| -> Vec<(f64, bool)> {
        changes
            .iter()
            .filter_map(|&(at, c)| match c {
                Change::Cut(p) if p == i => Some((at, false)),
                Change::Restore(p) if p == i => Some((at, true)),
                _ => None,
            })
            .collect()
    };
    let alone: Vec<f64> = paths
        .iter()
        .enumerate()
        .map(|(i, &spec)| {
            path_alone_window(
                seed + i as u64,
                spec,
                SECONDS,
                &cuts_of(i),
                Baseline::Bare,
                cc,
            )
            .mbps(0.5, SECONDS)
        })
        .collect();
    let (best_index, best) =
        alone
            .iter()
            .copied()
            .enumerate()
            .fold((0, 0.0), |b, a| if a.1 > b.1 { a } else { b });
    let sum = alone.iter().sum();
    let wireguard_best = path_alone_window(
        seed + best_index as u64,
        paths[best_index],
        SECONDS,
        &cuts_of(best_index),
        Baseline::WireGuard,
        cc,
    )
    .mbps(0.5, SECONDS);
    let spread_ms = scenario.delay_spread_ms();
    let hold_p99_ms = r.hold_p99_steady.map_or(0.0, |d| d.as_secs_f64() * 1e3);
    // Which waits a hold p99 over the bar comes from: those over it, by
    // what ended them.
    let bar = Duration::from_secs_f64((spread_ms + 5.0) / 1e3);
    let over_bar: Vec<u64> = r
        .waits_ended_steady
        .iter()
        .map(|w| w.count_above(bar))
        .collect();
    let describe: Vec<String> = paths
        .iter()
        .map(|p| {
            format!(
                "{:.0}M/{}ms/j{}/l{:.1}%",
                p.rate_mbit,
                p.delay_ms,
                p.jitter_ms,
                p.loss * 100.0
            )
        })
        .collect();
    eprintln!(
        "#{number:2} {:50}{} mptun {mptun:6.1} best {best:6.1} sum {sum:6.1}  x best {:.2}  x WG-best {:.2}  of sum {:.2}  hold p99 {hold_p99_ms:.1} ms (spread {spread_ms:.1}){}  shares {:?}  over the bar: late/repaired/given up {:?}",
        describe.join(" "),
        if cc == Cc::Bbr { " bbr" } else { "" },
        mptun / best,
        mptun / wireguard_best,
        mptun / sum,
        if changes.is_empty() { "" } else { " cut" },
        r.shares.iter().map(|s| (s * 100.0).round()).collect::<Vec<_>>(),
        over_bar,
    );
    SweepRow {
        mptun,
        best,
        wireguard_best,
        sum,
        hold_p99_ms,
        spread_ms,
    }
}

/// The issue's bars, on scenarios drawn as the lab's sweep draws them, with
/// a window flow as the inner TCP (CUBIC-like: the simulation has no bbr),
/// against the same flow over each path alone with no tunnel, as the lab
/// measures them (see [`Baseline`]).
/// `SWEEP_SEED` and `SWEEP_COUNT` choose other draws, `SWEEP_ONLY=N` runs
/// the Nth scenario alone. `SWEEP_RUN=N` runs the same scenarios with
/// other random draws (jitter, loss) in the simulation: a change is judged
/// against how far those alone move the summary. `SWEEP_LOSSLESS=K` and
/// `SIM_HYSTART=0` measure what two causes cost (see [`sweep_row`],
/// [`WindowSender`]); `SIM_BBR=1` runs the scenarios with inner bbr with
/// the BBR model (see [`Bbr`]); `SIM_FLOW_LATER=S` starts the flow S seconds later
/// than usual, counted from the paths coming up (see [`flow_later`]);
/// `SIM_RELEASE_LATE_US=L` hands arrivals over in bunches, as the lab's
/// emulator does (see [`sweep_release`]).
#[test]
#[ignore = "fails today: seed 1, lowest 0.24 of the best path, hold within the spread + 5 ms in 47%; the scheduler work of issue 14"]
fn a_sweep_of_drawn_scenarios_never_falls_below_the_best_path() {
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let seed = env("SWEEP_SEED", 1);
    let count = env("SWEEP_COUNT", 30) as usize;
    let scenarios = mptun_lab::sweep::draw(seed, count);
    let only = env("SWEEP_ONLY", 0) as usize;
    let run = env("SWEEP_RUN", 0);
    let lossless_every = Some(env("SWEEP_LOSSLESS", 0)).filter(|&k| k > 0);
    let rows: Vec<SweepRow> = scenarios
        .iter()
        .enumerate()
        .filter(|(i, _)| only == 0 || only == i + 1)
        .map(|(i, s)| {
            let sim_seed = seed
                .wrapping_mul(100)
                .wrapping_add(i as u64)
                .wrapping_add(run.wrapping_mul(10_000));
            sweep_row(i + 1, sim_seed, s, lossless_every)
        })
        .collect();
    let mut fractions: Vec<f64> = rows.iter().map(|r| r.mptun / r.sum).collect();
    fractions.sort_by(f64::total_cmp);
    let quantile = |q: f64| fractions[((fractions.len() - 1) as f64 * q).round() as usize];
    let worst = rows
        .iter()
        .map(|r| r.mptun / r.best)
        .fold(f64::MAX, f64::min);
    let holds_within = rows
        .iter()
        .filter(|r| r.hold_p99_ms <= r.spread_ms + 5.0)
        .count() as f64
        / rows.len() as f64;
    let at_095 = |of: fn(&SweepRow) -> f64| rows.iter().filter(|r| r.mptun >= 0.95 * of(r)).count();
    eprintln!(
        "sweep seed {seed}: lowest x best {worst:.2}, at 0.95 of the best path in {} of {}, of WireGuard over it in {}, of sum median {:.2} p10 {:.2}, hold within spread + 5 ms in {:.0}%",
        at_095(|r| r.best),
        rows.len(),
        at_095(|r| r.wireguard_best),
        quantile(0.5),
        quantile(0.1),
        holds_within * 100.0
    );
    assert!(worst >= 0.95, "lowest ratio to the best path {worst:.2}");
    assert!(
        quantile(0.5) >= 0.90,
        "median fraction of the sum {:.2}",
        quantile(0.5)
    );
    assert!(
        quantile(0.1) >= 0.80,
        "10th percentile of the sum {:.2}",
        quantile(0.1)
    );
    assert!(
        holds_within >= 0.9,
        "hold within the spread in {holds_within:.2}"
    );
}

#[test]
fn a_far_big_path_keeps_a_queue_beside_a_near_small_one() {
    // Lab sweep seed 5219, #15: 120 Mbit/s 45 ms beyond 29 Mbit/s. A held
    // segment on the far path starts arriving exactly at its release, so it
    // tied with the near path only with an empty queue; the far path went
    // idle between packets and the flow got 0.48-0.89 of it alone
    // (simulation seeds 1-6).
    let paths = [spec(29.0, 18.5, 4.0, 0.0), spec(120.0, 63.5, 0.0, 0.0)];
    assert_transfer_reaches_the_best_path("far big path beside a near small one", 1, &paths, 1);
}

#[test]
fn repairs_of_a_queue_s_overflows_hold_the_flow_no_longer_than_the_spread() {
    // Simulated sweep seed 6 #6: three clean paths 11 ms apart. A flow
    // that fills them overflows their queues; held for each repair (a
    // round trip through the queues), the packets behind it waited 90 ms
    // at the 99th percentile. Released at the hold, the repairs come late.
    let paths = [
        spec(61.0, 21.0, 0.0, 0.0),
        spec(57.0, 22.0, 0.0, 0.0),
        spec(62.0, 32.0, 0.0, 0.0),
    ];
    assert_held_within_the_spread("overflow repairs", 605, &paths, 2);
}

#[test]
fn a_lossy_path_s_repairs_hold_the_flow_no_longer_than_the_spread() {
    // Simulated sweep seed 5 #21: a big lossy path among clean ones 59.5
    // ms apart. Waited for as long as the hold (which allows for the
    // paths' jitter and reordering), its repairs kept the packets behind
    // them 80 ms at the 99th percentile; waited for as long as the spread
    // and 5 ms more, then handed out late, 59.
    let paths = [
        spec(168.0, 39.5, 0.0, 0.019),
        spec(261.0, 8.5, 0.0, 0.0),
        spec(21.0, 68.0, 0.0, 0.0),
        spec(149.0, 32.5, 1.5, 0.0),
    ];
    assert_held_within_the_spread("lossy path's repairs", 520, &paths, 1);
}

#[test]
#[ignore = "fails today: 129.3 Mbit/s against 136.9 through WireGuard over the big path alone (0.94); leaving the small path out of the hold once every path's trains are in gave 134.7 with nothing held but cost the simulated sweep (geometric mean 0.98: that hold keeps HyStart in slow start elsewhere); the scheduler work of issue 14"]
fn a_small_far_path_known_by_its_trains_does_not_hold_a_flow_that_starts_early() {
    // Lab sweep seed 6029, #26. The 9 Mbit/s path, 51 ms farther, counts
    // at the 100 Mbit/s guess until its trains come, 0.3 s after the
    // session: TCP may take it then, and a path TCP may take stays in the
    // hold for 2 s. A flow that starts at 0.5 s has every segment held to
    // the far path's delay until 2.5 s, and the packets behind a loss
    // wait 51 ms more for its repair.
    let paths = [spec(145.0, 15.5, 0.0, 0.0), spec(9.0, 66.5, 2.0, 0.0)];
    assert_held_within_the_spread("small far path known early", 2601, &paths, 0);
}

#[test]
fn a_small_far_path_does_not_queue_what_the_near_one_has_no_room_for() {
    // Lab sweep seed 6029, #3: hold p99 72 ms against a 22 ms spread, with
    // no loss on either path. Once the near path's queue was as deep as it
    // overflowed at, the scheduler sent to the far 5 Mbit/s one whatever
    // its queue, which grew to 80 ms: every segment after one sent there
    // waited for it (76 ms at p99 on this seed). The far path, slower than
    // the full one, now ranks with it once a segment there would arrive
    // later than its release by more than the hold and the slack.
    let paths = [spec(5.0, 25.0, 0.0, 0.0), spec(19.0, 3.0, 2.5, 0.0)];
    assert_held_within_the_spread("small far path queued deep", 2602, &paths, 1);
}

/// Assert that a 10 s transfer over `paths`, from its first half second,
/// reaches 0.95 of the same transfer through WireGuard over the best of
/// them alone, and
/// that after its first second no more than 1% of its packets waited in
/// the reorder buffer longer than the paths' delay spread and 5 ms.
fn assert_held_within_the_spread(name: &str, seed: u64, paths: &[PathSpec], best: usize) {
    let delays = paths.iter().map(|p| p.delay_ms);
    let spread = delays.clone().fold(f64::MIN, f64::max) - delays.fold(f64::MAX, f64::min);
    let r = run(name, Sim::window(seed, paths, 10.5));
    let hold = r.hold_p99_steady.expect("something waited");
    assert!(
        hold <= Duration::from_secs_f64((spread + 5.0) / 1e3),
        "{name}: hold p99 after the first second {hold:?}, paths {spread} ms apart"
    );
    let alone = path_alone_window(seed, paths[best], 10.5, &[], Baseline::WireGuard, Cc::Cubic)
        .mbps(0.5, 10.5);
    let all = r.mbps(0.5, 10.5);
    assert!(
        all >= 0.95 * alone,
        "{name}: {all:.1} Mbit/s, {alone:.1} over the best path alone"
    );
}

#[test]
fn a_near_lossy_path_s_losses_far_short_of_its_overflow_depth_are_repaired() {
    // Lab sweep seed 7301, #25: a near path losing 2.6% with 3 ms of
    // jitter beside a big clean one 50 ms further. The queues a CUBIC flow
    // keeps on both, with their jitter, often read over 10 ms, and the
    // near path's random losses were then taken for drops at a full
    // tunnel and left to the flow, each a window cut: 283.8 Mbit/s over
    // these five seeds against 322.4 through WireGuard over the big path
    // alone. The near path overflowed in slow start at a queue of about
    // 35 ms; a loss at under half that depth is repaired: 342.0.
    let paths = [spec(107.0, 3.0, 3.0, 0.026), spec(368.0, 53.0, 2.0, 0.0)];
    let seeds = [730124, 740124, 750124, 760124, 770124];
    let (mut all, mut alone) = (0.0, 0.0);
    for seed in seeds {
        let (a, b) = flow_and_best_path("near lossy", seed, &paths, 1, 0.5, 10.5, Cc::Cubic);
        all += a;
        alone += b;
    }
    let runs = seeds.len() as f64;
    assert!(
        all >= 0.95 * alone,
        "near lossy: {:.1} Mbit/s over both paths, {:.1} over the big one alone (means of {runs} seeds)",
        all / runs,
        alone / runs
    );
}

#[test]
fn a_far_lossy_path_s_first_losses_do_not_end_slow_start() {
    // Sweep seed 6397 #30: the 321 Mbit/s path, the farthest, loses 2.6%
    // and carries most of a flow's first flights before its loss is known.
    // Each loss there waited a quarter of the held round trip past its due
    // time for a repair, and HyStart, reading the rise as a full pipe,
    // ended slow start at 112-672 packets in 8 of 20 lab runs. A parity
    // on such a path until its loss is known rebuilds them in a few ms:
    // over the first 3 s, 19 of these 20 draws reach 1.15 of WireGuard
    // over the best path alone, against 14 without.
    let paths = [
        spec(33.0, 25.0, 2.0, 0.0),
        spec(97.0, 54.0, 0.0, 0.0),
        spec(7.0, 57.0, 0.0, 0.0),
        spec(32.0, 36.5, 0.0, 0.0),
        spec(321.0, 77.0, 0.0, 0.026),
    ];
    let seeds = 9000..9020;
    let count = seeds.clone().count();
    let reached = draws_passing("far lossy path", &paths, 1, seeds, 3.0, |_, all, alone| {
        all >= 1.15 * alone
    });
    assert!(
        reached >= 18,
        "{reached} of {count} draws reach 1.15 of the best path"
    );
}

#[test]
fn a_bbr_flow_filling_a_lossy_path_is_not_crowded_out_by_its_parity() {
    // Lab sweep seed 10853 #28: BBR over 112 Mbit/s at 47 ms losing 1.1%,
    // beside 8 at 64.5. BBR does not back off at the random losses and
    // keeps the big path's queue full, where a parity after every few
    // packets (every 4.3 in the lab) took the place of the flow's data.
    let paths = [spec(8.0, 64.5, 0.0, 0.0), spec(112.0, 47.0, 0.0, 0.011)];
    let seeds = 7801..7811;
    let reached = seeds
        .clone()
        .filter(|&seed| {
            let (all, alone) =
                flow_and_best_path("full lossy, bbr", seed, &paths, 1, 0.5, 10.5, Cc::Bbr);
            all >= 0.92 * alone
        })
        .count();
    assert!(
        reached >= 9,
        "{reached} of {} seeds reach 0.92 of WireGuard over the lossy path alone",
        seeds.count()
    );
}
