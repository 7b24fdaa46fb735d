//! The `mptun-lab` command (also run as `mptun lab`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Run the lab: two sites in network namespaces joined by emulated paths,
/// one TCP flow through mptun, and a report (needs root and iperf3).
///
/// Without --scenario it runs the built-in default: three equal paths of
/// 100 Mbit/s and 10 ms RTT.
#[derive(Parser)]
#[command(name = "mptun-lab", version, long_about = None)]
struct Lab {
    /// Scenario file (see configs/lab/); one with a [soak] table runs the
    /// soak (configs/lab/soak.toml).
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Also measure each path alone, the best path alone, one WireGuard
    /// tunnel, per-flow ECMP over one WireGuard tunnel per path (1 and 8
    /// flows), MPTCP over those tunnels and plain MPTCP.
    #[arg(long)]
    compare: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Write a PNG chart to this file: goodput over time, or with
    /// --sweep one point per scenario.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Run this many scenarios drawn at random (2 to 6 paths of 5 to
    /// 400 Mbit/s, 1 to 80 ms, some jitter, loss and cuts; cubic or
    /// bbr), each with --compare, and summarize.
    #[arg(long, value_name = "N", conflicts_with = "scenario")]
    sweep: Option<usize>,
    /// Seed of --sweep's draw: the same seed gives the same scenarios.
    #[arg(long, default_value_t = 1, requires = "sweep")]
    seed: u64,
    /// With --sweep, print the drawn scenarios as scenario files and
    /// run nothing.
    #[arg(long, requires = "sweep")]
    dry_run: bool,
}

fn main() -> ExitCode {
    let cli = Lab::parse();
    let result = match cli.sweep {
        Some(count) => lab_sweep(count, cli.seed, cli.dry_run, cli.json, cli.plot),
        None => lab(cli.scenario, cli.compare, cli.json, cli.plot),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mptun-lab: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn lab(
    scenario: Option<PathBuf>,
    compare: bool,
    json: bool,
    plot: Option<PathBuf>,
) -> anyhow::Result<()> {
    use mptun_lab::scenario::{Scenario, DEFAULT_SCENARIO};
    let (scenario, scenario_name) = match scenario {
        Some(path) => (Scenario::load(&path)?, path.display().to_string()),
        None => (
            Scenario::parse(DEFAULT_SCENARIO, "default")?,
            "default (equal)".to_string(),
        ),
    };
    let options = mptun_lab::run::LabOptions {
        scenario,
        scenario_name,
        compare,
        json,
        mptun_exe: mptun_lab::mptun_exe()?,
    };
    let _machine = mptun_lab::machine::MachineLock::take()?;
    if options.scenario.soak.is_some() {
        if compare || plot.is_some() {
            anyhow::bail!("a soak scenario runs mptun alone: no --compare or --plot");
        }
        let report = run_until_interrupted(move || mptun_lab::soak::run(&options))?;
        if json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print!("{}", mptun_lab::soak::render(&report));
        }
        return Ok(());
    }
    let report = run_until_interrupted(move || mptun_lab::run::run(&options))?;
    if let Some(path) = &plot {
        mptun_lab::plot::draw(&report, path)?;
        if !json {
            eprintln!("plot written to {}", path.display());
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", mptun_lab::run::render(&report));
    }
    Ok(())
}

fn lab_sweep(
    count: usize,
    seed: u64,
    dry_run: bool,
    json: bool,
    plot: Option<PathBuf>,
) -> anyhow::Result<()> {
    use mptun_lab::sweep;
    if dry_run {
        for (i, scenario) in sweep::draw(seed, count).iter().enumerate() {
            println!(
                "# sweep seed {seed} #{}: {}",
                i + 1,
                sweep::describe(scenario)
            );
            println!("{}", toml::to_string(scenario)?);
        }
        return Ok(());
    }
    let base = mptun_lab::run::LabOptions {
        scenario: mptun_lab::scenario::Scenario::parse(
            mptun_lab::scenario::DEFAULT_SCENARIO,
            "default",
        )?,
        scenario_name: String::new(),
        compare: true,
        json,
        mptun_exe: mptun_lab::mptun_exe()?,
    };
    let _machine = mptun_lab::machine::MachineLock::take()?;
    // Each scenario's line as it finishes, with --json too: the JSON comes
    // only at the end, an hour later.
    eprintln!("{}", sweep::HEADER);
    let report = run_until_interrupted(move || {
        Ok(sweep::run(seed, count, &base, |line| eprintln!("{line}")))
    })?;
    if let Some(path) = &plot {
        let points: Vec<_> = report
            .results
            .iter()
            .map(|r| mptun_lab::plot::SweepPoint {
                number: r.number,
                ratio_to_best: r.ratio_to_best,
                fraction_of_sum: r.fraction_of_sum,
                ratio_to_mptcp_wireguard: r.ratio_to_mptcp_wireguard,
            })
            .collect();
        mptun_lab::plot::draw_sweep(report.seed, &points, path)?;
        if !json {
            eprintln!("plot written to {}", path.display());
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", sweep::render(&report));
    }
    Ok(())
}

/// Set by SIGINT/SIGTERM/SIGHUP while the lab runs.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn note_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Run the lab on a worker thread; on Ctrl-C or SIGTERM, tear down every
/// namespace and process it made (their owners on the worker never get to)
/// and exit 130.
fn run_until_interrupted<T: Send + 'static>(
    work: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is
        // async-signal-safe; children get default dispositions back on exec.
        unsafe {
            libc::signal(
                signal,
                note_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
    let worker = std::thread::spawn(work);
    while !worker.is_finished() {
        if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
            eprintln!("mptun-lab: interrupted; removing the lab's namespaces and processes");
            mptun_netem::topology::remove_all_of_process(std::time::Duration::from_secs(2));
            mptun_lab::sites::remove_work_dirs_of_process();
            std::process::exit(130);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    worker
        .join()
        .map_err(|_| anyhow::anyhow!("the lab's worker thread panicked"))?
}
