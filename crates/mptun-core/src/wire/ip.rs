//! The little of an inner IP header mptun reads: the version, the lengths
//! and the addresses. Inner packets come from the TUN device, or from the
//! peer through WireGuard, which already checked that they look like IP.

use std::net::IpAddr;

/// Byte offsets within an IPv4 header.
mod v4 {
    use core::ops::Range;
    pub const HEADER_LEN: usize = 20;
    pub const TOTAL_LEN: Range<usize> = 2..4;
    pub const PROTOCOL: usize = 9;
    pub const SOURCE: Range<usize> = 12..16;
    pub const DESTINATION: Range<usize> = 16..20;
}

/// Byte offsets within an IPv6 header.
mod v6 {
    use core::ops::Range;
    pub const HEADER_LEN: usize = 40;
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const SOURCE: Range<usize> = 8..24;
    pub const DESTINATION: Range<usize> = 24..40;
}

fn version(packet: &[u8]) -> Option<u8> {
    let v = packet.first()? >> 4;
    match v {
        4 if packet.len() >= v4::HEADER_LEN => Some(4),
        6 if packet.len() >= v6::HEADER_LEN => Some(6),
        _ => None,
    }
}

/// Return the length the IP header of `packet` claims for the whole packet,
/// or `None` if it is not an IPv4 or IPv6 packet.
pub fn packet_len(packet: &[u8]) -> Option<usize> {
    let word = |r| usize::from(super::read_u16(packet, r));
    match version(packet)? {
        4 => Some(word(v4::TOTAL_LEN)),
        _ => Some(v6::HEADER_LEN + word(v6::PAYLOAD_LEN)),
    }
}

fn address(
    packet: &[u8],
    r4: core::ops::Range<usize>,
    r6: core::ops::Range<usize>,
) -> Option<IpAddr> {
    match version(packet)? {
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(&packet[r4]).ok()?)),
        _ => Some(IpAddr::from(<[u8; 16]>::try_from(&packet[r6]).ok()?)),
    }
}

/// IP protocol number of TCP.
const TCP: u8 = 6;
/// Byte of the TCP header whose high nibble is the header's length in
/// words, and the byte of its flags.
const TCP_DATA_OFFSET: usize = 12;
const TCP_FLAGS: usize = 13;
const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;

/// Return whether `packet` is a TCP segment whose sender times a round
/// trip by its acknowledgement: one that carries data, or a SYN (the
/// handshake's round trip is the first a flow's congestion control
/// takes). Not a bare ACK or FIN. An IPv6 packet with extension headers
/// before TCP is taken as not TCP.
pub fn is_timed_tcp_segment(packet: &[u8]) -> bool {
    tcp_segment(packet).is_some_and(|(carries_data, flags)| carries_data || flags & TCP_SYN != 0)
}

/// Return whether `packet` is a bare TCP acknowledgement: no data, and no
/// SYN, FIN or RST, which take their place in the flow's order. An IPv6
/// packet with extension headers before TCP is taken as not TCP.
pub fn is_bare_tcp_ack(packet: &[u8]) -> bool {
    tcp_segment(packet).is_some_and(|(carries_data, flags)| {
        !carries_data && flags & (TCP_SYN | TCP_FIN | TCP_RST) == 0
    })
}

/// Return whether the TCP segment `packet` carries data, and its flags;
/// `None` if it is not TCP or too short to tell.
fn tcp_segment(packet: &[u8]) -> Option<(bool, u8)> {
    let (header_len, protocol) = transport(packet)?;
    if protocol != TCP {
        return None;
    }
    let total = packet_len(packet)?;
    let offset = *packet.get(header_len + TCP_DATA_OFFSET)?;
    let flags = *packet.get(header_len + TCP_FLAGS)?;
    let tcp_header_len = usize::from(offset >> 4) * 4;
    let carries_data = total.min(packet.len()) > header_len + tcp_header_len;
    Some((carries_data, flags))
}

/// Return whether `packet` is a TCP segment, of any kind. An IPv6 packet
/// with extension headers before TCP is taken as not TCP.
pub fn is_tcp(packet: &[u8]) -> bool {
    transport(packet).is_some_and(|(_, protocol)| protocol == TCP)
}

/// Return the IP header's length and the protocol after it, if `packet` is
/// IPv4 or IPv6 (for IPv6, the first next header).
fn transport(packet: &[u8]) -> Option<(usize, u8)> {
    match version(packet)? {
        4 => Some((usize::from(packet[0] & 0x0f) * 4, packet[v4::PROTOCOL])),
        _ => Some((v6::HEADER_LEN, packet[v6::NEXT_HEADER])),
    }
}

/// Return the DSCP of an IPv4 or IPv6 packet: the high six bits of its
/// type of service or traffic class.
pub fn dscp(packet: &[u8]) -> Option<u8> {
    match version(packet)? {
        4 => Some(packet[1] >> 2),
        _ => Some(((packet[0] & 0x0f) << 2) | (packet[1] >> 6)),
    }
}

