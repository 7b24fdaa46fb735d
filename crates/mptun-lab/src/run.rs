//! `mptun lab`: build the lab, run one TCP flow through mptun (and, with
//! `--compare`, through what users would otherwise pick), report.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use mptun_core::HoldHistogram;
use mptun_netem::topology::Mode;
use mptun_netem::{DirSpec, Topology, TopologyOptions};
use serde::Serialize;

use crate::rtt::{tcp_request_rtt_ms, TOS_EF};
use crate::scenario::Scenario;
use crate::sites::{ping, Iperf, Site, SiteLayout, Sites, TcpResult, TUNNEL_B};
use crate::wireguard;
use mptun::status::{PathStatus, ReorderStatus, Status};

/// What `mptun lab` was asked to do.
pub struct LabOptions {
    /// The scenario to run.
    pub scenario: Scenario,
    /// Its name, for the report.
    pub scenario_name: String,
    /// Also measure the alternatives over the same paths.
    pub compare: bool,
    /// Say nothing on stderr while running (the report goes out as JSON).
    pub json: bool,
    /// The `mptun` executable to run on the sites.
    pub mptun_exe: PathBuf,
}

/// Goodput of one system.
#[derive(Clone, Debug, Serialize)]
pub struct SystemResult {
    /// What was measured.
    pub name: String,
    /// Receiver-side goodput.
    pub goodput_mbps: f64,
    /// Goodput over the sum of the paths' own single-flow rates, each for
    /// the share of the flow its path is up.
    pub fraction_of_sum: f64,
    /// TCP retransmissions at the sender.
    pub retransmits: u64,
    /// Retransmission timeouts the sending host's TCP took (TCPTimeouts).
    pub rto_timeouts: u64,
    /// How HyStart ended slow start, if it did: early, below the window the
    /// sum of the paths needs, it leaves the flow to grow by CUBIC's curve.
    pub hystart: Option<HystartExit>,
    /// Retransmissions the receiver reported as duplicates (D-SACKs):
    /// the data was only late, reordered past the sender's tolerance.
    pub spurious_retransmits: u64,
    /// Goodput every half second: what the receiver got in each interval
    /// (iperf3's server intervals).
    pub series_mbps: Vec<f64>,
    /// How well the host kept up while this system was measured.
    pub host: HostConditions,
    /// CPU seconds its tunnel processes (both sites) spent per GB of
    /// goodput; none for systems without one.
    pub cpu_s_per_gb: Option<f64>,
}

/// HyStart's exits from slow start during one system's flow (Linux counts
/// them per host; every flow of the system is summed).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct HystartExit {
    /// Slow starts HyStart ended.
    pub exits: u64,
    /// Of those, on a round trip that grew by an eighth (4 to 16 ms); the
    /// others on a train of ACKs as long as the least round trip.
    pub on_delay: u64,
    /// Mean congestion window at the exits, packets.
    pub mean_window: f64,
}

/// How well the lab's host kept up during a flow. Everything runs on the
/// same few cores (both sites, the emulator, iperf3), so a busy host shows
/// up as lower rates and longer holds that are not the system's own.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct HostConditions {
    /// CPU time the hypervisor gave to others (steal), % of the host's.
    pub steal_pct: Option<f64>,
    /// Frames the emulator released at least 1 ms after their time, % of
    /// those it released.
    pub emulator_late_pct: Option<f64>,
    /// ... at least 5 ms after their time.
    pub emulator_very_late_pct: Option<f64>,
}

impl HostConditions {
    /// Whether figures measured under these conditions are suspect.
    fn noisy(&self) -> bool {
        self.steal_pct.is_some_and(|s| s >= NOISY_STEAL_PCT)
            || self
                .emulator_very_late_pct
                .is_some_and(|l| l >= NOISY_VERY_LATE_PCT)
    }
}

/// Steal at which the host is too busy for figures to be compared.
pub const NOISY_STEAL_PCT: f64 = 5.0;
/// Share of frames released very late at which paths' delays were not what
/// the scenario asked for often enough to move a hold p99.
const NOISY_VERY_LATE_PCT: f64 = 0.1;

/// What mptun did during its flow.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MptunDetail {
    /// Site A's TUN MTU and where it came from.
    pub tun_mtu: u16,
    pub tun_mtu_source: String,
    /// Share of the data bytes each path carried.
    pub path_shares: Vec<f64>,
    /// Per path, the fraction of the data packets site A sent that site B
    /// did not receive: the path's random loss and its queue's overflow.
    pub path_loss: Vec<f64>,
    /// Per path, the rate site A's probe trains arrived at before the flow,
    /// Mbit/s: what mptun took the path for before data measured it.
    pub path_train_mbps: Vec<Option<f64>>,
    /// Per path, Mbit/s sent every half second.
    pub path_series_mbps: Vec<Vec<f64>>,
    /// Packets the receiver's reorder buffer held for an earlier one.
    pub reorder_held: u64,
    /// Gaps released as lost on evidence.
    pub reorder_skipped_loss: u64,
    /// Gaps released when the hold time ran out.
    pub reorder_skipped_timeout: u64,
    /// Lost packets the receiver asked for again.
    pub reorder_repairs_requested: u64,
    /// Of those, packets that came in time to fill their gap.
    pub reorder_repaired: u64,
    /// Repairs that came after the packets behind their loss were released
    /// (a loss found after a pause, or a repair slower than the repair
    /// patience), handed out late.
    pub reorder_repaired_late: u64,
    /// Losses on a congested path, released at once, not asked for.
    pub reorder_congestion_losses: u64,
    /// Packets the receiver asked for that the sender no longer had.
    pub repairs_gone: u64,
    /// Packets the receiver asked for that the sender did not resend, as
    /// no path would have brought them while of use, nor, later, had room.
    pub repairs_too_late: u64,
    /// Times, on both sites and all paths, a probe's echo was overdue enough
    /// for new data to avoid the path.
    pub late_echoes: u64,
    /// Packets dropped as late or duplicate.
    pub reorder_dropped: u64,
    /// Times, on both sites, a path stopped carrying data (found down,
    /// lost its session or set aside) since the sites started: startup
    /// and the flow both count.
    pub path_flaps: u64,
    /// The sites' log lines of those changes ("site a: ... path down:
    /// probes unanswered path=path[2] ... silent_ms=174"), so that a flap
    /// says which path and why.
    pub path_changes: Vec<String>,
    /// Inner packets site A dropped during the flow for want of a usable
    /// path.
    pub tun_dropped_no_path: u64,
    /// Inner packets site A dropped during the flow because a path's
    /// worker fell behind (its queue was full).
    pub tun_dropped_path_queue_full: u64,
    /// Median and 99th percentile of how long held packets waited.
    pub hold_p50_ms: Option<f64>,
    /// See `hold_p50_ms`.
    pub hold_p99_ms: Option<f64>,
    /// The 99th percentile without the flow's first second, when the
    /// inner flow ramps up and the paths' capacities are not measured yet.
    pub hold_p99_steady_ms: Option<f64>,
    /// The waits after the flow's first second longer than the delay
    /// spread + [`HOLD_MARGIN_MS`], by what ended them: where a hold p99
    /// over that comes from.
    pub hold_over_spread: Option<WaitsOver>,
    /// The configured paths' one-way delay spread, for comparison.
    pub delay_spread_ms: f64,
    /// Median ping RTT through the tunnel at idle, minus over the best path
    /// alone.
    pub added_latency_ms: f64,
    /// Median idle ping RTT through the tunnel.
    pub tunnel_rtt_ms: f64,
    /// Median idle ping RTT over the best path alone.
    pub best_path_rtt_ms: f64,
    /// The paths the idle pings took.
    pub idle_ping_paths: IdlePingPaths,
    /// Median round trip of small TCP requests and responses at idle,
    /// marked EF (a low-latency class: not held), through the tunnel.
    pub tcp_request_rtt_ef_ms: f64,
    /// The same unmarked: held to the farthest path's delay.
    pub tcp_request_rtt_unmarked_ms: f64,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct LabReport {
    /// The scenario file's name.
    pub scenario_name: String,
    /// The scenario.
    pub scenario: Scenario,
    /// Each path's own single-flow rate, measured in this run (with
    /// `--compare`), else the configured rates.
    pub path_rates_mbps: Vec<f64>,
    /// Whether `path_rates_mbps` was measured.
    pub path_rates_measured: bool,
    /// One entry per system, mptun first.
    pub systems: Vec<SystemResult>,
    /// mptun's details.
    pub mptun: MptunDetail,
    /// How mptun rode out the scenario's first cut, if it has one.
    pub failover: Option<Failover>,
}

/// mptun's goodput around a path cut and its restoration.
#[derive(Clone, Debug, Serialize)]
pub struct Failover {
    /// The path cut (from 1) and when, seconds into the flow.
    pub path: usize,
    /// See `path`.
    pub cut_at_s: f64,
    /// Goodput over the half second ending 1 s after the cut.
    pub goodput_1s_after_mbps: f64,
    /// The surviving paths' rates, summed.
    pub surviving_sum_mbps: f64,
    /// When the path was restored, if it was.
    pub restored_at_s: Option<f64>,
    /// How long after that mptun sent data on it again (to 0.5 s).
    pub carries_again_after_s: Option<f64>,
}

