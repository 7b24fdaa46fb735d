//! The send side: numbers each packet and picks its path.

use crate::path::{PathId, PathSet};
use crate::scheduler::WeightedRoundRobin;
use crate::seq::Seq;
use crate::wire::{Kind, Trailer};

/// Assigns the global and per-path sequence numbers and the path of every
/// packet read from the TUN device.
pub struct Sender {
    epoch: u32,
    next_seq: Seq,
    path_seq: Vec<Seq>,
    scheduler: WeightedRoundRobin,
}

impl Sender {
    /// Create a sender for a run identified by `epoch` (random per start, so
    /// the peer can tell a restart from stale packets), with static weights.
    pub fn new(epoch: u32, weights: &[u32]) -> Self {
        Sender {
            epoch,
            next_seq: Seq(0),
            path_seq: vec![Seq(0); weights.len()],
            scheduler: WeightedRoundRobin::new(weights),
        }
    }

    /// Return this run's epoch.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Pick a path among the `usable` ones for the next data packet and
    /// return it with the trailer to append; `None` when no path is usable
    /// (the packet is dropped: there is nowhere to send it).
    pub fn handle_outbound(
        &mut self,
        usable: impl Fn(PathId) -> bool,
    ) -> Option<(PathId, Trailer)> {
        let mut in_use = PathSet::default();
        for i in 0..self.path_seq.len() {
            let p = PathId(i as u8);
            if self.scheduler.weight(p) > 0 && usable(p) {
                in_use.insert(p);
            }
        }
        let path = self.scheduler.pick(|p| in_use.contains(p))?;
        let slot = &mut self.path_seq[path.index()];
        let trailer = Trailer {
            seq: self.next_seq,
            path_seq: *slot,
            epoch: self.epoch,
            paths_in_use: in_use,
            kind: Kind::Data,
        };
        *slot = slot.next();
        self.next_seq = self.next_seq.next();
        Some((path, trailer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_packets_globally_and_per_path() {
        let mut s = Sender::new(42, &[1, 1]);
        let sent: Vec<(u8, u32, u32)> = (0..4)
            .map(|_| {
                let (p, t) = s.handle_outbound(|_| true).unwrap();
                assert_eq!(t.epoch, 42);
                assert_eq!(t.paths_in_use, PathSet(0b11));
                (p.0, t.seq.0, t.path_seq.0)
            })
            .collect();
        assert_eq!(sent, vec![(0, 0, 0), (1, 1, 0), (0, 2, 1), (1, 3, 1)]);
    }

    #[test]
    fn no_usable_path_consumes_no_sequence_number() {
        let mut s = Sender::new(1, &[1]);
        assert!(s.handle_outbound(|_| false).is_none());
        let (_, t) = s.handle_outbound(|_| true).unwrap();
        assert_eq!(t.seq, Seq(0));
    }
}
