//! Least privilege for the capturing processes (`live`, `agent`), in three
//! steps taken once the capture handles are open and the listening sockets
//! bound:
//! 1. [`drop_privileges`]: when started as root, clear the capability
//!    bounding set except CAP_NET_RAW and CAP_NET_ADMIN, become `nobody`
//!    keeping only those two, and set `PR_SET_NO_NEW_PRIVS` (no `execve` can
//!    give any privilege back).
//! 2. [`restrict_syscalls`] (the agent): a seccomp filter on every thread
//!    for the steady state. System calls the agent's threads use (capture and
//!    its reopen, HTTP client and servers, `/proc`, threads, time) are allowed;
//!    namespaces, `execve`, `ptrace`, module loading, mounting, eBPF, keyrings
//!    and identity changes kill the process; anything else fails with EPERM.
//!
//! The capabilities and the bounding set are per thread: threads started
//! before the drop (the exporters') lose every capability when the process
//! becomes `nobody` (glibc changes the ids of all threads, and only the
//! calling thread keeps capabilities), the bounding set is cleared before
//! any thread starts ([`clear_bounding_set`], first thing in `agent` and
//! `live`; threads inherit it), and the seccomp filter is installed on all
//! threads at once (TSYNC), which also gives them no-new-privileges.

use anyhow::{bail, Context};
use seccompiler::{BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch};
use std::collections::BTreeMap;

/// Clears the capability bounding set of the calling thread except
/// CAP_NET_RAW and CAP_NET_ADMIN (when it holds CAP_SETPCAP, i.e. as root).
/// The bounding set is per thread and inherited by the threads a thread
/// starts: call it first thing, before any thread exists, so that every
/// thread of the process has the cleared set (clearing it later, in
/// [`drop_privileges`], reaches the calling thread only). It removes nothing
/// the process holds now (effective and permitted sets are unchanged: the
/// ports below 1024 can still be bound, root still dropped later), only
/// what any thread could ever gain. Returns how many were cleared.
pub fn clear_bounding_set() -> anyhow::Result<usize> {
    use caps::{CapSet, Capability};
    if !caps::has_cap(None, CapSet::Effective, Capability::CAP_SETPCAP).unwrap_or(false) {
        return Ok(0);
    }
    let mut n = 0;
    for c in caps::all() {
        if !matches!(c, Capability::CAP_NET_RAW | Capability::CAP_NET_ADMIN) && caps::has_cap(None, CapSet::Bounding, c).unwrap_or(false) {
            caps::drop(None, CapSet::Bounding, c).with_context(|| format!("clearing {c} from the bounding set"))?;
            n += 1;
        }
    }
    Ok(n)
}

/// When running as root: clear the bounding set, become `nobody` but keep
/// CAP_NET_RAW (and CAP_NET_ADMIN, which libpcap needs to set up the ring
/// again on reopen), and forbid gaining privileges, so that a compromised
/// decoder cannot do more than read packets. Not root: keep at most those
/// two capabilities and set no-new-privileges.
pub fn drop_privileges() -> anyhow::Result<Option<String>> {
    use caps::{CapSet, Capability};
    let keep: caps::CapsHashSet = [Capability::CAP_NET_RAW, Capability::CAP_NET_ADMIN].into_iter().collect();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        // A binary given capabilities with setcap: keep no more than capture needs.
        let have = caps::read(None, CapSet::Permitted).context("reading the capabilities")?;
        let kept: caps::CapsHashSet = have.intersection(&keep).copied().collect();
        caps::set(None, CapSet::Effective, &kept).context("lowering the effective capabilities")?;
        caps::set(None, CapSet::Permitted, &kept).context("lowering the permitted capabilities")?;
        no_new_privs()?;
        return Ok(None);
    }
    // The bounding set can only be lowered while CAP_SETPCAP is still held.
    for c in caps::all() {
        if !keep.contains(&c) && caps::has_cap(None, CapSet::Bounding, c).unwrap_or(false) {
            caps::drop(None, CapSet::Bounding, c).with_context(|| format!("clearing {c} from the bounding set"))?;
        }
    }
    // SAFETY: plain syscalls with valid arguments; glibc applies the id changes to every thread.
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
    caps::clear(None, CapSet::Inheritable).context("clearing the inheritable capabilities")?;
    // Ambient capabilities may be unsupported on old kernels; nothing to clear then.
    let _ = caps::clear(None, CapSet::Ambient);
    no_new_privs()?;
    Ok(Some("running as nobody with CAP_NET_RAW and CAP_NET_ADMIN only (bounding set cleared, no new privileges)".into()))
}