/// How often the flow's goodput and mptun's counters are sampled.
const SAMPLE: Duration = Duration::from_millis(500);
/// How long after the flow's start its steady state is taken to begin.
const STEADY_AFTER: Duration = Duration::from_secs(1);

/// How far above the paths' delay spread a hold p99 after the flow's first
/// second may go for the sweep to count the row within it.
pub const HOLD_MARGIN_MS: f64 = 5.0;

/// The waits between two of B's status reports longer than a limit, by
/// what ended them (see `mptun_core::WaitEnd`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WaitsOver {
    pub limit_ms: f64,
    /// Every wait between the two reports.
    pub waits: u64,
    /// Of those over the limit: its gap's own packet came, late.
    pub reordered: u64,
    /// A repair filled its gap.
    pub repaired: u64,
    /// Its gap was given up on.
    pub given_up: u64,
}

impl WaitsOver {
    fn between(start: &ReorderStatus, end: &ReorderStatus, limit_ms: f64) -> WaitsOver {
        let limit = Duration::from_secs_f64(limit_ms.max(0.0) / 1000.0);
        let over = |earlier: &[(u32, u64)], later: &[(u32, u64)]| {
            waits_since(earlier, later).count_above(limit)
        };
        let (before, after) = (&start.wait_buckets_by_end, &end.wait_buckets_by_end);
        WaitsOver {
            limit_ms,
            waits: waits_since(&start.wait_buckets, &end.wait_buckets).count(),
            reordered: over(&before.reordered, &after.reordered),
            repaired: over(&before.repaired, &after.repaired),
            given_up: over(&before.given_up, &after.given_up),
        }
    }
}

/// The waits recorded between two snapshots of a histogram's buckets.
fn waits_since(earlier: &[(u32, u64)], later: &[(u32, u64)]) -> HoldHistogram {
    HoldHistogram::from_buckets(later).since(&HoldHistogram::from_buckets(earlier))
}

fn require_tools() -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("the lab creates network namespaces: run it as root (sudo)");
    }
    for (tool, package) in [
        ("iperf3", "iperf3"),
        ("ping", "iputils-ping"),
        ("ip", "iproute2"),
        ("tc", "iproute2"),
    ] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            bail!("`{tool}` not found: install it (apt-get install {package})");
        }
    }
    Ok(())
}

fn netem_bin() -> anyhow::Result<PathBuf> {
    mptun_netem::topology::find_netem_bin().context(
        "mptun-netem (the link emulator) not found next to mptun or on PATH; \
         build both with `cargo build --release`",
    )
}

fn dir_spec(p: &crate::scenario::PathSpec) -> DirSpec {
    DirSpec {
        rate_mbit: p.rate_mbit,
        delay_ms: Some(p.delay_ms),
        jitter_ms: Some(p.jitter_ms),
        loss_pct: Some(p.loss_pct),
        burst_loss: None,
        queue_bytes: None,
    }
}

/// Run the lab; progress goes to stderr unless `options.json`.
pub fn run(options: &LabOptions) -> anyhow::Result<LabReport> {
    require_tools()?;
    let exe = &options.mptun_exe;
    let scenario = &options.scenario;
    let say = |text: &str| {
        if !options.json {
            eprintln!("{text}");
        }
    };
    say(&format!(
        "lab: {} path(s) ({}), {} s flows, inner TCP {}",
        scenario.path.len(),
        options.scenario_name,
        scenario.duration,
        scenario.congestion_control
    ));
    let mut topo = build_topology(scenario)?;
    let ns_a = topo.ns_a();
    let ns_b = topo.ns_b();
    // The scenario's flow from site A to `addr`, as every system runs it.
    let flow_to = |addr: String| Iperf {
        client_ns: &ns_a,
        server_ns: &ns_b,
        server_addr: addr,
        duration: scenario.duration,
        streams: 1,
        congestion: Some(&scenario.congestion_control),
        extra: vec![],
        wrapper: vec![],
    };
    let mut systems = Vec::new();
    let mut path_rates: Vec<f64> = scenario
        .path
        .iter()
        .map(|p| p.rate_mbit.unwrap_or(0.0))
        .collect();
    if options.compare {
        say("measuring each path alone...");
        for i in 1..=scenario.path.len() {
            let r = flow(&flow_to(topo.addr_b(i).to_string()))?;
            path_rates[i - 1] = r.0.goodput_mbps;
        }
    }
    let best = scenario.best_path_measured(options.compare.then_some(&path_rates[..]));
    let sum: f64 = scenario.offered_mbps(&path_rates).iter().sum();
    let system = |name: &str, m: Measured, cpu_s: Option<f64>| SystemResult {
        cpu_s_per_gb: cpu_s.and_then(|cpu| {
            let gb = m.tcp.goodput_mbps * scenario.duration / 8e3;
            (gb > 0.0).then(|| cpu / gb)
        }),
        name: name.to_string(),
        goodput_mbps: m.tcp.goodput_mbps,
        fraction_of_sum: if sum > 0.0 {
            m.tcp.goodput_mbps / sum
        } else {
            0.0
        },
        retransmits: m.tcp.retransmits,
        rto_timeouts: m.sender.map_or(0, |c| c.timeouts),
        hystart: m.sender.and_then(|c| c.hystart()),
        spurious_retransmits: m.sender.map_or(0, |c| c.dsacks),
        series_mbps: m.series_mbps,
        host: m.host,
    };

    // mptun.
    say("mptun: starting both sites...");
    let mut layout = SiteLayout::all_paths(&topo);
    if let Some(scheduler) = &scenario.scheduler {
        layout.extra_interface = format!("scheduler = {scheduler:?}");
    }
    let sites = Sites::start(exe, &topo, &layout)?;
    // Idle figures once the paths' delays are measured (the first probes
    // and trains): before, a ping may take any path.
    std::thread::sleep(Duration::from_secs(1));
    let before_ping = (sites.status(Site::A)?, sites.status(Site::B)?);
    let idle_tunnel = ping(&ns_a, TUNNEL_B, 20)?;
    let after_ping = (sites.status(Site::A)?, sites.status(Site::B)?);
    let idle_best = ping(&ns_a, &topo.addr_b(best + 1).to_string(), 20)?;
    let tunnel_b: std::net::Ipv4Addr = TUNNEL_B.parse()?;
    let idle = IdleRtts {
        tunnel_ping_ms: idle_tunnel.median_ms,
        best_path_ping_ms: idle_best.median_ms,
        ping_paths: IdlePingPaths::between(&before_ping, &after_ping),
        tcp_ef_ms: tcp_request_rtt_ms(&ns_a, &ns_b, tunnel_b, TOS_EF, 20)?,
        tcp_unmarked_ms: tcp_request_rtt_ms(&ns_a, &ns_b, tunnel_b, 0, 20)?,
    };
    let a_before = sites.status(Site::A)?;
    let b_before = sites.status(Site::B)?;
    say("mptun: one TCP flow...");
    let tunnel_pids = sites.pids();
    let cpu_before = cpu_seconds(&tunnel_pids);
    let (measured, sampled) = {
        let data_began = DataBegan::default();
        let sampler = Sampler::start(&sites, data_began.clone());
        let r = flow_with_events(
            &mut topo,
            scenario,
            flow_to(TUNNEL_B.to_string()),
            Some(data_began.as_ref()),
        )?;
        (r, sampler.finish())
    };
    let mptun_cpu = cpu_seconds(&tunnel_pids)
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    let a_after = sites.status(Site::A)?;
    let b_after = sites.status(Site::B)?;
    let path_changes = path_warnings(&sites);
    drop(sites);
    let snapshots = Snapshots {
        a0: a_before,
        a1: a_after,
        b0: b_before,
        b1: b_after,
        b_steady: sampled.b_steady,
    };
    let mptun = mptun_detail(
        &snapshots,
        sampled.path_series_mbps,
        path_changes,
        &idle,
        scenario.delay_spread_ms(),
    );
    systems.push(system("mptun", measured, mptun_cpu));

    if options.compare {
        say("best single path alone...");
        let best_addr = topo.addr_b(best + 1).to_string();
        let r = flow_with_events(&mut topo, scenario, flow_to(best_addr), None)?;
        systems.push(system(&format!("best path (path {})", best + 1), r, None));

        let wireguard_go = wireguard::find();
        let path_mtu = scenario.path_mtu.unwrap_or(1500);
        if let Some(wg) = &wireguard_go {
            say("WireGuard (wireguard-go), one tunnel over the best path...");
            let tunnel = wireguard::Tunnels::start(wg, &topo, &[best + 1], "", path_mtu)?;
            let pids = tunnel.pids();
            let before = cpu_seconds(&pids);
            let addr = wireguard::inner_addr(best + 1, 2);
            let r = flow_with_events(&mut topo, scenario, flow_to(addr), None)?;
            let cpu = cpu_seconds(&pids).zip(before).map(|(a, b)| a - b);
            systems.push(system("WireGuard, one tunnel", r, cpu));
        } else {
            say(
                "wireguard-go not found (go install golang.zx2c4.com/wireguard@latest): \
                 no WireGuard row, and ECMP over single-path mptun tunnels instead",
            );
        }

        let ecmp = match &wireguard_go {
            Some(wg) => {
                say("per-flow ECMP over one WireGuard tunnel per path...");
                Ecmp::wireguard(wg, &topo, path_mtu)?
            }
            None => {
                say("per-flow ECMP over one single-path mptun tunnel per path...");
                Ecmp::mptun(exe, &topo)?
            }
        };
        let bind = vec!["-B".to_string(), ECMP_SRC.to_string()];
        for (streams, name) in [(1, "ECMP, 1 flow"), (8, "ECMP, 8 flows")] {
            let pids = ecmp.pids();
            let before = cpu_seconds(&pids);
            let iperf = Iperf {
                streams,
                extra: bind.clone(),
                ..flow_to(ECMP_DST.to_string())
            };
            let r = flow_with_events(&mut topo, scenario, iperf, None)?;
            let cpu = cpu_seconds(&pids).zip(before).map(|(a, b)| a - b);
            systems.push(system(name, r, cpu));
        }

        // The fair peer for encrypted site-to-site links: one MPTCP
        // connection with one subflow inside each of the same tunnels.
        let name = match ecmp {
            Ecmp::WireGuard(_) => "MPTCP over WireGuard",
            Ecmp::Mptun(_) => "MPTCP over mptun tunnels",
        };
        say(&format!(
            "one MPTCP connection, one subflow per tunnel ({name})..."
        ));
        let inner: Vec<(String, String)> = (1..=topo.paths())
            .map(|i| (wireguard::inner_addr(i, 2), ecmp.interface_b(i)))
            .collect();
        match mptcp_setup(&topo, &inner) {
            Ok(wrapper) => {
                let pids = ecmp.pids();
                let before = cpu_seconds(&pids);
                let first = inner[0].0.clone();
                let iperf = Iperf {
                    wrapper,
                    ..flow_to(first)
                };
                let r = flow_with_events(&mut topo, scenario, iperf, None)?;
                let cpu = cpu_seconds(&pids).zip(before).map(|(a, b)| a - b);
                systems.push(system(name, r, cpu));
            }
            Err(e) => say(&format!("{name} skipped: {e:#}")),
        }
        drop(ecmp);

        say("one MPTCP connection (unencrypted)...");
        let links: Vec<(String, String)> = (1..=topo.paths())
            .map(|i| (topo.addr_b(i).to_string(), topo.if_b(i)))
            .collect();
        match mptcp_setup(&topo, &links) {
            Ok(wrapper) => {
                let first = links[0].0.clone();
                let iperf = Iperf {
                    wrapper,
                    ..flow_to(first)
                };
                let r = flow_with_events(&mut topo, scenario, iperf, None)?;
                systems.push(system("MPTCP", r, None));
            }
            Err(e) => say(&format!("MPTCP skipped: {e:#}")),
        }
    }

    let failover = failover(
        scenario,
        &path_rates,
        &systems[0].series_mbps,
        &mptun.path_series_mbps,
    );
    Ok(LabReport {
        scenario_name: options.scenario_name.clone(),
        scenario: scenario.clone(),
        path_rates_mbps: path_rates,
        path_rates_measured: options.compare,
        systems,
        mptun,
        failover,
    })
}