/// Return the source address of an IPv4 or IPv6 packet.
pub fn source(packet: &[u8]) -> Option<IpAddr> {
    address(packet, v4::SOURCE, v6::SOURCE)
}

/// Return the destination address of an IPv4 or IPv6 packet.
pub fn destination(packet: &[u8]) -> Option<IpAddr> {
    address(packet, v4::DESTINATION, v6::DESTINATION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lengths_and_addresses_of_both_versions() {
        let mut v4 = [0u8; 28];
        v4[0] = 0x45;
        v4[2..4].copy_from_slice(&28u16.to_be_bytes());
        v4[12..16].copy_from_slice(&[10, 0, 0, 1]);
        v4[16..20].copy_from_slice(&[10, 0, 0, 2]);
        assert_eq!(packet_len(&v4), Some(28));
        assert_eq!(source(&v4), Some(IpAddr::from([10, 0, 0, 1])));
        assert_eq!(destination(&v4), Some(IpAddr::from([10, 0, 0, 2])));

        let mut v6 = [0u8; 48];
        v6[0] = 0x60;
        v6[4..6].copy_from_slice(&8u16.to_be_bytes());
        v6[39] = 2;
        assert_eq!(packet_len(&v6), Some(48));
        assert_eq!(destination(&v6), Some("::2".parse().unwrap()));
    }

    #[test]
    fn reads_the_dscp_of_both_versions() {
        let mut v4 = [0u8; 20];
        v4[0] = 0x45;
        v4[1] = 0xb8; // EF (46), ECN 0
        assert_eq!(dscp(&v4), Some(46));
        v4[1] = 0x4b; // AF21 (18), ECN CE
        assert_eq!(dscp(&v4), Some(18));
        // Traffic class 0xb9 (EF, ECN 1) straddles the first two bytes.
        let mut v6 = [0u8; 40];
        v6[0] = 0x6b;
        v6[1] = 0x90;
        assert_eq!(dscp(&v6), Some(46));
        assert_eq!(dscp(&[0x45, 0xb8]), None);
    }

    #[test]
    fn what_is_not_ip_has_no_length() {
        assert_eq!(packet_len(&[]), None);
        assert_eq!(packet_len(&[0x45; 19]), None);
        assert_eq!(packet_len(&[0x60; 39]), None);
        assert_eq!(packet_len(&[0x15; 60]), None);
        assert_eq!(destination(&[0x45; 12]), None);
    }

    /// An IPv4 TCP segment in 50 bytes, a 20-byte TCP header and
    /// `ip_len` bytes in all by its IP header (40: no data), with `flags`.
    fn v4_tcp(ip_len: u16, flags: u8) -> [u8; 50] {
        let mut v4 = [0u8; 50];
        v4[0] = 0x45;
        v4[2..4].copy_from_slice(&ip_len.to_be_bytes());
        v4[9] = 6;
        v4[32] = 0x50;
        v4[33] = flags;
        v4
    }

    #[test]
    fn tells_tcp_data_and_syns_from_bare_acks_and_other_protocols() {
        // IPv4, TCP, a 20-byte TCP header and 10 bytes of data.
        let mut v4 = v4_tcp(50, 0);
        assert!(is_timed_tcp_segment(&v4));
        // The same as a bare ACK: the IP length ends with the TCP header.
        v4[2..4].copy_from_slice(&40u16.to_be_bytes());
        assert!(!is_timed_tcp_segment(&v4));
        v4[33] = 0x12; // SYN-ACK
        assert!(is_timed_tcp_segment(&v4));
        v4[33] = 0x10;
        v4[2..4].copy_from_slice(&50u16.to_be_bytes());
        v4[9] = 17;
        assert!(!is_timed_tcp_segment(&v4), "UDP");
        // A header too short to hold the TCP data offset.
        assert!(!is_timed_tcp_segment(&v4[..30]));

        let mut v6 = [0u8; 70];
        v6[0] = 0x60;
        v6[4..6].copy_from_slice(&30u16.to_be_bytes());
        v6[6] = 6;
        v6[52] = 0x50;
        assert!(is_timed_tcp_segment(&v6));
        v6[52] = 0x80; // 32-byte TCP header (options): no data left
        assert!(!is_timed_tcp_segment(&v6));
    }

    #[test]
    fn tells_bare_acks_from_segments_that_take_a_place_in_the_flow() {
        let mut v4 = v4_tcp(40, 0x10);
        assert!(is_bare_tcp_ack(&v4));
        for (flags, what) in [(0x11, "FIN"), (0x12, "SYN-ACK"), (0x14, "RST")] {
            v4[33] = flags;
            assert!(!is_bare_tcp_ack(&v4), "{what}");
        }
        v4[33] = 0x10;
        v4[2..4].copy_from_slice(&50u16.to_be_bytes());
        assert!(!is_bare_tcp_ack(&v4), "data");
        v4[2..4].copy_from_slice(&40u16.to_be_bytes());
        v4[9] = 17;
        assert!(!is_bare_tcp_ack(&v4), "UDP");
        assert!(!is_bare_tcp_ack(&v4[..30]));
    }
}
