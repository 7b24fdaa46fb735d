//! Two endpoints, each fed what the other sends (lost, repeated, reordered
//! as the fuzzer chooses) and authenticated datagrams of its own making:
//! well-formed trailers with any numbers, or any bytes at all. Time moves
//! as the fuzzer says. Nothing may panic, and the reorder buffer stays
//! within its capacity. (Order is the simulation's to check: a forged
//! trailer may number a packet anything.)
#![no_main]

use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mptun_core::wire::Kind;
use mptun_core::{Endpoint, EndpointConfig, PacketBuf, PathId, PathSet, Seq, Trailer, TRAILER_LEN};

const PATHS: usize = 3;

#[derive(Arbitrary, Debug)]
enum Step {
    /// Site A reads `count` inner packets of `len` bytes from its TUN.
    Tun { count: u8, len: u16 },
    /// What site `to_b`'s peer sent on the wire is handed over: the
    /// `index`th datagram in flight, `copies` times.
    Deliver { to_b: bool, index: u8, copies: u8 },
    /// The `index`th datagram in flight is lost.
    Lose { to_b: bool, index: u8 },
    /// A forged but authenticated data message, with these numbers.
    Forge {
        to_b: bool,
        path: u8,
        seq: u32,
        path_seq: u32,
        epoch: u32,
        sent_us: u32,
        previous_on_path: Option<u32>,
        paths_in_use: u16,
        congested: bool,
        held: bool,
        len: u16,
    },
    /// Authenticated bytes of any kind.
    Raw { to_b: bool, path: u8, bytes: Vec<u8> },
    /// Time passes; timers run.
    Wait { ms: u16 },
}

struct Site {
    endpoint: Endpoint,
    /// Plaintexts sent towards the other site, with their path.
    in_flight: Vec<(PathId, PacketBuf)>,
}

fn inner(len: u16, n: u32) -> PacketBuf {
    let len = usize::from(len).clamp(28, 1400);
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[20..24].copy_from_slice(&n.to_be_bytes());
    PacketBuf::copy_of(&p)
}

fn with_trailer(mut buf: PacketBuf, trailer: &Trailer) -> PacketBuf {
    let mut bytes = [0u8; TRAILER_LEN];
    trailer.encode(&mut bytes);
    buf.extend_from_slice(&bytes);
    buf
}

impl Site {
    fn new(now: Instant, epoch: u32) -> Site {
        let mut endpoint = Endpoint::new(now, EndpointConfig::new(epoch, PATHS));
        for i in 0..PATHS {
            endpoint.set_session(now, PathId(i as u8), true);
        }
        Site {
            endpoint,
            in_flight: Vec::new(),
        }
    }

    /// Take what the endpoint sends and delivers, and check its bounds.
    fn poll(&mut self) {
        let mut out = Vec::new();
        while let Some(path) = self.endpoint.poll_transmit(&mut out) {
            for buf in out.drain(..) {
                self.in_flight.push((path, buf));
            }
        }
        // What crosses the wire stays bounded too.
        if self.in_flight.len() > 10_000 {
            self.in_flight.drain(..5_000);
        }
        self.endpoint.poll_deliver(&mut out);
        let held = self.endpoint.held();
        assert!(held <= mptun_core::ReorderConfig::default().capacity, "{held} held");
    }
}

fuzz_target!(|steps: Vec<Step>| {
    let t0 = Instant::now();
    let mut now = t0;
    let mut a = Site::new(now, 1);
    let mut b = Site::new(now, 2);
    let mut numbered = 0u32;
    for step in steps.into_iter().take(2000) {
        match step {
            Step::Tun { count, len } => {
                let mut batch: Vec<PacketBuf> = (0..count.min(64))
                    .map(|_| {
                        numbered += 1;
                        inner(len, numbered)
                    })
                    .collect();
                a.endpoint.handle_tun(now, &mut batch);
            }
            Step::Deliver { to_b, index, copies } => {
                let (from, to) = if to_b { (&mut a, &mut b) } else { (&mut b, &mut a) };
                if from.in_flight.is_empty() {
                    continue;
                }
                let i = usize::from(index) % from.in_flight.len();
                let (path, buf) = from.in_flight.remove(i);
                for _ in 0..copies.clamp(1, 3) {
                    to.endpoint.handle_datagrams(now, path, &mut vec![buf.clone()]);
                }
            }
            Step::Lose { to_b, index } => {
                let from = if to_b { &mut a } else { &mut b };
                if !from.in_flight.is_empty() {
                    let i = usize::from(index) % from.in_flight.len();
                    from.in_flight.remove(i);
                }
            }
            Step::Forge { to_b, path, seq, path_seq, epoch, sent_us, previous_on_path, paths_in_use, congested, held, len } => {
                let to = if to_b { &mut b } else { &mut a };
                let trailer = Trailer {
                    seq: Seq(seq),
                    path_seq: Seq(path_seq),
                    epoch,
                    sent_us,
                    previous_on_path: previous_on_path.map(Seq),
                    paths_in_use: PathSet(paths_in_use),
                    kind: Kind::Data,
                    congested,
                    held,
                };
                let buf = with_trailer(inner(len, seq), &trailer);
                to.endpoint.handle_datagrams(now, PathId(path % 4), &mut vec![buf]);
            }
            Step::Raw { to_b, path, bytes } => {
                let to = if to_b { &mut b } else { &mut a };
                let buf = PacketBuf::copy_of(&bytes);
                to.endpoint.handle_datagrams(now, PathId(path % 4), &mut vec![buf]);
            }
            Step::Wait { ms } => {
                now += Duration::from_millis(u64::from(ms));
                for site in [&mut a, &mut b] {
                    if site.endpoint.poll_timeout().is_some_and(|t| t <= now) {
                        site.endpoint.handle_timeout(now);
                    }
                }
            }
        }
        a.poll();
        b.poll();
    }
});
