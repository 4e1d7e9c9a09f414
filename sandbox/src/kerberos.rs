//! A throwaway Kerberos realm for the SASL GSSAPI tests: an MIT KDC (Debian's `krb5-kdc` and
//! `krb5-admin-server`, for `kadmin.local`) with its database, configuration and keytabs in a
//! fresh temporary directory, listening on a free loopback port.
//!
//! The realm is [`REALM`]; the ZooKeeper servers' principal is [`SERVER_PRINCIPAL`]
//! (`zookeeper/localhost`, so clients must connect to `localhost`). [`Kdc::add_principal`]
//! makes a client principal and its keytab. The KDC runs under the same watchdog as the test
//! servers: it dies with the test process, and its directory goes with it unless
//! `ZKWIRE_KEEP_LOGS=1`.
//!
//! Clients find the realm through the environment variables of [`Kdc::client_env`]:
//! `KRB5_CONFIG` (this realm's `krb5.conf`), `KRB5CCNAME` (a ticket cache of its own) and
//! `KRB5_CLIENT_KTNAME` (a client keytab the Kerberos library gets tickets from by itself).

use std::env;
use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::server::{keep_logs, WATCHDOG};
use crate::tls::{fresh_dir, run_tool};

/// The test realm.
pub const REALM: &str = "ZKWIRE.TEST";

/// The ZooKeeper servers' principal: service `zookeeper` on host `localhost`.
pub const SERVER_PRINCIPAL: &str = "zookeeper/localhost@ZKWIRE.TEST";

const INSTALL: &str =
    "install MIT Kerberos' KDC: apt-get install -y krb5-kdc krb5-admin-server krb5-user";

/// How long the KDC may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A running KDC and its realm; see the module documentation. Stopped on drop.
#[derive(Debug)]
pub struct Kdc {
    dir: PathBuf,
    port: u16,
    watchdog: Child,
    stdin: Option<ChildStdin>,
}

impl Kdc {
    /// Creates the realm (database, server keytab) and starts the KDC.
    ///
    /// # Errors
    /// The MIT KDC tools are missing (the error says what to install), or one fails.
    pub fn start() -> io::Result<Self> {
        let dir = fresh_dir("kdc")?;
        let port = free_port()?;
        write_configs(&dir, port)?;
        let kdb5_util = tool("kdb5_util")?;
        run_tool(
            Command::new(kdb5_util).envs(kdc_env(&dir)).args([
                "create",
                "-s",
                "-r",
                REALM,
                "-P",
                "zkwire-master",
            ]),
            INSTALL,
        )?;
        let watchdog = spawn_kdc(&dir)?;
        let mut kdc = Self {
            dir,
            port,
            stdin: None,
            watchdog,
        };
        kdc.stdin = kdc.watchdog.stdin.take();
        kdc.add_principal_to("zookeeper/localhost", &kdc.server_keytab())?;
        kdc.wait_listening()?;
        Ok(kdc)
    }

    /// The realm's `krb5.conf`, for clients (`KRB5_CONFIG`) and Java
    /// (`java.security.krb5.conf`).
    pub fn krb5_conf(&self) -> PathBuf {
        self.dir.join("krb5.conf")
    }

    /// The keytab holding [`SERVER_PRINCIPAL`]'s keys.
    pub fn server_keytab(&self) -> PathBuf {
        self.dir.join("zookeeper.keytab")
    }

    /// The port the KDC listens on (TCP, loopback).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Adds principal `name` (in [`REALM`]) with a random key, exported to a keytab of its own,
    /// whose path is returned.
    ///
    /// # Errors
    /// `kadmin.local` is missing or fails.
    pub fn add_principal(&self, name: &str) -> io::Result<PathBuf> {
        let keytab = self.dir.join(format!("{}.keytab", name.replace('/', "_")));
        self.add_principal_to(name, &keytab)?;
        Ok(keytab)
    }

    /// The environment a client process needs to authenticate as the principal of `keytab`
    /// (from [`add_principal`](Self::add_principal)): this realm's configuration, a ticket
    /// cache of its own named `cache`, and the keytab as the client keytab.
    pub fn client_env(&self, keytab: &Path, cache: &str) -> Vec<(&'static str, OsString)> {
        let mut ccache = OsString::from("FILE:");
        ccache.push(self.dir.join(format!("{cache}.ccache")));
        vec![
            ("KRB5_CONFIG", self.krb5_conf().into_os_string()),
            ("KRB5CCNAME", ccache),
            ("KRB5_CLIENT_KTNAME", keytab.as_os_str().to_owned()),
        ]
    }

