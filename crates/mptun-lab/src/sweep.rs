//! `mptun lab --sweep N --seed S`: scenarios nobody tuned for, drawn at
//! random from one documented distribution, each run with `--compare`, and
//! a summary of how mptun did against the sum of the paths, the best path
//! alone and one MPTCP connection over the same WireGuard tunnels.
//!
//! The draw depends only on the seed (SplitMix64, the emulator's own
//! generator), so a seed gives the same scenarios on every machine.

use std::fmt::Write as _;

use mptun_netem::model::SplitMix64;
use serde::Serialize;

use crate::run::{Failover, LabOptions, LabReport, MptunDetail, SystemResult, HOLD_MARGIN_MS};
use crate::scenario::{Event, PathSpec, Scenario};

/// Seconds of each flow in a sweep.
const DURATION_S: f64 = 10.0;
/// The paths' rates summed are kept to this: more than the lab's emulator
/// and both sites can carry on a small host would measure the host.
pub const MAX_SUM_MBIT: f64 = 600.0;
/// Delay spread from which a scenario with inner bbr is in the known class
/// "rtt skew with inner bbr": bbr paces at its bottleneck estimate and reads
/// the reorder buffer's hold as a longer round trip, so it cannot fill paths
/// whose delays differ this much (README, "Sweeps").
const BBR_SKEW_MS: f64 = 20.0;

/// Draw `count` scenarios from `seed`:
///
/// - 2 to 6 paths, uniformly;
/// - each path's rate log-uniform from 5 to 400 Mbit/s, all scaled down
///   together when they sum to more than [`MAX_SUM_MBIT`] (none below 5);
/// - one-way delay uniform from 1 to 80 ms, in 0.5 ms steps;
/// - jitter: none on half the paths, else uniform from 0.5 to 5 ms (at most
///   the delay);
/// - loss: none on three paths in four, else uniform from 0.1 to 3 %;
/// - one scenario in five cuts a random path between 3 and 5 s into the
///   flow and restores it 2 to 3 s later;
/// - inner TCP cubic or bbr, evenly; 10 s flows.
pub fn draw(seed: u64, count: usize) -> Vec<Scenario> {
    let mut rng = SplitMix64::new(seed);
    (0..count).map(|_| draw_one(&mut rng)).collect()
}

fn uniform(rng: &mut SplitMix64, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * rng.next_f64()
}

/// Round to `step`.
fn round_to(v: f64, step: f64) -> f64 {
    // Divided by the reciprocal, not multiplied by the step: 12 * 0.1 is
    // 1.2000000000000002, 12 / 10 is 1.2, and scenario files print them.
    (v / step).round() / step.recip()
}

fn draw_one(rng: &mut SplitMix64) -> Scenario {
    let paths = 2 + (rng.next_u64() % 5) as usize;
    let mut rates: Vec<f64> = (0..paths)
        .map(|_| (uniform(rng, 5f64.ln(), 400f64.ln())).exp())
        .collect();
    let sum: f64 = rates.iter().sum();
    if sum > MAX_SUM_MBIT {
        for r in &mut rates {
            *r = (*r * MAX_SUM_MBIT / sum).max(5.0);
        }
    }
    let path = rates
        .into_iter()
        .map(|rate| {
            let delay_ms = round_to(uniform(rng, 1.0, 80.0), 0.5);
            let jitter_ms = if rng.chance(0.5) {
                0.0
            } else {
                round_to(uniform(rng, 0.5, 5.0), 0.5).min(delay_ms)
            };
            let loss_pct = if rng.chance(0.25) {
                round_to(uniform(rng, 0.1, 3.0), 0.1)
            } else {
                0.0
            };
            PathSpec {
                rate_mbit: Some(round_to(rate, 1.0).max(5.0)),
                delay_ms,
                jitter_ms,
                loss_pct,
            }
        })
        .collect::<Vec<_>>();
    let mut event = Vec::new();
    if rng.chance(0.2) {
        let cut = 1 + (rng.next_u64() % paths as u64) as usize;
        let at = round_to(uniform(rng, 3.0, 5.0), 0.5);
        let back = at + round_to(uniform(rng, 2.0, 3.0), 0.5);
        for (at, action) in [(at, "down"), (back, "up")] {
            event.push(Event {
                at,
                every: None,
                path: cut,
                action: Some(action.to_string()),
                loss_pct: None,
                delay_ms: None,
                rate_mbit: None,
            });
        }
    }
    let congestion_control = if rng.chance(0.5) { "cubic" } else { "bbr" };
    Scenario {
        duration: DURATION_S,
        congestion_control: congestion_control.to_string(),
        scheduler: None,
        path,
        path_mtu: None,
        event,
        soak: None,
    }
}

