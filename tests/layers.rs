//! The layers of `src/` point one way. This reads the source (not the compiled crate) and fails
//! with the offending file and line when a lower layer names a higher one, when the transports
//! name each other, when any top-level modules name each other in a cycle, or when code outside
//! the core reads or writes agents in the store directly.
//!
//! ```text
//! lib, main, cli, state, router, server    the composition: builds and wires everything below
//!   └─ api, a2a, mcp, playground,          the transports: none names another
//!      openapi, web
//!        └─ wire                           what every transport shares: names no transport
//!             └─ hosted, ard, auth, …      the rest of the edge (names no transport either)
//!                  └─ follow, registry     the application core: every agent read and write
//!                       └─ store, search   persistence; the index and the one search function
//!                            └─ embed      the embedders (text → vector), beside search: names
//!                                          none of it
//!                                 └─ timestamp, task, audit, domain, config, models    the base
//! ```
//!
//! Inside `search`, a search is a one-way pipeline (analyse → retrieve → fusion → page): a
//! stage names only the stages before it and the shared types beneath them all (`hit`), and
//! the indexes beneath the pipeline name no stage but the query's analysis.
//!
//! Test modules (`#[cfg(test)] mod tests { … }` at the end of a file, and files declared under
//! `#[cfg(test)]`, such as the store's conformance suite) may reach further.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules of the base and core layers, and what each may name.
const RULES: &[(&str, &[&str])] = &[
    ("timestamp", &[]),
    ("task", &[]),
    // The audit log's request context (who writes, from where): the store reads it.
    ("audit", &[]),
    // Model files from a package index: names nothing of the registry.
    ("models", &[]),
    ("domain", &["timestamp"]),
    ("config", &["domain", "models"]),
    // The embedders: search embeds with them, and they name nothing of search.
    ("embed", &["config", "models"]),
    ("store", &["timestamp", "task", "domain", "config", "audit"]),
    (
        "search",
        &[
            "timestamp",
            "task",
            "domain",
            "config",
            "store",
            "models",
            "embed",
        ],
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
            "embed",
        ],
    ),
];

/// The composition: it builds and wires everything, so it alone may name several transports.
const COMPOSITION: &[&str] = &["lib", "main", "cli", "state", "router", "server"];

/// The transports: each serves the registry its own way, and none names another. What two of
/// them need lives beneath them, in `SHARED`.
const TRANSPORTS: &[&str] = &["api", "a2a", "mcp", "playground", "openapi", "web"];

/// What every transport shares (wire types, cards, the OpenAPI schema markers): below them all.
const SHARED: &str = "wire";

/// Inside `search`, a search is a one-way pipeline: these stages (files of `src/search/`), in
/// order, each naming only the stages before it. `mod.rs` composes them.
const SEARCH_STAGES: &[&str] = &["analyse", "retrieve", "fusion", "page"];

/// What every stage shares, beneath them all (`Scored`, `Cursor`, `Tally`, …): names no stage.
const SEARCH_SHARED: &str = "hit";

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

/// The lines of a file before its test module, numbered from 1. A test module declared in a
/// file of its own (`#[cfg(test)] mod tests;`) is skipped, not taken for the end of the file.
fn production_lines(text: &str) -> Vec<(usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut skip = false;
    for (i, line) in lines.iter().enumerate() {
        if std::mem::take(&mut skip) {
            continue;
        }
        let next = lines.get(i + 1).map_or("", |l| l.trim());
        if line.trim() == "#[cfg(test)]" && declared_module(next).is_some() {
            skip = true;
            continue;
        }
        if line.trim() == "#[cfg(test)]" && next.starts_with("mod tests") {
            break;
        }
        out.push((i + 1, *line));
    }
    out
}

/// `name` when a line declares a module kept in a file of its own: `mod name;`, `pub mod name;`.
fn declared_module(line: &str) -> Option<&str> {
    let rest = line.trim().strip_prefix("pub ").unwrap_or(line.trim());
    let name = rest.strip_prefix("mod ")?.strip_suffix(';')?.trim();
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .then_some(name)
}

