//! The repository describes itself truthfully: every crate's module map names every module the
//! crate declares, every repository path the docs mention exists, and the docs link into one
//! whole (every page reachable from the README, every link and anchor resolving).
//!
//! These are lints, run as tests so `cargo test` keeps them: a new module without a line in its
//! crate's map, or a doc pointing at a file that was moved, fails here.

use hotlist_tests::markdown::{anchor_of, anchors};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The modules a Rust file declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`), except the
/// conventional `tests` module.
fn declared_modules(source: &str) -> Vec<String> {
    source
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub mod ")
                .or_else(|| line.strip_prefix("pub(crate) mod "))
                .or_else(|| line.strip_prefix("mod "))?;
            let name = rest.strip_suffix(';')?.trim();
            (name != "tests" && name.chars().all(|c| c.is_alphanumeric() || c == '_')).then(|| name.to_string())
        })
        .collect()
}

/// The crate-level doc comment (`//!` lines).
fn crate_doc(source: &str) -> String {
    source
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every crate's `lib.rs` opens with a module map naming each module it declares (as
/// `` [`name`] `` or `` `name` ``), so a newcomer reading it sees the whole crate.
#[test]
fn every_crate_module_map_names_every_module() {
    let libs = [
        "operators/src/lib.rs",
        "sinks/src/lib.rs",
        "dataflow/src/lib.rs",
        "server/src/lib.rs",
        "cli/src/lib.rs",
        "tests/lib.rs",
    ];
    let mut missing = Vec::new();
    for lib in libs {
        let source = read(&root().join(lib));
        let doc = crate_doc(&source);
        assert!(doc.contains("- "), "{lib}: the crate doc has no module map");
        let modules = declared_modules(&source);
        assert!(!modules.is_empty(), "{lib}: no modules found (is the parser right?)");
        for m in modules {
            if !doc.contains(&format!("`{m}`")) {
                missing.push(format!("{lib}: module `{m}` is not in the module map"));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// Expands one level of `{a,b}` braces: `x/{a,b}.rs` → `x/a.rs`, `x/b.rs`.
fn expand_braces(path: &str) -> Vec<String> {
    match (path.find('{'), path.find('}')) {
        (Some(open), Some(close)) if open < close => {
            let (head, tail) = (&path[..open], &path[close + 1..]);
            path[open + 1..close]
                .split(',')
                .flat_map(|alt| expand_braces(&format!("{head}{}{tail}", alt.trim())))
                .collect()
        }
        _ => vec![path.to_string()],
    }
}

/// The repository paths a Markdown text mentions in backticks: tokens starting with one of the
/// workspace's top-level folders, with a trailing `:line` or `/` removed.
fn mentioned_paths(text: &str) -> BTreeSet<String> {
    const TOP: [&str; 9] = [
        "operators/",
        "sinks/",
        "dataflow/",
        "server/",
        "cli/",
        "tests/",
        "scripts/",
        "configs/",
        "docs/",
    ];
    let mut out = BTreeSet::new();
    for (i, chunk) in text.split('`').enumerate() {
        // odd chunks are inside backticks
        if i % 2 == 0 || chunk.contains(char::is_whitespace) || !TOP.iter().any(|t| chunk.starts_with(t)) {
            continue;
        }
        let chunk = chunk.split(':').next().unwrap_or(chunk);
        for p in expand_braces(chunk) {
            out.insert(p.trim_end_matches('/').to_string());
        }
    }
    out
}

/// Every file or folder of the repository that README.md or a page in docs/ names in backticks
/// (the "where things live" table above all) exists.
#[test]
fn every_path_the_docs_name_exists() {
    let mut pages = vec![root().join("README.md")];
    for entry in std::fs::read_dir(root().join("docs")).expect("docs/ exists") {
        let path = entry.expect("docs entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    assert!(pages.len() >= 5, "README and the four docs pages: {pages:?}");
    let mut missing = Vec::new();
    let mut seen = 0;
    for page in &pages {
        for p in mentioned_paths(&read(page)) {
            seen += 1;
            // a glob in a path names files that need not exist (e.g. `events/*.jsonl`)
            if p.contains('*') || p.contains('<') {
                continue;
            }
            if !root().join(&p).exists() {
                missing.push(format!("{}: `{p}` does not exist", page.display()));
            }
        }
    }
    assert!(seen > 50, "only {seen} paths found: is the parser right?");
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn parsers_find_what_they_should() {
    assert_eq!(
        declared_modules("pub mod a;\nmod b;\n#[cfg(test)]\nmod tests;\npub(crate) mod c;\nmod d {"),
        ["a", "b", "c"]
    );
    let paths = mentioned_paths("see `sinks/src/{store,types}.rs` and `dataflow/src/run/` and `hotlist run` or `a/b`");
    assert_eq!(
        paths.into_iter().collect::<Vec<_>>(),
        ["dataflow/src/run", "sinks/src/store.rs", "sinks/src/types.rs"]
    );
}

/// The markdown links of a page: `(target, anchor)` for each `](target#anchor)` that is not a URL.
fn relative_links(text: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        }
        if in_code {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            let Some(end) = rest.find(')') else { break };
            let link = &rest[..end];
            rest = &rest[end..];
            if link.contains("://") || link.starts_with("mailto:") || link.contains(' ') {
                continue;
            }
            let (target, anchor) = match link.split_once('#') {
                Some((t, a)) => (t.to_string(), Some(a.to_string())),
                None => (link.to_string(), None),
            };
            out.push((target, anchor));
        }
    }
    out
}

/// The README is a front door, not the manual: at most 250 lines; every page in docs/ is linked
/// from it and from docs/architecture.md; every relative link of README and docs/ points at a
/// file that exists, and every `#anchor` at a heading of that page.
#[test]
fn the_docs_are_a_linked_whole() {
    let readme = read(&root().join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines: keep it a front door (≤ 250), move reference to docs/"
    );
    let mut pages = vec![root().join("README.md")];
    let mut doc_names = Vec::new();
    for entry in std::fs::read_dir(root().join("docs")).expect("docs/ exists") {
        let path = entry.expect("docs entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            doc_names.push(path.file_name().expect("a file name").to_string_lossy().into_owned());
            pages.push(path);
        }
    }
    let architecture = read(&root().join("docs/architecture.md"));
    let mut problems = Vec::new();
    for name in &doc_names {
        if !readme.contains(&format!("](docs/{name}")) {
            problems.push(format!("README.md does not link docs/{name}"));
        }
        if name != "architecture.md" && !architecture.contains(&format!("]({name}")) {
            problems.push(format!("docs/architecture.md does not link {name}"));
        }
    }
    let mut links = 0;
    for page in &pages {
        let dir = page.parent().expect("a page's directory");
        let text = read(page);
        for (target, anchor) in relative_links(&text) {
            links += 1;
            let file = if target.is_empty() {
                page.clone()
            } else {
                dir.join(&target)
            };
            if !file.exists() {
                problems.push(format!("{}: link to {target} which does not exist", page.display()));
                continue;
            }
            if let Some(anchor) = anchor {
                if file.extension().is_some_and(|e| e == "md") && !anchors(&read(&file)).contains(&anchor) {
                    problems.push(format!(
                        "{}: link to {target}#{anchor}: no such heading",
                        page.display()
                    ));
                }
            }
        }
    }
    assert!(links > 30, "only {links} links found: is the parser right?");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn link_parsers_find_what_they_should() {
    assert_eq!(
        relative_links("see [a](docs/a.md#x-y) and [b](https://x.org/y) and [c](#here)"),
        [
            ("docs/a.md".to_string(), Some("x-y".to_string())),
            (String::new(), Some("here".to_string()))
        ]
    );
    assert_eq!(
        anchor_of(" Starting over: --from-scratch"),
        "starting-over---from-scratch"
    );
    assert_eq!(
        anchor_of("Field mapping (`[source.format]`)"),
        "field-mapping-sourceformat"
    );
}
