//! `mptun lab --scenario <soak>`: one long TCP flow through mptun of a
//! file of random bytes sent over and over, each copy checked by SHA-256
//! on arrival, while the scenario's events (cuts, repeated with `every`)
//! happen and WireGuard rekeys as it does (every 120 s). Reports goodput
//! every second, the seconds under half the median and what was happening
//! then (a cut, a handshake, steal), and the daemons' memory over time.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::run::{build_topology, read_cpu_times, LabOptions};
use crate::sites::{Site, SiteLayout, Sites, TUNNEL_B};
use mptun_netem::topology::in_netns;
use mptun_netem::NetemError;

/// Port of the soak's receiver on site B's tunnel address.
const PORT: u16 = 5999;
/// A second with less than this share of the median goodput is a dip.
const DIP: f64 = 0.5;
/// Memory is compared from this far into the flow, once buffers and pools
/// have grown to what the flow needs.
const WARM_UP_S: usize = 60;

/// What a soak measured.
#[derive(Clone, Debug, Serialize)]
pub struct SoakReport {
    pub scenario_name: String,
    pub scenario: crate::scenario::Scenario,
    pub file_mib: u32,
    /// SHA-256 of the file, hex.
    pub sha256: String,
    /// Whole copies that arrived and matched.
    pub copies_intact: u64,
    /// Copies whose hash did not match (the last, partial copy is compared
    /// with the same prefix of the file).
    pub copies_corrupt: u64,
    /// Bytes that arrived, all checked.
    pub bytes_received: u64,
    /// Goodput in each second of the flow.
    pub series_mbps: Vec<f64>,
    pub median_mbps: f64,
    /// Seconds under [`DIP`] times the median.
    pub dips: Vec<Second>,
    /// Of those, seconds not within a second of a cut.
    pub dips_not_at_a_cut: usize,
    /// Resident memory of site A's and site B's mptun, KiB, every
    /// [`WARM_UP_S`] seconds from then.
    pub rss_kib: [Vec<u64>; 2],
    /// Largest change of either site's memory after the warm-up, % of its
    /// memory then.
    pub rss_change_pct: f64,
    /// TCP retransmissions of the sender.
    pub retransmits: u64,
    /// Steal over the whole flow, %.
    pub steal_pct: Option<f64>,
}

/// One second of the flow.
#[derive(Clone, Debug, Serialize)]
pub struct Second {
    /// Seconds into the flow at its start.
    pub at: usize,
    pub mbps: f64,
    /// A path was cut within a second of it.
    pub at_cut: bool,
    /// A path was restored within a second of it.
    pub at_restore: bool,
    /// A path of site A completed a handshake within a second of it.
    pub at_handshake: bool,
    /// Steal during that second, %.
    pub steal_pct: Option<f64>,
}

/// Run a soak scenario.
pub fn run(options: &LabOptions) -> anyhow::Result<SoakReport> {
    let scenario = &options.scenario;
    let Some(spec) = &scenario.soak else {
        bail!("not a soak scenario: it has no [soak] table");
    };
    let say = |text: &str| {
        if !options.json {
            eprintln!("{text}");
        }
    };
    let file_len = spec.file_mib as usize * (1 << 20);
    let mut file = vec![0u8; file_len];
    getrandom::getrandom(&mut file)
        .map_err(|e| anyhow::anyhow!("random bytes for the file: {e}"))?;
    let file = Arc::new(file);
    let sha256 = hex(&Sha256::digest(&file[..]));
    say(&format!(
        "soak: {} MiB file (SHA-256 {sha256}), {} s over {} path(s)",
        spec.file_mib,
        scenario.duration,
        scenario.path.len()
    ));

    let mut topo = build_topology(scenario)?;
    let (ns_a, ns_b) = (topo.ns_a(), topo.ns_b());
    let sites = Sites::start(&options.mptun_exe, &topo, &SiteLayout::all_paths(&topo))?;
    let pids = sites.pids();
    let status_a = sites.status_fetcher(Site::A);

    let listen: SocketAddr = (TUNNEL_B.parse::<std::net::Ipv4Addr>()?, PORT).into();
    let listener = in_netns(&ns_b, move || {
        TcpListener::bind(listen).map_err(|e| NetemError::io("bind the soak's receiver", e))
    })?;
    let received = Arc::new(AtomicU64::new(0));
    let receiver = {
        let (file, received) = (file.clone(), received.clone());
        std::thread::spawn(move || receive(listener, &file, &received))
    };
    let cc = scenario.congestion_control.clone();
    let mut stream = in_netns(&ns_a, move || {
        let stream =
            TcpStream::connect(listen).map_err(|e| NetemError::io("connect to the receiver", e))?;
        set_congestion_control(&stream, &cc).map_err(|e| NetemError::io("TCP_CONGESTION", e))?;
        Ok(stream)
    })?;

    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(scenario.duration);
    let done = Arc::new(AtomicBool::new(false));
    let ticker = {
        let (done, received, pids) = (done.clone(), received.clone(), pids.clone());
        std::thread::spawn(move || tick(start, &done, &received, &pids, &status_a))
    };
    let cpu_before = read_cpu_times();
    let timeline = scenario.timeline();
    let sent = std::thread::scope(|scope| {
        let sender = scope.spawn(|| -> anyhow::Result<u64> {
            let mut sent = 0u64;
            'flow: loop {
                for chunk in file.chunks(1 << 20) {
                    if Instant::now() >= deadline {
                        break 'flow;
                    }
                    stream.write_all(chunk).context("send through the tunnel")?;
                    sent += chunk.len() as u64;
                }
            }
            stream.shutdown(std::net::Shutdown::Write)?;
            Ok(sent)
        });
        for event in &timeline {
            let at = start + Duration::from_secs_f64(event.at);
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            for line in event.commands()? {
                topo.control(&line)
                    .with_context(|| format!("emulator: {line}"))?;
            }
        }
        sender
            .join()
            .map_err(|_| anyhow::anyhow!("sender thread panicked"))?
    })?;
    let retransmits = total_retransmits(&stream).unwrap_or(0);
    let steal_pct = read_cpu_times()
        .zip(cpu_before)
        .and_then(|(after, before)| after.steal_pct_since(&before));
    let checked = receiver
        .join()
        .map_err(|_| anyhow::anyhow!("receiver thread panicked"))??;
    done.store(true, Ordering::Relaxed);
    let ticks = ticker
        .join()
        .map_err(|_| anyhow::anyhow!("sampling thread panicked"))?;
    drop(sites);
    if checked.bytes != sent {
        bail!(
            "sent {sent} bytes, {} arrived before the connection closed",
            checked.bytes
        );
    }
    Ok(report(
        options,
        spec.file_mib,
        sha256,
        checked,
        ticks,
        retransmits,
        steal_pct,
    ))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the receiver checked.
