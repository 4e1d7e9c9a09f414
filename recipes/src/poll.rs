//! Polling a future once, without waiting.

use std::future::Future;

/// The output of `future` if it is ready now, without waiting (polled once, with a waker
/// that does nothing: a later poll by a real task still works).
pub(crate) fn ready_now<F: Future + Unpin>(future: &mut F) -> Option<F::Output> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::Pin::new(future).poll(&mut cx) {
        std::task::Poll::Ready(output) => Some(output),
        std::task::Poll::Pending => None,
    }
}
