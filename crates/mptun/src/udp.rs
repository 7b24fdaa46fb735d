//! A path's UDP socket with the kernel's batching: many datagrams per
//! receive call (recvmmsg, and UDP GRO, which hands over a run of
//! datagrams from one sender as one buffer) and a run of equal-size
//! datagrams per send call (UDP GSO). quinn-udp does the cmsg work and
//! falls back to one datagram per call where the kernel or the device
//! cannot segment.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::SystemTime;

use quinn_udp::{Transmit, UdpSocketState};
use tokio::io::Interest;

use crate::io::{PathSocket, RecvMeta};

/// Largest UDP payload of one GSO send: the IPv4 total length field less
/// the IP and UDP headers.
const GSO_MAX_BYTES: usize = 65_535 - 20 - 8;

/// One path's UDP socket.
pub struct UdpPath {
    io: tokio::net::UdpSocket,
    state: UdpSocketState,
}

impl UdpPath {
    /// Take over a bound socket.
    pub fn new(socket: std::net::UdpSocket) -> io::Result<UdpPath> {
        let state = UdpSocketState::new((&socket).into())?;
        allow_fragmentation(&socket)?;
        Ok(UdpPath {
            io: tokio::net::UdpSocket::from_std(socket)?,
            state,
        })
    }

    /// Most datagrams sent per call (1 without GSO).
    pub fn gso_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    /// Most datagrams received per buffer (1 without GRO).
    pub fn gro_segments(&self) -> usize {
        self.state.gro_segments()
    }

    async fn send_one(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        self.io
            .async_io(Interest::WRITABLE, || {
                self.state.try_send((&self.io).into(), transmit)
            })
            .await
    }
}

/// Let the outer IPv4 datagrams be fragmented on the way, as WireGuard's
/// are, instead of quinn-udp's "don't fragment, ignore path MTU": the TUN
/// MTU already fits the outgoing interface, and a smaller MTU further on
/// (a PPPoE or tunnelled hop) should slow a path, not black-hole it. IPv6
/// routers never fragment; there the kernel's default stays (learn the
/// path MTU from ICMPv6 and fragment at the source).
fn allow_fragmentation(socket: &std::net::UdpSocket) -> io::Result<()> {
    let value: libc::c_int = libc::IP_PMTUDISC_DONT;
    // SAFETY: the fd is a live socket for the call; the value points at a
    // c_int of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        // An IPv6-only socket has no IPv4 side to set.
        if e.raw_os_error() != Some(libc::ENOPROTOOPT) {
            return Err(e);
        }
    }
    Ok(())
}

impl PathSocket for UdpPath {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    async fn recv(&self, bufs: &mut [Vec<u8>], meta: &mut [RecvMeta]) -> io::Result<usize> {
        let count = bufs.len().min(meta.len());
        // Per batch, not per datagram.
        let mut slices: Vec<IoSliceMut<'_>> = bufs[..count]
            .iter_mut()
            .map(|b| IoSliceMut::new(b))
            .collect();
        let mut got = vec![quinn_udp::RecvMeta::default(); count];
        let n = self
            .io
            .async_io(Interest::READABLE, || {
                self.state.recv((&self.io).into(), &mut slices, &mut got)
            })
            .await?;
        for (out, m) in meta.iter_mut().zip(&got[..n]) {
            *out = RecvMeta {
                len: m.len,
                stride: m.stride,
                from: m.addr,
                received: m.timestamp.map(|t| SystemTime::UNIX_EPOCH + t),
            };
        }
        Ok(n)
    }

    async fn send(&self, to: SocketAddr, contents: &[u8], segment: usize) -> io::Result<()> {
        let segment = segment.max(1);
        let mut rest = contents;
        while !rest.is_empty() {
            let per_call = self.gso_segments().min(GSO_MAX_BYTES / segment).max(1);
            let (now, later) = rest.split_at(rest.len().min(per_call * segment));
            let transmit = Transmit {
                destination: to,
                ecn: None,
                contents: now,
                segment_size: (now.len() > segment).then_some(segment),
                src_ip: None,
            };
            if let Err(e) = self.send_one(&transmit).await {
                // quinn-udp turns GSO off for good when the device cannot
                // segment; send this run again a datagram at a time.
                if per_call > 1 && self.gso_segments() == 1 {
                    tracing::info!(error = %e, "UDP GSO refused by the kernel; sending one datagram per call");
                    continue;
                }
                return Err(e);
            }
            rest = later;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MAX_PACKET;

    fn bound() -> UdpPath {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind on loopback");
        UdpPath::new(socket).expect("socket state")
    }

    /// Datagram `i` of a run: its length and a byte pattern of its own.
    fn datagram(i: usize, len: usize) -> Vec<u8> {
        (0..len).map(|b| (i * 7 + b) as u8).collect()
    }

    #[tokio::test]
    async fn a_run_sent_in_one_call_arrives_as_the_same_datagrams() {
        let (a, b) = (bound(), bound());
        let to = b.local_addr().unwrap();
        // 100 of 1200 bytes (more than one GSO call carries) and a short
        // last one.
        let mut want: Vec<Vec<u8>> = (0..100).map(|i| datagram(i, 1200)).collect();
        want.push(datagram(100, 300));
        let contents = want.concat();
        a.send(to, &contents, 1200).await.unwrap();

        let mut bufs = vec![vec![0; MAX_PACKET]; 8];
        let mut meta = vec![RecvMeta::EMPTY; 8];
        let mut got = Vec::new();
        while got.len() < want.len() {
            let n = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                b.recv(&mut bufs, &mut meta),
            )
            .await
            .expect("the rest arrives")
            .unwrap();
            for (buf, m) in bufs.iter().zip(&meta[..n]) {
                assert_eq!(m.from, a.local_addr().unwrap());
                got.extend(buf[..m.len].chunks(m.stride).map(<[u8]>::to_vec));
            }
        }
        assert_eq!(got, want);
    }

    #[tokio::test]
    async fn a_datagram_says_when_the_kernel_received_it_not_when_it_was_read() {
        let (a, b) = (bound(), bound());
        let mut bufs = vec![vec![0; MAX_PACKET]; 1];
        let mut meta = vec![RecvMeta::EMPTY; 1];
        let wait = std::time::Duration::from_millis(20);
        // The kernel turns stamping on arrival on in deferred work once a
        // socket first asks, and until then stamps a datagram as it is
        // read: the first few may say nothing of the wait.
        let mut waited = Vec::new();
        for _ in 0..20 {
            a.send(b.local_addr().unwrap(), &datagram(0, 100), 100)
                .await
                .unwrap();
            // On loopback the datagram is in b's buffer once the send returns.
            tokio::time::sleep(wait).await;
            assert_eq!(b.recv(&mut bufs, &mut meta).await.unwrap(), 1);
            let received = meta[0].received.expect("a receive time");
            waited.push(SystemTime::now().duration_since(received).unwrap());
            if waited.last() >= Some(&wait) {
                return;
            }
        }
        panic!("read {wait:?} after the send, received: {waited:?} before");
    }
}
