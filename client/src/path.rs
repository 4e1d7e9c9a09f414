//! ZooKeeper path rules and helpers.
//!
//! ZooKeeper names znodes with absolute, `/`-separated paths. The server and
//! the reference Java client (`PathUtils.validatePath`) reject malformed paths;
//! checking them here turns what would be a round trip ending in
//! `BadArguments` (or, worse, a silently different node) into an immediate,
//! descriptive error.
//!
//! [`parent`], [`join`], [`parse_sequence`] and [`sequence_suffix`] take
//! paths and sequential node names apart the way ZooKeeper builds them.
//!
//! A *chroot* is a path prefix taken from the connect string: every path the
//! application uses is interpreted relative to it, and the client converts
//! between the application's view and the server's view of a path, so the
//! paths given to and returned by [`Client`](crate::Client) never include it.
//!
//! All functions here are pure string manipulation; none of them talks to a
//! server.

use std::fmt;

/// A path that ZooKeeper would reject.
///
/// Returned by [`validate_path`] and [`validate_sequential_path`], and inside
/// [`Error::InvalidPath`](crate::Error::InvalidPath) by every [`Client`](crate::Client)
/// operation given such a path. The [`reason`](Self::reason) is a fixed, human-readable
/// sentence; the offending [`path`](Self::path) is kept so the message can be
/// understood without the surrounding context.
///
/// ```
/// use zkwire::path::validate_path;
///
/// let invalid = validate_path("/app/config/").unwrap_err();
/// assert_eq!(invalid.to_string(), "invalid path \"/app/config/\": path must not end with '/'");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid path {path:?}: {reason}")]
pub struct InvalidPath {
    path: String,
    reason: &'static str,
}

impl InvalidPath {
    fn new(path: &str, reason: &'static str) -> Self {
        Self {
            path: path.to_owned(),
            reason,
        }
    }

    /// A valid path an operation refuses to act on (`delete_all("/")`).
    pub(crate) fn refused(path: &str, reason: &'static str) -> Self {
        Self::new(path, reason)
    }

    /// The path that was rejected, exactly as it was given.
    ///
    /// ```
    /// use zkwire::path::validate_path;
    /// let invalid = validate_path("app/config").unwrap_err();
    /// assert_eq!(invalid.path(), "app/config");
    /// ```
    #[must_use]
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Why the path was rejected, e.g. `"path must not end with '/'"`.
    ///
    /// ```
    /// use zkwire::path::validate_path;
    /// let invalid = validate_path("app/config").unwrap_err();
    /// assert_eq!(invalid.reason(), "path must start with '/'");
    /// ```
    #[must_use]
    pub const fn reason(&self) -> &'static str {
        self.reason
    }
}

const EMPTY: &str = "path must not be empty";
const NOT_ABSOLUTE: &str = "path must start with '/'";
const TRAILING_SLASH: &str = "path must not end with '/'";
const EMPTY_SEGMENT: &str = "path must not contain an empty segment ('//')";
const RELATIVE_SEGMENT: &str = "path must not contain a relative segment '.' or '..'";
const NUL_CHAR: &str = "path must not contain the null character U+0000";
const CONTROL_CHAR: &str =
    "path must not contain control characters (U+0001-U+001F, U+007F-U+009F)";
const PRIVATE_USE_CHAR: &str = "path must not contain private-use characters (U+E000-U+F8FF)";
const SPECIALS_CHAR: &str = "path must not contain characters U+FFF0-U+FFFF";
const SUPPLEMENTARY_CHAR: &str =
    "path must not contain characters above U+FFFF (ZooKeeper rejects their UTF-16 surrogates)";
const EMPTY_NAME: &str = "a node name must not be empty";
const SLASH_IN_NAME: &str = "a node name must be one path segment, without '/'";

