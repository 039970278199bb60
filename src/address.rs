//! What kind of address an IP is: global, a cloud metadata service, or
//! one of the ranges the internet does not route (loopback, RFC 1918,
//! link-local, ...), in the operator's words. Who may connect where is
//! decided by the callers: a probe's redirects (`probe/address.rs`), a
//! push channel's URL (`config` and `push/`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What kind of address a probe would connect to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    Global,
    /// An instance metadata service: credentials live there.
    Metadata,
    /// Not reachable from the internet; the words say which range.
    NonGlobal(&'static str),
}

/// The instance metadata services of the clouds vigie may run in: AWS,
/// GCP, Azure, OpenStack and DigitalOcean (169.254.169.254), AWS over IPv6
/// (fd00:ec2::254), AWS ECS task credentials (169.254.170.2), Alibaba
/// Cloud (100.100.100.200) and Oracle Cloud (192.0.0.192).
const METADATA: [IpAddr; 5] = [
    IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
    IpAddr::V4(Ipv4Addr::new(169, 254, 170, 2)),
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
    IpAddr::V4(Ipv4Addr::new(192, 0, 0, 192)),
];

/// Classifies `ip`. An IPv4 address written as IPv6 (`::ffff:a.b.c.d`) is
/// judged as the IPv4 address it carries.
pub fn classify(ip: IpAddr) -> AddressClass {
    let ip = match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    };
    if METADATA.contains(&ip) {
        return AddressClass::Metadata;
    }
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    let [a, b, c, _] = ip.octets();
    let range = match (a, b, c) {
        (0, _, _) => "\"this network\" (0.0.0.0/8)",
        (10, _, _) => "private (RFC 1918)",
        (100, 64..=127, _) => "shared carrier-grade NAT (100.64.0.0/10)",
        (127, _, _) => "loopback",
        (169, 254, _) => "link-local",
        (172, 16..=31, _) => "private (RFC 1918)",
        (192, 0, 0) => "IETF protocol assignments (192.0.0.0/24)",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation (TEST-NET)",
        (192, 168, _) => "private (RFC 1918)",
        (198, 18..=19, _) => "benchmarking (198.18.0.0/15)",
        (224..=239, _, _) => "multicast",
        (240..=255, _, _) => "reserved (240.0.0.0/4)",
        _ => return AddressClass::Global,
    };
    AddressClass::NonGlobal(range)
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    let segments = ip.segments();
    let range = if ip.is_unspecified() {
        "unspecified"
    } else if ip.is_loopback() {
        "loopback"
    } else if segments[0] & 0xfe00 == 0xfc00 {
        "unique local (fc00::/7)"
    } else if segments[0] & 0xffc0 == 0xfe80 {
        "link-local"
    } else if segments[0] & 0xff00 == 0xff00 {
        "multicast"
    } else if segments[0] == 0x2001 && segments[1] == 0x0db8 {
        "documentation (2001:db8::/32)"
    } else if segments[..4] == [0x0100, 0, 0, 0] {
        "discard-only (100::/64)"
    } else if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        // NAT64 carries an IPv4 address in its last 32 bits: it is as
        // global as that address is.
        let [_, _, _, _, _, _, hi, lo] = segments;
        let v4 = Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
        return classify(IpAddr::V4(v4));
    } else {
        return AddressClass::Global;
    };
    AddressClass::NonGlobal(range)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(text: &str) -> AddressClass {
        classify(text.parse().unwrap())
    }

    #[test]
    fn metadata_addresses_are_recognised_in_every_spelling() {
        for ip in [
            "169.254.169.254",
            "fd00:ec2::254",
            "169.254.170.2",
            "100.100.100.200",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert_eq!(class(ip), AddressClass::Metadata, "{ip}");
        }
    }

    #[test]
    fn non_global_ranges() {
        for (ip, range) in [
            ("127.0.0.1", "loopback"),
            ("127.0.0.2", "loopback"),
            ("::1", "loopback"),
            ("10.1.2.3", "private (RFC 1918)"),
            ("172.16.0.1", "private (RFC 1918)"),
            ("172.31.255.255", "private (RFC 1918)"),
            ("192.168.1.1", "private (RFC 1918)"),
            ("fd12:3456::1", "unique local (fc00::/7)"),
            ("fc00::1", "unique local (fc00::/7)"),
            ("169.254.1.1", "link-local"),
            ("fe80::1", "link-local"),
            ("100.64.0.1", "shared carrier-grade NAT (100.64.0.0/10)"),
            ("0.0.0.0", "\"this network\" (0.0.0.0/8)"),
            ("::", "unspecified"),
            ("224.0.0.1", "multicast"),
            ("ff02::1", "multicast"),
            ("255.255.255.255", "reserved (240.0.0.0/4)"),
            ("192.0.2.1", "documentation (TEST-NET)"),
            ("2001:db8::1", "documentation (2001:db8::/32)"),
            ("::ffff:10.0.0.1", "private (RFC 1918)"),
            ("64:ff9b::7f00:1", "loopback"),
        ] {
            assert_eq!(class(ip), AddressClass::NonGlobal(range), "{ip}");
        }
    }

    #[test]
    fn globals() {
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "172.15.255.255",
            "100.128.0.1",
            "169.253.1.1",
            "2a00:1450:4007:80e::200e",
            "2606:4700::1111",
            "64:ff9b::808:808",
        ] {
            assert_eq!(class(ip), AddressClass::Global, "{ip}");
        }
    }
}
