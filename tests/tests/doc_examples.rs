//! Every public type and every public function or method of `zkwire` and `zkwire-recipes` has
//! an example in its documentation, and their documentation links resolve.
//!
//! The test documents both crates with `cargo doc` (into a directory of its own under the
//! target directory) and reads the HTML rustdoc renders. Rustdoc knows what is public: the
//! re-exports from private modules, `doc(hidden)` items, the internals behind the `unstable`
//! feature (off here, as users build the crate) and the methods macros generate, once per type
//! they are generated for. A scan of the sources would have to guess all of that.
//!
//! Examples: on each page of a struct, enum, union, type alias, trait or function, the item's
//! own documentation and that of every method of its inherent `impl` blocks (a trait's
//! required and provided methods on a trait's page) must hold a Rust code block that rustdoc
//! tests (`no_run` is fine; `ignore` and `compile_fail` are not examples). Trait
//! implementations (`Display::fmt`...) are not checked, nor are variants, fields, constants
//! and modules.
//!
//! Links: every page (modules' too), trait implementations left out (their documentation is
//! the trait's, often from another crate), must hold no link rustdoc rendered as text
//! (`[`zkwire::Error`]` whose target it resolved but could not place) and no link whose
//! address is a Rust path. The recipes are documented first, alone and with `--no-deps`, as
//! `cargo doc -p zkwire-recipes --no-deps` does: their links into zkwire must then go to
//! zkwire's `html_root_url` (docs.rs, for this version), zkwire's pages not being next to
//! them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The class of a rendered Rust code block: `<pre class="rust rust-example-rendered">`.
const EXAMPLE: &str = "rust-example-rendered";

/// The optional features of zkwire, whose items are documented (and checked) only with them.
const ZKWIRE_FEATURES: &str = "tls,tls-native-roots,sasl-digest,sasl-gssapi";

/// Where the recipes' pages link to zkwire's: zkwire's `html_root_url`, the version the
/// workspace builds (the crates share the workspace's version).
const ZKWIRE_DOCS: &str = concat!("https://docs.rs/zkwire/", env!("CARGO_PKG_VERSION"), "/");

/// What the pages of both crates say.
#[derive(Default)]
struct Report {
    /// Items checked, as `crate::module::Item` or `crate::module::Item::method`.
    checked: Vec<String>,
    /// Items without an example.
    missing: Vec<String>,
    /// Links that do not lead where they should: `page: what is wrong`.
    broken_links: Vec<String>,
    /// Links to zkwire's pages on docs.rs.
    zkwire_links: usize,
}

#[test]
fn every_public_item_has_an_example_and_every_link_resolves() {
    let doc = build_docs();
    let mut report = Report::default();
    for krate in ["zkwire", "zkwire_recipes"] {
        let mut pages = Vec::new();
        html_pages(&doc.join(krate), &mut pages);
        pages.sort();
        for page in pages {
            check_page(&doc, &page, &mut report);
        }
    }

    // Guards against a change of rustdoc's HTML that would make this test see nothing.
    for known in [
        "zkwire::Client",
        "zkwire::Client::create",
        "zkwire::path::join",
        "zkwire::Connect::connect",
        "zkwire_recipes::Mutex::lock",
        "zkwire_recipes::MutexGuard::release",
    ] {
        assert!(
            report.checked.iter().any(|item| item == known),
            "{known} was not found in the generated documentation: has rustdoc's HTML changed? \
             (checked {} items)",
            report.checked.len()
        );
    }

    let mut failures = String::new();
    if report.zkwire_links == 0 {
        failures += &format!(
            "the recipes' pages, documented without zkwire's, have no link to {ZKWIRE_DOCS}: \
             is `#![doc(html_root_url = \"{}\")]` missing from client/src/lib.rs, or its \
             version not the workspace's?\n",
            ZKWIRE_DOCS.trim_end_matches('/')
        );
    }
    if !report.missing.is_empty() {
        failures += &format!(
            "{} of {} public items have no example (a ```-block that rustdoc tests; `no_run` is \
             fine) in their documentation:\n",
            report.missing.len(),
            report.checked.len()
        );
        for item in &report.missing {
            failures += &format!("  {item}\n");
        }
    }
    if !report.broken_links.is_empty() {
        failures += "broken documentation links:\n";
        for link in &report.broken_links {
            failures += &format!("  {link}\n");
        }
    }
    assert!(failures.is_empty(), "\n{failures}");
}

/// Documents the recipes (alone, without their dependencies' pages), then zkwire with every
/// optional feature; returns the `doc` directory.
fn build_docs() -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("doc-examples");
    let doc = target.join("doc");
    // Pages of an earlier run would let the recipes' links to zkwire resolve locally.
    if doc.exists() {
        fs::remove_dir_all(&doc).unwrap();
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let features = format!("--features={ZKWIRE_FEATURES}");
    for args in [
        &["-p", "zkwire-recipes"][..],
        &["-p", "zkwire", features.as_str()][..],
    ] {
        let output = Command::new(env!("CARGO"))
            .current_dir(&workspace)
            .args(["doc", "--no-deps", "--quiet", "--target-dir"])
            .arg(&target)
            .args(args)
            .env("RUSTDOCFLAGS", "-D warnings")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "cargo doc {args:?} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    doc
}

/// The pages under `dir`, redirections left out.
fn html_pages(dir: &Path, pages: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            html_pages(&path, pages);
        } else if path.extension().is_some_and(|ext| ext == "html") {
            let html = fs::read_to_string(&path).unwrap();
            // Rustdoc writes a redirection where a re-exported item is defined.
            if !html.contains("http-equiv=\"refresh\"") {
                pages.push(path);
            }
        }
    }
}

