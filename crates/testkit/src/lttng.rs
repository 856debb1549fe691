//! A real `lttng-relayd` for the tests that follow live LTTng sessions (the
//! trace reader's and the agent's): started on three ports the kernel says
//! are free, killed when dropped.

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Relayd {
    child: Child,
    pub viewer: u16,
    pub ctrl: u16,
    pub data: u16,
}

impl Drop for Relayd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts lttng-relayd writing what it receives under `out`; returns once its
/// live (viewer) port accepts connections.
pub fn start_relayd(out: &Path) -> Relayd {
    // Three ports free now, held at once so they differ (a pid-derived port could be an
    // ephemeral port of another connection: seen once in CI).
    let held: Vec<std::net::TcpListener> = (0..3).map(|_| std::net::TcpListener::bind(("127.0.0.1", 0)).expect("a free port")).collect();
    let port = |i: usize| held[i].local_addr().expect("a bound port").port();
    let (ctrl, data, viewer) = (port(0), port(1), port(2));
    drop(held);
    let child = Command::new("lttng-relayd")
        .arg(format!("--control-port=tcp://localhost:{ctrl}"))
        .arg(format!("--data-port=tcp://localhost:{data}"))
        .arg(format!("--live-port=tcp://localhost:{viewer}"))
        .arg(format!("--output={}", out.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start lttng-relayd (Debian: lttng-tools)");
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", viewer)).is_err() {
        assert!(Instant::now() < deadline, "lttng-relayd did not listen on {viewer}");
        std::thread::sleep(Duration::from_millis(50));
    }
    Relayd { child, viewer, ctrl, data }
}

/// This host's name, as relayd files live sessions under it.
pub fn hostname() -> String {
    let o = Command::new("hostname").output().expect("hostname");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}
