#!/usr/bin/env bash
# Runs every fuzz target (or the ones named) for SECONDS each with AddressSanitizer and a
# 64 MiB malloc limit, installing cargo-fuzz first if it is missing.
#
#   fuzz/run.sh [SECONDS] [TARGET...]      e.g. fuzz/run.sh 600        (10 minutes each)
#                                               fuzz/run.sh 20 session  (a smoke run)
#
# AddressSanitizer needs nightly flags; RUSTC_BOOTSTRAP=1 allows them on the stable toolchain.
# The corpus grows in fuzz/corpus/<target> (not committed); the committed seeds and
# regressions are read as well. A crash fails the script and leaves its input in
# fuzz/artifacts/<target>: add it to fuzz/regressions/<target> once fixed.
set -euo pipefail
cd "$(dirname "$0")"

seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(frame_decoder decode_reply roundtrip session)
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz/run.sh: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi

for target in "${targets[@]}"; do
    mkdir -p "corpus/$target"
    inputs=("corpus/$target" "seeds/$target")
    if [ -d "regressions/$target" ]; then
        inputs+=("regressions/$target")
    fi
    echo "fuzz/run.sh: $target for ${seconds}s (AddressSanitizer, -malloc_limit_mb=64)" >&2
    RUSTC_BOOTSTRAP=1 cargo fuzz run "$target" "${inputs[@]}" -- \
        -max_total_time="$seconds" -malloc_limit_mb=64 -rss_limit_mb=1024 -print_final_stats=1
done
