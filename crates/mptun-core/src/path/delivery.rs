//! What the peer received of our data on a path: the delivery rate, from
//! which the path's capacity is estimated, and the loss.

use std::time::{Duration, Instant};

use super::estimators::WindowedMax;
use crate::seq::Seq;
use crate::wire::Probe;

/// Rate assumed for a path before it has been measured or its probe
/// trains have arrived: 100 Mbit/s.
pub(crate) const INITIAL_RATE: f64 = 12.5e6;
/// Headroom over the measured delivery rate, so a path's share can grow
/// when it has capacity to spare (as BBR's probing gain).
const RATE_GAIN: f64 = 1.25;
/// How long rate maxima are remembered.
const RATE_WINDOW: Duration = Duration::from_secs(10);
/// Queueing delay above which a path's delivery rate is its capacity...
const QUEUED_US: f64 = 1000.0;
/// ...counted above this many times the path's jitter: the smoothed delay
/// stands above the least one by about the jitter, and a jittery path
/// taken for a queued one has its capacity set to what was sent on it.
const QUEUED_JITTERS: f64 = 2.0;
/// Bytes a delivery-rate sample must cover to count as capacity: a few
/// packets in an interval say more about the sender than about the path.
const QUEUED_MIN_BYTES: u64 = 16 * 1024;
/// Shortest span a delivery-rate or loss sample covers: over shorter ones
/// the count swings with when the peer happened to read its sockets, and
/// the windowed maximum of the samples overstates the path.
const SAMPLE_SPAN_US: u64 = 80_000;
/// Shortest span of a queued delivery-rate sample taken before the path's
/// capacity was first measured: noisier than a full span, but far nearer
/// than the initial guess to a path that is slower than it, which a flow
/// in slow start would otherwise overrun before the first full span.
const FIRST_SAMPLE_SPAN_US: u64 = 20_000;
/// Bytes such a first sample must cover.
const FIRST_SAMPLE_MIN_BYTES: u64 = 4 * 1024;
/// Before a path's capacity is measured, a queued sample below this
/// fraction of the rate its probe trains arrived at is not taken for it.
/// A flow in slow start comes in flights a round trip apart: a span whose
/// reports read a queue (from jitter, or from a flight passing) may have
/// carried little between them, and the sample says how little was sent.
/// A path so taken for a smaller one is shunned while its neighbours are
/// overrun, and the flow leaves slow start at their queues; on a big path
/// a passing flight reads well over any fixed floor. Trains can read high
/// (a shaper's burst passes a train at line rate), hence the wide
/// margin...
const TRAIN_FRACTION_BELOW: f64 = 0.5;
/// ...and a queue deeper than jitter makes it counts whatever the trains
/// said: a path whose trains read several times its rate is overrun until
/// its queue is that deep, and measured then.
const QUEUED_DEEP_US: f64 = 10_000.0;
/// Loss above twice a path's random loss, in a span with packets sent into
/// a standing queue, that says the queue overflowed.
const OVERFLOW_LOSS_MARGIN: f64 = 0.005;
/// Weight of a loss sample of `n` packets: n / (n + this), so the estimate
/// follows about the last few thousand packets.
pub(crate) const LOSS_MEMORY_PACKETS: f64 = 2000.0;

/// What the peer reported receiving on the path, as of one of its probes.
#[derive(Clone, Copy, Debug)]
struct ReceiveReport {
    peer_sent_us: u64,
    rx_packets: u64,
    rx_bytes: u64,
    rx_highest: Seq,
    rx_missed_at_queue: u64,
}

impl ReceiveReport {
    fn of(probe: &Probe) -> Self {
        ReceiveReport {
            peer_sent_us: probe.sent_us,
            rx_packets: probe.rx_packets,
            rx_bytes: probe.rx_bytes,
            rx_highest: probe.rx_highest_path_seq,
            rx_missed_at_queue: probe.rx_missed_at_queue,
        }
    }

    /// Return the µs of the peer's clock between `last` and this report.
    fn span_us(&self, last: &ReceiveReport) -> u64 {
        self.peer_sent_us.saturating_sub(last.peer_sent_us)
    }

    /// Return the bytes the peer received since `last`, and their rate
    /// over the span, bytes per second.
    fn delivered_since(&self, last: &ReceiveReport) -> (u64, f64) {
        let bytes = self.rx_bytes.saturating_sub(last.rx_bytes);
        (bytes, bytes as f64 * 1e6 / self.span_us(last).max(1) as f64)
    }
}

