//! Sans-IO link model: decides, for each frame arriving at one end of an
//! emulated path, whether it is dropped and when it leaves the other end.
//!
//! Time is always passed in (`now: Instant`), randomness comes from a seeded
//! PRNG, so the whole model is deterministic and testable with virtual time.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Small, fast, seedable PRNG (SplitMix64). Quality is plenty for loss and
/// jitter draws; it is deliberately not cryptographic and never touches the OS.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        // 53 random mantissa bits.
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p` (clamped to [0, 1]).
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            false
        } else if p >= 1.0 {
            true
        } else {
            self.next_f64() < p
        }
    }
}

/// Two-state Gilbert-Elliott burst-loss model. All values are probabilities
/// in [0, 1], evaluated once per packet.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GilbertElliott {
    /// P(good -> bad) per packet.
    pub enter_bad: f64,
    /// P(bad -> good) per packet; mean burst length is `1 / leave_bad`.
    pub leave_bad: f64,
    /// Loss probability while in the bad state (classically 1.0).
    pub loss_in_bad: f64,
    /// Loss probability while in the good state (classically 0.0).
    pub loss_in_good: f64,
}

impl GilbertElliott {
    /// Classic Gilbert model (lose everything in bad, nothing in good) with the
    /// given long-run loss rate and mean loss-burst length (in packets).
    pub fn from_mean(loss: f64, mean_burst_len: f64) -> Self {
        let loss = loss.clamp(0.0, 0.999_999);
        let leave_bad = 1.0 / mean_burst_len.max(1.0);
        // Stationary P(bad) = p / (p + r) = loss  =>  p = loss * r / (1 - loss).
        let enter_bad = (loss * leave_bad / (1.0 - loss)).min(1.0);
        Self {
            enter_bad,
            leave_bad,
            loss_in_bad: 1.0,
            loss_in_good: 0.0,
        }
    }

    /// Long-run loss probability of this chain.
    pub fn mean_loss(&self) -> f64 {
        let denom = self.enter_bad + self.leave_bad;
        if denom <= 0.0 {
            return self.loss_in_good;
        }
        let p_bad = self.enter_bad / denom;
        p_bad * self.loss_in_bad + (1.0 - p_bad) * self.loss_in_good
    }
}

/// Settings of one direction of a path.
#[derive(Debug, Clone, PartialEq)]
pub struct DirectionConfig {
    /// Constant one-way propagation delay.
    pub delay: Duration,
    /// Each packet gets an extra uniform offset in [-jitter, +jitter] (the
    /// total delay never goes below zero, and FIFO order is kept).
    pub jitter: Duration,
    /// Independent per-packet loss probability in [0, 1].
    pub loss: f64,
    /// Optional burst-loss model, applied in addition to `loss`.
    pub burst_loss: Option<GilbertElliott>,
    /// Bottleneck rate in bits per second; `None` = unlimited.
    pub rate_bps: Option<u64>,
    /// Drop-tail queue bound in bytes; `None` = [`default_queue_bytes`].
    pub queue_bytes: Option<u64>,
}

impl Default for DirectionConfig {
    fn default() -> Self {
        Self {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            loss: 0.0,
            burst_loss: None,
            rate_bps: None,
            queue_bytes: None,
        }
    }
}

/// Default queue: 50 ms worth of bytes at the configured rate (a moderately
/// buffered access link, and what `tbf ... latency 50ms` gives), but at least
/// 64 KiB so slow links still hold ~40 full-size frames and TCP can keep the
/// pipe full.
pub fn default_queue_bytes(rate_bps: u64) -> u64 {
    (rate_bps / 8 / 20).max(64 * 1024)
}

/// Why a frame was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    Loss,
    QueueFull,
    LinkDown,
}

/// Per-direction counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DirectionStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub accepted_packets: u64,
    pub accepted_bytes: u64,
    pub drop_loss: u64,
    pub drop_queue_full: u64,
    pub drop_link_down: u64,
}

/// One direction of an emulated path.
#[derive(Debug, Clone)]
pub struct Direction {
    cfg: DirectionConfig,
    up: bool,
    rng: SplitMix64,
    ge_bad: bool,
    /// When the serializer finishes the last accepted frame.
    busy_until: Option<Instant>,
    /// Delivery time of the last accepted frame (keeps FIFO under jitter).
    last_delivery: Option<Instant>,
    /// Bumped on every cut so the I/O edge can discard frames accepted before.
    epoch: u64,
    stats: DirectionStats,
}

impl Direction {
    pub fn new(cfg: DirectionConfig, seed: u64) -> Self {
        Self {
            cfg,
            up: true,
            rng: SplitMix64::new(seed),
            ge_bad: false,
            busy_until: None,
            last_delivery: None,
            epoch: 0,
            stats: DirectionStats::default(),
        }
    }

    pub fn config(&self) -> &DirectionConfig {
        &self.cfg
    }

    pub fn stats(&self) -> &DirectionStats {
        &self.stats
    }

    pub fn is_up(&self) -> bool {
        self.up
    }

    /// Changes whenever the link is cut; frames accepted in an older epoch
    /// must not be delivered.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Effective queue bound in bytes (only meaningful with a rate limit).
    pub fn queue_limit(&self) -> Option<u64> {
        let rate = self.cfg.rate_bps?;
        Some(
            self.cfg
                .queue_bytes
                .unwrap_or_else(|| default_queue_bytes(rate)),
        )
    }

    /// Bytes still waiting for the serializer at `now`.
    pub fn backlog_bytes(&self, now: Instant) -> u64 {
        match (self.cfg.rate_bps, self.busy_until) {
            (Some(rate), Some(busy)) if busy > now => {
                let secs = (busy - now).as_secs_f64();
                (secs * rate as f64 / 8.0).ceil() as u64
            }
            _ => 0,
        }
    }

    /// Decide the fate of a frame of `len` bytes arriving at `now`.
    /// Returns its delivery time at the far end, or `None` if dropped.
    pub fn handle_arrival(&mut self, now: Instant, len: usize) -> Option<Instant> {
        self.classify(now, len).ok()
    }

    /// Like [`Self::handle_arrival`] but tells why a frame was dropped.
    pub fn classify(&mut self, now: Instant, len: usize) -> Result<Instant, DropReason> {
        self.stats.rx_packets += 1;
        self.stats.rx_bytes += len as u64;
        if !self.up {
            self.stats.drop_link_down += 1;
            return Err(DropReason::LinkDown);
        }
        if self.draw_loss() {
            self.stats.drop_loss += 1;
            return Err(DropReason::Loss);
        }
        let leave_serializer = match self.cfg.rate_bps {
            Some(rate) if rate > 0 => {
                let limit = self.queue_limit().unwrap_or(u64::MAX);
                if self.backlog_bytes(now) + len as u64 > limit {
                    self.stats.drop_queue_full += 1;
                    return Err(DropReason::QueueFull);
                }
                let start = match self.busy_until {
                    Some(b) if b > now => b,
                    _ => now,
                };
                let tx_ns = (len as u128 * 8 * 1_000_000_000) / rate as u128;
                let done = start + Duration::from_nanos(tx_ns as u64);
                self.busy_until = Some(done);
                done
            }
            _ => now,
        };
        let mut delivery = leave_serializer + self.draw_delay();
        // Real paths do not reorder: never deliver before the previous frame.
        if let Some(last) = self.last_delivery {
            if delivery < last {
                delivery = last;
            }
        }
        self.last_delivery = Some(delivery);
        self.stats.accepted_packets += 1;
        self.stats.accepted_bytes += len as u64;
        Ok(delivery)
    }

    fn draw_loss(&mut self) -> bool {
        let mut lost = self.rng.chance(self.cfg.loss);
        if let Some(ge) = self.cfg.burst_loss {
            // Transition first, then draw in the new state.
            self.ge_bad = if self.ge_bad {
                !self.rng.chance(ge.leave_bad)
            } else {
                self.rng.chance(ge.enter_bad)
            };
            let p = if self.ge_bad {
                ge.loss_in_bad
            } else {
                ge.loss_in_good
            };
            lost |= self.rng.chance(p);
        }
        lost
    }

    fn draw_delay(&mut self) -> Duration {
        let base = self.cfg.delay;
        let j = self.cfg.jitter;
        if j.is_zero() {
            return base;
        }
        // Uniform offset in [-j, +j].
        let span = j.as_nanos() as f64 * 2.0;
        let off = self.rng.next_f64() * span - j.as_nanos() as f64;
        let total = base.as_nanos() as f64 + off;
        Duration::from_nanos(total.max(0.0) as u64)
    }

    /// Count frames that were accepted but then thrown away because the link
    /// went down while they were in flight.
    pub fn count_in_flight_drops(&mut self, packets: u64) {
        self.stats.drop_link_down += packets;
    }

    pub fn set_up(&mut self, up: bool) {
        if self.up && !up {
            // A cut loses whatever was queued; start fresh after restore.
            self.busy_until = None;
            self.last_delivery = None;
            self.ge_bad = false;
            self.epoch += 1;
        }
        self.up = up;
    }

    pub fn set_delay(&mut self, delay: Duration) {
        self.cfg.delay = delay;
    }

    pub fn set_jitter(&mut self, jitter: Duration) {
        self.cfg.jitter = jitter;
    }

    /// `loss` is a probability in [0, 1].
    pub fn set_loss(&mut self, loss: f64) {
        self.cfg.loss = loss.clamp(0.0, 1.0);
    }

    pub fn set_burst_loss(&mut self, ge: Option<GilbertElliott>) {
        self.cfg.burst_loss = ge;
        self.ge_bad = false;
    }

    /// `None` or `Some(0)` = unlimited.
    pub fn set_rate(&mut self, rate_bps: Option<u64>) {
        let rate = rate_bps.filter(|r| *r > 0);
        self.cfg.rate_bps = rate;
        if rate.is_none() {
            self.busy_until = None;
        }
    }

    pub fn set_queue_bytes(&mut self, bytes: Option<u64>) {
        self.cfg.queue_bytes = bytes;
    }
}

/// Which way a frame travels on a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// From the A-side interface to the B-side interface.
    AtoB,
    /// From the B-side interface to the A-side interface.
    BtoA,
}

impl Dir {
    /// The other direction.
    pub fn reverse(self) -> Dir {
        match self {
            Dir::AtoB => Dir::BtoA,
            Dir::BtoA => Dir::AtoB,
        }
    }
}

/// Both directions of one emulated path.
#[derive(Debug, Clone)]
pub struct LinkModel {
    pub ab: Direction,
    pub ba: Direction,
}

impl LinkModel {
    pub fn new(ab: DirectionConfig, ba: DirectionConfig, seed: u64) -> Self {
        // Distinct streams per direction so they are independent.
        let mut s = SplitMix64::new(seed);
        Self {
            ab: Direction::new(ab, s.next_u64()),
            ba: Direction::new(ba, s.next_u64()),
        }
    }

    /// Same settings in both directions.
    pub fn symmetric(cfg: DirectionConfig, seed: u64) -> Self {
        Self::new(cfg.clone(), cfg, seed)
    }

    pub fn dir(&self, d: Dir) -> &Direction {
        match d {
            Dir::AtoB => &self.ab,
            Dir::BtoA => &self.ba,
        }
    }

    pub fn dir_mut(&mut self, d: Dir) -> &mut Direction {
        match d {
            Dir::AtoB => &mut self.ab,
            Dir::BtoA => &mut self.ba,
        }
    }

    pub fn handle_arrival(&mut self, d: Dir, now: Instant, len: usize) -> Option<Instant> {
        self.dir_mut(d).handle_arrival(now, len)
    }

    pub fn is_up(&self) -> bool {
        self.ab.is_up() && self.ba.is_up()
    }

    /// Apply `f` to one direction, or to both when `which` is `None`.
    pub fn apply(&mut self, which: Option<Dir>, mut f: impl FnMut(&mut Direction)) {
        match which {
            Some(d) => f(self.dir_mut(d)),
            None => {
                f(&mut self.ab);
                f(&mut self.ba);
            }
        }
    }

    pub fn set_up(&mut self, up: bool) {
        self.apply(None, |d| d.set_up(up));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn delay_applied_exactly() {
        let t0 = Instant::now();
        let mut d = Direction::new(
            DirectionConfig {
                delay: ms(20),
                ..Default::default()
            },
            1,
        );
        for i in 0..100u64 {
            let now = t0 + Duration::from_micros(i * 137);
            assert_eq!(d.handle_arrival(now, 1500), Some(now + ms(20)));
        }
    }

    #[test]
    fn jitter_keeps_fifo_and_bounds() {
        let t0 = Instant::now();
        let cfg = DirectionConfig {
            delay: ms(10),
            jitter: ms(5),
            ..Default::default()
        };
        // Dense traffic (every 100 us): jitter would reorder, FIFO must hold.
        let mut d = Direction::new(cfg.clone(), 7);
        let mut last = t0;
        for i in 0..10_000u64 {
            let now = t0 + Duration::from_micros(i * 100);
            let dep = d.handle_arrival(now, 100).expect("no loss configured");
            assert!(dep >= last, "reordered at {i}");
            assert!(dep - now >= ms(5) && dep - now <= ms(15));
            last = dep;
        }
        // Sparse traffic (every 20 ms > 2 * jitter): the full spread shows.
        let mut d = Direction::new(cfg, 8);
        let (mut min_d, mut max_d, mut sum) = (Duration::MAX, Duration::ZERO, Duration::ZERO);
        let n = 5_000u32;
        for i in 0..n {
            let now = t0 + ms(20) * i;
            let delay = d.handle_arrival(now, 100).expect("no loss configured") - now;
            assert!(delay >= ms(5) && delay <= ms(15), "{delay:?}");
            min_d = min_d.min(delay);
            max_d = max_d.max(delay);
            sum += delay;
        }
        assert!(min_d < ms(6), "min {min_d:?}");
        assert!(max_d > ms(14), "max {max_d:?}");
        let mean = sum / n;
        assert!(mean > ms(9) && mean < ms(11), "mean {mean:?}");
    }

    #[test]
    fn uniform_loss_converges() {
        let t0 = Instant::now();
        for seed in [1u64, 2, 3] {
            let mut d = Direction::new(
                DirectionConfig {
                    loss: 0.05,
                    ..Default::default()
                },
                seed,
            );
            let n = 200_000;
            let lost = (0..n)
                .filter(|_| d.handle_arrival(t0, 100).is_none())
                .count();
            let rate = lost as f64 / n as f64;
            assert!((rate - 0.05).abs() < 0.003, "seed {seed}: {rate}");
            assert_eq!(d.stats().drop_loss, lost as u64);
        }
    }

    fn mean_run_len(losses: &[bool]) -> f64 {
        let mut runs = 0u64;
        let mut total = 0u64;
        let mut prev = false;
        for &l in losses {
            if l {
                total += 1;
                if !prev {
                    runs += 1;
                }
            }
            prev = l;
        }
        total as f64 / runs.max(1) as f64
    }

    #[test]
    fn burst_loss_longer_runs_same_mean() {
        let t0 = Instant::now();
        let n = 400_000;
        let ge = GilbertElliott::from_mean(0.02, 5.0);
        assert!((ge.mean_loss() - 0.02).abs() < 1e-9);
        let mut burst = Direction::new(
            DirectionConfig {
                burst_loss: Some(ge),
                ..Default::default()
            },
            11,
        );
        let mut uni = Direction::new(
            DirectionConfig {
                loss: 0.02,
                ..Default::default()
            },
            11,
        );
        let b: Vec<bool> = (0..n)
            .map(|_| burst.handle_arrival(t0, 100).is_none())
            .collect();
        let u: Vec<bool> = (0..n)
            .map(|_| uni.handle_arrival(t0, 100).is_none())
            .collect();
        let b_rate = b.iter().filter(|x| **x).count() as f64 / n as f64;
        let u_rate = u.iter().filter(|x| **x).count() as f64 / n as f64;
        assert!((b_rate - 0.02).abs() < 0.004, "burst mean {b_rate}");
        assert!((u_rate - 0.02).abs() < 0.002, "uniform mean {u_rate}");
        let (bl, ul) = (mean_run_len(&b), mean_run_len(&u));
        assert!(bl > 4.0 && bl < 6.0, "burst run length {bl}");
        assert!(ul < 1.1, "uniform run length {ul}");
    }

    #[test]
    fn rate_limit_gives_configured_throughput() {
        let t0 = Instant::now();
        let rate = 100_000_000u64; // 100 Mbit/s
        let mut d = Direction::new(
            DirectionConfig {
                rate_bps: Some(rate),
                ..Default::default()
            },
            3,
        );
        // Offer exactly line rate: 1500 B every 120 us.
        let mut last = t0;
        for i in 0..10_000u64 {
            let now = t0 + Duration::from_micros(i * 120);
            last = d.handle_arrival(now, 1500).expect("offered at line rate");
        }
        // 10k * 1500 B at 100 Mbit/s = 1.2 s; last finishes right at 1.2 s.
        assert_eq!(last - t0, Duration::from_millis(1200));
        assert_eq!(d.stats().drop_queue_full, 0);
    }

    #[test]
    fn rate_limit_drops_when_queue_full() {
        let t0 = Instant::now();
        let rate = 10_000_000u64; // 10 Mbit/s
        let q = 30_000u64;
        let mut d = Direction::new(
            DirectionConfig {
                rate_bps: Some(rate),
                queue_bytes: Some(q),
                ..Default::default()
            },
            3,
        );
        // A burst of 100 frames at one instant: 20 fit (30000/1500).
        let ok = (0..100)
            .filter(|_| d.handle_arrival(t0, 1500).is_some())
            .count();
        assert_eq!(ok, 20);
        assert_eq!(d.stats().drop_queue_full, 80);
        // After the queue drained (20*1.2 ms = 24 ms) everything fits again.
        let later = t0 + ms(24);
        assert_eq!(d.backlog_bytes(later), 0);
        assert_eq!(
            d.handle_arrival(later, 1500),
            Some(later + Duration::from_micros(1200))
        );
        // Sustained overload at 2x rate for 1 s: delivered ~= rate.
        let mut delivered = 0u64;
        let start = t0 + ms(100);
        let mut last = start;
        for i in 0..(2 * 834u64) {
            let now = start + Duration::from_micros(i * 600);
            if let Some(dep) = d.handle_arrival(now, 1500) {
                delivered += 1500;
                last = dep;
            }
        }
        let secs = (last - start).as_secs_f64();
        let mbit = delivered as f64 * 8.0 / secs / 1e6;
        assert!((mbit - 10.0).abs() < 0.2, "throughput {mbit}");
    }

    #[test]
    fn default_queue_is_50ms_or_64k() {
        assert_eq!(default_queue_bytes(200_000_000), 1_250_000);
        assert_eq!(default_queue_bytes(1_000_000), 65_536);
    }

    #[test]
    fn down_drops_everything_up_restores() {
        let t0 = Instant::now();
        let mut m = LinkModel::symmetric(
            DirectionConfig {
                delay: ms(5),
                rate_bps: Some(1_000_000),
                ..Default::default()
            },
            9,
        );
        assert!(m.handle_arrival(Dir::AtoB, t0, 1000).is_some());
        m.set_up(false);
        assert!(!m.is_up());
        for i in 0..50 {
            let now = t0 + ms(i);
            assert!(m.handle_arrival(Dir::AtoB, now, 1000).is_none());
            assert!(m.handle_arrival(Dir::BtoA, now, 1000).is_none());
        }
        assert_eq!(m.ab.stats().drop_link_down, 50);
        assert_eq!(m.ba.stats().drop_link_down, 50);
        m.set_up(true);
        let now = t0 + ms(100);
        // Fresh serializer after restore: 1000 B at 1 Mbit/s = 8 ms + 5 ms.
        assert_eq!(m.handle_arrival(Dir::AtoB, now, 1000), Some(now + ms(13)));
    }

    #[test]
    fn runtime_changes_apply_to_new_packets() {
        let t0 = Instant::now();
        let mut m = LinkModel::symmetric(DirectionConfig::default(), 5);
        m.apply(None, |d| d.set_delay(ms(30)));
        assert_eq!(m.handle_arrival(Dir::BtoA, t0, 10), Some(t0 + ms(30)));
        m.apply(Some(Dir::AtoB), |d| d.set_loss(1.0));
        assert!(m.handle_arrival(Dir::AtoB, t0, 10).is_none());
        assert!(m.handle_arrival(Dir::BtoA, t0, 10).is_some());
        // Shorter delay later must not overtake an earlier frame.
        m.apply(None, |d| d.set_delay(ms(1)));
        let t1 = t0 + ms(2);
        assert_eq!(m.handle_arrival(Dir::BtoA, t1, 10), Some(t0 + ms(30)));
    }
}
