//! A paced stream of numbered UDP datagrams from one namespace to another,
//! counting what arrives and in which order.
//!
//! The receiver's socket buffer is forced to [`RECEIVE_BUFFER`]: on a
//! virtual machine a vCPU descheduled by the hypervisor for a few tens of
//! milliseconds stalls the receiving program, and the kernel's default
//! buffer (208 KiB, 22 ms at 75 Mbit/s) then overflows. That loss is the
//! test receiver's, not the tunnel's, and is what iperf3 reported as lost.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use mptun_netem::forwarder::set_buffer_forced;
use mptun_netem::topology::in_netns;
use mptun_netem::NetemError;

/// Bytes of UDP payload per datagram: fits a tunnel MTU of 1280 (IPv6's
/// least) with IP and UDP headers.
pub const DATAGRAM: usize = 1200;

/// Receiver socket buffer: half a second at 75 Mbit/s.
pub const RECEIVE_BUFFER: usize = 4 << 20;

/// How long the receiver waits for stragglers after the last send.
const DRAIN: Duration = Duration::from_secs(1);

/// One UDP measurement.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct UdpResult {
    /// Payload received, over the time the sender sent.
    pub goodput_mbps: f64,
    /// Datagrams sent.
    pub packets: u64,
    /// Datagrams that never arrived.
    pub lost: u64,
    /// Datagrams that arrived after a later one.
    pub out_of_order: u64,
    /// Datagrams that arrived more than once.
    pub duplicates: u64,
    /// Sends the sender's kernel refused (counted in `lost` too).
    pub send_errors: u64,
}

/// Send `rate_mbit` of UDP payload for `seconds` from namespace `from_ns`
/// to `to_addr` (an address in namespace `to_ns`, where the receiver binds).
pub fn udp_stream(
    from_ns: &str,
    to_ns: &str,
    to_addr: Ipv4Addr,
    rate_mbit: f64,
    seconds: f64,
) -> anyhow::Result<UdpResult> {
    if !(rate_mbit > 0.0 && seconds > 0.0) {
        bail!("a UDP stream needs a positive rate and duration");
    }
    let receiver = in_netns(to_ns, move || {
        let socket = UdpSocket::bind((to_addr, 0))
            .map_err(|e| NetemError::io("bind the UDP receiver", e))?;
        set_buffer_forced(
            socket.as_raw_fd(),
            libc::SO_RCVBUFFORCE,
            libc::SO_RCVBUF,
            RECEIVE_BUFFER as libc::c_int,
        )
        .map_err(|e| NetemError::io("SO_RCVBUFFORCE", e))?;
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .map_err(|e| NetemError::io("receive timeout", e))?;
        Ok(socket)
    })?;
    let to: SocketAddr = (to_addr, receiver.local_addr()?.port()).into();
    let sender = in_netns(from_ns, || {
        UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
            .map_err(|e| NetemError::io("bind the UDP sender", e))
    })?;

    let interval = Duration::from_secs_f64(DATAGRAM as f64 * 8.0 / (rate_mbit * 1e6));
    let count = (seconds / interval.as_secs_f64()).ceil() as u64;
    let sending = Arc::new(AtomicBool::new(true));
    let counter = {
        let sending = sending.clone();
        std::thread::spawn(move || receive(&receiver, count, &sending))
    };

    let mut datagram = vec![0u8; DATAGRAM];
    let mut send_errors = 0u64;
    let start = Instant::now();
    for seq in 0..count {
        // A late sender catches up at once, as iperf3 does.
        let due = start + interval.mul_f64(seq as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        datagram[..8].copy_from_slice(&seq.to_be_bytes());
        if sender.send_to(&datagram, to).is_err() {
            send_errors += 1;
        }
    }
    let sent_for = start.elapsed();
    sending.store(false, Ordering::Relaxed);
    let arrivals = counter
        .join()
        .map_err(|_| anyhow::anyhow!("UDP receiver panicked"))?
        .context("UDP receiver")?;
    Ok(UdpResult {
        goodput_mbps: arrivals.received as f64 * DATAGRAM as f64 * 8.0
            / sent_for.as_secs_f64()
            / 1e6,
        packets: count,
        lost: count - arrivals.received,
        out_of_order: arrivals.out_of_order,
        duplicates: arrivals.duplicates,
        send_errors,
    })
}

#[derive(Debug, Default, PartialEq)]
struct Arrivals {
    received: u64,
    out_of_order: u64,
    duplicates: u64,
}

/// Count datagrams numbered below `count` until the sender has stopped and
/// nothing more arrived for [`DRAIN`].
fn receive(socket: &UdpSocket, count: u64, sending: &AtomicBool) -> std::io::Result<Arrivals> {
    let mut tally = Tally::new(count);
    let mut buf = vec![0u8; DATAGRAM + 1];
    let mut last_arrival = Instant::now();
    loop {
        match socket.recv(&mut buf) {
            Ok(len) => {
                if let Some(seq) = buf.get(..len.min(8)).and_then(|b| b.try_into().ok()) {
                    tally.arrived(u64::from_be_bytes(seq));
                }
                last_arrival = Instant::now();
                if tally.arrivals.received == count {
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
        if !sending.load(Ordering::Relaxed) && last_arrival.elapsed() > DRAIN {
            break;
        }
    }
    Ok(tally.arrivals)
}

/// Which numbered datagrams have arrived, and how.
struct Tally {
    seen: Vec<bool>,
    next: u64,
    arrivals: Arrivals,
}

impl Tally {
    fn new(count: u64) -> Self {
        Self {
            seen: vec![false; count as usize],
            next: 0,
            arrivals: Arrivals::default(),
        }
    }

    fn arrived(&mut self, seq: u64) {
        let Some(seen) = usize::try_from(seq).ok().and_then(|i| self.seen.get_mut(i)) else {
            return;
        };
        if std::mem::replace(seen, true) {
            self.arrivals.duplicates += 1;
            return;
        }
        self.arrivals.received += 1;
        if seq < self.next {
            self.arrivals.out_of_order += 1;
        } else {
            self.next = seq + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_counts_late_repeated_and_foreign_datagrams() {
        let mut tally = Tally::new(6);
        for seq in [0, 2, 1, 3, 3, 5, 9, u64::MAX] {
            tally.arrived(seq);
        }
        assert_eq!(
            tally.arrivals,
            Arrivals {
                received: 5,
                out_of_order: 1,
                duplicates: 1,
            }
        );
    }
}