/// The files (relative to the root) of the modules a file declares under `#[cfg(test)]`:
/// `src/store/mod.rs` with `#[cfg(test)] mod conformance;` → `src/store/conformance.rs`.
fn test_only_files(relative: &Path, text: &str) -> Vec<PathBuf> {
    let lines: Vec<&str> = text.lines().collect();
    let dir = match relative.file_stem().and_then(|stem| stem.to_str()) {
        Some("mod" | "lib" | "main") => relative.parent().map(Path::to_path_buf),
        Some(stem) => relative.parent().map(|parent| parent.join(stem)),
        None => None,
    }
    .unwrap_or_default();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let next = lines.get(i + 1).copied().unwrap_or_default();
        if line.trim() == "#[cfg(test)]"
            && let Some(name) = declared_module(next)
        {
            out.push(dir.join(format!("{name}.rs")));
            out.push(dir.join(name).join("mod.rs"));
        }
    }
    out
}

/// The top-level modules a line names as `crate::x` or in `use crate::{x, y}`.
fn named_modules(line: &str) -> BTreeSet<String> {
    names_after(line, "crate::")
}

/// The names a line gives after `prefix` (`crate::x`, `super::x`, or a group
/// `crate::{x, y::z}`): `x`, `y`. A prefix that is the tail of a longer path is not one.
fn names_after(line: &str, prefix: &str) -> BTreeSet<String> {
    let code = line.split("//").next().unwrap_or_default();
    let mut named = BTreeSet::new();
    for (at, _) in code.match_indices(prefix) {
        if code[..at].ends_with(':') {
            continue;
        }
        let rest = &code[at + prefix.len()..];
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

/// The part of `search` a file belongs to (`src/search/text/typos.rs` → `text`), `mod` for
/// `src/search/mod.rs`, and how many `super::` reach `search` from it; `None` outside search.
fn search_part(relative: &Path) -> Option<(String, usize)> {
    let inside = relative.strip_prefix("src/search").ok()?;
    let mut path: Vec<String> = inside
        .components()
        .map(|part| {
            part.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_owned()
        })
        .collect();
    if path.last().is_some_and(|last| last == "mod") && path.len() > 1 {
        path.pop();
    }
    let first = path.first()?.clone();
    Some((first, path.len()))
}

/// The parts of `search` a line of a file `depth` modules below `search` names: through
/// `crate::search::` or as many `super::` as reach `search`.
fn search_names(line: &str, depth: usize) -> BTreeSet<String> {
    let mut named = names_after(line, "crate::search::");
    if depth > 0 {
        named.extend(names_after(line, &"super::".repeat(depth)));
    }
    named
}

/// Why `part` of search may not name `named`, another part, under the pipeline rule, if it
/// may not.
fn stage_rule(part: &str, named: &str) -> Option<&'static str> {
    let stage = |name: &str| SEARCH_STAGES.iter().position(|stage| *stage == name);
    let named_stage = stage(named)?;
    if part == named || part == "mod" {
        return None;
    }
    match stage(part) {
        Some(at) if named_stage > at => Some("a stage names a later stage"),
        Some(_) => None,
        None if part == SEARCH_SHARED => Some("the shared types name a stage"),
        // The indexes and the rest beneath the pipeline may apply the query's analysis.
        None if named_stage > 0 => Some("a part beneath the pipeline names a stage"),
        None => None,
    }
}

/// Every production file under `src/`: (path relative to the root, its top-level module, text).
fn sources() -> Vec<(String, String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    let all: Vec<(PathBuf, String)> = files
        .into_iter()
        .map(|path| {
            let relative = path.strip_prefix(root).expect("under the root").to_owned();
            let text = std::fs::read_to_string(&path).expect("read a source file");
            (relative, text)
        })
        .collect();
    let test_only: BTreeSet<PathBuf> = all
        .iter()
        .flat_map(|(relative, text)| test_only_files(relative, text))
        .collect();
    all.into_iter()
        .filter(|(relative, _)| {
            !test_only
                .iter()
                .any(|test| relative == test || relative.starts_with(test.with_extension("")))
        })
        .map(|(relative, text)| {
            let module = module_of(&relative);
            (relative.to_string_lossy().into_owned(), module, text)
        })
        .collect()
}

/// In the crate root, which refers to its modules without `crate::`: the top-level modules a
/// line names as `x::…` (not as the tail of a longer path such as `std::x::`, nor a method).
fn root_names(line: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let code = line.split("//").next().unwrap_or_default();
    let mut named = BTreeSet::new();
    for module in modules {
        for (at, _) in code.match_indices(&format!("{module}::")) {
            let before = code[..at].chars().last();
            if !before.is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '.')) {
                named.insert(module.clone());
            }
        }
    }
    named
}

