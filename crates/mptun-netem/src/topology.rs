//! Lab topology builder: namespaces `<prefix>-a`, `<prefix>-m`, `<prefix>-b`
//! joined per path by veths, either through the `mptun-netem` emulator in the
//! middle namespace or (baseline) by a direct veth shaped with `tbf`.
//!
//! ```text
//! emulated:  [A] a<i> ==veth== ma<i> [M: mptun-netem] mb<i> ==veth== b<i> [B]
//! tbf:       [A] a<i> ==================veth=================== b<i> [B]
//! ```
//! Path i (1-based) uses 10.<subnet>.<i>.1/24 on A and .2 on B, one L2
//! segment. Interface names are per namespace, so they are short and fixed.
//! Requires root (CAP_NET_ADMIN, CAP_SYS_ADMIN for setns) and `ip`/`tc`.
//! Dropping the [`Topology`] stops the emulator and deletes the namespaces.

use std::io::{self, BufRead, BufReader, Write};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use crate::spec::{DirSpec, PathSpec, Spec};
use crate::NetemError;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// What every topology namespace's name starts with, before the pid of the
/// process that built it.
const PREFIX: &str = "mptn";

/// `tbf` settings for the baseline mode (applied on both ends' egress).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TbfShape {
    pub rate_mbit: f64,
    /// Bucket size in bytes.
    pub burst_bytes: u64,
    /// Queue limit in bytes (use the same as the emulator's queue).
    pub limit_bytes: u64,
}

/// How the paths are built.
#[derive(Debug, Clone)]
pub enum Mode {
    /// Through `mptun-netem`; one [`DirSpec`] per path (interface names are
    /// filled in by the topology).
    Emulated {
        paths: Vec<DirSpec>,
        seed: u64,
        netem_bin: PathBuf,
    },
    /// Direct veths shaped by `tbf`, no emulator (benchmark baseline).
    Tbf { paths: usize, shape: TbfShape },
    /// Plain veth pairs of the given MTU, nothing in between, the kernel's
    /// offloads left on as on a real NIC: what a tunnel can do when the
    /// links are not the limit.
    Plain { paths: usize, mtu: u32 },
}

#[derive(Debug, Clone)]
pub struct TopologyOptions {
    /// Second octet of the site addresses (10.<subnet>.<path>.{1,2}).
    pub subnet: u8,
    /// Namespace prefix; default `mptn<pid>-<counter>` (unique per run).
    pub prefix: Option<String>,
}

impl Default for TopologyOptions {
    fn default() -> Self {
        TopologyOptions {
            subnet: 77,
            prefix: None,
        }
    }
}

