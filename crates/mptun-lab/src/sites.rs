//! Two mptun sites running in the namespaces of a lab [`Topology`], and the
//! measurements taken through them (iperf3, ping).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use mptun_netem::Topology;
use mptun_wg::keys;

use mptun::status::Status;

/// Tunnel address of site A (the iperf3 client side) in the default layout.
pub const TUNNEL_A: &str = "10.77.0.1";
/// Tunnel address of site B (the iperf3 server side) in the default layout.
pub const TUNNEL_B: &str = "10.77.0.2";

/// Which site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Site {
    /// The initiator, with endpoints configured.
    A,
    /// The responder, learning endpoints from A.
    B,
}

/// How one tunnel is laid over the topology.
#[derive(Clone, Debug)]
pub struct SiteLayout {
    /// TUN device name on both sites.
    pub name: String,
    /// Tunnel address of A and B, with the prefix length.
    pub address_a: String,
    /// See `address_a`.
    pub address_b: String,
    /// `peer.allowed-ips` on both sides.
    pub allowed_ips: Vec<String>,
    /// Topology paths (from 1) the tunnel uses, one `[[path]]` each.
    pub paths: Vec<usize>,
    /// UDP port of the first path; the others follow.
    pub base_port: u16,
    /// Extra lines for `[interface]`.
    pub extra_interface: String,
}

impl SiteLayout {
    /// One mptun tunnel over every path of `topo`, addresses 10.77.0.1/.2.
    pub fn all_paths(topo: &Topology) -> SiteLayout {
        SiteLayout {
            name: "mptun0".into(),
            address_a: format!("{TUNNEL_A}/24"),
            address_b: format!("{TUNNEL_B}/24"),
            allowed_ips: vec!["10.77.0.0/24".into()],
            paths: (1..=topo.paths()).collect(),
            base_port: 51820,
            extra_interface: String::new(),
        }
    }
}

/// `mptun up` running on both sides of a topology. Dropping it stops both
/// processes (SIGTERM, then SIGKILL) and removes the work folder.
pub struct Sites {
    exe: PathBuf,
    dir: PathBuf,
    name: String,
    ns_a: String,
    ns_b: String,
    paths: usize,
    /// Private keys of site A and site B.
    keys: ([u8; 32], [u8; 32]),
    /// Environment given to the daemons started from now on.
    env: Vec<(String, String)>,
    a: Option<Child>,
    b: Option<Child>,
}

/// Make the folder of a lab's configs and logs (keys inside: removed with
/// the lab): new, private to us (mode 0700) and named unpredictably, so no
/// other local user can read the keys or plant a link where a file goes.
fn work_dir(topo: &Topology, layout: &SiteLayout) -> anyhow::Result<PathBuf> {
    private_dir(&format!("mptun-lab-{}-{}-", topo.prefix(), layout.name))
}

fn private_dir(prefix: &str) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .with_context(|| format!("create a folder {prefix}* in the temporary folder"))?;
    Ok(dir.keep())
}

/// Remove the work folders of every lab this process built, for when their
/// owners never get to run their `Drop` (an interrupted lab).
pub fn remove_work_dirs_of_process() {
    let prefix = format!("mptun-lab-mptn{}-", std::process::id());
    if let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

pub(crate) fn genkey() -> anyhow::Result<[u8; 32]> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes).map_err(|e| anyhow!("random: {e}"))?;
    Ok(keys::private_key_from_random(bytes))
}

impl Sites {
    /// Write configs for both sites (keys freshly generated), start `exe up`
    /// in both site namespaces and wait until every path is up on both.
    pub fn start(exe: &Path, topo: &Topology, layout: &SiteLayout) -> anyhow::Result<Sites> {
        let mut sites = Sites::new(exe, topo, layout)?;
        sites.write_configs(topo, layout)?;
        sites.launch(Site::B)?;
        sites.launch(Site::A)?;
        sites.wait_up(Duration::from_secs(15))?;
        Ok(sites)
    }

    /// Sites for `layout` with fresh keys, nothing written or started.
    fn new(exe: &Path, topo: &Topology, layout: &SiteLayout) -> anyhow::Result<Sites> {
        Ok(Sites {
            exe: exe.to_path_buf(),
            dir: work_dir(topo, layout)?,
            name: layout.name.clone(),
            ns_a: topo.ns_a(),
            ns_b: topo.ns_b(),
            paths: layout.paths.len(),
            keys: (genkey()?, genkey()?),
            env: Vec::new(),
            a: None,
            b: None,
        })
    }

