//! The paths of one tunnel, and the decisions that weigh them against each
//! other: which paths data may use, which are clean or lossy, where a NACK
//! goes, how long the receiver should hold a gap.
//!
//! Every path is probed (10 probes/s when idle, 100/s while data crosses it);
//! each probe echoes the peer's last probe on that path and reports what this
//! side received there. From the echoes the sender learns, per path and for
//! its own direction: round-trip time, one-way delay relative to the other
//! paths (base and queueing), delivery rate and loss. From the peer's probes
//! the receiver learns the delay spread of the paths towards it, which sets
//! how long a gap is worth waiting for.
//!
//! A path whose echoes stop is down within
//! [`DOWN_AFTER_MAX`](crate::path::DOWN_AFTER_MAX); one losing packets while
//! another is clean is set aside and retried later.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::parity;
use crate::path::delivery::LOSS_MEMORY_PACKETS;
use crate::path::estimators::under_way_above;
use crate::path::probing::{PROBE_BUSY, PROBE_IDLE};
use crate::path::train::TRAIN_PACKET_LEN;
use crate::path::{
    base_min, Path, PathChange, PathEstimate, PathEvent, PathId, PathSet, PathState, PathTimer,
    CONGESTED_US, MISSED_AT_QUEUE_US,
};
use crate::seq::Seq;
use crate::wire::{Probe, Train};
use crate::MAX_PATHS;

/// Loss above which a path is set aside while another is clean. Repairs
/// hide a path's losses from the inner flow, at the cost of a round trip's
/// wait for each and a second copy of each: at random loss p a path still
/// adds about (1 - 2p) of its rate, worth it up to several percent, not
/// when every tenth packet waits for its repair.
const LOSS_SET_ASIDE: f64 = 0.1;
/// Where a repair cannot reach the peer before the packets behind the
/// loss stop waiting for it, a path is set aside while another is clean
/// once it loses more than a clean path: each loss then reaches the inner
/// flow, and a loss-based TCP (CUBIC, Reno) that meets even a few per
/// thousand across a long round trip carries less over every path than it
/// would over the clean ones. From this loss on, that is judged over
/// [`LOSS_MIN_PACKETS`]...
const LOSS_BEYOND_REPAIR_SURE: f64 = 0.005;
/// ...below it, over as many as the estimate follows: a loss of a few per
/// thousand is told from a clean path's only over thousands of packets.
const LOSS_FEW_MIN_PACKETS: u64 = LOSS_MEMORY_PACKETS as u64;
/// A lossy path is set aside only for clean paths that carry at least this
/// part of its capacity together. Beside clean paths far smaller it still
/// carries more than they do: most of its rate for a BBR flow, which does
/// not read loss as congestion, and more than the small paths give even a
/// loss-based one. Beside clean paths worth half of it, a loss-based flow
/// is better off without it.
const SET_ASIDE_FOR_CLEAN_SHARE: f64 = 0.25;
/// Beside clean paths that carry this many times its capacity, a path is
/// at most a third of the capacity, while each repair of its losses that
/// comes late costs a loss-based flow a window cut: its repairs are
/// taken to come in time only over the round trip the nearest path has
/// now, its queue and jitter in it, not merely over its least (see
/// [`PathTable::repairs_in_time`]).
const DWARFED_BY_CLEAN: f64 = 2.0;
/// How much longer than the paths' delay spread the packets behind a lost
/// one wait for its repair, and than a held TCP segment among them is held
/// anyway (see [`crate::equalize`]): a repair within that costs the flow
/// nothing; one later than a few milliseconds more costs every packet
/// behind it more than handing it out late costs the flow's loss recovery,
/// which takes it for reordering.
pub(crate) const REPAIR_PATIENCE_MARGIN: Duration = Duration::from_millis(5);
/// Share of a held flow's round trip a held segment behind a lost one
/// waits past its due time for the repair (see [`repair_past_due`]). A
/// quarter: more than the eighth CUBIC's HyStart reads as a full pipe,
/// because a repair handed out late costs Linux a window cut that it
/// undoes, from the D-SACK, only a round trip later.
const REPAIR_PAST_DUE_SHARE: u32 = 4;
/// Part of the capacity a lossy path must have to be judged by the losses
/// its parities leave rather than by all it loses (see
/// [`PathTable::judge_loss`]). A smaller one adds less than a third to the
/// other paths, and the few late repairs a second its parities leave each
/// cost a loss-based flow a window cut; a bigger one set aside costs the
/// flow more than those cuts.
const JUDGED_BY_PARITY_SHARE: f64 = 0.25;
/// Part of the capacity a path whose repairs come in time must have to
/// carry parity in its [`FIRST_FLIGHTS`] (see [`PathTable::parity_run`]).
const FIRST_FLIGHTS_PARITY_SHARE: f64 = 1.0 / 3.0;
/// Share of the other usable paths' capacity together below which a
/// path carries no TCP (see [`PathTable::tcp_paths`]).
const TCP_SMALL_SHARE: f64 = 0.1;
/// The same share for a path that is nearer than the farthest of the big
/// ones by at least twice its jitter, but by no more than
/// [`TCP_SMALL_NEAR_GAP_US`] (see [`PathTable::tcp_paths`]).
const TCP_SMALL_NEAR_SHARE: f64 = 0.05;
/// How much nearer than the farthest big path a small one may be and still
/// count at [`TCP_SMALL_NEAR_SHARE`]: the flow fills the nearest path
/// first, until its queue is as deep as the difference, and a small
/// path's buffer holds tens of milliseconds.
const TCP_SMALL_NEAR_GAP_US: f64 = 15_000.0;
/// How long a path TCP kept off still counts for how long the peer holds
/// TCP segments (see [`PathTable::tcp_and_spread_paths`]).
const TCP_SPREAD_MEMORY: Duration = Duration::from_secs(2);
/// How long after a path starts carrying data after a pause it carries
/// parity while its loss is not known (see [`PathTable::parity_run`]):
/// about a flow's slow start.
const FIRST_FLIGHTS: Duration = Duration::from_secs(1);
/// How long a path TCP took until it went down still counts for how long
/// the peer holds TCP segments, while a lossy path is up (see
/// [`PathTable::tcp_and_spread_paths`]). Longer than a link flap or a
/// route change: the packets behind a loss on the paths left wait for its
/// repair as they did before, where a loss-based flow would take each
/// loss for congestion, and the flow keeps the round trip it sized its
/// window for. Where the paths left are clean, the flow is better off
/// with their shorter round trip at once.
const OUTAGE_SPREAD_MEMORY: Duration = Duration::from_secs(5);
/// How long after a path comes back from an outage under a TCP flow the
/// flow's window counts as sized for the paths it had meanwhile (see
/// [`PathTable::left_while_regrowing`]): about the time CUBIC takes to
/// grow back to the window it had before the losses of the outage.
const REGROWTH: Duration = Duration::from_secs(5);
/// Span over which the rate of held TCP segments sent is measured (see
/// [`PathTable::note_held_sent`]).
const HELD_RATE_SPAN: Duration = Duration::from_millis(100);
/// How much more than the share that keeps a path among TCP's a path must
/// have to join them where it raises how long TCP is held (see
/// [`PathTable::tcp_paths`]).
const TCP_JOIN_MARGIN: f64 = 1.3;
/// How many times the round trip a TCP flow knows a path may make it by
/// joining TCP (see [`PathTable::tcp_paths`]): BBR keeps twice its rate
/// times its least round trip in flight, and no more.
const TCP_JOIN_MAX_RISE: f64 = 2.0;
/// Loss below which a path counts as clean.
pub(crate) const LOSS_CLEAN: f64 = 0.002;
/// Packets a path must have carried before its loss is judged...
const LOSS_MIN_PACKETS: u64 = 1000;
/// ...unless it lost so many of at least this many that a clean path
/// would hardly ever have: a small path losing 2.6% may take over three
/// seconds to carry its first thousand, and every loss in them that no
/// repair brings in time costs a loss-based flow a window cut.
const LOSS_EARLY_MIN_PACKETS: u64 = 200;
/// How unlikely the losses must be for a clean path to be judged early.
/// The test runs at every report, hence the margin.
const LOSS_EARLY_SIGNIFICANCE: f64 = 1e-4;
/// Floor of the receiver's adaptive hold time.
pub(crate) const HOLD_FLOOR: Duration = Duration::from_millis(2);
/// Margin of the repair time over the fastest path's round trip.
const REPAIR_MARGIN: Duration = Duration::from_millis(12);
/// How long a path may stay down before a fresh WireGuard handshake is worth
/// trying: the peer may have restarted and lost its session.
const REHANDSHAKE_AFTER: Duration = Duration::from_secs(1);

/// What [`PathTable::charge`] tells of a packet sent.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Charged {
    /// Its number on its path.
    pub path_seq: Seq,
    /// The data packet sent on the path before it.
    pub previous: Option<Seq>,
    /// Whether the path's queue was near overflowing, and so was every
    /// other usable path's: a loss at this queue is the inner flow's
    /// signal to slow down. While another path has room, it is repaired
    /// there instead; left to the inner flow, it would make the flow back
    /// off before it reached the paths with room.
    pub congested: bool,
}

