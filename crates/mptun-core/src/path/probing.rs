//! Probing: our probes on a path and their echoes, and the peer's probes,
//! which we echo.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::estimators::{offset_us, under_way_above, DelayTracker};
use crate::seq::Seq;
use crate::wire::Probe;

/// Return whether probe number `a` comes after `b`, in serial-number order:
/// numbers wrap after 2^32 probes (about 500 days at the busy rate).
fn newer(a: u32, b: u32) -> bool {
    Seq(b).is_before(Seq(a))
}

/// Probe interval of a path that carries no data.
pub const PROBE_IDLE: Duration = Duration::from_millis(100);
/// Probe interval of a path that carries data either way: each echo
/// corrects the scheduler's model of the path's queue, which drifts in
/// between.
pub const PROBE_BUSY: Duration = Duration::from_millis(10);

/// Probes remembered per path for matching echoes: over half a second's
/// worth while busy.
const PROBES_REMEMBERED: usize = 64;

/// How long one-way delay minima are remembered: long, because a path kept
/// busy never shows its empty-queue delay, and a minimum that rose with the
/// standing queue would make the other paths look closer than they are.
pub const BASE_DELAY_WINDOW: Duration = Duration::from_secs(120);

/// One of our probes, remembered until it is echoed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SentProbe {
    pub number: u32,
    pub at: Instant,
    /// Data bytes sent on the path before it.
    pub sent_before: u64,
}

/// Our probes on one path: when the next is due, and those not echoed yet.
#[derive(Clone, Debug)]
pub(crate) struct OurProbes {
    /// Probes sent so far; the last one's number.
    sent: u32,
    next_at: Option<Instant>,
    /// Interval to the next probe, as of the last one sent.
    interval: Duration,
    in_flight: VecDeque<SentProbe>,
    /// The newest of our probes the peer has echoed.
    last_echoed: u32,
}

impl Default for OurProbes {
    fn default() -> Self {
        OurProbes {
            sent: 0,
            next_at: None,
            interval: PROBE_IDLE,
            in_flight: VecDeque::with_capacity(PROBES_REMEMBERED),
            last_echoed: 0,
        }
    }
}

impl OurProbes {
    /// Return when the next probe is due, if the path is probed.
    pub fn next_at(&self) -> Option<Instant> {
        self.next_at
    }

    /// Return the interval to the next probe.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Probe from `now` on (a session came up).
    pub fn start(&mut self, now: Instant) {
        self.next_at = Some(now);
    }

    /// Stop probing (no session).
    pub fn stop(&mut self) {
        self.next_at = None;
    }

    /// Bring the next probe forward to [`PROBE_BUSY`] from `now` at the
    /// latest: the path just became busy, and a failure should be noticed
    /// sooner.
    pub fn hurry(&mut self, now: Instant) {
        self.next_at = self.next_at.map(|t| t.min(now + PROBE_BUSY));
    }

    /// Number and remember the probe sent at `now`, and schedule the next
    /// one `interval` later; return its number.
    pub fn send(&mut self, now: Instant, interval: Duration, sent_before: u64) -> u32 {
        // 0 stands for "none" in an echo: skipped when the numbers wrap.
        self.sent = self.sent.wrapping_add(1).max(1);
        if self.in_flight.len() == PROBES_REMEMBERED {
            self.in_flight.pop_front();
        }
        self.in_flight.push_back(SentProbe {
            number: self.sent,
            at: now,
            sent_before,
        });
        self.next_at = Some(now + interval);
        self.interval = interval;
        self.sent
    }

    /// Return when probe `number` was sent, if it is still remembered.
    pub fn sent_at(&self, number: u32) -> Option<Instant> {
        self.in_flight
            .iter()
            .find(|p| p.number == number)
            .map(|p| p.at)
    }

