//! Files named by the user, read and written so that neither a careless
//! path nor another local user can make ddscope misbehave.
//!
//! - [`read_bounded`] reads a small input (a load, limits, budget, scenario
//!   or architecture file) under a byte budget counted on what is read, not
//!   on the size the file reports (`/dev/zero` reports 0). Devices, sockets
//!   and directories are refused in one line; a FIFO or pipe (`<(cmd)`) is
//!   read without blocking on its open, and given up on after a timeout.
//! - [`create_private_tmp`] creates the temporary sibling an output is
//!   written to before it is renamed into place: a random name, opened with
//!   `O_CREAT|O_EXCL|O_NOFOLLOW` (a symlink or file planted there by someone
//!   else is never followed nor reused), mode 0666 less the umask, as a
//!   plain `open(2)` would create it. [`same_file_still`] checks, just before
//!   the rename, that the name still holds the file that was written.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The most read of a configuration file (a scenario, sweep, limits,
/// budget or architecture file): far above any real one.
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// The most read of a CPU load file (`--load`, a lab run's load.csv): an
/// hour of 10 Hz samples of a hundred processes is about 40 MB.
pub const MAX_LOAD_BYTES: u64 = 256 << 20;

/// How long a FIFO or pipe given as an input may take to deliver its content.
pub const FIFO_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a small input file could not be read: each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: cannot read: {source}")]
    Io { path: String, source: io::Error },
    #[error("{path}: is {kind}, not a regular file: give a file")]
    NotRegular { path: String, kind: &'static str },
    #[error("{path}: larger than {max} bytes (the most read of a {what}): refusing it")]
    TooLarge { path: String, max: u64, what: &'static str },
    #[error("{path}: a FIFO or pipe that sent no end of file within {secs} s: giving up on it")]
    Timeout { path: String, secs: u64 },
}

fn kind_of(ft: &std::fs::FileType) -> Option<&'static str> {
    if ft.is_file() {
        None
    } else if ft.is_dir() {
        Some("a directory")
    } else if ft.is_char_device() {
        Some("a character device")
    } else if ft.is_block_device() {
        Some("a block device")
    } else if ft.is_socket() {
        Some("a socket")
    } else if ft.is_fifo() {
        Some("a FIFO")
    } else {
        Some("not a file")
    }
}

/// Reads `path` (a `what`, for the message) whole, refusing more than `max`
/// bytes, anything but a regular file, a FIFO or a pipe, and a FIFO that
/// does not finish within [`FIFO_TIMEOUT`].
pub fn read_bounded(path: &Path, max: u64, what: &'static str) -> Result<Vec<u8>, ReadError> {
    read_bounded_within(path, max, what, FIFO_TIMEOUT)
}

/// [`read_bounded`] with its FIFO timeout given.
pub fn read_bounded_within(path: &Path, max: u64, what: &'static str, timeout: Duration) -> Result<Vec<u8>, ReadError> {
    let shown = || crate::text::excerpt(&path.display().to_string(), crate::text::EXCERPT_CHARS);
    let io = |source| ReadError::Io { path: shown(), source };
    // Checked before opening: opening a FIFO blocks, a tape device rewinds.
    let meta = std::fs::metadata(path).map_err(io)?;
    let ft = meta.file_type();
    let fifo = ft.is_fifo();
    if let Some(kind) = kind_of(&ft).filter(|_| !fifo) {
        return Err(ReadError::NotRegular { path: shown(), kind });
    }
    let mut f = OpenOptions::new().read(true).custom_flags(libc_o_nonblock(fifo)).open(path).map_err(io)?;
    // The file opened may not be the one looked at (renamed in between).
    let opened = f.metadata().map_err(io)?;
    if opened.dev() != meta.dev() || opened.ino() != meta.ino() {
        if let Some(kind) = kind_of(&opened.file_type()).filter(|_| !opened.file_type().is_fifo()) {
            return Err(ReadError::NotRegular { path: shown(), kind });
        }
    }
    let mut out = Vec::new();
    let mut buf = [0u8; 64 << 10];
    let start = Instant::now();
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if out.len() as u64 + n as u64 > max {
                    return Err(ReadError::TooLarge { path: shown(), max, what });
                }
                out.extend_from_slice(&buf[..n]);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if start.elapsed() >= timeout {
                    return Err(ReadError::Timeout { path: shown(), secs: timeout.as_secs().max(1) });
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
    }
    Ok(out)
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_bounded_text(path: &Path, max: u64, what: &'static str) -> Result<String, ReadError> {
    let bytes = read_bounded(path, max, what)?;
    String::from_utf8(bytes).map_err(|e| ReadError::Io {
        path: crate::text::excerpt(&path.display().to_string(), crate::text::EXCERPT_CHARS),
        source: io::Error::new(io::ErrorKind::InvalidData, format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to())),
    })
}

// O_NONBLOCK and O_NOFOLLOW on Linux (every architecture ddscope builds for
// but alpha/sparc/parisc, which it does not): no libc dependency for two constants.
const O_NONBLOCK: i32 = 0o4000;
const O_NOFOLLOW: i32 = 0o400000;

fn libc_o_nonblock(on: bool) -> i32 {
    if on {
        O_NONBLOCK
    } else {
        0
    }
}