/// Most a TCP socket of the lab's end hosts may buffer, bytes, each way:
/// as hosts are tuned for long fat paths, so that the paths limit every
/// system's flow and not the hosts. A new namespace takes the host's
/// limits (Linux's default send limit is 4 MB, one 4 MB window a round
/// trip), which would make every figure depend on the machine's sysctls
/// and cap a flow on a far path below the path's rate.
const TCP_BUFFER_MAX: u64 = 64 << 20;

/// Build the lab's namespaces and paths for `scenario`, with the end
/// hosts' TCP buffer limits set.
pub(super) fn build_topology(scenario: &Scenario) -> anyhow::Result<Topology> {
    let mode = if scenario.unshaped() {
        Mode::Plain {
            paths: scenario.path.len(),
            mtu: scenario.path_mtu.unwrap_or(1500),
        }
    } else {
        Mode::Emulated {
            paths: scenario.path.iter().map(dir_spec).collect(),
            seed: 1,
            netem_bin: netem_bin()?,
        }
    };
    let topo = Topology::build(
        TopologyOptions {
            subnet: 200,
            prefix: None,
        },
        mode,
    )
    .context("build the lab namespaces")?;
    for ns in [topo.ns_a(), topo.ns_b()] {
        sh(
            &ns,
            &format!(
                "sysctl -qw net.ipv4.tcp_rmem='4096 131072 {TCP_BUFFER_MAX}' \
                 net.ipv4.tcp_wmem='4096 16384 {TCP_BUFFER_MAX}'"
            ),
        )
        .context("set the end hosts' TCP buffer limits")?;
    }
    Ok(topo)
}

/// One system's flow.
struct Measured {
    tcp: TcpResult,
    /// Goodput every half second (see [`SystemResult::series_mbps`]).
    series_mbps: Vec<f64>,
    /// What the sending host's TCP counted during the flow, if its counters
    /// could be read before and after.
    sender: Option<SenderCounters>,
    host: HostConditions,
}

/// Look at mptun's goodput around the scenario's first cut.
fn failover(
    scenario: &Scenario,
    rates: &[f64],
    series: &[f64],
    per_path: &[Vec<f64>],
) -> Option<Failover> {
    let cut = scenario.event.iter().find(|e| e.sets_up() == Some(false))?;
    let restore = scenario
        .event
        .iter()
        .find(|e| e.path == cut.path && e.at > cut.at && e.sets_up() == Some(true));
    let interval = SAMPLE.as_secs_f64();
    // Sample k covers (k, k+1] half seconds of the flow.
    let sample_ending = |t: f64| ((t / interval).round() as usize).checked_sub(1);
    let goodput_1s_after = sample_ending(cut.at + 1.0)
        .and_then(|k| series.get(k))
        .copied()
        .unwrap_or(0.0);
    let carries_again_after_s = restore.and_then(|r| {
        let path = per_path.get(cut.path - 1)?;
        let first = sample_ending(r.at).map_or(0, |k| k + 1);
        (first..path.len())
            .find(|&k| path[k] > 1.0)
            .map(|k| ((k + 1) as f64 * interval - r.at).max(0.0))
    });
    Some(Failover {
        path: cut.path,
        cut_at_s: cut.at,
        goodput_1s_after_mbps: goodput_1s_after,
        surviving_sum_mbps: rates
            .iter()
            .enumerate()
            .filter(|(i, _)| i + 1 != cut.path)
            .map(|(_, r)| r)
            .sum(),
        restored_at_s: restore.map(|r| r.at),
        carries_again_after_s,
    })
}

/// Return `/proc/net/<file>` as namespace `ns` sees it, if it can be read.
pub fn read_proc_net(ns: &str, file: &str) -> Option<String> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "cat", &format!("/proc/net/{file}")])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Return the counters of `section` (`TcpExt`, `Udp`, ...) in the text of
/// `/proc/net/netstat` or `/proc/net/snmp`: pairs of lines, the names then
/// the values, each line starting with the section's name and a colon.
pub fn kernel_counters<'a>(text: &'a str, section: &str) -> Option<HashMap<&'a str, u64>> {
    let mut lines = text.lines();
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        if names
            .strip_prefix(section)
            .is_some_and(|rest| rest.starts_with(':'))
        {
            return Some(
                names
                    .split_whitespace()
                    .zip(values.split_whitespace())
                    .filter_map(|(n, v)| Some((n, v.parse().ok()?)))
                    .collect(),
            );
        }
    }
    None
}

/// The sending host's TCP counters (`TcpExt` in `/proc/net/netstat`) that
/// say how a flow's congestion control fared.
#[derive(Clone, Copy, Debug, PartialEq)]
struct SenderCounters {
    timeouts: u64,
    /// Slow starts HyStart ended on a round trip that grew (delay) or on
    /// ACKs that came in a train as long as the path's minimum round trip,
    /// and the congestion windows summed over those exits.
    hystart_delay_exits: u64,
    hystart_delay_window: u64,
    hystart_train_exits: u64,
    hystart_train_window: u64,
    /// Retransmissions the receiver reported as duplicates: spurious ones.
    dsacks: u64,
}

impl SenderCounters {
    /// Read them in namespace `ns`, if they can be read (a counter the
    /// kernel lacks reads as zero: the HyStart ones need Linux 5.8).
    fn read(ns: &str) -> Option<SenderCounters> {
        SenderCounters::parse(&read_proc_net(ns, "netstat")?)
    }

    /// Parse `/proc/net/netstat`; `None` without a `TcpExt` section.
    fn parse(text: &str) -> Option<SenderCounters> {
        let counters = kernel_counters(text, "TcpExt")?;
        let get = |name: &str| counters.get(name).copied().unwrap_or(0);
        Some(SenderCounters {
            timeouts: get("TCPTimeouts"),
            hystart_delay_exits: get("TCPHystartDelayDetect"),
            hystart_delay_window: get("TCPHystartDelayCwnd"),
            hystart_train_exits: get("TCPHystartTrainDetect"),
            hystart_train_window: get("TCPHystartTrainCwnd"),
            dsacks: get("TCPDSACKRecv"),
        })
    }

