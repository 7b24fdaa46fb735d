//! The receive-side reorder buffer: puts packets striped over several paths
//! back into the sender's order before they reach the TUN device.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::path::{PathId, PathSet};
use crate::seq::Seq;
use crate::wire::Trailer;

/// Limits of a [`ReorderBuffer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReorderConfig {
    /// Longest time a gap is waited for before the packets behind it are
    /// released and the gap is skipped. The wait in force adapts below this
    /// (see [`ReorderBuffer::set_hold_hint`]).
    pub hold: Duration,
    /// Most sequence numbers the buffer spans, and so most packets it holds.
    /// A packet further ahead forces the oldest gaps to be skipped.
    pub capacity: usize,
    /// How long the current sender epoch must have been silent before a
    /// packet from another epoch (a restarted peer) is taken as the new one.
    /// Shorter would let a straggler from before a restart reset the buffer
    /// again; longer delays recovery after a restart by the same amount.
    pub epoch_quiet: Duration,
}

impl Default for ReorderConfig {
    fn default() -> Self {
        ReorderConfig {
            // Covers the delay skew of paths with different queues; real
            // losses do not wait for it (see `skipped_loss`).
            hold: Duration::from_millis(100),
            // 8192 full-size packets are ~12 MB: 100 ms at 1 Gbit/s.
            capacity: 8192,
            epoch_quiet: Duration::from_millis(200),
        }
    }
}

/// What happened to a packet handed to [`ReorderBuffer::handle_packet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It is the next in order: deliver it now, then drain
    /// [`ReorderBuffer::poll_release`], which may have more.
    DeliverNow,
    /// It was copied into the buffer; it comes out of `poll_release` later.
    Buffered,
    /// It was dropped.
    Dropped(DropReason),
}

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// Older than what was already delivered or skipped: a late packet, or a
    /// copy of one already delivered.
    Stale,
    /// A copy of a packet that is still waiting in the buffer.
    Duplicate,
    /// From another sender epoch while the current one is still active.
    ForeignEpoch,
}

/// Counters of a [`ReorderBuffer`], monotonically increasing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReorderStats {
    /// Packets delivered straight through, without waiting.
    pub in_order: u64,
    /// Packets that had to wait for an earlier one.
    pub buffered: u64,
    /// Sequence numbers given up on as lost because every active path had
    /// already delivered past them.
    pub skipped_loss: u64,
    /// Sequence numbers given up on after waiting for the hold time.
    pub skipped_timeout: u64,
    /// Sequence numbers given up on because the buffer was full.
    pub skipped_overflow: u64,
    /// Sequence numbers given up on when the peer restarted.
    pub skipped_restart: u64,
    /// Packets dropped as [`DropReason::Stale`].
    pub dropped_stale: u64,
    /// Packets dropped as [`DropReason::Duplicate`].
    pub dropped_duplicate: u64,
    /// Packets dropped as [`DropReason::ForeignEpoch`].
    pub dropped_foreign_epoch: u64,
    /// Times a new sender epoch was adopted after the first.
    pub epoch_changes: u64,
    /// Lost packets asked for again (see [`ReorderBuffer::poll_nacks`]).
    pub repairs_requested: u64,
    /// Of those, gaps filled before their repair was overdue (by the
    /// repair, or by the packet itself if it was only late).
    pub repaired: u64,
    /// Lost packets not asked for because they were lost on a congested
    /// path: dropped at its queue, they are the inner flow's signal to slow
    /// down, and a repair would hide it (and hold everything behind it for
    /// a round trip through that queue).
    pub congestion_losses: u64,
}

struct Held {
    packet: Vec<u8>,
    arrived: Instant,
}

/// How long packets waited in the buffer: 0.25 ms buckets up to 250 ms,
/// then one for everything longer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HoldHistogram {
    buckets: Vec<u64>,
}

impl Default for HoldHistogram {
    fn default() -> Self {
        HoldHistogram {
            buckets: vec![0; HOLD_BUCKETS + 1],
        }
    }
}

const HOLD_BUCKET_US: u64 = 250;
const HOLD_BUCKETS: usize = 1000;

/// Time over which the hold learned from a large reordering falls most of
/// the way (1 - 1/e) back to what the gaps since call for.
const HOLD_FORGET: Duration = Duration::from_secs(10);

impl HoldHistogram {
    fn record(&mut self, held: Duration) {
        let bucket = (held.as_micros() as u64 / HOLD_BUCKET_US) as usize;
        self.buckets[bucket.min(HOLD_BUCKETS)] += 1;
    }

    /// Return the buckets that recorded a wait, as (bucket, waits): bucket
    /// `i` holds waits under `(i + 1) * 250` µs, the last one everything
    /// longer. For a reader to take differences of (see [`since`]).
    ///
    /// [`since`]: Self::since
    pub fn nonzero_buckets(&self) -> Vec<(u32, u64)> {
        self.buckets
            .iter()
            .enumerate()
            .filter(|&(_, &n)| n > 0)
            .map(|(i, &n)| (i as u32, n))
            .collect()
    }

    /// Rebuild a histogram from [`nonzero_buckets`](Self::nonzero_buckets);
    /// buckets out of range count in the last one.
    pub fn from_buckets(buckets: &[(u32, u64)]) -> Self {
        let mut histogram = HoldHistogram::default();
        for &(i, n) in buckets {
            histogram.buckets[(i as usize).min(HOLD_BUCKETS)] += n;
        }
        histogram
    }

    /// Return the waits recorded after `earlier`, a copy of this histogram
    /// taken before: the hold over a stretch of time, such as a flow's
    /// steady state without its start.
    pub fn since(&self, earlier: &HoldHistogram) -> HoldHistogram {
        HoldHistogram {
            buckets: self
                .buckets
                .iter()
                .zip(&earlier.buckets)
                .map(|(now, before)| now.saturating_sub(*before))
                .collect(),
        }
    }

    /// Return how many waits were recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Return the wait that fraction `q` (0 to 1) of the recorded waits did
    /// not exceed, to the bucket's upper edge; `None` if nothing waited.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(Duration::from_micros((i as u64 + 1) * HOLD_BUCKET_US));
            }
        }
        None
    }
}

