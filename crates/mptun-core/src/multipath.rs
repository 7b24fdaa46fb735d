//! The adaptive send side and the path monitor: probes, per-path estimates,
//! failover, and the earliest-arrival scheduler.
//!
//! Every path is probed (10 probes/s when idle, 100/s while data crosses it);
//! each probe echoes the peer's last probe on that path and reports what this
//! side received there. From the echoes the sender learns, per path and for
//! its own direction: round-trip time, one-way delay relative to the other
//! paths (base and queueing), delivery rate and loss. From the peer's probes
//! the receiver learns the delay spread of the paths towards it, which sets
//! how long a gap is worth waiting for.
//!
//! Each data packet goes to the path on which it is expected to arrive
//! soonest: relative one-way delay, plus what is queued on that path at its
//! measured rate. A path whose echoes stop is down within
//! [`DOWN_AFTER_MAX`]; one losing packets while another is clean is set aside
//! and retried later.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::control::Probe;
use crate::estimate::{DelayTracker, RttEstimator, WindowedMax};
use crate::path::{PathId, PathSet};
use crate::scheduler::WeightedRoundRobin;
use crate::seq::Seq;
use crate::wire::{Kind, Trailer};

/// Probe interval of a path that carries no data.
pub const PROBE_IDLE: Duration = Duration::from_millis(100);
/// Probe interval of a path that carries data: each echo corrects the
/// scheduler's model of the path's queue, which drifts in between.
pub const PROBE_BUSY: Duration = Duration::from_millis(10);
/// Shortest silence (no new echo) after which a path is down.
pub const DOWN_AFTER_MIN: Duration = Duration::from_millis(120);
/// Longest: a dead path is down within this, whatever its RTT.
pub const DOWN_AFTER_MAX: Duration = Duration::from_millis(290);
/// A path that has sent data this recently is busy.
const BUSY_WINDOW: Duration = Duration::from_millis(100);
/// Margin over the expected round trip before a probe's echo is overdue.
const ECHO_OVERDUE_MARGIN: Duration = Duration::from_millis(10);
/// Loss above which a path is set aside while another is clean. Repairs
/// hide a path's losses from the inner flow, at the cost of a round trip's
/// wait for each: worth it for a few losses, not for many.
const LOSS_SET_ASIDE: f64 = 0.02;
/// Loss below which a path counts as clean.
const LOSS_CLEAN: f64 = 0.002;
/// Packets a path must have carried before its loss is judged.
const LOSS_MIN_PACKETS: u64 = 1000;
/// Time a path must have been up before its loss is judged: the first
/// moments of a flow overrun paths whose rate is not known yet, and those
/// drops are no verdict on the path.
const LOSS_SETTLE: Duration = Duration::from_secs(1);
/// First time a lossy path is set aside; doubles each time, up to the max.
const ASIDE_FIRST: Duration = Duration::from_secs(10);
const ASIDE_MAX: Duration = Duration::from_secs(300);
/// Rate assumed for a path before it has been measured: 100 Mbit/s.
const INITIAL_RATE: f64 = 12.5e6;
/// Queueing delay above which losses are put down to congestion: not
/// counted against the path, and left to the inner flow (its signal to
/// slow down) rather than repaired.
const CONGESTED_US: f64 = 10_000.0;
/// Queueing delay above which a path's delivery rate is its capacity.
const QUEUED_US: f64 = 1000.0;
/// Modelled queue above which a probe that meets under a quarter of it says
/// the path's capacity is underestimated. Not less: behind a token bucket
/// (tbf), bursts pass with no queue, and at 2 ms the scheduler forgot good
/// capacity samples often enough to cost 5% in the end-to-end test.
const UNDERESTIMATED_QUEUE_US: f64 = 5000.0;
/// Bytes a delivery-rate sample must cover to count as capacity: a few
/// packets in an interval say more about the sender than about the path.
const QUEUED_MIN_BYTES: u64 = 16 * 1024;
/// Headroom over the measured delivery rate, so a path's share can grow
/// when it has capacity to spare (as BBR's probing gain).
const RATE_GAIN: f64 = 1.25;
/// How long rate maxima are remembered.
const FILTER_WINDOW: Duration = Duration::from_secs(10);
/// How long delay minima are remembered: long, because a path kept busy
/// never shows its empty-queue delay, and a minimum that rose with the
/// standing queue would make the other paths look closer than they are.
const BASE_DELAY_WINDOW: Duration = Duration::from_secs(120);
/// Floor of the receiver's adaptive hold time.
const HOLD_FLOOR: Duration = Duration::from_millis(2);

/// How the sender picks paths.
#[derive(Clone, Debug)]
pub enum Policy {
    /// Earliest expected arrival; `caps` (shares summing to 1) limit paths.
    Adaptive {
        /// Optional maximum share of bytes per path.
        caps: Option<Vec<f64>>,
    },
    /// Static weighted round-robin.
    RoundRobin(WeightedRoundRobin),
}

impl Policy {
    /// Adaptive, with caps from weights if any are given.
    pub fn adaptive(weights: Option<&[u32]>) -> Policy {
        let caps = weights.map(|w| {
            let total: u32 = w.iter().sum();
            w.iter()
                .map(|&x| f64::from(x) / f64::from(total.max(1)))
                .collect()
        });
        Policy::Adaptive { caps }
    }
}

