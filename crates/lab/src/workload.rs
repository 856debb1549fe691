//! The workload node programs (`lab/`): where they are, how a scenario node
//! becomes their command line, and the DDS configuration they run with.

use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::scenario::{ComputeMode, Multicast, Node, Scenario, Tracing, Vendor};
use ddscope_traffic::Reliability;

pub const CYCLONE_NODE: &str = "ddslab-cyclone";
pub const FASTDDS_NODE: &str = "ddslab-fastdds";
/// lab/zenoh/ddslab_zenoh.py as the build installs it, with libddslab-rosmsg.so beside it.
pub const ZENOH_NODE: &str = "ddslab-zenoh";
/// The real rclcpp node (lab/ros2/ddslab_ros2), under lab/ros2/install beside lab/build.
pub const ROS2_NODE: &str = "lib/ddslab_ros2/ddslab-ros2";
/// Written by lab/ros2/build.sh into lab/ros2/install: the ROS 2 install it was built against.
pub const ROS2_STACK_FILE: &str = "ddscope-ros2-stack";

#[derive(Debug, Clone)]
pub struct NodeBins {
    pub dir: PathBuf,
}

impl NodeBins {
    /// Finds the node programs: `$DDSCOPE_LAB_NODES`, else `lab/build` in the
    /// repository that holds the running `ddscope` (any ancestor of its
    /// directory), else `lab/build` under the current directory or its ancestors,
    /// else `lab/build` of the checkout the binary was built from.
    pub fn find() -> Result<NodeBins> {
        if let Ok(dir) = std::env::var("DDSCOPE_LAB_NODES") {
            let dir = PathBuf::from(dir);
            if !dir.join(CYCLONE_NODE).is_file() {
                bail!("DDSCOPE_LAB_NODES={}: no {CYCLONE_NODE} there (build it with: cmake -S lab -B lab/build && cmake --build lab/build)", dir.display());
            }
            return Ok(NodeBins { dir });
        }
        let mut starts = vec![];
        if let Ok(exe) = std::env::current_exe() {
            if let Ok(exe) = exe.canonicalize() {
                starts.push(exe);
            }
        }
        if let Ok(cwd) = std::env::current_dir() {
            starts.push(cwd);
        }
        // the checkout this binary was built from (a build with its own CARGO_TARGET_DIR)
        starts.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")));
        for s in starts {
            for anc in s.ancestors() {
                let dir = anc.join("lab").join("build");
                if dir.join(CYCLONE_NODE).is_file() {
                    return Ok(NodeBins { dir });
                }
            }
        }
        bail!(
            "workload node {CYCLONE_NODE} not found: build it with `cmake -S lab -B lab/build && cmake --build lab/build` \
             (scripts/setup.sh does) or point DDSCOPE_LAB_NODES at the directory holding it"
        )
    }

    /// The real ROS 2 node's install (lab/ros2/install beside lab/build) and the ROS 2 Jazzy
    /// install it runs on (scripts/ros2-build.sh's, named in the node install's ROS2_STACK_FILE).
    pub fn ros2(&self) -> Result<Ros2Install> {
        let node_install = self.dir.parent().map(|p| p.join("ros2").join("install")).unwrap_or_default();
        let node = node_install.join(ROS2_NODE);
        if !node.is_file() {
            bail!(
                "the real ROS 2 node {} is not built: run lab/ros2/build.sh (it builds the ROS 2 Jazzy stack from ../shared/ros2 first, ~25 min the first time; scripts/setup.sh does both)",
                node.display()
            );
        }
        let stack_file = node_install.join(ROS2_STACK_FILE);
        let stack = std::fs::read_to_string(&stack_file).map(|s| PathBuf::from(s.trim())).map_err(|e| anyhow!("{}: {e} (rebuild with lab/ros2/build.sh)", stack_file.display()))?;
        if !stack.join("lib").join("librclcpp.so").is_file() {
            bail!("the ROS 2 install {} (named by {}) is gone: rebuild with lab/ros2/build.sh", stack.display(), stack_file.display());
        }
        Ok(Ros2Install { node, node_install, stack })
    }

