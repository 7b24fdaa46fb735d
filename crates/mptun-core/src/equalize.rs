//! One round trip for a TCP flow, whichever paths carry it.
//!
//! A TCP sender sizes its window by the round trips it measures. Striped
//! over paths whose delays differ, a flow's round trip is the nearest
//! path's while the flow is small and the farthest path's once it needs
//! them all, and both congestion controls in use read that rise as a full
//! pipe: CUBIC's HyStart leaves slow start when the round trip grows by an
//! eighth, and BBR keeps no more in flight than twice its rate times the
//! least round trip it saw. Either stops at a fraction of the sum.
//!
//! So the receiver holds each TCP segment that carries data or a SYN, once
//! it is in order, until it has been under way as long as a packet on the
//! farthest path the peer sends TCP on (see
//! [`crate::paths::PathTable::equalized_due`]): the flow sees that one
//! round trip from its handshake on (BBR starts from the handshake's). The
//! peer's newest probe says which paths those are; a path too small for TCP
//! leaves them only once TCP kept off it a while (see
//! [`crate::paths::PathTable::tcp_and_spread_paths`]).
//! Bare ACKs and other protocols are not held: no round trip is timed from
//! them, and they keep the nearest path's delay.
//!
//! Nor are segments marked with a low-latency DSCP ([`DscpSet`]): an
//! interactive flow (ssh marks its sessions AF21, or EF since OpenSSH
//! 10.1) wants the nearest path's round trip, not the farthest's, and
//! needs no more than one path carries. The sender decides and says so in
//! the trailer (flag H), so the receiver holds exactly what was spread to
//! be held.

use std::collections::VecDeque;
use std::time::Instant;

use crate::buf::PacketBuf;
use crate::wire::ip;

/// A set of DSCP values (0 to 63).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DscpSet(pub u64);

impl DscpSet {
    /// RFC 4594's classes that want low delay rather than throughput:
    /// network control (CS6), telephony (EF), voice admit (VA), signaling
    /// (CS5), multimedia conferencing (AF41-43), real-time interactive (CS4),
    /// low-latency data (AF21-23) and OAM (CS2).
    pub const LOW_LATENCY: DscpSet = DscpSet::of(&[48, 46, 44, 40, 34, 36, 38, 32, 18, 20, 22, 16]);

    /// The set of `codes`; values over 63 are ignored.
    pub const fn of(codes: &[u8]) -> DscpSet {
        let mut bits = 0u64;
        let mut i = 0;
        while i < codes.len() {
            if codes[i] < 64 {
                bits |= 1 << codes[i];
            }
            i += 1;
        }
        DscpSet(bits)
    }

    /// Add `dscp`; a value over 63 is ignored.
    pub fn insert(&mut self, dscp: u8) {
        *self = DscpSet(self.0 | DscpSet::of(&[dscp]).0);
    }

    /// Return whether `dscp` is in the set.
    pub fn contains(self, dscp: u8) -> bool {
        dscp < 64 && self.0 & (1 << dscp) != 0
    }
}

/// What the receiver does with a packet once it is in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Release {
    /// A TCP segment its sender times: held until due.
    Held,
    /// The same in a low-latency class: released at once.
    LowLatency,
    /// Anything else: released at once.
    AtOnce,
}

impl Release {
    /// How `packet` is released, given the DSCP values of the low-latency
    /// classes.
    pub fn of(packet: &[u8], low_latency: DscpSet) -> Release {
        if !ip::is_timed_tcp_segment(packet) {
            Release::AtOnce
        } else if ip::dscp(packet).is_some_and(|d| low_latency.contains(d)) {
            Release::LowLatency
        } else {
            Release::Held
        }
    }

    /// Return whether `packet`, released so, keeps to the paths worth a
    /// TCP flow (see [`crate::paths::PathTable::tcp_paths`]): any TCP
    /// segment but one in a low-latency class, which wants the nearest
    /// path whatever its size, and a bare ACK, which passes the gaps before
    /// it (a lost one costs its flow nothing) and whose delay is half the
    /// round trip the flow times.
    pub fn takes_tcp_paths(self, packet: &[u8]) -> bool {
        self != Release::LowLatency && ip::is_tcp(packet) && !ip::is_bare_tcp_ack(packet)
    }
}

