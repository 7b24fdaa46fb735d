//! One path: its identity, and what is known and decided about it.
//!
//! A [`Path`] is composed of small parts, each with one job:
//! [`Liveness`](liveness) (up, down, set aside, echo late),
//! [`OurProbes`](probing) and [`PeerProbes`](probing) (probes and their
//! echoes), round-trip and one-way delay [estimators], [`Delivery`](delivery)
//! (rate and loss of our data as the peer reports it), the
//! [`QueueModel`](queue) the scheduler sends against and the
//! [`QueueLimit`](queue_limit) it fills the path to, and the probe
//! [trains](train) that tell its rate before data needs it. What needs several
//! paths at once (which paths data may use, which are clean) is in
//! [`crate::paths`].

pub mod delivery;
pub mod estimators;
pub mod liveness;
pub mod probing;
pub mod queue;
mod queue_limit;
pub mod train;

use std::fmt;
use std::time::{Duration, Instant};

use delivery::{Delivery, LossContext};
use estimators::{offset_us, DelayTracker, RttEstimator, StepJitter};
use liveness::Liveness;
pub use liveness::PathState;
use probing::{OurProbes, PeerProbes, BASE_DELAY_WINDOW, PROBE_BUSY, PROBE_IDLE};
use queue::QueueModel;
use queue_limit::QueueLimit;
use train::{OurTrains, PeerTrains};

use crate::paths::LOSS_CLEAN;
use crate::seq::Seq;
use crate::wire::Probe;

/// Most paths one tunnel may have.
pub const MAX_PATHS: usize = 16;

/// Index of a path in the configuration, from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PathId(pub u8);

impl PathId {
    /// Return the index for slices of per-path state.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

impl fmt::Display for PathId {
    /// Show it as the config file names it: `path[0]` is the first
    /// `[[path]]` table.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "path[{}]", self.0)
    }
}

/// A set of paths, as a bit mask (bit `i` is `PathId(i)`); fits the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PathSet(pub u16);

impl PathSet {
    /// Return whether `path` is in the set.
    pub fn contains(self, path: PathId) -> bool {
        path.index() < MAX_PATHS && self.0 & (1 << path.0) != 0
    }

    /// Add `path` to the set.
    pub fn insert(&mut self, path: PathId) {
        if path.index() < MAX_PATHS {
            self.0 |= 1 << path.0;
        }
    }

    /// Return the paths in the set, in order.
    pub fn iter(self) -> impl Iterator<Item = PathId> {
        (0..MAX_PATHS as u8)
            .map(PathId)
            .filter(move |&p| self.contains(p))
    }
}

/// Return the lowest base one-way delay of `paths`, if measured: delays
/// above the fastest path's are counted from it, so that they compare
/// across any subset of the paths.
pub(crate) fn base_min(paths: &[Path]) -> Option<i64> {
    paths.iter().filter_map(|p| p.owd_out.min()).min()
}

