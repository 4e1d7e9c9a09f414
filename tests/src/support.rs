//! Helpers shared by the integration tests: a client isolated under its own chroot.
#![allow(clippy::expect_used)] // a test helper: failing loudly with the reason is its contract

use std::io;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zkwire::jute::{Decode, Encode, FrameDecoder};
use zkwire::proto::frames::{frame, request_frame};
use zkwire::proto::{ConnectRequest, ConnectResponse, OpCode};
use zkwire::{Client, CreateOptions, Error};

use crate::server::shared_server;

/// Deletes `path` and everything under it; a missing node is fine.
///
/// # Errors
/// As [`Client::delete_all`].
pub async fn delete_recursive(client: &Client, path: &str) -> Result<(), Error> {
    client.delete_all(path).await.map(drop)
}

/// A fresh, empty chroot `/<name>` on the shared server, and its connect string.
///
/// # Panics
/// When the server cannot be started or reached: the test then fails with the reason.
pub async fn fresh_chroot(name: &str) -> String {
    let server = shared_server();
    let root = Client::connect(&server.connect_string())
        .await
        .expect("connect to the shared server");
    let chroot = format!("/{name}");
    delete_recursive(&root, &chroot)
        .await
        .expect("clean the chroot");
    root.create(&chroot, b"", &CreateOptions::persistent())
        .await
        .expect("create the chroot");
    root.close().await.expect("close");
    format!("{}{chroot}", server.connect_string())
}

/// A client connected under a fresh chroot `/<name>` on the shared server.
///
/// # Panics
/// As [`fresh_chroot`].
pub async fn client_in_chroot(name: &str) -> Client {
    let cs = fresh_chroot(name).await;
    Client::connect(&cs)
        .await
        .expect("connect under the chroot")
}

/// Kills `client`'s current session on the shared server (as [`kill_session`]); returns its
/// id, so that the caller can wait for a renewal to replace it.
///
/// # Errors
/// As [`kill_session`].
pub async fn kill_client_session(client: &Client) -> io::Result<i64> {
    let id = client.session_id();
    let addr = shared_server().connect_string();
    kill_session(&addr, id, client.session_password()).await?;
    Ok(id)
}

/// Ends a session for real, as the server sees it: a second connection attaches with the
/// session's id and password and sends closeSession. The original client is not told; it
/// finds out from the server (its connection is closed, and a reconnect is refused as
/// expired).
///
/// The client can take its session back first. The server keeps a session on the connection
/// that attached last and closes the other one; our attach cuts the client off, and a
/// client that reconnects at once can then close our connection before our closeSession
/// runs. Our connection then ends early, and the attach is tried again (at most
/// [`KILL_ATTEMPTS`] times, 20 ms apart). A later attempt that finds the session gone means
/// an earlier closeSession went through after all.
///
/// # Errors
/// I/O errors, or `InvalidData` when the server refuses the first attach (the session was
/// already gone).
pub async fn kill_session(addr: &str, session_id: i64, passwd: Bytes) -> io::Result<()> {
    let mut attempt = 1;
    loop {
        match attach_and_close(addr, session_id, passwd.clone()).await {
            Ok(true) => return Ok(()),
            Ok(false) if attempt > 1 => return Ok(()),
            Ok(false) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "session already gone",
                ))
            }
            Err(e) if taken_back(&e) && attempt < KILL_ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The handshake that attaches a connection to session `session_id` with its password (0 and
/// zeros: a new session), asking for a 30 s timeout.
pub fn attach_frame(session_id: i64, passwd: Bytes) -> Bytes {
    let connect = ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        timeout: 30_000,
        session_id,
        passwd,
        read_only: false,
    };
    frame(|b| connect.encode(b))
}

/// How many times [`kill_session`] attaches before it gives up.
pub const KILL_ATTEMPTS: u32 = 20;

/// Whether the server closed our attached connection early, as it does when the session's
/// own client attaches again.
fn taken_back(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
    )
}

