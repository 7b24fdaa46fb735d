//! Forward error correction on a path that loses at random: after every
//! run of data packets on it, the sender sends the run's XOR (in two
//! halves, see [`crate::wire::parity`]) on the same path, and the receiver
//! rebuilds one packet of the run lost on the way as soon as the rest and
//! the parity are in.
//!
//! A repair costs the receiver a round trip of the nearest path at least,
//! and everything behind the gap waits for it; on a far path it comes after
//! its packet was due, and a loss-based inner flow backs off. The parity
//! comes right behind its run, a packet's time or two, for a share of the
//! path of one packet in the run's length. Two losses in one run are left
//! to the repairs, as are losses at a full queue, which come in bursts.
//! While the path's queue is full, runs grow to the longest: there a
//! parity takes a data packet's place.

use std::time::{Duration, Instant};

use crate::seq::Seq;
use crate::wire::{Parity, PARITY_HEADER_LEN, PARITY_MAX_COUNT};

/// Shortest run: below it the parity costs more than a fifth of the path.
pub const PARITY_MIN_RUN: u16 = 4;
/// Run on a path whose loss is not known yet: a sixteenth of its first
/// packets, for a loss of a few percent mostly rebuilt.
pub const UNKNOWN_LOSS_RUN: u16 = 16;
/// Longest run.
pub const PARITY_MAX_RUN: u16 = 32;
/// Expected losses per run the run's length is chosen for: about as large
/// a share of the losses falls beside another of its run and is left to a
/// repair, which holds everything behind it, on every path, for a round
/// trip. A tenth costs the path a parity per tenth of a loss, about ten
/// times its loss, and loses less to those waits than a fifth, at half
/// the parity.
const LOSSES_PER_RUN: f64 = 0.1;
/// How long after its first packet a run is closed with what it has: a
/// loss in it is rebuilt that much later at most, rather than repaired.
pub const PARITY_FLUSH: Duration = Duration::from_millis(10);
/// How long a receiver keeps copies of a path's packets after the last
/// parity it got there.
const KEEP_AFTER_PARITY: Duration = Duration::from_secs(2);
/// Packets a receiver keeps copies of, per path: the runs in flight.
const KEPT: usize = 2 * PARITY_MAX_COUNT as usize;

/// Return the run length for a path losing `loss` of its packets at random,
/// or `None` if it loses too little to be worth a parity.
pub fn run_for_loss(loss: f64, clean: f64) -> Option<u16> {
    if loss.is_nan() || loss <= clean {
        return None;
    }
    let run = (LOSSES_PER_RUN / loss).floor() - 1.0;
    Some(run.clamp(f64::from(PARITY_MIN_RUN), f64::from(PARITY_MAX_RUN)) as u16)
}

/// Return the share of a path's packets still lost with a parity after
/// every `run`: those lost beside another of their run (the run and its
/// parity).
pub fn residual_loss(loss: f64, run: u16) -> f64 {
    loss * (1.0 - (1.0 - loss).powi(i32::from(run)))
}

/// The sender's side, for one path.
#[derive(Debug, Default)]
pub struct ParityEncoder {
    /// Packets per run; 0 while off.
    run: u16,
    first: Seq,
    /// When the run's first packet was added.
    started: Option<Instant>,
    count: u16,
    len_xor: u16,
    xor: Vec<u8>,
}

impl ParityEncoder {
    /// Send a parity after every `run` packets from the next run on; `None`
    /// stops (the run under way is dropped).
    pub fn set_run(&mut self, run: Option<u16>) {
        let run = run.map_or(0, |r| r.clamp(1, PARITY_MAX_COUNT));
        if run == 0 {
            self.count = 0;
        }
        self.run = run;
    }

