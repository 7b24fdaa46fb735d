//! End to end, in network namespaces (needs root, iproute2, iperf3, ping):
//! two sites joined by three veth paths shaped with `tbf` to 50 Mbit/s each,
//! `mptun up` on both sides, real traffic through the tunnel.

use std::net::UdpSocket;
use std::process::Command;
use std::time::Duration;

use mptun_lab::machine::MachineLock;
use mptun_lab::run::{kernel_counters, read_cpu_times, read_proc_net, CpuTimes, NOISY_STEAL_PCT};
use mptun_lab::sites::SiteLayout;
use mptun_lab::{ping, Iperf, Site, Sites};
use mptun_netem::topology::{Mode, TbfShape};
use mptun_netem::{Topology, TopologyOptions};

#[path = "netns/flood.rs"]
mod flood;

const PATHS: usize = 3;
const RATE_MBIT: f64 = 50.0;
const SECONDS: f64 = 5.0;

/// The machine, held by one test at a time: each measures rates and losses
/// of traffic that needs the CPU, and on a two-core host a test running
/// beside another (or beside a lab) would measure the other's load as well.
struct Machine {
    _host: MachineLock,
    _in_process: std::sync::MutexGuard<'static, ()>,
}

fn one_at_a_time() -> Machine {
    static MACHINE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let in_process = MACHINE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    Machine {
        _host: MachineLock::wait().expect("take the host's lab"),
        _in_process: in_process,
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The machine and a fresh lab for one test; `None` (the test is skipped)
/// without root. Drop the topology before the machine.
fn take_lab() -> Option<(Machine, Topology)> {
    if !is_root() {
        eprintln!("skipped: needs root for network namespaces");
        return None;
    }
    let machine = one_at_a_time();
    Some((machine, lab()))
}

fn lab() -> Topology {
    tbf_lab(RATE_MBIT)
}

fn tbf_lab(rate_mbit: f64) -> Topology {
    let shape = TbfShape {
        rate_mbit,
        // ~10 ms of tokens and a 50 ms queue, as a provisioned link would have.
        burst_bytes: ((rate_mbit * 1e6 / 8.0 * 0.01) as u64).max(64 * 1024),
        limit_bytes: (rate_mbit * 1e6 / 8.0 * 0.05) as u64,
    };
    let options = TopologyOptions {
        subnet: 201,
        prefix: None,
    };
    Topology::build(
        options,
        Mode::Tbf {
            paths: PATHS,
            shape,
        },
    )
    .expect("build namespaces")
}

fn link_exists(ns: &str, dev: &str) -> bool {
    Command::new("ip")
        .args(["-n", ns, "link", "show", dev])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn tx_queue_len(ns: &str, dev: &str) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "cat"])
        .arg(format!("/sys/class/net/{dev}/tx_queue_len"))
        .output()
        .expect("read tx_queue_len");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// SIGTERM both sites: each exits 0 and leaves no TUN device or route.
fn stop_cleanly(sites: &mut Sites) {
    for site in [Site::A, Site::B] {
        let status = sites.stop(site).expect("stop");
        assert!(status.success(), "{site:?} exited with {status}");
        let ns = sites.ns(site).to_string();
        assert!(!link_exists(&ns, "mptun0"), "{site:?}: mptun0 left behind");
        assert_eq!(
            routes_via(&ns, "mptun0"),
            "",
            "{site:?}: routes left behind"
        );
    }
}

fn routes_via(ns: &str, dev: &str) -> String {
    let out = Command::new("ip")
        .args(["-n", ns, "route", "show", "dev", dev])
        .output()
        .expect("ip route");
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// What one TCP flow through mptun over the three paths gets, at least,
/// as a multiple of one path alone.
const FLOW_OVER_ONE_PATH_MIN: f64 = 2.4;

#[test]
fn one_tcp_flow_uses_every_path_in_order_and_teardown_is_clean() {
    let Some((_machine, topo)) = take_lab() else {
        return;
    };
    let exe = &mptun_lab::mptun_exe().expect("the mptun program");

    // Baseline, in this run: one TCP flow over path 1 alone, no tunnel.
    let one_path = Iperf {
        client_ns: &topo.ns_a(),
        server_ns: &topo.ns_b(),
        server_addr: topo.addr_b(1).to_string(),
        duration: SECONDS,
        streams: 1,
        congestion: None,
        extra: vec![],
        wrapper: vec![],
    }
    .tcp()
    .expect("baseline iperf3");
    assert!(
        one_path.goodput_mbps > RATE_MBIT * 0.5,
        "baseline {one_path:?}"
    );

    let mut sites =
        Sites::start(exe, &topo, &SiteLayout::all_paths(&topo)).expect("start both sites");
    let (ns_a, ns_b) = (topo.ns_a(), topo.ns_b());

    // The kernel's default queue drops packets whenever mptun is busy for
    // 20 ms; both sites must have the longer one.
    for ns in [&ns_a, &ns_b] {
        assert_eq!(
            tx_queue_len(ns, "mptun0"),
            mptun::config::TXQUEUELEN_DEFAULT.to_string(),
            "{ns}"
        );
    }

    // A's paths lead over 1500-byte veths to IPv4 endpoints.
    let a = sites.status(Site::A).expect("status of A");
    assert_eq!(a.mtu, 1416, "{}", a.mtu_source);
    assert!(a.mtu_source.contains("route to"), "{}", a.mtu_source);

    let pong = ping(&ns_a, mptun_lab::sites::TUNNEL_B, 10).expect("ping");
    assert_eq!(pong.received, 10, "ping through the tunnel: {pong:?}");

    let through = Iperf {
        server_addr: mptun_lab::sites::TUNNEL_B.to_string(),
        ..one_path_args(&ns_a, &ns_b)
    };
    // A host starved by its hypervisor runs both sites on less CPU than
    // the flow needs, and the flow measures the host: measure again, as
    // `lab_equal_scenario_beats_the_best_single_path` does. One that stays
    // starved leaves the ratio unjudged.
    let mut attempt = 1;
    let mut starved_every_time = true;
    let (ratio, steal) = loop {
        let before = read_cpu_times();
        let tcp = through.tcp().expect("iperf3 through the tunnel");
        let steal = steal_since(before);
        let ratio = tcp.goodput_mbps / one_path.goodput_mbps;
        eprintln!(
            "one path: {:.1} Mbit/s; mptun over {PATHS}: {:.1} Mbit/s ({ratio:.2}x), {} retransmits, steal {}",
            one_path.goodput_mbps,
            tcp.goodput_mbps,
            tcp.retransmits,
            percent(steal)
        );
        if let Ok(b) = sites.status(Site::B) {
            let r = &b.reorder;
            eprintln!(
                "B so far: {} gaps waited out, {} repairs of {} asked came in time, {} late; hold {:.1} ms",
                r.skipped_timeout, r.repaired, r.repairs_requested, r.repaired_late, r.hold_ms
            );
        }
        starved_every_time &= starved(steal);
        if ratio >= FLOW_OVER_ONE_PATH_MIN || !noisy(steal) || attempt == LAB_ATTEMPTS {
            break (ratio, steal);
        }
        eprintln!("attempt {attempt}: steal was {NOISY_STEAL_PCT}% or more; measuring again");
        attempt += 1;
    };
    let a = sites.status(Site::A).expect("status of A");
    let paths: Vec<String> = a
        .paths
        .iter()
        .map(|p| {
            format!(
                "path[{}] {} {} bytes, rate {:.1?} Mbit/s (trains {:.1?}), {} late echoes",
                p.id, p.state, p.tx_bytes, p.rate_mbps, p.train_mbps, p.late_echoes
            )
        })
        .collect();
    if ratio < FLOW_OVER_ONE_PATH_MIN {
        fail_unless_starved(
            starved_every_time,
            format!(
                "one flow got {ratio:.2}x one path, want >= {FLOW_OVER_ONE_PATH_MIN}x (run {attempt} of at most {LAB_ATTEMPTS}, steal {}); site A: {}",
                percent(steal),
                paths.join("; ")
            ),
        );
    }

    // Every path carried its share of that one flow.
    let total: u64 = a.paths.iter().map(|p| p.tx_bytes).sum();
    for p in &a.paths {
        let share = p.tx_bytes as f64 / total as f64;
        assert!(
            share > 0.2,
            "path[{}] carried only {share:.2} of the bytes",
            p.id
        );
    }

    // UDP at half the aggregate: nothing arrives out of order. A host that
    // stops a site for longer than the hold makes the receiver give gaps
    // up, and hand out what fills them late, out of order.
    let before = read_cpu_times();
    let udp = mptun_lab::udp_stream(
        &ns_a,
        &ns_b,
        mptun_lab::sites::TUNNEL_B.parse().expect("an address"),
        RATE_MBIT * PATHS as f64 / 2.0,
        SECONDS,
    )
    .expect("UDP through the tunnel");
    let steal = steal_since(before);
    eprintln!("udp: {udp:?}, steal {}", percent(steal));
    assert!(udp.packets > 1000, "{udp:?}");
    if udp.out_of_order > 0 || udp.lost as f64 >= udp.packets as f64 * 0.01 {
        let reorder = sites.status(Site::B).map(|b| b.reorder);
        fail_unless_starved(
            starved(steal),
            format!(
                "UDP through the tunnel, steal {}: {udp:?}; B's reorder buffer: {reorder:?}",
                percent(steal)
            ),
        );
    }

    // SIGTERM: exit 0, no TUN device or route left behind.
    stop_cleanly(&mut sites);
}

/// The host's steal, %, since `before` was read, if `/proc/stat` tells it.
fn steal_since(before: Option<CpuTimes>) -> Option<f64> {
    before
        .zip(read_cpu_times())
        .and_then(|(before, after)| after.steal_pct_since(&before))
}

/// Whether a measurement over which the host's steal was `steal` % is too
/// noisy to judge on its own: measure again.
fn noisy(steal: Option<f64>) -> bool {
    steal.is_some_and(|steal| steal >= NOISY_STEAL_PCT)
}

/// Whether a measurement over which the host's steal was `steal` % measured
/// the host rather than mptun (see [`STARVED_STEAL_PCT`]).
fn starved(steal: Option<f64>) -> bool {
    steal.is_some_and(|steal| steal >= STARVED_STEAL_PCT)
}

/// Fail with `failure`, a figure that missed its bar, unless the host was
/// `starved` while it was measured: then print it as not judged.
fn fail_unless_starved(starved: bool, failure: String) {
    if starved {
        eprintln!("NOT JUDGED, the host was starved: {failure}");
    } else {
        panic!("{failure}");
    }
}

/// A share measured, or that it could not be.
fn percent(share: Option<f64>) -> String {
    share.map_or("not measured".into(), |s| format!("{s:.1}%"))
}

fn one_path_args<'a>(ns_a: &'a str, ns_b: &'a str) -> Iperf<'a> {
    Iperf {
        client_ns: ns_a,
        server_ns: ns_b,
        server_addr: String::new(),
        duration: SECONDS,
        streams: 1,
        congestion: None,
        extra: vec![],
        wrapper: vec![],
    }
}

#[test]
fn garbage_on_a_path_and_a_peer_restart_lose_nothing_else() {
    let Some((_machine, topo)) = take_lab() else {
        return;
    };
    let exe = &mptun_lab::mptun_exe().expect("the mptun program");
    let mut sites =
        Sites::start(exe, &topo, &SiteLayout::all_paths(&topo)).expect("start both sites");
    let (ns_a, ns_b) = (topo.ns_a(), topo.ns_b());

    // Garbage and truncated WireGuard-looking datagrams at A's path 0 port,
    // from an address A has never heard of.
    let target = format!("{}:51820", topo.addr_a(1));
    mptun_netem::topology::in_netns(&ns_b, move || {
        let socket =
            UdpSocket::bind("0.0.0.0:0").map_err(|e| mptun_netem::NetemError::io("bind", e))?;
        for i in 0..200u32 {
            let mut junk = vec![4u8, 0, 0, 0];
            junk.extend((0..(i % 90)).map(|b| (b * 7 + i) as u8));
            let _ = socket.send_to(&junk, &target);
            let _ = socket.send_to(&[1, 0, 0, 0, 9, 9], &target);
        }
        Ok(())
    })
    .expect("send junk");
    let pong = ping(&ns_a, mptun_lab::sites::TUNNEL_B, 20).expect("ping");
    assert_eq!(pong.received, 20, "traffic disturbed by junk: {pong:?}");
    let a = sites.status(Site::A).expect("status");
    assert!(
        a.paths[0].rejected.total() >= 400,
        "{:?}",
        a.paths[0].rejected
    );
    assert!(a.paths[0].up && a.paths[1].up && a.paths[2].up);

    // The peer restarts: new sessions, sequence numbers from zero under a
    // new epoch. As soon as there is traffic, the tunnel recovers by itself.
    let status = sites.restart(Site::B).expect("restart B");
    assert!(status.success());
    let restarted = std::time::Instant::now();
    let mut pong = ping(&ns_a, mptun_lab::sites::TUNNEL_B, 5).expect("ping");
    while pong.received < 5 && restarted.elapsed() < Duration::from_secs(10) {
        pong = ping(&ns_a, mptun_lab::sites::TUNNEL_B, 5).expect("ping");
    }
    assert_eq!(pong.received, 5, "no recovery after peer restart: {pong:?}");
    eprintln!(
        "recovered {:?} after the peer restarted",
        restarted.elapsed()
    );
    let a = sites.status(Site::A).expect("status");
    assert_eq!(a.reorder.epoch_changes, 1, "{:?}", a.reorder);
    drop(ns_b);
}

/// With `interface.user`, each daemon is root only for setup: afterwards
/// every thread runs as that user with no capability, the tunnel carries
/// traffic, `mptun show` (as root) trusts its answers, and SIGTERM still
/// leaves no device or route behind.
#[test]
fn a_daemon_given_a_user_drops_root_after_setup() {
    let Some((_machine, topo)) = take_lab() else {
        return;
    };
    let exe = &mptun_lab::mptun_exe().expect("the mptun program");
    let nobody = mptun::privileges::RunAs::lookup("nobody").expect("user nobody");
    let layout = SiteLayout {
        extra_interface: "user = \"nobody\"".into(),
        ..SiteLayout::all_paths(&topo)
    };
    let mut sites = Sites::start(exe, &topo, &layout).expect("start both sites");
    sites.wait_up(Duration::from_secs(10)).expect("paths up");
    for pid in sites.pids() {
        let tasks: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .expect("tasks")
            .map(|t| {
                std::fs::read_to_string(t.expect("task").path().join("status")).expect("status")
            })
            .collect();
        assert!(tasks.len() > 1, "expected the runtime's threads");
        for status in &tasks {
            let field = |name: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.split_whitespace().collect::<Vec<_>>())
                    .unwrap_or_default()
            };
            assert!(
                field("Uid:").iter().all(|u| *u == nobody.uid.to_string()),
                "pid {pid}: {:?}",
                field("Uid:")
            );
            assert!(field("Groups:")
                .iter()
                .all(|g| *g == nobody.gid.to_string()));
            for caps in ["CapEff:", "CapPrm:"] {
                assert_eq!(field(caps), ["0000000000000000"], "pid {pid} {caps}");
            }
        }
    }
    let pong = ping(&topo.ns_a(), mptun_lab::sites::TUNNEL_B, 10).expect("ping");
    assert_eq!(pong.received, 10, "ping through the tunnel: {pong:?}");
    let a = sites
        .status(Site::A)
        .expect("mptun show trusts the daemon's user");
    assert!(a.paths.iter().all(|p| p.up));
    stop_cleanly(&mut sites);
}