/// One attach with the session's id and password, followed by closeSession. `Ok(true)` once
/// the closeSession reply is in; `Ok(false)` when the server refused the attach (the session
/// is gone).
async fn attach_and_close(addr: &str, session_id: i64, passwd: Bytes) -> io::Result<bool> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(&attach_frame(session_id, passwd)).await?;
    stream
        .write_all(&request_frame(1, OpCode::CloseSession, &()))
        .await?;
    let mut frames = FrameDecoder::default();
    let response = read_reply(&mut stream, &mut frames).await?;
    let response = ConnectResponse::decode_exact(&response).map_err(invalid)?;
    if response.is_expired() {
        return Ok(false);
    }
    // The closeSession reply, then EOF.
    read_reply(&mut stream, &mut frames).await.map(|_| true)
}

/// The next whole frame's payload from `io`, read through `frames` (which keeps any bytes
/// past it for the next call).
///
/// # Errors
/// `UnexpectedEof` when the peer closes first; `InvalidData` on a frame length over the
/// decoder's cap or negative; any read error.
pub async fn read_frame<R: AsyncRead + Unpin>(
    io: &mut R,
    frames: &mut FrameDecoder,
) -> io::Result<Bytes> {
    loop {
        if let Some(frame) = frames.next_frame().map_err(invalid)? {
            return Ok(frame);
        }
        if io.read_buf(frames.buffer_mut()).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "peer closed the connection",
            ));
        }
    }
}

/// [`read_frame`] from a server, giving up after 10 s.
async fn read_reply(stream: &mut TcpStream, frames: &mut FrameDecoder) -> io::Result<Bytes> {
    tokio::time::timeout(Duration::from_secs(10), read_frame(stream, frames))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no reply from the server"))?
}

fn invalid(e: impl std::error::Error + Send + Sync + 'static) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// The number of file descriptors this process has open (Linux `/proc/self/fd`).
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(Iterator::count)
        .unwrap_or(0)
}

/// The leak check run after a test (docs/faults.md #27): closes `client`, then asserts that nothing
/// is left — no request in flight or queued, no watcher, no caller waiting, the background
/// task stopped once the last clone is gone, and the process back to `fds_before` open
/// file descriptors.
///
/// # Panics
/// When anything leaked.
pub async fn assert_no_leaks(client: Client, fds_before: usize) {
    close_and_assert_stopped(client, || true).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while open_fds() > fds_before && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(open_fds(), fds_before, "file descriptors leaked");
}

/// The part of the leak checks common to both: closes `client`, asserts no request in flight
/// or queued and no watcher, then waits (up to 5 s) until the background task has stopped
/// once the last clone is gone and `settled` holds, and asserts the task stopped with no
/// caller waiting.
async fn close_and_assert_stopped(client: Client, settled: impl Fn() -> bool) {
    client.close().await.expect("close");
    let stats = client.stats();
    assert_eq!(
        (stats.in_flight, stats.queued, stats.watches),
        (0, 0, 0),
        "after close: {stats:?}"
    );
    let handle = client.stats_handle();
    drop(client);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while (handle.stats().driver_running || !settled()) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stats = handle.stats();
    assert!(
        !stats.driver_running,
        "the client task is still running: {stats:?}"
    );
    assert_eq!(stats.waiting_callers, 0, "{stats:?}");
}

/// The number of this process's TCP sockets whose remote port is one of `ports` (Linux
/// procfs): the client connections to those servers that are still open.
pub fn sockets_to(ports: &[u16]) -> usize {
    socket_lines(ports).len()
}

