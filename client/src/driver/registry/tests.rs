use super::*;
use crate::driver::command::Detached;
use crate::error::Error;
use crate::session::Reply;

type Answer = oneshot::Receiver<Result<Reply, Error>>;

fn route() -> (ReplyTo, Answer) {
    let (tx, rx) = oneshot::channel();
    (ReplyTo::Waiting(tx), rx)
}

fn oneshot_watcher(id: u64) -> (LocalWatcher, oneshot::Receiver<WatchedEvent>) {
    let (tx, rx) = oneshot::channel();
    ((WatcherId(id), WatcherSink::Oneshot(tx)), rx)
}

fn stream_watcher(id: u64) -> (LocalWatcher, mpsc::Receiver<WatchedEvent>) {
    let (tx, rx) = mpsc::channel(4);
    ((WatcherId(id), WatcherSink::Stream(tx)), rx)
}

/// A registry holding request 1, whose success would set `watcher`, and the request's answer.
fn watching(watcher: LocalWatcher) -> (Registry, Answer) {
    let mut registry = Registry::default();
    let (tx, rx) = route();
    registry.register(RequestId(1), tx, Some(watcher));
    (registry, rx)
}

/// Where an event for watcher 7 goes (`last`: whether it is the watcher's last).
fn route_7(registry: &mut Registry, last: bool) -> Route {
    registry.route_event(WatcherId(7), last)
}

#[test]
fn a_reply_route_is_taken_once() {
    let mut registry = Registry::default();
    let (tx, mut rx) = route();
    registry.register(RequestId(1), tx, None);
    assert_eq!(registry.waiting(), 1);
    let taken = registry.take_reply(RequestId(1));
    assert!(taken.is_some());
    assert!(registry.take_reply(RequestId(1)).is_none());
    assert_eq!(registry.waiting(), 0);
    let _ = taken.map(|tx| tx.send(Err(Error::Closed)));
    assert!(matches!(rx.try_recv(), Ok(Err(Error::Closed))));
}

#[test]
fn an_answered_request_unlinks_its_watcher_and_keeps_the_sink() {
    let (watcher, _events) = oneshot_watcher(7);
    let (mut registry, _rx) = watching(watcher);
    assert!(registry.take_reply(RequestId(1)).is_some());
    assert_eq!(registry.watchers(), 1);
    // Dropping the watcher now abandons no request.
    assert_eq!(registry.drop_watcher(WatcherId(7)), None);
    assert_eq!(registry.watchers(), 0);
}

#[test]
fn a_watcher_dropped_before_its_reply_abandons_its_request() {
    let (watcher, _events) = oneshot_watcher(7);
    let (mut registry, mut rx) = watching(watcher);
    assert_eq!(registry.drop_watcher(WatcherId(7)), Some(RequestId(1)));
    assert!(registry.take_reply(RequestId(1)).is_none());
    assert_eq!((registry.waiting(), registry.watchers()), (0, 0));
    // The route is gone: its caller sees the channel closed, never an answer.
    assert!(matches!(
        rx.try_recv(),
        Err(oneshot::error::TryRecvError::Closed)
    ));
}

#[test]
fn requests_whose_callers_left_are_taken() {
    let mut registry = Registry::default();
    let (left, gone) = route();
    let (stays, _waiting) = route();
    let (watcher, _events) = oneshot_watcher(3);
    registry.register(RequestId(1), left, Some(watcher));
    registry.register(RequestId(2), stays, None);
    drop(gone);
    assert_eq!(registry.take_abandoned(), vec![RequestId(1)]);
    assert_eq!(registry.waiting(), 1);
    // Its watcher is no longer linked to it.
    assert_eq!(registry.drop_watcher(WatcherId(3)), None);
}

#[test]
fn a_oneshot_sink_goes_with_its_event() {
    let (watcher, _events) = oneshot_watcher(7);
    let (mut registry, _rx) = watching(watcher);
    assert!(matches!(route_7(&mut registry, false), Route::Oneshot(_)));
    assert!(matches!(route_7(&mut registry, false), Route::Gone));
}

#[test]
fn a_stream_sink_stays_until_its_last_event() {
    let (watcher, _events) = stream_watcher(7);
    let (mut registry, _rx) = watching(watcher);
    assert!(matches!(
        route_7(&mut registry, false),
        Route::Stream { last: false, .. }
    ));
    assert_eq!(registry.watchers(), 1);
    assert!(matches!(
        route_7(&mut registry, true),
        Route::Stream { last: true, .. }
    ));
    assert_eq!(registry.watchers(), 0);
    assert!(matches!(route_7(&mut registry, false), Route::Gone));
}

/// A background request's function is its caller: it is called once, with its answer, or
/// with `Closed` when the driver (and its registry) ends first; it is never abandoned.
#[test]
fn a_background_request_is_answered_once_even_when_the_driver_ends() {
    use std::sync::{Arc, Mutex};

    type Answers = Arc<Mutex<Vec<(u64, Result<Reply, Error>)>>>;
    let answers = Answers::default();
    let detached = |n: u64| {
        let answers = Arc::clone(&answers);
        ReplyTo::Detached(Detached::new(move |answer| {
            answers.lock().unwrap().push((n, answer));
        }))
    };
    let mut registry = Registry::default();
    registry.register(RequestId(1), detached(1), None);
    registry.register(RequestId(2), detached(2), None);
    assert!(registry.take_abandoned().is_empty(), "never abandoned");
    registry.take_reply(RequestId(1)).unwrap().send(Err(Error::NoNode));
    drop(registry);
    let answers = answers.lock().unwrap();
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert!(matches!(answers[0], (1, Err(Error::NoNode))));
    assert!(matches!(answers[1], (2, Err(Error::Closed))));
}

/// A background request's function that panics is the user's bug, not the session's: the
/// answer after it still goes out.
#[test]
fn a_panicking_background_function_ends_nothing_else() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let mut registry = Registry::default();
    registry.register(
        RequestId(1),
        ReplyTo::Detached(Detached::new(|_| panic!("the user's bug"))),
        None,
    );
    let (tx, mut rx) = route();
    registry.register(RequestId(2), tx, None);
    let later = Arc::new(AtomicBool::new(false));
    let seen = Arc::clone(&later);
    registry.register(
        RequestId(3),
        ReplyTo::Detached(Detached::new(move |_| seen.store(true, Ordering::SeqCst))),
        None,
    );
    registry.take_reply(RequestId(1)).unwrap().send(Err(Error::NoNode));
    registry.take_reply(RequestId(2)).unwrap().send(Err(Error::NoNode));
    assert!(matches!(rx.try_recv(), Ok(Err(Error::NoNode))));
    drop(registry);
    assert!(later.load(Ordering::SeqCst), "answered when the registry went");
}