/// 64 random bits for a temporary name, from the kernel (falling back on the
/// standard library's randomly keyed hasher where /dev/urandom is missing).
fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    if File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)).is_ok() {
        return u64::from_ne_bytes(b);
    }
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
    h.write_u32(std::process::id());
    h.finish()
}

/// Creates a new temporary file next to `path` (`.NAME.ddscope-RANDOM.tmp`)
/// with `O_CREAT|O_EXCL|O_NOFOLLOW` and mode 0666 less the umask; returns it
/// open for writing with its name. Nothing that exists at the name is
/// opened, followed or truncated: a name taken is retried with another.
pub fn create_private_tmp(path: &Path) -> io::Result<(File, PathBuf)> {
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| "output".into());
    let mut last = None;
    for _ in 0..16 {
        let tmp = path.with_file_name(format!(".{name}.ddscope-{:016x}.tmp", random_u64()));
        match OpenOptions::new().write(true).create_new(true).mode(0o666).custom_flags(O_NOFOLLOW).open(&tmp) {
            Ok(f) => return Ok((f, tmp)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::AlreadyExists, "no free temporary name")))
}

/// Whether `tmp` still names the file `f` was opened as (same device and
/// inode, not a symlink): checked before `tmp` is renamed into place.
pub fn same_file_still(f: &File, tmp: &Path) -> bool {
    match (f.metadata(), std::fs::symlink_metadata(tmp)) {
        (Ok(a), Ok(b)) => !b.file_type().is_symlink() && a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Writes `bytes` to `path` through [`create_private_tmp`] and a rename
/// (checked with [`same_file_still`]): a reader never sees half a file, and
/// nothing planted next to `path` is written through.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let (mut f, tmp) = create_private_tmp(path)?;
    let done = f.write_all(bytes).and_then(|_| f.flush()).and_then(|_| {
        if same_file_still(&f, &tmp) {
            std::fs::rename(&tmp, path)
        } else {
            Err(io::Error::other(format!("{}: the temporary file was replaced while it was written", tmp.display())))
        }
    });
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ddscope-fsio-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn devices_refused_and_size_counted_on_what_is_read() {
        // /dev/zero reports size 0 and never ends: refused as a device, at once.
        let t = Instant::now();
        let e = read_bounded(Path::new("/dev/zero"), 1 << 20, "load file").unwrap_err().to_string();
        assert!(e.contains("/dev/zero") && e.contains("character device"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(1));
        let d = dir("big");
        let p = d.join("big.csv");
        std::fs::write(&p, vec![b'x'; 5000]).unwrap();
        let e = read_bounded(&p, 4096, "load file").unwrap_err().to_string();
        assert!(e.contains("larger than 4096 bytes") && e.contains("big.csv"), "{e}");
        assert_eq!(read_bounded(&p, 5000, "load file").unwrap().len(), 5000);
        let e = read_bounded(&d, 10, "load file").unwrap_err().to_string();
        assert!(e.contains("a directory"), "{e}");
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn fifo_without_writer_or_data_does_not_hang() {
        let d = dir("fifo");
        let p = d.join("f");
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        extern "C" {
            fn mkfifo(path: *const std::os::raw::c_char, mode: u32) -> i32;
        }
        assert_eq!(unsafe { mkfifo(c.as_ptr(), 0o600) }, 0);
        // No writer: an empty read, at once.
        let t = Instant::now();
        assert!(read_bounded_within(&p, 100, "load file", Duration::from_millis(300)).unwrap().is_empty());
        assert!(t.elapsed() < Duration::from_secs(1));
        // A writer that never writes: the timeout.
        let w = OpenOptions::new().read(true).write(true).open(&p).unwrap();
        let e = read_bounded_within(&p, 100, "load file", Duration::from_millis(300)).unwrap_err().to_string();
        assert!(e.contains("FIFO or pipe"), "{e}");
        drop(w);
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn temporary_output_never_follows_or_reuses_what_is_planted() {
        let d = dir("tmp");
        let out = d.join("out.csv");
        let (f, tmp) = create_private_tmp(&out).unwrap();
        let name = tmp.file_name().unwrap().to_string_lossy().to_string();
        assert!(name.starts_with(".out.csv.ddscope-") && name.ends_with(".tmp") && name.len() > 30, "{name}");
        assert!(same_file_still(&f, &tmp));
        // Swapped for a symlink after creation: detected before the rename.
        std::fs::remove_file(&tmp).unwrap();
        std::os::unix::fs::symlink(d.join("victim"), &tmp).unwrap();
        assert!(!same_file_still(&f, &tmp));
        let (_, tmp2) = create_private_tmp(&out).unwrap();
        assert_ne!(tmp, tmp2);
        // A symlink planted at the final name is replaced, its target untouched.
        std::fs::write(d.join("victim"), "secret").unwrap();
        std::os::unix::fs::symlink(d.join("victim"), &out).unwrap();
        write_atomic(&out, b"result").unwrap();
        assert_eq!(std::fs::read_to_string(d.join("victim")).unwrap(), "secret");
        assert!(!std::fs::symlink_metadata(&out).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "result");
        std::fs::remove_dir_all(d).unwrap();
    }
}
