//! SASL DIGEST-MD5 with passwords beyond ASCII, against a real ZooKeeper server: the Java
//! side hashes credentials as ISO 8859-1 when every character fits and as UTF-8 only when
//! one does not (`docs/security.md`, "SASL"), and the client must hash them the same way.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::sync::OnceLock;
use std::time::Duration;

use zkwire::{ClientBuilder, Error};
use zkwire_testing::server::{ServerConfig, ZkServer};
use zkwire_testing::support::assert_known_as;

const T: Duration = Duration::from_secs(10);

/// A password whose every character is in Latin-1, but not in ASCII: hashed as ISO 8859-1.
const LATIN1_PASSWORD: &str = "pässwörd";
/// A password with characters outside Latin-1: hashed as UTF-8.
const CYRILLIC_PASSWORD: &str = "пароль";

/// SASL DIGEST-MD5 required, with one user per charset case.
fn server() -> &'static ZkServer {
    static SERVER: OnceLock<ZkServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        let users = [("latin", LATIN1_PASSWORD), ("cyrillic", CYRILLIC_PASSWORD)];
        let config = ServerConfig::default().sasl_digest(&users, true);
        ZkServer::start_with(config).expect("a SASL server")
    })
}

fn builder() -> ClientBuilder {
    zkwire_testing::support::builder().with_session_timeout(T)
}

/// Connects as `user`, then proves the session is usable and authenticated as `sasl:<user>`
/// (the server requires SASL: an unauthenticated request would end the session).
async fn connects_as(user: &str, password: impl AsRef<[u8]>) {
    let server = tokio::task::block_in_place(server);
    let client = builder()
        .with_sasl_digest(user, password)
        .connect(&server.connect_string())
        .await
        .unwrap_or_else(|e| panic!("{user} authenticates: {e}"));
    assert_known_as(&client, "sasl", user).await;
    assert!(client.exists("/").await.unwrap().is_some());
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latin1_password_authenticates() {
    connects_as("latin", LATIN1_PASSWORD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_beyond_latin1_authenticates() {
    connects_as("cyrillic", CYRILLIC_PASSWORD).await;
}

/// Bytes that are not UTF-8 are hashed as given: ISO 8859-1 bytes name the same password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latin1_bytes_authenticate_as_given() {
    let latin1: Vec<u8> = LATIN1_PASSWORD
        .chars()
        .map(|c| u8::try_from(u32::from(c)).unwrap())
        .collect();
    assert!(std::str::from_utf8(&latin1).is_err());
    connects_as("latin", latin1).await;
}

/// The encoding is no loophole: a near miss is still refused. `??????` is what `пароль`
/// would hash as had the server not offered `charset=utf-8`: its refusal shows the UTF-8 path
/// was taken on both sides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_near_miss_is_refused() {
    let server = tokio::task::block_in_place(server);
    let near_misses = [
        ("latin", "passwörd"),
        ("cyrillic", "парол?"),
        ("cyrillic", "??????"),
    ];
    for (user, wrong) in near_misses {
        let refused = builder()
            .with_sasl_digest(user, wrong)
            .connect(&server.connect_string())
            .await;
        assert_eq!(refused.err(), Some(Error::AuthFailed), "{user} / {wrong}");
    }
}
