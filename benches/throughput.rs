//! The whole data path of one TCP flow without sockets or devices, on one
//! core: what a site pair can carry when nothing but mptun's own work
//! limits it.
//!
//! Each iteration takes a batch of consecutive full-size segments of one
//! TCP flow (what one TUN read gives), hands them to site A's
//! [`Endpoint::handle_tun`], seals every plaintext A transmits with that
//! path's real WireGuard session, opens it with site B's, hands it to B's
//! [`Endpoint::handle_datagrams`], takes what B delivers in order and
//! coalesces consecutive segments as the TUN write does ([`GROTable`]). B's
//! probes go back to A the same way. Virtual time advances by what the
//! batch would take at 10 Gbit/s.
//!
//! Paths 1 and 3; batches of 1, 16 and 64 packets. Throughput is inner
//! bytes per second through both sites: on two cores (one per site) the
//! tunnel would carry about this much, before the kernel's share.

use std::hint::black_box;
use std::time::{Duration, Instant};

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mptun::tun::WriteBatch;
use mptun_core::{Endpoint, EndpointConfig, PacketBuf, PathId};
use mptun_wg::testing::{self, pair, PEER_ADDR};
use mptun_wg::{Opened, PathSession};

/// An inner packet: what fits a 1500-byte IPv4 path.
const PACKET_LEN: usize = 1416;
const IP_HEADER: usize = 20;
const TCP_HEADER: usize = 20;
const PAYLOAD: usize = PACKET_LEN - IP_HEADER - TCP_HEADER;
/// Room in front of every packet, as the driver keeps.
const HEAD: usize = 16;
const PATH_COUNTS: [usize; 2] = [1, 3];
const BATCHES: [usize; 3] = [1, 16, 64];

/// A full-size segment of one TCP flow from 10.77.0.1:40000 to
/// 10.77.0.2:5201, with a valid IPv4 header checksum (the TCP checksum is
/// the kernel's to fill in after coalescing) and sequence number 0.
fn segment() -> Vec<u8> {
    let mut ip = vec![0u8; PACKET_LEN];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(PACKET_LEN as u16).to_be_bytes());
    ip[6] = 0x40; // don't fragment
    ip[8] = 64;
    ip[9] = 6; // TCP
    ip[12..16].copy_from_slice(&[10, 77, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 77, 0, 2]);
    let check = !fold(sum16(&ip[..IP_HEADER]));
    ip[10..12].copy_from_slice(&check.to_be_bytes());
    let tcp = &mut ip[IP_HEADER..];
    tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&5201u16.to_be_bytes());
    tcp[12] = 5 << 4; // header length
    tcp[13] = 0x10; // ACK
    tcp[14..16].copy_from_slice(&64240u16.to_be_bytes());
    ip
}

/// The one's-complement sum of `bytes` as 16-bit words, not yet folded.
fn sum16(bytes: &[u8]) -> u32 {
    bytes
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum()
}

fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The unfolded sum of a segment's TCP pseudo-header and segment with
/// sequence number and checksum 0; a segment's checksum adds its sequence
/// number to it (the coalescing checks every checksum, as the kernel
/// would trust the merged one).
fn tcp_base_sum(ip: &[u8]) -> u32 {
    let tcp_len = (ip.len() - IP_HEADER) as u32;
    sum16(&ip[12..20]) + 6 + tcp_len + sum16(&ip[IP_HEADER..])
}

/// Where a segment's TCP sequence number and checksum are.
const TCP_SEQ: std::ops::Range<usize> = IP_HEADER + 4..IP_HEADER + 8;
const TCP_CHECKSUM: std::ops::Range<usize> = IP_HEADER + 16..IP_HEADER + 18;

/// Two sites, one WireGuard session pair per path, and the buffers in
/// circulation.
struct Pair {
    a: Endpoint,
    b: Endpoint,
    /// Per path: A's session and B's.
    sessions: Vec<(PathSession, PathSession)>,
    now: Instant,
    batch: usize,
    template: Vec<u8>,
    template_sum: u32,
    next_segment: u32,
    packets: Vec<PacketBuf>,
    transmits: Vec<PacketBuf>,
    opened: Vec<PacketBuf>,
    delivered: Vec<PacketBuf>,
    spare: Vec<PacketBuf>,
    sealed: Vec<u8>,
    writes: WriteBatch,
    /// Runs of segments coalesced into one packet, over all iterations.
    coalesced_runs: u64,
    /// Packets given to A and packets B delivered.
    sent: u64,
    received: u64,
}

impl Pair {
    fn new(paths: usize, batch: usize) -> Pair {
        let t0 = Instant::now();
        let mut a = Endpoint::new(t0, EndpointConfig::new(1, paths));
        let mut b = Endpoint::new(t0, EndpointConfig::new(2, paths));
        let mut sessions = Vec::new();
        for i in 0..paths {
            let (mut sa, mut sb) = pair();
            assert!(testing::handshake(&mut sa, &mut sb), "handshake failed");
            sessions.push((sa, sb));
            a.set_session(t0, PathId(i as u8), true);
            b.set_session(t0, PathId(i as u8), true);
        }
        let mut pair = Pair {
            a,
            b,
            sessions,
            now: t0,
            batch,
            template: segment(),
            template_sum: tcp_base_sum(&segment()),
            next_segment: 0,
            packets: Vec::new(),
            transmits: Vec::new(),
            opened: Vec::new(),
            delivered: Vec::new(),
            spare: Vec::new(),
            sealed: vec![0; PathSession::sealed_len(2048)],
            writes: WriteBatch::default(),
            coalesced_runs: 0,
            sent: 0,
            received: 0,
        };
        // A second of probes, so that every path is measured and up.
        for _ in 0..1000 {
            pair.now += Duration::from_millis(1);
            pair.timers();
            pair.exchange();
        }
        pair
    }

