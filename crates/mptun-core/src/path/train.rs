//! Probe trains on one path: the ones we send when its session comes up,
//! and the peer's as they arrive here.
//!
//! A flow in slow start reaches a path at the scheduler's initial guess of
//! its rate, long before the peer has reported what the path delivers; a
//! path much slower than the guess is overrun, its queue delays the segments
//! sent on it, and the inner flow ends slow start far below what the paths
//! together carry. A train of packets sent back to back leaves the path's
//! bottleneck spaced at its rate, so the peer, timing the arrivals, can
//! tell that rate within a round trip of the session coming up.
//!
//! Dispersion overstates a path whose packets the receiver read in one
//! batch and understates one whose receiver stalled mid-train or whose delay
//! varies: the sender takes the highest of a few trains, and uses it only to
//! lower the initial guess.

use std::time::{Duration, Instant};

use crate::wire::{Probe, Train};

/// Trains sent when a session comes up.
pub const TRAINS: u32 = 3;
/// Packets in a train.
pub const TRAIN_PACKETS: u16 = 16;
/// Length of a train packet before its trailer: with the trailer, WireGuard's
/// and UDP/IPv6 headers, within IPv6's least MTU of 1280 bytes.
pub const TRAIN_PACKET_LEN: usize = 1100;
/// Time between trains, so the train before has left a slow path's queue.
const TRAIN_GAP: Duration = Duration::from_millis(50);

/// The trains we send on the path.
#[derive(Clone, Debug, Default)]
pub(crate) struct OurTrains {
    /// Trains sent so far; the last one's number.
    sent: u32,
    /// Trains still to send since the session came up.
    left: u32,
    next_at: Option<Instant>,
    /// The last train the peer's report was taken for.
    reported: u32,
}

impl OurTrains {
    /// Return when the next train is due.
    pub fn next_at(&self) -> Option<Instant> {
        self.next_at
    }

    /// Send [`TRAINS`] trains from `now` on (a session came up).
    pub fn start(&mut self, now: Instant) {
        self.left = TRAINS;
        self.next_at = Some(now);
    }

    /// Send no more (no session).
    pub fn stop(&mut self) {
        self.left = 0;
        self.next_at = None;
    }

    /// Number the train sent at `now` and schedule the next; return its
    /// number.
    pub fn send(&mut self, now: Instant) -> u32 {
        self.sent = self.sent.wrapping_add(1).max(1);
        self.left = self.left.saturating_sub(1);
        self.next_at = (self.left > 0).then(|| now + TRAIN_GAP);
        self.sent
    }

    /// Take the train report in a probe from the peer; return the rate the
    /// train arrived at, bytes per second, if it reports one of ours not
    /// taken before.
    pub fn take_report(&mut self, probe: &Probe) -> Option<f64> {
        let number = probe.train_number;
        if number == 0 || number <= self.reported || number > self.sent {
            return None;
        }
        self.reported = number;
        (probe.train_span_us > 0 && probe.train_bytes > 0)
            .then(|| f64::from(probe.train_bytes) * 1e6 / f64::from(probe.train_span_us))
    }
}

/// What the peer's last whole train was like on arrival.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TrainReport {
    pub number: u32,
    /// Bytes that arrived after the first packet.
    pub bytes: u32,
    /// µs from the first packet's arrival to the last's.
    pub span_us: u32,
}

/// A train of the peer's while its packets arrive.
#[derive(Clone, Copy, Debug)]
struct Arriving {
    number: u32,
    first_us: u64,
    last_us: u64,
    bytes: u64,
}

impl Arriving {
    fn report(&self) -> TrainReport {
        TrainReport {
            number: self.number,
            bytes: u32::try_from(self.bytes).unwrap_or(u32::MAX),
            span_us: u32::try_from(self.last_us.saturating_sub(self.first_us)).unwrap_or(u32::MAX),
        }
    }
}

/// The peer's trains on the path, as they arrive.
#[derive(Clone, Debug, Default)]
pub(crate) struct PeerTrains {
    arriving: Option<Arriving>,
    /// The last train received whole, or ended by a later one.
    last: TrainReport,
}