/// Checks that `path` is a valid ZooKeeper node path.
///
/// A valid path is non-empty, starts with `/`, does not end with `/` (except
/// the root `/` itself), and has no empty segment (`//`), no segment that is
/// exactly `.` or `..` (names such as `.a` or `a..` are fine), and no
/// forbidden character: U+0000-U+001F, U+007F-U+009F, U+E000-U+F8FF,
/// U+FFF0-U+FFFF, or any character above U+FFFF.
///
/// These are the rules of ZooKeeper's `PathUtils.validatePath`. That function
/// inspects UTF-16 code units and rejects U+D800-U+F8FF; Rust strings cannot
/// hold surrogates, but every character above U+FFFF is encoded in UTF-16 as
/// a surrogate pair, so such characters are rejected here too.
///
/// ```
/// use zkwire::path::validate_path;
///
/// assert!(validate_path("/app/config").is_ok());
/// assert!(validate_path("/app//config").is_err());
/// assert!(validate_path("/app/../config").is_err());
/// ```
///
/// # Errors
///
/// Returns [`InvalidPath`] describing the first rule the path breaks,
/// scanning from left to right (the emptiness, leading-`/` and trailing-`/`
/// rules are checked first).
pub fn validate_path(path: &str) -> Result<(), InvalidPath> {
    validate(path, false)
}

/// Checks that `path` is valid as the path of a *sequential* create.
///
/// The server appends a 10-digit sequence number to the path of a sequential
/// create, so the last segment only has to be valid once that number is
/// appended: `/locks/` (creating `/locks/0000000001`), `/` (creating
/// `/0000000001`) and `/a/.` (creating `/a/.0000000001`) are all accepted.
/// This mirrors the Java client, which validates `path + "1"`. Every other
/// rule of [`validate_path`] applies unchanged.
///
/// ```
/// use zkwire::path::{validate_path, validate_sequential_path};
///
/// // A sequential create of `/locks/` makes `/locks/0000000001`.
/// assert!(validate_sequential_path("/locks/").is_ok());
/// assert!(validate_path("/locks/").is_err());
/// ```
///
/// # Errors
///
/// Returns [`InvalidPath`] describing the first rule the path breaks.
pub fn validate_sequential_path(path: &str) -> Result<(), InvalidPath> {
    validate(path, true)
}

/// Checks that `name` can stand as one segment of a path: the name of a child that a
/// recipe joins under its directory (a service, an instance id, a group member).
///
/// A valid name is not empty, has no `/`, is not `.` or `..`, and has none of the
/// characters [`validate_path`] forbids. Checking the name, rather than the joined path,
/// keeps `a/b` from silently naming a node two levels down.
///
/// ```
/// use zkwire::path::validate_name;
///
/// assert!(validate_name("api-1").is_ok());
/// assert_eq!(validate_name("a/b").unwrap_err().path(), "a/b");
/// assert!(validate_name("").is_err());
/// assert!(validate_name("..").is_err());
/// ```
///
/// # Errors
///
/// Returns [`InvalidPath`] holding the name as given and the first rule it breaks.
pub fn validate_name(name: &str) -> Result<(), InvalidPath> {
    let fail = |reason| Err(InvalidPath::new(name, reason));
    if name.is_empty() {
        return fail(EMPTY_NAME);
    }
    if name.contains('/') {
        return fail(SLASH_IN_NAME);
    }
    walk_segments(name, false).or_else(fail)
}

fn validate(path: &str, sequential: bool) -> Result<(), InvalidPath> {
    let fail = |reason| Err(InvalidPath::new(path, reason));
    let Some(body) = path.strip_prefix('/') else {
        return fail(if path.is_empty() { EMPTY } else { NOT_ABSOLUTE });
    };
    if body.is_empty() {
        return Ok(()); // the root
    }
    if !sequential && body.ends_with('/') {
        return fail(TRAILING_SLASH);
    }
    // Printable ASCII, the common case, has no forbidden character: one pass over the bytes.
    if let Some(verdict) = printable_segments(body.as_bytes(), sequential) {
        return verdict.or_else(fail);
    }
    walk_segments(body, sequential).or_else(fail)
}

/// The rules of [`validate`] on the segments of a body (the path after its leading `/`, not
/// empty, without a forbidden trailing `/`), character by character: the first fault.
fn walk_segments(body: &str, sequential: bool) -> Result<(), &'static str> {
    let mut segments = body.split('/').peekable();
    while let Some(segment) = segments.next() {
        if let Some(reason) = segment.chars().find_map(forbidden_char) {
            return Err(reason);
        }
        // The server completes the last segment of a sequential path with
        // digits, so an empty, "." or ".." last segment still names a
        // well-formed node there.
        let completed_by_server = sequential && segments.peek().is_none();
        if completed_by_server {
            continue;
        }
        if segment.is_empty() {
            return Err(EMPTY_SEGMENT);
        }
        if segment == "." || segment == ".." {
            return Err(RELATIVE_SEGMENT);
        }
    }
    Ok(())
}

