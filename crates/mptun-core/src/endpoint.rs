//! One site's side of a tunnel, as a state machine with no I/O.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::buf::{BufPool, PacketBuf};
use crate::equalize::{DelayLine, DscpSet, Release};
use crate::parity::{ParityDecoder, ParityEncoder};
use crate::path::train::TRAIN_PACKET_LEN;
use crate::path::{Path, PathEstimate, PathEvent, PathId, PathSet, PathState};
use crate::paths::{repair_past_due, PathTable, HOLD_FLOOR, REPAIR_PATIENCE_MARGIN};
use crate::reorder::{Arrival, HoldHistogram, ReorderBuffer, ReorderConfig, ReorderStats, WaitEnd};
use crate::scheduler::{Policy, Scheduler};
use crate::sent_log::SentLog;
use crate::seq::Seq;
use crate::wire::{
    ip, Kind, Nack, Parity, Probe, Trailer, Train, NACK_MAX, NACK_MAX_LEN, TRAILER_LEN,
};

/// Buffers an endpoint keeps for its own probes, NACKs and resends.
const POOL_KEEP: usize = 1024;

/// The first data packet heard of a peer's run (arrived, or named by a
/// probe as its path's last) numbered below this is taken to be one of the
/// run's first, and the packets before it are waited for.
const NEW_RUN_FIRST_PACKETS: u32 = 1024;

/// How long the peer's run being followed must have been silent before a
/// run with an earlier epoch is taken in its place (a peer whose clock went
/// back): WireGuard's reject-after time, after which nothing sealed for the
/// old run can still be opened, so a replay cannot bring it back.
const EPOCH_FORGET: Duration = Duration::from_secs(180);

/// What an [`Endpoint`] is built from.
#[derive(Clone, Debug)]
pub struct EndpointConfig {
    /// Identity of this run, carried in every trailer, so the peer can tell
    /// a restart from a stale packet: later runs have later epochs, in
    /// serial-number order (the binary takes its start time in ms).
    pub epoch: u32,
    /// Number of paths, `PathId(0)` to `PathId(paths - 1)`.
    pub paths: usize,
    /// How data packets are spread over the paths.
    pub policy: Policy,
    /// Limits of the reorder buffer; the sent log spans as many packets.
    pub reorder: ReorderConfig,
    /// How long the peer's run being followed must have been silent before
    /// another one (a restarted peer) is taken in its place. Shorter would
    /// let a straggler from before a restart reset the receive side again;
    /// longer delays recovery after a restart by the same amount.
    pub epoch_quiet: Duration,
    /// Capacity of the buffers it makes for probes, NACKs and resends: the
    /// largest plaintext (inner packet and trailer).
    pub buf_capacity: usize,
    /// DSCP values of TCP segments the peer is not to hold to the farthest
    /// path's delay (see [`crate::equalize`]).
    pub low_latency: DscpSet,
}

impl EndpointConfig {
    /// A config with the default reorder limits and adaptive scheduling.
    pub fn new(epoch: u32, paths: usize) -> Self {
        EndpointConfig {
            epoch,
            paths,
            policy: Policy::adaptive(None),
            reorder: ReorderConfig::default(),
            epoch_quiet: Duration::from_millis(200),
            buf_capacity: 2048,
            low_latency: DscpSet::LOW_LATENCY,
        }
    }
}

/// Counters of one path, monotonically increasing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathStats {
    /// Data packets sent on the path, resent ones included.
    pub tx_packets: u64,
    /// Inner bytes of those packets.
    pub tx_bytes: u64,
    /// Of `tx_packets`, those resent because the peer asked for them.
    pub resent: u64,
    /// Data packets received on the path.
    pub rx_packets: u64,
    /// Inner bytes of those packets.
    pub rx_bytes: u64,
    /// Probes sent.
    pub tx_probes: u64,
    /// Probes received.
    pub rx_probes: u64,
    /// NACKs sent.
    pub tx_nacks: u64,
    /// NACKs received.
    pub rx_nacks: u64,
    /// Parity halves sent (see [`crate::parity`]).
    pub tx_parity: u64,
    /// Parity halves received.
    pub rx_parity: u64,
    /// Data packets lost on the way rebuilt from a parity.
    pub rebuilt: u64,
    /// Plaintexts refused, by reason.
    pub refused: RefusedStats,
}

/// Authenticated plaintexts an endpoint refused, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RefusedStats {
    /// No readable trailer: too short, or of a version, kind or flags this
    /// build does not know (a plain WireGuard peer, or another version of
    /// mptun).
    pub bad_trailer: u64,
    /// Bytes between the inner IP packet and the trailer.
    pub length_mismatch: u64,
    /// A probe, or a packet of a probe train, that does not read as one.
    pub bad_probe: u64,
    /// A NACK that does not read as one.
    pub bad_nack: u64,
    /// A parity half that does not read as one.
    pub bad_parity: u64,
    /// From a run of the peer other than the one followed, while that one
    /// is still heard from.
    pub foreign_epoch: u64,
}

