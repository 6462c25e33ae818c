//! Which addresses and host names WebFetch may reach without a rule that names them.
//!
//! A page the model fetched may be written by an attacker, and so may the URL the model asks
//! for: without this check a prompt-injected model could make keel read the cloud metadata
//! endpoint or a local admin port. Everything that is not a plain public unicast address is
//! refused unless a permission rule names the host exactly.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is not public, or `None` for a public unicast address.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    let why = match o {
        [169, 254, 169, 254] => "the cloud metadata address (link-local)",
        [0, ..] => "an unspecified (\"this network\") address",
        [127, ..] => "a loopback address",
        [10, ..] | [192, 168, ..] => "a private (RFC 1918) address",
        [172, b, ..] if (16..32).contains(&b) => "a private (RFC 1918) address",
        [100, b, ..] if (64..128).contains(&b) => {
            "a shared carrier-grade NAT address (100.64.0.0/10)"
        }
        [169, 254, ..] => "a link-local address",
        [192, 0, 0, _] => "an IETF protocol address (192.0.0.0/24)",
        [192, 88, 99, _] => "a 6to4 relay anycast address (192.88.99.0/24)",
        [192, 0, 2, _] | [198, 51, 100, _] | [203, 0, 113, _] => "a documentation address",
        [198, b, ..] if b == 18 || b == 19 => "a benchmarking address (198.18.0.0/15)",
        [a, ..] if (224..240).contains(&a) => "a multicast address",
        [a, ..] if a >= 240 => "a reserved or broadcast address",
        _ => return None,
    };
    Some(why)
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_unspecified() {
        return Some("an unspecified address");
    }
    if ip.is_loopback() {
        return Some("a loopback address");
    }
    let s = ip.segments();
    // Addresses that carry an IPv4 address are judged by it (mapped, compatible, NAT64, 6to4).
    if let Some(v4) = embedded_v4(&s) {
        return non_public_v4(v4);
    }
    let why = match s[0] {
        x if x & 0xfe00 == 0xfc00 => "a unique local (fc00::/7) address",
        x if x & 0xffc0 == 0xfe80 => "a link-local (fe80::/10) address",
        x if x & 0xffc0 == 0xfec0 => "a site-local (fec0::/10) address",
        x if x & 0xff00 == 0xff00 => "a multicast address",
        0x2001 if s[1] == 0x0db8 => "a documentation address",
        0x0100 if s[1..4] == [0, 0, 0] => "a discard-only address (100::/64)",
        // Teredo tunnels to an address keel cannot check from here.
        0x2001 if s[1] == 0 => "a Teredo (2001::/32) address",
        // The local-use NAT64 prefix: translated to an IPv4 address of the local network's
        // choosing.
        0x0064 if s[1] == 0xff9b && s[2] == 1 => "a local-use NAT64 (64:ff9b:1::/48) address",
        _ => return None,
    };
    Some(why)
}

/// The IPv4 address inside an IPv6 address of a form that carries one: IPv4-mapped
/// (`::ffff:a.b.c.d`), IPv4-translated (`::ffff:0:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), NAT64 (`64:ff9b::/96`) and 6to4
/// (`2002:AABB:CCDD::/48`).
fn embedded_v4(s: &[u16; 8]) -> Option<Ipv4Addr> {
    let tail =
        |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, hi, lo]
        | [0, 0, 0, 0, 0, 0, hi, lo]
        | [0, 0, 0, 0, 0xffff, 0, hi, lo] => Some(tail(*hi, *lo)),
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => Some(tail(*hi, *lo)),
        [0x2002, hi, lo, ..] => Some(tail(*hi, *lo)),
        _ => None,
    }
}

/// Why a host *name* is refused before any lookup, or `None`: `localhost` (and names under
/// it) and names without a dot, which resolve through search domains and local files to
/// machines of the local network.
pub fn refused_name(host: &str) -> Option<&'static str> {
    let h = host.trim_end_matches('.');
    if h == "localhost" || h.ends_with(".localhost") {
        return Some("`localhost` names this machine");
    }
    if !h.contains('.') && !h.contains(':') {
        return Some("a host name without a dot names a machine of the local network");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn np(s: &str) -> bool {
        non_public(s.parse().unwrap()).is_some()
    }

    #[test]
    fn every_private_kind_is_refused_and_public_addresses_pass() {
        for a in [
            "127.0.0.1",
            "127.8.9.10",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "169.254.0.5",
            "100.64.0.1",
            "100.127.255.255",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::a9fe:a9fe",
            "::ffff:0:a9fe:a9fe",
            "2001:0:4136:e378::1",
            "192.88.99.1",
            "2002:7f00:1::",
        ] {
            assert!(np(a), "{a} should be refused");
        }
        for a in [
            "93.184.216.34",
            "172.32.0.1",
            "100.128.0.1",
            "8.8.8.8",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(!np(a), "{a} is public");
        }
        assert_eq!(
            non_public("169.254.169.254".parse().unwrap()),
            Some("the cloud metadata address (link-local)")
        );
    }

    #[test]
    fn local_names_are_refused_by_name() {
        assert!(refused_name("localhost").is_some());
        assert!(refused_name("localhost.").is_some());
        assert!(refused_name("db.localhost").is_some());
        assert!(refused_name("intranet").is_some());
        assert!(refused_name("example.com").is_none());
        assert!(
            refused_name("127.0.0.1").is_none(),
            "addresses are judged as addresses"
        );
    }
}
