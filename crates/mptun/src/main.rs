//! The `mptun` command.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use mptun::config::Config;
use mptun::tunnel::Tunnel;
use mptun_wg::keys;
use tracing::{info, warn};

/// Multipath WireGuard tunnel: stripes one flow's packets over several
/// WireGuard paths and delivers them in order at the other site.
#[derive(Parser)]
#[command(name = "mptun", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print a new private key (base64), interchangeable with `wg genkey`.
    Genkey,
    /// Read a private key on stdin and print its public key, like `wg pubkey`.
    Pubkey,
    /// Print a new pre-shared key (base64), like `wg genpsk`.
    Genpsk,
    /// Read wg-quick configs, one per tunnel to the same peer (as for ECMP),
    /// and print one mptun config with a path per tunnel.
    Import {
        /// wg-quick config files (wg0.conf wg1.conf ...).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Validate a config file, offline (host names are not looked up): exit
    /// 0, or print the file and key at fault.
    Check {
        /// The config file (TOML).
        config: PathBuf,
    },
    /// Bring the tunnel up and run in the foreground until SIGINT or SIGTERM,
    /// then remove the TUN device and routes it added.
    ///
    /// Logs go to stderr; set MPTUN_LOG (e.g. MPTUN_LOG=debug) for more.
    Up {
        /// The config file (TOML).
        config: PathBuf,
    },
    /// Run the lab: two sites in network namespaces joined by emulated paths,
    /// one TCP flow through mptun, and a report (needs root and iperf3).
    ///
    /// Without --scenario it runs the built-in default: three equal paths of
    /// 100 Mbit/s and 10 ms RTT.
    Lab {
        /// Scenario file (see configs/lab/).
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
    },
    /// Re-read a running tunnel's config, as SIGHUP does: paths added,
    /// removed or changed, weights and keepalive, without stopping the
    /// other paths; other changes are refused and the config in force stays.
    Reload {
        /// Interface name; may be left out when one tunnel is running.
        interface: Option<String>,
    },
    /// Print shell completions (e.g. `mptun completions bash >
    /// /etc/bash_completion.d/mptun`).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the man page, mptun(8), as roff (`mptun man > mptun.8`).
    Man,
    /// Show what each path of a running tunnel is doing, like `wg show`;
    /// without a name, every tunnel in this network namespace.
    Show {
        /// Interface name.
        interface: Option<String>,
        /// Print the raw status as JSON (with a schema version).
        #[arg(long, conflicts_with = "dump")]
        json: bool,
        /// One tab-separated line per path, for scripts, like `wg show all
        /// dump`: interface, path, name, state, local, endpoint, latest
        /// handshake (s since 1970, 0 for none), rx and tx bytes on the
        /// wire, rtt ms, loss %, rate Mbit/s, flaps, rejected, refused.
        #[arg(long)]
        dump: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Genkey => genkey(),
        Command::Genpsk => genpsk(),
        Command::Import { files } => import(&files),
        Command::Pubkey => pubkey(),
        Command::Check { config } => check(&config),
        Command::Up { config } => up(&config),
        Command::Show {
            interface,
            json,
            dump,
        } => show(interface.as_deref(), json, dump),
        Command::Reload { interface } => reload(interface.as_deref()),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "mptun", &mut std::io::stdout());
            Ok(())
        }
        Command::Man => {
            use clap::CommandFactory;
            let page = clap_mangen::Man::new(Cli::command()).section("8");
            page.render(&mut std::io::stdout())
                .context("write the man page")
        }
        Command::Lab {
            json,
            plot,
            sweep: Some(count),
            seed,
            dry_run,
            ..
        } => lab_sweep(count, seed, dry_run, json, plot),
        Command::Lab {
            scenario,
            compare,
            json,
            plot,
            sweep: None,
            ..
        } => lab(scenario, compare, json, plot),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mptun: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn genkey() -> anyhow::Result<()> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes)
        .map_err(|e| anyhow::anyhow!("OS random number generator: {e}"))?;
    println!(
        "{}",
        keys::encode_key(&keys::private_key_from_random(bytes))
    );
    Ok(())
}

