//! zkwire: an Apache ZooKeeper client written down to the wire.
//!
//! [`Client`] is the whole API: build one with [`Client::connect`] or [`Client::builder`],
//! then call the operations on it. Everything it takes or returns is exported here at the
//! crate root; [`path`] holds the path rules and helpers the recipes use, and [`error`] the
//! error types. Under the client sit a hand-written jute codec, the records of the protocol,
//! a sans-IO session state machine and one tokio task per client; they are internals (see
//! "Unstable internals" below). The protocol facts the code relies on are written down in the
//! repository's `docs/protocol.md`.
//!
//! ```no_run
//! # async fn run() -> Result<(), zkwire::Error> {
//! use zkwire::{Client, CreateMode, CreateOptions};
//! let client = Client::connect("127.0.0.1:2181/app").await?;
//! client.create("/config", b"v1", &CreateOptions::persistent()).await?;
//! let (data, stat) = client.get_data("/config").await?;
//! assert_eq!(&data[..], b"v1");
//! # let _ = stat;
//! # Ok(()) }
//! ```
//!
//! # Watches and session state
//!
//! A watch is registered by the read that sets it and is delivered to the value that read
//! returns, never to a global callback:
//!
//! - [`Client::get_data_and_watch`], [`Client::exists_and_watch`] and
//!   [`Client::get_children_and_watch`] return a [`OneshotWatcher`], a future that resolves
//!   with the one [`WatchedEvent`] that fires it. If the session ends first it resolves with
//!   [`EventType::None`] and the session's end as its [`KeeperState`]. Dropping it removes the
//!   local watcher.
//! - [`Client::add_watch`] returns a [`PersistentWatcher`], a stream of events
//!   ([`PersistentWatcher::next`]) that lasts until it is dropped, the watch is removed
//!   ([`Client::remove_watches`]) or the session ends. With
//!   [`AddWatchMode::PersistentRecursive`] it also reports every node below the path. The
//!   stream buffers a bounded number of events ([`ClientBuilder::with_watch_capacity`]); a
//!   consumer that falls that far behind loses the watch rather than growing memory.
//!
//! Both kinds survive reconnections: after a reconnect the client registers every live watch
//! again. The server then fires each one-shot watch whose node changed while the client was
//! away; persistent watches are re-armed without catching up on such changes (the protocol
//! offers no way to), as `docs/protocol.md` §5.5 explains.
//!
//! The session itself is observed through [`Client::state`] (now) and [`Client::state_stream`]
//! (every change, as a [`StateStream`] of [`SessionState`]). `Disconnected` is not the end:
//! requests in flight fail with [`Error::ConnectionLoss`] and the client resumes the same
//! session on another server. `Expired`, `AuthFailed` and `Closed` are terminal
//! ([`SessionState::is_terminal`]): every later request fails.
//!
//! ```no_run
//! # async fn run() -> Result<(), zkwire::Error> {
//! use zkwire::{AddWatchMode, Client, EventType, SessionState};
//!
//! let client = Client::connect("127.0.0.1:2181").await?;
//!
//! // One-shot: the change after this read.
//! let (_data, _stat, changed) = client.get_data_and_watch("/config").await?;
//! let event = changed.await;
//! if event.event_type == EventType::NodeDataChanged {
//!     let (_new, _stat) = client.get_data("/config").await?;
//! }
//!
//! // Persistent and recursive: every change under /jobs until dropped.
//! let mut jobs = client.add_watch("/jobs", AddWatchMode::PersistentRecursive).await?;
//! tokio::spawn(async move {
//!     while let Some(event) = jobs.next().await {
//!         println!("{:?} {}", event.event_type, event.path);
//!     }
//! });
//!
//! // Session state: react to the session ending.
//! let mut states = client.state_stream();
//! while let Some(state) = states.next().await {
//!     match state {
//!         SessionState::Disconnected => eprintln!("disconnected; resuming the session"),
//!         s if s.is_terminal() => break,
//!         _ => {}
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! # Custom transports
//!
//! [`ClientBuilder::connect_with`] takes any [`Connect`] implementation in place of the
//! default [`TcpConnector`]: it is asked for a byte stream to one [`HostPort`] of the connect
//! string at every connection attempt (TLS, a SOCKS proxy or an in-memory stream in tests).
//!
//! # Logging
//!
//! The client emits [`tracing`](https://docs.rs/tracing) events under the target `zkwire`
//! and never installs a subscriber itself; without one they cost next to nothing.
//!
//! - `info`: `session state`, at every change of [`SessionState`], with the session id and
//!   the host;
//! - `debug`: `connecting` (the host, the pause before), `connect attempt failed`, `dropping
//!   the connection` (why), `connection closed by the server or failed`, `write failed`,
//!   `read/write server found`, and `retrying` from [`retry`];
//! - `warn`: `no server can be connected to as configured`, and SASL failures.
//!
//! To see them, install a subscriber, for instance `tracing-subscriber`'s with an
//! environment filter (`RUST_LOG=zkwire=debug`):
//!
//! ```ignore
//! tracing_subscriber::fmt()
//!     .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
//!     .with_writer(std::io::stderr)
//!     .init();
//! ```
//!
//! (`ignore`: `tracing-subscriber` is not a dependency of this crate.) `zkw -v` and
//! `zkw -vv` turn them on in the command-line client.
//!
//! # Unstable internals
//!
//! The cargo feature `unstable` makes the layers under the client public as `zkwire::jute`
//! (the codec), `zkwire::proto` (every wire record), `zkwire::session` (the sans-IO state
//! machine) and `zkwire::driver` (the tokio task). The workspace's test harness, benchmarks
//! and fuzz targets use them to speak the protocol directly. They carry no stability promise:
//! any release may change them, and they are hidden from the rendered documentation.
#![forbid(unsafe_code)]
// Where other crates' documentation links into this one when this crate's own pages are not
// next to theirs (`cargo doc -p zkwire-recipes --no-deps`). Keep the version in step with
// Cargo.toml's; tests/tests/doc_examples.rs checks it.
#![doc(html_root_url = "https://docs.rs/zkwire/0.1.0")]