struct Checked {
    intact: u64,
    corrupt: u64,
    bytes: u64,
}

/// Take one connection and check every copy of `file` that comes in.
fn receive(listener: TcpListener, file: &[u8], received: &AtomicU64) -> anyhow::Result<Checked> {
    let (mut conn, _) = listener.accept().context("accept the sender")?;
    let whole = Sha256::digest(file);
    let mut checked = Checked {
        intact: 0,
        corrupt: 0,
        bytes: 0,
    };
    let mut hasher = Sha256::new();
    let mut in_copy = 0usize;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = conn.read(&mut buf).context("receive through the tunnel")?;
        if n == 0 {
            break;
        }
        let mut data = &buf[..n];
        while !data.is_empty() {
            let take = data.len().min(file.len() - in_copy);
            hasher.update(&data[..take]);
            in_copy += take;
            data = &data[take..];
            if in_copy == file.len() {
                if hasher.finalize_reset() == whole {
                    checked.intact += 1;
                } else {
                    checked.corrupt += 1;
                }
                in_copy = 0;
            }
        }
        checked.bytes += n as u64;
        received.store(checked.bytes, Ordering::Relaxed);
    }
    if in_copy > 0 && hasher.finalize() != Sha256::digest(&file[..in_copy]) {
        checked.corrupt += 1;
    }
    Ok(checked)
}

fn set_congestion_control(stream: &TcpStream, cc: &str) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the name is a live buffer of the length given; the fd is open.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr().cast(),
            cc.len() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn total_retransmits(stream: &TcpStream) -> Option<u64> {
    use std::os::fd::AsRawFd;
    // SAFETY: tcp_info is plain data; getsockopt writes at most `len` bytes.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(u64::from(info.tcpi_total_retrans))
}

/// What was sampled every second.
#[derive(Default)]
struct Ticks {
    mbps: Vec<f64>,
    steal_pct: Vec<Option<f64>>,
    /// Seconds into the flow of site A's handshakes.
    handshakes: Vec<f64>,
    rss_kib: [Vec<u64>; 2],
}

