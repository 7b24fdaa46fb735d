//! Declarative path settings (TOML or JSON), shared by the binary and the lab
//! [`crate::topology`] helper.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::{DirectionConfig, GilbertElliott, LinkModel};
use crate::NetemError;

/// Gilbert-Elliott settings in percent (see [`GilbertElliott`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct BurstSpec {
    /// P(good -> bad) per packet, percent.
    pub enter_bad_pct: f64,
    /// P(bad -> good) per packet, percent (mean burst = 100 / this packets).
    pub leave_bad_pct: f64,
    #[serde(default = "hundred")]
    pub loss_in_bad_pct: f64,
    #[serde(default)]
    pub loss_in_good_pct: f64,
}

fn hundred() -> f64 {
    100.0
}

impl BurstSpec {
    pub fn to_model(&self) -> Result<GilbertElliott, NetemError> {
        Ok(GilbertElliott {
            enter_bad: pct("burst-loss.enter-bad-pct", self.enter_bad_pct)?,
            leave_bad: pct("burst-loss.leave-bad-pct", self.leave_bad_pct)?,
            loss_in_bad: pct("burst-loss.loss-in-bad-pct", self.loss_in_bad_pct)?,
            loss_in_good: pct("burst-loss.loss-in-good-pct", self.loss_in_good_pct)?,
        })
    }
}

/// Settings of one direction; every field optional so it can override.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct DirSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_mbit: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst_loss: Option<BurstSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_bytes: Option<u64>,
}

impl DirSpec {
    /// `over` wins field by field.
    pub fn merged(&self, over: &DirSpec) -> DirSpec {
        DirSpec {
            rate_mbit: over.rate_mbit.or(self.rate_mbit),
            delay_ms: over.delay_ms.or(self.delay_ms),
            jitter_ms: over.jitter_ms.or(self.jitter_ms),
            loss_pct: over.loss_pct.or(self.loss_pct),
            burst_loss: over.burst_loss.or(self.burst_loss),
            queue_bytes: over.queue_bytes.or(self.queue_bytes),
        }
    }

    pub fn to_config(&self) -> Result<DirectionConfig, NetemError> {
        Ok(DirectionConfig {
            delay: millis("delay-ms", self.delay_ms.unwrap_or(0.0))?,
            jitter: millis("jitter-ms", self.jitter_ms.unwrap_or(0.0))?,
            loss: pct("loss-pct", self.loss_pct.unwrap_or(0.0))?,
            burst_loss: self.burst_loss.map(|b| b.to_model()).transpose()?,
            rate_bps: self.rate_mbit.map(mbit).transpose()?.flatten(),
            queue_bytes: self.queue_bytes,
        })
    }
}

/// One path: the two interfaces (in the middle namespace) it bridges, common
/// settings, and optional per-direction overrides (`ab` = A to B).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct PathSpec {
    pub a: String,
    pub b: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_mbit: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst_loss: Option<BurstSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ab: Option<DirSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ba: Option<DirSpec>,
}

impl PathSpec {
    pub fn new(a: impl Into<String>, b: impl Into<String>, common: &DirSpec) -> Self {
        let mut p = PathSpec {
            a: a.into(),
            b: b.into(),
            ..Default::default()
        };
        p.set_common(common);
        p
    }

    pub fn common(&self) -> DirSpec {
        DirSpec {
            rate_mbit: self.rate_mbit,
            delay_ms: self.delay_ms,
            jitter_ms: self.jitter_ms,
            loss_pct: self.loss_pct,
            burst_loss: self.burst_loss,
            queue_bytes: self.queue_bytes,
        }
    }

    pub fn set_common(&mut self, c: &DirSpec) {
        self.rate_mbit = c.rate_mbit;
        self.delay_ms = c.delay_ms;
        self.jitter_ms = c.jitter_ms;
        self.loss_pct = c.loss_pct;
        self.burst_loss = c.burst_loss;
        self.queue_bytes = c.queue_bytes;
    }

    /// Effective (A to B, B to A) settings.
    pub fn directions(&self) -> Result<(DirectionConfig, DirectionConfig), NetemError> {
        let c = self.common();
        let ab = c.merged(self.ab.as_ref().unwrap_or(&DirSpec::default()));
        let ba = c.merged(self.ba.as_ref().unwrap_or(&DirSpec::default()));
        Ok((ab.to_config()?, ba.to_config()?))
    }

    pub fn to_model(&self, seed: u64) -> Result<LinkModel, NetemError> {
        let (ab, ba) = self.directions()?;
        Ok(LinkModel::new(ab, ba, seed))
    }
}

