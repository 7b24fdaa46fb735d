//! `mptun show`: a running tunnel answers on a Unix socket with a JSON
//! snapshot of its counters; the client prints it like `wg show`.

use std::fmt::Write as _;

use anyhow::{bail, Context};
use mptun_core::{HoldHistogram, PathState, RefusedStats};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixListener;
use tokio::sync::{mpsc, oneshot};
use tracing::warn;

use crate::counters::RejectSnapshot;

/// Folder of the status sockets: made by root, writable by nobody else, so
/// no other local user can bind a socket of ours first and answer
/// `mptun show` in the tunnel's place.
const SOCKET_DIR: &str = "/run/mptun";
/// Longest answer `mptun show` reads, and how long it waits for it.
const ANSWER_MAX: u64 = 4 << 20;
const ANSWER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Return this network namespace's identity: tunnels of the same name in
/// different namespaces (two sites on one lab machine) each get their own
/// socket, and `mptun show` finds the one of its namespace.
fn netns_id() -> std::io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata("/proc/self/ns/net")?.ino())
}

fn socket_path(interface: &str) -> std::io::Result<std::path::PathBuf> {
    Ok(std::path::Path::new(SOCKET_DIR).join(format!("{interface}.{}.sock", netns_id()?)))
}

/// Make [`SOCKET_DIR`] if it is missing, and check that only root (or we)
/// can create anything in it.
fn check_socket_dir() -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let dir = std::path::Path::new(SOCKET_DIR);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .with_context(|| format!("create {SOCKET_DIR}"))?;
    let meta = std::fs::symlink_metadata(dir).with_context(|| format!("stat {SOCKET_DIR}"))?;
    // SAFETY: geteuid has no preconditions.
    let own_uid = unsafe { libc::geteuid() };
    if !meta.is_dir() || (meta.uid() != 0 && meta.uid() != own_uid) || meta.mode() & 0o022 != 0 {
        bail!(
            "{SOCKET_DIR} must be a folder of root's (or ours) that nobody else can write to (it is uid {}, mode {:o})",
            meta.uid(),
            meta.mode() & 0o7777
        );
    }
    Ok(())
}

/// Whether `uid`, of the process at the other end of a status socket, is
/// root's, ours, or `handed_to`, the user root gave the socket to.
fn trusted_peer(uid: std::io::Result<u32>, handed_to: Option<u32>) -> bool {
    // SAFETY: geteuid has no preconditions.
    let own_uid = unsafe { libc::geteuid() };
    uid.is_ok_and(|uid| uid == 0 || uid == own_uid || Some(uid) == handed_to)
}

/// Return the user a daemon that dropped root (`interface.user`) runs as:
/// the owner of its socket, which only root can have made and handed over
/// when [`SOCKET_DIR`] is root's and nobody else can write to it.
fn handed_to(socket: &std::path::Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let dir = std::fs::symlink_metadata(SOCKET_DIR).ok()?;
    if !dir.is_dir() || dir.uid() != 0 || dir.mode() & 0o022 != 0 {
        return None;
    }
    Some(std::fs::symlink_metadata(socket).ok()?.uid())
}

/// Return the user of the process at the other end of `stream`: for a
/// client, the one that bound the socket.
fn peer_uid(stream: &impl std::os::fd::AsRawFd) -> std::io::Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given, and
    // the descriptor is open for as long as `stream` is.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// Return the interfaces with a status socket in this network namespace.
fn running_interfaces() -> Vec<String> {
    let Ok(suffix) = netns_id().map(|id| format!(".{id}.sock")) else {
        return Vec::new();
    };
    let mut names: Vec<String> = std::fs::read_dir(SOCKET_DIR)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(&suffix)
                .map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

/// Everything `mptun show` reports.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Status {
    /// Version of this layout: raised when a field changes meaning or goes.
    #[serde(default)]
    pub schema: u32,
    pub interface: String,
    /// The daemon's process id.
    #[serde(default)]
    pub pid: u32,
    #[serde(default)]
    pub reloads: Reloads,
    pub public_key: String,
    pub peer_public_key: String,
    pub mtu: u16,
    /// Where the MTU came from: `interface.mtu` or the paths' interfaces.
    pub mtu_source: String,
    pub epoch: u32,
    pub uptime_secs: f64,
    pub allowed_ips: Vec<String>,
    pub tun: TunStatus,
    pub reorder: ReorderStatus,
    pub paths: Vec<PathStatus>,
}

