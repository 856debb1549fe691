// Builds the agent's in-kernel capture filter (bpf/capture.c) with clang's
// BPF target (Debian: clang-14, libbpf-dev for bpf_helpers.h). Without a
// working clang the object is left empty and the capture falls back to
// libpcap alone at run time, saying why (docs/online.md).
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=bpf/capture.c");
    println!("cargo:rerun-if-env-changed=DDSCOPE_CLANG");
    // A build made before clang-14 and libbpf-dev were installed must be redone
    // once they are. Watching their paths is not enough: dpkg gives them the
    // package's old mtimes, so cargo finds them older than the last run and
    // keeps the empty object for good. Failures below watch a path that never
    // exists instead, which makes cargo run this again at every build until
    // clang succeeds.
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("capture.bpf.o");
    let candidates: Vec<String> = match std::env::var("DDSCOPE_CLANG") {
        Ok(c) => vec![c],
        Err(_) => vec!["clang-14".into(), "clang".into()],
    };
    let arch_inc = format!("/usr/include/{}-linux-gnu", std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default());
    let mut why = String::from("no clang found (install clang-14 and libbpf-dev, scripts/setup.sh)");
    for clang in candidates {
        let r = Command::new(&clang)
            .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf", "-I", &arch_inc, "-c", "bpf/capture.c", "-o"])
            .arg(&out)
            .output();
        match r {
            Ok(o) if o.status.success() => {
                println!("cargo:rustc-env=DDSCOPE_BPF_NOTE=");
                return;
            }
            Ok(o) => {
                why = format!("{clang} failed: {}", String::from_utf8_lossy(&o.stderr).lines().next().unwrap_or("").trim());
                break;
            }
            Err(_) => continue,
        }
    }
    println!("cargo:rerun-if-changed={}", out.with_extension("retry-until-clang-builds-it").display());
    println!("cargo:warning=in-kernel capture filter not built: {why}");
    println!("cargo:rustc-env=DDSCOPE_BPF_NOTE={}", why.replace('\n', " "));
    if let Err(e) = std::fs::write(&out, b"") {
        panic!("cannot write {}: {e}", out.display());
    }
}
