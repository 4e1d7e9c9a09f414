//! Listening for a signal from the moment zkw asks, for the commands that run until Ctrl-C.

use std::future::Future;

use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::fail::{Failure, FAILED, INTERRUPTED};

/// Listens for `kind` from now on.
pub(crate) fn listen(kind: SignalKind) -> Result<Signal, Failure> {
    signal(kind).map_err(|e| Failure::new(FAILED, format!("cannot handle signals: {e}")))
}

/// Ctrl-C (SIGINT), listened for from this call on: the returned future completes at the
/// first SIGINT received after the call.
///
/// `tokio::signal::ctrl_c` starts listening only when first polled. A command that printed
/// its "ready" note before that poll lost a SIGINT sent on seeing the note: ignored (and zkw
/// ran on) when started with SIGINT ignored, as a background job of a script is, or fatal
/// to zkw otherwise.
pub(crate) fn ctrl_c() -> Result<impl Future<Output = ()>, Failure> {
    let mut int = listen(SignalKind::interrupt())?;
    Ok(async move {
        int.recv().await;
    })
}

/// `work`, unless `stop` resolves first with the failure to report. A verb that handles its
/// signals itself is not killed by them: what it waits on before its own loop (connecting
/// to a server that does not answer, above all) must race them too.
pub(crate) async fn until_stopped<T>(
    work: impl Future<Output = Result<T, Failure>>,
    stop: impl Future<Output = Failure>,
) -> Result<T, Failure> {
    tokio::select! {
        done = work => done,
        failure = stop => Err(failure),
    }
}

/// The failure of a Ctrl-C received while `doing`.
pub(crate) async fn interrupted(ctrl_c: impl Future<Output = ()>, doing: &str) -> Failure {
    ctrl_c.await;
    Failure::new(INTERRUPTED, format!("interrupted while {doing}"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rustix::process::{getpid, kill_process, Signal};

    /// A SIGINT that arrives after `ctrl_c` returned but before its future is first polled is
    /// seen (with tokio's lazy `ctrl_c` it killed the process, or was lost under SIG_IGN).
    #[tokio::test]
    async fn a_sigint_before_the_first_poll_is_seen() {
        let interrupted = super::ctrl_c().unwrap();
        kill_process(getpid(), Signal::INT).unwrap();
        tokio::time::timeout(Duration::from_secs(5), interrupted)
            .await
            .expect("the SIGINT sent before the first poll was seen");
    }
}
