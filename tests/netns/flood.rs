//! What an attacker on the paths can send: datagrams captured off the
//! wire and replayed, handshake initiations replayed to every path, cookie
//! replies forged from a captured initiation and the responder's public key
//! (as finding 1 of the hardening review describes), and garbage.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use mptun_netem::topology::in_netns;
use mptun_netem::NetemError;

const INITIATION: u8 = 1;
const INITIATION_LEN: usize = 148;
const COOKIE_REPLY: u8 = 3;

/// One UDP datagram seen on the wire.
#[derive(Clone, Debug)]
pub struct Datagram {
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    pub payload: Vec<u8>,
}

/// Captures, in one namespace, the UDP datagrams to or from `ports`.
pub struct Capture {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<Vec<Datagram>, NetemError>>,
}

impl Capture {
    pub fn start(ns: &str, ports: std::ops::Range<u16>) -> Capture {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let ns = ns.to_string();
        let thread = std::thread::spawn(move || {
            in_netns(&ns, move || {
                let socket = packet_socket().map_err(|e| NetemError::io("packet socket", e))?;
                let _ = ready_tx.send(());
                let mut seen = Vec::new();
                let mut buf = vec![0u8; 65536 + 64];
                while !flag.load(Ordering::Relaxed) {
                    // SAFETY: buf is valid for writes of its length.
                    let n = unsafe {
                        libc::recv(socket.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0)
                    };
                    if n > 0 {
                        split(&buf[..n as usize], &ports, &mut seen);
                    }
                }
                Ok(seen)
            })
        });
        let _ = ready_rx.recv_timeout(Duration::from_secs(5));
        Capture { stop, thread }
    }

    pub fn stop(self) -> Vec<Datagram> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .expect("capture thread")
            .expect("capture")
    }
}

/// An AF_PACKET socket that sees frames both ways, each after a
/// virtio-net header that gives the segment size of a GSO or GRO packet
/// (which the kernel gives only to raw sockets).
fn packet_socket() -> std::io::Result<OwnedFd> {
    // ETH_P_ALL: the kernel hands outgoing frames only to sockets of all
    // protocols.
    let protocol = (libc::ETH_P_ALL as u16).to_be() as libc::c_int;
    // SAFETY: plain socket calls; the fd is owned right after creation.
    unsafe {
        let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, protocol);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let fd = OwnedFd::from_raw_fd(fd);
        let one: libc::c_int = 1;
        let set = |level, name, value: *const libc::c_void, len| {
            if libc::setsockopt(fd.as_raw_fd(), level, name, value, len) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        };
        set(
            libc::SOL_PACKET,
            libc::PACKET_VNET_HDR,
            (&one as *const libc::c_int).cast(),
            4,
        )?;
        let timeout = libc::timeval {
            tv_sec: 0,
            tv_usec: 100_000,
        };
        set(
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&timeout as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as u32,
        )?;
        Ok(fd)
    }
}

/// Split one captured frame (virtio-net header, Ethernet, IPv4, UDP) into
/// the datagrams it carries.
fn split(packet: &[u8], ports: &std::ops::Range<u16>, out: &mut Vec<Datagram>) {
    const HEADERS: usize = 10 + 14;
    let Some(ip) = packet.get(HEADERS..) else {
        return;
    };
    if packet[HEADERS - 2..HEADERS] != [0x08, 0x00] {
        return;
    }
    let gso_type = packet[1];
    let gso_size = u16::from_le_bytes([packet[4], packet[5]]) as usize;
    let ihl = usize::from(ip.first().map_or(0, |b| b & 0x0f)) * 4;
    if ip.len() < ihl + 8 || ihl < 20 || ip[9] != libc::IPPROTO_UDP as u8 {
        return;
    }
    let addr = |at: usize| Ipv4Addr::new(ip[at], ip[at + 1], ip[at + 2], ip[at + 3]);
    let port = |at: usize| u16::from_be_bytes([ip[ihl + at], ip[ihl + at + 1]]);
    let (sport, dport) = (port(0), port(2));
    if !ports.contains(&sport) && !ports.contains(&dport) {
        return;
    }
    let payload = &ip[ihl + 8..];
    let segment = if gso_type != 0 && gso_size > 0 {
        gso_size
    } else {
        payload.len().max(1)
    };
    for chunk in payload.chunks(segment) {
        out.push(Datagram {
            src: SocketAddrV4::new(addr(12), sport),
            dst: SocketAddrV4::new(addr(16), dport),
            payload: chunk.to_vec(),
        });
    }
}