/// Why a span's loss is not to be judged: it says nothing about the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LossContext {
    /// The path had a standing queue, or its queue is not known: drops at a
    /// full queue are congestion, which the inner flow's own control
    /// handles.
    pub congested: bool,
    /// The path has been up long enough: the first moments of a flow
    /// overrun paths whose rate is not known yet.
    pub settled: bool,
}

/// A share of packets lost, smoothed over the last few thousand judged.
#[derive(Clone, Copy, Debug, Default)]
struct LossEstimate {
    /// The samples' losses, each weighted by its packets and decayed by
    /// those after it.
    weighted: f64,
    /// The same weights and decay applied to 1: dividing by it keeps the
    /// first thousand packets from reading low, as an average from zero
    /// would (a path losing 1.9% read 0.4% after its first thousand).
    weight: f64,
    /// Packets judged.
    packets: u64,
}

impl LossEstimate {
    /// An estimate that reads `loss`, as if measured over `packets`.
    #[cfg(test)]
    fn measured(loss: f64, packets: u64) -> LossEstimate {
        LossEstimate {
            weighted: loss,
            weight: 1.0,
            packets,
        }
    }

    /// Add a sample: `lost` of `expected` packets (`expected` > 0).
    fn add(&mut self, lost: i64, expected: i64) {
        let n = expected as f64;
        let w = n / (n + LOSS_MEMORY_PACKETS);
        self.weighted = self.weighted * (1.0 - w) + lost as f64 / n * w;
        self.weight = self.weight * (1.0 - w) + w;
        self.packets = self.packets.saturating_add(expected.unsigned_abs());
    }

    fn fraction(&self) -> f64 {
        if self.weight > 0.0 {
            self.weighted / self.weight
        } else {
            0.0
        }
    }
}

/// Delivery rate and loss of our data on one path, from the peer's reports.
#[derive(Clone, Debug)]
pub(crate) struct Delivery {
    /// Delivery rates measured while the path had a queue: its capacity.
    rate: WindowedMax,
    /// Those of them measured behind a queue deeper than jitter makes
    /// (see [`QUEUED_DEEP_US`]).
    rate_deep: WindowedMax,
    /// The highest delivery rate measured without a queue (what was sent);
    /// raises the estimate when the path carries more than it was credited.
    rate_unqueued: WindowedMax,
    /// A queued delivery rate over a short span, taken until `rate` has
    /// its first sample, and standing in for it.
    rate_first: Option<f64>,
    /// The highest rate our probe trains arrived at: where it is below the
    /// initial guess, the guess until the path is measured.
    rate_train: Option<f64>,
    last_report: Option<ReceiveReport>,
    /// Loss of our data, spans with a standing queue left out unless the
    /// queue dropped none of it.
    loss: LossEstimate,
    /// Loss of our data over every span, queue overflows included.
    any_loss: LossEstimate,
    /// Loss of our data over every span, what the peer saw dropped at a
    /// full queue left out: known sooner than `loss` where the path keeps
    /// a queue, and low there (a random loss next to packets that met the
    /// queue reads as the queue's).
    random_loss: LossEstimate,
    /// Our path sequence number of the last data packet sent into a
    /// standing queue (flagged congested).
    last_congested: Option<Seq>,
    /// Our path sequence number when the path came back from down: packets
    /// before it were lost to the outage, not to the path.
    resumed_at: Option<Seq>,
}

impl Default for Delivery {
    fn default() -> Self {
        Delivery {
            rate: WindowedMax::new(RATE_WINDOW),
            rate_deep: WindowedMax::new(RATE_WINDOW),
            rate_unqueued: WindowedMax::new(RATE_WINDOW),
            rate_first: None,
            rate_train: None,
            last_report: None,
            loss: LossEstimate::default(),
            any_loss: LossEstimate::default(),
            random_loss: LossEstimate::default(),
            last_congested: None,
            resumed_at: None,
        }
    }
}

impl Delivery {
    /// Return the path's estimated capacity, bytes per second. A delivery
    /// rate says what the path carried, which is its capacity only when a
    /// queue stood at the bottleneck; otherwise it is a lower bound. Before
    /// any was measured, the rate our probe trains arrived at, whether
    /// above or below the initial guess: a big path counted at the guess
    /// takes a third of its share, and slow start's flights overrun the
    /// paths beside it.
    pub fn capacity(&self) -> f64 {
        let unqueued = self.rate_unqueued.get().unwrap_or(0.0);
        self.rate
            .get()
            .or(self.rate_first)
            .or(self.rate_train)
            .unwrap_or(INITIAL_RATE)
            .max(unqueued)
    }

