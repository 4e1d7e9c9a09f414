//! `Children`: a node's listing held compactly, every name in one string.

use std::fmt;
use std::ops::Index;

use crate::jute::{decode_names, Decode, DecodeError, Reader};
use crate::proto::GetChildrenResponse;

/// The names of a node's children, as [`Client::get_children_compact`] returns them: all in
/// one string, with the end of each.
///
/// A listing costs two allocations however many names it has, where a `Vec<String>` costs
/// one per name, and its names are checked as UTF-8 in one pass. That matters for large
/// directories and for hot paths: the lock recipes list their directory on every acquire.
/// The names are in the server's order (none defined), as for
/// [`Client::get_children`].
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
/// let jobs = client.get_children_compact("/jobs").await?;
/// println!("{} jobs, the first {:?}", jobs.len(), jobs.get(0));
/// let mut sorted: Vec<&str> = jobs.iter().collect();
/// sorted.sort_unstable();
/// if jobs.contains("job-7") {
///     println!("job-7 is queued");
/// }
/// # Ok(()) }
/// ```
///
/// [`Client::get_children_compact`]: crate::Client::get_children_compact
/// [`Client::get_children`]: crate::Client::get_children
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Children {
    /// Every name, one after the other.
    names: String,
    /// Where each name ends in `names` (a character boundary); the next one starts there.
    ends: Vec<usize>,
}

impl Children {
    /// The number of names.
    ///
    /// ```
    /// let jobs: zkwire::Children = ["a", "b"].into_iter().collect();
    /// assert_eq!(jobs.len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are no names.
    ///
    /// ```
    /// assert!(zkwire::Children::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The `index`th name, `None` past the end.
    ///
    /// ```
    /// let jobs: zkwire::Children = ["a", "b"].into_iter().collect();
    /// assert_eq!((jobs.get(1), jobs.get(2)), (Some("b"), None));
    /// ```
    pub fn get(&self, index: usize) -> Option<&str> {
        let end = *self.ends.get(index)?;
        let start = index.checked_sub(1).map_or(0, |before| self.ends[before]);
        self.names.get(start..end)
    }

    /// The names, in order.
    ///
    /// ```
    /// let jobs: zkwire::Children = ["b", "a"].into_iter().collect();
    /// let mut sorted: Vec<&str> = jobs.iter().collect();
    /// sorted.sort_unstable();
    /// assert_eq!(sorted, ["a", "b"]);
    /// ```
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            names: &self.names,
            ends: &self.ends,
            start: 0,
        }
    }

    /// Whether `name` is one of the names.
    ///
    /// ```
    /// let jobs: zkwire::Children = ["a", "b"].into_iter().collect();
    /// assert!(jobs.contains("b") && !jobs.contains("c"));
    /// ```
    pub fn contains(&self, name: &str) -> bool {
        self.iter().any(|n| n == name)
    }

    /// The names as one `String` each.
    ///
    /// ```
    /// let jobs: zkwire::Children = ["a", "b"].into_iter().collect();
    /// assert_eq!(jobs.to_vec(), ["a", "b"]);
    /// ```
    pub fn to_vec(&self) -> Vec<String> {
        self.iter().map(str::to_owned).collect()
    }
}

impl Index<usize> for Children {
    type Output = str;

    /// The `index`th name.
    ///
    /// # Panics
    /// When `index` is not below [`len`](Self::len), as a slice's index does.
    fn index(&self, index: usize) -> &str {
        match self.get(index) {
            Some(name) => name,
            None => panic!("index {index} out of range for a listing of {}", self.len()),
        }
    }
}

impl fmt::Debug for Children {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<S: AsRef<str>> FromIterator<S> for Children {
    fn from_iter<I: IntoIterator<Item = S>>(names: I) -> Self {
        let mut children = Self::default();
        for name in names {
            children.names.push_str(name.as_ref());
            children.ends.push(children.names.len());
        }
        children
    }
}

impl<'a> IntoIterator for &'a Children {
    type Item = &'a str;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// The names of a [`Children`], in order, from either end.
///
/// ```
/// let jobs: zkwire::Children = ["a", "b", "c"].into_iter().collect();
/// let mut names: zkwire::ChildrenIter<'_> = jobs.iter();
/// assert_eq!((names.next(), names.next_back(), names.len()), (Some("a"), Some("c"), 1));
/// ```
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    names: &'a str,
    /// The ends of the names not yet taken from either side.
    ends: &'a [usize],
    /// Where the first of them starts.
    start: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let (&end, rest) = self.ends.split_first()?;
        let name = self.names.get(self.start..end);
        (self.ends, self.start) = (rest, end);
        name
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.ends.len(), Some(self.ends.len()))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let (&end, rest) = self.ends.split_last()?;
        let start = rest.last().copied().unwrap_or(self.start);
        let name = self.names.get(start..end);
        self.ends = rest;
        name
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl std::iter::FusedIterator for Iter<'_> {}

/// The wire form of [`GetChildrenResponse`], the `getChildren` reply record (one
/// `vector<ustring>`), read into one string; the same bytes are accepted and the same errors
/// reported (the tests below and the `decode_reply` fuzz target hold it to that).
impl Decode for Children {
    const NAME: &'static str = GetChildrenResponse::NAME;
    const MIN_LEN: usize = GetChildrenResponse::MIN_LEN;

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let (names, ends) = decode_names(r)?;
        Ok(Self { names, ends })
    }