/// Delivers packets strictly in sequence order, waiting a bounded time for
/// gaps, in bounded memory.
///
/// Sans-IO: the caller passes the current time in and asks
/// [`poll_timeout`](Self::poll_timeout) when to call
/// [`handle_timeout`](Self::handle_timeout) next.
pub struct ReorderBuffer {
    config: ReorderConfig,
    /// The sender epoch being followed and when it was last heard from.
    epoch: Option<(u32, Instant)>,
    /// Next sequence number to deliver.
    next: Seq,
    /// `window[i]` holds the packet with sequence `next + i`. The front is
    /// always empty (otherwise it would have been released) or absent.
    window: VecDeque<Option<Held>>,
    /// Arrival time and sequence of every buffered packet, oldest first; the
    /// front is the packet whose gap has waited longest. Entries whose
    /// sequence was already passed are removed lazily from the front.
    arrivals: VecDeque<(Instant, Seq)>,
    /// When each path last delivered, indexed by `PathId`.
    heard: Vec<Option<Instant>>,
    /// Highest sequence number each path has delivered, indexed by
    /// `PathId`. Each path delivers in the order it was sent (one queue, one
    /// socket, one task), so nothing earlier can still be in flight on it.
    highest: Vec<Option<Seq>>,
    /// Highest path sequence number each path has delivered.
    highest_path_seq: Vec<Option<Seq>>,
    /// Where a congested path lost packets: it skipped path sequence
    /// numbers just before a packet sent into a standing queue. Oldest
    /// first.
    congested_spans: VecDeque<CongestedSpan>,
    /// The paths the sender stripes over, as of its latest packet.
    in_use: PathSet,
    /// Packets released in order, not yet taken by the caller.
    ready: VecDeque<Vec<u8>>,
    /// Time of the call being handled, for the wait histogram.
    clock: Option<Instant>,
    /// How long buffered packets waited.
    waits: HoldHistogram,
    /// The hold the paths' measured delay spread calls for, if known.
    hint: Option<Duration>,
    /// The hold the reordering seen so far calls for: how long gaps that
    /// did get filled stayed open, with headroom; doubled when a packet
    /// arrives after its gap was given up on.
    learned: Learned,
    /// Sequence numbers recently given up on by the timer, to recognise
    /// them if they turn up late after all.
    timed_out: VecDeque<Seq>,
    /// How long a repair is expected to take, if repairs are asked for.
    repair_hint: Option<Duration>,
    /// How long the repairs seen so far took, with headroom.
    repair_learned: Learned,
    /// Every gap before this was looked at for loss evidence.
    nack_cursor: Seq,
    /// Lost sequence numbers to ask the sender for, not taken yet.
    nacks: Vec<Seq>,
    /// When the packet before the one being taken in arrived.
    last_arrival: Option<Instant>,
    /// Repairs asked for and not received yet, with when they were asked,
    /// in sequence order.
    awaiting: VecDeque<(Seq, Instant)>,
    /// Sequence numbers recently given up on while awaiting a repair, to
    /// recognise the repair if it turns up late.
    unrepaired: VecDeque<Seq>,
    /// Buffers given back by the caller, reused to avoid an allocation per
    /// buffered packet.
    spare: Vec<Vec<u8>>,
    stats: ReorderStats,
}

impl ReorderBuffer {
    /// Create an empty buffer that follows whichever epoch it hears first.
    pub fn new(config: ReorderConfig) -> Self {
        ReorderBuffer {
            config,
            epoch: None,
            next: Seq(0),
            window: VecDeque::new(),
            arrivals: VecDeque::new(),
            highest: Vec::new(),
            highest_path_seq: Vec::new(),
            congested_spans: VecDeque::new(),
            heard: Vec::new(),
            in_use: PathSet::default(),
            ready: VecDeque::new(),
            clock: None,
            waits: HoldHistogram::default(),
            hint: None,
            learned: Learned::default(),
            timed_out: VecDeque::new(),
            repair_hint: None,
            repair_learned: Learned::default(),
            nack_cursor: Seq(0),
            nacks: Vec::new(),
            last_arrival: None,
            awaiting: VecDeque::new(),
            unrepaired: VecDeque::new(),
            spare: Vec::new(),
            stats: ReorderStats::default(),
        }
    }

    /// Return the counters.
    pub fn stats(&self) -> ReorderStats {
        self.stats
    }

    /// Return the limits in force.
    pub fn config(&self) -> ReorderConfig {
        self.config
    }

    /// Give the hold the paths' measured delay spread calls for. Without a
    /// hint the buffer waits the configured maximum; with one it waits the
    /// larger of the hint and what the reordering it has seen calls for.
    pub fn set_hold_hint(&mut self, hint: Option<Duration>) {
        self.hint = hint;
    }

    /// Return how long a gap is waited for now.
    pub fn hold(&self) -> Duration {
        match self.hint {
            None => self.config.hold,
            Some(hint) => hint.max(self.learned.value).min(self.config.hold),
        }
    }

    /// Give the time a repair is expected to take (about a round trip of
    /// the fastest path), or `None` to ask for no repairs and release every
    /// loss at once.
    pub fn set_repair_hint(&mut self, hint: Option<Duration>) {
        self.repair_hint = hint;
    }

    /// Return how long a lost packet's repair is waited for, if repairs
    /// are asked for: the larger of the hint and what repairs took so far.
    pub fn repair_wait(&self) -> Option<Duration> {
        let hint = self.repair_hint?;
        Some(hint.max(self.repair_learned.value).min(self.config.hold))
    }

    /// Take the sequence numbers to ask the sender for again: each gap that
    /// every path has delivered past, once, while repairs are asked for.
    pub fn poll_nacks(&mut self) -> Vec<Seq> {
        std::mem::take(&mut self.nacks)
    }

    /// Return the sender epoch being followed.
    pub fn epoch(&self) -> Option<u32> {
        self.epoch.map(|(epoch, _)| epoch)
    }

    /// Return how long buffered packets waited before release.
    pub fn waits(&self) -> &HoldHistogram {
        &self.waits
    }

    /// Return how many packets are waiting in the buffer.
    pub fn held_len(&self) -> usize {
        self.arrivals.len()
    }

