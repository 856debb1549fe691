//! No import circle between the files of a crate (docs/architecture.md): for
//! every crate of the workspace, each file's imports (`use crate::…`,
//! `super::…`, `self::…`, paths into child modules, written in `use` lines or
//! in the code) are resolved to the file that defines the name — through the
//! re-exports of `mod.rs`/`lib.rs` facades, which are not imports themselves —
//! and the graph of files must have no cycle. Test modules (`#[cfg(test)]`)
//! are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Crates with a known file circle, being taken apart elsewhere: the test
/// lists their circles without failing, and fails once one of them has none
/// left (so that its entry goes). None since issue 25.
const KNOWN_CIRCLES: &[&str] = &[];

type Module = Vec<String>;

/// `src` without comments and with every string and character literal emptied.
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let ident = |k: usize| k > 0 && (b[k - 1].is_ascii_alphanumeric() || b[k - 1] == b'_');
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if (b[i] == b'r' || b[i..].starts_with(b"br")) && !ident(i) && {
            let s = if b[i] == b'b' { i + 2 } else { i + 1 };
            let h = b[s..].iter().take_while(|&&c| c == b'#').count();
            b.get(s + h) == Some(&b'"')
        } {
            let s = if b[i] == b'b' { i + 2 } else { i + 1 };
            let h = b[s..].iter().take_while(|&&c| c == b'#').count();
            let end: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat(b'#').take(h)).collect();
            let from = s + h + 1;
            let close = b[from..].windows(end.len()).position(|w| w == end.as_slice()).map_or(b.len(), |p| from + p + end.len());
            out.push_str("\"\"");
            i = close;
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' {
            // A character literal ('x', '\n', '\u{1F600}', 'é'); a lifetime stays.
            let rest = &src[i + 1..];
            let len = if rest.starts_with('\\') {
                rest[1..].find('\'').map(|p| p + 1)
            } else {
                rest.chars().next().filter(|_| rest[rest.chars().next().map_or(0, char::len_utf8)..].starts_with('\'')).map(char::len_utf8)
            };
            match len {
                Some(n) => {
                    out.push_str("' '");
                    i += n + 2;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let c = src[i..].chars().next().expect("in bounds");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// Identifiers, `::` and single punctuation characters.
fn tokens(code: &str) -> Vec<String> {
    let mut v = vec![];
    let c: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < c.len() {
        if c[i].is_alphanumeric() || c[i] == '_' {
            let s = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            v.push(c[s..i].iter().collect());
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
            v.push("::".into());
            i += 2;
        } else {
            if !c[i].is_whitespace() {
                v.push(c[i].to_string());
            }
            i += 1;
        }
    }
    v
}

/// The tokens without `#[cfg(test)]` items.
fn without_tests(t: Vec<String>) -> Vec<String> {
    let mut out = vec![];
    let mut i = 0;
    while i < t.len() {
        let is_cfg_test = t[i..].iter().take(7).map(String::as_str).eq(["#", "[", "cfg", "(", "test", ")", "]"]);
        if is_cfg_test {
            // skip to the end of the item: its block or its `;`
            let mut k = i + 7;
            while k < t.len() && t[k] != "{" && t[k] != ";" {
                k += 1;
            }
            if k < t.len() && t[k] == "{" {
                let mut depth = 0;
                while k < t.len() {
                    if t[k] == "{" {
                        depth += 1;
                    } else if t[k] == "}" {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    k += 1;
                }
            }
            i = k + 1;
            continue;
        }
        out.push(t[i].clone());
        i += 1;
    }
    out
}

/// One name a `use` brings in: its path, the name it is known by here, `*`, `pub`.
#[derive(Debug, Clone)]
struct Use {
    path: Vec<String>,
    name: String,
    glob: bool,
    public: bool,
}

fn use_tree(t: &[String], i: &mut usize, prefix: Vec<String>, public: bool, out: &mut Vec<Use>) {
    let mut path = prefix;
    while *i < t.len() {
        let tok = t[*i].as_str();
        match tok {
            "{" => {
                *i += 1;
                while *i < t.len() && t[*i] != "}" {
                    use_tree(t, i, path.clone(), public, out);
                    if *i < t.len() && t[*i] == "," {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            "*" => {
                *i += 1;
                out.push(Use { path, name: "*".into(), glob: true, public });
                return;
            }
            "::" => *i += 1,
            "," | "}" | ";" => break,
            _ => {
                path.push(tok.to_string());
                *i += 1;
                if *i < t.len() && t[*i] == "as" {
                    let alias = t[*i + 1].clone();
                    *i += 2;
                    out.push(Use { path, name: alias, glob: false, public });
                    return;
                }
            }
        }
    }
    if path.last().map(String::as_str) == Some("self") {
        path.pop();
    }
    if let Some(name) = path.last().cloned() {
        out.push(Use { path, name, glob: false, public });
    }
}

/// What one file declares and uses.
struct File {
    path: PathBuf,
    uses: Vec<Use>,
    defines: BTreeSet<String>,
    children: BTreeSet<String>,
    /// Paths written in the code (outside `use` lines).
    paths: Vec<Vec<String>>,
    /// Identifiers of the code outside `use` lines.
    idents: BTreeSet<String>,
}

fn parse(path: &Path) -> File {
    let src = std::fs::read_to_string(path).expect("read source");
    let t = without_tests(tokens(&strip(&src)));
    let mut f = File { path: path.to_path_buf(), uses: vec![], defines: BTreeSet::new(), children: BTreeSet::new(), paths: vec![], idents: BTreeSet::new() };
    let mut i = 0;
    let mut rest: Vec<&str> = vec![];
    while i < t.len() {
        if t[i] == "use" && (i == 0 || [";", "}", "{", "]", "pub", ")"].contains(&t[i - 1].as_str())) {
            let public = i > 0 && (t[i - 1] == "pub" || (t[i - 1] == ")" && t[..i].iter().rev().position(|x| x == "(").is_some_and(|p| i >= p + 2 && t[i - p - 2] == "pub")));
            i += 1;
            use_tree(&t, &mut i, vec![], public, &mut f.uses);
            while i < t.len() && t[i] != ";" {
                i += 1;
            }
            i += 1;
            continue;
        }
        if ["struct", "enum", "fn", "trait", "type", "const", "static", "mod", "union"].contains(&t[i].as_str()) {
            if let Some(n) = t.get(i + 1) {
                f.defines.insert(n.clone());
                if t[i] == "mod" && t.get(i + 2).map(String::as_str) == Some(";") {
                    f.children.insert(n.clone());
                }
            }
        }
        if t[i] == "macro_rules" && t.get(i + 1).map(String::as_str) == Some("!") {
            if let Some(n) = t.get(i + 2) {
                f.defines.insert(n.clone());
            }
        }
        rest.push(&t[i]);
        i += 1;
    }
    let mut k = 0;
    while k < rest.len() {
        let is_ident = |s: &str| s.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_');
        if is_ident(rest[k]) && (k == 0 || rest[k - 1] != "::") {
            f.idents.insert(rest[k].to_string());
            let mut p = vec![rest[k].to_string()];
            while k + 2 < rest.len() && rest[k + 1] == "::" && is_ident(rest[k + 2]) {
                p.push(rest[k + 2].to_string());
                f.idents.insert(rest[k + 2].to_string());
                k += 2;
            }
            if p.len() > 1 {
                f.paths.push(p);
            }
        }
        k += 1;
    }
    f
}

struct Crate {
    files: BTreeMap<Module, File>,
}

impl Crate {
    fn read(src: &Path) -> Crate {
        let mut files = BTreeMap::new();
        let mut stack = vec![src.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).expect("read dir") {
                let p = e.expect("dir entry").path();
                if p.is_dir() {
                    if p != src.join("bin") {
                        stack.push(p);
                    }
                    continue;
                }
                if p.extension().and_then(|e| e.to_str()) != Some("rs") {
                    continue;
                }
                let rel: Vec<String> = p.strip_prefix(src).expect("under src").with_extension("").iter().map(|s| s.to_string_lossy().to_string()).collect();
                let module: Module = match rel.last().map(String::as_str) {
                    Some("lib" | "main") if rel.len() == 1 => vec![],
                    Some("mod") => rel[..rel.len() - 1].to_vec(),
                    _ => rel,
                };
                files.insert(module, parse(&p));
            }
        }
        Crate { files }
    }

    /// A path as written in module `m`, from the crate root; `None` outside the crate.
    fn absolute(&self, m: &Module, p: &[String]) -> Option<Vec<String>> {
        match p.first()?.as_str() {
            "crate" => Some(p[1..].to_vec()),
            "self" => Some(m.iter().chain(&p[1..]).cloned().collect()),
            "super" => {
                let ups = p.iter().take_while(|s| *s == "super").count();
                let base = &m[..m.len().checked_sub(ups)?];
                Some(base.iter().chain(&p[ups..]).cloned().collect())
            }
            first if self.files.get(m).is_some_and(|f| f.children.contains(first)) => Some(m.iter().chain(p).cloned().collect()),
            _ => None,
        }
    }

    /// The file that defines what `p` (from the crate root) names.
    fn resolve(&self, p: &[String], depth: usize) -> Module {
        let mut m: Module = vec![];
        let mut i = 0;
        while i < p.len() {
            let mut next = m.clone();
            next.push(p[i].clone());
            if !self.files.contains_key(&next) {
                break;
            }
            m = next;
            i += 1;
        }
        let (Some(name), true) = (p.get(i), depth < 16) else { return m };
        let f = &self.files[&m];
        if f.defines.contains(name) {
            return m;
        }
        // A name imported or re-exported here: where it comes from.
        if let Some(u) = f.uses.iter().find(|u| !u.glob && &u.name == name) {
            return match self.absolute(&m, &u.path) {
                Some(a) => self.resolve(&a.into_iter().chain(p[i + 1..].iter().cloned()).collect::<Vec<_>>(), depth + 1),
                None => m,
            };
        }
        for u in f.uses.iter().filter(|u| u.glob) {
            if let Some(a) = self.absolute(&m, &u.path) {
                if let Some(g) = self.files.get(&a) {
                    if g.defines.contains(name) || g.uses.iter().any(|x| &x.name == name) {
                        return self.resolve(&a.into_iter().chain(p[i..].iter().cloned()).collect::<Vec<_>>(), depth + 1);
                    }
                }
            }
        }
        m
    }

    /// Per file, the files it imports from.
    fn edges(&self) -> BTreeMap<Module, BTreeSet<Module>> {
        let mut e = BTreeMap::new();
        for (m, f) in &self.files {
            let mut to = BTreeSet::new();
            for u in &f.uses {
                // A re-export is no import of its own; a name imported and not used is none either.
                if (u.glob && u.public) || (!u.glob && !f.idents.contains(&u.name)) {
                    continue;
                }
                if let Some(a) = self.absolute(m, &u.path) {
                    to.insert(self.resolve(&a, 0));
                }
            }
            for p in &f.paths {
                if let Some(a) = self.absolute(m, p) {
                    to.insert(self.resolve(&a, 0));
                }
            }
            to.remove(m);
            e.insert(m.clone(), to);
        }
        e
    }
}

/// Strongly connected components of more than one file (Tarjan).
fn circles(e: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct T<'a> {
        e: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on: BTreeSet<&'a Module>,
        out: Vec<Vec<Module>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a Module) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.e.get(v).into_iter().flatten() {
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut c = vec![];
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                c.push(w.clone());
                if w == v {
                    break;
                }
            }
            if c.len() > 1 {
                c.sort();
                t.out.push(c);
            }
        }
    }
    let mut t = T { e, index: BTreeMap::new(), low: BTreeMap::new(), stack: vec![], on: BTreeSet::new(), out: vec![] };
    for v in e.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("crates/").to_path_buf()
}

/// Each crate's circles, as lists of file names under its `src/`.
fn circles_per_crate() -> BTreeMap<String, Vec<Vec<String>>> {
    let mut found = BTreeMap::new();
    for d in std::fs::read_dir(crates_dir()).expect("crates/") {
        let dir = d.expect("entry").path();
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        let c = Crate::read(&src);
        let named = circles(&c.edges())
            .into_iter()
            .map(|cycle| cycle.iter().map(|m| c.files[m].path.strip_prefix(&src).expect("under src").display().to_string()).collect())
            .collect();
        found.insert(dir.file_name().expect("name").to_string_lossy().to_string(), named);
    }
    found
}

#[test]
fn no_file_circle_in_a_crate() {
    let found = circles_per_crate();
    assert!(found.contains_key("core") && found.contains_key("cli"), "the crates were not found under {}", crates_dir().display());
    let mut failures = vec![];
    for (krate, cs) in &found {
        let known = KNOWN_CIRCLES.contains(&krate.as_str());
        for c in cs {
            eprintln!("{krate}: file circle {}{}", c.join(" "), if known { " (known)" } else { "" });
        }
        match (known, cs.is_empty()) {
            (false, false) => failures.push(format!("crates/{krate}: files that import each other: {cs:?}")),
            (true, true) => failures.push(format!("crates/{krate} has no file circle left: remove it from KNOWN_CIRCLES")),
            _ => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_circle_is_found() {
    // Two files that import each other, one through a facade's re-export; a
    // third that only re-exports them is in no circle.
    let dir = std::env::temp_dir().join(format!("ddscope-circles-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("a")).expect("temp dir");
    std::fs::write(src.join("lib.rs"), "pub mod a;\npub mod b;\n").expect("write");
    std::fs::write(src.join("a/mod.rs"), "mod x;\npub use x::X;\n// use crate::b::B;\n").expect("write");
    std::fs::write(src.join("a/x.rs"), "use crate::b::B;\npub struct X(B);\nconst S: &str = \"use crate::b::Nothing;\";\n").expect("write");
    std::fs::write(src.join("b.rs"), "pub struct B;\nimpl B { fn x(self) -> crate::a::X { crate::a::X(self) } }\n#[cfg(test)]\nmod tests { use crate::a::X; }\n").expect("write");
    let c = Crate::read(&src);
    let found = circles(&c.edges());
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(found, vec![vec![vec!["a".to_string(), "x".to_string()], vec!["b".to_string()]]]);
}
