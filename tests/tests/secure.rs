//! Secured ensembles against real ZooKeeper servers: TLS with and without client certificates,
//! refused certificates, plaintext and TLS crossed, x509 identities and ACLs, SASL DIGEST-MD5,
//! and TLS through a restart and a leader kill with watches restored.
//!
//! The servers of this binary are started once and shared; each test works under its own
//! chroot. Certificates are generated per run (`zkwire_testing::tls`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use zkwire::error::ConnectError;
use zkwire::{
    Acl, ClientBuilder, CreateOptions, Error, EventType, Id, Perms, SessionState, TlsConfig,
};
use zkwire_testing::proxy::FaultProxy;
use zkwire_testing::server::{ServerConfig, ZkEnsemble, ZkServer};
use zkwire_testing::support::{
    assert_known_as, assert_sasl_runs_again_on_reconnect, create_persistent, wait_for_state,
};
use zkwire_testing::tls::{ClientAuth, StoreType, TlsMaterial};

const T: Duration = Duration::from_secs(10);
/// What "fails fast" means here: well under the session timeout a retry loop would run to.
const FAST: Duration = Duration::from_secs(3);
const CLIENT_ID: &str = "CN=zkwire-client,O=zkwire";

fn material() -> &'static TlsMaterial {
    static MATERIAL: OnceLock<TlsMaterial> = OnceLock::new();
    MATERIAL.get_or_init(|| TlsMaterial::generate().expect("openssl generates the certificates"))
}

/// TLS with client certificates required, PEM stores.
fn need_server() -> &'static ZkServer {
    static SERVER: OnceLock<ZkServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        let config = ServerConfig::default().tls(material(), ClientAuth::Need, StoreType::Pem);
        ZkServer::start_with(config).expect("a TLS server (clientAuth=need)")
    })
}

/// TLS with client certificates optional, PKCS12 stores.
fn want_server() -> &'static ZkServer {
    static SERVER: OnceLock<ZkServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        let config = ServerConfig::default().tls(material(), ClientAuth::Want, StoreType::Pkcs12);
        ZkServer::start_with(config).expect("a TLS server (clientAuth=want)")
    })
}

/// SASL DIGEST-MD5 required.
fn sasl_server() -> &'static ZkServer {
    static SERVER: OnceLock<ZkServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        let config = ServerConfig::default().sasl_digest(&[("bob", "bobsecret")], true);
        ZkServer::start_with(config).expect("a SASL server")
    })
}

fn secure(server: &ZkServer) -> String {
    server.secure_connect_string().expect("a secure port")
}

fn trusting() -> TlsConfig {
    TlsConfig::new().with_ca_file(material().ca_cert()).unwrap()
}

fn with_client_cert() -> TlsConfig {
    let m = material();
    trusting()
        .with_client_cert_files(m.client_cert(), m.client_key())
        .unwrap()
}

fn builder() -> ClientBuilder {
    zkwire_testing::support::builder().with_session_timeout(T)
}

/// Starts a blocking harness call without stalling the runtime's other tasks.
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    tokio::task::block_in_place(f)
}

/// A fresh chroot on `cs` for one test, created through `tls`.
async fn chroot(cs: &str, tls: TlsConfig, name: &str) -> String {
    let root = builder().with_tls(tls).connect(cs).await.unwrap();
    let path = format!("/{name}-{}", std::process::id());
    match root.create(&path, b"", &CreateOptions::persistent()).await {
        Ok(_) | Err(Error::NodeExists) => {}
        Err(e) => panic!("creating {path}: {e}"),
    }
    root.close().await.unwrap();
    format!("{cs}{path}")
}