/// The graph of top-level modules: each module, the modules its production code names, and the
/// first line naming each. A name that is no module (`crate::App`) is an item of the crate root,
/// `lib`, whose own lines name modules without `crate::`.
fn module_graph() -> BTreeMap<String, BTreeMap<String, String>> {
    let sources = sources();
    let modules: BTreeSet<String> = sources.iter().map(|(_, m, _)| m.clone()).collect();
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (file, module, text) in &sources {
        let edges = graph.entry(module.clone()).or_default();
        for (number, line) in production_lines(text) {
            let mut named: BTreeSet<String> = named_modules(line)
                .into_iter()
                .map(|name| {
                    if modules.contains(&name) {
                        name
                    } else {
                        "lib".to_owned()
                    }
                })
                .collect();
            if module == "lib" {
                named.extend(root_names(line, &modules));
            }
            for name in named {
                if name != *module {
                    edges
                        .entry(name)
                        .or_insert_with(|| format!("{file}:{number}"));
                }
            }
        }
    }
    graph
}

/// The cycles a depth-first walk from each module in turn meets, each as the path that closes
/// it (`a → b → a`): at least one whenever the graph has any, none when it has none.
fn cycles<T>(graph: &BTreeMap<String, BTreeMap<String, T>>) -> Vec<Vec<String>> {
    fn walk<T>(
        node: &str,
        graph: &BTreeMap<String, BTreeMap<String, T>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        found: &mut Vec<Vec<String>>,
    ) {
        if let Some(at) = path.iter().position(|seen| seen == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_owned());
            found.push(cycle);
            return;
        }
        if done.contains(node) {
            return;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flat_map(BTreeMap::keys) {
            walk(next, graph, path, done, found);
        }
        path.pop();
        done.insert(node.to_owned());
    }
    let mut found = Vec::new();
    let mut done = BTreeSet::new();
    for start in graph.keys() {
        walk(start, graph, &mut Vec::new(), &mut done, &mut found);
    }
    found
}

