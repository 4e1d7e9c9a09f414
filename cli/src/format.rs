//! Human and JSON renderings of Stat, ACLs, data and times; parsing of ACL specs.

use std::time::{Duration, UNIX_EPOCH};

use base64::prelude::{Engine, BASE64_STANDARD};
use serde_json::{json, Value};
use zkwire::{Acl, Id, Perms, Stat};

use crate::fail::Failure;

/// A Stat as `name = value` lines, as ZooKeeper's own shell prints it.
pub(crate) fn stat_lines(stat: &Stat) -> String {
    [
        format!("cZxid = {:#x}", stat.czxid),
        format!("ctime = {}", utc_time(stat.ctime)),
        format!("mZxid = {:#x}", stat.mzxid),
        format!("mtime = {}", utc_time(stat.mtime)),
        format!("pZxid = {:#x}", stat.pzxid),
        format!("cversion = {}", stat.cversion),
        format!("dataVersion = {}", stat.version),
        format!("aclVersion = {}", stat.aversion),
        format!("ephemeralOwner = {}", session_id(stat.ephemeral_owner)),
        format!("dataLength = {}", stat.data_length),
        format!("numChildren = {}", stat.num_children),
    ]
    .join("\n")
}

/// A session id as zkw writes it everywhere: `0x` and 16 lowercase hex digits, so that ids
/// from the shell, `stat` and `locks` can be compared (and grepped) as text.
pub(crate) fn session_id(id: i64) -> String {
    format!("{id:#018x}")
}

/// A Stat as a JSON object (times in ms since the epoch). The ephemeral owner is a session id
/// in the form `locks` and `members` print it, a hex string: as a JSON number it would lose
/// digits in JavaScript and older jq (a session id is over 2^53 for any server id but 0).
pub(crate) fn stat_json(stat: &Stat) -> Value {
    json!({
        "czxid": stat.czxid,
        "mzxid": stat.mzxid,
        "pzxid": stat.pzxid,
        "ctime": stat.ctime,
        "mtime": stat.mtime,
        "version": stat.version,
        "cversion": stat.cversion,
        "aversion": stat.aversion,
        "ephemeral_owner": session_id(stat.ephemeral_owner),
        "data_length": stat.data_length,
        "num_children": stat.num_children,
    })
}

/// Node data for JSON, always the same two keys: `data`, the bytes as text when they are
/// valid UTF-8 (else `null`), and `data_base64`, the bytes in standard base64.
pub(crate) fn data_json(data: &[u8]) -> [(&'static str, Value); 2] {
    let text = std::str::from_utf8(data).map_or(Value::Null, Value::from);
    [
        ("data", text),
        ("data_base64", Value::from(BASE64_STANDARD.encode(data))),
    ]
}

/// The latest time [`utc_time`] writes as a date: 9999-12-31T23:59:59.999Z.
const LAST_DATE_MS: i64 = 253_402_300_799_999;

/// Milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ` (RFC 3339); times before 1970
/// or after 9999, which no server writes, as the number of milliseconds.
pub(crate) fn utc_time(ms: i64) -> String {
    match u64::try_from(ms) {
        Ok(positive) if ms <= LAST_DATE_MS => {
            let time = UNIX_EPOCH + Duration::from_millis(positive);
            humantime::format_rfc3339_millis(time).to_string()
        }
        _ => format!("{ms}ms since the epoch"),
    }
}

/// Permissions as ZooKeeper's letters, in its order: `cdrwa`.
pub(crate) fn perms_letters(perms: Perms) -> String {
    PERM_LETTERS
        .iter()
        .filter(|(_, p)| perms.contains(*p))
        .map(|(c, _)| *c)
        .collect()
}

const PERM_LETTERS: [(char, Perms); 5] = [
    ('c', Perms::CREATE),
    ('d', Perms::DELETE),
    ('r', Perms::READ),
    ('w', Perms::WRITE),
    ('a', Perms::ADMIN),
];

/// An ACL entry as `scheme:id:perms` (the form `acl set` takes), control characters in the
/// server's strings escaped: they must not reach the terminal.
pub(crate) fn acl_entry(acl: &Acl) -> String {
    format!(
        "{}:{}:{}",
        data_line(acl.id.scheme.as_bytes()),
        data_line(acl.id.id.as_bytes()),
        perms_letters(acl.perms)
    )
}

/// An ACL entry as a JSON object.
pub(crate) fn acl_json(acl: &Acl) -> Value {
    json!({
        "scheme": acl.id.scheme,
        "id": acl.id.id,
        "perms": perms_letters(acl.perms),
    })
}

/// How `acl set` reads digest entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DigestIds {
    /// `digest:USER:HASH:PERMS`, set as given.
    Hashed,
    /// `digest:USER:PASSWORD:PERMS`: the hash is computed (`--plain-password`).
    PlainPassword,
}