    /// Take in one authenticated packet that came on `path` with `trailer`.
    pub fn handle_packet(
        &mut self,
        now: Instant,
        path: PathId,
        trailer: &Trailer,
        packet: &[u8],
    ) -> Verdict {
        let (epoch, seq) = (trailer.epoch, trailer.seq);
        self.clock = Some(now);
        match self.epoch {
            None => self.adopt_epoch(now, epoch, seq),
            Some((current, _)) if current == epoch => {}
            Some((_, last_heard)) => {
                if now.saturating_duration_since(last_heard) < self.config.epoch_quiet {
                    self.stats.dropped_foreign_epoch += 1;
                    return Verdict::Dropped(DropReason::ForeignEpoch);
                }
                // The old epoch went quiet: the peer restarted. What it left
                // behind is still good data and goes out first.
                let end = self.next.plus(self.window.len() as u32);
                self.skip_to(end, Skip::Restart);
                self.stats.epoch_changes += 1;
                self.adopt_epoch(now, epoch, seq);
            }
        }
        self.epoch = Some((epoch, now));
        self.note_progress(now, path, trailer);
        self.request_repairs(now, Some(seq), self.hold());
        self.last_arrival = Some(now);

        let mut offset = seq.distance_from(self.next);
        if offset < 0 {
            if let Some(i) = self.timed_out.iter().position(|&s| s == seq) {
                // Given up on too early: wait longer from now on.
                self.timed_out.remove(i);
                self.learned.value =
                    (self.learned.value.max(self.hold()) * 2).min(self.config.hold);
            }
            if let Some(i) = self.unrepaired.iter().position(|&s| s == seq) {
                // A repair that took longer than waited: wait longer.
                self.unrepaired.remove(i);
                if let Some(wait) = self.repair_wait() {
                    self.repair_learned.value = (wait * 3 / 2).min(self.config.hold);
                }
            }
            self.stats.dropped_stale += 1;
            return Verdict::Dropped(DropReason::Stale);
        }
        let capacity = self.config.capacity.max(1) as i64;
        if offset >= capacity {
            // Make room by giving up on the oldest gaps: afterwards `seq`
            // is the last sequence number the window can hold.
            let new_next = Seq(seq.0.wrapping_sub(capacity as u32 - 1));
            self.skip_to(new_next, Skip::Overflow);
            offset = seq.distance_from(self.next);
        }
        let offset = offset as usize;
        let repair = self.awaiting_index(seq).ok();
        if let Some(i) = repair {
            if let Some((_, asked)) = self.awaiting.remove(i) {
                self.stats.repaired += 1;
                self.repair_learned
                    .learn(now, now.saturating_duration_since(asked));
            }
        }

        if offset == 0 {
            // A repair's wait says nothing of how far paths reorder.
            if let (Some(&(oldest, _)), None) = (self.arrivals.front(), repair) {
                self.learned
                    .learn(now, now.saturating_duration_since(oldest));
            }
            if self.ready.is_empty() {
                self.advance_past_front();
                self.stats.in_order += 1;
                return Verdict::DeliverNow;
            }
            // Earlier packets are still waiting to be taken: queue behind them.
            self.stats.in_order += 1;
            let copy = self.copy_of(packet);
            self.ready.push_back(copy);
            self.advance_past_front();
            return Verdict::Buffered;
        }

        if self.window.len() <= offset {
            self.window.resize_with(offset + 1, || None);
        }
        if self.window[offset].is_some() {
            self.stats.dropped_duplicate += 1;
            return Verdict::Dropped(DropReason::Duplicate);
        }
        let packet = self.copy_of(packet);
        self.window[offset] = Some(Held {
            packet,
            arrived: now,
        });
        self.arrivals.push_back((now, seq));
        self.stats.buffered += 1;
        self.release_losses();
        Verdict::Buffered
    }

    /// Take the next packet released in order, if any.
    pub fn poll_release(&mut self) -> Option<Vec<u8>> {
        self.ready.pop_front()
    }

    /// Give a buffer from [`poll_release`](Self::poll_release) back for reuse.
    pub fn recycle(&mut self, mut buf: Vec<u8>) {
        // Keep a few, not every buffer a burst ever needed.
        if self.spare.len() < 256 {
            buf.clear();
            self.spare.push(buf);
        }
    }

