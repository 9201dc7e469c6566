//! The architecture rules of `ARCHITECTURE.md` that a machine can check:
//! each library's `lib.rs` is a face, no source file is over ~900 lines of
//! code, dependencies run one way, and no file imports another in a circle.
//! (The rust-analyzer way: a "tidy" test that fails when a rule is broken,
//! naming the file.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The library crates whose `src/` the rules cover.
const LIBRARIES: [&str; 5] = ["format", "engine", "publisher", "agent", "tests"];
/// Every crate whose sources count for the size rule.
const CRATES: [&str; 7] = [
    "format",
    "engine",
    "publisher",
    "agent",
    "tests",
    "examples",
    "bench",
];
/// The most lines of code in one source file, its unit tests excluded.
const MAX_CODE_LINES: usize = 900;
/// The most lines in a library's `lib.rs`.
const MAX_FACE_LINES: usize = 90;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_owned()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a source file: comment lines dropped, and everything from
/// the first `#[cfg(test)]` on (the unit tests, by convention at the end).
fn code(text: &str) -> Vec<&str> {
    text.lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect()
}

#[test]
fn each_library_lib_rs_is_a_face() {
    for krate in LIBRARIES {
        let path = root().join(krate).join("src/lib.rs");
        let text = std::fs::read_to_string(&path).expect("lib.rs");
        let lines = text.lines().count();
        assert!(lines <= MAX_FACE_LINES, "{}: {lines} lines", path.display());
        for line in code(&text) {
            let t = line.trim_start();
            for item in [
                "fn ",
                "pub fn ",
                "struct ",
                "pub struct ",
                "enum ",
                "pub enum ",
                "impl ",
                "impl<",
            ] {
                assert!(!t.starts_with(item), "{}: defines an item: {t}", path.display());
            }
        }
    }
}

#[test]
fn no_source_file_is_over_900_lines_of_code() {
    let mut files = Vec::new();
    for krate in CRATES {
        rust_files(&root().join(krate).join("src"), &mut files);
    }
    assert!(files.len() > 50, "found only {} files", files.len());
    let mut over = Vec::new();
    for path in files {
        if path.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("source");
        let n = text.lines().take_while(|l| l.trim() != "#[cfg(test)]").count();
        if n > MAX_CODE_LINES {
            over.push(format!("{}: {n}", path.display()));
        }
    }
    assert!(over.is_empty(), "over {MAX_CODE_LINES} lines of code: {over:#?}");
}

/// The sans-I/O parts (ARCHITECTURE.md rule 4) and what they must not
/// touch: the file system, sockets, an async runtime or a clock. The
/// publisher's build may time its stages on the monotonic clock.
#[test]
fn the_sans_io_parts_do_no_io_and_read_no_wall_clock() {
    let mut files = Vec::new();
    rust_files(&root().join("format/src"), &mut files);
    rust_files(&root().join("engine/src"), &mut files);
    let mut build = vec![root().join("publisher/src/build.rs")];
    rust_files(&root().join("publisher/src/build"), &mut build);
    let banned = [
        "std::fs",
        "tokio::",
        "reqwest",
        "std::net::Tcp",
        "SystemTime::now",
        "Instant::now",
    ];
    let mut found = Vec::new();
    for (path, allowed) in files
        .iter()
        .map(|p| (p, None))
        .chain(build.iter().map(|p| (p, Some("Instant::now"))))
    {
        let text = std::fs::read_to_string(path).expect("source");
        for line in code(&text) {
            for word in banned {
                if line.contains(word) && allowed != Some(word) {
                    found.push(format!("{}: {}", path.display(), line.trim()));
                }
            }
        }
    }
    assert!(
        files.len() > 10 && build.len() > 1,
        "read {} + {} files",
        files.len(),
        build.len()
    );
    assert!(found.is_empty(), "I/O or a clock in a sans-I/O part: {found:#?}");
}