/// Every path of one tunnel.
pub(crate) struct PathTable {
    /// Time zero of the µs clock our probes carry.
    origin: Instant,
    paths: Vec<Path>,
    events: VecDeque<PathEvent>,
    /// The paths the peer's latest probe says to hold TCP segments to (its
    /// spread paths, see [`tcp_and_spread_paths`](Self::tcp_and_spread_paths));
    /// none until a probe says.
    peer_spread_paths: PathSet,
    /// When the peer sent the probe that said so, on its clock: a probe
    /// it sent before that and that arrives after, on a farther path, says
    /// what it did before.
    peer_spread_sent_us: Option<u64>,
    /// When we last sent a TCP segment the peer holds, not as a repair: a
    /// TCP flow is under way while that is recent.
    held_sent_at: Option<Instant>,
    /// Bytes of such segments sent since the span that began at the
    /// instant, and the rate over the last whole span, bytes per second.
    held_span: Option<(Instant, u64)>,
    held_rate: Option<f64>,
    /// When a path that carried a TCP flow until it went down came back
    /// while the flow was still under way; `None` once the flow has
    /// outgrown the nearest paths (see
    /// [`left_while_regrowing`](Self::left_while_regrowing)).
    back_under_flow_at: Option<Instant>,
    /// The far paths TCP does without while its window regrows.
    regrowth_left: PathSet,
}

impl PathTable {
    /// Create `count` paths, none with a session yet, at time `now`.
    pub fn new(now: Instant, count: usize) -> Self {
        PathTable {
            origin: now,
            paths: (0..count).map(|_| Path::default()).collect(),
            events: VecDeque::new(),
            peer_spread_paths: PathSet::default(),
            peer_spread_sent_us: None,
            held_sent_at: None,
            held_span: None,
            held_rate: None,
            back_under_flow_at: None,
            regrowth_left: PathSet::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.paths.len()
    }

    /// Start `path` afresh, with no session and nothing measured; one past
    /// the last adds a path. Return whether `path` was one of those.
    pub fn open(&mut self, path: PathId) -> bool {
        let i = path.index();
        if i > self.paths.len() || i >= MAX_PATHS {
            return false;
        }
        if i == self.paths.len() {
            self.paths.push(Path::default());
        } else {
            self.paths[i] = Path::default();
        }
        true
    }

    pub fn get(&self, path: PathId) -> Option<&Path> {
        self.paths.get(path.index())
    }

    #[cfg(test)]
    pub fn path_mut(&mut self, path: PathId) -> &mut Path {
        &mut self.paths[path.index()]
    }

    pub fn as_mut_slice(&mut self) -> &mut [Path] {
        &mut self.paths
    }

    pub fn iter(&self) -> impl Iterator<Item = (PathId, &Path)> {
        self.paths
            .iter()
            .enumerate()
            .map(|(i, p)| (PathId(i as u8), p))
    }

    /// Return `now` in µs on the clock our probes carry.
    pub fn micros(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.origin);
        since
            .as_secs()
            .saturating_mul(1_000_000)
            .saturating_add(u64::from(since.subsec_micros()))
    }

    fn set_state(&mut self, i: usize, state: PathState, change: PathChange) {
        // Unconfirmed is a passing state, not news.
        if self.paths[i].liveness.set(state) && state != PathState::Unconfirmed {
            self.events.push_back(PathEvent {
                path: PathId(i as u8),
                change,
            });
        }
    }

    /// Tell whether the path's WireGuard session is established.
    pub fn set_session(&mut self, now: Instant, path: PathId, established: bool) {
        let i = path.index();
        let Some(p) = self.paths.get_mut(i) else {
            return;
        };
        match (established, p.state()) {
            (true, PathState::NoSession) => {
                p.liveness.session_up(now);
                p.probes.start(now);
                p.trains.start(now);
                self.set_state(i, PathState::Unconfirmed, PathChange::Up);
            }
            (false, PathState::NoSession) | (true, _) => {}
            (false, _) => {
                p.liveness.session_down();
                p.probes.stop();
                p.trains.stop();
                self.set_state(i, PathState::NoSession, PathChange::NoSession);
                self.recall_set_aside();
            }
        }
    }

    /// Return the state of a path.
    pub fn state(&self, path: PathId) -> PathState {
        self.get(path).map_or(PathState::NoSession, Path::state)
    }

    /// Return whether a path has a session but has been down long enough
    /// that a fresh WireGuard handshake is worth trying (the peer may have
    /// restarted and lost its session).
    pub fn wants_handshake(&self, now: Instant, path: PathId) -> bool {
        self.get(path).is_some_and(|p| {
            p.state() == PathState::Down
                && p.liveness
                    .last_echo()
                    .or(p.liveness.session_since())
                    .is_some_and(|t| now.saturating_duration_since(t) > REHANDSHAKE_AFTER)
        })
    }

    /// Return the paths data may use now.
    pub fn usable(&self) -> PathSet {
        // Nothing better: a path whose echo is late beats a lossy one, and
        // a lossy one beats none.
        let tiers: [&dyn Fn(&Path) -> bool; 3] = [
            &|p| p.liveness.can_carry(),
            &|p| matches!(p.state(), PathState::Up | PathState::Unconfirmed),
            &|p| p.state() == PathState::SetAside,
        ];
        for usable in tiers {
            let mut set = PathSet::default();
            for (id, p) in self.iter() {
                if usable(p) {
                    set.insert(id);
                }
            }
            if set != PathSet::default() {
                return set;
            }
        }
        PathSet::default()
    }

    /// Return the paths of `usable` that TCP may take: all but those too
    /// small beside the others together to be worth what they cost a TCP
    /// flow. A segment lost on a path stalls the flow behind it for a
    /// repair's round trip, a far one makes every segment wait for it, and
    /// a burst overflows a small one; a path that adds a few percent is not
    /// worth that. Bare ACKs take any path (see
    /// [`Release::takes_tcp_paths`](crate::equalize::Release::takes_tcp_paths)). A
    /// path's probe trains count for it at the rate they arrived, for its
    /// own share and in the others' total alike: a big path the flow has
    /// not filled yet is not small, and counted at the 100 Mbit/s guess it
    /// would let a path a tenth of its real size take TCP, whose first
    /// overflow or loss ends the flow's slow start far below the big
    /// path's rate. A train that jitter bunched up reads above its path,
    /// and may keep off TCP a path beside it that would have added to the
    /// sum: that costs less, over the simulated sweep, than a small path
    /// taken. All of `usable` if every path is small.
    ///
    /// A small path nearer than the farthest big one by at least twice
    /// its jitter costs the flow no round trip: the peer holds what it
    /// carries for the far path anyway, and its jitter does not bring it
    /// past them. It takes TCP from [`TCP_SMALL_NEAR_SHARE`] of the
    /// others, unless it is known lossy (each of its losses stalls the
    /// flow for a repair) or nearer by more than [`TCP_SMALL_NEAR_GAP_US`].
    /// Beside one big path, the few percent it adds are what the tunnel's
    /// own bytes cost the flow against TCP over that path with no tunnel.
    ///
    /// A path beyond the farthest of the others raises the flow's round
    /// trip by its delay above theirs, and has to carry more for it: the
    /// share it needs grows as the square root of the round trip's rise.
    /// Not in proportion: a bulk flow's window grows to fill the longer
    /// pipe and what it loses is the time to get there, which is what
    /// keeps a far big path worth its delay.
    ///
    /// At `now`, a path that would raise how long TCP is held (beyond the
    /// paths TCP took lately) needs [`TCP_JOIN_MARGIN`] times that share
    /// to join: joining mid-flow raises the round trip at once under a
    /// window sized for the shorter one, which CUBIC past slow start grows
    /// back slowly and BBR not until its least round trip expires, so a
    /// path near the limit, admitted and dropped as the near path's queue
    /// moves the round trip, costs more than it adds. Nor does a path join
    /// where the least round trip with the hold it brings would be more
    /// than [`TCP_JOIN_MAX_RISE`] times the least round trip with the hold
    /// now, however big it is: BBR measured its least round trip with the
    /// hold of the paths it had, keeps it ten seconds, and past twice it
    /// is held to a fraction of its rate by its own window. A path TCP
    /// took from the flow's start is in the round trip the flow measured,
    /// and stays; with no TCP under way, any path may join.
    pub fn tcp_paths(&self, now: Instant, usable: PathSet) -> PathSet {
        let delivery = |id: PathId| &self.paths[id.index()].delivery;
        let credit = |id: PathId| delivery(id).capacity_or_trains();
        let total: f64 = usable.iter().map(credit).sum();
        let carries = |id: PathId| (credit(id), total - credit(id));
        let mut big = PathSet::default();
        for id in usable.iter() {
            let (own, others) = carries(id);
            if own >= TCP_SMALL_SHARE * others {
                big.insert(id);
            }
        }
        if big == PathSet::default() {
            return usable;
        }
        let base_min = base_min(&self.paths);
        let above = |id: PathId| self.paths[id.index()].base_above(base_min);
        let farthest_big = big.iter().map(above).fold(0.0, f64::max);
        let mut small_near = PathSet::default();
        for id in usable.iter().filter(|&id| !big.contains(id)) {
            let p = &self.paths[id.index()];
            let gap = farthest_big - above(id);
            let (own, others) = carries(id);
            if gap <= TCP_SMALL_NEAR_GAP_US
                && p.idle_jitter.get().is_some_and(|j| 2.0 * j <= gap)
                && !known_lossy(p)
                && own >= TCP_SMALL_NEAR_SHARE * others
            {
                small_near.insert(id);
            }
        }
        for id in small_near.iter() {
            big.insert(id);
        }
        let share = |id: PathId| {
            if small_near.contains(id) {
                TCP_SMALL_NEAR_SHARE
            } else {
                TCP_SMALL_SHARE
            }
        };
        let Some(least) = self.least_round_trip() else {
            return big;
        };
        let least_us = least.as_micros() as f64;
        // As the flow measured it, with the paths it does without while
        // its window regrows (see `left_while_regrowing`).
        let held_us = self.tcp_spread_us(now, PathSet::default());
        let flow_base_us = self
            .tcp_under_way(now)
            .then(|| self.least_base_round_trip())
            .flatten()
            .map(|rtt| rtt.as_micros() as f64);
        let mut set = PathSet::default();
        for id in big.iter() {
            let others_above = big
                .iter()
                .filter(|&o| o != id)
                .map(above)
                .fold(0.0, f64::max);
            // The flow's round trip: the least, its segments held as long
            // as the farthest path it takes needs above the nearest.
            let rise = (least_us + above(id)) / (least_us + others_above).max(1.0);
            let (own, others) = carries(id);
            // By more than a millisecond.
            let raises_hold = above(id) > held_us + 1000.0;
            let joins = if raises_hold { TCP_JOIN_MARGIN } else { 1.0 };
            let too_far = raises_hold
                && flow_base_us
                    .is_some_and(|base| base + above(id) > TCP_JOIN_MAX_RISE * (base + held_us));
            if !too_far && own >= joins * share(id) * rise.max(1.0).sqrt() * others {
                set.insert(id);
            }
        }
        if set == PathSet::default() {
            big
        } else {
            set
        }
    }

