//! The sender's model of the queue at a path's bottleneck.

use std::time::Instant;

/// Bytes waiting at a path's bottleneck, as the scheduler models them: what
/// it sent there, drained at the path's estimated rate, and set again from
/// what each probe echo measured (see [`QueueModel::resync`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct QueueModel {
    bytes: f64,
    at: Option<Instant>,
    /// Data bytes sent on the path so far.
    sent_total: u64,
}

impl QueueModel {
    /// Drain what the path carried since the model was last touched, at
    /// `rate` bytes per µs.
    pub fn drain(&mut self, now: Instant, rate: f64) {
        // Every packet of a batch comes at one `now`: drained already.
        if self.at == Some(now) {
            return;
        }
        if let Some(at) = self.at {
            let elapsed = now.saturating_duration_since(at).as_secs_f64() * 1e6;
            self.bytes = (self.bytes - elapsed * rate).max(0.0);
        }
        self.at = Some(now);
    }

    /// Add `len` bytes sent at `now`.
    pub fn add(&mut self, now: Instant, len: usize, rate: f64) {
        self.drain(now, rate);
        self.bytes += len as f64;
        self.sent_total += len as u64;
    }

    /// Return the queue's delay at `rate` bytes per µs, µs.
    pub fn delay_us(&self, rate: f64) -> f64 {
        self.bytes / rate
    }

    /// Return how many data bytes were ever sent on the path.
    pub fn sent_total(&self) -> u64 {
        self.sent_total
    }

    /// Set the model from what an echo measured: the queue `met_us` a probe
    /// sent at `probe_at` met, when `sent_before` bytes had been sent, plus
    /// what was sent after it, less what the path drained since. Both ways:
    /// a rate estimate a little low or high makes the model drift between
    /// echoes, and a model that only rose would keep a path idle while its
    /// real queue ran dry.
    pub fn resync(
        &mut self,
        now: Instant,
        rate: f64,
        met_us: f64,
        probe_at: Instant,
        sent_before: u64,
    ) {
        let met = met_us * rate;
        let sent_since = self.sent_total.saturating_sub(sent_before) as f64;
        let drained = now.saturating_duration_since(probe_at).as_secs_f64() * 1e6 * rate;
        self.bytes = (met + sent_since - drained).max(0.0);
        self.at = Some(now);
    }

    /// Start empty: what was queued was lost with the path.
    pub fn clear(&mut self) {
        self.bytes = 0.0;
    }
}
