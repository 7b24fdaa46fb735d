//! Which path the next packet takes.
//!
//! The adaptive policy sends each data packet to the path on which it is
//! expected to arrive soonest: relative one-way delay, plus what is queued
//! on that path at its measured rate. A packet the receiver will hold until
//! it is as old as one on the farthest path (a TCP segment, see
//! [`crate::equalize`]) gains nothing by arriving sooner than that: among
//! the paths that bring it by then it goes where the queue is shortest, so
//! a bulk flow is spread over the paths by their rates and queues none of
//! them deep. Weighted round-robin is the static alternative.

use std::time::Instant;

use crate::path::{base_min, Path, PathId, PathSet};
use crate::paths::LOSS_CLEAN;
use crate::MAX_PATHS;

/// How long after its release a held packet may start arriving and still
/// count as in time, µs. On the farthest path a packet starts arriving
/// exactly at its release, so without slack that path ties only with an
/// empty queue: it never keeps one, and its rate goes unused while nearer,
/// smaller paths queue. A segment a few ms late does not raise the round
/// trip the flow times (the least of its samples), and the receiver's hold
/// adapts to the reordering it sees.
const HELD_SLACK_US: f64 = 8000.0;

/// The longest queue, µs, a bare ACK joins while a path with a shorter
/// one is left (see [`Scheduler::pick_for_ack`]).
const ACK_QUEUE_US: f64 = 1000.0;

/// One bare ACK in this many takes the next soonest path with a short
/// queue (see [`Scheduler::pick_for_ack`])...
const ACK_SPARE_EVERY: u32 = 4;
/// ...if it arrives no more than this later there, µs: half the 4 ms
/// over the least round trip that Linux's HyStart takes for a full pipe
/// at the earliest, the other half left to the queues the flow's packets
/// meet.
const ACK_SPARE_WITHIN_US: f64 = 2000.0;

