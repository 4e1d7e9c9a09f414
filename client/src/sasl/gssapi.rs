//! SASL GSSAPI: Kerberos V5 through the system's GSS-API library (RFC 4752).
//!
//! The exchange, as ZooKeeper's server runs it (`docs/security.md`, "Kerberos"):
//! 1. the client sends the Kerberos AP-REQ for `<service>@<host>`; the server answers with its
//!    AP-REP (mutual authentication: a server without the service's key cannot forge it);
//! 2. the client, its context now complete, sends an empty token; the server answers with a
//!    wrapped 4-byte offer: the security layers it accepts and its largest message;
//! 3. the client answers with a wrapped choice: "no security layer" (the connection is
//!    already plaintext or protected by TLS; ZooKeeper never wraps its packets);
//! 4. the server's answer to that ends the exchange.

use libgssapi::context::{ClientCtx, CtxFlags, SecurityContext};
use libgssapi::credential::{Cred, CredUsage};
use libgssapi::name::Name;
use libgssapi::oid::{OidSet, GSS_MECH_KRB5, GSS_NT_HOSTBASED_SERVICE, GSS_NT_KRB5_PRINCIPAL};

use crate::session::{SaslExchange, SaslMechanism};

/// The security-layer bit for "none" in the server's offer and the client's choice.
const NO_SECURITY_LAYER: u8 = 1;

/// How to authenticate to ZooKeeper with Kerberos (SASL GSSAPI, feature `sasl-gssapi`).
///
/// Credentials come from the system's Kerberos library: the default ticket cache
/// (`KRB5CCNAME`, filled by `kinit`) or, with MIT Kerberos, the client keytab named by
/// `KRB5_CLIENT_KTNAME`, from which the library gets and renews tickets itself. The library's
/// configuration is `/etc/krb5.conf` or the file `KRB5_CONFIG` names.
///
/// The server is authenticated too: its principal is `<service>/<host>`, where `service` is
/// `zookeeper` unless [`with_service`](Self::with_service) says otherwise (the Java client's
/// `zookeeper.sasl.client.username`) and `host` is the host of each connection as the connect
/// string names it, unless [`with_server_host`](Self::with_server_host) fixes one. The session's
/// identity is then `sasl:<principal>` (the server may strip the host or the realm, as its
/// `kerberos.removeHostFromPrincipal` / `kerberos.removeRealmFromPrincipal` say).
///
/// Each new connection asks the library for a service ticket; the first may reach the KDC
/// (the library caches the ticket after that), which the driver's task waits for.
///
/// ```no_run
/// # async fn run() -> Result<(), zkwire::Error> {
/// use zkwire::{Client, Kerberos};
///
/// let client = Client::builder()
///     .with_sasl_kerberos(Kerberos::new().with_principal("app@EXAMPLE.COM"))
///     .connect("zk1.example.com:2181,zk2.example.com:2181")
///     .await?;
/// let me = client.who_am_i().await?;
/// assert!(me.iter().any(|id| id.auth_scheme == "sasl"));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Kerberos {
    principal: Option<String>,
    service: String,
    server_host: Option<String>,
}

impl Default for Kerberos {
    fn default() -> Self {
        Self::new()
    }
}

impl Kerberos {
    /// The default principal of the ticket cache (or of the client keytab), to each server
    /// as `zookeeper/<host>`.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), zkwire::Error> {
    /// use zkwire::Kerberos;
    ///
    /// // The ticket cache's principal (after `kinit`), to each server as zookeeper/<host>.
    /// let client = zkwire::Client::builder()
    ///     .with_sasl_kerberos(Kerberos::new())
    ///     .connect("zk1.example.com:2181")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn new() -> Self {
        Self {
            principal: None,
            service: "zookeeper".to_owned(),
            server_host: None,
        }
    }

    /// Authenticates as `principal` (`user@REALM`) rather than the cache's default one.
    ///
    /// ```
    /// use zkwire::Kerberos;
    /// let kerberos = Kerberos::new().with_principal("reports@EXAMPLE.COM");
    /// assert_eq!(kerberos.principal(), Some("reports@EXAMPLE.COM"));
    /// ```
    #[must_use]
    pub fn with_principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into());
        self
    }

    /// The service part of the servers' principal (`zookeeper` by default).
    ///
    /// ```
    /// use zkwire::Kerberos;
    /// // Servers whose principals are zk/<host>@REALM.
    /// let kerberos = Kerberos::new().with_service("zk");
    /// # let _ = kerberos;
    /// ```
    #[must_use]
    pub fn with_service(mut self, service: impl Into<String>) -> Self {
        self.service = service.into();
        self
    }

    /// Names every server's principal after `host` instead of the host each connection goes
    /// to: for connect strings of IP addresses, or servers that share one principal.
    ///
    /// ```
    /// use zkwire::Kerberos;
    /// // A connect string of IP addresses; every server is zookeeper/zk.example.com.
    /// let kerberos = Kerberos::new().with_server_host("zk.example.com");
    /// # let _ = kerberos;
    /// ```
    #[must_use]
    pub fn with_server_host(mut self, host: impl Into<String>) -> Self {
        self.server_host = Some(host.into());
        self
    }

    /// The principal this configuration asks for, if not the default one.
    ///
    /// ```
    /// use zkwire::Kerberos;
    /// assert_eq!(Kerberos::new().principal(), None); // the ticket cache's default
    /// ```
    #[must_use]
    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }
}