/// How mptun did in one scenario of a sweep.
#[derive(Clone, Debug, Serialize)]
pub struct SweepResult {
    /// Number in the sweep, from 1.
    pub number: usize,
    /// The scenario, as a scenario file would give it.
    pub scenario: Scenario,
    /// mptun's goodput.
    pub mptun_mbps: f64,
    /// The paths' own single-flow rates, each for the share of the flow
    /// its path is up, summed.
    pub sum_mbps: f64,
    /// The best path alone: the highest of the paths' own rates (each for
    /// the share of the flow its path is up) and the best-path row.
    pub best_path_mbps: f64,
    /// One MPTCP connection with a subflow in each WireGuard tunnel, if it
    /// was measured.
    pub mptcp_wireguard_mbps: Option<f64>,
    /// One WireGuard tunnel over the best path, if it was measured: what a
    /// site without mptun gets from one flow. The best path alone carries
    /// more (a bare segment is 1448 bytes of payload in a 1500-byte frame,
    /// one in WireGuard 1368, in mptun 1364), which a tunnel cannot
    /// reach on a path with nothing to add beside it.
    pub wireguard_best_mbps: Option<f64>,
    /// mptun over the sum.
    pub fraction_of_sum: f64,
    /// mptun over the best path alone.
    pub ratio_to_best: f64,
    /// mptun over MPTCP over WireGuard.
    pub ratio_to_mptcp_wireguard: Option<f64>,
    /// mptun over one WireGuard tunnel over the best path.
    pub ratio_to_wireguard_best: Option<f64>,
    /// mptun's hold p99 after the flow's first second, ms.
    pub hold_p99_steady_ms: Option<f64>,
    /// The paths' one-way delay spread, ms.
    pub delay_spread_ms: f64,
    /// A class of scenario mptun is known not to serve well, if this is one.
    pub known_class: Option<String>,
    /// The highest steal while a system was measured, %.
    pub steal_pct: Option<f64>,
    /// Every system's figures.
    pub systems: Vec<SystemResult>,
    /// What mptun did: each path's share, loss and series, the reorder
    /// buffer's counts.
    pub mptun: MptunDetail,
    /// How mptun rode out the scenario's first cut, if it has one.
    pub failover: Option<Failover>,
}

impl SweepResult {
    fn of(number: usize, report: &LabReport) -> SweepResult {
        let mptun_mbps = report.systems.first().map_or(0.0, |s| s.goodput_mbps);
        let offered = report.scenario.offered_mbps(&report.path_rates_mbps);
        let sum_mbps: f64 = offered.iter().sum();
        let best_row = report
            .systems
            .iter()
            .filter(|s| s.name.starts_with("best path"))
            .map(|s| s.goodput_mbps);
        let best_path_mbps = offered.iter().copied().chain(best_row).fold(0.0, f64::max);
        let mptcp_wireguard_mbps = report
            .systems
            .iter()
            .find(|s| s.name.starts_with("MPTCP over"))
            .map(|s| s.goodput_mbps);
        let wireguard_best_mbps = report
            .systems
            .iter()
            .find(|s| s.name.starts_with("WireGuard, one tunnel"))
            .map(|s| s.goodput_mbps);
        let ratio = |of: f64| if of > 0.0 { mptun_mbps / of } else { 0.0 };
        let scenario = &report.scenario;
        let delay_spread_ms = scenario.delay_spread_ms();
        let known_class = (scenario.congestion_control == "bbr" && delay_spread_ms >= BBR_SKEW_MS)
            .then(|| "rtt skew with inner bbr".to_string());
        SweepResult {
            number,
            scenario: scenario.clone(),
            mptun_mbps,
            sum_mbps,
            best_path_mbps,
            mptcp_wireguard_mbps,
            wireguard_best_mbps,
            fraction_of_sum: ratio(sum_mbps),
            ratio_to_best: ratio(best_path_mbps),
            ratio_to_mptcp_wireguard: mptcp_wireguard_mbps.map(ratio),
            ratio_to_wireguard_best: wireguard_best_mbps.map(ratio),
            hold_p99_steady_ms: report.mptun.hold_p99_steady_ms,
            delay_spread_ms,
            known_class,
            steal_pct: report
                .systems
                .iter()
                .filter_map(|s| s.host.steal_pct)
                .reduce(f64::max),
            systems: report.systems.clone(),
            mptun: report.mptun.clone(),
            failover: report.failover.clone(),
        }
    }

