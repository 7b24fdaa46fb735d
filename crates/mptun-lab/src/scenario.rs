//! Lab scenario files: the emulated paths and what happens to them.

use std::path::Path;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

/// A lab scenario.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Scenario {
    /// Seconds of each measured flow.
    #[serde(default = "default_duration")]
    pub duration: f64,
    /// Congestion control of the inner TCP: "cubic" or "bbr".
    #[serde(default = "default_cc")]
    pub congestion_control: String,
    /// mptun's scheduler on both sites: "adaptive" (default) or
    /// "round-robin", to compare the two.
    pub scheduler: Option<String>,
    /// The emulated paths, at least one.
    pub path: Vec<PathSpec>,
    /// MTU of the paths' links. Only for unshaped paths (plain veth pairs):
    /// the emulator forwards frames of up to 1500 bytes.
    pub path_mtu: Option<u32>,
    /// Changes during the measured flow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub event: Vec<Event>,
    /// Run a soak instead of the comparison: see [`crate::soak`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak: Option<SoakSpec>,
}

/// `[soak]`: one long flow of a file sent over and over through mptun.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SoakSpec {
    /// Size of the file, of random bytes, whose copies are checked by
    /// SHA-256 as they arrive.
    #[serde(default = "default_file_mib")]
    pub file_mib: u32,
}

fn default_file_mib() -> u32 {
    256
}

/// One emulated path, the same in both directions. A path with no rate,
/// delay, jitter or loss is unshaped: when every path is, the lab joins the
/// sites with plain veth pairs and no emulator, to measure the tunnel's own
/// ceiling.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PathSpec {
    /// Rate limit; required unless every path is unshaped.
    pub rate_mbit: Option<f64>,
    /// One-way delay.
    #[serde(default)]
    pub delay_ms: f64,
    /// Jitter, ± around the delay (order within the path is kept).
    #[serde(default)]
    pub jitter_ms: f64,
    /// Random loss.
    #[serde(default)]
    pub loss_pct: f64,
}

/// A change to one path at a given time into the measured flow.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Event {
    /// Seconds after the flow starts.
    pub at: f64,
    /// Seconds after which it happens again, until the flow ends.
    pub every: Option<f64>,
    /// Path number, from 1.
    pub path: usize,
    /// "down", "up" or "set" (the default when a value is given).
    pub action: Option<String>,
    /// New loss.
    pub loss_pct: Option<f64>,
    /// New one-way delay.
    pub delay_ms: Option<f64>,
    /// New rate.
    pub rate_mbit: Option<f64>,
}

fn default_duration() -> f64 {
    10.0
}

fn default_cc() -> String {
    "cubic".to_string()
}

/// Longest flow a scenario may ask for: a day.
const MAX_DURATION: f64 = 86_400.0;

/// The scenario `mptun lab` runs without `--scenario`: three equal paths of
/// 100 Mbit/s and 10 ms RTT (`configs/lab/equal.toml`).
pub const DEFAULT_SCENARIO: &str = include_str!("../../../configs/lab/equal.toml");

