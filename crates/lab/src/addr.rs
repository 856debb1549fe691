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
    Ok((Ipv4Addr::from(u32::from(addr) & mask), len))
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
    }
}