/// The segment rules of [`validate`] over a body (the path after its leading `/`) of
/// printable ASCII, in one pass: the first segment's fault, as the general walk would find
/// it. `None` when a byte is not printable ASCII (the general walk then decides).
fn printable_segments(body: &[u8], sequential: bool) -> Option<Result<(), &'static str>> {
    if plainly_valid(body) {
        return Some(Ok(()));
    }
    let mut first_fault = None;
    let mut start = 0;
    for (i, &b) in body.iter().enumerate() {
        if b == b'/' {
            first_fault = first_fault.or_else(|| segment_fault(&body[start..i]));
            start = i + 1;
        } else if !(b' '..=b'~').contains(&b) {
            return None;
        }
    }
    // A sequential path's last segment is completed by the server (see `validate`).
    if !sequential {
        first_fault = first_fault.or_else(|| segment_fault(&body[start..]));
    }
    Some(first_fault.map_or(Ok(()), Err))
}

/// Whether a body (the path after its leading `/`) is printable ASCII none of whose
/// segments can be empty, `.` or `..`: it does not start with `.` or `/` nor end with `/`,
/// and no `/` is followed by `/` or `.`. Most paths are; a path this does not vouch for is
/// walked segment by segment.
///
/// Both loops run to the end without a branch per byte, so the compiler checks many bytes
/// per instruction: an 80-byte path costs about a fifth of the segment walk.
fn plainly_valid(body: &[u8]) -> bool {
    let (Some(&first), Some(&last)) = (body.first(), body.last()) else {
        return false;
    };
    let mut unprintable = 0u8;
    for &b in body {
        unprintable |= u8::from(!(b' '..=b'~').contains(&b));
    }
    let mut dubious_segment = 0u8;
    for (&b, &next) in body.iter().zip(&body[1..]) {
        dubious_segment |= u8::from(b == b'/') & (u8::from(next == b'/') | u8::from(next == b'.'));
    }
    unprintable | dubious_segment == 0 && !matches!(first, b'.' | b'/') && last != b'/'
}

/// Why a segment (between two `/`) is not a node name, if it is not.
fn segment_fault(segment: &[u8]) -> Option<&'static str> {
    match segment {
        b"" => Some(EMPTY_SEGMENT),
        b"." | b".." => Some(RELATIVE_SEGMENT),
        _ => None,
    }
}

/// Why `c` may not appear in a path, if it may not.
fn forbidden_char(c: char) -> Option<&'static str> {
    match c {
        '\0' => Some(NUL_CHAR),
        '\u{1}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => Some(CONTROL_CHAR),
        // ZooKeeper forbids U+D800-U+F8FF; the surrogate half of that range
        // cannot occur in a `str`, which leaves the private-use area.
        '\u{e000}'..='\u{f8ff}' => Some(PRIVATE_USE_CHAR),
        '\u{fff0}'..='\u{ffff}' => Some(SPECIALS_CHAR),
        '\u{10000}'..=char::MAX => Some(SUPPLEMENTARY_CHAR),
        _ => None,
    }
}

/// A chroot: the path prefix under which all of a session's paths live.
///
/// Holds a validated path other than `/` (a chroot of `/` is the same as no
/// chroot, see [`Chroot::new`]), such as `/app/x`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Chroot {
    prefix: String,
}

impl Chroot {
    /// Makes a chroot from `prefix`, e.g. `/app/x`.
    ///
    /// Returns `Ok(None)` for `/`, because rooting at the root changes
    /// nothing and callers can then skip path translation entirely.
    ///
    /// # Errors
    ///
    /// Returns [`InvalidPath`] if `prefix` is not a valid path according to
    /// [`validate_path`] (so, for instance, `/app/` with its trailing `/` is
    /// rejected).
    pub(crate) fn new(prefix: &str) -> Result<Option<Self>, InvalidPath> {
        validate_path(prefix)?;
        if prefix == "/" {
            return Ok(None);
        }
        Ok(Some(Self {
            prefix: prefix.to_owned(),
        }))
    }