/// Packets released in order, held until they are due.
#[derive(Debug)]
pub(crate) struct DelayLine {
    /// Due times never decrease from front to back: a segment never passes
    /// one released before it.
    held: VecDeque<(Instant, PacketBuf)>,
    /// Most packets held; past it the oldest goes early.
    capacity: usize,
}

impl DelayLine {
    /// A line holding at most `capacity` packets.
    pub fn new(capacity: usize) -> Self {
        DelayLine {
            held: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Take the next packet in order: into `out` at once if it is not to
    /// be held (`due` is `None`), else behind those held already.
    pub fn push(&mut self, due: Option<Instant>, buf: PacketBuf, out: &mut Vec<PacketBuf>) {
        let Some(due) = due else {
            out.push(buf);
            return;
        };
        let due = self.held.back().map_or(due, |&(last, _)| due.max(last));
        self.held.push_back((due, buf));
        if self.held.len() > self.capacity {
            if let Some((_, early)) = self.held.pop_front() {
                out.push(early);
            }
        }
    }

    /// Move the packets due by `now` into `out`.
    pub fn release(&mut self, now: Instant, out: &mut Vec<PacketBuf>) {
        while self.held.front().is_some_and(|&(due, _)| due <= now) {
            if let Some((_, buf)) = self.held.pop_front() {
                out.push(buf);
            }
        }
    }

    /// Return when the next packet is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.held.front().map(|&(due, _)| due)
    }

    /// Return how many packets are held.
    pub fn len(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn numbered(n: u8) -> PacketBuf {
        PacketBuf::copy_of(&[n])
    }

    fn numbers(out: &[PacketBuf]) -> Vec<u8> {
        out.iter().map(|b| b.packet()[0]).collect()
    }

    #[test]
    fn timed_tcp_segments_are_held_unless_their_class_wants_low_latency() {
        let mut segment = [0u8; 60];
        segment[0] = 0x45;
        segment[2..4].copy_from_slice(&60u16.to_be_bytes());
        segment[9] = 6;
        segment[32] = 0x50;
        let low = DscpSet::LOW_LATENCY;
        assert_eq!(Release::of(&segment, low), Release::Held);
        // EF, AF21: not held; CS1 (scp's bulk class), AF11: held.
        for (tos, release) in [
            (0xb8, Release::LowLatency),
            (0x48, Release::LowLatency),
            (0x20, Release::Held),
            (0x28, Release::Held),
        ] {
            segment[1] = tos;
            assert_eq!(Release::of(&segment, low), release, "tos {tos:#x}");
        }
        assert_eq!(Release::of(&segment, DscpSet::default()), Release::Held);
        segment[9] = 17; // UDP
        segment[1] = 0;
        assert_eq!(Release::of(&segment, low), Release::AtOnce);
        assert!(DscpSet::of(&[63, 64]).contains(63));
        assert!(!DscpSet::of(&[64]).contains(0));
        assert!(!low.contains(200));
    }

    #[test]
    fn held_packets_leave_when_due_in_the_order_they_came() {
        let t0 = crate::tests::t0();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut line = DelayLine::new(16);
        let mut out = Vec::new();
        line.push(Some(ms(30)), numbered(1), &mut out);
        // Due sooner, but behind 1: it waits for it.
        line.push(Some(ms(20)), numbered(2), &mut out);
        // Not held: passes at once.
        line.push(None, numbered(3), &mut out);
        line.push(Some(ms(40)), numbered(4), &mut out);
        assert_eq!(numbers(&out), [3]);
        assert_eq!(line.next_due(), Some(ms(30)));
        out.clear();
        line.release(ms(29), &mut out);
        assert!(out.is_empty());
        line.release(ms(30), &mut out);
        assert_eq!(numbers(&out), [1, 2]);
        line.release(ms(50), &mut out);
        assert_eq!(numbers(&out), [1, 2, 4]);
        assert_eq!(line.next_due(), None);
    }

    #[test]
    fn a_full_line_lets_its_oldest_go_early() {
        let t0 = crate::tests::t0();
        let mut line = DelayLine::new(2);
        let mut out = Vec::new();
        for n in 1..=3 {
            line.push(Some(t0 + Duration::from_secs(1)), numbered(n), &mut out);
        }
        assert_eq!(numbers(&out), [1]);
        assert_eq!(line.len(), 2);
    }
}