/// Shortest silence (no new echo) after which a path is down.
pub const DOWN_AFTER_MIN: Duration = Duration::from_millis(120);
/// Longest: a path that was echoed and dies is down within this,
/// whatever its RTT...
pub const DOWN_AFTER_MAX: Duration = Duration::from_millis(290);
/// ...or, idle and losing probes, within this.
const DOWN_AFTER_MAX_LOSSY_IDLE: Duration = DOWN_AFTER_MAX.saturating_add(PROBE_IDLE);
/// How long a path that lost one of the peer's probes counts as losing
/// them.
const PROBES_LOST_MEMORY: Duration = Duration::from_secs(30);
/// Longest a path whose session just came up may wait for its first echo
/// before it is down: its round trip is not measured yet, so as long as
/// the longest silence allowed, and the peer, which has not heard from us
/// yet, echoes our first probe in its next one, up to its idle interval
/// later.
const FIRST_ECHO_WITHIN: Duration = DOWN_AFTER_MAX.saturating_add(PROBE_IDLE);
/// Longest a path stays up without an echo while the peer's data, but
/// none of its probes, keeps arriving.
const PEER_PROBES_LOST_MAX: Duration = Duration::from_secs(1);
/// A path that has carried data this recently is busy.
const BUSY_WINDOW: Duration = Duration::from_millis(100);
/// Margin over the expected round trip before a probe's echo is overdue.
const ECHO_OVERDUE_MARGIN: Duration = Duration::from_millis(10);
/// Queueing delay above which a path is congested: its losses are not
/// counted against it, and when every path is congested and near
/// overflowing (see [`Path::queue_near_overflow`]) they are left to the
/// inner flow (its signal to slow down) rather than repaired.
pub(crate) const CONGESTED_US: f64 = 10_000.0;
/// Share of the queue depth a path overflowed at (its queue limit) that
/// its queue must reach for a loss there to count as an overflow.
const OVERFLOW_REACH: f64 = 0.5;
/// Queueing delay above which a packet next to a gap in a path's sequence
/// numbers says the gap was dropped at a full queue: a drop-tail queue
/// drops what comes while it is full, so the packets around the gap met it
/// full; those around a packet lost at random met whatever queue stood,
/// mostly none.
pub(crate) const MISSED_AT_QUEUE_US: f64 = CONGESTED_US;
/// Time a path must have been up before its loss is judged: the first
/// moments of a flow overrun paths whose rate is not known yet, and those
/// drops are no verdict on the path.
const LOSS_SETTLE: Duration = Duration::from_secs(1);
/// How long after a session comes up a path probes at the busy rate even
/// once its own jitter is measured: each side measures the jitter of its
/// direction from the echoes in the other's probes, so the first side
/// measured, slowing to the idle rate, would leave the other a sample per
/// idle interval. Long enough for the trains to pass and for the steps
/// the jitter needs after them.
const JITTER_WARMUP: Duration = Duration::from_millis(500);

/// A change of a path's state, worth logging once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PathEvent {
    /// Which path.
    pub path: PathId,
    /// What happened.
    pub change: PathChange,
}

/// What happened to a path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PathChange {
    /// Its probes are echoed (again): it carries data.
    Up,
    /// Its probes went unanswered this long: it carries nothing.
    Down {
        /// Time since the last echo (or since the session came up).
        silent: Duration,
    },
    /// It loses this fraction of our packets while another path is clean:
    /// set aside, and tried again later.
    SetAside {
        /// The loss that set it aside.
        loss: f64,
    },
    /// Its probes are echoed again after it was down, but it had been set
    /// aside for its loss before: it stays set aside until its retry.
    BackSetAside,
    /// It was set aside for its loss, but the clean paths it was set aside
    /// for went down or lost their session: it carries data again until
    /// they are back.
    Recalled,
    /// Its WireGuard session is gone.
    NoSession,
}

/// What is known of one path, for status output.
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
    /// The rate the scheduler's model drains the path at, Mbit/s (see
    /// [`Path::rate`]).
    pub model_rate_mbps: f64,
    /// Delivery rate (windowed max), Mbit/s.
    pub rate_mbps: Option<f64>,
    /// The highest rate our probe trains arrived at, Mbit/s.
    pub train_mbps: Option<f64>,
    /// Loss of our data on this path, smoothed, as a fraction.
    pub loss: f64,
    /// The peer's one-way delay towards us, above its fastest path's, ms.
    pub owd_in_rel_ms: Option<f64>,
    /// Jitter of the peer's one-way delay towards us, ms.
    pub jitter_in_ms: f64,
    /// The echo of a probe is overdue: new data avoids the path until one
    /// comes (it is not down yet).
    pub echo_late: bool,
    /// Times the echo was late.
    pub late_echoes: u64,
    /// The queue the scheduler fills the path to, ms, learned from its
    /// overflows; none if it never overflowed (or came back since).
    pub queue_limit_ms: Option<f64>,
    /// Times packets sent into the path's standing queue were lost beyond
    /// its random loss.
    pub overflows: u64,
}