/// Counters of an endpoint as a whole, monotonically increasing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Packets from the TUN device that are not IPv4 or IPv6.
    pub dropped_not_ip: u64,
    /// Packets from the TUN device dropped because no path was usable.
    pub dropped_no_path: u64,
    /// NACKs for a run of ours before a restart: nothing to resend.
    pub nacks_for_old_run: u64,
    /// Times the peer was found restarted (a new run followed), after the
    /// first.
    pub epoch_changes: u64,
    /// TCP segments held, once in order, until they had been under way as
    /// long as one on the farthest path (see [`crate::equalize`]).
    pub equalized: u64,
    /// TCP segments sent not to be held so, their DSCP being one of the
    /// low-latency ones.
    pub low_latency_segments: u64,
    /// Packets the peer asked for that were not in the sent log: asked for
    /// longer after they were sent than the log spans (or never sent).
    pub repairs_gone: u64,
    /// Packets the peer asked for that no path would bring while they were
    /// of use, nor, later, had room for: not resent, left to the inner
    /// flow.
    pub repairs_too_late: u64,
}

/// The peer's run being followed.
#[derive(Clone, Copy, Debug)]
struct PeerRun {
    epoch: u32,
    /// When it was last heard from.
    heard: Instant,
    /// Whether its data was taken in yet: the reorder buffer starts at its
    /// first data packet.
    data_started: bool,
}

/// What to do with a message of an epoch.
enum Admission {
    /// Of the run being followed.
    Followed,
    /// Of a new run, now followed.
    New,
    /// Of another run, while the one followed is still heard from.
    Foreign,
}

/// One site's side of a tunnel: numbering, scheduling, the sent log and
/// repairs, probes, path liveness and the reorder buffer, with no I/O.
///
/// The I/O edge owns the TUN device, one WireGuard session and socket per
/// path, and the clock; it hands this inputs and carries out its outputs.
/// Time comes in as an argument: nothing here reads a clock. Packets move
/// by value in [`PacketBuf`]s.
///
/// Methods come in three kinds:
/// - **inputs**, `handle_*`: [`handle_tun`](Self::handle_tun) (inner packets
///   read from the TUN device), [`handle_datagrams`](Self::handle_datagrams)
///   (plaintexts a path's WireGuard session opened), and
///   [`handle_timeout`](Self::handle_timeout); plus
///   [`set_session`](Self::set_session) when a path's WireGuard session comes
///   or goes;
/// - **outputs**, `poll_*`: [`poll_transmit`](Self::poll_transmit)
///   (plaintexts to seal and send, grouped by path),
///   [`poll_deliver`](Self::poll_deliver) (inner packets for the TUN
///   device, in order), [`poll_event`](Self::poll_event) (path state changes
///   to log) and [`poll_timeout`](Self::poll_timeout) (when to call
///   `handle_timeout` next);
/// - **queries** for status output and for the WireGuard timers
///   ([`wants_handshake`](Self::wants_handshake)).
///
/// After any input, drain `poll_transmit` and `poll_deliver`, take the
/// events, and sleep until `poll_timeout` (or the next input). Each input
/// takes a batch with one `now`: a batch is what one read of the TUN device
/// or one receive on a path's socket brought.
pub struct Endpoint {
    epoch: u32,
    epoch_quiet: Duration,
    paths: PathTable,
    scheduler: Scheduler,
    next_seq: Seq,
    sent: SentLog,
    reorder: ReorderBuffer<Received>,
    /// TCP segments in order, held until due (see [`crate::equalize`]).
    delay_line: DelayLine,
    /// Longest a segment is held there.
    max_equalize: Duration,
    /// DSCP values of TCP segments sent not to be held.
    low_latency: DscpSet,
    /// The latest time an input was given: what is due by then is
    /// delivered.
    now: Instant,
    peer: Option<PeerRun>,
    /// Plaintexts to send, per path, in order.
    outgoing: Vec<VecDeque<PacketBuf>>,
    /// Parities of the data we send, and of what we receive, per path.
    parity_out: Vec<ParityEncoder>,
    parity_in: Vec<ParityDecoder>,
    pool: BufPool,
    path_stats: Vec<PathStats>,
    stats: EndpointStats,
}

impl Endpoint {
    /// Create an endpoint at time `now`; no path has a session yet.
    pub fn new(now: Instant, config: EndpointConfig) -> Self {
        let n = config.paths;
        Endpoint {
            epoch: config.epoch,
            epoch_quiet: config.epoch_quiet,
            paths: PathTable::new(now, n),
            scheduler: Scheduler::new(config.policy, n),
            next_seq: Seq(0),
            // A NACK for what the peer's reorder window has passed comes too
            // late to help: the log spans no more than that window.
            sent: SentLog::new(config.reorder.capacity),
            reorder: ReorderBuffer::new(config.reorder),
            delay_line: DelayLine::new(config.reorder.capacity),
            max_equalize: config.reorder.hold,
            low_latency: config.low_latency,
            now,
            peer: None,
            outgoing: (0..n).map(|_| VecDeque::new()).collect(),
            parity_out: (0..n).map(|_| ParityEncoder::default()).collect(),
            parity_in: (0..n).map(|_| ParityDecoder::default()).collect(),
            pool: BufPool::new(config.buf_capacity, POOL_KEEP),
            path_stats: vec![PathStats::default(); n],
            stats: EndpointStats::default(),
        }
    }

