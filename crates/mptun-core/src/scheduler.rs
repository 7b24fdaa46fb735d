//! Which path the next packet takes.

use crate::path::PathId;

/// Smooth weighted round-robin over the paths that are usable right now.
///
/// Each pick adds every usable path's weight to its credit, takes the path
/// with the most credit and charges it the total. Over any window a path gets
/// its share of the picks within one packet, interleaved rather than in runs
/// (the algorithm nginx uses for upstreams), which keeps the reordering the
/// receiver has to undo small.
#[derive(Clone, Debug)]
pub struct WeightedRoundRobin {
    weights: Vec<u32>,
    credit: Vec<i64>,
}

impl WeightedRoundRobin {
    /// Create a scheduler for paths `0..weights.len()` with these static shares.
    pub fn new(weights: &[u32]) -> Self {
        WeightedRoundRobin {
            weights: weights.to_vec(),
            credit: vec![0; weights.len()],
        }
    }

    /// Return the static weight of `path` (0 for an unknown path).
    pub fn weight(&self, path: PathId) -> u32 {
        self.weights.get(path.index()).copied().unwrap_or(0)
    }

    /// Pick the path for the next packet among those `usable` accepts.
    pub fn pick(&mut self, usable: impl Fn(PathId) -> bool) -> Option<PathId> {
        let mut total: i64 = 0;
        let mut best: Option<usize> = None;
        for i in 0..self.weights.len() {
            let weight = i64::from(self.weights[i]);
            if weight == 0 || !usable(PathId(i as u8)) {
                // A path that comes back must not cash in credit saved while
                // it was away and take a burst.
                self.credit[i] = 0;
                continue;
            }
            self.credit[i] += weight;
            total += weight;
            if best.is_none_or(|b| self.credit[i] > self.credit[b]) {
                best = Some(i);
            }
        }
        let chosen = best?;
        self.credit[chosen] -= total;
        Some(PathId(chosen as u8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shares(weights: &[u32], picks: usize, usable: impl Fn(PathId) -> bool) -> Vec<usize> {
        let mut s = WeightedRoundRobin::new(weights);
        let mut counts = vec![0; weights.len()];
        for _ in 0..picks {
            if let Some(p) = s.pick(&usable) {
                counts[p.index()] += 1;
            }
        }
        counts
    }

    #[test]
    fn equal_weights_alternate_evenly() {
        let mut s = WeightedRoundRobin::new(&[1, 1, 1]);
        let order: Vec<u8> = (0..6).map(|_| s.pick(|_| true).unwrap().0).collect();
        assert_eq!(order, vec![0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn shares_follow_weights() {
        assert_eq!(shares(&[3, 2, 1], 600, |_| true), vec![300, 200, 100]);
        assert_eq!(shares(&[1, 0, 1], 10, |_| true), vec![5, 0, 5]);
    }

    #[test]
    fn picks_are_interleaved_not_bursty() {
        let mut s = WeightedRoundRobin::new(&[5, 1]);
        let order: Vec<u8> = (0..6).map(|_| s.pick(|_| true).unwrap().0).collect();
        // The light path's turn falls in the middle, not after five in a row.
        assert_eq!(order, vec![0, 0, 0, 1, 0, 0]);
    }

    #[test]
    fn unusable_paths_get_nothing_and_return_without_a_burst() {
        assert_eq!(shares(&[1, 1, 1], 300, |p| p.0 != 1), vec![150, 0, 150]);
        assert_eq!(shares(&[1, 1], 10, |_| false), vec![0, 0]);

        let mut s = WeightedRoundRobin::new(&[1, 1]);
        for _ in 0..100 {
            s.pick(|p| p.0 == 0);
        }
        let order: Vec<u8> = (0..4).map(|_| s.pick(|_| true).unwrap().0).collect();
        assert_eq!(order.iter().filter(|&&p| p == 1).count(), 2);
    }
}
