//! The TUN MTU from the paths: the largest inner packet that, with the
//! tunnel's overhead, fits the MTU of every path's outgoing interface, so
//! that no outer datagram is fragmented (9000-byte links give about 8900).

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;

use mptun_core::TRAILER_LEN;
use mptun_wg::WG_DATA_OVERHEAD;
use socket2::{Domain, Protocol, Socket, Type};

use crate::config::{Config, PathConfig};

/// What an outgoing interface is assumed to carry when it cannot be told.
pub const ASSUMED_PATH_MTU: u32 = 1500;
const UDP_HEADER: u32 = 8;

/// Largest TUN MTU: an inner packet that, with the trailer and WireGuard's
/// overhead, still fits the largest UDP payload of an IPv4 datagram (65535
/// less its IP and UDP headers). Beyond it no path could carry the packet,
/// and the sealing buffers are sized from the MTU.
pub const MAX_MTU: u16 =
    (65_535 - 20 - UDP_HEADER as usize - WG_DATA_OVERHEAD - TRAILER_LEN) as u16;

/// The TUN device's MTU and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunMtu {
    pub mtu: u16,
    pub source: MtuSource,
}

/// Where the TUN MTU came from, for `mptun check` and `mptun show`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MtuSource {
    /// `interface.mtu`; the paths would fit `fits`.
    Configured { fits: u32 },
    /// The smallest of the paths' outgoing MTUs, one per path in order.
    Paths(Vec<PathMtu>),
}

/// What one path's outer packets may be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathMtu {
    /// The outer MTU.
    pub mtu: u32,
    /// Where it was read: an interface, a route, or why it was assumed.
    pub from: String,
    /// Whether the outer packets may be IPv6 (a larger header).
    pub ipv6: bool,
}

impl PathMtu {
    /// The largest inner packet that fits this path in one datagram.
    pub fn inner(&self) -> u32 {
        let ip = if self.ipv6 { 40 } else { 20 };
        let overhead = ip + UDP_HEADER + WG_DATA_OVERHEAD as u32 + TRAILER_LEN as u32;
        self.mtu.saturating_sub(overhead)
    }
}

impl fmt::Display for MtuSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MtuSource::Configured { .. } => write!(f, "interface.mtu"),
            MtuSource::Paths(paths) => {
                write!(f, "from the paths:")?;
                for (n, p) in paths.iter().enumerate() {
                    let sep = if n == 0 { " " } else { ", " };
                    write!(f, "{sep}path[{n}] {} ({})", p.mtu, p.from)?;
                }
                Ok(())
            }
        }
    }
}

/// Return the TUN MTU for `config` and where it came from: `interface.mtu`
/// if set, else what fits the smallest outgoing MTU of the paths. A path
/// whose outgoing interface cannot be told (no endpoint, bind address or
/// interface) counts as [`ASSUMED_PATH_MTU`].
pub fn tun_mtu(config: &Config) -> TunMtu {
    let ipv6_inside = config
        .interface
        .addresses
        .iter()
        .any(|a| a.addr().is_ipv6());
    let paths = config.paths.iter().map(outgoing_mtu).collect();
    choose(config.interface.mtu, ipv6_inside, paths)
}

/// Return the configured MTU, or else the largest that fits all `paths`.
fn choose(configured: Option<u16>, ipv6_inside: bool, paths: Vec<PathMtu>) -> TunMtu {
    let fits = paths.iter().map(PathMtu::inner).min().unwrap_or(0);
    if let Some(mtu) = configured {
        return TunMtu {
            mtu,
            source: MtuSource::Configured { fits },
        };
    }
    // IPv6 on the TUN device needs 1280; a path that small fragments.
    let min = if ipv6_inside { 1280 } else { 576 };
    TunMtu {
        mtu: fits.clamp(min, u32::from(MAX_MTU)) as u16,
        source: MtuSource::Paths(paths),
    }
}

/// Return what one path's outer packets may be.
pub fn outgoing_mtu(path: &PathConfig) -> PathMtu {
    let ipv6 = path.may_be_ipv6();
    let found = if let Some(dev) = &path.bind_interface {
        interface_mtu(dev).map(|mtu| (mtu, format!("interface {dev}")))
    } else if let Some(endpoint) = path.endpoint {
        route_mtu(path, endpoint).map(|mtu| (mtu, format!("route to {}", endpoint.ip())))
    } else if let Some(bind) = path.bind {
        interface_of(bind)
            .and_then(|dev| interface_mtu(&dev).map(|mtu| (mtu, format!("interface {dev}"))))
    } else {
        Err(io::Error::other("no endpoint, bind or bind-interface"))
    };
    match found {
        Ok((mtu, from)) => PathMtu { mtu, from, ipv6 },
        Err(e) => PathMtu {
            mtu: ASSUMED_PATH_MTU,
            from: format!("assumed: {e}"),
            ipv6,
        },
    }
}

