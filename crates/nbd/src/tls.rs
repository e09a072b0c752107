//! TLS for NBD's STARTTLS, over the system's OpenSSL (the `openssl` crate).
//!
//! OpenSSL rather than rustls: NBD clients built on GnuTLS (libnbd's `nbdinfo`/`nbdcopy`
//! with `tls-psk-file=`, qemu's `tls-creds-psk`) authenticate with an external pre-shared key,
//! which rustls does not implement (rustls issue #174, open); OpenSSL serves X.509 and PSK
//! through one API. PSK works in TLS 1.3 (OpenSSL's PSK callback with a SHA-256 cipher suite)
//! and in TLS 1.2 (the PSK cipher suites).
//!
//! [`TlsServer`] holds the server's credentials: a certificate chain and its key, optionally a
//! CA whose certificates clients must present (then a client without one is refused), or a
//! PSK file in nbdkit's `psktool` format (`identity:hexkey` per line). [`TlsStream`] is a TLS
//! session over a [`Stream`] that, like a socket, can be read by one thread while others write
//! (the transport's reader and its workers): the OpenSSL session sits under a mutex that a
//! reader holds only while a record is available, never while waiting for the network.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use openssl::error::ErrorStack;
use openssl::pkey::PKey;
use openssl::ssl::{
    ErrorCode, HandshakeError, Ssl, SslAcceptor, SslConnector, SslContext, SslContextBuilder,
    SslMethod, SslMode, SslOptions, SslStream, SslVerifyMode, SslVersion,
};
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::X509;

use crate::transport::Stream;

/// Credentials a TLS server was configured with, refused before serving anything.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {what} {}: {err}", path.display())]
    Read {
        what: &'static str,
        path: PathBuf,
        err: io::Error,
    },
    #[error("{what} {} {problem}", path.display())]
    Bad {
        what: &'static str,
        path: PathBuf,
        problem: String,
    },
    #[error("setting up TLS failed: {0}")]
    OpenSsl(#[from] ErrorStack),
}

/// The server side of TLS: an OpenSSL context ready to accept sessions.
#[derive(Clone)]
pub struct TlsServer {
    ctx: SslContext,
    /// How long a client may take over its handshake.
    pub handshake_timeout: Duration,
}

impl std::fmt::Debug for TlsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsServer").finish_non_exhaustive()
    }
}

fn read_file(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|err| TlsError::Read {
        what,
        path: path.to_path_buf(),
        err,
    })
}

fn bad(what: &'static str, path: &Path, problem: impl Into<String>) -> TlsError {
    TlsError::Bad {
        what,
        path: path.to_path_buf(),
        problem: problem.into(),
    }
}

/// The first reason in an OpenSSL error stack, for messages.
fn reason(e: &ErrorStack) -> String {
    e.errors()
        .first()
        .and_then(|e| e.reason().map(str::to_string))
        .unwrap_or_else(|| e.to_string())
}

/// Reads PEM certificates (at least one).
fn load_certs(what: &'static str, path: &Path) -> Result<Vec<X509>, TlsError> {
    let pem = read_file(what, path)?;
    let certs = X509::stack_from_pem(&pem).map_err(|e| {
        bad(
            what,
            path,
            format!(
                "is not a PEM certificate file ({}); give certificates in PEM form \
                 (-----BEGIN CERTIFICATE-----)",
                reason(&e)
            ),
        )
    })?;
    if certs.is_empty() {
        return Err(bad(
            what,
            path,
            "holds no certificate; give certificates in PEM form (-----BEGIN CERTIFICATE-----)",
        ));
    }
    Ok(certs)
}

