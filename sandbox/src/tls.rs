//! Certificates for secured test servers, generated per run with the `openssl` command line
//! tool (and the JDK's `keytool` for a PKCS12 trust store Java accepts). No key is committed.
//!
//! One [`TlsMaterial`] holds:
//! - a CA (EC P-256, `CN=zkwire test CA`);
//! - a server certificate signed by it whose subjectAltName is **only** `DNS:localhost`, so a
//!   client connecting to `localhost:port` verifies it and one connecting to `127.0.0.1:port`
//!   must refuse it;
//! - a client certificate signed by it, subject `CN=zkwire-client,O=zkwire` (the x509
//!   identity ZooKeeper derives: `x509:CN=zkwire-client,O=zkwire`);
//! - a second, unrelated CA and a client certificate signed by that one;
//! - the server's key stores: PEM (key, certificate and CA in one file; keys in PKCS#8, which
//!   ZooKeeper's PEM reader needs) and PKCS12, with trust stores of both types.
//!
//! The directory is removed on drop unless `ZKWIRE_KEEP_LOGS=1`. A server configured from a
//! material reads its files at start and restart: keep the material alive as long as it.

use std::env;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::server::keep_logs;

/// The password of the PKCS12 stores.
pub const STORE_PASSWORD: &str = "zkwire-test";

/// The subject of the client certificate, as ZooKeeper's x509 provider names it.
pub const CLIENT_SUBJECT: &str = "CN=zkwire-client,O=zkwire";

/// Whether the server asks for client certificates (`ssl.clientAuth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// Required: a connection without a trusted client certificate is refused.
    Need,
    /// Asked for, not required.
    Want,
    /// Not asked for.
    None,
}

impl ClientAuth {
    pub(crate) fn as_config(self) -> &'static str {
        match self {
            Self::Need => "need",
            Self::Want => "want",
            Self::None => "none",
        }
    }
}

/// The server's key and trust store format (`ssl.keyStore.type`, `ssl.trustStore.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreType {
    /// PEM files.
    Pem,
    /// PKCS12 files, password [`STORE_PASSWORD`].
    Pkcs12,
}

/// A directory of freshly generated certificates and keys; see the module documentation.
#[derive(Debug)]
pub struct TlsMaterial {
    dir: PathBuf,
    keep: bool,
}