/// Whether a path can carry data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathState {
    /// No WireGuard session.
    NoSession,
    /// Session up, no probe echoed yet: usable, on trust.
    Unconfirmed,
    /// Echoes arriving.
    Up,
    /// No echo for too long.
    Down,
    /// Up, but losing packets while another path is clean; retried later.
    SetAside,
}

/// A change worth logging, once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PathEvent {
    /// Which path.
    pub path: PathId,
    /// Its new state.
    pub state: PathState,
    /// Loss that set it aside, or silence that took it down, or 0.
    pub detail: f64,
}

/// What the monitor knows of one path, for status output.
#[derive(Clone, Copy, Debug, Default)]
pub struct PathEstimate {
    /// Smoothed RTT, ms.
    pub srtt_ms: Option<f64>,
    /// Our one-way delay above the fastest path's, ms (base, no queue).
    pub owd_rel_ms: Option<f64>,
    /// Queueing delay measured on our direction, ms.
    pub queue_ms: f64,
    /// The scheduler's model of that queue, ms, as of the last packet.
    pub model_queue_ms: f64,
    /// Delivery rate (windowed max), Mbit/s.
    pub rate_mbps: Option<f64>,
    /// Loss of our data on this path, smoothed, as a fraction.
    pub loss: f64,
    /// The peer's one-way delay towards us, above its fastest path's, ms.
    pub owd_in_rel_ms: Option<f64>,
    /// Jitter of the peer's one-way delay towards us, ms.
    pub jitter_in_ms: f64,
    /// The echo of a probe is overdue: new data avoids the path until one
    /// comes (it is not down yet).
    pub echo_late: bool,
    /// Times an echo came that late.
    pub late_echoes: u64,
}

#[derive(Clone, Copy)]
struct PeerProbe {
    number: u32,
    sent_us: u64,
    arrived_us: u64,
}

#[derive(Clone, Copy)]
struct SentProbe {
    number: u32,
    at: Instant,
    bytes_sent: u64,
    /// The modelled queue then, µs at the path's rate.
    model_queue_us: f64,
}

/// Probes remembered per path for matching echoes: over half a second's
/// worth while busy.
const PROBES_REMEMBERED: usize = 64;
/// Shortest span a delivery-rate or loss sample covers. Over shorter ones
/// the count swings with when the peer happened to read its sockets, and
/// the windowed maximum of the samples overstates the path: in the lab,
/// 40 ms spans read a 95 Mbit/s path at up to 114, and the scheduler
/// queued a few milliseconds more there than on the others, which the far
/// side held packets for. 80 ms spans read it at about 101. (120 ms read
/// it better still, but the simulated 10/80 ms paths then held 64 ms.)
const SAMPLE_SPAN_US: u64 = 80_000;

#[derive(Clone, Copy)]
struct Feedback {
    peer_sent_us: u64,
    rx_packets: u64,
    rx_bytes: u64,
    rx_highest: Seq,
}

struct PathMonitor {
    state: PathState,
    /// Up, but the echo of a probe is overdue: carries nothing new until
    /// an echo comes, well before it would be marked down. Not a state
    /// change (not logged): a path that only hiccupped is back at once.
    suspect: bool,
    /// Times the path became suspect.
    late_echoes: u64,
    session_since: Option<Instant>,
    // Probing.
    probes_sent: u32,
    next_probe: Option<Instant>,
    /// Interval to our next probe, as of the last one sent.
    probe_interval: Duration,
    last_data_sent: Option<Instant>,
    last_data_received: Option<Instant>,
    // Our direction, from echoes.
    rtt: RttEstimator,
    owd_out: DelayTracker,
    /// Delivery rates measured while the path had a queue: its capacity.
    rate: WindowedMax,
    /// The highest delivery rate measured without a queue (what was sent);
    /// raises the estimate when the path carries more than it was credited.
    rate_unqueued: WindowedMax,
    /// Our path sequence number of the last data packet sent into a
    /// standing queue (flagged congested).
    last_congested: Option<Seq>,
    loss: f64,
    judged_packets: u64,
    last_echo_number: u32,
    last_echo: Option<Instant>,
    /// When the path was marked down, while it is.
    down_since: Option<Instant>,
    last_feedback: Option<Feedback>,
    aside_until: Option<Instant>,
    aside_for: Duration,
    /// Our path sequence number when the path came back from down.
    resumed_at: Option<Seq>,
    // Virtual queue at the path's bottleneck, drained at its rate.
    queue_bytes: f64,
    queue_at: Option<Instant>,
    /// Data bytes sent on the path so far.
    bytes_sent: u64,
    /// Our recent probes: number, when sent, and `bytes_sent` then; an echo
    /// of one says how much queue it met, and these say what was sent since.
    probes_in_flight: VecDeque<SentProbe>,
    sent_share: f64,
    // The peer's direction, from its probes.
    peer_epoch: Option<u32>,
    peer_probe: Option<PeerProbe>,
    owd_in: DelayTracker,
    last_peer_probe: Option<Instant>,
    /// How often the peer's probes arrive on this path (smoothed).
    peer_interval: Option<Duration>,
    // What we received here, reported in our probes.
    rx_packets: u64,
    rx_bytes: u64,
    rx_highest: Option<Seq>,
}