/// The layout of [`Status`] this build writes.
pub const SCHEMA: u32 = 1;

/// What came of the reloads asked of the daemon (SIGHUP).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Reloads {
    /// Reloads tried.
    pub count: u64,
    /// What the last one changed, if it was taken.
    pub last_summary: Option<String>,
    /// Why the last one was refused or failed, if it was.
    pub last_error: Option<String>,
}

/// TUN side counters.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TunStatus {
    pub read_packets: u64,
    pub written_packets: u64,
    pub dropped_no_path: u64,
    pub dropped_not_ip: u64,
    pub dropped_disallowed_destination: u64,
    pub dropped_disallowed_source: u64,
    /// Packets dropped because a path's worker fell behind.
    pub dropped_path_queue_full: u64,
    pub write_errors: u64,
}

/// Reorder buffer state and counters.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ReorderStatus {
    pub hold_ms: f64,
    pub waited: u64,
    pub wait_p50_ms: Option<f64>,
    pub wait_p99_ms: Option<f64>,
    /// The waits' histogram, (bucket, waits) for the buckets that have any
    /// (see `HoldHistogram::nonzero_buckets`), for readers that want the
    /// hold over a stretch of time.
    #[serde(default)]
    pub wait_buckets: Vec<(u32, u64)>,
    /// The same by what ended each wait.
    #[serde(default)]
    pub wait_buckets_by_end: WaitBucketsByEnd,
    pub held_now: usize,
    pub in_order: u64,
    pub buffered: u64,
    /// Bare TCP ACKs handed out ahead of an earlier packet still awaited:
    /// they need no order.
    #[serde(default)]
    pub passed: u64,
    pub skipped_loss: u64,
    pub skipped_timeout: u64,
    pub skipped_overflow: u64,
    pub skipped_restart: u64,
    pub dropped_stale: u64,
    pub dropped_duplicate: u64,
    pub epoch_changes: u64,
    /// NACKs the peer sent for a run of ours before a restart.
    pub nacks_for_old_run: u64,
    /// How long a lost packet's repair is waited for.
    pub repair_wait_ms: Option<f64>,
    pub repairs_requested: u64,
    pub repaired: u64,
    /// Losses on a congested path, left to the inner flow unrepaired.
    pub congestion_losses: u64,
    /// Losses whose repair came after the packets behind them were released
    /// (found after a pause, or slower than the repair patience), handed
    /// out late.
    #[serde(default)]
    pub repaired_late: u64,
    /// How long a TCP segment that came the nearest way is held, so that
    /// its flow sees the farthest path's round trip; none until measured.
    #[serde(default)]
    pub tcp_hold_ms: Option<f64>,
    /// TCP segments held so, in all, and now.
    #[serde(default)]
    pub tcp_held: u64,
    #[serde(default)]
    pub tcp_holding: usize,
    /// TCP segments we sent for the peer not to hold, their DSCP being
    /// one of `interface.low-latency-dscp`.
    #[serde(default)]
    pub tcp_low_latency_sent: u64,
    /// Packets the peer asked for that were not in our sent log: asked
    /// for longer after they were sent than the log spans (or never sent).
    #[serde(default)]
    pub repairs_gone: u64,
    /// Packets the peer asked for that no path would have brought while
    /// they were of use, nor, later, had room for: left to the inner flow.
    #[serde(default)]
    pub repairs_too_late: u64,
}

/// The reorder buffer's waits' histograms (see
/// [`ReorderStatus::wait_buckets`]) by what became of the last gap a packet
/// waited for (see `mptun_core::WaitEnd`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WaitBucketsByEnd {
    /// Its own packet came, late: reordering.
    pub reordered: Vec<(u32, u64)>,
    /// A repair asked for filled it.
    pub repaired: Vec<(u32, u64)>,
    /// It was given up on: lost, waited for the hold, or skipped.
    pub given_up: Vec<(u32, u64)>,
}

