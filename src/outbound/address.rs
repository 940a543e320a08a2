//! Which IP addresses a user-supplied URL may never reach: private, loopback, link-local,
//! metadata, shared, documentation, multicast and reserved ranges, IPv4 and IPv6 alike.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IPv4 ranges that are not the public internet, most specific first.
const V4_BLOCKS: &[([u8; 4], u8, &str)] = &[
    ([0, 0, 0, 0], 8, "in 0.0.0.0/8 ('this network')"),
    ([10, 0, 0, 0], 8, "a private address (10.0.0.0/8)"),
    (
        [100, 64, 0, 0],
        10,
        "a shared carrier-grade NAT address (100.64.0.0/10)",
    ),
    ([127, 0, 0, 0], 8, "a loopback address (127.0.0.0/8)"),
    (
        [169, 254, 169, 254],
        32,
        "the cloud instance metadata address",
    ),
    (
        [169, 254, 0, 0],
        16,
        "a link-local address (169.254.0.0/16)",
    ),
    ([172, 16, 0, 0], 12, "a private address (172.16.0.0/12)"),
    (
        [192, 0, 0, 0],
        24,
        "an IETF protocol assignment (192.0.0.0/24)",
    ),
    ([192, 0, 2, 0], 24, "a documentation address (192.0.2.0/24)"),
    (
        [192, 88, 99, 0],
        24,
        "a 6to4 relay address (192.88.99.0/24)",
    ),
    ([192, 168, 0, 0], 16, "a private address (192.168.0.0/16)"),
    (
        [198, 18, 0, 0],
        15,
        "a benchmarking address (198.18.0.0/15)",
    ),
    (
        [198, 51, 100, 0],
        24,
        "a documentation address (198.51.100.0/24)",
    ),
    (
        [203, 0, 113, 0],
        24,
        "a documentation address (203.0.113.0/24)",
    ),
    ([224, 0, 0, 0], 4, "a multicast address (224.0.0.0/4)"),
    (
        [240, 0, 0, 0],
        4,
        "a reserved or broadcast address (240.0.0.0/4)",
    ),
];

/// IPv6 ranges that are not the public internet. IPv4-mapped, NAT64 and 6to4 addresses are
/// judged by the IPv4 address they carry, before this table.
const V6_BLOCKS: &[(u128, u8, &str)] = &[
    (0, 128, "the unspecified address (::)"),
    (1, 128, "the loopback address (::1)"),
    (0, 96, "a deprecated IPv4-compatible address (::/96)"),
    (
        0x0064_ff9b_0001 << 80,
        48,
        "a local-use NAT64 address (64:ff9b:1::/48)",
    ),
    (0x0100 << 112, 64, "a discard-only address (100::/64)"),
    (
        0x2001 << 112,
        23,
        "an IETF protocol assignment such as Teredo (2001::/23)",
    ),
    (
        0x2001_0db8 << 96,
        32,
        "a documentation address (2001:db8::/32)",
    ),
    (0xfc00 << 112, 7, "a unique local address (fc00::/7)"),
    (0xfe80 << 112, 10, "a link-local address (fe80::/10)"),
    (0xfec0 << 112, 10, "a site-local address (fec0::/10)"),
    (0xff00 << 112, 8, "a multicast address (ff00::/8)"),
];

/// Why `ip` is not a public internet address, or `None` when it is one.
pub fn forbidden_reason(ip: IpAddr) -> Option<String> {
    match ip {
        IpAddr::V4(v4) => v4_reason(v4).map(str::to_owned),
        IpAddr::V6(v6) => v6_reason(v6),
    }
}

fn v4_reason(ip: Ipv4Addr) -> Option<&'static str> {
    let bits = u32::from(ip);
    V4_BLOCKS
        .iter()
        .find(|(network, prefix, _)| in_v4_block(bits, u32::from_be_bytes(*network), *prefix))
        .map(|(_, _, reason)| *reason)
}

fn in_v4_block(bits: u32, network: u32, prefix: u8) -> bool {
    let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
    bits & mask == network & mask
}

fn in_v6_block(bits: u128, network: u128, prefix: u8) -> bool {
    let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
    bits & mask == network & mask
}

fn v6_reason(ip: Ipv6Addr) -> Option<String> {
    if let Some(embedded) = embedded_v4(ip) {
        return v4_reason(embedded).map(|reason| format!("{reason}, embedded in {ip}"));
    }
    let bits = u128::from(ip);
    V6_BLOCKS
        .iter()
        .find(|(network, prefix, _)| in_v6_block(bits, *network, *prefix))
        .map(|(_, _, reason)| (*reason).to_owned())
}

/// The IPv4 address an IPv6 address stands for: IPv4-mapped (`::ffff:a.b.c.d`), well-known NAT64
/// (`64:ff9b::a.b.c.d`) and 6to4 (`2002:aabb:ccdd::/48`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(mapped) = ip.to_ipv4_mapped() {
        return Some(mapped);
    }
    let bits = u128::from(ip);
    if in_v6_block(bits, 0x0064_ff9b << 96, 96) {
        return Some(Ipv4Addr::from((bits & 0xffff_ffff) as u32));
    }
    if in_v6_block(bits, 0x2002 << 112, 16) {
        return Some(Ipv4Addr::from(((bits >> 80) & 0xffff_ffff) as u32));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(ip: &str) -> Option<String> {
        forbidden_reason(ip.parse().expect("an IP address"))
    }

    #[test]
    fn public_addresses_are_allowed() {
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700:4700::1111",
            "2a00:1450:4001:80b::200e",
            "64:ff9b::808:808",
            "2002:0808:0808::1",
        ] {
            assert_eq!(reason(ip), None, "{ip}");
        }
    }

    #[test]
    fn private_loopback_link_local_and_reserved_ipv4_addresses_are_refused() {
        for ip in [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "10.255.255.255",
            "100.64.0.1",
            "127.0.0.1",
            "127.1.2.3",
            "169.254.169.254",
            "169.254.1.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.51.100.1",
            "203.0.113.1",
            "224.0.0.1",
            "240.0.0.1",
            "255.255.255.255",
        ] {
            assert!(reason(ip).is_some(), "{ip}");
        }
    }

    #[test]
    fn the_metadata_address_is_named_as_such() {
        assert_eq!(
            reason("169.254.169.254").as_deref(),
            Some("the cloud instance metadata address")
        );
    }

    #[test]
    fn private_loopback_link_local_and_reserved_ipv6_addresses_are_refused() {
        for ip in [
            "::",
            "::1",
            "::127.0.0.1",
            "fc00::1",
            "fd00:ec2::254",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "100::1",
            "2001::1",
            "2001:db8::1",
            "64:ff9b:1::1",
        ] {
            assert!(reason(ip).is_some(), "{ip}");
        }
    }

    #[test]
    fn ipv6_addresses_carrying_a_private_ipv4_address_are_refused() {
        for ip in [
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::7f00:1",
            "2002:7f00:0001::1",
            "2002:a9fe:a9fe::1",
        ] {
            let why = reason(ip).unwrap_or_else(|| panic!("{ip} should be refused"));
            assert!(why.contains("embedded in"), "{ip}: {why}");
        }
    }
}