    // Inputs.

    /// Start `path` afresh (a path whose socket or peer address changed),
    /// or add it if it is one past the last (a path added to the config);
    /// it carries nothing until [`set_session`](Self::set_session) says its
    /// session is up. Its counters are kept. Return whether `path` was
    /// either.
    pub fn open_path(&mut self, path: PathId) -> bool {
        if !self.paths.open(path) {
            return false;
        }
        let n = self.paths.len();
        self.outgoing.resize_with(n, VecDeque::new);
        self.parity_out.resize_with(n, ParityEncoder::default);
        self.parity_in.resize_with(n, ParityDecoder::default);
        self.path_stats.resize(n, PathStats::default());
        self.scheduler.resize(n);
        true
    }

    /// Spread data by `policy` from now on (weights changed by a reload).
    pub fn set_policy(&mut self, policy: Policy) {
        self.scheduler.set_policy(policy);
    }

    /// Tell whether `path`'s WireGuard session is established.
    pub fn set_session(&mut self, now: Instant, path: PathId, established: bool) {
        self.paths.set_session(now, path, established);
    }

    /// Take the inner packets read from the TUN device at `now`, draining
    /// `packets`: number each, pick its path, log it for repairs and queue
    /// it with its trailer for that path.
    pub fn handle_tun(&mut self, now: Instant, packets: &mut Vec<PacketBuf>) {
        self.now = self.now.max(now);
        let sent_us = self.paths.micros(now) as u32;
        // Neither the paths nor what they measured change within a batch.
        let usable = self.paths.usable();
        let (tcp_paths, spread_paths) = self.paths.tcp_and_spread_paths(now, usable);
        let spread_us = self.paths.spread_us(spread_paths);
        let mut delivering = self.paths.still_delivering(now);
        for buf in packets.drain(..) {
            if ip::packet_len(buf.packet()).is_none() {
                self.stats.dropped_not_ip += 1;
                self.pool.put(buf);
                continue;
            }
            let len = buf.len();
            let release = Release::of(buf.packet(), self.low_latency);
            if release == Release::LowLatency {
                self.stats.low_latency_segments += 1;
            }
            let held = release == Release::Held;
            let usable = if release.takes_tcp_paths(buf.packet()) {
                tcp_paths
            } else {
                usable
            };
            let held_until_us = if held { spread_us } else { 0.0 };
            let paths = self.paths.as_mut_slice();
            let picked = if ip::is_bare_tcp_ack(buf.packet()) {
                self.scheduler.pick_for_ack(paths, now, len, usable)
            } else {
                self.scheduler.pick(paths, now, len, held_until_us, usable)
            };
            let Some(path) = picked else {
                self.stats.dropped_no_path += 1;
                self.pool.put(buf);
                continue;
            };
            let seq = self.next_seq;
            self.next_seq = seq.next();
            // The receiver waits for gaps only on paths that may still
            // deliver them: those that carried data lately, and this one. A
            // path that is eligible but idle would otherwise hold up every
            // loss release.
            delivering.insert(path);
            let sent = Sent {
                sent_us,
                held,
                repair: false,
                could_take: usable,
            };
            let trailer = self.data_trailer(now, path, seq, len, delivering, sent);
            self.scheduler.note_sent(path);
            self.sent.record(seq, path, sent_us, buf.packet());
            self.queue_data(now, path, &trailer, buf);
        }
    }

    /// Take the plaintexts `path`'s WireGuard session opened at `now`,
    /// draining `plaintexts`: data goes to the reorder buffer, probes to the
    /// path monitor, NACKs are answered with resends.
    pub fn handle_datagrams(
        &mut self,
        now: Instant,
        path: PathId,
        plaintexts: &mut Vec<PacketBuf>,
    ) {
        self.now = self.now.max(now);
        if path.index() >= self.path_stats.len() {
            self.pool.put_all(plaintexts);
            return;
        }
        let mut probed = false;
        for buf in plaintexts.drain(..) {
            match self.open(now, path, buf) {
                Ok((Kind::Data, trailer, buf)) => self.handle_data(now, path, &trailer, buf),
                Ok((Kind::Probe, trailer, buf)) => {
                    probed |= self.handle_probe(now, path, &trailer, &buf);
                    self.pool.put(buf);
                }
                Ok((Kind::Nack, _, buf)) => {
                    self.handle_nack(now, path, &buf);
                    self.pool.put(buf);
                }
                Ok((Kind::Train, _, buf)) => {
                    // A train's spacing is the path's only as the socket
                    // saw it: this process reads at its own pace.
                    let at = buf.received().filter(|&t| t <= now).unwrap_or(now);
                    self.handle_train(at, path, &buf);
                    self.pool.put(buf);
                }
                Ok((Kind::Parity, _, buf)) => {
                    self.handle_parity(now, path, &buf);
                    self.pool.put(buf);
                }
                Err(buf) => self.pool.put(buf),
            }
        }
        if probed {
            self.update_hints(now);
        }
        self.send_nacks();
    }