/// One path.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PathStatus {
    pub id: u8,
    /// `path[].name`, if given.
    #[serde(default)]
    pub name: Option<String>,
    pub local: String,
    pub endpoint: Option<String>,
    pub up: bool,
    pub state: String,
    pub srtt_ms: Option<f64>,
    pub owd_rel_ms: Option<f64>,
    pub queue_ms: f64,
    pub model_queue_ms: f64,
    /// The rate the scheduler's model drains the path at, Mbit/s: the
    /// delivery rate measured behind a queue; before that, the probe
    /// trains' rate (100 Mbit/s until they report) or what the path
    /// carried, whichever is more, a quarter over once it carried any.
    #[serde(default)]
    pub model_rate_mbps: Option<f64>,
    pub rate_mbps: Option<f64>,
    /// The highest rate our probe trains arrived at, Mbit/s: the path's
    /// bottleneck as measured when its session came up.
    #[serde(default)]
    pub train_mbps: Option<f64>,
    pub loss_pct: f64,
    pub tx_probes: u64,
    pub rx_probes: u64,
    pub tx_nacks: u64,
    pub rx_nacks: u64,
    /// Parity halves sent after runs of data on the path, and received.
    #[serde(default)]
    pub tx_parity: u64,
    #[serde(default)]
    pub rx_parity: u64,
    /// Data packets the path lost that were rebuilt from their run's
    /// parity, with no repair.
    #[serde(default)]
    pub rebuilt: u64,
    /// Times a probe's echo was overdue enough for new data to avoid the
    /// path, before it would be marked down.
    pub late_echoes: u64,
    /// The queue the scheduler fills the path to, ms, learned from its
    /// overflows; none if it never overflowed (or came back since).
    #[serde(default)]
    pub queue_limit_ms: Option<f64>,
    /// Times packets sent into the path's standing queue were lost beyond
    /// its random loss.
    #[serde(default)]
    pub overflows: u64,
    pub since_handshake_secs: Option<f64>,
    pub handshake_rtt_ms: Option<u32>,
    /// Handshakes completed on this path's session.
    #[serde(default)]
    pub handshakes: u64,
    /// Times the path went from carrying data to not (down, no session,
    /// set aside).
    #[serde(default)]
    pub flaps: u64,
    /// Seconds since the path's state last changed.
    #[serde(default)]
    pub since_change_secs: Option<f64>,
    /// Datagrams and their bytes on the wire (sealed), as `wg show`
    /// counts; `tx_bytes` and `rx_bytes` are inner bytes.
    #[serde(default)]
    pub tx_datagrams: u64,
    #[serde(default)]
    pub tx_datagram_bytes: u64,
    #[serde(default)]
    pub rx_datagrams: u64,
    #[serde(default)]
    pub rx_datagram_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Of `tx_packets`, those resent because the peer asked for them.
    pub resent: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub send_errors: u64,
    pub recv_errors: u64,
    /// Datagrams WireGuard rejected.
    pub rejected: RejectSnapshot,
    /// Handshake initiations and cookie replies taken; neither moves the
    /// endpoint.
    #[serde(default)]
    pub rx_initiations: u64,
    #[serde(default)]
    pub rx_cookie_replies: u64,
    /// Authenticated plaintexts mptun refused.
    pub refused: RefusedSnapshot,
}

/// Authenticated plaintexts of one path mptun refused, by reason.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct RefusedSnapshot {
    pub bad_trailer: u64,
    pub length_mismatch: u64,
    pub bad_probe: u64,
    pub bad_nack: u64,
    pub foreign_epoch: u64,
}

impl From<RefusedStats> for RefusedSnapshot {
    fn from(r: RefusedStats) -> Self {
        RefusedSnapshot {
            bad_trailer: r.bad_trailer,
            length_mismatch: r.length_mismatch,
            bad_probe: r.bad_probe,
            bad_nack: r.bad_nack,
            foreign_epoch: r.foreign_epoch,
        }
    }
}

impl RefusedSnapshot {
    /// Return the total.
    pub fn total(&self) -> u64 {
        self.bad_trailer
            + self.length_mismatch
            + self.bad_probe
            + self.bad_nack
            + self.foreign_epoch
    }
}