struct Emulator {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

/// A built lab; tears itself down on drop.
pub struct Topology {
    prefix: String,
    subnet: u8,
    paths: usize,
    created: Vec<String>,
    emulator: Option<Emulator>,
}

/// Run a command, turning failure into an error with its stderr.
pub fn run(cmd: &mut Command) -> Result<(), NetemError> {
    let desc = format!("{cmd:?}");
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| NetemError::io(format!("running {desc}"), e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(NetemError::Setup(format!(
            "{desc} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

fn ip(args: &[&str]) -> Result<(), NetemError> {
    run(Command::new("ip").args(args))
}

fn ns_ip(ns: &str, args: &[&str]) -> Result<(), NetemError> {
    run(Command::new("ip").arg("-n").arg(ns).args(args))
}

/// Run `f` on a fresh thread that has joined network namespace `ns`
/// (so the caller's own namespace is never changed).
pub fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> Result<T, NetemError> + Send + 'static,
) -> Result<T, NetemError> {
    let path = format!("/run/netns/{ns}");
    let handle = std::thread::spawn(move || -> Result<T, NetemError> {
        let file =
            std::fs::File::open(&path).map_err(|e| NetemError::io(format!("opening {path}"), e))?;
        // SAFETY: valid fd of a netns file; affects only this thread.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(NetemError::io(
                format!("setns({path})"),
                io::Error::last_os_error(),
            ));
        }
        f()
    });
    handle
        .join()
        .map_err(|_| NetemError::Setup("netns helper thread panicked".into()))?
}

// Legacy ethtool ioctls (linux/ethtool.h); no ethtool binary needed.
const ETHTOOL_STXCSUM: u32 = 0x17;
const ETHTOOL_SSG: u32 = 0x19;
const ETHTOOL_STSO: u32 = 0x1f;
const ETHTOOL_SGSO: u32 = 0x24;
const ETHTOOL_SGRO: u32 = 0x2c;
const ETHTOOL_GTXCSUM: u32 = 0x16;
const ETHTOOL_GTSO: u32 = 0x1e;
const ETHTOOL_GGSO: u32 = 0x23;
const ETHTOOL_GGRO: u32 = 0x2b;

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

fn ethtool_value(fd: i32, ifname: &str, cmd: u32, data: u32) -> io::Result<u32> {
    let mut val = EthtoolValue { cmd, data };
    let mut req = crate::forwarder::ifreq_named(ifname)?;
    req.ifr_ifru.ifru_data = (&mut val as *mut EthtoolValue).cast();
    // SAFETY: SIOCETHTOOL with a valid ifreq pointing at a live ethtool_value.
    let r = unsafe { libc::ioctl(fd, libc::SIOCETHTOOL, &mut req) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(val.data)
}

fn dgram_socket() -> Result<OwnedFd, NetemError> {
    // SAFETY: plain FFI call.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(NetemError::io(
            "socket(AF_INET)",
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: fresh owned descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Turn off GRO, GSO, TSO, scatter-gather and TX checksum offload on the
/// given interfaces of namespace `ns` (same as `ethtool -K IF gro off gso off
/// tso off sg off tx off`, without needing the ethtool binary). Needed
/// because the emulator forwards plain frames: super-frames would exceed the
/// MTU and CHECKSUM_PARTIAL frames would arrive with wrong checksums.
pub fn disable_offloads(ns: &str, ifnames: &[String]) -> Result<(), NetemError> {
    let names = ifnames.to_vec();
    in_netns(ns, move || {
        let fd = dgram_socket()?;
        for name in &names {
            for (cmd, what) in [
                (ETHTOOL_SGRO, "gro"),
                (ETHTOOL_SGSO, "gso"),
                (ETHTOOL_STSO, "tso"),
                (ETHTOOL_SSG, "sg"),
                (ETHTOOL_STXCSUM, "tx-checksum"),
            ] {
                ethtool_value(fd.as_raw_fd(), name, cmd, 0).map_err(|e| {
                    NetemError::io(format!("disabling {what} offload on {name}"), e)
                })?;
            }
        }
        Ok(())
    })
}

/// Read back (tx-checksum, tso, gso, gro) offload state, for checks.
pub fn offload_state(ns: &str, ifname: &str) -> Result<[bool; 4], NetemError> {
    let name = ifname.to_string();
    in_netns(ns, move || {
        let fd = dgram_socket()?;
        let mut out = [false; 4];
        for (slot, cmd) in [ETHTOOL_GTXCSUM, ETHTOOL_GTSO, ETHTOOL_GGSO, ETHTOOL_GGRO]
            .into_iter()
            .enumerate()
        {
            out[slot] = ethtool_value(fd.as_raw_fd(), &name, cmd, 0)
                .map_err(|e| NetemError::io(format!("reading offloads of {name}"), e))?
                != 0;
        }
        Ok(out)
    })
}

/// Locate the `mptun-netem` binary: `$MPTUN_NETEM_BIN`, next to the current
/// executable (or one level up, for `target/*/deps` and `examples`), `$PATH`.
pub fn find_netem_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MPTUN_NETEM_BIN") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let mut dir = exe.parent();
    for _ in 0..2 {
        let d = dir?;
        let cand = d.join("mptun-netem");
        if cand.is_file() {
            return Some(cand);
        }
        dir = d.parent();
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("mptun-netem"))
            .find(|p| p.is_file())
    })
}

impl Topology {
    /// Build `paths.len()` emulated paths using `netem_bin`.
    pub fn emulated(paths: Vec<DirSpec>, netem_bin: &Path) -> Result<Self, NetemError> {
        Self::build(
            TopologyOptions::default(),
            Mode::Emulated {
                paths,
                seed: 1,
                netem_bin: netem_bin.to_path_buf(),
            },
        )
    }