/// The timers of one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PathTimer {
    /// The next probe is due.
    Probe,
    /// The next probe train is due.
    Train,
    /// A probe's echo is overdue: new data avoids the path.
    EchoOverdue,
    /// No echo for too long: the path is down.
    Down,
    /// A lossy path's time set aside is up.
    AsideEnds,
}

impl PathTimer {
    pub const ALL: [PathTimer; 5] = [
        PathTimer::Probe,
        PathTimer::Train,
        PathTimer::EchoOverdue,
        PathTimer::Down,
        PathTimer::AsideEnds,
    ];
}

/// Data packets received on a path, reported back to the peer in our
/// probes.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Reception {
    pub packets: u64,
    pub bytes: u64,
    /// Highest path sequence number received.
    pub highest_path_seq: Option<Seq>,
    /// Path sequence numbers missing next to a packet that arrived behind
    /// a queue (see [`MISSED_AT_QUEUE_US`]).
    pub missed_at_queue: u64,
    /// Whether the packet with the highest path sequence number met one.
    pub last_queued: bool,
}

/// Everything known and decided about one path.
#[derive(Clone, Debug)]
pub(crate) struct Path {
    pub liveness: Liveness,
    pub probes: OurProbes,
    pub peer_probes: PeerProbes,
    pub trains: OurTrains,
    pub peer_trains: PeerTrains,
    /// Round trips, from our probes' echoes.
    pub rtt: RttEstimator,
    /// The least of those lately: the round trip without a queue.
    pub base_rtt: DelayTracker,
    /// Our one-way delay, from the echoes (relative to an unknown clock
    /// offset, the same on every path).
    pub owd_out: DelayTracker,
    /// The jitter of our one-way delay while the path carried none of our
    /// data, so without the queue that data builds.
    pub idle_jitter: StepJitter,
    pub delivery: Delivery,
    pub queue: QueueModel,
    pub queue_limit: QueueLimit,
    /// Path sequence number of our next packet on the path.
    pub next_path_seq: Seq,
    /// Global sequence number of the last data packet sent on the path.
    pub last_seq_sent: Option<Seq>,
    /// The paths that packet could have taken.
    pub last_sent_could_take: PathSet,
    pub last_data_sent: Option<Instant>,
    /// When a TCP segment the peer holds last went onto the path, not as
    /// a repair: the path carried a flow's window then.
    pub last_held_sent: Option<Instant>,
    /// When anything of ours that queues at the bottleneck (data, a
    /// repair, a parity half) last went onto the path.
    last_sent: Option<Instant>,
    /// When our data last started after a pause: the path is probed fast
    /// from then on, not before.
    pub busy_since: Option<Instant>,
    pub last_data_received: Option<Instant>,
    pub reception: Reception,
    /// When TCP could last take the path (see
    /// [`crate::paths::PathTable::tcp_paths`]).
    pub takes_tcp_at: Option<Instant>,
}

impl Default for Path {
    fn default() -> Self {
        Path {
            liveness: Liveness::default(),
            probes: OurProbes::default(),
            peer_probes: PeerProbes::default(),
            trains: OurTrains::default(),
            peer_trains: PeerTrains::default(),
            rtt: RttEstimator::default(),
            base_rtt: DelayTracker::new(BASE_DELAY_WINDOW),
            owd_out: DelayTracker::new(BASE_DELAY_WINDOW),
            idle_jitter: StepJitter::default(),
            delivery: Delivery::default(),
            queue: QueueModel::default(),
            queue_limit: QueueLimit::default(),
            next_path_seq: Seq(0),
            last_seq_sent: None,
            last_sent_could_take: PathSet::default(),
            last_data_sent: None,
            last_held_sent: None,
            last_sent: None,
            busy_since: None,
            last_data_received: None,
            reception: Reception::default(),
            takes_tcp_at: None,
        }
    }
}

impl Path {
    pub fn state(&self) -> PathState {
        self.liveness.state()
    }

