//! `interface.metrics-listen`: the tunnel's status as OpenMetrics text at
//! `GET /metrics`, for Prometheus and what else scrapes it. Every figure
//! comes from the same snapshot `mptun show` prints.

use std::fmt::Write as _;

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tracing::{debug, info};

use crate::status::{PathStatus, Snapshots, Status};

/// Longest request head read, and how long a client may take to send it.
const REQUEST_MAX: usize = 8 << 10;
const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The OpenMetrics media type.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Serves `/metrics` until dropped.
pub(crate) struct MetricsServer {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MetricsServer {
    /// Listen on `addr`, answering with `snapshots`.
    pub async fn start(
        addr: std::net::SocketAddr,
        snapshots: Snapshots,
    ) -> anyhow::Result<MetricsServer> {
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("listen for metrics on {addr} (interface.metrics-listen)"))?;
        info!(%addr, "serving OpenMetrics at /metrics");
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, peer)) = listener.accept().await else {
                    continue;
                };
                let snapshots = snapshots.clone();
                // One scrape at a time per connection, each on its own task,
                // so a slow client holds up nobody.
                tokio::spawn(async move {
                    let Ok(Ok(head)) =
                        tokio::time::timeout(REQUEST_TIMEOUT, read_head(&mut stream)).await
                    else {
                        return;
                    };
                    let response = match head.split_whitespace().take(2).collect::<Vec<_>>()[..] {
                        ["GET", "/metrics"] => {
                            let Some(status) = snapshots.take().await else {
                                return;
                            };
                            http(200, "OK", CONTENT_TYPE, &render(&status))
                        }
                        ["GET", _] => http(404, "Not Found", "text/plain", "try /metrics\n"),
                        _ => http(405, "Method Not Allowed", "text/plain", "GET only\n"),
                    };
                    if let Err(e) = stream.write_all(response.as_bytes()).await {
                        debug!(%peer, error = %e, "metrics client went away");
                    }
                });
            }
        });
        Ok(MetricsServer { task })
    }
}

