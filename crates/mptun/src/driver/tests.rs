//! Two drivers joined by in-memory sockets, with in-memory TUN devices:
//! the whole data path but the kernel, without root.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mptun_wg::keys;
use tokio::sync::oneshot;

use super::*;
use crate::fake::{FakeNet, FakeSocket, FakeTun, TunHandle};
use crate::mtu::MtuSource;
use crate::status::Status;

const PATHS: usize = 3;

fn key(seed: u8) -> [u8; 32] {
    keys::private_key_from_random([seed; 32])
}

fn addr(site: u8, path: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, site], 5000 + path as u16))
}

/// Site 1 initiates (it has endpoints), site 2 responds.
fn config(site: u8) -> Config {
    config_with_paths(site, PATHS)
}

fn config_with_paths(site: u8, paths: usize) -> Config {
    let (own, peer) = if site == 1 { (1, 2) } else { (2, 1) };
    let mut text = format!(
        "[interface]\nprivate-key = \"{}\"\naddress = [\"10.77.0.{own}/24\"]\ntable = \"off\"\n\
         [peer]\npublic-key = \"{}\"\nallowed-ips = [\"10.77.0.0/24\"]\n",
        keys::encode_key(&key(own)),
        keys::encode_key(&keys::public_key(&key(peer))),
    );
    for path in 0..paths {
        text += &format!("[[path]]\nlisten-port = {}\n", 5000 + path);
        if site == 1 {
            text += &format!("endpoint = \"{}\"\n", addr(2, path));
        }
    }
    Config::parse(&text, "test.toml", Path::new("."))
        .expect("valid config")
        .0
}

struct Site {
    driver: Driver,
    tun: TunHandle,
}

async fn site(net: &Arc<FakeNet>, n: u8) -> Site {
    site_with(net, n, config(n)).await
}

async fn site_with(net: &Arc<FakeNet>, n: u8, config: Config) -> Site {
    let (tun, handle) = FakeTun::new();
    let sockets = (0..config.paths.len())
        .map(|p| net.socket(addr(n, p)))
        .collect();
    let mtu = TunMtu {
        mtu: 1420,
        source: MtuSource::Configured { fits: 1420 },
    };
    let driver = Driver::spawn(Arc::new(config), u32::from(n) * 1000, tun, mtu, sockets)
        .expect("driver starts");
    Site {
        driver,
        tun: handle,
    }
}

async fn status(site: &Site) -> Status {
    let (reply, answer) = oneshot::channel();
    site.driver
        .status
        .send(reply)
        .await
        .expect("endpoint task runs");
    answer.await.expect("a status")
}

/// Wait until every path of both sites is up.
async fn all_up(a: &Site, b: &Site) {
    for _ in 0..500 {
        let (sa, sb) = (status(a).await, status(b).await);
        if sa.paths.iter().chain(&sb.paths).all(|p| p.state == "up") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("paths did not come up: {:?}", status(a).await.paths);
}

/// An IPv4 packet from `src` to `dst` of 1200 bytes carrying `n`.
fn packet(src: [u8; 4], dst: [u8; 4], n: u32) -> Vec<u8> {
    let mut p = vec![0u8; 1200];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&1200u16.to_be_bytes());
    p[9] = 17;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    p[20..24].copy_from_slice(&n.to_be_bytes());
    p
}

const A: [u8; 4] = [10, 77, 0, 1];
const B: [u8; 4] = [10, 77, 0, 2];

/// Take what site `b` wrote to its TUN device until `count` packets came
/// or a second passed with none; return their numbers.
async fn received(b: &mut Site, count: usize) -> Vec<u32> {
    let mut got = Vec::new();
    while got.len() < count {
        match tokio::time::timeout(Duration::from_secs(1), b.tun.written.recv()).await {
            Ok(Some(p)) => got.push(u32::from_be_bytes([p[20], p[21], p[22], p[23]])),
            _ => break,
        }
    }
    got
}

/// Check that `got` is `0..n`, saying where it is not.
fn assert_in_order(got: &[u32], n: u32) {
    let first_wrong = got.iter().zip(0..n).position(|(&g, k)| g != k);
    assert!(
        got.len() == n as usize && first_wrong.is_none(),
        "{} of {n} packets; first out of place at {first_wrong:?}: {:?}",
        got.len(),
        &got[first_wrong.unwrap_or(0)..][..got.len().min(10)]
    );
}