    /// Return the paths of `usable` TCP takes now (see
    /// [`tcp_paths`](Self::tcp_paths)) and those the peer holds TCP
    /// segments as long as: the paths TCP took within
    /// [`TCP_SPREAD_MEMORY`]. A far path TCP takes again raises the flow's
    /// round trip, which CUBIC's HyStart reads as a full pipe, so a path
    /// leaves the hold only once TCP kept off it a while, and a path whose
    /// measured capacity wavers about the limit stays in it. A path TCP
    /// took until it went down stays in it for [`OUTAGE_SPREAD_MEMORY`]
    /// while a lossy path is up. The far paths a flow does without while
    /// it regrows its window after an outage are in neither (see
    /// [`left_while_regrowing`](Self::left_while_regrowing)).
    pub fn tcp_and_spread_paths(&mut self, now: Instant, usable: PathSet) -> (PathSet, PathSet) {
        let all = self.tcp_paths(now, usable);
        let lossy_up = self.lossy_path_up();
        for (i, p) in self.paths.iter_mut().enumerate() {
            if all.contains(PathId(i as u8)) {
                p.takes_tcp_at = Some(now);
            }
        }
        self.regrowth_left = self.left_while_regrowing(now, all, lossy_up);
        let out_of_hold = self.out_of_hold(now);
        let mut tcp = PathSet::default();
        let mut spread = PathSet::default();
        for (id, p) in self.iter() {
            if all.contains(id) && !self.regrowth_left.contains(id) {
                tcp.insert(id);
            }
            if in_tcp_spread(p, now, usable.contains(id), lossy_up) && !out_of_hold.contains(id) {
                spread.insert(id);
            }
        }
        (tcp, spread)
    }

    /// Return the paths a regrowing flow does without that no longer
    /// carry any of it: once the segments sent there have arrived, the
    /// peer holds the others no longer for them (held for less, the last
    /// of them would come past their gap's wait).
    fn out_of_hold(&self, now: Instant) -> PathSet {
        let mut out = PathSet::default();
        for id in self.regrowth_left.iter() {
            if !self.paths[id.index()].flow_in_flight(now) {
                out.insert(id);
            }
        }
        out
    }

    /// Return the far paths of `tcp` a flow regrowing its window after an
    /// outage does without. Its window was sized for the paths it had
    /// meanwhile; once a path is back, CUBIC grows it back in seconds, not
    /// round trips, and every segment held for a far path's delay makes
    /// that window carry less. A flow carries its window over a set of
    /// paths at their capacity or at the window over their round trip,
    /// whichever is less: the nearest paths that carry most so, with the
    /// window now, take it, and a farther one joins once the window would
    /// queue the nearer ones by its delay above theirs (adding it loses
    /// nothing then), or once one of them is full. Not while a lossy path
    /// is up: its repairs need the farther paths' hold to come in time.
    fn left_while_regrowing(&mut self, now: Instant, tcp: PathSet, lossy_up: bool) -> PathSet {
        let none = PathSet::default();
        let Some(back) = self.back_under_flow_at else {
            return none;
        };
        if now.saturating_duration_since(back) >= REGROWTH || !self.tcp_under_way(now) {
            self.back_under_flow_at = None;
            return none;
        }
        // The flow's round trip: the least of the paths that carry it (a
        // path just back has the one it had before the outage), and the
        // hold.
        let carrying = self.least_srtt_us_where(|p| p.carried_flow_lately(now));
        let (false, Some(rate), Some(round_trip_us), Some(base_round_trip)) = (
            lossy_up,
            self.held_rate,
            carrying,
            self.least_base_round_trip(),
        ) else {
            return none;
        };
        // Bytes: what the flow has under way.
        let held_us = self.tcp_spread_us(now, self.out_of_hold(now));
        let window = rate * (round_trip_us + held_us) / 1e6;
        let base_min = base_min(&self.paths);
        let mut nearest: Vec<PathId> = tcp.iter().collect();
        nearest.sort_by(|&a, &b| {
            let above = |id: PathId| self.paths[id.index()].base_above(base_min);
            above(a).total_cmp(&above(b))
        });
        let (mut capacity, mut best, mut take) = (0.0, 0.0, nearest.len());
        for (k, &id) in nearest.iter().enumerate() {
            let p = &self.paths[id.index()];
            capacity += p.delivery.capacity_or_trains();
            let pipe = base_round_trip.as_secs_f64() + p.base_above(base_min) / 1e6;
            let carries = f64::min(capacity, window / pipe);
            if carries >= best {
                (best, take) = (carries, k + 1);
            }
        }
        let nearer_full = nearest[..take].iter().any(|&id| self.full(now, id));
        if take == nearest.len() || nearer_full {
            // Outgrown: the far paths are back for good.
            self.back_under_flow_at = None;
            return none;
        }
        let mut left = PathSet::default();
        for &id in &nearest[take..] {
            left.insert(id);
        }
        left
    }

    /// Return the usable paths other than `lost_on` that lose nothing; all
    /// usable paths if none does.
    pub fn usable_for_repair(&self, lost_on: PathId) -> PathSet {
        let usable = self.usable();
        let mut clean = PathSet::default();
        for path in usable.iter() {
            if path != lost_on && self.paths[path.index()].delivery.loss() < LOSS_CLEAN {
                clean.insert(path);
            }
        }
        if clean == PathSet::default() {
            usable
        } else {
            clean
        }
    }

    /// Return the paths on which a packet sent earlier may still arrive
    /// after one sent now: path p is in the set while less time has passed
    /// since it last carried data than its delay above the fastest path
    /// (base plus queue, modelled or measured, whichever is more), with
    /// margins. A path that is down is not in it. The receiver waits for
    /// gaps only on these.
    pub fn still_delivering(&self, now: Instant) -> PathSet {
        let base_min = base_min(&self.paths);
        let mut set = PathSet::default();
        for (id, p) in self.iter() {
            let Some(sent) = p.last_data_sent else {
                continue;
            };
            if p.state() == PathState::Down {
                continue; // whatever it had in flight is lost
            }
            let base = p.base_above(base_min);
            let queue = p.queue.delay_us(p.rate()).max(p.queueing_us());
            // Queues move between measurements: wide margins, since a path
            // dropped from the set too early turns its late packets into
            // losses for the inner flow.
            let spread = base + 1.5 * queue + 2.0 * p.rtt.rttvar_us();
            let window = Duration::from_micros(spread as u64) + Duration::from_millis(10);
            if now.saturating_duration_since(sent) < window {
                set.insert(id);
            }
        }
        set
    }

