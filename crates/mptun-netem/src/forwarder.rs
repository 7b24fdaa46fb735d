//! Linux I/O edge: bridges the two interfaces of each path with AF_PACKET raw
//! sockets and releases frames at the times the [`LinkModel`] decides.
//!
//! Design notes:
//! - One thread per path serves both directions (fewer threads than cores
//!   on small machines; one `ppoll` covers both sockets and the timer).
//! - Batching: `recvmmsg`/`sendmmsg` with up to [`BATCH`] frames per call.
//! - Frames are copied once into pooled buffers; no allocation per packet in
//!   steady state.
//! - Timing: `ppoll` with a nanosecond timeout and the thread's timer slack set
//!   to 1 ns, so wake-ups land within tens of microseconds of the deadline
//!   without spinning.
//! - Wake-ups are what cost CPU, and CPU is what the 2-core lab machines lack:
//!   woken per frame, the emulator alone took a core at 200 Mbit/s and capped
//!   the tunnel under test. So frames due within [`RELEASE_SLACK`] go out in
//!   one batch, and a direction whose queue is not empty does not wake the
//!   thread on arrivals: its new frames are due after its queue's head (the
//!   model is FIFO), so they are read when the thread wakes for that head,
//!   or within [`DRAIN_INTERVAL`], and the model is given each frame's
//!   kernel receive time (`SO_TIMESTAMPNS`), not the time it was read.
//! - Our own transmissions would come back as `PACKET_OUTGOING` copies on the
//!   socket bound to the egress interface: `PACKET_IGNORE_OUTGOING` stops them
//!   in the kernel and we also skip any that slip through.
//! - Offloads: this forwarder moves plain L2 frames and does not use
//!   `PACKET_VNET_HDR`, so GSO/GRO super-frames and partial checksums must be
//!   turned off on every veth involved (see [`crate::topology::disable_offloads`]).
//!   Oversized frames are dropped and counted (`oversize`), which makes a
//!   misconfiguration visible instead of silently wrong.

use std::collections::VecDeque;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::model::{Dir, DirectionStats, LinkModel};
use crate::NetemError;

/// Frames per `recvmmsg`/`sendmmsg` call.
pub const BATCH: usize = 64;
/// Requested socket buffer size (both ways); large so bursts at line rate are
/// not dropped while the thread sleeps.
const SOCK_BUF: libc::c_int = 8 << 20;
/// Longest sleep, so the thread notices `stop` promptly.
const MAX_SLEEP: Duration = Duration::from_millis(50);
/// Frames due within this much of now are sent in the same batch: at most
/// this early, never late. A quarter of a millisecond is below what the
/// lab's scenarios measure, and about what a NIC's interrupt coalescing adds.
const RELEASE_SLACK: Duration = Duration::from_micros(250);
/// A frame released this long after its time is counted late: the
/// scenarios set delays in whole milliseconds.
pub const LATE: Duration = Duration::from_millis(1);
/// A frame released this long after its time is counted very late: it
/// reorders its path against the others by as much as the lab allows mptun's
/// hold p99 above the paths' delay spread.
pub const VERY_LATE: Duration = Duration::from_millis(5);
/// Longest a direction's arrivals wait to be read while its queue is not
/// empty, so a long delay line does not fill the socket buffer.
const DRAIN_INTERVAL: Duration = Duration::from_millis(1);
/// Control buffer per received frame: room for one `SCM_TIMESTAMPNS`.
const CONTROL_LEN: usize = 64;

const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// I/O counters of one direction (the model keeps its own).
#[derive(Debug, Default)]
pub struct IoCounters {
    pub tx_packets: AtomicU64,
    pub tx_bytes: AtomicU64,
    pub tx_errors: AtomicU64,
    pub oversize: AtomicU64,
    pub ignored_outgoing: AtomicU64,
    /// Frames released at least [`LATE`] after their time: the thread was
    /// not running (the host was busy or its vCPU was descheduled), and
    /// the path's delay was not what the scenario asked for.
    pub late: AtomicU64,
    /// Of those, frames at least [`VERY_LATE`] late.
    pub very_late: AtomicU64,
}

