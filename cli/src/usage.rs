//! The verbs, their flags and their help texts.

use crate::args::{switch, valued, VerbSpec};

/// Every verb `zkw` knows (the hidden `__demo-worker` included).
pub(crate) const VERBS: &[VerbSpec] = &[
    VerbSpec {
        name: "ls",
        flags: &[switch(Some('R'), "recursive"), switch(Some('s'), "stat")],
        command_after: None,
    },
    VerbSpec {
        name: "get",
        flags: &[switch(Some('s'), "stat")],
        command_after: None,
    },
    VerbSpec {
        name: "stat",
        flags: &[],
        command_after: None,
    },
    VerbSpec {
        name: "set",
        flags: &[valued(Some('v'), "version")],
        command_after: None,
    },
    VerbSpec {
        name: "create",
        flags: &[
            switch(Some('e'), "ephemeral"),
            switch(Some('s'), "sequential"),
            switch(Some('c'), "container"),
            valued(None, "ttl"),
        ],
        command_after: None,
    },
    VerbSpec {
        name: "rm",
        flags: &[switch(Some('r'), "recursive"), valued(Some('v'), "version")],
        command_after: None,
    },
    VerbSpec {
        name: "watch",
        flags: &[switch(None, "recursive")],
        command_after: None,
    },
    VerbSpec {
        name: "acl",
        flags: &[valued(Some('v'), "version")],
        command_after: None,
    },
    VerbSpec {
        name: "sync",
        flags: &[],
        command_after: None,
    },
    VerbSpec {
        name: "whoami",
        flags: &[],
        command_after: None,
    },
    VerbSpec {
        name: "lock",
        flags: LOCK_FLAGS,
        command_after: Some(1),
    },
    VerbSpec {
        name: "rlock",
        flags: LOCK_FLAGS,
        command_after: Some(1),
    },
    VerbSpec {
        name: "wlock",
        flags: LOCK_FLAGS,
        command_after: Some(1),
    },
    VerbSpec {
        name: "sem",
        flags: SEM_FLAGS,
        command_after: Some(1),
    },
    VerbSpec {
        name: "leader",
        flags: LEADER_FLAGS,
        command_after: Some(1),
    },
    VerbSpec {
        name: "cache",
        flags: &[valued(None, "depth")],
        command_after: None,
    },
    VerbSpec {
        name: "revoke",
        flags: &[],
        command_after: None,
    },
    VerbSpec {
        name: "sandbox",
        flags: &[valued(None, "ensemble"), switch(None, "tls")],
        command_after: None,
    },
    VerbSpec {
        name: "demo",
        flags: &[valued(None, "workers"), valued(None, "rounds")],
        command_after: None,
    },
    VerbSpec {
        name: "__demo-worker",
        flags: &[],
        command_after: None,
    },
];

const LOCK_FLAGS: &[crate::args::Flag] = &[
    valued(None, "timeout"),
    valued(None, "kill-after"),
    switch(None, "foreground"),
    switch(None, "revocable"),
];

const LEADER_FLAGS: &[crate::args::Flag] = &[
    valued(None, "id"),
    valued(None, "timeout"),
    valued(None, "kill-after"),
    switch(None, "foreground"),
];

const SEM_FLAGS: &[crate::args::Flag] = &[
    valued(None, "leases"),
    valued(None, "timeout"),
    valued(None, "kill-after"),
    switch(None, "foreground"),
    switch(None, "revocable"),
];

/// `zkw --help`.
pub(crate) const MAIN: &str = "\
zkw: a ZooKeeper command-line client that can run any command under a distributed lock

Usage: zkw [OPTIONS] <COMMAND> [ARGS]