    /// Return how many data packets `path` carries per parity (see
    /// [`crate::parity`]): `None` while it loses no more than a clean path.
    /// Its loss known over every span, less a queue's drops, but not yet
    /// over the spans judged (a flow in slow start queues every path), it
    /// gets what that loss calls for: [`judge_loss`](Self::judge_loss)
    /// keeps it up on what the parity would rebuild.
    /// Before its loss is known either way, a path gets
    /// [`parity::UNKNOWN_LOSS_RUN`] where its repairs would come late, and
    /// where they would come in time, in its [`FIRST_FLIGHTS`] if it has
    /// [`FIRST_FLIGHTS_PARITY_SHARE`] of the capacity. A flow's first
    /// flights are where it learns its loss, and a loss there ends slow
    /// start at a small window: a late repair holds what follows long
    /// enough for HyStart to read a full pipe, and slow start's queues make
    /// even a near path's repairs late. On a smaller path the parity costs
    /// the flow more than its losses there would.
    pub fn parity_run(&self, now: Instant, path: PathId) -> Option<u16> {
        let p = self.get(path)?;
        if !loss_known(p) {
            let (random, over) = p.delivery.random_loss();
            if loss_known_over(random, over) {
                return parity::run_for_loss(random, LOSS_CLEAN);
            }
            let first_flights = p.busy(now)
                && p.busy_since
                    .is_some_and(|t| now.saturating_duration_since(t) < FIRST_FLIGHTS)
                && self.capacity_share(path.index()) >= FIRST_FLIGHTS_PARITY_SHARE;
            return (first_flights || !self.repairs_in_time(now, path.index()))
                .then_some(parity::UNKNOWN_LOSS_RUN);
        }
        parity::run_for_loss(p.delivery.loss(), LOSS_CLEAN)
    }

    /// Return path `i`'s part of the capacity of the paths data may use
    /// and it, measured or as their trains said.
    fn capacity_share(&self, i: usize) -> f64 {
        let capacity = |j: usize| self.paths[j].delivery.capacity_or_trains();
        let mut usable = self.usable();
        usable.insert(PathId(i as u8));
        let total: f64 = usable.iter().map(|id| capacity(id.index())).sum();
        if total > 0.0 {
            capacity(i) / total
        } else {
            0.0
        }
    }

    /// Return whether `path`'s queue is at `now` as deep as when it
    /// overflowed.
    pub fn full(&mut self, now: Instant, path: PathId) -> bool {
        self.paths
            .get_mut(path.index())
            .is_some_and(|p| p.full(now))
    }

    /// Account for a parity half of `len` bytes sent on `path` at `now`.
    pub fn charge_parity(&mut self, now: Instant, path: PathId, len: usize) {
        if let Some(p) = self.paths.get_mut(path.index()) {
            p.queue_ours(now, len);
        }
    }

    /// Count a parity half of `len` bytes received on `path`: in the bytes
    /// the path delivered, not in its packets, which number only data.
    pub fn handle_parity(&mut self, path: PathId, len: usize) {
        if let Some(p) = self.paths.get_mut(path.index()) {
            p.reception.bytes += len as u64;
        }
    }

    /// Account for data packet `seq` of `len` bytes sent on `path` at
    /// `now` (a repair if `repair`), one of the paths `could_take`; return
    /// its place on the path and whether it went into a queue near
    /// overflowing with none of the others to take the load.
    pub fn charge(
        &mut self,
        now: Instant,
        path: PathId,
        seq: Seq,
        len: usize,
        repair: bool,
        could_take: PathSet,
    ) -> Charged {
        let queued = self.paths[path.index()].queueing_us() > CONGESTED_US;
        let congested = self.near_overflow(now, path, could_take);
        let p = &mut self.paths[path.index()];
        let charged = Charged {
            path_seq: p.next_path_seq,
            previous: p.last_seq_sent.replace(seq),
            congested,
        };
        p.last_sent_could_take = could_take;
        p.next_path_seq = p.next_path_seq.next();
        if queued {
            p.delivery.sent_congested(charged.path_seq);
        }
        p.queue_ours(now, len);
        if !repair {
            if !p.busy(now) {
                // Becoming busy: probe sooner, to notice a failure sooner.
                p.probes.hurry(now);
                p.busy_since = Some(now);
            }
            p.last_data_sent = Some(now);
        }
        charged
    }

    /// Return whether the queue of `path` is near overflowing at `now` (see
    /// [`Path::queue_near_overflow`]) with no other path to take the load:
    /// a loss on `path` then is most likely its queue's. On a path known
    /// clean, no other path of `could_take` has room (a small one kept off
    /// TCP takes none of a TCP segment's load, however empty its queue); on
    /// any other, no usable path has: a lossy path carries a standing queue
    /// and loses at random all the while, and those losses are ours to
    /// repair.
    fn near_overflow(&self, now: Instant, path: PathId, could_take: PathSet) -> bool {
        let p = &self.paths[path.index()];
        let others = if known_clean(p) {
            could_take
        } else {
            self.usable()
        };
        p.queue_near_overflow(now)
            && others
                .iter()
                .filter(|&o| o != path)
                .all(|o| self.paths[o.index()].queue_near_overflow(now))
    }

    /// Return the last data packet sent on `path`, for its probe to name,
    /// and whether that path and every other it could have taken is near
    /// overflowing at `now` (a loss there may be the queue's, which is the
    /// inner flow's to handle).
    pub fn last_sent(&self, now: Instant, path: PathId) -> (Option<Seq>, bool) {
        let p = &self.paths[path.index()];
        let congested = self.near_overflow(now, path, p.last_sent_could_take);
        (p.last_seq_sent, congested)
    }

    /// Count a data packet of `len` bytes received on `path` at `now` as
    /// `path_seq` there, first sent at `sent_us` on the peer's clock; return
    /// how many of the path's sequence numbers it skipped past (packets
    /// sent on the path just before it and missing).
    pub fn handle_data(
        &mut self,
        now: Instant,
        path: PathId,
        path_seq: Seq,
        sent_us: u32,
        len: usize,
    ) -> u32 {
        let now_us = self.micros(now);
        let Some(p) = self.paths.get_mut(path.index()) else {
            return 0;
        };
        if p.last_data_received != Some(now) && !p.probe_fast(now) {
            // Becoming busy: probe sooner.
            p.probes.hurry(now);
        }
        p.last_data_received = Some(now);
        let queued = p.peer_probes.queueing_on_arrival(now_us, sent_us) > MISSED_AT_QUEUE_US;
        let r = &mut p.reception;
        r.packets += 1;
        r.bytes += len as u64;
        let previous = r.highest_path_seq;
        if previous.is_some_and(|h| !h.is_before(path_seq)) {
            return 0; // late: what it fills was counted missing
        }
        r.highest_path_seq = Some(path_seq);
        let skipped = previous.map_or(0, |h| {
            u32::try_from(path_seq.distance_from(h) - 1).unwrap_or(0)
        });
        // A drop-tail queue drops what comes while it is full: the packet
        // before the gap met it full, and so does the one after, unless
        // the sender fell silent meanwhile. A repair carries its first
        // send time and so reads as queued, which errs towards judging the
        // path clean, and repairs are few.
        if skipped > 0 && (queued || r.last_queued) {
            r.missed_at_queue = r.missed_at_queue.saturating_add(u64::from(skipped));
        }
        r.last_queued = queued;
        skipped
    }

    /// Forget what the peer told on every path: it restarted.
    pub fn forget_peer(&mut self) {
        for p in &mut self.paths {
            p.forget_peer();
        }
        // Its clock started over.
        self.peer_spread_sent_us = None;
    }

    /// Take in a probe the peer sent on `path`.
    pub fn handle_probe(
        &mut self,
        now: Instant,
        path: PathId,
        probe: &Probe,
        peer_spread_paths: PathSet,
    ) {
        let i = path.index();
        let now_us = self.micros(now);
        // Only a path back from an outage asks, not every probe.
        let was_down = self
            .paths
            .get(i)
            .is_some_and(|p| p.state() == PathState::Down);
        let lossy_up = was_down && self.lossy_path_up();
        let tcp_under_way = self.tcp_under_way(now);
        let Some(p) = self.paths.get_mut(i) else {
            return;
        };
        let Some((fresh_echo, echoed_sent_at)) = p.handle_probe(now, now_us, probe) else {
            return; // reordered or replayed: nothing new
        };
        // The newest says: were the latest to arrive taken, the hold would
        // swing back and forth for a far path's delay after each change,
        // and a TCP flow's round trip with it, which HyStart reads as a
        // full pipe.
        if self
            .peer_spread_sent_us
            .is_none_or(|newest| probe.sent_us >= newest)
        {
            self.peer_spread_sent_us = Some(probe.sent_us);
            self.peer_spread_paths = peer_spread_paths;
        }
        // A path that was down is back only when a probe sent since then
        // is echoed: the peer's first probe after an outage echoes the last
        // one it had before, which proves only the peer's direction works.
        let proves_ours = match p.liveness.down_since() {
            Some(down) => echoed_sent_at.is_some_and(|t| t > down),
            None => true,
        };
        if matches!(p.state(), PathState::Down | PathState::Unconfirmed)
            && fresh_echo
            && proves_ours
        {
            if p.state() == PathState::Down {
                p.delivery.resume_at(p.next_path_seq);
                if p.carried_flow_until_down() && tcp_under_way {
                    self.back_under_flow_at = Some(now);
                }
                // Still in the flow's round trip: back in the hold's
                // memory from now, as if TCP had just left it.
                if lossy_up && lost_taking_tcp(p, now) {
                    p.takes_tcp_at = Some(now);
                }
            }
            p.liveness.came_back();
            // A lossy path that was down meanwhile is still lossy.
            let (state, change) = if p.liveness.aside_at(now) {
                (PathState::SetAside, PathChange::BackSetAside)
            } else {
                (PathState::Up, PathChange::Up)
            };
            self.set_state(i, state, change);
        }
        self.judge_loss(now, i);
    }

