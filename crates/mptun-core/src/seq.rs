//! Sequence numbers that wrap around.

use std::cmp::Ordering;
use std::fmt;

/// A 32-bit sequence number compared with serial-number arithmetic (RFC 1982).
///
/// At a million packets per second a `u32` wraps in about 71 minutes, so every
/// comparison must survive the wrap: `a < b` means `b` is less than 2^31 steps
/// ahead of `a`. That is why `Seq` does not derive `Ord`: the relation is not
/// transitive over the whole space, only over windows smaller than 2^31.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Seq(pub u32);

impl Seq {
    /// Return the sequence number `n` steps after this one.
    pub fn plus(self, n: u32) -> Seq {
        Seq(self.0.wrapping_add(n))
    }

    /// Return the next sequence number.
    pub fn next(self) -> Seq {
        self.plus(1)
    }

    /// Return how many steps `self` is ahead of `base` (negative if behind).
    pub fn distance_from(self, base: Seq) -> i64 {
        i64::from(self.0.wrapping_sub(base.0) as i32)
    }

    /// Compare two sequence numbers in serial-number order.
    pub fn serial_cmp(self, other: Seq) -> Ordering {
        self.distance_from(other).cmp(&0)
    }

    /// Return whether `self` comes before `other`.
    pub fn is_before(self, other: Seq) -> bool {
        self.serial_cmp(other) == Ordering::Less
    }
}

impl fmt::Debug for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Seq({})", self.0)
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordering_survives_wrap_around() {
        let before_wrap = Seq(u32::MAX - 2);
        let after_wrap = before_wrap.plus(5);
        assert_eq!(after_wrap, Seq(2));
        assert!(before_wrap.is_before(after_wrap));
        assert!(!after_wrap.is_before(before_wrap));
        assert_eq!(after_wrap.distance_from(before_wrap), 5);
        assert_eq!(before_wrap.distance_from(after_wrap), -5);
        assert_eq!(Seq(u32::MAX).next(), Seq(0));
    }

    #[test]
    fn half_the_space_ahead_counts_as_behind() {
        let a = Seq(10);
        assert!(a.is_before(a.plus((1 << 31) - 1)));
        // Exactly 2^31 apart is ambiguous; it resolves to "behind", never to
        // "far ahead", so a wildly wrong number is treated as stale.
        assert!(a.plus(1 << 31).is_before(a));
        assert_eq!(a.serial_cmp(a), Ordering::Equal);
    }
}