mod client;
mod connect_string;
pub mod error;
mod extensions;
// Also compiled for the unit tests: the session's share the fuzz target's driver loop
// (`fuzzing/harness.rs`).
#[cfg(any(test, fuzzing, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
pub mod path;
mod retry;
#[cfg(any(feature = "sasl-digest", feature = "sasl-gssapi"))]
mod sasl;
#[cfg(feature = "tls")]
mod tls;

// The internal layers: `pub` and hidden from the docs with the `unstable` feature (no
// stability promise; `tests/`, `bench/` and `fuzz/` turn it on), private without it.
//
// Without the feature their `pub` items are unreachable from outside, so `unreachable_pub`
// is allowed for these modules only: the same items are the layer's interface once the
// feature is on, where they are checked as any public API. Dead code is not allowed: what
// only the harness, the benchmarks or the fuzz targets use is compiled only for the tests and
// with the feature (`#[cfg(any(test, feature = "unstable"))]`), so `make test`'s clippy run
// on this crate alone, without it, finds code nothing uses.
macro_rules! internal_layers {
    ($($layer:ident),*) => {$(
        #[cfg(feature = "unstable")]
        #[doc(hidden)]
        pub mod $layer;
        #[cfg(not(feature = "unstable"))]
        #[allow(unreachable_pub)]
        mod $layer;
    )*};
}
internal_layers!(driver, jute, proto, session);

/// The `bytes` crate, whose [`Bytes`](bytes::Bytes) the client hands out for node data.
pub use bytes;
pub use client::{
    lease_staleness, Client, ClientBuilder, ClientStats, CreateOptions, OneshotWatcher, Op,
    OpResult, PersistentWatcher, ReadOp, ReadResult, Reconfig, StateStream, StatsHandle,
    WatchedEvent, DEFAULT_SERVER_TICK,
};
pub use connect_string::HostPort;
pub use driver::{Connect, TcpConnector};
pub use error::Error;
pub use jute::JUTE_MAX_BUFFER;
pub use proto::{
    Acl, AddWatchMode, Children, ChildrenIter, ClientInfo, CreateMode, EventType, Id, KeeperState,
    Perms, Stat, WatcherType,
};
pub use retry::{retry, Backoff};
#[cfg(feature = "sasl-gssapi")]
pub use sasl::Kerberos;
pub use session::SessionState;
#[cfg(feature = "tls")]
pub use tls::{TlsConfig, TlsConfigError, TlsConnector};

/// The README's examples, compiled as doctests (they use the optional features too; the
/// workspace's test crates turn them on).
#[cfg(all(
    doctest,
    feature = "tls",
    feature = "sasl-digest",
    feature = "sasl-gssapi"
))]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