impl TlsServer {
    /// A server with an X.509 certificate chain (`cert`, PEM, the server's certificate first)
    /// and its private key (`key`, PEM). With `ca`, clients must present a certificate signed
    /// by one of the CA certificates in that PEM file.
    pub fn x509(cert: &Path, key: &Path, ca: Option<&Path>) -> Result<TlsServer, TlsError> {
        let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server())?;
        common_settings(&mut b)?;
        let chain = load_certs("certificate file", cert)?;
        b.set_certificate(&chain[0])?;
        for c in &chain[1..] {
            b.add_extra_chain_cert(c.clone())?;
        }
        let key_pem = read_file("key file", key)?;
        let pkey = PKey::private_key_from_pem(&key_pem).map_err(|e| {
            bad(
                "key file",
                key,
                format!(
                    "is not an unencrypted PEM private key ({}); give the certificate's key in \
                     PEM form (-----BEGIN PRIVATE KEY-----), without a passphrase",
                    reason(&e)
                ),
            )
        })?;
        // OpenSSL refuses a key that does not match the certificate already when it is set.
        b.set_private_key(&pkey)
            .and_then(|_| b.check_private_key())
            .map_err(|_| {
                bad(
                    "key file",
                    key,
                    format!(
                        "is not the private key of the certificate in {}; give the key the \
                     certificate was made for",
                        cert.display()
                    ),
                )
            })?;
        if let Some(ca) = ca {
            let cas = load_certs("CA file", ca)?;
            let mut store = X509StoreBuilder::new()?;
            for c in &cas {
                b.add_client_ca(c)?;
                store.add_cert(c.clone())?;
            }
            b.set_verify_cert_store(store.build())?;
            b.set_verify(SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT);
        }
        Ok(TlsServer {
            ctx: b.build().into_context(),
            handshake_timeout: Duration::from_secs(30),
        })
    }

    /// A server authenticating clients by pre-shared key: `file` holds `identity:hexkey`
    /// lines (nbdkit's `psktool` format; the key is at least 16 bytes).
    pub fn psk(file: &Path) -> Result<TlsServer, TlsError> {
        let keys = load_psk_file(file)?;
        let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server())?;
        common_settings(&mut b)?;
        // TLS 1.2 clients need a PSK cipher suite (TLS 1.3 suites work with PSK as they
        // are): the forward-secret AEAD ones.
        b.set_cipher_list(
            "ECDHE-PSK-CHACHA20-POLY1305:DHE-PSK-AES256-GCM-SHA384:DHE-PSK-AES128-GCM-SHA256:\
             DHE-PSK-CHACHA20-POLY1305",
        )?;
        b.set_psk_server_callback(move |_ssl, identity, out| {
            let Some(id) = identity else { return Ok(0) };
            match keys.iter().find(|(i, _)| i.as_bytes() == id) {
                Some((_, k)) if k.len() <= out.len() => {
                    out[..k.len()].copy_from_slice(k);
                    Ok(k.len())
                }
                // Unknown identity: 0 makes the handshake fail.
                _ => Ok(0),
            }
        });
        Ok(TlsServer {
            ctx: b.build().into_context(),
            handshake_timeout: Duration::from_secs(30),
        })
    }

    /// Runs the server side of the handshake on `s` (a blocking socket whose read timeout is
    /// short), giving up when `stop` says so or after [`TlsServer::handshake_timeout`].
    pub fn accept<S: Stream>(
        &self,
        s: S,
        write_timeout: Duration,
        stop: &dyn Fn() -> bool,
    ) -> io::Result<TlsStream<S>> {
        let fd = s.as_raw_fd();
        let ssl = Ssl::new(&self.ctx).map_err(io::Error::other)?;
        let sock = Sock {
            s,
            write_timeout: Some(write_timeout),
        };
        let deadline = Instant::now() + self.handshake_timeout;
        let mut attempt = ssl.accept(sock);
        let stream = loop {
            match attempt {
                Ok(s) => break s,
                Err(HandshakeError::WouldBlock(mid)) => {
                    if stop() || Instant::now() > deadline {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "TLS handshake not finished in time",
                        ));
                    }
                    attempt = mid.handshake();
                }
                Err(HandshakeError::Failure(mid)) => {
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        format!("TLS handshake failed: {}", handshake_reason(mid.error())),
                    ))
                }
                Err(HandshakeError::SetupFailure(e)) => return Err(io::Error::other(e)),
            }
        };
        set_nonblocking(fd)?;
        Ok(TlsStream {
            ssl: Arc::new(Mutex::new(stream)),
            fd,
            read_timeout: Arc::new(Mutex::new(None)),
        })
    }
}

