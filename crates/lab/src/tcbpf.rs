//! The lab's tc eBPF programs (`lab/bpf/`): attached with iproute2
//! (`tc filter add … bpf direct-action obj X.o sec S`), their maps filled and
//! read here through the bpf(2) syscall.
//!
//! iproute2 creates each program's maps when it loads the object; the maps are
//! not pinned (a pin in bpffs would have to be reachable from every host's
//! namespace, and `tc -n` remounts /sys). Instead the program id is read back
//! from `tc filter show`, and the ids of its maps from the kernel
//! (`BPF_OBJ_GET_INFO_BY_FD`), so every host's instance gets its own maps and
//! parallel runs never share one. No bpftool is needed.

use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};

use crate::procs::run_cmd;

const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
const BPF_MAP_GET_FD_BY_ID: libc::c_long = 14;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;

/// The object files: `$DDSCOPE_LAB_BPF`, else `lab/bpf/out` in the checkout
/// holding the running binary, the current directory or the source tree.
pub fn object_dir() -> Result<PathBuf> {
    if let Ok(dir) = std::env::var("DDSCOPE_LAB_BPF") {
        let dir = PathBuf::from(dir);
        if !dir.join("tc_vlan.o").is_file() {
            bail!("DDSCOPE_LAB_BPF={}: no tc_vlan.o there (build it with `make -C lab/bpf`)", dir.display());
        }
        return Ok(dir);
    }
    let mut starts = vec![];
    if let Ok(exe) = std::env::current_exe().and_then(|e| e.canonicalize()) {
        starts.push(exe);
    }
    if let Ok(cwd) = std::env::current_dir() {
        starts.push(cwd);
    }
    starts.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    for s in starts {
        for anc in s.ancestors() {
            let dir = anc.join("lab").join("bpf").join("out");
            if ["tc_vlan.o", "tc_loss.o", "tc_probe.o"].iter().all(|o| dir.join(o).is_file()) {
                return Ok(dir);
            }
        }
    }
    bail!("the lab's eBPF objects (lab/bpf/out/tc_vlan.o, tc_loss.o, tc_probe.o) are not built: run `make -C lab/bpf` (needs clang-14 and libbpf-dev; scripts/setup.sh does it) or point DDSCOPE_LAB_BPF at them")
}

/// Owned file descriptor from the bpf syscall.
struct Fd(i32);
impl Drop for Fd {
    fn drop(&mut self) {
        unsafe { libc::close(self.0) };
    }
}

fn sys_bpf(cmd: libc::c_long, attr: &mut [u8; 128]) -> std::io::Result<i64> {
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len() as u32) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn put_u32(a: &mut [u8], off: usize, v: u32) {
    a[off..off + 4].copy_from_slice(&v.to_ne_bytes());
}
fn put_u64(a: &mut [u8], off: usize, v: u64) {
    a[off..off + 8].copy_from_slice(&v.to_ne_bytes());
}
fn get_u32(a: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes([a[off], a[off + 1], a[off + 2], a[off + 3]])
}

fn fd_by_id(cmd: libc::c_long, id: u32) -> std::io::Result<Fd> {
    let mut attr = [0u8; 128];
    put_u32(&mut attr, 0, id);
    sys_bpf(cmd, &mut attr).map(|fd| Fd(fd as i32))
}

fn obj_info(fd: &Fd, info: &mut [u8]) -> std::io::Result<()> {
    let mut attr = [0u8; 128];
    put_u32(&mut attr, 0, fd.0 as u32);
    put_u32(&mut attr, 4, info.len() as u32);
    put_u64(&mut attr, 8, info.as_mut_ptr() as u64);
    sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr).map(|_| ())
}

/// One map of a loaded program.
#[derive(Debug, Clone)]
pub struct MapRef {
    pub name: String,
    pub id: u32,
    pub key_size: u32,
    pub value_size: u32,
}

impl MapRef {
    pub fn update(&self, key: &[u8], value: &[u8]) -> Result<()> {
        if key.len() != self.key_size as usize || value.len() != self.value_size as usize {
            bail!("map {}: key/value of {}/{} bytes, the map has {}/{}", self.name, key.len(), value.len(), self.key_size, self.value_size);
        }
        let fd = fd_by_id(BPF_MAP_GET_FD_BY_ID, self.id).with_context(|| format!("map {} (id {})", self.name, self.id))?;
        let mut attr = [0u8; 128];
        put_u32(&mut attr, 0, fd.0 as u32);
        put_u64(&mut attr, 8, key.as_ptr() as u64);
        put_u64(&mut attr, 16, value.as_ptr() as u64);
        sys_bpf(BPF_MAP_UPDATE_ELEM, &mut attr).with_context(|| format!("updating map {} (id {})", self.name, self.id))?;
        Ok(())
    }