    /// Return what of path `i`'s `loss` is left to the repairs once
    /// parities after every `run` packets rebuild single losses, on a path
    /// with enough of the capacity to be worth them.
    fn left_to_repairs(&self, i: usize, loss: f64, run: Option<u16>) -> f64 {
        match run {
            Some(run) if self.capacity_share(i) >= JUDGED_BY_PARITY_SHARE => {
                parity::residual_loss(loss, run)
            }
            _ => loss,
        }
    }

    fn judge_loss(&mut self, now: Instant, i: usize) {
        let p = &self.paths[i];
        if p.state() != PathState::Up {
            return;
        }
        // What is left to the repairs once parities rebuild single losses,
        // on a path worth that: a loss left over that no repair brings in
        // time is a congestion signal for a loss-based flow, and a path with
        // a small part of the capacity is not worth a few a second.
        let (loss, judged) = (p.delivery.loss(), p.delivery.judged_packets());
        let unrebuilt = self.left_to_repairs(i, loss, self.parity_run(now, PathId(i as u8)));
        let judged_lossy = loss_known(p)
            && unrebuilt > LOSS_CLEAN
            && (unrebuilt > LOSS_BEYOND_REPAIR_SURE || judged >= LOSS_FEW_MIN_PACKETS);
        let loss = if judged_lossy {
            // Asked only of a path losing enough to matter: this runs for
            // every probe.
            if loss <= LOSS_SET_ASIDE && self.repairs_in_time(now, i) {
                return;
            }
            loss
        } else {
            // A flow in slow start sends into the queue of every path it
            // uses, and few spans are judged; where no repair comes in
            // time, each loss meanwhile costs it a window cut. Over every
            // span, what was not dropped at a queue tells the path's loss
            // sooner, if low: taken where it is surely beyond repair, with
            // the parities it would call for.
            let (random, over) = p.delivery.random_loss();
            let unrebuilt =
                self.left_to_repairs(i, random, parity::run_for_loss(random, LOSS_CLEAN));
            if !loss_known_over(random, over)
                || unrebuilt <= LOSS_BEYOND_REPAIR_SURE
                || self.repairs_in_time(now, i)
            {
                return;
            }
            random
        };
        if self.clean_paths_replace(i) {
            self.paths[i].liveness.set_aside(now);
            self.set_state(i, PathState::SetAside, PathChange::SetAside { loss });
        }
    }

    /// Return whether the clean paths up beside lossy path `i` carry
    /// enough of its capacity for it to be set aside.
    fn clean_paths_replace(&self, i: usize) -> bool {
        self.clean_paths_carry(i, SET_ASIDE_FOR_CLEAN_SHARE)
    }

    /// Return whether the paths other than `i` that are up and known clean
    /// carry some capacity, and at least `times` path `i`'s.
    fn clean_paths_carry(&self, i: usize, times: f64) -> bool {
        let clean: f64 = self
            .paths
            .iter()
            .enumerate()
            .filter(|&(j, q)| j != i && q.state() == PathState::Up && known_clean(q))
            .map(|(_, q)| q.delivery.capacity_or_trains())
            .sum();
        clean > 0.0 && clean >= times * self.paths[i].delivery.capacity_or_trains()
    }

    /// Bring back the paths set aside for their loss that the clean paths
    /// still up no longer replace, once one is down or its session gone: a
    /// lossy path carries more than small clean ones, and far more than
    /// none, for as long as the outage lasts. Their loss is kept, so they
    /// are set aside again once the clean paths are back.
    fn recall_set_aside(&mut self) {
        for i in 0..self.paths.len() {
            if self.paths[i].state() == PathState::SetAside && !self.clean_paths_replace(i) {
                self.paths[i].liveness.recall();
                self.set_state(i, PathState::Up, PathChange::Recalled);
            }
        }
    }

    /// Return the next probe due by `now`; call until `None`.
    pub fn poll_probe(&mut self, now: Instant) -> Option<(PathId, Probe)> {
        let now_us = self.micros(now);
        let i = self
            .paths
            .iter()
            .position(|p| p.probes.next_at().is_some_and(|t| t <= now))?;
        let p = &mut self.paths[i];
        let interval =
            if p.probe_fast(now) || (p.state() == PathState::Up && p.measuring_jitter(now)) {
                PROBE_BUSY
            } else {
                PROBE_IDLE
            };
        let sent_before = p.queue.sent_total();
        let number = p.probes.send(now, interval, sent_before);
        let echo = p.peer_probes.to_echo();
        let train = p.peer_trains.report(now_us);
        let probe = Probe {
            number,
            sent_us: now_us,
            echo_number: echo.number,
            echo_sent_us: echo.sent_us,
            echo_arrived_us: echo.arrived_us,
            rx_packets: p.reception.packets,
            rx_bytes: p.reception.bytes,
            rx_highest_path_seq: p.reception.highest_path_seq.unwrap_or(Seq(0)),
            rx_missed_at_queue: p.reception.missed_at_queue,
            train_number: train.number,
            train_bytes: train.bytes,
            train_span_us: train.span_us,
        };
        Some((PathId(i as u8), probe))
    }

    /// Return the next probe train due by `now`, its path and number; call
    /// until `None`.
    pub fn poll_train(&mut self, now: Instant) -> Option<(PathId, u32, u16)> {
        let i = self
            .paths
            .iter()
            .position(|p| p.trains.next_at().is_some_and(|t| t <= now))?;
        let p = &mut self.paths[i];
        let (number, packets) = p.trains.send(now);
        // The train queues at the bottleneck like data: what is sent
        // behind it waits.
        p.add_to_queue(now, usize::from(packets) * TRAIN_PACKET_LEN);
        Some((PathId(i as u8), number, packets))
    }

    /// Take a packet of `len` bytes of a probe train the peer sent on
    /// `path`; the next probe there reports the train once it is whole.
    pub fn handle_train(&mut self, now: Instant, path: PathId, train: &Train, len: usize) {
        let now_us = self.micros(now);
        if let Some(p) = self.paths.get_mut(path.index()) {
            p.peer_trains.handle(now_us, train, len);
        }
    }