    fn skip(r: &mut Reader<'_>) -> Result<(), DecodeError> {
        GetChildrenResponse::skip(r)
    }
}

#[cfg(test)]
mod tests {
    use bytes::{BufMut, Bytes, BytesMut};
    use proptest::prelude::*;

    use super::*;
    use crate::fuzzing::compact_listing;

    /// A `vector<ustring>` body of `names`' raw bytes; `None` is a null string.
    fn body(names: &[Option<&[u8]>]) -> Bytes {
        let mut buf = BytesMut::new();
        buf.put_i32(i32::try_from(names.len()).unwrap());
        for name in names {
            match name {
                Some(bytes) => {
                    buf.put_i32(i32::try_from(bytes.len()).unwrap());
                    buf.put_slice(bytes);
                }
                None => buf.put_i32(-1),
            }
        }
        buf.freeze()
    }

    #[test]
    fn a_listing_reads_names_as_the_record_does() {
        let names: &[&[u8]] = &[b"a", b"", b"_c_0-lock-0000000007", "n\u{e9}e \u{1f980}".as_bytes()];
        let all: Vec<_> = names.iter().copied().map(Some).collect();
        assert_eq!(compact_listing(&body(&all)).unwrap().len(), 4);
        assert!(compact_listing(&body(&[])).unwrap().is_empty());
    }

    #[test]
    fn a_listing_fails_as_the_record_does() {
        let e_acute = "\u{e9}".as_bytes();
        // Each half of a character alone is not UTF-8, though the two side by side are.
        let split = body(&[Some(&e_acute[..1]), Some(&e_acute[1..])]);
        let bad = [
            split,
            body(&[Some(b"ok"), Some(&[0xff, b'a'])]),
            body(&[Some(b"ok"), None]),
            body(&[Some(b"ok")]).slice(..7),
            Bytes::from_static(&[0, 0, 0, 9, 0, 0, 0, 0]),
            Bytes::from_static(&[0xff, 0xff, 0xff, 0xff]),
            Bytes::from_static(&[0, 0]),
        ];
        for body in &bad {
            let error = compact_listing(body).unwrap_err();
            assert_eq!(error.record(), "GetChildrenResponse", "{error}");
        }
    }

    #[test]
    fn a_listing_answers_as_a_list_of_its_names() {
        let children: Children = ["b", "", "\u{e9}t\u{e9}", "a"].into_iter().collect();
        assert_eq!(children.len(), 4);
        assert!(!children.is_empty() && Children::default().is_empty());
        assert_eq!(children.get(2), Some("\u{e9}t\u{e9}"));
        assert_eq!(children.get(1), Some(""));
        assert_eq!(children.get(4), None);
        assert_eq!(&children[3], "a");
        assert!(children.contains("") && children.contains("a") && !children.contains("c"));
        let forth: Vec<&str> = children.iter().collect();
        let mut back: Vec<&str> = children.iter().rev().collect();
        back.reverse();
        assert_eq!(forth, back);
        assert_eq!(forth, children.to_vec());
        let mut both = children.iter();
        assert_eq!((both.next(), both.next_back(), both.len()), (Some("b"), Some("a"), 2));
        assert_eq!(format!("{children:?}"), format!("{forth:?}"));
        assert_eq!(children, forth.iter().collect());
    }

    proptest! {
        /// Any names, UTF-8 or not, nulls and cut bodies included.
        #[test]
        fn any_listing_reads_as_the_record_does(
            names in prop::collection::vec(
                prop::option::weighted(0.95, prop::collection::vec(
                    prop_oneof![Just(0xc3u8), Just(0xa9), Just(b'a'), any::<u8>()], 0..6)),
                0..6),
            cut in any::<prop::sample::Index>(),
        ) {
            let names: Vec<Option<&[u8]>> = names.iter().map(Option::as_deref).collect();
            let whole = body(&names);
            compact_listing(&whole).ok();
            compact_listing(&whole.slice(..cut.index(whole.len() + 1))).ok();
        }
    }
}