    /// Whether the hold p99 after the first second is within the delay
    /// spread plus 5 ms (a flow that held nothing is within).
    pub fn hold_within_spread(&self) -> bool {
        self.hold_p99_steady_ms
            .is_none_or(|h| h <= self.delay_spread_ms + HOLD_MARGIN_MS)
    }
}

/// The sweep's figures over all its scenarios.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SweepSummary {
    /// Scenarios run.
    pub scenarios: usize,
    /// The lowest ratio of mptun to the best path, and in which scenario.
    pub min_ratio_to_best: Option<(f64, usize)>,
    /// Scenarios where mptun reached at least 0.95 of the best path.
    pub at_least_095_of_best: usize,
    /// Scenarios where mptun reached at least 0.95 of one WireGuard tunnel
    /// over the best path, of those where that was measured.
    pub at_least_095_of_wireguard_best: usize,
    /// See `at_least_095_of_wireguard_best`.
    pub wireguard_best_measured: usize,
    /// Median and 10th percentile of mptun's fraction of the sum.
    pub median_fraction_of_sum: Option<f64>,
    /// See `median_fraction_of_sum`.
    pub p10_fraction_of_sum: Option<f64>,
    /// Scenarios where mptun was at or above MPTCP over WireGuard, of those
    /// where that was measured.
    pub at_or_above_mptcp_wireguard: usize,
    /// See `at_or_above_mptcp_wireguard`.
    pub mptcp_wireguard_measured: usize,
    /// Scenarios whose hold p99 after the first second was within the
    /// delay spread + 5 ms.
    pub hold_within_spread: usize,
    /// Scenarios in a known class, by class: (class, count, lowest ratio to
    /// the best path).
    pub known_classes: Vec<(String, usize, f64)>,
    /// The same figures over the scenarios in no known class, if any were
    /// in one: how mptun does where it does not say it falls short.
    pub outside_known_classes: Option<Box<SweepSummary>>,
}

/// Return the `q` quantile (0..=1) of `values`, nearest rank.
fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

impl SweepSummary {
    pub fn of(results: &[SweepResult]) -> SweepSummary {
        let fractions: Vec<f64> = results.iter().map(|r| r.fraction_of_sum).collect();
        let mut known: Vec<(String, usize, f64)> = Vec::new();
        for r in results {
            let Some(class) = &r.known_class else {
                continue;
            };
            match known.iter_mut().find(|(c, _, _)| c == class) {
                Some(entry) => {
                    entry.1 += 1;
                    entry.2 = entry.2.min(r.ratio_to_best);
                }
                None => known.push((class.clone(), 1, r.ratio_to_best)),
            }
        }
        SweepSummary {
            scenarios: results.len(),
            min_ratio_to_best: results
                .iter()
                .map(|r| (r.ratio_to_best, r.number))
                .min_by(|a, b| a.0.total_cmp(&b.0)),
            at_least_095_of_best: results.iter().filter(|r| r.ratio_to_best >= 0.95).count(),
            at_least_095_of_wireguard_best: results
                .iter()
                .filter(|r| r.ratio_to_wireguard_best.is_some_and(|x| x >= 0.95))
                .count(),
            wireguard_best_measured: results
                .iter()
                .filter(|r| r.ratio_to_wireguard_best.is_some())
                .count(),
            median_fraction_of_sum: quantile(&fractions, 0.5),
            p10_fraction_of_sum: quantile(&fractions, 0.1),
            at_or_above_mptcp_wireguard: results
                .iter()
                .filter(|r| r.ratio_to_mptcp_wireguard.is_some_and(|x| x >= 1.0))
                .count(),
            mptcp_wireguard_measured: results
                .iter()
                .filter(|r| r.ratio_to_mptcp_wireguard.is_some())
                .count(),
            hold_within_spread: results.iter().filter(|r| r.hold_within_spread()).count(),
            outside_known_classes: (!known.is_empty()).then(|| {
                let outside: Vec<SweepResult> = results
                    .iter()
                    .filter(|r| r.known_class.is_none())
                    .cloned()
                    .collect();
                Box::new(SweepSummary::of(&outside))
            }),
            known_classes: known,
        }
    }
}

