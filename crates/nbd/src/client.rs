//! A small blocking NBD client: one connection, one request at a time.
//!
//! Written by hand because what it needs is tiny (the fixed newstyle handshake with `GO`, then
//! `READ`, `WRITE`, `FLUSH` and `DISC` with simple replies) and the Rust NBD clients on
//! crates.io are either bindings to libnbd (a C library and its headers at build time) or
//! unmaintained. The engine uses it to reach a surrogate pool served by another process
//! (`raidforge serve`), where one request at a time under the caller's lock is what it does.
//!
//! Addresses are NBD URIs: `nbd://HOST[:PORT]/EXPORT` (TCP, port 10809 by default) or
//! `nbd+unix:///EXPORT?socket=PATH` (Unix socket). An empty export name is the server's
//! default export. [`Target`] adds the TLS forms, as libnbd spells them:
//! `nbds://[NAME@]HOST[:PORT]/EXPORT` and `nbds+unix://[NAME@]/EXPORT?socket=PATH`, with
//! `tls-certificates=DIR` (the CA in `DIR/ca-cert.pem` checks the server; `client-cert.pem`
//! and `client-key.pem`, when there, identify the client; without `DIR` the system's CAs check
//! the server) or `tls-psk-file=FILE` (a pre-shared key for identity NAME, or
//! `tls-username=NAME`, from a `psktool` file). The client negotiates `NBD_OPT_STARTTLS`
//! before anything else and refuses to go on without TLS.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::proto::*;

/// Largest request the client sends; longer reads and writes are split (the server's
/// maximum payload is 32 MiB; smaller requests keep the memory per request bounded).
pub const CLIENT_MAX_REQUEST: usize = 4 << 20;

/// Where an NBD export is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    /// `nbd://host:port/export`.
    Tcp {
        host: String,
        port: u16,
        export: String,
    },
    /// `nbd+unix:///export?socket=path`.
    Unix { socket: String, export: String },
}

/// Whether `s` looks like an NBD URI (rather than a file path), TLS forms included.
pub fn is_uri(s: &str) -> bool {
    ["nbd://", "nbd+unix://", "nbds://", "nbds+unix://"]
        .iter()
        .any(|p| s.starts_with(p))
}

/// How a TLS connection authenticates (from an `nbds://` URI's query).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TlsAuth {
    /// X.509: `tls-certificates=DIR` (libnbd's layout), or the system's CAs when `None`.
    Certificates(Option<String>),
    /// A pre-shared key: the `psktool` file and the identity whose key it holds.
    Psk { file: String, username: String },
}

/// An NBD URI: where the export is, and TLS settings for the `nbds` forms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub addr: Address,
    pub tls: Option<TlsAuth>,
}