impl PathMonitor {
    fn new() -> Self {
        PathMonitor {
            state: PathState::NoSession,
            suspect: false,
            late_echoes: 0,
            session_since: None,
            probes_sent: 0,
            next_probe: None,
            probe_interval: PROBE_IDLE,
            last_data_sent: None,
            last_data_received: None,
            rtt: RttEstimator::default(),
            owd_out: DelayTracker::new(BASE_DELAY_WINDOW),
            rate: WindowedMax::new(FILTER_WINDOW),
            rate_unqueued: WindowedMax::new(FILTER_WINDOW),
            last_congested: None,
            loss: 0.0,
            judged_packets: 0,
            last_echo_number: 0,
            last_echo: None,
            down_since: None,
            last_feedback: None,
            aside_until: None,
            aside_for: ASIDE_FIRST,
            resumed_at: None,
            queue_bytes: 0.0,
            queue_at: None,
            bytes_sent: 0,
            probes_in_flight: VecDeque::with_capacity(PROBES_REMEMBERED),
            sent_share: 0.0,
            peer_epoch: None,
            peer_probe: None,
            owd_in: DelayTracker::new(BASE_DELAY_WINDOW),
            last_peer_probe: None,
            peer_interval: None,
            rx_packets: 0,
            rx_bytes: 0,
            rx_highest: None,
        }
    }

    /// Queueing delay on our direction, µs: the latest probe's or the
    /// smoothed one, whichever is more.
    fn queueing(&self) -> f64 {
        self.owd_out.latest_queueing().max(self.owd_out.queueing())
    }

    fn can_carry(&self) -> bool {
        matches!(self.state, PathState::Up | PathState::Unconfirmed) && !self.suspect
    }

    fn busy(&self, now: Instant) -> bool {
        self.last_data_sent
            .is_some_and(|t| now.saturating_duration_since(t) < BUSY_WINDOW)
    }

    /// Whether to probe at the busy rate: data went either way lately. Our
    /// probes carry the echoes and receive counts the peer's scheduler
    /// corrects its model of the path by, and a path may carry the peer's
    /// data while ours (its ACKs) go on another.
    fn probe_fast(&self, now: Instant) -> bool {
        self.busy(now)
            || self
                .last_data_received
                .is_some_and(|t| now.saturating_duration_since(t) < BUSY_WINDOW)
    }

    /// When a fresh echo is overdue: a round trip with its variation, plus
    /// the wait for the peer's next probe (which carries the echo), plus one
    /// more interval of each side (so that one lost probe or echo is not
    /// enough: moving a lossy path's traffic away and back reorders it),
    /// plus a margin, after our oldest unechoed probe left or the last echo
    /// came, whichever is later (a probe lost in an outage is never echoed,
    /// and must not make the path suspect again the moment it is back).
    /// `None` while the path is not up.
    fn echo_overdue_at(&self) -> Option<Instant> {
        if self.state != PathState::Up {
            return None;
        }
        let oldest = self
            .probes_in_flight
            .iter()
            .find(|p| p.number > self.last_echo_number)?;
        let theirs = self.peer_interval.unwrap_or(PROBE_IDLE).min(PROBE_IDLE);
        let rtt = self.rtt.srtt_us()? + 4.0 * self.rtt.rttvar_us();
        let wait = self.probe_interval + 2 * theirs + ECHO_OVERDUE_MARGIN;
        let since = self.last_echo.map_or(oldest.at, |e| e.max(oldest.at));
        Some(since + wait + Duration::from_micros(rtt as u64))
    }

    /// How long without a new echo before the path is down. The peer
    /// echoes our latest probe in its own, on its own schedule, so between
    /// two fresh echoes pass up to one of our intervals and one of its (when
    /// its probe leaves just before ours arrives), plus the round trip and
    /// its variation. We probe faster while `busy`.
    fn down_after(&self, busy: bool) -> Duration {
        let ours = if busy { PROBE_BUSY } else { PROBE_IDLE };
        let theirs = self.peer_interval.unwrap_or(PROBE_IDLE).min(PROBE_IDLE);
        let rtt = 2.0 * self.rtt.srtt_us().unwrap_or(0.0) + 4.0 * self.rtt.rttvar_us();
        (ours + theirs + Duration::from_millis(20) + Duration::from_micros(rtt as u64))
            .clamp(DOWN_AFTER_MIN, DOWN_AFTER_MAX)
    }

    /// When the path is down unless a new echo comes: [`down_after`] the
    /// last one (or the session's start), as a busy path if it is still
    /// busy then. One answer for both the timer and the check, so the timer
    /// never fires at a time the check does not act on.
    ///
    /// [`down_after`]: Self::down_after
    fn down_at(&self) -> Option<Instant> {
        let since = self.last_echo.or(self.session_since)?;
        let as_busy = since + self.down_after(true);
        let busy_then = self
            .last_data_sent
            .is_some_and(|t| t + BUSY_WINDOW > as_busy);
        Some(if busy_then {
            as_busy
        } else {
            since + self.down_after(false)
        })
    }

    /// Return the path's estimated capacity, bytes per second. A delivery
    /// rate says what the path carried, which is its capacity only when a
    /// queue stood at the bottleneck; otherwise it is a lower bound.
    fn capacity(&self) -> f64 {
        let unqueued = self.rate_unqueued.get().unwrap_or(0.0);
        self.rate.get().unwrap_or(INITIAL_RATE).max(unqueued)
    }

    /// Bytes per microsecond the scheduler assumes the path drains: its
    /// capacity where that was measured, else a little more than it has
    /// carried so far, so that its share can grow until a queue shows;
    /// before any measurement, the initial guess as it is.
    fn rate_bytes_per_us(&self) -> f64 {
        let gain = if self.rate.get().is_none() && self.rate_unqueued.get().is_some() {
            RATE_GAIN
        } else {
            1.0
        };
        self.capacity() * gain / 1e6
    }