    pub fn path(&self, vendor: Vendor) -> Result<PathBuf> {
        if vendor.is_ros2() {
            return Ok(self.ros2()?.node);
        }
        let name = match vendor {
            Vendor::Cyclone => CYCLONE_NODE,
            Vendor::Fastdds => FASTDDS_NODE,
            Vendor::Zenoh => ZENOH_NODE,
            Vendor::RmwCyclonedds | Vendor::RmwFastrtps | Vendor::RmwZenoh => unreachable!("handled above"),
        };
        let p = self.dir.join(name);
        if !p.is_file() {
            if vendor == Vendor::Zenoh {
                bail!(
                    "workload node {} not found: rebuild lab/ (cmake -S lab -B lab/build && cmake --build lab/build installs it, with libddslab-rosmsg.so)",
                    p.display()
                );
            }
            bail!("workload node {} not found (Fast DDS nodes need libfastrtps-dev when lab/ is built)", p.display());
        }
        Ok(p)
    }

    /// The ros2_tracing provider library a node loads for `tracing` (built next to the nodes).
    pub fn tracing_provider(&self, tracing: Tracing) -> Result<Option<PathBuf>> {
        if tracing.is_off() {
            return Ok(None);
        }
        let p = self.dir.join(format!("libddslab-ros2tp-{}.so", tracing.as_str()));
        if !p.is_file() {
            bail!(
                "tracing {tracing}: {} not found (the ros2_tracing replica needs liblttng-ust-dev when lab/ is built)",
                p.display()
            );
        }
        let clock = self.dir.join("libddslab-lttng-clock.so");
        if !clock.is_file() {
            bail!("tracing {tracing}: {} not found (built with the provider)", clock.display());
        }
        Ok(Some(p))
    }

    /// The clock-warping preload of hosts whose clock a scenario warps (lab/common/warpclock.c).
    pub fn warpclock(&self) -> Result<PathBuf> {
        let p = self.dir.join("libddslab-warpclock.so");
        if !p.is_file() {
            bail!("a host's clock is warped: {} not found (rebuild lab/: cmake -S lab -B lab/build && cmake --build lab/build)", p.display());
        }
        Ok(p)
    }

    /// `--version` of a node program, e.g. "cyclonedds 0.10.2".
    pub fn version(&self, vendor: Vendor) -> Option<String> {
        let mut cmd = Command::new(self.path(vendor).ok()?);
        if vendor.is_ros2() {
            cmd.envs(self.ros2().ok()?.env(vendor, false));
        }
        let out = cmd.arg("--version").output().ok()?;
        let s = String::from_utf8_lossy(&out.stdout);
        s.split_whitespace().skip(1).collect::<Vec<_>>().join(" ").into()
    }
}

fn rel(r: Reliability) -> &'static str {
    match r {
        Reliability::Reliable => "reliable",
        Reliability::BestEffort => "best_effort",
    }
}

/// What [`node_args`] needs of the whole scenario, computed once for all nodes.
pub struct ScenarioFacts {
    counts: crate::scenario::TopicCounts,
    nominal: std::collections::BTreeMap<String, f64>,
}

impl ScenarioFacts {
    pub fn of(sc: &Scenario) -> Result<ScenarioFacts> {
        Ok(ScenarioFacts { counts: sc.topic_counts(), nominal: sc.nominal_rates()? })
    }
}

/// The real ROS 2 stack and the lab's node built on it.
#[derive(Debug, Clone)]
pub struct Ros2Install {
    pub node: PathBuf,
    pub node_install: PathBuf,
    pub stack: PathBuf,
}