#[derive(Debug, Clone, Serialize)]
pub struct IoSnapshot {
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_errors: u64,
    pub oversize: u64,
    pub ignored_outgoing: u64,
    pub late: u64,
    pub very_late: u64,
}

impl IoCounters {
    fn snapshot(&self) -> IoSnapshot {
        IoSnapshot {
            tx_packets: self.tx_packets.load(Ordering::Relaxed),
            tx_bytes: self.tx_bytes.load(Ordering::Relaxed),
            tx_errors: self.tx_errors.load(Ordering::Relaxed),
            oversize: self.oversize.load(Ordering::Relaxed),
            ignored_outgoing: self.ignored_outgoing.load(Ordering::Relaxed),
            late: self.late.load(Ordering::Relaxed),
            very_late: self.very_late.load(Ordering::Relaxed),
        }
    }
}

/// Counters of one direction of one path.
#[derive(Debug, Clone, Serialize)]
pub struct DirSnapshot {
    #[serde(flatten)]
    pub model: DirectionStats,
    #[serde(flatten)]
    pub io: IoSnapshot,
}

/// Counters of one path.
#[derive(Debug, Clone, Serialize)]
pub struct PathSnapshot {
    pub path: usize,
    pub a: String,
    pub b: String,
    pub up: bool,
    pub ab: DirSnapshot,
    pub ba: DirSnapshot,
}

/// State shared between a path's thread and the controller.
#[derive(Debug)]
pub struct PathShared {
    pub a: String,
    pub b: String,
    pub model: Mutex<LinkModel>,
    pub io_ab: IoCounters,
    pub io_ba: IoCounters,
}

impl PathShared {
    /// Lock the model; a panicked forwarder thread must not wedge the
    /// controller, so poisoning is ignored (the model has no invariants a
    /// panic could half-update in a harmful way).
    pub fn lock(&self) -> MutexGuard<'_, LinkModel> {
        self.model.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn io(&self, d: Dir) -> &IoCounters {
        match d {
            Dir::AtoB => &self.io_ab,
            Dir::BtoA => &self.io_ba,
        }
    }
}

/// A running emulator: one thread per path.
pub struct Forwarder {
    stop: Arc<AtomicBool>,
    paths: Vec<Arc<PathShared>>,
    threads: Vec<JoinHandle<()>>,
}

impl Forwarder {
    /// Open the sockets for every path (failing early, before any thread
    /// starts) and start forwarding, with real-time scheduling if allowed.
    pub fn start(paths: Vec<(String, String, LinkModel)>) -> Result<Self, NetemError> {
        Self::start_with(paths, true)
    }

    /// Like [`Self::start`]; `realtime` asks for SCHED_FIFO on the worker
    /// threads (best effort: needs CAP_SYS_NICE), which keeps release times
    /// precise when iperf3 and the kernel compete for the same cores. The
    /// workers block in `ppoll` and RT throttling still applies, so they
    /// cannot starve the machine.
    pub fn start_with(
        paths: Vec<(String, String, LinkModel)>,
        realtime: bool,
    ) -> Result<Self, NetemError> {
        let mut opened = Vec::new();
        for (a, b, model) in paths {
            let sa = PacketSocket::open(&a)?;
            let sb = PacketSocket::open(&b)?;
            let shared = Arc::new(PathShared {
                a,
                b,
                model: Mutex::new(model),
                io_ab: IoCounters::default(),
                io_ba: IoCounters::default(),
            });
            opened.push((shared, sa, sb));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let mut fwd = Forwarder {
            stop: stop.clone(),
            paths: opened.iter().map(|(s, _, _)| s.clone()).collect(),
            threads: Vec::new(),
        };
        for (i, (shared, sa, sb)) in opened.into_iter().enumerate() {
            let stop = stop.clone();
            let handle = std::thread::Builder::new()
                .name(format!("netem-path{}", i + 1))
                .spawn(move || {
                    if realtime {
                        set_realtime();
                    }
                    PathWorker::new(shared, sa, sb, stop).run()
                })
                .map_err(|e| NetemError::io("spawning forwarder thread", e))?;
            fwd.threads.push(handle);
        }
        Ok(fwd)
    }

    /// Shared state of path `n` (1-based, like the control commands).
    pub fn path(&self, n: usize) -> Option<&Arc<PathShared>> {
        n.checked_sub(1).and_then(|i| self.paths.get(i))
    }

    pub fn len(&self) -> usize {
        self.paths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    pub fn snapshot(&self) -> Vec<PathSnapshot> {
        self.paths
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let m = p.lock();
                PathSnapshot {
                    path: i + 1,
                    a: p.a.clone(),
                    b: p.b.clone(),
                    up: m.is_up(),
                    ab: DirSnapshot {
                        model: m.ab.stats().clone(),
                        io: p.io_ab.snapshot(),
                    },
                    ba: DirSnapshot {
                        model: m.ba.stats().clone(),
                        io: p.io_ba.snapshot(),
                    },
                }
            })
            .collect()
    }

