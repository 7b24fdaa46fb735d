//! One WireGuard session per mptun path, on boringtun.
//!
//! Each path gets its own [`PathSession`] (its own handshake, keys, replay
//! window and keepalive) because boringtun's replay window is 1024 packets:
//! one session striped over paths of unequal delay would overflow it. The
//! session hides boringtun's calling conventions (the "decapsulate again
//! with an empty datagram until `Done`" loop, the minimum buffer sizes) and
//! hands back the whole authenticated plaintext: boringtun truncates what it
//! returns to the inner IP packet's length, but mptun's trailer follows that
//! packet inside the encryption.

#![forbid(unsafe_code)]

pub mod keys;
pub mod testing;

use std::net::IpAddr;
use std::time::Duration;

use boringtun::noise::errors::WireGuardError;
use boringtun::noise::{Tunn, TunnResult};
use boringtun::x25519;

/// Bytes WireGuard adds to a data packet: 16 of header, 16 of AEAD tag.
pub const WG_DATA_OVERHEAD: usize = 32;

/// WireGuard message type of a handshake initiation.
const HANDSHAKE_INITIATION: u8 = 1;
/// WireGuard message type of a cookie reply.
const COOKIE_REPLY: u8 = 3;

/// Smallest output buffer boringtun accepts (a handshake initiation).
const MIN_OUT: usize = 148;

/// Keys and options shared by every path's session.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    /// Our static private key.
    pub private_key: keys::Secret,
    /// The peer's static public key.
    pub peer_public_key: [u8; 32],
    /// Optional pre-shared key, mixed into every handshake (each path's
    /// tied to the path, see [`path_psk`]).
    pub preshared_key: Option<keys::Secret>,
    /// Send a keepalive after this many idle seconds.
    pub persistent_keepalive: Option<u16>,
}

/// Why a datagram was not accepted. `Copy`, to be counted, not logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenError {
    /// Not a WireGuard message: wrong type or length.
    Malformed,
    /// Failed authentication: wrong key, bad MAC or AEAD tag, bad timestamp.
    Unauthenticated,
    /// A counter already seen or too old for the replay window.
    Replayed,
    /// Data for a session this side does not have (e.g. after a restart).
    NoSession,
    /// A handshake refused because the rate limiter is under load.
    UnderLoad,
}

impl OpenError {
    fn from_wireguard(e: WireGuardError) -> Self {
        use WireGuardError as E;
        match e {
            E::WrongKey
            | E::InvalidMac
            | E::InvalidAeadTag
            | E::InvalidTai64nTimestamp
            | E::WrongTai64nTimestamp
            | E::WrongIndex => OpenError::Unauthenticated,
            E::InvalidCounter | E::DuplicateCounter => OpenError::Replayed,
            E::NoCurrentSession | E::ConnectionExpired => OpenError::NoSession,
            E::UnderLoad => OpenError::UnderLoad,
            E::DestinationBufferTooSmall
            | E::IncorrectPacketLength
            | E::UnexpectedPacket
            | E::WrongPacketType
            | E::InvalidPacket
            | E::LockFailed => OpenError::Malformed,
        }
    }
}

/// Return the pre-shared key of path `index`: BLAKE2s keyed with the
/// configured key (32 zero bytes without one) over a label and the index.
///
/// A wire change from releases that used the configured key on every path:
/// both sites must derive it. It ties each session's keys to its path, so
/// neither a session's data nor its handshake response is accepted by
/// another path's session, and paths configured in a different order on
/// the two sites fail to handshake instead of crossing.
pub fn path_psk(configured: Option<&[u8; 32]>, index: u8) -> [u8; 32] {
    use blake2::digest::{FixedOutput, KeyInit, Update};
    let key = configured.copied().unwrap_or([0; 32]);
    let mut mac = blake2::Blake2sMac256::new(&key.into());
    mac.update(b"mptun path psk v1");
    mac.update(&[index]);
    mac.finalize_fixed().into()
}

/// The result of opening one datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opened {
    /// An authenticated plaintext (inner packet and trailer) of `len` bytes
    /// at the start of the output buffer.
    Plaintext {
        /// Its length.
        len: usize,
    },
    /// An authenticated handshake response or keepalive: nothing for the
    /// TUN device, and the peer is live at the sender's address. Any
    /// replies were already passed to `send`.
    Control,
    /// A handshake initiation, answered (the response was passed to
    /// `send`). Its replay protection, a timestamp, is this session's
    /// alone, so one captured on another path passes: the sender's address
    /// proves nothing.
    Initiation,
    /// A cookie reply to our handshake, taken. boringtun checks it only
    /// against values seen on the wire: the sender's address proves
    /// nothing.
    Cookie,
    /// Under load, a handshake initiation was answered with a cookie reply
    /// (passed to `send`) instead of being processed: nothing was
    /// authenticated, so the sender's address proves nothing.
    CookieChallenge,
    /// Dropped.
    Rejected(OpenError),
}

/// One path's WireGuard session.
pub struct PathSession {
    tunn: Tunn,
}