/// Parses `scheme:id:perms[,scheme:id:perms…]`; the id may contain colons
/// (`digest:user:hash:cdrwa`, `ip:10.0.0.0/8:r`, `auth::cdrwa`). Returns the entries and a
/// warning for each digest id that does not look hashed.
///
/// # Errors
/// A usage failure naming the bad entry (never echoing a plain password).
pub(crate) fn parse_acl(
    spec: &str,
    digests: DigestIds,
) -> Result<(Vec<Acl>, Vec<String>), Failure> {
    let mut warnings = Vec::new();
    let acl = spec
        .split(',')
        .map(|entry| {
            // `a:b:r, c:d:w` reads as two entries, not a scheme " c".
            let acl = parse_acl_entry(entry.trim(), digests)?;
            if acl.id.scheme == "digest" && !looks_hashed(&acl.id.id) {
                // Only the user: what follows is most likely a password.
                let user = acl.id.id.split(':').next().unwrap_or_default();
                warnings.push(format!(
                    "warning: the digest id of user {user:?} does not look hashed \
                     (USER:BASE64-SHA1); no one can authenticate as it (use --plain-password \
                     to give USER:PASSWORD)"
                ));
            }
            if acl.perms == Perms(0) {
                warnings.push(format!(
                    "warning: {}:{} is given no permission",
                    acl.id.scheme,
                    if acl.id.scheme == "digest" {
                        "…"
                    } else {
                        &acl.id.id
                    }
                ));
            }
            Ok(acl)
        })
        .collect::<Result<_, Failure>>()?;
    Ok((acl, warnings))
}

/// Whether a digest id is `USER:` and 28 characters of base64 (a SHA-1), as the server
/// stores it.
fn looks_hashed(id: &str) -> bool {
    id.rsplit_once(':').is_some_and(|(user, hash)| {
        !user.is_empty()
            && hash.len() == 28
            && hash.ends_with('=')
            && hash
                .trim_end_matches('=')
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
    })
}

fn parse_acl_entry(entry: &str, digests: DigestIds) -> Result<Acl, Failure> {
    let shown = if digests == DigestIds::PlainPassword && entry.starts_with("digest:") {
        "digest:…"
    } else {
        entry
    };
    let bad = |why: &str| {
        Failure::usage(format!(
            "bad ACL entry {shown:?}: {why} (expected scheme:id:perms, e.g. world:anyone:cdrwa)"
        ))
        .with_kind("invalid_acl")
    };
    let (scheme, rest) = entry.split_once(':').ok_or_else(|| bad("no ':'"))?;
    let (id, letters) = rest.rsplit_once(':').ok_or_else(|| bad("no permissions"))?;
    if scheme.is_empty() {
        return Err(bad("empty scheme"));
    }
    let mut perms = Perms(0);
    for letter in letters.chars() {
        let (_, p) = PERM_LETTERS
            .iter()
            .find(|(c, _)| *c == letter)
            .ok_or_else(|| bad("permissions are letters from cdrwa"))?;
        perms = perms | *p;
    }
    if scheme == "digest" && digests == DigestIds::PlainPassword {
        let (user, password) = id
            .split_once(':')
            .filter(|(user, _)| !user.is_empty())
            .ok_or_else(|| {
                bad("with --plain-password, digest entries are digest:USER:PASSWORD:PERMS")
            })?;
        return Ok(Acl::digest(perms, user, password));
    }
    Ok(Acl::new(perms, Id::new(scheme, id)))
}

