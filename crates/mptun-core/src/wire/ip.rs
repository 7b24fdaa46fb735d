//! The little of an inner IP header mptun reads: the version, the lengths
//! and the addresses. Inner packets come from the TUN device, or from the
//! peer through WireGuard, which already checked that they look like IP.

use std::net::IpAddr;

/// Byte offsets within an IPv4 header.
mod v4 {
    use core::ops::Range;
    pub const HEADER_LEN: usize = 20;
    pub const TOTAL_LEN: Range<usize> = 2..4;
    pub const SOURCE: Range<usize> = 12..16;
    pub const DESTINATION: Range<usize> = 16..20;
}

/// Byte offsets within an IPv6 header.
mod v6 {
    use core::ops::Range;
    pub const HEADER_LEN: usize = 40;
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
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
    let word = |r: core::ops::Range<usize>| {
        usize::from(u16::from_be_bytes([packet[r.start], packet[r.start + 1]]))
    };
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
    fn what_is_not_ip_has_no_length() {
        assert_eq!(packet_len(&[]), None);
        assert_eq!(packet_len(&[0x45; 19]), None);
        assert_eq!(packet_len(&[0x60; 39]), None);
        assert_eq!(packet_len(&[0x15; 60]), None);
        assert_eq!(destination(&[0x45; 12]), None);
    }
}
