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
//!
//! A train no longer than its path's jitter says nothing of the rate:
//! sixteen packets that leave a 300 Mbit/s bottleneck within half a
//! millisecond, each delayed by its own draw of ±4.5 ms of jitter, arrive
//! spread over up to 9 ms, and read as 20-50 Mbit/s. Where the fastest
//! train, whose rate stands for the path's, did, one more follows once the
//! jitter is measured, long enough to span twice the jitter at the initial
//! guess, and its rate stands for the path's instead.
//!
//! A train shorter than the bunching on its path says nothing of the rate
//! either: sixteen packets cross a 350 Mbit/s bottleneck in 0.4 ms, and a
//! hop that hands over what is due every quarter millisecond or so (the
//! lab's emulator, a NIC's interrupt coalescing), later when its host is
//! busy, passes them in two or three uneven bunches, which read at up to
//! eight times the rate. Where the fastest short train read above the
//! initial guess, a long train follows too, lasting a few milliseconds at
//! that rate (a train read high is all the longer); where every short
//! train was read in one batch, the longest.
//!
//! A host that stalls the sender or the receiver for a few milliseconds
//! mid-train (a busy or oversubscribed machine) spreads or bunches its
//! arrivals: a 100 Mbit/s path whose short trains read 96 and 97 Mbit/s
//! read 48 on its long one. Where the long train reads below the fastest
//! short one, one of them was disturbed (or, on a fast path, the short
//! ones were bunched), and a second long train is sent; the higher of the
//! two stands.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::delivery::INITIAL_RATE;
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
/// Multiple of a path's jitter (the mean step between consecutive one-way
/// delays) a train must span for its rate to be the path's rather than the
/// jitter's. Uniform jitter of ±j steps by 2j/3 on average and spreads a
/// train by up to 2j: three steps.
const TRAIN_JITTER_STEPS: f64 = 3.0;
/// Where the fastest train spanned no more than the jitter, one more is
/// sent, long enough to span this many steps of it at the initial guess of
/// a path's rate: twice what a train must span. A path it still crosses
/// within the jitter is at least about that guess, and no train lowers it.
const LONG_TRAIN_JITTER_STEPS: f64 = 2.0 * TRAIN_JITTER_STEPS;
/// Most packets in the long train (563 KB): enough for ±11 ms of jitter.
const LONG_TRAIN_MAX_PACKETS: u16 = 512;
/// How long a long train sent for a fast path lasts at the rate its
/// fastest short train read: many receive batches' worth.
const LONG_TRAIN_FAST_SPAN: Duration = Duration::from_millis(4);
/// Long trains sent at most when a session comes up: the second only
/// where the first read below the fastest short train.
const LONG_TRAINS: u8 = 2;
/// How long after a long train was sent our probes may still wait behind
/// it: on a slow path, as long as the path's queue holds.
const LONG_TRAIN_DRAIN: Duration = Duration::from_millis(200);

/// The trains we send on the path.
#[derive(Clone, Debug, Default)]
pub(crate) struct OurTrains {
    /// Trains sent so far; the last one's number.
    sent: u32,
    /// Trains still to send since the session came up.
    left: u32,
    next_at: Option<Instant>,
    /// Packets in the next train.
    next_packets: u16,
    /// When the last train was sent, and until when a packet sent after it
    /// may wait behind it.
    delaying: Option<(Instant, Instant)>,
    /// Long trains sent since the session came up.
    longs_sent: u8,
    /// The number of the first long train sent since the session came up:
    /// every train after it is long too.
    first_long: Option<u32>,
    /// The last train the peer's report was taken for.
    reported: u32,
    /// Short trains the peer read in one batch since the session came up.
    batched: u8,
    /// How the last trains reported arrived (a session's worth), oldest
    /// first.
    arrived: VecDeque<Arrived>,
}