/// Checks one page: the examples on an item's page, the links on every page.
fn check_page(doc: &Path, page: &Path, report: &mut Report) {
    let html = fs::read_to_string(page).unwrap();
    let file = page.file_name().unwrap().to_string_lossy();
    let kind = file.split('.').next().unwrap_or_default();
    let name = page_name(doc, page);

    if matches!(kind, "struct" | "enum" | "union" | "type" | "trait" | "fn") {
        check_examples(&html, &name, report);
    }

    // What this crate wrote: the page up to the trait implementations.
    let own = [
        "<h2 id=\"trait-implementations\"",
        "<h2 id=\"synthetic-implementations\"",
        "<h2 id=\"blanket-implementations\"",
    ]
    .iter()
    .filter_map(|heading| html.find(heading))
    .min()
    .map_or(html.as_str(), |end| &html[..end]);
    check_links(own, &name, report);
}

/// Checks that the item documented in `html` and the methods of its inherent impls (or, for
/// a trait, its required and provided methods) have an example.
fn check_examples(html: &str, name: &str, report: &mut Report) {
    report.checked.push(name.to_owned());
    let top = section(html, "<details class=\"toggle top-doc\"", "</details>");
    if !top.is_some_and(has_example) {
        report.missing.push(name.to_owned());
    }

    // On a type's page, the inherent impls: their list ends where the trait implementations
    // begin. On a trait's page, the required and provided methods, up to the implementors.
    const IMPLEMENTORS: &str = "<h2 id=\"implementors\"";
    let methods = section(html, "<div id=\"implementations-list\"", "<h2 ")
        .or_else(|| section(html, "<h2 id=\"required-methods\"", IMPLEMENTORS))
        .or_else(|| section(html, "<h2 id=\"provided-methods\"", IMPLEMENTORS))
        .unwrap_or_default();
    // Each part starts with a section's id: an impl block's, a method's, an associated
    // item's. A method's part holds its documentation, up to the next section.
    for part in methods.split("<section id=\"").skip(1) {
        let id = part.split('"').next().unwrap_or_default();
        let method = id
            .strip_prefix("method.")
            .or_else(|| id.strip_prefix("tymethod."));
        if let Some(method) = method {
            let method = format!("{name}::{method}");
            if !has_example(part) {
                report.missing.push(method.clone());
            }
            report.checked.push(method);
        }
    }
}

/// Whether `docs` hold a Rust code block that rustdoc tests as an example: rendered as
/// `EXAMPLE`, in an `example-wrap` that is not marked `ignore` (neither compiled nor run) or
/// `compile_fail` (an example of what does not compile).
fn has_example(docs: &str) -> bool {
    docs.match_indices(EXAMPLE).any(|(at, _)| {
        let before = &docs[..at];
        let wrap = before
            .rfind("<div class=\"example-wrap")
            .and_then(|w| before[w..].split('"').nth(1));
        wrap.is_some_and(|class| !class.contains("ignore") && !class.contains("compile_fail"))
    })
}

/// Records the links of `html` that do not lead where they should: intra-doc links rustdoc
/// left as text (`[<code>zkwire::Error</code>]`: resolved, but it had nowhere to link to),
/// links whose address is a Rust path (`[text](futures_core::Stream)` whose target it could
/// not place), and links to another version of zkwire's pages on docs.rs.
fn check_links(html: &str, page: &str, report: &mut Report) {
    for (at, _) in html.match_indices("[<code>") {
        let rest = &html[at + "[<code>".len()..];
        if let Some(end) = rest.find("</code>]") {
            let text = &rest[..end];
            if !text.contains('<') {
                let problem = format!("[`{text}`] is text, not a link");
                report.broken_links.push(format!("{page}: {problem}"));
            }
        }
    }
    for (at, _) in html.match_indices("href=\"") {
        let rest = &html[at + "href=\"".len()..];
        let target = rest.split('"').next().unwrap_or_default();
        if target.contains("::") && !target.contains('/') && !target.contains('#') {
            let problem = format!("a link to {target:?}");
            report.broken_links.push(format!("{page}: {problem}"));
        } else if target.starts_with(ZKWIRE_DOCS) {
            report.zkwire_links += 1;
        } else if target.starts_with("https://docs.rs/zkwire/") {
            let problem = format!("{target} is not in {ZKWIRE_DOCS}");
            report.broken_links.push(format!("{page}: {problem}"));
        }
    }
}

/// The text from `start` up to the next `end` (or the end of `html`), `None` without `start`.
fn section<'a>(html: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = html.find(start)?;
    let rest = &html[from + start.len()..];
    Some(rest.find(end).map_or(rest, |to| &rest[..to]))
}

/// `zkwire/error/enum.Error.html` is `zkwire::error::Error`, `zkwire/error/index.html`
/// `zkwire::error`.
fn page_name(doc: &Path, page: &Path) -> String {
    let relative = page.strip_prefix(doc).unwrap();
    let mut parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop().unwrap();
    match file.split('.').collect::<Vec<_>>()[..] {
        [_kind, item, "html"] => parts.push(item.to_owned()),
        ["index", "html"] => {}
        _ => parts.push(file.clone()),
    }
    parts.join("::")
}
