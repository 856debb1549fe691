//! `cargo bench -p ddscope-tsn --bench simulate`: simulator speed on the
//! heaviest thesis scenarios (10 s of a 2.5 Gbit/s link) and the Bosk et al.
//! use case. Prints wall time, frames and events per second. No timing
//! assertions: the numbers go to BENCHMARKS.md.

use ddscope_tsn::scenario::{simulate, Scenario};
use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/tsn");
    let cases = [
        ("thesis-baseline-95.toml", 10u64),
        ("thesis-tas50-95.toml", 10),
        ("thesis-tas50-40.toml", 10),
        ("ivn-usecase-cbs.toml", 10),
        ("ivn-usecase-taprio.toml", 10),
    ];
    println!("{:<26} {:>8} {:>10} {:>12} {:>12} {:>10} {:>12}", "scenario", "sim s", "wall s", "frames", "events", "Mframes/s", "x real time");
    for (file, secs) in cases {
        let mut sc = Scenario::load(&dir.join(file)).unwrap();
        sc.duration = ddscope_traffic::Nanos(secs * 1_000_000_000);
        let mut best = f64::MAX;
        let mut frames = 0;
        let mut events = 0;
        for _ in 0..3 {
            let t = Instant::now();
            let r = simulate(&sc, 1);
            let dt = t.elapsed().as_secs_f64();
            best = best.min(dt);
            frames = r.ports.iter().map(|p| p.frames).sum::<u64>();
            events = r.events;
        }
        println!(
            "{:<26} {:>8} {:>10.3} {:>12} {:>12} {:>10.2} {:>12.1}",
            file,
            secs,
            best,
            frames,
            events,
            frames as f64 / best / 1e6,
            secs as f64 / best
        );
    }
}