Nodes:
  ls PATH [-R] [-s]                 children (sorted); -R every path below; -s the Stat too
  get PATH [-s]                     data (and Stat)
  stat PATH                         Stat
  set PATH DATA [-v VERSION]        set data (DATA '-' reads standard input)
  create PATH [DATA] [-e] [-s] [-c] [--ttl D]
                                    create a node; prints its path
  rm PATH [-r] [-v VERSION]         delete a node (-r: and everything below)
  watch PATH [--recursive]          print events until Ctrl-C
  cache PATH [--depth N]            print the subtree, then every change (a TreeCache)
  acl get PATH | acl set PATH ACL [-v VERSION]
                                    ACL as scheme:id:perms[,…], e.g. world:anyone:cdrwa
  sync PATH                         let the connected server catch up with the leader
  whoami                            the session's identities

Locks (CMD runs with ZKW_FENCING_TOKEN and ZKW_LOCK_NODE set; zkw exits with CMD's code):
  lock PATH [--timeout D] -- CMD ARGS…      under the mutex at PATH
  rlock PATH [--timeout D] -- CMD ARGS…     under the read lock of the read/write lock
  wlock PATH [--timeout D] -- CMD ARGS…     under the write lock
  sem PATH --leases N [--timeout D] -- CMD ARGS…
                                            under one of N leases of a semaphore
  leader PATH [--id ID] [--timeout D] -- CMD ARGS…
                                            while leader of the election at PATH (Curator's
                                            LeaderLatch); leaves it when CMD exits
  revoke PATH [NODE]                        ask the holder (of the mutex, or of NODE) to
                                            release; `lock --revocable` then stops CMD

Local servers:
  sandbox [--ensemble N] [--tls]    start ZooKeeper locally, print its connect string, Ctrl-C stops
  demo [--workers N] [--rounds M]   contending `zkw lock` processes, leader killed mid-run

Options:
  --server HOSTS[/CHROOT]    connect string (default: $ZOOKEEPER, else 127.0.0.1:2181)
  --session-timeout D        session timeout, also the limit for connecting (default 10s)
  --auth SCHEME:CREDENTIALS  authenticate, e.g. digest:alice:secret (repeatable)
  --tls-ca FILE              speak TLS, trusting the CA certificates in FILE (PEM; $ZKW_TLS_CA)
  --tls-cert FILE --tls-key FILE
                             client certificate and key (PEM) for mutual TLS, x509 identity
                             ($ZKW_TLS_CERT, $ZKW_TLS_KEY)
  --sasl digest:USER[:PASSWORD]
                             SASL DIGEST-MD5; without PASSWORD, $ZKW_SASL_PASSWORD or a prompt
                             ($ZKW_SASL)
  --sasl kerberos[:PRINCIPAL]
                             Kerberos: tickets from $KRB5CCNAME (kinit) or the keytab in
                             $KRB5_CLIENT_KTNAME; servers are zookeeper/HOST
  --json                     one JSON document per result, for scripts
  -h, --help                 help (zkw <COMMAND> --help for a command)
  --version                  version

Durations: 500ms, 5s, 1.5s, 2m, 1h (a bare number is seconds).

Exit codes: 0 ok · 1 the operation failed (no node, bad version, …) · 2 bad command line ·
69 ZooKeeper unreachable or session lost · 73 lock not acquired before --timeout ·
75 lock lost while CMD ran (CMD terminated) · 76 lock revoked (--revocable) · 126/127 CMD cannot run / not found ·
128+N CMD (or zkw) ended by signal N · otherwise CMD's own exit code.
";

/// `zkw <verb> --help`.
pub(crate) fn verb_help(verb: &str) -> &'static str {
    match verb {
        "ls" => "Usage: zkw ls PATH [-R|--recursive] [-s|--stat]\n\nLists the children of PATH, sorted, one per line. -R lists every path of the subtree\n(PATH first, depth first). -s prints the Stat of PATH after the list.",
        "get" => "Usage: zkw get PATH [-s|--stat]\n\nPrints the data of PATH (with --json: as text when it is UTF-8, else as data_hex).",
        "stat" => "Usage: zkw stat PATH\n\nPrints the Stat of PATH (times in UTC; in ms since the epoch with --json).",
        "set" => "Usage: zkw set PATH DATA [-v|--version VERSION]\n\nSets the data of PATH, only if its data version is VERSION when given. DATA '-' reads\nstandard input.",
        "create" => CREATE_HELP,
        "rm" => "Usage: zkw rm PATH [-r|--recursive] [-v|--version VERSION]\n\nDeletes PATH (only if its version is VERSION when given); -r deletes everything below it\nfirst.",
        "watch" => "Usage: zkw watch PATH [--recursive]\n\nAdds a persistent watch on PATH (which need not exist) and prints one line per event,\n'<EventType> <path>', until Ctrl-C. --recursive covers everything below PATH too. The watch\nsurvives reconnections.",
        "acl" => "Usage: zkw acl get PATH\n       zkw acl set PATH ACL [-v|--version ACL_VERSION]\n\nACL entries are scheme:id:perms, comma-separated; perms are letters from cdrwa\n(create, delete, read, write, admin). E.g. world:anyone:r,digest:alice:<hash>:cdrwa.",
        "sync" => "Usage: zkw sync PATH\n\nWaits until the server this session is connected to has caught up with the leader.",
        "whoami" => "Usage: zkw whoami\n\nPrints the identities the session is authenticated with (scheme:user), e.g. with\n--auth digest:alice:secret.",
        "lock" | "rlock" | "wlock" | "sem" => LOCK_HELP,
        "leader" => LEADER_HELP,
        "cache" => CACHE_HELP,
        "revoke" => "Usage: zkw revoke PATH [NODE]\n\nAsks the current holder of the mutex at PATH, or the holder of the lock node NODE (a\nchild of PATH or a full path; any lock kind, zkw's or Curator's), to release: writes\n__REVOKE__ into the node, as Curator's Revoker does. A `zkw lock --revocable` holder stops\nits command and releases (exit 76); a Curator holder must have called makeRevocable.\nExit 1 when no one holds the lock or NODE does not exist.",
        "sandbox" => "Usage: zkw sandbox [--ensemble N] [--tls]\n\nStarts a local ZooKeeper from the installed packages (standalone, or an N-node ensemble),\nprints its connect string on standard output and waits; Ctrl-C stops it and removes its\nfiles. With --json: {\"connect_string\":…,\"servers\":N}.\n\n--tls: the servers speak TLS (client certificates optional) with certificates made for\nthe run; the connect string names the TLS ports, and the note on standard error (with\n--json: tls_ca, tls_cert, tls_key) gives the CA, a client certificate and its key.",
        "demo" => "Usage: zkw demo [--workers N] [--rounds M]\n\nStarts a local 3-node ensemble and N worker processes (default 4), each taking the lock\n/zkw-demo/lock M times (default 50) through `zkw lock`; the critical section increments a\nshared counter file. The leader is killed half-way. Prints acquisitions, hand-off latency,\nmaximum concurrent holders, whether fencing tokens only grew, and the counter; exits 1 if\nany invariant failed.",
        _ => MAIN,
    }
}

