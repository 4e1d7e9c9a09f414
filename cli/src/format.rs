//! Human and JSON renderings of Stat, ACLs, data and times; parsing of ACL specs.

use zkwire::{Acl, Id, Perms, Stat};

use crate::fail::Failure;
use crate::json::Json;

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
        format!("ephemeralOwner = {:#x}", stat.ephemeral_owner),
        format!("dataLength = {}", stat.data_length),
        format!("numChildren = {}", stat.num_children),
    ]
    .join("\n")
}

/// A Stat as a JSON object (times in ms since the epoch).
pub(crate) fn stat_json(stat: &Stat) -> Json {
    Json::obj([
        ("czxid", stat.czxid.into()),
        ("mzxid", stat.mzxid.into()),
        ("pzxid", stat.pzxid.into()),
        ("ctime", stat.ctime.into()),
        ("mtime", stat.mtime.into()),
        ("version", stat.version.into()),
        ("cversion", stat.cversion.into()),
        ("aversion", stat.aversion.into()),
        ("ephemeral_owner", stat.ephemeral_owner.into()),
        ("data_length", stat.data_length.into()),
        ("num_children", stat.num_children.into()),
    ])
}

/// Node data for JSON: `"data"` when it is UTF-8, `"data_hex"` otherwise.
pub(crate) fn data_json(data: &[u8]) -> (&'static str, Json) {
    match std::str::from_utf8(data) {
        Ok(text) => ("data", Json::str(text)),
        Err(_) => (
            "data_hex",
            Json::Str(data.iter().map(|b| format!("{b:02x}")).collect()),
        ),
    }
}

/// Milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub(crate) fn utc_time(ms: i64) -> String {
    let (days, ms_of_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (year, month, day) = civil_date(days);
    let secs = ms_of_day / 1000;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        ms_of_day % 1000
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
fn civil_date(days: i64) -> (i64, i64, i64) {
    // Count from 0000-03-01 so that the leap day ends each 4-, 100- and 400-year cycle.
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
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

/// An ACL entry as `scheme:id:perms` (the form `acl set` takes).
pub(crate) fn acl_entry(acl: &Acl) -> String {
    format!(
        "{}:{}:{}",
        acl.id.scheme,
        acl.id.id,
        perms_letters(acl.perms)
    )
}

/// An ACL entry as a JSON object.
pub(crate) fn acl_json(acl: &Acl) -> Json {
    Json::obj([
        ("scheme", Json::str(&acl.id.scheme)),
        ("id", Json::str(&acl.id.id)),
        ("perms", Json::str(perms_letters(acl.perms))),
    ])
}

/// Parses `scheme:id:perms[,scheme:id:perms…]`; the id may contain colons
/// (`digest:user:hash:cdrwa`, `ip:10.0.0.0/8:r`, `auth::cdrwa`).
///
/// # Errors
/// A usage failure naming the bad entry.
pub(crate) fn parse_acl(spec: &str) -> Result<Vec<Acl>, Failure> {
    spec.split(',').map(parse_acl_entry).collect()
}

fn parse_acl_entry(entry: &str) -> Result<Acl, Failure> {
    let bad = |why: &str| {
        Failure::usage(format!(
            "bad ACL entry {entry:?}: {why} (expected scheme:id:perms, e.g. world:anyone:cdrwa)"
        ))
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
    Ok(Acl::new(perms, Id::new(scheme, id)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_times() {
        assert_eq!(utc_time(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_time(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(utc_time(1_700_000_000_000), "2023-11-14T22:13:20.000Z");
        assert_eq!(utc_time(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn acl_round_trip() {
        let acl = parse_acl("world:anyone:cdrwa,digest:bob:abc=:rw,auth::a,ip:10.0.0.0/8:r")
            .unwrap_or_default();
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
            assert!(parse_acl(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn data_as_json() {
        assert_eq!(data_json(b"hi"), ("data", Json::str("hi")));
        assert_eq!(data_json(&[0xff, 0]), ("data_hex", Json::str("ff00")));
    }
}
