//! `--tls-*` and `--sasl`: connecting to a secured ensemble.

use std::io::IsTerminal;

use zkwire::{ClientBuilder, TlsConfig};

use crate::cli::GlobalArgs;
use crate::fail::Failure;

/// The CA file when `--tls-ca` is not given.
pub(crate) const TLS_CA_ENV: &str = "ZKW_TLS_CA";
/// The client certificate when `--tls-cert` is not given.
pub(crate) const TLS_CERT_ENV: &str = "ZKW_TLS_CERT";
/// The client key when `--tls-key` is not given.
pub(crate) const TLS_KEY_ENV: &str = "ZKW_TLS_KEY";
/// The SASL mechanism when `--sasl` is not given.
const SASL_ENV: &str = "ZKW_SASL";
/// The SASL password when `--sasl digest:USER` carries none.
const SASL_PASSWORD_ENV: &str = "ZKW_SASL_PASSWORD";
/// `--sasl kerberos` in a `zkw` built without the `kerberos` feature.
#[cfg(not(feature = "kerberos"))]
const NO_KERBEROS: &str = "this zkw was built without Kerberos; rebuild with \
    `cargo install --path cli --features kerberos` (needs libkrb5-dev and libclang-dev)";

/// How to secure the connection.
#[derive(Debug, Clone, Default)]
pub(crate) struct Security {
    tls: Option<TlsConfig>,
    sasl: Option<Sasl>,
}

#[derive(Clone)]
enum Sasl {
    Digest {
        user: String,
        password: String,
    },
    /// Kerberos, as `principal` or the ticket cache's default one.
    #[cfg(feature = "kerberos")]
    Kerberos {
        principal: Option<String>,
    },
}

impl std::fmt::Debug for Sasl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Digest { user, .. } => write!(f, "Digest({user}, <redacted>)"),
            #[cfg(feature = "kerberos")]
            Self::Kerberos { principal } => write!(f, "Kerberos({principal:?})"),
        }
    }
}

impl Security {
    /// Whether the session authenticates with SASL.
    pub(crate) fn has_sasl(&self) -> bool {
        self.sasl.is_some()
    }

    /// The options of a parsed command line, falling back on the environment.
    ///
    /// # Errors
    /// A usage failure: an unreadable certificate, a key without a certificate, a bad
    /// `--sasl` value, a password that cannot be read.
    pub(crate) fn from_args(args: &GlobalArgs) -> Result<Self, Failure> {
        let option = |given: &Option<String>, env: &str| {
            given
                .clone()
                .or_else(|| std::env::var(env).ok().filter(|v| !v.is_empty()))
        };
        let ca = option(&args.tls_ca, TLS_CA_ENV);
        let cert = option(&args.tls_cert, TLS_CERT_ENV);
        let key = option(&args.tls_key, TLS_KEY_ENV);
        let tls = tls_config(ca, cert, key)?;
        let sasl = option(&args.sasl, SASL_ENV)
            .map(|v| parse_sasl(&v))
            .transpose()?;
        Ok(Self { tls, sasl })
    }

    /// Adds the settings to `builder`.
    pub(crate) fn apply(&self, mut builder: ClientBuilder) -> ClientBuilder {
        if let Some(tls) = &self.tls {
            builder = builder.with_tls(tls.clone());
        }
        match &self.sasl {
            Some(Sasl::Digest { user, password }) => builder.with_sasl_digest(user, password),
            #[cfg(feature = "kerberos")]
            Some(Sasl::Kerberos { principal }) => {
                let mut kerberos = zkwire::Kerberos::new();
                if let Some(p) = principal {
                    kerberos = kerberos.with_principal(p);
                }
                builder.with_sasl_kerberos(kerberos)
            }
            None => builder,
        }
    }
}