/// A file written under a temporary name by a process that drops root
/// before it is done (`sudo ddscope live --write now.pcapng`): as `nobody`
/// it can no longer rename the file into place in a directory only root may
/// write to (the capture stayed in a hidden root-owned temporary file and
/// `live` exited 1). So, while still root, a helper process is forked that
/// does nothing but wait on a pipe: a byte asks it to rename the file into
/// place and report the outcome; the pipe closing without it (the run
/// failed, or the process was killed) makes it remove the temporary file.
/// Either way it then exits. It ignores the terminal's signals (a Ctrl-C
/// stops the capture, which then asks for the rename) and holds nothing but
/// its two pipes and the two names.
pub struct RenameHelper {
    pid: libc::pid_t,
    /// Write end of the request pipe.
    ask: libc::c_int,
    /// Read end of the answer pipe.
    answer: libc::c_int,
    fin: std::path::PathBuf,
}

impl RenameHelper {
    /// Forks the helper for `tmp` → `fin`. Call it before any thread exists
    /// (the child only makes system calls, but a fork copies one thread).
    pub fn spawn(tmp: &std::path::Path, fin: &std::path::Path) -> anyhow::Result<RenameHelper> {
        use std::os::unix::ffi::OsStrExt;
        let tmp_c = std::ffi::CString::new(tmp.as_os_str().as_bytes()).context("temporary file name")?;
        let fin_c = std::ffi::CString::new(fin.as_os_str().as_bytes()).context("output file name")?;
        let (mut ask, mut answer) = ([0 as libc::c_int; 2], [0 as libc::c_int; 2]);
        // SAFETY: plain syscalls with valid arguments.
        unsafe {
            if libc::pipe2(ask.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                bail!("pipe: {}", std::io::Error::last_os_error());
            }
            if libc::pipe2(answer.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                libc::close(ask[0]);
                libc::close(ask[1]);
                bail!("pipe: {}", std::io::Error::last_os_error());
            }
        }
        // SAFETY: the child calls only async-signal-safe functions (close, sigaction via signal,
        // read, rename, unlink, write, _exit) on data prepared before the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            bail!("fork: {}", std::io::Error::last_os_error());
        }
        if pid == 0 {
            unsafe {
                let (r, w) = (ask[0], answer[1]);
                libc::close(ask[1]);
                libc::close(answer[0]);
                // Nothing else of the parent's (capture socket, the file itself) stays open here.
                let (lo, hi) = (r.min(w) as libc::c_uint, r.max(w) as libc::c_uint);
                for (a, b) in [(3, lo.saturating_sub(1)), (lo + 1, hi.saturating_sub(1)), (hi + 1, libc::c_uint::MAX)] {
                    if a <= b {
                        libc::syscall(libc::SYS_close_range, a, b, 0);
                    }
                }
                for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGPIPE] {
                    libc::signal(sig, libc::SIG_IGN);
                }
                let mut b = 0u8;
                let n = loop {
                    let n = libc::read(r, (&mut b as *mut u8).cast(), 1);
                    if n < 0 && *libc::__errno_location() == libc::EINTR {
                        continue;
                    }
                    break n;
                };
                if n == 1 && b == b'r' {
                    let rc = libc::rename(tmp_c.as_ptr(), fin_c.as_ptr());
                    let err: i32 = if rc == 0 { 0 } else { *libc::__errno_location() };
                    if err != 0 {
                        libc::unlink(tmp_c.as_ptr());
                    }
                    libc::write(w, (&err as *const i32).cast(), 4);
                } else {
                    libc::unlink(tmp_c.as_ptr());
                }
                libc::_exit(0);
            }
        }
        // SAFETY: closing our copies of the child's ends.
        unsafe {
            libc::close(ask[0]);
            libc::close(answer[1]);
        }
        Ok(RenameHelper { pid, ask: ask[1], answer: answer[0], fin: fin.to_path_buf() })
    }

    /// Asks the helper to rename the file into place; its answer is the rename's outcome.
    pub fn commit(mut self) -> anyhow::Result<()> {
        let mut err = -1i32;
        // SAFETY: our pipe ends, valid until `finish`.
        let ok = unsafe {
            libc::write(self.ask, b"r".as_ptr().cast(), 1) == 1 && libc::read(self.answer, (&mut err as *mut i32).cast(), 4) == 4
        };
        self.finish();
        match (ok, err) {
            (true, 0) => Ok(()),
            (true, e) => Err(anyhow::anyhow!("cannot move the capture to {}: {}", self.fin.display(), std::io::Error::from_raw_os_error(e))),
            (false, _) => Err(anyhow::anyhow!("cannot move the capture to {}: the helper that renames it is gone", self.fin.display())),
        }
    }

    fn finish(&mut self) {
        if self.pid <= 0 {
            return;
        }
        // SAFETY: our pipe ends and our child; closing the request pipe tells the helper to clean up if nothing was asked.
        unsafe {
            libc::close(self.ask);
            libc::close(self.answer);
            let mut st = 0;
            libc::waitpid(self.pid, &mut st, 0);
        }
        self.pid = 0;
    }
}