    fn add_principal_to(&self, name: &str, keytab: &Path) -> io::Result<()> {
        let kadmin = tool("kadmin.local")?;
        for query in [
            format!("addprinc -randkey {name}"),
            format!("ktadd -k {} {name}", keytab.display()),
        ] {
            run_tool(
                Command::new(&kadmin)
                    .envs(kdc_env(&self.dir))
                    .args(["-r", REALM, "-q", &query]),
                INSTALL,
            )?;
        }
        Ok(())
    }

    fn wait_listening(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            if let Some(status) = self.watchdog.try_wait()? {
                return Err(self.failed(&format!("the KDC exited ({status})")));
            }
            if Instant::now() > deadline {
                return Err(
                    self.failed(&format!("the KDC did not listen within {START_TIMEOUT:?}"))
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn failed(&self, what: &str) -> io::Error {
        let log = fs::read_to_string(self.dir.join("kdc.log")).unwrap_or_default();
        io::Error::other(format!("{what}; its log:\n{log}"))
    }
}

impl Drop for Kdc {
    fn drop(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"kill\n");
        }
        let _ = self.watchdog.wait();
        if !keep_logs() {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// `krb5.conf` for everyone and `kdc.conf` for the KDC: clients use TCP only (the port was
/// free for TCP; the KDC listens on UDP too, unused), no DNS (host names are taken as written,
/// so `localhost` stays `localhost`), AES keys only.
fn write_configs(dir: &Path, port: u16) -> io::Result<()> {
    let d = dir.display();
    fs::write(
        dir.join("krb5.conf"),
        format!(
            "[libdefaults]\n default_realm = {REALM}\n dns_lookup_realm = false\n \
             dns_lookup_kdc = false\n dns_canonicalize_hostname = false\n rdns = false\n \
             udp_preference_limit = 1\n\
             [realms]\n {REALM} = {{\n  kdc = 127.0.0.1:{port}\n }}\n\
             [domain_realm]\n localhost = {REALM}\n"
        ),
    )?;
    fs::write(
        dir.join("kdc.conf"),
        format!(
            "[kdcdefaults]\n kdc_listen = 127.0.0.1:{port}\n kdc_tcp_listen = 127.0.0.1:{port}\n\
             [realms]\n {REALM} = {{\n  database_name = {d}/principal\n  \
             key_stash_file = {d}/stash\n  acl_file = {d}/kadm5.acl\n  max_life = 1h\n  \
             supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n \
             }}\n[logging]\n kdc = FILE:{d}/kdc.log\n admin_server = FILE:{d}/kadmin.log\n"
        ),
    )?;
    fs::write(dir.join("kadm5.acl"), "")
}

fn kdc_env(dir: &Path) -> [(&'static str, PathBuf); 2] {
    [
        ("KRB5_CONFIG", dir.join("krb5.conf")),
        ("KRB5_KDC_PROFILE", dir.join("kdc.conf")),
    ]
}

fn spawn_kdc(dir: &Path) -> io::Result<Child> {
    let krb5kdc = tool("krb5kdc")?;
    let log = fs::File::create(dir.join("kdc.out"))?;
    Command::new("bash")
        .arg("-c")
        .arg(WATCHDOG)
        .arg("zkwire-kdc-watchdog")
        .arg(dir)
        .arg(dir.join("kdc.pid"))
        .arg(std::process::id().to_string())
        .arg(if keep_logs() { "1" } else { "0" })
        .arg(krb5kdc)
        .args(["-n", "-r", REALM])
        .envs(kdc_env(dir))
        .stdin(Stdio::piped())
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log))
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("starting the KDC's watchdog (bash): {e}")))
}

/// The path of an MIT KDC tool (they live in `/usr/sbin`, often not on a user's `PATH`).
fn tool(name: &str) -> io::Result<PathBuf> {
    let search = env::var_os("PATH").unwrap_or_default();
    env::split_paths(&search)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no `{name}`: {INSTALL}")))
}

fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port())
}
