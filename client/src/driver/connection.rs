//! Connections: picking a host and connecting (with the rotation and backoff of `hosts`),
//! what a failed attempt tells (`diagnosis`), closing a transport, and, while a read-only
//! server serves us, the search for a read/write one.

use std::io;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{now, Connect, Driver};
use crate::connect_string::HostPort;
use crate::session::SessionState;

impl<C: Connect> Driver<C> {
    pub(super) fn start_connect_if_wanted(&mut self) {
        if !self.session.wants_connection() || self.connecting.is_some() || self.stream.is_some() {
            return;
        }
        self.prune_cancelled();
        let (host, pause) = self.hosts.next();
        let timeout = self.session.connect_timeout();
        let connector = self.connector.clone();
        tracing::debug!(%host, ?pause, "connecting");
        self.current_host = Some(host.clone());
        self.connecting = Some(Box::pin(async move {
            // A zero pause must not wait for the next timer tick.
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            match tokio::time::timeout(timeout, connector.connect(&host)).await {
                Ok(result) => result,
                Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
            }
        }));
    }

    pub(super) fn on_connect_result(&mut self, stream: io::Result<C::Stream>) {
        self.connecting = None;
        if !self.session.wants_connection() {
            // Closed (or over) while connecting: the connection, or its failure, is of no
            // use; a stream is dropped, which closes it.
            return;
        }
        match stream {
            Ok(stream) => {
                self.prune_cancelled();
                self.shared.connections.fetch_add(1, Ordering::Relaxed);
                self.stream = Some(stream);
                self.handshaking = true;
                self.received = false;
                let host = self.current_host.as_ref().map_or("", |h| h.host());
                self.session.handle_connected(now(), host);
            }
            Err(e) => {
                tracing::debug!(error = %e, "connect attempt failed");
                self.hosts.on_failed();
                if let Some(host) = &self.current_host {
                    self.diagnosis.on_connect_failed(host, &e);
                    self.publish_verdict();
                }
            }
        }
    }

    /// The server closed the connection before answering the handshake, without a byte: ask
    /// the connector why, once per host and failure streak.
    pub(super) fn on_silent_close(&mut self) {
        let Some(host) = self.current_host.clone() else {
            return;
        };
        if self.silent_close_probe.is_some() || !self.diagnosis.on_silent_close(&host) {
            return;
        }
        let connector = self.connector.clone();
        let timeout = self.session.connect_timeout();
        self.silent_close_probe = Some(Box::pin(async move {
            let found = tokio::time::timeout(timeout, connector.diagnose_silent_close(&host)).await;
            (host, found.ok().flatten())
        }));
    }

    /// Sets whether every host refused or unresolvable once is a verdict.
    pub(crate) fn set_fail_fast(&mut self, on: bool) {
        self.diagnosis.set_fail_fast(on);
    }

    pub(super) fn publish_verdict(&self) {
        if let Ok(mut failures) = self.shared.host_failures.lock() {
            *failures = self.diagnosis.latest();
        }
        let verdict = self.diagnosis.verdict();
        if let Some(v) = &verdict {
            tracing::warn!(error = %v, "no server can be connected to as configured");
        }
        self.shared.connect_error.send_if_modified(|current| {
            let changed = *current != verdict;
            *current = verdict;
            changed
        });
    }

    pub(super) fn close_transport(&mut self) {
        if self.handshaking {
            self.hosts.on_failed();
            self.handshaking = false;
        }
        self.stream = None;
        self.out = Bytes::new();
        self.unflushed = false;
    }

    /// While a read-only server serves us, look for a read/write one in the background
    /// (the `isro` four-letter word, 100 ms doubling to 60 s between probes, as the Java
    /// client).
    pub(super) fn update_rw_probe(&mut self) {
        if self.session.state() != SessionState::ConnectedReadOnly {
            self.rw_probe = None;
            return;
        }
        if self.rw_probe.is_none() {
            let others: Vec<HostPort> = self
                .hosts
                .all()
                .iter()
                .filter(|h| Some(*h) != self.current_host.as_ref())
                .cloned()
                .collect();
            let candidates = if others.is_empty() {
                self.hosts.all().to_vec()
            } else {
                others
            };
            self.rw_probe = Some(Box::pin(find_rw_server(self.connector.clone(), candidates)));
        }
    }

    pub(super) fn on_rw_server_found(&mut self, host: HostPort) {
        tracing::debug!(%host, "read/write server found; leaving the read-only server");
        self.rw_probe = None;
        self.hosts.prefer(host);
        self.close_transport();
        self.session.handle_disconnected(now());
    }
}

/// Probes `hosts` in turn until one answers `isro` with `rw`.
pub(super) async fn find_rw_server<C: Connect>(connector: C, hosts: Vec<HostPort>) -> HostPort {
    let mut pause = Duration::from_millis(100);
    loop {
        for host in &hosts {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(60));
            if is_read_write(&connector, host).await {
                return host.clone();
            }
        }
    }
}

pub(super) async fn is_read_write<C: Connect>(connector: &C, host: &HostPort) -> bool {
    let probe = async {
        let mut stream = connector.connect(host).await?;
        stream.write_all(b"isro").await?;
        let mut answer = [0u8; 2];
        stream.read_exact(&mut answer).await?;
        Ok::<_, io::Error>(answer == *b"rw")
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), probe).await,
        Ok(Ok(true))
    )
}
