//! `make demo`: starts a real ZooKeeper server, performs a handshake by hand with zkwire's
//! codec, then runs a client session against it and prints what happened.
#![allow(clippy::print_stdout)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use zkwire::jute::{encode_frame, Decode, Encode, FrameDecoder};
use zkwire::proto::{ConnectRequest, ConnectResponse};
use zkwire::{AddWatchMode, Client, CreateMode, CreateOptions, Error, Op};
use zkwire_testing::server::ZkServer;

fn raw_handshake(addr: &str) -> Result<ConnectResponse, Box<dyn std::error::Error>> {
    let request = ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        timeout: 10_000,
        session_id: 0,
        passwd: Bytes::from_static(&[0; 16]),
        read_only: false,
    };
    let mut out = BytesMut::new();
    encode_frame(&mut out, |buf| request.encode(buf));
    println!("-> ConnectRequest, {} bytes on the wire: {}", out.len(), hex(&out));
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(&out)?;
    let mut decoder = FrameDecoder::default();
    let mut buf = [0u8; 512];
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Err("server closed the connection".into());
        }
        decoder.push(&buf[..n]);
        if let Some(frame) = decoder.next_frame()? {
            println!("<- ConnectResponse, {} bytes: {}", frame.len(), hex(&frame));
            return Ok(ConnectResponse::decode_exact(&frame)?);
        }
    }
}

async fn session(connect_string: &str) -> Result<(), Error> {
    let client = Client::connect(&format!("{connect_string}/")).await?;
    println!("client session {:#x}: {:?}", client.session_id(), client.state());
    let mut tree = client.add_watch("/demo", AddWatchMode::PersistentRecursive).await?;
    client.create("/demo", b"", &CreateOptions::new(CreateMode::Persistent)).await?;
    let (job, _) = client
        .create("/demo/job-", b"payload", &CreateOptions::new(CreateMode::EphemeralSequential))
        .await?;
    let (data, stat, changed) = client.get_data_and_watch(&job).await?;
    println!("created {job} ({} bytes, czxid {})", data.len(), stat.czxid);
    client.set_data(&job, b"done", Some(0)).await?;
    println!("one-shot watch: {:?} on {}", changed.await.event_type, job);
    let results = client.multi(&[Op::check(&job, 1), Op::delete(&job, Some(1))]).await?;
    println!("multi: {results:?}");
    for _ in 0..4 {
        if let Some(e) = tree.next().await {
            println!("recursive watch: {:?} {}", e.event_type, e.path);
        }
    }
    client.delete("/demo", None).await?;
    client.close().await?;
    println!("closed: {:?}", client.state());
    Ok(())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = ZkServer::start()?;
    println!("ZooKeeper serving on {} (log: {})", server.connect_string(), server.log_path().display());
    let response = raw_handshake(&server.connect_string())?;
    println!(
        "decoded: session {:#x}, negotiated timeout {} ms, read-only byte {:?}",
        response.session_id, response.timeout, response.read_only
    );
    session(&server.connect_string()).await?;
    println!("demo finished: handshake encoded and decoded, client session ran against ZooKeeper");
    Ok(())
}
