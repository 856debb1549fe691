// Links the system libbabeltrace2 (Debian: libbabeltrace2-dev), the reference
// CTF reader; docs/tracing.md says why it is linked rather than vendored.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-lib=dylib=babeltrace2");
}