impl Scenario {
    /// Parse and check scenario text; `name` is used in errors.
    pub fn parse(text: &str, name: &str) -> anyhow::Result<Scenario> {
        let s: Scenario =
            toml::from_str(text).with_context(|| format!("{name}: invalid scenario"))?;
        if s.path.is_empty() || s.path.len() > mptun_core::MAX_PATHS {
            bail!(
                "{name}: path: need 1 to {} [[path]] tables",
                mptun_core::MAX_PATHS
            );
        }
        if !(1.0..=MAX_DURATION).contains(&s.duration) {
            bail!("{name}: duration: must be 1 to {MAX_DURATION} seconds");
        }
        if let Some(soak) = &s.soak {
            if !(1..=4096).contains(&soak.file_mib) {
                bail!("{name}: soak.file-mib: must be 1 to 4096");
            }
        }
        if !matches!(s.congestion_control.as_str(), "cubic" | "bbr" | "reno") {
            bail!("{name}: congestion-control: must be \"cubic\", \"bbr\" or \"reno\"");
        }
        let unshaped = s.unshaped();
        for (i, p) in s.path.iter().enumerate() {
            match p.rate_mbit {
                Some(r) if !(r > 0.0 && r <= 10_000.0) => {
                    bail!("{name}: path[{i}].rate-mbit: must be above 0 and at most 10000")
                }
                None if !unshaped => bail!(
                    "{name}: path[{i}].rate-mbit: required unless every path is unshaped \
                     (no rate, delay, jitter, loss or event)"
                ),
                _ => {}
            }
            if p.delay_ms < 0.0 || p.jitter_ms < 0.0 || !(0.0..=100.0).contains(&p.loss_pct) {
                bail!("{name}: path[{i}]: delay, jitter and loss must not be negative, loss at most 100");
            }
        }
        match s.path_mtu {
            Some(_) if !unshaped => {
                bail!("{name}: path-mtu: only for unshaped paths (the emulator carries 1500-byte frames)")
            }
            Some(m) if !(576..=65_535).contains(&m) => {
                bail!("{name}: path-mtu: must be 576 to 65535, not {m}")
            }
            _ => {}
        }
        for (i, e) in s.event.iter().enumerate() {
            if e.path == 0 || e.path > s.path.len() {
                bail!(
                    "{name}: event[{i}].path: must be 1 to {} (paths count from 1)",
                    s.path.len()
                );
            }
            if e.at < 0.0 || e.at > s.duration {
                bail!(
                    "{name}: event[{i}].at: must be within the flow's {} s",
                    s.duration
                );
            }
            if e.every.is_some_and(|every| every.is_nan() || every < 1.0) {
                bail!("{name}: event[{i}].every: must be at least 1 second");
            }
            e.commands()
                .with_context(|| format!("{name}: event[{i}]"))?;
        }
        Ok(s)
    }

    /// Read a scenario file.
    pub fn load(path: &Path) -> anyhow::Result<Scenario> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Return every event of the flow in time order, repeated events once
    /// per repetition.
    pub fn timeline(&self) -> Vec<Event> {
        let mut events = Vec::new();
        for e in &self.event {
            let mut at = e.at;
            while at <= self.duration {
                events.push(Event {
                    at,
                    every: None,
                    ..e.clone()
                });
                match e.every {
                    Some(every) => at += every,
                    None => break,
                }
            }
        }
        events.sort_by(|a, b| a.at.total_cmp(&b.at));
        events
    }

    /// Return the share of the flow during which path `index` (from 0) is
    /// up, by the scenario's cuts and restores.
    pub fn up_fraction(&self, index: usize) -> f64 {
        if self.duration <= 0.0 {
            return 1.0;
        }
        let mut up = true;
        let mut since = 0.0;
        let mut up_s = 0.0;
        for e in self.timeline().iter().filter(|e| e.path == index + 1) {
            // The timeline ends with the flow.
            if up {
                up_s += e.at - since;
            }
            since = e.at;
            up = e.sets_up().unwrap_or(up);
        }
        if up {
            up_s += self.duration - since;
        }
        up_s / self.duration
    }

    /// Return what each path offers over the flow, of `rates_mbps` (one
    /// per path): its rate for the share of the flow it is up. A path cut
    /// for a quarter of the flow cannot carry its rate over the flow, for
    /// mptun or for anything it is measured against.
    pub fn offered_mbps(&self, rates_mbps: &[f64]) -> Vec<f64> {
        rates_mbps
            .iter()
            .enumerate()
            .map(|(i, rate)| rate * self.up_fraction(i))
            .collect()
    }

    /// Return the paths' configured rates summed (0 for unshaped paths).
    pub fn sum_rate_mbit(&self) -> f64 {
        self.path.iter().filter_map(|p| p.rate_mbit).sum()
    }

    /// Return whether no path is shaped and nothing happens to them: the
    /// lab then uses plain veth pairs.
    pub fn unshaped(&self) -> bool {
        self.event.is_empty()
            && self.path.iter().all(|p| {
                p.rate_mbit.is_none()
                    && p.delay_ms == 0.0
                    && p.jitter_ms == 0.0
                    && p.loss_pct == 0.0
            })
    }

    /// Return the spread of the paths' one-way delays, ms.
    pub fn delay_spread_ms(&self) -> f64 {
        let delays = self.path.iter().map(|p| p.delay_ms);
        delays.clone().fold(f64::MIN, f64::max) - delays.fold(f64::MAX, f64::min)
    }

