//! The TUN device, with the kernel's offloads where it has them. With
//! IFF_VNET_HDR and TSO, one read brings up to 64 KB of one TCP flow's
//! segments at once, split here into MTU-sized packets; on the way out,
//! consecutive segments of one flow are coalesced into one write, so the
//! kernel's TCP stack sees a few large packets instead of many small ones.
//! Without offload, one packet per read and per write.

use std::io;
use std::sync::Mutex;

use mptun_core::{BufPool, PacketBuf};
use tun_rs::{AsyncDevice, GROTable, VIRTIO_NET_HDR_LEN};

use crate::io::{TunDevice, MAX_PACKET};

/// The TUN device.
pub struct Tun {
    dev: AsyncDevice,
    offload: bool,
    reads: Mutex<Reads>,
    writes: Mutex<Writes>,
}

/// What offloaded reads need between calls.
struct Reads {
    /// Where one read's super-packet lands, virtio header first.
    raw: Vec<u8>,
    /// Where it is split into packets; each handed out is replaced by a
    /// buffer from the pool.
    bufs: Vec<Vec<u8>>,
    sizes: Vec<usize>,
}

/// What offloaded writes need between calls.
struct Writes {
    gro: GROTable,
    /// The packets to write, as the vectors the coalescing works on.
    bufs: Vec<Vec<u8>>,
}

/// Most packets one offloaded read can split into: 64 KB in segments of
/// 512 bytes or more.
const SPLIT_MAX: usize = tun_rs::IDEAL_BATCH_SIZE;

impl Tun {
    /// Take over `dev`; use its offloads if it was opened with them.
    pub fn new(dev: AsyncDevice) -> Tun {
        let offload = dev.tcp_gso();
        Tun {
            dev,
            offload,
            reads: Mutex::new(Reads {
                raw: if offload {
                    vec![0; VIRTIO_NET_HDR_LEN + MAX_PACKET]
                } else {
                    Vec::new()
                },
                bufs: Vec::new(),
                sizes: vec![0; SPLIT_MAX],
            }),
            writes: Mutex::new(Writes {
                gro: GROTable::new(),
                bufs: Vec::new(),
            }),
        }
    }

    /// Whether reads split the kernel's super-packets and writes coalesce.
    pub fn offload(&self) -> bool {
        self.offload
    }

    /// Read what is queued, without waiting, into `out`; false if nothing
    /// was.
    fn try_read_split(
        &self,
        pool: &mut BufPool,
        head: usize,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> io::Result<bool> {
        let mut reads = self.reads.lock().unwrap_or_else(|e| e.into_inner());
        let Reads { raw, bufs, sizes } = &mut *reads;
        let room = pool.capacity().saturating_sub(head);
        let mut any = false;
        // At least one read, and more while a whole one still fits `max`.
        while !any || out.len() + SPLIT_MAX <= max {
            while bufs.len() < SPLIT_MAX {
                let (mut v, _) = pool.take(head).into_vec();
                v.resize(head + room, 0);
                bufs.push(v);
            }
            let n = match self.dev.try_recv_multiple(raw, bufs, sizes, head) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            };
            any = true;
            // Hand out the filled buffers; the next read refills the slots.
            for (mut v, &len) in bufs.drain(..n).zip(sizes.iter()) {
                v.truncate(head + len);
                out.push(PacketBuf::from_vec(v, head));
            }
        }
        Ok(any)
    }
}

impl TunDevice for Tun {
    async fn read(
        &self,
        pool: &mut BufPool,
        head: usize,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> io::Result<()> {
        if !self.offload {
            return read_plain(&self.dev, pool, head, out, max).await;
        }
        loop {
            if self.try_read_split(pool, head, out, max)? {
                return Ok(());
            }
            self.dev.readable().await?;
        }
    }

    fn write(&self, packets: &mut [PacketBuf]) -> usize {
        if !self.offload {
            // A TUN write hands the packet to the kernel's receive path and
            // does not block.
            return packets
                .iter()
                .filter(|p| self.dev.try_send(p.packet()).is_err())
                .count();
        }
        let mut writes = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        let Writes { gro, bufs } = &mut *writes;
        // The coalescing works on vectors with the virtio header's room in
        // front of every packet at one offset; the buffers are lent, not
        // copied, unless one has less room in front (none does today).
        let head = packets
            .iter()
            .map(PacketBuf::head)
            .max()
            .unwrap_or(0)
            .max(VIRTIO_NET_HDR_LEN);
        for p in packets.iter_mut() {
            let (mut v, at) = std::mem::replace(p, PacketBuf::new(0, 0)).into_vec();
            if at != head {
                let len = v.len() - at;
                v.resize(head + len, 0);
                v.copy_within(at..at + len, head);
            }
            bufs.push(v);
        }
        let result = (*self.dev).send_multiple(gro, bufs, head);
        for (p, v) in packets.iter_mut().zip(bufs.drain(..)) {
            *p = PacketBuf::from_vec(v, head);
        }
        match result {
            Ok(_) => 0,
            // It tells only that a write failed, not which.
            Err(_) => packets.len(),
        }
    }
}

/// Read one packet per call: the device has no offload.
async fn read_plain(
    dev: &AsyncDevice,
    pool: &mut BufPool,
    head: usize,
    out: &mut Vec<PacketBuf>,
    max: usize,
) -> io::Result<()> {
    let room = pool.capacity().saturating_sub(head);
    let mut buf = pool.take(head);
    let n = dev.recv(buf.room(head, room)).await?;
    buf.set_len(n);
    out.push(buf);
    // Take what else is queued, up to `max`, without waiting again.
    while out.len() < max {
        let mut buf = pool.take(head);
        match dev.try_recv(buf.room(head, room)) {
            Ok(n) => {
                buf.set_len(n);
                out.push(buf);
            }
            Err(_) => {
                pool.put(buf);
                break;
            }
        }
    }
    Ok(())
}
