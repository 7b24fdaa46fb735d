//! Whether a path can carry data: its state, and the times that move it.

use std::time::{Duration, Instant};

/// First time a lossy path is set aside; doubles each time, up to the max.
const ASIDE_FIRST: Duration = Duration::from_secs(10);
const ASIDE_MAX: Duration = Duration::from_secs(300);

/// Whether a path can carry data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathState {
    /// No WireGuard session.
    NoSession,
    /// Session up, no probe echoed yet: usable, on trust.
    Unconfirmed,
    /// Echoes arriving.
    Up,
    /// No echo for too long.
    Down,
    /// Up, but losing packets while another path is clean; retried later.
    SetAside,
}

impl PathState {
    /// Whether the path is watched for silence: it has a session and was
    /// not found dead yet.
    pub fn is_alive(self) -> bool {
        matches!(
            self,
            PathState::Up | PathState::Unconfirmed | PathState::SetAside
        )
    }
}

/// A path's state and the moments that decide it.
#[derive(Clone, Debug)]
pub(crate) struct Liveness {
    state: PathState,
    /// Up, but the echo of a probe is overdue: carries nothing new until an
    /// echo comes, well before it would be marked down. Not a state change
    /// (not logged): a path that only hiccupped is back at once.
    echo_late: bool,
    /// Times the echo was late.
    late_echoes: u64,
    /// When the WireGuard session came up, while it is.
    session_since: Option<Instant>,
    /// When the last fresh echo came.
    last_echo: Option<Instant>,
    /// When the path was marked down, while it is.
    down_since: Option<Instant>,
    /// Until when a lossy path is set aside.
    aside_until: Option<Instant>,
    /// How long it is set aside next time.
    aside_for: Duration,
}

impl Default for Liveness {
    fn default() -> Self {
        Liveness {
            state: PathState::NoSession,
            echo_late: false,
            late_echoes: 0,
            session_since: None,
            last_echo: None,
            down_since: None,
            aside_until: None,
            aside_for: ASIDE_FIRST,
        }
    }
}

impl Liveness {
    pub fn state(&self) -> PathState {
        self.state
    }

    pub fn echo_late(&self) -> bool {
        self.echo_late
    }

    pub fn late_echoes(&self) -> u64 {
        self.late_echoes
    }

    pub fn session_since(&self) -> Option<Instant> {
        self.session_since
    }

    pub fn last_echo(&self) -> Option<Instant> {
        self.last_echo
    }

    pub fn down_since(&self) -> Option<Instant> {
        self.down_since
    }

    pub fn aside_until(&self) -> Option<Instant> {
        self.aside_until
    }

    /// Whether new data may go on the path: up (or up on trust), and its
    /// echo not late.
    pub fn can_carry(&self) -> bool {
        matches!(self.state, PathState::Up | PathState::Unconfirmed) && !self.echo_late
    }

    /// Move to `state`; return whether that is a change.
    pub fn set(&mut self, state: PathState) -> bool {
        if self.state == state {
            return false;
        }
        self.state = state;
        // Only a fresh echo makes a path up again, and that clears it; a
        // stale flag must not keep a new session's path idle.
        self.echo_late = false;
        true
    }

    /// The WireGuard session came up at `now`.
    pub fn session_up(&mut self, now: Instant) {
        self.session_since = Some(now);
        self.last_echo = None;
    }

    /// The WireGuard session is gone.
    pub fn session_down(&mut self) {
        self.session_since = None;
    }

    /// A fresh echo came at `now`.
    pub fn echoed(&mut self, now: Instant) {
        self.last_echo = Some(now);
        self.echo_late = false;
    }

    /// The echo is overdue.
    pub fn mark_echo_late(&mut self) {
        if !self.echo_late {
            self.echo_late = true;
            self.late_echoes += 1;
        }
    }

    /// The path was found dead at `now`.
    pub fn went_down(&mut self, now: Instant) {
        self.down_since = Some(now);
    }

    /// The path works again.
    pub fn came_back(&mut self) {
        self.down_since = None;
    }

    /// Whether the path is set aside for loss at `now`.
    pub fn aside_at(&self, now: Instant) -> bool {
        self.aside_until.is_some_and(|t| t > now)
    }

    /// Set the path aside from `now`, for longer each time.
    pub fn set_aside(&mut self, now: Instant) {
        self.aside_until = Some(now + self.aside_for);
        self.aside_for = (self.aside_for * 2).min(ASIDE_MAX);
    }

    /// The path is wanted back before its time set aside is up: its next
    /// time aside is no longer than this one.
    pub fn recall(&mut self) {
        self.aside_until = None;
        self.aside_for = (self.aside_for / 2).max(ASIDE_FIRST);
    }

    /// Whether the time set aside is up at `now`; if so, forget it.
    pub fn aside_ends(&mut self, now: Instant) -> bool {
        if self.aside_until.is_some_and(|t| t <= now) {
            self.aside_until = None;
            return true;
        }
        false
    }
}
