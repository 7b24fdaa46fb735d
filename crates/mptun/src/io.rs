//! The two kinds of device the driver moves bytes between, as small traits:
//! the TUN device and a path's UDP socket. The real ones are in
//! [`crate::tun`] and [`crate::udp`]; the driver's tests use in-memory
//! ones ([`crate::fake`]).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::SystemTime;

use mptun_core::{BufPool, PacketBuf};

/// Largest datagram or TUN packet handled.
pub const MAX_PACKET: usize = 65_535;

/// The TUN device: inner packets from and to the kernel.
pub trait TunDevice: Send + Sync + 'static {
    /// Wait for packets from the kernel and append up to `max` of them to
    /// `out`, in buffers taken from `pool` with `head` bytes of room.
    fn read(
        &self,
        pool: &mut BufPool,
        head: usize,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> impl Future<Output = io::Result<()>> + Send;

    /// Hand `packets` to the kernel, in order, without waiting; return how
    /// many it refused.
    fn write(&self, packets: &mut [PacketBuf]) -> usize;
}

/// Where one received datagram, or a run of them, came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvMeta {
    /// Bytes received into the buffer.
    pub len: usize,
    /// Size of each datagram in the buffer (the last may be shorter): a
    /// socket with receive offload hands over several at once.
    pub stride: usize,
    /// The sender.
    pub from: SocketAddr,
    /// When the kernel received it, by the wall clock, if it says.
    pub received: Option<SystemTime>,
}

impl RecvMeta {
    /// A meta for an empty buffer, to be filled by a receive.
    pub const EMPTY: RecvMeta = RecvMeta {
        len: 0,
        stride: 0,
        from: SocketAddr::V4(std::net::SocketAddrV4::new(
            std::net::Ipv4Addr::UNSPECIFIED,
            0,
        )),
        received: None,
    };
}

/// One path's UDP socket.
pub trait PathSocket: Send + Sync + 'static {
    /// Return the address the socket is bound to.
    fn local_addr(&self) -> io::Result<SocketAddr>;

    /// Wait for datagrams and receive what is there into `bufs` (each at
    /// least [`MAX_PACKET`] bytes) and `meta`; return how many buffers were
    /// filled.
    fn recv(
        &self,
        bufs: &mut [Vec<u8>],
        meta: &mut [RecvMeta],
    ) -> impl Future<Output = io::Result<usize>> + Send;

    /// Send the datagrams in `contents`, each `segment` bytes but the last,
    /// which may be shorter, to `to`.
    fn send(
        &self,
        to: SocketAddr,
        contents: &[u8],
        segment: usize,
    ) -> impl Future<Output = io::Result<()>> + Send;
}