fn genpsk() -> anyhow::Result<()> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes)
        .map_err(|e| anyhow::anyhow!("OS random number generator: {e}"))?;
    println!("{}", keys::encode_key(&bytes));
    Ok(())
}

fn import(files: &[PathBuf]) -> anyhow::Result<()> {
    let mut texts = Vec::new();
    for path in files {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
        texts.push((path.display().to_string(), text));
    }
    print!("{}", mptun::import::import(&texts)?);
    Ok(())
}

fn pubkey() -> anyhow::Result<()> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("read private key from stdin")?;
    let private = keys::decode_key(&text).context("private key on stdin")?;
    println!("{}", keys::encode_key(&keys::public_key(&private)));
    Ok(())
}

fn check(path: &std::path::Path) -> anyhow::Result<()> {
    let (config, warnings) = Config::load_offline(path)?;
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let mtu = mptun::mtu::tun_mtu(&config);
    println!(
        "{}: ok: interface {}, {} path(s), mtu {} ({})",
        path.display(),
        config.interface.name,
        config.paths.len(),
        mtu.mtu,
        mtu.source
    );
    Ok(())
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MPTUN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if mptun::systemd::logging_to_journal() {
        // The journal stamps each line; the prefix gives its priority.
        let format = tracing_subscriber::fmt::format()
            .without_time()
            .with_ansi(false);
        builder
            .with_ansi(false)
            .event_format(mptun::systemd::SyslogPriority(format))
            .init();
    } else {
        builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init();
    }
}

fn up(path: &std::path::Path) -> anyhow::Result<()> {
    let (config, warnings) = Config::load(path)?;
    init_logging();
    for w in &warnings {
        warn!("{w}");
    }
    let epoch = mptun::run_epoch();
    let runtime = tokio::runtime::Runtime::new().context("start the async runtime")?;
    runtime.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut terminate = signal(SignalKind::terminate()).context("install SIGTERM handler")?;
        let mut interrupt = signal(SignalKind::interrupt()).context("install SIGINT handler")?;
        let mut hangup = signal(SignalKind::hangup()).context("install SIGHUP handler")?;
        let name = config.interface.name.clone();
        let paths = config.paths.len();
        let mut tunnel = Tunnel::start(config, epoch).await?;
        info!(interface = %name, paths, "tunnel up; SIGHUP to reload, SIGINT or SIGTERM to stop");
        mptun::systemd::notify(&format!(
            "READY=1\nSTATUS=tunnel {name} up, {paths} path(s)"
        ));
        let failure = loop {
            tokio::select! {
                _ = terminate.recv() => { info!("SIGTERM: shutting down"); break None }
                _ = interrupt.recv() => { info!("SIGINT: shutting down"); break None }
                _ = hangup.recv() => {
                    info!(config = %path.display(), "SIGHUP: reloading");
                    mptun::systemd::notify("RELOADING=1");
                    let loaded = Config::load(path).map_err(anyhow::Error::from).map(|(c, w)| {
                        for w in &w {
                            warn!("{w}");
                        }
                        c
                    });
                    match tunnel.reload(loaded).await {
                        Ok(summary) => info!(%summary, "reloaded"),
                        Err(e) => warn!(error = %format!("{e:#}"), "reload refused"),
                    }
                    mptun::systemd::notify("READY=1");
                }
                e = tunnel.failed() => break Some(e),
            }
        };
        mptun::systemd::notify("STOPPING=1");
        tunnel.shutdown().await;
        match failure {
            Some(e) => Err(e.context("the tunnel failed; it was taken down")),
            None => anyhow::Ok(()),
        }
    })
}

