//! The round trip an interactive TCP flow sees: small requests answered by
//! small responses, one at a time, both ways marked with one DSCP.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use mptun_netem::topology::in_netns;
use mptun_netem::NetemError;

/// Bytes of each request and response.
const MESSAGE: usize = 64;
/// Longest one exchange may take.
const TIMEOUT: Duration = Duration::from_secs(2);
/// Pause between exchanges, so each one starts from an idle tunnel.
const PAUSE: Duration = Duration::from_millis(20);

/// The TOS byte of EF, the DSCP OpenSSH 10.1 marks interactive sessions
/// with.
pub const TOS_EF: u8 = 46 << 2;

/// Exchange `count` requests and responses over one TCP connection from
/// namespace `from_ns` to `to_addr` (an address in `to_ns`), both sides
/// marking their segments with `tos`; return the median round trip in ms.
pub fn tcp_request_rtt_ms(
    from_ns: &str,
    to_ns: &str,
    to_addr: Ipv4Addr,
    tos: u8,
    count: usize,
) -> anyhow::Result<f64> {
    if count == 0 {
        bail!("no exchanges asked for");
    }
    let listener = in_netns(to_ns, move || {
        TcpListener::bind((to_addr, 0)).map_err(|e| NetemError::io("bind the responder", e))
    })?;
    let to: SocketAddr = (to_addr, listener.local_addr()?.port()).into();
    let responder = std::thread::spawn(move || -> anyhow::Result<()> {
        let (mut stream, _) = listener.accept().context("accept")?;
        prepare(&stream, tos)?;
        let mut message = [0u8; MESSAGE];
        for _ in 0..count {
            stream.read_exact(&mut message).context("read a request")?;
            stream.write_all(&message).context("answer")?;
        }
        Ok(())
    });
    let mut stream = in_netns(from_ns, move || {
        TcpStream::connect_timeout(&to, TIMEOUT).map_err(|e| NetemError::io("connect", e))
    })?;
    prepare(&stream, tos)?;
    let mut message = [0u8; MESSAGE];
    let mut rtts = Vec::with_capacity(count);
    for _ in 0..count {
        std::thread::sleep(PAUSE);
        let start = Instant::now();
        stream.write_all(&message).context("send a request")?;
        stream.read_exact(&mut message).context("read a response")?;
        rtts.push(start.elapsed().as_secs_f64() * 1e3);
    }
    drop(stream);
    responder
        .join()
        .map_err(|_| anyhow::anyhow!("responder panicked"))??;
    rtts.sort_by(f64::total_cmp);
    Ok(rtts[rtts.len() / 2])
}

/// No Nagle delay, timeouts, and `tos` on what the stream sends.
fn prepare(stream: &TcpStream, tos: u8) -> anyhow::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    socket2::SockRef::from(stream)
        .set_tos_v4(tos.into())
        .context("set IP_TOS")
}
