#!/bin/bash
# The figures README.md quotes, tied to where they come from (docs/figures/README.md says how
# to refresh them).
#
#   tests/readme-figures.sh --check
#       Fails when a README figure differs from its source: a count the code fixes (read from
#       the tests and fixtures), a count a test prints (the latest run, target/figures/), or a
#       record under docs/figures/ (an entry with no README figure, or a figure of a recorded
#       table with no entry, fails too). Measured values of the latest test run outside the
#       README's range are only a notice: `make test` never fails on noise.
#   tests/readme-figures.sh --update [LOG...]
#       Rewrites docs/figures/make-test.txt from the `FIGURE <name> <value>` lines of saved
#       test logs (a range over several values), then the README's figures from the records
#       and the code.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
readme=$root/README.md
records=$root/docs/figures
live=${CARGO_TARGET_DIR:-$root/target}/figures
# Records of `name value :: README text` entries; the other records are README blocks.
value_records="make-test.txt bench.txt"
mode=${1:-}
case $mode in
    --check | --update) shift ;;
    *) echo "usage: $0 --check | --update [LOG...]" >&2; exit 2 ;;
esac
[ "$mode" = --check ] && [ $# -gt 0 ] && { echo "$0: --check takes no log" >&2; exit 2; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# The value of the first `const NAME: TYPE = VALUE;` in FILE (underscores dropped).
const_of() {
    local v
    v=$(sed -n "s/^ *const $2: [A-Za-z0-9]* = \([0-9_]*\);.*/\1/p" "$root/$1" | head -n 1)
    v=$(echo "$v" | tr -d _)
    [ -n "$v" ] || { echo "$0: no \`const $2\` in $1" >&2; exit 1; }
    echo "$v"
}

# The default of zkwire-soak's flag whose field is NAME: the last `default_value` written
# since the field before it (the flag's clap attribute).
soak_default() {
    awk -v field="    pub(crate) $1:" 'index($0, field) == 1 { print value; exit }
        /^    pub\(crate\) / { value = "" }
        { v = $0; if (sub(/.*default_value(_t)? = "?/, "", v)) {
            sub(/[^0-9_.].*/, "", v); gsub(/_/, "", v); value = v } }' "$root/soak/src/args.rs"
}

# A count a test prints, from LOGs when updating, else from the latest run when that run is
# newer than the README and the test (else nothing: the check says so).
printed() {
    local name=$1 test=$2 v
    if [ "$mode" = --update ] && [ ${#logs[@]} -gt 0 ]; then
        v=$(grep -aho "FIGURE $name [0-9][0-9.]*" "${logs[@]}" | tail -n 1 | cut -d' ' -f3)
        [ -n "$v" ] && { echo "$v"; return; }
    fi
    if [ -f "$live/$name" ] && [ "$live/$name" -nt "$readme" ] &&
        [ "$live/$name" -nt "$root/$test" ]; then
        cat "$live/$name"
    else
        echo "readme-figures: notice: $name not compared (no run of $test since it or" \
            "README.md changed; $live/$name)" >&2
    fi
}

# One entry: origin, name, value, README text ({} is the value), tab-separated.
entry() { printf '%s\t%s\t%s\t%s\n' "$@"; }

# Counts the code fixes, as entries.
counts() {
    local per hostile trials leader=recipes/tests/leader.rs
    entry tests/golden/fixtures.txt golden.fixtures \
        "$(grep -vc '^#' "$root/tests/golden/fixtures.txt")" '`tests/golden/Golden.java` writes {}'
    hostile=$(printed hostile.cases tests/tests/hostile.rs)
    [ -z "$hostile" ] || entry 'the latest run of tests/tests/hostile.rs' hostile.cases "$hostile" \
        '(`tests/tests/hostile.rs`, {} cases'
    entry 'tests/tests/proxy_faults.rs N' m15.watches \
        "$(const_of tests/tests/proxy_faults.rs N)" 'Server restart with {} watches on'
    # Three recipes (one test each), PER_SIDE acquisitions on each of the two sides.
    per=$(const_of recipes/tests/interop.rs PER_SIDE)
    entry 'recipes/tests/interop.rs 3 × 2 × PER_SIDE' interop.curator $((6 * per)) \
        'on the same paths: {} mixed acquisitions'
    per=$(const_of recipes/tests/kazoo.rs PER_SIDE)
    entry 'recipes/tests/kazoo.rs 2 × PER_SIDE' interop.kazoo $((2 * per)) \
        '({} mixed acquisitions each'
    entry 'recipes/tests/mutex.rs SESSIONS' m18.sessions \
        "$(const_of recipes/tests/mutex.rs SESSIONS)" '{} sessions × '
    per=$(($(const_of recipes/tests/mutex.rs TASKS) * $(const_of recipes/tests/mutex.rs CYCLES)))
    entry 'recipes/tests/mutex.rs TASKS × CYCLES' m18.cycles "$per" ' sessions × {} mutex cycles'
    trials=$(sed -n 's/.*var("ZKWIRE_PARTITION_TRIALS", \([0-9]*\)).*/\1/p' \
        "$root/recipes/tests/partition.rs")
    entry 'recipes/tests/partition.rs ZKWIRE_PARTITION_TRIALS' partition.trials "$trials" \
        '`make test` runs {} seeded trials'
    entry 'cli/tests/partition.rs TRIALS' partition.cli_trials \
        "$(const_of cli/tests/partition.rs TRIALS)" '`make test` runs {} seeded trials'
    per=$(const_of $leader THREADS)
    entry "$leader THREADS" latch.threads "$per" '`LeaderLatch`: {} Curator threads'
    entry "$leader THREADS" latch.tasks "$per" 'Curator threads and {} zkwire tasks'
    entry "$leader 2 × THREADS × CYCLES" latch.terms $((2 * per * $(const_of $leader CYCLES))) \
        'zkwire tasks, {} terms on one path'
    entry "$leader KILLS" latch.kills "$(const_of $leader KILLS)" 'while {} zkwire'
    entry "$leader RUNS" election.passed "$(const_of $leader RUNS)" 'leader starts in {} of '
    entry "$leader RUNS" election.runs "$(const_of $leader RUNS)" ' of {} runs under'
    entry 'recipes/tests/cache.rs CHURN_OPS' cache.writes \
        "$(const_of recipes/tests/cache.rs CHURN_OPS)" 'over {} random writes'
    entry 'recipes/tests/cache.rs CUTS' cache.cuts \
        "$(const_of recipes/tests/cache.rs CUTS)" 'another session, {} connection cuts'
    entry 'Makefile FUZZ_SECONDS' fuzz.seconds \
        "$(sed -n 's/^FUZZ_SECONDS ?= \([0-9]*\)$/\1/p' "$root/Makefile")" '`make test` runs a {}-second'
    # zkwire-soak's defaults: the clap attribute of the flag, on the line before its field.
    entry 'soak/src/args.rs --contenders' soak.contenders "$(soak_default contenders)" \
        'not part of `make test`): {} library contenders'
    entry 'soak/src/args.rs --leader-kill-every' soak.kill_every \
        "$(soak_default kill_every)" 'every ~{} s;'
}

# The entries of a value record, as counts() writes them.
entries() {
    awk -v origin="docs/figures/$1" '/^#/ || !NF { next }
        { i = index($0, " :: "); split(substr($0, 1, i - 1), f, " ")
          printf "%s\t%s\t%s\t%s\n", origin, f[1], f[2], substr($0, i + 4) }' "$records/$1"
}

# --update with logs: the record's values from the logs' FIGURE lines (several values: their
# range), its run line from the logs.
update_record() {
    local record=$records/make-test.txt first when
    grep -aho 'FIGURE [a-z0-9_.]* [0-9][0-9.]*' "$@" > "$scratch/figures" || true
    [ -s "$scratch/figures" ] || { echo "$0: no FIGURE lines in $*" >&2; exit 1; }
    first=$(head -n 1 "$1")
    case $first in '$ '*) first=${first#'$ '} ;; *) first= ;; esac
    when=$(date -u -r "$1" '+%Y-%m-%d %H:%M UTC')
    awk -v logs="$*" -v when="$when" -v command="$first" '
        function commas(s) {
            if (s !~ /^[0-9]+$/) return s
            while (s ~ /[0-9][0-9][0-9][0-9]/) sub(/[0-9][0-9][0-9]($|,)/, ",&", s)
            return s
        }
        FNR == NR { n = $2; v = $3
                    if (!(n in lo) || v + 0 < lo[n] + 0) lo[n] = v
                    if (!(n in hi) || v + 0 > hi[n] + 0) hi[n] = v
                    next }
        /^# Run: / { print "# Run: the FIGURE lines of " logs ", " when; next }
        /^# Command: / && command != "" { print "# Command: " command; next }
        /^#/ || !NF { print; next }
        $1 in lo { v = commas(lo[$1]); if (hi[$1] != lo[$1]) v = v "–" commas(hi[$1])
                   i = index($0, " :: "); print $1 " " v substr($0, i); seen[$1] = 1; next }
        { print }
        END { for (n in lo) if (!(n in seen) && n != "hostile.cases")
                  print "readme-figures: notice: FIGURE " n " has no entry in the record" \
                      > "/dev/stderr" }
    ' "$scratch/figures" "$record" > "$scratch/record"
    cp "$scratch/record" "$record"
    echo "readme-figures: docs/figures/make-test.txt rewritten from $*"
}

logs=("$@")
[ "$mode" = --update ] && [ $# -gt 0 ] && update_record "$@"

counts > "$scratch/entries"
for r in $value_records; do entries "$r" >> "$scratch/entries"; done

# One pass over the README: every entry's figure found exactly once, with its value (or
# rewritten to it); every number of a value record's table covered by an entry; every block
# between `<!-- figures: docs/figures/X -->` and `<!-- /figures -->` equal to record X.
blocks=
for r in "$records"/*.txt; do
    case " $value_records " in *" ${r##*/} "*) ;; *) blocks="$blocks ${r##*/}" ;; esac
done
awk -v mode="$mode" -v root="$root" -v values=" $value_records " -v blocks="$blocks" -F '\t' '
    function ends(s, t) { return t == "" || substr(s, length(s) - length(t) + 1) == t }
    function begins(s, t) { return substr(s, 1, length(t)) == t }
    function fail(msg) { print "README.md: " msg > "/dev/stderr"; bad = 1 }
    # The body of a record: its lines after the leading # comments, blank edges dropped.
    function load(file,   line, lines, started, k) {
        nbody = 0; started = 0
        while ((getline line < file) > 0) {
            if (!started && line ~ /^#/) continue
            started = 1; body[++nbody] = line
        }
        close(file)
        while (nbody > 0 && body[nbody] == "") nbody--
        while (nbody > 0 && body[1] == "") {
            for (k = 1; k < nbody; k++) body[k] = body[k + 1]
            nbody--
        }
        return started
    }
    function block_end(   k, first, last, lead, trail, fence, same, ind) {
        ind = blk_indent
        for (k = 1; k <= nblk; k++) { sub("^" ind, "", blk[k]); if (blk[k] ~ /^ *$/) blk[k] = "" }
        first = 1; last = nblk
        while (first <= last && blk[first] == "") first++
        while (last >= first && blk[last] == "") last--
        lead = first - 1; trail = nblk - last
        fence = first < last && blk[first] ~ /^```/
        if (!load(root "/" blk_file)) fail(blk_file ": no such record")
        same = (last - first + 1 - 2 * fence) == nbody
        for (k = 1; same && k <= nbody; k++) same = blk[first + fence + k - 1] == body[k]
        if (!same && mode == "--check")
            fail("the block at line " blk_line " differs from " blk_file \
                 " (tests/readme-figures.sh --update rewrites it from the record)")
        if (mode != "--update") return
        for (k = 1; k <= lead; k++) print ""
        if (fence) print ind blk[first]
        for (k = 1; k <= nbody; k++) print (body[k] == "" ? "" : ind body[k])
        if (fence) print ind blk[last]
        for (k = 1; k <= trail; k++) print ""
    }
    function commas(s) {
        if (s !~ /^[0-9]+$/) return s
        while (s ~ /[0-9][0-9][0-9][0-9]/) sub(/[0-9][0-9][0-9]($|,)/, ",&", s)
        return s
    }
    FNR == NR { n++; origin[n] = $1; name[n] = $2; want[n] = commas($3)
                i = index($4, "{}"); pre[n] = substr($4, 1, i - 1); suf[n] = substr($4, i + 2)
                next }
    { out = $0 }
    in_blk && /^ *<!-- \/figures -->$/ { block_end(); in_blk = 0; print_line(); next }
    in_blk { blk[++nblk] = $0; next }
    /^ *<!-- figures: docs\/figures\/[^ ]* -->$/ {
        file = $0; sub(/^ *<!-- figures: /, "", file); sub(/ -->$/, "", file)
        referenced[file]++; region = ""
        f = file; sub(/^docs\/figures\//, "", f)
        if (index(values, " " f " ")) region = file
        else { in_blk = 1; nblk = 0; blk_file = file; blk_line = FNR
               blk_indent = $0; sub(/[^ ].*/, "", blk_indent) }
        print_line(); next
    }
    /^ *<!-- \/figures -->$/ { region = ""; print_line(); next }
    { scan(); print_line() }
    function print_line() { if (mode == "--update") print out }
    # Finds the entries figures on this line (and rewrites them when updating).
    function scan(   rest, pos, before, num, after, k, nc, cs, ce, lastcell, j, covered) {
        out = ""; rest = $0; pos = 1; nc = 0
        while (match(rest, /[0-9]+([.,][0-9]+)*(–[0-9]+([.,][0-9]+)*)?/)) {
            before = out substr(rest, 1, RSTART - 1); num = substr(rest, RSTART, RLENGTH)
            after = substr(rest, RSTART + RLENGTH)
            nums[++nc] = pos + RSTART - 1; numl[nc] = RLENGTH
            for (k = 1; k <= n; k++) {
                if (!ends(before, pre[k]) || !begins(after, suf[k])) continue
                hits[k]++; got[k] = num; at[k] = FNR
                cs[nc] = nums[nc] - length(pre[k]); ce[nc] = nums[nc] + RLENGTH + length(suf[k])
                if (mode == "--update") num = want[k]
            }
            out = before num; rest = after; pos += RSTART - 1 + RLENGTH
        }
        out = out rest
        if (region == "" || $0 !~ /^\|/) return
        # The last cell of a table row: every number in it inside the text of an entry.
        sub(/\| *$/, "", $0)
        lastcell = 0; for (j = 1; j <= length($0); j++) if (substr($0, j, 1) == "|") lastcell = j
        for (j = 1; j <= nc; j++) {
            if (nums[j] < lastcell) continue
            covered = 0
            for (k = 1; k <= nc; k++)
                if ((k in cs) && cs[k] <= nums[j] && nums[j] + numl[j] <= ce[k]) covered = 1
            if (!covered)
                fail("line " FNR ": the figure " substr($0, nums[j], numl[j]) \
                     " has no entry in " region)
        }
    }
    END {
        for (k = 1; k <= n; k++) {
            if (want[k] == "")
                fail(name[k] ": no value from " origin[k])
            else if (!hits[k])
                fail("no figure `" pre[k] "{}" suf[k] "` (" name[k] " = " want[k] \
                     ", from " origin[k] ")")
            else if (hits[k] > 1)
                fail(name[k] ": `" pre[k] "{}" suf[k] "` matches " hits[k] \
                     " places; make it unique in " origin[k])
            else if (mode == "--check" && got[k] != want[k])
                fail("line " at[k] ": " name[k] " is " got[k] " here but " want[k] " in " origin[k] \
                     " (tests/readme-figures.sh --update rewrites it)")
        }
        k = split(blocks, list, " ")
        for (; k > 0; k--) if (!(("docs/figures/" list[k]) in referenced))
            fail("no <!-- figures: docs/figures/" list[k] " --> block for that record")
        for (f in referenced)
            if (referenced[f] > 1) fail(f " is quoted by " referenced[f] " blocks")
        exit bad
    }
' "$scratch/entries" "$readme" > "$scratch/readme" || {
    echo "readme-figures: README.md disagrees with its sources (docs/figures/README.md)" >&2
    exit 1
}

if [ "$mode" = --update ]; then
    cp "$scratch/readme" "$readme"
    echo "readme-figures: README.md figures rewritten from docs/figures/ and the code"
    exit 0
fi
# The latest run's measured values (target/figures/, written by the tests) against the README's
# ranges: a notice, never a failure.
entries make-test.txt | while IFS=$'\t' read -r _ name range _; do
    [ -f "$live/$name" ] || continue
    awk -v file="$live/$name" -v range="$range" -v got="$(cat "$live/$name")" 'BEGIN {
        bounds = range; gsub(/,/, "", bounds); if (split(bounds, r, "–") == 1) r[2] = r[1]
        if (got + 0 < r[1] + 0 || got + 0 > r[2] + 0)
            printf "readme-figures: notice: the latest run measured %s (%s), outside the " \
                "README'"'"'s %s; docs/figures/README.md says how to refresh\n", got, file, range }'
done
echo "readme-figures: README.md agrees with the code and docs/figures/"