#[tokio::test(start_paused = true)]
async fn packets_cross_every_path_and_arrive_in_order() {
    let net = Arc::new(FakeNet::default());
    let (a, mut b) = (site(&net, 1).await, site(&net, 2).await);
    all_up(&a, &b).await;
    for n in 0..3000 {
        a.tun.inject.send(packet(A, B, n)).expect("inject");
    }
    let got = received(&mut b, 3000).await;
    assert_in_order(&got, 3000);
    let sa = status(&a).await;
    for p in &sa.paths {
        assert!(
            p.tx_packets > 0,
            "path[{}] carried nothing: {:?}",
            p.id,
            sa.paths
        );
    }
    let sent: u64 = sa.paths.iter().map(|p| p.tx_packets - p.resent).sum();
    assert_eq!(sent, 3000);
    assert_eq!(sa.tun.read_packets, 3000);
    assert_eq!(status(&b).await.tun.written_packets, 3000);
}

#[tokio::test(start_paused = true)]
async fn what_the_peer_may_not_send_or_receive_is_dropped_and_counted() {
    let net = Arc::new(FakeNet::default());
    let (a, mut b) = (site(&net, 1).await, site(&net, 2).await);
    all_up(&a, &b).await;
    // Not for the peer: never sent.
    a.tun
        .inject
        .send(packet(A, [192, 0, 2, 9], 1))
        .expect("inject");
    // From a source the peer may not use: sent, dropped at the peer.
    a.tun
        .inject
        .send(packet([10, 99, 0, 1], B, 2))
        .expect("inject");
    a.tun.inject.send(packet(A, B, 3)).expect("inject");
    assert_eq!(received(&mut b, 2).await, vec![3]);
    let sa = status(&a).await;
    assert_eq!(sa.tun.dropped_disallowed_destination, 1, "{:?}", sa.tun);
    assert_eq!(status(&b).await.tun.dropped_disallowed_source, 1);
}

