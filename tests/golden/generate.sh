#!/usr/bin/env bash
# Regenerates (or checks) zkwire's golden jute fixtures using ZooKeeper's own
# Java serializer. See tests/golden/README.md.
#
#   tests/golden/generate.sh > tests/golden/fixtures.txt   # regenerate
#   tests/golden/generate.sh --check                        # verify committed file
#   tests/golden/generate.sh --report                       # also print multi op codes (stderr)
#
# The ZooKeeper jars default to the Debian/Ubuntu locations; override with
#   ZKWIRE_ZK_CLASSPATH=/path/zookeeper-jute.jar:/path/zookeeper.jar
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
fixtures="$here/fixtures.txt"

mode=generate
java_args=()
for arg in "$@"; do
    case "$arg" in
        --check) mode=check ;;
        --report) java_args+=(--report) ;;
        -h|--help)
            sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "generate.sh: unknown argument: $arg (try --help)" >&2
            exit 2
            ;;
    esac
done

die() {
    echo "generate.sh: $*" >&2
    exit 1
}

classpath="${ZKWIRE_ZK_CLASSPATH:-/usr/share/java/zookeeper-jute.jar:/usr/share/java/zookeeper.jar}"
IFS=':' read -r -a jars <<< "$classpath"
for jar in "${jars[@]}"; do
    [[ -z "$jar" ]] && continue
    [[ -r "$jar" ]] || die "ZooKeeper jar not found: $jar
  install it with:  apt-get install -y zookeeper
  or point ZKWIRE_ZK_CLASSPATH at zookeeper-jute.jar:zookeeper.jar"
done

command -v javac > /dev/null 2>&1 || die "javac not found
  install a JDK (e.g. apt-get install -y default-jdk-headless) and the jars with:  apt-get install -y zookeeper"
command -v java > /dev/null 2>&1 || die "java not found
  install a JDK (e.g. apt-get install -y default-jdk-headless) and the jars with:  apt-get install -y zookeeper"

workdir="$(mktemp -d "${TMPDIR:-/tmp}/zkwire-golden.XXXXXX")"
trap 'rm -rf -- "$workdir"' EXIT

javac -encoding UTF-8 -nowarn -cp "$classpath" -d "$workdir/classes" "$here/Golden.java" \
    || die "compiling Golden.java failed"

# Fixed locale/encoding so the output never depends on the caller's environment.
# zookeeper.jar pulls in slf4j-api without a binding; drop its "no binder"
# notice from stderr and pass anything else through.
run_golden() {
    local rc=0
    LC_ALL=C java -Dfile.encoding=UTF-8 -cp "$workdir/classes:$classpath" \
        Golden "${java_args[@]+"${java_args[@]}"}" 2> "$workdir/stderr" || rc=$?
    grep -v '^SLF4J: ' "$workdir/stderr" >&2 || true
    return "$rc"
}

if [[ "$mode" == generate ]]; then
    run_golden || die "running Golden failed"
    exit 0
fi

[[ -f "$fixtures" ]] || die "$fixtures does not exist; generate it with:
  tests/golden/generate.sh > tests/golden/fixtures.txt"

run_golden > "$workdir/fixtures.txt" || die "running Golden failed"
if diff -u "$fixtures" "$workdir/fixtures.txt"; then
    echo "generate.sh: tests/golden/fixtures.txt is up to date" >&2
else
    die "tests/golden/fixtures.txt is stale or was edited by hand (diff above: - committed, + regenerated).
  regenerate it with:  tests/golden/generate.sh > tests/golden/fixtures.txt"
fi