/// Datagrams the kernel dropped in namespace `ns` because a UDP socket's
/// receive buffer was full (`RcvbufErrors` in `/proc/net/snmp`); 0 if it
/// cannot be read.
fn udp_receive_buffer_drops(ns: &str) -> u64 {
    read_proc_net(ns, "snmp")
        .and_then(|snmp| kernel_counters(&snmp, "Udp")?.get("RcvbufErrors").copied())
        .unwrap_or(0)
}

/// Share of its clean goodput the flow keeps under the flood.
const FLOODED_OVER_CLEAN_MIN: f64 = 0.9;

/// One flow clean, then one under the flood, and what the flood did.
struct FloodedRun {
    clean_mbps: f64,
    flooded_mbps: f64,
    retransmits: u64,
    /// Datagrams the flood sent.
    sent: u64,
    /// Datagrams the tunnel carried, both ways, while flooded.
    carried: u64,
    /// B's repairs asked, repairs got, gaps released, while flooded.
    lost: [u64; 3],
    /// Datagrams dropped at A's and B's full receive buffers, while flooded.
    drops: [u64; 2],
    steal: Option<f64>,
}

impl FloodedRun {
    /// Share of its clean goodput the flow kept under the flood.
    fn ratio(&self) -> f64 {
        self.flooded_mbps / self.clean_mbps
    }
}