    /// Set the queue model from what the echo of probe `number` measured:
    /// the queue the probe met, plus what was sent after it, less what the
    /// path drained since. Both ways: a rate estimate a little low or high
    /// makes the model drift between echoes, and a model that only rises
    /// would keep a path idle while its real queue runs dry.
    fn resync_queue(&mut self, now: Instant, number: u32) {
        self.drain_queue(now);
        while self
            .probes_in_flight
            .front()
            .is_some_and(|p| p.number < number)
        {
            self.probes_in_flight.pop_front();
        }
        let Some(probe) = self.probes_in_flight.front().filter(|p| p.number == number) else {
            return;
        };
        let met_us = self.owd_out.latest_queueing();
        if probe.model_queue_us > UNDERESTIMATED_QUEUE_US && met_us < probe.model_queue_us / 4.0 {
            // The model had a queue where the probe met next to none: the
            // path drains faster than its capacity estimate. A low queued
            // sample (say, a trickle read while the smoothed delay still
            // showed a queue) would otherwise cap the path at what it was
            // given, for the whole filter window. Forget such samples and
            // probe upwards again.
            self.rate.reset();
        }
        let (probe_at, probe_bytes_sent) = (probe.at, probe.bytes_sent);
        let rate = self.rate_bytes_per_us();
        let met = met_us * rate;
        let sent_since = (self.bytes_sent - probe_bytes_sent) as f64;
        let drained = now.saturating_duration_since(probe_at).as_micros() as f64 * rate;
        self.queue_bytes = (met + sent_since - drained).max(0.0);
    }

    fn drain_queue(&mut self, now: Instant) {
        if let Some(at) = self.queue_at {
            let elapsed = now.saturating_duration_since(at).as_micros() as f64;
            self.queue_bytes = (self.queue_bytes - elapsed * self.rate_bytes_per_us()).max(0.0);
        }
        self.queue_at = Some(now);
    }
}

/// The sender's numbering, the path monitor and the scheduling policy of one
/// tunnel.
pub struct Multipath {
    origin: Instant,
    epoch: u32,
    next_seq: Seq,
    path_seq: Vec<Seq>,
    paths: Vec<PathMonitor>,
    policy: Policy,
    events: VecDeque<PathEvent>,
}

impl Multipath {
    /// Create the state for `paths` paths at time `now`, for a run
    /// identified by `epoch`.
    pub fn new(now: Instant, epoch: u32, paths: usize, policy: Policy) -> Self {
        Multipath {
            origin: now,
            epoch,
            next_seq: Seq(0),
            path_seq: vec![Seq(0); paths],
            paths: (0..paths).map(|_| PathMonitor::new()).collect(),
            policy,
            events: VecDeque::new(),
        }
    }

