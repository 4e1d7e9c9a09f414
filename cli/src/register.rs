//! `register` and `barrier`: run a command while registered as an instance of a service
//! (Curator's `ServiceDiscovery`), or between entering and leaving a double barrier
//! (Curator's `DistributedDoubleBarrier`). The command runs as under `zkw lock`: in a
//! process group of its own (unless `--foreground`), signals passed on, and zkw waits for
//! the whole group before it unregisters or leaves.
//!
//! While the command runs, zkw watches the session: `register` renews an expired session
//! and registers the instance again on the new one, saying so on stderr; `barrier` says
//! when the session expired, since the member's node went with it and the others may then
//! leave without waiting for this member.

use std::future::Future;

use std::time::Duration;

use zkwire::Client;
use zkwire_recipes::{
    DistributedDoubleBarrier, NodeEvent, NodeEvents, ServiceDiscovery, ServiceInstance,
};

use crate::child::{exit_code, Running};
use crate::cli::{show as show_duration, BarrierArgs, RegisterArgs};
use crate::connect::Global;
use crate::fail::{Failure, FAILED, LOCK_TIMEOUT, UNAVAILABLE};
use crate::interrupt::until_stopped;
use crate::lock::{forward, signal_exit_code, Signals};
use crate::nodes::{check_name, check_path};
use crate::out;

/// The environment variable carrying the registered instance's id.
pub(crate) const SERVICE_ID_ENV: &str = "ZKW_SERVICE_ID";
/// The environment variable carrying this member's barrier node.
pub(crate) const BARRIER_NODE_ENV: &str = "ZKW_BARRIER_NODE";
/// A wait without `--timeout`: one round of it, repeated until it succeeds.
const ROUND: Duration = Duration::from_secs(24 * 60 * 60);

/// `register NAME … -- CMD`: registers, runs CMD, unregisters; CMD's exit code.
pub(crate) async fn register(g: &Global, a: &RegisterArgs) -> Result<u8, Failure> {
    check_path(&a.base, false)?;
    check_name(&a.name)?;
    if let Some(id) = &a.id {
        check_name(id)?;
    }
    // From here on, Ctrl-C and SIGTERM are ours to handle: nothing may stay registered.
    let mut signals = Signals::new()?;
    let connecting = signals.interrupted("connecting");
    let client = until_stopped(g.connect_renewing(), connecting).await?;
    let result = register_and_run(g, &client, a, &mut signals).await;
    g.close(&client).await;
    result
}

async fn register_and_run(
    g: &Global,
    client: &Client,
    a: &RegisterArgs,
    signals: &mut Signals,
) -> Result<u8, Failure> {
    let discovery = ServiceDiscovery::new(client.clone(), a.base.clone());
    let mut builder = ServiceInstance::builder(a.name.clone())
        .address(a.address.clone())
        .port(a.port);
    if let Some(port) = a.ssl_port {
        builder = builder.ssl_port(port);
    }
    if let Some(id) = &a.id {
        builder = builder.id(id.clone());
    }
    if let Some(payload) = &a.payload {
        builder = builder.payload(payload.clone());
    }
    let instance = builder.build();
    let node = discovery.path_for_instance(&instance.name, &instance.id);
    let registering = tokio::time::timeout(g.session_timeout, discovery.register(instance));
    let registration = tokio::select! {
        registered = registering => match registered {
            Ok(Ok(registration)) => registration,
            Ok(Err(e)) => return Err(Failure::lock(&node, &e)),
            Err(_) => return Err(Failure::new(UNAVAILABLE, format!(
                "{node}: not registered within {}", show_duration(g.session_timeout)
            ))),
        },
        name = signals.any() => return Err(interrupted(name, &format!("registering {node}"))),
    };
    let env = [(SERVICE_ID_ENV, registration.instance().id.clone())];
    let events = registration.node().map(|node| node.events());
    let running = Running::spawn(&a.run.command, &env, a.run.foreground, g.json);
    let code = match running {
        Ok(mut running) => {
            let watch = report_registration(events);
            run_to_end(&mut running, signals, a.run.foreground, watch).await
        }
        Err(failure) => Err(failure),
    };
    // The command and its whole group are over: the instance goes.
    match tokio::time::timeout(g.session_timeout, registration.unregister()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => out::note(&format!("unregistering {node}: {e}")),
        Err(_) => out::note(&format!(
            "could not unregister {node} in time; it goes when the session ends"
        )),
    }
    code
}

/// `barrier PATH --members N -- CMD`: enters, runs CMD, leaves; CMD's exit code, or
/// [`LOCK_TIMEOUT`] when the members did not all enter within `--timeout`.
pub(crate) async fn barrier(g: &Global, a: &BarrierArgs) -> Result<u8, Failure> {
    check_path(&a.path, false)?;
    let mut signals = Signals::new()?;
    let connecting = signals.interrupted("connecting");
    let client = until_stopped(g.connect(), connecting).await?;
    let result = barrier_and_run(&client, a, &mut signals, g.json).await;
    g.close(&client).await;
    result
}