#[tokio::test(start_paused = true)]
async fn a_cut_path_goes_down_and_the_flow_carries_on_in_order() {
    let net = Arc::new(FakeNet::default());
    let (a, mut b) = (site(&net, 1).await, site(&net, 2).await);
    all_up(&a, &b).await;
    let mut n = 0;
    let mut send_for = |ms: u64| {
        let a = &a;
        let first = n;
        n += ms as u32 * 10;
        async move {
            // About 100 Mbit/s, in 1 ms bursts.
            for k in first..first + ms as u32 * 10 {
                a.tun.inject.send(packet(A, B, k)).expect("inject");
                if k % 10 == 9 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        }
    };
    send_for(300).await;
    net.cut(addr(1, 1), true);
    send_for(700).await;
    let got = received(&mut b, n as usize).await;
    assert!(got.windows(2).all(|w| w[0] < w[1]), "out of order");
    assert!(
        got.len() as f64 >= 0.99 * f64::from(n),
        "{} of {n} arrived",
        got.len()
    );
    let sa = status(&a).await;
    assert_eq!(sa.paths[1].state, "down", "{:?}", sa.paths[1]);
}

#[tokio::test(start_paused = true)]
async fn a_tun_device_that_disappears_ends_the_tunnel_with_an_error() {
    // The kernel side goes away (the device was deleted): the tunnel must
    // not live on with a dead device, warning every 10 ms forever.
    let net = Arc::new(FakeNet::default());
    let Site { mut driver, tun } = site(&net, 1).await;
    drop(tun);
    let ended = tokio::time::timeout(Duration::from_secs(10), driver.tasks.join_next())
        .await
        .expect("the tunnel ends by itself");
    match ended {
        Some(Ok(Err(e))) => assert!(format!("{e:#}").contains("TUN device"), "{e:#}"),
        Some(Ok(Ok(()))) => panic!("a task ended without an error"),
        Some(Err(e)) => panic!("a task died: {e}"),
        None => panic!("no tasks"),
    }
}

#[tokio::test]
async fn an_endpoint_name_is_looked_up_again_while_its_path_is_down() {
    // Site 2 was configured when "localhost" stood for 127.0.0.9, where
    // nobody answers; site 1 listens at 127.0.0.1. Once the path has had
    // no session for a second, site 2 looks the name up again, and the
    // path comes up. Real time: the lookup runs on a thread.
    let net = Arc::new(FakeNet::default());
    let text = |own: u8, peer: u8, endpoint: &str| {
        format!(
            "[interface]\nprivate-key = \"{}\"\naddress = [\"10.77.0.{own}/24\"]\ntable = \"off\"\n\
             [peer]\npublic-key = \"{}\"\nallowed-ips = [\"10.77.0.0/24\"]\n\
             [[path]]\nlisten-port = 5000\n{endpoint}",
            keys::encode_key(&key(own)),
            keys::encode_key(&keys::public_key(&key(peer))),
        )
    };
    let moved =
        |_: &str| -> Result<SocketAddr, String> { Ok(SocketAddr::from(([127, 0, 0, 9], 5000))) };
    let (initiator, _) = Config::parse_with(
        &text(2, 1, "endpoint = \"localhost:5000\"\n"),
        "site-2.toml",
        Path::new("."),
        &moved,
    )
    .expect("valid config");
    assert_eq!(
        initiator.paths[0].endpoint_name.as_deref(),
        Some("localhost:5000")
    );
    let (responder, _) =
        Config::parse(&text(1, 2, ""), "site-1.toml", Path::new(".")).expect("valid config");
    let b = site_with(&net, 1, responder).await;
    let a = site_with(&net, 2, initiator).await;
    let mut up = false;
    for _ in 0..100 {
        let (sa, sb) = (status(&a).await, status(&b).await);
        if sa.paths[0].state == "up" && sb.paths[0].state == "up" {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(up, "the path never came up");
    assert_eq!(
        status(&a).await.paths[0].endpoint.as_deref(),
        Some("127.0.0.1:5000")
    );
}

/// Add path 2 to a site, as a reload does, the endpoint task taking it
/// `taken_after` the path's worker was built.
async fn add_third_path(net: &Arc<FakeNet>, site: &mut Site, n: u8, taken_after: Duration) {
    let config = Arc::new(config_with_paths(n, 3));
    let socket = net.socket(addr(n, 2));
    let path = site
        .driver
        .new_path(PathId(2), socket, &config.paths[2])
        .expect("path 2");
    tokio::time::sleep(taken_after).await;
    site.driver.reconfigure(config, vec![path]).await;
}

/// A reload adds a path to the site whose peer has it already: the
/// handshake can complete before the endpoint task, busy with a flow, takes
/// the new path. The path must still come up: the worker says once that
/// its session is up, and that must not reach the endpoint task before the
/// path does.
#[tokio::test(start_paused = true)]
async fn a_path_added_while_the_endpoint_task_is_busy_comes_up() {
    let net = Arc::new(FakeNet::default());
    let mut a = site_with(&net, 1, config_with_paths(1, 2)).await;
    let mut b = site_with(&net, 2, config_with_paths(2, 2)).await;
    all_up(&a, &b).await;
    add_third_path(&net, &mut b, 2, Duration::ZERO).await;
    // Longer than a handshake over this network takes.
    add_third_path(&net, &mut a, 1, Duration::from_millis(100)).await;
    all_up(&a, &b).await;
}

#[tokio::test(start_paused = true)]
async fn paths_added_and_removed_live_carry_the_flow_in_order() {
    let net = Arc::new(FakeNet::default());
    let mut a = site_with(&net, 1, config_with_paths(1, 2)).await;
    let mut b = site_with(&net, 2, config_with_paths(2, 2)).await;
    all_up(&a, &b).await;
    add_third_path(&net, &mut b, 2, Duration::ZERO).await;
    add_third_path(&net, &mut a, 1, Duration::ZERO).await;
    all_up(&a, &b).await;
    assert_eq!(status(&a).await.paths.len(), 3);
    for n in 0..3000 {
        a.tun.inject.send(packet(A, B, n)).expect("inject");
    }
    assert_in_order(&received(&mut b, 3000).await, 3000);
    assert!(
        status(&a).await.paths[2].tx_packets > 0,
        "the new path carried nothing"
    );

    // And removed again: closed, its worker stopped, the config shorter.
    for (site, n) in [(&mut a, 1), (&mut b, 2)] {
        site.driver.close_paths(vec![PathId(2)]).await;
        site.driver.stop_path(PathId(2)).await;
        site.driver
            .reconfigure::<FakeSocket>(Arc::new(config_with_paths(n, 2)), Vec::new())
            .await;
    }
    let sent_before = status(&a)
        .await
        .paths
        .iter()
        .map(|p| p.tx_packets)
        .sum::<u64>();
    for n in 3000..6000 {
        a.tun.inject.send(packet(A, B, n)).expect("inject");
    }
    let got = received(&mut b, 3000).await;
    assert_eq!(got.len(), 3000);
    assert!(
        got.iter().copied().eq(3000..6000),
        "out of order after removal"
    );
    let sa = status(&a).await;
    assert_eq!(sa.paths.len(), 2);
    let sent_after: u64 = sa.paths.iter().map(|p| p.tx_packets).sum();
    assert!(sent_after >= sent_before + 3000);
    assert_eq!(sa.tun.dropped_path_queue_full, 0, "{:?}", sa.tun);
}

#[test]
fn a_datagram_s_receive_time_is_as_long_before_now_as_the_wall_clock_says() {
    let wall = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let now = now();
    let at = |received| worker::received_at(received, (wall, now));
    let waited = Duration::from_micros(2_500);
    assert_eq!(at(Some(wall - waited)), Some(now - waited));
    assert_eq!(at(Some(wall)), Some(now));
    // Stamped after the clock was read: stepped back since; none said.
    assert_eq!(at(Some(wall + waited)), None);
    assert_eq!(at(None), None);
}