/// Return how `mptun show` names a path's state.
pub(crate) fn state_name(state: PathState, echo_late: bool) -> &'static str {
    match state {
        PathState::Up if echo_late => "up (echo late)",
        PathState::NoSession => "no session",
        PathState::Unconfirmed => "up (unconfirmed)",
        PathState::Up => "up",
        PathState::Down => "down",
        PathState::SetAside => "set aside (lossy)",
    }
}

/// A request for a status snapshot, answered by the task that owns the
/// tunnel's state.
pub(crate) type StatusRequest = oneshot::Sender<Status>;

/// Where the status and metrics servers take their snapshots: the endpoint
/// task's counters, completed with what the daemon knows of itself.
#[derive(Clone)]
pub(crate) struct Snapshots {
    pub requests: mpsc::Sender<StatusRequest>,
    pub reloads: std::sync::Arc<std::sync::Mutex<Reloads>>,
}

impl Snapshots {
    /// Take one; `None` once the endpoint task is gone.
    pub async fn take(&self) -> Option<Status> {
        let (reply, answer) = oneshot::channel();
        self.requests.send(reply).await.ok()?;
        let mut status = answer.await.ok()?;
        status.schema = SCHEMA;
        status.pid = std::process::id();
        status.reloads = self
            .reloads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        Some(status)
    }
}

/// Serves status snapshots until dropped, then removes its socket.
pub(crate) struct StatusServer {
    task: tokio::task::JoinHandle<()>,
    path: std::path::PathBuf,
}

impl StatusServer {
    /// Listen for `mptun show` on `name`'s socket, answering with
    /// `snapshots`.
    pub fn start(name: &str, snapshots: Snapshots) -> anyhow::Result<StatusServer> {
        check_socket_dir()?;
        let path = socket_path(name)?;
        if std::os::unix::net::UnixStream::connect(&path).is_ok() {
            bail!("{} answers already: is {name} running?", path.display());
        }
        // Left by a daemon that died: nobody answers on it.
        let _ = std::fs::remove_file(&path);
        let std_listener = std::os::unix::net::UnixListener::bind(&path)
            .with_context(|| format!("listen on status socket {}", path.display()))?;
        std_listener.set_nonblocking(true)?;
        let listener = UnixListener::from_std(std_listener)?;
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    continue;
                };
                // Answer only root and our own user, as `wg show` needs root
                // (the folder is world-readable so `show` can list it).
                if !trusted_peer(stream.peer_cred().map(|c| c.uid()), None) {
                    continue;
                }
                let Some(status) = snapshots.take().await else {
                    break;
                };
                match serde_json::to_vec(&status) {
                    Ok(bytes) => {
                        let _ = stream.write_all(&bytes).await;
                    }
                    Err(e) => warn!(error = %e, "could not encode status"),
                }
            }
        });
        Ok(StatusServer { task, path })
    }
}

impl StatusServer {
    /// Give the socket to `user`, who the daemon is about to become, so
    /// that `mptun show` trusts its answers (see [`handed_to`]).
    pub fn hand_to(&self, user: &crate::privileges::RunAs) -> anyhow::Result<()> {
        std::os::unix::fs::chown(&self.path, Some(user.uid), Some(user.gid))
            .with_context(|| format!("give {} to user {:?}", self.path.display(), user.name))
    }
}

