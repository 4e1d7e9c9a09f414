//! The verbs of groups, services and barriers: `members`, `services`, `register`, `barrier`.

use std::time::Duration;

use clap::Args;

use super::durations::duration;
use super::run_args::RunArgs;

/// `members`.
#[derive(Debug, Clone, Args)]
pub(crate) struct MembersArgs {
    /// The group's path
    pub(crate) path: String,
    /// Print again at every change, until Ctrl-C
    #[arg(long)]
    pub(crate) watch: bool,
}

/// The base path of service discovery, Curator's usual one.
const SERVICES_BASE: &str = "/services";

/// `services`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ServicesArgs {
    /// The service whose instances to list [default: list the service names]
    pub(crate) name: Option<String>,
    /// The base path of service discovery
    #[arg(long, value_name = "PATH", default_value = SERVICES_BASE)]
    pub(crate) base: String,
    /// Print again at every change, until Ctrl-C
    #[arg(long)]
    pub(crate) watch: bool,
}

/// `register`.
#[derive(Debug, Clone, Args)]
pub(crate) struct RegisterArgs {
    /// The service's name
    pub(crate) name: String,
    /// The address (host or IP) the instance serves on
    #[arg(long, value_name = "A", required = true)]
    pub(crate) address: String,
    /// The port the instance serves on
    #[arg(long, value_name = "P", required = true)]
    pub(crate) port: u16,
    /// The instance's TLS port
    #[arg(long, value_name = "P")]
    pub(crate) ssl_port: Option<u16>,
    /// The instance's id, unique in the service [default: a random UUID]
    #[arg(long)]
    pub(crate) id: Option<String>,
    /// The instance's payload, a JSON value
    #[arg(long, value_name = "JSON", value_parser = json_value)]
    pub(crate) payload: Option<serde_json::Value>,
    /// The base path of service discovery
    #[arg(long, value_name = "PATH", default_value = SERVICES_BASE)]
    pub(crate) base: String,
    /// The command to run.
    #[command(flatten)]
    pub(crate) run: RunArgs,
}

/// `barrier`.
#[derive(Debug, Clone, Args)]
pub(crate) struct BarrierArgs {
    /// The barrier's path
    pub(crate) path: String,
    /// How many members the barrier waits for (every member uses the same N)
    #[arg(long, value_name = "N", required = true,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) members: u32,
    /// Give up waiting for the others to enter after D: exit 73
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    pub(crate) timeout: Option<Duration>,
    /// The command to run.
    #[command(flatten)]
    pub(crate) run: RunArgs,
}

/// A JSON value (`--payload`).
///
/// # Errors
/// Why `text` is not JSON.
fn json_value(text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))
}

pub(super) const MEMBERS_HELP: &str = "\
Lists the members of the group at PATH in Apache Curator's GroupMember layout (one ephemeral
child per member, named by its id, holding its data), sorted by id: one line per member, its
id and its data (as text, control characters escaped). --json prints one document
{\"path\":…,\"members\":[{\"id\",\"data\",\"data_base64\",\"session\"}]} (session: the
member node's ephemeralOwner); --watch prints it again at every change. Exit 1 when PATH
does not exist.";

pub(super) const SERVICES_HELP: &str = "\
Without NAME, lists the services registered under --base (default /services) in Apache
Curator's ServiceDiscovery layout, one name per line. With NAME, lists its instances, one
line each: id, address:port, ssl port, service type, registration time (UTC) and payload
(JSON). --json prints {\"base\":…,\"services\":[…]}, or {\"base\":…,\"name\":…,
\"instances\":[{\"id\",\"address\",\"port\",\"ssl_port\",\"service_type\",
\"registration_time_utc\",\"payload\",\"uri_spec\"}]} (times in ms since the epoch);
--watch prints again at every change below --base.";

pub(super) const REGISTER_HELP: &str = "\
Registers an instance of service NAME under --base (default /services) in Apache Curator's
ServiceDiscovery layout, DYNAMIC (an ephemeral node, --id or a random UUID its name, Curator's
JSON its data), runs CMD with ZKW_SERVICE_ID (the instance's id) in its environment, and
unregisters once CMD and every process of its group have exited; exits with CMD's code.
Curator's ServiceDiscovery, ServiceCache and `zkw services NAME` see the instance meanwhile.
Ctrl-C, Ctrl-\\, SIGTERM and SIGHUP are passed on to CMD (a SIGHUP ignored when zkw started,
as under nohup, stays ignored, for CMD too); before CMD starts they stop zkw (exit 130, 131,
143, 129) without leaving the instance behind.";

pub(super) const BARRIER_HELP: &str = "\
Enters the double barrier at PATH (Apache Curator's DistributedDoubleBarrier layout: zkw and
Curator members of one barrier wait for each other) and waits until N members have entered,
runs CMD with ZKW_BARRIER_NODE (this member's node) in its environment, then leaves: waits
until every member has left, and exits with CMD's code. --timeout bounds the wait to enter:
exit 73 when fewer than N members came in time (the member node is deleted). Ctrl-C,
Ctrl-\\, SIGTERM and SIGHUP are passed on to CMD (a SIGHUP ignored when zkw started stays
ignored); while waiting they stop zkw (exit 130, 131, 143, 129).";