/// A cookie reply to the initiator of `initiation`, valid as WireGuard
/// defines it: it needs only what the wire shows and the responder's
/// public key.
pub fn forged_cookie_reply(
    initiation: &[u8],
    responder_public: &[u8; 32],
    nonce: [u8; 24],
) -> Vec<u8> {
    use blake2::Digest;
    use chacha20poly1305::aead::{Aead, KeyInit, Payload};
    let key = blake2::Blake2s256::new()
        .chain_update(b"cookie--")
        .chain_update(responder_public)
        .finalize();
    let mac1 = &initiation[116..132];
    let sealed = chacha20poly1305::XChaCha20Poly1305::new(&key)
        .encrypt(
            &nonce.into(),
            Payload {
                msg: &[0x5a; 16],
                aad: mac1,
            },
        )
        .expect("seal a cookie");
    let mut reply = vec![COOKIE_REPLY, 0, 0, 0];
    reply.extend_from_slice(&initiation[4..8]);
    reply.extend_from_slice(&nonce);
    reply.extend_from_slice(&sealed);
    reply
}

/// Every message of the flood, each with where it goes.
#[derive(Clone)]
pub struct Plan {
    /// Sent from a socket in site A's namespace.
    pub to_a: Vec<(SocketAddr, Vec<u8>)>,
    /// Sent from a socket in site B's namespace.
    pub to_b: Vec<(SocketAddr, Vec<u8>)>,
}

impl Plan {
    /// From what was captured in A's namespace: replays of everything both
    /// ways, each initiation (A's) to every one of B's `b_ports`, forged
    /// cookie replies for each, and garbage to every port.
    pub fn new(
        captured: &[Datagram],
        a_addrs: &[Ipv4Addr],
        b_ports: &[SocketAddr],
        a_ports: &[SocketAddr],
        b_public: &[u8; 32],
    ) -> Plan {
        let mut plan = Plan {
            to_a: Vec::new(),
            to_b: Vec::new(),
        };
        let mut random = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            random ^= random << 13;
            random ^= random >> 7;
            random ^= random << 17;
            random
        };
        for d in captured {
            if a_addrs.contains(d.dst.ip()) {
                plan.to_a.push((d.dst.into(), d.payload.clone()));
            } else {
                plan.to_b.push((d.dst.into(), d.payload.clone()));
            }
            if d.payload.len() == INITIATION_LEN && d.payload[0] == INITIATION {
                for &port in b_ports {
                    plan.to_b.push((port, d.payload.clone()));
                }
                for _ in 0..16 {
                    let nonce: [u8; 24] = std::array::from_fn(|_| next() as u8);
                    plan.to_a.push((
                        d.src.into(),
                        forged_cookie_reply(&d.payload, b_public, nonce),
                    ));
                }
            }
        }
        for n in 0..256usize {
            let len = 4 + (next() as usize % 1400);
            let mut junk: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if n % 2 == 0 {
                // Looks like WireGuard: a known type and three zero bytes.
                junk[0] = 1 + (n / 2 % 4) as u8;
                junk[1..4].fill(0);
            }
            plan.to_a.push((a_ports[n % a_ports.len()], junk.clone()));
            plan.to_b.push((b_ports[n % b_ports.len()], junk));
        }
        plan
    }

    pub fn initiations(&self) -> usize {
        self.to_b
            .iter()
            .filter(|(_, m)| m.len() == INITIATION_LEN && m[0] == INITIATION)
            .count()
    }

    pub fn cookie_replies(&self) -> usize {
        self.to_a
            .iter()
            .filter(|(_, m)| m[0] == COOKIE_REPLY && m.len() == 64)
            .count()
    }
}