/// A flood at every path port of both sites, as fast as one core sends it:
/// datagrams captured off the wire replayed both ways, A's handshake
/// initiations replayed to every one of B's paths, cookie replies forged
/// from them, and garbage, more than four for each datagram the tunnel
/// carries. The TCP flow keeps at least 90% of its clean goodput (the pair
/// measured again, up to three times, while steal is 5% or more), no
/// endpoint moves, nothing is delivered twice, memory stays bounded.
/// About 25 s; its figures (in README) with
/// `cargo test --release -p mptun-lab --test netns flood -- --nocapture`.
#[test]
fn a_flood_of_replays_forgeries_and_garbage_costs_the_flow_little() {
    let Some((_machine, topo)) = take_lab() else {
        return;
    };
    let exe = &mptun_lab::mptun_exe().expect("the mptun program");
    let (ns_a, ns_b) = (topo.ns_a(), topo.ns_b());
    let layout = SiteLayout::all_paths(&topo);
    let ports = layout.base_port..layout.base_port + PATHS as u16;
    let capture = flood::Capture::start(&ns_a, ports.clone());
    let mut sites = Sites::start(exe, &topo, &layout).expect("start both sites");
    let numbered = flood::Numbered::start(
        &ns_a,
        &ns_b,
        std::net::SocketAddrV4::new(mptun_lab::sites::TUNNEL_A.parse().expect("address"), 7009),
    );
    let through = Iperf {
        server_addr: mptun_lab::sites::TUNNEL_B.to_string(),
        duration: 10.0,
        ..one_path_args(&ns_a, &ns_b)
    };
    // Traffic to capture.
    Iperf {
        duration: 2.0,
        ..through.clone()
    }
    .tcp()
    .expect("iperf3 to capture");
    let captured = capture.stop();

    let status = |site| sites.status(site).expect("status");
    let endpoints = |site| -> Vec<Option<String>> {
        status(site).paths.into_iter().map(|p| p.endpoint).collect()
    };
    let (endpoints_a, endpoints_b) = (endpoints(Site::A), endpoints(Site::B));
    let b_public =
        mptun_wg::keys::decode_key(&status(Site::A).peer_public_key).expect("B's public key");
    let at = |addr: std::net::Ipv4Addr, n: usize| {
        std::net::SocketAddr::from((addr, layout.base_port + n as u16 - 1))
    };
    let plan = flood::Plan::new(
        &captured,
        &(1..=PATHS).map(|i| topo.addr_a(i)).collect::<Vec<_>>(),
        &(1..=PATHS)
            .map(|i| at(topo.addr_b(i), i))
            .collect::<Vec<_>>(),
        &(1..=PATHS)
            .map(|i| at(topo.addr_a(i), i))
            .collect::<Vec<_>>(),
        &b_public,
    );
    assert!(
        plan.initiations() >= PATHS * PATHS,
        "captured no handshake initiation"
    );
    assert!(plan.cookie_replies() > 0);
    let rss_before: Vec<u64> = sites
        .pids()
        .into_iter()
        .map(|pid| mptun_lab::soak::rss_kib(pid).unwrap_or(0))
        .collect();

    // What the sites lost while flooded, so a flow that kept less than its
    // bar says whether the flood overran the sockets or held the daemons.
    let lost = |site| {
        let r = status(site).reorder;
        [
            r.repairs_requested,
            r.repaired,
            r.skipped_loss + r.skipped_timeout,
        ]
    };
    let socket_drops = || {
        [
            udp_receive_buffer_drops(&ns_a),
            udp_receive_buffer_drops(&ns_b),
        ]
    };
    // The tunnel's own datagrams both ways, the measure of how hard the
    // flood was: one core's rate depends on the host, its share of the
    // traffic the sites saw does not.
    let tunnel_datagrams = || -> u64 {
        [Site::A, Site::B]
            .into_iter()
            .flat_map(|site| status(site).paths)
            .map(|p| p.tx_datagrams)
            .sum()
    };
    // The flood takes one of the host's two cores for itself. A host
    // starved by its hypervisor leaves the sites less than they need beside
    // it, and the flooded flow measures the host: measure the pair, clean
    // then flooded, again, as the first test here measures its flow again.
    let mut attempt = 1;
    let run = loop {
        let before = read_cpu_times();
        let clean = through.tcp().expect("clean iperf3");
        let (lost_before, drops_before) = (lost(Site::B), socket_drops());
        let datagrams_before = tunnel_datagrams();
        let attack = flood::Flood::start(&ns_a, &ns_b, plan.clone());
        let flooded = through.tcp().expect("iperf3 under the flood");
        let sent = attack.stop();
        let steal = steal_since(before);
        let run = FloodedRun {
            clean_mbps: clean.goodput_mbps,
            flooded_mbps: flooded.goodput_mbps,
            retransmits: flooded.retransmits,
            sent,
            carried: tunnel_datagrams().saturating_sub(datagrams_before),
            lost: {
                let after = lost(Site::B);
                [0, 1, 2].map(|i| after[i].saturating_sub(lost_before[i]))
            },
            drops: {
                let after = socket_drops();
                [0, 1].map(|i| after[i].saturating_sub(drops_before[i]))
            },
            steal,
        };
        eprintln!(
            "attempt {attempt}: flood {sent} datagrams in {:.0} s ({:.0}/s), \
             {:.1} for each of the {} the tunnel carried; \
             clean {:.1} Mbit/s, flooded {:.1} Mbit/s ({:.2}x), {} retransmits; steal {}",
            through.duration,
            sent as f64 / through.duration,
            sent as f64 / run.carried.max(1) as f64,
            run.carried,
            run.clean_mbps,
            run.flooded_mbps,
            run.ratio(),
            run.retransmits,
            percent(steal),
        );
        if run.ratio() >= FLOODED_OVER_CLEAN_MIN || !noisy(steal) || attempt == LAB_ATTEMPTS {
            break run;
        }
        eprintln!("attempt {attempt}: steal was {NOISY_STEAL_PCT}% or more; measuring again");
        attempt += 1;
    };
    let rss_after: Vec<u64> = sites
        .pids()
        .into_iter()
        .map(|pid| mptun_lab::soak::rss_kib(pid).unwrap_or(0))
        .collect();
    let (numbers_sent, numbers_received, twice) = numbered.stop();

    let rejected = |site| -> u64 { status(site).paths.iter().map(|p| p.rejected.total()).sum() };
    let cookie_replies: u64 = status(Site::A)
        .paths
        .iter()
        .map(|p| p.rx_cookie_replies)
        .sum();
    let initiations: u64 = status(Site::B).paths.iter().map(|p| p.rx_initiations).sum();
    let [asked, repaired, released] = run.lost;
    let [drops_a, drops_b] = run.drops;
    eprintln!(
        "captured {} datagrams; rejected A {} B {}; cookie replies taken by A {cookie_replies}, \
         initiations taken by B {initiations}; RSS KiB {rss_before:?} -> {rss_after:?}; \
         numbered {numbers_sent} sent, {numbers_received} received, {twice} twice; \
         while flooded: datagrams dropped at full receive buffers A {drops_a} B {drops_b}, \
         B's reorder buffer asked {asked} repairs, got {repaired}, released {released} gaps",
        captured.len(),
        rejected(Site::A),
        rejected(Site::B),
    );
    assert_eq!(endpoints(Site::A), endpoints_a, "an endpoint of A moved");
    assert_eq!(endpoints(Site::B), endpoints_b, "an endpoint of B moved");
    assert_eq!(twice, 0, "datagrams delivered twice");
    assert!(
        cookie_replies > 0,
        "the forged cookie replies were not valid ones"
    );
    assert!(
        numbers_received > numbers_sent / 2,
        "{numbers_received} of {numbers_sent}"
    );
    for (before, after) in rss_before.iter().zip(&rss_after) {
        assert!(
            after - before.min(after) < 32 << 10,
            "RSS {before} -> {after} KiB"
        );
    }
    assert!(
        run.sent > 4 * run.carried,
        "a flood of only {} datagrams beside the tunnel's {}",
        run.sent,
        run.carried
    );
    assert!(
        run.ratio() >= FLOODED_OVER_CLEAN_MIN,
        "the flow kept {:.2}x its clean goodput, want >= {FLOODED_OVER_CLEAN_MIN} \
         (run {attempt} of at most {LAB_ATTEMPTS}, steal {}; {} retransmits; \
         receive-buffer drops A {drops_a} B {drops_b}; B asked {asked} repairs, got {repaired}, \
         released {released} gaps)",
        run.ratio(),
        percent(run.steal),
        run.retransmits
    );
    for site in [Site::A, Site::B] {
        assert!(sites.stop(site).expect("stop").success());
    }
}