    /// What was counted since `before`.
    fn since(&self, before: &SenderCounters) -> SenderCounters {
        SenderCounters {
            timeouts: self.timeouts.saturating_sub(before.timeouts),
            hystart_delay_exits: self
                .hystart_delay_exits
                .saturating_sub(before.hystart_delay_exits),
            hystart_delay_window: self
                .hystart_delay_window
                .saturating_sub(before.hystart_delay_window),
            hystart_train_exits: self
                .hystart_train_exits
                .saturating_sub(before.hystart_train_exits),
            hystart_train_window: self
                .hystart_train_window
                .saturating_sub(before.hystart_train_window),
            dsacks: self.dsacks.saturating_sub(before.dsacks),
        }
    }

    /// How HyStart ended slow start, if it did.
    fn hystart(&self) -> Option<HystartExit> {
        let exits = self.hystart_delay_exits + self.hystart_train_exits;
        (exits > 0).then(|| HystartExit {
            exits,
            on_delay: self.hystart_delay_exits,
            mean_window: (self.hystart_delay_window + self.hystart_train_window) as f64
                / exits as f64,
        })
    }
}

/// Counters of both sites before and after mptun's flow.
struct Snapshots {
    a0: Status,
    a1: Status,
    b0: Status,
    b1: Status,
    /// Site B's reorder status (its hold histograms) [`STEADY_AFTER`] into
    /// the flow.
    b_steady: Option<ReorderStatus>,
}

/// Round trips through the idle tunnel (and the best path alone), ms.
struct IdleRtts {
    tunnel_ping_ms: f64,
    best_path_ping_ms: f64,
    ping_paths: IdlePingPaths,
    tcp_ef_ms: f64,
    tcp_unmarked_ms: f64,
}

/// Which paths the idle pings took and what each site knew of the paths
/// then: a ping slower than the nearest path's says which way it went.
#[derive(Clone, Debug, Default, Serialize)]
pub struct IdlePingPaths {
    /// Data packets each path carried from A to B while the pings ran:
    /// the echo requests.
    pub packets_a_to_b: Vec<u64>,
    /// The same from B to A: the replies.
    pub packets_b_to_a: Vec<u64>,
    /// Each path's one-way delay above the nearest, ms, as site A measured
    /// its direction just before the pings.
    pub delay_above_a_to_b_ms: Vec<Option<f64>>,
    /// The same, site B's direction.
    pub delay_above_b_to_a_ms: Vec<Option<f64>>,
}

impl IdlePingPaths {
    /// From both sites' status before and after the pings, (A, B) each.
    fn between(before: &(Status, Status), after: &(Status, Status)) -> IdlePingPaths {
        let delays = |s: &Status| s.paths.iter().map(|p| p.owd_rel_ms).collect();
        IdlePingPaths {
            packets_a_to_b: path_rises(&before.0, &after.0, |p| p.tx_packets),
            packets_b_to_a: path_rises(&before.1, &after.1, |p| p.tx_packets),
            delay_above_a_to_b_ms: delays(&before.0),
            delay_above_b_to_a_ms: delays(&before.1),
        }
    }
}

impl std::fmt::Display for IdlePingPaths {
    /// Per direction, the paths that carried a ping and how many, then each
    /// path's delay above the nearest as its sender measured it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let carried = |packets: &[u64]| {
            let used: Vec<String> = (packets.iter().enumerate())
                .filter(|(_, &n)| n > 0)
                .map(|(i, n)| format!("path {} {n}", i + 1))
                .collect();
            if used.is_empty() {
                "none".to_string()
            } else {
                used.join(", ")
            }
        };
        let delays = |above: &[Option<f64>]| {
            let each: Vec<String> = (above.iter())
                .map(|d| d.map_or("-".to_string(), |ms| format!("{ms:+.1}")))
                .collect();
            each.join("/")
        };
        write!(
            f,
            "A to B {}, B to A {} (one-way delay above the nearest path before them, ms: A to B {}, B to A {})",
            carried(&self.packets_a_to_b),
            carried(&self.packets_b_to_a),
            delays(&self.delay_above_a_to_b_ms),
            delays(&self.delay_above_b_to_a_ms)
        )
    }
}

/// How far `counter` rose on each path of one site from `before` to
/// `after`.
fn path_rises(before: &Status, after: &Status, counter: impl Fn(&PathStatus) -> u64) -> Vec<u64> {
    (after.paths.iter().zip(&before.paths))
        .map(|(a, b)| counter(a).saturating_sub(counter(b)))
        .collect()
}

fn mptun_detail(
    Snapshots {
        a0,
        a1,
        b0,
        b1,
        b_steady,
    }: &Snapshots,
    path_series_mbps: Vec<Vec<f64>>,
    path_changes: Vec<String>,
    idle: &IdleRtts,
    delay_spread_ms: f64,
) -> MptunDetail {
    let sent = path_rises(a0, a1, |p| p.tx_bytes);
    let total = sent.iter().sum::<u64>().max(1) as f64;
    let delta = |after: u64, before: u64| after.saturating_sub(before);
    let path_loss = (a1.paths.iter().zip(&a0.paths))
        .zip(b1.paths.iter().zip(&b0.paths))
        .map(|((a1, a0), (b1, b0))| {
            let sent = delta(a1.tx_packets, a0.tx_packets);
            let received = delta(b1.rx_packets, b0.rx_packets);
            if sent == 0 {
                0.0
            } else {
                sent.saturating_sub(received) as f64 / sent as f64
            }
        })
        .collect();
    let (r0, r1) = (&b0.reorder, &b1.reorder);
    MptunDetail {
        tun_mtu: a0.mtu,
        tun_mtu_source: a0.mtu_source.clone(),
        path_shares: sent.iter().map(|&s| s as f64 / total).collect(),
        path_loss,
        path_train_mbps: a0.paths.iter().map(|p| p.train_mbps).collect(),
        path_series_mbps,
        reorder_held: r1.buffered - r0.buffered,
        reorder_skipped_loss: r1.skipped_loss - r0.skipped_loss,
        reorder_skipped_timeout: r1.skipped_timeout - r0.skipped_timeout,
        reorder_repairs_requested: r1.repairs_requested - r0.repairs_requested,
        reorder_repaired: r1.repaired - r0.repaired,
        reorder_repaired_late: r1.repaired_late - r0.repaired_late,
        reorder_congestion_losses: r1.congestion_losses - r0.congestion_losses,
        repairs_gone: delta(a1.reorder.repairs_gone, a0.reorder.repairs_gone),
        repairs_too_late: delta(a1.reorder.repairs_too_late, a0.reorder.repairs_too_late),
        late_echoes: [(a0, a1), (b0, b1)]
            .iter()
            .flat_map(|(before, after)| after.paths.iter().zip(&before.paths))
            .map(|(after, before)| after.late_echoes - before.late_echoes)
            .sum(),
        reorder_dropped: (r1.dropped_stale + r1.dropped_duplicate)
            - (r0.dropped_stale + r0.dropped_duplicate),
        path_flaps: [a1, b1]
            .iter()
            .flat_map(|s| &s.paths)
            .map(|p| p.flaps)
            .sum(),
        path_changes,
        tun_dropped_no_path: a1.tun.dropped_no_path - a0.tun.dropped_no_path,
        tun_dropped_path_queue_full: a1.tun.dropped_path_queue_full
            - a0.tun.dropped_path_queue_full,
        hold_p50_ms: r1.wait_p50_ms,
        hold_p99_ms: r1.wait_p99_ms,
        hold_p99_steady_ms: b_steady.as_ref().and_then(|start| {
            let steady = waits_since(&start.wait_buckets, &r1.wait_buckets);
            steady.quantile(0.99).map(|d| d.as_secs_f64() * 1000.0)
        }),
        hold_over_spread: b_steady
            .as_ref()
            .map(|start| WaitsOver::between(start, r1, delay_spread_ms + HOLD_MARGIN_MS)),
        delay_spread_ms,
        added_latency_ms: idle.tunnel_ping_ms - idle.best_path_ping_ms,
        tunnel_rtt_ms: idle.tunnel_ping_ms,
        best_path_rtt_ms: idle.best_path_ping_ms,
        idle_ping_paths: idle.ping_paths.clone(),
        tcp_request_rtt_ef_ms: idle.tcp_ef_ms,
        tcp_request_rtt_unmarked_ms: idle.tcp_unmarked_ms,
    }
}