/// A whole emulator configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Spec {
    /// Base PRNG seed; path i uses `seed + i`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(default)]
    pub path: Vec<PathSpec>,
}

impl Spec {
    /// Parse TOML, or JSON when the text starts with `{`.
    pub fn parse(text: &str) -> Result<Self, NetemError> {
        if text.trim_start().starts_with('{') {
            serde_json::from_str(text).map_err(|e| NetemError::Spec(format!("JSON: {e}")))
        } else {
            toml::from_str(text).map_err(|e| NetemError::Spec(format!("TOML: {e}")))
        }
    }

    pub fn load(path: &Path) -> Result<Self, NetemError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| NetemError::io(format!("reading spec {}", path.display()), e))?;
        Self::parse(&text).map_err(|e| NetemError::Spec(format!("{}: {e}", path.display())))
    }

    pub fn to_json(&self) -> String {
        // Serializing plain data with string keys cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

fn finite_nonneg(name: &str, v: f64) -> Result<f64, NetemError> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(NetemError::Spec(format!(
            "{name} must be a finite number >= 0, got {v}"
        )))
    }
}

/// Percent -> probability.
pub fn pct(name: &str, v: f64) -> Result<f64, NetemError> {
    let v = finite_nonneg(name, v)?;
    if v > 100.0 {
        return Err(NetemError::Spec(format!("{name} must be <= 100, got {v}")));
    }
    Ok(v / 100.0)
}

pub fn millis(name: &str, v: f64) -> Result<Duration, NetemError> {
    let v = finite_nonneg(name, v)?;
    if v > 3_600_000.0 {
        return Err(NetemError::Spec(format!("{name} too large: {v}")));
    }
    Ok(Duration::from_secs_f64(v / 1000.0))
}

/// Mbit/s -> bit/s; 0 means unlimited (`None`).
pub fn mbit(v: f64) -> Result<Option<u64>, NetemError> {
    let v = finite_nonneg("rate-mbit", v)?;
    if v > 1e6 {
        return Err(NetemError::Spec(format!("rate-mbit too large: {v}")));
    }
    let bps = (v * 1e6).round() as u64;
    Ok((bps > 0).then_some(bps))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_toml_with_overrides() {
        let s = Spec::parse(
            r#"
            seed = 42
            [[path]]
            a = "ma1"
            b = "mb1"
            rate-mbit = 100
            delay-ms = 5
            loss-pct = 1.5
            [path.ba]
            delay-ms = 7.5
            [path.burst-loss]
            enter-bad-pct = 1
            leave-bad-pct = 25
            "#,
        )
        .expect("valid spec");
        assert_eq!(s.seed, Some(42));
        let (ab, ba) = s.path[0].directions().expect("valid");
        assert_eq!(ab.delay, Duration::from_millis(5));
        assert_eq!(ba.delay, Duration::from_micros(7500));
        assert_eq!(ab.rate_bps, Some(100_000_000));
        assert!((ba.loss - 0.015).abs() < 1e-12);
        let ge = ab.burst_loss.expect("burst set");
        assert!((ge.leave_bad - 0.25).abs() < 1e-12);
        assert!((ge.loss_in_bad - 1.0).abs() < 1e-12);
    }

    #[test]
    fn json_roundtrip_and_errors() {
        let mut p = PathSpec::new("x", "y", &DirSpec::default());
        p.rate_mbit = Some(0.0);
        let s = Spec {
            seed: None,
            path: vec![p],
        };
        let back = Spec::parse(&s.to_json()).expect("roundtrip");
        assert_eq!(back, s);
        assert_eq!(back.path[0].directions().expect("ok").0.rate_bps, None);
        assert!(Spec::parse("[[path]]\na='x'\nb='y'\nloss-pct=101")
            .expect("parses")
            .path[0]
            .directions()
            .is_err());
        assert!(Spec::parse("[[path]]\na='x'\nb='y'\ndelay=1").is_err());
    }
}

#[cfg(test)]
mod example_tests {
    use super::*;

    #[test]
    fn example_spec_parses() {
        let s = Spec::parse(include_str!("../netem-spec.example.toml")).expect("example parses");
        assert_eq!(s.path.len(), 2);
        let (ab, ba) = s.path[1].directions().expect("valid");
        assert_eq!(ab.rate_bps, Some(20_000_000));
        assert_eq!(ba.rate_bps, Some(5_000_000));
        assert!(ba.burst_loss.is_some());
    }
}
