//! The TUN device, with the kernel's offloads where it has them. With
//! IFF_VNET_HDR and TSO, one read brings up to 64 KB of one TCP flow's
//! segments at once, split here into MTU-sized packets; on the way out,
//! consecutive segments of one flow are coalesced into one write (a copy
//! per packet, into buffers that can hold a whole run), so the kernel's
//! TCP stack sees a few large packets instead of many small ones.
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
    writes: Mutex<WriteBatch>,
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

/// In-order packets staged for an offloaded write: copied into buffers
/// with room for a whole coalesced run (the coalescing does not grow a
/// buffer, and the pool's are one packet each), behind the virtio
/// header's room, with the table that coalesces them.
pub struct WriteBatch {
    gro: GROTable,
    bufs: Vec<Vec<u8>>,
}

/// Most packets staged at once, and what each buffer can grow to.
const WRITE_BATCH: usize = tun_rs::IDEAL_BATCH_SIZE;
const WRITE_BUF: usize = 2 * VIRTIO_NET_HDR_LEN + MAX_PACKET;

impl Default for WriteBatch {
    fn default() -> Self {
        WriteBatch {
            gro: GROTable::new(),
            bufs: Vec::new(),
        }
    }
}

impl WriteBatch {
    /// Copy up to [`WRITE_BATCH`] of `packets` in; return how many, the
    /// table and the buffers, each packet at [`VIRTIO_NET_HDR_LEN`].
    pub fn stage(&mut self, packets: &[PacketBuf]) -> (usize, &mut GROTable, &mut [Vec<u8>]) {
        let n = packets.len().min(WRITE_BATCH);
        while self.bufs.len() < n {
            self.bufs.push(Vec::with_capacity(WRITE_BUF));
        }
        for (buf, p) in self.bufs.iter_mut().zip(&packets[..n]) {
            buf.clear();
            buf.resize(VIRTIO_NET_HDR_LEN, 0);
            buf.extend_from_slice(p.packet());
        }
        (n, &mut self.gro, &mut self.bufs[..n])
    }
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
            writes: Mutex::new(WriteBatch::default()),
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
        let mut refused = 0;
        let mut rest: &[PacketBuf] = packets;
        while !rest.is_empty() {
            let (n, gro, bufs) = writes.stage(rest);
            // It tells only that a write failed, not which.
            if (*self.dev)
                .send_multiple(gro, bufs, VIRTIO_NET_HDR_LEN)
                .is_err()
            {
                refused += n;
            }
            rest = &rest[n..];
        }
        refused
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Segment `n` of one TCP flow, `len` bytes of payload each, with valid
    /// IPv4 and TCP checksums.
    fn segment(n: u32, len: usize) -> PacketBuf {
        let mut ip = vec![0u8; 40 + len];
        let total = ip.len() as u16;
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[6] = 0x40;
        ip[8] = 64;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&[10, 77, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 77, 0, 2]);
        let check = checksum(&ip[..20], 0);
        ip[10..12].copy_from_slice(&check.to_be_bytes());
        ip[20..22].copy_from_slice(&40000u16.to_be_bytes());
        ip[22..24].copy_from_slice(&5201u16.to_be_bytes());
        ip[24..28].copy_from_slice(&(n * len as u32).to_be_bytes());
        ip[32] = 5 << 4;
        ip[33] = 0x10;
        for (i, b) in ip[40..].iter_mut().enumerate() {
            *b = (n as usize + i) as u8;
        }
        let pseudo = sum(&ip[12..20]) + 6 + u32::from(total - 20);
        let check = checksum(&ip[20..], pseudo);
        ip[36..38].copy_from_slice(&check.to_be_bytes());
        PacketBuf::copy_of(&ip)
    }

    fn sum(bytes: &[u8]) -> u32 {
        bytes
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
            .sum()
    }

    fn checksum(bytes: &[u8], start: u32) -> u16 {
        let mut s = start + sum(bytes);
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    #[test]
    fn consecutive_segments_of_a_flow_are_coalesced_into_one_write() {
        let packets: Vec<PacketBuf> = (0..10).map(|n| segment(n, 1000)).collect();
        let mut batch = WriteBatch::default();
        let (n, gro, bufs) = batch.stage(&packets);
        assert_eq!(n, 10);
        gro.apply_gro(bufs, VIRTIO_NET_HDR_LEN, false).unwrap();
        // The first buffer carries the headers once and all ten payloads.
        let first = &bufs[0][VIRTIO_NET_HDR_LEN..];
        assert_eq!(first.len(), 40 + 10 * 1000);
        for (k, p) in packets.iter().enumerate() {
            let at = 40 + k * 1000;
            assert_eq!(first[at..at + 1000], p.packet()[40..], "segment {k}");
        }
    }

    #[test]
    fn a_large_delivery_is_staged_a_batch_at_a_time() {
        let packets: Vec<PacketBuf> = (0..300).map(|n| segment(n, 100)).collect();
        let mut batch = WriteBatch::default();
        let (n, _, bufs) = batch.stage(&packets);
        assert_eq!(n, WRITE_BATCH);
        assert_eq!(bufs[5][VIRTIO_NET_HDR_LEN..], *packets[5].packet());
    }
}