    /// Take the echo of probe `number`; return whether it is fresh: newer
    /// than any echoed before, and of a probe we did send.
    pub fn take_echo(&mut self, number: u32) -> bool {
        let fresh = newer(number, self.last_echoed) && !newer(number, self.sent);
        if fresh {
            self.last_echoed = number;
        }
        fresh
    }

    /// Forget the probes older than `number`, and return probe `number`
    /// itself if it is remembered.
    pub fn echoed(&mut self, number: u32) -> Option<SentProbe> {
        while self
            .in_flight
            .front()
            .is_some_and(|p| newer(number, p.number))
        {
            self.in_flight.pop_front();
        }
        self.in_flight
            .front()
            .filter(|p| p.number == number)
            .copied()
    }

    /// Return when the newest probe the peer echoed was sent, if it is
    /// still remembered, else when the oldest remembered one was.
    pub fn echoed_up_to(&self) -> Option<Instant> {
        self.in_flight
            .iter()
            .find(|p| p.number == self.last_echoed)
            .or(self.in_flight.front())
            .map(|p| p.at)
    }

    /// Return our oldest probe the peer has not echoed yet.
    pub fn oldest_unechoed(&self) -> Option<&SentProbe> {
        self.in_flight
            .iter()
            .find(|p| newer(p.number, self.last_echoed))
    }

    /// Forget which probes were echoed: the peer restarted, and its echoes
    /// start over.
    pub fn forget_echoes(&mut self) {
        self.last_echoed = 0;
    }
}

/// The last probe received from the peer, to echo in ours.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PeerProbe {
    pub number: u32,
    pub sent_us: u64,
    pub arrived_us: u64,
}

/// The peer's probes on one path: the one to echo, how often they come, and
/// the one-way delay towards us they measure.
#[derive(Clone, Debug)]
pub(crate) struct PeerProbes {
    last: Option<PeerProbe>,
    last_at: Option<Instant>,
    /// How often they arrive (smoothed).
    interval: Option<Duration>,
    /// When one arrived with the one before it missing.
    missing_at: Option<Instant>,
    /// The peer's one-way delay towards us.
    pub owd_in: DelayTracker,
}

impl Default for PeerProbes {
    fn default() -> Self {
        PeerProbes {
            last: None,
            last_at: None,
            interval: None,
            missing_at: None,
            owd_in: DelayTracker::new(BASE_DELAY_WINDOW),
        }
    }
}

impl PeerProbes {
    /// Take a probe that arrived at `now` (`now_us` on our clock); return
    /// false if it is no newer than one taken before (reordered or
    /// replayed), and so says nothing new.
    pub fn handle(&mut self, now: Instant, now_us: u64, probe: &Probe) -> bool {
        if self
            .last
            .is_some_and(|old| !newer(probe.number, old.number))
        {
            return false;
        }
        if self
            .last
            .is_some_and(|old| probe.number != old.number.wrapping_add(1))
        {
            self.missing_at = Some(now);
        }
        self.last = Some(PeerProbe {
            number: probe.number,
            sent_us: probe.sent_us,
            arrived_us: now_us,
        });
        if let Some(last) = self.last_at {
            let gap = now.saturating_duration_since(last);
            self.interval = Some(match self.interval {
                None => gap,
                // Quick to lengthen (a peer going idle), slow to shorten.
                Some(i) if gap > i => gap,
                Some(i) => (i * 7 + gap) / 8,
            });
        }
        self.last_at = Some(now);
        self.owd_in.update(now, offset_us(now_us, probe.sent_us));
        true
    }

    /// Return the queue, µs, that a packet the peer sent at `sent_us` (its
    /// clock's low 32 bits) and that arrived at `now_us` (ours) met on the
    /// way: its one-way delay above the least our probes measured; 0 until
    /// one is measured.
    pub fn queueing_on_arrival(&self, now_us: u64, sent_us: u32) -> f64 {
        let Some(base) = self.owd_in.min() else {
            return 0.0;
        };
        f64::from(under_way_above(now_us, sent_us, base).max(0))
    }

