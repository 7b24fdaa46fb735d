//! `mptun-netem`: run the link emulator in the middle namespace.
//!
//! ```text
//! mptun-netem --path ma1,mb1 --path ma2,mb2 --rate-mbit 100 --delay-ms 5
//! mptun-netem --spec paths.toml
//! ```
//! Prints `ready` once all sockets are bound, then reads control commands on
//! stdin (see `mptun_netem::control`), answering each with one line: `ok`,
//! a JSON object for `stats`, or `error: ...`. Exits on stdin EOF, `quit`,
//! SIGTERM or SIGINT.

use std::io::BufRead;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use mptun_netem::control::Command;
use mptun_netem::forwarder::Forwarder;
use mptun_netem::spec::{DirSpec, PathSpec, Spec};

#[derive(Debug, Parser)]
#[command(
    name = "mptun-netem",
    version,
    about = "Userspace link emulator (netem replacement)"
)]
struct Cli {
    /// Bridge these two interfaces as one path (repeatable). Settings from the
    /// flags below apply to these paths.
    #[arg(long = "path", value_name = "A_IF,B_IF")]
    paths: Vec<String>,
    /// TOML (or JSON) file with `[[path]]` entries; its paths come first.
    #[arg(long, value_name = "FILE")]
    spec: Option<PathBuf>,
    /// The same as --spec, inline JSON (used by the lab topology helper).
    #[arg(long, value_name = "JSON")]
    spec_json: Option<String>,
    /// Rate limit in Mbit/s for --path paths (0 = unlimited).
    #[arg(long)]
    rate_mbit: Option<f64>,
    /// One-way delay in ms for --path paths.
    #[arg(long)]
    delay_ms: Option<f64>,
    /// Jitter (+/-) in ms for --path paths.
    #[arg(long)]
    jitter_ms: Option<f64>,
    /// Random loss in percent for --path paths.
    #[arg(long)]
    loss_pct: Option<f64>,
    /// Queue limit in bytes for --path paths (default: 50 ms at the rate, >= 64 KiB).
    #[arg(long)]
    queue_bytes: Option<u64>,
    /// PRNG seed (path i uses seed + i).
    #[arg(long)]
    seed: Option<u64>,
    /// Do not ask for SCHED_FIFO on the forwarding threads.
    #[arg(long)]
    no_realtime: bool,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn install_signal_handlers() -> Result<()> {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
        // SAFETY: valid sigaction struct.
        if unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error()).context("installing signal handler");
        }
    }
    Ok(())
}

fn build_spec(cli: &Cli) -> Result<Spec> {
    let mut spec = Spec::default();
    if let Some(file) = &cli.spec {
        spec = Spec::load(file)?;
    }
    if let Some(json) = &cli.spec_json {
        let s = Spec::parse(json).context("--spec-json")?;
        spec.seed = spec.seed.or(s.seed);
        spec.path.extend(s.path);
    }
    let common = DirSpec {
        rate_mbit: cli.rate_mbit,
        delay_ms: cli.delay_ms,
        jitter_ms: cli.jitter_ms,
        loss_pct: cli.loss_pct,
        burst_loss: None,
        queue_bytes: cli.queue_bytes,
    };
    for p in &cli.paths {
        let Some((a, b)) = p.split_once(',') else {
            bail!("--path wants A_IF,B_IF, got {p:?}");
        };
        spec.path.push(PathSpec::new(a.trim(), b.trim(), &common));
    }
    if cli.seed.is_some() {
        spec.seed = cli.seed;
    }
    if spec.path.is_empty() {
        bail!("no paths: give --path A_IF,B_IF or --spec FILE");
    }
    Ok(spec)
}

fn handle(fwd: &Forwarder, line: &str) -> Result<Option<String>, String> {
    let cmd = Command::parse(line).map_err(|e| e.to_string())?;
    let path = |n: usize| {
        fwd.path(n)
            .ok_or_else(|| format!("no path {n} (have {})", fwd.len()))
    };
    match cmd {
        Command::Nop => Ok(None),
        Command::Quit => Err(String::new()),
        Command::Stats => serde_json::to_string(&serde_json::json!({ "paths": fwd.snapshot() }))
            .map(Some)
            .map_err(|e| format!("stats: {e}")),
        Command::Up(n) => {
            path(n)?.lock().set_up(true);
            Ok(Some("ok".into()))
        }
        Command::Down(n) => {
            path(n)?.lock().set_up(false);
            Ok(Some("ok".into()))
        }
        Command::Set(n, dir, setting) => {
            let p = path(n)?;
            let mut m = p.lock();
            setting.apply(&mut m, dir).map_err(|e| e.to_string())?;
            Ok(Some("ok".into()))
        }
    }
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let spec = build_spec(&cli)?;
    let seed = spec.seed.unwrap_or(1);
    let mut paths = Vec::new();
    for (i, p) in spec.path.iter().enumerate() {
        let model = p
            .to_model(seed.wrapping_add(i as u64))
            .with_context(|| format!("path {} ({},{})", i + 1, p.a, p.b))?;
        paths.push((p.a.clone(), p.b.clone(), model));
    }
    install_signal_handlers()?;
    let fwd = Forwarder::start_with(paths, !cli.no_realtime).context("starting forwarder")?;
    println!("ready");

    let (tx, rx) = mpsc::channel::<Option<String>>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            match line {
                Ok(l) => {
                    if tx.send(Some(l)).is_err() {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = tx.send(None);
    });

    while !STOP.load(Ordering::Relaxed) {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Some(line)) => match handle(&fwd, &line) {
                Ok(Some(reply)) => println!("{reply}"),
                Ok(None) => {}
                Err(e) if e.is_empty() => {
                    println!("ok");
                    break;
                }
                Err(e) => println!("error: {e}"),
            },
            Ok(None) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
    fwd.stop();
    Ok(())
}