/// `allowed-ips = ["0.0.0.0/0"]`, as wg-quick does it: the default route
/// in table 51820 with its policy rules, the paths' own packets marked out
/// of it; everything removed at exit.
#[test]
fn a_default_route_goes_through_the_tunnel_and_the_paths_stay_outside() {
    let Some((_machine, topo)) = take_lab() else {
        return;
    };
    let exe = &mptun_lab::mptun_exe().expect("the mptun program");
    let layout = SiteLayout {
        allowed_ips: vec!["0.0.0.0/0".into()],
        ..SiteLayout::all_paths(&topo)
    };
    let mut sites = Sites::start(exe, &topo, &layout).expect("start both sites");
    let ns_a = topo.ns_a();
    let ip = |args: &[&str]| {
        let out = Command::new("ip")
            .args(["-n", &ns_a])
            .args(args)
            .output()
            .expect("ip");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let rules = ip(&["-4", "rule"]);
    assert!(
        rules.contains("not from all fwmark 0xca6c lookup 51820"),
        "{rules}"
    );
    assert!(
        rules.contains("lookup main suppress_prefixlength 0"),
        "{rules}"
    );
    assert!(ip(&["route", "get", "192.0.2.1"]).contains("dev mptun0"));
    // The paths' marked packets still take the links.
    let marked = ip(&["route", "get", &topo.addr_b(1).to_string(), "mark", "51820"]);
    assert!(!marked.contains("mptun0"), "{marked}");
    let pong = ping(&ns_a, mptun_lab::sites::TUNNEL_B, 10).expect("ping");
    assert_eq!(pong.received, 10, "ping through the tunnel: {pong:?}");
    assert!(sites
        .status(Site::A)
        .expect("status")
        .paths
        .iter()
        .all(|p| p.up));
    for site in [Site::A, Site::B] {
        assert!(sites.stop(site).expect("stop").success());
    }
    let rules = ip(&["-4", "rule"]);
    assert!(
        !rules.contains("51820") && !rules.contains("suppress"),
        "{rules}"
    );
    assert_eq!(ip(&["route", "show", "table", "51820"]), "");
}

/// A reload (SIGHUP through `mptun reload`) that adds a third path during
/// a TCP flow over two: the flow never stops (no half second without
/// data) and the new path carries traffic within 2 s.
#[test]
fn a_reload_adds_a_path_during_a_flow_without_stopping_it() {
    let Some((_machine, topo)) = take_lab() else {
        return;
    };
    let exe = &mptun_lab::mptun_exe().expect("the mptun program");
    let two = SiteLayout {
        paths: vec![1, 2],
        ..SiteLayout::all_paths(&topo)
    };
    let mut sites = Sites::start(exe, &topo, &two).expect("start both sites");
    let (ns_a, ns_b) = (topo.ns_a(), topo.ns_b());
    let flow = {
        let (ns_a, ns_b) = (ns_a.clone(), ns_b.clone());
        std::thread::spawn(move || {
            Iperf {
                server_addr: mptun_lab::sites::TUNNEL_B.to_string(),
                duration: 8.0,
                extra: vec!["-i".into(), "0.5".into()],
                ..one_path_args(&ns_a, &ns_b)
            }
            .run()
        })
    };
    std::thread::sleep(Duration::from_secs(3));
    sites
        .reload(&topo, &SiteLayout::all_paths(&topo))
        .expect("reload both sites");
    let reloaded = std::time::Instant::now();
    let mut carried = None;
    while reloaded.elapsed() < Duration::from_secs(4) {
        let a = sites.status(Site::A).expect("status");
        if a.paths.len() == 3 && a.paths[2].tx_bytes > 0 {
            carried = Some(reloaded.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let json = flow.join().expect("iperf thread").expect("iperf3");
    let intervals: Vec<f64> = json["intervals"]
        .as_array()
        .expect("intervals")
        .iter()
        .map(|i| i["sum"]["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6)
        .collect();
    eprintln!(
        "new path carried data {carried:?} after the reload; Mbit/s every 0.5 s: {intervals:.0?}"
    );
    let a = sites.status(Site::A).expect("status");
    assert_eq!(a.reloads.count, 1, "{:?}", a.reloads);
    assert!(a.reloads.last_error.is_none(), "{:?}", a.reloads);
    let carried = carried.expect("the new path carried nothing within 4 s");
    assert!(
        carried < Duration::from_secs(2),
        "the new path carried data only after {carried:?}"
    );
    assert!(intervals.len() >= 15, "{intervals:?}");
    assert!(
        intervals.iter().all(|&mbps| mbps > 1.0),
        "the flow stopped during the reload: {intervals:.1?}"
    );
    // A change that cannot be made live is refused; the tunnel carries on.
    let renamed = SiteLayout {
        address_a: "10.77.0.9/24".into(),
        ..SiteLayout::all_paths(&topo)
    };
    let refused = sites
        .reload(&topo, &renamed)
        .expect_err("address change refused");
    assert!(
        format!("{refused:#}").contains("interface.address"),
        "{refused:#}"
    );
    let pong = ping(&ns_a, mptun_lab::sites::TUNNEL_B, 5).expect("ping");
    assert_eq!(pong.received, 5, "{pong:?}");
}

/// GET /metrics from the daemon's `metrics-listen`.
fn scrape(ns: &str, port: u16) -> String {
    use std::io::{Read, Write};
    let text = mptun_netem::topology::in_netns(ns, move || {
        let io = |e| mptun_netem::NetemError::io("scrape", e);
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(io)?;
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .map_err(io)?;
        let mut text = String::new();
        stream.read_to_string(&mut text).map_err(io)?;
        Ok(text)
    })
    .expect("scrape /metrics");
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.contains("application/openmetrics-text; version=1.0.0"),
        "{head}"
    );
    body.to_string()
}

/// Parse OpenMetrics text with the Prometheus project's own parser, which
/// refuses what the format does not allow; return `name{labels} value`
/// lines.
fn parse_openmetrics(text: &str) -> Vec<String> {
    use std::io::Write;
    let program = "import sys\n\
        from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse\n\
        for family in parse(sys.stdin.read()):\n\
        \x20   for s in family.samples:\n\
        \x20       print(s.name + '{' + ','.join(k + '=' + v for k, v in sorted(s.labels.items())) + '} ' + repr(s.value))\n";
    let mut child = Command::new("/usr/bin/python3")
        .args(["-c", program])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 with prometheus_client (apt install python3-prometheus-client)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("parser");
    assert!(
        out.status.success(),
        "not OpenMetrics: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The value of `name{labels}` in parsed samples.
fn sample(samples: &[String], name_and_labels: &str) -> f64 {
    samples
        .iter()
        .find_map(|s| s.strip_prefix(&format!("{name_and_labels} ")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name_and_labels} in {samples:#?}"))
}

/// Check the hold-time histogram `name{labels}` in parsed samples, bucket
/// by bucket up to +Inf against its count; return the count.
fn hold_histogram(samples: &[String], name: &str, labels: &str) -> f64 {
    let mut below = 0.0;
    for le in [
        "0.001", "0.002", "0.005", "0.01", "0.02", "0.05", "0.1", "0.2", "+Inf",
    ] {
        let n = sample(samples, &format!("{name}_bucket{{{labels},le={le}}}"));
        assert!(
            n >= below,
            "{name}{{{labels}}}: bucket le={le} below the one before"
        );
        below = n;
    }
    let count = sample(samples, &format!("{name}_count{{{labels}}}"));
    assert_eq!(
        below, count,
        "{name}{{{labels}}}: +Inf bucket against the count"
    );
    count
}

/// `metrics-listen`: the endpoint serves OpenMetrics that the reference
/// parser takes, and each path's byte counters rise with traffic.
#[test]
fn metrics_are_openmetrics_and_count_the_traffic() {
    let Some((_machine, topo)) = take_lab() else {
        return;
    };
    let exe = &mptun_lab::mptun_exe().expect("the mptun program");
    let layout = SiteLayout {
        extra_interface: "metrics-listen = \"127.0.0.1:9586\"".into(),
        ..SiteLayout::all_paths(&topo)
    };
    let _sites = Sites::start(exe, &topo, &layout).expect("start both sites");
    let (ns_a, ns_b) = (topo.ns_a(), topo.ns_b());
    let before = parse_openmetrics(&scrape(&ns_a, 9586));
    let flow = Iperf {
        server_addr: mptun_lab::sites::TUNNEL_B.to_string(),
        duration: 2.0,
        ..one_path_args(&ns_a, &ns_b)
    }
    .tcp()
    .expect("iperf3 through the tunnel");
    let after = parse_openmetrics(&scrape(&ns_a, 9586));
    assert!(flow.received_bytes > 0, "{flow:?}");
    // How much each path gets depends on the host's speed as much as on
    // mptun's (a starved host slows the flow): the counters are checked
    // against what the flow itself carried.
    let rise = |counter: &str, labels: &str| {
        let name = format!("{counter}{labels}");
        sample(&after, &name) - sample(&before, &name)
    };
    let mut sent = 0.0;
    for path in 0..PATHS {
        let labels = format!("{{interface=mptun0,name=,path={path}}}");
        let inner = rise("mptun_path_sent_bytes_total", &labels);
        let sealed = rise("mptun_path_sent_datagram_bytes_total", &labels);
        assert!(inner > 0.0, "path {path} sent none of the flow");
        // Sealed, each packet gains WireGuard's and mptun's headers; the
        // datagrams count probes besides.
        assert!(
            sealed > inner,
            "path {path}: {sealed} datagram bytes for {inner} inner bytes"
        );
        sent += inner;
        assert_eq!(sample(&after, &format!("mptun_path_up{labels}")), 1.0);
        // What the scheduler works from, for whoever asks why a path got
        // what it got.
        let model_rate = sample(
            &after,
            &format!("mptun_path_model_rate_bits_per_second{labels}"),
        );
        assert!(
            model_rate > 1e6,
            "path {path} drained at {model_rate} bit/s"
        );
        // Present; how deep depends on the moment scraped.
        sample(&after, &format!("mptun_path_model_queue_seconds{labels}"));
    }
    // Inner bytes are the flow's payload with its IP and TCP headers, and
    // resent packets count again.
    assert!(
        sent >= flow.received_bytes as f64,
        "the paths sent {sent} inner bytes of a flow that delivered {}",
        flow.received_bytes
    );
    let b = parse_openmetrics(&scrape(&ns_b, 9586));
    // B receives the striped data: its reorder buffer held some of it, and
    // the hold-time histogram counts them, bucket by bucket up to +Inf.
    let iface = "interface=mptun0";
    let held = hold_histogram(&b, "mptun_reorder_hold_seconds", iface);
    assert!(held > 0.0, "B held nothing of a striped flow");
    // The same waits by what ended each: every wait counted once.
    let by_end: f64 = [
        "ended_by=given_up",
        "ended_by=reordered",
        "ended_by=repaired",
    ]
    .iter()
    .map(|end| {
        hold_histogram(
            &b,
            "mptun_reorder_hold_by_end_seconds",
            &format!("{end},{iface}"),
        )
    })
    .sum();
    assert_eq!(by_end, held, "waits by what ended them against all waits");
    // How long TCP segments are held to the farthest path's delay, and
    // how many were: the paths' delays are measured by now.
    let tcp_hold = sample(&b, &format!("mptun_tcp_hold_seconds{{{iface}}}"));
    assert!((0.0..=0.1).contains(&tcp_hold), "TCP held {tcp_hold} s");
    // Present; how many depends on which way each segment came.
    sample(&b, &format!("mptun_tcp_held_segments_total{{{iface}}}"));
    assert!(
        sample(
            &b,
            "mptun_path_received_bytes_total{interface=mptun0,name=,path=0}"
        ) > 1e6
    );
}

/// Two wg-quick tunnels per site as an ECMP setup writes them (same keys,
/// ports 5000 and 5001, `Table = off` on the second), imported with
/// `mptun import` on both sites: one tunnel that stripes one TCP flow over
/// both paths.
#[test]
fn wg_quick_configs_imported_on_both_sites_stripe_one_flow() {
    let Some((_machine, topo)) = take_lab() else {
        return;
    };
    let exe = &mptun_lab::mptun_exe().expect("the mptun program");
    let key = || {
        let out = Command::new(exe).arg("genkey").output().expect("genkey");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let public = |private: &str| {
        let key = mptun_wg::keys::decode_key(private).expect("key");
        mptun_wg::keys::encode_key(&mptun_wg::keys::public_key(&key))
    };
    let (key_a, key_b) = (key(), key());
    let dir = tempfile::tempdir().expect("tempdir");
    let wg_quick = |site: &str, key: &str, peer: &str, n: usize, endpoint: Option<String>| {
        let port = 5000 + n as u16;
        let host = if site == "a" { 1 } else { 2 };
        let mut text = format!(
            "[Interface]\nPrivateKey = {key}\nListenPort = {port}\nAddress = 10.66.{n}.{host}/24\n"
        );
        if n == 1 {
            text.push_str("Table = off\n");
        }
        text.push_str(&format!(
            "\n[Peer]\nPublicKey = {}\nAllowedIPs = 10.66.0.0/24, 10.66.1.0/24\n",
            public(peer)
        ));
        if let Some(endpoint) = endpoint {
            text.push_str(&format!(
                "Endpoint = {endpoint}\nPersistentKeepalive = 10\n"
            ));
        }
        let path = dir.path().join(format!("{site}-wg{n}.conf"));
        std::fs::write(&path, text).expect("write");
        path
    };
    let import = |files: Vec<std::path::PathBuf>| {
        let out = Command::new(exe)
            .arg("import")
            .args(&files)
            .output()
            .expect("import");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let site_a = import(
        (0..2)
            .map(|n| {
                wg_quick(
                    "a",
                    &key_a,
                    &key_b,
                    n,
                    Some(format!("{}:{}", topo.addr_b(n + 1), 5000 + n)),
                )
            })
            .collect(),
    );
    let site_b = import(
        (0..2)
            .map(|n| wg_quick("b", &key_b, &key_a, n, None))
            .collect(),
    );
    let sites = Sites::start_with_configs(exe, &topo, "mptun0", 2, (&site_a, &site_b))
        .expect("both sites up from the imported configs");
    let (ns_a, ns_b) = (topo.ns_a(), topo.ns_b());
    let tcp = Iperf {
        server_addr: "10.66.0.2".to_string(),
        ..one_path_args(&ns_a, &ns_b)
    }
    .tcp()
    .expect("iperf3 through the imported tunnel");
    let a = sites.status(Site::A).expect("status");
    let total: u64 = a.paths.iter().map(|p| p.tx_bytes).sum();
    eprintln!(
        "imported tunnel: {:.1} Mbit/s; path shares {:?}",
        tcp.goodput_mbps,
        a.paths
            .iter()
            .map(|p| p.tx_bytes as f64 / total as f64)
            .collect::<Vec<_>>()
    );
    assert_eq!(a.paths.len(), 2);
    for p in &a.paths {
        assert!(
            p.tx_bytes as f64 > 0.2 * total as f64,
            "path {} carried too little",
            p.id
        );
    }
    assert!(tcp.goodput_mbps > RATE_MBIT * 1.2, "{tcp:?}");
}

/// Under systemd (`Type=notify`): READY=1 once the tunnel is up, STOPPING=1
/// when it is told to stop.
#[test]
fn the_service_manager_hears_ready_and_stopping() {
    let Some((_machine, topo)) = take_lab() else {
        return;
    };
    let exe = &mptun_lab::mptun_exe().expect("the mptun program");
    let mut sites = Sites::start(exe, &topo, &SiteLayout::all_paths(&topo)).expect("sites");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("notify");
    let manager = std::os::unix::net::UnixDatagram::bind(&path).expect("bind");
    manager
        .set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    sites.set_env("NOTIFY_SOCKET", path.to_str().expect("path"));
    sites.restart(Site::A).expect("restart A under the manager");
    let mut buf = [0u8; 256];
    let n = manager.recv(&mut buf).expect("READY=1 within 15 s");
    let ready = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(ready.starts_with("READY=1"), "{ready}");
    assert!(
        link_exists(&topo.ns_a(), "mptun0"),
        "ready before the TUN device"
    );
    assert!(sites.stop(Site::A).expect("stop").success());
    let n = manager.recv(&mut buf).expect("STOPPING=1");
    assert_eq!(&buf[..n], b"STOPPING=1");
}

/// The benchmark behind issue 2's bar, run by hand (release build, root):
/// `cargo test --release -p mptun-lab --test netns -- --ignored --nocapture`.
/// Three paths shaped to 200 Mbit/s; one TCP flow through mptun against
/// three times one path's single-flow rate, both measured in this run.
#[test]
#[ignore = "benchmark: run by hand, figures go in the README"]
fn benchmark_one_flow_over_three_200_mbit_paths() {
    assert!(is_root(), "needs root");
    let _machine = one_at_a_time();
    let topo = tbf_lab(200.0);
    let exe = &mptun_lab::mptun_exe().expect("the mptun program");
    let (ns_a, ns_b) = (topo.ns_a(), topo.ns_b());
    let seconds = 10.0;
    let one_path = Iperf {
        server_addr: topo.addr_b(1).to_string(),
        duration: seconds,
        ..one_path_args(&ns_a, &ns_b)
    }
    .tcp()
    .expect("baseline");
    let _sites = Sites::start(exe, &topo, &SiteLayout::all_paths(&topo)).expect("sites");
    let tcp = Iperf {
        server_addr: mptun_lab::sites::TUNNEL_B.to_string(),
        duration: seconds,
        ..one_path_args(&ns_a, &ns_b)
    }
    .tcp()
    .expect("through mptun");
    let fraction = tcp.goodput_mbps / (3.0 * one_path.goodput_mbps);
    println!(
        "one path {:.1} Mbit/s, mptun one flow {:.1} Mbit/s = {:.0}% of 3x one path ({} retransmits)",
        one_path.goodput_mbps,
        tcp.goodput_mbps,
        100.0 * fraction,
        tcp.retransmits
    );
    assert!(fraction >= 0.8, "want >= 80% of 3x one path");
}

/// Share of frames, %, the emulator may release 5 ms or more after their
/// time in a lab run that measures the scenario at all.
const EMULATOR_LATE_PCT_MAX: f64 = 2.0;
/// Lab runs a test takes before it judges a host that stays that busy.
const LAB_ATTEMPTS: u32 = 3;
/// Steal, %, over a measurement at which it measures the host, not mptun:
/// the hypervisor stops the sites (and the lab's emulator) for milliseconds
/// at a time, many times the round trip of paths of next to no delay, and
/// longer than the hold that paths of equal delay call for.
const STARVED_STEAL_PCT: f64 = 20.0;

/// The lab's default scenario, short: three emulated 100 Mbit/s paths of
/// 10 ms RTT. One TCP flow through mptun gets at least twice what the best
/// single path carries on its own, both measured in this run, and no path
/// flaps.
#[test]
fn lab_equal_scenario_beats_the_best_single_path() {
    if !is_root() {
        eprintln!("skipped: needs root for network namespaces");
        return;
    }
    let _machine = one_at_a_time();
    // The emulator binary is found beside the test (`cargo test --workspace`
    // builds it, as mptun-netem has integration tests of its own).
    let mut scenario =
        mptun_lab::scenario::Scenario::parse(mptun_lab::scenario::DEFAULT_SCENARIO, "equal")
            .expect("default scenario");
    scenario.duration = 5.0;
    let options = mptun_lab::run::LabOptions {
        scenario,
        scenario_name: "equal (5 s)".into(),
        compare: true,
        json: true,
        mptun_exe: mptun_lab::mptun_exe().expect("the mptun program"),
    };
    // A host starved by its hypervisor releases the emulator's frames late,
    // or runs both sites and the emulator on less CPU than the scenario
    // needs: such a run measures the host, not mptun. Measure again; one
    // that stays starved leaves the figures unjudged.
    let mut attempt = 1;
    let mut starved_every_time = true;
    let (mptun, best, flaps, changes) = loop {
        let report = mptun_lab::run::run(&options).expect("lab run");
        eprintln!("{}", mptun_lab::run::render(&report));
        let row = |prefix: &str| {
            report
                .systems
                .iter()
                .find(|s| s.name.starts_with(prefix))
                .expect("system measured")
        };
        let (mptun, best) = (row("mptun"), row("best path"));
        let late = |s: &&mptun_lab::run::SystemResult| {
            s.host
                .emulator_very_late_pct
                .is_some_and(|late| late >= EMULATOR_LATE_PCT_MAX)
        };
        let emulated = [mptun, best]
            .iter()
            .all(|s| !late(s) && !noisy(s.host.steal_pct));
        starved_every_time &= [mptun, best]
            .iter()
            .any(|s| late(s) || starved(s.host.steal_pct));
        let met = mptun.goodput_mbps >= 2.0 * best.goodput_mbps && report.mptun.path_flaps == 0;
        if met || emulated || attempt == LAB_ATTEMPTS {
            break (
                mptun.goodput_mbps,
                best.goodput_mbps,
                report.mptun.path_flaps,
                report.mptun.path_changes.join("\n"),
            );
        }
        eprintln!(
            "attempt {attempt}: the emulator released {EMULATOR_LATE_PCT_MAX}% or more of the frames 5 ms late, or steal was {NOISY_STEAL_PCT}% or more; measuring again"
        );
        attempt += 1;
    };
    if mptun < 2.0 * best {
        fail_unless_starved(
            starved_every_time,
            format!("mptun {mptun:.1} Mbit/s, best single path {best:.1} Mbit/s (lab run {attempt} of at most {LAB_ATTEMPTS})"),
        );
    }
    // Healthy paths, which the flow fills: none is ever taken for dead, at
    // start or under the flow.
    if flaps > 0 {
        fail_unless_starved(
            starved_every_time,
            format!("paths flapped {flaps} times (lab run {attempt}):\n{changes}"),
        );
    }
}

/// The lab on `paths` (scenario lines), with a 2 s flow of mptun alone;
/// its report, printed.
fn short_lab(name: &str, paths: &str) -> mptun_lab::run::LabReport {
    let text = format!("duration = 2\n{paths}");
    let scenario = mptun_lab::scenario::Scenario::parse(&text, name).expect("scenario");
    let options = mptun_lab::run::LabOptions {
        scenario,
        scenario_name: name.into(),
        compare: false,
        json: true,
        mptun_exe: mptun_lab::mptun_exe().expect("the mptun program"),
    };
    let report = mptun_lab::run::run(&options).expect("lab run");
    eprintln!("{}", mptun_lab::run::render(&report));
    report
}

/// Probe trains: before any data, site A takes an emulated 8 Mbit/s path
/// for about that (not for the 100 Mbit/s assumed of an unmeasured path),
/// and a 100 Mbit/s one beside it for no less than most of its rate.
#[test]
fn probe_trains_tell_a_slow_path_before_the_flow() {
    if !is_root() {
        eprintln!("skipped: needs root for network namespaces");
        return;
    }
    let _machine = one_at_a_time();
    let report = short_lab(
        "slow beside fast",
        "[[path]]\nrate-mbit = 100\ndelay-ms = 5\n\
         [[path]]\nrate-mbit = 8\ndelay-ms = 30\n",
    );
    let trains = &report.mptun.path_train_mbps;
    let slow = trains[1].expect("the slow path's trains measured");
    // Inner bytes, so a little below the emulated rate.
    assert!(
        (6.0..=9.0).contains(&slow),
        "8 Mbit/s path: trains {slow:.1}"
    );
    if let Some(fast) = trains[0] {
        assert!(fast >= 60.0, "100 Mbit/s path: trains {fast:.1}");
    }
}

#[test]
fn idle_pings_and_interactive_tcp_keep_the_nearest_of_six_paths() {
    if !is_root() {
        eprintln!("skipped: needs root for network namespaces");
        return;
    }
    let _machine = one_at_a_time();
    // Round trips of 10 and 80 ms: an EF-marked request and its answer
    // take the near path; unmarked ones are held to the far one.
    let met = |m: &mptun_lab::run::MptunDetail| {
        m.added_latency_ms < 1.0
            && m.tcp_request_rtt_ef_ms < 20.0
            && m.tcp_request_rtt_unmarked_ms > 70.0
    };
    // A host that stops the sites for a millisecond now and then adds it to
    // the tunnel's round trips, never takes it away: measure again.
    let mut attempt = 1;
    let m = loop {
        let report = short_lab(
            "near and far",
            "[[path]]\nrate-mbit = 100\ndelay-ms = 5\n\
             [[path]]\nrate-mbit = 50\ndelay-ms = 10\n\
             [[path]]\nrate-mbit = 50\ndelay-ms = 15\n\
             [[path]]\nrate-mbit = 50\ndelay-ms = 20\n\
             [[path]]\nrate-mbit = 50\ndelay-ms = 30\n\
             [[path]]\nrate-mbit = 50\ndelay-ms = 40\n",
        );
        if met(&report.mptun) || attempt == LAB_ATTEMPTS {
            break report.mptun;
        }
        eprintln!(
            "attempt {attempt}: a round trip missed its bar (ping {:.2} ms against {:.2}, its paths: {}); measuring again",
            report.mptun.tunnel_rtt_ms, report.mptun.best_path_rtt_ms, report.mptun.idle_ping_paths
        );
        attempt += 1;
    };
    // The bar: under 1 ms added to a ping at idle, up to six paths.
    assert!(
        m.added_latency_ms < 1.0,
        "ping: {:.2} ms through the tunnel, {:.2} over the nearest path (run {attempt} of at most {LAB_ATTEMPTS}); its paths: {}",
        m.tunnel_rtt_ms,
        m.best_path_rtt_ms,
        m.idle_ping_paths
    );
    assert!(
        m.tcp_request_rtt_ef_ms < 20.0,
        "EF-marked TCP: {:.1} ms",
        m.tcp_request_rtt_ef_ms
    );
    assert!(
        m.tcp_request_rtt_unmarked_ms > 70.0,
        "unmarked TCP: {:.1} ms",
        m.tcp_request_rtt_unmarked_ms
    );
}