    /// Run the timers due by `now`: probes, path liveness, and gaps held
    /// long enough.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = self.now.max(now);
        let down = self.paths.handle_timeout(now);
        for path in down.iter() {
            self.resend_lost_with(now, path);
        }
        while let Some((path, probe)) = self.paths.poll_probe(now) {
            let mut buf = self.pool.take(0);
            buf.fill(0, Probe::LEN, |b| probe.encode(b));
            // A probe's paths in use are those TCP took lately, so the peer
            // holds TCP segments only as long as the farthest of them needs.
            let usable = self.paths.usable();
            let (_, spread_paths) = self.paths.tcp_and_spread_paths(now, usable);
            let mut trailer = Trailer::control(Kind::Probe, self.epoch, spread_paths);
            // Naming the path's last data packet shows its loss to the peer
            // even when no more data follows it there.
            (trailer.previous_on_path, trailer.congested) = self.paths.last_sent(now, path);
            append_trailer(&mut buf, &trailer);
            self.path_stats[path.index()].tx_probes += 1;
            self.outgoing[path.index()].push_back(buf);
        }
        while let Some((path, number, packets)) = self.paths.poll_train(now) {
            self.queue_train(path, number, packets);
        }
        for i in 0..self.parity_out.len() {
            if self.parity_out[i].flush_at().is_some_and(|t| t <= now) {
                self.queue_parity(now, PathId(i as u8));
            }
        }
        self.update_hints(now);
        if self.reorder.poll_timeout().is_some_and(|t| t <= now) {
            self.reorder.handle_timeout(now);
        }
        self.send_nacks();
    }

    // Outputs.

    /// Move the plaintexts queued for one path into `out` and return the
    /// path; `None` when nothing is queued. Call until `None`.
    pub fn poll_transmit(&mut self, out: &mut Vec<PacketBuf>) -> Option<PathId> {
        let i = self.outgoing.iter().position(|q| !q.is_empty())?;
        out.extend(self.outgoing[i].drain(..));
        Some(PathId(i as u8))
    }

    /// Move the inner packets released in order into `out`, for the TUN
    /// device.
    pub fn poll_deliver(&mut self, out: &mut Vec<PacketBuf>) {
        // A repair that came after the packets behind it went is out of
        // order already, and past its due time: behind the segments held
        // it would wait for ones due later, and its flow would take the
        // gap it fills for a loss.
        while let Some(late) = self.reorder.poll_release_late() {
            out.push(late.buf);
        }
        while let Some(received) = self.reorder.poll_release() {
            if received.due.is_some_and(|due| due > self.now) {
                self.stats.equalized += 1;
            }
            self.delay_line.push(received.due, received.buf, out);
        }
        self.delay_line.release(self.now, out);
    }

    /// Return the next path state change, for logging.
    pub fn poll_event(&mut self) -> Option<PathEvent> {
        self.paths.poll_event()
    }

    /// Return when [`handle_timeout`](Self::handle_timeout) next has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [
            self.paths.poll_timeout(),
            self.reorder.poll_timeout(),
            self.delay_line.next_due(),
            self.parity_out
                .iter()
                .filter_map(ParityEncoder::flush_at)
                .min(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    // Queries.

    /// Return this run's epoch.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Return the epoch of the peer's run being followed.
    pub fn peer_epoch(&self) -> Option<u32> {
        self.peer.map(|p| p.epoch)
    }

    /// Return the number of paths.
    pub fn path_count(&self) -> usize {
        self.paths.len()
    }

    /// Return the state of a path.
    pub fn state(&self, path: PathId) -> PathState {
        self.paths.state(path)
    }

    /// Return the paths new data may use now.
    pub fn usable(&self) -> PathSet {
        self.paths.usable()
    }

    /// Return what is known of a path.
    pub fn estimate(&self, path: PathId, now: Instant) -> PathEstimate {
        self.paths.estimate(path, now)
    }

    /// Return whether a path has been down long enough that a fresh
    /// WireGuard handshake is worth trying (the peer may have restarted and
    /// lost its session).
    pub fn wants_handshake(&self, now: Instant, path: PathId) -> bool {
        self.paths.wants_handshake(now, path)
    }

    /// Return the counters of a path.
    pub fn path_stats(&self, path: PathId) -> PathStats {
        self.path_stats
            .get(path.index())
            .copied()
            .unwrap_or_default()
    }

    /// Return the endpoint's own counters.
    pub fn stats(&self) -> EndpointStats {
        self.stats
    }

    /// Return the reorder buffer's counters.
    pub fn reorder_stats(&self) -> ReorderStats {
        self.reorder.stats()
    }

    /// Return how long a gap is waited for now.
    pub fn hold(&self) -> Duration {
        self.reorder.hold()
    }

    /// Return how long a lost packet's repair is waited for, if repairs are
    /// asked for.
    pub fn repair_wait(&self) -> Option<Duration> {
        self.reorder.repair_wait()
    }

    /// Return how long packets waited in the reorder buffer.
    pub fn waits(&self) -> &HoldHistogram {
        self.reorder.waits()
    }

    /// Return how long the packets whose wait `end` ended waited.
    pub fn waits_ended_by(&self, end: WaitEnd) -> &HoldHistogram {
        self.reorder.waits_ended_by(end)
    }

    /// Return how many packets wait in the reorder buffer.
    pub fn held(&self) -> usize {
        self.reorder.held_len()
    }

    /// Return how many TCP segments, in order, wait until they have been
    /// under way as long as one on the farthest path.
    pub fn equalizing(&self) -> usize {
        self.delay_line.len()
    }

    /// Return how long a TCP segment that came the nearest way is held
    /// now; `None` until a path towards us is measured.
    pub fn equalize_wait(&self) -> Option<Duration> {
        self.paths.equalize_wait(self.now, self.max_equalize)
    }

    // Inside.

    /// Read the trailer of a plaintext opened on `path` and check the
    /// message belongs to the peer's run being followed; return it with the
    /// trailer cut off, or hand it back refused (counted).
    fn open(
        &mut self,
        now: Instant,
        path: PathId,
        mut buf: PacketBuf,
    ) -> Result<(Kind, Trailer, PacketBuf), PacketBuf> {
        let refused = &mut self.path_stats[path.index()].refused;
        let (trailer, body_len) = match Trailer::decode_suffix(buf.packet()) {
            Ok(t) => t,
            Err(_) => {
                refused.bad_trailer += 1;
                return Err(buf);
            }
        };
        // The body is exactly one IP packet (WireGuard hands back no more
        // than its header says): anything between it and the trailer is not
        // ours.
        if ip::packet_len(&buf.packet()[..body_len]) != Some(body_len) {
            refused.length_mismatch += 1;
            return Err(buf);
        }
        match self.admit(now, trailer.epoch) {
            Admission::Followed => {}
            Admission::New => self.paths.forget_peer(),
            Admission::Foreign => {
                self.path_stats[path.index()].refused.foreign_epoch += 1;
                return Err(buf);
            }
        }
        buf.truncate(body_len);
        Ok((trailer.kind, trailer, buf))
    }

    /// Decide whether a message of `epoch` belongs to the peer's run being
    /// followed, and follow a later run once the old one has gone quiet (an
    /// earlier one only once it has been quiet for [`EPOCH_FORGET`]: a
    /// replayed packet of a run before the restart must not bring it back).
    fn admit(&mut self, now: Instant, epoch: u32) -> Admission {
        let admission = match self.peer {
            Some(run) if run.epoch == epoch => Admission::Followed,
            Some(run) => {
                let quiet = now.saturating_duration_since(run.heard);
                let later = Seq(run.epoch).is_before(Seq(epoch));
                if quiet < self.epoch_quiet || (!later && quiet < EPOCH_FORGET) {
                    return Admission::Foreign;
                }
                self.stats.epoch_changes += 1;
                Admission::New
            }
            None => Admission::New,
        };
        let data_started = matches!(admission, Admission::Followed)
            && self.peer.is_some_and(|run| run.data_started);
        self.peer = Some(PeerRun {
            epoch,
            heard: now,
            data_started,
        });
        admission
    }

    fn handle_data(&mut self, now: Instant, path: PathId, trailer: &Trailer, buf: PacketBuf) {
        let len = buf.len();
        let stats = &mut self.path_stats[path.index()];
        stats.rx_packets += 1;
        stats.rx_bytes += len as u64;
        let skipped = self
            .paths
            .handle_data(now, path, trailer.path_seq, trailer.sent_us, len);
        if self.parity_in[path.index()].keeping(now) {
            let mut bytes = [0; TRAILER_LEN];
            trailer.encode(&mut bytes);
            self.parity_in[path.index()].keep(now, trailer.path_seq, buf.packet(), &bytes);
        }
        self.reorder_data(now, path, trailer, buf, skipped);
    }

    /// Start the reorder buffer for the peer's run, if not started yet,
    /// on hearing of its data packet `seq`. A new run numbers from 0, and
    /// its first packets may arrive in any order over the paths: wait for
    /// the earlier ones too. A run joined late (we restarted, the peer did
    /// not) starts at the first packet heard.
    fn start_peer_data(&mut self, now: Instant, seq: Seq) {
        if let Some(run) = self.peer.as_mut().filter(|run| !run.data_started) {
            run.data_started = true;
            let start = if seq.0 < NEW_RUN_FIRST_PACKETS {
                Seq(0)
            } else {
                seq
            };
            self.reorder.restart(now, start);
        }
    }

    /// Take a data packet received on `path` (or rebuilt from its parity)
    /// into the reorder buffer; `skipped` packets sent on the path just
    /// before it are missing.
    fn reorder_data(
        &mut self,
        now: Instant,
        path: PathId,
        trailer: &Trailer,
        buf: PacketBuf,
        skipped: u32,
    ) {
        self.start_peer_data(now, trailer.seq);
        // A segment due already still goes behind those held (but a
        // repair that comes late, see `poll_deliver`).
        let due = trailer.held.then(|| {
            self.paths
                .equalized_due(now, trailer.sent_us, self.max_equalize)
                .unwrap_or(now)
        });
        let arrival = Arrival {
            path,
            seq: trailer.seq,
            paths_in_use: trailer.paths_in_use,
            previous_on_path: trailer.previous_on_path,
            dropped_at_queue: if trailer.congested { skipped } else { 0 },
            due,
            unordered: ip::is_bare_tcp_ack(buf.packet()),
        };
        if let Err((_, refused)) = self
            .reorder
            .handle_packet(now, &arrival, Received { buf, due })
        {
            self.pool.put(refused.buf);
        }
    }

    /// Queue the `packets` of probe train `number` on `path`, back to back.
    fn queue_train(&mut self, path: PathId, number: u32, packets: u16) {
        let len = TRAIN_PACKET_LEN.min(self.pool.capacity().saturating_sub(TRAILER_LEN));
        let trailer = Trailer::control(Kind::Train, self.epoch, self.paths.usable());
        for index in 0..packets {
            let train = Train {
                number,
                index,
                count: packets,
            };
            let mut buf = self.pool.take(0);
            buf.fill(0, len, |b| train.encode(b, len));
            append_trailer(&mut buf, &trailer);
            self.outgoing[path.index()].push_back(buf);
        }
    }

    /// Take a packet of a probe train; one that is not is counted as a bad
    /// probe.
    fn handle_train(&mut self, now: Instant, path: PathId, buf: &PacketBuf) {
        match Train::decode(buf.packet()) {
            Ok(train) => self
                .paths
                .handle_train(now, path, &train, buf.packet().len()),
            Err(_) => self.path_stats[path.index()].refused.bad_probe += 1,
        }
    }

    /// Take half a parity; rebuild the data packet of its run lost on the
    /// way, if it can be. A rebuilt packet goes to the reorder buffer as a
    /// repair would; its path still counts it lost, as it was.
    fn handle_parity(&mut self, now: Instant, path: PathId, buf: &PacketBuf) {
        let half = match Parity::decode(buf.packet()) {
            Ok(half) => half,
            Err(_) => {
                self.path_stats[path.index()].refused.bad_parity += 1;
                return;
            }
        };
        self.path_stats[path.index()].rx_parity += 1;
        self.paths.handle_parity(path, buf.len());
        let Some(rebuilt) = self.parity_in[path.index()].handle(now, &half) else {
            return;
        };
        let Ok((trailer, body_len)) = Trailer::decode_suffix(&rebuilt) else {
            return;
        };
        let followed = self.peer.is_some_and(|run| run.epoch == trailer.epoch);
        if trailer.kind != Kind::Data
            || !followed
            || ip::packet_len(&rebuilt[..body_len]) != Some(body_len)
        {
            return;
        }
        self.path_stats[path.index()].rebuilt += 1;
        let mut data = self.pool.take(0);
        data.extend_from_slice(&rebuilt[..body_len]);
        self.reorder_data(now, path, &trailer, data, 0);
    }

    /// Take a probe; return whether it was one.
    fn handle_probe(
        &mut self,
        now: Instant,
        path: PathId,
        trailer: &Trailer,
        buf: &PacketBuf,
    ) -> bool {
        let stats = &mut self.path_stats[path.index()];
        match Probe::decode(buf.packet()) {
            Ok(probe) => {
                stats.rx_probes += 1;
                self.paths
                    .handle_probe(now, path, &probe, trailer.paths_in_use);
                if let Some(last_sent) = trailer.previous_on_path {
                    // A run's first packets lost are missing from it too:
                    // a lone one (the acknowledgement of a flow's first
                    // flight) would otherwise show only with the next.
                    if last_sent.0 < NEW_RUN_FIRST_PACKETS {
                        self.start_peer_data(now, last_sent);
                    }
                    if self.peer.is_some_and(|run| run.data_started) {
                        self.reorder
                            .handle_path_tail(now, last_sent, trailer.congested);
                    }
                }
                true
            }
            Err(_) => {
                stats.refused.bad_probe += 1;
                false
            }
        }
    }

    /// Resend the data packets a NACK from the peer asks for, each on the
    /// path where it arrives soonest among the clean ones other than the one
    /// that lost it (among all, if none brings it before the peer stops
    /// waiting for it; on none, if none does); and a copy on the path where
    /// it arrives soonest of all, if that is sooner by more than the
    /// receiver's margin (a near lossy path beside far clean ones: the far
    /// repair would come after the receiver gave up on it).
    fn handle_nack(&mut self, now: Instant, path: PathId, buf: &PacketBuf) {
        let nack = match Nack::decode(buf.packet()) {
            Ok(nack) => nack,
            Err(_) => {
                self.path_stats[path.index()].refused.bad_nack += 1;
                return;
            }
        };
        self.path_stats[path.index()].rx_nacks += 1;
        if nack.epoch != self.epoch {
            self.stats.nacks_for_old_run += 1;
            return;
        }
        self.resend(now, nack.seqs(), ResendBy::PeerWait);
    }

    /// `path` was just marked down: resend what went on it since the
    /// newest probe the peer echoed there left, and the peer cannot know
    /// it misses (see [`SentLog::lost_with`]). The peer asks for a loss
    /// only once something sent after it arrives another way, and after
    /// the last of a flow's ACKs, say, nothing may come: the flow would
    /// wait for its retransmission timeout.
    fn resend_lost_with(&mut self, now: Instant, path: PathId) {
        let Some(since_us) = self.paths.echoed_up_to_us(path) else {
            return;
        };
        let lost = self.sent.lost_with(path, since_us as u32);
        self.resend(now, lost, ResendBy::AnyRoom);
    }

    /// Resend the packets numbered `seqs` that are in the log and were not
    /// resent already, if they come by `by`.
    fn resend(&mut self, now: Instant, seqs: impl IntoIterator<Item = Seq>, by: ResendBy) {
        let delivering = self.paths.still_delivering(now);
        let usable = self.paths.usable();
        let now_us = self.paths.micros(now) as u32;
        // A clean path's repair arriving more than this after the soonest
        // path's gets a second copy on the soonest: the receiver waits a
        // little longer than that (see `PathTable::repair_hint`), but what
        // it holds meanwhile waits too.
        let margin_us = HOLD_FLOOR.as_secs_f64() * 1e6;
        // A repair that would come after the peer stopped waiting for it
        // (the NACK took about half the least round trip, and the nearest
        // path's base delay is the other half) only delays what queues
        // behind it: the clean paths left may be small ones that a burst
        // of repairs buries seconds deep.
        let in_time_us = self
            .paths
            .repair_hint()
            .zip(self.paths.least_round_trip())
            .map(|(hint, round_trip)| hint.saturating_sub(round_trip).as_secs_f64() * 1e6);
        let in_time = |(path, arrival): (PathId, f64)| {
            in_time_us
                .is_none_or(|limit| arrival <= limit)
                .then_some((path, arrival))
        };
        // A repair later than this comes after the flow took the loss for
        // one (see `PathTable::repair_useful_us`): it still fills the hole
        // before the flow's own retransmission, if it is not dropped on the
        // way, so it goes the soonest way that has room for it, and a burst
        // of them (a dead path's packets in flight) does not overfill a
        // path.
        let useful_us = self.paths.repair_useful_us(now);
        let of_use = |(path, arrival): (PathId, f64)| {
            useful_us
                .is_none_or(|limit| arrival <= limit)
                .then_some((path, arrival))
        };
        for seq in seqs {
            let mut copy = self.pool.take(0);
            let Some((lost_on, sent_us)) =
                self.sent
                    .take_for_resend(seq)
                    .map(|(lost_on, sent_us, packet)| {
                        copy.extend_from_slice(packet);
                        (lost_on, sent_us)
                    })
            else {
                if !self.sent.holds(seq) {
                    self.stats.repairs_gone += 1;
                }
                self.pool.put(copy);
                continue;
            };
            let len = copy.len();
            // On a clean path if one brings it in time, else on any; a
            // repair that comes late there goes the soonest way with room,
            // on a clean path first; one that comes later still, only if
            // `by` lets it.
            let clean = self.paths.usable_for_repair(lost_on);
            let waited_us = in_time_us.unwrap_or(f64::INFINITY);
            let paths = self.paths.as_mut_slice();
            let scheduler = &self.scheduler;
            let soonest = |paths: &mut [Path], among| {
                scheduler
                    .pick_soonest(paths, now, len, among)
                    .and_then(in_time)
            };
            let with_room = |paths: &mut [Path], by_us| {
                scheduler
                    .pick_soonest_with_room(paths, now, len, clean, by_us)
                    .or_else(|| scheduler.pick_soonest_with_room(paths, now, len, usable, by_us))
            };
            let soonest_in_time = soonest(paths, clean).or_else(|| soonest(paths, usable));
            let Some((path, arrival)) = soonest_in_time
                .and_then(|pick| of_use(pick).or_else(|| with_room(paths, waited_us)))
                .or_else(|| match by {
                    ResendBy::PeerWait => None,
                    ResendBy::AnyRoom => with_room(paths, f64::INFINITY),
                })
            else {
                self.stats.repairs_too_late += 1;
                self.pool.put(copy);
                continue;
            };
            let paths = self.paths.as_mut_slice();
            let soonest = self
                .scheduler
                .pick_soonest(paths, now, len, usable)
                .filter(|&(p, a)| p != path && a + margin_us < arrival)
                .and_then(of_use);
            if let Some((sooner, _)) = soonest {
                let mut second = self.pool.take(0);
                second.extend_from_slice(copy.packet());
                self.queue_repair(now, sooner, seq, delivering, sent_us, second);
            }
            self.sent.resent_on(seq, path, now_us);
            self.queue_repair(now, path, seq, delivering, sent_us, copy);
        }
    }

    /// Queue the repair of packet `seq` on `path`.
    fn queue_repair(
        &mut self,
        now: Instant,
        path: PathId,
        seq: Seq,
        delivering: PathSet,
        sent_us: u32,
        buf: PacketBuf,
    ) {
        // A repair does not make its path one the receiver must wait on for
        // gaps: nothing sent after it follows it there.
        let mut carrying = delivering;
        carrying.insert(path);
        let held = Release::of(buf.packet(), self.low_latency) == Release::Held;
        let sent = Sent {
            sent_us,
            held,
            repair: true,
            could_take: self.paths.usable(),
        };
        let trailer = self.data_trailer(now, path, seq, buf.len(), carrying, sent);
        self.path_stats[path.index()].resent += 1;
        self.queue_data(now, path, &trailer, buf);
    }

    /// Account for a data packet numbered `seq` sent on `path` and return
    /// its trailer.
    fn data_trailer(
        &mut self,
        now: Instant,
        path: PathId,
        seq: Seq,
        len: usize,
        paths_in_use: PathSet,
        sent: Sent,
    ) -> Trailer {
        let charged = self
            .paths
            .charge(now, path, seq, len, sent.repair, sent.could_take);
        if sent.held && !sent.repair {
            self.paths.note_held_sent(now, path, len);
        }
        Trailer {
            seq,
            path_seq: charged.path_seq,
            epoch: self.epoch,
            sent_us: sent.sent_us,
            previous_on_path: charged.previous,
            paths_in_use,
            kind: Kind::Data,
            congested: charged.congested,
            held: sent.held,
        }
    }

    /// Queue a data packet with its trailer for `path`, and the parity of
    /// its run there if it completes one.
    fn queue_data(&mut self, now: Instant, path: PathId, trailer: &Trailer, mut buf: PacketBuf) {
        let stats = &mut self.path_stats[path.index()];
        stats.tx_packets += 1;
        stats.tx_bytes += buf.len() as u64;
        append_trailer(&mut buf, trailer);
        let full = self.paths.full(now, path);
        let run_done = self.parity_out[path.index()].add(now, trailer.path_seq, buf.packet(), full);
        self.outgoing[path.index()].push_back(buf);
        if run_done {
            self.queue_parity(now, path);
        }
    }

    /// Queue the parity of the run `path`'s encoder has, in two halves.
    fn queue_parity(&mut self, now: Instant, path: PathId) {
        let control = Trailer::control(Kind::Parity, self.epoch, self.paths.usable());
        for half in 0..2 {
            let encoder = &mut self.parity_out[path.index()];
            let mut parity = self.pool.take(0);
            parity.fill(0, encoder.half_len(), |b| encoder.write_half(half, b));
            append_trailer(&mut parity, &control);
            self.paths.charge_parity(now, path, parity.len());
            self.path_stats[path.index()].tx_parity += 1;
            self.outgoing[path.index()].push_back(parity);
        }
    }

    /// Ask the peer for the packets the reorder buffer found lost, on the
    /// paths picked for NACKs.
    fn send_nacks(&mut self) {
        let lost = self.reorder.poll_nacks();
        let Some(run) = self.peer.filter(|_| !lost.is_empty()) else {
            return;
        };
        let paths = self.paths.nack_paths();
        let trailer = Trailer::control(Kind::Nack, self.epoch, self.paths.usable());
        for chunk in lost.chunks(NACK_MAX) {
            for path in paths.iter() {
                let mut buf = self.pool.take(0);
                buf.fill(0, NACK_MAX_LEN, |b| Nack::encode(run.epoch, chunk, b));
                append_trailer(&mut buf, &trailer);
                self.path_stats[path.index()].tx_nacks += 1;
                self.outgoing[path.index()].push_back(buf);
            }
        }
    }

    /// Tell the reorder buffer what the paths' delays call for.
    fn update_hints(&mut self, now: Instant) {
        self.reorder.set_hold_hint(self.paths.hold_hint(now));
        self.reorder.set_repair_hint(self.paths.repair_hint());
        let least_round_trip = self.paths.least_round_trip();
        let spread = self.paths.equalize_wait(now, self.max_equalize);
        self.reorder.set_repair_soonest(least_round_trip);
        self.reorder
            .set_repair_patience(spread.map(|spread| spread + REPAIR_PATIENCE_MARGIN));
        self.reorder
            .set_repair_past_due(repair_past_due(least_round_trip, spread));
        for (i, encoder) in self.parity_out.iter_mut().enumerate() {
            encoder.set_run(self.paths.parity_run(now, PathId(i as u8)));
        }
    }
}