    /// Return when [`handle_timeout`](Self::handle_timeout) must next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let (at, _) = self.arrivals.front()?;
        // A lost front gap whose repair was asked for waits for the repair,
        // however long the hold.
        Some(self.repair_deadline(self.next).unwrap_or(*at + self.hold()))
    }

    /// Skip every gap that has been waited for as long as the hold time,
    /// unless its repair is still due, and every gap whose repair is
    /// overdue.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.clock = Some(now);
        // A path that died as a gap opened has been silent for about the
        // hold time when the gap's hold runs out: a little more or a little
        // less, as its last packet came just before or just after the first
        // one held. Ask for what it took with it now, or the timeout below
        // gives it up; half the hold tells a dead path from a slow one.
        self.request_repairs(now, None, self.hold() / 2);
        self.release_losses();
        loop {
            if matches!(self.window.front(), Some(None))
                && self.repair_deadline(self.next).is_some_and(|d| d <= now)
            {
                // Asked for while a path was silent, and the repair is
                // overdue.
                self.note_unrepaired(self.next);
                self.skip_to(self.next.next(), Skip::Timeout);
                self.release_losses();
                continue;
            }
            let Some(&(arrived, seq)) = self.arrivals.front() else {
                break;
            };
            if now.saturating_duration_since(arrived) < self.hold() {
                break;
            }
            // Give up on everything before the packet that waited longest
            // (it and whatever follows it contiguously are released), but
            // not on a gap whose repair is still due.
            let due = self
                .awaiting
                .iter()
                .find(|&&(gap, asked)| gap.is_before(seq) && self.repair_due(asked) > now);
            if let Some(&(gap, _)) = due {
                self.skip_to(gap, Skip::Timeout);
                break;
            }
            self.skip_to(seq, Skip::Timeout);
        }
        self.release_losses();
    }

    fn adopt_epoch(&mut self, now: Instant, epoch: u32, seq: Seq) {
        self.epoch = Some((epoch, now));
        self.next = seq;
        self.window.clear();
        self.arrivals.clear();
        self.highest.clear();
        self.highest_path_seq.clear();
        self.congested_spans.clear();
        self.heard.clear();
        self.nack_cursor = seq;
        self.nacks.clear();
        self.awaiting.clear();
        self.unrepaired.clear();
    }

    /// When the repair asked for `gap` is overdue, if it was asked for.
    fn repair_deadline(&self, gap: Seq) -> Option<Instant> {
        let &(_, asked) = self.awaiting.get(self.awaiting_index(gap).ok()?)?;
        Some(self.repair_due(asked))
    }

    /// When a repair asked for at `asked` is overdue.
    fn repair_due(&self, asked: Instant) -> Instant {
        asked + self.repair_wait().unwrap_or(Duration::ZERO)
    }

    /// Remember `gap`, given up on while its repair was awaited, to
    /// recognise the repair if it comes late.
    fn note_unrepaired(&mut self, gap: Seq) {
        if self.unrepaired.len() == 64 {
            self.unrepaired.pop_front();
        }
        self.unrepaired.push_back(gap);
    }

    /// Whether packets come densely enough for repairs: the last one came
    /// less than a repair time ago. After a longer pause the lost packet is
    /// already that old, and the packet that revealed the loss would wait a
    /// repair time for it; released at once, it does not.
    fn dense(&self, now: Instant) -> bool {
        let Some(wait) = self.repair_wait() else {
            return false;
        };
        self.last_arrival
            .is_some_and(|t| now.saturating_duration_since(t) < wait)
    }

    /// Find `gap` (not before `next`) among the awaited repairs, or where
    /// it would go: they are in sequence order, none before `next`, and
    /// there may be thousands when a path dies, so search, do not scan.
    fn awaiting_index(&self, gap: Seq) -> Result<usize, usize> {
        let key = gap.distance_from(self.next);
        self.awaiting
            .binary_search_by_key(&key, |&(s, _)| s.distance_from(self.next))
    }

    /// Ask the sender for `gap` again, unless that was done already;
    /// `awaiting` stays in sequence order.
    fn ask_repair(&mut self, gap: Seq, now: Instant) {
        if self.awaiting.len() >= MAX_AWAITING {
            return;
        }
        let Err(at) = self.awaiting_index(gap) else {
            return;
        };
        self.awaiting.insert(at, (gap, now));
        self.nacks.push(gap);
        self.stats.repairs_requested += 1;
    }

    /// Ask for a repair of every gap that every path the sender stripes
    /// over has delivered past (so it is lost), except `arriving`, the
    /// packet being taken in (`None` when none is), whose slot is not
    /// filled yet; only while packets come densely.
    ///
    /// A path silent for `quiet` while others delivered is left out: if it
    /// died, it took its packets in flight with it, and it will never
    /// deliver past them to say so. If it is only slow, its packet comes
    /// twice, and the first copy fills the gap.
    fn request_repairs(&mut self, now: Instant, arriving: Option<Seq>, quiet: Duration) {
        let dense = self.dense(now);
        // When a burst starts after a pause, every path has been silent,
        // and none of them is dead for it: a path is silent only if others
        // went on delivering after it stopped, for half of `quiet` at least.
        let talked_until = self.last_arrival.unwrap_or(now);
        let silent = |heard: Instant| {
            now.saturating_duration_since(heard) >= quiet
                && talked_until.saturating_duration_since(heard) >= quiet / 2
        };
        let mut evident: Option<Seq> = None;
        for p in self.in_use.iter() {
            let heard = self.heard.get(p.index()).copied().flatten();
            if heard.is_none_or(silent) {
                continue;
            }
            let Some(h) = self.highest.get(p.index()).copied().flatten() else {
                continue;
            };
            evident = Some(match evident {
                Some(e) if e.is_before(h) => e,
                _ => h,
            });
        }
        let Some(evident) = evident else {
            return;
        };
        if self.nack_cursor.is_before(self.next) {
            self.nack_cursor = self.next;
        }
        while self.nack_cursor.is_before(evident) {
            let gap = self.nack_cursor;
            self.nack_cursor = gap.next();
            let offset = gap.distance_from(self.next) as usize;
            let filled = matches!(self.window.get(offset), Some(Some(_)));
            if filled || Some(gap) == arriving {
                continue;
            }
            let congestion = self.take_congestion_loss(gap);
            if dense && congestion {
                self.stats.congestion_losses += 1;
            } else if dense {
                self.ask_repair(gap, now);
            }
        }
    }

    /// Whether `gap` lies where a congested path lost packets, and is one
    /// of as many gaps there as it lost: a loss on another path may fall in
    /// the same stretch, and is repaired unless it comes first.
    ///
    /// Gaps come here in order, so each takes the span that ends first
    /// among those around it: congested paths' spans overlap, and a gap
    /// charged to a wider span would leave a later loss there, past the
    /// narrower one's end, with nothing to excuse it.
    fn take_congestion_loss(&mut self, gap: Seq) -> bool {
        let span = self
            .congested_spans
            .iter_mut()
            .filter(|s| s.missing > 0 && s.after.is_before(gap) && gap.is_before(s.before))
            .min_by_key(|s| s.before.distance_from(gap));
        if let Some(span) = span {
            span.missing -= 1;
            return true;
        }
        false
    }

    fn note_progress(&mut self, now: Instant, path: PathId, trailer: &Trailer) {
        let i = path.index();
        if self.highest.len() <= i {
            self.highest.resize(i + 1, None);
            self.highest_path_seq.resize(i + 1, None);
            self.heard.resize(i + 1, None);
        }
        self.heard[i] = Some(now);
        let previous = self.highest_path_seq[i];
        if previous.is_none_or(|h| h.is_before(trailer.path_seq)) {
            self.highest_path_seq[i] = Some(trailer.path_seq);
        }
        if let (true, Some(prev_path_seq), Some(prev_seq)) =
            (trailer.congested, previous, self.highest[i])
        {
            // Packets sent on this path between the last one it delivered
            // and this one are missing; this one met a standing queue, and
            // so, most likely, did they: they were dropped there.
            let skipped = trailer.path_seq.distance_from(prev_path_seq) - 1;
            if skipped > 0 {
                if self.congested_spans.len() == MAX_CONGESTED_SPANS {
                    self.congested_spans.pop_front();
                }
                self.congested_spans.push_back(CongestedSpan {
                    after: prev_seq,
                    before: trailer.seq,
                    missing: u32::try_from(skipped).unwrap_or(u32::MAX),
                });
            }
        }
        let highest = &mut self.highest[i];
        if highest.is_none_or(|h| h.is_before(trailer.seq)) {
            *highest = Some(trailer.seq);
        }
        if self
            .highest_seen()
            .is_none_or(|h| !trailer.seq.is_before(h))
        {
            self.in_use = trailer.paths_in_use;
        }
    }

    fn highest_seen(&self) -> Option<Seq> {
        self.highest
            .iter()
            .flatten()
            .copied()
            .reduce(|a, b| if a.is_before(b) { b } else { a })
    }

    /// Skip gaps that cannot be filled any more: every path the sender
    /// stripes over has already delivered something later. A path it stripes
    /// over but that never delivers is waited for until the hold time.
    fn release_losses(&mut self) {
        while matches!(self.window.front(), Some(None)) {
            let gap = self.next;
            let highest = &self.highest;
            let all_past = self.in_use.iter().all(|p| {
                highest
                    .get(p.index())
                    .copied()
                    .flatten()
                    .is_some_and(|h| gap.is_before(h))
            });
            if !all_past {
                break;
            }
            if let Some(due) = self.repair_deadline(gap) {
                if self.clock.is_some_and(|now| now < due) {
                    break; // its repair may still come
                }
                self.note_unrepaired(gap);
            }
            self.skip_to(gap.next(), Skip::Loss);
        }
    }

    fn copy_of(&mut self, packet: &[u8]) -> Vec<u8> {
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.extend_from_slice(packet);
        buf
    }

    /// Move `next` forward to `target`, releasing what is held on the way and
    /// counting the gaps given up on, then release what follows contiguously.
    fn skip_to(&mut self, target: Seq, why: Skip) {
        while self.next.is_before(target) {
            match self.window.pop_front() {
                Some(Some(held)) => self.release(held),
                Some(None) | None => match why {
                    Skip::Loss => self.stats.skipped_loss += 1,
                    Skip::Timeout => {
                        self.stats.skipped_timeout += 1;
                        if self.timed_out.len() == 64 {
                            self.timed_out.pop_front();
                        }
                        self.timed_out.push_back(self.next);
                    }
                    Skip::Overflow => self.stats.skipped_overflow += 1,
                    Skip::Restart => self.stats.skipped_restart += 1,
                },
            }
            self.next = self.next.next();
        }
        self.release_contiguous();
    }

    fn release(&mut self, held: Held) {
        if let Some(now) = self.clock {
            self.waits
                .record(now.saturating_duration_since(held.arrived));
        }
        self.ready.push_back(held.packet);
    }

    /// Step over the (empty) front slot for the packet just delivered.
    fn advance_past_front(&mut self) {
        self.window.pop_front();
        self.next = self.next.next();
        self.release_contiguous();
        self.release_losses();
    }

    fn release_contiguous(&mut self) {
        while let Some(Some(_)) = self.window.front() {
            if let Some(Some(held)) = self.window.pop_front() {
                self.release(held);
            }
            self.next = self.next.next();
        }
        while let Some(&(_, seq)) = self.arrivals.front() {
            if seq.is_before(self.next) {
                self.arrivals.pop_front();
            } else {
                break;
            }
        }
        while let Some(span) = self.congested_spans.front() {
            if span.before.is_before(self.next) {
                self.congested_spans.pop_front();
            } else {
                break;
            }
        }
        while let Some(&(seq, _)) = self.awaiting.front() {
            if seq.is_before(self.next) {
                self.awaiting.pop_front();
            } else {
                break;
            }
        }
    }
}