/// The `[dependencies]` of a crate's manifest, by name.
fn dependencies(krate: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join(krate).join("Cargo.toml")).expect("Cargo.toml");
    let mut in_deps = false;
    let mut deps = BTreeSet::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]" || line.starts_with("[dependencies.");
            if let Some(name) = line.strip_prefix("[dependencies.") {
                deps.insert(name.trim_end_matches(']').to_owned());
            }
            continue;
        }
        if in_deps && let Some((name, _)) = line.split_once('=') {
            let name = name.trim().trim_end_matches(".workspace");
            if !name.is_empty() && !name.starts_with('#') {
                deps.insert(name.to_owned());
            }
        }
    }
    deps
}

#[test]
fn dependencies_run_one_way() {
    let format = dependencies("format");
    assert!(format.contains("sha2"), "read format's dependencies: {format:?}");
    for runtime in [
        "tokio",
        "reqwest",
        "axum",
        "hyper",
        "blocksieve-publisher",
        "blocksieve-agent",
    ] {
        assert!(!format.contains(runtime), "format depends on {runtime}");
    }
    // The engine builds for wasm32: no runtime, no C zstd (it takes
    // `format` without its default `zstd` feature).
    let engine = dependencies("engine");
    assert!(
        engine.contains("blocksieve-format"),
        "read engine's dependencies: {engine:?}"
    );
    for runtime in ["tokio", "reqwest", "axum", "hyper", "zstd", "blocksieve-agent"] {
        assert!(!engine.contains(runtime), "engine depends on {runtime}");
    }
    let manifest = std::fs::read_to_string(root().join("engine/Cargo.toml")).expect("Cargo.toml");
    assert!(
        (manifest.lines())
            .any(|l| l.starts_with("blocksieve-format") && l.contains("default-features = false")),
        "engine takes format with its C zstd"
    );
    assert!(!format.contains("blocksieve-engine"));
    assert!(!dependencies("publisher").contains("blocksieve-agent"));
    assert!(!dependencies("agent").contains("blocksieve-publisher"));
}

/// The file modules of a crate's `src/`, by module path (`""` is the root),
/// with their files.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files
        .into_iter()
        .filter_map(|path| {
            let rel = path.strip_prefix(src).ok()?.with_extension("");
            let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
            if parts
                .last()
                .is_some_and(|l| l == "mod" || l == "lib" || l == "main")
            {
                parts.pop();
            }
            if parts.first().is_some_and(|p| p == "bin") {
                return None;
            }
            Some((parts.join("::"), path))
        })
        .collect()
}

fn parent(module: &str) -> &str {
    module.rsplit_once("::").map_or("", |(p, _)| p)
}

fn join(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_owned()
    } else {
        format!("{base}::{name}")
    }
}

/// The first path segments after a `crate::` or `super::` at the start of
/// `rest`: one, or each of a `{...}` group's.
fn segments(rest: &str) -> Vec<Vec<String>> {
    let ident = |s: &str| -> Vec<String> {
        s.split("::")
            .map(|p| {
                p.chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect::<String>()
            })
            .take_while(|p| !p.is_empty())
            .collect()
    };
    if let Some(group) = rest.strip_prefix('{') {
        let mut depth = 0;
        let mut items = Vec::new();
        let mut current = String::new();
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(std::mem::take(&mut current));
                    continue;
                }
                _ => {}
            }
            current.push(c);
        }
        items.push(current);
        items
            .iter()
            .map(|i| ident(i.trim()))
            .filter(|p| !p.is_empty())
            .collect()
    } else {
        vec![ident(rest)]
    }
}

/// The file module a path from `base` names: its longest prefix that is one.
fn resolve(modules: &BTreeMap<String, PathBuf>, base: &str, path: &[String]) -> String {
    let mut best = base.to_owned();
    let mut current = base.to_owned();
    for segment in path {
        current = join(&current, segment);
        if modules.contains_key(&current) {
            best = current.clone();
        } else {
            break;
        }
    }
    best
}