impl Ros2Install {
    /// What a process of the stack needs: its libraries and ament index (what the install's setup
    /// script would set), and the rmw.
    pub fn env(&self, rmw: Vendor, shared_memory: bool) -> Vec<(&'static str, String)> {
        let s = &self.stack;
        let n = &self.node_install;
        let mut v = vec![
            ("AMENT_PREFIX_PATH", format!("{}:{}", n.display(), s.display())),
            ("LD_LIBRARY_PATH", format!("{}/lib:{}/lib:{}/opt/zenoh_c_vendor/lib", n.display(), s.display(), s.display())),
            ("RMW_IMPLEMENTATION", rmw.as_str().to_string()),
        ];
        if rmw == Vendor::RmwFastrtps && !shared_memory {
            // Fast DDS prefers shared memory between processes of one kernel (the lab's hosts are
            // namespaces of one): nothing would cross the link.
            v.push(("FASTDDS_BUILTIN_TRANSPORTS", "UDPv4".to_string()));
        }
        v
    }

    /// rmw_zenoh's router (rmw_zenohd).
    pub fn zenoh_router(&self) -> PathBuf {
        self.stack.join("lib").join("rmw_zenoh_cpp").join("rmw_zenohd")
    }
}

/// Command-line arguments of one node (see lab/common/nodecfg.h).
pub fn node_args(sc: &Scenario, node: &Node, truth: &Path, run_id: &str, iface_ip: Option<&str>) -> Result<Vec<String>> {
    node_args_with(&ScenarioFacts::of(sc)?, sc, node, truth, run_id, iface_ip)
}

/// [`node_args`] with the scenario's facts computed once (a loop over every node stays linear).
pub fn node_args_with(facts: &ScenarioFacts, sc: &Scenario, node: &Node, truth: &Path, run_id: &str, iface_ip: Option<&str>) -> Result<Vec<String>> {
    let nominal = &facts.nominal;
    let mut a: Vec<String> = vec![
        "--node".into(),
        node.name.clone(),
        "--host".into(),
        node.host.clone(),
        "--truth".into(),
        truth.display().to_string(),
        "--run-id".into(),
        run_id.into(),
        "--content".into(),
        sc.content.as_str().into(),
        "--domain".into(),
        sc.node_domain(node).to_string(),
        "--ready-timeout".into(),
        format!("{}", sc.ready_timeout.as_secs_f64()),
    ];
    if let (Vendor::Fastdds, Some(ip)) = (node.vendor, iface_ip) {
        a.push("--iface-ip".into());
        a.push(ip.into());
    }
    let tracing = sc.tracing_of(node);
    if !tracing.is_off() {
        a.push("--tracing".into());
        a.push(tracing.as_str().into());
    }
    let readers_of = |topic: &str| facts.counts.readers_of(topic);
    for p in &node.publish {
        a.push("--pub".into());
        let burst = node.burst.iter().find(|b| b.topic == p.topic).map_or(String::new(), |b| format!(",burst_every={},burst_count={}", b.every, b.count));
        a.push(format!(
            "topic={},type={},bytes={},rate={},reliability={},depth={},readers={}{burst}",
            p.topic,
            p.type_name,
            p.sample_bytes.0,
            p.rate_hz,
            rel(p.reliability),
            p.history_depth,
            readers_of(&p.topic)
        ));
    }
    for s in &node.subscribe {
        // As Scenario::readers resolves them.
        let type_name = s.type_name.as_ref().ok_or_else(|| anyhow!("internal: reader {} of {} not resolved", s.topic, node.name))?;
        a.push("--sub".into());
        a.push(format!(
            "topic={},type={},reliability={},depth={},writers={}",
            s.topic,
            type_name,
            rel(s.reliability.unwrap_or_default()),
            s.history_depth.unwrap_or(10),
            facts.counts.writers_of(&s.topic)
        ));
    }
    for r in &node.relay {
        let input = nominal.get(&r.input).copied().unwrap_or(0.0);
        let ratio = if input > 0.0 { (r.output.rate_hz / input).min(1.0) } else { 1.0 };
        a.push("--relay".into());
        let domain = match r.output_domain {
            Some(d) if d != sc.node_domain(node) => format!(",domain={d}"),
            _ => String::new(),
        };
        let slow = if r.slow_every > 0 { format!(",slow_every={},slow_ns={}", r.slow_every, r.slow_compute.0) } else { String::new() };
        a.push(format!(
            "input={},topic={},type={},bytes={},ratio={},delay_ns={},compute={},reliability={},depth={},readers={}{domain}{slow}",
            r.input,
            r.output.topic,
            r.output.type_name,
            r.output.sample_bytes.0,
            ratio,
            r.compute.0,
            match r.compute_mode {
                ComputeMode::Sleep => "sleep",
                ComputeMode::Spin => "spin",
            },
            rel(r.output.reliability),
            r.output.history_depth,
            readers_of(&r.output.topic)
        ));
    }
    Ok(a)
}