impl Drop for StatusServer {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Fetch the status of every tunnel running in this network namespace.
pub fn fetch_all() -> anyhow::Result<Vec<Status>> {
    running_interfaces()
        .iter()
        .map(|name| fetch(Some(name)))
        .collect()
}

/// Fetch the status of a running tunnel in this network namespace.
pub fn fetch(interface: Option<&str>) -> anyhow::Result<Status> {
    let name = match interface {
        Some(name) => name.to_string(),
        None => {
            let mut running = running_interfaces();
            match running.len() {
                0 => bail!("no running mptun in this network namespace"),
                1 => running.remove(0),
                _ => bail!(
                    "several mptun interfaces are running ({}); name one: mptun show <interface>",
                    running.join(", ")
                ),
            }
        }
    };
    let path = socket_path(&name)?;
    let stream = std::os::unix::net::UnixStream::connect(&path).with_context(|| {
        format!("no mptun interface {name:?} is running in this network namespace")
    })?;
    read_status(stream, &name, handed_to(&path), ANSWER_TIMEOUT)
}

/// Read a status from `stream`, once sure who is answering (root, us, or
/// the user root handed the socket to),
/// within `timeout` and [`ANSWER_MAX`] bytes.
fn read_status(
    stream: std::os::unix::net::UnixStream,
    name: &str,
    handed_to: Option<u32>,
    timeout: std::time::Duration,
) -> anyhow::Result<Status> {
    use std::io::Read;
    if !trusted_peer(peer_uid(&stream), handed_to) {
        bail!("the status socket of {name} is held by another user: not trusting its answer");
    }
    stream.set_read_timeout(Some(timeout))?;
    let mut text = String::new();
    stream
        .take(ANSWER_MAX)
        .read_to_string(&mut text)
        .with_context(|| format!("read status of {name}"))?;
    serde_json::from_str(&text).with_context(|| format!("read status of {name}"))
}

/// The columns of [`render_dump`], in order.
pub const DUMP_COLUMNS: &[&str] = &[
    "interface",
    "path",
    "name",
    "state",
    "local",
    "endpoint",
    "latest-handshake",
    "rx-bytes",
    "tx-bytes",
    "rtt-ms",
    "loss-pct",
    "rate-mbps",
    "flaps",
    "rejected",
    "refused",
];

/// One tab-separated line per path, for scripts, as `wg show all dump`:
/// see [`DUMP_COLUMNS`]; bytes are on the wire; a latest handshake is in
/// seconds since 1970 (0 for none), like wg's; `-` for what is not known.
pub fn render_dump(statuses: &[Status]) -> String {
    let mut o = String::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    for s in statuses {
        for p in &s.paths {
            let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
            let fields = [
                s.interface.clone(),
                p.id.to_string(),
                or_dash(p.name.clone()),
                p.state.clone(),
                p.local.clone(),
                or_dash(p.endpoint.clone()),
                p.since_handshake_secs
                    .map_or("0".into(), |secs| format!("{:.0}", now - secs)),
                p.rx_datagram_bytes.to_string(),
                p.tx_datagram_bytes.to_string(),
                or_dash(p.srtt_ms.map(|v| format!("{v:.3}"))),
                format!("{:.3}", p.loss_pct),
                or_dash(p.rate_mbps.map(|v| format!("{v:.1}"))),
                p.flaps.to_string(),
                p.rejected.total().to_string(),
                p.refused.total().to_string(),
            ];
            let _ = writeln!(o, "{}", fields.join("\t"));
        }
    }
    o
}

fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

/// Render a status the way `wg show` lays out its output.
pub fn render(s: &Status) -> String {
    let mut o = String::new();
    let total_tx: u64 = s.paths.iter().map(|p| p.tx_bytes).sum::<u64>().max(1);
    let _ = writeln!(o, "interface: {}", s.interface);
    let _ = writeln!(o, "  public key: {}", s.public_key);
    let _ = writeln!(
        o,
        "  mtu: {} ({}), epoch: {:08x}, up {:.0} s",
        s.mtu, s.mtu_source, s.epoch, s.uptime_secs
    );
    let r = &s.reorder;
    let _ = writeln!(
        o,
        "  reorder: hold {:.1} ms, holding {}; in order {}, buffered {}, bare ACKs passed ahead {}; waits p50 {}, p99 {}",
        r.hold_ms,
        r.held_now,
        r.in_order,
        r.buffered,
        r.passed,
        r.wait_p50_ms.map_or("-".into(), |w| format!("{w:.2} ms")),
        r.wait_p99_ms.map_or("-".into(), |w| format!("{w:.2} ms"))
    );
    let ended = |buckets: &[(u32, u64)]| {
        let waits = HoldHistogram::from_buckets(buckets);
        match waits.quantile(0.99) {
            Some(p99) => format!("{} (p99 {:.2} ms)", waits.count(), p99.as_secs_f64() * 1e3),
            None => "0".into(),
        }
    };
    let by_end = &r.wait_buckets_by_end;
    let _ = writeln!(
        o,
        "  waits ended by: the packet itself, late {}; a repair {}; giving the gap up {}",
        ended(&by_end.reordered),
        ended(&by_end.repaired),
        ended(&by_end.given_up)
    );
    let _ = writeln!(
        o,
        "  repairs: {} asked for, {} came in time, {} late (out of order); waited for up to {}; {} congestion losses left to the inner flow",
        r.repairs_requested,
        r.repaired,
        r.repaired_late,
        r.repair_wait_ms
            .map_or("-".into(), |w| format!("{w:.1} ms")),
        r.congestion_losses
    );
    let _ = writeln!(
        o,
        "  repairs the peer asked for and we did not send: {} gone from the sent log, {} too late or with no room",
        r.repairs_gone, r.repairs_too_late
    );
    if let Some(wait) = r.tcp_hold_ms {
        let _ = writeln!(
            o,
            "  tcp segments: held {wait:.1} ms to the farthest path's delay, holding {}; {} held in all; {} sent in a low-latency class, not to be held",
            r.tcp_holding, r.tcp_held, r.tcp_low_latency_sent
        );
    }
    let _ = writeln!(
        o,
        "  skipped: {} as lost, {} on timeout, {} on overflow, {} on peer restart",
        r.skipped_loss, r.skipped_timeout, r.skipped_overflow, r.skipped_restart
    );
    let _ = writeln!(
        o,
        "  dropped: {} stale, {} duplicate, {} no path up, {} path queue full, {} disallowed source, {} disallowed destination, {} not IP",
        r.dropped_stale,
        r.dropped_duplicate,
        s.tun.dropped_no_path,
        s.tun.dropped_path_queue_full,
        s.tun.dropped_disallowed_source,
        s.tun.dropped_disallowed_destination,
        s.tun.dropped_not_ip
    );
    let _ = writeln!(
        o,
        "  peer restarts followed: {}; NACKs for our run before a restart: {}",
        r.epoch_changes, r.nacks_for_old_run
    );
    let _ = writeln!(
        o,
        "  tun: {} packets read, {} written, {} write errors",
        s.tun.read_packets, s.tun.written_packets, s.tun.write_errors
    );
    if s.reloads.count > 0 {
        let _ = writeln!(
            o,
            "  reloads: {}; last: {}",
            s.reloads.count,
            match (&s.reloads.last_error, &s.reloads.last_summary) {
                (Some(e), _) => format!("refused: {e}"),
                (None, Some(summary)) => summary.clone(),
                (None, None) => "-".into(),
            }
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "peer: {}", s.peer_public_key);
    let _ = writeln!(o, "  allowed ips: {}", s.allowed_ips.join(", "));
    for p in &s.paths {
        let _ = writeln!(o);
        let name = p.name.as_ref().map_or(String::new(), |n| format!(" ({n})"));
        let _ = writeln!(
            o,
            "path[{}]{name}: {}; {} flaps{}",
            p.id,
            p.state,
            p.flaps,
            p.since_change_secs
                .map_or(String::new(), |s| format!(", last change {s:.0} s ago"))
        );
        if let Some(rtt) = p.srtt_ms {
            let _ = writeln!(
                o,
                "  rtt: {rtt:.2} ms; one-way {:+.2} ms vs the fastest path, {:.2} ms queued; \
                 delivery {}{}; loss {:.2}%",
                p.owd_rel_ms.unwrap_or(0.0),
                p.queue_ms,
                p.rate_mbps
                    .map_or("not measured yet".to_string(), |r| format!("{r:.1} Mbit/s")),
                p.train_mbps
                    .map_or(String::new(), |r| format!(" (probe trains {r:.1} Mbit/s)")),
                p.loss_pct
            );
        }
        if let Some(rate) = p.model_rate_mbps {
            let _ = writeln!(
                o,
                "  scheduler: drains it at {rate:.1} Mbit/s, {:.2} ms queued in its model",
                p.model_queue_ms
            );
        }
        let _ = writeln!(o, "  local: {}", p.local);
        let _ = writeln!(
            o,
            "  endpoint: {}",
            p.endpoint.as_deref().unwrap_or("(none yet)")
        );
        if let Some(secs) = p.since_handshake_secs {
            let _ = writeln!(
                o,
                "  latest handshake: {secs:.0} seconds ago ({} in all{})",
                p.handshakes,
                p.handshake_rtt_ms
                    .map_or(String::new(), |ms| format!(", {ms} ms round trip"))
            );
        }
        let _ = writeln!(
            o,
            "  transfer: {} received, {} sent ({:.1}% of sent bytes), inner packets",
            bytes(p.rx_bytes),
            bytes(p.tx_bytes),
            100.0 * p.tx_bytes as f64 / total_tx as f64
        );
        let _ = writeln!(
            o,
            "  on the wire: {} received in {} datagrams, {} sent in {}",
            bytes(p.rx_datagram_bytes),
            p.rx_datagrams,
            bytes(p.tx_datagram_bytes),
            p.tx_datagrams
        );
        let _ = writeln!(
            o,
            "  packets: {} received, {} sent; probes {} received, {} sent; NACKs {} received, {} sent",
            p.rx_packets, p.tx_packets, p.rx_probes, p.tx_probes, p.rx_nacks, p.tx_nacks
        );
        if p.resent > 0 {
            let _ = writeln!(o, "  resent: {} packets the peer asked for again", p.resent);
        }
        if p.tx_parity + p.rx_parity > 0 {
            let _ = writeln!(
                o,
                "  parity: {} halves received, {} sent; {} lost packets rebuilt",
                p.rx_parity, p.tx_parity, p.rebuilt
            );
        }
        if p.late_echoes > 0 {
            let _ = writeln!(
                o,
                "  late echoes: {} (new data avoided the path until the next echo)",
                p.late_echoes
            );
        }
        if p.overflows > 0 {
            let _ = writeln!(
                o,
                "  queue overflows: {}{}",
                p.overflows,
                p.queue_limit_ms.map_or(String::new(), |l| format!(
                    "; filled to {l:.1} ms of queue since"
                ))
            );
        }
        if p.rx_initiations + p.rx_cookie_replies > 0 {
            let _ = writeln!(
                o,
                "  handshake messages taken: {} initiations, {} cookie replies",
                p.rx_initiations, p.rx_cookie_replies
            );
        }
        let rejected = p.rejected.total();
        let refused = p.refused.total();
        if rejected + refused + p.send_errors + p.recv_errors > 0 {
            let _ = writeln!(
                o,
                "  errors: {rejected} rejected ({} unauthenticated, {} replayed, {} malformed, {} no session, {} under load), \
                 {refused} refused ({} bad trailer, {} length mismatch, {} bad probe, {} bad NACK, {} foreign epoch), {} send, {} receive",
                p.rejected.unauthenticated,
                p.rejected.replayed,
                p.rejected.malformed,
                p.rejected.no_session,
                p.rejected.under_load,
                p.refused.bad_trailer,
                p.refused.length_mismatch,
                p.refused.bad_probe,
                p.refused.bad_nack,
                p.refused.foreign_epoch,
                p.send_errors,
                p.recv_errors
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    use super::*;

    #[test]
    fn only_root_or_our_own_user_is_trusted_to_answer() {
        // SAFETY: geteuid has no preconditions.
        let own = unsafe { libc::geteuid() };
        let other = own.wrapping_add(4242).max(1);
        assert!(trusted_peer(Ok(0), None));
        assert!(trusted_peer(Ok(own), None));
        assert!(!trusted_peer(Ok(other), None));
        assert!(trusted_peer(Ok(other), Some(other)));
        assert!(!trusted_peer(Ok(other), Some(other + 1)));
        assert!(!trusted_peer(
            Err(std::io::Error::other("no credentials")),
            None
        ));
        let (a, _b) = UnixStream::pair().unwrap();
        assert_eq!(peer_uid(&a).unwrap(), own);
    }

    #[test]
    fn an_answer_that_is_too_long_or_never_comes_is_refused() {
        let (client, mut server) = UnixStream::pair().unwrap();
        let writer = std::thread::spawn(move || {
            let junk = vec![b'['; ANSWER_MAX as usize + 1];
            let _ = server.write_all(&junk);
        });
        assert!(read_status(client, "test0", None, Duration::from_secs(5)).is_err());
        writer.join().unwrap();
        let (client, _silent) = UnixStream::pair().unwrap();
        let error = read_status(client, "test0", None, Duration::from_millis(50)).unwrap_err();
        assert!(
            format!("{error:#}").contains("read status of test0"),
            "{error:#}"
        );
    }
}