fn tls_config(
    ca: Option<String>,
    cert: Option<String>,
    key: Option<String>,
) -> Result<Option<TlsConfig>, Failure> {
    let bad = |e: zkwire::TlsConfigError| Failure::usage(e.to_string());
    let tls = match (ca, cert, key) {
        (None, None, None) => return Ok(None),
        (None, _, _) => {
            return Err(Failure::usage(format!(
                "--tls-cert and --tls-key (or ${TLS_CERT_ENV}, ${TLS_KEY_ENV}) need --tls-ca \
                 (or ${TLS_CA_ENV})"
            )))
        }
        (Some(ca), None, None) => TlsConfig::new().with_ca_file(ca).map_err(bad)?,
        (Some(ca), Some(cert), Some(key)) => TlsConfig::new()
            .with_ca_file(ca)
            .map_err(bad)?
            .with_client_cert_files(cert, key)
            .map_err(bad)?,
        _ => {
            return Err(Failure::usage(format!(
                "--tls-cert and --tls-key (or ${TLS_CERT_ENV} and ${TLS_KEY_ENV}) go together"
            )))
        }
    };
    Ok(Some(tls))
}

/// `digest:USER[:PASSWORD]` (without a password, `ZKW_SASL_PASSWORD` or a prompt), or
/// `kerberos[:PRINCIPAL]`.
fn parse_sasl(text: &str) -> Result<Sasl, Failure> {
    let (mechanism, rest) = text.split_once(':').unwrap_or((text, ""));
    match mechanism {
        "digest" => {
            let (user, password) = match rest.split_once(':') {
                Some((user, password)) => (user, Some(password.to_owned())),
                None => (rest, None),
            };
            if user.is_empty() {
                return Err(Failure::usage("--sasl digest:USER[:PASSWORD] needs a user"));
            }
            let password = match password {
                Some(p) => p,
                None => read_password(user)?,
            };
            Ok(Sasl::Digest {
                user: user.to_owned(),
                password,
            })
        }
        #[cfg(feature = "kerberos")]
        "kerberos" | "gssapi" => Ok(Sasl::Kerberos {
            principal: Some(rest.to_owned()).filter(|p| !p.is_empty()),
        }),
        #[cfg(not(feature = "kerberos"))]
        "kerberos" | "gssapi" => Err(Failure::usage(NO_KERBEROS)),
        // The value may hold a password: do not echo it.
        _ => Err(Failure::usage(
            "--sasl takes digest:USER[:PASSWORD] or kerberos[:PRINCIPAL]",
        )),
    }
}

fn read_password(user: &str) -> Result<String, Failure> {
    if let Some(password) = std::env::var(SASL_PASSWORD_ENV)
        .ok()
        .filter(|p| !p.is_empty())
    {
        return Ok(password);
    }
    if !std::io::stdin().is_terminal() {
        return Err(Failure::usage(format!(
            "--sasl digest:{user}: no password (set {SASL_PASSWORD_ENV}, or run on a terminal to be asked)"
        )));
    }
    rpassword::prompt_password(format!("SASL password for {user}: "))
        .map_err(|e| Failure::usage(format!("cannot read the password: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sasl_values() {
        assert!(matches!(
            parse_sasl("digest:bob:pw:with:colons"),
            Ok(Sasl::Digest { user, password }) if user == "bob" && password == "pw:with:colons"
        ));
        assert!(parse_sasl("digest::pw").is_err());
        assert!(parse_sasl("plain:bob").is_err());
        let shown = format!("{:?}", parse_sasl("digest:bob:hunter2").ok());
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    #[cfg(feature = "kerberos")]
    #[test]
    fn sasl_kerberos_values() {
        assert!(matches!(
            parse_sasl("kerberos"),
            Ok(Sasl::Kerberos { principal: None })
        ));
        assert!(matches!(
            parse_sasl("kerberos:app@EXAMPLE.COM"),
            Ok(Sasl::Kerberos { principal: Some(p) }) if p == "app@EXAMPLE.COM"
        ));
    }

    /// Without the feature, `--sasl kerberos` is a usage error that says how to get it.
    #[cfg(not(feature = "kerberos"))]
    #[test]
    fn sasl_kerberos_needs_the_feature() {
        for value in ["kerberos", "kerberos:app@EXAMPLE.COM", "gssapi"] {
            let failure = parse_sasl(value).err();
            assert!(
                failure.as_ref().is_some_and(|f| f.code == 2
                    && f.message.contains("built without Kerberos")
                    && f.message.contains("--features kerberos")),
                "{failure:?}"
            );
        }
    }

    #[test]
    fn tls_options_go_together() {
        assert!(tls_config(None, None, None).is_ok_and(|t| t.is_none()));
        assert!(tls_config(None, Some("c".into()), Some("k".into())).is_err());
        assert!(tls_config(Some("/nonexistent/ca.pem".into()), None, None).is_err());
    }
}