impl Target {
    /// Parses `nbd://`, `nbd+unix://`, `nbds://` and `nbds+unix://` URIs (see the module
    /// documentation).
    pub fn parse(uri: &str) -> Result<Target, String> {
        let (scheme, rest) = if let Some(r) = uri.strip_prefix("nbds://") {
            ("nbd://", r)
        } else if let Some(r) = uri.strip_prefix("nbds+unix://") {
            ("nbd+unix://", r)
        } else {
            return Ok(Target {
                addr: Address::parse(uri)?,
                tls: None,
            });
        };
        let bad = |why: &str| {
            format!(
                "{uri:?} is not an NBD address ({why}): use nbds://[NAME@]HOST[:PORT]/EXPORT or \
                 nbds+unix://[NAME@]/EXPORT?socket=PATH, with ?tls-certificates=DIR or \
                 ?tls-psk-file=FILE"
            )
        };
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        // NAME@ before the host (or before the path for Unix sockets).
        let (authority, tail) = path.split_once('/').unwrap_or((path, ""));
        let (user, authority) = match authority.rsplit_once('@') {
            Some((u, a)) => (Some(u.to_string()), a),
            None => (None, authority),
        };
        let mut certificates = None;
        let mut psk_file = None;
        let mut username = user;
        let mut passed = Vec::new();
        for kv in query.split('&').filter(|kv| !kv.is_empty()) {
            if let Some(v) = kv.strip_prefix("tls-certificates=") {
                certificates = Some(v.to_string());
            } else if let Some(v) = kv.strip_prefix("tls-psk-file=") {
                psk_file = Some(v.to_string());
            } else if let Some(v) = kv.strip_prefix("tls-username=") {
                username = Some(v.to_string());
            } else {
                passed.push(kv);
            }
        }
        let mut plain = format!("{scheme}{authority}/{tail}");
        if !passed.is_empty() {
            plain.push('?');
            plain.push_str(&passed.join("&"));
        }
        let addr = Address::parse(&plain).map_err(|_| bad("see above"))?;
        let auth = match (certificates, psk_file) {
            (Some(_), Some(_)) => {
                return Err(bad("give tls-certificates or tls-psk-file, not both"))
            }
            (c, None) => TlsAuth::Certificates(c),
            (None, Some(file)) => TlsAuth::Psk {
                file,
                username: username
                    .filter(|u| !u.is_empty())
                    .ok_or_else(|| bad("a PSK needs the identity: nbds://NAME@HOST/..."))?,
            },
        };
        Ok(Target {
            addr,
            tls: Some(auth),
        })
    }
}

impl Address {
    /// Parses an NBD URI (see the module documentation).
    pub fn parse(uri: &str) -> Result<Address, String> {
        let bad = |why: &str| {
            format!(
                "{uri:?} is not an NBD address ({why}): use nbd://HOST[:PORT]/EXPORT or \
                 nbd+unix:///EXPORT?socket=PATH"
            )
        };
        if let Some(rest) = uri.strip_prefix("nbd+unix://") {
            let (path, query) = rest.split_once('?').ok_or_else(|| bad("no ?socket=PATH"))?;
            let export = path.strip_prefix('/').unwrap_or(path).to_string();
            let socket = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("socket="))
                .filter(|s| !s.is_empty())
                .ok_or_else(|| bad("no socket=PATH in the query"))?;
            Ok(Address::Unix {
                socket: socket.to_string(),
                export,
            })
        } else if let Some(rest) = uri.strip_prefix("nbd://") {
            let (hostport, export) = rest.split_once('/').unwrap_or((rest, ""));
            if hostport.is_empty() {
                return Err(bad("no host"));
            }
            // `[v6]:port`, `host:port` or `host`.
            let (host, port) = if let Some(h) = hostport.strip_prefix('[') {
                let (h, p) = h.split_once(']').ok_or_else(|| bad("unclosed ["))?;
                (h.to_string(), p.strip_prefix(':'))
            } else {
                match hostport.rsplit_once(':') {
                    Some((h, p)) => (h.to_string(), Some(p)),
                    None => (hostport.to_string(), None),
                }
            };
            if host.is_empty() {
                return Err(bad("no host"));
            }
            let port = match port {
                Some(p) => p.parse().map_err(|_| bad("the port is not a number"))?,
                None => 10809,
            };
            Ok(Address::Tcp {
                host,
                port,
                export: export.to_string(),
            })
        } else {
            Err(bad("it must start with nbd:// or nbd+unix://"))
        }
    }
}

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// One connection to an export in the transmission phase.
pub struct Client {
    stream: Box<dyn Stream>,
    size: u64,
    flags: u16,
    handle: u64,
    /// A transport error or a reply out of step happened: the stream is unusable.
    broken: bool,
}