/// A scenario the lab could not run, twice.
#[derive(Clone, Debug, Serialize)]
pub struct SweepFailure {
    pub number: usize,
    pub scenario: Scenario,
    pub error: String,
}

/// A whole sweep, as `--json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct SweepReport {
    pub seed: u64,
    pub results: Vec<SweepResult>,
    /// Scenarios left out of the results and the summary.
    pub failed: Vec<SweepFailure>,
    pub summary: SweepSummary,
}

/// Run `count` scenarios drawn from `seed`, each with `--compare`;
/// `progress` gets a line per scenario as it finishes. A scenario the lab
/// fails to run (a process that did not start on a busy host) is tried
/// once more, then left out and reported: an hour's sweep is not lost to
/// one of them.
pub fn run(
    seed: u64,
    count: usize,
    base: &LabOptions,
    mut progress: impl FnMut(&str),
) -> SweepReport {
    let mut results = Vec::new();
    let mut failed = Vec::new();
    for (i, scenario) in draw(seed, count).into_iter().enumerate() {
        let number = i + 1;
        let options = LabOptions {
            scenario,
            scenario_name: format!("sweep seed {seed} #{number}"),
            compare: true,
            json: true,
            mptun_exe: base.mptun_exe.clone(),
        };
        let report = crate::run::run(&options).or_else(|e| {
            progress(&format!("#{number}: {e:#}; running it again"));
            crate::run::run(&options)
        });
        match report {
            Ok(report) => {
                let result = SweepResult::of(number, &report);
                progress(&render_line(&result));
                results.push(result);
            }
            Err(e) => {
                progress(&format!("#{number}: {e:#}; left out"));
                failed.push(SweepFailure {
                    number,
                    scenario: options.scenario,
                    error: format!("{e:#}"),
                });
            }
        }
    }
    let summary = SweepSummary::of(&results);
    SweepReport {
        seed,
        results,
        failed,
        summary,
    }
}

/// Describe a scenario's paths in one short line.
pub fn describe(s: &Scenario) -> String {
    let paths: Vec<String> = s
        .path
        .iter()
        .map(|p| {
            let mut d = format!("{}@{}", p.rate_mbit.unwrap_or(0.0), p.delay_ms);
            if p.jitter_ms > 0.0 {
                let _ = write!(d, "~{}", p.jitter_ms);
            }
            if p.loss_pct > 0.0 {
                let _ = write!(d, "/{}%", p.loss_pct);
            }
            d
        })
        .collect();
    let cut = s
        .event
        .first()
        .map_or(String::new(), |e| format!(", cut {} at {} s", e.path, e.at));
    format!("{} {}{cut}", s.congestion_control, paths.join(" "))
}

