use super::diff::{ancestors, differences};
use super::*;

fn node(czxid: i64, mzxid: i64) -> CachedNode {
    CachedNode {
        data: Bytes::new(),
        stat: Stat {
            czxid,
            mzxid,
            ..Stat::default()
        },
    }
}

#[test]
fn ancestors_nearest_first() {
    assert_eq!(ancestors("/a/b/c").collect::<Vec<_>>(), ["/a/b", "/a", "/"]);
    assert_eq!(ancestors("/a").collect::<Vec<_>>(), ["/"]);
    assert_eq!(ancestors("/").count(), 0);
}

#[test]
fn a_replaced_parent_takes_its_unchanged_children_with_it() {
    let old = BTreeMap::from([
        ("/r".to_owned(), node(1, 1)),
        ("/r/a".to_owned(), node(2, 2)),
        ("/r/a/x".to_owned(), node(5, 5)),
        ("/r/a-b".to_owned(), node(3, 3)),
    ]);
    let mut new = old.clone();
    new.insert("/r/a".to_owned(), node(4, 4));
    new.insert("/r/a-b".to_owned(), node(3, 6));
    let events = differences(&old, &new);
    let shape: Vec<(&str, &str)> = events
        .iter()
        .map(|e| match e {
            CacheEvent::Created { path, .. } => ("created", path.as_str()),
            CacheEvent::Changed { path, .. } => ("changed", path.as_str()),
            CacheEvent::Deleted { path, .. } => ("deleted", path.as_str()),
            _ => ("other", ""),
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("deleted", "/r/a/x"),
            ("deleted", "/r/a"),
            ("created", "/r/a"),
            ("changed", "/r/a-b"),
            ("created", "/r/a/x"),
        ]
    );
}