/// How one of our trains arrived, as the peer reported it.
#[derive(Clone, Copy, Debug)]
struct Arrived {
    /// Bytes per second.
    rate: f64,
    span_us: u32,
    long: bool,
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
        self.next_packets = TRAIN_PACKETS;
        self.longs_sent = 0;
        self.first_long = None;
        self.batched = 0;
    }

    /// Send no more (no session).
    pub fn stop(&mut self) {
        self.left = 0;
        self.next_at = None;
    }

    /// Number the train sent at `now` and schedule the next; return its
    /// number and how many packets it has.
    pub fn send(&mut self, now: Instant) -> (u32, u16) {
        self.sent = self.sent.wrapping_add(1).max(1);
        self.left = self.left.saturating_sub(1);
        self.next_at = (self.left > 0).then(|| now + TRAIN_GAP);
        let packets = self.next_packets;
        let drain = if packets > TRAIN_PACKETS {
            self.first_long.get_or_insert(self.sent);
            LONG_TRAIN_DRAIN
        } else {
            TRAIN_GAP
        };
        self.delaying = Some((now, now + drain));
        self.next_packets = TRAIN_PACKETS;
        (self.sent, packets)
    }

    /// Send a long train now, if none is still to be sent: the first if a
    /// train reported so far crossed the path within its measured jitter of
    /// `jitter_us` (the fastest, whose rate stands for the path's, did) or
    /// the fastest short train read above the initial guess or, with no
    /// short train read at a rate, one was read in one batch; a second if
    /// the first read below the fastest short train. Slower trains prove
    /// nothing: the mean of the first steps understates the jitter, and a
    /// train spread by all of it reads slower still.
    pub fn lengthen(&mut self, now: Instant, jitter_us: f64) {
        let within_jitter = |t: &Arrived| f64::from(t.span_us) <= TRAIN_JITTER_STEPS * jitter_us;
        let fast = match self.highest(false) {
            Some(rate) => (rate > INITIAL_RATE).then_some(rate),
            None if self.batched > 0 => Some(f64::INFINITY),
            None => None,
        };
        let wanted = match self.longs_sent {
            0 => fast.is_some() || self.arrived.iter().any(within_jitter),
            n if n < LONG_TRAINS => self
                .highest(true)
                .zip(self.highest(false))
                .is_some_and(|(long, short)| long < short),
            _ => false,
        };
        if !wanted || self.left > 0 {
            return;
        }
        let for_jitter = INITIAL_RATE * LONG_TRAIN_JITTER_STEPS * jitter_us / 1e6;
        let for_batching = fast.unwrap_or(0.0) * LONG_TRAIN_FAST_SPAN.as_secs_f64();
        let bytes = for_jitter.max(for_batching);
        let packets = (bytes / TRAIN_PACKET_LEN as f64).ceil();
        self.next_packets = if packets >= f64::from(LONG_TRAIN_MAX_PACKETS) {
            LONG_TRAIN_MAX_PACKETS
        } else {
            (packets as u16).max(TRAIN_PACKETS)
        };
        self.longs_sent = self.longs_sent.saturating_add(1);
        self.left = 1;
        self.next_at = Some(now);
    }

    /// Return whether a packet sent at `at` may have waited behind a train
    /// at the path's bottleneck: its delay then says how slow the path is,
    /// not how its delay varies.
    pub fn may_have_delayed(&self, at: Instant) -> bool {
        self.delaying
            .is_some_and(|(sent, until)| at >= sent && at < until)
    }

    /// Take the train report in a probe from the peer, if it reports one of
    /// ours not taken before; return whether it did.
    pub fn take_report(&mut self, probe: &Probe) -> bool {
        let number = probe.train_number;
        if number == 0 || number <= self.reported || number > self.sent {
            return false;
        }
        self.reported = number;
        let long = self.first_long.is_some_and(|first| number >= first);
        if probe.train_span_us == 0 || probe.train_bytes == 0 {
            // Read in one batch.
            if !long {
                self.batched = self.batched.saturating_add(1);
            }
            return false;
        }
        if self.arrived.len() >= TRAINS as usize + usize::from(LONG_TRAINS) {
            self.arrived.pop_front();
        }
        self.arrived.push_back(Arrived {
            rate: f64::from(probe.train_bytes) * 1e6 / f64::from(probe.train_span_us),
            span_us: probe.train_span_us,
            long,
        });
        true
    }

    /// Return the rate our trains arrived at, bytes per second: the highest
    /// of the long trains' if one was reported (however short its span:
    /// sized by the jitter or by the fastest short train, it then arrived
    /// at twice the initial guess or more, or at the rate the short train
    /// read), else the highest of the others'.
    pub fn rate(&self) -> Option<f64> {
        self.highest(true).or_else(|| self.highest(false))
    }

    /// Return the highest rate of the long trains reported, or of the short.
    fn highest(&self, long: bool) -> Option<f64> {
        self.arrived
            .iter()
            .filter(|t| t.long == long)
            .map(|t| t.rate)
            .reduce(f64::max)
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
///
/// Its span is not from the first arrival to the last: on a path whose
/// delay varies, each end is off by up to the jitter, and a train that
/// crosses the bottleneck in a few milliseconds reads at a fraction of the
/// path's rate or above it (a 327 Mbit/s path with ±3.5 ms of jitter read
/// 115-345 Mbit/s). The spacing is the slope of a least-squares line
/// through every packet's arrival against its place in the order of
/// arrival, which one packet's jitter moves by a fraction of it.
#[derive(Clone, Copy, Debug)]
struct Arriving {
    number: u32,
    first_us: u64,
    last_us: u64,
    /// Bytes that arrived after the first packet.
    bytes: u64,
    /// Packets that arrived, and their bytes.
    packets: u32,
    all_bytes: u64,
    /// Sums over the packets of their place `x` (0 for the first) and of
    /// `y`, their arrival in µs after the first's.
    sum_y: f64,
    sum_xx: f64,
    sum_xy: f64,
}

impl Arriving {
    fn new(number: u32, now_us: u64, len: usize) -> Self {
        Arriving {
            number,
            first_us: now_us,
            last_us: now_us,
            bytes: 0,
            packets: 1,
            all_bytes: len as u64,
            sum_y: 0.0,
            sum_xx: 0.0,
            sum_xy: 0.0,
        }
    }

    fn add(&mut self, now_us: u64, len: usize) {
        let x = f64::from(self.packets);
        let y = now_us.saturating_sub(self.first_us) as f64;
        self.packets = self.packets.saturating_add(1);
        self.last_us = now_us;
        self.bytes = self.bytes.saturating_add(len as u64);
        self.all_bytes = self.all_bytes.saturating_add(len as u64);
        self.sum_y += y;
        self.sum_xx += x * x;
        self.sum_xy += x * y;
    }

    /// Return the µs the bytes after the first packet took to arrive, at
    /// the spacing the line through the arrivals gives.
    fn span_us(&self) -> u32 {
        let n = f64::from(self.packets);
        // The places are 0..n: their sum is known.
        let sum_x = n * (n - 1.0) / 2.0;
        let var_x = self.sum_xx - sum_x * sum_x / n;
        if self.packets < 2 || var_x <= 0.0 || self.all_bytes == 0 {
            return 0;
        }
        let us_per_packet = (self.sum_xy - sum_x * self.sum_y / n) / var_x;
        let mean_len = self.all_bytes as f64 / n;
        // A float to integer cast saturates: a slope below 0 or NaN reads
        // as 0, a train read in one batch.
        (us_per_packet * self.bytes as f64 / mean_len).round() as u32
    }

    fn report(&self) -> TrainReport {
        TrainReport {
            number: self.number,
            bytes: u32::try_from(self.bytes).unwrap_or(u32::MAX),
            span_us: self.span_us(),
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
            Some(a) if a.number == train.number => a.add(now_us, len),
            Some(a) if a.number > train.number => return,
            _ => {
                // A later train ends the one before, lost tail or not.
                self.finish();
                self.arriving = Some(Arriving::new(train.number, now_us, len));
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

    /// Return the report for the peer at `now_us`: the last train received
    /// whole, or whose tail stopped coming (lost at a queue a long train
    /// overflowed).
    pub fn report(&mut self, now_us: u64) -> TrainReport {
        let gap_us = TRAIN_GAP.as_micros() as u64;
        if self
            .arriving
            .is_some_and(|a| now_us.saturating_sub(a.last_us) >= gap_us)
        {
            self.finish();
        }
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
        assert_eq!(theirs.report(0), TrainReport::default(), "not whole yet");
        theirs.handle(4_000, &packet(1, 3), 1100);
        let report = TrainReport {
            number: 1,
            bytes: 3300,
            span_us: 3000,
        };
        assert_eq!(theirs.report(0), report);
        // A straggler of it changes nothing.
        theirs.handle(9_000, &packet(1, 2), 1100);
        assert_eq!(theirs.report(0), report);

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
        assert!(ours.take_report(&probe));
        assert_eq!(ours.rate(), Some(1.1e6), "3300 bytes in 3 ms");
        assert!(!ours.take_report(&probe), "taken once");
    }

    /// Return the rate, Mbit/s, `theirs` reports for a train of `packets`
    /// that left a bottleneck of `mbps` back to back and met a uniform
    /// jitter of ±`jitter_us` each, kept in order (a packet arrives no
    /// sooner than the one before), drawn from `seed`.
    fn jittered_train(packets: u16, mbps: f64, jitter_us: f64, seed: u64) -> f64 {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut uniform = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let gap_us = TRAIN_PACKET_LEN as f64 * 8.0 / mbps;
        let mut theirs = PeerTrains::default();
        let mut arrived = 0.0_f64;
        for index in 0..packets {
            let jitter = (2.0 * uniform() - 1.0) * jitter_us;
            arrived = arrived.max(100_000.0 + f64::from(index) * gap_us + jitter);
            let train = Train {
                number: 1,
                index,
                count: packets,
            };
            theirs.handle(arrived as u64, &train, TRAIN_PACKET_LEN);
        }
        let report = theirs.report(0);
        f64::from(report.bytes) * 8.0 / f64::from(report.span_us)
    }

    #[test]
    fn a_train_crossing_within_the_jitter_reads_near_the_path_s_rate() {
        // The long train sized for ±3.5 ms at 100 Mbit/s, on a 327 Mbit/s
        // path: it leaves the bottleneck within 4.4 ms. From their first
        // arrival to their last, these 21 draws read 128-388 Mbit/s, half
        // of them under 201.
        let mut reads: Vec<f64> = (1..=21)
            .map(|seed| jittered_train(159, 327.0, 3_500.0, seed))
            .collect();
        reads.sort_by(f64::total_cmp);
        assert!(
            reads[0] > 0.6 * 327.0 && reads[20] < 1.4 * 327.0,
            "{reads:?}"
        );
        assert!(reads[10] > 0.85 * 327.0, "median {}", reads[10]);
        // Without jitter, the line is the arrivals.
        let exact = jittered_train(159, 327.0, 0.0, 1);
        assert!((exact / 327.0 - 1.0).abs() < 0.01, "{exact}");
    }

    #[test]
    fn a_train_whose_last_packet_was_lost_is_ended_by_the_next() {
        let mut theirs = PeerTrains::default();
        theirs.handle(1_000, &packet(1, 0), 1000);
        theirs.handle(3_000, &packet(1, 2), 1000);
        theirs.handle(50_000, &packet(2, 0), 1000);
        assert_eq!(
            theirs.report(0),
            TrainReport {
                number: 1,
                bytes: 1000,
                span_us: 2000
            }
        );
        // An older train's packet after a newer one started is ignored.
        theirs.handle(50_500, &packet(1, 3), 1000);
        theirs.handle(51_000, &packet(2, 3), 1000);
        assert_eq!(theirs.report(0).number, 2);
        assert_eq!(theirs.report(0).span_us, 1000);
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
        assert!(!ours.take_report(&report(1, 1000)), "none sent yet");
        assert_eq!(ours.send(now), (1, TRAIN_PACKETS));
        assert!(!ours.take_report(&report(0, 1000)), "no train");
        assert!(!ours.take_report(&report(1, 0)), "one batch");
        assert_eq!(ours.rate(), None);
        assert_eq!(ours.next_at(), Some(now + TRAIN_GAP));
        ours.send(now);
        ours.send(now);
        assert_eq!(ours.next_at(), None, "three trains a session");
    }

    #[test]
    fn a_long_train_follows_where_a_train_crossed_within_the_jitter() {
        let now = crate::tests::t0();
        let mut ours = OurTrains::default();
        ours.start(now);
        let report = |train_number, train_bytes, train_span_us| Probe {
            train_number,
            train_bytes,
            train_span_us,
            ..Probe::default()
        };
        for _ in 0..TRAINS {
            ours.send(now);
        }
        // A 300 Mbit/s path's trains spread by ±4.5 ms of jitter, a mean
        // step of 3 ms: one over all of it and its own half millisecond
        // (14 Mbit/s), the fastest over 4 ms (33 Mbit/s), within it.
        assert!(ours.take_report(&report(1, 16_500, 9_500)));
        assert!(ours.take_report(&report(3, 16_500, 4_000)));
        assert_eq!(ours.rate(), Some(4.125e6));
        ours.lengthen(now, 3_000.0);
        assert_eq!(ours.next_at(), Some(now));
        // 18 ms of it at 100 Mbit/s: 225 KB.
        let (number, packets) = ours.send(now);
        assert_eq!((number, packets), (4, 205));
        assert!(ours.may_have_delayed(now + Duration::from_millis(150)));
        // It arrived over 8 ms, within the jitter too: at 28 MB/s, it
        // stands for the path, not the short ones.
        assert!(ours.take_report(&report(4, 225_000, 8_000)));
        assert_eq!(ours.rate(), Some(28.125e6));
        // Once a session: it read above the short ones.
        ours.lengthen(now, 3_000.0);
        assert_eq!(ours.next_at(), None);
    }

    /// Return `OurTrains` whose three short trains were sent and read over
    /// `spans` (µs, of 16.5 KB; 0 for one batch).
    fn short_trains_read(now: Instant, spans: [u32; 3]) -> OurTrains {
        let mut ours = OurTrains::default();
        ours.start(now);
        for (number, span_us) in (1..).zip(spans) {
            ours.send(now);
            let report = Probe {
                train_number: number,
                train_bytes: 16_500,
                train_span_us: span_us,
                ..Probe::default()
            };
            assert_eq!(ours.take_report(&report), span_us > 0);
        }
        ours
    }

    /// Return `OurTrains` whose three short trains read `short` and whose
    /// first long train, of 35 packets, has been sent on a path with 0.5 ms
    /// of measured jitter.
    fn long_train_sent(now: Instant, short: [u32; 3]) -> OurTrains {
        let mut ours = short_trains_read(now, short);
        ours.lengthen(now, 500.0);
        assert_eq!(ours.send(now), (4, 35));
        ours
    }

    fn long_report(number: u32, span_us: u32) -> Probe {
        Probe {
            train_number: number,
            train_bytes: 34 * TRAIN_PACKET_LEN as u32,
            train_span_us: span_us,
            ..Probe::default()
        }
    }

    #[test]
    fn a_long_train_read_below_the_short_ones_is_sent_again_and_the_higher_stands() {
        // A 100 Mbit/s path, 0.5 ms of jitter from a busy host: its short
        // trains read 96, 97 and 95 Mbit/s, its first long train was held
        // up mid-way and read 50.
        let now = crate::tests::t0();
        let mut ours = long_train_sent(now, [1_375, 1_361, 1_390]);
        assert!(ours.take_report(&long_report(4, 5_984)));
        assert_eq!(ours.rate(), Some(6.25e6), "the long train stands");
        let later = now + LONG_TRAIN_DRAIN;
        ours.lengthen(later, 500.0);
        assert_eq!(ours.send(later), (5, 35), "a second long train");
        assert!(ours.take_report(&long_report(5, 2_992)));
        assert_eq!(ours.rate(), Some(12.5e6), "the higher long train stands");
        // Two at most, whatever they read.
        ours.lengthen(later, 500.0);
        assert_eq!(ours.next_at(), None);

        // Had it been the second that was held up, the first stands.
        let mut ours = long_train_sent(now, [1_375, 1_361, 1_390]);
        assert!(ours.take_report(&long_report(4, 2_992)));
        ours.lengthen(later, 500.0);
        assert_eq!(ours.next_at(), None, "read above the short ones");
        assert_eq!(ours.rate(), Some(12.5e6));
    }

    #[test]
    fn no_long_train_where_every_train_spanned_more_than_the_jitter() {
        let now = crate::tests::t0();
        let mut ours = OurTrains::default();
        ours.start(now);
        for _ in 0..TRAINS {
            ours.send(now);
        }
        let report = Probe {
            train_number: 3,
            train_bytes: 16_500,
            train_span_us: 10_000,
            ..Probe::default()
        };
        // A 13 Mbit/s path with ±4 ms of jitter.
        assert!(ours.take_report(&report));
        ours.lengthen(now, 2_700.0);
        assert_eq!(ours.next_at(), None);
        assert!(!ours.may_have_delayed(now + TRAIN_GAP));
    }

    #[test]
    fn a_long_train_follows_where_a_short_one_read_above_the_initial_guess() {
        let now = crate::tests::t0();
        let short = |span_us| short_trains_read(now, [span_us; 3]);
        // A 352 Mbit/s path read in two bunches a quarter millisecond
        // apart: 16.5 KB over 47 µs, 2809 Mbit/s.
        let mut ours = short(47);
        ours.lengthen(now, 50.0);
        assert_eq!(ours.send(now), (4, LONG_TRAIN_MAX_PACKETS));
        // Over 12.8 ms, it reads the path's rate, and stands.
        assert!(ours.take_report(&Probe {
            train_number: 4,
            train_bytes: 562_100,
            train_span_us: 12_775,
            ..Probe::default()
        }));
        assert_eq!(ours.rate(), Some(44e6));

        // Read at its rate, 4 ms of it: 176 KB.
        let mut ours = short(375);
        ours.lengthen(now, 50.0);
        assert_eq!(ours.send(now), (4, 160));

        // A path read at the initial guess gets none.
        let mut ours = short(1_320);
        ours.lengthen(now, 50.0);
        assert_eq!(ours.next_at(), None);

        // Every short train read in one batch: the longest.
        let mut ours = short(0);
        ours.lengthen(now, 50.0);
        assert_eq!(ours.send(now), (4, LONG_TRAIN_MAX_PACKETS));
    }

    #[test]
    fn a_train_whose_tail_stops_coming_is_reported_a_train_gap_later() {
        let mut theirs = PeerTrains::default();
        theirs.handle(1_000, &packet(1, 0), 1000);
        theirs.handle(2_000, &packet(1, 1), 1000);
        assert_eq!(theirs.report(40_000), TrainReport::default());
        let report = TrainReport {
            number: 1,
            bytes: 1000,
            span_us: 1000,
        };
        assert_eq!(theirs.report(52_000), report);
    }
}