/// Most repairs awaited at once: half the default window, more than a path
/// that dies takes down with it; beyond this, losses are released at once.
const MAX_AWAITING: usize = 4096;

/// Most spans of congestion losses remembered; a span is forgotten once
/// delivery has passed it.
const MAX_CONGESTED_SPANS: usize = 256;

/// Sequence numbers strictly between `after` and `before` among which a
/// congested path lost `missing` packets.
struct CongestedSpan {
    after: Seq,
    before: Seq,
    missing: u32,
}

/// A wait learned from how long gaps stayed open: raised at once by a longer
/// one, brought down towards shorter ones over [`HOLD_FORGET`].
#[derive(Clone, Copy, Default)]
struct Learned {
    value: Duration,
    at: Option<Instant>,
}

impl Learned {
    /// Learn from a gap filled at `now` after staying open for `open`.
    fn learn(&mut self, now: Instant, open: Duration) {
        let target = open * 5 / 4 + Duration::from_millis(1);
        let elapsed = self
            .at
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        self.at = Some(now);
        if target > self.value {
            self.value = target;
        } else {
            // Forget over seconds, not over packets: at tens of thousands of
            // gaps a second, forgetting per gap undid a lesson within
            // milliseconds, and the next late packet was lost again.
            let fraction = (elapsed.as_secs_f64() / HOLD_FORGET.as_secs_f64()).min(1.0);
            self.value -= (self.value - target).mul_f64(fraction);
        }
    }
}

#[derive(Clone, Copy)]
enum Skip {
    Loss,
    Timeout,
    Overflow,
    Restart,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Kind;

    const EPOCH: u32 = 7;
    const P0: PathId = PathId(0);
    const P1: PathId = PathId(1);

    struct Harness {
        buf: ReorderBuffer,
        start: Instant,
        in_use: PathSet,
        delivered: Vec<u32>,
    }

    impl Harness {
        /// A buffer with the default config whose sender can resend lost
        /// packets, 10 ms away.
        fn repairing() -> Self {
            let mut h = Harness::new(config());
            h.buf.set_repair_hint(Some(Duration::from_millis(10)));
            h
        }

        /// A buffer whose sender stripes over paths 0 and 1.
        fn new(config: ReorderConfig) -> Self {
            Harness {
                buf: ReorderBuffer::new(config),
                start: Instant::now(),
                in_use: PathSet(0b11),
                delivered: Vec::new(),
            }
        }

        fn at(&self, ms: u64) -> Instant {
            self.start + Duration::from_millis(ms)
        }

        /// Feed a packet whose payload is its own sequence number.
        fn feed_from(&mut self, ms: u64, path: PathId, epoch: u32, seq: u32) -> Verdict {
            let trailer = Trailer {
                seq: Seq(seq),
                path_seq: Seq(0),
                epoch,
                paths_in_use: self.in_use,
                kind: Kind::Data,
                congested: false,
            };
            self.feed_trailer(ms, path, trailer)
        }

        /// Feed a packet sent into a standing queue on `path`, as its
        /// `path_seq`th packet there.
        fn feed_congested(&mut self, ms: u64, path: PathId, seq: u32, path_seq: u32) -> Verdict {
            let trailer = Trailer {
                seq: Seq(seq),
                path_seq: Seq(path_seq),
                epoch: EPOCH,
                paths_in_use: self.in_use,
                kind: Kind::Data,
                congested: true,
            };
            self.feed_trailer(ms, path, trailer)
        }

        fn feed_trailer(&mut self, ms: u64, path: PathId, trailer: Trailer) -> Verdict {
            let now = self.at(ms);
            let seq = trailer.seq.0;
            let verdict = self
                .buf
                .handle_packet(now, path, &trailer, &seq.to_be_bytes());
            if verdict == Verdict::DeliverNow {
                self.delivered.push(seq);
            }
            self.drain();
            verdict
        }

        fn feed(&mut self, ms: u64, path: PathId, seq: u32) -> Verdict {
            self.feed_from(ms, path, EPOCH, seq)
        }

        /// Feed the repair of `seq` at `ms`, and check that everything
        /// up to `end` is then delivered in order, nothing given up.
        fn repair_arrives(&mut self, ms: u64, seq: u32, end: u32) {
            self.feed(ms, P0, seq);
            self.drain();
            assert_eq!(self.delivered, (0..end).collect::<Vec<_>>());
            let stats = self.buf.stats();
            assert_eq!((stats.repaired, stats.skipped_timeout), (1, 0));
        }

        fn tick(&mut self, ms: u64) {
            self.buf.handle_timeout(self.at(ms));
            self.drain();
        }

        fn drain(&mut self) {
            while let Some(p) = self.buf.poll_release() {
                self.delivered
                    .push(u32::from_be_bytes(p[..4].try_into().unwrap()));
                self.buf.recycle(p);
            }
        }
    }

    fn config() -> ReorderConfig {
        ReorderConfig {
            hold: Duration::from_millis(20),
            capacity: 64,
            epoch_quiet: Duration::from_millis(100),
        }
    }

    #[test]
    fn in_order_packets_pass_straight_through() {
        let mut h = Harness::new(config());
        for seq in 100..110 {
            let path = PathId((seq % 2) as u8);
            assert_eq!(h.feed(0, path, seq), Verdict::DeliverNow);
        }
        assert_eq!(h.delivered, (100..110).collect::<Vec<_>>());
        assert_eq!(h.buf.stats().in_order, 10);
        assert_eq!(h.buf.poll_timeout(), None);
    }

