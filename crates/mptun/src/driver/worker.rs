//! A path's worker: owns the path's WireGuard session and UDP socket; seals
//! what the endpoint task sends, opens what arrives, and runs WireGuard's
//! timers. See [`crate::driver`] for where it sits.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use mptun_core::{BufPool, PacketBuf, PathId};
use mptun_wg::{Opened, PathSession};
use tokio::sync::mpsc;
use tracing::{debug, info};

use super::shared::{destination, now, PathInfo, ToEndpoint, ToPath, HEADROOM, TUN_BATCH};
use crate::io::{PathSocket, RecvMeta, MAX_PACKET};

/// How often WireGuard's timers run, as boringtun expects.
const WG_TICK: Duration = Duration::from_millis(250);
/// Ticks between handshake initiations while a path has no session:
/// WireGuard retries every 5 s, a needless outage for a peer that was not
/// listening yet.
const RETRY_TICKS: u64 = 4;
/// Least time between two lookups of a path's endpoint name while it is
/// down, as wireguard-tools' reresolve-dns runs.
const RERESOLVE_EVERY: Duration = Duration::from_secs(30);
/// Longest wait for one lookup: the worker's other work waits meanwhile.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);
/// Receive buffers, each for one datagram or one offloaded run of them.
const RECV_BATCH: usize = 32;
/// Most datagrams sent in one call.
const MAX_SEGMENTS: usize = 64;
/// Buffers a worker keeps for opening datagrams; past this it hands the
/// spare ones back to the endpoint task, which reads the TUN device into
/// them.
const POOL_KEEP: usize = 512;

/// One path's worker.
pub(super) struct PathWorker<S> {
    pub id: PathId,
    pub session: PathSession,
    pub socket: S,
    pub info: Arc<PathInfo>,
    pub from_endpoint: mpsc::Receiver<ToPath>,
    pub to_endpoint: mpsc::Sender<ToEndpoint>,
    /// Capacity of packet buffers, room in front included.
    pub buf_capacity: usize,
    /// The configured endpoint's host name and port, if it names a host.
    pub endpoint_name: Option<String>,
    /// Dropped last, after the socket, when the worker stops: whoever
    /// waits to bind the same port again then may.
    pub _stopped: tokio::sync::oneshot::Sender<()>,
}

/// What a worker keeps between events.
struct State {
    pool: BufPool,
    /// The peer's address, as last learned (a copy of what the status
    /// server reads).
    endpoint: Option<SocketAddr>,
    /// Whether the endpoint task was last told the session is up.
    established: bool,
    /// Datagrams WireGuard owes the peer (handshake messages), to send.
    replies: Vec<Vec<u8>>,
    /// Where sealed datagrams are put to be sent in runs.
    sealed: Vec<u8>,
    /// A spare batch, for the next plaintexts opened.
    spare: Vec<PacketBuf>,
    /// When the endpoint name was last looked up.
    resolved_at: Option<tokio::time::Instant>,
}

impl<S: PathSocket> PathWorker<S> {
    fn info(&self) -> &PathInfo {
        &self.info
    }