    /// Return the path's base one-way delay above `base_min` (see
    /// [`base_min`]), µs.
    pub fn base_above(&self, base_min: Option<i64>) -> f64 {
        match (self.owd_out.min(), base_min) {
            (Some(b), Some(m)) => b.saturating_sub(m) as f64,
            _ => 0.0,
        }
    }

    /// Bytes per µs the scheduler assumes the path drains.
    pub fn rate(&self) -> f64 {
        self.delivery.rate_bytes_per_us()
    }

    /// Queueing delay on our direction, µs: the latest probe's or the
    /// smoothed one, whichever is more.
    pub fn queueing_us(&self) -> f64 {
        self.owd_out.latest_queueing().max(self.owd_out.queueing())
    }

    /// Return whether a packet of ours lost on the path at `now` was most
    /// likely dropped at its queue: the queue stands over
    /// [`CONGESTED_US`] deep and, once the path has overflowed, at least
    /// [`OVERFLOW_REACH`] of the depth it overflowed at. A path carrying a
    /// flow keeps a standing queue far short of that depth, and what it
    /// loses there is its own random loss, which a loss-based inner flow
    /// must not see.
    pub fn queue_near_overflow(&self, now: Instant) -> bool {
        let queued = self.queueing_us();
        queued > CONGESTED_US
            && self
                .queue_limit
                .limit_us(now)
                .is_none_or(|limit| queued > OVERFLOW_REACH * limit)
    }

    /// Return the modelled queue's delay, µs, draining it to `now` first.
    pub fn model_queue_us(&mut self, now: Instant) -> f64 {
        let rate = self.rate();
        self.queue.drain(now, rate);
        self.queue.delay_us(rate)
    }

    /// Return whether the modelled queue is at the depth where the path
    /// overflowed before.
    pub fn full(&mut self, now: Instant) -> bool {
        let limit = self.queue_limit.limit_us(now);
        limit.is_some_and(|l| self.model_queue_us(now) >= l)
    }

    /// Account for `len` bytes of data or a probe train sent at `now`.
    pub fn add_to_queue(&mut self, now: Instant, len: usize) {
        let rate = self.rate();
        self.queue.add(now, len, rate);
    }

    /// Account for `len` bytes of data, a repair or a parity half sent at
    /// `now`: they queue as any bytes do, and mark the path as carrying
    /// something of ours (see [`Path::last_sent`]).
    pub fn queue_ours(&mut self, now: Instant, len: usize) {
        self.add_to_queue(now, len);
        self.last_sent = Some(now);
    }

    /// Whether the path, down, carried a TCP flow's segments until it
    /// fell silent: the flow lost the window it had there.
    pub fn carried_flow_until_down(&self) -> bool {
        self.last_held_sent
            .zip(self.liveness.down_since())
            .is_some_and(|(held, down)| {
                down.saturating_duration_since(held) <= DOWN_AFTER_MAX + BUSY_WINDOW
            })
    }

    /// Whether the path carried a TCP flow's segments lately.
    pub fn carried_flow_lately(&self, now: Instant) -> bool {
        self.last_held_sent
            .is_some_and(|t| now.saturating_duration_since(t) < BUSY_WINDOW)
    }

    /// Whether a TCP flow's segments sent on the path may still be on
    /// their way: one went out within its round trip.
    pub fn flow_in_flight(&self, now: Instant) -> bool {
        let round_trip = self
            .rtt
            .srtt_us()
            .map_or(DOWN_AFTER_MAX, |us| Duration::from_micros(us as u64));
        self.last_held_sent
            .is_some_and(|t| now.saturating_duration_since(t) < round_trip)
    }

    /// Whether the path carried our data lately.
    pub fn busy(&self, now: Instant) -> bool {
        self.last_data_sent
            .is_some_and(|t| now.saturating_duration_since(t) < BUSY_WINDOW)
    }