impl Drop for RenameHelper {
    /// Not committed: the helper removes the temporary file.
    fn drop(&mut self) {
        self.finish();
    }
}

fn no_new_privs() -> anyhow::Result<()> {
    // SAFETY: plain prctl with valid arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        bail!("prctl(PR_SET_NO_NEW_PRIVS): {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// What the agent's threads call in the steady state (measured with
/// `strace -f` on agents exporting to Prometheus, InfluxDB and OTLP,
/// streaming to `serve`, with the capture interface going down, up and
/// being recreated, and stopped with Ctrl-C).
fn allowed() -> Vec<i64> {
    use libc::*;
    let mut v = vec![
        // memory
        SYS_brk, SYS_mmap, SYS_munmap, SYS_mremap, SYS_mprotect, SYS_madvise, SYS_membarrier,
        // files and descriptors
        SYS_read, SYS_write, SYS_readv, SYS_writev, SYS_pread64, SYS_pwrite64, SYS_openat, SYS_close, SYS_lseek,
        SYS_fstat, SYS_newfstatat, SYS_statx, SYS_fcntl, SYS_dup, SYS_dup3, SYS_getdents64, SYS_readlinkat,
        SYS_faccessat, SYS_faccessat2, SYS_fsync, SYS_fdatasync, SYS_ftruncate, SYS_pipe2, SYS_eventfd2,
        SYS_epoll_create1, SYS_epoll_ctl, SYS_epoll_pwait, SYS_ppoll, SYS_pselect6, SYS_ioctl, SYS_getcwd,
        // sockets (HTTP client and servers, libpcap's packet socket on reopen, netlink for interface lookups)
        SYS_socket, SYS_socketpair, SYS_connect, SYS_accept, SYS_accept4, SYS_bind, SYS_listen, SYS_getsockname,
        SYS_getpeername, SYS_setsockopt, SYS_getsockopt, SYS_sendto, SYS_recvfrom, SYS_sendmsg, SYS_recvmsg,
        SYS_sendmmsg, SYS_recvmmsg, SYS_shutdown,
        // threads, signals, time
        SYS_futex, SYS_set_robust_list, SYS_get_robust_list, SYS_rseq, SYS_sched_yield, SYS_sched_getaffinity,
        SYS_sched_getparam, SYS_sched_getscheduler, SYS_gettid, SYS_getpid, SYS_getppid, SYS_tgkill, SYS_exit, SYS_exit_group,
        SYS_rt_sigaction, SYS_rt_sigprocmask, SYS_rt_sigreturn, SYS_sigaltstack, SYS_restart_syscall, SYS_nanosleep,
        SYS_clock_nanosleep, SYS_clock_gettime, SYS_clock_getres, SYS_gettimeofday, SYS_timerfd_create, SYS_timerfd_settime,
        // process information
        SYS_getuid, SYS_geteuid, SYS_getgid, SYS_getegid, SYS_getresuid, SYS_getresgid, SYS_getgroups, SYS_uname,
        SYS_sysinfo, SYS_getrandom, SYS_prlimit64, SYS_prctl, SYS_capget, SYS_getpriority, SYS_getrusage, SYS_times,
        // the filters after this one are installed with it (a filter can only restrict further)
        SYS_seccomp,
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        SYS_open, SYS_stat, SYS_lstat, SYS_access, SYS_readlink, SYS_dup2, SYS_pipe, SYS_poll, SYS_select,
        SYS_epoll_wait, SYS_epoll_create, SYS_getrlimit, SYS_arch_prctl, SYS_time, SYS_getdents,
    ]);
    v
}