    fn timers(&mut self) {
        for site in [&mut self.a, &mut self.b] {
            if site.poll_timeout().is_some_and(|t| t <= self.now) {
                site.handle_timeout(self.now);
            }
        }
    }

    /// Seal what `from` transmits, open it on the other side, hand it in.
    fn carry(&mut self, a_to_b: bool) {
        loop {
            let (from, to) = if a_to_b {
                (&mut self.a, &mut self.b)
            } else {
                (&mut self.b, &mut self.a)
            };
            let Some(path) = from.poll_transmit(&mut self.transmits) else {
                break;
            };
            let (sa, sb) = &mut self.sessions[path.index()];
            let (seal, open) = if a_to_b { (sa, sb) } else { (sb, sa) };
            for plaintext in self.transmits.drain(..) {
                let Some(datagram) = seal.seal(plaintext.packet(), &mut self.sealed) else {
                    panic!("{path}: no datagram sealed");
                };
                let mut buf = self
                    .spare
                    .pop()
                    .unwrap_or_else(|| PacketBuf::new(2048, HEAD));
                let out = buf.room(HEAD, 2048 - HEAD);
                match open.open(PEER_ADDR, datagram, out, |_| {}) {
                    Opened::Plaintext { len } => buf.set_len(len),
                    other => panic!("{path}: opened {other:?}"),
                }
                self.opened.push(buf);
                self.spare.push(plaintext);
            }
            to.handle_datagrams(self.now, path, &mut self.opened);
        }
    }

    fn exchange(&mut self) {
        self.carry(true);
        self.carry(false);
        self.b.poll_deliver(&mut self.delivered);
    }

    /// Coalesce what B delivered as the TUN write would, then recycle it.
    fn write_tun(&mut self) {
        if self.delivered.is_empty() {
            return;
        }
        self.received += self.delivered.len() as u64;
        let mut rest: &[PacketBuf] = &self.delivered;
        while !rest.is_empty() {
            let (n, gro, bufs) = self.writes.stage(rest);
            gro.apply_gro(bufs, tun_rs::VIRTIO_NET_HDR_LEN, false)
                .expect("coalescing");
            // A run's segments are appended to its first packet, which grows.
            self.coalesced_runs += bufs
                .iter()
                .filter(|v| v.len() > tun_rs::VIRTIO_NET_HDR_LEN + PACKET_LEN)
                .count() as u64;
            rest = &rest[n..];
        }
        self.spare.append(&mut self.delivered);
    }

    /// One batch through both sites; return the inner bytes handed in.
    fn step(&mut self) -> usize {
        for _ in 0..self.batch {
            let mut p = self
                .spare
                .pop()
                .unwrap_or_else(|| PacketBuf::new(2048, HEAD));
            p.reset(HEAD);
            p.extend_from_slice(&self.template);
            let seq = self.next_segment.wrapping_mul(PAYLOAD as u32);
            let check = !fold(self.template_sum + (seq >> 16) + (seq & 0xffff));
            p.packet_mut()[TCP_SEQ].copy_from_slice(&seq.to_be_bytes());
            p.packet_mut()[TCP_CHECKSUM].copy_from_slice(&check.to_be_bytes());
            self.next_segment = self.next_segment.wrapping_add(1);
            self.packets.push(p);
        }
        self.sent += self.batch as u64;
        // 10 Gbit/s: 1.14 µs per packet.
        self.now += Duration::from_nanos((self.batch * PACKET_LEN * 8 / 10) as u64);
        self.timers();
        self.a.handle_tun(self.now, &mut self.packets);
        self.exchange();
        self.write_tun();
        self.batch * PACKET_LEN
    }
}

fn bench_throughput(c: &mut Criterion) {
    for batch in BATCHES {
        let mut group = c.benchmark_group(format!("throughput/batch_{batch}"));
        group.throughput(Throughput::Bytes((batch * PACKET_LEN) as u64));
        for paths in PATH_COUNTS {
            // Checked once, outside the timing: everything comes out, and
            // in batches the segments are coalesced.
            let mut check = Pair::new(paths, batch);
            for _ in 0..5_000 / batch {
                check.step();
            }
            assert!(
                check.received + 2 * batch as u64 >= check.sent,
                "{paths} paths, batch {batch}: {} of {} delivered",
                check.received,
                check.sent
            );
            if batch >= 16 {
                assert!(
                    check.coalesced_runs > 0,
                    "{paths} paths, batch {batch}: nothing coalesced"
                );
            }
            group.bench_with_input(BenchmarkId::new("paths", paths), &paths, |bench, &paths| {
                let mut pair = Pair::new(paths, batch);
                bench.iter(|| black_box(pair.step()));
            });
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = common::quick();
    targets = bench_throughput
}
criterion_main!(benches);