    /// Return the path's capacity, bytes per second, as the evidence for
    /// it says at least: measured, or where its probe trains arrived
    /// faster, their rate. A flow that never filled the path measured
    /// little more than what it sent, or, on a jittery path, took its
    /// jitter for a queue and the little it sent for the capacity. Not
    /// once a rate was measured behind a queue deeper than jitter makes:
    /// that is the path's, and trains can read several times above it (a
    /// shaper's burst or the receiver's batching bunches them up), which
    /// would keep the paths beside a big one off TCP all the while.
    pub fn capacity_or_trains(&self) -> f64 {
        if self.rate_deep.get().is_some() {
            return self.capacity();
        }
        self.capacity().max(self.rate_train.unwrap_or(0.0))
    }

    /// Set the rate our probe trains say the path has, bytes per second.
    pub fn set_train_rate(&mut self, rate: Option<f64>) {
        self.rate_train = rate;
    }

    /// Return the highest rate our probe trains arrived at, bytes per
    /// second.
    pub fn train_rate(&self) -> Option<f64> {
        self.rate_train
    }

    /// Return whether `probe`'s report says the peer received more of our
    /// data on the path than the report before.
    pub fn reports_more_received(&self, probe: &Probe) -> bool {
        self.last_report
            .is_some_and(|last| probe.rx_packets > last.rx_packets)
    }

    /// Return whether any delivery rate was measured.
    pub fn measured(&self) -> bool {
        self.rate.get().is_some() || self.rate_first.is_some() || self.rate_unqueued.get().is_some()
    }

    /// Bytes per microsecond the scheduler assumes the path drains: its
    /// capacity where that was measured, else a little more than it has
    /// carried so far, so that its share can grow until a queue shows;
    /// before any measurement, the initial guess as it is.
    pub fn rate_bytes_per_us(&self) -> f64 {
        let gain = if self.rate.get().is_none() && self.rate_unqueued.get().is_some() {
            RATE_GAIN
        } else {
            1.0
        };
        self.capacity() * gain / 1e6
    }

    /// Return the loss of our data, smoothed, as a fraction.
    pub fn loss(&self) -> f64 {
        self.loss.fraction()
    }

    /// Return how many packets the loss was judged over.
    pub fn judged_packets(&self) -> u64 {
        self.loss.packets
    }

    /// Return the loss over every span, overflows of a queue included, and
    /// how many packets it was measured over: a path that carries a
    /// standing queue throughout is never judged, but one that loses
    /// little even so is clean.
    pub fn any_loss(&self) -> (f64, u64) {
        (self.any_loss.fraction(), self.any_loss.packets)
    }

    /// Return the loss over every span less what the peer saw dropped at
    /// a full queue, and how many packets it was measured over.
    pub fn random_loss(&self) -> (f64, u64) {
        (self.random_loss.fraction(), self.random_loss.packets)
    }

    /// Note that the packet numbered `path_seq` on the path was sent into a
    /// standing queue.
    pub fn sent_congested(&mut self, path_seq: Seq) {
        self.last_congested = Some(path_seq);
    }

    /// Note that sending on the path resumes at `path_seq` after an outage.
    pub fn resume_at(&mut self, path_seq: Seq) {
        self.resumed_at = Some(path_seq);
    }

    /// Forget the loss: the path, set aside for it, is given another
    /// chance.
    pub fn forget_loss(&mut self) {
        self.loss = LossEstimate::default();
        self.random_loss = LossEstimate::default();
    }

    /// Set the loss, as if measured.
    #[cfg(test)]
    pub fn set_loss(&mut self, loss: f64) {
        let packets = self.loss.packets;
        self.set_loss_over(loss, packets);
    }

    /// Set the loss over every span less the queue's drops, as if
    /// measured over `packets`.
    #[cfg(test)]
    pub fn set_random_loss_over(&mut self, loss: f64, packets: u64) {
        self.random_loss = LossEstimate::measured(loss, packets);
    }

    /// Set the loss, as if measured over `packets`.
    #[cfg(test)]
    pub fn set_loss_over(&mut self, loss: f64, packets: u64) {
        self.loss = LossEstimate::measured(loss, packets);
    }

    /// Forget the peer's last report: it restarted, and its counters start
    /// over.
    pub fn forget_report(&mut self) {
        self.last_report = None;
    }