/// How the sender picks paths.
#[derive(Clone, Debug)]
pub enum Policy {
    /// Earliest expected arrival; `caps` (shares summing to 1) limit paths.
    Adaptive {
        /// Optional maximum share of packets per path.
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

/// Picks the path of each packet, by a [`Policy`].
#[derive(Clone, Debug)]
pub(crate) struct Scheduler {
    policy: Policy,
    /// Each path's share of the last thousand or so data packets, for the
    /// caps.
    shares: Vec<f64>,
    /// Bare ACKs picked a path for, to send every [`ACK_SPARE_EVERY`]th
    /// another way.
    acks: u32,
}

impl Scheduler {
    pub fn new(policy: Policy, paths: usize) -> Self {
        Scheduler {
            policy,
            shares: vec![0.0; paths],
            acks: 0,
        }
    }

    /// Spread by `policy` from now on; what the caps measured so far is
    /// kept.
    pub fn set_policy(&mut self, policy: Policy) {
        self.policy = policy;
    }

    /// Make room for `paths` paths.
    pub fn resize(&mut self, paths: usize) {
        self.shares.resize(paths, 0.0);
    }

    /// Pick the path among `candidates` for a packet of `len` bytes at
    /// `now` that the receiver holds until `held_until_us` after the
    /// nearest path's base delay (0 if it is not held).
    pub fn pick(
        &mut self,
        paths: &mut [Path],
        now: Instant,
        len: usize,
        held_until_us: f64,
        candidates: PathSet,
    ) -> Option<PathId> {
        match &mut self.policy {
            Policy::RoundRobin(rr) => rr.pick(|p| candidates.contains(p)),
            Policy::Adaptive { caps } => earliest_arrival(
                paths,
                now,
                len,
                held_until_us,
                candidates,
                caps.as_deref(),
                &self.shares,
            ),
        }
    }

    /// Return the path among `candidates` where `len` bytes sent at `now`
    /// arrive soonest, with that arrival (µs, relative to the nearest
    /// path's base delay): for repairs, which a receiver is waiting on. A
    /// path whose queue is as deep as when it overflowed is none: what
    /// joins the queue there is most likely dropped.
    pub fn pick_soonest(
        &self,
        paths: &mut [Path],
        now: Instant,
        len: usize,
        candidates: PathSet,
    ) -> Option<(PathId, f64)> {
        soonest_where(paths, now, len, candidates, |p, _| !p.full(now))
    }

    /// Return the path among `candidates` where `len` bytes sent at `now`
    /// arrive soonest, among those with room for them and where they
    /// arrive by `by_us` (relative to the nearest path's base delay), with
    /// that arrival: for repairs that come late wherever they go, a burst
    /// of which would fill a queue past what its path holds (see
    /// `QueueLimit::room_us`).
    pub fn pick_soonest_with_room(
        &self,
        paths: &mut [Path],
        now: Instant,
        len: usize,
        candidates: PathSet,
        by_us: f64,
    ) -> Option<(PathId, f64)> {
        soonest_where(paths, now, len, candidates, |p, arrival| {
            let queue = p.model_queue_us(now) + len as f64 / p.rate();
            arrival <= by_us && queue <= p.queue_limit.room_us(now)
        })
    }

    /// Pick the path among `candidates` for a bare TCP ACK of `len` bytes
    /// at `now`: the soonest arrival among those whose queue, with it,
    /// stays under [`ACK_QUEUE_US`]; among all if none's does.
    ///
    /// Not the soonest arrival over all: a bulk flow's ACKs outgrow a
    /// small near path, and by that rule they would queue there until it
    /// is as late as the next path, raising every round trip the flow
    /// times by the difference (HyStart reads that as a full pipe and ends
    /// slow start). Spilled at a short queue instead, some ACKs of every
    /// round still come the nearest way, and the least round trip holds.
    ///
    /// One ACK in [`ACK_SPARE_EVERY`] takes the next soonest such path that
    /// loses nothing, if it arrives there within [`ACK_SPARE_WITHIN_US`] of
    /// the soonest. ACKs are cumulative: behind a later one it changes
    /// nothing, and as the newest of its round it raises the round trip by
    /// half what HyStart takes for a full pipe at the least. When the
    /// soonest path dies, the spare ACKs alone keep the flow's window
    /// moving until that path is marked down, and the flow neither stalls
    /// nor waits for a timeout.
    pub fn pick_for_ack(
        &mut self,
        paths: &mut [Path],
        now: Instant,
        len: usize,
        candidates: PathSet,
    ) -> Option<PathId> {
        // Shares the operator capped are kept to, as for any packet.
        if !matches!(self.policy, Policy::Adaptive { caps: None }) {
            return self.pick(paths, now, len, 0.0, candidates);
        }
        let mut short = PathSet::default();
        for path in candidates.iter() {
            let p = &mut paths[path.index()];
            if p.model_queue_us(now) + len as f64 / p.rate() <= ACK_QUEUE_US && !p.full(now) {
                short.insert(path);
            }
        }
        let among = if short == PathSet::default() {
            candidates
        } else {
            short
        };
        let soonest = self.pick(paths, now, len, 0.0, among)?;
        self.acks = self.acks.wrapping_add(1);
        if self.acks.is_multiple_of(ACK_SPARE_EVERY) {
            // Spare ACKs are there for when the soonest path dies, as
            // repairs are for when a packet is lost: on a clean path.
            let mut others = PathSet::default();
            for path in among.iter() {
                if path != soonest && paths[path.index()].delivery.loss() < LOSS_CLEAN {
                    others.insert(path);
                }
            }
            let base_min = base_min(paths);
            let arrival = arrival_us(&mut paths[soonest.index()], now, len, base_min);
            if let Some((spare, spare_arrival)) = self.pick_soonest(paths, now, len, others) {
                if spare_arrival <= arrival + ACK_SPARE_WITHIN_US {
                    return Some(spare);
                }
            }
        }
        Some(soonest)
    }

    /// Count a data packet (not a repair) sent on `path`, for the caps.
    pub fn note_sent(&mut self, path: PathId) {
        if matches!(&self.policy, Policy::Adaptive { caps: Some(_) }) {
            // Decayed per packet, so about the last 1000 packets count.
            for (j, share) in self.shares.iter_mut().enumerate() {
                *share = *share * 0.999 + if j == path.index() { 0.001 } else { 0.0 };
            }
        }
    }
}

/// Return the path among `candidates` where `len` bytes sent at `now`
/// arrive soonest, counting any arrival that starts by `held_until_us` (or
/// [`HELD_SLACK_US`] after) as then and the shortest queue among those as
/// the soonest; a path whose queue is as deep as when it overflowed, or
/// that is slower than such a path and would deliver a held packet far
/// too late, only if every one is, and a path over its cap only if every
/// one is that.
fn earliest_arrival(
    paths: &mut [Path],
    now: Instant,
    len: usize,
    held_until_us: f64,
    candidates: PathSet,
    caps: Option<&[f64]>,
    shares: &[f64],
) -> Option<PathId> {
    let base_min = base_min(paths);
    let mut full = [false; MAX_PATHS];
    let mut fastest_full: f64 = 0.0; // see `too_late` below
    for id in candidates.iter() {
        let p = &mut paths[id.index()];
        if p.full(now) {
            full[id.index()] = true;
            fastest_full = fastest_full.max(p.rate());
        }
    }
    // (tier, arrival, queue): the lowest wins, in that order.
    let mut best: Option<((u8, f64, f64), PathId)> = None;
    for path in candidates.iter() {
        let p = &mut paths[path.index()];
        let over_cap = caps.is_some_and(|c| {
            c.get(path.index())
                .is_some_and(|&cap| shares.get(path.index()).is_some_and(|&s| s > cap))
        });
        // The queue the packet would wait behind, and its own bytes' time;
        // it starts arriving that wait past the path's base delay.
        let waited = p.model_queue_us(now);
        let own = len as f64 / p.rate();
        let queue = waited + own;
        let starts = p.base_above(base_min) + waited;
        // A path slower than a full one, on which a held packet would start
        // arriving later than its release by more than the hold itself and
        // the slack, ranks with the full ones, and the sooner arrival wins:
        // the near path's overflow, a loss the flow backs off at as it
        // would on one path, rather than a queue that every packet sent
        // after this one waits for. A slow path's queue grows fast for
        // what it holds of the window; a bigger far path keeps its queue,
        // as the flow's window needs room somewhere.
        let too_late = held_until_us > 0.0
            && starts > 2.0 * held_until_us + HELD_SLACK_US
            && p.rate() < fastest_full;
        let tier = if over_cap {
            2
        } else {
            u8::from(full[path.index()] || too_late)
        };
        // A held packet that starts arriving by the time it is released,
        // or a little after, arrives in time; see [`HELD_SLACK_US`].
        let arrival = if held_until_us > 0.0 && starts <= held_until_us + HELD_SLACK_US {
            held_until_us
        } else {
            starts + own
        };
        let rank = (tier, arrival, queue);
        if best.is_none_or(|(r, _)| {
            rank.0
                .cmp(&r.0)
                .then(rank.1.total_cmp(&r.1))
                .then(rank.2.total_cmp(&r.2))
                == std::cmp::Ordering::Less
        }) {
            best = Some((rank, path));
        }
    }
    best.map(|(_, p)| p)
}

/// Return the path among `candidates` where `len` bytes sent at `now`
/// arrive soonest, among those `fits` accepts given that arrival (µs after
/// the nearest path's base delay), with the arrival.
fn soonest_where(
    paths: &mut [Path],
    now: Instant,
    len: usize,
    candidates: PathSet,
    mut fits: impl FnMut(&mut Path, f64) -> bool,
) -> Option<(PathId, f64)> {
    let base_min = base_min(paths);
    candidates
        .iter()
        .filter_map(|path| {
            let p = &mut paths[path.index()];
            let arrival = arrival_us(p, now, len, base_min);
            fits(p, arrival).then_some((path, arrival))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// Return when `len` bytes sent on `p` at `now` arrive, µs after the
/// nearest path's base delay: base, queue, and the bytes' own time.
fn arrival_us(p: &mut Path, now: Instant, len: usize, base_min: Option<i64>) -> f64 {
    p.base_above(base_min) + p.model_queue_us(now) + len as f64 / p.rate()
}

/// Smooth weighted round-robin over the paths that are usable right now.
///
/// Each pick adds every usable path's weight to its credit, takes the path
/// with the most credit and charges it the total. Over any window a path gets
/// its share of the picks within one packet, interleaved rather than in runs
/// (the algorithm nginx uses for upstreams), which keeps the reordering the
/// receiver has to undo small.
#[derive(Clone, Debug)]
pub struct WeightedRoundRobin {
    weights: Vec<u32>,
    credit: Vec<i64>,
}

impl WeightedRoundRobin {
    /// Create a scheduler for paths `0..weights.len()` with these static shares.
    pub fn new(weights: &[u32]) -> Self {
        WeightedRoundRobin {
            weights: weights.to_vec(),
            credit: vec![0; weights.len()],
        }
    }

    /// Return the static weight of `path` (0 for an unknown path).
    pub fn weight(&self, path: PathId) -> u32 {
        self.weights.get(path.index()).copied().unwrap_or(0)
    }

    /// Pick the path for the next packet among those `usable` accepts.
    pub fn pick(&mut self, usable: impl Fn(PathId) -> bool) -> Option<PathId> {
        let mut total: i64 = 0;
        let mut best: Option<usize> = None;
        for i in 0..self.weights.len() {
            let weight = i64::from(self.weights[i]);
            if weight == 0 || !usable(PathId(i as u8)) {
                // A path that comes back must not cash in credit saved while
                // it was away and take a burst.
                self.credit[i] = 0;
                continue;
            }
            self.credit[i] += weight;
            total += weight;
            if best.is_none_or(|b| self.credit[i] > self.credit[b]) {
                best = Some(i);
            }
        }
        let chosen = best?;
        self.credit[chosen] -= total;
        Some(PathId(chosen as u8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shares(weights: &[u32], picks: usize, usable: impl Fn(PathId) -> bool) -> Vec<usize> {
        let mut s = WeightedRoundRobin::new(weights);
        let mut counts = vec![0; weights.len()];
        for _ in 0..picks {
            if let Some(p) = s.pick(&usable) {
                counts[p.index()] += 1;
            }
        }
        counts
    }

    #[test]
    fn equal_weights_alternate_evenly() {
        let mut s = WeightedRoundRobin::new(&[1, 1, 1]);
        let order: Vec<u8> = (0..6).map(|_| s.pick(|_| true).unwrap().0).collect();
        assert_eq!(order, vec![0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn shares_follow_weights() {
        assert_eq!(shares(&[3, 2, 1], 600, |_| true), vec![300, 200, 100]);
        assert_eq!(shares(&[1, 0, 1], 10, |_| true), vec![5, 0, 5]);
    }

    #[test]
    fn picks_are_interleaved_not_bursty() {
        let mut s = WeightedRoundRobin::new(&[5, 1]);
        let order: Vec<u8> = (0..6).map(|_| s.pick(|_| true).unwrap().0).collect();
        // The light path's turn falls in the middle, not after five in a row.
        assert_eq!(order, vec![0, 0, 0, 1, 0, 0]);
    }

    #[test]
    fn unusable_paths_get_nothing_and_return_without_a_burst() {
        assert_eq!(shares(&[1, 1, 1], 300, |p| p.0 != 1), vec![150, 0, 150]);
        assert_eq!(shares(&[1, 1], 10, |_| false), vec![0, 0]);

        let mut s = WeightedRoundRobin::new(&[1, 1]);
        for _ in 0..100 {
            s.pick(|p| p.0 == 0);
        }
        let order: Vec<u8> = (0..4).map(|_| s.pick(|_| true).unwrap().0).collect();
        assert_eq!(order.iter().filter(|&&p| p == 1).count(), 2);
    }
}
