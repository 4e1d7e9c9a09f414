//! Random version-4 UUIDs and Curator's protected node names (`_c_<uuid>-`).
//!
//! No UUID crate: 128 random bits are two SipHash-1-3 outputs under std's `RandomState`
//! (keys drawn from the OS generator once per thread, then advanced for every new state), of
//! a process-wide counter and the current time, then of one byte more. That is unpredictable
//! enough for a guid, whose only job is to be unique among the contenders of one lock
//! directory.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use zkwire::{path, Client, Error, Stat};

/// The prefix Curator's protection mode puts before the uuid (`ProtectedUtils`).
pub(crate) const PROTECTED_PREFIX: &str = "_c_";

/// A random (version 4, RFC 4122 variant) UUID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Uuid([u8; 16]);

impl Uuid {
    /// A fresh random UUID.
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
        let mut text = [b'-'; 36];
        let mut at = 0;
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                at += 1; // the dash already there
            }
            text[at] = HEX[usize::from(b >> 4)];
            text[at + 1] = HEX[usize::from(b & 0x0f)];
            at += 2;
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

fn random_u64_pair() -> [u64; 2] {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u128(nanos);
    let first = hasher.finish();
    // The keyed hash of a longer message: as unpredictable as the first, and different.
    hasher.write_u8(1);
    [first, hasher.finish()]
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
            if stat.ephemeral_owner == session && session != 0 {
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
