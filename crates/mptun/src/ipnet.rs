//! IP networks in CIDR notation (`10.77.0.0/24`, `fd00::1/64`).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// An address with a prefix length. As an interface address the host bits
/// matter (`10.77.0.1/24`); as a route they are ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpNet {
    /// The address as written.
    pub addr: IpAddr,
    /// Prefix length in bits.
    pub prefix: u8,
}

impl IpNet {
    fn max_prefix(addr: IpAddr) -> u8 {
        if addr.is_ipv4() {
            32
        } else {
            128
        }
    }

    /// Return the network with the host bits cleared.
    pub fn network(self) -> IpNet {
        let addr = match self.addr {
            IpAddr::V4(a) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                IpAddr::from((u32::from(a) & mask).to_be_bytes())
            }
            IpAddr::V6(a) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                IpAddr::from((u128::from(a) & mask).to_be_bytes())
            }
        };
        IpNet {
            addr,
            prefix: self.prefix,
        }
    }

    /// Return whether any of `nets` is the same network as this one.
    pub fn network_in(self, nets: &[IpNet]) -> bool {
        nets.iter().any(|n| n.network() == self.network())
    }

    /// Return whether `ip` lies in this network.
    pub fn contains(self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        ip.is_ipv4() == self.addr.is_ipv4()
            && IpNet {
                addr: ip,
                prefix: self.prefix,
            }
            .network()
                == self.network()
    }
}

impl FromStr for IpNet {
    type Err = String;

    /// Parse `addr/prefix`; a bare address is a host route (/32 or /128).
    fn from_str(s: &str) -> Result<Self, String> {
        let (addr_text, prefix_text) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr_text
            .trim()
            .parse()
            .map_err(|_| format!("invalid IP network {s:?}: {addr_text:?} is not an IP address"))?;
        let max = Self::max_prefix(addr);
        let prefix = match prefix_text {
            None => max,
            Some(p) => match p.trim().parse::<u8>() {
                Ok(n) if n <= max => n,
                _ => {
                    return Err(format!(
                        "invalid IP network {s:?}: prefix must be 0 to {max}"
                    ))
                }
            },
        };
        Ok(IpNet { addr, prefix })
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_matches() {
        let net: IpNet = "10.77.0.1/24".parse().unwrap();
        assert_eq!(net.network().to_string(), "10.77.0.0/24");
        assert!(net.contains("10.77.0.200".parse().unwrap()));
        assert!(!net.contains("10.77.1.1".parse().unwrap()));
        assert!(net.contains("::ffff:10.77.0.9".parse().unwrap()));
        let all: IpNet = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("192.0.2.1".parse().unwrap()));
        assert!(!all.contains("::1".parse().unwrap()));
        let v6: IpNet = "fd00:77::1/64".parse().unwrap();
        assert!(v6.contains("fd00:77::abcd".parse().unwrap()));
        let routes: [IpNet; 1] = ["10.77.0.0/24".parse().unwrap()];
        assert!(net.network_in(&routes));
        assert!(!"10.77.1.1/24".parse::<IpNet>().unwrap().network_in(&routes));
        let host: IpNet = "192.0.2.7".parse().unwrap();
        assert_eq!(host.prefix, 32);
    }

    #[test]
    fn rejects_bad_networks() {
        assert!("10.0.0.1/33".parse::<IpNet>().is_err());
        assert!("10.0.0/24".parse::<IpNet>().is_err());
        assert!("fd00::/129".parse::<IpNet>().is_err());
    }
}