    /// Take the receive report in a probe that arrived at `now`; `queued_us`
    /// is the path's queueing delay as the echoes measured it, `jitter_us`
    /// how much its one-way delay varies from one echo to the next while it
    /// carries none of our data (`None` if not measured yet: only a deep
    /// queue is then told from jitter). Return whether packets sent into a
    /// standing queue were lost beyond the path's random loss: its queue
    /// overflowed.
    pub fn handle_report(
        &mut self,
        now: Instant,
        probe: &Probe,
        queued_us: f64,
        jitter_us: Option<f64>,
        context: LossContext,
    ) -> bool {
        let mut overflowed = false;
        let deep = queued_us > QUEUED_DEEP_US;
        let queued = jitter_us.map_or(deep, |jitter| {
            queued_us > QUEUED_US + QUEUED_JITTERS * jitter
        });
        let mut report = ReceiveReport::of(probe);
        if let Some(last) = self.last_report {
            if report.rx_bytes < last.rx_bytes
                || report.rx_packets < last.rx_packets
                || report.rx_missed_at_queue < last.rx_missed_at_queue
            {
                // Counters went back: the peer's receive state restarted.
            } else if report.span_us(&last) < SAMPLE_SPAN_US {
                // Too short a span; measure from the same start next time.
                self.sample_first_rate(&last, &report, queued, deep);
                report = last;
            } else {
                self.sample_rate(now, &last, &report, queued, deep);
                overflowed = self.sample_loss(&last, &report, context);
            }
        }
        self.last_report = Some(report);
        overflowed
    }

    /// Return whether a queued sample of `rate` may stand for the
    /// path's capacity, the queue `deep` or not.
    fn capacity_sample(&self, rate: f64, deep: bool) -> bool {
        self.rate.get().is_some()
            || deep
            || self
                .rate_train
                .is_none_or(|train| rate >= TRAIN_FRACTION_BELOW * train)
    }

    fn sample_first_rate(
        &mut self,
        last: &ReceiveReport,
        report: &ReceiveReport,
        queued: bool,
        deep: bool,
    ) {
        let (bytes, rate) = report.delivered_since(last);
        if self.rate.get().is_none()
            && report.span_us(last) >= FIRST_SAMPLE_SPAN_US
            && queued
            && bytes >= FIRST_SAMPLE_MIN_BYTES
            && self.capacity_sample(rate, deep)
        {
            self.rate_first = Some(self.rate_first.map_or(rate, |r| r.max(rate)));
        }
    }

    fn sample_rate(
        &mut self,
        now: Instant,
        last: &ReceiveReport,
        report: &ReceiveReport,
        queued: bool,
        deep: bool,
    ) {
        let (bytes, rate) = report.delivered_since(last);
        // Old samples leave the filters even when no new one comes (a path
        // the scheduler stopped using sends none).
        self.rate.expire(now);
        self.rate_deep.expire(now);
        self.rate_unqueued.expire(now);
        if bytes > 0 {
            if queued && bytes >= QUEUED_MIN_BYTES && self.capacity_sample(rate, deep) {
                self.rate.update(now, rate);
                if deep {
                    self.rate_deep.update(now, rate);
                }
                self.rate_first = None;
            } else {
                self.rate_unqueued.update(now, rate);
            }
        }
    }