    /// Start `exe up` on both sites with configs written elsewhere (for
    /// interface `name`, with `paths` paths), and wait until every path is
    /// up on both.
    pub fn start_with_configs(
        exe: &Path,
        topo: &Topology,
        name: &str,
        paths: usize,
        configs: (&str, &str),
    ) -> anyhow::Result<Sites> {
        let layout = SiteLayout {
            name: name.to_string(),
            paths: (1..=paths).collect(),
            ..SiteLayout::all_paths(topo)
        };
        let mut sites = Sites::new(exe, topo, &layout)?;
        sites.write_config(Site::A, configs.0)?;
        sites.write_config(Site::B, configs.1)?;
        sites.launch(Site::B)?;
        sites.launch(Site::A)?;
        sites.wait_up(Duration::from_secs(15))?;
        Ok(sites)
    }

    /// Give the daemons started from now on `key=value` in their
    /// environment.
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.push((key.to_string(), value.to_string()));
    }

    /// Write both sites' configs for `layout`.
    fn write_configs(&self, topo: &Topology, layout: &SiteLayout) -> anyhow::Result<()> {
        let (key_a, key_b) = self.keys;
        let allowed = layout
            .allowed_ips
            .iter()
            .map(|a| format!("{a:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        let site = |key: &[u8; 32], peer: &[u8; 32], address: &str, keepalive: &str| {
            format!(
                "[interface]\nprivate-key = \"{}\"\naddress = [\"{address}\"]\nname = \"{}\"\n{}\n\
                 [peer]\npublic-key = \"{}\"\nallowed-ips = [{allowed}]\n{keepalive}",
                keys::encode_key(key),
                layout.name,
                layout.extra_interface,
                keys::encode_key(&keys::public_key(peer)),
            )
        };
        let mut a = site(
            &key_a,
            &key_b,
            &layout.address_a,
            "persistent-keepalive = 10\n",
        );
        let mut b = site(&key_b, &key_a, &layout.address_b, "");
        for (n, &i) in layout.paths.iter().enumerate() {
            let port = layout.base_port + n as u16;
            a.push_str(&format!(
                "\n[[path]]\nlisten-port = {port}\nendpoint = \"{}:{port}\"\n",
                topo.addr_b(i)
            ));
            // Bound to its link's address, B's path knows its interface and
            // so its MTU before A's first packet.
            b.push_str(&format!(
                "\n[[path]]\nlisten-port = {port}\nbind = \"{}\"\n",
                topo.addr_b(i)
            ));
        }
        self.write_config(Site::A, &a)?;
        self.write_config(Site::B, &b)?;
        Ok(())
    }

    /// Rewrite both configs for `layout` (same keys) and reload both
    /// daemons, B first, as an operator would; wait for each to answer.
    pub fn reload(&mut self, topo: &Topology, layout: &SiteLayout) -> anyhow::Result<()> {
        self.write_configs(topo, layout)?;
        self.paths = layout.paths.len();
        for site in [Site::B, Site::A] {
            let out = Command::new("ip")
                .args(["netns", "exec", self.ns(site)])
                .arg(&self.exe)
                .args(["reload", &self.name])
                .output()
                .context("run mptun reload")?;
            if !out.status.success() {
                bail!(
                    "mptun reload on site {site:?}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
        }
        Ok(())
    }

    fn write_config(&self, site: Site, text: &str) -> anyhow::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.config_path(site);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("write {}", path.display()))?;
        file.write_all(text.as_bytes())?;
        Ok(())
    }

    fn config_path(&self, site: Site) -> PathBuf {
        self.dir.join(format!("site-{}.toml", self.site_name(site)))
    }

    pub fn site_name(&self, site: Site) -> &'static str {
        match site {
            Site::A => "a",
            Site::B => "b",
        }
    }

    /// Return the namespace of a site.
    /// The pids of both sites' mptun processes.
    pub fn pids(&self) -> Vec<u32> {
        // `ip netns exec` execs the program, so the child's pid is mptun's.
        [&self.a, &self.b]
            .into_iter()
            .flatten()
            .map(Child::id)
            .collect()
    }

    pub fn ns(&self, site: Site) -> &str {
        match site {
            Site::A => &self.ns_a,
            Site::B => &self.ns_b,
        }
    }

    /// Return the log file of a site's mptun.
    pub fn log_path(&self, site: Site) -> PathBuf {
        self.dir.join(format!("site-{}.log", self.site_name(site)))
    }

    fn launch(&mut self, site: Site) -> anyhow::Result<()> {
        let log = std::fs::File::create(self.log_path(site))?;
        let child = Command::new("ip")
            .args(["netns", "exec", self.ns(site)])
            .arg(&self.exe)
            .arg("up")
            .arg(self.config_path(site))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("start {} up", self.exe.display()))?;
        match site {
            Site::A => self.a = Some(child),
            Site::B => self.b = Some(child),
        }
        Ok(())
    }

    /// Stop one site's mptun and start it again (a peer restart).
    pub fn restart(&mut self, site: Site) -> anyhow::Result<ExitStatus> {
        let status = self.stop(site)?;
        self.launch(site)?;
        Ok(status)
    }

    /// Return a site's status, as `mptun show --json` prints it.
    pub fn status(&self, site: Site) -> anyhow::Result<Status> {
        fetch_status(&self.exe, self.ns(site), &self.name)
    }

    /// Return a function that fetches a site's status, for another thread.
    pub fn status_fetcher(
        &self,
        site: Site,
    ) -> impl Fn() -> anyhow::Result<Status> + Send + 'static {
        let (exe, ns, name) = (
            self.exe.clone(),
            self.ns(site).to_string(),
            self.name.clone(),
        );
        move || fetch_status(&exe, &ns, &name)
    }

    /// Wait until every path is up on both sites.
    pub fn wait_up(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let up = |site| {
                self.status(site)
                    .map(|s| s.paths.iter().filter(|p| p.up).count())
                    .unwrap_or(0)
            };
            if up(Site::A) == self.paths && up(Site::B) == self.paths {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "paths not up after {timeout:?}; logs: {} {}",
                    self.log_path(Site::A).display(),
                    self.log_path(Site::B).display()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Send SIGTERM to a site's mptun and wait for it to exit.
    pub fn stop(&mut self, site: Site) -> anyhow::Result<ExitStatus> {
        let child = match site {
            Site::A => self.a.take(),
            Site::B => self.b.take(),
        };
        let mut child = child.ok_or_else(|| anyhow!("site not running"))?;
        terminate(&mut child)
    }
}

fn fetch_status(exe: &Path, ns: &str, name: &str) -> anyhow::Result<Status> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(exe)
        .args(["show", name, "--json"])
        .output()?;
    if !out.status.success() {
        bail!(
            "mptun show: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// SIGTERM a child, SIGKILL it if it has not exited within 5 s.
fn terminate(child: &mut Child) -> anyhow::Result<ExitStatus> {
    // `ip netns exec` execs the program, so the child's pid is mptun's.
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!("mptun did not exit within 5 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Sites {
    fn drop(&mut self) {
        for child in [self.a.take(), self.b.take()].into_iter().flatten() {
            let mut child = child;
            let _ = terminate(&mut child);
        }
        if std::env::var_os("MPTUN_LAB_KEEP").is_some() {
            eprintln!(
                "lab: kept the sites' configs and logs in {}",
                self.dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// One TCP measurement.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct TcpResult {
    /// Receiver-side goodput.
    pub goodput_mbps: f64,
    /// Bytes the receiver took in.
    pub received_bytes: u64,
    /// Sender-side retransmitted segments.
    pub retransmits: u64,
}

impl TcpResult {
    /// Read the result from the `end` object of iperf3's JSON output.
    pub fn of_iperf_end(end: &serde_json::Value) -> TcpResult {
        TcpResult {
            goodput_mbps: end["sum_received"]["bits_per_second"]
                .as_f64()
                .unwrap_or(0.0)
                / 1e6,
            received_bytes: end["sum_received"]["bytes"].as_u64().unwrap_or(0),
            retransmits: end["sum_sent"]["retransmits"].as_u64().unwrap_or(0),
        }
    }
}

/// What to run with iperf3.
#[derive(Clone, Debug)]
pub struct Iperf<'a> {
    /// Namespace of the client (sender).
    pub client_ns: &'a str,
    /// Namespace of the server (receiver).
    pub server_ns: &'a str,
    /// Address of the server.
    pub server_addr: String,
    /// Seconds.
    pub duration: f64,
    /// Parallel streams.
    pub streams: u32,
    /// TCP congestion control, or none for the system default.
    pub congestion: Option<&'a str>,
    /// Extra client arguments (e.g. `--multipath`).
    pub extra: Vec<String>,
    /// Program to wrap both client and server in (e.g. `mptcpize run`).
    pub wrapper: Vec<String>,
}

static PORT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(5301);

impl Iperf<'_> {
    /// Run it and return iperf3's JSON result.
    pub fn run(&self) -> anyhow::Result<serde_json::Value> {
        self.run_reporting(None)
    }

    /// Run it with both ends reporting every `secs` seconds, and return
    /// iperf3's JSON result; the receiver's intervals are in its
    /// `server_output_json`. The sender's intervals count what it wrote
    /// into its socket, which runs ahead of what arrives while the
    /// socket's buffer fills; the receiver's count what arrived.
    pub fn run_reporting_every(&self, secs: f64) -> anyhow::Result<serde_json::Value> {
        self.run_reporting(Some(secs))
    }

    fn run_reporting(&self, every_secs: Option<f64>) -> anyhow::Result<serde_json::Value> {
        let port = PORT
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .to_string();
        let interval = every_secs.map(|secs| format!("{secs}"));
        let server_reports: Vec<&str> = match &interval {
            Some(secs) => vec!["-i", secs, "--json"],
            None => vec![],
        };
        let client_reports: Vec<&str> = match &interval {
            Some(secs) => vec!["-i", secs, "--get-server-output"],
            None => vec![],
        };
        let mut server = Command::new("ip")
            .args(["netns", "exec", self.server_ns])
            .args(&self.wrapper)
            .args(["iperf3", "-s", "-1", "-p", &port])
            .args(&server_reports)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("start iperf3 server (is iperf3 installed?)")?;
        let mut last_error = String::new();
        // The server needs a moment to listen; retry the connection.
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(100));
            let mut client = Command::new("ip");
            client
                .args(["netns", "exec", self.client_ns])
                .args(&self.wrapper)
                .args(["iperf3", "-c", &self.server_addr, "-p", &port, "--json"])
                .args(["-t", &format!("{}", self.duration)])
                .args(["-P", &self.streams.to_string()])
                .args(&client_reports)
                .args(&self.extra);
            if let Some(cc) = self.congestion {
                client.args(["-C", cc]);
            }
            let out = client
                .stdin(Stdio::null())
                .output()
                .context("run iperf3 client")?;
            let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            match json.get("error").and_then(|e| e.as_str()) {
                Some(e) if e.contains("connect") => last_error = e.to_string(),
                Some(e) => {
                    let _ = server.kill();
                    bail!("iperf3: {e}");
                }
                None if out.status.success() => {
                    let _ = server.wait();
                    return Ok(json);
                }
                None => last_error = String::from_utf8_lossy(&out.stderr).to_string(),
            }
        }
        let _ = server.kill();
        let _ = server.wait();
        bail!(
            "iperf3 could not connect to {}: {last_error}",
            self.server_addr
        )
    }

    /// Run a TCP test.
    pub fn tcp(&self) -> anyhow::Result<TcpResult> {
        let json = self.run()?;
        Ok(TcpResult::of_iperf_end(&json["end"]))
    }
}

/// Round-trip times of a ping run, in milliseconds.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct PingResult {
    /// Replies received out of those sent.
    pub received: u32,
    /// Echo requests sent.
    pub sent: u32,
    /// Fastest round trip.
    pub min_ms: f64,
    /// Mean round trip.
    pub avg_ms: f64,
    /// Median round trip: what a ping usually takes, whatever a busy host
    /// did to one or two.
    pub median_ms: f64,
}

/// Ping `addr` from namespace `ns`.
pub fn ping(ns: &str, addr: &str, count: u32) -> anyhow::Result<PingResult> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "ping", "-n", "-i", "0.05", "-W", "1"])
        .args(["-c", &count.to_string(), addr])
        .output()
        .context("run ping (is iputils-ping installed?)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut result = PingResult {
        sent: count,
        ..PingResult::default()
    };
    let mut rtts = Vec::new();
    for line in text.lines() {
        if let Some(ms) = line
            .split_once(" time=")
            .and_then(|(_, t)| t.trim_end_matches(" ms").parse::<f64>().ok())
        {
            rtts.push(ms);
        }
        if let Some((sent, rest)) = line.split_once(" packets transmitted, ") {
            result.sent = sent.trim().parse().unwrap_or(count);
            result.received = rest
                .split(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
        }
        if let Some(stats) = line.strip_prefix("rtt min/avg/max/mdev = ") {
            let values: Vec<f64> = stats
                .split(['/', ' '])
                .filter_map(|v| v.parse().ok())
                .collect();
            if values.len() >= 2 {
                result.min_ms = values[0];
                result.avg_ms = values[1];
            }
        }
    }
    rtts.sort_by(f64::total_cmp);
    result.median_ms = rtts.get(rtts.len() / 2).copied().unwrap_or(result.avg_ms);
    Ok(result)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_lab_works_in_a_new_private_folder() {
        let prefix = format!("mptun-lab-test{}-", std::process::id());
        let (a, b) = (private_dir(&prefix).unwrap(), private_dir(&prefix).unwrap());
        assert_ne!(a, b, "the name must not be predictable");
        for dir in [&a, &b] {
            let mode = std::fs::metadata(dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
            assert!(dir
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&prefix));
            std::fs::remove_dir(dir).unwrap();
        }
    }
}