    /// Build `paths` direct veth paths shaped with `tbf`.
    pub fn tbf(paths: usize, shape: TbfShape) -> Result<Self, NetemError> {
        Self::build(TopologyOptions::default(), Mode::Tbf { paths, shape })
    }

    pub fn build(opts: TopologyOptions, mode: Mode) -> Result<Self, NetemError> {
        remove_orphans(Duration::from_secs(1));
        let prefix = opts.prefix.unwrap_or_else(|| {
            format!(
                "{PREFIX}{}-{}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            )
        });
        let n = match &mode {
            Mode::Emulated { paths, .. } => paths.len(),
            Mode::Tbf { paths, .. } | Mode::Plain { paths, .. } => *paths,
        };
        if n == 0 || n > 250 {
            return Err(NetemError::Setup(format!("path count {n} not in 1..=250")));
        }
        // From here on, an early return drops `topo`, which cleans up.
        let mut topo = Topology {
            prefix,
            subnet: opts.subnet,
            paths: n,
            created: Vec::new(),
            emulator: None,
        };
        let (na, nb, nm) = (topo.ns_a(), topo.ns_b(), topo.ns_m());
        let emulated = matches!(mode, Mode::Emulated { .. });
        let mut spaces = vec![na.clone(), nb.clone()];
        if emulated {
            spaces.push(nm.clone());
        }
        for ns in &spaces {
            ip(&["netns", "add", ns])?;
            topo.created.push(ns.clone());
            ns_ip(ns, &["link", "set", "lo", "up"])?;
        }
        let mut a_ifs = Vec::new();
        let mut b_ifs = Vec::new();
        let mut m_ifs = Vec::new();
        for i in 1..=n {
            let (a, b) = (topo.if_a(i), topo.if_b(i));
            if emulated {
                let (ma, mb) = (format!("ma{i}"), format!("mb{i}"));
                ip(&[
                    "link", "add", &a, "netns", &na, "type", "veth", "peer", "name", &ma, "netns",
                    &nm,
                ])?;
                ip(&[
                    "link", "add", &mb, "netns", &nm, "type", "veth", "peer", "name", &b, "netns",
                    &nb,
                ])?;
                m_ifs.push(ma);
                m_ifs.push(mb);
            } else {
                ip(&[
                    "link", "add", &a, "netns", &na, "type", "veth", "peer", "name", &b, "netns",
                    &nb,
                ])?;
            }
            let cidr_a = format!("{}/24", topo.addr_a(i));
            let cidr_b = format!("{}/24", topo.addr_b(i));
            ns_ip(&na, &["addr", "add", &cidr_a, "dev", &a])?;
            ns_ip(&nb, &["addr", "add", &cidr_b, "dev", &b])?;
            a_ifs.push(a);
            b_ifs.push(b);
        }
        if let Mode::Plain { mtu, .. } = &mode {
            let mtu = mtu.to_string();
            for (ns, ifs) in [(&na, &a_ifs), (&nb, &b_ifs)] {
                for name in ifs {
                    ns_ip(ns, &["link", "set", name, "mtu", &mtu])?;
                }
            }
        } else {
            disable_offloads(&na, &a_ifs)?;
            disable_offloads(&nb, &b_ifs)?;
        }
        if emulated {
            disable_offloads(&nm, &m_ifs)?;
            // Keep the middle namespace silent (no IPv6 DAD/RS of its own).
            run(Command::new("ip").args([
                "netns",
                "exec",
                &nm,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ]))?;
            for m in &m_ifs {
                ns_ip(&nm, &["link", "set", m, "up"])?;
            }
        }
        for (ns, ifs) in [(&na, &a_ifs), (&nb, &b_ifs)] {
            for name in ifs {
                ns_ip(ns, &["link", "set", name, "up"])?;
            }
        }
        match mode {
            Mode::Tbf { shape, .. } => {
                let rate = format!("{}kbit", (shape.rate_mbit * 1000.0).round() as u64);
                let burst = shape.burst_bytes.to_string();
                let limit = shape.limit_bytes.to_string();
                for (ns, ifs) in [(&na, &a_ifs), (&nb, &b_ifs)] {
                    for name in ifs {
                        run(Command::new("tc").args([
                            "-n", ns, "qdisc", "replace", "dev", name, "root", "tbf", "rate",
                            &rate, "burst", &burst, "limit", &limit,
                        ]))?;
                    }
                }
            }
            Mode::Plain { .. } => {}
            Mode::Emulated {
                paths,
                seed,
                netem_bin,
            } => {
                let spec = Spec {
                    seed: Some(seed),
                    path: paths
                        .iter()
                        .enumerate()
                        .map(|(i, d)| {
                            PathSpec::new(format!("ma{}", i + 1), format!("mb{}", i + 1), d)
                        })
                        .collect(),
                };
                topo.emulator = Some(spawn_emulator(&nm, &netem_bin, &spec)?);
            }
        }
        Ok(topo)
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }
    pub fn ns_a(&self) -> String {
        format!("{}-a", self.prefix)
    }
    pub fn ns_m(&self) -> String {
        format!("{}-m", self.prefix)
    }
    pub fn ns_b(&self) -> String {
        format!("{}-b", self.prefix)
    }
    pub fn paths(&self) -> usize {
        self.paths
    }
    /// Site A interface of path `i` (1-based).
    pub fn if_a(&self, i: usize) -> String {
        format!("a{i}")
    }
    /// Site B interface of path `i` (1-based).
    pub fn if_b(&self, i: usize) -> String {
        format!("b{i}")
    }
    /// Site A address of path `i` (1-based).
    pub fn addr_a(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, self.subnet, i as u8, 1)
    }
    /// Site B address of path `i` (1-based).
    pub fn addr_b(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, self.subnet, i as u8, 2)
    }