/// Connecting must fail with a `ConnectError`, quickly.
async fn refused(builder: ClientBuilder, cs: &str) -> ConnectError {
    let started = Instant::now();
    let result = builder.connect(cs).await;
    let took = started.elapsed();
    match result {
        Err(Error::Connect(e)) => {
            println!("refused in {took:?}: {e}");
            assert!(took < FAST, "took {took:?} to refuse: {e}");
            e
        }
        other => panic!(
            "expected a connect error, got {:?}",
            other.map(|_| "a client")
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_client_certificate_and_its_x509_identity() {
    let server = need_server();
    let client = builder()
        .with_tls(with_client_cert())
        .connect(&secure(server))
        .await
        .unwrap();
    let who = client.who_am_i().await.unwrap();
    println!("whoAmI over mutual TLS: {who:?}");
    assert!(
        who.iter()
            .any(|i| i.auth_scheme == "x509" && i.user == CLIENT_ID),
        "{who:?}"
    );
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_needs_a_client_certificate_refuses_none_and_unknown_ones() {
    let server = need_server();
    let e = refused(builder().with_tls(trusting()), &secure(server)).await;
    assert!(matches!(e, ConnectError::TlsRefused { .. }), "{e:?}");
    let m = material();
    let stranger = trusting()
        .with_client_cert_files(m.other_client_cert(), m.other_client_key())
        .unwrap();
    let e = refused(builder().with_tls(stranger), &secure(server)).await;
    assert!(matches!(e, ConnectError::TlsRefused { .. }), "{e:?}");
}

/// `want`: no certificate is fine; with one, the x509 identity is enforced by ACLs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x509_acls_are_enforced_and_certificates_are_optional_with_want() {
    let server = want_server();
    let cs = chroot(&secure(server), trusting(), "x509").await;
    let holder = builder()
        .with_tls(with_client_cert())
        .connect(&cs)
        .await
        .unwrap();
    let anonymous = builder().with_tls(trusting()).connect(&cs).await.unwrap();
    let only_client = vec![Acl::new(Perms::ALL, Id::new("x509", CLIENT_ID))];
    holder
        .create(
            "/secret",
            b"s",
            &CreateOptions::persistent().with_acl(only_client),
        )
        .await
        .unwrap();
    assert_eq!(&holder.get_data("/secret").await.unwrap().0[..], b"s");
    assert_eq!(anonymous.get_data("/secret").await, Err(Error::NoAuth));
    let who = anonymous.who_am_i().await.unwrap();
    assert!(who.iter().all(|i| i.auth_scheme != "x509"), "{who:?}");
    holder.close().await.unwrap();
    anonymous.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_another_name_is_refused_unless_explicitly_allowed() {
    let server = want_server();
    // The server's certificate names `localhost` only, not 127.0.0.1.
    let by_ip = format!("127.0.0.1:{}", server.secure_port().unwrap());
    let e = refused(builder().with_tls(trusting()), &by_ip).await;
    assert!(
        matches!(&e, ConnectError::TlsCertificate { reason, .. }
            if reason == "not issued for host name 127.0.0.1: it names localhost; connect by one \
                         of those names"),
        "{e:?}"
    );
    let lax = trusting().danger_accept_any_hostname();
    let client = builder().with_tls(lax).connect(&by_ip).await.unwrap();
    client.exists("/").await.unwrap();
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_signed_by_an_unknown_ca_is_refused() {
    let server = want_server();
    let other = TlsConfig::new()
        .with_ca_file(material().other_ca_cert())
        .unwrap();
    let e = refused(builder().with_tls(other), &secure(server)).await;
    assert!(
        matches!(&e, ConnectError::TlsCertificate { reason, .. } if reason.contains("CA")),
        "{e:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_to_a_tls_port_and_tls_to_a_plaintext_port_fail_fast() {
    let server = want_server();
    let e = refused(builder(), &secure(server)).await;
    assert!(matches!(e, ConnectError::NotPlaintext { .. }), "{e:?}");
    let plain = format!("localhost:{}", server.port());
    let e = refused(builder().with_tls(trusting()), &plain).await;
    assert!(matches!(e, ConnectError::NotTls { .. }), "{e:?}");
    // The plaintext port itself is fine.
    let client = builder().connect(&plain).await.unwrap();
    client.close().await.unwrap();
}

/// A session over TLS rides through its server's restart (a cut through the fault proxy
/// first: byte-level faults work on TLS streams) with its watches restored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_sessions_survive_a_cut_and_a_restart_with_watches_restored() {
    let config = ServerConfig::default().tls(material(), ClientAuth::Want, StoreType::Pem);
    let mut server = blocking(|| ZkServer::start_with(config)).unwrap();
    let upstream = format!("127.0.0.1:{}", server.secure_port().unwrap());
    let proxy = FaultProxy::start(upstream.parse().unwrap()).await.unwrap();
    let via_proxy = format!("localhost:{}", proxy.addr().port());
    let client = builder()
        .with_tls(trusting())
        .with_connect_timeout(T / 2)
        .connect(&via_proxy)
        .await
        .unwrap();
    create_persistent(&client, "/w", b"").await;
    let session = client.session_id();
    let (_, _, first) = client.get_data_and_watch("/w").await.unwrap();
    let mut states = client.state_stream();

    proxy.cut_all();
    wait_for_state(&mut states, SessionState::Disconnected).await;
    wait_for_state(&mut states, SessionState::Connected).await;
    client.set_data("/w", b"1", None).await.unwrap();
    let fired = tokio::time::timeout(T, first)
        .await
        .expect("the watch fires");
    assert_eq!(fired.event_type, EventType::NodeDataChanged);

    let (_, _, second) = client.get_data_and_watch("/w").await.unwrap();
    blocking(|| server.restart()).unwrap();
    wait_for_state(&mut states, SessionState::Disconnected).await;
    wait_for_state(&mut states, SessionState::Connected).await;
    assert_eq!(
        client.session_id(),
        session,
        "same session after the restart"
    );
    client.set_data("/w", b"2", None).await.unwrap();
    let fired = tokio::time::timeout(T, second)
        .await
        .expect("the watch fires");
    assert_eq!(fired.event_type, EventType::NodeDataChanged);
    assert!(
        proxy.connections() >= 3,
        "cut, restart: three TLS connections"
    );
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_ensemble_leader_kill_with_watches_restored() {
    let config = ServerConfig::default().tls(material(), ClientAuth::Need, StoreType::Pem);
    let mut ensemble = blocking(|| ZkEnsemble::start_with(3, config)).unwrap();
    let client = builder()
        .with_tls(with_client_cert())
        .connect(&ensemble.secure_connect_string().unwrap())
        .await
        .unwrap();
    create_persistent(&client, "/leader-kill", b"").await;
    let (_, _, watch) = client.get_data_and_watch("/leader-kill").await.unwrap();
    let leader = blocking(|| ensemble.leader()).expect("a leader");
    blocking(|| ensemble.kill(leader)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match client.set_data("/leader-kill", b"after", None).await {
            Ok(_) => break,
            Err(e) if e.is_retryable() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("no write after the leader kill: {e}"),
        }
    }
    let fired = tokio::time::timeout(T, watch)
        .await
        .expect("the watch fires");
    assert_eq!(fired.event_type, EventType::NodeDataChanged);
    let who = client.who_am_i().await.unwrap();
    assert!(who.iter().any(|i| i.auth_scheme == "x509"), "{who:?}");
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_digest_authenticates_and_a_wrong_password_is_terminal() {
    let server = sasl_server();
    let client = builder()
        .with_sasl_digest("bob", "bobsecret")
        .connect(&server.connect_string())
        .await
        .unwrap();
    assert_known_as(&client, "sasl", "bob").await;
    client.close().await.unwrap();

    let started = Instant::now();
    let wrong = builder()
        .with_sasl_digest("bob", "wrong")
        .connect(&server.connect_string())
        .await;
    assert_eq!(wrong.err(), Some(Error::AuthFailed));
    assert!(started.elapsed() < FAST, "{:?}", started.elapsed());

    // Without SASL the server closes the session at the first request.
    let bare = builder().connect(&server.connect_string()).await.unwrap();
    assert!(bare.exists("/").await.unwrap_err().is_terminal());
}

/// After a reconnect the exchange runs again before anything else: a request queued while
/// disconnected succeeds (the server answers a request sent before SASL with an error that
/// ends the session).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_runs_again_on_reconnect_before_queued_requests() {
    let server = sasl_server();
    let proxy = FaultProxy::start(server.addr()).await.unwrap();
    let client = builder()
        .with_sasl_digest("bob", "bobsecret")
        .connect(&proxy.connect_string())
        .await
        .unwrap();
    assert_sasl_runs_again_on_reconnect(client, &proxy, "sasl", 4, "two exchanges").await;
}