impl Drop for TlsMaterial {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A new empty directory `zkwire-{tag}-{pid}-{n}` under the system's temporary directory (one
/// left there by an earlier process with the same id is removed first).
pub(crate) fn fresh_dir(tag: &str) -> io::Result<PathBuf> {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = env::temp_dir().join(format!("zkwire-{tag}-{}-{n}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
    Ok(dir)
}

impl TlsMaterial {
    /// Generates everything in a new temporary directory.
    ///
    /// # Errors
    /// `openssl` or `keytool` is missing or fails (the error says which command and why).
    pub fn generate() -> io::Result<Self> {
        let dir = fresh_dir("tls")?;
        let material = Self {
            dir,
            keep: keep_logs(),
        };
        material.make_ca("ca", "/CN=zkwire test CA")?;
        material.make_ca("other-ca", "/CN=zkwire other CA")?;
        material.make_leaf(
            "server",
            "ca",
            "/CN=localhost",
            "subjectAltName=DNS:localhost",
        )?;
        let client_ext = "extendedKeyUsage=clientAuth";
        material.make_leaf("client", "ca", "/O=zkwire/CN=zkwire-client", client_ext)?;
        material.make_leaf("other-client", "other-ca", "/CN=stranger", client_ext)?;
        material.make_stores()?;
        Ok(material)
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The CA certificate (PEM) that signed the server and client certificates.
    pub fn ca_cert(&self) -> PathBuf {
        self.file("ca.pem")
    }

    /// The client certificate (PEM).
    pub fn client_cert(&self) -> PathBuf {
        self.file("client.pem")
    }

    /// The client's private key (PKCS#8 PEM).
    pub fn client_key(&self) -> PathBuf {
        self.file("client-key.pem")
    }

    /// An unrelated CA's certificate (PEM).
    pub fn other_ca_cert(&self) -> PathBuf {
        self.file("other-ca.pem")
    }

    /// A client certificate signed by the unrelated CA (PEM).
    pub fn other_client_cert(&self) -> PathBuf {
        self.file("other-client.pem")
    }

    /// That certificate's key (PKCS#8 PEM).
    pub fn other_client_key(&self) -> PathBuf {
        self.file("other-client-key.pem")
    }

    /// The server's key store of `kind`: key, certificate and CA.
    pub fn server_key_store(&self, kind: StoreType) -> PathBuf {
        match kind {
            StoreType::Pem => self.file("server-store.pem"),
            StoreType::Pkcs12 => self.file("server-store.p12"),
        }
    }

    /// The server's trust store of `kind`: the CA.
    pub fn server_trust_store(&self, kind: StoreType) -> PathBuf {
        match kind {
            StoreType::Pem => self.ca_cert(),
            StoreType::Pkcs12 => self.file("trust-store.p12"),
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn make_ca(&self, name: &str, subject: &str) -> io::Result<()> {
        let key = self.file(&format!("{name}-key.pem"));
        self.new_key(&key)?;
        run(Command::new("openssl")
            .args([
                "req", "-x509", "-new", "-sha256", "-days", "30", "-subj", subject,
            ])
            .args(["-addext", "basicConstraints=critical,CA:TRUE"])
            .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"])
            .arg("-key")
            .arg(&key)
            .arg("-out")
            .arg(self.file(&format!("{name}.pem"))))
    }

    fn make_leaf(&self, name: &str, ca: &str, subject: &str, extension: &str) -> io::Result<()> {
        let key = self.file(&format!("{name}-key.pem"));
        let csr = self.file(&format!("{name}.csr"));
        let ext = self.file(&format!("{name}.ext"));
        self.new_key(&key)?;
        run(Command::new("openssl")
            .args(["req", "-new", "-sha256", "-subj", subject])
            .arg("-key")
            .arg(&key)
            .arg("-out")
            .arg(&csr))?;
        fs::write(&ext, format!("{extension}\nbasicConstraints=CA:FALSE\n"))?;
        run(Command::new("openssl")
            .args(["x509", "-req", "-sha256", "-days", "30", "-set_serial"])
            .arg(format!(
                "{}",
                0x5eed_0000 + COUNTER.fetch_add(1, Ordering::Relaxed)
            ))
            .arg("-in")
            .arg(&csr)
            .arg("-CA")
            .arg(self.file(&format!("{ca}.pem")))
            .arg("-CAkey")
            .arg(self.file(&format!("{ca}-key.pem")))
            .arg("-extfile")
            .arg(&ext)
            .arg("-out")
            .arg(self.file(&format!("{name}.pem"))))
    }

    /// An EC P-256 key in PKCS#8 PEM.
    fn new_key(&self, path: &Path) -> io::Result<()> {
        run(Command::new("openssl")
            .args([
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
            ])
            .arg("-out")
            .arg(path))
    }

    fn make_stores(&self) -> io::Result<()> {
        let mut pem = fs::read(self.file("server-key.pem"))?;
        pem.extend(fs::read(self.file("server.pem"))?);
        pem.extend(fs::read(self.ca_cert())?);
        fs::write(self.server_key_store(StoreType::Pem), pem)?;
        run(Command::new("openssl")
            .args(["pkcs12", "-export", "-name", "server"])
            .arg("-inkey")
            .arg(self.file("server-key.pem"))
            .arg("-in")
            .arg(self.file("server.pem"))
            .arg("-certfile")
            .arg(self.ca_cert())
            .arg("-passout")
            .arg(format!("pass:{STORE_PASSWORD}"))
            .arg("-out")
            .arg(self.server_key_store(StoreType::Pkcs12)))?;
        // OpenSSL 3.0 writes certificate-only PKCS12 files Java does not take as trusted
        // entries: the JDK's keytool writes the trust store.
        run(Command::new("keytool")
            .args([
                "-importcert",
                "-noprompt",
                "-alias",
                "ca",
                "-storetype",
                "PKCS12",
            ])
            .arg("-file")
            .arg(self.ca_cert())
            .arg("-keystore")
            .arg(self.server_trust_store(StoreType::Pkcs12))
            .args(["-storepass", STORE_PASSWORD]))
    }
}

fn run(command: &mut Command) -> io::Result<()> {
    run_tool(command, "install openssl and a JDK (keytool)")
}

/// Runs a command line tool to completion; an error names the command, its output and, when
/// the tool cannot be run at all, `install`: how to get it.
pub(crate) fn run_tool(command: &mut Command, install: &str) -> io::Result<()> {
    let program = command.get_program().to_string_lossy().into_owned();
    let output = command.output().map_err(|e| {
        io::Error::new(e.kind(), format!("cannot run `{program}` ({e}): {install}"))
    })?;
    if output.status.success() {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "`{program} {}` failed ({}): {}",
        command
            .get_args()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    )))
}
