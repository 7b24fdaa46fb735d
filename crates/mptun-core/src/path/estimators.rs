//! Small filters the path monitor is built from. Values are plain numbers
//! (µs, bytes per second); time is passed in.

use std::time::{Duration, Instant};

/// Return `later - earlier`, µs, for two timestamps on different clocks (one
/// of them the peer's, so any value): saturated, never an overflow.
pub fn offset_us(later: u64, earlier: u64) -> i64 {
    let d = i128::from(later) - i128::from(earlier);
    i64::try_from(d).unwrap_or(if d < 0 { i64::MIN } else { i64::MAX })
}

/// Return how much longer than `base` (a one-way delay across the clocks,
/// as [`offset_us`] gives it) a packet sent at `sent_us` on the peer's
/// clock (its low 32 bits, as a trailer carries it) and arrived at
/// `now_us` on ours has been under way, µs: exact while under about 35
/// minutes either way.
pub fn under_way_above(now_us: u64, sent_us: u32, base: i64) -> i32 {
    (now_us as u32)
        .wrapping_sub(sent_us)
        .wrapping_sub(base as u32) as i32
}

/// Smoothed round-trip time and its variation, as TCP keeps them (RFC 6298).
#[derive(Clone, Copy, Debug, Default)]
pub struct RttEstimator {
    srtt_us: Option<f64>,
    rttvar_us: f64,
}

impl RttEstimator {
    /// Take one sample.
    pub fn update(&mut self, sample_us: f64) {
        match self.srtt_us {
            None => {
                self.srtt_us = Some(sample_us);
                self.rttvar_us = sample_us / 2.0;
            }
            Some(srtt) => {
                self.rttvar_us = 0.75 * self.rttvar_us + 0.25 * (srtt - sample_us).abs();
                self.srtt_us = Some(0.875 * srtt + 0.125 * sample_us);
            }
        }
    }

    /// Return the smoothed RTT, if any sample came in.
    pub fn srtt_us(&self) -> Option<f64> {
        self.srtt_us
    }

    /// Return the RTT's mean deviation.
    pub fn rttvar_us(&self) -> f64 {
        self.rttvar_us
    }
}

/// A one-way delay as seen across two unsynchronised clocks: its minimum over
/// a sliding window (the propagation delay, plus the clock offset), its
/// smoothed value (which adds queueing) and the mean deviation of samples
/// (jitter).
#[derive(Clone, Copy, Debug)]
pub struct DelayTracker {
    window: Duration,
    /// Minimum of the current and the previous window; the window slides by
    /// halves, so the minimum is never older than `window`.
    current: Option<(Instant, i64)>,
    previous: Option<i64>,
    smoothed: Option<f64>,
    latest: Option<i64>,
    jitter: f64,
}

impl DelayTracker {
    /// Create a tracker whose minimum forgets samples older than `window`.
    pub fn new(window: Duration) -> Self {
        DelayTracker {
            window,
            current: None,
            previous: None,
            smoothed: None,
            latest: None,
            jitter: 0.0,
        }
    }

    /// Take one sample (µs, with an unknown constant offset).
    pub fn update(&mut self, now: Instant, sample: i64) {
        match self.current {
            Some((start, _)) if now.saturating_duration_since(start) >= self.window / 2 => {
                self.previous = self.current.map(|(_, m)| m);
                self.current = Some((now, sample));
            }
            Some((start, m)) => self.current = Some((start, m.min(sample))),
            None => self.current = Some((now, sample)),
        }
        self.latest = Some(sample);
        let s = sample as f64;
        match self.smoothed {
            None => self.smoothed = Some(s),
            Some(avg) => {
                self.jitter = 0.875 * self.jitter + 0.125 * (s - avg).abs();
                self.smoothed = Some(0.875 * avg + 0.125 * s);
            }
        }
    }

    /// Forget everything (the peer restarted: its clock changed).
    pub fn reset(&mut self) {
        *self = DelayTracker::new(self.window);
    }

    /// Return the windowed minimum.
    pub fn min(&self) -> Option<i64> {
        let current = self.current.map(|(_, m)| m)?;
        Some(self.previous.map_or(current, |p| p.min(current)))
    }

    /// Return the smoothed value.
    pub fn smoothed(&self) -> Option<f64> {
        self.smoothed
    }