fn handshake_reason(e: &openssl::ssl::Error) -> String {
    if let Some(s) = e.ssl_error() {
        return reason(s);
    }
    match e.io_error() {
        Some(io) => io.to_string(),
        None => "the other side closed the connection (a wrong key or certificate?)".to_string(),
    }
}

fn common_settings(b: &mut SslContextBuilder) -> Result<(), ErrorStack> {
    b.set_min_proto_version(Some(SslVersion::TLS1_2))?;
    // A client that drops the connection without close_notify ends the session like an EOF;
    // renegotiation is never needed.
    b.set_options(SslOptions::IGNORE_UNEXPECTED_EOF | SslOptions::NO_RENEGOTIATION);
    b.set_mode(SslMode::ACCEPT_MOVING_WRITE_BUFFER);
    Ok(())
}

/// Parses a PSK file in nbdkit's `psktool` format: `identity:hexkey` per line (blank lines
/// and `#` comments skipped).
pub fn load_psk_file(path: &Path) -> Result<Vec<(String, Vec<u8>)>, TlsError> {
    const WHAT: &str = "PSK file";
    let text = String::from_utf8(read_file(WHAT, path)?).map_err(|_| {
        bad(
            WHAT,
            path,
            "is not text; make it with `psktool -u NAME -p FILE`",
        )
    })?;
    let mut keys = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parsed = line.rsplit_once(':').and_then(|(id, hex)| {
            if id.is_empty() || hex.len() % 2 != 0 || hex.len() < 32 {
                return None;
            }
            let key: Option<Vec<u8>> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
                .collect();
            Some((id.to_string(), key?))
        });
        match parsed {
            Some(k) => keys.push(k),
            None => {
                return Err(bad(
                    WHAT,
                    path,
                    format!(
                        "line {} is not IDENTITY:HEXKEY with a key of at least 16 bytes \
                         (32 hex digits); make the file with `psktool -u NAME -p FILE`",
                        n + 1
                    ),
                ))
            }
        }
    }
    if keys.is_empty() {
        return Err(bad(
            WHAT,
            path,
            "holds no key; make it with `psktool -u NAME -p FILE` (lines IDENTITY:HEXKEY)",
        ));
    }
    Ok(keys)
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor this stream owns; no memory is passed.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Waits until `fd` is ready for `events` or `deadline` passes (`Ok(false)`).
fn wait(fd: RawFd, events: libc::c_short, deadline: Option<Instant>) -> io::Result<bool> {
    loop {
        let ms = match deadline {
            None => -1,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(false);
                }
                left.as_millis().clamp(1, i32::MAX as u128) as i32
            }
        };
        let mut p = libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, ms) };
        if r > 0 {
            return Ok(true);
        }
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// The socket under a TLS session: reads pass through (after the handshake the socket is
/// non-blocking and a read with nothing to read says `WouldBlock`); writes wait for room up to
/// the write timeout, so that OpenSSL always writes records whole.
struct Sock<S> {
    s: S,
    write_timeout: Option<Duration>,
}

impl<S: Stream> Read for Sock<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.s.read(buf)
    }
}

impl<S: Stream> Write for Sock<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let deadline = self.write_timeout.map(|d| Instant::now() + d);
        loop {
            match self.s.write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if !wait(self.s.as_raw_fd(), libc::POLLOUT, deadline)? {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "the client does not read its replies",
                        ));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        self.s.flush()
    }
}

