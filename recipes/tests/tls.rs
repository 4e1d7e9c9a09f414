//! The mutex over TLS: contention between sessions on a server's `secureClientPort`, with
//! client certificates required.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::join_all;
use zkwire::TlsConfig;
use zkwire_recipes::Mutex;
use zkwire_testing::server::{ServerConfig, ZkServer};
use zkwire_testing::tls::{ClientAuth, StoreType, TlsMaterial};

/// 4 sessions over mutual TLS × 50 acquisitions of one mutex, holds of 0–3 ms: never two
/// holders, every acquisition granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutex_contention_over_tls() {
    const SESSIONS: usize = 4;
    const CYCLES: usize = 50;
    let material = TlsMaterial::generate().expect("openssl generates the certificates");
    let config = ServerConfig::default().tls(&material, ClientAuth::Need, StoreType::Pem);
    let server = tokio::task::block_in_place(|| ZkServer::start_with(config)).unwrap();
    let tls = TlsConfig::new()
        .with_ca_file(material.ca_cert())
        .unwrap()
        .with_client_cert_files(material.client_cert(), material.client_key())
        .unwrap();
    let cs = server.secure_connect_string().unwrap();
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let granted = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for s in 0..SESSIONS {
        let client = zkwire_testing::support::builder()
            .with_session_timeout(Duration::from_secs(10))
            .with_tls(tls.clone())
            .connect(&cs)
            .await
            .unwrap();
        let (inside, overlaps, granted) = (inside.clone(), overlaps.clone(), granted.clone());
        tasks.push(tokio::spawn(async move {
            let mutex = Mutex::new(client.clone(), "/tls/mutex");
            for step in 0..CYCLES {
                let guard = mutex.lock().await.unwrap();
                if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                granted.fetch_add(1, Ordering::SeqCst);
                let hold = u64::try_from((step + s) % 4).unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(hold)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.release().await.unwrap();
            }
            client.close().await.unwrap();
        }));
    }
    join_all(tasks).await;
    let elapsed = started.elapsed();
    let total = granted.load(Ordering::SeqCst);
    println!(
        "{total} acquisitions over TLS in {elapsed:?} ({:.0}/s)",
        total as f64 / elapsed.as_secs_f64()
    );
    assert_eq!(total, SESSIONS * CYCLES);
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two holders at once");
}