/// One thread sending the plan over and over, as fast as it can.
pub struct Flood {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    thread: JoinHandle<()>,
}

impl Flood {
    pub fn start(ns_a: &str, ns_b: &str, plan: Plan) -> Flood {
        let bind = || -> Result<UdpSocket, NetemError> {
            UdpSocket::bind("0.0.0.0:0").map_err(|e| NetemError::io("bind", e))
        };
        let in_a = in_netns(ns_a, bind).expect("socket in A");
        let in_b = in_netns(ns_b, bind).expect("socket in B");
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let (flag, count) = (stop.clone(), sent.clone());
        let thread = std::thread::spawn(move || {
            let messages: Vec<(&UdpSocket, &SocketAddr, &[u8])> = plan
                .to_a
                .iter()
                .map(|(to, m)| (&in_a, to, m.as_slice()))
                .chain(plan.to_b.iter().map(|(to, m)| (&in_b, to, m.as_slice())))
                .collect();
            let mut n = 0u64;
            while !flag.load(Ordering::Relaxed) {
                for (socket, to, message) in &messages {
                    if socket.send_to(message, to).is_ok() {
                        n += 1;
                    }
                }
                count.store(n, Ordering::Relaxed);
            }
        });
        Flood { stop, sent, thread }
    }

    /// Stop; return how many datagrams were sent.
    pub fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("flood thread");
        self.sent.load(Ordering::Relaxed)
    }
}

/// Numbered UDP datagrams from B to A through the tunnel, to see whether
/// anything is delivered twice.
pub struct Numbered {
    stop: Arc<AtomicBool>,
    sender: JoinHandle<Result<u64, NetemError>>,
    receiver: JoinHandle<Result<(u64, u64), NetemError>>,
}

impl Numbered {
    pub fn start(ns_a: &str, ns_b: &str, to: SocketAddrV4) -> Numbered {
        let stop = Arc::new(AtomicBool::new(false));
        let socket = in_netns(ns_a, move || {
            let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, to.port()))
                .map_err(|e| NetemError::io("bind receiver", e))?;
            s.set_read_timeout(Some(Duration::from_millis(100)))
                .map_err(|e| NetemError::io("timeout", e))?;
            Ok(s)
        })
        .expect("receiver socket");
        let flag = stop.clone();
        let receiver = std::thread::spawn(move || {
            let mut seen = std::collections::HashSet::new();
            let (mut received, mut twice) = (0u64, 0u64);
            let mut buf = [0u8; 64];
            let mut quiet_since_stop = 0;
            loop {
                match socket.recv(&mut buf) {
                    Ok(8) => {
                        received += 1;
                        let number = u64::from_le_bytes(buf[..8].try_into().unwrap_or_default());
                        if !seen.insert(number) {
                            twice += 1;
                        }
                    }
                    Ok(_) => {}
                    Err(_) if flag.load(Ordering::Relaxed) => {
                        quiet_since_stop += 1;
                        if quiet_since_stop > 5 {
                            break;
                        }
                    }
                    Err(_) => {}
                }
            }
            Ok((received, twice))
        });
        let sender_socket = in_netns(ns_b, || {
            UdpSocket::bind("0.0.0.0:0").map_err(|e| NetemError::io("bind sender", e))
        })
        .expect("sender socket");
        let flag = stop.clone();
        let sender = std::thread::spawn(move || {
            let mut n = 0u64;
            while !flag.load(Ordering::Relaxed) {
                let _ = sender_socket.send_to(&n.to_le_bytes(), to);
                n += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(n)
        });
        Numbered {
            stop,
            sender,
            receiver,
        }
    }

    /// Stop; return (sent, received, received more than once).
    pub fn stop(self) -> (u64, u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        let sent = self.sender.join().expect("sender").expect("send");
        let (received, twice) = self.receiver.join().expect("receiver").expect("receive");
        (sent, received, twice)
    }
}
