#!/usr/bin/env bash
# Fails when `zkw` as `cargo install --path cli` builds it (zkwire-cli's default features)
# would need more than a C compiler: bindgen and clang-sys (libclang), or the GSS-API binding
# (libgssapi: MIT Kerberos' headers). Kerberos is the CLI's `kerberos` feature, off by default.
#
# `cargo tree -p zkwire-cli` resolves features for that package alone, as `cargo install` does
# (no other workspace member's features unified in); `-e normal,build` leaves the dev-dependencies
# out of the feature resolution too, and `--target all` counts every platform's dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}

# Crates that need libclang, or a system library's headers, to build.
FORBIDDEN='^(bindgen|clang-sys|libgssapi|libgssapi-sys|.*krb5.*)$'

packages() {
    # `{p}` is "name vX.Y.Z (source)": the package's name as crates.io spells it.
    $CARGO tree -q -p zkwire-cli -e normal,build --target all --prefix none --format '{p}' "$@" \
        | awk '{ print $1 }' | sort -u
}

default=$(packages)
if [ -z "$default" ]; then
    echo "check-default-build: cargo tree listed nothing for zkwire-cli" >&2
    exit 1
fi
bad=$(grep -E "$FORBIDDEN" <<<"$default" || true)
if [ -n "$bad" ]; then
    echo "check-default-build: zkw's default build pulls in what needs libclang or libkrb5-dev:" >&2
    sed 's/^/  /' <<<"$bad" >&2
    for crate in $bad; do
        $CARGO tree -q -p zkwire-cli -e normal,build,features --target all -i "$crate" >&2 || true
    done
    echo "(Kerberos belongs behind zkwire-cli's \`kerberos\` feature.)" >&2
    exit 1
fi

# The check must be able to fail: with the feature on, the binding is there.
if ! packages --features kerberos | grep -x libgssapi >/dev/null; then
    echo "check-default-build: no libgssapi even with \`--features kerberos\`: stale check?" >&2
    exit 1
fi
echo "check-default-build: zkw's default build needs neither libclang nor libkrb5-dev"

# The shipped binary uses the public API alone: no `unstable` internals of zkwire (the CLI's
# tests turn them on for themselves, as dev-dependencies, which `-e normal,build` leaves out).
if $CARGO tree -q -p zkwire-cli -e normal,build,features --target all | grep -q 'feature "unstable"'; then
    echo "check-default-build: zkw's build turns on zkwire's \`unstable\` feature:" >&2
    $CARGO tree -q -p zkwire-cli -e normal,build,features --target all -i zkwire >&2 || true
    exit 1
fi
echo "check-default-build: zkw's build uses no \`unstable\` internals"

# The README quotes the size of a cold `cargo install --path cli`: it must stay the size of the
# default build's dependency tree (re-time the install when it changes).
quoted=$(sed -n 's/.*a cold install took [^,]*, \([0-9][0-9]*\) crates.*/\1/p' README.md)
# (this machine's platform only, as `cargo install` builds it)
actual=$($CARGO tree -q -p zkwire-cli -e normal,build --prefix none --format '{p}' \
    | awk '{ print $1 }' | sort -u | wc -l)
if [ "$quoted" != "$actual" ]; then
    echo "check-default-build: the README says a cold install builds ${quoted:-?} crates;" \
        "zkw's default build has $actual: re-time \`cargo install --path cli\` and update it" >&2
    exit 1
fi
echo "check-default-build: the README's crate count ($actual) is zkw's default build's"