fn proto_err(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

fn read_u32(s: &mut dyn Stream) -> io::Result<u32> {
    let mut b = [0u8; 4];
    s.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}

fn read_u64(s: &mut dyn Stream) -> io::Result<u64> {
    let mut b = [0u8; 8];
    s.read_exact(&mut b)?;
    Ok(u64::from_be_bytes(b))
}

impl Client {
    /// Connects to `addr` and negotiates its export with `NBD_OPT_GO`.
    pub fn connect(addr: &Address) -> io::Result<Client> {
        Client::connect_with_timeout(addr, None)
    }

    /// [`Client::connect`] with every read and write on the connection bounded by `timeout`:
    /// a server that does not answer in time gives an error (`TimedOut`/`WouldBlock`) and a
    /// broken connection instead of a wait without end.
    pub fn connect_with_timeout(addr: &Address, timeout: Option<Duration>) -> io::Result<Client> {
        let (stream, export) = Client::open(addr, timeout)?;
        Client::handshake(stream, export, None)
    }

    /// Connects to `target` (TLS for the `nbds` forms) with every read and write bounded by
    /// `timeout`.
    pub fn connect_target(target: &Target, timeout: Option<Duration>) -> io::Result<Client> {
        let (stream, export) = Client::open(&target.addr, timeout)?;
        let tls = match &target.tls {
            None => None,
            Some(auth) => {
                let host = match &target.addr {
                    Address::Tcp { host, .. } => Some(host.as_str()),
                    Address::Unix { .. } => None,
                };
                Some(crate::tls::client_config(auth, host)?)
            }
        };
        Client::handshake(stream, export, tls)
    }

    fn open(addr: &Address, timeout: Option<Duration>) -> io::Result<(Box<dyn Stream>, &str)> {
        Ok(match addr {
            Address::Tcp { host, port, export } => {
                let s = TcpStream::connect((host.as_str(), *port))?;
                s.set_nodelay(true)?;
                s.set_read_timeout(timeout)?;
                s.set_write_timeout(timeout)?;
                (Box::new(s), export)
            }
            Address::Unix { socket, export } => {
                let s = UnixStream::connect(socket)?;
                s.set_read_timeout(timeout)?;
                s.set_write_timeout(timeout)?;
                (Box::new(s), export)
            }
        })
    }

    fn handshake(
        mut s: Box<dyn Stream>,
        export: &str,
        tls: Option<crate::tls::ClientTls>,
    ) -> io::Result<Client> {
        if read_u64(&mut *s)? != NBDMAGIC || read_u64(&mut *s)? != IHAVEOPT {
            return Err(proto_err("not an NBD server (no newstyle greeting)"));
        }
        let mut f = [0u8; 2];
        s.read_exact(&mut f)?;
        let server_flags = u16::from_be_bytes(f);
        if server_flags & FLAG_FIXED_NEWSTYLE == 0 {
            return Err(proto_err("the NBD server does not speak fixed newstyle"));
        }
        let mut cflags = FLAG_C_FIXED_NEWSTYLE;
        if server_flags & FLAG_NO_ZEROES != 0 {
            cflags |= FLAG_C_NO_ZEROES;
        }
        s.write_all(&cflags.to_be_bytes())?;
        if let Some(tls) = tls {
            // NBD_OPT_STARTTLS first; nothing else is said in plain text.
            let mut o = Vec::new();
            o.extend_from_slice(&IHAVEOPT.to_be_bytes());
            o.extend_from_slice(&OPT_STARTTLS.to_be_bytes());
            o.extend_from_slice(&0u32.to_be_bytes());
            s.write_all(&o)?;
            if read_u64(&mut *s)? != REP_MAGIC || read_u32(&mut *s)? != OPT_STARTTLS {
                return Err(proto_err("malformed reply to NBD_OPT_STARTTLS"));
            }
            let kind = read_u32(&mut *s)?;
            let len = read_u32(&mut *s)? as usize;
            if len > MAX_STRING_BYTES + 64 {
                return Err(proto_err("malformed reply to NBD_OPT_STARTTLS"));
            }
            let mut body = vec![0u8; len];
            s.read_exact(&mut body)?;
            if kind != REP_ACK {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!(
                        "the NBD server does not offer TLS ({})",
                        String::from_utf8_lossy(&body)
                    ),
                ));
            }
            s = Box::new(tls.connect(s)?);
        }
        let mut out = Vec::new();
        // NBD_OPT_GO: export name, no information requests.
        let mut data = Vec::new();
        data.extend_from_slice(&(export.len() as u32).to_be_bytes());
        data.extend_from_slice(export.as_bytes());
        data.extend_from_slice(&0u16.to_be_bytes());
        out.extend_from_slice(&IHAVEOPT.to_be_bytes());
        out.extend_from_slice(&OPT_GO.to_be_bytes());
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        out.extend_from_slice(&data);
        s.write_all(&out)?;
        let mut export_info = None;
        loop {
            if read_u64(&mut *s)? != REP_MAGIC {
                return Err(proto_err("bad option reply magic"));
            }
            let opt = read_u32(&mut *s)?;
            let kind = read_u32(&mut *s)?;
            let len = read_u32(&mut *s)? as usize;
            if opt != OPT_GO || len > MAX_STRING_BYTES + 64 {
                return Err(proto_err("malformed reply to NBD_OPT_GO"));
            }
            let mut body = vec![0u8; len];
            s.read_exact(&mut body)?;
            match kind {
                REP_INFO if len >= 2 => {
                    let ty = u16::from_be_bytes([body[0], body[1]]);
                    if ty == INFO_EXPORT && len == 12 {
                        let size = u64::from_be_bytes(body[2..10].try_into().unwrap());
                        let flags = u16::from_be_bytes([body[10], body[11]]);
                        export_info = Some((size, flags));
                    }
                }
                REP_ACK => break,
                k if k & REP_ERR != 0 => {
                    let msg = String::from_utf8_lossy(&body);
                    let what = match k {
                        REP_ERR_UNKNOWN => "no such export",
                        REP_ERR_POLICY => "refused by the server's policy",
                        REP_ERR_SHUTDOWN => "the server is shutting down",
                        REP_ERR_TLS_REQD => "the server requires TLS (an nbds:// URI)",
                        _ => "the server refused it",
                    };
                    let msg = if msg.is_empty() {
                        String::new()
                    } else {
                        format!(" ({msg})")
                    };
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("export {export:?}: {what}{msg}"),
                    ));
                }
                _ => {}
            }
        }
        let (size, flags) =
            export_info.ok_or_else(|| proto_err("the server sent no export information"))?;
        Ok(Client {
            stream: s,
            size,
            flags,
            handle: 0,
            broken: false,
        })
    }

    /// The export's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Whether the connection failed (not merely a request the server refused): it cannot
    /// be used again; connect anew.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Whether the export is read-only.
    pub fn read_only(&self) -> bool {
        self.flags & TFLAG_READ_ONLY != 0
    }

    fn request(&mut self, cmd: u16, flags: u16, offset: u64, len: u32) -> io::Result<u64> {
        self.handle += 1;
        let mut h = Vec::with_capacity(REQUEST_HEADER_BYTES);
        h.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
        h.extend_from_slice(&flags.to_be_bytes());
        h.extend_from_slice(&cmd.to_be_bytes());
        h.extend_from_slice(&self.handle.to_be_bytes());
        h.extend_from_slice(&offset.to_be_bytes());
        h.extend_from_slice(&len.to_be_bytes());
        self.stream.write_all(&h)?;
        Ok(self.handle)
    }

    /// Reads a simple reply for `handle`: the outer error is the transport's, the inner one
    /// an error the server replied with (naming the command).
    fn reply(&mut self, handle: u64, what: &str, offset: u64) -> io::Result<io::Result<()>> {
        if read_u32(&mut *self.stream)? != SIMPLE_REPLY_MAGIC {
            return Err(proto_err("bad reply magic (the connection is out of step)"));
        }
        let err = read_u32(&mut *self.stream)?;
        if read_u64(&mut *self.stream)? != handle {
            return Err(proto_err("reply to another request"));
        }
        if err != 0 {
            let e = io::Error::from_raw_os_error(err as i32);
            return Ok(Err(io::Error::new(
                e.kind(),
                format!("NBD {what} at byte {offset}: the server replied: {e}"),
            )));
        }
        Ok(Ok(()))
    }

    fn check_range(&self, offset: u64, len: usize) -> io::Result<()> {
        if offset.checked_add(len as u64).is_none_or(|e| e > self.size) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "bytes {offset}..+{len} are past the end of the export ({} bytes)",
                    self.size
                ),
            ));
        }
        Ok(())
    }

    /// Runs one exchange; any error except a reply the server sent marks the connection
    /// broken.
    fn exchange(
        &mut self,
        f: impl FnOnce(&mut Client) -> io::Result<Result<(), io::Error>>,
    ) -> io::Result<()> {
        if self.broken {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the NBD connection failed earlier: connect again",
            ));
        }
        match f(self) {
            Ok(r) => r,
            Err(e) => {
                self.broken = true;
                Err(e)
            }
        }
    }

    /// Reads `buf.len()` bytes at `offset`.
    pub fn read_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.check_range(offset, buf.len())?;
        self.exchange(|c| {
            let mut at = offset;
            for piece in buf.chunks_mut(CLIENT_MAX_REQUEST) {
                let h = c.request(CMD_READ, 0, at, piece.len() as u32)?;
                if let Err(refused) = c.reply(h, "read", at)? {
                    return Ok(Err(refused));
                }
                c.stream.read_exact(piece)?;
                at += piece.len() as u64;
            }
            Ok(Ok(()))
        })
    }

    /// Writes `data` at `offset` (`fua`: durable before the reply).
    pub fn write_at(&mut self, data: &[u8], offset: u64, fua: bool) -> io::Result<()> {
        self.check_range(offset, data.len())?;
        let flags = if fua { CMD_FLAG_FUA } else { 0 };
        self.exchange(|c| {
            let mut at = offset;
            for piece in data.chunks(CLIENT_MAX_REQUEST) {
                let h = c.request(CMD_WRITE, flags, at, piece.len() as u32)?;
                c.stream.write_all(piece)?;
                if let Err(refused) = c.reply(h, "write", at)? {
                    return Ok(Err(refused));
                }
                at += piece.len() as u64;
            }
            Ok(Ok(()))
        })
    }

    /// Makes every completed write durable (`NBD_CMD_FLUSH`).
    pub fn flush(&mut self) -> io::Result<()> {
        if self.flags & TFLAG_SEND_FLUSH == 0 {
            return Ok(());
        }
        self.exchange(|c| {
            let h = c.request(CMD_FLUSH, 0, 0, 0)?;
            c.reply(h, "flush", 0)
        })
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // A polite disconnect; the server needs no reply and a failure changes nothing.
        if !self.broken {
            let _ = self.request(CMD_DISC, 0, 0, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_parse_or_say_what_is_wrong() {
        assert_eq!(
            Address::parse("nbd://example.org:10810/sur").unwrap(),
            Address::Tcp {
                host: "example.org".into(),
                port: 10810,
                export: "sur".into()
            }
        );
        assert_eq!(
            Address::parse("nbd://[::1]/").unwrap(),
            Address::Tcp {
                host: "::1".into(),
                port: 10809,
                export: "".into()
            }
        );
        assert_eq!(
            Address::parse("nbd+unix:///s?socket=/tmp/x.sock").unwrap(),
            Address::Unix {
                socket: "/tmp/x.sock".into(),
                export: "s".into()
            }
        );
        for bad in [
            "nbd+unix:///s",
            "nbd://:9/x",
            "nbd://h:port/x",
            "/tmp/pool.json",
        ] {
            let e = Address::parse(bad).unwrap_err();
            assert!(e.contains("not an NBD address"), "{bad}: {e}");
        }
        assert!(is_uri("nbd://h/") && is_uri("nbd+unix:///?socket=a") && !is_uri("a/b.json"));
    }
}