const CREATE_HELP: &str = "\
Usage: zkw create PATH [DATA] [-e|--ephemeral] [-s|--sequential] [-c|--container] [--ttl D]

Creates PATH (its parent must exist) and prints the path created.
  -e   ephemeral: deleted when the session ends, that is when zkw exits
  -s   sequential: the server appends a 10-digit sequence number
  -c   container: deleted by the server once its last child is gone
  --ttl D  persistent with a time to live: deleted once unchanged and childless for D
           (the server must enable extended types)";

const LOCK_HELP: &str = "\
Usage: zkw lock  PATH [--timeout D] [--kill-after D] [--foreground] [--revocable] -- CMD ARGS…
       zkw rlock PATH [same options] -- CMD ARGS…
       zkw wlock PATH [same options] -- CMD ARGS…
       zkw sem   PATH --leases N [same options] -- CMD ARGS…

Waits for the lock at PATH (the mutex; the read or write side of the read/write lock; one of
N leases of the semaphore, every participant using the same N), runs CMD with
  ZKW_FENCING_TOKEN  a number that only grows across holders (pass it to what you protect)
  ZKW_LOCK_NODE      the lock node's path
in its environment, releases the lock when CMD exits and exits with CMD's code. The
layouts are Apache Curator's: zkw and Curator clients exclude each other on the same path.

