//! The referee of the interop tests: every holder — a thread of the peer program (Curator or
//! kazoo) or a zkwire task — reports `ENTER` after its acquire returns and `EXIT` before it
//! releases (the peer over TCP on 127.0.0.1, zkwire in process). The referee answers only
//! after recording, so its "inside" interval of a holder lies within the real hold: any
//! overlap it sees is a real exclusion violation. It checks: mutex, at most one inside;
//! read/write lock, at most one writer and no reader with a writer; semaphore, at most the
//! limit of leases inside.
//!
//! Protocol: the peer sends `ENTER <tag> <kind>` / `EXIT <tag> <kind>`, tag `J` (Curator) or
//! `K` (kazoo), kind `M` (mutex), `R` (read), `W` (write) or `S <n>` (n leases); the referee
//! answers `OK`, or `STOP` once it has seen a violation when asked to
//! ([`Referee::stop_at_first_violation`]: the peer then ends its run after this cycle).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

/// Who holds: the peer program or zkwire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// The other client (Curator or kazoo), reporting over TCP.
    Peer,
    Zkwire,
}

impl Side {
    pub(crate) const fn index(self) -> usize {
        match self {
            Self::Peer => 0,
            Self::Zkwire => 1,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Mutex,
    Read,
    Write,
    Leases(u32),
}

impl Kind {
    fn parse(words: &[&str]) -> Option<Self> {
        match words {
            ["M"] => Some(Self::Mutex),
            ["R"] => Some(Self::Read),
            ["W"] => Some(Self::Write),
            ["S", n] => n.parse().ok().map(Self::Leases),
            _ => None,
        }
    }
}

/// What the referee saw. Per-side arrays are indexed by [`Side::index`]: the peer first.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) max_leases: u32,
    pub(crate) mutex: u32,
    pub(crate) readers: [u32; 2],
    pub(crate) writers: u32,
    pub(crate) leases: [u32; 2],
    pub(crate) violations: Vec<String>,
    /// Acquisitions per side: mutex, read, write, semaphore.
    pub(crate) acquisitions: [[usize; 4]; 2],
    pub(crate) leases_granted: [usize; 2],
    /// ENTERs whose side differs from the previous ENTER's.
    pub(crate) side_switches: usize,
    pub(crate) last_side: Option<Side>,
    pub(crate) max_readers: u32,
    /// ENTERs of a reader while readers of the other side were inside.
    pub(crate) shared_reads: usize,
    pub(crate) max_leases_inside: u32,
    /// ENTERs of leases while leases of the other side were inside.
    pub(crate) shared_leases: usize,
}

impl Tally {
    pub(crate) fn enter(&mut self, side: Side, kind: Kind) {
        let (me, other) = (side.index(), 1 - side.index());
        if self.last_side.is_some_and(|s| s != side) {
            self.side_switches += 1;
        }
        self.last_side = Some(side);
        match kind {
            Kind::Mutex => {
                if self.mutex > 0 {
                    self.violations.push(format!(
                        "{side:?} entered the mutex with {} inside",
                        self.mutex
                    ));
                }
                self.mutex += 1;
                self.acquisitions[me][0] += 1;
            }
            Kind::Read => {
                if self.writers > 0 {
                    self.violations
                        .push(format!("{side:?} reader entered with a writer inside"));
                }
                if self.readers[other] > 0 {
                    self.shared_reads += 1;
                }
                self.readers[me] += 1;
                self.max_readers = self.max_readers.max(self.readers[0] + self.readers[1]);
                self.acquisitions[me][1] += 1;
            }
            Kind::Write => {
                let readers = self.readers[0] + self.readers[1];
                if self.writers > 0 || readers > 0 {
                    self.violations.push(format!(
                        "{side:?} writer entered with {} writers and {readers} readers inside",
                        self.writers
                    ));
                }
                self.writers += 1;
                self.acquisitions[me][2] += 1;
            }
            Kind::Leases(n) => {
                if self.leases[other] > 0 {
                    self.shared_leases += 1;
                }
                self.leases[me] += n;
                let inside = self.leases[0] + self.leases[1];
                if inside > self.max_leases {
                    self.violations.push(format!(
                        "{inside} leases inside (limit {})",
                        self.max_leases
                    ));
                }
                self.max_leases_inside = self.max_leases_inside.max(inside);
                self.acquisitions[me][3] += 1;
                self.leases_granted[me] += n as usize;
            }
        }
    }

    pub(crate) fn exit(&mut self, side: Side, kind: Kind) {
        let me = side.index();
        let (counter, by) = match kind {
            Kind::Mutex => (&mut self.mutex, 1),
            Kind::Read => (&mut self.readers[me], 1),
            Kind::Write => (&mut self.writers, 1),
            Kind::Leases(n) => (&mut self.leases[me], n),
        };
        match counter.checked_sub(by) {
            Some(left) => *counter = left,
            None => self
                .violations
                .push(format!("{side:?} exited {kind:?} without entering")),
        }
    }

    /// Acquisitions of `side`, all kinds together.
    pub(crate) fn total(&self, side: Side) -> usize {
        self.acquisitions[side.index()].iter().sum()
    }

