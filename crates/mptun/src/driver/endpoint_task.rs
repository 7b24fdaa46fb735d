//! The endpoint task: owns the [`Endpoint`] and the TUN device, and moves
//! batches between them and the path workers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mptun_core::{BufPool, Endpoint, PacketBuf, PathChange, PathEvent, PathId, PathState, WaitEnd};
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::shared::{
    buf_capacity, now, PathInfo, Reconfigure, ToEndpoint, ToPath, TunCounters, HEADROOM, TUN_BATCH,
};
use crate::config::Config;
use crate::io::TunDevice;
use crate::mtu::TunMtu;
use crate::status::{
    PathStatus, ReorderStatus, Status, StatusRequest, TunStatus, WaitBucketsByEnd,
};

/// How often a path down for long is offered a fresh WireGuard handshake.
const REHANDSHAKE_EVERY: Duration = Duration::from_secs(1);
/// Buffers kept for reading the TUN device.
const POOL_KEEP: usize = 4096;
/// Reads of the TUN device that may fail in a row before it is taken for
/// gone (deleted under us), 10 ms apart.
const TUN_FAILURES_MAX: u32 = 100;
/// Batch vectors kept for reuse.
const SPARE_BATCHES: usize = 64;

/// The endpoint task.
pub(super) struct EndpointTask<T> {
    pub config: Arc<Config>,
    pub endpoint: Endpoint,
    pub mtu: TunMtu,
    pub tun: T,
    pub paths: Vec<Arc<PathInfo>>,
    pub to_paths: Vec<mpsc::Sender<ToPath>>,
    pub from_paths: mpsc::Receiver<ToEndpoint>,
    pub status: mpsc::Receiver<StatusRequest>,
    pub reconfigure: mpsc::Receiver<Reconfigure>,
    pub started: Instant,
    /// Per path: times it stopped carrying data, and when its state last
    /// changed.
    pub changes: Vec<(u64, Option<Instant>)>,
}

/// What the endpoint task keeps between events.
struct State {
    pool: BufPool,
    counters: TunCounters,
    /// Packets read from the TUN device.
    read: Vec<PacketBuf>,
    /// Packets for the TUN device.
    delivered: Vec<PacketBuf>,
    /// Empty batch vectors, to send the next batches in.
    spare_batches: Vec<Vec<PacketBuf>>,
    /// TUN reads failed in a row.
    tun_failures: u32,
}