impl PeerTrains {
    /// Take a train packet of `len` bytes that arrived at `now_us`.
    pub fn handle(&mut self, now_us: u64, train: &Train, len: usize) {
        if train.number <= self.last.number {
            return; // a straggler of a train reported already
        }
        match &mut self.arriving {
            Some(a) if a.number == train.number => {
                a.last_us = now_us;
                a.bytes = a.bytes.saturating_add(len as u64);
            }
            Some(a) if a.number > train.number => return,
            _ => {
                // A later train ends the one before, lost tail or not.
                self.finish();
                self.arriving = Some(Arriving {
                    number: train.number,
                    first_us: now_us,
                    last_us: now_us,
                    bytes: 0,
                });
            }
        }
        if train.index.saturating_add(1) == train.count {
            self.finish();
        }
    }

    /// End the train arriving, if any: it is the one to report.
    fn finish(&mut self) {
        if let Some(a) = self.arriving.take() {
            self.last = a.report();
        }
    }

    /// Return the report for the peer: the last train received whole.
    pub fn report(&self) -> TrainReport {
        self.last
    }

    /// Forget the peer's trains: it restarted, and numbers them anew.
    pub fn reset(&mut self) {
        *self = PeerTrains::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(number: u32, index: u16) -> Train {
        Train {
            number,
            index,
            count: 4,
        }
    }

    #[test]
    fn a_train_is_reported_with_the_bytes_after_its_first_packet_and_their_span() {
        let mut theirs = PeerTrains::default();
        theirs.handle(1_000, &packet(1, 0), 1100);
        theirs.handle(2_000, &packet(1, 1), 1100);
        theirs.handle(3_000, &packet(1, 2), 1100);
        assert_eq!(theirs.report(), TrainReport::default(), "not whole yet");
        theirs.handle(4_000, &packet(1, 3), 1100);
        let report = TrainReport {
            number: 1,
            bytes: 3300,
            span_us: 3000,
        };
        assert_eq!(theirs.report(), report);
        // A straggler of it changes nothing.
        theirs.handle(9_000, &packet(1, 2), 1100);
        assert_eq!(theirs.report(), report);

        let mut ours = OurTrains::default();
        let now = crate::tests::t0();
        ours.start(now);
        ours.send(now);
        let probe = Probe {
            train_number: report.number,
            train_bytes: report.bytes,
            train_span_us: report.span_us,
            ..Probe::default()
        };
        assert_eq!(ours.take_report(&probe), Some(1.1e6), "3300 bytes in 3 ms");
        assert_eq!(ours.take_report(&probe), None, "taken once");
    }

    #[test]
    fn a_train_whose_last_packet_was_lost_is_ended_by_the_next() {
        let mut theirs = PeerTrains::default();
        theirs.handle(1_000, &packet(1, 0), 1000);
        theirs.handle(3_000, &packet(1, 2), 1000);
        theirs.handle(50_000, &packet(2, 0), 1000);
        assert_eq!(
            theirs.report(),
            TrainReport {
                number: 1,
                bytes: 1000,
                span_us: 2000
            }
        );
        // An older train's packet after a newer one started is ignored.
        theirs.handle(50_500, &packet(1, 3), 1000);
        theirs.handle(51_000, &packet(2, 3), 1000);
        assert_eq!(theirs.report().number, 2);
        assert_eq!(theirs.report().span_us, 1000);
    }

    #[test]
    fn reports_of_trains_not_sent_or_read_in_one_batch_give_no_rate() {
        let now = crate::tests::t0();
        let mut ours = OurTrains::default();
        ours.start(now);
        let report = |train_number, train_span_us| Probe {
            train_number,
            train_bytes: 16_500,
            train_span_us,
            ..Probe::default()
        };
        assert_eq!(ours.take_report(&report(1, 1000)), None, "none sent yet");
        assert_eq!(ours.send(now), 1);
        assert_eq!(ours.take_report(&report(0, 1000)), None, "no train");
        assert_eq!(ours.take_report(&report(1, 0)), None, "one batch");
        assert_eq!(ours.next_at(), Some(now + TRAIN_GAP));
        ours.send(now);
        ours.send(now);
        assert_eq!(ours.next_at(), None, "three trains a session");
    }
}
