//! Version-4 UUIDs and Curator's protected node names (`_c_<uuid>-`).
//!
//! No UUID crate. A guid's only job is to be unique: among the contenders of one lock
//! directory, or among a service's instances. It is not a secret (anyone who can list the
//! directory reads it). So its 128 bits are two outputs of a cheap mixing function (the
//! finaliser of SplitMix64, a bijection on 64 bits), not of a cryptographic hash:
//! - the first mixes a process-wide counter into a 64-bit key drawn from the OS generator once
//!   per process (through std's `RandomState`), so no two draws of a process mix the same
//!   input;
//! - the second mixes another such key with the current time and the first, so that a forked
//!   process, which inherits the counter and the keys, still draws other guids.
//!
//! Across processes, two guids agree by chance only, as two random ones would.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use zkwire::{path, Client, Error, Stat};

/// The prefix Curator's protection mode puts before the uuid (`ProtectedUtils`).
pub(crate) const PROTECTED_PREFIX: &str = "_c_";

/// A version-4 (RFC 4122 variant) UUID: 122 bits that look random, and 6 that say so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Uuid([u8; 16]);

impl Uuid {
    /// A fresh UUID (the module's docs say how it is drawn).
    pub(crate) fn new_v4() -> Self {
        let [hi, lo] = random_u64_pair();
        let mut bytes = [0; 16];
        bytes[..8].copy_from_slice(&hi.to_be_bytes());
        bytes[8..].copy_from_slice(&lo.to_be_bytes());
        bytes[6] = (bytes[6] & 0x0f) | 0x40; // version 4
        bytes[8] = (bytes[8] & 0x3f) | 0x80; // variant 10xx
        Self(bytes)
    }

    /// The protected-name prefix of this guid: `_c_<uuid>-` (40 characters), in one
    /// allocation (every acquire makes one).
    pub(crate) fn protected_prefix(&self) -> String {
        let mut prefix = String::with_capacity(PROTECTED_PREFIX.len() + 37);
        prefix.push_str(PROTECTED_PREFIX);
        self.push_to(&mut prefix);
        prefix.push('-');
        prefix
    }

    /// Appends the lowercase 8-4-4-4-12 hex form, as Java's `UUID.toString()`.
    fn push_to(&self, out: &mut String) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        // Each group of digits: where it starts in the text, and its range among the 32.
        const GROUPS: [(usize, std::ops::Range<usize>); 5] = [
            (0, 0..8),
            (9, 8..12),
            (14, 12..16),
            (19, 16..20),
            (24, 20..32),
        ];
        let mut digits = [0; 32];
        for (pair, b) in digits.chunks_exact_mut(2).zip(self.0) {
            pair[0] = HEX[usize::from(b >> 4)];
            pair[1] = HEX[usize::from(b & 0x0f)];
        }
        let mut text = [b'-'; 36];
        for (at, range) in GROUPS {
            text[at..at + range.len()].copy_from_slice(&digits[range]);
        }
        // Hex digits and dashes only, so always UTF-8.
        out.push_str(std::str::from_utf8(&text).unwrap_or_default());
    }
}

impl fmt::Display for Uuid {
    /// Lowercase 8-4-4-4-12 hex, as Java's `UUID.toString()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = String::with_capacity(36);
        self.push_to(&mut text);
        f.write_str(&text)
    }
}

/// 128 bits for a guid (see the module's docs for why a mixing function is enough).
fn random_u64_pair() -> [u64; 2] {
    // Not a registry: entropy and a count that make draws differ, owned by no lock or client
    // (a guid must differ across clients too, so a per-client copy would gain nothing).
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static KEYS: OnceLock<[u64; 2]> = OnceLock::new();
    let keys = KEYS.get_or_init(|| {
        let state = RandomState::new();
        [state.hash_one(0_u8), state.hash_one(1_u8)]
    });
    // An odd multiplier is a bijection too, and spreads consecutive counts over all 64 bits.
    let count = COUNTER
        .fetch_add(1, Ordering::Relaxed)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let first = mix(keys[0] ^ count);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    // The time's low 64 bits are the ones that differ between two draws.
    let second = mix(keys[1] ^ (nanos as u64) ^ first.rotate_left(32));
    [first, second]
}

/// SplitMix64's finaliser: a bijection on 64 bits whose every output bit depends on every
/// input bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The children of `dir` named with `prefix` whose ephemeral owner is our current session,
/// after a `sync(dir)` so that a lagging server cannot hide a create that applied
/// (CURATOR-264). A node of another session — an old session of ours, or anyone else
/// reusing the guid — is never adopted (CURATOR-498).
pub(crate) async fn owned_by_guid(
    client: &Client,
    dir: &str,
    prefix: &str,
) -> Result<Vec<(String, Stat)>, Error> {
    match client.sync(dir).await {
        Ok(()) | Err(Error::NoNode) => {}
        Err(e) => return Err(e),
    }
    let mut children = match client.get_children(dir).await {
        Ok(children) => children,
        Err(Error::NoNode) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    children.retain(|c| c.starts_with(prefix));
    children.sort();
    let session = client.session_id();
    let mut owned = Vec::new();
    for name in children {
        if let Some(stat) = client.exists(&path::join(dir, &name)).await? {
            if stat.is_owned_by(session) {
                owned.push((name, stat));
            }
        }
    }
    Ok(owned)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn format_version_and_variant() {
        let u = Uuid::new_v4().to_string();
        assert_eq!(u.len(), 36);
        let groups: Vec<&str> = u.split('-').collect();
        assert_eq!(
            groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(
            u.bytes()
                .all(|b| b == b'-' || b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{u}"
        );
        assert_eq!(&u[14..15], "4", "version nibble: {u}");
        assert!(
            matches!(&u[19..20], "8" | "9" | "a" | "b"),
            "variant nibble: {u}"
        );
    }

    #[test]
    fn text_is_java_uuid_to_string() {
        let bytes = [
            0xf2, 0x90, 0x14, 0x0d, 0x98, 0x56, 0x42, 0xad, 0xb9, 0xbf, 0x34, 0x8f, 0xfc, 0x08,
            0x60, 0x62,
        ];
        assert_eq!(
            Uuid(bytes).to_string(),
            "f290140d-9856-42ad-b9bf-348ffc086062"
        );
        assert_eq!(
            Uuid(bytes).protected_prefix(),
            "_c_f290140d-9856-42ad-b9bf-348ffc086062-"
        );
    }

    #[test]
    fn unique_and_protected() {
        let ids: HashSet<String> = (0..10_000).map(|_| Uuid::new_v4().to_string()).collect();
        assert_eq!(ids.len(), 10_000);
        // ProtectedUtils: "_c_" + 36-character uuid + "-", 40 characters, as in CURATOR-527's
        // "_c_f290140d-9856-42ad-b9bf-348ffc086062-lock-0000000759".
        let p = Uuid::new_v4().protected_prefix();
        assert_eq!(p.len(), 40);
        assert!(p.starts_with("_c_") && p.ends_with('-'), "{p}");
        let shape = |s: &str| {
            s.bytes()
                .map(|b| if b == b'-' { '-' } else { 'x' })
                .collect::<String>()
        };
        assert_eq!(shape(&p), shape("_c_f290140d-9856-42ad-b9bf-348ffc086062-"));
    }
}