/// This process's TCP sockets whose remote port is one of `ports`, each as procfs shows it
/// (`local remote state …`, addresses and the state in hex: `01` established, `08` closed
/// by the server and not yet by us): what an assertion on [`sockets_to`] prints.
pub fn socket_lines(ports: &[u16]) -> Vec<String> {
    let ours: std::collections::HashSet<u64> = std::fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            l.to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect();
    // procfs reads the socket table a chunk at a time: read while sockets come and go (an
    // ensemble's own connections), it can list one socket twice. One line per inode.
    let mut seen = std::collections::HashSet::new();
    ["/proc/self/net/tcp", "/proc/self/net/tcp6"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .flat_map(|t| t.lines().skip(1).map(str::to_owned).collect::<Vec<_>>())
        .filter(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let remote_port = cols.get(2).and_then(|r| r.rsplit(':').next()).and_then(|p| u16::from_str_radix(p, 16).ok());
            let inode = cols.get(9).and_then(|i| i.parse::<u64>().ok());
            matches!((remote_port, inode), (Some(p), Some(i)) if ports.contains(&p) && ours.contains(&i) && seen.insert(i))
        })
        .map(|line| line.split_whitespace().skip(1).take(3).collect::<Vec<_>>().join(" "))
        .collect()
}

/// The leak check for tests whose servers are killed and restarted (which changes the
/// harness's own file descriptors): closes `client` and asserts nothing is left — no
/// request, watcher or waiting caller, the background task stopped, and no socket of this
/// process still connected to `ports`.
///
/// # Panics
/// When anything leaked.
pub async fn assert_no_leaks_to(client: Client, ports: &[u16]) {
    close_and_assert_stopped(client, || sockets_to(ports) == 0).await;
    assert_eq!(sockets_to(ports), 0, "sockets to the servers left open");
}

/// A client with the given session timeout, connected to `cs`.
///
/// # Panics
/// When it cannot connect.
pub async fn connect_with_timeout(cs: &str, session_timeout: Duration) -> Client {
    builder()
        .with_session_timeout(session_timeout)
        .connect(cs)
        .await
        .expect("connect")
}

/// A client with the given session timeout that starts a new session after an expiry
/// (session renewal on), connected to `cs`.
///
/// # Panics
/// When it cannot connect.
pub async fn connect_renewing(cs: &str, session_timeout: Duration) -> Client {
    builder()
        .with_session_timeout(session_timeout)
        .with_session_renewal(true)
        .connect(cs)
        .await
        .expect("connect")
}

/// The children of `dir`, sorted; empty when `dir` does not exist or cannot be read.
pub async fn sorted_children(client: &Client, dir: &str) -> Vec<String> {
    let mut children = client.get_children(dir).await.unwrap_or_default();
    children.sort();
    children
}

/// Polls (for up to 5 s) until `dir` has exactly `n` children, and returns them; background
/// cleanups are asynchronous, so tests wait for them rather than sample once.
pub async fn wait_for_children(client: &Client, dir: &str, n: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let children = sorted_children(client, dir).await;
        if children.len() == n || tokio::time::Instant::now() > deadline {
            return children;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits (at most 20 s) for `want` on `states`.
///
/// # Panics
/// When a terminal state comes first, or none comes in time.
pub async fn wait_for_state(states: &mut zkwire::StateStream, want: zkwire::SessionState) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match tokio::time::timeout(left, states.next()).await {
            Ok(Some(s)) if s == want => return,
            Ok(Some(s)) if s.is_terminal() => panic!("session ended: {s:?}"),
            Ok(Some(_)) => {}
            other => panic!("no {want:?}: {other:?}"),
        }
    }
}

/// The next state change on `states`.
///
/// # Panics
/// When none comes within `within`, or the stream ends.
pub async fn next_state(
    states: &mut zkwire::StateStream,
    within: Duration,
) -> zkwire::SessionState {
    tokio::time::timeout(within, states.next())
        .await
        .expect("a state change in time")
        .expect("open stream")
}