fn render_line(r: &SweepResult) -> String {
    format!(
        "#{:<3} {:>7.1} {:>6.0}% {:>6.2} {:>8} {:>9} {:>9} {:>7.1} {:>8}  {}{}",
        r.number,
        r.mptun_mbps,
        100.0 * r.fraction_of_sum,
        r.ratio_to_best,
        r.ratio_to_wireguard_best
            .map_or("-".into(), |x| format!("{x:.2}")),
        r.ratio_to_mptcp_wireguard
            .map_or("-".into(), |x| format!("{x:.2}")),
        r.hold_p99_steady_ms
            .map_or("-".into(), |h| format!("{h:.1}")),
        r.delay_spread_ms,
        r.systems
            .first()
            .and_then(|mptun| mptun.hystart)
            .map_or("-".into(), |h| format!("{:.0}", h.mean_window)),
        describe(&r.scenario),
        r.known_class
            .as_ref()
            .map_or(String::new(), |c| format!(" [{c}]")),
    )
}

/// The header of the lines [`run`] passes to `progress`.
///
/// `HyStart` is the window (packets) at which HyStart ended mptun's slow
/// start, if it did.
pub const HEADER: &str =
    "#     Mbit/s  of sum  /best /WG-best /MPTCP-WG  hold p99  spread  HyStart  scenario (Mbit/s@ms~jitter/loss)";

/// Render a sweep as text.
pub fn render(report: &SweepReport) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "sweep seed {}", report.seed);
    let _ = writeln!(o, "{HEADER}");
    for r in &report.results {
        let _ = writeln!(o, "{}", render_line(r));
    }
    for f in &report.failed {
        let _ = writeln!(
            o,
            "#{:<3} not run: {}  {}",
            f.number,
            f.error,
            describe(&f.scenario)
        );
    }
    let s = &report.summary;
    let _ = writeln!(o, "summary over {} scenarios:", s.scenarios);
    render_bars(&mut o, s);
    for (class, count, lowest) in &s.known_classes {
        let _ = writeln!(
            o,
            "  known class \"{class}\": {count} scenario(s), lowest mptun / best path {lowest:.2}"
        );
    }
    if let Some(outside) = &s.outside_known_classes {
        let _ = writeln!(
            o,
            "summary over the {} scenarios in no known class:",
            outside.scenarios
        );
        render_bars(&mut o, outside);
    }
    o
}