    /// Return the probe to echo in our next one (number 0: none yet).
    pub fn to_echo(&self) -> PeerProbe {
        self.last.unwrap_or_default()
    }

    /// Return when the last probe came.
    pub fn last_at(&self) -> Option<Instant> {
        self.last_at
    }

    /// Return when one came with the one before it missing (lost, or
    /// still on the way).
    pub fn missing_at(&self) -> Option<Instant> {
        self.missing_at
    }

    /// Return how often the peer probes, capped at the idle interval (it
    /// probes at least that often).
    pub fn interval(&self) -> Duration {
        self.interval.unwrap_or(PROBE_IDLE).min(PROBE_IDLE)
    }

    /// Forget the peer's probes: it restarted, with a new clock and new
    /// numbers.
    pub fn reset(&mut self) {
        self.last = None;
        self.owd_in.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_numbers_compare_across_the_wrap() {
        let t0 = crate::tests::t0();
        let mut ours = OurProbes {
            sent: u32::MAX - 1,
            last_echoed: u32::MAX - 2,
            ..OurProbes::default()
        };
        let numbers: Vec<u32> = (0..3).map(|_| ours.send(t0, PROBE_BUSY, 0)).collect();
        // 0 stands for "none": skipped.
        assert_eq!(numbers, vec![u32::MAX, 1, 2]);
        assert!(ours.take_echo(u32::MAX));
        assert!(ours.take_echo(1), "after the wrap, 1 is newer");
        assert!(!ours.take_echo(u32::MAX), "an old echo again");
        assert!(!ours.take_echo(3), "not sent yet");
        assert_eq!(ours.echoed(2).map(|p| p.number), Some(2));

        let mut theirs = PeerProbes::default();
        let probe = |number| Probe {
            number,
            ..Probe::default()
        };
        assert!(theirs.handle(t0, 0, &probe(u32::MAX)));
        assert!(theirs.handle(t0, 0, &probe(1)));
        assert!(!theirs.handle(t0, 0, &probe(u32::MAX)));
    }

    #[test]
    fn a_peer_timestamp_of_any_value_is_no_overflow() {
        let t0 = crate::tests::t0();
        let mut theirs = PeerProbes::default();
        for (n, sent_us) in [(1, u64::MAX), (2, 0), (3, u64::MAX / 2 + 1)] {
            let probe = Probe {
                number: n,
                sent_us,
                ..Probe::default()
            };
            assert!(theirs.handle(t0, u64::MAX - sent_us, &probe));
        }
        let _ = theirs.owd_in.queueing() + theirs.owd_in.latest_queueing();
    }

    #[test]
    fn the_queue_a_packet_met_is_its_delay_above_the_probes_least() {
        let t0 = crate::tests::t0();
        let mut theirs = PeerProbes::default();
        assert_eq!(
            theirs.queueing_on_arrival(5_000, 0),
            0.0,
            "nothing measured"
        );
        // Our clock is ahead of the peer's by about 2^32 µs, and a probe
        // took 30 ms: the base delay across the clocks.
        let offset = (1u64 << 32) + 7;
        let probe = Probe {
            number: 1,
            sent_us: 1_000_000,
            ..Probe::default()
        };
        assert!(theirs.handle(t0, 1_000_000 + offset + 30_000, &probe));
        // A data packet sent at the peer's 2_000_000 µs, its time carried in
        // 32 bits, that arrives 42 ms later met a 12 ms queue.
        let sent = 2_000_000u64;
        let arrived = sent + offset + 42_000;
        assert_eq!(theirs.queueing_on_arrival(arrived, sent as u32), 12_000.0);
        // One faster than the probes met none.
        assert_eq!(
            theirs.queueing_on_arrival(arrived - 20_000, sent as u32),
            0.0
        );
    }
}