    /// Judge the loss over the span between two reports; return whether
    /// packets sent into a standing queue were lost beyond the path's
    /// random loss.
    fn sample_loss(
        &mut self,
        last: &ReceiveReport,
        report: &ReceiveReport,
        context: LossContext,
    ) -> bool {
        // Packets lost while the path was down are the outage's, not the
        // path's: count only from where sending resumed.
        let from = match self.resumed_at {
            Some(resumed) if last.rx_highest.is_before(resumed) => Seq(resumed.0.wrapping_sub(1)),
            _ => last.rx_highest,
        };
        if self
            .resumed_at
            .is_some_and(|r| !report.rx_highest.is_before(r))
        {
            self.resumed_at = None;
        }
        let expected = report.rx_highest.distance_from(from);
        let got = i64::try_from(report.rx_packets - last.rx_packets).unwrap_or(i64::MAX);
        // A span with a packet sent into a standing queue is judged only if
        // the queue dropped none of it (below): the queue may be gone by the
        // span's end (the inner flow backed off after its drops).
        let sent_into_queue = self.last_congested.is_some_and(|c| from.is_before(c));
        if expected <= 0 {
            return false;
        }
        let lost = expected.saturating_sub(got).max(0);
        let fraction = lost as f64 / expected as f64;
        // What the peer saw dropped at a full queue is congestion, not the
        // path's loss.
        let at_queue = report
            .rx_missed_at_queue
            .saturating_sub(last.rx_missed_at_queue);
        let at_queue = i64::try_from(at_queue).unwrap_or(i64::MAX);
        let path_lost = lost.saturating_sub(at_queue).max(0);
        if context.settled {
            self.any_loss.add(lost, expected);
            self.random_loss.add(path_lost, expected);
        }
        let overflowed =
            sent_into_queue && lost >= 2 && fraction > 2.0 * self.loss() + OVERFLOW_LOSS_MARGIN;
        // Sent into a queue, a span that the peer saw nothing dropped at
        // the queue in, and that lost less than an overflow does, is
        // judged as any other: a flow that keeps the queues standing would
        // leave none judged.
        let queue_lost_nothing = sent_into_queue && !overflowed && at_queue == 0;
        if !context.congested && (!sent_into_queue || queue_lost_nothing) && context.settled {
            self.loss.add(path_lost, expected);
        }
        overflowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTLED: LossContext = LossContext {
        congested: false,
        settled: true,
    };

    /// Feed `d` a report every 100 ms, each `bytes` more received, the
    /// echoes having met `queued_us` of queue; return the capacity after.
    fn reports(d: &mut Delivery, start: Instant, count: u64, bytes: u64, queued_us: f64) -> f64 {
        for i in 0..count {
            let probe = Probe {
                sent_us: i * 100_000,
                rx_packets: i * (bytes / 1000),
                rx_bytes: i * bytes,
                rx_highest_path_seq: Seq((i * (bytes / 1000)) as u32),
                ..Probe::default()
            };
            let now = start + Duration::from_millis(i * 100);
            d.handle_report(now, &probe, queued_us, Some(0.0), SETTLED);
        }
        d.capacity()
    }

    #[test]
    fn a_shallow_queue_far_below_the_trains_is_not_the_path_s_capacity() {
        let start = crate::tests::t0();
        let with_trains = |rate: Option<f64>| {
            let mut d = Delivery::default();
            if let Some(rate) = rate {
                d.set_train_rate(Some(rate));
            }
            d
        };
        // 20 KB every 100 ms: 200 KB/s, a hundredth of the trains' 20 MB/s.
        let capacity = reports(&mut with_trains(Some(20e6)), start, 5, 20_000, 3_000.0);
        assert!(capacity >= 1e6, "capacity {capacity}");
        // A queue deeper than jitter makes it is the path's.
        let capacity = reports(&mut with_trains(Some(20e6)), start, 5, 20_000, 20_000.0);
        assert!((capacity - 200e3).abs() < 1.0, "capacity {capacity}");
        // Above the initial guess too: slow start's flights passing a 327
        // Mbit/s path read a shallow queue at 139 Mbit/s.
        let capacity = reports(&mut with_trains(Some(40.9e6)), start, 5, 1_740_000, 2_400.0);
        assert!(capacity >= 20e6, "capacity {capacity}");
        // Trains that say the path is small count up to what they say...
        let capacity = reports(&mut with_trains(Some(2e6)), start, 5, 20_000, 3_000.0);
        assert!(capacity >= 1e6, "capacity {capacity}");
        // ...and near what the queue says, or without trains, a queue is
        // a queue.
        for trains in [Some(300e3), None] {
            let capacity = reports(&mut with_trains(trains), start, 5, 20_000, 3_000.0);
            assert!(
                (capacity - 200e3).abs() < 1.0,
                "trains {trains:?}: capacity {capacity}"
            );
        }
    }

    #[test]
    fn a_path_is_counted_at_its_trains_rate_until_it_is_measured() {
        let mut d = Delivery::default();
        assert_eq!(d.capacity(), INITIAL_RATE);
        // Above the initial guess as below it.
        for train in [40e6, 2e6] {
            d.set_train_rate(Some(train));
            assert_eq!(d.capacity(), train);
        }
        // A queued delivery rate, once measured, is the capacity, for
        // judging which paths are worth TCP too: trains that a burst
        // bunched up read above it.
        d.set_train_rate(Some(40e6));
        let capacity = reports(&mut d, crate::tests::t0(), 5, 2_000_000, 20_000.0);
        assert!((capacity - 20e6).abs() < 1.0, "capacity {capacity}");
        assert_eq!(d.capacity_or_trains(), capacity);
    }

    #[test]
    fn trains_count_above_a_rate_no_deep_queue_measured() {
        let start = crate::tests::t0();
        // (bytes a 100 ms span, queue the echoes met, µs)
        for (bytes, queued_us) in [(200_000, 0.0), (2_000_000, 3_000.0)] {
            let mut d = Delivery::default();
            d.set_train_rate(Some(40e6));
            reports(&mut d, start, 5, bytes, queued_us);
            assert!(d.measured());
            assert_eq!(d.capacity_or_trains(), 40e6, "queued {queued_us} µs");
        }
    }

    /// What the peer reports of each 100 ms span: its highest path
    /// sequence number moved on by `sent`, `got` of them arrived, and it
    /// saw `missed_at_queue` of the missing dropped at a full queue.
    #[derive(Clone, Copy)]
    struct Span {
        sent: u64,
        got: u64,
        missed_at_queue: u64,
    }

    /// Feed `d` the peer's report at the end of span `i`, the echoes
    /// having met `queued_us` of queue.
    fn report_span(d: &mut Delivery, start: Instant, i: u64, span: Span, queued_us: f64) {
        let probe = Probe {
            sent_us: i * 100_000,
            rx_packets: i * span.got,
            rx_bytes: i * span.got * 1000,
            rx_highest_path_seq: Seq((i * span.sent) as u32),
            rx_missed_at_queue: i * span.missed_at_queue,
            ..Probe::default()
        };
        let now = start + Duration::from_millis(i * 100);
        d.handle_report(now, &probe, queued_us, Some(0.0), SETTLED);
    }

    #[test]
    fn what_the_peer_saw_dropped_at_a_full_queue_is_not_the_path_s_loss() {
        let start = crate::tests::t0();
        // Every 100 ms the peer's highest path sequence number moves on by
        // 1000 and 950 packets arrive: 50 missing, 40 of them next to a
        // packet that met a queue.
        let judge = |missed_at_queue_per_span: u64| {
            let mut d = Delivery::default();
            let span = Span {
                sent: 1000,
                got: 950,
                missed_at_queue: missed_at_queue_per_span,
            };
            for i in 0..20u64 {
                report_span(&mut d, start, i, span, 0.0);
            }
            d.loss()
        };
        assert!((judge(0) - 0.05).abs() < 0.005, "loss {}", judge(0));
        assert!((judge(40) - 0.01).abs() < 0.002, "loss {}", judge(40));
        // A peer that says more dropped at a queue than went missing
        // leaves no loss, not a negative one.
        assert_eq!(judge(80), 0.0);
    }

    #[test]
    fn a_path_s_first_packets_read_the_loss_they_met() {
        // Three spans of 100 packets, 3 missing from each: 3%, not the
        // 0.4% an average started from zero would read.
        let start = crate::tests::t0();
        let mut d = Delivery::default();
        let span = Span {
            sent: 100,
            got: 97,
            missed_at_queue: 0,
        };
        for i in 0..4u64 {
            report_span(&mut d, start, i, span, 0.0);
        }
        assert_eq!(d.judged_packets(), 300);
        assert!((d.loss() - 0.03).abs() < 1e-9, "loss {}", d.loss());
        let (any_loss, any_packets) = d.any_loss();
        assert_eq!(any_packets, 300);
        assert!((any_loss - 0.03).abs() < 1e-9, "loss {any_loss}");
    }

    #[test]
    fn a_path_that_always_carries_a_queue_is_judged_over_the_spans_its_queue_dropped_nothing_in() {
        let start = crate::tests::t0();
        // Every span has a packet sent into a standing queue, and 1 in
        // 1000 packets goes missing: the path's loss, unless the peer saw
        // some dropped at the queue.
        let judge = |missed_at_queue: u64| {
            let mut d = Delivery::default();
            let span = Span {
                sent: 1000,
                got: 999 - missed_at_queue,
                missed_at_queue,
            };
            for i in 0..20u64 {
                d.sent_congested(Seq((i * 1000 + 500) as u32));
                report_span(&mut d, start, i, span, 20_000.0);
            }
            d
        };
        let d = judge(0);
        assert_eq!(d.judged_packets(), 19_000);
        assert!((d.loss() - 0.001).abs() < 0.0002, "loss {}", d.loss());
        let (loss, packets) = d.any_loss();
        assert_eq!(packets, 19_000);
        assert!((loss - 0.001).abs() < 0.0002, "loss {loss}");
        // Where the queue dropped some, what else went missing may be its
        // too: the queue may have gone before the next packet met it.
        assert_eq!(judge(5).judged_packets(), 0);
    }
}
