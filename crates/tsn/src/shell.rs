//! Values that go into the shell scripts `tsn config` writes (`tc.sh`,
//! `dds-priority.sh`, `ptp-commands.sh`) and the `tc` lines `tsn cbs` prints,
//! which users run as root: interface names are checked against the kernel's
//! rules, and every value is quoted for the shell anyway, so that a shared
//! scenario file can never run a command.

use std::borrow::Cow;

/// Longest interface name Linux takes (IFNAMSIZ 16, with its NUL).
pub const MAX_IFNAME_BYTES: usize = 15;

/// Checks an interface name as the kernel does (`dev_valid_name`): 1 to 15
/// bytes, no '/', ':' or whitespace, not "." or "..". The error says why.
pub fn check_ifname(name: &str) -> Result<(), String> {
    let why = if name.is_empty() {
        "empty"
    } else if name.len() > MAX_IFNAME_BYTES {
        "longer than 15 bytes (Linux IFNAMSIZ)"
    } else if name == "." || name == ".." {
        "\".\" and \"..\" are not interface names"
    } else if name.chars().any(|c| c == '/' || c == ':' || c.is_whitespace() || c == '\0') {
        "'/', ':', whitespace and NUL cannot be in an interface name"
    } else if name.chars().any(ddscope_traffic::text::is_control) {
        "control characters cannot be in an interface name"
    } else {
        return Ok(());
    };
    Err(format!("{:?} is not a Linux interface name: {why}", ddscope_traffic::text::excerpt(name, 40)))
}

/// `s` as one shell word: unchanged when it holds only characters no shell
/// treats specially, else in single quotes (a `'` inside written `'\''`).
pub fn quote(s: &str) -> Cow<'_, str> {
    let plain = !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "@%+=:,./-_".contains(c));
    if plain {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(format!("'{}'", s.replace('\'', "'\\''")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_follow_the_kernel() {
        for ok in ["eth0", "enp1s0", "veth-a.10", "br_0", "x", "wlp0s20f3", "a;b", "$(x)"] {
            assert!(check_ifname(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a:b", "a b", "eth0\n", "enp1s0; touch /tmp/x #", "sixteen-bytes-xx", "a\x1bb"] {
            assert!(check_ifname(bad).is_err(), "{bad:?}");
        }
        assert!(check_ifname("a b").unwrap_err().contains("\"a b\""));
    }

    /// Oracle: POSIX sh (`/bin/sh -c 'printf %s WORD'`) reads each quoted word back as the value.
    #[test]
    fn quoted_words_read_back_exactly() {
        for v in ["eth0", "a;b", "$(touch /tmp/ddscope-never)", "`id`", "it's", "a\"b", "-x", "", "a b", "*", "~root", "x\\y"] {
            let out = std::process::Command::new("/bin/sh").arg("-c").arg(format!("printf %s {}", quote(v))).output().unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), v, "{v}");
        }
    }
}