/// Calls that have no place in a packet decoder and signal a compromise: the process is killed.
fn fatal() -> Vec<i64> {
    use libc::*;
    let mut v = vec![
        SYS_execve, SYS_execveat, SYS_ptrace, SYS_process_vm_readv, SYS_process_vm_writev, SYS_mount, SYS_umount2,
        SYS_pivot_root, SYS_chroot, SYS_init_module, SYS_finit_module, SYS_delete_module, SYS_kexec_load,
        SYS_kexec_file_load, SYS_bpf, SYS_perf_event_open, SYS_keyctl, SYS_add_key, SYS_request_key, SYS_unshare,
        SYS_setns, SYS_reboot, SYS_swapon, SYS_swapoff, SYS_setuid, SYS_setgid, SYS_setreuid, SYS_setregid,
        SYS_setresuid, SYS_setresgid, SYS_setgroups, SYS_setfsuid, SYS_setfsgid, SYS_capset, SYS_userfaultfd,
        SYS_open_by_handle_at, SYS_name_to_handle_at, SYS_fsopen, SYS_fsmount, SYS_fsconfig, SYS_move_mount, SYS_open_tree,
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([SYS_iopl, SYS_ioperm]);
    v
}

/// `clone` flags that create namespaces (a way to regain capabilities inside a new user namespace).
const NAMESPACE_FLAGS: u64 = (libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP) as u64;

fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, mismatch: SeccompAction, matched: SeccompAction) -> anyhow::Result<BpfProgram> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| anyhow::anyhow!("seccomp: {e}"))?;
    let f = SeccompFilter::new(rules, mismatch, matched, arch).map_err(|e| anyhow::anyhow!("seccomp filter: {e}"))?;
    BpfProgram::try_from(f).map_err(|e| anyhow::anyhow!("seccomp filter: {e}"))
}

/// The three filters, in the order they are installed. Other threads run
/// (and may start threads) while they are installed one after the other, so
/// every prefix of the list must leave thread creation working.
fn filters() -> anyhow::Result<Vec<BpfProgram>> {
    // clone3 hides its flags in memory a filter cannot read: ENOSYS makes
    // glibc fall back to clone, whose flags the allow-list checks. Installed
    // first: were the allow-list first, a thread started before this filter
    // followed would get EPERM for clone3 (no fallback) and fail to start —
    // seen as tiny_http's worker pool panicking under load.
    let clone3 = compile([(libc::SYS_clone3, vec![])].into_iter().collect(), SeccompAction::Allow, SeccompAction::Errno(libc::ENOSYS as u32))?;
    let mut allow: BTreeMap<i64, Vec<SeccompRule>> = allowed().into_iter().map(|s| (s, vec![])).collect();
    // Threads yes, namespaces no: clone is allowed when it asks for no new namespace.
    let no_ns = SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(NAMESPACE_FLAGS), 0)
        .map_err(|e| anyhow::anyhow!("seccomp condition: {e}"))?;
    allow.insert(libc::SYS_clone, vec![SeccompRule::new(vec![no_ns]).map_err(|e| anyhow::anyhow!("seccomp rule: {e}"))?]);
    // The allow-list lets clone3 through to the filter above, whose ENOSYS
    // (an errno) takes precedence over an allow. Were it refused here, this
    // later filter's EPERM would win over ENOSYS (among equal actions the
    // most recently installed filter's errno wins).
    allow.insert(libc::SYS_clone3, vec![]);
    let allow = compile(allow, SeccompAction::Errno(libc::EPERM as u32), SeccompAction::Allow)?;
    let kill = compile(fatal().into_iter().map(|s| (s, vec![])).collect(), SeccompAction::Allow, SeccompAction::KillProcess)?;
    Ok(vec![clone3, allow, kill])
}