/// Ask a running tunnel to re-read its config (SIGHUP) and wait for what
/// came of it.
fn reload(interface: Option<&str>) -> anyhow::Result<()> {
    let before = mptun::status::fetch(interface)?;
    if before.pid == 0 {
        anyhow::bail!(
            "{} runs a release of mptun that cannot reload",
            before.interface
        );
    }
    // SAFETY: kill takes plain integers.
    if unsafe { libc::kill(before.pid as libc::pid_t, libc::SIGHUP) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("signal mptun (pid {})", before.pid));
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let now = mptun::status::fetch(Some(&before.interface))?;
        if now.reloads.count > before.reloads.count {
            return match now.reloads.last_error {
                Some(e) => Err(anyhow::anyhow!("{}: reload refused: {e}", now.interface)),
                None => {
                    println!(
                        "{}: reloaded: {}",
                        now.interface,
                        now.reloads.last_summary.unwrap_or_default()
                    );
                    Ok(())
                }
            };
        }
    }
    anyhow::bail!("{} did not answer the reload within 60 s", before.interface)
}

fn show(interface: Option<&str>, json: bool, dump: bool) -> anyhow::Result<()> {
    let statuses = match interface {
        Some(name) => vec![mptun::status::fetch(Some(name))?],
        None => mptun::status::fetch_all()?,
    };
    if statuses.is_empty() && !dump {
        anyhow::bail!("no running mptun in this network namespace");
    }
    if dump {
        print!("{}", mptun::status::render_dump(&statuses));
    } else if json {
        // One object for one tunnel, as before; a list for several.
        match statuses.as_slice() {
            [one] => println!("{}", serde_json::to_string_pretty(one)?),
            all => println!("{}", serde_json::to_string_pretty(all)?),
        }
    } else {
        let texts: Vec<String> = statuses.iter().map(mptun::status::render).collect();
        print!("{}", texts.join("\n"));
    }
    Ok(())
}

fn lab(
    scenario: Option<PathBuf>,
    compare: bool,
    json: bool,
    plot: Option<PathBuf>,
) -> anyhow::Result<()> {
    use mptun::lab::scenario::{Scenario, DEFAULT_SCENARIO};
    let (scenario, scenario_name) = match scenario {
        Some(path) => (Scenario::load(&path)?, path.display().to_string()),
        None => (
            Scenario::parse(DEFAULT_SCENARIO, "default")?,
            "default (equal)".to_string(),
        ),
    };
    let options = mptun::lab::run::LabOptions {
        scenario,
        scenario_name,
        compare,
        json,
        mptun_exe: std::env::current_exe().context("find the mptun executable")?,
    };
    if options.scenario.soak.is_some() {
        if compare || plot.is_some() {
            anyhow::bail!("a soak scenario runs mptun alone: no --compare or --plot");
        }
        let report = run_until_interrupted(move || mptun::lab::soak::run(&options))?;
        if json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print!("{}", mptun::lab::soak::render(&report));
        }
        return Ok(());
    }
    let report = run_until_interrupted(move || mptun::lab::run::run(&options))?;
    if let Some(path) = &plot {
        mptun::lab::plot::draw(&report, path)?;
        if !json {
            eprintln!("plot written to {}", path.display());
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", mptun::lab::run::render(&report));
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
    use mptun::lab::sweep;
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
    let base = mptun::lab::run::LabOptions {
        scenario: mptun::lab::scenario::Scenario::parse(
            mptun::lab::scenario::DEFAULT_SCENARIO,
            "default",
        )?,
        scenario_name: String::new(),
        compare: true,
        json,
        mptun_exe: std::env::current_exe().context("find the mptun executable")?,
    };
    if !json {
        eprintln!("{}", sweep::HEADER);
    }
    let report = run_until_interrupted(move || {
        sweep::run(seed, count, &base, |line| {
            if !base.json {
                eprintln!("{line}");
            }
        })
    })?;
    if let Some(path) = &plot {
        mptun::lab::plot::draw_sweep(&report, path)?;
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
            eprintln!("mptun lab: interrupted; removing the lab's namespaces and processes");
            mptun_netem::topology::remove_all_of_process(std::time::Duration::from_secs(2));
            mptun::lab::sites::remove_work_dirs_of_process();
            std::process::exit(130);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    worker
        .join()
        .map_err(|_| anyhow::anyhow!("the lab's worker thread panicked"))?
}