/// Which file modules each file module uses (`use` and paths in code,
/// re-exports aside: a `pub use` of a child is the parent's face).
fn import_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules(src);
    let mut graph = BTreeMap::new();
    for (module, path) in &modules {
        let text = std::fs::read_to_string(path).expect("source");
        let children: Vec<&str> = modules
            .keys()
            .filter(|m| !m.is_empty() && parent(m) == module && *m != module)
            .map(|m| m.rsplit("::").next().unwrap_or(m))
            .collect();
        let mut uses = BTreeSet::new();
        let mut in_reexport = false;
        for line in code(&text) {
            let t = line.trim_start();
            if t.starts_with("pub use ")
                || t.starts_with("pub(crate) use ")
                || t.starts_with("pub(super) use ")
            {
                in_reexport = true;
            }
            if in_reexport {
                in_reexport = !t.contains(';');
                continue;
            }
            for (at, _) in line.match_indices("crate::") {
                for p in segments(&line[at + 7..]) {
                    uses.insert(resolve(&modules, "", &p));
                }
            }
            for (at, _) in line.match_indices("super::") {
                for p in segments(&line[at + 7..]) {
                    uses.insert(resolve(&modules, parent(module), &p));
                }
            }
            for child in &children {
                let needle = format!("{child}::");
                for (at, _) in line.match_indices(&needle) {
                    let before = line[..at].chars().last();
                    if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':')) {
                        uses.insert(join(module, child));
                    }
                }
            }
        }
        uses.remove(module);
        uses.remove(""); // the root's re-exported types
        graph.insert(module.clone(), uses);
    }
    graph
}

/// A cycle of the graph, if it has one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_owned(), 1);
        stack.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next.as_str()) {
                Some(1) => {
                    let from = stack.iter().position(|n| n == next).unwrap_or(0);
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(cycle) = visit(next, graph, state, stack) {
                        return Some(cycle);
                    }
                }
            }
        }
        stack.pop();
        state.insert(node.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if !state.contains_key(node.as_str())
            && let Some(cycle) = visit(node, graph, &mut state, &mut Vec::new())
        {
            return Some(cycle);
        }
    }
    None
}

#[test]
fn the_cycle_finder_finds_cycles() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(
        find_cycle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    assert_eq!(
        segments("{a::B, c, d::{e, f}}"),
        vec![
            vec!["a".to_owned(), "B".to_owned()],
            vec!["c".to_owned()],
            vec!["d".to_owned()]
        ]
    );
}

#[test]
fn no_file_imports_another_in_a_circle() {
    let mut cycles = Vec::new();
    for krate in LIBRARIES {
        let graph = import_graph(&root().join(krate).join("src"));
        assert!(graph.len() > 5, "{krate}: read only {} modules", graph.len());
        assert!(
            graph.values().any(|uses| !uses.is_empty()),
            "{krate}: read no imports"
        );
        if let Some(cycle) = find_cycle(&graph) {
            cycles.push(format!("{krate}: {}", cycle.join(" -> ")));
        }
    }
    assert!(
        cycles.is_empty(),
        "files import each other in a circle: {cycles:#?}"
    );
}

/// The name of a crate's library: `[lib] name`, else the package name with
/// `_` for `-`.
fn library_name(manifest: &str) -> Option<String> {
    let mut section = "";
    let (mut package, mut lib) = (None, None);
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
            continue;
        }
        let value = || Some(line.split_once('=')?.1.trim().trim_matches('"').to_owned());
        if line.starts_with("name") && line.contains('=') {
            match section {
                "[package]" => package = value(),
                "[lib]" => lib = value(),
                _ => {}
            }
        }
    }
    lib.or_else(|| package.map(|p| p.replace('-', "_")))
}

/// Two libraries of one name (say a C library and a Python module, both
/// `cdylib`s) overwrite each other's `.so` in `target/`: whichever was
/// built last is linked by both bindings' tests.
#[test]
fn no_two_workspace_libraries_share_a_name() {
    let workspace = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
    let members = workspace
        .lines()
        .find_map(|l| l.trim().strip_prefix("members = "))
        .expect("the workspace's members");
    let mut seen = BTreeMap::new();
    for member in members
        .trim_matches(['[', ']'])
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
    {
        let manifest = std::fs::read_to_string(root().join(member).join("Cargo.toml")).expect("Cargo.toml");
        let name = library_name(&manifest).expect("a package name");
        if let Some(other) = seen.insert(name.clone(), member.to_owned()) {
            panic!("{member} and {other} both build a library named {name}");
        }
    }
    assert!(seen.len() >= 10, "read {seen:?}");
}