    /// Return this run's epoch.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    fn micros(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.origin).as_micros() as u64
    }

    fn set_state(&mut self, path: usize, state: PathState, detail: f64) {
        let p = &mut self.paths[path];
        if p.state != state {
            p.state = state;
            // Only a fresh echo makes a path up again, and that clears it;
            // a stale flag must not keep a new session's path idle.
            p.suspect = false;
            // Unconfirmed is a passing state, not news.
            if state != PathState::Unconfirmed {
                self.events.push_back(PathEvent {
                    path: PathId(path as u8),
                    state,
                    detail,
                });
            }
        }
    }

    /// Tell whether the path's WireGuard session is established.
    pub fn set_session(&mut self, now: Instant, path: PathId, established: bool) {
        let i = path.index();
        let Some(p) = self.paths.get_mut(i) else {
            return;
        };
        match (established, p.state) {
            (true, PathState::NoSession) => {
                p.session_since = Some(now);
                p.last_echo = None;
                p.next_probe = Some(now);
                self.set_state(i, PathState::Unconfirmed, 0.0);
            }
            (false, PathState::NoSession) | (true, _) => {}
            (false, _) => {
                p.session_since = None;
                p.next_probe = None;
                self.set_state(i, PathState::NoSession, 0.0);
            }
        }
    }

    /// Return the state of a path.
    pub fn state(&self, path: PathId) -> PathState {
        self.paths
            .get(path.index())
            .map_or(PathState::NoSession, |p| p.state)
    }

    /// Return whether a path has a session but has been down long enough
    /// that a fresh WireGuard handshake is worth trying (the peer may have
    /// restarted and lost its session).
    pub fn wants_handshake(&self, now: Instant, path: PathId) -> bool {
        self.paths.get(path.index()).is_some_and(|p| {
            p.state == PathState::Down
                && p.last_echo
                    .or(p.session_since)
                    .is_some_and(|t| now.saturating_duration_since(t) > Duration::from_secs(1))
        })
    }

    /// Return the paths data may use now.
    pub fn paths_in_use(&self) -> PathSet {
        // Nothing better: a path whose echo is late beats a lossy one, and
        // a lossy one beats none.
        let tiers: [&dyn Fn(&PathMonitor) -> bool; 3] = [
            &|p| p.can_carry(),
            &|p| matches!(p.state, PathState::Up | PathState::Unconfirmed),
            &|p| p.state == PathState::SetAside,
        ];
        for usable in tiers {
            let mut set = PathSet::default();
            for (i, p) in self.paths.iter().enumerate() {
                if usable(p) {
                    set.insert(PathId(i as u8));
                }
            }
            if set != PathSet::default() {
                return set;
            }
        }
        PathSet::default()
    }

    /// Return the paths on which a packet sent earlier may still arrive
    /// after one sent now: path p is in the set while less time has passed
    /// since it last carried data than its delay above the fastest path
    /// (base plus queue, modelled or measured, whichever is more), with
    /// margins. A path that is down is not in it. The receiver waits for
    /// gaps only on these.
    fn recently_used(&self, now: Instant) -> PathSet {
        let base_min = self.paths.iter().filter_map(|p| p.owd_out.min()).min();
        let mut set = PathSet::default();
        for (i, p) in self.paths.iter().enumerate() {
            let Some(sent) = p.last_data_sent else {
                continue;
            };
            let base = match (p.owd_out.min(), base_min) {
                (Some(b), Some(m)) => (b - m) as f64,
                _ => 0.0,
            };
            if p.state == PathState::Down {
                continue; // whatever it had in flight is lost
            }
            let queue = (p.queue_bytes / p.rate_bytes_per_us()).max(p.queueing());
            // Queues move between measurements: wide margins, since a path
            // dropped from the set too early turns its late packets into
            // losses for the inner flow.
            let spread = base + 1.5 * queue + 2.0 * p.rtt.rttvar_us();
            let window = Duration::from_micros(spread as u64) + Duration::from_millis(10);
            if now.saturating_duration_since(sent) < window {
                set.insert(PathId(i as u8));
            }
        }
        set
    }

    /// Pick the path for a data packet of `len` bytes and number it; `None`
    /// when no path can carry it.
    pub fn handle_outbound(&mut self, now: Instant, len: usize) -> Option<(PathId, Trailer)> {
        let picked = self.send_as(now, self.next_seq, len, self.paths_in_use(), false)?;
        self.next_seq = self.next_seq.next();
        Some(picked)
    }

    /// Pick the path to resend the data packet numbered `seq`, of `len`
    /// bytes, that the peer asked for again after it was lost on `lost_on`;
    /// `None` when no path can carry it. It keeps its number and takes the
    /// next one of its new path. Neither the path that lost it (it may have
    /// died) nor one that is losing packets carries it while another can.
    pub fn handle_repair(
        &mut self,
        now: Instant,
        seq: Seq,
        len: usize,
        lost_on: PathId,
    ) -> Option<(PathId, Trailer)> {
        let in_use = self.paths_in_use();
        let mut clean = PathSet::default();
        for path in in_use.iter() {
            if path != lost_on && self.paths[path.index()].loss < LOSS_CLEAN {
                clean.insert(path);
            }
        }
        let candidates = if clean == PathSet::default() {
            in_use
        } else {
            clean
        };
        self.send_as(now, seq, len, candidates, true)
    }

    /// Pick a path among `in_use` for `len` bytes numbered `seq`, and
    /// account for them there. A repair does not make its path one the
    /// receiver must wait on for gaps: nothing sent after it follows it
    /// there.
    fn send_as(
        &mut self,
        now: Instant,
        seq: Seq,
        len: usize,
        in_use: PathSet,
        repair: bool,
    ) -> Option<(PathId, Trailer)> {
        let path = match &mut self.policy {
            Policy::RoundRobin(rr) => rr.pick(|p| in_use.contains(p))?,
            Policy::Adaptive { caps } => {
                Self::earliest_arrival(&mut self.paths, now, len, in_use, caps.as_deref())?
            }
        };
        let i = path.index();
        // The receiver waits for gaps only on paths that may still deliver
        // them: those that carried data lately, and this one. A path that is
        // eligible but idle would otherwise hold up every loss release.
        let mut carrying = self.recently_used(now);
        carrying.insert(path);
        let trailer = Trailer {
            seq,
            path_seq: self.path_seq[i],
            epoch: self.epoch,
            paths_in_use: carrying,
            kind: Kind::Data,
            congested: self.paths[i].queueing() > CONGESTED_US,
        };
        self.path_seq[i] = self.path_seq[i].next();
        let p = &mut self.paths[i];
        if trailer.congested {
            p.last_congested = Some(trailer.path_seq);
        }
        p.drain_queue(now);
        p.queue_bytes += len as f64;
        p.bytes_sent += len as u64;
        if repair {
            return Some((path, trailer));
        }
        if !p.busy(now) {
            // Becoming busy: probe sooner, to notice a failure sooner.
            p.next_probe = p.next_probe.map(|t| t.min(now + PROBE_BUSY));
        }
        p.last_data_sent = Some(now);
        if matches!(&self.policy, Policy::Adaptive { caps: Some(_) }) {
            // Shares, for the caps only; they decay per packet, so about
            // the last 1000 packets count.
            for (j, q) in self.paths.iter_mut().enumerate() {
                q.sent_share = q.sent_share * 0.999 + if j == i { 0.001 } else { 0.0 };
            }
        }
        Some((path, trailer))
    }

    fn earliest_arrival(
        paths: &mut [PathMonitor],
        now: Instant,
        len: usize,
        in_use: PathSet,
        caps: Option<&[f64]>,
    ) -> Option<PathId> {
        let base_min = in_use
            .iter()
            .filter_map(|p| paths[p.index()].owd_out.min())
            .min();
        let mut best: Option<(f64, PathId)> = None;
        let mut capped_fallback: Option<(f64, PathId)> = None;
        for path in in_use.iter() {
            let p = &mut paths[path.index()];
            p.drain_queue(now);
            let rate = p.rate_bytes_per_us();
            let base = match (p.owd_out.min(), base_min) {
                (Some(b), Some(m)) => (b - m) as f64,
                _ => 0.0,
            };
            let queue = p.queue_bytes / rate;
            let arrival = base + queue + len as f64 / rate;
            let over_cap =
                caps.is_some_and(|c| c.get(path.index()).is_some_and(|&cap| p.sent_share > cap));
            let slot = if over_cap {
                &mut capped_fallback
            } else {
                &mut best
            };
            if slot.is_none_or(|(a, _)| arrival < a) {
                *slot = Some((arrival, path));
            }
        }
        best.or(capped_fallback).map(|(_, p)| p)
    }

    /// Count a data packet received on `path` at `now` (reported back in
    /// our probes).
    pub fn handle_data_received(
        &mut self,
        now: Instant,
        path: PathId,
        trailer: &Trailer,
        len: usize,
    ) {
        let Some(p) = self.paths.get_mut(path.index()) else {
            return;
        };
        if !p.probe_fast(now) {
            // Becoming busy: probe sooner.
            p.next_probe = p.next_probe.map(|t| t.min(now + PROBE_BUSY));
        }
        p.last_data_received = Some(now);
        if p.peer_epoch.is_some_and(|e| e != trailer.epoch) {
            // Data from a restarted peer before its first probe: start over.
            p.rx_packets = 0;
            p.rx_bytes = 0;
            p.rx_highest = None;
            p.peer_epoch = Some(trailer.epoch);
            p.peer_probe = None;
        }
        p.rx_packets += 1;
        p.rx_bytes += len as u64;
        if p.rx_highest.is_none_or(|h| h.is_before(trailer.path_seq)) {
            p.rx_highest = Some(trailer.path_seq);
        }
    }

    /// Take in a probe the peer sent on `path`, with the epoch of its trailer.
    pub fn handle_probe(&mut self, now: Instant, path: PathId, epoch: u32, probe: &Probe) {
        let i = path.index();
        let now_us = self.micros(now);
        let Some(p) = self.paths.get_mut(i) else {
            return;
        };
        if p.peer_epoch != Some(epoch) {
            // A new peer run: its clock, numbers and counters start over.
            if p.peer_epoch.is_some() {
                p.rx_packets = 0;
                p.rx_bytes = 0;
                p.rx_highest = None;
            }
            p.peer_epoch = Some(epoch);
            p.peer_probe = None;
            p.owd_in.reset();
            p.owd_out.reset();
            p.last_feedback = None;
            p.last_echo_number = 0;
        }
        if p.peer_probe.is_some_and(|old| old.number >= probe.number) {
            return; // reordered or replayed: nothing new
        }
        p.peer_probe = Some(PeerProbe {
            number: probe.number,
            sent_us: probe.sent_us,
            arrived_us: now_us,
        });
        if let Some(last) = p.last_peer_probe {
            let gap = now.saturating_duration_since(last);
            p.peer_interval = Some(match p.peer_interval {
                None => gap,
                // Quick to lengthen (a peer going idle), slow to shorten.
                Some(i) if gap > i => gap,
                Some(i) => (i * 7 + gap) / 8,
            });
        }
        p.last_peer_probe = Some(now);
        p.owd_in.update(now, now_us as i64 - probe.sent_us as i64);

        // When we sent the probe echoed, if it is still remembered.
        let echoed_sent_at = p
            .probes_in_flight
            .iter()
            .find(|q| q.number == probe.echo_number)
            .map(|q| q.at);
        // The echo: proof that our direction works, and a round trip.
        let fresh_echo =
            probe.echo_number > p.last_echo_number && probe.echo_number <= p.probes_sent;
        if fresh_echo {
            p.last_echo_number = probe.echo_number;
            p.last_echo = Some(now);
            p.suspect = false;
            let waited = probe.sent_us.saturating_sub(probe.echo_arrived_us);
            let rtt = now_us
                .saturating_sub(probe.echo_sent_us)
                .saturating_sub(waited);
            p.rtt.update(rtt as f64);
            p.owd_out.update(
                now,
                probe.echo_arrived_us as i64 - probe.echo_sent_us as i64,
            );
            p.resync_queue(now, probe.echo_number);
        }

        // What the peer received of our data: delivery rate and loss.
        let mut fb = Feedback {
            peer_sent_us: probe.sent_us,
            rx_packets: probe.rx_packets,
            rx_bytes: probe.rx_bytes,
            rx_highest: probe.rx_highest_path_seq,
        };
        if let Some(last) = p.last_feedback {
            let dt = fb.peer_sent_us.saturating_sub(last.peer_sent_us);
            if fb.rx_bytes < last.rx_bytes || fb.rx_packets < last.rx_packets {
                // Counters went back: the peer's receive state restarted.
            } else if dt < SAMPLE_SPAN_US {
                // Too short a span; measure from the same start next time.
                fb = last;
            } else {
                let bytes = fb.rx_bytes - last.rx_bytes;
                // Old samples leave the filters even when no new one comes
                // (a path the scheduler stopped using sends none).
                p.rate.expire(now);
                p.rate_unqueued.expire(now);
                if bytes > 0 {
                    let rate = bytes as f64 * 1e6 / dt as f64;
                    if p.owd_out.queueing() > QUEUED_US && bytes >= QUEUED_MIN_BYTES {
                        p.rate.update(now, rate);
                    } else {
                        p.rate_unqueued.update(now, rate);
                    }
                }
                // Packets lost while the path was down are the outage's,
                // not the path's: count only from where sending resumed.
                let from = match p.resumed_at {
                    Some(resumed) if last.rx_highest.is_before(resumed) => {
                        Seq(resumed.0.wrapping_sub(1))
                    }
                    _ => last.rx_highest,
                };
                if p.resumed_at.is_some_and(|r| !fb.rx_highest.is_before(r)) {
                    p.resumed_at = None;
                }
                let expected = fb.rx_highest.distance_from(from);
                let got = (fb.rx_packets - last.rx_packets) as i64;
                // Drops at a full queue are congestion, which the inner
                // flow's own control handles; only loss without a standing
                // queue says the path itself is bad. So a span is not judged
                // if any packet in it was sent into a standing queue (the
                // queue may be gone by the span's end: the inner flow backed
                // off), nor without a fresh echo (our probe may have been
                // dropped at that full queue, and the queue is unknown).
                let sent_into_queue = p.last_congested.is_some_and(|c| from.is_before(c));
                let congested = !fresh_echo || p.queueing() > CONGESTED_US || sent_into_queue;
                let settled = p
                    .session_since
                    .is_some_and(|t| now.saturating_duration_since(t) >= LOSS_SETTLE);
                if expected > 0 && !congested && settled {
                    let lost = (expected - got).max(0) as f64;
                    let w = expected as f64 / (expected as f64 + 2000.0);
                    p.loss = p.loss * (1.0 - w) + (lost / expected as f64) * w;
                    p.judged_packets += expected as u64;
                }
            }
        }
        p.last_feedback = Some(fb);

        // A path that was down is back only when a probe sent since then
        // is echoed: the peer's first probe after an outage echoes the last
        // one it had before, which proves only the peer's direction works.
        // (Ours came back half a second later in one lab run, and the data
        // sent meanwhile was lost.)
        let proves_ours = match p.down_since {
            Some(down) => echoed_sent_at.is_some_and(|t| t > down),
            None => true,
        };
        if matches!(p.state, PathState::Down | PathState::Unconfirmed)
            && p.last_echo == Some(now)
            && proves_ours
        {
            if p.state == PathState::Down {
                p.resumed_at = Some(self.path_seq[i]);
            }
            p.down_since = None;
            // A lossy path that was down meanwhile is still lossy.
            let state = if p.aside_until.is_some_and(|t| t > now) {
                PathState::SetAside
            } else {
                PathState::Up
            };
            let loss = p.loss;
            self.set_state(i, state, loss);
        }
        self.judge_loss(now, i);
    }

    fn judge_loss(&mut self, now: Instant, i: usize) {
        let p = &self.paths[i];
        if p.state != PathState::Up
            || p.judged_packets < LOSS_MIN_PACKETS
            || p.loss <= LOSS_SET_ASIDE
        {
            return;
        }
        let another_clean = self.paths.iter().enumerate().any(|(j, q)| {
            j != i
                && q.state == PathState::Up
                && q.loss < LOSS_CLEAN
                && q.judged_packets >= LOSS_MIN_PACKETS
        });
        if another_clean {
            let loss = p.loss;
            let p = &mut self.paths[i];
            p.aside_until = Some(now + p.aside_for);
            p.aside_for = (p.aside_for * 2).min(ASIDE_MAX);
            self.set_state(i, PathState::SetAside, loss);
        }
    }

    /// Return the next probe due by `now`, with its trailer; call until
    /// `None`.
    pub fn poll_probe(&mut self, now: Instant) -> Option<(PathId, Probe, Trailer)> {
        let now_us = self.micros(now);
        let in_use = self.paths_in_use();
        let i = self
            .paths
            .iter()
            .position(|p| p.next_probe.is_some_and(|t| t <= now))?;
        let p = &mut self.paths[i];
        p.probes_sent += 1;
        if p.probes_in_flight.len() == PROBES_REMEMBERED {
            p.probes_in_flight.pop_front();
        }
        p.drain_queue(now);
        let model_queue_us = p.queue_bytes / p.rate_bytes_per_us();
        p.probes_in_flight.push_back(SentProbe {
            number: p.probes_sent,
            at: now,
            bytes_sent: p.bytes_sent,
            model_queue_us,
        });
        let interval = if p.probe_fast(now) {
            PROBE_BUSY
        } else {
            PROBE_IDLE
        };
        p.next_probe = Some(now + interval);
        p.probe_interval = interval;
        let echo = p.peer_probe.unwrap_or(PeerProbe {
            number: 0,
            sent_us: 0,
            arrived_us: 0,
        });
        let probe = Probe {
            number: p.probes_sent,
            sent_us: now_us,
            echo_number: echo.number,
            echo_sent_us: echo.sent_us,
            echo_arrived_us: echo.arrived_us,
            rx_packets: p.rx_packets,
            rx_bytes: p.rx_bytes,
            rx_highest_path_seq: p.rx_highest.unwrap_or(Seq(0)),
        };
        let trailer = Trailer {
            seq: Seq(0),
            path_seq: Seq(0),
            epoch: self.epoch,
            paths_in_use: in_use,
            kind: Kind::Control,
            congested: false,
        };
        Some((PathId(i as u8), probe, trailer))
    }

    /// Return when [`handle_timeout`](Self::handle_timeout) or
    /// [`poll_probe`](Self::poll_probe) next has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.paths
            .iter()
            .flat_map(|p| {
                let down_at = match p.state {
                    PathState::Up | PathState::Unconfirmed | PathState::SetAside => p.down_at(),
                    _ => None,
                };
                let overdue_at = p.echo_overdue_at().filter(|_| !p.suspect);
                [p.next_probe, down_at, p.aside_until, overdue_at]
            })
            .flatten()
            .min()
    }

    /// Mark paths whose echoes stopped as down, and give set-aside paths
    /// another chance when their time is up.
    pub fn handle_timeout(&mut self, now: Instant) {
        for i in 0..self.paths.len() {
            let p = &self.paths[i];
            if p.aside_until.is_some_and(|t| t <= now) {
                let p = &mut self.paths[i];
                p.aside_until = None;
                p.loss = 0.0;
                p.judged_packets = 0;
                if p.state == PathState::SetAside {
                    self.set_state(i, PathState::Up, 0.0);
                }
            }
            let p = &mut self.paths[i];
            if !p.suspect && p.echo_overdue_at().is_some_and(|t| t <= now) {
                p.suspect = true;
                p.late_echoes += 1;
            }
            if !matches!(
                p.state,
                PathState::Up | PathState::Unconfirmed | PathState::SetAside
            ) {
                continue;
            }
            if let (Some(since), Some(down_at)) = (p.last_echo.or(p.session_since), p.down_at()) {
                let silent = now.saturating_duration_since(since);
                if now >= down_at {
                    let p = &mut self.paths[i];
                    // What was queued there is lost; start the model empty,
                    // and do not count what the outage swallowed as the
                    // path's loss rate once it is back.
                    p.queue_bytes = 0.0;
                    p.last_feedback = None;
                    p.loss = 0.0;
                    p.judged_packets = 0;
                    p.down_since = Some(now);
                    self.set_state(i, PathState::Down, silent.as_secs_f64());
                }
            }
        }
    }

    /// Return the next path state change, for logging.
    pub fn poll_event(&mut self) -> Option<PathEvent> {
        self.events.pop_front()
    }

    /// Return how long the receiver should wait for a gap: the spread of the
    /// peer's one-way delays over the paths it is heard on, plus four times
    /// their jitter and a small floor; `None` until two paths are measured.
    pub fn hold_hint(&self, now: Instant) -> Option<Duration> {
        let live: Vec<&PathMonitor> = self
            .paths
            .iter()
            .filter(|p| {
                p.last_peer_probe
                    .is_some_and(|t| now.saturating_duration_since(t) < DOWN_AFTER_MAX)
            })
            .collect();
        let delays: Vec<f64> = live.iter().filter_map(|p| p.owd_in.smoothed()).collect();
        if delays.is_empty() {
            return None;
        }
        let spread = delays.iter().copied().fold(f64::MIN, f64::max)
            - delays.iter().copied().fold(f64::MAX, f64::min);
        let jitter = live.iter().map(|p| p.owd_in.jitter()).fold(0.0, f64::max);
        Some(Duration::from_micros((spread + 4.0 * jitter) as u64) + HOLD_FLOOR)
    }

    /// Return how long a repair should take: a NACK to the peer and the
    /// packet back, about a round trip of the fastest path (whose queue
    /// towards us the resent packet waits in too), with margins; `None`
    /// until a round trip is measured.
    pub fn repair_hint(&self) -> Option<Duration> {
        let fastest = self
            .paths
            .iter()
            .filter(|p| p.state == PathState::Up)
            .filter_map(|p| Some((p.rtt.srtt_us()?, p.rtt.rttvar_us())))
            .min_by(|a, b| a.0.total_cmp(&b.0))?;
        let us = 1.25 * fastest.0 + 4.0 * fastest.1;
        Some(Duration::from_micros(us as u64) + HOLD_FLOOR)
    }

    /// Return the paths to send a NACK on: the two with the shortest round
    /// trip among those data may use, so one loss does not lose the NACK.
    pub fn nack_paths(&self) -> PathSet {
        let usable = self.paths_in_use();
        let mut up: Vec<(f64, usize)> = self
            .paths
            .iter()
            .enumerate()
            .filter(|&(i, _)| usable.contains(PathId(i as u8)))
            .map(|(i, p)| (p.rtt.srtt_us().unwrap_or(f64::MAX), i))
            .collect();
        up.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut set = PathSet::default();
        for &(_, i) in up.iter().take(2) {
            set.insert(PathId(i as u8));
        }
        set
    }

    /// Return what is known of a path, for status output.
    pub fn estimate(&self, path: PathId) -> PathEstimate {
        let Some(p) = self.paths.get(path.index()) else {
            return PathEstimate::default();
        };
        let rel = |tracker: &dyn Fn(&PathMonitor) -> Option<f64>| {
            let own = tracker(p)?;
            let min = self
                .paths
                .iter()
                .filter_map(tracker)
                .fold(f64::MAX, f64::min);
            Some((own - min) / 1000.0)
        };
        PathEstimate {
            srtt_ms: p.rtt.srtt_us().map(|r| r / 1000.0),
            owd_rel_ms: rel(&|q: &PathMonitor| q.owd_out.min().map(|m| m as f64)),
            queue_ms: p.owd_out.queueing() / 1000.0,
            model_queue_ms: p.queue_bytes / p.rate_bytes_per_us() / 1000.0,
            rate_mbps: (p.rate.get().is_some() || p.rate_unqueued.get().is_some())
                .then(|| p.capacity() * 8.0 / 1e6),
            loss: p.loss,
            owd_in_rel_ms: rel(&|q: &PathMonitor| q.owd_in.smoothed()),
            jitter_in_ms: p.owd_in.jitter() / 1000.0,
            echo_late: p.suspect,
            late_echoes: p.late_echoes,
        }
    }
}

#[cfg(test)]
mod tests;