    /// `ip netns exec <ns> <program>`; add args and run it.
    pub fn exec(&self, ns: &str, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, program]);
        c
    }

    /// Send one control line (see [`crate::control`]) to the emulator and
    /// return its one-line reply (`ok`, JSON for `stats`); an `error: ...`
    /// reply becomes an error.
    pub fn control(&mut self, line: &str) -> Result<String, NetemError> {
        let emu = self
            .emulator
            .as_mut()
            .ok_or_else(|| NetemError::Setup("tbf topology has no emulator".into()))?;
        let stdin = emu
            .stdin
            .as_mut()
            .ok_or_else(|| NetemError::Setup("emulator stdin closed".into()))?;
        writeln!(stdin, "{line}")
            .and_then(|_| stdin.flush())
            .map_err(|e| NetemError::io("writing to mptun-netem", e))?;
        let reply = emu
            .lines
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| NetemError::Setup(format!("no reply from mptun-netem to {line:?}")))?;
        match reply.strip_prefix("error: ") {
            Some(msg) => Err(NetemError::Command(msg.to_string())),
            None => Ok(reply),
        }
    }

    /// Emulator counters (`stats` command) as JSON.
    pub fn stats(&mut self) -> Result<serde_json::Value, NetemError> {
        let line = self.control("stats")?;
        serde_json::from_str(&line).map_err(|e| NetemError::Setup(format!("bad stats JSON: {e}")))
    }
}

fn spawn_emulator(ns: &str, bin: &Path, spec: &Spec) -> Result<Emulator, NetemError> {
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(bin)
        .arg("--spec-json")
        .arg(spec.to_json())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| NetemError::io(format!("spawning {} in {ns}", bin.display()), e))?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let (tx, rx) = mpsc::channel();
    if let Some(out) = stdout {
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    let mut emu = Emulator {
        child,
        stdin,
        lines: rx,
    };
    // The emulator prints `ready` once its sockets are bound.
    match emu.lines.recv_timeout(Duration::from_secs(10)) {
        Ok(l) if l == "ready" => Ok(emu),
        other => {
            stop_emulator(&mut emu);
            Err(NetemError::Setup(format!(
                "mptun-netem did not start (got {other:?})"
            )))
        }
    }
}