/// Render the bars' figures of a summary, a line each.
fn render_bars(o: &mut String, s: &SweepSummary) {
    let n = s.scenarios.max(1) as f64;
    if let Some((ratio, number)) = s.min_ratio_to_best {
        let _ = writeln!(
            o,
            "  mptun / best path: lowest {ratio:.2} (#{number}); at least 0.95 in {} of {}",
            s.at_least_095_of_best, s.scenarios
        );
    }
    let _ = writeln!(
        o,
        "  mptun / one WireGuard tunnel over the best path: at least 0.95 in {} of {} measured",
        s.at_least_095_of_wireguard_best, s.wireguard_best_measured
    );
    if let (Some(median), Some(p10)) = (s.median_fraction_of_sum, s.p10_fraction_of_sum) {
        let _ = writeln!(
            o,
            "  mptun / sum of paths: median {median:.2}, 10th percentile {p10:.2}"
        );
    }
    let _ = writeln!(
        o,
        "  mptun at or above MPTCP over WireGuard: {} of {} measured",
        s.at_or_above_mptcp_wireguard, s.mptcp_wireguard_measured
    );
    let _ = writeln!(
        o,
        "  hold p99 after the first second within the delay spread + 5 ms: {} of {} ({:.0}%)",
        s.hold_within_spread,
        s.scenarios,
        100.0 * s.hold_within_spread as f64 / n
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drawn_values_print_as_the_steps_they_are_rounded_to() {
        assert_eq!(round_to(1.23, 0.1).to_string(), "1.2");
        assert_eq!(round_to(2.8, 0.1).to_string(), "2.8");
        assert_eq!(round_to(63.4, 0.5).to_string(), "63.5");
    }

    #[test]
    fn a_seed_draws_the_same_scenarios_every_time() {
        let a = draw(7, 30);
        let b = draw(7, 30);
        assert_eq!(
            a.iter().map(describe).collect::<Vec<_>>(),
            b.iter().map(describe).collect::<Vec<_>>()
        );
        assert_ne!(
            a.iter().map(describe).collect::<Vec<_>>(),
            draw(8, 30).iter().map(describe).collect::<Vec<_>>()
        );
    }

    #[test]
    fn drawn_scenarios_stay_within_the_documented_distribution() {
        let scenarios = draw(1, 500);
        let mut counts = [0usize; 7];
        let (mut lossy, mut cut, mut bbr) = (0, 0, 0);
        for s in &scenarios {
            let text = toml::to_string(s).expect("a scenario serializes");
            Scenario::parse(&text, "drawn").expect("a drawn scenario is valid");
            counts[s.path.len()] += 1;
            let sum = s.sum_rate_mbit();
            assert!(sum <= MAX_SUM_MBIT + 5.0 * s.path.len() as f64, "{sum}");
            for p in &s.path {
                let rate = p.rate_mbit.expect("every drawn path is shaped");
                assert!((5.0..=400.0).contains(&rate), "{rate}");
                assert!((1.0..=80.0).contains(&p.delay_ms), "{}", p.delay_ms);
                assert!(p.jitter_ms <= 5.0 && p.jitter_ms <= p.delay_ms);
                assert!(p.loss_pct <= 3.0);
                lossy += usize::from(p.loss_pct > 0.0);
            }
            cut += usize::from(!s.event.is_empty());
            bbr += usize::from(s.congestion_control == "bbr");
        }
        assert_eq!(counts[0] + counts[1], 0);
        assert!(counts[2..].iter().all(|&c| c > 60), "{counts:?}");
        let paths: usize = scenarios.iter().map(|s| s.path.len()).sum();
        assert!((0.18..0.32).contains(&(lossy as f64 / paths as f64)));
        assert!((60..140).contains(&cut), "{cut}");
        assert!((200..300).contains(&bbr), "{bbr}");
    }

    #[test]
    fn a_line_shows_where_hystart_ended_mptun_s_slow_start() {
        let mptun = |hystart| SystemResult {
            name: "mptun".into(),
            goodput_mbps: 200.0,
            fraction_of_sum: 0.5,
            retransmits: 0,
            rto_timeouts: 0,
            hystart,
            spurious_retransmits: 0,
            series_mbps: Vec::new(),
            host: Default::default(),
            cpu_s_per_gb: None,
        };
        let line = |hystart| {
            let mut r = SweepResult::of(
                12,
                &LabReport {
                    scenario_name: "sweep".into(),
                    scenario: draw(1123, 12).remove(11),
                    path_rates_mbps: vec![100.0, 300.0],
                    path_rates_measured: true,
                    systems: vec![mptun(hystart)],
                    mptun: Default::default(),
                    failover: None,
                },
            );
            r.delay_spread_ms = 68.0;
            render_line(&r)
        };
        let exit = crate::run::HystartExit {
            exits: 1,
            on_delay: 1,
            mean_window: 1319.6,
        };
        let with = line(Some(exit));
        assert!(with.contains("   68.0     1320  cubic"), "{with}");
        let without = line(None);
        assert!(without.contains("   68.0        -  cubic"), "{without}");
        // Every figure ends under the end of its column's name.
        for (name, figure) in [("Mbit/s", "200.0"), ("spread", "68.0"), ("HyStart", "1320")] {
            assert_eq!(
                HEADER.find(name).map(|i| i + name.len()),
                with.find(figure).map(|i| i + figure.len()),
                "{name}\n{HEADER}\n{with}"
            );
        }
    }

    #[test]
    fn a_row_keeps_mptun_s_paths_and_failover_for_the_json() {
        let report = LabReport {
            scenario_name: "sweep".into(),
            scenario: draw(10313, 7).remove(6),
            path_rates_mbps: vec![7.0, 38.0, 74.0, 9.0, 208.0, 264.0],
            path_rates_measured: true,
            systems: Vec::new(),
            mptun: MptunDetail {
                path_series_mbps: vec![vec![180.0, 61.0, 0.0]],
                ..Default::default()
            },
            failover: Some(Failover {
                path: 5,
                cut_at_s: 3.5,
                goodput_1s_after_mbps: 63.0,
                surviving_sum_mbps: 592.0,
                restored_at_s: Some(6.0),
                carries_again_after_s: Some(0.5),
            }),
        };
        let json = serde_json::to_value(SweepResult::of(7, &report)).expect("serializes");
        assert_eq!(json["mptun"]["path_series_mbps"][0][1], 61.0, "{json}");
        assert_eq!(json["failover"]["path"], 5, "{json}");
        assert_eq!(json["failover"]["carries_again_after_s"], 0.5, "{json}");
    }

    /// A result of mptun at 100 Mbit/s with these ratios, the paths 10
    /// ms apart, in no known class.
    fn result(
        number: usize,
        fraction: f64,
        best: f64,
        mptcp: f64,
        wireguard: f64,
        hold: f64,
    ) -> SweepResult {
        SweepResult {
            number,
            scenario: draw(1, 1).remove(0),
            mptun_mbps: 100.0,
            sum_mbps: 100.0 / fraction,
            best_path_mbps: 100.0 / best,
            mptcp_wireguard_mbps: Some(100.0 / mptcp),
            wireguard_best_mbps: Some(100.0 / wireguard),
            fraction_of_sum: fraction,
            ratio_to_best: best,
            ratio_to_mptcp_wireguard: Some(mptcp),
            ratio_to_wireguard_best: Some(wireguard),
            hold_p99_steady_ms: Some(hold),
            delay_spread_ms: 10.0,
            known_class: None,
            steal_pct: None,
            systems: Vec::new(),
            mptun: Default::default(),
            failover: None,
        }
    }

    #[test]
    fn the_summary_takes_quantiles_and_the_worst_case() {
        let results: Vec<SweepResult> = (1..=10)
            .map(|i| {
                let f = i as f64 / 10.0;
                result(
                    i,
                    f,
                    1.0 + f,
                    if i > 5 { 1.1 } else { 0.9 },
                    if i > 4 { 0.96 } else { 0.94 },
                    10.0 + i as f64,
                )
            })
            .collect();
        let s = SweepSummary::of(&results);
        assert!(s.outside_known_classes.is_none(), "no known class");
        assert_eq!(s.median_fraction_of_sum, Some(0.5));
        assert_eq!(s.p10_fraction_of_sum, Some(0.1));
        assert_eq!(s.min_ratio_to_best, Some((1.1, 1)));
        assert_eq!(s.at_or_above_mptcp_wireguard, 5);
        assert_eq!(s.at_least_095_of_wireguard_best, 6);
        assert_eq!(s.wireguard_best_measured, 10);
        assert_eq!(s.hold_within_spread, 5);
    }

    #[test]
    fn the_summary_gives_the_bars_outside_the_known_classes_apart() {
        // Rows 1-3 in a known class and far under the bars, 4-6 over them.
        let results: Vec<SweepResult> = (1..=6)
            .map(|i| {
                let over = i > 3;
                let mut r = if over {
                    result(i, 0.95, 1.2, 1.1, 1.1, 12.0)
                } else {
                    result(i, 0.3, 0.4, 0.5, 0.4, 80.0)
                };
                r.known_class = (!over).then(|| "rtt skew with inner bbr".to_string());
                r
            })
            .collect();
        let s = SweepSummary::of(&results);
        assert_eq!(s.at_least_095_of_best, 3);
        assert_eq!(
            s.known_classes,
            vec![("rtt skew with inner bbr".to_string(), 3, 0.4)]
        );
        let outside = s.outside_known_classes.as_deref().expect("rows outside");
        assert_eq!(outside.scenarios, 3);
        assert_eq!(outside.min_ratio_to_best, Some((1.2, 4)));
        assert_eq!(outside.at_least_095_of_best, 3);
        assert_eq!(outside.median_fraction_of_sum, Some(0.95));
        assert_eq!(outside.at_or_above_mptcp_wireguard, 3);
        assert_eq!(outside.hold_within_spread, 3);
        assert!(outside.outside_known_classes.is_none());
        let text = render(&SweepReport {
            seed: 1,
            results,
            failed: Vec::new(),
            summary: s,
        });
        assert!(
            text.contains("summary over the 3 scenarios in no known class:\n  mptun / best path: lowest 1.20 (#4); at least 0.95 in 3 of 3"),
            "{text}"
        );
    }
}