/// A TLS session on a socket, shareable between one reading thread and writing threads like
/// the socket itself ([`Stream::try_clone_stream`] gives another handle on the same session).
pub struct TlsStream<S: Stream> {
    ssl: Arc<Mutex<SslStream<Sock<S>>>>,
    fd: RawFd,
    read_timeout: Arc<Mutex<Option<Duration>>>,
}

impl<S: Stream> TlsStream<S> {
    fn lock(&self) -> MutexGuard<'_, SslStream<Sock<S>>> {
        self.ssl.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn ssl_io_error(e: openssl::ssl::Error) -> io::Error {
    match e.into_io_error() {
        Ok(io) => io,
        Err(e) => io::Error::other(e),
    }
}

impl<S: Stream> Read for TlsStream<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let timeout = *self.read_timeout.lock().unwrap_or_else(|e| e.into_inner());
        let deadline = timeout.map(|d| Instant::now() + d);
        loop {
            // Decrypt what has arrived; the lock is not held while waiting for more.
            let wants = match self.lock().ssl_read(buf) {
                Ok(n) => return Ok(n),
                Err(e) => match e.code() {
                    ErrorCode::ZERO_RETURN => return Ok(0),
                    ErrorCode::WANT_READ => libc::POLLIN,
                    ErrorCode::WANT_WRITE => libc::POLLOUT,
                    ErrorCode::SYSCALL if e.io_error().is_none() => return Ok(0),
                    _ => return Err(ssl_io_error(e)),
                },
            };
            if !wait(self.fd, wants, deadline)? {
                return Err(io::ErrorKind::WouldBlock.into());
            }
        }
    }
}