    /// Run until the endpoint task is gone.
    pub async fn run(mut self) -> anyhow::Result<()> {
        let mut state = State {
            pool: BufPool::new(self.buf_capacity, POOL_KEEP),
            endpoint: self.info().endpoint(),
            established: false,
            replies: Vec::new(),
            sealed: vec![0; TUN_BATCH * PathSession::sealed_len(self.buf_capacity)],
            spare: Vec::new(),
            resolved_at: None,
        };
        let mut bufs: Vec<Vec<u8>> = (0..RECV_BATCH).map(|_| vec![0; MAX_PACKET]).collect();
        let mut meta = vec![RecvMeta::EMPTY; RECV_BATCH];
        let mut tick = tokio::time::interval(WG_TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut ticks: u64 = 0;
        // Start the handshake at once rather than on the first packet, so
        // the path is up before traffic arrives.
        let mut scratch = vec![0u8; 2048];
        if state.endpoint.is_none() {
            // A name that did not resolve when the config was read.
            self.reresolve(&mut state).await;
        }
        self.session
            .initiate(&mut scratch, |d| state.replies.push(d.to_vec()));
        self.send_replies(&mut state, None).await;
        loop {
            tokio::select! {
                biased;
                command = self.from_endpoint.recv() => match command {
                    None => return Ok(()),
                    Some(ToPath::Send(mut batch)) => {
                        self.seal_and_send(&mut state, &batch).await;
                        state.pool.put_all(&mut batch);
                        state.spare = batch;
                    }
                    Some(ToPath::Rehandshake) => {
                        self.reresolve(&mut state).await;
                        self.session.initiate_now(&mut scratch, |d| state.replies.push(d.to_vec()));
                        self.send_replies(&mut state, None).await;
                    }
                },
                received = self.socket.recv(&mut bufs, &mut meta) => match received {
                    Ok(n) => self.open_all(&mut state, &bufs[..n], &meta[..n]).await,
                    Err(e) => {
                        // ICMP errors surface here on some kernels; the path's
                        // other traffic, and every other path, carry on.
                        self.info().counters.recv_errors.add(1);
                        debug!(path = %self.id, error = %e, "receive error");
                    }
                },
                _ = tick.tick() => {
                    ticks += 1;
                    let alive = self.session.tick(&mut scratch, |d| state.replies.push(d.to_vec()));
                    if ticks.is_multiple_of(RETRY_TICKS) && !self.session.is_established() {
                        self.reresolve(&mut state).await;
                        self.session.initiate_now(&mut scratch, |d| state.replies.push(d.to_vec()));
                    }
                    self.send_replies(&mut state, None).await;
                    let now = now();
                    let at = self.session.since_handshake().and_then(|d| now.checked_sub(d));
                    self.info().set_handshake(at, self.session.handshake_rtt_ms());
                    self.tell_session(&mut state, alive && self.session.is_established()).await;
                    continue;
                }
            }
            let up = self.session.is_established();
            self.tell_session(&mut state, up).await;
            if state.pool.len() > POOL_KEEP / 2 {
                let mut spare = std::mem::take(&mut state.spare);
                spare.clear();
                while spare.len() < TUN_BATCH && state.pool.len() > POOL_KEEP / 4 {
                    spare.push(state.pool.take(0));
                }
                if let Err(e) = self.to_endpoint.try_send(ToEndpoint::Spare(spare)) {
                    if let ToEndpoint::Spare(mut spare) = e.into_inner() {
                        state.pool.put_all(&mut spare);
                        state.spare = spare;
                    }
                }
            }
        }
    }

    /// Tell the endpoint task whether the session is up, when that changed.
    /// Up means established with a peer address to send to.
    async fn tell_session(&self, state: &mut State, established: bool) {
        let up = established && state.endpoint.is_some();
        if up != state.established {
            state.established = up;
            let _ = self
                .to_endpoint
                .send(ToEndpoint::Session {
                    path: self.id,
                    established: up,
                })
                .await;
        }
    }

    /// Send what WireGuard owes the peer, to `to` or the path's endpoint.
    async fn send_replies(&self, state: &mut State, to: Option<SocketAddr>) {
        let local = self.info().local;
        let to = to.or(state.endpoint.map(|e| destination(local, e)));
        for reply in state.replies.drain(..) {
            if let Some(to) = to {
                self.send_counted(to, &reply, reply.len(), 1).await;
            }
        }
    }

    /// Seal each plaintext and send the datagrams, equal-size runs in one
    /// call each.
    async fn seal_and_send(&mut self, state: &mut State, batch: &[PacketBuf]) {
        let Some(to) = state.endpoint.map(|e| destination(self.info().local, e)) else {
            return;
        };
        let mut run = SealedRun::default();
        for plaintext in batch {
            let need = PathSession::sealed_len(plaintext.len());
            if run.end + need > state.sealed.len() || run.count == MAX_SEGMENTS {
                self.send_run(state, &mut run, to).await;
            }
            let at = run.end;
            let Some(n) = self
                .session
                .seal(plaintext.packet(), &mut state.sealed[at..at + need])
                .map(<[u8]>::len)
            else {
                continue; // queued by WireGuard until its handshake is done
            };
            if run.count > 0 && n > run.segment {
                // Only the last datagram of a run may be shorter.
                let mut head = SealedRun { end: at, ..run };
                self.send_run(state, &mut head, to).await;
                run = SealedRun {
                    start: at,
                    end: at,
                    ..SealedRun::default()
                };
            }
            if run.count == 0 {
                run.segment = n;
            }
            run.end = at + n;
            run.count += 1;
            if n < run.segment {
                self.send_run(state, &mut run, to).await;
            }
        }
        self.send_run(state, &mut run, to).await;
    }

    async fn send_run(&self, state: &State, run: &mut SealedRun, to: SocketAddr) {
        if run.count > 0 {
            let contents = &state.sealed[run.start..run.end];
            self.send_counted(to, contents, run.segment, run.count)
                .await;
        }
        *run = SealedRun::default();
    }

    /// Send `datagrams` datagrams of `segment` bytes (the last may be
    /// shorter) in `contents`, and count them or the failure.
    async fn send_counted(
        &self,
        to: SocketAddr,
        contents: &[u8],
        segment: usize,
        datagrams: usize,
    ) {
        let c = &self.info().counters;
        if self.socket.send(to, contents, segment).await.is_err() {
            c.send_errors.add(1);
        } else {
            c.tx_datagrams.add(datagrams as u64);
            c.tx_datagram_bytes.add(contents.len() as u64);
        }
    }

    /// Open every datagram received and hand the plaintexts to the endpoint
    /// task.
    async fn open_all(&mut self, state: &mut State, bufs: &[Vec<u8>], meta: &[RecvMeta]) {
        let mut opened = std::mem::take(&mut state.spare);
        opened.clear();
        let room = self.buf_capacity.saturating_sub(HEADROOM);
        let clocks = (SystemTime::now(), now());
        for (buf, m) in bufs.iter().zip(meta) {
            let from = SocketAddr::new(m.from.ip().to_canonical(), m.from.port());
            let stride = m.stride.max(1);
            let c = &self.info().counters;
            c.rx_datagrams.add(m.len.div_ceil(stride) as u64);
            c.rx_datagram_bytes.add(m.len as u64);
            for datagram in buf[..m.len].chunks(stride) {
                let mut plaintext = state.pool.take(HEADROOM);
                let out = plaintext.room(HEADROOM, room.max(datagram.len()));
                let result = self
                    .session
                    .open(from.ip(), datagram, out, |r| state.replies.push(r.to_vec()));
                match result {
                    Opened::Plaintext { len } => {
                        plaintext.set_len(len);
                        plaintext.set_received(received_at(m.received, clocks));
                        opened.push(plaintext);
                        self.learn_endpoint(state, from);
                    }
                    Opened::Control => {
                        state.pool.put(plaintext);
                        self.learn_endpoint(state, from);
                    }
                    // A replayed initiation or a cookie reply passes
                    // authentication without proving where the peer is.
                    Opened::Initiation => {
                        state.pool.put(plaintext);
                        self.info().counters.initiations.add(1);
                    }
                    Opened::Cookie => {
                        state.pool.put(plaintext);
                        self.info().counters.cookie_replies.add(1);
                    }
                    Opened::CookieChallenge => state.pool.put(plaintext),
                    Opened::Rejected(e) => {
                        state.pool.put(plaintext);
                        self.info().counters.rejected.count(e);
                    }
                }
                if !state.replies.is_empty() {
                    self.send_replies(state, Some(destination(self.info().local, from)))
                        .await;
                }
            }
        }
        if opened.is_empty() {
            state.spare = opened;
            return;
        }
        let message = ToEndpoint::Opened {
            path: self.id,
            plaintexts: opened,
        };
        // Waits while the endpoint task is behind: the socket's buffer
        // absorbs the burst meanwhile.
        let _ = self.to_endpoint.send(message).await;
    }

    /// Look the endpoint's host name up again, if it has one and was not
    /// looked up in the last [`RERESOLVE_EVERY`]: the path is down, and the
    /// peer's host may have moved.
    async fn reresolve(&self, state: &mut State) {
        let Some(name) = &self.endpoint_name else {
            return;
        };
        let now = tokio::time::Instant::now();
        if state
            .resolved_at
            .is_some_and(|at| now.saturating_duration_since(at) < RERESOLVE_EVERY)
        {
            return;
        }
        state.resolved_at = Some(now);
        // Of the addresses found, one of the IP version the path used so
        // far (its socket may not reach the other).
        let v4 = state.endpoint.is_none_or(|e| e.is_ipv4());
        let found = tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host(name.as_str()))
            .await
            .ok()
            .and_then(Result::ok)
            .and_then(|addrs| {
                let addrs: Vec<SocketAddr> = addrs.collect();
                let same = addrs.iter().find(|a| a.is_ipv4() == v4);
                same.or(addrs.first()).copied()
            });
        match found {
            Some(addr) if state.endpoint != Some(addr) => {
                info!(path = %self.id, %name, endpoint = %addr, "endpoint looked up again: it moved");
                state.endpoint = Some(addr);
                self.info().set_endpoint(addr);
            }
            Some(_) => {}
            None => debug!(path = %self.id, %name, "endpoint lookup failed; trying again later"),
        }
    }

    fn learn_endpoint(&self, state: &mut State, from: SocketAddr) {
        if state.endpoint != Some(from) {
            info!(path = %self.id, endpoint = %from, "peer endpoint learned");
            state.endpoint = Some(from);
            self.info().set_endpoint(from);
        }
    }
}

/// A run of sealed datagrams in the send buffer, all `segment` bytes but
/// the last.
#[derive(Clone, Copy, Default)]
struct SealedRun {
    start: usize,
    end: usize,
    segment: usize,
    count: usize,
}

/// Return when a datagram the kernel received at `received` by the wall
/// clock arrived by ours, given the two clocks read together: none if the
/// kernel did not say, or the wall clock was stepped back since.
pub(super) fn received_at(
    received: Option<SystemTime>,
    (wall, now): (SystemTime, Instant),
) -> Option<Instant> {
    let waited = wall.duration_since(received?).ok()?;
    now.checked_sub(waited)
}