    /// Return the mean deviation of samples from the smoothed value.
    pub fn jitter(&self) -> f64 {
        self.jitter
    }

    /// Return the latest sample above the minimum: queueing delay now, µs.
    pub fn latest_queueing(&self) -> f64 {
        match (self.latest, self.min()) {
            (Some(l), Some(m)) => l.saturating_sub(m).max(0) as f64,
            _ => 0.0,
        }
    }

    /// Return the smoothed value above the minimum: queueing delay, µs.
    pub fn queueing(&self) -> f64 {
        match (self.smoothed, self.min()) {
            (Some(s), Some(m)) => (s - m as f64).max(0.0),
            _ => 0.0,
        }
    }
}

/// Jitter as RFC 3550 measures it: the mean difference between
/// consecutive samples (µs), which a steady queue does not raise.
#[derive(Clone, Copy, Debug, Default)]
pub struct StepJitter {
    last: Option<i64>,
    mean: f64,
    steps: u32,
    largest: f64,
}

/// Steps before their mean stands for the jitter: a path is measured only
/// while idle, often a handful of probes before a flow keeps it busy, and
/// the mean of a few steps of a jittery path can be a fraction of its
/// jitter. Until then the largest step stands for it.
const STEP_JITTER_WARM: u32 = 8;

impl StepJitter {
    /// Take one sample.
    pub fn update(&mut self, sample: i64) {
        if let Some(last) = self.last {
            let step = (i128::from(sample) - i128::from(last)).unsigned_abs() as f64;
            self.steps = self.steps.saturating_add(1);
            self.largest = self.largest.max(step);
            if self.steps <= STEP_JITTER_WARM {
                self.mean += (step - self.mean) / f64::from(self.steps);
            } else {
                self.mean = 0.875 * self.mean + 0.125 * step;
            }
        }
        self.last = Some(sample);
    }

    /// Leave a gap: the next sample is not compared with the last.
    pub fn interrupt(&mut self) {
        self.last = None;
    }

    /// Return whether enough steps were taken for their mean to stand for
    /// the jitter.
    pub fn warm(&self) -> bool {
        self.steps >= STEP_JITTER_WARM
    }

    /// Return how far the delay ranges, µs: three mean steps (jitter
    /// uniform in a range R steps by R/3 on average) once there are enough
    /// for their mean to stand for it, 0 before.
    pub fn range(&self) -> f64 {
        if self.warm() {
            3.0 * self.mean
        } else {
            0.0
        }
    }

    /// Return the jitter, µs: the mean step once there are enough, the
    /// largest before; `None` before two samples.
    pub fn get(&self) -> Option<f64> {
        match self.steps {
            0 => None,
            n if n < STEP_JITTER_WARM => Some(self.largest),
            _ => Some(self.mean),
        }
    }
}

/// The largest sample over a sliding time window (a delivery rate's
/// bottleneck estimate, as BBR keeps one).
#[derive(Clone, Debug)]
pub struct WindowedMax {
    window: Duration,
    samples: std::collections::VecDeque<(Instant, f64)>,
}

impl WindowedMax {
    /// Create a filter that forgets samples older than `window`.
    pub fn new(window: Duration) -> Self {
        WindowedMax {
            window,
            samples: std::collections::VecDeque::new(),
        }
    }

    /// Take one sample.
    pub fn update(&mut self, now: Instant, value: f64) {
        // Samples smaller than a newer one can never be the maximum again.
        while self.samples.back().is_some_and(|&(_, v)| v <= value) {
            self.samples.pop_back();
        }
        self.samples.push_back((now, value));
        self.expire(now);
    }

    /// Forget the samples older than the window.
    pub fn expire(&mut self, now: Instant) {
        while self
            .samples
            .front()
            .is_some_and(|&(t, _)| now.saturating_duration_since(t) > self.window)
        {
            self.samples.pop_front();
        }
    }

    /// Return the maximum, if any sample is in the window.
    pub fn get(&self) -> Option<f64> {
        self.samples.front().map(|&(_, v)| v)
    }