    /// Return the index (from 0) of the path that carried most alone,
    /// `measured_mbps` each path's goodput alone (without the scenario's
    /// events, which count as the time each path is up): a path with the
    /// highest rate but a few percent loss carries least of all under a
    /// loss-based TCP, and the rows measured against the best path would
    /// measure it. Without measurements, [`best_path`](Self::best_path).
    pub fn best_path_measured(&self, measured_mbps: Option<&[f64]>) -> usize {
        let Some(measured) = measured_mbps else {
            return self.best_path();
        };
        let offered = self.offered_mbps(measured);
        let mut best = self.best_path();
        for (i, mbps) in offered.iter().enumerate() {
            if *mbps > offered.get(best).copied().unwrap_or(0.0) {
                best = i;
            }
        }
        best
    }

    /// Return the index (from 0) of the best single path: highest rate,
    /// then lowest delay, then lowest loss.
    pub fn best_path(&self) -> usize {
        let mut best = 0;
        for (i, p) in self.path.iter().enumerate() {
            let b = &self.path[best];
            let key = |q: &PathSpec| {
                let rate = q.rate_mbit.unwrap_or(f64::MAX);
                (rate * (1.0 - q.loss_pct / 100.0), -q.delay_ms)
            };
            if key(p) > key(b) {
                best = i;
            }
        }
        best
    }
}

impl Event {
    /// Return whether this event brings its path up (`Some(true)`), cuts
    /// it (`Some(false)`), or leaves it as it was (`None`).
    pub fn sets_up(&self) -> Option<bool> {
        match self.action.as_deref() {
            Some("down") => Some(false),
            Some("up") => Some(true),
            _ => None,
        }
    }

