//! Settings shared by the benches: short runs, since the figures are read
//! as ratios on a noisy 2-core VM, not as absolute timings.

use std::time::Duration;

use criterion::Criterion;

/// Criterion with few samples and short warm-up and measurement times.
pub fn quick() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}
