//! `raidforge serve --tls ...`: the TLS options checked and turned into the NBD server's
//! credentials (before any pool is opened), and the warning for a listener other machines
//! reach.

use std::net::SocketAddr;

use anyhow::bail;
use nbd::TlsServer;

use crate::serve_cmd::ServeArgs;

/// `--tls`: as nbdkit's and qemu-nbd's.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsMode {
    /// Plain text only (STARTTLS is refused as unsupported).
    Off,
    /// Clients may start TLS or stay in plain text.
    On,
    /// Clients must start TLS; anything else is refused with NBD_REP_ERR_TLS_REQD.
    Require,
}

/// The server's TLS credentials from `--tls-cert/--tls-key/--tls-ca` or `--tls-psk`, or `None`
/// with `--tls off`; a missing, contradictory or unreadable option is refused in one line.
pub fn server(a: &ServeArgs) -> anyhow::Result<Option<TlsServer>> {
    let x509 = a.tls_cert.is_some() || a.tls_key.is_some() || a.tls_ca.is_some();
    if a.tls == TlsMode::Off {
        if x509 || a.tls_psk.is_some() {
            bail!(
                "--tls-cert/--tls-key/--tls-ca/--tls-psk are given but --tls is off: add \
                 --tls require (or --tls on to serve plain-text clients too)"
            );
        }
        return Ok(None);
    }
    let mode = if a.tls == TlsMode::On {
        "on"
    } else {
        "require"
    };
    if x509 && a.tls_psk.is_some() {
        bail!("give either certificates (--tls-cert, --tls-key, --tls-ca) or --tls-psk, not both");
    }
    let tls = match (&a.tls_cert, &a.tls_key, &a.tls_psk) {
        (Some(cert), Some(key), None) => TlsServer::x509(cert, key, a.tls_ca.as_deref())
            .map_err(|e| anyhow::anyhow!("--tls-cert/--tls-key/--tls-ca: {e}"))?,
        (None, None, Some(psk)) => {
            TlsServer::psk(psk).map_err(|e| anyhow::anyhow!("--tls-psk: {e}"))?
        }
        (Some(_), None, _) => bail!("--tls-cert needs --tls-key (the certificate's private key)"),
        (None, Some(_), _) => bail!("--tls-key needs --tls-cert (the server's certificate)"),
        _ => bail!(
            "--tls {mode} needs credentials: --tls-cert FILE --tls-key FILE (X.509, with \
             --tls-ca FILE to require client certificates) or --tls-psk FILE (pre-shared keys)"
        ),
    };
    Ok(Some(tls))
}

/// The warning for `--listen` on an address other machines reach, unless TLS is required.
pub fn listen_warning(sa: SocketAddr, tls: TlsMode) -> Option<String> {
    if sa.ip().is_loopback() {
        return None;
    }
    Some(match tls {
        TlsMode::Require => return None,
        TlsMode::Off => format!(
            "raidforge serve: warning: --listen {sa} is reachable from other machines and NBD \
             runs in plain text without authentication: anyone who can connect can read and \
             overwrite the pools. Use --tls require (with certificates or a PSK), listen on \
             127.0.0.1 (and tunnel), or use a Unix socket (--socket, owner-only)."
        ),
        TlsMode::On => format!(
            "raidforge serve: warning: --listen {sa} is reachable from other machines and \
             --tls on still serves clients that stay in plain text, without authentication: \
             anyone who can connect can read and overwrite the pools. Use --tls require."
        ),
    })
}
