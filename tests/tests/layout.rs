//! ARCHITECTURE.md stays true to the tree: every repository path it names in backticks
//! (`client/src/driver/registry.rs`, `recipes/tests/`...) exists, every file name it gives is
//! such a path (written from the root), and every file it links to exists.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::path::Path;

/// The top-level folders of the repository: a backticked word starting with one of them is a
/// path.
const ROOTS: [&str; 11] = [
    "bench/", "cli/", "client/", "docs/", "fuzz/", "recipes/", "sandbox/", "soak/", "tests/",
    ".ci/", "Makefile",
];

/// Whether `word` names a file by its extension (`foo.rs`, `docs/lease.md`).
fn is_file_name(word: &str) -> bool {
    [".rs", ".md", ".java", ".py", ".sh", ".toml"]
        .iter()
        .any(|ext| word.ends_with(ext))
}

/// The words of `text` between backticks.
fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The targets of the Markdown links of `text` that are not URLs or anchors.
fn link_targets(text: &str) -> Vec<&str> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(|target| target.split('#').next().unwrap_or(""))
        .filter(|target| !target.is_empty() && !target.contains("://"))
        .collect()
}

#[test]
fn every_path_architecture_md_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let paths: Vec<&str> = backticked(&text)
        .into_iter()
        // A file name (`x.rs`) alone counts too: it must be written from the root.
        .filter(|word| ROOTS.iter().any(|r| word.starts_with(r)) || is_file_name(word))
        .filter(|word| !word.contains(' '))
        .chain(link_targets(&text))
        .collect();
    assert!(paths.len() > 40, "the paths of ARCHITECTURE.md: {paths:?}");
    let missing: Vec<&&str> = paths
        .iter()
        .filter(|path| !root.join(path).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist: {missing:?}"
    );
}