/// The Zenoh session of a Zenoh node: a client of the router at `router` (`tcp/IP:PORT`), or a
/// peer that connects to it (for the gossip that tells it about the other peers) and listens on
/// its host's address for them.
pub fn zenoh_args(sc: &Scenario, host_ip: &str, router: &str) -> Vec<String> {
    let mut a = vec!["--mode".to_string(), sc.zenoh.mode.as_str().to_string(), "--connect".to_string(), router.to_string()];
    if sc.zenoh.mode == crate::scenario::ZenohMode::Peer {
        a.push("--listen".into());
        a.push(format!("tcp/{host_ip}:0"));
    }
    a
}

/// Cyclone DDS configuration (CYCLONEDDS_URI) of every node of a run.
pub fn cyclone_config(sc: &Scenario, iface: &str) -> String {
    // topics with a PCP: one network partition per PCP (their frames are tagged by
    // destination address); partitions are multicast groups, so data may use multicast
    let partitioning = crate::net::cyclone_partitioning(sc);
    let mc = match sc.dds.multicast {
        Multicast::Spdp if !partitioning.is_empty() => "<AllowMulticast>spdp,asm</AllowMulticast>",
        Multicast::Spdp => "<AllowMulticast>spdp</AllowMulticast>",
        Multicast::Default => "<AllowMulticast>default</AllowMulticast>",
        Multicast::False => "<AllowMulticast>false</AllowMulticast>",
    };
    // a single reader gets unicast unless the interface prefers multicast
    let prefer = if partitioning.is_empty() { "" } else { " prefer_multicast=\"true\"" };
    let internal = match sc.dds.socket_receive_buffer {
        Some(b) => format!("<Internal><SocketReceiveBufferSize min=\"{}B\"/></Internal>", b.0),
        None => String::new(),
    };
    let mut sizes = String::new();
    if let Some(m) = sc.dds.max_message_size {
        sizes.push_str(&format!("<MaxMessageSize>{}B</MaxMessageSize>", m.0));
    }
    if let Some(f) = sc.dds.fragment_size {
        sizes.push_str(&format!("<FragmentSize>{}B</FragmentSize>", f.0));
    }
    format!(
        "<CycloneDDS><Domain id=\"any\"><General><Interfaces><NetworkInterface name=\"{iface}\"{prefer}/></Interfaces>{mc}{sizes}</General>{partitioning}{internal}</Domain></CycloneDDS>"
    )
}

/// Runs every node's program with `--check`: message types known, sizes reachable.
pub fn check_nodes(sc: &Scenario, bins: &NodeBins) -> Result<()> {
    let facts = ScenarioFacts::of(sc)?;
    for n in &sc.nodes {
        bins.tracing_provider(sc.tracing_of(n)).map_err(|e| anyhow!("node {}: {e}", n.name))?;
        let prog = bins.path(n.vendor)?;
        let args = node_args_with(&facts, sc, n, Path::new("/dev/null"), "check", Some("127.0.0.1"))?;
        let mut cmd = Command::new(&prog);
        if n.vendor.is_ros2() {
            cmd.envs(bins.ros2()?.env(n.vendor, n.shared_memory));
        }
        let out = cmd.args(&args).arg("--check").output().with_context(|| format!("cannot run {}", prog.display()))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let line = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("failed").trim_start_matches("error: ");
            bail!("node {}: {line}", n.name);
        }
    }
    Ok(())
}