    /// Return when [`handle_timeout`](Self::handle_timeout) or
    /// [`poll_probe`](Self::poll_probe) next has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.paths
            .iter()
            .flat_map(|p| PathTimer::ALL.map(|t| p.deadline(t)))
            .flatten()
            .min()
    }

    /// Run the timers due by `now`: give set-aside paths another chance,
    /// stop sending on paths whose echoes are late, and mark paths whose
    /// echoes stopped as down. Probes due are taken with
    /// [`poll_probe`](Self::poll_probe). Return the paths marked down now.
    pub fn handle_timeout(&mut self, now: Instant) -> PathSet {
        let mut down = PathSet::default();
        for i in 0..self.paths.len() {
            for timer in [
                PathTimer::AsideEnds,
                PathTimer::EchoOverdue,
                PathTimer::Down,
            ] {
                if self.paths[i].deadline(timer).is_some_and(|t| t <= now) {
                    self.expire(now, i, timer);
                    if timer == PathTimer::Down {
                        down.insert(PathId(i as u8));
                    }
                }
            }
        }
        down
    }

    /// Return when what we sent on `path` was last known to arrive: when
    /// the newest probe the peer echoed left, on our µs clock. What went
    /// after it on a path that died is lost, and the peer may not know it
    /// was sent (nothing else came after it).
    pub fn echoed_up_to_us(&self, path: PathId) -> Option<u64> {
        let p = self.get(path)?;
        Some(self.micros(p.probes.echoed_up_to()?))
    }

    fn expire(&mut self, now: Instant, i: usize, timer: PathTimer) {
        let p = &mut self.paths[i];
        match timer {
            PathTimer::Probe | PathTimer::Train => {}
            PathTimer::AsideEnds => {
                if p.liveness.aside_ends(now) {
                    p.delivery.forget_loss();
                    if p.state() == PathState::SetAside {
                        self.set_state(i, PathState::Up, PathChange::Up);
                    }
                }
            }
            PathTimer::EchoOverdue => p.liveness.mark_echo_late(),
            PathTimer::Down => {
                let since = p.liveness.last_echo().or(p.liveness.session_since());
                let silent = since.map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
                // What was queued there is lost; start the model empty. No
                // report spans the outage, so what it swallowed is not
                // counted as the path's loss, and the loss measured before
                // it still stands: a path that lost 1% before a cut loses
                // as much after it.
                p.queue.clear();
                p.queue_limit.reset();
                p.delivery.forget_report();
                p.liveness.went_down(now);
                self.set_state(i, PathState::Down, PathChange::Down { silent });
                self.recall_set_aside();
            }
        }
    }

    /// Return the next path state change, for logging.
    pub fn poll_event(&mut self) -> Option<PathEvent> {
        self.events.pop_front()
    }

    /// Return how long the receiver should wait for a gap: the spread of the
    /// peer's one-way delays over the paths it is heard on, plus four times
    /// their jitter and a small floor; `None` until a path is measured.
    pub fn hold_hint(&self, now: Instant) -> Option<Duration> {
        let live = self.heard(now);
        let mut spread: Option<(f64, f64)> = None;
        let mut jitter: f64 = 0.0;
        for (_, p) in live {
            jitter = jitter.max(p.peer_probes.owd_in.jitter());
            if let Some(d) = p.peer_probes.owd_in.smoothed() {
                spread = Some(spread.map_or((d, d), |(lo, hi)| (lo.min(d), hi.max(d))));
            }
        }
        let (lo, hi) = spread?;
        Some(Duration::from_micros((hi - lo + 4.0 * jitter) as u64) + HOLD_FLOOR)
    }

    /// Return when a data packet that arrived at `now`, sent at `sent_us`
    /// on the peer's clock, has been under way as long as one on the
    /// farthest path the peer is heard on (its base one-way delay and the
    /// range of its jitter: a jittery path keeps its packets in order, so
    /// once they come densely each waits for the latest before it, near
    /// the top of that range), at most `max_wait` from now;
    /// `None` if it has already, or until a path is measured. See
    /// [`crate::equalize`]. Held to the least delay alone, the segments of
    /// a flow's first, sparse flights set its least round trip, and once it
    /// comes densely every round trip is the jitter's range above it,
    /// which HyStart reads as a full pipe once that is an eighth of it.
    pub fn equalized_due(&self, now: Instant, sent_us: u32, max_wait: Duration) -> Option<Instant> {
        let (base_min, spread_us) = self.incoming_spread(now)?;
        // The peer's clock is known only up to an offset, the same on every
        // path: time under way counts from the nearest path's base delay.
        let under_way = under_way_above(self.micros(now), sent_us, base_min);
        let wait_us = (spread_us - f64::from(under_way)).min(max_wait.as_secs_f64() * 1e6);
        (wait_us >= 1.0).then(|| now + Duration::from_micros(wait_us as u64))
    }

    /// Return how long a TCP segment that came the nearest way is held, at
    /// most `max_wait`; `None` until a path towards us is measured. See
    /// [`equalized_due`](Self::equalized_due).
    pub fn equalize_wait(&self, now: Instant, max_wait: Duration) -> Option<Duration> {
        let (_, spread_us) = self.incoming_spread(now)?;
        Some(Duration::from_micros(spread_us as u64).min(max_wait))
    }

    /// Return the least base one-way delay towards us among the paths the
    /// peer is heard on (on its clock, µs), and how much more the farthest
    /// one's under load is among those it spreads TCP over: a far path it
    /// keeps TCP off would otherwise set how long every segment waits.
    fn incoming_spread(&self, now: Instant) -> Option<(i64, f64)> {
        // One pass: this runs for every held segment received.
        let (mut least, mut most, mut most_spread) = (None::<i64>, None::<f64>, None::<f64>);
        let mut spread_heard = false;
        // A path the peer still spreads TCP over counts unheard: it went
        // down, and the peer keeps the flow's round trip for a while (see
        // `tcp_and_spread_paths`).
        let counted = self
            .iter()
            .filter(|&(id, p)| self.peer_spread_paths.contains(id) || heard_lately(p, now));
        for (id, p) in counted {
            let spread = self.peer_spread_paths.contains(id);
            spread_heard |= spread;
            let Some(base) = p.peer_probes.owd_in.min() else {
                continue;
            };
            least = Some(least.map_or(base, |b| b.min(base)));
            // The jitter is our direction's, measured while the path is
            // idle and probed fast until it is known; the peer's direction
            // is measured under its data, which queues there. In floating
            // point: the delays are offsets from the peer's clock, which it
            // chose.
            let loaded = base as f64 + p.idle_jitter.range();
            most = Some(most.map_or(loaded, |b| b.max(loaded)));
            if spread {
                most_spread = Some(most_spread.map_or(loaded, |b| b.max(loaded)));
            }
        }
        let least = least?;
        let most = if spread_heard { most_spread } else { most }?;
        Some((least, most - least as f64))
    }

    /// Return how much farther than the nearest path the farthest of
    /// `paths` is, one way, µs: with the paths TCP takes, how long the
    /// peer holds a TCP segment that came the nearest way (see
    /// [`crate::equalize`]).
    pub fn spread_us(&self, paths: PathSet) -> f64 {
        let base_min = base_min(&self.paths);
        paths
            .iter()
            .map(|id| self.paths[id.index()].base_above(base_min))
            .fold(0.0, f64::max)
    }

    /// Return the paths the peer's probes came on lately.
    fn heard(&self, now: Instant) -> impl Iterator<Item = (PathId, &Path)> {
        self.iter().filter(move |(_, p)| heard_lately(p, now))
    }

    /// Return how long a repair should take: a NACK to the peer and the
    /// packet back, at least a round trip of the slowest path (a loss on
    /// the nearest path may have to be resent on the farthest, and a TCP
    /// segment waits for that path's delay anyway, see [`crate::equalize`])
    /// and 1.5 of the fastest, with margins; `None` until a round trip is
    /// measured. The fixed margin is for the queues on the way: a repair
    /// given up on just before it arrives is a loss the inner flow sees.
    pub fn repair_hint(&self) -> Option<Duration> {
        let rtts = || {
            self.paths
                .iter()
                .filter(|p| p.state() == PathState::Up)
                .filter_map(|p| Some((p.rtt.srtt_us()?, p.rtt.rttvar_us())))
        };
        let (srtt, rttvar) = rtts().min_by(|a, b| a.0.total_cmp(&b.0))?;
        let (slowest, _) = rtts().max_by(|a, b| a.0.total_cmp(&b.0))?;
        let us = (1.5 * srtt).max(slowest) + 4.0 * rttvar;
        Some(Duration::from_micros(us as u64) + REPAIR_MARGIN)
    }

    /// Return how late a repair asked for now may arrive, µs after the
    /// nearest path's base delay, and still be of use: the peer holds what
    /// is behind a loss for the spread of the paths TCP takes and a margin
    /// from when the loss showed, and the flow reads a repair up to a
    /// quarter of its round trip after that as reordering (see
    /// [`repairs_in_time`](Self::repairs_in_time)); the NACK and the
    /// nearest path's base delay take the least round trip of it. `None`
    /// until a round trip is measured. A repair later than that comes after
    /// the flow's own retransmission has started, and only delays what
    /// queues behind it.
    pub fn repair_useful_us(&self, now: Instant) -> Option<f64> {
        let round_trip = self.least_round_trip()?;
        let base = self.least_base_round_trip()?;
        let spread = Duration::from_micros(self.tcp_spread_us(now, self.out_of_hold(now)) as u64);
        let waited = repair_of_use_within(spread, base);
        Some(waited.saturating_sub(round_trip).as_secs_f64() * 1e6)
    }

    /// Return the least smoothed round trip among the paths that are up,
    /// if one is measured: the soonest a NACK and its repair can go there
    /// and back.
    pub fn least_round_trip(&self) -> Option<Duration> {
        self.least_srtt_us_where(|_| true)
            .map(|us| Duration::from_micros(us as u64))
    }

    /// Return the least smoothed round trip, µs, among the paths that are
    /// up and `keep` accepts, if one is measured.
    fn least_srtt_us_where(&self, keep: impl Fn(&Path) -> bool) -> Option<f64> {
        self.paths
            .iter()
            .filter(|p| p.state() == PathState::Up && keep(p))
            .filter_map(|p| p.rtt.srtt_us())
            .min_by(f64::total_cmp)
    }

    /// Return whether the repair of a loss of our data on path `i` can
    /// reach the peer while the packets behind the loss still wait for it.
    /// The peer waits the spread of the base delays of the paths TCP takes,
    /// and a margin, from when the first packet behind the loss arrives,
    /// which may be on the nearest path; the repair is asked for once the
    /// loss shows, as path `i`'s next packet arrives, its base delay above
    /// the nearest path's, and takes at least the least round trip more.
    /// Or so soon after they were handed out that the flow takes it for
    /// reordering: a loss on the nearest path, where TCP takes no farther
    /// one, is repaired a round trip after it showed, past a spread of 0.
    /// Where nothing is measured yet, it can.
    fn repairs_in_time(&self, now: Instant, i: usize) -> bool {
        let Some(round_trip) = self.least_round_trip() else {
            return true;
        };
        let base_min = base_min(&self.paths);
        let spread = Duration::from_micros(self.tcp_spread_us(now, self.out_of_hold(now)) as u64);
        let shows = Duration::from_micros(self.paths[i].base_above(base_min) as u64);
        if round_trip + shows <= spread + REPAIR_PATIENCE_MARGIN {
            return true;
        }
        // Late by less than a quarter of the flow's least round trip, a
        // repair reaches it within RACK's reordering window: taken for
        // reordering, not loss. Queues delay the repair and the packets
        // behind the loss alike, so the base round trip counts; but for a
        // path dwarfed by clean ones, little to gain, the round trip the
        // repair meets now, jitter and queue in it, must fit.
        let Some(base) = self.least_base_round_trip() else {
            return false;
        };
        let dwarfed = self.clean_paths_carry(i, DWARFED_BY_CLEAN);
        let trip = if dwarfed { round_trip } else { base };
        trip + shows <= repair_of_use_within(spread, base)
    }

    /// Whether a path that is up is known to lose more than a clean one.
    fn lossy_path_up(&self) -> bool {
        self.paths
            .iter()
            .any(|p| p.state() == PathState::Up && known_lossy(p))
    }

    /// Return the [spread](Self::spread_us) of the paths that are up and
    /// TCP took lately, or that went down taking it while a lossy one is
    /// up, but those in `left`: how long the peer holds a TCP segment that
    /// came the nearest way.
    fn tcp_spread_us(&self, now: Instant, left: PathSet) -> f64 {
        let lossy_up = self.lossy_path_up();
        let mut took = PathSet::default();
        for (id, p) in self.iter() {
            if !left.contains(id) && in_tcp_spread(p, now, p.state() == PathState::Up, lossy_up) {
                took.insert(id);
            }
        }
        self.spread_us(took)
    }

    /// Return the least base round trip (see [`Path::base_rtt`]) among the
    /// paths that are up, if one is measured.
    fn least_base_round_trip(&self) -> Option<Duration> {
        self.paths
            .iter()
            .filter(|p| p.state() == PathState::Up)
            .filter_map(|p| p.base_rtt.min())
            .min()
            .map(|us| Duration::from_micros(us.max(0) as u64))
    }

    /// Return whether a TCP flow is under way: a segment the peer holds
    /// was sent within [`TCP_SPREAD_MEMORY`].
    fn tcp_under_way(&self, now: Instant) -> bool {
        self.held_sent_at
            .is_some_and(|at| now.saturating_duration_since(at) < TCP_SPREAD_MEMORY)
    }

    /// Note that a TCP segment the peer holds was sent at `now`, not as a
    /// repair (see [`tcp_paths`](Self::tcp_paths)).
    pub fn note_held_sent(&mut self, now: Instant, path: PathId, len: usize) {
        self.held_sent_at = Some(now);
        if let Some(p) = self.paths.get_mut(path.index()) {
            p.last_held_sent = Some(now);
        }
        let len = len as u64;
        self.held_span = Some(match self.held_span {
            Some((start, bytes)) if now.saturating_duration_since(start) < HELD_RATE_SPAN => {
                (start, bytes.saturating_add(len))
            }
            Some((start, bytes)) => {
                let secs = now.saturating_duration_since(start).as_secs_f64();
                self.held_rate = Some(bytes as f64 / secs);
                (now, len)
            }
            None => (now, len),
        });
    }

    /// Return the paths to send a NACK on: the two with the shortest round
    /// trip among those data may use, so one loss does not lose the NACK.
    pub fn nack_paths(&self) -> PathSet {
        let usable = self.usable();
        let mut up: Vec<(f64, PathId)> = usable
            .iter()
            .map(|id| (self.paths[id.index()].rtt.srtt_us().unwrap_or(f64::MAX), id))
            .collect();
        up.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut set = PathSet::default();
        for &(_, id) in up.iter().take(2) {
            set.insert(id);
        }
        set
    }

    /// Return what is known of a path at `now`, for status output.
    pub fn estimate(&self, path: PathId, now: Instant) -> PathEstimate {
        let Some(p) = self.get(path) else {
            return PathEstimate::default();
        };
        let rel = |delay: &dyn Fn(&Path) -> Option<f64>| {
            let own = delay(p)?;
            let min = self.paths.iter().filter_map(delay).fold(f64::MAX, f64::min);
            Some((own - min) / 1000.0)
        };
        PathEstimate {
            srtt_ms: p.rtt.srtt_us().map(|r| r / 1000.0),
            owd_rel_ms: rel(&|q: &Path| q.owd_out.min().map(|m| m as f64)),
            queue_ms: p.owd_out.queueing() / 1000.0,
            model_queue_ms: p.queue.delay_us(p.rate()) / 1000.0,
            model_rate_mbps: p.rate() * 8.0,
            rate_mbps: p
                .delivery
                .measured()
                .then(|| p.delivery.capacity() * 8.0 / 1e6),
            train_mbps: p.delivery.train_rate().map(|r| r * 8.0 / 1e6),
            loss: p.delivery.loss(),
            owd_in_rel_ms: rel(&|q: &Path| q.peer_probes.owd_in.smoothed()),
            jitter_in_ms: p.peer_probes.owd_in.jitter() / 1000.0,
            echo_late: p.liveness.echo_late(),
            late_echoes: p.liveness.late_echoes(),
            queue_limit_ms: p.queue_limit.limit_us(now).map(|l| l / 1000.0),
            overflows: p.queue_limit.overflows(),
        }
    }
}