impl<S: Stream> Write for TlsStream<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let wants = match self.lock().ssl_write(buf) {
                Ok(n) => return Ok(n),
                Err(e) => match e.code() {
                    // The socket layer waits for room itself; a session that needs to read
                    // first (no renegotiation happens, but a record may be in flight) waits
                    // for the reader to have consumed it.
                    ErrorCode::WANT_READ => libc::POLLIN,
                    ErrorCode::WANT_WRITE => libc::POLLOUT,
                    _ => return Err(ssl_io_error(e)),
                },
            };
            if !wait(
                self.fd,
                wants,
                Some(Instant::now() + Duration::from_millis(100)),
            )? && wants == libc::POLLOUT
            {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client does not read its replies",
                ));
            }
        }
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        // A small reply header and its data go out as one record when the header is small.
        let nonempty: Vec<&io::IoSlice<'_>> = bufs.iter().filter(|b| !b.is_empty()).collect();
        match nonempty[..] {
            [] => Ok(0),
            [one] => self.write(one),
            [first, second, ..] if first.len() <= 64 && second.len() <= 16 << 10 => {
                let mut joined = Vec::with_capacity(first.len() + second.len());
                joined.extend_from_slice(first);
                joined.extend_from_slice(second);
                let n = self.write(&joined)?;
                Ok(n)
            }
            [first, ..] => self.write(first),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<S: Stream> AsRawFd for TlsStream<S> {
    fn as_raw_fd(&self) -> RawFd {
        self.fd
    }
}

impl<S: Stream> Stream for TlsStream<S> {
    fn try_clone_stream(&self) -> io::Result<Self> {
        Ok(TlsStream {
            ssl: Arc::clone(&self.ssl),
            fd: self.fd,
            read_timeout: Arc::clone(&self.read_timeout),
        })
    }
    fn set_read_timeout_to(&self, d: Option<Duration>) -> io::Result<()> {
        *self.read_timeout.lock().unwrap_or_else(|e| e.into_inner()) = d;
        Ok(())
    }
    fn set_write_timeout_to(&self, d: Option<Duration>) -> io::Result<()> {
        self.lock().get_mut().write_timeout = d;
        Ok(())
    }
    fn shutdown_both(&self) {
        // Say goodbye when no writer is busy, then close the socket either way.
        if let Ok(mut s) = self.ssl.try_lock() {
            let _ = s.shutdown();
        }
        // SAFETY: the descriptor stays open while this handle (which shares the session)
        // exists.
        unsafe {
            libc::shutdown(self.fd, libc::SHUT_RDWR);
        }
    }
}

/// The client side of TLS for one connection (see [`crate::client::Target`]).
pub struct ClientTls {
    connector: SslConnector,
    /// The server's name or address to check its certificate against (TCP with X.509).
    host: Option<String>,
}

/// Client credentials from an `nbds://` URI's query; `host` is the server's name or address
/// (checked against its certificate; `None` on Unix sockets, where the CA check is all).
pub fn client_config(auth: &crate::client::TlsAuth, host: Option<&str>) -> io::Result<ClientTls> {
    use crate::client::TlsAuth;
    let invalid = |e: TlsError| io::Error::new(io::ErrorKind::InvalidInput, e.to_string());
    let ossl = |e: ErrorStack| io::Error::other(format!("setting up TLS: {e}"));
    let mut b = SslConnector::builder(SslMethod::tls_client()).map_err(ossl)?;
    b.set_min_proto_version(Some(SslVersion::TLS1_2))
        .map_err(ossl)?;
    b.set_options(SslOptions::IGNORE_UNEXPECTED_EOF | SslOptions::NO_RENEGOTIATION);
    let mut host = host.map(str::to_string);
    match auth {
        TlsAuth::Certificates(dir) => {
            if let Some(dir) = dir {
                let dir = Path::new(dir);
                let cas = load_certs("CA file", &dir.join("ca-cert.pem")).map_err(invalid)?;
                let mut store = X509StoreBuilder::new().map_err(ossl)?;
                for c in cas {
                    store.add_cert(c).map_err(ossl)?;
                }
                b.set_verify_cert_store(store.build()).map_err(ossl)?;
                let cert = dir.join("client-cert.pem");
                if cert.exists() {
                    let chain = load_certs("client certificate file", &cert).map_err(invalid)?;
                    b.set_certificate(&chain[0]).map_err(ossl)?;
                    for c in &chain[1..] {
                        b.add_extra_chain_cert(c.clone()).map_err(ossl)?;
                    }
                    let key = dir.join("client-key.pem");
                    let pem = read_file("client key file", &key).map_err(invalid)?;
                    let pkey = PKey::private_key_from_pem(&pem).map_err(|e| {
                        invalid(bad(
                            "client key file",
                            &key,
                            format!("is not a PEM key ({})", reason(&e)),
                        ))
                    })?;
                    b.set_private_key(&pkey).map_err(|_| {
                        invalid(bad(
                            "client key file",
                            &key,
                            "does not belong to client-cert.pem",
                        ))
                    })?;
                }
            }
            b.set_verify(SslVerifyMode::PEER);
        }
        TlsAuth::Psk { file, username } => {
            let keys = load_psk_file(Path::new(file)).map_err(invalid)?;
            let key = keys
                .into_iter()
                .find(|(id, _)| id == username)
                .map(|(_, k)| k)
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("PSK file {file} holds no key for the identity {username:?}"),
                    )
                })?;
            let identity = username.clone().into_bytes();
            b.set_cipher_list(
                "ECDHE-PSK-CHACHA20-POLY1305:DHE-PSK-AES256-GCM-SHA384:DHE-PSK-AES128-GCM-SHA256:\
                 DHE-PSK-CHACHA20-POLY1305",
            )
            .map_err(ossl)?;
            b.set_psk_client_callback(move |_ssl, _hint, id_out, key_out| {
                if identity.len() >= id_out.len() || key.len() > key_out.len() {
                    return Ok(0);
                }
                id_out[..identity.len()].copy_from_slice(&identity);
                id_out[identity.len()] = 0;
                key_out[..key.len()].copy_from_slice(&key);
                Ok(key.len())
            });
            // The key authenticates the server; there is no certificate to check.
            b.set_verify(SslVerifyMode::NONE);
            host = None;
        }
    }
    Ok(ClientTls {
        connector: b.build(),
        host,
    })
}