    /// Whether anything of ours, repairs and parity included, went onto
    /// the path from [`BUSY_WINDOW`] before `at` on: a queue of ours may
    /// have been there at `at`.
    fn carried_around(&self, at: Instant) -> bool {
        self.last_sent.is_some_and(|t| t + BUSY_WINDOW > at)
    }

    /// Whether to probe at the busy rate: data went either way lately. Our
    /// probes carry the echoes and receive counts the peer's scheduler
    /// corrects its model of the path by, and a path may carry the peer's
    /// data while ours (its ACKs) go on another.
    pub fn probe_fast(&self, now: Instant) -> bool {
        self.busy(now)
            || self
                .last_data_received
                .is_some_and(|t| now.saturating_duration_since(t) < BUSY_WINDOW)
    }

    /// Whether to probe at the busy rate so that both sides measure the
    /// path's jitter (see [`JITTER_WARMUP`]): a flow may start within a
    /// few idle probes, and neither a queue nor a probe train's rate can be
    /// told from the jitter before.
    pub fn measuring_jitter(&self, now: Instant) -> bool {
        !self.idle_jitter.warm()
            || self
                .liveness
                .session_since()
                .is_some_and(|t| now.saturating_duration_since(t) < JITTER_WARMUP)
    }

    /// Return when `timer` fires, if it is armed.
    pub fn deadline(&self, timer: PathTimer) -> Option<Instant> {
        match timer {
            PathTimer::Probe => self.probes.next_at(),
            PathTimer::Train => self.trains.next_at(),
            PathTimer::EchoOverdue => self
                .echo_overdue_at()
                .filter(|_| !self.liveness.echo_late()),
            PathTimer::Down => self.down_at().filter(|_| self.state().is_alive()),
            PathTimer::AsideEnds => self.liveness.aside_until(),
        }
    }

    /// When a fresh echo is overdue: a round trip with its variation, plus
    /// the wait for the peer's next probe (which carries the echo), plus one
    /// more interval of each side (so that one lost probe or echo is not
    /// enough: moving a lossy path's traffic away and back reorders it),
    /// plus a margin, after our oldest unechoed probe left or the last echo
    /// came, whichever is later (a probe lost in an outage is never echoed,
    /// and must not make the path late again the moment it is back).
    /// `None` while the path is not up.
    fn echo_overdue_at(&self) -> Option<Instant> {
        if self.state() != PathState::Up {
            return None;
        }
        let oldest = self.probes.oldest_unechoed()?;
        let theirs = self.peer_probes.interval();
        let rtt = self.rtt.srtt_us()? + 4.0 * self.rtt.rttvar_us();
        let wait = self.probes.interval() + 2 * theirs + ECHO_OVERDUE_MARGIN;
        let since = self
            .liveness
            .last_echo()
            .map_or(oldest.at, |e| e.max(oldest.at));
        Some(since + wait + Duration::from_micros(rtt as u64))
    }

    /// How long without a new echo before the path is down. The peer
    /// echoes our latest probe in its own, on its own schedule, so between
    /// two fresh echoes pass up to one of our intervals and one of its (when
    /// its probe leaves just before ours arrives), plus the round trip and
    /// its variation. We probe faster while `busy`.
    ///
    /// An idle path that loses probes (see [`Self::loses_probes`]) is
    /// allowed one interval more: probed ten times a second each way, it
    /// loses a probe and the next echo in a row every ten seconds or so
    /// at 3% each way, and would be taken for dead that often.
    fn down_after(&self, busy: bool, loses_probes: bool) -> Duration {
        let ours = if busy { PROBE_BUSY } else { PROBE_IDLE };
        let theirs = self.peer_probes.interval();
        let (one_lost, max) = if !busy && loses_probes {
            (ours.max(theirs), DOWN_AFTER_MAX_LOSSY_IDLE)
        } else {
            (Duration::ZERO, DOWN_AFTER_MAX)
        };
        let rtt = 2.0 * self.rtt.srtt_us().unwrap_or(0.0) + 4.0 * self.rtt.rttvar_us();
        (ours + theirs + one_lost + Duration::from_millis(20) + Duration::from_micros(rtt as u64))
            .clamp(DOWN_AFTER_MIN, max)
    }