impl SaslMechanism for Kerberos {
    fn name(&self) -> &'static str {
        "GSSAPI"
    }

    fn start(&self, server_host: &str) -> Box<dyn SaslExchange> {
        let host = self.server_host.as_deref().unwrap_or(server_host);
        Box::new(GssExchange {
            principal: self.principal.clone(),
            target: format!("{}@{host}", self.service),
            phase: Phase::NotStarted,
        })
    }
}

struct GssExchange {
    principal: Option<String>,
    /// The server, as a GSS-API host-based service name.
    target: String,
    phase: Phase,
}

enum Phase {
    NotStarted,
    /// Kerberos tokens are being exchanged.
    Context(ClientCtx),
    /// The context is complete; the server's security-layer offer comes next.
    SecurityLayer(ClientCtx),
    /// Our choice is sent; the server's answer ends the exchange.
    Chosen,
}

impl GssExchange {
    fn credentials(&self) -> Result<Cred, String> {
        let name = match &self.principal {
            Some(p) => Some(
                Name::new(p.as_bytes(), Some(GSS_NT_KRB5_PRINCIPAL))
                    .map_err(|e| format!("principal {p:?}: {e}"))?,
            ),
            None => None,
        };
        let mut mechs = OidSet::new();
        mechs.add(GSS_MECH_KRB5).map_err(|e| e.to_string())?;
        Cred::acquire(name.as_ref(), None, CredUsage::Initiate, Some(&mechs)).map_err(|e| {
            let who = self.principal.as_deref().unwrap_or("the default principal");
            format!(
                "no Kerberos credentials for {who} (kinit, or a keytab in KRB5_CLIENT_KTNAME): {e}"
            )
        })
    }

    fn context(&self) -> Result<ClientCtx, String> {
        let cred = self.credentials()?;
        let target = Name::new(self.target.as_bytes(), Some(GSS_NT_HOSTBASED_SERVICE))
            .map_err(|e| format!("server name {:?}: {e}", self.target))?;
        Ok(ClientCtx::new(
            Some(cred),
            target,
            CtxFlags::GSS_C_MUTUAL_FLAG,
            Some(GSS_MECH_KRB5),
        ))
    }

    /// Unwraps the server's offer and wraps our choice: no security layer, no buffer size,
    /// no authorization id (the server then authorizes the authenticated principal itself).
    fn choose_security_layer(ctx: &mut ClientCtx, offer: &[u8]) -> Result<Vec<u8>, String> {
        let offer = ctx
            .unwrap(offer)
            .map_err(|e| format!("the server's security-layer offer: {e}"))?;
        match *offer {
            [layers, _, _, _] if layers & NO_SECURITY_LAYER != 0 => {}
            [layers, _, _, _] => {
                return Err(format!(
                    "the server requires a SASL security layer (offer {layers:#04x}), \
                     which ZooKeeper clients do not use"
                ))
            }
            _ => return Err(format!("a {}-byte security-layer offer", offer.len())),
        }
        let choice = ctx
            .wrap(false, &[NO_SECURITY_LAYER, 0, 0, 0])
            .map_err(|e| format!("wrapping the security-layer choice: {e}"))?;
        Ok(choice.to_vec())
    }
}

impl SaslExchange for GssExchange {
    fn initial_response(&mut self) -> Result<Vec<u8>, String> {
        let mut ctx = self.context()?;
        let token = ctx
            .step(None, None)
            .map_err(|e| format!("a Kerberos ticket for {}: {e}", self.target))?
            .ok_or("GSS-API produced no initial token")?;
        self.phase = Phase::Context(ctx);
        Ok(token.to_vec())
    }

    fn step(&mut self, server_token: &[u8]) -> Result<Option<Vec<u8>>, String> {
        match std::mem::replace(&mut self.phase, Phase::Chosen) {
            Phase::NotStarted => Err("the server answered before the exchange started".into()),
            Phase::Context(mut ctx) => {
                let out = ctx
                    .step(Some(server_token), None)
                    .map_err(|e| format!("the server's Kerberos reply: {e}"))?;
                let out = out.map(|t| t.to_vec());
                if ctx.is_complete() {
                    self.phase = Phase::SecurityLayer(ctx);
                    Ok(Some(out.unwrap_or_default()))
                } else {
                    self.phase = Phase::Context(ctx);
                    out.map(Some)
                        .ok_or_else(|| "GSS-API wants more but produced no token".into())
                }
            }
            Phase::SecurityLayer(mut ctx) => {
                Self::choose_security_layer(&mut ctx, server_token).map(Some)
            }
            Phase::Chosen => Ok(None),
        }
    }
}