    /// The prefix, e.g. `/app/x`.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Maps an application path to the path the server sees.
    ///
    /// `/` maps to the chroot itself and any other path is appended to it:
    /// with chroot `/app/x`, `/` becomes `/app/x` and `/a` becomes `/app/x/a`.
    ///
    /// `client_path` is assumed to have passed [`validate_path`]; this
    /// function does not check it. For the path of a *sequential* create use
    /// [`to_server_sequential`](Self::to_server_sequential) instead, since
    /// the special case for `/` is wrong there.
    #[must_use]
    pub(crate) fn to_server(&self, client_path: &str) -> String {
        if client_path == "/" {
            return self.prefix.clone();
        }
        self.to_server_sequential(client_path)
    }

    /// Maps the path of a *sequential* create to the path the server sees.
    ///
    /// Always concatenates: with chroot `/app/x`, `/locks/` becomes
    /// `/app/x/locks/` and `/` becomes `/app/x/`. The latter is why this is
    /// separate from [`to_server`](Self::to_server): mapping a sequential `/`
    /// to the bare chroot would make the server create `/app/x0000000001`, a
    /// sibling of the chroot that the application could not see, instead of
    /// the child `/app/x/0000000001`.
    ///
    /// `client_path` is assumed to have passed [`validate_sequential_path`];
    /// this function does not check it.
    #[must_use]
    pub(crate) fn to_server_sequential(&self, client_path: &str) -> String {
        let mut server_path = String::with_capacity(self.prefix.len() + client_path.len());
        server_path.push_str(&self.prefix);
        server_path.push_str(client_path);
        server_path
    }

    /// Maps a path reported by the server back to the application's view.
    ///
    /// With chroot `/app/x`: `/app/x` gives `Some("/")` and `/app/x/a` gives
    /// `Some("/a")`. A path outside the chroot, such as `/zookeeper/config`
    /// or `/app/xy` (which merely shares a textual prefix), gives `None`;
    /// the caller decides what to do with it, e.g. pass it through unchanged
    /// with [`strip_or_pass`].
    #[must_use]
    pub(crate) fn to_client<'a>(&self, server_path: &'a str) -> Option<&'a str> {
        let rest = server_path.strip_prefix(self.prefix.as_str())?;
        if rest.is_empty() {
            Some("/")
        } else if rest.starts_with('/') {
            Some(rest)
        } else {
            None
        }
    }
}

/// The chroot prefix, e.g. `/app/x`: never `/` and never ending with `/`.
impl fmt::Display for Chroot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.prefix)
    }
}

/// Maps a server path to the application's view if it lies inside `chroot`,
/// and returns it unchanged otherwise (or when there is no chroot).
///
/// Passing outside paths through matches the Java client, which for example
/// reports watch events on `/zookeeper/config` verbatim even under a chroot.
#[must_use]
pub(crate) fn strip_or_pass<'a>(chroot: Option<&Chroot>, server_path: &'a str) -> &'a str {
    chroot
        .and_then(|chroot| chroot.to_client(server_path))
        .unwrap_or(server_path)
}

/// The parent of a path: `/a/b` gives `/a`, `/a` gives `/`, and `/` gives
/// `None` since the root has no parent.
///
/// `path` is assumed to be valid (see [`validate_path`]); a string without
/// any `/` also gives `None`.
///
/// ```
/// use zkwire::path::parent;
///
/// assert_eq!(parent("/app/config"), Some("/app"));
/// assert_eq!(parent("/app"), Some("/"));
/// assert_eq!(parent("/"), None);
/// ```
#[must_use]
pub fn parent(path: &str) -> Option<&str> {
    if path == "/" {
        return None;
    }
    match path.rfind('/')? {
        0 => Some("/"),
        end => path.get(..end),
    }
}

/// The proper ancestors of a valid path, from the top, without the root: `/a/b/c` gives
/// `/a` and `/a/b`; `/a` and `/` give none.
pub(crate) fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/')
        .map(|(i, _)| i)
        .filter(|&i| i > 0)
        .filter_map(move |i| path.get(..i))
}