    /// Add the `plaintext` (trailer included) of the packet sent as
    /// `path_seq` on the path at `now`; return whether its run is complete,
    /// and its parity to be taken with [`write_half`](Self::write_half)
    /// (both halves) before the next packet is added. While the path is
    /// `full`, a run goes on to [`PARITY_MAX_RUN`] packets: a parity there
    /// takes the place of a data packet. A flow keeps a lossy path that
    /// full only where it does not back off at the path's losses (BBR) or
    /// at the top of its cycle, about to overflow the queue (CUBIC): a loss
    /// left to a repair costs it less than the parity.
    pub fn add(&mut self, now: Instant, path_seq: Seq, plaintext: &[u8], full: bool) -> bool {
        if self.run == 0 {
            return false;
        }
        // Path sequence numbers follow one another; should one not, the
        // run under way is not what the receiver will take it for.
        if self.count > 0 && self.first.0.wrapping_add(u32::from(self.count)) != path_seq.0 {
            self.count = 0;
        }
        if self.count == 0 {
            self.first = path_seq;
            self.started = Some(now);
            self.len_xor = 0;
            self.xor.clear();
        }
        if self.xor.len() < plaintext.len() {
            self.xor.resize(plaintext.len(), 0);
        }
        for (x, b) in self.xor.iter_mut().zip(plaintext) {
            *x ^= b;
        }
        self.len_xor ^= plaintext.len() as u16;
        self.count += 1;
        self.count >= self.run && !(full && self.count < PARITY_MAX_RUN)
    }

    /// Write half `half` (0 or 1) of the completed run's parity into `buf`
    /// (at least [`PARITY_HEADER_LEN`] and half the longest packet long);
    /// return the length written. Writing half 1 starts the next run.
    pub fn write_half(&mut self, half: u8, buf: &mut [u8]) -> usize {
        let split = self.xor.len().div_ceil(2);
        let bytes = if half == 0 {
            &self.xor[..split]
        } else {
            &self.xor[split..]
        };
        let len = Parity {
            first: self.first,
            count: self.count,
            len_xor: self.len_xor,
            half,
            bytes,
        }
        .encode(buf);
        if half == 1 {
            self.count = 0;
        }
        len
    }

    /// When the run under way is to be closed as it is (see
    /// [`PARITY_FLUSH`]), if one is.
    pub fn flush_at(&self) -> Option<Instant> {
        self.started
            .filter(|_| self.count > 0 && self.run > 0)
            .map(|t| t + PARITY_FLUSH)
    }

    /// Longest half of the run under way, header included.
    pub fn half_len(&self) -> usize {
        PARITY_HEADER_LEN + self.xor.len().div_ceil(2)
    }
}

/// A half of a parity waiting for the other.
#[derive(Debug)]
struct Pending {
    first: Seq,
    count: u16,
    len_xor: u16,
    half: u8,
    bytes: Vec<u8>,
}

/// The receiver's side, for one path: copies of the packets lately
/// received, and the halves of a parity waiting for their other half.
#[derive(Debug)]
pub struct ParityDecoder {
    /// Slot `path_seq % KEPT`: the packet numbered so there, if kept.
    kept: Vec<Option<(Seq, Vec<u8>)>>,
    pending: Option<Pending>,
    /// Copies are kept until then: the peer sent parities lately.
    keep_until: Option<Instant>,
}

impl Default for ParityDecoder {
    fn default() -> Self {
        ParityDecoder {
            kept: (0..KEPT).map(|_| None).collect(),
            pending: None,
            keep_until: None,
        }
    }
}

impl ParityDecoder {
    /// Whether copies of what arrives at `now` are kept: the peer sent
    /// parities on the path lately.
    pub fn keeping(&self, now: Instant) -> bool {
        self.keep_until.is_some_and(|until| now <= until)
    }

    /// Keep a copy of the packet received at `now` as `path_seq`: its
    /// `body` and then its `trailer`, as the sender XORed them. Only while
    /// the peer sends parities on the path.
    pub fn keep(&mut self, now: Instant, path_seq: Seq, body: &[u8], trailer: &[u8]) {
        if !self.keeping(now) {
            return;
        }
        let slot = &mut self.kept[path_seq.0 as usize % KEPT];
        let mut bytes = match slot.take() {
            Some((_, mut bytes)) => {
                bytes.clear();
                bytes
            }
            None => Vec::new(),
        };
        bytes.extend_from_slice(body);
        bytes.extend_from_slice(trailer);
        *slot = Some((path_seq, bytes));
    }

