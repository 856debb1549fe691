//! Dropping root after the capture handles are open.

use anyhow::{bail, Context};

/// When running as root: become `nobody` but keep CAP_NET_RAW (and
/// CAP_NET_ADMIN, which libpcap needs to set up the ring again on reopen), so
/// that a compromised decoder cannot do more than read packets.
pub fn drop_privileges() -> anyhow::Result<Option<String>> {
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    use caps::{CapSet, Capability};
    let keep: caps::CapsHashSet = [Capability::CAP_NET_RAW, Capability::CAP_NET_ADMIN].into_iter().collect();
    unsafe {
        if libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0 {
            bail!("prctl(PR_SET_KEEPCAPS): {}", std::io::Error::last_os_error());
        }
        let nobody: libc::uid_t = 65534;
        if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(nobody) != 0 || libc::setuid(nobody) != 0 {
            bail!("cannot drop root privileges: {}", std::io::Error::last_os_error());
        }
    }
    caps::set(None, CapSet::Permitted, &keep).context("keeping CAP_NET_RAW")?;
    caps::set(None, CapSet::Effective, &keep).context("keeping CAP_NET_RAW")?;
    Ok(Some("running as nobody with CAP_NET_RAW and CAP_NET_ADMIN only".into()))
}
