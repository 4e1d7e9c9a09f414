//! Where the records of users' requests are encoded: bodies are split off a per-thread
//! buffer, so that a small request costs no allocation of its own for its body (one
//! allocation per chunk of bodies instead). See BENCHMARKS.md, "Request bodies".

use std::cell::RefCell;

use bytes::{Bytes, BytesMut};

use crate::jute::Encode;

/// The room a fresh chunk is given. A chunk is freed once every body split off it is gone
/// (written to the socket, or its request failed), and reused in place when that happens
/// before it is full.
const CHUNK: usize = 8 * 1024;

/// Bodies larger than this get an allocation of their own: a chunk is for the small,
/// frequent requests (paths, versions, a little data).
const SHARED_MAX: usize = CHUNK / 8;

thread_local! {
    static CHUNKS: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

/// `record` encoded, as [`Encode::to_bytes`] would (the same bytes).
pub(crate) fn encode<R: Encode>(record: &R) -> Bytes {
    let len = record.encoded_len();
    if len > SHARED_MAX {
        return record.to_bytes();
    }
    CHUNKS.with_borrow_mut(|chunk| {
        if chunk.capacity() - chunk.len() < len {
            chunk.reserve(CHUNK);
        }
        record.encode(chunk);
        chunk.split().freeze()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Many bodies, kept alive together across chunk changes, and some dropped in between
    /// (a chunk then reused in place): each keeps exactly the bytes it was encoded to.
    #[test]
    fn bodies_are_independent_and_exact() {
        let mut kept = Vec::new();
        for i in 0..5_000usize {
            let record = "p".repeat(i % 300) + &i.to_string();
            let body = encode(&record);
            assert_eq!(body, record.to_bytes(), "body {i}");
            if i % 3 == 0 {
                kept.push((record, body));
            }
            if i % 1_000 == 999 {
                kept.retain(|(_, body)| body.len() % 2 == 0);
            }
        }
        for (record, body) in &kept {
            assert_eq!(body, &record.to_bytes());
        }
        let large = "x".repeat(SHARED_MAX + 1);
        assert_eq!(encode(&large), large.to_bytes());
    }
}
