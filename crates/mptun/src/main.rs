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
    /// Run the lab (the mptun-lab program beside this one): two sites in
    /// network namespaces joined by emulated paths, one TCP flow through
    /// mptun, and a report; `mptun lab --help` for its options.
    #[command(disable_help_flag = true)]
    Lab {
        /// mptun-lab's arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
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
        /// Print the raw status as JSON (with a schema version): an object
        /// for the tunnel named, a list without a name.
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
        Command::Lab { args } => lab(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mptun: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// 32 bytes from the OS's random number generator.
fn random_key_bytes() -> anyhow::Result<[u8; 32]> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes)
        .map_err(|e| anyhow::anyhow!("OS random number generator: {e}"))?;
    Ok(bytes)
}

fn genkey() -> anyhow::Result<()> {
    let private = keys::private_key_from_random(random_key_bytes()?);
    println!("{}", keys::encode_key(&private));
    Ok(())
}

fn genpsk() -> anyhow::Result<()> {
    println!("{}", keys::encode_key(&random_key_bytes()?));
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
        // The tunnel named, or a list of every tunnel.
        match (interface, statuses.as_slice()) {
            (Some(_), [one]) => println!("{}", serde_json::to_string_pretty(one)?),
            (_, all) => println!("{}", serde_json::to_string_pretty(all)?),
        }
    } else {
        let texts: Vec<String> = statuses.iter().map(mptun::status::render).collect();
        print!("{}", texts.join("\n"));
    }
    Ok(())
}

/// Hand over to the lab program installed beside this one, so that the
/// daemon links neither the emulator nor the charts.
fn lab(args: &[std::ffi::OsString]) -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt;
    let me = std::env::current_exe().context("find the mptun executable")?;
    let lab = me.with_file_name("mptun-lab");
    let error = std::process::Command::new(&lab)
        .args(args)
        .env("MPTUN_EXE", &me)
        .exec();
    Err(anyhow::Error::new(error).context(format!(
        "run {} (built with `cargo build --release`, beside mptun)",
        lab.display()
    )))
}