/// Installs the agent's steady-state seccomp filters on every thread of the
/// process. Call it after the capture is open, the listeners are bound and
/// privileges are dropped. Sets no-new-privileges (required by the kernel).
pub fn restrict_syscalls() -> anyhow::Result<String> {
    for f in filters()? {
        seccompiler::apply_filter_all_threads(&f).map_err(|e| anyhow::anyhow!("installing the seccomp filter: {e}"))?;
    }
    Ok(format!(
        "seccomp filter on every thread: {} system calls allowed, {} kill the process, others fail with EPERM",
        allowed().len() + 1,
        fatal().len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_disjoint_and_filters_compile() {
        let a: std::collections::BTreeSet<i64> = allowed().into_iter().collect();
        let k: std::collections::BTreeSet<i64> = fatal().into_iter().collect();
        assert_eq!(a.len(), allowed().len(), "no duplicates");
        assert!(a.is_disjoint(&k), "{:?}", a.intersection(&k).collect::<Vec<_>>());
        assert!(!a.contains(&libc::SYS_clone3) && !a.contains(&libc::SYS_clone), "added by filters() with their conditions");
        assert_eq!(filters().unwrap().len(), 3);
    }

    /// Runs the filters in a forked child (oracle: the kernel's answers and
    /// the child's exit status), so the test process keeps its freedom.
    #[test]
    fn the_filters_allow_threads_and_forbid_the_rest() {
        // SAFETY: the child only makes system calls and exits; no allocation
        // after the fork except what the filters compile before it.
        let progs = filters().unwrap();
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let code = (|| {
                for p in &progs {
                    if seccompiler::apply_filter_all_threads(p).is_err() {
                        return 10;
                    }
                    // After each filter (other threads run while they are installed), a thread
                    // can still be started (clone3 → ENOSYS → clone).
                    if std::thread::Builder::new().spawn(|| 7).ok().and_then(|t| t.join().ok()) != Some(7) {
                        return 11;
                    }
                }
                // clone3 itself answers ENOSYS (glibc's cue to fall back to clone).
                let r = unsafe { libc::syscall(libc::SYS_clone3, std::ptr::null::<u8>(), 0usize) };
                if r != -1 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS) {
                    return 15;
                }
                // A forbidden call fails with EPERM instead of running.
                let r = unsafe { libc::syscall(libc::SYS_chdir, c"/".as_ptr()) };
                if r != -1 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EPERM) {
                    return 12;
                }
                // A new user namespace through clone is refused.
                let r = unsafe { libc::syscall(libc::SYS_clone, libc::CLONE_NEWUSER as u64 | libc::SIGCHLD as u64, 0, 0, 0, 0) };
                if r == 0 {
                    unsafe { libc::_exit(0) };
                }
                if r != -1 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EPERM) {
                    return 13;
                }
                // execve kills the process.
                unsafe { libc::execve(c"/bin/true".as_ptr(), [std::ptr::null()].as_ptr(), [std::ptr::null()].as_ptr()) };
                14
            })();
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGSYS, "child exit {} / signal {}", libc::WEXITSTATUS(status), libc::WTERMSIG(status));
    }
}
