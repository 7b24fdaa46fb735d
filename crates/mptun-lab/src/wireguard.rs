//! Real WireGuard tunnels for the lab's comparisons: wireguard-go, one
//! process per tunnel and site, configured over its UAPI socket, so no
//! `wg` tool is needed. This machine's kernel has no WireGuard module; a
//! userspace implementation with the same offloads as the kernel's TUN
//! path is the closest stand-in, and what operators without the module
//! run.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use mptun_netem::topology::Topology;
use mptun_wg::keys;

use crate::sites::genkey;

/// Where wireguard-go puts its control sockets.
const UAPI_DIR: &str = "/var/run/wireguard";

/// Find wireguard-go: on PATH as `wireguard-go`, or where `go install
/// golang.zx2c4.com/wireguard@latest` leaves it (`~/go/bin/wireguard`).
pub fn find() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    let home_go = std::env::var_os("HOME").map(|h| Path::new(&h).join("go/bin"));
    let gopath = std::env::var_os("GOPATH").map(|g| Path::new(&g).join("bin"));
    let dirs = on_path.into_iter().chain(home_go).chain(gopath);
    for dir in dirs {
        for name in ["wireguard-go", "wireguard"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

/// One WireGuard tunnel per path, both sites, up and configured.
pub struct Tunnels {
    processes: Vec<Child>,
    /// Per tunnel: (namespace, interface) on each site.
    interfaces: Vec<(String, String)>,
}

/// The inner addresses of tunnel `n` (from 1): 10.78.n.1 and 10.78.n.2.
pub fn inner_addr(n: usize, site_octet: u8) -> String {
    format!("10.78.{n}.{site_octet}")
}

impl Tunnels {
    /// Start one tunnel over each of `paths` (numbered from 1), routing
    /// 10.78.n.0/24 and `extra_allowed` through tunnel n, with the MTU
    /// wg-quick would give it on links of `path_mtu` (80 bytes less).
    pub fn start(
        exe: &Path,
        topo: &Topology,
        paths: &[usize],
        extra_allowed: &str,
        path_mtu: u32,
    ) -> anyhow::Result<Tunnels> {
        let mtu = path_mtu.saturating_sub(80).to_string();
        let mut tunnels = Tunnels {
            processes: Vec::new(),
            interfaces: Vec::new(),
        };
        for &i in paths {
            let (key_a, key_b) = (genkey()?, genkey()?);
            let port = 53819 + i as u16;
            let (ns_a, ns_b) = (topo.ns_a(), topo.ns_b());
            // Interface names are global in the UAPI folder: one per site.
            let (if_a, if_b) = (Self::interface(i, true), Self::interface(i, false));
            for (ns, ifname, own, peer, endpoint, octet) in [
                (&ns_b, &if_b, &key_b, &key_a, None, 2u8),
                (
                    &ns_a,
                    &if_a,
                    &key_a,
                    &key_b,
                    Some(format!("{}:{port}", topo.addr_b(i))),
                    1u8,
                ),
            ] {
                tunnels.spawn(exe, ns, ifname)?;
                let mut set = format!(
                    "set=1\nprivate_key={}\nlisten_port={port}\nreplace_peers=true\n\
                     public_key={}\nreplace_allowed_ips=true\nallowed_ip=10.78.{i}.0/24\n",
                    hex(own),
                    hex(&keys::public_key(peer)),
                );
                if !extra_allowed.is_empty() {
                    set.push_str(&format!("allowed_ip={extra_allowed}\n"));
                }
                if let Some(endpoint) = endpoint {
                    set.push_str(&format!("endpoint={endpoint}\n"));
                }
                uapi_set(ifname, &set)?;
                let addr = format!("{}/24", inner_addr(i, octet));
                ip(ns, &["addr", "add", &addr, "dev", ifname])?;
                ip(ns, &["link", "set", ifname, "mtu", &mtu, "up"])?;
            }
        }
        Ok(tunnels)
    }

    /// Interface of tunnel `n` (from 1) on site A or B.
    pub fn interface(n: usize, site_a: bool) -> String {
        format!("wg{}{n}", if site_a { "a" } else { "b" })
    }

    /// The wireguard-go processes' pids.
    pub fn pids(&self) -> Vec<u32> {
        self.processes.iter().map(Child::id).collect()
    }

    fn spawn(&mut self, exe: &Path, ns: &str, ifname: &str) -> anyhow::Result<()> {
        // A socket left by a wireguard-go that did not clean up would pass
        // for the new one's before it listens.
        let socket = control_socket(ifname);
        let _ = std::fs::remove_file(&socket);
        let child = Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(exe)
            .args(["-f", ifname])
            // wireguard-go refuses to run on Linux without it.
            .env("WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("start {} in {ns}", exe.display()))?;
        self.processes.push(child);
        self.interfaces.push((ns.to_string(), ifname.to_string()));
        let deadline = Instant::now() + Duration::from_secs(5);
        while !socket.exists() {
            if Instant::now() > deadline {
                bail!("{}: no control socket after 5 s", exe.display());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

impl Drop for Tunnels {
    fn drop(&mut self) {
        for child in &mut self.processes {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
            }
        }
        for child in &mut self.processes {
            let _ = child.wait();
        }
        for (ns, ifname) in &self.interfaces {
            // wireguard-go removes its interface on exit; this is for one
            // that did not get to.
            let _ = Command::new("ip")
                .args(["-n", ns, "link", "del", ifname])
                .stderr(Stdio::null())
                .status();
            let _ = std::fs::remove_file(control_socket(ifname));
        }
    }
}

/// Send a `set` operation to the wireguard-go of `ifname` and check its
/// answer.
fn uapi_set(ifname: &str, body: &str) -> anyhow::Result<()> {
    let mut stream = connect(&control_socket(ifname))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(body.as_bytes())?;
    stream.write_all(b"\n")?;
    let mut answer = String::new();
    BufReader::new(stream)
        .read_line(&mut answer)
        .with_context(|| format!("{ifname}: no answer from wireguard-go"))?;
    if answer.trim() != "errno=0" {
        return Err(anyhow!(
            "{ifname}: wireguard-go refused the config: {}",
            answer.trim()
        ));
    }
    Ok(())
}

/// The control socket of the wireguard-go running `ifname`.
fn control_socket(ifname: &str) -> PathBuf {
    Path::new(UAPI_DIR).join(format!("{ifname}.sock"))
}

/// Connect to a wireguard-go control socket. The socket file appears when
/// wireguard-go binds it, a moment before it listens (longer on a busy
/// host): a refused connection is tried again for a few seconds.
fn connect(path: &Path) -> anyhow::Result<UnixStream> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match UnixStream::connect(path) {
            Ok(stream) => return Ok(stream),
            Err(e)
                if e.kind() == std::io::ErrorKind::ConnectionRefused
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e).with_context(|| format!("connect {}", path.display())),
        }
    }
}

fn ip(ns: &str, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip").arg("-n").arg(ns).args(args).output()?;
    if !out.status.success() {
        bail!(
            "ip -n {ns} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn hex(key: &[u8; 32]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}