    /// Take a parity half received at `now`; return the plaintext of the
    /// one packet of its run that is missing, rebuilt, once both halves are
    /// in and every other packet of the run is.
    pub fn handle(&mut self, now: Instant, half: &Parity) -> Option<Vec<u8>> {
        self.keep_until = Some(now + KEEP_AFTER_PARITY);
        let other = match self.pending.take() {
            Some(p) if p.first == half.first && p.count == half.count && p.half != half.half => p,
            _ => {
                self.pending = Some(Pending {
                    first: half.first,
                    count: half.count,
                    len_xor: half.len_xor,
                    half: half.half,
                    bytes: half.bytes.to_vec(),
                });
                return None;
            }
        };
        if other.len_xor != half.len_xor {
            return None;
        }
        let (front, back) = if half.half == 0 {
            (half.bytes, &other.bytes[..])
        } else {
            (&other.bytes[..], half.bytes)
        };
        // The first half is the longer one, by a byte at most.
        if front.len() < back.len() || front.len() > back.len() + 1 {
            return None;
        }
        let mut missing = None;
        for i in 0..u32::from(half.count) {
            let seq = Seq(half.first.0.wrapping_add(i));
            let kept = &self.kept[seq.0 as usize % KEPT];
            if kept.as_ref().is_none_or(|(s, _)| *s != seq) {
                if missing.is_some() {
                    return None; // two lost: the repairs' to bring
                }
                missing = Some(seq);
            }
        }
        missing?;
        let mut rebuilt = Vec::with_capacity(front.len() + back.len());
        rebuilt.extend_from_slice(front);
        rebuilt.extend_from_slice(back);
        let mut len = half.len_xor;
        for i in 0..u32::from(half.count) {
            let seq = Seq(half.first.0.wrapping_add(i));
            if let Some((s, bytes)) = &self.kept[seq.0 as usize % KEPT] {
                if *s == seq {
                    if bytes.len() > rebuilt.len() {
                        return None; // not the run the parity covers
                    }
                    for (r, b) in rebuilt.iter_mut().zip(bytes) {
                        *r ^= b;
                    }
                    len ^= bytes.len() as u16;
                }
            }
        }
        let len = usize::from(len);
        if len == 0 || len > rebuilt.len() || rebuilt[len..].iter().any(|&b| b != 0) {
            return None;
        }
        rebuilt.truncate(len);
        Some(rebuilt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t0() -> Instant {
        crate::tests::t0()
    }

    fn packet(n: u8, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| n.wrapping_mul(31).wrapping_add(i as u8))
            .collect()
    }

    /// Run `packets` through an encoder of run `run`; return the parity
    /// halves, as sent.
    fn encode(run: u16, first: u32, packets: &[Vec<u8>]) -> Vec<Vec<u8>> {
        encode_on(run, first, packets, |_| false)
    }

    /// The same, on a path that is full as `full` says at each packet.
    fn encode_on(
        run: u16,
        first: u32,
        packets: &[Vec<u8>],
        full: impl Fn(usize) -> bool,
    ) -> Vec<Vec<u8>> {
        let mut enc = ParityEncoder::default();
        enc.set_run(Some(run));
        let mut halves = Vec::new();
        for (i, p) in packets.iter().enumerate() {
            if enc.add(t0(), Seq(first.wrapping_add(i as u32)), p, full(i)) {
                for half in 0..2 {
                    let mut buf = vec![0; enc.half_len()];
                    let len = enc.write_half(half, &mut buf);
                    buf.truncate(len);
                    halves.push(buf);
                }
            }
        }
        halves
    }

    /// Receive `packets` but `lost`, then the `halves`; return what was
    /// rebuilt.
    fn decode(first: u32, packets: &[Vec<u8>], lost: &[usize], halves: &[Vec<u8>]) -> Vec<Vec<u8>> {
        // Copies are kept once the peer is known to send parities.
        let mut dec = ParityDecoder {
            keep_until: Some(t0() + Duration::from_secs(1)),
            ..Default::default()
        };
        for (i, p) in packets.iter().enumerate() {
            if !lost.contains(&i) {
                let (body, trailer) = p.split_at(p.len() / 2);
                dec.keep(t0(), Seq(first.wrapping_add(i as u32)), body, trailer);
            }
        }
        halves
            .iter()
            .filter_map(|h| dec.handle(t0(), &Parity::decode(h).unwrap()))
            .collect()
    }

    #[test]
    fn one_packet_lost_in_a_run_is_rebuilt_whatever_its_length() {
        let packets: Vec<Vec<u8>> = [60, 1440, 52, 700, 1439]
            .iter()
            .enumerate()
            .map(|(i, &len)| packet(i as u8, len))
            .collect();
        // The run crosses the wrap of the path's numbers.
        let first = u32::MAX - 1;
        let halves = encode(5, first, &packets);
        assert_eq!(halves.len(), 2);
        // Each half is within the longest packet.
        assert!(halves.iter().all(|h| h.len() <= 1440));
        for lost in 0..packets.len() {
            assert_eq!(
                decode(first, &packets, &[lost], &halves),
                vec![packets[lost].clone()]
            );
        }
    }

    #[test]
    fn a_full_path_s_run_goes_on_to_the_longest_and_ends_once_it_has_room() {
        let packets: Vec<Vec<u8>> = (0..80).map(|i| packet(i, 200)).collect();
        let counts = |halves: Vec<Vec<u8>>| -> Vec<u16> {
            halves
                .iter()
                .step_by(2)
                .map(|h| Parity::decode(h).unwrap().count)
                .collect()
        };
        assert_eq!(counts(encode_on(8, 0, &packets, |_| false)), vec![8; 10]);
        assert_eq!(
            counts(encode_on(8, 0, &packets, |_| true)),
            vec![PARITY_MAX_RUN, PARITY_MAX_RUN]
        );
        // Full for its first 40 packets: the second run ends at the first
        // packet past its length with room.
        assert_eq!(
            counts(encode_on(8, 0, &packets, |i| i < 40)),
            vec![PARITY_MAX_RUN, 9, 8, 8, 8, 8]
        );
        // Every packet of a stretched run is rebuilt from its parity.
        let halves = encode_on(8, 0, &packets[..32], |_| true);
        for lost in [0, 17, 31] {
            assert_eq!(
                decode(0, &packets[..32], &[lost], &halves),
                vec![packets[lost].clone()]
            );
        }
    }

    #[test]
    fn nothing_is_rebuilt_from_two_losses_one_half_or_none_missing() {
        let packets: Vec<Vec<u8>> = (0..4).map(|i| packet(i, 100 + usize::from(i))).collect();
        let halves = encode(4, 10, &packets);
        assert!(decode(10, &packets, &[0, 2], &halves).is_empty());
        assert!(decode(10, &packets, &[1], &halves[..1]).is_empty());
        assert!(decode(10, &packets, &[1], &halves[1..]).is_empty());
        assert!(decode(10, &packets, &[], &halves).is_empty());
    }

    #[test]
    fn a_parity_that_does_not_add_up_rebuilds_nothing() {
        let packets: Vec<Vec<u8>> = (0..4).map(|i| packet(i, 200)).collect();
        let mut halves = encode(4, 0, &packets);
        // A run the receiver kept other packets for: the length left over
        // is not the zero padding's.
        let other: Vec<Vec<u8>> = (0..4).map(|i| packet(i + 9, 300)).collect();
        assert!(decode(0, &other, &[3], &halves).is_empty());
        // Halves of different runs.
        let later = encode(4, 4, &packets);
        halves[1] = later[1].clone();
        assert!(decode(0, &packets, &[3], &halves).is_empty());
    }

    #[test]
    fn copies_are_kept_only_while_the_peer_sends_parities() {
        let packets: Vec<Vec<u8>> = (0..4).map(|i| packet(i, 100)).collect();
        let halves = encode(4, 0, &packets);
        let mut dec = ParityDecoder::default();
        for (i, p) in packets.iter().enumerate().skip(1) {
            dec.keep(t0(), Seq(i as u32), p, &[]);
        }
        let got: Vec<_> = halves
            .iter()
            .filter_map(|h| dec.handle(t0(), &Parity::decode(h).unwrap()))
            .collect();
        assert!(got.is_empty(), "kept copies before any parity came");
        // Once one has come, kept until a while after the last.
        dec.keep(t0() + Duration::from_secs(1), Seq(1), &packets[1], &[]);
        assert!(dec.kept[1].as_ref().is_some_and(|(s, _)| *s == Seq(1)));
        let later = t0() + KEEP_AFTER_PARITY + Duration::from_millis(1);
        dec.keep(later, Seq(2), &packets[2], &[]);
        assert!(dec.kept[2].is_none());
    }

    #[test]
    fn the_run_follows_the_loss_and_the_residual_is_what_two_losses_leave() {
        assert_eq!(run_for_loss(0.001, 0.002), None);
        assert_eq!(run_for_loss(f64::NAN, 0.002), None);
        assert_eq!(run_for_loss(0.003, 0.002), Some(PARITY_MAX_RUN));
        assert_eq!(run_for_loss(0.01, 0.002), Some(9));
        assert_eq!(run_for_loss(0.015, 0.002), Some(5));
        assert_eq!(run_for_loss(0.03, 0.002), Some(PARITY_MIN_RUN));
        // 1% in runs of 9: under a tenth of it left.
        let r = residual_loss(0.01, 9);
        assert!((0.0008..0.0009).contains(&r), "{r}");
    }
}