impl ClientTls {
    /// Runs the client side of the handshake on `s` (after the server acknowledged STARTTLS).
    pub fn connect<S: Read + Write>(self, s: S) -> io::Result<SslStream<S>> {
        let mut cfg = self
            .connector
            .configure()
            .map_err(|e| io::Error::other(e.to_string()))?;
        let name = match &self.host {
            Some(h) => h.as_str(),
            None => {
                cfg.set_verify_hostname(false);
                cfg.set_use_server_name_indication(false);
                "localhost"
            }
        };
        cfg.connect(name, s).map_err(|e| {
            let why = match &e {
                HandshakeError::Failure(mid) => handshake_reason(mid.error()),
                HandshakeError::WouldBlock(_) => "no answer in time".to_string(),
                HandshakeError::SetupFailure(e) => reason(e),
            };
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("TLS handshake with the NBD server failed: {why}"),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn psk_file(name: &str, text: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("nbd-tls-{}-{name}.psk", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn psk_files_in_psktool_format() {
        let key = "00112233445566778899aabbccddeeff";
        let p = psk_file("ok", &format!("# keys\nalice:{key}\n\nbob:{key}ff\n"));
        let keys = load_psk_file(&p).unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0].0, "alice");
        assert_eq!(keys[0].1[..3], [0x00, 0x11, 0x22]);
        assert_eq!(keys[1].1.len(), 17);
        for (name, text, needle) in [
            (
                "nocolon",
                format!("alice{key}\n"),
                "line 1 is not IDENTITY:HEXKEY",
            ),
            ("short", "alice:0011\n".to_string(), "line 1"),
            ("odd", format!("a:{key}\nb:{key}0\n"), "line 2"),
            ("nothex", format!("a:{}zz\n", &key[2..]), "line 1"),
            ("empty", "# nothing\n".to_string(), "holds no key"),
        ] {
            let p = psk_file(name, &text);
            let e = load_psk_file(&p).unwrap_err().to_string();
            assert!(
                e.contains(needle) && e.contains(&*p.to_string_lossy()),
                "{name}: {e}"
            );
            let _ = std::fs::remove_file(p);
        }
        let e = TlsServer::psk(Path::new("/nonexistent/k.psk")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot read PSK file /nonexistent/k.psk"),
            "{e}"
        );
    }

    /// Our client and our server over a Unix socket with a PSK: data round trip, a wrong key,
    /// a plain client under "required", a TLS client against a server without TLS.
    #[test]
    fn psk_client_and_server_over_a_unix_socket() {
        use crate::client::{Address, Client, Target};
        use crate::{Export, ExportInfo, MemBackend, Server, ServerOptions};
        let dir = std::env::temp_dir().join(format!("nbd-tls-sock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        let keys = psk_file("server", &format!("alice:{key}\n"));
        let wrong = psk_file("wrong", &format!("alice:{}\n", key.replace('0', "1")));
        let serve = |name: &str, tls: Option<TlsServer>| {
            let sock = dir.join(name);
            let _ = std::fs::remove_file(&sock);
            let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
            let export = Export {
                info: ExportInfo::new("m", 1 << 20),
                backend: Arc::new(MemBackend::new(1 << 20)),
            };
            let opts = ServerOptions {
                tls_required: tls.is_some(),
                tls,
                ..ServerOptions::default()
            };
            let s = Server::new(vec![export], opts);
            let s2 = s.clone();
            let h = std::thread::spawn(move || s2.serve_unix(l).unwrap());
            (s, h, sock)
        };
        let (srv, h, sock) = serve("tls.sock", Some(TlsServer::psk(&keys).unwrap()));
        let uri = |user: &str, f: &Path| {
            format!(
                "nbds+unix://{user}@/m?socket={}&tls-psk-file={}",
                sock.display(),
                f.display()
            )
        };
        let t = Target::parse(&uri("alice", &keys)).unwrap();
        let timeout = Some(Duration::from_secs(10));
        let mut c = Client::connect_target(&t, timeout).unwrap();
        assert_eq!(c.size(), 1 << 20);
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        c.write_at(&data, 4096, false).unwrap();
        c.flush().unwrap();
        let mut got = vec![0u8; data.len()];
        c.read_at(&mut got, 4096).unwrap();
        assert!(got == data);
        drop(c);
        let e = Client::connect_target(&Target::parse(&uri("alice", &wrong)).unwrap(), timeout)
            .err()
            .expect("a wrong key is refused");
        assert!(e.to_string().contains("TLS handshake"), "{e}");
        let plain = Address::Unix {
            socket: sock.display().to_string(),
            export: "m".into(),
        };
        let e = Client::connect_with_timeout(&plain, timeout)
            .err()
            .expect("a plain client is refused");
        assert!(e.to_string().contains("requires TLS"), "{e}");
        // Stopping the server ends a TLS session that sits idle (the reader polls the
        // shutdown flag without holding the session), rather than waiting for the client.
        let idle =
            Client::connect_target(&Target::parse(&uri("alice", &keys)).unwrap(), timeout).unwrap();
        srv.stop();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(h.join().is_ok()));
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(30)),
            Ok(true),
            "the server did not finish with an idle TLS client connected"
        );
        drop(idle);
        // A server without TLS: the TLS client does not go on in plain text.
        let (srv, h, sock2) = serve("plain.sock", None);
        let t = Target::parse(&format!(
            "nbds+unix://alice@/m?socket={}&tls-psk-file={}",
            sock2.display(),
            keys.display()
        ))
        .unwrap();
        let e = Client::connect_target(&t, timeout)
            .err()
            .expect("no TLS, no session");
        assert!(e.to_string().contains("does not offer TLS"), "{e}");
        srv.stop();
        h.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tls_uris_parse_or_say_what_is_wrong() {
        use crate::client::{Address, Target, TlsAuth};
        let t = Target::parse("nbds://alice@10.0.0.1:10810/exp?tls-psk-file=/k.psk").unwrap();
        assert_eq!(
            t.addr,
            Address::Tcp {
                host: "10.0.0.1".into(),
                port: 10810,
                export: "exp".into()
            }
        );
        assert_eq!(
            t.tls,
            Some(TlsAuth::Psk {
                file: "/k.psk".into(),
                username: "alice".into()
            })
        );
        let t = Target::parse("nbds+unix:///e?socket=/s.sock&tls-certificates=/pki").unwrap();
        assert_eq!(
            t.addr,
            Address::Unix {
                socket: "/s.sock".into(),
                export: "e".into()
            }
        );
        assert_eq!(t.tls, Some(TlsAuth::Certificates(Some("/pki".into()))));
        let t = Target::parse("nbds://h/?tls-psk-file=/k&tls-username=bob").unwrap();
        assert!(matches!(t.tls, Some(TlsAuth::Psk { ref username, .. }) if username == "bob"));
        assert_eq!(Target::parse("nbd://h/x").unwrap().tls, None);
        for bad in [
            "nbds://h/x?tls-psk-file=/k",
            "nbds://h/x?tls-psk-file=/k&tls-certificates=/d",
            "nbds+unix:///x",
        ] {
            let e = Target::parse(bad).unwrap_err();
            assert!(e.contains("not an NBD address"), "{bad}: {e}");
        }
        assert!(crate::client::is_uri("nbds://h/") && crate::client::is_uri("nbds+unix:///"));
    }
}