/// Why `module` may not name `named` under the transport rule, if it may not.
fn transport_rule(module: &str, named: &str) -> Option<&'static str> {
    if module == named || COMPOSITION.contains(&module) {
        return None;
    }
    if TRANSPORTS.contains(&named) {
        return Some(if TRANSPORTS.contains(&module) {
            "a transport names another transport (move what both need into the shared layer)"
        } else if module == SHARED {
            "the shared layer names a transport"
        } else {
            "a module below the transports names one"
        });
    }
    if module == SHARED && COMPOSITION.contains(&named) {
        return Some("the shared layer names the composition");
    }
    None
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
fn transports_never_name_each_other_and_nothing_below_names_them() {
    let mut violations = Vec::new();
    for (file, module, text) in sources() {
        for (number, line) in production_lines(&text) {
            for named in named_modules(line) {
                if let Some(why) = transport_rule(&module, &named) {
                    violations.push(format!(
                        "{file}:{number}: {module} names crate::{named}: {why}"
                    ));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "only the composition ({}) names the transports ({}):\n{}",
        COMPOSITION.join(", "),
        TRANSPORTS.join(", "),
        violations.join("\n")
    );
}

/// No two top-level modules reach each other, whatever the path: a cycle means neither can be
/// understood, tested or changed without the other, and the layers no longer point one way.
#[test]
fn no_top_level_modules_name_each_other_in_a_cycle() {
    let graph = module_graph();
    let found = cycles(&graph);
    let report: Vec<String> = found
        .iter()
        .map(|cycle| {
            let arrows: Vec<String> = cycle
                .windows(2)
                .map(|pair| {
                    format!(
                        "  {} → {} ({})",
                        pair[0], pair[1], graph[&pair[0]][&pair[1]]
                    )
                })
                .collect();
            format!("{}\n{}", cycle.join(" → "), arrows.join("\n"))
        })
        .collect();
    assert!(report.is_empty(), "module cycles:\n{}", report.join("\n"));
}

/// A search runs analyse → retrieve → fusion → page, and the code points the same way: a
/// stage names the stages before it and the shared types, never one after it.
#[test]
fn search_stages_name_only_the_stages_before_them() {
    let mut violations = Vec::new();
    for (file, _, text) in sources() {
        let Some((part, depth)) = search_part(Path::new(&file)) else {
            continue;
        };
        for (number, line) in production_lines(&text) {
            for named in search_names(line, depth) {
                if let Some(why) = stage_rule(&part, &named) {
                    violations.push(format!("{file}:{number}: {part} names {named}: {why}"));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "the search pipeline runs {}:\n{}",
        SEARCH_STAGES.join(" → "),
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
    // A test module in a file of its own is skipped, and what follows it still read.
    let lines = production_lines("a\n#[cfg(test)]\nmod tests;\nuse crate::b;");
    assert_eq!(lines, vec![(1, "a"), (4, "use crate::b;")]);
    assert_eq!(
        test_only_files(
            Path::new("src/store/mod.rs"),
            "#[cfg(test)]\nmod conformance;"
        ),
        vec![
            PathBuf::from("src/store/conformance.rs"),
            PathBuf::from("src/store/conformance/mod.rs")
        ]
    );
    assert_eq!(
        test_only_files(Path::new("src/models.rs"), "#[cfg(test)]\nmod tests;")[0],
        PathBuf::from("src/models/tests.rs")
    );
    let sources = sources();
    assert!(
        sources
            .iter()
            .any(|(file, module, _)| file.ends_with("registry.rs") && module == "registry")
    );
    assert!(
        !sources.iter().any(
            |(file, _, _)| file.ends_with("conformance.rs") || file.ends_with("probe/tests.rs")
        ),
        "files declared under #[cfg(test)] are not production code"
    );

    // The crate root names its modules without `crate::`.
    let modules = BTreeSet::from(["store".to_owned(), "search".to_owned()]);
    assert_eq!(
        root_names(
            "let s = store::open(&c).await?; x.search::<T>(); std::search::y",
            &modules
        ),
        BTreeSet::from(["store".to_owned()])
    );

    // Cycles: found with their path, from whichever module they start; none in a tree.
    let graph = |edges: &[(&str, &str)]| {
        let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for (from, to) in edges {
            graph
                .entry((*from).to_owned())
                .or_default()
                .insert((*to).to_owned(), String::new());
        }
        graph
    };
    let path = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        cycles(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])),
        vec![path(&["a", "b", "c", "a"])]
    );
    assert_eq!(
        cycles(&graph(&[("x", "y"), ("y", "z"), ("z", "y")])),
        vec![path(&["y", "z", "y"])]
    );
    assert!(cycles(&graph(&[("a", "b"), ("a", "c"), ("b", "c"), ("c", "d")])).is_empty());

    // The transport rule: peers and anything below may not name a transport; the composition
    // may, and anyone may name the shared layer.
    assert!(transport_rule("mcp", "a2a").is_some());
    assert!(transport_rule("api", "playground").is_some());
    assert!(transport_rule("wire", "openapi").is_some());
    assert!(transport_rule("wire", "state").is_some());
    assert!(transport_rule("hosted", "api").is_some());
    assert!(transport_rule("router", "api").is_none());
    assert!(transport_rule("a2a", "wire").is_none());
    assert!(transport_rule("mcp", "mcp").is_none());

    // The search pipeline: parts found by path, names through `super::` at the right depth
    // and through `crate::search::`, and the rule in both directions.
    assert_eq!(
        search_part(Path::new("src/search/page.rs")),
        Some(("page".to_owned(), 1))
    );
    assert_eq!(
        search_part(Path::new("src/search/text/typos.rs")),
        Some(("text".to_owned(), 2))
    );
    assert_eq!(
        search_part(Path::new("src/search/vectors/mod.rs")),
        Some(("vectors".to_owned(), 1))
    );
    assert_eq!(
        search_part(Path::new("src/search/mod.rs")),
        Some(("mod".to_owned(), 1))
    );
    assert_eq!(search_part(Path::new("src/embed/mod.rs")), None);
    assert_eq!(
        search_names(
            "use super::fusion::{Fusion}; use super::{hit, page::Reach};",
            1
        ),
        BTreeSet::from(["fusion".to_owned(), "hit".to_owned(), "page".to_owned()])
    );
    assert_eq!(
        search_names("use super::super::analyse; use super::schema;", 2),
        BTreeSet::from(["analyse".to_owned()])
    );
    assert_eq!(
        search_names("crate::search::page::Hit // super::retrieve", 3),
        BTreeSet::from(["page".to_owned()])
    );
    assert!(stage_rule("retrieve", "page").is_some());
    assert!(stage_rule("analyse", "fusion").is_some());
    assert!(stage_rule("hit", "retrieve").is_some());
    assert!(stage_rule("text", "retrieve").is_some());
    assert!(stage_rule("page", "fusion").is_none());
    assert!(stage_rule("fusion", "hit").is_none());
    assert!(stage_rule("text", "analyse").is_none());
    assert!(stage_rule("mod", "page").is_none());
    for part in SEARCH_STAGES.iter().chain([&SEARCH_SHARED]) {
        let file = format!("src/search/{part}.rs");
        assert!(sources.iter().any(|(f, _, _)| *f == file), "no {file}");
    }
    let page = sources
        .iter()
        .find(|(file, _, _)| file == "src/search/page.rs")
        .map(|(_, _, text)| text.clone())
        .unwrap_or_default();
    let named: BTreeSet<String> = production_lines(&page)
        .into_iter()
        .flat_map(|(_, line)| search_names(line, 1))
        .collect();
    assert!(
        named.contains("fusion") && named.contains("retrieve"),
        "{named:?}"
    );

    // Every module the rules name exists, so renaming one cannot switch a rule off quietly.
    let modules: BTreeSet<&str> = sources.iter().map(|(_, m, _)| m.as_str()).collect();
    let named = RULES
        .iter()
        .flat_map(|(module, allowed)| std::iter::once(module).chain(allowed.iter()))
        .chain(COMPOSITION)
        .chain(TRANSPORTS)
        .chain([&SHARED]);
    for module in named {
        assert!(modules.contains(module), "no module {module} under src/");
    }

    // The graph of the real source has the edges it should.
    let real = module_graph();
    assert!(real["router"].contains_key("a2a"), "{:?}", real["router"]);
    assert!(real["a2a"].contains_key("wire"), "{:?}", real["a2a"]);
    assert!(real["lib"].contains_key("registry"), "{:?}", real["lib"]);
    assert!(real["cli"].contains_key("lib"), "{:?}", real["cli"]);
}