    /// Forget everything.
    pub fn reset(&mut self) {
        self.samples.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_between_clocks_saturate() {
        assert_eq!(offset_us(5, 3), 2);
        assert_eq!(offset_us(3, 5), -2);
        assert_eq!(offset_us(u64::MAX, 0), i64::MAX);
        assert_eq!(offset_us(0, u64::MAX), i64::MIN);
        let mut d = DelayTracker::new(Duration::from_secs(2));
        let t0 = crate::tests::t0();
        d.update(t0, i64::MIN);
        d.update(t0, i64::MAX);
        assert!(d.latest_queueing() > 0.0);
    }

    #[test]
    fn rtt_converges_and_tracks_variation() {
        let mut rtt = RttEstimator::default();
        for _ in 0..100 {
            rtt.update(10_000.0);
        }
        assert!((rtt.srtt_us().unwrap() - 10_000.0).abs() < 1.0);
        assert!(rtt.rttvar_us() < 10.0);
        for i in 0..100 {
            rtt.update(if i % 2 == 0 { 8_000.0 } else { 12_000.0 });
        }
        assert!(rtt.rttvar_us() > 1_000.0);
    }

    #[test]
    fn delay_minimum_slides_and_queueing_is_above_it() {
        let t0 = crate::tests::t0();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut d = DelayTracker::new(Duration::from_secs(2));
        d.update(at(0), 5_000);
        for ms in 1..100 {
            d.update(at(ms * 10), 9_000);
        }
        assert_eq!(d.min(), Some(5_000));
        assert!(d.queueing() > 3_000.0);
        // Two windows later the old minimum is gone.
        for ms in 100..400 {
            d.update(at(ms * 10), 9_000);
        }
        assert_eq!(d.min(), Some(9_000));
        assert!(d.queueing() < 1.0);
    }

    fn jitter(j: &StepJitter) -> f64 {
        j.get().expect("two samples taken")
    }

    #[test]
    fn step_jitter_of_a_few_steps_is_their_largest() {
        let mut j = StepJitter::default();
        j.update(5_000);
        assert_eq!(j.get(), None);
        // Steps of 0.5, 3 and 1 ms: their mean would be half the largest.
        for owd in [5_500, 2_500, 3_500] {
            j.update(owd);
        }
        assert_eq!(j.get(), Some(3_000.0));
        // Warm: the mean of the steps, then a moving one.
        for owd in [3_500, 3_500, 3_500, 3_500, 3_500] {
            j.update(owd);
        }
        assert!((jitter(&j) - 4_500.0 / 8.0).abs() < 1.0, "{}", jitter(&j));
    }

    #[test]
    fn step_jitter_gives_the_range_of_uniform_jitter_once_warm() {
        let mut j = StepJitter::default();
        // ±5 ms about 40 ms, drawn evenly (a fixed, well-spread sequence).
        let mut x: u64 = 1;
        for i in 0..2000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            j.update(35_000 + ((x >> 33) % 10_001) as i64);
            if i < 7 {
                // Too few steps to stand for the jitter: none is assumed.
                assert_eq!(j.range(), 0.0);
            }
        }
        assert!((j.range() - 10_000.0).abs() < 2_500.0, "{}", j.range());
    }

    #[test]
    fn step_jitter_follows_alternation_not_a_step() {
        let mut j = StepJitter::default();
        for i in 0..40 {
            j.update(if i % 2 == 0 { 1_000 } else { 5_000 });
        }
        assert!((jitter(&j) - 4_000.0).abs() < 100.0, "{}", jitter(&j));
        let mut j = StepJitter::default();
        j.update(1_000);
        j.update(1_000);
        j.update(9_000);
        for _ in 0..20 {
            j.update(9_000);
        }
        assert!(jitter(&j) < 200.0, "{}", jitter(&j));
        // Across a gap nothing is compared.
        j.interrupt();
        j.update(i64::MIN);
        assert!(jitter(&j) < 200.0, "{}", jitter(&j));
        j.update(i64::MAX);
        assert!(jitter(&j).is_finite());
    }

    #[test]
    fn windowed_max_forgets_old_peaks() {
        let t0 = crate::tests::t0();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut m = WindowedMax::new(Duration::from_secs(1));
        m.update(at(0), 100.0);
        m.update(at(100), 50.0);
        assert_eq!(m.get(), Some(100.0));
        m.update(at(1200), 60.0);
        assert_eq!(m.get(), Some(60.0));
        // With no new sample, the last one goes when its time is up.
        m.expire(at(2100));
        assert_eq!(m.get(), Some(60.0));
        m.expire(at(2300));
        assert_eq!(m.get(), None);
    }
}
