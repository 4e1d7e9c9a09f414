//! SASL GSSAPI (Kerberos) against real ZooKeeper servers and a throwaway MIT KDC
//! (`zkwire_testing::kerberos`): identity and `sasl:` ACLs, missing credentials and unknown
//! servers refused at once, and the exchange run again on reconnect before queued requests.
//!
//! The Kerberos library reads its configuration, ticket cache and client keytab from the
//! environment: this binary sets them once, for principal `bob`, before any client exists
//! (every test starts by asking for the realm, so no test thread runs anything else while
//! they are set). The servers are started once and shared; each test uses paths of its own.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use zkwire::error::ConnectError;
use zkwire::{Acl, ClientBuilder, CreateOptions, Error, Id, Kerberos, Perms};
use zkwire_testing::kerberos::{Kdc, REALM};
use zkwire_testing::proxy::FaultProxy;
use zkwire_testing::server::{ServerConfig, ZkServer};
use zkwire_testing::support::assert_sasl_runs_again_on_reconnect;

const T: Duration = Duration::from_secs(10);
/// What "fails fast" means here: well under the session timeout a retry loop would run to.
const FAST: Duration = Duration::from_secs(3);

/// The realm, with this process set up to authenticate as `bob`.
fn kdc() -> &'static Kdc {
    static KDC: OnceLock<Kdc> = OnceLock::new();
    KDC.get_or_init(|| {
        let kdc = Kdc::start().expect("a KDC (Debian: krb5-kdc, krb5-admin-server)");
        let keytab = kdc.add_principal("bob").expect("principal bob");
        for (key, value) in kdc.client_env(&keytab, "bob") {
            std::env::set_var(key, value);
        }
        kdc
    })
}

/// Kerberos accepted, not required.
fn open_server() -> &'static ZkServer {
    static SERVER: OnceLock<ZkServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        let config = ServerConfig::default().sasl_kerberos(kdc(), false);
        ZkServer::start_with(config).expect("a Kerberos server")
    })
}

/// Kerberos required (`sessionRequireClientSASLAuth`).
fn strict_server() -> &'static ZkServer {
    static SERVER: OnceLock<ZkServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        let config = ServerConfig::default().sasl_kerberos(kdc(), true);
        ZkServer::start_with(config).expect("a Kerberos-only server")
    })
}

/// The server's principal is `zookeeper/localhost`: connect by that name.
fn by_name(server: &ZkServer) -> String {
    format!("localhost:{}", server.addr().port())
}

fn builder() -> ClientBuilder {
    zkwire_testing::support::builder().with_session_timeout(T)
}

fn blocking<R>(f: impl FnOnce() -> R) -> R {
    tokio::task::block_in_place(f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kerberos_identity_and_sasl_acls() {
    let server = blocking(open_server);
    let bob = builder()
        .with_sasl_kerberos(Kerberos::new())
        .connect(&by_name(server))
        .await
        .unwrap();
    let who = bob.who_am_i().await.unwrap();
    println!("bob is {who:?}");
    let principal = format!("bob@{REALM}");
    assert!(
        who.iter()
            .any(|i| i.auth_scheme == "sasl" && i.user == principal),
        "{who:?}"
    );

    let path = format!("/kerberos-acl-{}", std::process::id());
    let only_bob = vec![Acl::new(Perms::ALL, Id::new("sasl", &principal))];
    bob.create(
        &path,
        b"bob's",
        &CreateOptions::persistent().with_acl(only_bob),
    )
    .await
    .unwrap();
    let anonymous = builder().connect(&by_name(server)).await.unwrap();
    assert_eq!(anonymous.get_data(&path).await.err(), Some(Error::NoAuth));
    assert_eq!(bob.get_data(&path).await.unwrap().0, b"bob's".as_slice());
    bob.delete(&path, None).await.unwrap();
    anonymous.close().await.unwrap();
    bob.close().await.unwrap();
}

/// No credentials for the principal asked for, or no such service in the realm: the session
/// ends at once, without a retry loop, and the error says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_credentials_and_unknown_servers_fail_fast() {
    let server = blocking(strict_server);
    for (what, kerberos, reason_part) in [
        (
            "a principal without credentials",
            Kerberos::new().with_principal(format!("nobody@{REALM}")),
            "no Kerberos credentials for nobody@ZKWIRE.TEST",
        ),
        (
            "a service the realm does not know",
            Kerberos::new().with_service("nosuchservice"),
            "nosuchservice/localhost@ZKWIRE.TEST not found",
        ),
        (
            "a host the realm does not know",
            Kerberos::new().with_server_host("elsewhere"),
            "zookeeper/elsewhere@ZKWIRE.TEST not found",
        ),
    ] {
        let started = Instant::now();
        let result = builder()
            .with_sasl_kerberos(kerberos)
            .connect(&by_name(server))
            .await;
        let took = started.elapsed();
        let Err(err) = result else {
            panic!("{what}: connected")
        };
        println!("{what}: {err} (in {took:?})");
        assert!(
            matches!(&err, Error::Connect(ConnectError::Sasl { reason, .. }) if reason.contains(reason_part)),
            "{what}: {err:?}"
        );
        assert!(took < FAST, "{what}: took {took:?}");
    }
}

/// After a reconnect the exchange runs again before anything else: a request queued while
/// disconnected succeeds (on this server a request before SASL would end the session), and
/// the proxy sees two whole exchanges of three tokens each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kerberos_runs_again_on_reconnect_before_queued_requests() {
    let server = blocking(strict_server);
    let proxy = FaultProxy::start(server.addr()).await.unwrap();
    // The proxy listens on an IP address; the server's principal is still `localhost`'s.
    let client = builder()
        .with_sasl_kerberos(Kerberos::new().with_server_host("localhost"))
        .connect(&proxy.connect_string())
        .await
        .unwrap();
    assert_sasl_runs_again_on_reconnect(
        client,
        &proxy,
        "kerberos",
        6,
        "two exchanges of three tokens",
    )
    .await;
}
