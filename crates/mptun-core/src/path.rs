//! Path identities.

use std::fmt;

/// Most paths one tunnel may have.
pub const MAX_PATHS: usize = 16;

/// Index of a path in the configuration, from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PathId(pub u8);

impl PathId {
    /// Return the index for slices of per-path state.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

impl fmt::Display for PathId {
    /// Show it as the config file names it: `path[0]` is the first
    /// `[[path]]` table.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "path[{}]", self.0)
    }
}

/// A set of paths, as a bit mask (bit `i` is `PathId(i)`); fits the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PathSet(pub u16);

impl PathSet {
    /// Return whether `path` is in the set.
    pub fn contains(self, path: PathId) -> bool {
        path.index() < MAX_PATHS && self.0 & (1 << path.0) != 0
    }

    /// Add `path` to the set.
    pub fn insert(&mut self, path: PathId) {
        if path.index() < MAX_PATHS {
            self.0 |= 1 << path.0;
        }
    }

    /// Return the paths in the set, in order.
    pub fn iter(self) -> impl Iterator<Item = PathId> {
        (0..MAX_PATHS as u8)
            .map(PathId)
            .filter(move |&p| self.contains(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_set_holds_sixteen_paths() {
        let mut set = PathSet::default();
        set.insert(PathId(0));
        set.insert(PathId(15));
        set.insert(PathId(16)); // out of range: ignored, not a panic
        assert!(set.contains(PathId(0)) && set.contains(PathId(15)));
        assert!(!set.contains(PathId(1)) && !set.contains(PathId(16)));
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![PathId(0), PathId(15)]);
        assert_eq!(set.0, 0x8001);
    }
}