    /// Return the emulator control lines for this event.
    pub fn commands(&self) -> anyhow::Result<Vec<String>> {
        let n = self.path;
        let mut lines = Vec::new();
        match self.action.as_deref() {
            Some("down") => lines.push(format!("down {n}")),
            Some("up") => lines.push(format!("up {n}")),
            Some("set") | None => {}
            Some(other) => bail!("action: must be \"down\", \"up\" or \"set\", not {other:?}"),
        }
        if let Some(v) = self.loss_pct {
            lines.push(format!("set {n} loss-pct {v}"));
        }
        if let Some(v) = self.delay_ms {
            lines.push(format!("set {n} delay-ms {v}"));
        }
        if let Some(v) = self.rate_mbit {
            lines.push(format!("set {n} rate-mbit {v}"));
        }
        if lines.is_empty() {
            bail!("nothing to do: give action = \"down\"/\"up\" or a value to set");
        }
        Ok(lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_offers_its_rate_for_the_time_it_is_up() {
        let s = Scenario::parse(
            "duration = 10\n[[path]]\nrate-mbit = 10\n[[path]]\nrate-mbit = 200\n\
             [[path]]\nrate-mbit = 50\n\
             [[event]]\nat = 3.5\npath = 2\naction = \"down\"\n\
             [[event]]\nat = 6\npath = 2\naction = \"up\"\n\
             [[event]]\nat = 8\npath = 3\naction = \"down\"\n\
             [[event]]\nat = 9\npath = 3\nloss-pct = 1\n",
            "t",
        )
        .unwrap();
        assert_eq!(s.up_fraction(0), 1.0);
        assert_eq!(s.up_fraction(1), 0.75);
        assert_eq!(s.up_fraction(2), 0.8, "a change of loss is not a restore");
        assert_eq!(
            s.offered_mbps(&[10.0, 200.0, 50.0]),
            vec![10.0, 150.0, 40.0]
        );
    }

    #[test]
    fn a_path_cut_every_so_often_is_up_between_the_cuts() {
        let s = Scenario::parse(
            "duration = 60\n[[path]]\nrate-mbit = 10\n\
             [[event]]\nat = 10\nevery = 30\npath = 1\naction = \"down\"\n\
             [[event]]\nat = 20\nevery = 30\npath = 1\naction = \"up\"\n",
            "t",
        )
        .unwrap();
        // Down 10-20 and 40-50.
        assert!((s.up_fraction(0) - 40.0 / 60.0).abs() < 1e-9);
    }

    #[test]
    fn shipped_scenarios_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/lab");
        for name in ["equal", "rtt-skew", "rate-skew", "lossy", "failover"] {
            let s = Scenario::load(&dir.join(format!("{name}.toml"))).unwrap();
            assert_eq!(s.path.len(), 3, "{name}");
            assert!(!s.unshaped(), "{name}");
        }
        for name in ["ceiling", "ceiling-one-path", "ceiling-jumbo"] {
            let s = Scenario::load(&dir.join(format!("{name}.toml"))).unwrap();
            assert!(s.unshaped(), "{name}");
        }
        assert!(Scenario::parse(DEFAULT_SCENARIO, "default").is_ok());
        let soak = Scenario::load(&dir.join("soak.toml")).unwrap();
        assert!(soak.soak.is_some() && soak.duration >= 3600.0);
        assert_eq!(
            soak.timeline().len(),
            120,
            "a cut and a restore every minute"
        );
    }

    #[test]
    fn events_become_control_lines() {
        let s = Scenario::parse(
            "duration = 10\n[[path]]\nrate-mbit = 10\n[[path]]\nrate-mbit = 20\n\
             [[event]]\nat = 5.0\npath = 2\naction = \"down\"\n\
             [[event]]\nat = 6.0\npath = 1\nloss-pct = 1.5\n",
            "t",
        )
        .unwrap();
        assert_eq!(s.event[0].commands().unwrap(), vec!["down 2"]);
        assert_eq!(s.event[1].commands().unwrap(), vec!["set 1 loss-pct 1.5"]);
        assert_eq!(s.best_path(), 1);
    }

    #[test]
    fn the_best_path_is_the_one_that_carried_most_alone() {
        let s = Scenario::parse(
            "duration = 10\n[[path]]\nrate-mbit = 174\nloss-pct = 2.2\n\
             [[path]]\nrate-mbit = 88\n[[path]]\nrate-mbit = 102\n",
            "t",
        )
        .unwrap();
        assert_eq!(s.best_path(), 0);
        assert_eq!(s.best_path_measured(None), 0);
        assert_eq!(s.best_path_measured(Some(&[1.2, 96.3, 91.0])), 1);
        // A tie keeps the configured order's choice.
        assert_eq!(s.best_path_measured(Some(&[50.0, 50.0, 50.0])), 0);
    }

    #[test]
    fn a_repeated_event_happens_until_the_flow_ends() {
        let s = Scenario::parse(
            r#"duration = 100
            [[path]]
            rate-mbit = 10
            [[event]]
            at = 30.0
            every = 30.0
            path = 1
            action = "down"
            [[event]]
            at = 35.0
            every = 30.0
            path = 1
            action = "up"
            [[event]]
            at = 1.0
            path = 1
            loss-pct = 1
            "#,
            "t",
        )
        .unwrap();
        let times: Vec<f64> = s.timeline().iter().map(|e| e.at).collect();
        assert_eq!(times, [1.0, 30.0, 35.0, 60.0, 65.0, 90.0, 95.0]);
        let every_0 =
            "[[path]]\nrate-mbit = 10\n[[event]]\nat = 1\nevery = 0\npath = 1\naction = 'up'\n";
        assert!(format!("{:#}", Scenario::parse(every_0, "t").unwrap_err()).contains("every"));
    }

    #[test]
    fn bad_scenarios_name_the_key() {
        let err = |t: &str| format!("{:#}", Scenario::parse(t, "s.toml").unwrap_err());
        assert!(err("[[path]]\nrate-mbit = 0\n").contains("path[0].rate-mbit"));
        assert!(
            err("[[path]]\nrate-mbit = 5\n[[event]]\nat = 1\npath = 2\naction = \"down\"\n")
                .contains("event[0].path")
        );
        assert!(err(
            "[[path]]\nrate-mbit = 5\n[[event]]\nat = 1\npath = 1\naction = \"explode\"\n"
        )
        .contains("event[0]"));
        assert!(
            err("congestion-control = \"vegas\"\n[[path]]\nrate-mbit = 5\n")
                .contains("congestion-control")
        );
        assert!(err("[[path]]\nrate-mbit = 5\n[[path]]\n").contains("path[1].rate-mbit"));
        assert!(err("path-mtu = 9000\n[[path]]\nrate-mbit = 5\n").contains("path-mtu"));
        assert!(err("path-mtu = 100\n[[path]]\n").contains("path-mtu"));
    }
}
