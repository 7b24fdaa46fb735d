//! Packet buffers, and a pool to reuse them.
//!
//! Packets move through mptun by value: read from the TUN device into a
//! buffer, the buffer goes through the [`Endpoint`](crate::Endpoint) to a
//! path's worker, which seals it; a datagram is opened into a buffer, which
//! goes through the reorder buffer to the TUN device. Buffers come back to a
//! [`BufPool`] instead of being freed, so nothing is allocated per packet
//! once the pool is warm.

use std::time::Instant;

/// An owned packet in a buffer that keeps room in front of it.
///
/// The packet is `bytes[head..]`. The room before it lets the I/O edge put
/// a header there (a virtio-net header before a TUN write with offloads)
/// without moving the packet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PacketBuf {
    bytes: Vec<u8>,
    head: usize,
    /// When the datagram the packet came in reached the receiving socket,
    /// if the socket said.
    received: Option<Instant>,
}

impl PacketBuf {
    /// An empty packet with `head` bytes of room in front, in a buffer of
    /// `capacity` bytes in all.
    pub fn new(capacity: usize, head: usize) -> Self {
        let mut bytes = Vec::with_capacity(capacity.max(head));
        bytes.resize(head, 0);
        PacketBuf {
            bytes,
            head,
            received: None,
        }
    }

    /// A packet copied from `packet`, with no room in front.
    pub fn copy_of(packet: &[u8]) -> Self {
        PacketBuf {
            bytes: packet.to_vec(),
            head: 0,
            received: None,
        }
    }

    /// Take `bytes` as a buffer whose packet starts at `head` (clamped to
    /// its length).
    pub fn from_vec(bytes: Vec<u8>, head: usize) -> Self {
        let head = head.min(bytes.len());
        PacketBuf {
            bytes,
            head,
            received: None,
        }
    }

    /// Return the whole buffer, room in front included, and where the
    /// packet starts.
    pub fn into_vec(self) -> (Vec<u8>, usize) {
        (self.bytes, self.head)
    }

    /// Return the packet.
    pub fn packet(&self) -> &[u8] {
        &self.bytes[self.head..]
    }

    /// Return the packet, to change it in place.
    pub fn packet_mut(&mut self) -> &mut [u8] {
        &mut self.bytes[self.head..]
    }

    /// Return the packet's length.
    pub fn len(&self) -> usize {
        self.bytes.len() - self.head
    }

    /// Return whether the packet is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Return how much room is in front of the packet.
    pub fn head(&self) -> usize {
        self.head
    }

    /// Empty the packet, keeping `head` bytes of room in front.
    pub fn reset(&mut self, head: usize) {
        self.bytes.clear();
        self.bytes.resize(head, 0);
        self.head = head;
        self.received = None;
    }

    /// Return when the datagram the packet came in reached the receiving
    /// socket, if the socket said: earlier than the endpoint is handed it
    /// by however long it waited in the socket's buffer and for the
    /// process to be scheduled.
    pub fn received(&self) -> Option<Instant> {
        self.received
    }

    /// Say when the datagram the packet came in reached the socket.
    pub fn set_received(&mut self, at: Option<Instant>) {
        self.received = at;
    }

    /// Append `bytes` to the packet.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.bytes.extend_from_slice(bytes);
    }

    /// Cut the packet to `len` bytes (no-op if it is shorter).
    pub fn truncate(&mut self, len: usize) {
        self.bytes.truncate(self.head + len);
    }

    /// Make room for a packet of up to `max` bytes after `head` bytes in
    /// front, and return it to be written into; then say how much was
    /// written with [`set_len`](Self::set_len).
    pub fn room(&mut self, head: usize, max: usize) -> &mut [u8] {
        self.bytes.clear();
        self.bytes.resize(head + max, 0);
        self.head = head;
        &mut self.bytes[head..]
    }

    /// Set the packet's length, within the room made.
    pub fn set_len(&mut self, len: usize) {
        self.bytes.truncate(self.head + len);
    }

    /// Let `fill` write a packet of up to `max` bytes after `head` bytes of
    /// room, and return how many it wrote; the packet is those bytes.
    pub fn fill(
        &mut self,
        head: usize,
        max: usize,
        fill: impl FnOnce(&mut [u8]) -> usize,
    ) -> usize {
        self.bytes.clear();
        self.bytes.resize(head + max, 0);
        let n = fill(&mut self.bytes[head..]).min(max);
        self.bytes.truncate(head + n);
        self.head = head;
        n
    }
}

/// Buffers given back for reuse, of one capacity. Not shared between
/// threads: each owner keeps its own, and buffers travel between owners with
/// the packets in them.
#[derive(Debug)]
pub struct BufPool {
    free: Vec<PacketBuf>,
    capacity: usize,
    /// Most buffers kept; more given back are freed.
    keep: usize,
}

impl BufPool {
    /// A pool of buffers of `capacity` bytes, keeping at most `keep`.
    pub fn new(capacity: usize, keep: usize) -> Self {
        BufPool {
            free: Vec::new(),
            capacity,
            keep,
        }
    }

    /// Return the capacity of the buffers it hands out.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Return how many buffers it holds.
    pub fn len(&self) -> usize {
        self.free.len()
    }

    /// Return whether it holds no buffer.
    pub fn is_empty(&self) -> bool {
        self.free.is_empty()
    }

    /// Take an empty buffer with `head` bytes of room in front, reused if
    /// one was given back.
    pub fn take(&mut self, head: usize) -> PacketBuf {
        match self.free.pop() {
            Some(mut buf) => {
                buf.reset(head);
                buf
            }
            None => PacketBuf::new(self.capacity, head),
        }
    }

    /// Give a buffer back.
    pub fn put(&mut self, buf: PacketBuf) {
        if self.free.len() < self.keep {
            self.free.push(buf);
        }
    }

    /// Give back every buffer in `bufs`, leaving it empty.
    pub fn put_all(&mut self, bufs: &mut Vec<PacketBuf>) {
        let room = self.keep.saturating_sub(self.free.len());
        let n = bufs.len().min(room);
        self.free.extend(bufs.drain(..n));
        bufs.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_keeps_its_room_in_front_through_changes() {
        let mut buf = PacketBuf::new(64, 10);
        assert!(buf.is_empty());
        buf.extend_from_slice(b"hello");
        assert_eq!((buf.packet(), buf.head()), (&b"hello"[..], 10));
        buf.truncate(4);
        assert_eq!(buf.packet(), b"hell");
        let n = buf.fill(12, 8, |b| {
            b[..3].copy_from_slice(b"abc");
            3
        });
        assert_eq!((n, buf.packet(), buf.head()), (3, &b"abc"[..], 12));
        let (bytes, head) = buf.into_vec();
        assert_eq!((bytes.len(), head), (15, 12));
    }

    #[test]
    fn the_pool_reuses_buffers_up_to_what_it_keeps() {
        let mut pool = BufPool::new(2048, 2);
        let mut bufs: Vec<PacketBuf> = (0..3).map(|_| pool.take(0)).collect();
        bufs[0].extend_from_slice(&[1; 100]);
        pool.put_all(&mut bufs);
        assert_eq!((pool.len(), bufs.len()), (2, 0));
        let reused = pool.take(4);
        assert_eq!((reused.len(), reused.head()), (0, 4));
        assert!(reused.bytes.capacity() >= 2048);
    }
}