    /// Whether the path lost probes lately, as of `at`: one of the peer's
    /// went missing in the last [`PROBES_LOST_MEMORY`], or our data is
    /// lost there more than on a clean path.
    fn loses_probes(&self, at: Instant) -> bool {
        self.peer_probes
            .missing_at()
            .is_some_and(|t| at.saturating_duration_since(t) < PROBES_LOST_MEMORY)
            || self.delivery.loss() > LOSS_CLEAN
    }

    /// When the path is down unless a new echo comes: [`down_after`] the
    /// last one, as a busy path if it is still busy then (from when it
    /// became busy, if later, and never later than as an idle one), or
    /// [`FIRST_ECHO_WITHIN`] the session's start while none came; later
    /// while the peer's data arrives but none of its probes (see below).
    /// One answer for both the timer and the check, so the timer never
    /// fires at a time the check does not act on.
    ///
    /// [`down_after`]: Self::down_after
    pub fn down_at(&self) -> Option<Instant> {
        let Some(since) = self.liveness.last_echo() else {
            return self.liveness.session_since().map(|t| t + FIRST_ECHO_WITHIN);
        };
        // A path that just became busy was probed at the idle pace until
        // then: the echo of its first fast probe is what it waits for.
        let lossy = self.loses_probes(since);
        let as_idle = since + self.down_after(false, lossy);
        let as_busy = since.max(self.busy_since.unwrap_or(since)) + self.down_after(true, lossy);
        let busy_then = self
            .last_data_sent
            .is_some_and(|t| t + BUSY_WINDOW > as_busy);
        let silent_until = if busy_then {
            as_busy.min(as_idle)
        } else {
            as_idle
        };
        // The peer's data still arrives but none of its probes since that
        // echo: they are lost on the way here, at a queue its data
        // overflows, which says nothing of our direction. Were ours lost,
        // its probes would come with an echo gone stale.
        let peer_probes_lost = self.peer_probes.last_at().is_none_or(|t| t <= since);
        Some(match self.last_data_received {
            Some(data) if peer_probes_lost && data > since => {
                let data_silent_until = data + self.down_after(true, lossy);
                silent_until.max(data_silent_until.min(since + PEER_PROBES_LOST_MAX))
            }
            _ => silent_until,
        })
    }

    /// Set the queue model from what the echo of probe `number` measured.
    fn resync_queue(&mut self, now: Instant, number: u32) {
        let rate = self.rate();
        self.queue.drain(now, rate);
        let Some(probe) = self.probes.echoed(number) else {
            return;
        };
        let met_us = self.owd_out.latest_queueing();
        self.queue_limit.met(now, met_us);
        let rate = self.rate();
        self.queue
            .resync(now, rate, met_us, probe.at, probe.sent_before);
    }