impl<T: TunDevice> EndpointTask<T> {
    /// Run until the TUN device fails for good or every path worker is gone.
    pub async fn run(mut self) -> anyhow::Result<()> {
        let mut state = State {
            pool: BufPool::new(buf_capacity(self.mtu.mtu), POOL_KEEP),
            counters: TunCounters::default(),
            read: Vec::with_capacity(TUN_BATCH),
            delivered: Vec::with_capacity(TUN_BATCH),
            spare_batches: Vec::new(),
            tun_failures: 0,
        };
        let mut rehandshake = tokio::time::interval(REHANDSHAKE_EVERY);
        rehandshake.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let deadline = self.endpoint.poll_timeout();
            tokio::select! {
                biased;
                message = self.from_paths.recv() => {
                    let Some(message) = message else {
                        anyhow::bail!("every path worker stopped");
                    };
                    self.handle_message(&mut state, message);
                }
                read = self.tun.read(&mut state.pool, HEADROOM, &mut state.read, TUN_BATCH) => {
                    if let Err(e) = read {
                        self.tun_failed(&mut state, e).await?;
                        continue;
                    }
                    state.tun_failures = 0;
                    self.handle_tun(&mut state);
                }
                _ = sleep_until(deadline) => self.endpoint.handle_timeout(now()),
                _ = rehandshake.tick() => self.offer_handshakes(),
                Some(request) = self.status.recv() => {
                    let _ = request.send(self.status(&state.counters));
                }
                Some(change) = self.reconfigure.recv() => self.apply(change),
            }
            self.flush_transmits(&mut state);
            self.endpoint.poll_deliver(&mut state.delivered);
            if !state.delivered.is_empty() {
                self.write_tun(&mut state);
            }
            while let Some(event) = self.endpoint.poll_event() {
                self.note_change(&event);
                log_path_event(&self.paths, event);
            }
        }
    }

    fn handle_message(&mut self, state: &mut State, message: ToEndpoint) {
        let now = now();
        match message {
            ToEndpoint::Opened {
                path,
                mut plaintexts,
            } => {
                self.endpoint.handle_datagrams(now, path, &mut plaintexts);
                state.spare_batches.push(plaintexts);
            }
            ToEndpoint::Session { path, established } => {
                self.endpoint.set_session(now, path, established);
            }
            ToEndpoint::Spare(mut bufs) => {
                state.pool.put_all(&mut bufs);
                state.spare_batches.push(bufs);
            }
        }
    }

    fn note_change(&mut self, event: &PathEvent) {
        let i = event.path.index();
        if self.changes.len() <= i {
            self.changes.resize(i + 1, (0, None));
        }
        let (flaps, at) = &mut self.changes[i];
        // A path back from down is no flap of its own, set aside or not,
        // nor one recalled for another path's outage.
        if !matches!(
            event.change,
            PathChange::Up | PathChange::BackSetAside | PathChange::Recalled
        ) {
            *flaps += 1;
        }
        *at = Some(now());
    }

    /// Take a reloaded config: retire the paths past its last, start afresh
    /// those given new workers, spread by its weights.
    fn apply(&mut self, change: Reconfigure) {
        let now = now();
        for &id in &change.closing {
            self.endpoint.set_session(now, id, false);
        }
        for (id, to_path, info) in change.opened {
            if !self.endpoint.open_path(id) {
                warn!(path = %id, "path not added: paths are added one past the last");
                continue;
            }
            let i = id.index();
            if i < self.to_paths.len() {
                self.to_paths[i] = to_path;
                self.paths[i] = info;
            } else {
                self.to_paths.push(to_path);
                self.paths.push(info);
            }
        }
        if let Some(config) = change.config {
            for i in config.paths.len()..self.config.paths.len() {
                self.endpoint.set_session(now, PathId(i as u8), false);
            }
            self.endpoint.set_policy(super::scheduling_policy(&config));
            self.config = config;
        }
        let _ = change.applied.send(());
    }

    /// A TUN read failed: wait a little and carry on, unless it has failed
    /// so often that the device is gone.
    async fn tun_failed(&self, state: &mut State, e: std::io::Error) -> anyhow::Result<()> {
        state.tun_failures += 1;
        if state.tun_failures == 1 {
            warn!(error = %e, "reading the TUN device failed");
        }
        if state.tun_failures >= TUN_FAILURES_MAX {
            return Err(anyhow::Error::new(e).context(format!(
                "reading the TUN device {} failed {TUN_FAILURES_MAX} times in a row",
                self.config.interface.name
            )));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        Ok(())
    }

    /// Hand what was read from the TUN device to the endpoint, but what the
    /// peer may not receive (cryptokey routing, as WireGuard does).
    fn handle_tun(&mut self, state: &mut State) {
        let read = state.read.len();
        let config = &self.config;
        state.read.retain(|p| {
            mptun_core::wire::ip::destination(p.packet()).is_none_or(|ip| config.peer.allows(ip))
        });
        let c = &mut state.counters;
        c.read_packets += read as u64;
        c.dropped_disallowed_destination += (read - state.read.len()) as u64;
        self.endpoint.handle_tun(now(), &mut state.read);
    }

    /// Offer a fresh handshake to each path down long enough for one.
    fn offer_handshakes(&self) {
        let now = now();
        for (i, to_path) in self.to_paths.iter().enumerate() {
            if self.endpoint.wants_handshake(now, PathId(i as u8)) {
                let _ = to_path.try_send(ToPath::Rehandshake);
            }
        }
    }

    /// Hand each path's plaintexts to its worker; a full queue drops the
    /// batch, counted.
    fn flush_transmits(&mut self, state: &mut State) {
        loop {
            let mut batch = state.spare_batches.pop().unwrap_or_default();
            batch.clear();
            let Some(path) = self.endpoint.poll_transmit(&mut batch) else {
                state.spare_batches.push(batch);
                break;
            };
            let n = batch.len() as u64;
            if let Err(e) = self.to_paths[path.index()].try_send(ToPath::Send(batch)) {
                state.counters.dropped_path_queue_full += n;
                if let ToPath::Send(mut batch) = e.into_inner() {
                    state.pool.put_all(&mut batch);
                    state.spare_batches.push(batch);
                }
            }
        }
        state.spare_batches.truncate(SPARE_BATCHES);
    }

    /// Write in-order packets to the TUN device, but those from a source the
    /// peer may not use; the buffers go back to the pool.
    fn write_tun(&mut self, state: &mut State) {
        let delivered = state.delivered.len();
        let config = &self.config;
        state.delivered.retain(|p| {
            mptun_core::wire::ip::source(p.packet()).is_some_and(|ip| config.peer.allows(ip))
        });
        let refused = self.tun.write(&mut state.delivered);
        let c = &mut state.counters;
        c.dropped_disallowed_source += (delivered - state.delivered.len()) as u64;
        c.written_packets += (state.delivered.len() - refused) as u64;
        c.write_errors += refused as u64;
        state.pool.put_all(&mut state.delivered);
    }

    /// Build the tunnel's status.
    fn status(&self, tun: &TunCounters) -> Status {
        let now = now();
        let config = &self.config;
        let stats = self.endpoint.stats();
        Status {
            // The status server fills these in.
            schema: 0,
            pid: 0,
            reloads: Default::default(),
            interface: config.interface.name.clone(),
            public_key: mptun_wg::keys::encode_key(&mptun_wg::keys::public_key(
                config.interface.private_key.bytes(),
            )),
            peer_public_key: mptun_wg::keys::encode_key(&config.peer.public_key),
            mtu: self.mtu.mtu,
            mtu_source: self.mtu.source.to_string(),
            epoch: self.endpoint.epoch(),
            uptime_secs: now.saturating_duration_since(self.started).as_secs_f64(),
            allowed_ips: config
                .peer
                .allowed_ips
                .iter()
                .map(|n| n.to_string())
                .collect(),
            tun: TunStatus {
                read_packets: tun.read_packets,
                written_packets: tun.written_packets,
                dropped_no_path: stats.dropped_no_path,
                dropped_not_ip: stats.dropped_not_ip,
                dropped_disallowed_destination: tun.dropped_disallowed_destination,
                dropped_disallowed_source: tun.dropped_disallowed_source,
                dropped_path_queue_full: tun.dropped_path_queue_full,
                write_errors: tun.write_errors,
            },
            reorder: self.reorder_status(),
            paths: self
                .paths
                .iter()
                .take(config.paths.len())
                .map(|p| self.path_status(p, now))
                .collect(),
        }
    }

    fn reorder_status(&self) -> ReorderStatus {
        let endpoint = &self.endpoint;
        let stats = endpoint.reorder_stats();
        let counters = endpoint.stats();
        let waits = endpoint.waits();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        ReorderStatus {
            hold_ms: ms(endpoint.hold()),
            held_now: endpoint.held(),
            waited: waits.count(),
            wait_p50_ms: waits.quantile(0.5).map(ms),
            wait_p99_ms: waits.quantile(0.99).map(ms),
            wait_buckets: waits.nonzero_buckets(),
            wait_buckets_by_end: WaitBucketsByEnd {
                reordered: endpoint
                    .waits_ended_by(WaitEnd::Reordered)
                    .nonzero_buckets(),
                repaired: endpoint.waits_ended_by(WaitEnd::Repaired).nonzero_buckets(),
                given_up: endpoint.waits_ended_by(WaitEnd::GivenUp).nonzero_buckets(),
            },
            in_order: stats.in_order,
            buffered: stats.buffered,
            passed: stats.passed,
            skipped_loss: stats.skipped_loss,
            skipped_timeout: stats.skipped_timeout,
            skipped_overflow: stats.skipped_overflow,
            skipped_restart: stats.skipped_restart,
            dropped_stale: stats.dropped_stale,
            dropped_duplicate: stats.dropped_duplicate,
            epoch_changes: counters.epoch_changes,
            nacks_for_old_run: counters.nacks_for_old_run,
            repair_wait_ms: endpoint.repair_wait().map(ms),
            repairs_requested: stats.repairs_requested,
            repaired: stats.repaired,
            congestion_losses: stats.congestion_losses,
            repaired_late: stats.repaired_late,
            tcp_hold_ms: endpoint.equalize_wait().map(ms),
            tcp_held: counters.equalized,
            tcp_holding: endpoint.equalizing(),
            tcp_low_latency_sent: counters.low_latency_segments,
            repairs_gone: counters.repairs_gone,
            repairs_too_late: counters.repairs_too_late,
        }
    }

    fn path_status(&self, info: &PathInfo, now: Instant) -> PathStatus {
        let id = info.id;
        let state = self.endpoint.state(id);
        let est = self.endpoint.estimate(id, now);
        let stats = self.endpoint.path_stats(id);
        let (handshake_at, handshake_rtt_ms) = info.handshake();
        let c = &info.counters;
        let (flaps, changed_at) = self.changes.get(id.index()).copied().unwrap_or_default();
        PathStatus {
            id: id.0,
            name: self
                .config
                .paths
                .get(id.index())
                .and_then(|p| p.name.clone()),
            handshakes: c.handshakes.get(),
            flaps,
            since_change_secs: changed_at.map(|t| now.saturating_duration_since(t).as_secs_f64()),
            tx_datagrams: c.tx_datagrams.get(),
            tx_datagram_bytes: c.tx_datagram_bytes.get(),
            rx_datagrams: c.rx_datagrams.get(),
            rx_datagram_bytes: c.rx_datagram_bytes.get(),
            local: info.local.to_string(),
            endpoint: info.endpoint().map(|e| e.to_string()),
            up: matches!(state, PathState::Up | PathState::Unconfirmed),
            state: crate::status::state_name(state, est.echo_late).to_string(),
            srtt_ms: est.srtt_ms,
            owd_rel_ms: est.owd_rel_ms,
            queue_ms: est.queue_ms,
            model_queue_ms: est.model_queue_ms,
            model_rate_mbps: Some(est.model_rate_mbps),
            rate_mbps: est.rate_mbps,
            train_mbps: est.train_mbps,
            loss_pct: est.loss * 100.0,
            tx_probes: stats.tx_probes,
            rx_probes: stats.rx_probes,
            tx_nacks: stats.tx_nacks,
            rx_nacks: stats.rx_nacks,
            tx_parity: stats.tx_parity,
            rx_parity: stats.rx_parity,
            rebuilt: stats.rebuilt,
            late_echoes: est.late_echoes,
            queue_limit_ms: est.queue_limit_ms,
            overflows: est.overflows,
            since_handshake_secs: handshake_at
                .map(|t| now.saturating_duration_since(t).as_secs_f64()),
            handshake_rtt_ms,
            tx_packets: stats.tx_packets,
            tx_bytes: stats.tx_bytes,
            resent: stats.resent,
            rx_packets: stats.rx_packets,
            rx_bytes: stats.rx_bytes,
            send_errors: c.send_errors.get(),
            recv_errors: c.recv_errors.get(),
            rejected: c.rejected.snapshot(),
            rx_initiations: c.initiations.get(),
            rx_cookie_replies: c.cookie_replies.get(),
            refused: stats.refused.into(),
        }
    }
}

/// Sleep until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Log a path's change of state, once.
fn log_path_event(paths: &[Arc<PathInfo>], event: PathEvent) {
    let path = event.path;
    let endpoint = paths
        .get(path.index())
        .and_then(|p| p.endpoint())
        .map(|e| e.to_string())
        .unwrap_or_default();
    match event.change {
        PathChange::Up => info!(%path, %endpoint, "path up"),
        PathChange::Down { silent } => {
            warn!(%path, %endpoint, silent_ms = silent.as_millis() as u64, "path down: probes unanswered")
        }
        PathChange::SetAside { loss } => warn!(
            %path,
            loss_pct = format!("{:.2}", loss * 100.0),
            "path set aside: losing packets while another path is clean; will retry"
        ),
        PathChange::BackSetAside => info!(
            %path,
            %endpoint,
            "path back up; still set aside for its loss until its retry"
        ),
        PathChange::Recalled => warn!(
            %path,
            %endpoint,
            "set-aside path carries data again: the clean paths beside it are down or without a session"
        ),
        PathChange::NoSession => warn!(%path, "path down: no WireGuard session"),
    }
}
