//! Replays the committed fuzz inputs through the fuzz entry points, on stable, in `cargo test`.
//!
//! Every file of `fuzz/seeds/<target>/` (the seed corpus) and `fuzz/regressions/<target>/`
//! (minimized inputs that once found a bug) goes through `zkwire::fuzzing::<target>`, exactly
//! as the cargo-fuzz target would run it. With `ZKWIRE_FUZZ_REPLAY_ALL=1` the local, uncommitted
//! `fuzz/corpus/<target>/` and `fuzz/artifacts/<target>/` are replayed too.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// Runs `target` on every input of its directories; returns how many ran.
fn replay(target: &str, run: fn(&[u8])) -> usize {
    let mut dirs = vec!["seeds", "regressions"];
    if std::env::var_os("ZKWIRE_FUZZ_REPLAY_ALL").is_some() {
        dirs.extend(["corpus", "artifacts"]);
    }
    let mut files: Vec<PathBuf> = dirs
        .iter()
        .filter_map(|dir| fs::read_dir(fuzz_dir().join(dir).join(target)).ok())
        .flatten()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    for path in &files {
        let data = fs::read(path).unwrap();
        if let Err(panic) = panic::catch_unwind(AssertUnwindSafe(|| run(&data))) {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            panic!("{target} failed on {}: {message}", path.display());
        }
    }
    files.len()
}

/// `{target}_inputs`: replays `target`'s inputs, at least five of them.
macro_rules! replay_tests {
    ($($test:ident: $target:ident),* $(,)?) => {$(
        #[test]
        fn $test() {
            let target = stringify!($target);
            let n = replay(target, zkwire::fuzzing::$target);
            assert!(n >= 5, "only {n} {target} inputs: is fuzz/seeds in place?");
        }
    )*};
}

replay_tests! {
    frame_decoder_inputs: frame_decoder,
    decode_reply_inputs: decode_reply,
    roundtrip_inputs: roundtrip,
    session_inputs: session,
}

/// The committed seeds are the ones `zkwire::fuzzing::seeds` builds from the golden fixtures
/// and the selector tables (the table of operations among them), so a seed's selector byte
/// still names the record or op it was made for. `ZKWIRE_WRITE_SEEDS=1` rewrites them. Seeds
/// not built there (hand-made session scripts) are only replayed.
#[test]
fn seeds_are_generated_from_the_tables() {
    let fixtures = fuzz_dir().join("../tests/golden/fixtures.txt");
    let fixtures = fs::read_to_string(fixtures).unwrap();
    let write = std::env::var_os("ZKWIRE_WRITE_SEEDS").is_some();
    let mut stale = Vec::new();
    for seed in zkwire::fuzzing::seeds(&fixtures) {
        let path = fuzz_dir().join("seeds").join(seed.target).join(&seed.name);
        if fs::read(&path).ok().as_deref() == Some(&seed.data[..]) {
            continue;
        }
        if write {
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, &seed.data).unwrap();
        } else {
            stale.push(path);
        }
    }
    assert!(
        stale.is_empty(),
        "stale seeds (ZKWIRE_WRITE_SEEDS=1 rewrites them): {stale:?}"
    );
}