fn stop_emulator(emu: &mut Emulator) {
    // Closing stdin asks for a clean exit; kill if it does not come.
    emu.stdin.take();
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = emu.child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = emu.child.kill();
    let _ = emu.child.wait();
}

impl Drop for Topology {
    fn drop(&mut self) {
        if let Some(mut emu) = self.emulator.take() {
            stop_emulator(&mut emu);
        }
        for ns in self.created.drain(..).rev() {
            if let Err(e) = ip(&["netns", "del", &ns]) {
                eprintln!("mptun-netem topology: cleanup: {e}");
            }
        }
    }
}

/// Tear down every topology this process built, from outside the objects
/// that own them: for a signal handler's follow-up, when the owners will
/// never get to run their `Drop`. Stops every process inside those
/// namespaces (SIGTERM, then SIGKILL after `grace`) and deletes them.
pub fn remove_all_of_process(grace: Duration) {
    let prefix = format!("{PREFIX}{}-", std::process::id());
    let names: Vec<String> = namespaces()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect();
    remove_namespaces(&names, grace);
}

/// Remove the topologies of processes that are gone: a lab or test killed
/// with SIGKILL never runs `Drop`, and its namespaces would otherwise stay
/// until reboot. A namespace whose creator's pid now names another
/// process is left alone: it may be that process's.
pub fn remove_orphans(grace: Duration) {
    let orphans: Vec<String> = namespaces()
        .into_iter()
        .filter(|n| creator_pid(n).is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()))
        .collect();
    if !orphans.is_empty() {
        eprintln!(
            "mptun-netem topology: removing namespaces of exited processes: {}",
            orphans.join(" ")
        );
    }
    remove_namespaces(&orphans, grace);
}

/// The pid in a topology namespace's name (`mptn<pid>-<n>-<side>`).
fn creator_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let (pid, rest) = rest.split_once('-')?;
    // Both the topology counter and the side must follow.
    rest.split_once('-')?;
    pid.parse().ok()
}

/// The names of every network namespace on the host.
fn namespaces() -> Vec<String> {
    match Command::new("ip").args(["netns", "list"]).output() {
        Ok(out) => String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_string)
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Stop every process inside `names` (SIGTERM, then SIGKILL after
/// `grace`) and delete the namespaces.
fn remove_namespaces(names: &[String], grace: Duration) {
    if names.is_empty() {
        return;
    }
    let pids = |ns: &str| -> Vec<libc::pid_t> {
        Command::new("ip")
            .args(["netns", "pids", ns])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    for signal in [libc::SIGTERM, libc::SIGKILL] {
        let mut any = false;
        for ns in names {
            for pid in pids(ns) {
                any = true;
                // SAFETY: kill has no memory-safety preconditions.
                unsafe {
                    libc::kill(pid, signal);
                }
            }
        }
        if !any {
            break;
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && names.iter().any(|ns| !pids(ns).is_empty()) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    for ns in names {
        let _ = ip(&["netns", "del", ns]);
    }
}

/// Whether we can build topologies here (root with `ip`), for tests.
pub fn can_build() -> bool {
    // SAFETY: plain FFI call.
    let root = unsafe { libc::geteuid() } == 0;
    root && Command::new("ip")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::creator_pid;

    #[test]
    fn the_creator_pid_is_read_only_from_topology_names() {
        assert_eq!(creator_pid("mptn26836-0-a"), Some(26836));
        assert_eq!(creator_pid("mptn7-12-m"), Some(7));
        assert_eq!(creator_pid("mptn26836"), None);
        assert_eq!(creator_pid("mptn26836-0"), None);
        assert_eq!(creator_pid("mptnx-0-a"), None);
        assert_eq!(creator_pid("blue"), None);
        assert_eq!(creator_pid("site-a"), None);
    }
}