/// Read an HTTP request's head (up to the blank line), at most
/// [`REQUEST_MAX`] bytes.
async fn read_head(stream: &mut tokio::net::TcpStream) -> std::io::Result<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 || head.len() + n > REQUEST_MAX {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

fn http(code: u16, reason: &str, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Escape a label value as OpenMetrics wants it.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Metric families being written: each family's TYPE and HELP once, then
/// its samples.
struct Families {
    out: String,
}

impl Families {
    fn family(&mut self, name: &str, kind: &str, unit: Option<&str>, help: &str) {
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
        if let Some(unit) = unit {
            let _ = writeln!(self.out, "# UNIT {name} {unit}");
        }
        let _ = writeln!(self.out, "# HELP {name} {help}");
    }

    fn sample(&mut self, name: &str, labels: &str, value: f64) {
        let _ = writeln!(self.out, "{name}{{{labels}}} {value}");
    }

    /// A counter family with one sample per label set.
    fn counter(&mut self, name: &str, help: &str, samples: &[(String, u64)]) {
        self.family(name, "counter", None, help);
        for (labels, value) in samples {
            self.sample(&format!("{name}_total"), labels, *value as f64);
        }
    }

    /// A counter family with a `reason` label, for each label set.
    fn by_reason(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (String, Vec<(&'static str, u64)>)>,
    ) {
        self.family(name, "counter", None, help);
        for (labels, reasons) in samples {
            for (reason, n) in reasons {
                let labels = format!("{labels},reason=\"{reason}\"");
                self.sample(&format!("{name}_total"), &labels, n as f64);
            }
        }
    }

    /// The samples of a hold-time histogram, cumulative, over the core's
    /// 0.25 ms `buckets` (see `ReorderStatus::wait_buckets`) folded into a
    /// few bounds an operator would chart.
    fn hold_histogram(&mut self, name: &str, labels: &str, buckets: &[(u32, u64)]) {
        let histogram = mptun_core::HoldHistogram::from_buckets(buckets);
        for bound in [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2] {
            let below = histogram.count_below(std::time::Duration::from_secs_f64(bound));
            self.sample(
                &format!("{name}_bucket"),
                &format!("{labels},le=\"{bound}\""),
                below as f64,
            );
        }
        let count = histogram.count() as f64;
        self.sample(
            &format!("{name}_bucket"),
            &format!("{labels},le=\"+Inf\""),
            count,
        );
        self.sample(&format!("{name}_count"), labels, count);
        self.sample(
            &format!("{name}_sum"),
            labels,
            histogram.sum().as_secs_f64(),
        );
    }

    fn gauge(&mut self, name: &str, unit: Option<&str>, help: &str, samples: &[(String, f64)]) {
        self.family(name, "gauge", unit, help);
        for (labels, value) in samples {
            self.sample(name, labels, *value);
        }
    }
}

/// Reads one counter of a path's status.
type PathCounter = dyn Fn(&PathStatus) -> u64;

/// Render a status as OpenMetrics text.
pub fn render(s: &Status) -> String {
    let mut f = Families { out: String::new() };
    let iface = format!("interface=\"{}\"", label(&s.interface));
    let path_labels = |p: &PathStatus| {
        format!(
            "{iface},path=\"{}\",name=\"{}\"",
            p.id,
            label(p.name.as_deref().unwrap_or(""))
        )
    };
    let paths = |get: &dyn Fn(&PathStatus) -> u64| -> Vec<(String, u64)> {
        s.paths.iter().map(|p| (path_labels(p), get(p))).collect()
    };
    let path_gauges = |get: &dyn Fn(&PathStatus) -> Option<f64>| -> Vec<(String, f64)> {
        s.paths
            .iter()
            .filter_map(|p| Some((path_labels(p), get(p)?)))
            .collect()
    };

    f.gauge(
        "mptun_path_up",
        None,
        "Whether the path carries data (1) or not (0).",
        &path_gauges(&|p| Some(if p.up { 1.0 } else { 0.0 })),
    );
    f.gauge(
        "mptun_path_rtt_seconds",
        Some("seconds"),
        "Smoothed round trip of the path's probes.",
        &path_gauges(&|p| p.srtt_ms.map(|ms| ms / 1e3)),
    );
    f.gauge(
        "mptun_path_queue_seconds",
        Some("seconds"),
        "Queueing delay measured on the path.",
        &path_gauges(&|p| Some(p.queue_ms / 1e3)),
    );
    f.gauge(
        "mptun_path_loss_ratio",
        None,
        "Share of the path's packets lost lately.",
        &path_gauges(&|p| Some(p.loss_pct / 100.0)),
    );
    f.gauge(
        "mptun_path_delivery_rate_bits_per_second",
        None,
        "Rate the path delivered at, as measured.",
        &path_gauges(&|p| p.rate_mbps.map(|r| r * 1e6)),
    );
    f.gauge(
        "mptun_path_model_rate_bits_per_second",
        None,
        "Rate the scheduler's model drains the path at.",
        &path_gauges(&|p| p.model_rate_mbps.map(|r| r * 1e6)),
    );
    f.gauge(
        "mptun_path_model_queue_seconds",
        Some("seconds"),
        "Queue the scheduler's model holds on the path.",
        &path_gauges(&|p| Some(p.model_queue_ms / 1e3)),
    );
    f.gauge(
        "mptun_path_train_rate_bits_per_second",
        None,
        "Highest rate the path's probe trains arrived at when its session came up.",
        &path_gauges(&|p| p.train_mbps.map(|r| r * 1e6)),
    );
    f.gauge(
        "mptun_path_queue_limit_seconds",
        Some("seconds"),
        "Queue the scheduler fills the path to, learned from its overflows.",
        &path_gauges(&|p| p.queue_limit_ms.map(|l| l / 1000.0)),
    );
    f.gauge(
        "mptun_path_last_handshake_age_seconds",
        Some("seconds"),
        "Time since the path's last WireGuard handshake.",
        &path_gauges(&|p| p.since_handshake_secs),
    );
    f.gauge(
        "mptun_path_state_age_seconds",
        Some("seconds"),
        "Time since the path's state last changed.",
        &path_gauges(&|p| p.since_change_secs),
    );
    let counters: [(&str, &str, &PathCounter); 24] = [
        (
            "mptun_path_flaps",
            "Times the path stopped carrying data.",
            &|p| p.flaps,
        ),
        (
            "mptun_path_handshakes",
            "WireGuard handshakes completed.",
            &|p| p.handshakes,
        ),
        (
            "mptun_path_sent_bytes",
            "Inner bytes of the data packets sent.",
            &|p| p.tx_bytes,
        ),
        (
            "mptun_path_received_bytes",
            "Inner bytes of the data packets received.",
            &|p| p.rx_bytes,
        ),
        (
            "mptun_path_sent_packets",
            "Data packets sent, resent ones included.",
            &|p| p.tx_packets,
        ),
        (
            "mptun_path_received_packets",
            "Data packets received.",
            &|p| p.rx_packets,
        ),
        (
            "mptun_path_resent_packets",
            "Packets resent because the peer asked for them.",
            &|p| p.resent,
        ),
        (
            "mptun_path_sent_datagram_bytes",
            "Bytes of the datagrams sent, sealed.",
            &|p| p.tx_datagram_bytes,
        ),
        (
            "mptun_path_received_datagram_bytes",
            "Bytes of the datagrams received.",
            &|p| p.rx_datagram_bytes,
        ),
        ("mptun_path_sent_datagrams", "Datagrams sent.", &|p| {
            p.tx_datagrams
        }),
        (
            "mptun_path_received_datagrams",
            "Datagrams received, rejected ones included.",
            &|p| p.rx_datagrams,
        ),
        ("mptun_path_sent_probes", "Probes sent.", &|p| p.tx_probes),
        ("mptun_path_received_probes", "Probes received.", &|p| {
            p.rx_probes
        }),
        ("mptun_path_sent_nacks", "NACKs sent.", &|p| p.tx_nacks),
        (
            "mptun_path_sent_parity",
            "Parity halves sent after runs of data, for a lossy path.",
            &|p| p.tx_parity,
        ),
        (
            "mptun_path_received_parity",
            "Parity halves received.",
            &|p| p.rx_parity,
        ),
        (
            "mptun_path_rebuilt",
            "Data packets lost on the path and rebuilt from their run's parity.",
            &|p| p.rebuilt,
        ),
        ("mptun_path_received_nacks", "NACKs received.", &|p| {
            p.rx_nacks
        }),
        (
            "mptun_path_late_echoes",
            "Probe echoes overdue enough to avoid the path.",
            &|p| p.late_echoes,
        ),
        (
            "mptun_path_queue_overflows",
            "Times packets sent into the path's standing queue were lost beyond its random loss.",
            &|p| p.overflows,
        ),
        (
            "mptun_path_send_errors",
            "Datagrams the socket failed to send.",
            &|p| p.send_errors,
        ),
        (
            "mptun_path_receive_errors",
            "Errors reading the socket.",
            &|p| p.recv_errors,
        ),
        (
            "mptun_path_initiations",
            "Handshake initiations taken.",
            &|p| p.rx_initiations,
        ),
        ("mptun_path_cookie_replies", "Cookie replies taken.", &|p| {
            p.rx_cookie_replies
        }),
    ];
    for (name, help, get) in counters {
        f.counter(name, help, &paths(get));
    }
    let rejected = |p: &PathStatus| {
        let r = &p.rejected;
        [
            ("malformed", r.malformed),
            ("unauthenticated", r.unauthenticated),
            ("replayed", r.replayed),
            ("no_session", r.no_session),
            ("under_load", r.under_load),
        ]
    };
    let refused = |p: &PathStatus| {
        let r = &p.refused;
        [
            ("bad_trailer", r.bad_trailer),
            ("length_mismatch", r.length_mismatch),
            ("bad_probe", r.bad_probe),
            ("bad_nack", r.bad_nack),
            ("foreign_epoch", r.foreign_epoch),
        ]
    };
    f.by_reason(
        "mptun_path_rejected_datagrams",
        "Datagrams WireGuard rejected, by reason.",
        s.paths
            .iter()
            .map(|p| (path_labels(p), rejected(p).to_vec())),
    );
    f.by_reason(
        "mptun_path_refused_plaintexts",
        "Authenticated plaintexts mptun refused, by reason.",
        s.paths
            .iter()
            .map(|p| (path_labels(p), refused(p).to_vec())),
    );

    let (r, t) = (&s.reorder, &s.tun);
    let interface_counters = [
        (
            "mptun_tun_read_packets",
            "Packets read from the TUN device.",
            t.read_packets,
        ),
        (
            "mptun_tun_written_packets",
            "Packets written to the TUN device.",
            t.written_packets,
        ),
        (
            "mptun_tun_write_errors",
            "Packets the TUN device refused.",
            t.write_errors,
        ),
        (
            "mptun_reorder_in_order_packets",
            "Packets delivered without waiting.",
            r.in_order,
        ),
        (
            "mptun_reorder_buffered_packets",
            "Packets held for an earlier one.",
            r.buffered,
        ),
        (
            "mptun_reorder_passed_acks",
            "Bare TCP ACKs delivered ahead of an earlier packet still awaited.",
            r.passed,
        ),
        (
            "mptun_repairs_requested",
            "Lost packets asked for again.",
            r.repairs_requested,
        ),
        (
            "mptun_repairs_in_time",
            "Repairs that came in time to fill their gap.",
            r.repaired,
        ),
        (
            "mptun_repairs_late",
            "Repairs that came after the packets behind their loss were released, handed out late.",
            r.repaired_late,
        ),
        (
            "mptun_repairs_gone",
            "Packets the peer asked for that were not in the sent log, not resent.",
            r.repairs_gone,
        ),
        (
            "mptun_repairs_too_late",
            "Packets the peer asked for that no path would bring while of use or had room for later, not resent.",
            r.repairs_too_late,
        ),
        (
            "mptun_congestion_losses",
            "Losses on a congested path, left to the inner flow.",
            r.congestion_losses,
        ),
        (
            "mptun_tcp_held_segments",
            "TCP segments held to the farthest path's delay.",
            r.tcp_held,
        ),
        (
            "mptun_tcp_low_latency_sent_segments",
            "TCP segments sent in a low-latency DSCP class, for the peer not to hold.",
            r.tcp_low_latency_sent,
        ),
        (
            "mptun_peer_restarts",
            "Peer restarts followed.",
            r.epoch_changes,
        ),
        ("mptun_reloads", "Reloads tried.", s.reloads.count),
    ];
    for (name, help, value) in interface_counters {
        f.counter(name, help, &[(iface.clone(), value)]);
    }
    f.by_reason(
        "mptun_dropped_packets",
        "Packets dropped, by reason.",
        [(
            iface.clone(),
            vec![
                ("no_path", t.dropped_no_path),
                ("not_ip", t.dropped_not_ip),
                ("disallowed_destination", t.dropped_disallowed_destination),
                ("disallowed_source", t.dropped_disallowed_source),
                ("path_queue_full", t.dropped_path_queue_full),
                ("stale", r.dropped_stale),
                ("duplicate", r.dropped_duplicate),
            ],
        )],
    );
    f.by_reason(
        "mptun_reorder_skipped_gaps",
        "Gaps released without their packet, by reason.",
        [(
            iface.clone(),
            vec![
                ("loss", r.skipped_loss),
                ("timeout", r.skipped_timeout),
                ("overflow", r.skipped_overflow),
                ("restart", r.skipped_restart),
            ],
        )],
    );
    f.gauge(
        "mptun_reorder_held_packets",
        None,
        "Packets in the reorder buffer now.",
        &[(iface.clone(), r.held_now as f64)],
    );
    f.gauge(
        "mptun_reorder_hold_limit_seconds",
        Some("seconds"),
        "How long a gap is waited for now.",
        &[(iface.clone(), r.hold_ms / 1e3)],
    );
    let tcp_hold: Vec<(String, f64)> = r
        .tcp_hold_ms
        .map(|wait| (iface.clone(), wait / 1e3))
        .into_iter()
        .collect();
    f.gauge(
        "mptun_tcp_hold_seconds",
        Some("seconds"),
        "How long a TCP segment that came the nearest way is held now.",
        &tcp_hold,
    );

    f.family(
        "mptun_reorder_hold_seconds",
        "histogram",
        Some("seconds"),
        "How long held packets waited in the reorder buffer.",
    );
    f.hold_histogram("mptun_reorder_hold_seconds", &iface, &r.wait_buckets);
    // Apart from the total, which would count each wait twice in a sum
    // over the label.
    f.family(
        "mptun_reorder_hold_by_end_seconds",
        "histogram",
        Some("seconds"),
        "How long held packets waited, by what became of the gap they waited for: its own packet came late (reordered), a repair filled it (repaired), or it was given up on (given_up).",
    );
    let by_end = &r.wait_buckets_by_end;
    for (end, buckets) in [
        ("reordered", &by_end.reordered),
        ("repaired", &by_end.repaired),
        ("given_up", &by_end.given_up),
    ] {
        let labels = format!("{iface},ended_by=\"{end}\"");
        f.hold_histogram("mptun_reorder_hold_by_end_seconds", &labels, buckets);
    }
    f.out.push_str("# EOF\n");
    f.out
}
