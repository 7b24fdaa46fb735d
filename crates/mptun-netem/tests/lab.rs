//! Namespace tests and the acceptance benchmark. They need root, `ip`, `tc`,
//! `iperf3` and `ping` (iputils-ping), so they are `#[ignore]`d. Run with:
//!
//! ```text
//! crates/mptun-netem/scripts/bench.sh          # release build, all of them
//! # or
//! cargo test --release -p mptun-netem --test lab -- --ignored --nocapture --test-threads=1
//! ```
//! `NETEM_BENCH_SECS` sets the iperf3 duration (default 10).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::Duration;

use mptun_netem::spec::DirSpec;
use mptun_netem::topology::{Mode, TbfShape, Topology, TopologyOptions};

const BIN: &str = env!("CARGO_BIN_EXE_mptun-netem");
const RATE_MBIT: f64 = 200.0;
/// tbf bucket: 256 KiB is ~10 ms at 200 Mbit/s and far above one MTU.
const TBF_BURST: u64 = 256 * 1024;

fn queue_bytes() -> u64 {
    mptun_netem::model::default_queue_bytes((RATE_MBIT * 1e6) as u64)
}

fn secs() -> u64 {
    std::env::var("NETEM_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10)
}

fn emulated(paths: Vec<DirSpec>) -> Topology {
    Topology::build(
        TopologyOptions::default(),
        Mode::Emulated {
            paths,
            seed: 1,
            netem_bin: Path::new(BIN).to_path_buf(),
        },
    )
    .expect("building emulated topology")
}

/// One emulated path at RATE_MBIT with the tbf-equivalent queue, no delay.
fn shaped() -> DirSpec {
    DirSpec {
        rate_mbit: Some(RATE_MBIT),
        queue_bytes: Some(queue_bytes()),
        ..Default::default()
    }
}

fn tbf(n: usize) -> Topology {
    Topology::tbf(
        n,
        TbfShape {
            rate_mbit: RATE_MBIT,
            burst_bytes: TBF_BURST,
            limit_bytes: queue_bytes(),
        },
    )
    .expect("building tbf topology")
}

/// Ping from A to B over path `i`; returns (received, avg rtt ms).
fn ping(t: &Topology, i: usize, count: u32, interval: &str) -> (u32, f64) {
    let (rx, v) = ping_stats(t, i, count, interval);
    (rx, v[1])
}

/// Ping from A to B over path `i`; returns (received, [min, avg, max, mdev] ms).
fn ping_stats(t: &Topology, i: usize, count: u32, interval: &str) -> (u32, [f64; 4]) {
    let out = t
        .exec(&t.ns_a(), "ping")
        .args([
            "-n",
            "-q",
            "-c",
            &count.to_string(),
            "-i",
            interval,
            "-W",
            "1",
        ])
        .arg(t.addr_b(i).to_string())
        .output()
        .expect("running ping");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let received = text
        .split(',')
        .find(|s| s.contains("received"))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // rtt min/avg/max/mdev = 40.1/40.2/40.3/0.05 ms
    let mut v = [f64::NAN; 4];
    if let Some(nums) = text
        .lines()
        .find(|l| l.contains("min/avg/max"))
        .and_then(|l| l.split('=').nth(1))
    {
        for (slot, x) in v
            .iter_mut()
            .zip(nums.trim().trim_end_matches(" ms").split('/'))
        {
            *slot = x.parse().unwrap_or(f64::NAN);
        }
    }
    (received, v)
}

struct Server(Child);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One iperf3 client per entry of `targets` (path index, parallel flows),
/// all at once; returns the received Mbit/s of each.
fn iperf(t: &Topology, targets: &[(usize, u32)]) -> Vec<f64> {
    let mut servers = Vec::new();
    for (k, (i, _)) in targets.iter().enumerate() {
        let port = (5201 + k).to_string();
        let child = t
            .exec(&t.ns_b(), "iperf3")
            .args(["-s", "-1", "-p", &port, "-B"])
            .arg(t.addr_b(*i).to_string())
            .stdout(Stdio::null())
            .spawn()
            .expect("starting iperf3 server");
        servers.push(Server(child));
    }
    sleep(Duration::from_millis(500));
    let clients: Vec<Child> = targets
        .iter()
        .enumerate()
        .map(|(k, (i, flows))| {
            t.exec(&t.ns_a(), "iperf3")
                .args([
                    "-c",
                    &t.addr_b(*i).to_string(),
                    "-p",
                    &(5201 + k).to_string(),
                ])
                .args(["-t", &secs().to_string(), "-P", &flows.to_string(), "-J"])
                .stdout(Stdio::piped())
                .spawn()
                .expect("starting iperf3 client")
        })
        .collect();
    clients
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().expect("iperf3 client");
            let v: serde_json::Value =
                serde_json::from_slice(&out.stdout).expect("iperf3 JSON output");
            v["end"]["sum_received"]["bits_per_second"]
                .as_f64()
                .unwrap_or_else(|| panic!("no throughput in iperf3 output: {v}"))
                / 1e6
        })
        .collect()
}