CMD is stopped before the lock can pass to anyone else. The lock is trusted until the
session's lease ends (the session timeout after the newest request the server answered, less
a margin); if the lease is not renewed in time, CMD's process group gets SIGTERM --kill-after
before that instant and SIGKILL at it. If the lock is lost otherwise (lock node deleted,
session ended), CMD gets SIGTERM at once and SIGKILL after --kill-after (or when the lease
ends, if sooner). Either way zkw exits with 75 (also when the loss is seen just as CMD exits:
its run may not have been exclusive). This holds while zkw itself runs: if zkw is paused
(stopped, swapped out, frozen VM), only ZKW_FENCING_TOKEN protects the resource.

  --timeout D     give up waiting after D: exit 73
  --kill-after D  grace between SIGTERM and SIGKILL (default 5s, less if the session timeout
                  requires); --kill-after plus the margin (a 15th of the session timeout,
                  at least 100ms) must fit in half the session timeout, else exit 2
  --foreground    run CMD in zkw's process group (for commands that read the terminal);
                  then only CMD itself is signalled, not its children
  --revocable     a revocation request (zkw revoke, Curator's Revoker) stops CMD as a loss
                  does (SIGTERM, SIGKILL after --kill-after), releases the lock, exit 76;
                  without it a request is noted on stderr and CMD keeps the lock
Ctrl-C, SIGTERM and SIGHUP are passed on to CMD; before CMD starts they stop the wait
(exit 130, 143, 129) without leaving a lock node behind.";

const LEADER_HELP: &str = "\
Usage: zkw leader PATH [--id ID] [--timeout D] [--kill-after D] [--foreground] -- CMD ARGS…

Joins the leader election at PATH in Apache Curator's LeaderLatch layout (zkw and Curator
LeaderLatch participants elect one leader among them), waits until this participant leads,
runs CMD with ZKW_FENCING_TOKEN and ZKW_LOCK_NODE set (the latch node), leaves the election
when CMD exits and exits with CMD's code. Leadership is trusted, and CMD stopped, exactly as
for `zkw lock` (see zkw lock --help): SIGTERM --kill-after before the session's lease could
end, at once if the latch node goes or the session ends; exit 75.

  --id ID         this participant's id, the latch node's data (default HOST-PID); Curator's
                  getParticipants() and `zkw locks` show it
  --timeout D     give up waiting after D: exit 73
  --kill-after D  grace between SIGTERM and SIGKILL (as for zkw lock)
  --foreground    run CMD in zkw's process group";

const CACHE_HELP: &str = "\
Usage: zkw cache PATH [--depth N]

Keeps a local copy of the subtree at PATH (a TreeCache: one persistent recursive watch) and
prints it, one line 'created <path> <data>' per node, then 'initialized', then one line per
change until Ctrl-C: 'created <path> <data>', 'changed <path> <data>' (the new data),
'deleted <path>'. Data is shown as text, control characters escaped. After a reconnection the copy is read again and only the differences are
printed. PATH need not exist yet. --depth N holds only N levels below PATH (0: PATH alone).
With --json, one object per line: {\"event\":\"created\"|\"changed\"|\"deleted\"|\"initialized\",
\"path\":…, \"data\" or \"data_hex\":…, \"version\":…, \"mzxid\":…}.";