/// Return the MTU of the interface named `dev`.
fn interface_mtu(dev: &str) -> io::Result<u32> {
    let text = std::fs::read_to_string(format!("/sys/class/net/{dev}/mtu"))
        .map_err(|e| io::Error::new(e.kind(), format!("interface {dev:?}: {e}")))?;
    text.trim()
        .parse()
        .map_err(|_| io::Error::other(format!("interface {dev:?}: MTU {text:?} unreadable")))
}

/// Return the name of the interface that holds `addr`.
fn interface_of(addr: IpAddr) -> io::Result<String> {
    getifaddrs::getifaddrs()?
        .find(|i| i.address.ip_addr() == Some(addr))
        .map(|i| i.name)
        .ok_or_else(|| io::Error::other(format!("no interface holds {addr}")))
}

/// Return the MTU of the route to `endpoint`, as this path's socket would
/// take it: a UDP socket bound alike and connected there (which sends
/// nothing) knows it.
fn route_mtu(path: &PathConfig, endpoint: SocketAddr) -> io::Result<u32> {
    let socket = Socket::new(
        Domain::for_address(endpoint),
        Type::DGRAM,
        Some(Protocol::UDP),
    )?;
    if let Some(bind) = path.bind {
        socket.bind(&SocketAddr::new(bind, 0).into())?;
    }
    socket.connect(&endpoint.into())?;
    let (level, name) = match endpoint {
        SocketAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_MTU),
        SocketAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_MTU),
    };
    let mut mtu: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the fd is a live socket for the call; value and length point
    // at a c_int and its size.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&mut mtu as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    u32::try_from(mtu).map_err(|_| io::Error::other(format!("route MTU {mtu}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path_mtu(mtu: u32, from: &str, ipv6: bool) -> PathMtu {
        PathMtu {
            mtu,
            from: from.to_string(),
            ipv6,
        }
    }

    #[test]
    fn the_inner_mtu_leaves_room_for_ip_udp_wireguard_and_trailer() {
        assert_eq!(path_mtu(1500, "", false).inner(), 1416);
        assert_eq!(path_mtu(1500, "", true).inner(), 1396);
        assert_eq!(path_mtu(9000, "", false).inner(), 8916);
        assert_eq!(path_mtu(10, "", false).inner(), 0);
    }

    #[test]
    fn the_smallest_path_sets_the_mtu_unless_one_is_configured() {
        let jumbo = path_mtu(9000, "interface eth1", false);
        let v6 = path_mtu(9000, "route to 2001:db8::2", true);
        let plain = path_mtu(1500, "interface eth2", false);
        let tun = choose(None, false, vec![jumbo.clone(), v6.clone()]);
        assert_eq!(tun.mtu, 8896);
        let tun = choose(None, false, vec![jumbo.clone(), plain.clone(), v6]);
        assert_eq!(tun.mtu, 1416);
        assert_eq!(
            tun.source.to_string(),
            "from the paths: path[0] 9000 (interface eth1), path[1] 1500 (interface eth2), \
             path[2] 9000 (route to 2001:db8::2)"
        );
        let tun = choose(Some(1400), false, vec![jumbo, plain]);
        assert_eq!(tun.mtu, 1400);
        assert_eq!(tun.source, MtuSource::Configured { fits: 1416 });
        assert_eq!(tun.source.to_string(), "interface.mtu");
    }

    #[test]
    fn a_tiny_path_mtu_still_leaves_the_minimum_ip_needs() {
        let tiny = vec![path_mtu(1280, "interface wwan0", true)];
        assert_eq!(choose(None, true, tiny.clone()).mtu, 1280);
        assert_eq!(choose(None, false, tiny).mtu, 1176);
    }

    #[test]
    fn loopback_routes_and_interfaces_are_read() {
        let path = PathConfig {
            name: None,
            listen_port: 0,
            endpoint: Some("127.0.0.1:9".parse().unwrap()),
            endpoint_name: None,
            bind: None,
            bind_interface: None,
            weight: None,
        };
        let lo = interface_mtu("lo").unwrap();
        let by_route = outgoing_mtu(&path);
        // The route's MTU is the interface's, capped at what IP can carry.
        assert_eq!(by_route.mtu, lo.min(65_535), "{}", by_route.from);
        let by_bind = outgoing_mtu(&PathConfig {
            endpoint: None,
            bind: Some("127.0.0.1".parse().unwrap()),
            ..path.clone()
        });
        assert_eq!(by_bind, path_mtu(lo, "interface lo", false));
        let unknown = outgoing_mtu(&PathConfig {
            endpoint: None,
            ..path
        });
        assert_eq!(unknown.mtu, ASSUMED_PATH_MTU);
        assert!(unknown.from.starts_with("assumed"), "{}", unknown.from);
    }
}