fn tick(
    start: Instant,
    done: &AtomicBool,
    received: &AtomicU64,
    pids: &[u32],
    status_a: &dyn Fn() -> anyhow::Result<mptun::status::Status>,
) -> Ticks {
    let mut ticks = Ticks::default();
    let mut last_bytes = 0;
    let mut last_cpu = read_cpu_times();
    let mut next = start;
    while !done.load(Ordering::Relaxed) {
        next += Duration::from_secs(1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let bytes = received.load(Ordering::Relaxed);
        ticks
            .mbps
            .push((bytes - last_bytes.min(bytes)) as f64 * 8.0 / 1e6);
        last_bytes = bytes;
        let cpu = read_cpu_times();
        ticks.steal_pct.push(
            cpu.zip(last_cpu)
                .and_then(|(now, before)| now.steal_pct_since(&before)),
        );
        last_cpu = cpu;
        let second = ticks.mbps.len();
        if second % WARM_UP_S == 0 {
            for (rss, pid) in ticks.rss_kib.iter_mut().zip(pids) {
                rss.push(rss_kib(*pid).unwrap_or(0));
            }
        }
        if let Ok(status) = status_a() {
            let now = start.elapsed().as_secs_f64();
            for p in &status.paths {
                if let Some(since) = p.since_handshake_secs.filter(|s| *s < 1.0) {
                    ticks.handshakes.push(now - since);
                }
            }
        }
    }
    ticks
}

/// Resident memory of process `pid`, KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn report(
    options: &LabOptions,
    file_mib: u32,
    sha256: String,
    checked: Checked,
    ticks: Ticks,
    retransmits: u64,
    steal_pct: Option<f64>,
) -> SoakReport {
    let scenario = &options.scenario;
    // The last tick may cover the end of the flow only in part.
    let duration = scenario.duration.floor() as usize;
    let series: Vec<f64> = ticks.mbps.iter().copied().take(duration).collect();
    let mut sorted = series.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
    let timeline = scenario.timeline();
    let cuts: Vec<f64> = times_set(&timeline, false).collect();
    let restores: Vec<f64> = times_set(&timeline, true).collect();
    let near =
        |second: usize, times: &[f64]| times.iter().any(|t| (second as f64 - t).abs() <= 1.0);
    let dips: Vec<Second> = series
        .iter()
        .enumerate()
        .filter(|(_, &mbps)| mbps < DIP * median)
        .map(|(at, &mbps)| Second {
            at,
            mbps,
            at_cut: near(at, &cuts),
            at_restore: near(at, &restores),
            at_handshake: near(at, &ticks.handshakes),
            steal_pct: ticks.steal_pct.get(at).copied().flatten(),
        })
        .collect();
    let rss_change_pct = ticks
        .rss_kib
        .iter()
        .filter_map(|rss| {
            let base = *rss.first()? as f64;
            let worst = rss
                .iter()
                .map(|&r| (r as f64 - base).abs())
                .fold(0.0, f64::max);
            (base > 0.0).then(|| 100.0 * worst / base)
        })
        .fold(0.0, f64::max);
    SoakReport {
        scenario_name: options.scenario_name.clone(),
        scenario: scenario.clone(),
        file_mib,
        sha256,
        copies_intact: checked.intact,
        copies_corrupt: checked.corrupt,
        bytes_received: checked.bytes,
        dips_not_at_a_cut: dips.iter().filter(|d| !d.at_cut).count(),
        dips,
        series_mbps: series,
        median_mbps: median,
        rss_kib: ticks.rss_kib,
        rss_change_pct,
        retransmits,
        steal_pct,
    }
}

/// Return when the events of `timeline` bring a path up (`up`) or cut one.
fn times_set(timeline: &[crate::scenario::Event], up: bool) -> impl Iterator<Item = f64> + '_ {
    timeline
        .iter()
        .filter(move |e| e.sets_up() == Some(up))
        .map(|e| e.at)
}

/// The soak's report for people.
pub fn render(r: &SoakReport) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "soak {}: {} s, {} path(s), inner TCP {}",
        r.scenario_name,
        r.scenario.duration,
        r.scenario.path.len(),
        r.scenario.congestion_control
    );
    let _ = writeln!(
        o,
        "file: {} MiB, SHA-256 {}: {} copies intact, {} corrupt, {:.2} GiB received",
        r.file_mib,
        r.sha256,
        r.copies_intact,
        r.copies_corrupt,
        r.bytes_received as f64 / (1u64 << 30) as f64
    );
    let _ = writeln!(
        o,
        "goodput: median {:.1} Mbit/s per second, {} retransmissions, steal {}",
        r.median_mbps,
        r.retransmits,
        r.steal_pct
            .map_or("unknown".to_string(), |s| format!("{s:.1}%"))
    );
    let _ = writeln!(
        o,
        "seconds under half the median: {} ({} not within a second of a cut)",
        r.dips.len(),
        r.dips_not_at_a_cut
    );
    for d in r.dips.iter().filter(|d| !d.at_cut) {
        let mut why = Vec::new();
        if d.at_restore {
            why.push("a path restored");
        }
        if d.at_handshake {
            why.push("a handshake");
        }
        let _ = writeln!(
            o,
            "  at {} s: {:.1} Mbit/s{}{}",
            d.at,
            d.mbps,
            if why.is_empty() {
                String::new()
            } else {
                format!(", near {}", why.join(" and "))
            },
            d.steal_pct
                .map_or(String::new(), |s| format!(", steal {s:.0}%"))
        );
    }
    for (site, rss) in ["A", "B"].iter().zip(&r.rss_kib) {
        let _ = writeln!(
            o,
            "site {site} RSS every minute (MiB): {}",
            rss.iter()
                .map(|k| format!("{:.1}", *k as f64 / 1024.0))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    let _ = writeln!(
        o,
        "largest change of memory after the first {WARM_UP_S} s: {:.1}%",
        r.rss_change_pct
    );
    o
}