    #[test]
    fn slow_path_is_waited_for_and_order_restored() {
        let mut h = Harness::new(config());
        // Even numbers on the fast path 0, odd ones on the slow path 1.
        h.feed(0, P0, 0);
        assert_eq!(h.feed(1, P0, 2), Verdict::Buffered);
        assert_eq!(h.feed(1, P0, 4), Verdict::Buffered);
        assert_eq!(h.buf.held_len(), 2);
        assert_eq!(h.feed(9, P1, 1), Verdict::DeliverNow);
        assert_eq!(h.feed(10, P1, 3), Verdict::DeliverNow);
        assert_eq!(h.delivered, vec![0, 1, 2, 3, 4]);
        assert_eq!(h.buf.held_len(), 0);
        assert_eq!(h.buf.poll_timeout(), None);
        let stats = h.buf.stats();
        assert_eq!((stats.in_order, stats.buffered), (3, 2));
        assert_eq!(stats.skipped_loss + stats.skipped_timeout, 0);
    }

    #[test]
    fn loss_is_released_at_once_when_every_path_has_passed_it() {
        let mut h = Harness::new(config());
        h.feed(0, P0, 0);
        // 1 was sent on path 1 and lost there.
        h.feed(1, P0, 2);
        h.feed(1, P0, 4);
        assert_eq!(h.delivered, vec![0], "path 1 has not passed 1 yet");
        // Path 1 delivers 3: it can no longer deliver 1, so 1 is lost.
        h.feed(2, P1, 3);
        assert_eq!(h.delivered, vec![0, 2, 3, 4]);
        let stats = h.buf.stats();
        assert_eq!((stats.skipped_loss, stats.skipped_timeout), (1, 0));
        assert_eq!(h.buf.poll_timeout(), None);
    }

    #[test]
    fn a_lost_packet_is_asked_for_once_and_waited_for_until_repaired() {
        let mut h = Harness::repairing();
        h.feed(0, P1, 0);
        h.feed(1, P0, 2);
        h.feed(1, P0, 4);
        assert!(h.buf.poll_nacks().is_empty(), "path 1 may still bring 1");
        h.feed(2, P1, 3);
        assert_eq!(h.buf.poll_nacks(), vec![Seq(1)]);
        assert_eq!(h.delivered, vec![0], "released before its repair was due");
        assert_eq!(h.buf.poll_timeout(), Some(h.at(12)));
        h.feed(3, P1, 5);
        assert!(h.buf.poll_nacks().is_empty(), "asked twice");
        // The repair comes on path 0, behind what that path delivered.
        h.feed(8, P0, 1);
        h.drain();
        assert_eq!(h.delivered, vec![0, 1, 2, 3, 4, 5]);
        let stats = h.buf.stats();
        assert_eq!((stats.repairs_requested, stats.repaired), (1, 1));
        assert_eq!((stats.skipped_loss, stats.skipped_timeout), (0, 0));
        // Its 6 ms wait did not teach the buffer to hold reorderings longer.
        assert_eq!(h.buf.hold(), config().hold);
        h.buf.set_hold_hint(Some(Duration::from_millis(2)));
        assert_eq!(h.buf.hold(), Duration::from_millis(2));
    }

    #[test]
    fn an_overdue_repair_releases_its_gap_as_a_loss_and_lengthens_the_wait() {
        let mut h = Harness::repairing();
        h.feed(0, P1, 0);
        h.feed(1, P0, 3);
        h.feed(2, P1, 4);
        assert_eq!(h.buf.poll_nacks(), vec![Seq(1), Seq(2)], "not one by one");
        h.tick(11);
        assert_eq!(h.delivered, vec![0]);
        h.tick(12);
        assert_eq!(h.delivered, vec![0, 3, 4]);
        let stats = h.buf.stats();
        assert_eq!((stats.skipped_loss, stats.skipped_timeout), (2, 0));
        assert_eq!(h.buf.poll_timeout(), None);
        // The repair of 1 comes after all: the next wait is longer.
        assert_eq!(h.feed(20, P0, 1), Verdict::Dropped(DropReason::Stale));
        assert_eq!(h.buf.repair_wait(), Some(Duration::from_millis(15)));
    }

    #[test]
    fn a_loss_found_after_a_pause_is_released_not_repaired() {
        let mut h = Harness::repairing();
        h.feed(0, P0, 0);
        // Sparse traffic, as a ping: 1 was lost on path 1 long ago, and
        // waiting a repair for it would only delay 2 and 3.
        h.feed(50, P0, 2);
        h.feed(100, P1, 3);
        assert!(h.buf.poll_nacks().is_empty());
        assert_eq!(h.delivered, vec![0, 2, 3]);
    }

    #[test]
    fn a_gap_a_silent_path_left_is_asked_for_before_the_hold_time_runs_out() {
        // Path 1 died with 1 in flight: it will never deliver past it to
        // say it is lost, so its silence has to.
        let mut h = Harness::repairing();
        h.feed(0, P1, 0);
        for seq in 2..21 {
            h.feed(seq as u64 - 1, P0, seq);
        }
        assert!(
            h.buf.poll_nacks().is_empty(),
            "asked while path 1 may bring it"
        );
        h.feed(20, P0, 21);
        assert_eq!(h.buf.poll_nacks(), vec![Seq(1)]);
        h.tick(21);
        assert_eq!(h.delivered, vec![0], "given up at the hold time");
        h.repair_arrives(26, 1, 22);
    }

    #[test]
    fn a_silent_path_whose_gap_times_out_between_packets_still_gets_it_asked_for() {
        // 3 came on path 0 and waits for 1 and 2; path 1 brings 1 two
        // milliseconds later, then dies with 2. When 3 has waited the hold
        // time, path 1 has been silent a little less than that, and no
        // packet comes in that moment to notice: the timer must ask for 2
        // rather than give it up.
        let mut h = Harness::repairing();
        h.feed(0, P1, 0);
        h.feed(0, P0, 3);
        h.feed(2, P1, 1);
        for seq in 4..16 {
            h.feed(seq as u64 - 3, P0, seq);
        }
        assert_eq!(h.buf.poll_timeout(), Some(h.at(20)));
        h.tick(20);
        assert_eq!(h.buf.poll_nacks(), vec![Seq(2)]);
        assert_eq!(h.delivered, vec![0, 1], "given up at the hold time");
        h.repair_arrives(25, 2, 16);
    }