/// How late a resend may arrive and still be sent.
#[derive(Clone, Copy)]
enum ResendBy {
    /// The peer asked for it: while it waits for it, or within what the
    /// flow reads as reordering, or else on a path with room by then.
    PeerWait,
    /// A dead path took it: on whichever path has room for it, however
    /// late. The inner flow has to have it anyway, and its own
    /// retransmission of hundreds of segments takes round trips; Linux,
    /// whose retransmission timeout fires while the other paths still
    /// deliver, can take one segment per timeout for seconds.
    AnyRoom,
}

/// How a data packet is sent: when first (µs on our clock), whether the
/// peer is to hold it (see [`crate::equalize`]), whether this is a repair,
/// and which paths it could have taken.
#[derive(Clone, Copy)]
struct Sent {
    sent_us: u32,
    held: bool,
    repair: bool,
    /// The paths it could have taken: a TCP segment only TCP's.
    could_take: PathSet,
}

/// A data packet the reorder buffer holds, and when it is due once in
/// order, if it is to be held then (see [`crate::equalize`]).
struct Received {
    buf: PacketBuf,
    due: Option<Instant>,
}

fn append_trailer(buf: &mut PacketBuf, trailer: &Trailer) {
    let mut bytes = [0; TRAILER_LEN];
    trailer.encode(&mut bytes);
    buf.extend_from_slice(&bytes);
}

#[cfg(test)]
mod tests;