    /// Stop all threads and wait for them.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            // A panicked worker has already printed its message.
            let _ = t.join();
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Best effort SCHED_FIFO for the calling thread.
fn set_realtime() {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: valid sched_param; 0 = calling thread.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if r != 0 {
        eprintln!(
            "mptun-netem: SCHED_FIFO not available ({}); timing may be less precise under load",
            io::Error::last_os_error()
        );
    }
}

/// An AF_PACKET socket bound to one interface.
struct PacketSocket {
    fd: OwnedFd,
    /// Largest frame we accept (MTU + Ethernet + VLAN header).
    max_frame: usize,
}

fn last_err(context: impl Into<String>) -> NetemError {
    NetemError::io(context, io::Error::last_os_error())
}

fn setsockopt_int(fd: i32, level: i32, opt: i32, val: libc::c_int) -> io::Result<()> {
    // SAFETY: passing a valid pointer to a c_int and its size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&val as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Set a socket buffer to `size` bytes with `force` (`SO_RCVBUFFORCE` or
/// `SO_SNDBUFFORCE`), past `net.core.[rw]mem_max` when we are root; else
/// with `plain`, which the kernel caps at that limit.
pub fn set_buffer_forced(fd: i32, force: i32, plain: i32, size: libc::c_int) -> io::Result<()> {
    setsockopt_int(fd, libc::SOL_SOCKET, force, size)
        .or_else(|_| setsockopt_int(fd, libc::SOL_SOCKET, plain, size))
}

/// Return a zeroed `ifreq` naming `ifname`, for interface ioctls.
pub(crate) fn ifreq_named(ifname: &str) -> io::Result<libc::ifreq> {
    // SAFETY: an all-zero ifreq is a valid value of the C struct.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let bytes = ifname.as_bytes();
    if bytes.len() >= req.ifr_name.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "interface name too long",
        ));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(req)
}