    #[test]
    fn a_loss_at_a_congested_path_s_queue_is_left_to_the_inner_flow() {
        // 1 went on path 1 and was dropped at its standing queue, as the
        // next packet there (3, path 1's third) says: the inner flow must
        // see that loss to slow down, so it is released at once.
        let mut h = Harness::repairing();
        h.feed(0, P1, 0);
        h.feed(1, P0, 2);
        h.feed_congested(2, P1, 3, 2);
        assert!(h.buf.poll_nacks().is_empty(), "asked for a congestion loss");
        assert_eq!(h.delivered, vec![0, 2, 3]);
        let stats = h.buf.stats();
        assert_eq!((stats.congestion_losses, stats.skipped_loss), (1, 1));
        assert_eq!(stats.repairs_requested, 0);
        // A later loss on path 0, which has no queue, is asked for.
        h.feed(3, P0, 5);
        h.feed_congested(4, P1, 6, 3);
        assert_eq!(h.buf.poll_nacks(), vec![Seq(4)]);
    }

    #[test]
    fn a_congested_path_excuses_only_as_many_gaps_as_it_lost() {
        // Path 1 skipped one number before 4 (it lost 1 at its queue); 2,
        // lost on path 0 in the same stretch, is still asked for.
        let mut h = Harness::repairing();
        h.feed(0, P1, 0);
        h.feed(1, P0, 3);
        h.feed(1, P0, 5);
        h.feed_congested(2, P1, 4, 2);
        assert_eq!(h.buf.poll_nacks(), vec![Seq(2)]);
        assert_eq!(h.buf.stats().congestion_losses, 1);
        assert_eq!(h.delivered, vec![0], "2 is awaited");
    }

    #[test]
    fn overlapping_congestion_spans_excuse_every_loss_they_account_for() {
        // Both paths are congested and each loses one packet: 2 on path 0,
        // 4 on path 1. Path 1's span (0..5) is learned first and also
        // covers 2; charging 2 to it would leave 4 unexcused.
        let mut h = Harness::repairing();
        h.feed(0, P1, 0);
        h.feed(0, P0, 1);
        h.feed_congested(1, P1, 5, 2);
        h.feed_congested(1, P0, 3, 2);
        h.feed(2, P0, 6);
        assert!(h.buf.poll_nacks().is_empty(), "asked for a congestion loss");
        assert_eq!(h.buf.stats().congestion_losses, 2);
        assert_eq!(h.delivered, vec![0, 1, 3, 5, 6]);
    }

    #[test]
    fn a_burst_after_a_pause_does_not_make_the_other_path_look_dead() {
        // Both paths went quiet together for 5 ms, longer than the 2 ms
        // hold; the next burst's first packet comes on path 1, while 2 is
        // still on its way on path 0.
        let mut h = Harness::repairing();
        h.buf.set_hold_hint(Some(Duration::from_millis(2)));
        h.feed(0, P0, 0);
        h.feed(0, P1, 1);
        h.feed(5, P1, 3);
        assert!(
            h.buf.poll_nacks().is_empty(),
            "asked for a packet in flight"
        );
        h.feed(6, P0, 2);
        assert_eq!(h.delivered, vec![0, 1, 2, 3]);
        assert_eq!(h.buf.stats().repairs_requested, 0);
    }

    #[test]
    fn without_a_repair_hint_nothing_is_asked_for() {
        let mut h = Harness::new(config());
        h.feed(0, P0, 0);
        h.feed(1, P0, 2);
        h.feed(2, P1, 3);
        assert!(h.buf.poll_nacks().is_empty());
        assert_eq!(h.delivered, vec![0, 2, 3]);
    }

    #[test]
    fn a_path_the_sender_does_not_use_is_not_waited_for() {
        let mut h = Harness::new(config());
        h.in_use = PathSet(0b01);
        h.feed(0, P0, 0);
        h.feed(1, P0, 2);
        assert_eq!(h.delivered, vec![0, 2]);
        assert_eq!(h.buf.stats().skipped_loss, 1);
    }

    #[test]
    fn gap_is_skipped_after_the_hold_time_and_not_before() {
        let mut h = Harness::new(config());
        // Path 1 goes silent: its gaps are only given up on by the timer.
        h.feed(0, P0, 0);
        h.feed(5, P0, 2);
        h.feed(8, P0, 4);
        assert_eq!(h.buf.poll_timeout(), Some(h.at(25)));
        h.tick(24);
        assert_eq!(h.delivered, vec![0], "released before the hold time");
        h.tick(25);
        // 1 is given up on; 2 comes out; 3 is a new gap whose clock started
        // when 4 arrived.
        assert_eq!(h.delivered, vec![0, 2]);
        assert_eq!(h.buf.poll_timeout(), Some(h.at(28)));
        h.tick(28);
        assert_eq!(h.delivered, vec![0, 2, 4]);
        assert_eq!(h.buf.stats().skipped_timeout, 2);
        // The skipped packet turning up late is not delivered out of order.
        assert_eq!(h.feed(30, P1, 1), Verdict::Dropped(DropReason::Stale));
        assert_eq!(h.feed(30, P1, 5), Verdict::DeliverNow);
    }

    #[test]
    fn waits_are_recorded_for_the_hold_time_quantiles() {
        let mut h = Harness::new(config());
        h.feed(0, P0, 0);
        h.feed(0, P0, 2); // waits 3 ms for 1
        h.feed(3, P1, 1);
        h.feed(3, P0, 4); // waits until the 20 ms hold runs out
        h.tick(23);
        let waits = h.buf.waits();
        assert_eq!(waits.count(), 2);
        assert_eq!(waits.quantile(0.5), Some(Duration::from_micros(3250)));
        assert_eq!(waits.quantile(0.99), Some(Duration::from_micros(20250)));
    }

    #[test]
    fn the_waits_of_a_stretch_of_time_are_the_difference_of_two_copies() {
        let mut h = Harness::new(config());
        h.feed(0, P0, 0);
        h.feed(0, P0, 2);
        h.feed(15, P1, 1); // 2 waited 15 ms
        let start = HoldHistogram::from_buckets(&h.buf.waits().nonzero_buckets());
        assert_eq!(&start, h.buf.waits());
        h.feed(15, P0, 4);
        h.feed(16, P1, 3); // 4 waited 1 ms
        let later = h.buf.waits().since(&start);
        assert_eq!(later.count(), 1);
        assert_eq!(later.quantile(0.99), Some(Duration::from_micros(1250)));
        assert_eq!(
            h.buf.waits().quantile(0.99),
            Some(Duration::from_micros(15250))
        );
    }

    #[test]
    fn hold_adapts_to_the_reordering_seen_within_the_configured_maximum() {
        let mut h = Harness::new(config());
        h.buf.set_hold_hint(Some(Duration::from_millis(2)));
        assert_eq!(h.buf.hold(), Duration::from_millis(2));
        // A gap filled after 4 ms: wait 4 * 1.25 + 1 = 6 ms from now on.
        h.feed(0, P0, 0);
        h.feed(10, P0, 2);
        h.feed(14, P1, 1);
        assert_eq!(h.buf.hold(), Duration::from_millis(6));
        // A gap given up on at 6 ms whose packet then turns up: double it.
        h.feed(20, P0, 4);
        h.tick(26);
        assert_eq!(h.delivered, vec![0, 1, 2, 4]);
        assert_eq!(h.feed(27, P1, 3), Verdict::Dropped(DropReason::Stale));
        assert_eq!(h.buf.hold(), Duration::from_millis(12));
        // Never past the configured maximum.
        for k in 0..10u32 {
            let base = 100 + k * 4;
            h.feed(u64::from(base), P0, 6 + k * 2);
        }
        h.tick(1000);
        assert!(h.buf.hold() <= Duration::from_millis(20));
    }

