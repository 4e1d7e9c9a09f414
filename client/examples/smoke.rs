//! Quick smoke run against a server given as the first argument.
use zkwire::{AddWatchMode, Client, CreateOptions, Op};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), zkwire::Error> {
    let cs = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:2181".into());
    let client = Client::connect(&cs).await?;
    println!(
        "session {:#x} state {:?}",
        client.session_id(),
        client.state()
    );
    let _ = client.delete("/smoke/child", None).await;
    let _ = client.delete("/smoke", None).await;
    let (path, stat) = client
        .create("/smoke", b"hello", &CreateOptions::persistent())
        .await?;
    println!("created {path} czxid {}", stat.czxid);
    let (data, _, watcher) = client.get_data_and_watch("/smoke").await?;
    println!("data {:?}", data);
    let mut rec = client
        .add_watch("/smoke", AddWatchMode::PersistentRecursive)
        .await?;
    client.set_data("/smoke", b"world", None).await?;
    println!("watch fired: {:?}", watcher.await);
    println!("recursive: {:?}", rec.next().await);
    let results = client
        .multi(&[
            Op::check("/smoke", Some(1)),
            Op::create("/smoke/child", &b"c"[..], &CreateOptions::ephemeral()),
        ])
        .await?;
    println!("multi: {results:?}");
    println!("recursive: {:?}", rec.next().await);
    println!("children: {:?}", client.get_children("/smoke").await?);
    println!("ephemerals: {:?}", client.get_ephemerals("/").await?);
    println!("whoami: {:?}", client.who_am_i().await?);
    let err = client
        .multi(&[Op::check("/smoke", Some(99)), Op::delete("/smoke", None)])
        .await;
    println!("failed multi: {err:?}");
    let big = vec![0u8; 2 << 20];
    println!(
        "too large: {:?}",
        client.set_data("/smoke", &big, None).await
    );
    println!(
        "still works: {:?}",
        client.exists("/smoke").await?.map(|s| s.version)
    );
    client.close().await?;
    println!("after close: {:?}", client.exists("/smoke").await);
    Ok(())
}