impl PathSession {
    /// Create the session of path number `index`. Its pre-shared key is
    /// the configured one (or none) tied to `index` (see [`path_psk`]), so
    /// the session's keys are this path's alone.
    pub fn new(config: &SessionConfig, index: u8) -> Self {
        let tunn = Tunn::new(
            x25519::StaticSecret::from(*config.private_key.bytes()),
            x25519::PublicKey::from(config.peer_public_key),
            Some(path_psk(
                config.preshared_key.as_ref().map(keys::Secret::bytes),
                index,
            )),
            config.persistent_keepalive,
            u32::from(index),
            // With no shared limiter, boringtun makes one per session and
            // resets it from `update_timers`.
            None,
        );
        PathSession { tunn }
    }

    /// Return the size of output buffer `seal` needs for `plaintext_len`.
    pub fn sealed_len(plaintext_len: usize) -> usize {
        (plaintext_len + WG_DATA_OVERHEAD).max(MIN_OUT)
    }

    /// Encrypt `plaintext` (inner packet plus trailer) into `out`; return the
    /// datagram to send. Without a session yet, boringtun queues the packet
    /// and the datagram is a handshake initiation instead.
    ///
    /// # Panics
    /// If `out` is shorter than [`sealed_len`](Self::sealed_len).
    /// `None` when there is nothing to send (a handshake is already under
    /// way; the packet waits in boringtun's queue).
    pub fn seal<'a>(&mut self, plaintext: &[u8], out: &'a mut [u8]) -> Option<&'a [u8]> {
        match self.tunn.encapsulate(plaintext, out) {
            TunnResult::WriteToNetwork(datagram) => Some(datagram),
            _ => None,
        }
    }

    /// Decrypt a datagram received from `from`. Replies WireGuard owes the
    /// peer (handshake responses, queued packets now that a session exists)
    /// are handed to `send` before this returns.
    pub fn open(
        &mut self,
        from: IpAddr,
        datagram: &[u8],
        out: &mut [u8],
        mut send: impl FnMut(&[u8]),
    ) -> Opened {
        match self.tunn.decapsulate(Some(from), datagram, out) {
            TunnResult::WriteToTunnelV4(..) | TunnResult::WriteToTunnelV6(..) => {}
            TunnResult::WriteToNetwork(reply) => {
                let is_cookie = reply.first() == Some(&COOKIE_REPLY);
                send(reply);
                if is_cookie {
                    return Opened::CookieChallenge;
                }
                self.flush_queued(out, &mut send);
                return match datagram.first() {
                    Some(&HANDSHAKE_INITIATION) => Opened::Initiation,
                    _ => Opened::Control,
                };
            }
            TunnResult::Done => {
                return match datagram.first() {
                    Some(&COOKIE_REPLY) => Opened::Cookie,
                    Some(&HANDSHAKE_INITIATION) => Opened::Initiation,
                    _ => Opened::Control,
                };
            }
            TunnResult::Err(e) => return Opened::Rejected(OpenError::from_wireguard(e)),
        }
        // boringtun truncates its answer to the IP total length but leaves
        // the rest of the plaintext, our trailer, in `out` right after it:
        // a data message is the plaintext plus WireGuard's overhead.
        let len = datagram.len().saturating_sub(WG_DATA_OVERHEAD);
        if len > out.len() {
            return Opened::Rejected(OpenError::Malformed);
        }
        Opened::Plaintext { len }
    }

    /// Run WireGuard's timers (handshake retries, rekeying, keepalives); call
    /// every 250 ms or so. Datagrams to send go to `send`. Returns false when
    /// the session expired without a new handshake.
    pub fn tick(&mut self, out: &mut [u8], mut send: impl FnMut(&[u8])) -> bool {
        match self.tunn.update_timers(out) {
            TunnResult::WriteToNetwork(datagram) => send(datagram),
            TunnResult::Err(WireGuardError::ConnectionExpired) => return false,
            _ => {}
        }
        true
    }

    /// Send a handshake initiation now, rather than on first data.
    pub fn initiate(&mut self, out: &mut [u8], mut send: impl FnMut(&[u8])) {
        if let TunnResult::WriteToNetwork(datagram) =
            self.tunn.format_handshake_initiation(out, false)
        {
            send(datagram);
        }
    }

    /// Send a fresh handshake initiation even if one is under way.
    pub fn initiate_now(&mut self, out: &mut [u8], mut send: impl FnMut(&[u8])) {
        if let TunnResult::WriteToNetwork(datagram) =
            self.tunn.format_handshake_initiation(out, true)
        {
            send(datagram);
        }
    }

    /// Return whether a session is established, i.e. data can be sent.
    pub fn is_established(&self) -> bool {
        self.tunn.time_since_last_handshake().is_some()
    }

    /// Return the time since the last completed handshake, if any.
    pub fn since_handshake(&self) -> Option<Duration> {
        self.tunn.time_since_last_handshake()
    }

    /// Return WireGuard's own estimate of the round-trip time of the last
    /// handshake, in milliseconds.
    pub fn handshake_rtt_ms(&self) -> Option<u32> {
        self.tunn.stats().4
    }

    fn flush_queued(&mut self, out: &mut [u8], send: &mut impl FnMut(&[u8])) {
        while let TunnResult::WriteToNetwork(datagram) = self.tunn.decapsulate(None, &[], out) {
            send(datagram);
        }
    }
}

#[cfg(test)]
mod tests;