    #[test]
    fn a_learned_hold_is_forgotten_over_seconds_not_packets() {
        let mut h = Harness::new(config());
        h.buf.set_hold_hint(Some(Duration::from_millis(2)));
        // A gap filled after 8 ms: wait 11 ms from now on.
        h.feed(0, P0, 0);
        h.feed(1, P0, 2);
        h.feed(9, P1, 1);
        assert_eq!(h.buf.hold(), Duration::from_millis(11));
        // A thousand small reorderings in the next second (two packets
        // swapped, filled at once) leave most of the lesson in place...
        let mut seq = 3;
        let mut swap_pair = |h: &mut Harness, ms: u64| {
            h.feed(ms, P1, seq + 1);
            h.feed(ms, P0, seq);
            seq += 2;
        };
        for ms in 10..1010 {
            swap_pair(&mut h, ms);
        }
        let after_1s = h.buf.hold();
        assert!(after_1s >= Duration::from_millis(9), "{after_1s:?}");
        // ...and half a minute of them brings the hold back down.
        for k in 0..3000u64 {
            swap_pair(&mut h, 1010 + k * 10);
        }
        assert!(
            h.buf.hold() <= Duration::from_millis(3),
            "{:?}",
            h.buf.hold()
        );
    }

    #[test]
    fn duplicates_and_replays_are_dropped_and_counted() {
        let mut h = Harness::new(config());
        h.feed(0, P0, 10);
        h.feed(0, P0, 12);
        assert_eq!(h.feed(1, P0, 12), Verdict::Dropped(DropReason::Duplicate));
        h.feed(1, P1, 11);
        // Already delivered: a copy arriving on another path is stale.
        assert_eq!(h.feed(2, P1, 10), Verdict::Dropped(DropReason::Stale));
        assert_eq!(h.feed(2, P0, 12), Verdict::Dropped(DropReason::Stale));
        assert_eq!(h.delivered, vec![10, 11, 12]);
        let stats = h.buf.stats();
        assert_eq!((stats.dropped_duplicate, stats.dropped_stale), (1, 2));
    }

    #[test]
    fn a_packet_beyond_capacity_skips_the_oldest_gaps() {
        let mut h = Harness::new(config());
        h.feed(0, P0, 0);
        h.feed(0, P0, 2);
        // 0 delivered, next is 1, window holds 1..=64; 70 needs next = 7.
        h.feed(1, P0, 70);
        assert_eq!(h.delivered, vec![0, 2]);
        assert_eq!(h.buf.stats().skipped_overflow, 5); // 1, 3, 4, 5, 6
        assert_eq!(h.buf.held_len(), 1);
        assert!(h.buf.window.len() <= 64);
    }

    #[test]
    fn memory_stays_bounded_under_a_flood_of_far_ahead_packets() {
        let mut h = Harness::new(config());
        h.feed(0, P0, 0);
        for seq in (2..100_000).step_by(2) {
            h.feed(1, P0, seq);
            assert!(h.buf.held_len() <= 64);
            assert!(h.buf.window.len() <= 64);
        }
    }

    #[test]
    fn order_holds_across_sequence_wrap_around() {
        let mut h = Harness::new(config());
        let start = u32::MAX - 3;
        let path_of = |seq: u32| PathId((seq % 2) as u8);
        h.feed(0, path_of(start), start);
        // Each odd-numbered packet overtakes the even one before it.
        let seqs: Vec<u32> = (1..9).map(|i| start.wrapping_add(i)).collect();
        for pair in seqs.chunks(2) {
            for &s in pair.iter().rev() {
                h.feed(1, path_of(s), s);
            }
        }
        let mut expected = vec![start];
        expected.extend(&seqs);
        assert_eq!(h.delivered, expected);
        let stats = h.buf.stats();
        assert_eq!(stats.skipped_loss + stats.skipped_timeout, 0);
    }

    #[test]
    fn follows_a_restarted_peer_after_the_old_epoch_goes_quiet() {
        let mut h = Harness::new(config());
        for seq in 5000..5003 {
            h.feed(0, P0, seq);
        }
        h.feed(1, P0, 5004); // 5003 was on path 1 and lost in the crash
                             // The restarted peer counts from zero under a new epoch. Too soon
                             // after the old epoch was heard: could be a straggler, dropped.
        assert_eq!(
            h.feed_from(50, P0, 8, 0),
            Verdict::Dropped(DropReason::ForeignEpoch)
        );
        // Once the old epoch has been quiet long enough, the new one wins and
        // what the old one left behind is delivered first (so the new packet
        // queues behind it rather than going out at once).
        assert_eq!(h.feed_from(101, P0, 8, 1), Verdict::Buffered);
        assert_eq!(h.feed_from(102, P1, 8, 2), Verdict::DeliverNow);
        assert_eq!(h.delivered, vec![5000, 5001, 5002, 5004, 1, 2]);
        let stats = h.buf.stats();
        assert_eq!(stats.epoch_changes, 1);
        assert_eq!(stats.skipped_restart, 1);
        assert_eq!(stats.dropped_foreign_epoch, 1);
        // A straggler from the dead epoch is now the foreign one.
        assert_eq!(
            h.feed_from(103, P1, EPOCH, 5005),
            Verdict::Dropped(DropReason::ForeignEpoch)
        );
    }

    #[test]
    fn in_order_packet_waits_behind_released_ones_not_taken_yet() {
        let mut buf = ReorderBuffer::new(config());
        let t = Instant::now();
        let trailer = |seq| Trailer {
            seq: Seq(seq),
            path_seq: Seq(0),
            epoch: EPOCH,
            paths_in_use: PathSet(0b11),
            kind: Kind::Data,
            congested: false,
        };
        buf.handle_packet(t, P0, &trailer(0), b"a");
        buf.handle_packet(t, P0, &trailer(2), b"c");
        assert_eq!(
            buf.handle_packet(t, P1, &trailer(1), b"b"),
            Verdict::DeliverNow
        );
        // "c" is released but not taken; "d" must queue behind it.
        assert_eq!(
            buf.handle_packet(t, P1, &trailer(3), b"d"),
            Verdict::Buffered
        );
        assert_eq!(buf.poll_release().as_deref(), Some(&b"c"[..]));
        assert_eq!(buf.poll_release().as_deref(), Some(&b"d"[..]));
        assert_eq!(buf.poll_release(), None);
    }
}
