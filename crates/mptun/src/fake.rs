//! An in-memory TUN device and in-memory sockets, for the driver's tests:
//! no root, no kernel.

use std::collections::{HashMap, HashSet};
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use mptun_core::{BufPool, PacketBuf};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use crate::io::{PathSocket, RecvMeta, TunDevice};

/// A TUN device whose kernel side is a pair of queues.
pub struct FakeTun {
    to_read: tokio::sync::Mutex<UnboundedReceiver<Vec<u8>>>,
    written: UnboundedSender<Vec<u8>>,
}

/// The kernel side of a [`FakeTun`].
pub struct TunHandle {
    /// Packets for the tunnel to read.
    pub inject: UnboundedSender<Vec<u8>>,
    /// Packets the tunnel wrote.
    pub written: UnboundedReceiver<Vec<u8>>,
}

impl FakeTun {
    pub fn new() -> (FakeTun, TunHandle) {
        let (inject, to_read) = unbounded_channel();
        let (written_tx, written) = unbounded_channel();
        let tun = FakeTun {
            to_read: tokio::sync::Mutex::new(to_read),
            written: written_tx,
        };
        (tun, TunHandle { inject, written })
    }
}

impl TunDevice for FakeTun {
    async fn read(
        &self,
        pool: &mut BufPool,
        head: usize,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> io::Result<()> {
        let mut to_read = self.to_read.lock().await;
        let Some(first) = to_read.recv().await else {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "TUN device gone"));
        };
        let mut next = Some(first);
        while let Some(packet) = next.take() {
            let mut buf = pool.take(head);
            buf.extend_from_slice(&packet);
            out.push(buf);
            if out.len() < max {
                next = to_read.try_recv().ok();
            }
        }
        Ok(())
    }

    fn write(&self, packets: &mut [PacketBuf]) -> usize {
        packets
            .iter()
            .filter(|p| self.written.send(p.packet().to_vec()).is_err())
            .count()
    }
}

type Mailbox = UnboundedSender<(SocketAddr, Vec<u8>)>;

/// A network of in-memory sockets, by address; an address can be cut off.
#[derive(Default)]
pub struct FakeNet {
    sockets: Mutex<HashMap<SocketAddr, Mailbox>>,
    cut: Mutex<HashSet<SocketAddr>>,
}

impl FakeNet {
    /// Bind a socket at `addr`.
    pub fn socket(self: &Arc<Self>, addr: SocketAddr) -> FakeSocket {
        let (tx, rx) = unbounded_channel();
        self.sockets.lock().expect("fake net").insert(addr, tx);
        FakeSocket {
            local: addr,
            mailbox: tokio::sync::Mutex::new(rx),
            net: self.clone(),
        }
    }

    /// Cut off (or restore) the socket at `addr`: nothing it sends or is
    /// sent arrives.
    pub fn cut(&self, addr: SocketAddr, cut: bool) {
        let mut set = self.cut.lock().expect("fake net");
        if cut {
            set.insert(addr);
        } else {
            set.remove(&addr);
        }
    }

    fn deliver(&self, from: SocketAddr, to: SocketAddr, datagram: &[u8]) {
        let cut = self.cut.lock().expect("fake net");
        if cut.contains(&from) || cut.contains(&to) {
            return;
        }
        if let Some(mailbox) = self.sockets.lock().expect("fake net").get(&to) {
            let _ = mailbox.send((from, datagram.to_vec()));
        }
    }
}

/// A socket of a [`FakeNet`].
pub struct FakeSocket {
    local: SocketAddr,
    mailbox: tokio::sync::Mutex<UnboundedReceiver<(SocketAddr, Vec<u8>)>>,
    net: Arc<FakeNet>,
}

impl PathSocket for FakeSocket {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    async fn recv(&self, bufs: &mut [Vec<u8>], meta: &mut [RecvMeta]) -> io::Result<usize> {
        let mut mailbox = self.mailbox.lock().await;
        let Some(first) = mailbox.recv().await else {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "fake net gone"));
        };
        let mut next = Some(first);
        let mut n = 0;
        while let Some((from, datagram)) = next.take() {
            bufs[n][..datagram.len()].copy_from_slice(&datagram);
            meta[n] = RecvMeta {
                len: datagram.len(),
                stride: datagram.len(),
                from,
                received: None,
            };
            n += 1;
            if n < bufs.len().min(meta.len()) {
                next = mailbox.try_recv().ok();
            }
        }
        Ok(n)
    }

    async fn send(&self, to: SocketAddr, contents: &[u8], segment: usize) -> io::Result<()> {
        for datagram in contents.chunks(segment.max(1)) {
            self.net.deliver(self.local, to, datagram);
        }
        Ok(())
    }
}
