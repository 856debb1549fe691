//! Addresses of the lab's link: the scenario checks its subnet and the
//! network gives hosts their addresses from it. (Its own module, so that
//! `scenario` and `net` do not import each other.)

use anyhow::{anyhow, bail, Result};
use std::net::Ipv4Addr;

/// Parses "a.b.c.d/len" and checks it has room for `needed` addresses.
pub fn parse_subnet(s: &str, needed: usize) -> Result<(Ipv4Addr, u8)> {
    let (addr, len) = s.split_once('/').ok_or_else(|| anyhow!("{s:?}: write it as a.b.c.d/len"))?;
    let addr: Ipv4Addr = addr.parse().map_err(|_| anyhow!("{s:?}: bad IPv4 address"))?;
    let len: u8 = len.parse().map_err(|_| anyhow!("{s:?}: bad prefix length"))?;
    if !(8..=30).contains(&len) {
        bail!("{s:?}: prefix length must lie between 8 and 30");
    }
    let hosts = (1u64 << (32 - len)) - 2;
    if (hosts as usize) < needed {
        bail!("{s:?}: room for {hosts} addresses, {needed} needed");
    }
    let mask = u32::MAX << (32 - len);
    let net = u32::from(addr) & mask;
    // The lab's addresses must be plain unicast ones: not "this network",
    // loopback, link-local, multicast or reserved (a lab on 127.0.0.0/24
    // or 224.0.0.0/24 would clash with the host's own traffic).
    let (first, last) = (net, net | !mask);
    for (base, plen, what) in [(0u32, 8u8, "\"this network\" (0.0.0.0/8)"), (0x7f00_0000, 8, "loopback (127.0.0.0/8)"), (0xa9fe_0000, 16, "link-local (169.254.0.0/16)"), (0xe000_0000, 4, "multicast (224.0.0.0/4)"), (0xf000_0000, 4, "reserved (240.0.0.0/4)")] {
        let m = u32::MAX << (32 - plen);
        let (lo, hi) = (base, base | !m);
        if first <= hi && lo <= last {
            bail!("{s:?}: overlaps the {what} range: choose a private unicast subnet such as 10.77.0.0/24");
        }
    }
    Ok((Ipv4Addr::from(net), len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnets() {
        assert_eq!(parse_subnet("10.77.0.0/24", 3).unwrap(), (Ipv4Addr::new(10, 77, 0, 0), 24));
        assert_eq!(parse_subnet("10.77.0.9/24", 3).unwrap().0, Ipv4Addr::new(10, 77, 0, 0));
        assert!(parse_subnet("10.77.0.0/30", 3).is_err());
        assert!(parse_subnet("10.77.0.0", 3).is_err());
        assert!(parse_subnet("10.77.0.300/24", 3).is_err());
        for bad in ["127.0.0.0/24", "224.0.0.0/24", "239.1.0.0/16", "169.254.3.0/24", "0.0.0.0/24", "250.0.0.0/24"] {
            let e = parse_subnet(bad, 3).unwrap_err().to_string();
            assert!(e.contains("overlaps"), "{bad}: {e}");
        }
        assert!(parse_subnet("192.168.7.0/24", 3).is_ok());
    }
}