/// Interface MTU via `SIOCGIFMTU`.
pub fn interface_mtu(fd: i32, ifname: &str) -> io::Result<usize> {
    let mut req = ifreq_named(ifname)?;
    // SAFETY: req is a properly initialised ifreq.
    let r = unsafe { libc::ioctl(fd, libc::SIOCGIFMTU, &mut req) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFMTU fills the ifru_mtu member.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    Ok(mtu.max(0) as usize)
}

impl PacketSocket {
    fn open(ifname: &str) -> Result<Self, NetemError> {
        let cname = CString::new(ifname)
            .map_err(|_| NetemError::Setup(format!("bad interface name {ifname:?}")))?;
        // SAFETY: plain FFI call with a valid C string.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return Err(last_err(format!("interface {ifname:?} not found")));
        }
        // Protocol 0 at creation: receive nothing until bound to the
        // interface, so no frames of other interfaces sneak in.
        // SAFETY: plain FFI call.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
            )
        };
        if raw < 0 {
            return Err(last_err("socket(AF_PACKET) (needs CAP_NET_RAW)"));
        }
        // SAFETY: raw is a fresh, owned descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let fdi = fd.as_raw_fd();
        let ctx = |what: &str| format!("{what} on {ifname}");

        for (force, plain) in [
            (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
            (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
        ] {
            set_buffer_forced(fdi, force, plain, SOCK_BUF)
                .map_err(|e| NetemError::io(ctx("SO_RCVBUF/SO_SNDBUF"), e))?;
        }
        // Skip the egress qdisc of the middle veth: the model is the queue.
        setsockopt_int(fdi, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, 1)
            .map_err(|e| NetemError::io(ctx("PACKET_QDISC_BYPASS"), e))?;
        // Optional (Linux >= 4.20); we filter in userspace as well.
        let _ = setsockopt_int(fdi, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1);
        // Receive times from the kernel; frames without one are stamped when
        // read, which is late only for directions with a queue (see above).
        let _ = setsockopt_int(fdi, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1);

        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: sll is a valid sockaddr_ll of the given size.
        let r = unsafe {
            libc::bind(
                fdi,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(last_err(ctx("bind(AF_PACKET)")));
        }
        // Promiscuous: we bridge frames addressed to the far side's MAC.
        let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
        mreq.mr_ifindex = ifindex as i32;
        mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
        // SAFETY: valid packet_mreq pointer and size.
        let r = unsafe {
            libc::setsockopt(
                fdi,
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                (&mreq as *const libc::packet_mreq).cast(),
                std::mem::size_of::<libc::packet_mreq>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(last_err(ctx("PACKET_ADD_MEMBERSHIP promisc")));
        }
        let mtu = interface_mtu(fdi, ifname).map_err(|e| NetemError::io(ctx("SIOCGIFMTU"), e))?;
        Ok(PacketSocket {
            fd,
            max_frame: mtu + 14 + 4,
        })
    }
}

struct Pending {
    at: Instant,
    epoch: u64,
    len: usize,
    buf: Vec<u8>,
}

/// Per-direction forwarding state owned by the worker thread.
struct Lane {
    dir: Dir,
    /// Frames waiting for their delivery time; FIFO because the model never
    /// reorders, so the front is always the earliest.
    queue: VecDeque<Pending>,
    /// Receive staging buffers, one per batch slot.
    staging: Vec<Vec<u8>>,
    /// Control buffers for the receive timestamps, one per batch slot
    /// (`u64` for the alignment `cmsghdr` needs).
    controls: Vec<[u64; CONTROL_LEN / 8]>,
    addrs: Vec<libc::sockaddr_ll>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

impl Lane {
    fn new(dir: Dir, buf_len: usize) -> Self {
        Lane {
            dir,
            queue: VecDeque::with_capacity(1024),
            staging: (0..BATCH).map(|_| vec![0u8; buf_len]).collect(),
            controls: vec![[0u64; CONTROL_LEN / 8]; BATCH],
            // SAFETY: all-zero is a valid value for these plain C structs.
            addrs: (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect(),
            iovs: (0..BATCH)
                .map(|_| libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                })
                .collect(),
            // SAFETY: as above.
            hdrs: (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect(),
        }
    }
}

struct PathWorker {
    shared: Arc<PathShared>,
    sa: PacketSocket,
    sb: PacketSocket,
    stop: Arc<AtomicBool>,
    lanes: [Lane; 2],
    pool: Vec<Vec<u8>>,
    buf_len: usize,
}

impl PathWorker {
    fn new(
        shared: Arc<PathShared>,
        sa: PacketSocket,
        sb: PacketSocket,
        stop: Arc<AtomicBool>,
    ) -> Self {
        // One buffer size for both sides; +1 so truncation is detectable even
        // without MSG_TRUNC semantics.
        let buf_len = sa.max_frame.max(sb.max_frame) + 1;
        PathWorker {
            shared,
            sa,
            sb,
            stop,
            lanes: [Lane::new(Dir::AtoB, buf_len), Lane::new(Dir::BtoA, buf_len)],
            pool: Vec::new(),
            buf_len,
        }
    }

    fn run(mut self) {
        // SAFETY: prctl with integer arguments. Precise hrtimer wake-ups.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
        }
        // Which socket each entry watches is set before every ppoll.
        let mut fds = [libc::pollfd {
            fd: -1,
            events: libc::POLLIN,
            revents: 0,
        }; 2];
        // Whether each socket may hold frames not read yet.
        let mut unread = [true, true];
        while !self.stop.load(Ordering::Relaxed) {
            for (lane, unread) in unread.iter_mut().enumerate() {
                if *unread {
                    *unread = !self.receive(lane);
                }
            }
            let now = Instant::now();
            self.flush_due(0, now);
            self.flush_due(1, now);
            // Watch a socket only while its direction's queue is empty.
            let mut next = None::<Instant>;
            for (lane, fd) in self.lanes.iter().zip(fds.iter_mut()) {
                match lane.queue.front() {
                    Some(head) => {
                        fd.fd = -1;
                        let drain_by = (now + DRAIN_INTERVAL).min(head.at);
                        next = Some(next.map_or(drain_by, |n| n.min(drain_by)));
                    }
                    None => fd.fd = fd_of(lane.dir, &self.sa, &self.sb),
                }
            }
            let now = Instant::now();
            let timeout = match next {
                _ if unread.contains(&true) => Duration::ZERO,
                Some(t) if t <= now + RELEASE_SLACK => Duration::ZERO,
                Some(t) => (t - now).min(MAX_SLEEP),
                None => MAX_SLEEP,
            };
            let ts = libc::timespec {
                tv_sec: timeout.as_secs() as libc::time_t,
                tv_nsec: timeout.subsec_nanos() as libc::c_long,
            };
            fds[0].revents = 0;
            fds[1].revents = 0;
            // SAFETY: fds is a valid array of 2 pollfds (negative fds are
            // ignored); ts is valid.
            let r = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    eprintln!("mptun-netem: ppoll failed: {e}");
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            for (lane, fd) in fds.iter().enumerate() {
                // An unwatched socket is read at every wake-up.
                unread[lane] |= fd.fd < 0 || fd.revents & libc::POLLIN != 0;
            }
        }
    }

    /// Drain up to a few batches from one socket (bounded so sends stay on
    /// time under load). Returns whether the socket was emptied.
    fn receive(&mut self, lane_idx: usize) -> bool {
        for _ in 0..4 {
            let n = self.recv_batch(lane_idx);
            if n < BATCH {
                return true;
            }
        }
        false
    }

    fn recv_batch(&mut self, lane_idx: usize) -> usize {
        let fd = fd_of(self.lanes[lane_idx].dir, &self.sa, &self.sb);
        let buf_len = self.buf_len;
        let lane = &mut self.lanes[lane_idx];
        for i in 0..BATCH {
            lane.iovs[i].iov_base = lane.staging[i].as_mut_ptr().cast();
            lane.iovs[i].iov_len = buf_len;
            let h = &mut lane.hdrs[i];
            h.msg_hdr.msg_name = (&mut lane.addrs[i] as *mut libc::sockaddr_ll).cast();
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            h.msg_hdr.msg_iov = &mut lane.iovs[i];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = lane.controls[i].as_mut_ptr().cast();
            h.msg_hdr.msg_controllen = CONTROL_LEN;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
        // SAFETY: hdrs points at BATCH initialised mmsghdrs whose buffers
        // live in `lane` for the duration of the call.
        let r = unsafe {
            libc::recvmmsg(
                fd,
                lane.hdrs.as_mut_ptr(),
                BATCH as libc::c_uint,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if r <= 0 {
            return 0;
        }
        let n = r as usize;
        let clock = Clocks::now();
        let io = self.shared.io(lane.dir);
        let mut model = self.shared.lock();
        let dir = model.dir_mut(lane.dir);
        let epoch = dir.epoch();
        let (mut outgoing, mut oversize) = (0u64, 0u64);
        for i in 0..n {
            let len = lane.hdrs[i].msg_len as usize;
            if lane.addrs[i].sll_pkttype == libc::PACKET_OUTGOING {
                outgoing += 1;
                continue;
            }
            if len >= buf_len || lane.hdrs[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                oversize += 1;
                continue;
            }
            let arrived = clock.instant_of(receive_time(&lane.hdrs[i].msg_hdr));
            if let Some(at) = dir.handle_arrival(arrived, len) {
                let fresh = self.pool.pop().unwrap_or_else(|| vec![0u8; buf_len]);
                let buf = std::mem::replace(&mut lane.staging[i], fresh);
                lane.queue.push_back(Pending {
                    at,
                    epoch,
                    len,
                    buf,
                });
            }
        }
        drop(model);
        if outgoing > 0 {
            io.ignored_outgoing.fetch_add(outgoing, Ordering::Relaxed);
        }
        if oversize > 0 {
            io.oversize.fetch_add(oversize, Ordering::Relaxed);
        }
        n
    }

    /// Send every frame of lane `lane_idx` whose time has come.
    fn flush_due(&mut self, lane_idx: usize, now: Instant) {
        let deadline = now + RELEASE_SLACK;
        loop {
            let lane = &self.lanes[lane_idx];
            let due = lane
                .queue
                .iter()
                .take(BATCH)
                .take_while(|p| p.at <= deadline)
                .count();
            if due == 0 {
                return;
            }
            self.send_front(lane_idx, due, now);
            if due < BATCH {
                return;
            }
        }
    }

    /// Send (or drop, if the link was cut meanwhile) the first `n` frames,
    /// at `now`.
    fn send_front(&mut self, lane_idx: usize, n: usize, now: Instant) {
        // A→B frames leave through B's socket and vice versa.
        let fd = fd_of(self.lanes[lane_idx].dir.reverse(), &self.sa, &self.sb);
        let dir_id = self.lanes[lane_idx].dir;
        let (up, epoch) = {
            let m = self.shared.lock();
            let d = m.dir(dir_id);
            (d.is_up(), d.epoch())
        };
        let lane = &mut self.lanes[lane_idx];
        let mut stale = 0u64;
        let mut count = 0usize;
        let (mut late, mut very_late) = (0u64, 0u64);
        for (i, p) in lane.queue.iter_mut().take(n).enumerate() {
            if !up || p.epoch != epoch {
                stale += 1;
                // Zero-length iov: skipped below.
                lane.iovs[i].iov_len = 0;
                continue;
            }
            let lateness = now.saturating_duration_since(p.at);
            late += u64::from(lateness >= LATE);
            very_late += u64::from(lateness >= VERY_LATE);
            lane.iovs[i].iov_base = p.buf.as_mut_ptr().cast();
            lane.iovs[i].iov_len = p.len;
            count += 1;
        }
        // Compact the live entries to the front of the header array.
        let mut k = 0usize;
        let mut bytes = 0u64;
        for i in 0..n {
            if lane.iovs[i].iov_len == 0 {
                continue;
            }
            bytes += lane.iovs[i].iov_len as u64;
            let iov = lane.iovs[i];
            lane.iovs[k] = iov;
            let h = &mut lane.hdrs[k];
            h.msg_hdr.msg_name = std::ptr::null_mut();
            h.msg_hdr.msg_namelen = 0;
            h.msg_hdr.msg_control = std::ptr::null_mut();
            h.msg_hdr.msg_controllen = 0;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
            k += 1;
        }
        debug_assert_eq!(k, count);
        for j in 0..k {
            lane.hdrs[j].msg_hdr.msg_iov = &mut lane.iovs[j];
            lane.hdrs[j].msg_hdr.msg_iovlen = 1;
        }
        let io = self.shared.io(dir_id);
        let mut sent = 0usize;
        let mut errors = 0u64;
        while sent < k {
            // SAFETY: hdrs[sent..k] are initialised and point into buffers
            // owned by the queue entries, alive for the call.
            let r = unsafe {
                libc::sendmmsg(
                    fd,
                    lane.hdrs[sent..].as_mut_ptr(),
                    (k - sent) as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                sent += r as usize;
            } else {
                // Drop the frame that failed (e.g. ENOBUFS) rather than spin.
                errors += 1;
                sent += 1;
            }
        }
        io.tx_packets
            .fetch_add(k as u64 - errors, Ordering::Relaxed);
        io.tx_bytes.fetch_add(bytes, Ordering::Relaxed);
        if errors > 0 {
            io.tx_errors.fetch_add(errors, Ordering::Relaxed);
        }
        if late > 0 {
            io.late.fetch_add(late, Ordering::Relaxed);
            io.very_late.fetch_add(very_late, Ordering::Relaxed);
        }
        if stale > 0 {
            self.shared
                .lock()
                .dir_mut(dir_id)
                .count_in_flight_drops(stale);
        }
        for _ in 0..n {
            if let Some(p) = lane.queue.pop_front() {
                self.pool.push(p.buf);
            }
        }
    }
}

/// The socket frames of direction `dir` arrive on.
fn fd_of(dir: Dir, sa: &PacketSocket, sb: &PacketSocket) -> i32 {
    match dir {
        Dir::AtoB => sa.fd.as_raw_fd(),
        Dir::BtoA => sb.fd.as_raw_fd(),
    }
}

/// The kernel's receive time of a frame, from its `SCM_TIMESTAMPNS`.
fn receive_time(msg: &libc::msghdr) -> Option<libc::timespec> {
    // SAFETY: msg was filled by recvmmsg with a control buffer we own; the
    // CMSG_* macros stay within msg_controllen, and the timestamp is read
    // unaligned from inside the buffer.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let data = libc::CMSG_DATA(cmsg).cast::<libc::timespec>();
                return Some(data.read_unaligned());
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    None
}

/// The monotonic and wall clocks read together, to turn the kernel's
/// receive times (wall clock) into `Instant`s.
struct Clocks {
    instant: Instant,
    wall: Duration,
}

impl Clocks {
    fn now() -> Self {
        let instant = Instant::now();
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Clocks { instant, wall }
    }

    /// When a frame stamped `at` arrived; now if it has no stamp, and never
    /// in the future or further back than the stamp can be trusted.
    fn instant_of(&self, at: Option<libc::timespec>) -> Instant {
        let Some(ts) = at else {
            return self.instant;
        };
        let stamped = Duration::new(
            ts.tv_sec.max(0) as u64,
            ts.tv_nsec.clamp(0, 999_999_999) as u32,
        );
        let age = self.wall.saturating_sub(stamped).min(MAX_SLEEP);
        self.instant.checked_sub(age).unwrap_or(self.instant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(wall: Duration) -> Option<libc::timespec> {
        Some(libc::timespec {
            tv_sec: wall.as_secs() as libc::time_t,
            tv_nsec: wall.subsec_nanos() as libc::c_long,
        })
    }

    #[test]
    fn receive_stamps_become_instants_that_far_back() {
        let clocks = Clocks::now();
        let ms = Duration::from_millis(1);
        assert_eq!(
            clocks.instant_of(stamp(clocks.wall - 3 * ms)),
            clocks.instant - 3 * ms
        );
        // No stamp, or one from the future (a wall clock step): now.
        assert_eq!(clocks.instant_of(None), clocks.instant);
        assert_eq!(
            clocks.instant_of(stamp(clocks.wall + 3 * ms)),
            clocks.instant
        );
        // Never further back than a frame can have waited unread.
        assert_eq!(
            clocks.instant_of(stamp(clocks.wall - 10 * MAX_SLEEP)),
            clocks.instant - MAX_SLEEP
        );
    }
}