    pub fn lookup(&self, key: &[u8]) -> Result<Vec<u8>> {
        if key.len() != self.key_size as usize {
            bail!("map {}: key of {} bytes, the map has {}", self.name, key.len(), self.key_size);
        }
        let fd = fd_by_id(BPF_MAP_GET_FD_BY_ID, self.id).with_context(|| format!("map {} (id {})", self.name, self.id))?;
        let mut value = vec![0u8; self.value_size as usize];
        let mut attr = [0u8; 128];
        put_u32(&mut attr, 0, fd.0 as u32);
        put_u64(&mut attr, 8, key.as_ptr() as u64);
        put_u64(&mut attr, 16, value.as_mut_ptr() as u64);
        sys_bpf(BPF_MAP_LOOKUP_ELEM, &mut attr).with_context(|| format!("reading map {} (id {})", self.name, self.id))?;
        Ok(value)
    }

    /// Element `i` of an array of u64 counters.
    pub fn counter(&self, i: u32) -> Result<u64> {
        let v = self.lookup(&i.to_ne_bytes())?;
        Ok(u64::from_ne_bytes(v[..8].try_into().map_err(|_| anyhow!("map {}: value shorter than 8 bytes", self.name))?))
    }
}

/// A program attached to one device's clsact hook.
#[derive(Debug, Clone)]
pub struct Attached {
    pub netns: String,
    pub dev: String,
    pub hook: &'static str,
    pub section: String,
    pub prog_id: u32,
    pub maps: Vec<MapRef>,
}

impl Attached {
    pub fn map(&self, name: &str) -> Result<&MapRef> {
        self.maps
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| anyhow!("program {} on {}/{}: no map {name:?} (have {:?})", self.section, self.netns, self.dev, self.maps.iter().map(|m| &m.name).collect::<Vec<_>>()))
    }
}

/// Adds the clsact qdisc to `dev` (once) and attaches section `section` of
/// `obj` to its `hook` ("egress" or "ingress") in direct-action mode.
pub fn attach(netns: &str, dev: &str, hook: &'static str, obj: &Path, section: &str) -> Result<Attached> {
    let has_clsact = run_cmd(&["tc", "-n", netns, "qdisc", "show", "dev", dev])?.contains("clsact");
    if !has_clsact {
        run_cmd(&["tc", "-n", netns, "qdisc", "add", "dev", dev, "clsact"])?;
    }
    let obj_s = obj.to_str().ok_or_else(|| anyhow!("{}: path is not UTF-8", obj.display()))?;
    run_cmd(&["tc", "-n", netns, "filter", "add", "dev", dev, hook, "bpf", "direct-action", "obj", obj_s, "sec", section])?;
    let shown = run_cmd(&["tc", "-n", netns, "filter", "show", "dev", dev, hook])?;
    let prog_id = prog_id_of(&shown, section).ok_or_else(|| anyhow!("tc filter show dev {dev} {hook} in {netns}: no program of section {section} ({})", shown.trim()))?;
    let maps = prog_maps(prog_id)?;
    Ok(Attached { netns: netns.to_string(), dev: dev.to_string(), hook, section: section.to_string(), prog_id, maps })
}

/// The id of the program of `section` in `tc filter show` output
/// (`… obj.o:[section] direct-action not_in_hw id 100 name … tag …`).
pub fn prog_id_of(shown: &str, section: &str) -> Option<u32> {
    let needle = format!(":[{section}]");
    let line = shown.lines().find(|l| l.contains(&needle))?;
    let mut words = line.split_whitespace();
    while let Some(w) = words.next() {
        if w == "id" {
            return words.next()?.parse().ok();
        }
    }
    None
}

fn prog_maps(prog_id: u32) -> Result<Vec<MapRef>> {
    let fd = fd_by_id(BPF_PROG_GET_FD_BY_ID, prog_id).with_context(|| format!("bpf program id {prog_id}"))?;
    // struct bpf_prog_info: nr_map_ids at 52, map_ids (pointer) at 56
    let mut ids = [0u32; 16];
    let mut info = [0u8; 256];
    put_u32(&mut info, 52, ids.len() as u32);
    put_u64(&mut info, 56, ids.as_mut_ptr() as u64);
    obj_info(&fd, &mut info).with_context(|| format!("bpf program id {prog_id}: info"))?;
    let n = (get_u32(&info, 52) as usize).min(ids.len());
    let mut maps = vec![];
    for &id in &ids[..n] {
        let mfd = fd_by_id(BPF_MAP_GET_FD_BY_ID, id).with_context(|| format!("bpf map id {id}"))?;
        // struct bpf_map_info: key_size 8, value_size 12, name[16] at 24
        let mut mi = [0u8; 128];
        obj_info(&mfd, &mut mi).with_context(|| format!("bpf map id {id}: info"))?;
        let name: String = mi[24..40].iter().take_while(|&&b| b != 0).map(|&b| b as char).collect();
        maps.push(MapRef { name, id, key_size: get_u32(&mi, 8), value_size: get_u32(&mi, 12) });
    }
    Ok(maps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_id_from_tc_output() {
        let shown = "filter protocol all pref 49152 bpf chain 0 \nfilter protocol all pref 49152 bpf chain 0 handle 0x1 tc_vlan.o:[tc_vlan_egress] direct-action not_in_hw id 100 name vlan_egress tag 5f79b75d36af6bea jited \n";
        assert_eq!(prog_id_of(shown, "tc_vlan_egress"), Some(100));
        assert_eq!(prog_id_of(shown, "tc_loss_egress"), None);
    }
}