/// Return how long past its due time a held TCP segment behind a lost one
/// waits for the repair (see [`crate::reorder::Arrival::due`]), given the
/// paths' least round trip and the spread a held segment waits out (see
/// [`PathTable::equalize_wait`]): [`REPAIR_PATIENCE_MARGIN`], or
/// [`REPAIR_PAST_DUE_SHARE`] of the round trip of a flow held to the
/// farthest path (the two summed), if that is more.
pub(crate) fn repair_past_due(
    least_round_trip: Option<Duration>,
    spread: Option<Duration>,
) -> Duration {
    let round_trip = least_round_trip
        .zip(spread)
        .map(|(least, spread)| least + spread);
    round_trip.map_or(REPAIR_PATIENCE_MARGIN, |r| {
        REPAIR_PATIENCE_MARGIN.max(r / REPAIR_PAST_DUE_SHARE)
    })
}

/// Whether TCP took `p` within [`TCP_SPREAD_MEMORY`] before `now`: the
/// peer holds TCP segments as long as such a path takes.
fn took_tcp_lately(p: &Path, now: Instant) -> bool {
    p.takes_tcp_at
        .is_some_and(|t| now.saturating_duration_since(t) < TCP_SPREAD_MEMORY)
}

/// Whether the peer's probes came on `p` lately.
fn heard_lately(p: &Path, now: Instant) -> bool {
    p.peer_probes
        .last_at()
        .is_some_and(|t| now.saturating_duration_since(t) < crate::path::DOWN_AFTER_MAX)
}

/// Whether the peer holds TCP segments as long as `p` takes: it carries
/// data (`carries`) and TCP took it lately, or it went down taking TCP
/// while a lossy path is up (`lossy_up`; see [`OUTAGE_SPREAD_MEMORY`]).
fn in_tcp_spread(p: &Path, now: Instant, carries: bool, lossy_up: bool) -> bool {
    (carries && took_tcp_lately(p, now)) || (lossy_up && lost_taking_tcp(p, now))
}

/// Whether `p` is down and TCP took it within [`OUTAGE_SPREAD_MEMORY`]
/// before `now`, so until about when it went down.
fn lost_taking_tcp(p: &Path, now: Instant) -> bool {
    p.state() == PathState::Down
        && p.takes_tcp_at
            .is_some_and(|t| now.saturating_duration_since(t) < OUTAGE_SPREAD_MEMORY)
}

/// Whether `p` is known to lose less than a clean path: over the spans
/// judged, or over every span, a queue's overflows included.
fn known_clean(p: &Path) -> bool {
    let (any_loss, any_packets) = p.delivery.any_loss();
    (p.delivery.loss() < LOSS_CLEAN && p.delivery.judged_packets() >= LOSS_MIN_PACKETS)
        || (any_loss < LOSS_CLEAN && any_packets >= LOSS_MIN_PACKETS)
}

/// Whether `p`'s loss is known, and more than a clean path's.
fn known_lossy(p: &Path) -> bool {
    loss_known(p) && p.delivery.loss() > LOSS_CLEAN
}

/// Return whether `p`'s loss is known: judged over enough packets, or over
/// fewer with more lost than a clean path would lose but rarely.
fn loss_known(p: &Path) -> bool {
    loss_known_over(p.delivery.loss(), p.delivery.judged_packets())
}

/// Whether a loss of `loss` over `judged` packets is known (see
/// [`loss_known`]).
fn loss_known_over(loss: f64, judged: u64) -> bool {
    if judged >= LOSS_MIN_PACKETS {
        return true;
    }
    if judged < LOSS_EARLY_MIN_PACKETS {
        return false;
    }
    let lost = (loss * judged as f64).round();
    poisson_tail(judged as f64 * LOSS_CLEAN, lost) < LOSS_EARLY_SIGNIFICANCE
}

/// Return the chance of `k` or more events where `mean` are expected
/// (Poisson).
fn poisson_tail(mean: f64, k: f64) -> f64 {
    let mut term = (-mean).exp();
    let mut below = 0.0;
    let mut i = 0.0;
    while i < k {
        below += term;
        i += 1.0;
        term *= mean / i;
    }
    (1.0 - below).max(0.0)
}