    /// Prints a finished interop run of the `test` binary against `peer` (`Curator` or
    /// `kazoo`) and checks what every run must show: no violation, every acquisition the peer
    /// reported (`peer_done`) seen, and the two sides interleaved. Returns the acquisitions
    /// seen of the peer and of zkwire.
    pub(crate) fn check_run(
        &self,
        (test, peer): (&str, &str),
        name: &str,
        peer_done: usize,
        took: Duration,
    ) -> (usize, usize) {
        let (theirs, zkwire) = (self.total(Side::Peer), self.total(Side::Zkwire));
        println!(
            "{test} {name}: {} acquisitions in {took:.2?} — {peer} {theirs} {:?}, zkwire {zkwire} \
             {:?} [mutex, read, write, semaphore]; side switches {}; violations {}",
            theirs + zkwire,
            self.acquisitions[0],
            self.acquisitions[1],
            self.side_switches,
            self.violations.len(),
        );
        assert!(
            self.violations.is_empty(),
            "exclusion violations: {:?}",
            self.violations
        );
        assert_eq!(
            theirs, peer_done,
            "every {peer} acquisition reached the referee"
        );
        // The two sides really interleaved, not one after the other.
        assert!(
            self.side_switches >= 50,
            "only {} hand-overs between the sides",
            self.side_switches
        );
        (theirs, zkwire)
    }

    /// Checks a read/write run against `peer`: both sides wrote, and readers shared the lock,
    /// across the sides too.
    pub(crate) fn check_rw(&self, peer: &str) {
        assert!(
            self.acquisitions[0][2] > 0 && self.acquisitions[1][2] > 0,
            "both sides wrote"
        );
        assert!(self.max_readers > 1, "readers shared the lock");
        assert!(
            self.shared_reads > 0,
            "{peer} and zkwire readers held the lock together"
        );
    }
}

/// The referee: a TCP server for the peer program, the same tally for zkwire's tasks.
pub(crate) struct Referee {
    pub(crate) tally: Arc<StdMutex<Tally>>,
    pub(crate) port: u16,
    stop: Arc<AtomicBool>,
    stop_at_violation: Arc<AtomicBool>,
}

impl Referee {
    /// Starts the referee; `max_leases` is the semaphore limit (0 for the locks).
    pub(crate) fn start(max_leases: u32) -> Self {
        let tally = Arc::new(StdMutex::new(Tally {
            max_leases,
            ..Tally::default()
        }));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let stop_at_violation = Arc::new(AtomicBool::new(false));
        let (t, s, v) = (tally.clone(), stop.clone(), stop_at_violation.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let (t, v) = (t.clone(), v.clone());
                std::thread::spawn(move || serve(stream, &t, &v));
            }
        });
        Self {
            tally,
            port,
            stop,
            stop_at_violation,
        }
    }

    /// From now on, answer `STOP` instead of `OK` once a violation has been recorded (for a
    /// control run that only needs to see one).
    pub(crate) fn stop_at_first_violation(&self) {
        self.stop_at_violation.store(true, Ordering::SeqCst);
    }

    /// A zkwire task is inside.
    pub(crate) fn enter(&self, kind: Kind) {
        self.tally.lock().unwrap().enter(Side::Zkwire, kind);
    }

    /// A zkwire task is about to release.
    pub(crate) fn exit(&self, kind: Kind) {
        self.tally.lock().unwrap().exit(Side::Zkwire, kind);
    }

    /// The number of violations seen so far.
    pub(crate) fn violations(&self) -> usize {
        self.tally.lock().unwrap().violations.len()
    }

    /// What the referee saw, leaving an empty tally behind.
    pub(crate) fn take(&self) -> Tally {
        std::mem::take(&mut *self.tally.lock().unwrap())
    }
}

impl Drop for Referee {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the acceptor so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// One peer thread's connection: `ENTER <tag> <kind>` / `EXIT <tag> <kind>`, each answered
/// `OK` (or `STOP`, see [`Referee::stop_at_first_violation`]) after it is recorded.
fn serve(stream: TcpStream, tally: &StdMutex<Tally>, stop_at_violation: &AtomicBool) {
    let _ = stream.set_nodelay(true);
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { return };
        let words: Vec<&str> = line.split_whitespace().collect();
        let mut tally = tally.lock().unwrap();
        let recorded = match (
            words.first(),
            words.get(1),
            Kind::parse(words.get(2..).unwrap_or_default()),
        ) {
            (Some(&"ENTER"), Some(&("J" | "K")), Some(kind)) => {
                tally.enter(Side::Peer, kind);
                true
            }
            (Some(&"EXIT"), Some(&("J" | "K")), Some(kind)) => {
                tally.exit(Side::Peer, kind);
                true
            }
            _ => {
                tally.violations.push(format!("bad referee line {line:?}"));
                false
            }
        };
        let reply = if !recorded {
            "ERR\n"
        } else if stop_at_violation.load(Ordering::SeqCst) && !tally.violations.is_empty() {
            "STOP\n"
        } else {
            "OK\n"
        };
        drop(tally);
        if out.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}
