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