/// Joins a parent path and a child name: `/` and `a` give `/a`; `/x` and `a`
/// give `/x/a`.
///
/// Neither argument is checked: `parent` is assumed to be a valid path and
/// `child` a single segment without `/`. Validate the result with
/// [`validate_path`] if the inputs come from outside.
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
/// use zkwire::path::join;
///
/// for child in client.get_children("/jobs").await? {
///     let (data, _stat) = client.get_data(&join("/jobs", &child)).await?;
///     println!("{child}: {} bytes", data.len());
/// }
/// assert_eq!(join("/", "jobs"), "/jobs");
/// # Ok(()) }
/// ```
#[must_use]
pub fn join(parent: &str, child: &str) -> String {
    let mut path = String::with_capacity(parent.len() + 1 + child.len());
    path.push_str(parent);
    // Only the root ends with '/' among valid paths; don't double it.
    if !parent.ends_with('/') {
        path.push('/');
    }
    path.push_str(child);
    path
}

/// Parses exactly the sequence suffix that ZooKeeper appends to the name of
/// a sequential node, i.e. the inverse of Java's `String.format("%010d", n)`
/// for an `i32` `n`.
///
/// Accepted forms are ten digits (`0000000042` is 42), a minus sign and nine
/// digits (`-000000042` is -42), and a minus sign and ten digits with a
/// non-zero first digit (`-2147483648`, which is what follows
/// `2147483647` once the parent's counter overflows). Anything else, including
/// a leading `+`, other widths, and values outside `i32`, gives `None`.
///
/// Prefer this over [`sequence_suffix`] when the node name's prefix is known
/// (strip the prefix and parse the rest), because it is never ambiguous.
///
/// ```
/// use zkwire::path::parse_sequence;
///
/// let name = "job-0000000042"; // from `create("/jobs/job-", ...)` in a sequential mode
/// assert_eq!(name.strip_prefix("job-").and_then(parse_sequence), Some(42));
/// assert_eq!(parse_sequence("-2147483648"), Some(i32::MIN)); // after the counter wrapped
/// assert_eq!(parse_sequence("42"), None);
/// ```
#[must_use]
pub fn parse_sequence(suffix: &str) -> Option<i32> {
    let (negative, digits) = match suffix.as_bytes() {
        [b'-', digits @ ..] => (true, digits),
        digits => (false, digits),
    };
    let well_formed = match (negative, digits.len()) {
        (false, 10) => true,
        // "%010d" pads negative numbers to ten characters including the sign,
        // so "-000000000" never occurs and eleven characters only occur when
        // the magnitude itself has ten digits.
        (true, 9) => digits.iter().any(|&b| b != b'0'),
        (true, 10) => !digits.starts_with(b"0"),
        _ => false,
    };
    if !well_formed {
        return None;
    }
    // Ten digits at most, so no overflow in an i64; read by hand because every lock listing
    // reads one per child, and `str::parse` checks the digits and the range again per digit.
    let mut magnitude = 0i64;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        magnitude = magnitude * 10 + i64::from(b - b'0');
    }
    i32::try_from(if negative { -magnitude } else { magnitude }).ok()
}

/// Extracts the sequence number at the end of a sequential node's name (or
/// full path), without knowing the name's prefix.
///
/// ZooKeeper appends the parent's child-change counter (its `cversion`)
/// formatted as `%010d`: ten zero-padded digits while it is non-negative,
/// and after it overflows past `2147483647` a negative number such as
/// `-2147483648` (eleven characters) or, much later, `-999999999` (ten
/// characters).
///
/// The suffix is found by trying the last ten characters with
/// [`parse_sequence`] first and the last eleven second. This is ambiguous in
/// one case, which is resolved in favour of the non-negative reading: a name
/// ending in `-` followed by ten digits from `1000000000` to `2147483647`,
/// e.g. `lock-1234567890`, could be the prefix `lock-` with sequence
/// 1234567890 or the prefix `lock` with sequence -1234567890. Non-negative
/// values are reached first and prefixes ending in `-` are the usual
/// convention, so this reads 1234567890. Callers that know the prefix should
/// strip it and use [`parse_sequence`] instead.
///
/// Returns `None` if the name does not end with a well-formed suffix.
///
/// ```
/// use zkwire::path::sequence_suffix;
///
/// assert_eq!(sequence_suffix("/jobs/job-0000000007"), Some(7));
/// assert_eq!(sequence_suffix("config"), None);
/// ```
#[must_use]
pub fn sequence_suffix(name: &str) -> Option<i32> {
    let last = |n: usize| name.get(name.len().checked_sub(n)?..);
    last(10)
        .and_then(parse_sequence)
        .or_else(|| last(11).and_then(parse_sequence))
}

#[cfg(test)]
mod tests;