#[test]
#[ignore = "needs root + namespaces; see file header"]
fn control_smoke() {
    let mut t = emulated(vec![DirSpec::default()]);
    let (rx, _) = ping(&t, 1, 3, "0.2");
    assert_eq!(rx, 3, "path should pass traffic");
    assert_eq!(t.control("down 1").expect("down"), "ok");
    let (rx, _) = ping(&t, 1, 3, "0.2");
    assert_eq!(rx, 0, "down path must drop everything");
    t.control("up 1").expect("up");
    t.control("set 1 delay-ms 10").expect("set delay");
    let (rx, rtt) = ping(&t, 1, 5, "0.2");
    assert_eq!(rx, 5);
    assert!((rtt - 20.0).abs() < 1.0, "rtt {rtt}");
    assert!(t.control("set 9 loss-pct 1").is_err());
    assert!(t.control("bogus").is_err());
    let stats = t.stats().expect("stats");
    let ab = &stats["paths"][0]["ab"];
    assert!(ab["drop_link_down"].as_u64().unwrap_or(0) >= 3, "{stats}");
    assert_eq!(ab["oversize"].as_u64(), Some(0), "{stats}");
    // The lab reads these to tell a busy host from a slow tunnel.
    let count = |key: &str| {
        ab[key]
            .as_u64()
            .unwrap_or_else(|| panic!("no {key}: {stats}"))
    };
    assert!(count("very_late") <= count("late"), "{stats}");
    assert!(count("late") <= count("tx_packets"), "{stats}");
}

#[test]
#[ignore = "needs root + namespaces + iperf3 + ping; see file header"]
fn acceptance_bench() {
    // (c) 20 ms one-way delay -> 40 ms RTT within 1 ms.
    let (rx, rtts) = {
        let t = emulated(vec![DirSpec {
            delay_ms: Some(20.0),
            ..Default::default()
        }]);
        // Warm up ARP first: the first echo also waits for ARP (2 more RTTs).
        ping(&t, 1, 2, "0.2");
        ping_stats(&t, 1, 20, "0.1")
    };
    let rtt = rtts[1];
    println!(
        "(c) ping RTT with 20 ms one-way delay: min/avg/max/mdev {:.3}/{:.3}/{:.3}/{:.3} ms ({rx}/20 replies)",
        rtts[0], rtts[1], rtts[2], rtts[3]
    );

    // (a) one path, single TCP flow.
    let tbf1 = iperf(&tbf(1), &[(1, 1)])[0];
    let emu1 = {
        let mut t = emulated(vec![shaped()]);
        let r = iperf(&t, &[(1, 1)])[0];
        println!("    emulator stats: {}", t.stats().expect("stats"));
        r
    };
    println!(
        "(a) 1 path @{RATE_MBIT} Mbit/s, 1 TCP flow: tbf {tbf1:.1} Mbit/s, emulator {emu1:.1} Mbit/s, ratio {:.3}",
        emu1 / tbf1
    );

    // (b) three paths, one iperf3 per path in parallel (3 flows each -> 9).
    let targets = [(1, 3), (2, 3), (3, 3)];
    let tbf3: Vec<f64> = iperf(&tbf(3), &targets);
    let emu3: Vec<f64> = iperf(&emulated(vec![shaped(); 3]), &targets);
    let (st, se) = (tbf3.iter().sum::<f64>(), emu3.iter().sum::<f64>());
    println!(
        "(b) 3 paths @{RATE_MBIT} Mbit/s, one iperf3 -P 3 per path: tbf {tbf3:.1?} = {st:.1}, emulator {emu3:.1?} = {se:.1}, ratio {:.3}",
        se / st
    );

    assert!(rx >= 19, "ping lost replies");
    assert!((rtt - 40.0).abs() <= 1.0, "(c) rtt {rtt}");
    assert!(emu1 >= 0.95 * tbf1, "(a) {emu1} < 95% of {tbf1}");
    assert!(se >= 0.90 * st, "(b) {se} < 90% of {st}");
}

#[test]
#[ignore = "needs root + namespaces; see file header"]
fn topology_cleans_up() {
    let prefix;
    {
        let t = emulated(vec![DirSpec::default(); 2]);
        prefix = t.prefix().to_string();
        let list = Command::new("ip")
            .args(["netns", "list"])
            .output()
            .expect("ip");
        assert!(String::from_utf8_lossy(&list.stdout).contains(&prefix));
        let st = mptun_netem::topology::offload_state(&t.ns_a(), "a1").expect("offloads");
        assert_eq!(st, [false; 4], "tx-csum/tso/gso/gro must be off");
    }
    let list = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip");
    assert!(!String::from_utf8_lossy(&list.stdout).contains(&prefix));
}
