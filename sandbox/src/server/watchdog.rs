//! The `bash` watchdog every server JVM (and the Kerberos KDC) runs under, which kills it
//! when the process that started it goes away.

/// Watchdog run by `bash -c`. Arguments: `$1` server directory, `$2` pid
/// file, `$3` pid of the test process (the watchdog's parent), `$4` keep
/// flag (`1` keeps the directory), then the java command line.
///
/// Commands arrive on stdin as lines: `kill` (SIGKILL now) or `term`
/// (SIGTERM, SIGKILL after 5 s); the harness always sends one before
/// closing stdin. End-of-file without a command, a fatal signal, or the
/// watchdog's parent changing (the test process died and the watchdog was
/// re-parented) all mean the test process is going away: SIGKILL the JVM
/// and, once the parent is confirmed gone (waiting up to 2 s), remove the
/// directory unless kept. The script exits only after the JVM has been
/// reaped, with the JVM's exit status.
///
/// `read -t` keeps partial input on timeout, so a command split by the
/// timeout is reassembled in `buf` rather than misread.
pub(crate) const WATCHDOG: &str = r#"
set -u
dir=$1 pidfile=$2 parent=$3 keep=$4
shift 4
"$@" </dev/null &
jpid=$!
printf '%s\n' "$jpid" >"$pidfile"
parent_alive() {
  local line rest f
  if read -r line 2>/dev/null </proc/$$/stat; then
    rest=${line##*) }
    f=($rest)
    [ "${f[1]}" = "$parent" ]
  else
    kill -0 "$parent" 2>/dev/null
  fi
}
finish() {
  trap '' TERM INT HUP
  local reason=$1 i=0 rc
  printf 'zkwire-sandbox watchdog: stopping JVM %s (reason: %s)\n' "$jpid" "$reason" >&2
  case $reason in
    term)
      kill -TERM "$jpid" 2>/dev/null
      while [ "$i" -lt 100 ] && kill -0 "$jpid" 2>/dev/null; do sleep 0.05; i=$((i + 1)); done
      kill -KILL "$jpid" 2>/dev/null ;;
    exited) ;;
    *) kill -KILL "$jpid" 2>/dev/null ;;
  esac
  wait "$jpid"
  rc=$?
  case $reason in
    kill|term|exited) ;;
    *)
      while [ "$i" -lt 40 ] && parent_alive; do sleep 0.05; i=$((i + 1)); done
      if ! parent_alive && [ "$keep" != 1 ]; then rm -rf -- "$dir"; fi ;;
  esac
  exit "$rc"
}
trap 'finish signal' TERM INT HUP
buf=
while :; do
  part=
  read -r -t 0.2 part
  st=$?
  buf=$buf$part
  if [ "$st" -eq 0 ]; then
    case $buf in kill|term) finish "$buf" ;; esac
    buf=
  elif [ "$st" -gt 128 ]; then
    kill -0 "$jpid" 2>/dev/null || finish exited
    parent_alive || finish parent-gone
  else
    case $buf in kill|term) finish "$buf" ;; esac
    finish eof
  fi
done
"#;
