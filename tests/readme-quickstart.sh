#!/bin/sh
# Builds the README's "Use it" section as a new user would: its Cargo.toml lines and its
# quick start, in a scratch crate that depends on this checkout by path. Fails if either
# block is missing, or if the program does not compile.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
scratch="$root/target/readme-quickstart"
rm -rf "$scratch"
mkdir -p "$scratch/src"

# The first ```toml block and the ```rust block after the quick-start marker.
awk '/^```toml$/ && !done { grab = 1; next } grab && /^```$/ { grab = 0; done = 1 } grab' \
    "$root/README.md" > "$scratch/deps.toml"
awk '/^<!-- quick start:/ { seen = 1; next } seen && /^```rust/ { grab = 1; next }
     grab && /^```$/ { exit } grab' "$root/README.md" > "$scratch/src/main.rs"
[ -s "$scratch/deps.toml" ] || { echo "README: no \`\`\`toml block" >&2; exit 1; }
[ -s "$scratch/src/main.rs" ] || { echo "README: no quick start after its marker" >&2; exit 1; }
grep -q '^\[dependencies\]' "$scratch/deps.toml" || { echo "README: no [dependencies]" >&2; exit 1; }

# The README points at a checkout in ../zkwire; here that checkout is $root.
{
    printf '[package]\nname = "readme-quickstart"\nversion = "0.0.0"\nedition = "2021"\n'
    printf 'publish = false\n\n'
    sed "s#\"\.\./zkwire/#\"$root/#g" "$scratch/deps.toml"
    # Not a member of the workspace it sits under.
    printf '\n[workspace]\n'
} > "$scratch/Cargo.toml"
# The workspace's versions, so that the build reuses what `make test` built already.
cp "$root/Cargo.lock" "$scratch/Cargo.lock"
CARGO_TARGET_DIR="$root/target" cargo build -q --manifest-path "$scratch/Cargo.toml"
echo "README quick start: builds against this checkout ($(wc -l < "$scratch/src/main.rs") lines)"