/// Node data on one line: UTF-8 with control characters escaped, and each byte that is not
/// UTF-8 as `\xNN`; `get` to a pipe prints the bytes exactly.
pub(crate) fn data_line(data: &[u8]) -> String {
    let mut line = String::with_capacity(data.len());
    for chunk in data.utf8_chunks() {
        // Only control characters: quotes and backslashes are text (JSON data reads as is).
        for c in chunk.valid().chars() {
            if c.is_control() {
                line.extend(c.escape_debug());
            } else {
                line.push(c);
            }
        }
        for byte in chunk.invalid() {
            line.push_str(&format!("\\x{byte:02x}"));
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_lines_escape_control_characters_and_bytes_that_are_not_utf8() {
        assert_eq!(data_line(b"v1"), "v1");
        assert_eq!(data_line("caf\u{e9}".as_bytes()), "caf\u{e9}");
        assert_eq!(data_line(b"\x89PNG\r\n"), "\\x89PNG\\r\\n");
        assert_eq!(data_line(b"a\tb\x1b"), "a\\tb\\u{1b}");
        assert_eq!(data_line(br#"{"zone":"eu-1"}"#), r#"{"zone":"eu-1"}"#);
    }

    #[test]
    fn utc_times() {
        assert_eq!(utc_time(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_time(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(utc_time(1_700_000_000_000), "2023-11-14T22:13:20.000Z");
        assert_eq!(utc_time(-1), "-1ms since the epoch");
        assert_eq!(
            utc_time(i64::MAX),
            format!("{}ms since the epoch", i64::MAX)
        );
        assert_eq!(utc_time(LAST_DATE_MS), "9999-12-31T23:59:59.999Z");
    }

    #[test]
    fn acl_round_trip() {
        let (acl, warnings) = parse_acl(
            "world:anyone:cdrwa,digest:bob:abc=:rw,auth::a,ip:10.0.0.0/8:r",
            DigestIds::Hashed,
        )
        .unwrap_or_default();
        assert_eq!(warnings.len(), 1, "bob:abc= is no SHA-1: {warnings:?}");
        let text: Vec<String> = acl.iter().map(acl_entry).collect();
        assert_eq!(
            text,
            [
                "world:anyone:cdrwa",
                "digest:bob:abc=:rw",
                "auth::a",
                "ip:10.0.0.0/8:r"
            ]
        );
        assert_eq!(acl[0].perms, Perms::ALL);
        for bad in ["world", "world:anyone:x", ":x:r", ""] {
            assert!(parse_acl(bad, DigestIds::Hashed).is_err(), "{bad}");
        }
    }

    /// Spaces after commas are not part of a scheme; an entry that grants nothing, and a
    /// digest id given unhashed, are warned about without echoing what is most likely a
    /// password; ids from the server print with their control characters escaped.
    #[test]
    fn acl_entries_are_trimmed_warned_about_and_shown_safely() {
        let (acl, warnings) = parse_acl(
            "world:anyone:r, ip:10.0.0.1:,digest:bob:hunter2:r",
            DigestIds::Hashed,
        )
        .unwrap_or_default();
        let schemes: Vec<&str> = acl.iter().map(|a| a.id.scheme.as_str()).collect();
        assert_eq!(schemes, ["world", "ip", "digest"]);
        assert_eq!(acl[1].perms, Perms(0));
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings.iter().all(|w| !w.contains("hunter2")),
            "{warnings:?}"
        );
        assert!(warnings[1].contains("\"bob\""), "{warnings:?}");
        assert!(
            warnings[0].contains("ip:10.0.0.1 is given no permission"),
            "{warnings:?}"
        );
        let sneaky = Acl::new(Perms::READ, Id::new("digest", "x\u{1b}]0;owned\u{7}:y"));
        assert_eq!(acl_entry(&sneaky), "digest:x\\u{1b}]0;owned\\u{7}:y:r");
    }

    #[test]
    fn plain_passwords_are_hashed() {
        let (acl, warnings) =
            parse_acl("digest:alice:se:cret:cdrwa", DigestIds::PlainPassword).unwrap_or_default();
        assert_eq!(acl, [Acl::digest(Perms::ALL, "alice", "se:cret")]);
        assert!(warnings.is_empty(), "{warnings:?}");
        let hashed = acl_entry(&acl[0]);
        assert!(parse_acl(&hashed, DigestIds::Hashed).is_ok_and(|(_, w)| w.is_empty()));
        let refused = parse_acl("digest:hunter2:r", DigestIds::PlainPassword);
        assert!(refused.is_err_and(|f| !f.message.contains("hunter2")));
    }

    #[test]
    fn session_ids_have_one_form() {
        assert_eq!(session_id(0x0100_012c_5d2e_0000), "0x0100012c5d2e0000");
        assert_eq!(session_id(0), "0x0000000000000000");
        assert_eq!(session_id(-1), "0xffffffffffffffff");
    }

    #[test]
    fn data_as_json() {
        assert_eq!(
            data_json(b"hi"),
            [("data", json!("hi")), ("data_base64", json!("aGk="))]
        );
        assert_eq!(
            data_json(&[0xff, 0]),
            [("data", Value::Null), ("data_base64", json!("/wA="))]
        );
    }
}