/// Return how long after a loss shows its repair is of use, given the
/// spread of the paths TCP takes and the flow's least base round trip: the
/// peer waits the spread and a margin, and the flow reads a repair up to a
/// quarter of its round trip later than that as reordering (RACK's window).
fn repair_of_use_within(spread: Duration, base: Duration) -> Duration {
    spread + REPAIR_PATIENCE_MARGIN + (base + spread) / 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::train::TRAIN_PACKETS;

    #[test]
    fn a_gap_next_to_a_packet_that_met_a_queue_was_dropped_at_it() {
        let t0 = crate::tests::t0();
        let mut table = PathTable::new(t0, 1);
        let path = PathId(0);
        // The peer's clock reads ours; its probe took 20 ms.
        let probe = Probe {
            number: 1,
            sent_us: 0,
            ..Probe::default()
        };
        table.handle_probe(t0 + Duration::from_millis(20), path, &probe, PathSet(1));
        // Data packet `n`, sent at n ms, arriving 20 ms later plus `queue`.
        let mut receive = |n: u32, queue_ms: u64| {
            let sent_ms = u64::from(n);
            let at = t0 + Duration::from_millis(sent_ms + 20 + queue_ms);
            table.handle_data(at, path, Seq(n), (sent_ms * 1000) as u32, 1000)
        };
        let missed = |table: &PathTable| table.paths[0].reception.missed_at_queue;
        assert_eq!(receive(1, 0), 0);
        // Lost at random: the packets on both sides met no queue.
        assert_eq!(receive(3, 0), 1);
        // Dropped by a full queue the packet after it met...
        assert_eq!(receive(6, 40), 2);
        // ...or the one before (the sender fell silent meanwhile).
        assert_eq!(receive(10, 0), 3);
        // A late packet fills a gap counted before: nothing new is missing.
        assert_eq!(receive(9, 0), 0);
        assert_eq!(receive(12, 0), 1);
        assert_eq!(missed(&table), 5);
        assert_eq!(table.paths[0].reception.packets, 6);
    }

    #[test]
    fn the_newest_probe_says_which_paths_tcp_is_held_to() {
        let t0 = crate::tests::t0();
        let mut table = PathTable::new(t0, 2);
        let probe = |sent_ms: u64| Probe {
            number: 1 + sent_ms as u32,
            sent_us: sent_ms * 1000,
            ..Probe::default()
        };
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // Sent at 10 ms on the near path: TCP held to path 0 alone. One
        // sent at 5 ms on the far path, before the peer's TCP left it,
        // arrives later still and is not news.
        table.handle_probe(at(15), PathId(0), &probe(10), PathSet(1));
        table.handle_probe(at(65), PathId(1), &probe(5), PathSet(3));
        assert_eq!(table.peer_spread_paths, PathSet(1));
        // A newer one is, on any path.
        table.handle_probe(at(80), PathId(1), &probe(20), PathSet(3));
        assert_eq!(table.peer_spread_paths, PathSet(3));
        // A restarted peer's clock starts over.
        table.forget_peer();
        table.handle_probe(
            at(90),
            PathId(0),
            &Probe {
                number: 1,
                ..probe(1)
            },
            PathSet(1),
        );
        assert_eq!(table.peer_spread_paths, PathSet(1));
    }

    #[test]
    fn a_loss_at_a_clean_path_s_full_queue_is_the_flow_s_where_no_path_it_could_take_had_room() {
        let t0 = crate::tests::t0();
        let mut table = PathTable::new(t0, 2);
        table.set_session(t0, PathId(0), true);
        table.set_session(t0, PathId(1), true);
        // Path 0 has 12 ms queued and never overflowed: near overflowing.
        // Path 1 is empty.
        table.paths[0].owd_out.update(t0, 0);
        table.paths[0].owd_out.update(t0, 12_000);
        let (path, both, tcp) = (PathId(0), PathSet(0b11), PathSet(0b01));
        // Path 0's loss not known yet: anything lost there while path 1 has
        // room is ours to repair.
        assert!(!table.charge(t0, path, Seq(0), 1400, false, tcp).congested);
        // Known clean: a packet path 1 could have taken, lost at path 0's
        // queue, is still ours to repair, not the flow's to back off for.
        table.paths[0].delivery.set_loss_over(0.0, LOSS_MIN_PACKETS);
        assert!(!table.charge(t0, path, Seq(1), 1400, false, both).congested);
        assert!(!table.last_sent(t0, path).1);
        // A TCP segment, path 1 too small for TCP: the queue's loss, the
        // flow's, however empty path 1 stands. Its probe says so too.
        assert!(table.charge(t0, path, Seq(2), 1400, false, tcp).congested);
        assert!(table.last_sent(t0, path).1);
        // Known to lose at random: a loss at its standing queue may be one
        // of those, ours to repair while another path has room.
        table.paths[0]
            .delivery
            .set_loss_over(0.02, LOSS_MIN_PACKETS);
        assert!(!table.charge(t0, path, Seq(3), 1400, false, tcp).congested);
        assert!(!table.last_sent(t0, path).1);
    }

    #[test]
    fn a_path_losing_a_few_percent_is_known_lossy_before_its_thousandth_packet() {
        let t0 = crate::tests::t0();
        let mut table = PathTable::new(t0, 1);
        let known = |table: &mut PathTable, loss: f64, packets: u64| {
            table.paths[0].delivery.set_loss_over(loss, packets);
            loss_known(&table.paths[0])
        };
        // 2.6%: 8 of 300, where a clean path loses 0.6.
        assert!(known(&mut table, 8.0 / 300.0, 300));
        // 2 of 400 is no more than a clean path might lose...
        assert!(!known(&mut table, 2.0 / 400.0, 400));
        // ...and 100 packets say nothing yet.
        assert!(!known(&mut table, 0.1, 100));
        // A thousand say what they say.
        assert!(known(&mut table, 0.0, 1000));
        assert!(known(&mut table, 0.001, 1000));
    }

    /// Run one path from its session coming up: its three trains each
    /// arrive spread over 8 ms, and our probes' one-way delay steps by
    /// 4 ms from one to the next. With `repairs`, a repair goes onto the
    /// path every 20 ms, as it would beside a flow on other paths. Return
    /// the most packets in a train sent after the first three.
    fn longest_later_train(repairs: bool) -> u16 {
        let t0 = crate::tests::t0();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut table = PathTable::new(t0, 1);
        let path = PathId(0);
        table.set_session(t0, path, true);
        let mut trains = Vec::new();
        let mut longest = 0;
        // The peer's probes, due at: each echoes one of ours.
        let mut echoes: Vec<(u64, Probe)> = Vec::new();
        let mut peer_number = 0;
        let mut repair_seq = 0;
        for ms in 0..3000 {
            if repairs && ms >= 200 && ms % 20 == 0 {
                table.charge(at(ms), path, Seq(repair_seq), 1400, true, table.usable());
                repair_seq += 1;
            }
            while let Some((_, number, packets)) = table.poll_train(at(ms)) {
                trains.push(number);
                if trains.len() > 3 {
                    longest = longest.max(packets);
                }
            }
            while let Some((_, ours)) = table.poll_probe(at(ms)) {
                let owd_us = 20_000 + 4_000 * u64::from(ours.number % 2);
                peer_number += 1;
                let train = trains.iter().copied().filter(|&n| n <= 3).max();
                echoes.push((
                    ms + 40,
                    Probe {
                        number: peer_number,
                        sent_us: ours.sent_us + owd_us,
                        echo_number: ours.number,
                        echo_sent_us: ours.sent_us,
                        echo_arrived_us: ours.sent_us + owd_us,
                        train_number: train.unwrap_or(0),
                        train_bytes: 15 * TRAIN_PACKET_LEN as u32,
                        train_span_us: 8_000,
                        ..Probe::default()
                    },
                ));
            }
            for (_, probe) in echoes.iter().filter(|(due, _)| *due == ms) {
                table.handle_probe(at(ms), path, probe, PathSet(1));
            }
        }
        longest
    }

    #[test]
    fn a_path_carrying_repairs_gets_no_long_train() {
        // Simulated sweep seed 4987 #27: a 13 Mbit/s path beside a 250
        // Mbit/s one carried only repairs, whose queue its probes took for
        // jitter; once that was measured, the long train went out mid-flow,
        // 328 packets into a queue that holds about 70, and the repairs
        // behind it were lost.
        assert!(
            longest_later_train(false) > TRAIN_PACKETS,
            "an idle path's jitter calls for it"
        );
        assert_eq!(longest_later_train(true), 0);
    }

    #[test]
    fn the_poisson_tail_is_the_chance_of_as_many_or_more() {
        assert_eq!(poisson_tail(0.5, 0.0), 1.0);
        assert!((poisson_tail(0.5, 1.0) - (1.0 - (-0.5f64).exp())).abs() < 1e-12);
        // Mean 0.6, 6 or more: 3.9e-5.
        assert!((poisson_tail(0.6, 6.0) - 3.886e-5).abs() < 1e-8);
    }
}