/// Enters, runs CMD (its start failures reported as JSON with `json`), leaves.
async fn barrier_and_run(
    client: &Client,
    a: &BarrierArgs,
    signals: &mut Signals,
    json: bool,
) -> Result<u8, Failure> {
    let members = usize::try_from(a.members).unwrap_or(usize::MAX);
    let mut barrier = DistributedDoubleBarrier::new(client.clone(), a.path.clone(), members);
    let entered = tokio::select! {
        entered = enter(&mut barrier, a.timeout) => entered.map_err(|e| Failure::lock(&a.path, &e))?,
        name = signals.any() => return Err(interrupted(name, &format!("waiting to enter the barrier {}", a.path))),
    };
    if !entered {
        let waited = a.timeout.map_or_else(String::new, show_duration);
        return Err(Failure::new(
            LOCK_TIMEOUT,
            format!(
                "barrier {}: not all {} members entered within {waited}",
                a.path, a.members
            ),
        ));
    }
    let node = barrier.member_path().unwrap_or_default().to_owned();
    let env = [(BARRIER_NODE_ENV, node.clone())];
    let code = match Running::spawn(&a.run.command, &env, a.run.foreground, json) {
        Ok(mut running) => {
            let watch = report_expiry(client, &node);
            run_to_end(&mut running, signals, a.run.foreground, watch).await?
        }
        Err(failure) => {
            // Leave without waiting for the others: this member did nothing.
            drop(barrier);
            return Err(failure);
        }
    };
    let left = tokio::select! {
        left = leave(&mut barrier) => left,
        name = signals.any() => return Err(interrupted(name, &format!(
            "waiting for the other members to leave the barrier {} (the command exited with code {code})",
            a.path
        ))),
    };
    if let Err(e) = left {
        out::note(&format!("leaving the barrier {}: {e}", a.path));
    }
    Ok(code)
}

/// Enters within `timeout` (`None`: however long it takes); `false` at the deadline.
async fn enter(
    barrier: &mut DistributedDoubleBarrier,
    timeout: Option<Duration>,
) -> Result<bool, zkwire_recipes::LockError> {
    match timeout {
        Some(t) => barrier.enter(t).await,
        None => loop {
            if barrier.enter(ROUND).await? {
                return Ok(true);
            }
        },
    }
}

/// Leaves, waiting however long the others take.
async fn leave(barrier: &mut DistributedDoubleBarrier) -> Result<(), zkwire_recipes::LockError> {
    while !barrier.leave(ROUND).await? {}
    Ok(())
}

/// Says on stderr what becomes of the registration while the command runs: the instance
/// gone (its session expired, or someone deleted it) and registered again. Never returns.
async fn report_registration(events: Option<NodeEvents>) {
    if let Some(mut events) = events {
        while let Some(event) = events.next().await {
            match event {
                NodeEvent::Deleted { path } => out::note(&format!(
                    "{path} is gone (the session expired or the node was deleted); \
                     registering it again"
                )),
                NodeEvent::Created { path } => out::note(&format!("registered again at {path}")),
                NodeEvent::Stopped(Some(e)) => {
                    out::note(&format!("the instance is no longer registered: {e}"));
                }
                _ => {}
            }
        }
    }
    std::future::pending().await
}

/// Says on stderr when the session ends while the command runs: this member's barrier node
/// `node` went with it. Never returns.
async fn report_expiry(client: &Client, node: &str) {
    let mut states = client.state_stream();
    while let Some(state) = states.next().await {
        if state.is_terminal() {
            out::note(&format!(
                "the session ended ({state:?}) while the command ran: {node} went with it, \
                 so the other members may leave without waiting for this one"
            ));
            break;
        }
    }
    std::future::pending().await
}

/// Waits for the command and every process of its group, passing signals on, while `watch`
/// reports on the session; the command's code.
async fn run_to_end(
    running: &mut Running,
    signals: &mut Signals,
    foreground: bool,
    watch: impl Future<Output = ()>,
) -> Result<u8, Failure> {
    tokio::pin!(watch);
    let status = loop {
        tokio::select! {
            status = running.wait_group() => break status,
            name = signals.any() => forward(running, name, foreground),
            () = &mut watch => {}
        }
    };
    status
        .map(exit_code)
        .map_err(|e| Failure::new(FAILED, format!("cannot wait for the command: {e}")))
}

/// zkw was stopped by SIG`name` while `doing`.
fn interrupted(name: &str, doing: &str) -> Failure {
    Failure::new(
        signal_exit_code(name),
        format!("interrupted by SIG{name} while {doing}"),
    )
}