/// Cuts `client`'s connection through `proxy` and holds new ones off, submits a create of
/// `path` while disconnected, then lets the client reconnect; returns once the create has
/// succeeded. On a server that ends a session whose first request comes before its
/// authentication, this proves the new connection authenticated before sending it.
///
/// # Panics
/// When the create fails or the client does not reconnect within 20 s.
pub async fn create_queued_across_a_reconnect(
    client: &Client,
    proxy: &crate::proxy::FaultProxy,
    path: &str,
) {
    let mut states = client.state_stream();
    proxy.refuse(true);
    proxy.cut_all();
    wait_for_state(&mut states, zkwire::SessionState::Disconnected).await;
    let queued = {
        let (client, path) = (client.clone(), path.to_owned());
        let persistent = CreateOptions::persistent();
        tokio::spawn(async move { client.create(&path, b"q", &persistent).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.refuse(false);
    wait_for_state(&mut states, zkwire::SessionState::Connected).await;
    queued
        .await
        .expect("the create task")
        .expect("the queued create succeeds");
}

/// The check of a SASL client connected through `proxy` that its exchange runs again on a
/// reconnect before anything queued: [`create_queued_across_a_reconnect`] of a node named
/// after `name`, then asserts that the proxy saw `sasl_requests` SASL requests in all (`what`
/// says why), that the server knows the client by a `sasl` identity; deletes the node and
/// closes the client.
///
/// # Panics
/// When any of that fails.
pub async fn assert_sasl_runs_again_on_reconnect(
    client: Client,
    proxy: &crate::proxy::FaultProxy,
    name: &str,
    sasl_requests: usize,
    what: &str,
) {
    let path = format!("/{name}-queued-{}", std::process::id());
    create_queued_across_a_reconnect(&client, proxy, &path).await;
    assert_eq!(proxy.requests_seen(OpCode::Sasl), sasl_requests, "{what}");
    let who = client.who_am_i().await.expect("whoAmI");
    assert!(who.iter().any(|i| i.auth_scheme == "sasl"), "{who:?}");
    client.delete(&path, None).await.expect("delete");
    client.close().await.expect("close");
}

/// Creates a persistent node at `path` holding `data`.
///
/// # Panics
/// When the create fails.
pub async fn create_persistent(client: &Client, path: &str, data: &[u8]) {
    let persistent = CreateOptions::persistent();
    if let Err(e) = client.create(path, data, &persistent).await {
        panic!("create {path}: {e}");
    }
}

/// Asserts that the server knows `client` by the identity `scheme`:`user` (whoAmI).
///
/// # Panics
/// When it does not, or whoAmI fails.
pub async fn assert_known_as(client: &Client, scheme: &str, user: &str) {
    let who = client.who_am_i().await.expect("whoAmI");
    assert!(
        who.iter()
            .any(|i| i.auth_scheme == scheme && i.user == user),
        "{who:?}"
    );
}

/// The tickTime of the harness's servers ([`crate::server::ServerConfig`]'s default).
pub use zkwire_sandbox::server::DEFAULT_TICK as TEST_TICK;

/// A client builder for the harness's servers: their tick is [`TEST_TICK`], not
/// ZooKeeper's default 2 s, which the lease would otherwise assume.
pub fn builder() -> zkwire::ClientBuilder {
    Client::builder().with_server_tick(TEST_TICK)
}

/// Reports a figure the README quotes: prints `FIGURE <name> <value>` (which
/// `tests/readme-figures.sh --update` reads from a saved test log) and keeps the value in
/// `<target dir>/figures/<name>`, where `tests/readme-figures.sh --check` compares the latest
/// run with the README. Never fails the test: a figure that cannot be kept is only printed.
pub fn figure(name: &str, value: impl std::fmt::Display) {
    println!("FIGURE {name} {value}");
    // The test binary is <target dir>/<profile>/deps/<name>-<hash>.
    let exe = std::env::current_exe();
    if let Some(target) = exe.as_deref().ok().and_then(|exe| exe.ancestors().nth(3)) {
        let dir = target.join("figures");
        let kept = std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(dir.join(name), format!("{value}\n")));
        if let Err(e) = kept {
            println!("FIGURE {name}: not kept in {}: {e}", dir.display());
        }
    }
}