    /// Take the echo and the receive report in a probe from the peer, at
    /// `now` (`now_us` on our clock). Return whether the echo was fresh,
    /// and when the echoed probe of ours was sent, if remembered.
    pub fn handle_probe(
        &mut self,
        now: Instant,
        now_us: u64,
        probe: &Probe,
    ) -> Option<(bool, Option<Instant>)> {
        if !self.peer_probes.handle(now, now_us, probe) {
            return None;
        }
        let echoed_sent_at = self.probes.sent_at(probe.echo_number);
        // The echo: proof that our direction works, and a round trip.
        let fresh_echo = self.probes.take_echo(probe.echo_number);
        if fresh_echo {
            self.liveness.echoed(now);
            let waited = probe.sent_us.saturating_sub(probe.echo_arrived_us);
            let rtt = now_us
                .saturating_sub(probe.echo_sent_us)
                .saturating_sub(waited);
            self.rtt.update(rtt as f64);
            self.base_rtt
                .update(now, i64::try_from(rtt).unwrap_or(i64::MAX));
            let owd = offset_us(probe.echo_arrived_us, probe.echo_sent_us);
            self.owd_out.update(now, owd);
            let behind_train = echoed_sent_at.is_some_and(|at| self.trains.may_have_delayed(at));
            // A repair's queue is ours as much as data's, and is no jitter.
            if self.carried_around(echoed_sent_at.unwrap_or(now)) || behind_train {
                self.idle_jitter.interrupt();
            } else {
                self.idle_jitter.update(owd);
            }
            self.resync_queue(now, probe.echo_number);
        } else if self.delivery.reports_more_received(probe) {
            // Our data arrives though our probes do not (lost at a queue
            // the data overflows): our direction works.
            self.liveness.echoed(now);
        }
        // Without a fresh echo the queue is not known: our probe may have
        // been dropped at a full queue.
        let context = LossContext {
            congested: !fresh_echo || self.queueing_us() > CONGESTED_US,
            settled: self
                .liveness
                .session_since()
                .is_some_and(|t| now.saturating_duration_since(t) >= LOSS_SETTLE),
        };
        let queued_us = self.owd_out.queueing();
        let jitter_us = self.idle_jitter.get();
        if self
            .delivery
            .handle_report(now, probe, queued_us, jitter_us, context)
        {
            self.queue_limit.overflowed(now);
        }
        if self.trains.take_report(probe) {
            self.delivery.set_train_rate(self.trains.rate());
        }
        // The jitter is measured after the first trains arrive; a long
        // train is worth its burst only to an idle path, not to one
        // carrying repairs, which would wait behind it or be lost.
        let jitter_us = self.idle_jitter.get().filter(|_| self.idle_jitter.warm());
        if let Some(jitter_us) = jitter_us.filter(|_| !self.carried_around(now)) {
            self.trains.lengthen(now, jitter_us);
        }
        Some((fresh_echo, echoed_sent_at))
    }

    /// Forget what the peer told: it restarted, with a new clock, new probe
    /// numbers and new counters.
    pub fn forget_peer(&mut self) {
        self.peer_probes.reset();
        self.peer_trains.reset();
        self.owd_out.reset();
        self.idle_jitter = StepJitter::default();
        self.delivery.forget_report();
        self.probes.forget_echoes();
        self.reception = Reception::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_set_holds_sixteen_paths() {
        let mut set = PathSet::default();
        set.insert(PathId(0));
        set.insert(PathId(15));
        set.insert(PathId(16)); // out of range: ignored, not a panic
        assert!(set.contains(PathId(0)) && set.contains(PathId(15)));
        assert!(!set.contains(PathId(1)) && !set.contains(PathId(16)));
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![PathId(0), PathId(15)]);
        assert_eq!(set.0, 0x8001);
    }

    #[test]
    fn a_loss_counts_as_the_queue_s_only_near_the_depth_it_overflowed_at() {
        let t0 = crate::tests::t0();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut p = Path::default();
        let queued = |p: &mut Path, ms: u64, queue_ms: i64| {
            p.owd_out.update(at(ms), 0);
            p.owd_out.update(at(ms), queue_ms * 1000);
            p.queue_limit.met(at(ms), (queue_ms * 1000) as f64);
        };
        // Before any overflow, a queue over 10 ms may be a full one.
        queued(&mut p, 0, 8);
        assert!(!p.queue_near_overflow(at(0)));
        queued(&mut p, 10, 12);
        assert!(p.queue_near_overflow(at(10)));
        // It overflowed with 50 ms queued: its limit is 40 ms, and a flow
        // keeping 12 ms there loses at random, not at the queue...
        queued(&mut p, 20, 50);
        p.queue_limit.overflowed(at(20));
        queued(&mut p, 30, 12);
        assert!(!p.queue_near_overflow(at(30)));
        // ...while at over half the limit a loss is the queue's.
        queued(&mut p, 40, 21);
        assert!(p.queue_near_overflow(at(40)));
    }
}
