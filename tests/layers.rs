//! The layers of `src/` point one way. This reads the source (not the compiled crate) and fails
//! with the offending file and line when a lower layer names a higher one, or when code outside
//! the core reads or writes agents in the store directly.
//!
//! ```text
//! timestamp, task, domain, config          the base: plain types and settings
//!   └─ store                               persistence (SQLite, PostgreSQL)
//!   └─ search                              the index and the one search function
//!        └─ follow, registry               the application core: every agent read and write
//!             └─ everything else           transports (api, a2a, playground, web), hosted
//!                                          agents, auth, errors, the composition (lib, state,
//!                                          router, server, cli)
//! ```
//!
//! Test modules (`#[cfg(test)] mod tests`, the store's conformance suite) may reach further.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Top-level modules of the base and core layers, and what each may name.
const RULES: &[(&str, &[&str])] = &[
    ("timestamp", &[]),
    ("task", &[]),
    // Model files from a package index: names nothing of the registry.
    ("models", &[]),
    ("domain", &["timestamp"]),
    ("config", &["domain", "models"]),
    ("store", &["timestamp", "task", "domain", "config"]),
    (
        "search",
        &["timestamp", "task", "domain", "config", "store", "models"],
    ),
    (
        "follow",
        &["timestamp", "task", "domain", "config", "store", "search"],
    ),
    (
        "registry",
        &[
            "timestamp",
            "task",
            "domain",
            "config",
            "store",
            "search",
            "follow",
            "models",
        ],
    ),
];

/// Store methods that read or write agents: only the core may call them.
const AGENT_METHODS: &[&str] = &[
    ".insert_agent(",
    ".update_agent(",
    ".delete_agent(",
    ".set_verification(",
    ".find_agent(",
    ".list_agents(",
    ".all_agents(",
    ".public_changes_since(",
    ".agent_versions(",
    ".find_agent_version(",
];

/// Modules allowed to call `AGENT_METHODS` on a store.
const AGENT_OWNERS: &[&str] = &["store", "search", "follow", "registry"];

/// Files that exist only for tests.
const TEST_ONLY: &[&str] = &["src/store/conformance.rs"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to: `src/search/text.rs` → `search`.
fn module_of(relative: &Path) -> String {
    let mut parts = relative.components().skip(1);
    let first = parts
        .next()
        .expect("a file under src/")
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    first.trim_end_matches(".rs").to_owned()
}

/// The lines of a file before its test module, numbered from 1.
fn production_lines(text: &str) -> Vec<(usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let next = lines.get(i + 1).map_or("", |l| l.trim());
        if line.trim() == "#[cfg(test)]" && next.starts_with("mod tests") {
            break;
        }
        out.push((i + 1, *line));
    }
    out
}

/// The top-level modules a line names as `crate::x` or in `use crate::{x, y}`.
fn named_modules(line: &str) -> BTreeSet<String> {
    let code = line.split("//").next().unwrap_or_default();
    let mut named = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            for item in group.split('}').next().unwrap_or_default().split(',') {
                let name = item.trim().split("::").next().unwrap_or_default();
                if !name.is_empty() {
                    named.insert(name.to_owned());
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                named.insert(name);
            }
        }
    }
    named
}

fn sources() -> Vec<(String, String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let relative = path.strip_prefix(root).expect("under the root").to_owned();
            let text = std::fs::read_to_string(&path).expect("read a source file");
            (
                relative.to_string_lossy().into_owned(),
                module_of(&relative),
                text,
            )
        })
        .filter(|(relative, _, _)| !TEST_ONLY.contains(&relative.as_str()))
        .collect()
}

#[test]
fn lower_layers_never_name_higher_ones() {
    let mut violations = Vec::new();
    for (file, module, text) in sources() {
        let Some((_, allowed)) = RULES.iter().find(|(name, _)| *name == module) else {
            continue;
        };
        for (number, line) in production_lines(&text) {
            for named in named_modules(line) {
                if named != module && !allowed.contains(&named.as_str()) {
                    violations.push(format!("{file}:{number}: {module} names crate::{named}"));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "layer violations:\n{}",
        violations.join("\n")
    );
}

#[test]
fn only_the_core_reads_and_writes_agents_in_the_store() {
    let mut violations = Vec::new();
    for (file, module, text) in sources() {
        if AGENT_OWNERS.contains(&module.as_str()) {
            continue;
        }
        for (number, line) in production_lines(&text) {
            for method in AGENT_METHODS {
                if line.contains(method) {
                    violations.push(format!("{file}:{number}: calls {method}…) directly"));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "agents are read and written only through `Registry`:\n{}",
        violations.join("\n")
    );
}

#[test]
fn only_wire_types_of_api_are_named_outside_it() {
    let mut violations = Vec::new();
    for (file, module, text) in sources() {
        if ["api", "router", "openapi", "lib"].contains(&module.as_str()) {
            continue;
        }
        for (number, line) in production_lines(&text) {
            let code = line.split("//").next().unwrap_or_default();
            for (at, _) in code.match_indices("crate::api::") {
                if !code[at..].starts_with("crate::api::wire") {
                    violations.push(format!("{file}:{number}: calls into api"));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "outside api/, only its wire types may be named:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_checks_see_what_they_look_for() {
    // The scanner itself: a check that can never fail is worse than none.
    assert_eq!(
        named_modules("use crate::api::wire::{AgentPage}; // crate::web"),
        BTreeSet::from(["api".to_owned()])
    );
    assert_eq!(
        named_modules("use crate::{a2a, error::ApiError, web};"),
        BTreeSet::from(["a2a".to_owned(), "error".to_owned(), "web".to_owned()])
    );
    assert_eq!(module_of(Path::new("src/search/text.rs")), "search");
    assert_eq!(module_of(Path::new("src/registry.rs")), "registry");
    let lines = production_lines("a\n#[cfg(test)]\nmod tests {\nb\n}");
    assert_eq!(lines, vec![(1, "a")]);
    assert!(
        sources()
            .iter()
            .any(|(file, module, _)| file.ends_with("registry.rs") && module == "registry")
    );
}

/// The application state is built from the modules it holds, so none of them may reach back to
/// it: `state` is in no cycle of top-level modules (the handlers that take `AppState` sit
/// above it, and what it holds below).
#[test]
fn the_application_state_is_in_no_module_cycle() {
    let mut names: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    for (_, module, text) in sources() {
        let named = names.entry(module.clone()).or_default();
        for (_, line) in production_lines(&text) {
            named.extend(
                named_modules(line)
                    .into_iter()
                    .filter(|name| *name != module),
            );
        }
    }
    // Every module `state` reaches, and the path it took.
    let mut reached: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    let mut queue = vec![vec!["state".to_owned()]];
    while let Some(path) = queue.pop() {
        let last = path.last().expect("a path").clone();
        for next in names.get(&last).into_iter().flatten() {
            if next == "state" {
                panic!("state reaches itself: {} → state", path.join(" → "));
            }
            if !reached.contains_key(next) {
                let mut longer = path.clone();
                longer.push(next.clone());
                reached.insert(next.clone(), longer.clone());
                queue.push(longer);
            }
        }
    }
    assert!(reached.contains_key("registry"), "{reached:?}");
}