/// The warnings both sites logged about their paths (down, set aside, no
/// session), each prefixed with its site; none if a log cannot be read.
fn path_warnings(sites: &Sites) -> Vec<String> {
    [Site::A, Site::B]
        .into_iter()
        .flat_map(|site| {
            let name = sites.site_name(site);
            std::fs::read_to_string(sites.log_path(site))
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains(" WARN ") && l.contains("path="))
                .map(|l| format!("site {name}: {}", l.trim()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Samples site A's per-path byte counters in the background from the
/// flow's first data (when the flow's runner sets [`DataBegan`]), and
/// takes site B's hold histogram once the flow is [`STEADY_AFTER`] old.
struct Sampler {
    stop: Arc<AtomicBool>,
    series: Arc<Mutex<Vec<Vec<f64>>>>,
    b_steady: Arc<Mutex<Option<ReorderStatus>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What a [`Sampler`] collected.
struct Sampled {
    path_series_mbps: Vec<Vec<f64>>,
    b_steady: Option<ReorderStatus>,
}

/// Bytes the paths carry from A to B within [`FLOW_BEGUN_WITHIN`] by
/// which the flow's data has begun: more than iperf3's control messages
/// (under 1 KB in all) and mptun's idle probes on six paths (some 1 KB a
/// tenth of a second) send in that time, less than the first flight of
/// ten segments, which leaves in one burst (CUBIC) or paced over a third
/// of the round trip (BBR's startup; 8 KB within 60 ms at a round trip of
/// 300 ms).
const FLOW_BEGUN_BYTES: u64 = 8 * 1024;
/// See [`FLOW_BEGUN_BYTES`].
const FLOW_BEGUN_WITHIN: Duration = Duration::from_millis(100);
/// How often the flow's data is looked for, and the sampler looks for
/// that moment.
const START_POLL: Duration = Duration::from_millis(20);

/// When the flow's data began, set once by the flow's runner for the
/// sampler: the one moment the scenario's events, mptun's per-path series
/// and its hold after the first second are all timed from.
type DataBegan = Arc<OnceLock<Instant>>;

/// When the flow's data began, as a count of the bytes from A to B shows
/// it: 0.5 to 0.9 s after iperf3 is launched (its server's start, then
/// three or four round trips of the tunnel on its control connection), so
/// the steady state and the scenario's events are timed from there, not
/// from the launch.
#[derive(Debug, Default)]
struct FlowStart {
    /// The counts seen, oldest first, from the newest one at least
    /// [`FLOW_BEGUN_WITHIN`] old.
    seen: VecDeque<(Instant, u64)>,
    data_began: Option<Instant>,
}

impl FlowStart {
    /// The paths had carried `total` bytes from A to B at `now`.
    fn observe(&mut self, now: Instant, total: u64) {
        if self.data_began.is_some() {
            return;
        }
        self.seen.push_back((now, total));
        while self
            .seen
            .get(1)
            .is_some_and(|(at, _)| now.saturating_duration_since(*at) >= FLOW_BEGUN_WITHIN)
        {
            self.seen.pop_front();
        }
        let before = self.seen.front().map_or(total, |(_, n)| *n);
        if total.saturating_sub(before) >= FLOW_BEGUN_BYTES {
            self.data_began = Some(now);
        }
    }

    /// Poll the emulator's bytes from A to B until the flow's data begins
    /// and return when it did: the same moment for every system, whatever
    /// it adds to each packet. A flow that shows no data in
    /// [`DATA_WAIT`] has its events timed from then.
    fn wait_on_paths(topo: &mut Topology) -> Instant {
        let give_up = Instant::now() + DATA_WAIT;
        let mut start = FlowStart::default();
        loop {
            let now = Instant::now();
            if let Some(bytes) = topo.stats().ok().as_ref().and_then(bytes_a_to_b) {
                start.observe(now, bytes);
            }
            match start.data_began {
                Some(t) => return t,
                None if now >= give_up => return now,
                None => std::thread::sleep(START_POLL),
            }
        }
    }
}

/// Longest the scenario's events wait for the flow's data to begin.
const DATA_WAIT: Duration = Duration::from_secs(5);

/// Return the bytes the emulator has released from A to B, over all paths.
fn bytes_a_to_b(stats: &serde_json::Value) -> Option<u64> {
    stats["paths"]
        .as_array()?
        .iter()
        .map(|path| path["ab"]["tx_bytes"].as_u64())
        .sum()
}

impl Sampler {
    fn start(sites: &Sites, data_began: DataBegan) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let series = Arc::new(Mutex::new(Vec::new()));
        let b_steady = Arc::new(Mutex::new(None));
        let status = sites.status_fetcher(Site::A);
        let status_b = sites.status_fetcher(Site::B);
        let thread = {
            let (stop, series, b_steady) = (stop.clone(), series.clone(), b_steady.clone());
            std::thread::spawn(move || {
                // Site A's bytes per path at the last series sample, and when.
                let mut last: Option<(Vec<u64>, Instant)> = None;
                let mut next_sample = Instant::now();
                let mut steady_taken = false;
                while !stop.load(Ordering::Relaxed) {
                    let began = data_began.get().copied();
                    // The series starts with the flow's data, as
                    // iperf3's and the scenario's events do.
                    if began.is_some() && Instant::now() >= next_sample {
                        if let Ok(s) = status() {
                            let now = Instant::now();
                            let bytes: Vec<u64> = s.paths.iter().map(|p| p.tx_bytes).collect();
                            if let Some((prev, at)) = &last {
                                let secs = now.saturating_duration_since(*at).as_secs_f64();
                                let mut out = series.lock().unwrap_or_else(|p| p.into_inner());
                                out.resize(bytes.len(), Vec::new());
                                for (i, (n, p)) in bytes.iter().zip(prev).enumerate() {
                                    out[i].push(n.saturating_sub(*p) as f64 * 8.0 / secs / 1e6);
                                }
                            } else {
                                next_sample = now;
                            }
                            last = Some((bytes, now));
                            next_sample += SAMPLE;
                        }
                    }
                    let steady_at = began.map(|t| t + STEADY_AFTER);
                    if !steady_taken && steady_at.is_some_and(|t| Instant::now() >= t) {
                        if let Ok(s) = status_b() {
                            *b_steady.lock().unwrap_or_else(|p| p.into_inner()) = Some(s.reorder);
                            steady_taken = true;
                        }
                    }
                    // Until the histogram is taken, look again soon (the
                    // flow's start, or B's status after a failed read).
                    let soon = Instant::now() + START_POLL;
                    let wake = match steady_at {
                        None => soon,
                        Some(t) if !steady_taken => next_sample.min(t.max(soon)),
                        Some(_) => next_sample,
                    };
                    std::thread::sleep(wake.saturating_duration_since(Instant::now()));
                }
            })
        };
        Sampler {
            stop,
            series,
            b_steady,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> Sampled {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        Sampled {
            path_series_mbps: std::mem::take(
                &mut *self.series.lock().unwrap_or_else(|p| p.into_inner()),
            ),
            b_steady: self
                .b_steady
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        }
    }
}

/// Run `iperf` and return its result and the receiver's goodput series.
fn flow(iperf: &Iperf) -> anyhow::Result<(TcpResult, Vec<f64>)> {
    let json = iperf.run_reporting_every(SAMPLE.as_secs_f64())?;
    Ok(parse_tcp(&json))
}

fn parse_tcp(json: &serde_json::Value) -> (TcpResult, Vec<f64>) {
    let end = &json["end"];
    // The receiver's last interval is the few milliseconds its last bytes
    // took after the sender stopped: a rate over them says nothing.
    let full = |i: &&serde_json::Value| {
        i["sum"]["seconds"].as_f64().unwrap_or(0.0) >= SAMPLE.as_secs_f64() / 2.0
    };
    let series = json["server_output_json"]["intervals"]
        .as_array()
        .map(|v| {
            v.iter()
                .filter(full)
                .map(|i| i["sum"]["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6)
                .collect()
        })
        .unwrap_or_default();
    (TcpResult::of_iperf_end(end), series)
}

/// Run a flow while applying the scenario's events on time, then restore
/// every path for the next system. `data_began`, if given, is set to when
/// the flow's data began, the moment the events are timed from.
fn flow_with_events(
    topo: &mut Topology,
    scenario: &Scenario,
    iperf: Iperf,
    data_began: Option<&OnceLock<Instant>>,
) -> anyhow::Result<Measured> {
    let ns_a = iperf.client_ns;
    let counters_before = SenderCounters::read(ns_a);
    let cpu_before = read_cpu_times();
    let emulator_before = EmulatorCounts::read(topo);
    let (tcp, series_mbps) = flow_with_events_inner(topo, scenario, &iperf, data_began)?;
    let emulator = EmulatorCounts::read(topo)
        .zip(emulator_before)
        .map(|(after, before)| after.since(&before));
    let share = |n: u64, of: u64| (of > 0).then(|| 100.0 * n as f64 / of as f64);
    Ok(Measured {
        tcp,
        series_mbps,
        sender: SenderCounters::read(ns_a)
            .zip(counters_before)
            .map(|(after, before)| after.since(&before)),
        host: HostConditions {
            steal_pct: read_cpu_times()
                .zip(cpu_before)
                .and_then(|(after, before)| after.steal_pct_since(&before)),
            emulator_late_pct: emulator.and_then(|e| share(e.late, e.released)),
            emulator_very_late_pct: emulator.and_then(|e| share(e.very_late, e.released)),
        },
    })
}

/// The host's CPU time by kind, from the `cpu` line of `/proc/stat`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuTimes {
    total: u64,
    steal: u64,
}

impl CpuTimes {
    fn parse(proc_stat: &str) -> Option<CpuTimes> {
        let line = proc_stat.lines().find(|l| l.starts_with("cpu "))?;
        let fields: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        // user nice system idle iowait irq softirq steal [guest guest_nice],
        // and guest time is already counted in user time.
        Some(CpuTimes {
            total: fields.iter().take(8).sum(),
            steal: *fields.get(7)?,
        })
    }

    /// Return the share of CPU time, %, the hypervisor took since `before`.
    pub fn steal_pct_since(&self, before: &CpuTimes) -> Option<f64> {
        let total = self.total.checked_sub(before.total)?;
        let steal = self.steal.checked_sub(before.steal)?;
        (total > 0).then(|| 100.0 * steal as f64 / total as f64)
    }
}

/// Read the host's CPU times now, if `/proc/stat` tells them.
pub fn read_cpu_times() -> Option<CpuTimes> {
    CpuTimes::parse(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// The emulator's counts of frames released, summed over paths and
/// directions.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct EmulatorCounts {
    released: u64,
    late: u64,
    very_late: u64,
}

impl EmulatorCounts {
    fn read(topo: &mut Topology) -> Option<EmulatorCounts> {
        Self::parse(&topo.stats().ok()?)
    }

    fn parse(stats: &serde_json::Value) -> Option<EmulatorCounts> {
        let mut sum = EmulatorCounts::default();
        for path in stats["paths"].as_array()? {
            for dir in [&path["ab"], &path["ba"]] {
                let count = |key: &str| dir[key].as_u64();
                sum.released += count("tx_packets")?;
                sum.late += count("late")?;
                sum.very_late += count("very_late")?;
            }
        }
        Some(sum)
    }

    fn since(&self, before: &EmulatorCounts) -> EmulatorCounts {
        EmulatorCounts {
            released: self.released.saturating_sub(before.released),
            late: self.late.saturating_sub(before.late),
            very_late: self.very_late.saturating_sub(before.very_late),
        }
    }
}

fn flow_with_events_inner(
    topo: &mut Topology,
    scenario: &Scenario,
    iperf: &Iperf,
    data_began: Option<&OnceLock<Instant>>,
) -> anyhow::Result<(TcpResult, Vec<f64>)> {
    if scenario.event.is_empty() && data_began.is_none() {
        return flow(iperf);
    }
    let result = std::thread::scope(|scope| {
        let runner = scope.spawn(|| flow(iperf));
        let start = FlowStart::wait_on_paths(topo);
        if let Some(began) = data_began {
            began.get_or_init(|| start);
        }
        for event in &scenario.timeline() {
            let at = start + Duration::from_secs_f64(event.at);
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            for line in event.commands()? {
                topo.control(&line)
                    .with_context(|| format!("emulator: {line}"))?;
            }
        }
        runner
            .join()
            .map_err(|_| anyhow::anyhow!("iperf3 thread panicked"))?
    });
    if !scenario.event.is_empty() {
        undo_events(topo, scenario)?;
    }
    result
}

/// Set every path back to the scenario's settings for the next system.
fn undo_events(topo: &mut Topology, scenario: &Scenario) -> anyhow::Result<()> {
    for (i, p) in scenario.path.iter().enumerate() {
        let n = i + 1;
        let mut lines = vec![
            format!("up {n}"),
            format!("set {n} loss-pct {}", p.loss_pct),
            format!("set {n} delay-ms {}", p.delay_ms),
        ];
        if let Some(rate) = p.rate_mbit {
            lines.push(format!("set {n} rate-mbit {rate}"));
        }
        for line in lines {
            topo.control(&line)?;
        }
    }
    Ok(())
}

/// Where ECMP traffic goes: addresses on loopback, routed over all tunnels.
const ECMP_SRC: &str = "10.79.0.1";
const ECMP_DST: &str = "10.79.0.2";

/// N single-path mptun tunnels (plain WireGuard on the wire: one session
/// per tunnel, nothing striped) with an ECMP route over them, hashing per
/// flow on L4 as `fib_multipath_hash_policy = 1` and LACP `layer3+4` do.
/// One tunnel per path and a per-flow ECMP route over them, on both sites.
enum Ecmp {
    WireGuard(wireguard::Tunnels),
    Mptun(Vec<Sites>),
}

impl Ecmp {
    /// Over one wireguard-go tunnel per path.
    fn wireguard(exe: &Path, topo: &Topology, path_mtu: u32) -> anyhow::Result<Ecmp> {
        let paths: Vec<usize> = (1..=topo.paths()).collect();
        let tunnels = wireguard::Tunnels::start(exe, topo, &paths, "10.79.0.0/24", path_mtu)?;
        route_ecmp(topo, wireguard::Tunnels::interface)?;
        Ok(Ecmp::WireGuard(tunnels))
    }

    /// Over one single-path mptun tunnel per path, where wireguard-go is
    /// missing.
    fn mptun(exe: &Path, topo: &Topology) -> anyhow::Result<Ecmp> {
        let mut tunnels = Vec::new();
        for i in 1..=topo.paths() {
            let layout = SiteLayout {
                name: format!("wg{i}"),
                address_a: format!("10.78.{i}.1/24"),
                address_b: format!("10.78.{i}.2/24"),
                allowed_ips: vec![format!("10.78.{i}.0/24"), "10.79.0.0/24".into()],
                paths: vec![i],
                base_port: 52819 + i as u16,
                extra_interface: "table = \"off\"".into(),
            };
            tunnels.push(Sites::start(exe, topo, &layout)?);
        }
        route_ecmp(topo, |i, _| format!("wg{i}"))?;
        Ok(Ecmp::Mptun(tunnels))
    }

    /// Site B's interface of tunnel `i` (from 1).
    fn interface_b(&self, i: usize) -> String {
        match self {
            Ecmp::WireGuard(_) => wireguard::Tunnels::interface(i, false),
            Ecmp::Mptun(_) => format!("wg{i}"),
        }
    }

    /// The tunnel processes of both sites.
    fn pids(&self) -> Vec<u32> {
        match self {
            Ecmp::WireGuard(t) => t.pids(),
            Ecmp::Mptun(sites) => sites.iter().flat_map(Sites::pids).collect(),
        }
    }
}

/// Route ECMP_DST from A (and ECMP_SRC from B) over tunnel i's interface
/// `dev(i, site_a)`, hashing per flow (layer 4).
fn route_ecmp(topo: &Topology, dev: impl Fn(usize, bool) -> String) -> anyhow::Result<()> {
    for (ns, local, remote, peer_octet, site_a) in [
        (topo.ns_a(), ECMP_SRC, ECMP_DST, 2, true),
        (topo.ns_b(), ECMP_DST, ECMP_SRC, 1, false),
    ] {
        sh(&ns, &format!("ip addr add {local}/32 dev lo"))?;
        sh(&ns, "sysctl -qw net.ipv4.fib_multipath_hash_policy=1")?;
        let hops: String = (1..=topo.paths())
            .map(|i| format!(" nexthop via 10.78.{i}.{peer_octet} dev {}", dev(i, site_a)))
            .collect();
        sh(&ns, &format!("ip route add {remote}/32{hops}"))?;
    }
    Ok(())
}

/// CPU seconds (user and system) `pids` have used so far, from
/// `/proc/<pid>/stat`; none if one cannot be read.
fn cpu_seconds(pids: &[u32]) -> Option<f64> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks <= 0 {
        return None;
    }
    let mut total = 0u64;
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        total = total.checked_add(process_ticks(&stat)?)?;
    }
    Some(total as f64 / ticks as f64)
}

/// utime + stime from a `/proc/<pid>/stat` line. The command name (field
/// 2) may hold spaces: fields are counted after its closing parenthesis.
fn process_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // rest starts at field 3 (state); utime and stime are fields 14 and 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    utime.checked_add(stime)
}

fn sh(ns: &str, command: &str) -> anyhow::Result<()> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "sh", "-c", command])
        .output()?;
    if !out.status.success() {
        bail!("{command}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Set both sites up for one MPTCP connection over `addrs_b`, B's address
/// and interface on each path: the client connects to the first, and B
/// announces the others, one subflow each. Replaces the endpoints of an
/// earlier setup. Returns the wrapper to run iperf3 in.
fn mptcp_setup(topo: &Topology, addrs_b: &[(String, String)]) -> anyhow::Result<Vec<String>> {
    let found = Command::new("sh")
        .args(["-c", "command -v mptcpize"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        bail!("`mptcpize` not found (apt-get install mptcpize)");
    }
    let n = addrs_b.len();
    for ns in [topo.ns_a(), topo.ns_b()] {
        sh(&ns, "sysctl -qw net.mptcp.enabled=1")?;
        sh(&ns, "ip mptcp endpoint flush")?;
        sh(
            &ns,
            &format!("ip mptcp limits set subflow {n} add_addr_accepted {n}"),
        )?;
    }
    for (addr, dev) in addrs_b.iter().skip(1) {
        sh(
            &topo.ns_b(),
            &format!("ip mptcp endpoint add {addr} dev {dev} signal"),
        )?;
    }
    Ok(vec!["mptcpize".into(), "run".into()])
}

/// Render the report as text.
pub fn render(r: &LabReport) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let sum: f64 = r.path_rates_mbps.iter().sum();
    let offered: f64 = r.scenario.offered_mbps(&r.path_rates_mbps).iter().sum();
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "scenario {}: {} paths, sum of paths {:.1} Mbit/s ({}){}",
        r.scenario_name,
        r.scenario.path.len(),
        sum,
        if r.path_rates_measured {
            "each path's own single-flow rate, measured in this run"
        } else {
            "configured rates; --compare measures them"
        },
        if offered < sum {
            format!("; {offered:.1} for the time each path is up, which \"of sum\" is of")
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        o,
        "{:<22} {:>10} {:>8} {:>8} {:>8} {:>5} {:>8} {:>9} {:>7} {:>8}",
        "system",
        "Mbit/s",
        "of sum",
        "retrans",
        "spurious",
        "RTOs",
        "HyStart",
        "CPU s/GB",
        "steal",
        "late 5ms"
    );
    let pct = |v: Option<f64>, places: usize| v.map_or("-".into(), |v| format!("{v:.places$}%"));
    for s in &r.systems {
        let _ = writeln!(
            o,
            "{:<22} {:>10.1} {:>7.0}% {:>8} {:>8} {:>5} {:>8} {:>9} {:>7} {:>8}",
            s.name,
            s.goodput_mbps,
            100.0 * s.fraction_of_sum,
            s.retransmits,
            s.spurious_retransmits,
            s.rto_timeouts,
            s.hystart
                .map_or("-".into(), |h| format!("{:.0}", h.mean_window)),
            s.cpu_s_per_gb.map_or("-".into(), |v| format!("{v:.1}")),
            pct(s.host.steal_pct, 0),
            pct(s.host.emulator_very_late_pct, 2),
        );
    }
    let _ = writeln!(
        o,
        "(spurious: retransmissions the receiver already had (D-SACKs); HyStart: the mean congestion window, in packets, at which HyStart ended slow start, if it did; CPU s/GB: CPU time of the tunnel processes of both sites per GB of goodput; steal: CPU time the hypervisor gave to others during the flow; late 5ms: frames the emulator released 5 ms or more after their time)"
    );
    let noisy: Vec<&str> = r
        .systems
        .iter()
        .filter(|s| s.host.noisy())
        .map(|s| s.name.as_str())
        .collect();
    if !noisy.is_empty() {
        let _ = writeln!(
            o,
            "warning: the host was busy while measuring {} (steal {NOISY_STEAL_PCT}% or more, or {NOISY_VERY_LATE_PCT}% or more of frames released by the emulator 5 ms late or more): those figures are noisy; measure again on a quiet host",
            noisy.join(", ")
        );
    }
    let m = &r.mptun;
    let shares: Vec<String> = m
        .path_shares
        .iter()
        .enumerate()
        .map(|(i, s)| format!("path {}: {:.0}%", i + 1, 100.0 * s))
        .collect();
    let _ = writeln!(o, "mptun per-path share of bytes: {}", shares.join(", "));
    let losses: Vec<String> = m
        .path_loss
        .iter()
        .enumerate()
        .map(|(i, l)| format!("path {}: {:.2}%", i + 1, 100.0 * l))
        .collect();
    let _ = writeln!(
        o,
        "mptun per-path loss of data packets, A to B: {}",
        losses.join(", ")
    );
    let trains: Vec<String> = m
        .path_train_mbps
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let rate = r.map_or("-".to_string(), |r| format!("{r:.1} Mbit/s"));
            format!("path {}: {rate}", i + 1)
        })
        .collect();
    let _ = writeln!(
        o,
        "mptun probe trains (site A, before the flow): {}",
        trains.join(", ")
    );
    let _ = writeln!(
        o,
        "mptun TUN MTU (site A): {} ({})",
        m.tun_mtu, m.tun_mtu_source
    );
    let _ = writeln!(
        o,
        "mptun late echoes (new data avoided a path not yet down): {}",
        m.late_echoes
    );
    let _ = writeln!(
        o,
        "mptun path flaps since the sites started (both sites): {}; site A's drops during the flow: {} with no usable path, {} at a full path queue",
        m.path_flaps, m.tun_dropped_no_path, m.tun_dropped_path_queue_full
    );
    for change in &m.path_changes {
        let _ = writeln!(o, "  {change}");
    }
    let _ = writeln!(
        o,
        "mptun reorder buffer: {} held, {} gaps repaired of {} asked for ({} more handed out late; not resent: {} gone from the sender's log, {} too late), {} congestion losses not asked for, {} released as lost, {} on timeout, {} late/duplicate dropped",
        m.reorder_held,
        m.reorder_repaired,
        m.reorder_repairs_requested,
        m.reorder_repaired_late,
        m.repairs_gone,
        m.repairs_too_late,
        m.reorder_congestion_losses,
        m.reorder_skipped_loss,
        m.reorder_skipped_timeout,
        m.reorder_dropped
    );
    let _ = writeln!(
        o,
        "mptun hold time: p50 {}, p99 {}, p99 after the first second {} (paths' one-way delay spread {:.1} ms)",
        m.hold_p50_ms.map_or("-".into(), |v| format!("{v:.2} ms")),
        m.hold_p99_ms.map_or("-".into(), |v| format!("{v:.2} ms")),
        m.hold_p99_steady_ms.map_or("-".into(), |v| format!("{v:.2} ms")),
        m.delay_spread_ms
    );
    if let Some(over) = &m.hold_over_spread {
        let _ = writeln!(
            o,
            "mptun waits after the first second over {:.1} ms: {} of {}; their gap's own packet came late {}, a repair filled it {}, given up on {}",
            over.limit_ms,
            over.reordered + over.repaired + over.given_up,
            over.waits,
            over.reordered,
            over.repaired,
            over.given_up
        );
    }
    let _ = writeln!(
        o,
        "mptun added latency at idle: {:+.2} ms (median ping {:.2} ms through the tunnel, {:.2} ms over the best path)",
        m.added_latency_ms, m.tunnel_rtt_ms, m.best_path_rtt_ms
    );
    let _ = writeln!(o, "mptun idle pings' paths: {}", m.idle_ping_paths);
    let _ = writeln!(
        o,
        "mptun TCP request round trip at idle: {:.2} ms marked EF (a low-latency class, not held), {:.2} ms unmarked (held to the farthest path)",
        m.tcp_request_rtt_ef_ms, m.tcp_request_rtt_unmarked_ms
    );
    if let Some(f) = &r.failover {
        let _ = writeln!(
            o,
            "mptun failover: path {} cut at {:.1} s; 1 s later {:.1} Mbit/s = {:.0}% of the surviving paths' {:.1}",
            f.path,
            f.cut_at_s,
            f.goodput_1s_after_mbps,
            100.0 * f.goodput_1s_after_mbps / f.surviving_sum_mbps.max(1e-9),
            f.surviving_sum_mbps
        );
        if let Some(at) = f.restored_at_s {
            let _ = writeln!(
                o,
                "mptun failback: path {} restored at {:.1} s; carries data again {}",
                f.path,
                at,
                f.carries_again_after_s
                    .map_or("never (within the flow)".into(), |d| format!(
                        "within {d:.1} s"
                    ))
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use mptun::status::WaitBucketsByEnd;

    use super::*;

    #[test]
    fn waits_over_the_bar_count_by_what_ended_them_from_the_first_second_on() {
        // Bucket i holds waits of i/4 to (i + 1)/4 ms.
        let start = ReorderStatus {
            wait_buckets: vec![(200, 5)],
            wait_buckets_by_end: WaitBucketsByEnd {
                reordered: vec![(200, 5)],
                ..WaitBucketsByEnd::default()
            },
            ..ReorderStatus::default()
        };
        // Since: four more 50 ms waits a late packet ended, three of 1 ms,
        // two 20 ms waits for a repair and one 40 ms one given up on.
        let end = ReorderStatus {
            wait_buckets: vec![(4, 3), (80, 2), (160, 1), (200, 9)],
            wait_buckets_by_end: WaitBucketsByEnd {
                reordered: vec![(4, 3), (200, 9)],
                repaired: vec![(80, 2)],
                given_up: vec![(160, 1)],
            },
            ..ReorderStatus::default()
        };
        let over = WaitsOver::between(&start, &end, 20.0 + HOLD_MARGIN_MS);
        assert_eq!(
            over,
            WaitsOver {
                limit_ms: 25.0,
                waits: 10,
                reordered: 4,
                repaired: 0,
                given_up: 1,
            }
        );
    }

    #[test]
    fn the_flow_s_start_is_its_data_not_iperf3_s_launch() {
        let launched = Instant::now();
        let at = |ms: u64| launched + Duration::from_millis(ms);
        let mut start = FlowStart::default();
        // Idle, then iperf3's control connection: a few hundred bytes a
        // round trip for 0.7 s.
        start.observe(at(0), 5_000);
        for (ms, total) in [(100, 5_060), (300, 5_200), (500, 5_530), (700, 5_600)] {
            start.observe(at(ms), total);
            assert_eq!(start.data_began, None, "no data yet at {ms} ms");
        }
        // The first flight: ten segments.
        start.observe(at(720), 5_600 + 14_264);
        assert_eq!(start.data_began, Some(at(720)));
        start.observe(at(900), 60_000);
        assert_eq!(
            start.data_began,
            Some(at(720)),
            "the first flight's time stays"
        );
    }

    #[test]
    fn the_paths_idle_probes_are_not_taken_for_the_flow_s_data() {
        let launched = Instant::now();
        let at = |ms: u64| launched + Duration::from_millis(ms);
        let mut start = FlowStart::default();
        // Six idle paths, each probed ten times a second each way with
        // some 160-byte frames, for 0.9 s: 8.6 KB in all, polled every
        // 20 ms, with one poll 200 ms late.
        let mut total = 0;
        for ms in (0..=900).step_by(20).filter(|ms| !(300..500).contains(ms)) {
            total = ms * 6 * 10 * 160 / 1000;
            start.observe(at(ms), total);
            assert_eq!(start.data_began, None, "no data yet at {ms} ms");
        }
        // BBR's first flight, paced over 60 ms.
        for (ms, flight) in [(920, 4_000), (940, 8_000), (960, 12_000)] {
            start.observe(at(ms), total + flight);
        }
        assert_eq!(start.data_began, Some(at(940)));
    }

    #[test]
    fn a_process_cpu_time_is_read_past_a_name_with_spaces() {
        let stat = "4242 (mptun (x) y) S 1 2 3 4 5 6 7 8 9 10 150 25 0 0 20 0 3 0 100";
        assert_eq!(process_ticks(stat), Some(175));
        assert_eq!(process_ticks("4242 (cut"), None);
        assert_eq!(process_ticks("4242 (x) S 1 2"), None);
    }

    #[test]
    fn the_idle_pings_line_names_the_paths_each_way_took() {
        let paths = IdlePingPaths {
            packets_a_to_b: vec![0, 20, 0],
            packets_b_to_a: vec![19, 1, 0],
            delay_above_a_to_b_ms: vec![Some(0.0), Some(5.04), None],
            delay_above_b_to_a_ms: vec![Some(0.0), Some(4.96), Some(10.0)],
        };
        assert_eq!(
            paths.to_string(),
            "A to B path 2 20, B to A path 1 19, path 2 1 (one-way delay above the \
             nearest path before them, ms: A to B +0.0/+5.0/-, B to A +0.0/+5.0/+10.0)"
        );
        let unheard = IdlePingPaths {
            packets_a_to_b: vec![0, 0],
            ..IdlePingPaths::default()
        };
        assert!(unheard.to_string().starts_with("A to B none, B to A none"));
    }

    #[test]
    fn the_goodput_series_is_what_the_receiver_got() {
        // The sender's intervals run ahead while its socket buffer fills;
        // the series is the receiver's.
        let interval = |seconds: f64, mbps: f64| serde_json::json!({ "sum": { "seconds": seconds, "bits_per_second": mbps * 1e6 } });
        let json = serde_json::json!({
            "intervals": [interval(0.5, 400.0), interval(0.5, 300.0)],
            "end": {
                "sum_received": { "bits_per_second": 150e6 },
                "sum_sent": { "retransmits": 7 },
            },
            // Its last few milliseconds' rate is left out.
            "server_output_json": {
                "intervals": [interval(0.5, 100.0), interval(0.5, 200.0), interval(0.004, 900.0)],
            },
        });
        let (tcp, series) = parse_tcp(&json);
        assert_eq!(series, vec![100.0, 200.0]);
        assert_eq!(tcp.goodput_mbps, 150.0);
        assert_eq!(tcp.retransmits, 7);
    }

    #[test]
    fn steal_is_the_share_of_cpu_time_taken_between_two_readings() {
        let before =
            CpuTimes::parse("cpu  100 0 50 800 10 0 20 20 5 0\ncpu0 50 0 25 400 5 0 10 10 0 0\n")
                .expect("parses");
        // 200 more jiffies, of which 30 stolen; guest time (5 -> 50) is
        // inside user time and must not count twice.
        let after = CpuTimes::parse("cpu  180 0 70 870 10 0 20 50 50 0\n").expect("parses");
        let steal = after.steal_pct_since(&before).expect("time passed");
        assert!((steal - 15.0).abs() < 1e-9, "{steal}");
        assert_eq!(after.steal_pct_since(&after), None, "no time passed");
        assert_eq!(CpuTimes::parse("cpu  1 2 3\n"), None, "no steal field");
    }

    #[test]
    fn kernel_counters_are_taken_from_their_own_section() {
        let snmp = "UdpLite: InDatagrams RcvbufErrors\nUdpLite: 5 9\n\
                    Udp: InDatagrams RcvbufErrors\nUdp: 100 7\n";
        let udp = kernel_counters(snmp, "Udp").expect("a Udp section");
        assert_eq!(udp.get("RcvbufErrors"), Some(&7));
        assert_eq!(udp.get("InDatagrams"), Some(&100));
        assert_eq!(kernel_counters(snmp, "Tcp"), None);
    }

    #[test]
    fn hystart_exits_and_spurious_retransmits_are_read_from_tcpext() {
        let netstat = |timeouts: u64, delay: u64, window: u64, dsacks: u64| {
            format!(
                "IpExt: InNoRoutes TCPTimeouts\n\
                 IpExt: 0 {}\n\
                 TcpExt: SyncookiesSent TCPTimeouts TCPDSACKRecv TCPHystartTrainDetect TCPHystartTrainCwnd TCPHystartDelayDetect TCPHystartDelayCwnd\n\
                 TcpExt: 0 {timeouts} {dsacks} 1 300 {delay} {window}\n",
                timeouts * 10
            )
        };
        let before = SenderCounters::parse(&netstat(2, 1, 1000, 5)).expect("parses");
        let after = SenderCounters::parse(&netstat(3, 3, 3400, 9)).expect("parses");
        let flow = after.since(&before);
        assert_eq!(flow.timeouts, 1, "TcpExt's TCPTimeouts, not another line's");
        assert_eq!(flow.dsacks, 4);
        assert_eq!(
            flow.hystart(),
            Some(HystartExit {
                exits: 2,
                on_delay: 2,
                mean_window: 1200.0
            })
        );
        assert_eq!(before.hystart().map(|h| h.exits), Some(2));
        // A kernel without the HyStart counters, or a flow without an exit.
        let old_kernel = SenderCounters::parse("TcpExt: TCPTimeouts\nTcpExt: 7\n");
        assert_eq!(
            old_kernel.map(|c| (c.timeouts, c.hystart())),
            Some((7, None))
        );
        assert_eq!(SenderCounters::parse("garbage"), None);
    }

    #[test]
    fn emulator_lateness_sums_every_path_and_direction() {
        let dir = |tx: u64, late: u64, very: u64| serde_json::json!({"tx_packets": tx, "late": late, "very_late": very, "dropped": 3});
        let stats = serde_json::json!({"paths": [
            {"path": 1, "ab": dir(1000, 10, 1), "ba": dir(500, 0, 0)},
            {"path": 2, "ab": dir(2000, 30, 4), "ba": dir(100, 5, 5)},
        ]});
        let after = EmulatorCounts::parse(&stats).expect("parses");
        assert_eq!(
            after,
            EmulatorCounts {
                released: 3600,
                late: 45,
                very_late: 10
            }
        );
        let before = EmulatorCounts {
            released: 600,
            late: 15,
            very_late: 4,
        };
        assert_eq!(
            after.since(&before),
            EmulatorCounts {
                released: 3000,
                late: 30,
                very_late: 6
            }
        );
        // An emulator without the counters says nothing, rather than 0%.
        let old =
            serde_json::json!({"paths": [{"ab": {"tx_packets": 5}, "ba": {"tx_packets": 5}}]});
        assert_eq!(EmulatorCounts::parse(&old), None);
    }

    #[test]
    fn the_flow_s_data_is_counted_from_a_to_b_on_every_path() {
        let dir = |bytes: u64| serde_json::json!({"tx_packets": bytes / 1000, "tx_bytes": bytes});
        let stats = serde_json::json!({"paths": [
            {"path": 1, "ab": dir(3_000), "ba": dir(90_000)},
            {"path": 2, "ab": dir(5_500), "ba": dir(1_000)},
        ]});
        assert_eq!(bytes_a_to_b(&stats), Some(8_500), "B's acks do not count");
        let partial = serde_json::json!({"paths": [{"ab": dir(3_000)}, {"ab": {}}]});
        assert_eq!(bytes_a_to_b(&partial), None, "a path without a count");
    }

    #[test]
    fn a_flow_on_a_busy_host_is_flagged() {
        let quiet = HostConditions {
            steal_pct: Some(1.0),
            emulator_late_pct: Some(2.0),
            emulator_very_late_pct: Some(0.01),
        };
        assert!(!quiet.noisy());
        assert!(!HostConditions::default().noisy(), "unknown is not noisy");
        let stolen = HostConditions {
            steal_pct: Some(12.0),
            ..quiet
        };
        assert!(stolen.noisy());
        let late = HostConditions {
            emulator_very_late_pct: Some(0.5),
            ..quiet
        };
        assert!(late.noisy());
    }
}
