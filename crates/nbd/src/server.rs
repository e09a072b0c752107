//! The server side of one NBD connection as a sans-I/O state machine: bytes from the client go
//! in through [`ServerConn::receive`], bytes for the client come out of
//! [`ServerConn::take_output`], and what the transport must do comes out of
//! [`ServerConn::poll_event`] (requests to execute, the end of the connection).
//!
//! The machine answers the whole handshake itself, and in the transmission phase it validates
//! every request (magic, command, flags, length against the maximum payload, range against the
//! export size) before handing it over: a request that reaches the transport is one the backend
//! can execute. Invalid requests get the error reply the protocol prescribes, written to the
//! output, and the connection goes on. Violations after which the byte stream cannot be
//! trusted (bad magic, unknown client flags, a payload too large to skip) end the connection
//! with [`Event::Fatal`]; the transport then drops the socket (a hard disconnect). Nothing in
//! here panics on any input.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::proto::*;

/// Block size constraints advertised with `NBD_INFO_BLOCK_SIZE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockSize {
    /// Minimum block size (a power of two, 1 ..= 64 KiB); offsets and lengths should be
    /// multiples of it.
    pub minimum: u32,
    /// Preferred block size (a power of two, at least 512 and at least `minimum`).
    pub preferred: u32,
    /// Maximum payload of a read or write request (a multiple of `minimum`). Longer requests
    /// are refused with `EOVERFLOW`.
    pub maximum: u32,
}

impl Default for BlockSize {
    fn default() -> Self {
        BlockSize {
            minimum: 1,
            preferred: 4096,
            maximum: DEFAULT_MAX_PAYLOAD,
        }
    }
}

/// The maximum payload a client may assume when nothing is advertised, and our default.
pub const DEFAULT_MAX_PAYLOAD: u32 = 32 << 20;

/// A write payload longer than the maximum is read and thrown away (then refused with
/// `EOVERFLOW`) up to this length; beyond it the connection is dropped instead.
pub const MAX_DISCARD_BYTES: u32 = 256 << 20;

/// Option data longer than this is refused with `NBD_REP_ERR_TOO_BIG` (after skipping it).
pub const MAX_OPTION_BYTES: u32 = 64 << 10;

/// Option data longer than this ends the connection (not worth skipping).
pub const MAX_OPTION_DISCARD_BYTES: u32 = 16 << 20;

/// One export as the protocol sees it.
#[derive(Clone, Debug)]
pub struct ExportInfo {
    /// Name the client asks for.
    pub name: String,
    /// Free text shown by `nbdinfo` and similar (may be empty).
    pub description: String,
    /// Size in bytes.
    pub size: u64,
    /// Refuse writes (`EPERM`).
    pub read_only: bool,
    /// Block size constraints.
    pub block: BlockSize,
    /// Whether FLUSH and FUA are consistent across connections (the backend has no
    /// per-connection cache): sets `NBD_FLAG_CAN_MULTI_CONN`.
    pub multi_conn: bool,
}

impl ExportInfo {
    /// An export of `size` bytes with default constraints.
    pub fn new(name: impl Into<String>, size: u64) -> ExportInfo {
        ExportInfo {
            name: name.into(),
            description: String::new(),
            size,
            read_only: false,
            block: BlockSize::default(),
            multi_conn: true,
        }
    }

    fn transmission_flags(&self, structured: bool) -> u16 {
        let mut f = TFLAG_HAS_FLAGS
            | TFLAG_SEND_FLUSH
            | TFLAG_SEND_FUA
            | TFLAG_SEND_TRIM
            | TFLAG_SEND_WRITE_ZEROES;
        if self.read_only {
            f |= TFLAG_READ_ONLY;
        }
        if structured {
            // Reads are always answered with a single data chunk.
            f |= TFLAG_SEND_DF;
        }
        if self.multi_conn {
            f |= TFLAG_CAN_MULTI_CONN;
        }
        f
    }
}

/// What the server offers on a connection.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The exports, by name.
    pub exports: Vec<ExportInfo>,
    /// The export an empty name selects (the "default export"), if any.
    pub default_export: Option<usize>,
    /// Whether `NBD_OPT_STARTTLS` is offered, and whether it is required.
    pub tls: TlsPolicy,
}

/// What a server does with TLS (`NBD_OPT_STARTTLS`), as in nbdkit's and qemu-nbd's
/// `--tls=off|on|require`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TlsPolicy {
    /// STARTTLS is refused as unsupported (`NBD_REP_ERR_UNSUP`).
    #[default]
    Off,
    /// Clients may upgrade with STARTTLS or stay in plain text (the protocol's "selective
    /// TLS" with every export open to both).
    Optional,
    /// Every option but STARTTLS and ABORT is refused with `NBD_REP_ERR_TLS_REQD` until TLS
    /// is up, and `NBD_OPT_EXPORT_NAME` (which has no error reply) ends the session (the
    /// protocol's "forced TLS").
    Required,
}

impl ServerConfig {
    /// Exports with the first one as the default.
    pub fn new(exports: Vec<ExportInfo>) -> ServerConfig {
        let default_export = if exports.is_empty() { None } else { Some(0) };
        ServerConfig {
            exports,
            default_export,
            tls: TlsPolicy::Off,
        }
    }

    fn find(&self, name: &str) -> Option<usize> {
        if name.is_empty() {
            return self.default_export;
        }
        self.exports.iter().position(|e| e.name == name)
    }
}

/// The most queries one `NBD_OPT_LIST_META_CONTEXT` / `NBD_OPT_SET_META_CONTEXT` may carry
/// (each takes at least 4 bytes of the option data, so this only bounds the work).
pub const MAX_META_QUERIES: usize = MAX_OPTION_BYTES as usize / 4;

/// A validated request for the backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The client's handle; the reply must carry it.
    pub handle: u64,
    /// Command flags as sent (FUA, NO_HOLE, DF).
    pub flags: u16,
    /// What to do.
    pub command: Command,
}

impl Request {
    /// The client asked for the data to be durable before the reply (`NBD_CMD_FLAG_FUA`).
    pub fn fua(&self) -> bool {
        self.flags & CMD_FLAG_FUA != 0
    }
    /// A block status request wants a single extent (`NBD_CMD_FLAG_REQ_ONE`).
    pub fn req_one(&self) -> bool {
        self.flags & CMD_FLAG_REQ_ONE != 0
    }
}

/// A command, with its range already checked against the export.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Read `len` bytes at `offset`.
    Read { offset: u64, len: u32 },
    /// Write `data` at `offset`.
    Write { offset: u64, data: Vec<u8> },
    /// Make every write replied to so far durable.
    Flush,
    /// The client no longer needs these bytes (a hint).
    Trim { offset: u64, len: u32 },
    /// Write `len` zero bytes at `offset`.
    WriteZeroes { offset: u64, len: u32 },
    /// Report the allocation status (`base:allocation`) of `len` bytes at `offset` (`len` is
    /// at least 1); answer with [`block_status_descriptors`] and
    /// [`ReplyEncoder::block_status`] for context [`META_BASE_ALLOCATION_ID`].
    BlockStatus { offset: u64, len: u32 },
}

/// Why a connection had to be dropped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The client flags hold bits we did not offer.
    #[error("client flags {0:#x} hold unknown bits")]
    BadClientFlags(u32),
    /// An option did not start with `IHAVEOPT`.
    #[error("option magic {0:#018x} is not IHAVEOPT")]
    BadOptionMagic(u64),
    /// A request did not start with the request magic.
    #[error("request magic {0:#010x} is not NBD_REQUEST_MAGIC")]
    BadRequestMagic(u32),
    /// `NBD_OPT_EXPORT_NAME` named an export that does not exist (the option cannot fail, so
    /// the session ends).
    #[error("NBD_OPT_EXPORT_NAME asked for unknown export '{0}'")]
    UnknownExport(String),
    /// Option data too long even to skip.
    #[error("option {option} carries {len} bytes of data, more than the {max} we accept")]
    OptionTooLong { option: u32, len: u32, max: u32 },
    /// A write payload too long even to skip.
    #[error("write of {len} bytes, far beyond the maximum payload of {max} bytes")]
    PayloadTooLong { len: u32, max: u32 },
    /// The client closed the connection in the middle of a message.
    #[error("client closed the connection in the middle of a message ({0})")]
    Truncated(&'static str),
    /// `NBD_OPT_EXPORT_NAME` before TLS on a server that requires TLS (the option has no
    /// error reply, so the session ends).
    #[error("NBD_OPT_EXPORT_NAME before STARTTLS, and this server requires TLS")]
    ExportNameWithoutTls,
    /// Bytes sent after `NBD_OPT_STARTTLS` before its reply (they would be taken as the TLS
    /// handshake).
    #[error("data sent after NBD_OPT_STARTTLS without waiting for its reply")]
    DataAfterStartTls,
}

/// What the transport must do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The handshake is over; the client uses export `export` (index into the configuration).
    /// Requests follow.
    Selected { export: usize },
    /// Execute this request and send its reply (encode it with [`ServerConn::encoder`]).
    Request(Request),
    /// The client ended the session cleanly (`NBD_CMD_DISC`, `NBD_OPT_ABORT`, or closing the
    /// socket between messages): finish the requests under way, then close.
    Disconnect,
    /// The client violated the protocol: close the socket now (hard disconnect).
    Fatal(ProtocolError),
    /// STARTTLS was acknowledged: once the acknowledgement is sent, run the server side of a
    /// TLS handshake on the socket, call [`ServerConn::tls_started`] and go on feeding it
    /// what TLS decrypts (the negotiation continues inside TLS).
    StartTls,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    /// Waiting for the 4 bytes of client flags.
    ClientFlags,
    /// Waiting for an option header.
    OptionHeader,
    /// Waiting for `len` bytes of option data.
    OptionData { option: u32, len: u32 },
    /// Skipping too-long option data, then `NBD_REP_ERR_TOO_BIG`.
    OptionDiscard { option: u32, left: u32 },
    /// Waiting for a request header.
    RequestHeader,
    /// Receiving a write payload.
    Payload {
        handle: u64,
        flags: u16,
        offset: u64,
        left: u32,
        /// The reply to send instead of executing, when the request was invalid.
        error: Option<(u32, String)>,
        /// The whole payload's room; `filled` bytes of it received.
        data: Vec<u8>,
        filled: usize,
    },
    /// Skipping a too-long write payload, then `EOVERFLOW`.
    PayloadDiscard {
        handle: u64,
        left: u32,
        message: String,
    },
    /// Nothing more will be read.
    Closed,
}

/// The server side of one connection.
pub struct ServerConn {
    config: ServerConfig,
    state: State,
    /// Received bytes not yet consumed.
    inbuf: Vec<u8>,
    /// Bytes for the client.
    out: Vec<u8>,
    events: VecDeque<Event>,
    no_zeroes: bool,
    structured: bool,
    /// The export the last `NBD_OPT_SET_META_CONTEXT` selected `base:allocation` for (`None`:
    /// no context selected, or never asked).
    meta: Option<usize>,
    /// In transmission: `NBD_CMD_BLOCK_STATUS` was negotiated (the last SET selected
    /// `base:allocation` for the export chosen).
    block_status: bool,
    export: Option<usize>,
    shutting_down: bool,
    /// STARTTLS was acknowledged, the handshake has not yet been done.
    tls_pending: bool,
    /// The session runs inside TLS.
    tls_active: bool,
    /// Write payload buffers given back after their writes ran.
    buffers: PayloadBuffers,
}

/// Payloads at least this long (what is left of them) are read straight into their buffer
/// ([`ServerConn::payload_space`]); shorter ones come through the caller's buffer, with the
/// next request's header in the same read.
pub const DIRECT_PAYLOAD_BYTES: usize = 64 << 10;

/// Write payload buffers handed back once their writes ran ([`PayloadBuffers::give`]), reused
/// for later payloads of the connection: a reused buffer is already allocated and its bytes
/// initialised, so a payload of the same size is read into it with no allocation and no
/// zeroing. At most [`PayloadBuffers::KEEP_BYTES`] are kept.
#[derive(Clone, Default)]
pub struct PayloadBuffers(Arc<Mutex<Vec<Vec<u8>>>>);

impl PayloadBuffers {
    /// The most bytes of buffers kept for reuse (per connection).
    pub const KEEP_BYTES: usize = 32 << 20;

    /// Gives a payload buffer back once its write ran (kept if it is large enough to be
    /// worth it and there is room).
    pub fn give(&self, v: Vec<u8>) {
        if v.capacity() < DIRECT_PAYLOAD_BYTES {
            return;
        }
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let bytes: usize = kept.iter().map(|b| b.capacity()).sum();
        if bytes + v.capacity() <= Self::KEEP_BYTES {
            kept.push(v);
        }
    }

    /// A buffer for a payload of `len` bytes: for a payload read in place, `len` bytes (a
    /// kept buffer when one is large enough; its bytes are whatever it held, every one to be
    /// overwritten by the payload); for a shorter one, empty with room for `len`, filled by
    /// appending (no zeroing first: 4 KiB writes spent 1.6 % of the server's samples in
    /// `memset`).
    fn take(&self, len: usize) -> Vec<u8> {
        if len >= DIRECT_PAYLOAD_BYTES {
            let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(i) = kept.iter().position(|b| b.capacity() >= len) {
                let mut v = kept.swap_remove(i);
                drop(kept);
                if v.len() >= len {
                    v.truncate(len);
                } else {
                    v.resize(len, 0);
                }
                return v;
            }
            return vec![0u8; len];
        }
        Vec::with_capacity(len)
    }
}

impl ServerConn {
    /// A new connection; the greeting is already in the output.
    pub fn new(config: ServerConfig) -> ServerConn {
        let mut out = Vec::with_capacity(18);
        put_u64(&mut out, NBDMAGIC);
        put_u64(&mut out, IHAVEOPT);
        put_u16(&mut out, FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES);
        ServerConn {
            config,
            state: State::ClientFlags,
            inbuf: Vec::new(),
            out,
            events: VecDeque::new(),
            no_zeroes: false,
            structured: false,
            meta: None,
            block_status: false,
            export: None,
            shutting_down: false,
            tls_pending: false,
            tls_active: false,
            buffers: PayloadBuffers::default(),
        }
    }

    /// Where the transport gives write payload buffers back once their writes ran (see
    /// [`PayloadBuffers`]).
    pub fn payload_buffers(&self) -> PayloadBuffers {
        self.buffers.clone()
    }

    /// While a write payload is being received, nothing else is buffered and at least
    /// [`DIRECT_PAYLOAD_BYTES`] of it are still to come: the room for the rest of it, for the
    /// transport to read from the socket straight into (no copy through its own buffer); it
    /// then reports what it read with [`ServerConn::payload_received`]. `None` otherwise: read
    /// into a buffer of your own and call [`ServerConn::receive`].
    pub fn payload_space(&mut self) -> Option<&mut [u8]> {
        if !self.inbuf.is_empty() {
            return None;
        }
        match &mut self.state {
            State::Payload {
                left, data, filled, ..
            } if *left as usize >= DIRECT_PAYLOAD_BYTES => {
                Some(&mut data[*filled..*filled + *left as usize])
            }
            _ => None,
        }
    }

    /// Between requests, or within a request's header: how many bytes the header still lacks
    /// (a transport that reads no more than this never takes a payload's first bytes
    /// through its own buffer). `None` in any other state.
    pub fn header_bytes_missing(&self) -> Option<usize> {
        (self.state == State::RequestHeader)
            .then(|| REQUEST_HEADER_BYTES.saturating_sub(self.inbuf.len()))
    }

    /// `n` bytes were read into the front of [`ServerConn::payload_space`].
    pub fn payload_received(&mut self, n: usize) {
        let State::Payload { left, filled, .. } = &mut self.state else {
            panic!("payload_received outside a payload");
        };
        assert!(n <= *left as usize, "more payload received than was room");
        *filled += n;
        *left -= n as u32;
        if *left == 0 {
            self.finish_payload();
        }
    }

    /// Bytes to send to the client (handshake replies and error replies to invalid requests),
    /// in order. Send them before the replies of requests polled after this call.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    /// The next thing the transport must do.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// How replies are encoded on this connection.
    pub fn encoder(&self) -> ReplyEncoder {
        ReplyEncoder {
            structured: self.structured,
        }
    }

    /// The export chosen, once the transmission phase has begun.
    pub fn export(&self) -> Option<usize> {
        self.export
    }

    /// True when `NBD_CMD_BLOCK_STATUS` requests are accepted: the client selected the
    /// `base:allocation` metadata context for the export it then chose.
    pub fn block_status(&self) -> bool {
        self.block_status
    }

    /// True once the transmission phase has begun.
    pub fn in_transmission(&self) -> bool {
        self.export.is_some() && self.state != State::Closed
    }

    /// The transport finished the TLS handshake that [`Event::StartTls`] asked for.
    pub fn tls_started(&mut self) {
        self.tls_pending = false;
        self.tls_active = true;
    }

    /// True once the session runs inside TLS.
    pub fn tls_active(&self) -> bool {
        self.tls_active
    }

    /// True when nothing more will be accepted.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// The server is going away: further options are refused with `NBD_REP_ERR_SHUTDOWN` and
    /// further requests with `ESHUTDOWN`.
    pub fn begin_shutdown(&mut self) {
        self.shutting_down = true;
    }

    /// The client closed its side. Between messages that is a clean end of the session; in
    /// the middle of one it is reported as [`ProtocolError::Truncated`].
    pub fn receive_eof(&mut self) {
        let what = match &self.state {
            State::Closed => return,
            State::ClientFlags => "client flags",
            State::OptionHeader if self.inbuf.is_empty() => {
                return self.close(Event::Disconnect);
            }
            State::OptionHeader => "option header",
            State::OptionData { .. } | State::OptionDiscard { .. } => "option data",
            State::RequestHeader if self.inbuf.is_empty() => {
                return self.close(Event::Disconnect);
            }
            State::RequestHeader => "request header",
            State::Payload { .. } | State::PayloadDiscard { .. } => "write payload",
        };
        self.close(Event::Fatal(ProtocolError::Truncated(what)));
    }

    /// Feeds bytes received from the client.
    pub fn receive(&mut self, mut data: &[u8]) {
        while !data.is_empty() && self.state != State::Closed {
            // Payloads stream straight from the input (no extra copy of large writes).
            if self.inbuf.is_empty() {
                if let Some(n) = self.consume_streaming(data) {
                    data = &data[n..];
                    continue;
                }
            }
            self.inbuf.extend_from_slice(data);
            data = &[];
            self.process();
        }
    }

    /// If the state consumes raw bytes (payload, discard), consumes from `data` and returns
    /// how many bytes were used.
    fn consume_streaming(&mut self, data: &[u8]) -> Option<usize> {
        match &mut self.state {
            State::Payload {
                left,
                data: buf,
                filled,
                ..
            } => {
                let n = (*left as usize).min(data.len());
                if buf.len() == *filled {
                    // A short payload's buffer grows as it arrives (`PayloadBuffers::take`).
                    buf.extend_from_slice(&data[..n]);
                } else {
                    buf[*filled..*filled + n].copy_from_slice(&data[..n]);
                }
                *filled += n;
                *left -= n as u32;
                if *left == 0 {
                    self.finish_payload();
                }
                Some(n)
            }
            State::PayloadDiscard { left, .. } => {
                let n = (*left as usize).min(data.len());
                *left -= n as u32;
                if *left == 0 {
                    self.finish_discard();
                }
                Some(n)
            }
            State::OptionDiscard { option, left } => {
                let n = (*left as usize).min(data.len());
                *left -= n as u32;
                if *left == 0 {
                    let option = *option;
                    self.state = State::OptionHeader;
                    self.opt_reply(
                        option,
                        REP_ERR_TOO_BIG,
                        format!("option data longer than {MAX_OPTION_BYTES} bytes").as_bytes(),
                    );
                }
                Some(n)
            }
            _ => None,
        }
    }

    /// Consumes whole messages from `inbuf`.
    fn process(&mut self) {
        let mut pos = 0usize;
        loop {
            if self.state == State::Closed {
                break;
            }
            let avail = self.inbuf.len() - pos;
            if avail == 0 {
                break;
            }
            if self.tls_pending {
                // The client must wait for the STARTTLS reply before its TLS handshake.
                self.events.retain(|e| *e != Event::StartTls);
                self.close(Event::Fatal(ProtocolError::DataAfterStartTls));
                break;
            }
            // Streaming states take what is buffered.
            if matches!(
                self.state,
                State::Payload { .. } | State::PayloadDiscard { .. } | State::OptionDiscard { .. }
            ) {
                let chunk = std::mem::take(&mut self.inbuf);
                let n = self
                    .consume_streaming(&chunk[pos..])
                    .expect("streaming state");
                self.inbuf = chunk;
                pos += n;
                continue;
            }
            let need = match self.state {
                State::ClientFlags => 4,
                State::OptionHeader => OPTION_HEADER_BYTES,
                State::OptionData { len, .. } => len as usize,
                State::RequestHeader => REQUEST_HEADER_BYTES,
                _ => unreachable!("handled above"),
            };
            if avail < need {
                break;
            }
            let msg = self.inbuf[pos..pos + need].to_vec();
            pos += need;
            match self.state.clone() {
                State::ClientFlags => self.on_client_flags(get_u32(&msg, 0)),
                State::OptionHeader => self.on_option_header(&msg),
                State::OptionData { option, .. } => {
                    self.state = State::OptionHeader;
                    self.on_option(option, &msg);
                }
                State::RequestHeader => self.on_request_header(&msg),
                _ => unreachable!(),
            }
        }
        self.inbuf.drain(..pos.min(self.inbuf.len()));
        if self.state == State::Closed {
            self.inbuf.clear();
        }
    }

    fn close(&mut self, ev: Event) {
        self.state = State::Closed;
        self.inbuf.clear();
        self.events.push_back(ev);
    }

    // ---- handshake ----

    fn on_client_flags(&mut self, flags: u32) {
        if flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
            return self.close(Event::Fatal(ProtocolError::BadClientFlags(flags)));
        }
        self.no_zeroes = flags & FLAG_C_NO_ZEROES != 0;
        self.state = State::OptionHeader;
    }

    fn on_option_header(&mut self, h: &[u8]) {
        let magic = get_u64(h, 0);
        if magic != IHAVEOPT {
            return self.close(Event::Fatal(ProtocolError::BadOptionMagic(magic)));
        }
        let option = get_u32(h, 8);
        let len = get_u32(h, 12);
        if len > MAX_OPTION_DISCARD_BYTES {
            return self.close(Event::Fatal(ProtocolError::OptionTooLong {
                option,
                len,
                max: MAX_OPTION_DISCARD_BYTES,
            }));
        }
        if len > MAX_OPTION_BYTES {
            if option == OPT_EXPORT_NAME {
                // EXPORT_NAME has no error reply; no export has such a name.
                return self.close(Event::Fatal(ProtocolError::OptionTooLong {
                    option,
                    len,
                    max: MAX_OPTION_BYTES,
                }));
            }
            self.state = State::OptionDiscard { option, left: len };
            return;
        }
        if len == 0 {
            self.on_option(option, &[]);
        } else {
            self.state = State::OptionData { option, len };
        }
    }

    fn opt_reply(&mut self, option: u32, kind: u32, data: &[u8]) {
        self.out
            .extend_from_slice(&option_reply(option, kind, data));
    }

    fn on_option(&mut self, option: u32, data: &[u8]) {
        if self.shutting_down && option != OPT_ABORT {
            if option == OPT_EXPORT_NAME {
                return self.close(Event::Disconnect);
            }
            return self.opt_reply(option, REP_ERR_SHUTDOWN, b"server is shutting down");
        }
        if option == OPT_STARTTLS {
            return self.on_starttls(data);
        }
        if self.config.tls == TlsPolicy::Required && !self.tls_active && option != OPT_ABORT {
            if option == OPT_EXPORT_NAME {
                return self.close(Event::Fatal(ProtocolError::ExportNameWithoutTls));
            }
            return self.opt_reply(
                option,
                REP_ERR_TLS_REQD,
                b"this server requires TLS: negotiate STARTTLS first (an nbds:// URI)",
            );
        }
        match option {
            OPT_EXPORT_NAME => {
                let name = String::from_utf8_lossy(data).into_owned();
                match self.config.find(&name) {
                    Some(i) => {
                        let e = &self.config.exports[i];
                        let mut out = Vec::with_capacity(134);
                        put_u64(&mut out, e.size);
                        put_u16(&mut out, e.transmission_flags(self.structured));
                        if !self.no_zeroes {
                            out.extend_from_slice(&[0u8; 124]);
                        }
                        self.out.extend_from_slice(&out);
                        self.enter_transmission(i);
                    }
                    None => self.close(Event::Fatal(ProtocolError::UnknownExport(name))),
                }
            }
            OPT_ABORT => {
                self.opt_reply(option, REP_ACK, &[]);
                self.close(Event::Disconnect);
            }
            OPT_LIST => {
                if !data.is_empty() {
                    return self.opt_reply(option, REP_ERR_INVALID, b"LIST takes no data");
                }
                let names: Vec<String> =
                    self.config.exports.iter().map(|e| e.name.clone()).collect();
                for n in names {
                    let mut d = Vec::with_capacity(4 + n.len());
                    put_u32(&mut d, n.len() as u32);
                    d.extend_from_slice(n.as_bytes());
                    self.opt_reply(option, REP_SERVER, &d);
                }
                self.opt_reply(option, REP_ACK, &[]);
            }
            OPT_STRUCTURED_REPLY => {
                if !data.is_empty() {
                    return self.opt_reply(
                        option,
                        REP_ERR_INVALID,
                        b"STRUCTURED_REPLY takes no data",
                    );
                }
                self.structured = true;
                self.opt_reply(option, REP_ACK, &[]);
            }
            OPT_INFO | OPT_GO => self.on_info(option, data),
            OPT_LIST_META_CONTEXT | OPT_SET_META_CONTEXT => self.on_meta_context(option, data),
            _ => {
                let msg = format!("option {option} ({}) is not supported", option_name(option));
                self.opt_reply(option, REP_ERR_UNSUP, msg.as_bytes());
            }
        }
    }

    fn on_starttls(&mut self, data: &[u8]) {
        let option = OPT_STARTTLS;
        if self.config.tls == TlsPolicy::Off {
            return self.opt_reply(
                option,
                REP_ERR_UNSUP,
                b"option 5 (STARTTLS) is not supported: this server runs without TLS",
            );
        }
        if !data.is_empty() {
            return self.opt_reply(option, REP_ERR_INVALID, b"STARTTLS takes no data");
        }
        if self.tls_active {
            return self.opt_reply(option, REP_ERR_INVALID, b"TLS is already active");
        }
        self.opt_reply(option, REP_ACK, &[]);
        // Nothing negotiated in plain text carries over into TLS.
        self.structured = false;
        self.meta = None;
        self.tls_pending = true;
        self.events.push_back(Event::StartTls);
    }

    fn on_info(&mut self, option: u32, data: &[u8]) {
        // name length u32, name, count u16, count x info type u16
        let parsed = (|| {
            if data.len() < 6 {
                return None;
            }
            let nlen = get_u32(data, 0) as usize;
            let rest = data.len() - 4;
            if nlen > rest.checked_sub(2)? {
                return None;
            }
            let name = std::str::from_utf8(&data[4..4 + nlen]).ok()?.to_string();
            let count = get_u16(data, 4 + nlen) as usize;
            let infos_at = 6 + nlen;
            if data.len() != infos_at + 2 * count {
                return None;
            }
            let infos: Vec<u16> = (0..count)
                .map(|i| get_u16(data, infos_at + 2 * i))
                .collect();
            Some((name, infos))
        })();
        let Some((name, infos)) = parsed else {
            return self.opt_reply(
                option,
                REP_ERR_INVALID,
                format!("malformed {} request", option_name(option)).as_bytes(),
            );
        };
        let Some(i) = self.config.find(&name) else {
            let msg = format!("no export named '{name}'");
            return self.opt_reply(option, REP_ERR_UNKNOWN, msg.as_bytes());
        };
        let e = self.config.exports[i].clone();
        let mut d = Vec::new();
        put_u16(&mut d, INFO_EXPORT);
        put_u64(&mut d, e.size);
        put_u16(&mut d, e.transmission_flags(self.structured));
        self.opt_reply(option, REP_INFO, &d);
        if infos.contains(&INFO_NAME) {
            let mut d = Vec::new();
            put_u16(&mut d, INFO_NAME);
            d.extend_from_slice(e.name.as_bytes());
            self.opt_reply(option, REP_INFO, &d);
        }
        if infos.contains(&INFO_DESCRIPTION) && !e.description.is_empty() {
            let mut d = Vec::new();
            put_u16(&mut d, INFO_DESCRIPTION);
            d.extend_from_slice(truncate_utf8(&e.description, MAX_STRING_BYTES).as_bytes());
            self.opt_reply(option, REP_INFO, &d);
        }
        // Block sizes are sent whether asked or not: a client unaware of them is served
        // anyway (minimum 1 accepts any alignment, and the maximum is the protocol default).
        let mut d = Vec::new();
        put_u16(&mut d, INFO_BLOCK_SIZE);
        put_u32(&mut d, e.block.minimum);
        put_u32(&mut d, e.block.preferred);
        put_u32(&mut d, e.block.maximum);
        self.opt_reply(option, REP_INFO, &d);
        self.opt_reply(option, REP_ACK, &[]);
        if option == OPT_GO {
            self.enter_transmission(i);
        }
    }

    /// `NBD_OPT_LIST_META_CONTEXT` and `NBD_OPT_SET_META_CONTEXT`. The one context is
    /// `base:allocation`. LIST with no query lists it; the query `base:` (the namespace's
    /// wildcard) lists it too. SET selects it when a query names it exactly (`base:` selects
    /// nothing there, as the protocol says) and replaces the previous selection even when it
    /// fails; SET with no query selects nothing. Queries in other namespaces and unknown
    /// leaf names are ignored; a query without a namespace is invalid. Both need structured
    /// replies first.
    fn on_meta_context(&mut self, option: u32, data: &[u8]) {
        let set = option == OPT_SET_META_CONTEXT;
        if set {
            self.meta = None;
        }
        let name = option_name(option);
        if !self.structured {
            let msg = format!(
                "{name} needs structured replies: negotiate NBD_OPT_STRUCTURED_REPLY first"
            );
            return self.opt_reply(option, REP_ERR_INVALID, msg.as_bytes());
        }
        let (export, queries) = match parse_meta_request(data) {
            Ok(p) => p,
            Err(why) => {
                let msg = format!("malformed {name} request: {why}");
                return self.opt_reply(option, REP_ERR_INVALID, msg.as_bytes());
            }
        };
        let Some(i) = self.config.find(&export) else {
            let msg = format!("no export named '{export}'");
            return self.opt_reply(option, REP_ERR_UNKNOWN, msg.as_bytes());
        };
        let mut allocation = !set && queries.is_empty();
        for q in &queries {
            let Some((namespace, leaf)) = q.split_once(':') else {
                let msg = format!(
                    "query '{q}' names no namespace (namespace:leaf, e.g. {META_BASE_ALLOCATION})"
                );
                return self.opt_reply(option, REP_ERR_INVALID, msg.as_bytes());
            };
            if namespace == "base" && (leaf == "allocation" || (leaf.is_empty() && !set)) {
                allocation = true;
            }
        }
        if allocation {
            let id = if set { META_BASE_ALLOCATION_ID } else { 0 };
            let mut d = Vec::with_capacity(4 + META_BASE_ALLOCATION.len());
            put_u32(&mut d, id);
            d.extend_from_slice(META_BASE_ALLOCATION.as_bytes());
            self.opt_reply(option, REP_META_CONTEXT, &d);
            if set {
                self.meta = Some(i);
            }
        }
        self.opt_reply(option, REP_ACK, &[]);
    }

    fn enter_transmission(&mut self, export: usize) {
        self.block_status = self.structured && self.meta == Some(export);
        self.export = Some(export);
        self.state = State::RequestHeader;
        self.events.push_back(Event::Selected { export });
    }

    // ---- transmission ----

    fn reply_error(&mut self, handle: u64, error: u32, message: &str) {
        let b = self.encoder().error(handle, error, message);
        self.out.extend_from_slice(&b);
    }

    fn on_request_header(&mut self, h: &[u8]) {
        let magic = get_u32(h, 0);
        if magic != REQUEST_MAGIC {
            return self.close(Event::Fatal(ProtocolError::BadRequestMagic(magic)));
        }
        let flags = get_u16(h, 4);
        let cmd = get_u16(h, 6);
        let handle = get_u64(h, 8);
        let offset = get_u64(h, 16);
        let len = get_u32(h, 24);
        let e = self.config.exports[self.export.expect("in transmission")].clone();
        let max = e.block.maximum;

        if cmd == CMD_WRITE {
            if len > max {
                let message =
                    format!("WRITE of {len} bytes exceeds the maximum payload of {max} bytes");
                if len > MAX_DISCARD_BYTES {
                    return self.close(Event::Fatal(ProtocolError::PayloadTooLong { len, max }));
                }
                self.state = State::PayloadDiscard {
                    handle,
                    left: len,
                    message,
                };
                return;
            }
            let error = self.check(&e, cmd, flags, offset, len);
            self.state = State::Payload {
                handle,
                flags,
                offset,
                left: len,
                error,
                data: self.buffers.take(len as usize),
                filled: 0,
            };
            if len == 0 {
                self.finish_payload();
            }
            return;
        }
        if cmd == CMD_DISC {
            return self.close(Event::Disconnect);
        }
        if let Some((err, msg)) = self.check(&e, cmd, flags, offset, len) {
            return self.reply_error(handle, err, &msg);
        }
        let command = match cmd {
            CMD_READ => Command::Read { offset, len },
            CMD_FLUSH => Command::Flush,
            CMD_TRIM => Command::Trim { offset, len },
            CMD_WRITE_ZEROES => Command::WriteZeroes { offset, len },
            CMD_BLOCK_STATUS => Command::BlockStatus { offset, len },
            _ => unreachable!("check refuses other commands"),
        };
        self.events.push_back(Event::Request(Request {
            handle,
            flags,
            command,
        }));
    }

    /// The error reply a request deserves, if any.
    fn check(
        &self,
        e: &ExportInfo,
        cmd: u16,
        flags: u16,
        offset: u64,
        len: u32,
    ) -> Option<(u32, String)> {
        let name = command_name(cmd);
        if self.shutting_down {
            return Some((ESHUTDOWN, "server is shutting down".into()));
        }
        let allowed = match cmd {
            CMD_READ if self.structured => CMD_FLAG_FUA | CMD_FLAG_DF,
            CMD_READ | CMD_WRITE | CMD_FLUSH | CMD_TRIM => CMD_FLAG_FUA,
            CMD_WRITE_ZEROES => CMD_FLAG_FUA | CMD_FLAG_NO_HOLE,
            CMD_BLOCK_STATUS if self.block_status => CMD_FLAG_FUA | CMD_FLAG_REQ_ONE,
            CMD_BLOCK_STATUS => {
                return Some((
                    EINVAL,
                    format!(
                        "{name} was not negotiated: select the {META_BASE_ALLOCATION} context \
                         with NBD_OPT_SET_META_CONTEXT for this export first"
                    ),
                ))
            }
            _ => return Some((EINVAL, format!("command {cmd} ({name}) is not supported"))),
        };
        if flags & !allowed != 0 {
            return Some((EINVAL, format!("flags {flags:#x} are not valid for {name}")));
        }
        if cmd == CMD_FLUSH {
            return None;
        }
        let writes = matches!(cmd, CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES);
        if writes && e.read_only {
            return Some((EPERM, format!("{name} on a read-only export")));
        }
        if cmd == CMD_BLOCK_STATUS && len == 0 {
            return Some((EINVAL, format!("{name} of 0 bytes")));
        }
        if matches!(cmd, CMD_READ) && len > e.block.maximum {
            return Some((
                EOVERFLOW,
                format!(
                    "{name} of {len} bytes exceeds the maximum payload of {} bytes",
                    e.block.maximum
                ),
            ));
        }
        if offset
            .checked_add(len as u64)
            .is_none_or(|end| end > e.size)
        {
            let err = if matches!(cmd, CMD_WRITE | CMD_WRITE_ZEROES) {
                ENOSPC
            } else {
                EINVAL
            };
            return Some((
                err,
                format!(
                    "{name} of {len} bytes at offset {offset} is beyond the end of the export ({} bytes)",
                    e.size
                ),
            ));
        }
        None
    }

    fn finish_payload(&mut self) {
        let state = std::mem::replace(&mut self.state, State::RequestHeader);
        let State::Payload {
            handle,
            flags,
            offset,
            error,
            data,
            ..
        } = state
        else {
            unreachable!("called in the payload state");
        };
        match error {
            Some((err, msg)) => self.reply_error(handle, err, &msg),
            None => self.events.push_back(Event::Request(Request {
                handle,
                flags,
                command: Command::Write { offset, data },
            })),
        }
    }

    fn finish_discard(&mut self) {
        let state = std::mem::replace(&mut self.state, State::RequestHeader);
        let State::PayloadDiscard {
            handle, message, ..
        } = state
        else {
            unreachable!("called in the discard state");
        };
        self.reply_error(handle, EOVERFLOW, &message);
    }
}

/// The export name and the queries of a `NBD_OPT_LIST_META_CONTEXT` /
/// `NBD_OPT_SET_META_CONTEXT` request, or what is wrong with it.
fn parse_meta_request(data: &[u8]) -> Result<(String, Vec<String>), String> {
    let field = |at: usize| -> Result<u32, String> {
        data.get(at..at + 4)
            .map(|_| get_u32(data, at))
            .ok_or_else(|| format!("cut short at byte {at}"))
    };
    let string = |at: usize, len: usize, what: &str| -> Result<String, String> {
        if len > MAX_STRING_BYTES {
            return Err(format!(
                "{what} of {len} bytes, longer than {MAX_STRING_BYTES}"
            ));
        }
        let b = at
            .checked_add(len)
            .and_then(|end| data.get(at..end))
            .ok_or_else(|| format!("{what} runs past the end of the data"))?;
        String::from_utf8(b.to_vec()).map_err(|_| format!("{what} is not UTF-8"))
    };
    let nlen = field(0)? as usize;
    let export = string(4, nlen, "export name")?;
    let mut at = 4 + nlen;
    let count = field(at)? as usize;
    at += 4;
    if count > MAX_META_QUERIES || count > (data.len() - at) / 4 {
        return Err(format!("{count} queries do not fit in the data"));
    }
    let mut queries = Vec::with_capacity(count);
    for k in 0..count {
        let qlen = field(at)? as usize;
        queries.push(string(at + 4, qlen, &format!("query {k}"))?);
        at += 4 + qlen;
    }
    if at != data.len() {
        return Err(format!("{} bytes after the last query", data.len() - at));
    }
    Ok((export, queries))
}

/// The descriptors (extent length, status flags) of a block status reply to a request for
/// `len` bytes (at least 1) at `offset`, from what the backend reported: `extents`, runs of
/// (length, flags) that follow each other from `offset`.
///
/// What the protocol asks of them, whatever the backend said: at least one descriptor, none
/// of length 0, none past the requested range (the backend's are cut there), exactly one with
/// `req_one`; only the `base:allocation` flags (`STATE_HOLE`, `STATE_ZERO`); every boundary
/// between descriptors a multiple of the export's `minimum` block size (the bytes between
/// the multiples around a boundary that lies elsewhere become one run with only the flags
/// both sides have: each flag claims something of every byte it covers, so dropping one is
/// always true; an answer that stops short of such a multiple stops at the one before, or
/// reaches the one after with status 0). Neighbours with equal flags are merged. A backend
/// that reported nothing gets one descriptor of the whole range as allocated data (status 0,
/// always true).
pub fn block_status_descriptors(
    offset: u64,
    len: u32,
    req_one: bool,
    minimum: u32,
    extents: impl IntoIterator<Item = (u64, u32)>,
) -> Vec<(u32, u32)> {
    debug_assert!(len > 0);
    let m = u64::from(minimum.max(1));
    let end = offset.saturating_add(u64::from(len.max(1)));
    let round_up = |x: u64| x.div_ceil(m).saturating_mul(m).min(end);
    // Absolute runs [start, end) with their flags.
    let mut out: Vec<(u64, u64, u32)> = Vec::new();
    let mut pos = offset;
    for (n, flags) in extents {
        if pos >= end {
            break;
        }
        if n == 0 {
            continue;
        }
        let e = pos.saturating_add(n).min(end);
        let f = flags & (STATE_HOLE | STATE_ZERO);
        let mut s = pos;
        pos = e;
        if let Some(last) = out.last_mut() {
            if !s.is_multiple_of(m) && last.1 == s {
                // An unaligned boundary: the bytes around it, from the multiple of the
                // minimum before it to the one after, become one run with the flags both
                // sides have (the previous run keeps its own flags up to the multiple before).
                let (down, up) = (s / m * m, round_up(s));
                if down > last.0 {
                    let before = last.2;
                    last.1 = down;
                    out.push((down, up, before & f));
                } else {
                    last.1 = up;
                    last.2 &= f;
                }
            }
            let last = out.last_mut().expect("not empty");
            if last.1 > s {
                last.2 &= f;
                if e <= last.1 {
                    continue;
                }
                s = last.1;
            }
            if last.2 == f {
                last.1 = e;
                continue;
            }
        }
        out.push((s, e, f));
    }
    match out.last_mut() {
        None => out.push((offset, end, 0)),
        // The backend stopped short at an unaligned byte (`pos`; the last run may already
        // reach past it, to the multiple after it): the answer stops at the multiple before
        // it, or, when that leaves nothing of the run, goes on to the next one with status 0
        // (what follows is unknown).
        Some(last) if last.1 > pos || (last.1 < end && !last.1.is_multiple_of(m)) => {
            let down = pos / m * m;
            if down > last.0 {
                last.1 = down;
            } else {
                last.1 = round_up(pos);
                last.2 = 0;
            }
        }
        Some(_) => {}
    }
    // Merging by AND may have made neighbours equal.
    out.dedup_by(|b, a| {
        if a.2 == b.2 {
            a.1 = b.1;
            true
        } else {
            false
        }
    });
    if req_one {
        out.truncate(1);
    }
    out.into_iter()
        .map(|(s, e, f)| ((e - s) as u32, f))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ServerConfig {
        let mut a = ExportInfo::new("a", 1 << 20);
        a.description = "first".into();
        let mut b = ExportInfo::new("b", 4096);
        b.read_only = true;
        b.block.maximum = 8192;
        ServerConfig::new(vec![a, b])
    }

    fn opt(option: u32, data: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        put_u64(&mut v, IHAVEOPT);
        put_u32(&mut v, option);
        put_u32(&mut v, data.len() as u32);
        v.extend_from_slice(data);
        v
    }

    fn go_data(name: &str, infos: &[u16]) -> Vec<u8> {
        let mut d = Vec::new();
        put_u32(&mut d, name.len() as u32);
        d.extend_from_slice(name.as_bytes());
        put_u16(&mut d, infos.len() as u16);
        for i in infos {
            put_u16(&mut d, *i);
        }
        d
    }

    fn req(flags: u16, cmd: u16, handle: u64, offset: u64, len: u32) -> Vec<u8> {
        let mut v = Vec::new();
        put_u32(&mut v, REQUEST_MAGIC);
        put_u16(&mut v, flags);
        put_u16(&mut v, cmd);
        put_u64(&mut v, handle);
        put_u64(&mut v, offset);
        put_u32(&mut v, len);
        v
    }

    /// Parses option replies: (option, type, data).
    fn replies(mut b: &[u8]) -> Vec<(u32, u32, Vec<u8>)> {
        let mut out = Vec::new();
        while !b.is_empty() {
            assert_eq!(get_u64(b, 0), REP_MAGIC);
            let len = get_u32(b, 16) as usize;
            out.push((get_u32(b, 8), get_u32(b, 12), b[20..20 + len].to_vec()));
            b = &b[20 + len..];
        }
        out
    }

    fn events(c: &mut ServerConn) -> Vec<Event> {
        std::iter::from_fn(|| c.poll_event()).collect()
    }

    /// A connection past the greeting and client flags.
    fn negotiating(flags: u32) -> ServerConn {
        let mut c = ServerConn::new(config());
        let g = c.take_output();
        assert_eq!(g.len(), 18);
        assert_eq!(get_u64(&g, 0), NBDMAGIC);
        assert_eq!(get_u64(&g, 8), IHAVEOPT);
        assert_eq!(get_u16(&g, 16), FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES);
        c.receive(&flags.to_be_bytes());
        assert!(c.take_output().is_empty());
        c
    }

    /// A connection in transmission on export `name`.
    fn transmitting(name: &str, structured: bool) -> ServerConn {
        let mut c = negotiating(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
        if structured {
            c.receive(&opt(OPT_STRUCTURED_REPLY, &[]));
        }
        c.receive(&opt(OPT_GO, &go_data(name, &[])));
        let r = replies(&c.take_output());
        assert_eq!(r.last().unwrap().1, REP_ACK);
        let ev = events(&mut c);
        assert!(matches!(ev[..], [Event::Selected { .. }]), "{ev:?}");
        c
    }

    /// Parses a simple reply: (error, handle).
    fn simple(b: &[u8]) -> (u32, u64) {
        assert_eq!(b.len(), 16, "one simple reply");
        assert_eq!(get_u32(b, 0), SIMPLE_REPLY_MAGIC);
        (get_u32(b, 4), get_u64(b, 8))
    }

    #[test]
    fn export_name_with_and_without_zeroes() {
        for (flags, len) in [
            (FLAG_C_FIXED_NEWSTYLE, 134),
            (FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES, 10),
        ] {
            let mut c = negotiating(flags);
            c.receive(&opt(OPT_EXPORT_NAME, b"a"));
            let out = c.take_output();
            assert_eq!(out.len(), len);
            assert_eq!(get_u64(&out, 0), 1 << 20);
            let tf = get_u16(&out, 8);
            assert!(
                tf & TFLAG_HAS_FLAGS != 0 && tf & TFLAG_SEND_FLUSH != 0 && tf & TFLAG_SEND_FUA != 0
            );
            assert_eq!(tf & TFLAG_SEND_DF, 0, "DF only with structured replies");
            assert!(out[10..].iter().all(|&b| b == 0));
            assert_eq!(events(&mut c), vec![Event::Selected { export: 0 }]);
            assert!(c.in_transmission());
        }
    }

    #[test]
    fn default_export_is_the_first() {
        let mut c = negotiating(FLAG_C_FIXED_NEWSTYLE);
        c.receive(&opt(OPT_EXPORT_NAME, b""));
        assert_eq!(events(&mut c), vec![Event::Selected { export: 0 }]);
    }

    #[test]
    fn go_reports_size_name_description_and_block_sizes() {
        let mut c = negotiating(FLAG_C_FIXED_NEWSTYLE);
        c.receive(&opt(OPT_STRUCTURED_REPLY, &[]));
        c.receive(&opt(
            OPT_GO,
            &go_data("a", &[INFO_NAME, INFO_DESCRIPTION, INFO_BLOCK_SIZE]),
        ));
        let r = replies(&c.take_output());
        assert_eq!(r[0], (OPT_STRUCTURED_REPLY, REP_ACK, vec![]));
        assert!(r[1..].iter().all(|x| x.0 == OPT_GO));
        let kinds: Vec<u32> = r[1..].iter().map(|x| x.1).collect();
        assert_eq!(kinds, vec![REP_INFO, REP_INFO, REP_INFO, REP_INFO, REP_ACK]);
        let exp = &r[1].2;
        assert_eq!(get_u16(exp, 0), INFO_EXPORT);
        assert_eq!(get_u64(exp, 2), 1 << 20);
        assert!(get_u16(exp, 10) & TFLAG_SEND_DF != 0);
        assert_eq!(r[2].2, [&INFO_NAME.to_be_bytes()[..], b"a"].concat());
        assert_eq!(
            r[3].2,
            [&INFO_DESCRIPTION.to_be_bytes()[..], b"first"].concat()
        );
        let bs = &r[4].2;
        assert_eq!(get_u16(bs, 0), INFO_BLOCK_SIZE);
        assert_eq!(
            (get_u32(bs, 2), get_u32(bs, 6), get_u32(bs, 10)),
            (1, 4096, DEFAULT_MAX_PAYLOAD)
        );
        assert_eq!(events(&mut c), vec![Event::Selected { export: 0 }]);
        assert!(c.encoder().structured);
    }

    #[test]
    fn info_stays_in_negotiation_and_errors_are_replies() {
        let mut c = negotiating(FLAG_C_FIXED_NEWSTYLE);
        c.receive(&opt(OPT_INFO, &go_data("b", &[])));
        let r = replies(&c.take_output());
        assert_eq!(r.last().unwrap().1, REP_ACK);
        assert!(get_u16(&r[0].2, 10) & TFLAG_READ_ONLY != 0);
        assert!(events(&mut c).is_empty());
        // Unknown export.
        c.receive(&opt(OPT_GO, &go_data("zz", &[])));
        let r = replies(&c.take_output());
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].1, REP_ERR_UNKNOWN);
        // Malformed: name length past the data, and a count that does not match.
        let mut bad = go_data("a", &[1]);
        bad[3] = 200;
        c.receive(&opt(OPT_GO, &bad));
        let mut bad2 = go_data("a", &[1, 2]);
        bad2.pop();
        c.receive(&opt(OPT_INFO, &bad2));
        c.receive(&opt(OPT_GO, &[0, 0]));
        let r = replies(&c.take_output());
        assert_eq!(
            r.iter().map(|x| x.1).collect::<Vec<_>>(),
            vec![REP_ERR_INVALID; 3]
        );
        assert!(events(&mut c).is_empty());
        assert!(!c.is_closed());
    }

    #[test]
    fn list_unknown_option_abort() {
        let mut c = negotiating(FLAG_C_FIXED_NEWSTYLE);
        c.receive(&opt(OPT_LIST, &[]));
        let r = replies(&c.take_output());
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].1, REP_SERVER);
        assert_eq!(r[0].2, [&1u32.to_be_bytes()[..], b"a"].concat());
        assert_eq!(r[1].2, [&1u32.to_be_bytes()[..], b"b"].concat());
        assert_eq!(r[2].1, REP_ACK);
        c.receive(&opt(OPT_LIST, b"x"));
        assert_eq!(replies(&c.take_output())[0].1, REP_ERR_INVALID);
        // Unknown options (and ones we do not implement) are skipped and refused.
        for o in [42u32, OPT_STARTTLS, 11] {
            c.receive(&opt(o, b"hello"));
            let r = replies(&c.take_output());
            assert_eq!((r[0].0, r[0].1), (o, REP_ERR_UNSUP));
        }
        c.receive(&opt(OPT_ABORT, &[]));
        assert_eq!(
            replies(&c.take_output()),
            vec![(OPT_ABORT, REP_ACK, vec![])]
        );
        assert_eq!(events(&mut c), vec![Event::Disconnect]);
        assert!(c.is_closed());
        // Nothing is read after the end.
        c.receive(&opt(OPT_LIST, &[]));
        assert!(c.take_output().is_empty());
    }

    /// A connection past the client flags on a server with TLS policy `tls`.
    fn negotiating_tls(tls: TlsPolicy) -> ServerConn {
        let mut cfg = config();
        cfg.tls = tls;
        let mut c = ServerConn::new(cfg);
        c.take_output();
        c.receive(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes());
        c
    }

    #[test]
    fn starttls_required_refuses_everything_else_until_tls() {
        let mut c = negotiating_tls(TlsPolicy::Required);
        for (o, d) in [
            (OPT_LIST, vec![]),
            (OPT_STRUCTURED_REPLY, vec![]),
            (OPT_INFO, go_data("a", &[])),
            (OPT_GO, go_data("a", &[])),
            (42, b"x".to_vec()),
        ] {
            c.receive(&opt(o, &d));
            let r = replies(&c.take_output());
            assert_eq!(r.len(), 1, "option {o}");
            assert_eq!((r[0].0, r[0].1), (o, REP_ERR_TLS_REQD), "option {o}");
        }
        assert!(events(&mut c).is_empty());
        // STARTTLS with data is invalid; without, acknowledged, and the transport is told.
        c.receive(&opt(OPT_STARTTLS, b"x"));
        assert_eq!(replies(&c.take_output())[0].1, REP_ERR_INVALID);
        c.receive(&opt(OPT_STARTTLS, &[]));
        assert_eq!(
            replies(&c.take_output()),
            vec![(OPT_STARTTLS, REP_ACK, vec![])]
        );
        assert_eq!(events(&mut c), vec![Event::StartTls]);
        assert!(!c.tls_active());
        c.tls_started();
        assert!(c.tls_active());
        // Inside TLS: a second STARTTLS is invalid, everything else works.
        c.receive(&opt(OPT_STARTTLS, &[]));
        assert_eq!(replies(&c.take_output())[0].1, REP_ERR_INVALID);
        c.receive(&opt(OPT_GO, &go_data("b", &[])));
        assert_eq!(replies(&c.take_output()).last().unwrap().1, REP_ACK);
        assert_eq!(events(&mut c), vec![Event::Selected { export: 1 }]);
    }

    #[test]
    fn starttls_required_export_name_and_abort() {
        // EXPORT_NAME cannot be refused with a reply: the session ends.
        let mut c = negotiating_tls(TlsPolicy::Required);
        c.receive(&opt(OPT_EXPORT_NAME, b"a"));
        assert!(c.take_output().is_empty());
        assert_eq!(
            events(&mut c),
            vec![Event::Fatal(ProtocolError::ExportNameWithoutTls)]
        );
        // ABORT is allowed before TLS.
        let mut c = negotiating_tls(TlsPolicy::Required);
        c.receive(&opt(OPT_ABORT, &[]));
        assert_eq!(replies(&c.take_output())[0].1, REP_ACK);
        assert_eq!(events(&mut c), vec![Event::Disconnect]);
    }

    #[test]
    fn starttls_optional_serves_plain_and_forgets_plain_negotiation() {
        // A plain client is served.
        let mut c = negotiating_tls(TlsPolicy::Optional);
        c.receive(&opt(OPT_GO, &go_data("a", &[])));
        assert_eq!(replies(&c.take_output()).last().unwrap().1, REP_ACK);
        assert_eq!(events(&mut c), vec![Event::Selected { export: 0 }]);
        // Structured replies negotiated before STARTTLS do not carry over into TLS.
        let mut c = negotiating_tls(TlsPolicy::Optional);
        c.receive(&opt(OPT_STRUCTURED_REPLY, &[]));
        assert!(c.encoder().structured);
        c.receive(&opt(OPT_STARTTLS, &[]));
        assert_eq!(events(&mut c), vec![Event::StartTls]);
        assert!(!c.encoder().structured);
    }

    #[test]
    fn bytes_after_starttls_before_its_reply_end_the_session() {
        let mut c = negotiating_tls(TlsPolicy::Required);
        let mut b = opt(OPT_STARTTLS, &[]);
        b.extend_from_slice(&[0x16, 0x03, 0x01]);
        c.receive(&b);
        assert_eq!(
            events(&mut c),
            vec![Event::Fatal(ProtocolError::DataAfterStartTls)]
        );
        assert!(c.is_closed());
    }

    #[test]
    fn fatal_handshake_violations() {
        let mut c = ServerConn::new(config());
        c.receive(&0x80u32.to_be_bytes());
        assert_eq!(
            events(&mut c),
            vec![Event::Fatal(ProtocolError::BadClientFlags(0x80))]
        );

        let mut c = negotiating(1);
        let mut o = opt(OPT_LIST, &[]);
        o[0] ^= 0xff;
        c.receive(&o);
        assert!(matches!(
            events(&mut c)[..],
            [Event::Fatal(ProtocolError::BadOptionMagic(_))]
        ));

        let mut c = negotiating(1);
        c.receive(&opt(OPT_EXPORT_NAME, b"nope"));
        assert_eq!(
            events(&mut c),
            vec![Event::Fatal(ProtocolError::UnknownExport("nope".into()))]
        );
        assert!(c.take_output().is_empty());

        // An absurd option length is not worth skipping.
        let mut c = negotiating(1);
        let mut h = Vec::new();
        put_u64(&mut h, IHAVEOPT);
        put_u32(&mut h, 99);
        put_u32(&mut h, u32::MAX);
        c.receive(&h);
        assert!(matches!(
            events(&mut c)[..],
            [Event::Fatal(ProtocolError::OptionTooLong { .. })]
        ));
    }

    #[test]
    fn long_option_is_skipped_and_refused() {
        let mut c = negotiating(1);
        let data = vec![7u8; MAX_OPTION_BYTES as usize + 10];
        let o = opt(OPT_INFO, &data);
        // In pieces, to exercise the streaming discard.
        for piece in o.chunks(1000) {
            c.receive(piece);
        }
        let r = replies(&c.take_output());
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].0, r[0].1), (OPT_INFO, REP_ERR_TOO_BIG));
        c.receive(&opt(OPT_GO, &go_data("a", &[])));
        assert_eq!(events(&mut c), vec![Event::Selected { export: 0 }]);
    }

    /// A large write payload read straight into its buffer (`payload_space`) gives the same
    /// request as one fed through `receive`, however the bytes are split between the two; the
    /// tail shorter than `DIRECT_PAYLOAD_BYTES` and buffered bytes go through `receive`.
    #[test]
    fn large_payloads_are_received_in_place_in_any_pieces() {
        let len = 3 * DIRECT_PAYLOAD_BYTES as u32 + 100;
        let payload: Vec<u8> = (0..len).map(|i| (i.wrapping_mul(7) + 3) as u8).collect();
        let mut stream = req(0, CMD_WRITE, 9, 4096, len);
        stream.extend_from_slice(&payload);
        stream.extend_from_slice(&req(0, CMD_FLUSH, 10, 0, 0));
        let want = vec![
            Event::Request(Request {
                handle: 9,
                flags: 0,
                command: Command::Write {
                    offset: 4096,
                    data: payload.clone(),
                },
            }),
            Event::Request(Request {
                handle: 10,
                flags: 0,
                command: Command::Flush,
            }),
        ];
        for (first, piece) in [(0usize, 1000usize), (1, 7), (28, 40_000), (5_028, 65_536)] {
            let mut c = transmitting("a", false);
            c.receive(&stream[..first]);
            let mut pos = first;
            let mut direct = 0;
            while pos < stream.len() {
                let n = piece.min(stream.len() - pos);
                match c.payload_space() {
                    Some(room) => {
                        assert!(room.len() >= DIRECT_PAYLOAD_BYTES);
                        let n = n.min(room.len());
                        room[..n].copy_from_slice(&stream[pos..pos + n]);
                        c.payload_received(n);
                        direct += n;
                        pos += n;
                    }
                    None => {
                        c.receive(&stream[pos..pos + n]);
                        pos += n;
                    }
                }
            }
            assert!(
                direct > 0,
                "first {first}, pieces of {piece}: some bytes went in place"
            );
            assert_eq!(events(&mut c), want, "first {first}, pieces of {piece}");
            assert!(c.payload_space().is_none());
        }
    }

    /// `header_bytes_missing` counts down a request header fed a byte at a time, and says
    /// nothing once the header started a payload.
    #[test]
    fn header_bytes_missing_counts_down_a_header() {
        let mut c = transmitting("a", false);
        let len = DIRECT_PAYLOAD_BYTES as u32;
        let h = req(0, CMD_WRITE, 1, 0, len);
        for (i, b) in h.iter().enumerate() {
            assert_eq!(c.header_bytes_missing(), Some(REQUEST_HEADER_BYTES - i));
            c.receive(std::slice::from_ref(b));
        }
        assert_eq!(c.header_bytes_missing(), None);
        assert!(c.payload_space().is_some());
        c.receive(&vec![5u8; len as usize]);
        assert_eq!(c.header_bytes_missing(), Some(REQUEST_HEADER_BYTES));
        assert!(matches!(
            events(&mut c).as_slice(),
            [Event::Request(Request { handle: 1, .. })]
        ));
    }

    /// Payload buffers given back are reused (same allocation, no zeroing needed since every
    /// byte is overwritten), small ones are not kept, and the bytes kept are bounded.
    #[test]
    fn payload_buffers_are_reused_and_bounded() {
        let b = PayloadBuffers::default();
        let big = vec![1u8; 2 * DIRECT_PAYLOAD_BYTES];
        let at = big.as_ptr();
        b.give(big);
        let again = b.take(2 * DIRECT_PAYLOAD_BYTES - 10);
        assert_eq!(again.as_ptr(), at, "the kept buffer");
        assert_eq!(again.len(), 2 * DIRECT_PAYLOAD_BYTES - 10);
        let fresh = b.take(DIRECT_PAYLOAD_BYTES);
        assert!(
            fresh.iter().all(|&x| x == 0),
            "nothing kept: a new zeroed buffer"
        );
        b.give(vec![0u8; 100]);
        assert!(b.0.lock().unwrap().is_empty(), "small buffers are not kept");
        for _ in 0..100 {
            b.give(vec![0u8; 1 << 20]);
        }
        let kept: usize = b.0.lock().unwrap().iter().map(|v| v.capacity()).sum();
        assert!(kept <= PayloadBuffers::KEEP_BYTES && kept > 0, "{kept}");
        // A larger payload than any kept buffer gets a new one.
        let large = b.take(2 << 20);
        assert_eq!(large.len(), 2 << 20);
    }

    #[test]
    fn requests_are_validated_and_parsed_in_any_pieces() {
        let mut c = transmitting("a", false);
        let mut stream = req(0, CMD_READ, 1, 4096, 512);
        let mut w = req(CMD_FLAG_FUA, CMD_WRITE, 2, 10, 5);
        w.extend_from_slice(b"hello");
        stream.extend_from_slice(&w);
        stream.extend_from_slice(&req(0, CMD_FLUSH, 3, 0, 0));
        stream.extend_from_slice(&req(0, CMD_TRIM, 4, 0, 4096));
        stream.extend_from_slice(&req(CMD_FLAG_NO_HOLE, CMD_WRITE_ZEROES, 5, 8192, 100));
        stream.extend_from_slice(&req(0, CMD_DISC, 6, 0, 0));
        let want = vec![
            Event::Request(Request {
                handle: 1,
                flags: 0,
                command: Command::Read {
                    offset: 4096,
                    len: 512,
                },
            }),
            Event::Request(Request {
                handle: 2,
                flags: CMD_FLAG_FUA,
                command: Command::Write {
                    offset: 10,
                    data: b"hello".to_vec(),
                },
            }),
            Event::Request(Request {
                handle: 3,
                flags: 0,
                command: Command::Flush,
            }),
            Event::Request(Request {
                handle: 4,
                flags: 0,
                command: Command::Trim {
                    offset: 0,
                    len: 4096,
                },
            }),
            Event::Request(Request {
                handle: 5,
                flags: CMD_FLAG_NO_HOLE,
                command: Command::WriteZeroes {
                    offset: 8192,
                    len: 100,
                },
            }),
            Event::Disconnect,
        ];
        for piece in [1usize, 3, 7, 28, 1000] {
            let mut c2 = transmitting("a", false);
            for p in stream.chunks(piece) {
                c2.receive(p);
            }
            assert_eq!(events(&mut c2), want, "pieces of {piece}");
            assert!(c2.take_output().is_empty());
        }
        c.receive(&stream);
        assert_eq!(events(&mut c)[1..2], want[1..2]);
        assert!(Request {
            handle: 0,
            flags: CMD_FLAG_FUA,
            command: Command::Flush
        }
        .fua());
    }

    #[test]
    fn invalid_requests_get_the_prescribed_errors_and_the_stream_continues() {
        let mut c = transmitting("a", false);
        let size = 1u64 << 20;
        let cases: Vec<(Vec<u8>, u32)> = vec![
            (req(0, 77, 10, 0, 0), EINVAL),                   // unknown command
            (req(0, CMD_BLOCK_STATUS, 11, 0, 512), EINVAL),   // not negotiated
            (req(1 << 9, CMD_READ, 12, 0, 512), EINVAL),      // unknown flag
            (req(CMD_FLAG_DF, CMD_READ, 13, 0, 512), EINVAL), // DF without structured
            (req(CMD_FLAG_NO_HOLE, CMD_TRIM, 14, 0, 512), EINVAL), // flag of another command
            (req(0, CMD_READ, 15, size - 10, 11), EINVAL),    // read past the end
            (req(0, CMD_READ, 16, u64::MAX - 1, 4), EINVAL),  // offset overflow
            (req(0, CMD_TRIM, 17, size, 1), EINVAL),          // trim past the end
            (req(0, CMD_WRITE_ZEROES, 18, size, 1), ENOSPC),  // zeroes past the end
            (req(0, CMD_READ, 19, 0, DEFAULT_MAX_PAYLOAD + 1), EOVERFLOW), // oversized read
        ];
        for (bytes, err) in &cases {
            c.receive(bytes);
            let (e, h) = simple(&c.take_output());
            assert_eq!(e, *err, "handle {h}");
            assert!(events(&mut c).is_empty());
        }
        // A write past the end: its payload is consumed, then ENOSPC.
        let mut w = req(0, CMD_WRITE, 20, size - 2, 4);
        w.extend_from_slice(b"abcd");
        c.receive(&w);
        assert_eq!(simple(&c.take_output()), (ENOSPC, 20));
        // An oversized write: skipped in pieces, then EOVERFLOW.
        let len = DEFAULT_MAX_PAYLOAD + 4096;
        c.receive(&req(0, CMD_WRITE, 21, 0, len));
        let chunk = vec![0u8; 1 << 20];
        let mut left = len as usize;
        while left > 0 {
            let n = left.min(chunk.len());
            c.receive(&chunk[..n]);
            left -= n;
        }
        assert_eq!(simple(&c.take_output()), (EOVERFLOW, 21));
        // The stream is still in sync.
        c.receive(&req(0, CMD_READ, 22, 0, 16));
        assert_eq!(
            events(&mut c),
            vec![Event::Request(Request {
                handle: 22,
                flags: 0,
                command: Command::Read { offset: 0, len: 16 }
            })]
        );
    }

    #[test]
    fn read_only_export_refuses_writes() {
        let mut c = transmitting("b", false);
        let mut w = req(0, CMD_WRITE, 1, 0, 2);
        w.extend_from_slice(b"xy");
        c.receive(&w);
        assert_eq!(simple(&c.take_output()), (EPERM, 1));
        c.receive(&req(0, CMD_TRIM, 2, 0, 2));
        assert_eq!(simple(&c.take_output()), (EPERM, 2));
        // Its smaller maximum payload applies.
        c.receive(&req(0, CMD_READ, 3, 0, 4096));
        assert!(c.take_output().is_empty());
        assert_eq!(events(&mut c).len(), 1);
    }

    #[test]
    fn structured_errors_carry_a_message() {
        let mut c = transmitting("a", true);
        c.receive(&req(0, CMD_READ, 9, 1 << 20, 1));
        let out = c.take_output();
        assert_eq!(get_u32(&out, 0), STRUCTURED_REPLY_MAGIC);
        assert_eq!(get_u16(&out, 4), REPLY_FLAG_DONE);
        assert_eq!(get_u16(&out, 6), REPLY_TYPE_ERROR);
        assert_eq!(get_u64(&out, 8), 9);
        let len = get_u32(&out, 16) as usize;
        assert_eq!(out.len(), 20 + len);
        assert_eq!(get_u32(&out, 20), EINVAL);
        let mlen = get_u16(&out, 24) as usize;
        assert_eq!(6 + mlen, len);
        let msg = std::str::from_utf8(&out[26..]).unwrap();
        assert!(msg.contains("beyond the end"), "{msg}");
        // DF is allowed once structured replies are on.
        c.receive(&req(CMD_FLAG_DF, CMD_READ, 10, 0, 1));
        assert_eq!(events(&mut c).len(), 1);
        // Encodings of successful reads.
        let enc = c.encoder();
        let h = enc.read_ok_header(10, 512, 100);
        assert_eq!(
            (get_u16(&h, 6), get_u32(&h, 16), get_u64(&h, 20)),
            (REPLY_TYPE_OFFSET_DATA, 108, 512)
        );
        let h0 = enc.read_ok_header(11, 0, 0);
        assert_eq!((get_u16(&h0, 6), get_u32(&h0, 16)), (REPLY_TYPE_NONE, 0));
    }

    #[test]
    fn fatal_transmission_violations_and_truncation() {
        let mut c = transmitting("a", false);
        let mut r = req(0, CMD_READ, 1, 0, 1);
        r[0] = 0;
        c.receive(&r);
        assert!(matches!(
            events(&mut c)[..],
            [Event::Fatal(ProtocolError::BadRequestMagic(_))]
        ));
        assert!(c.is_closed());

        let mut c = transmitting("a", false);
        c.receive(&req(0, CMD_WRITE, 1, 0, u32::MAX));
        assert!(matches!(
            events(&mut c)[..],
            [Event::Fatal(ProtocolError::PayloadTooLong { .. })]
        ));

        // EOF in the middle of a header, of a payload, between messages.
        let mut c = transmitting("a", false);
        c.receive(&req(0, CMD_READ, 1, 0, 1)[..10]);
        c.receive_eof();
        assert_eq!(
            events(&mut c),
            vec![Event::Fatal(ProtocolError::Truncated("request header"))]
        );
        let mut c = transmitting("a", false);
        c.receive(&req(0, CMD_WRITE, 1, 0, 100));
        c.receive(&[1, 2, 3]);
        c.receive_eof();
        assert_eq!(
            events(&mut c),
            vec![Event::Fatal(ProtocolError::Truncated("write payload"))]
        );
        let mut c = transmitting("a", false);
        c.receive_eof();
        assert_eq!(events(&mut c), vec![Event::Disconnect]);
        let mut c = negotiating(1);
        c.receive(&opt(OPT_GO, b"abc")[..18]);
        c.receive_eof();
        assert_eq!(
            events(&mut c),
            vec![Event::Fatal(ProtocolError::Truncated("option data"))]
        );
    }

    #[test]
    fn shutdown_refuses_new_work() {
        let mut c = negotiating(1);
        c.begin_shutdown();
        c.receive(&opt(OPT_LIST, &[]));
        assert_eq!(replies(&c.take_output())[0].1, REP_ERR_SHUTDOWN);
        let mut c = transmitting("a", false);
        c.begin_shutdown();
        c.receive(&req(0, CMD_READ, 5, 0, 1));
        assert_eq!(simple(&c.take_output()), (ESHUTDOWN, 5));
    }

    /// LIST/SET_META_CONTEXT data: export name, then the queries.
    fn meta_data(export: &str, queries: &[&str]) -> Vec<u8> {
        let mut d = Vec::new();
        put_u32(&mut d, export.len() as u32);
        d.extend_from_slice(export.as_bytes());
        put_u32(&mut d, queries.len() as u32);
        for q in queries {
            put_u32(&mut d, q.len() as u32);
            d.extend_from_slice(q.as_bytes());
        }
        d
    }

    /// The data of a `NBD_REP_META_CONTEXT` reply for `base:allocation` with `id`.
    fn allocation_context(id: u32) -> Vec<u8> {
        [&id.to_be_bytes()[..], META_BASE_ALLOCATION.as_bytes()].concat()
    }

    /// The replies to one option: (type, data), all naming `option`.
    fn answer(c: &mut ServerConn, option: u32, data: &[u8]) -> Vec<(u32, Vec<u8>)> {
        c.receive(&opt(option, data));
        replies(&c.take_output())
            .into_iter()
            .map(|(o, t, d)| {
                assert_eq!(o, option);
                (t, d)
            })
            .collect()
    }

    /// Goes to transmission on `name` (GO) and says whether block status was negotiated
    /// (a block status request is executed rather than refused).
    fn go_and_probe(mut c: ServerConn, name: &str) -> bool {
        c.receive(&opt(OPT_GO, &go_data(name, &[])));
        assert_eq!(replies(&c.take_output()).last().unwrap().1, REP_ACK);
        assert!(matches!(events(&mut c)[..], [Event::Selected { .. }]));
        c.receive(&req(0, CMD_BLOCK_STATUS, 77, 0, 1));
        let out = c.take_output();
        let ev = events(&mut c);
        let executed = matches!(
            ev[..],
            [Event::Request(Request {
                handle: 77,
                command: Command::BlockStatus { offset: 0, len: 1 },
                ..
            })]
        );
        assert_eq!(executed, out.is_empty(), "{ev:?} {out:?}");
        assert_eq!(executed, c.block_status());
        if !executed {
            // Refused with EINVAL, as a structured error when structured replies are on.
            assert_eq!(get_u32(&out, 0), STRUCTURED_REPLY_MAGIC);
            assert_eq!(get_u16(&out, 6), REPLY_TYPE_ERROR);
            assert_eq!(get_u32(&out, 20), EINVAL);
            let msg = String::from_utf8_lossy(&out[26..]).into_owned();
            assert!(msg.contains("not negotiated"), "{msg}");
        }
        executed
    }

    #[test]
    fn meta_contexts_need_structured_replies() {
        let mut c = negotiating(FLAG_C_FIXED_NEWSTYLE);
        for o in [OPT_LIST_META_CONTEXT, OPT_SET_META_CONTEXT] {
            let r = answer(&mut c, o, &meta_data("a", &[META_BASE_ALLOCATION]));
            assert_eq!(r.len(), 1);
            assert_eq!(r[0].0, REP_ERR_INVALID);
            assert!(String::from_utf8_lossy(&r[0].1).contains("STRUCTURED_REPLY"));
        }
        // Nothing was selected: even with structured replies negotiated afterwards, block
        // status is refused.
        c.receive(&opt(OPT_STRUCTURED_REPLY, &[]));
        c.take_output();
        assert!(!go_and_probe(c, "a"));
    }

    #[test]
    fn list_meta_context_answers_queries() {
        let mut c = negotiating(FLAG_C_FIXED_NEWSTYLE);
        c.receive(&opt(OPT_STRUCTURED_REPLY, &[]));
        c.take_output();
        let listed = vec![(REP_META_CONTEXT, allocation_context(0)), (REP_ACK, vec![])];
        let nothing = vec![(REP_ACK, vec![])];
        for (export, queries, want) in [
            // No query: every context there is.
            ("a", vec![], &listed),
            ("", vec![], &listed),
            ("b", vec![], &listed),
            // The namespace's wildcard, and the context by name (once even if asked twice).
            ("a", vec!["base:"], &listed),
            ("a", vec![META_BASE_ALLOCATION], &listed),
            (
                "a",
                vec![META_BASE_ALLOCATION, "base:", "x-other:thing"],
                &listed,
            ),
            // Unknown leaf names and namespaces are ignored, not errors.
            ("a", vec!["base:allocationx"], &nothing),
            ("a", vec!["qemu:dirty-bitmap:foo", "x-foo:"], &nothing),
            ("a", vec!["BASE:allocation"], &nothing),
        ] {
            let r = answer(&mut c, OPT_LIST_META_CONTEXT, &meta_data(export, &queries));
            assert_eq!(&r, want, "{export:?} {queries:?}");
        }
        // An unknown export, a query without a namespace.
        let r = answer(&mut c, OPT_LIST_META_CONTEXT, &meta_data("zz", &[]));
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].0, REP_ERR_UNKNOWN);
        let r = answer(
            &mut c,
            OPT_LIST_META_CONTEXT,
            &meta_data("a", &[META_BASE_ALLOCATION, "allocation"]),
        );
        assert_eq!(r.len(), 1, "nothing listed before the error");
        assert_eq!(r[0].0, REP_ERR_INVALID);
        assert!(events(&mut c).is_empty());
        assert!(!c.is_closed());
    }

    #[test]
    fn malformed_meta_context_requests_are_invalid() {
        let good = meta_data("a", &[META_BASE_ALLOCATION]);
        let mut cut = good.clone();
        cut.pop();
        let mut trailing = good.clone();
        trailing.push(0);
        let mut name_past_end = good.clone();
        name_past_end[3] = 200;
        let mut too_many = meta_data("a", &[]);
        let n = too_many.len();
        too_many[n - 4..].copy_from_slice(&1000u32.to_be_bytes());
        let mut not_utf8 = meta_data("a", &["base:\u{e9}"]);
        let n = not_utf8.len();
        not_utf8[n - 2] = 0xff;
        let long_query = "x-long:".to_string() + &"y".repeat(MAX_STRING_BYTES);
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("empty", vec![]),
            ("name length only", vec![0, 0, 0, 0]),
            ("cut short", cut),
            ("trailing byte", trailing),
            ("name past the end", name_past_end),
            ("more queries than fit", too_many),
            ("query not UTF-8", not_utf8),
            ("query too long", meta_data("a", &[&long_query])),
        ];
        for o in [OPT_LIST_META_CONTEXT, OPT_SET_META_CONTEXT] {
            let mut c = negotiating(FLAG_C_FIXED_NEWSTYLE);
            c.receive(&opt(OPT_STRUCTURED_REPLY, &[]));
            c.take_output();
            for (what, data) in &cases {
                let r = answer(&mut c, o, data);
                assert_eq!(r.len(), 1, "{what}");
                assert_eq!(r[0].0, REP_ERR_INVALID, "{what}");
            }
            // The negotiation goes on.
            assert_eq!(answer(&mut c, o, &good).last().unwrap().0, REP_ACK);
        }
    }

    #[test]
    fn set_meta_context_selects_for_one_export_and_a_later_set_replaces_it() {
        let structured = || {
            let mut c = negotiating(FLAG_C_FIXED_NEWSTYLE);
            c.receive(&opt(OPT_STRUCTURED_REPLY, &[]));
            c.take_output();
            c
        };
        let set = |c: &mut ServerConn, export: &str, queries: &[&str]| {
            answer(c, OPT_SET_META_CONTEXT, &meta_data(export, queries))
        };
        let selected = vec![
            (
                REP_META_CONTEXT,
                allocation_context(META_BASE_ALLOCATION_ID),
            ),
            (REP_ACK, vec![]),
        ];
        let nothing = vec![(REP_ACK, vec![])];

        // Selected, then GO on that export: block status is accepted.
        let mut c = structured();
        assert_eq!(set(&mut c, "a", &[META_BASE_ALLOCATION]), selected);
        assert!(go_and_probe(c, "a"));
        // The default export's empty name and its own name are the same export.
        let mut c = structured();
        assert_eq!(
            set(&mut c, "", &["x-foo:bar", META_BASE_ALLOCATION]),
            selected
        );
        assert!(go_and_probe(c, "a"));
        // A read-only export has block status too.
        let mut c = structured();
        assert_eq!(set(&mut c, "b", &[META_BASE_ALLOCATION]), selected);
        assert!(go_and_probe(c, "b"));
        // Selected for another export than the one chosen: not negotiated.
        let mut c = structured();
        set(&mut c, "a", &[META_BASE_ALLOCATION]);
        assert!(!go_and_probe(c, "b"));
        // No query selects nothing; nor does the namespace wildcard (ignored in SET), nor an
        // unknown context.
        for q in [&[][..], &["base:"][..], &["base:nope", "x-foo:bar"][..]] {
            let mut c = structured();
            assert_eq!(set(&mut c, "a", q), nothing, "{q:?}");
            assert!(!go_and_probe(c, "a"), "{q:?}");
        }
        // A later SET replaces the selection: with nothing, with an error (unknown export,
        // malformed data, a query without a namespace), or for another export.
        for (export, queries, err) in [
            ("a", vec!["x-foo:bar"], None),
            ("a", vec![], None),
            ("zz", vec![META_BASE_ALLOCATION], Some(REP_ERR_UNKNOWN)),
            ("a", vec!["nonamespace"], Some(REP_ERR_INVALID)),
        ] {
            let mut c = structured();
            assert_eq!(set(&mut c, "a", &[META_BASE_ALLOCATION]), selected);
            let r = set(&mut c, export, &queries);
            match err {
                Some(e) => assert_eq!(r, vec![(e, r[0].1.clone())]),
                None => assert_eq!(r, nothing),
            }
            assert!(!go_and_probe(c, "a"), "{export} {queries:?}");
        }
        let mut c = structured();
        set(&mut c, "a", &[META_BASE_ALLOCATION]);
        assert_eq!(
            answer(&mut c, OPT_SET_META_CONTEXT, &[0, 0])[0].0,
            REP_ERR_INVALID
        );
        assert!(!go_and_probe(c, "a"));
        let mut c = structured();
        set(&mut c, "b", &[META_BASE_ALLOCATION]);
        assert_eq!(set(&mut c, "a", &[META_BASE_ALLOCATION]), selected);
        assert!(go_and_probe(c, "a"));
        // A SET without structured replies fails and clears the selection too (structured
        // replies cannot be turned off, but STARTTLS forgets both: below).
        // A LIST does not change the selection.
        let mut c = structured();
        set(&mut c, "a", &[META_BASE_ALLOCATION]);
        answer(&mut c, OPT_LIST_META_CONTEXT, &meta_data("b", &[]));
        answer(&mut c, OPT_LIST_META_CONTEXT, &meta_data("zz", &[]));
        assert!(go_and_probe(c, "a"));
        // EXPORT_NAME enters transmission with the selection too.
        let mut c = structured();
        set(&mut c, "a", &[META_BASE_ALLOCATION]);
        c.receive(&opt(OPT_EXPORT_NAME, b"a"));
        c.take_output();
        assert_eq!(events(&mut c), vec![Event::Selected { export: 0 }]);
        assert!(c.block_status());
        c.receive(&req(CMD_FLAG_REQ_ONE, CMD_BLOCK_STATUS, 5, 4096, 100));
        assert_eq!(
            events(&mut c),
            vec![Event::Request(Request {
                handle: 5,
                flags: CMD_FLAG_REQ_ONE,
                command: Command::BlockStatus {
                    offset: 4096,
                    len: 100
                }
            })]
        );
    }

    #[test]
    fn starttls_forgets_the_selected_meta_context() {
        let mut c = negotiating_tls(TlsPolicy::Optional);
        c.receive(&opt(OPT_STRUCTURED_REPLY, &[]));
        c.receive(&opt(
            OPT_SET_META_CONTEXT,
            &meta_data("a", &[META_BASE_ALLOCATION]),
        ));
        let r = replies(&c.take_output());
        assert_eq!(r[1].1, REP_META_CONTEXT);
        c.receive(&opt(OPT_STARTTLS, &[]));
        c.take_output();
        assert_eq!(events(&mut c), vec![Event::StartTls]);
        c.tls_started();
        // Structured replies again, but no SET inside TLS: block status is not negotiated.
        c.receive(&opt(OPT_STRUCTURED_REPLY, &[]));
        c.take_output();
        assert!(!go_and_probe(c, "a"));
    }

    #[test]
    fn block_status_requests_are_validated() {
        // An export larger than its maximum payload: block status is not bound by it.
        let mut big = ExportInfo::new("big", 1 << 30);
        big.block.maximum = 4096;
        let mut ro = ExportInfo::new("ro", 1 << 20);
        ro.read_only = true;
        for (name, size) in [("big", 1u64 << 30), ("ro", 1 << 20)] {
            let mut c = ServerConn::new(ServerConfig::new(vec![big.clone(), ro.clone()]));
            c.take_output();
            c.receive(&FLAG_C_FIXED_NEWSTYLE.to_be_bytes());
            c.receive(&opt(OPT_STRUCTURED_REPLY, &[]));
            c.receive(&opt(
                OPT_SET_META_CONTEXT,
                &meta_data(name, &[META_BASE_ALLOCATION]),
            ));
            c.receive(&opt(OPT_GO, &go_data(name, &[])));
            c.take_output();
            assert!(matches!(events(&mut c)[..], [Event::Selected { .. }]));
            assert!(c.block_status());
            // Accepted: the whole export, one byte at the end, any length up to 4 GiB - 1,
            // with REQ_ONE, with FUA (ignored; valid on every command).
            for (flags, offset, len) in [
                (0, 0, u32::try_from(size.min(u32::MAX as u64)).unwrap()),
                (0, size - 1, 1),
                (CMD_FLAG_REQ_ONE, 512, 70_000),
                (CMD_FLAG_FUA | CMD_FLAG_REQ_ONE, 0, 1),
            ] {
                c.receive(&req(flags, CMD_BLOCK_STATUS, 1, offset, len));
                assert!(c.take_output().is_empty());
                assert_eq!(
                    events(&mut c),
                    vec![Event::Request(Request {
                        handle: 1,
                        flags,
                        command: Command::BlockStatus { offset, len }
                    })],
                    "{name} {flags} {offset} {len}"
                );
            }
            // Refused with EINVAL: past the end, overflowing, empty, and flags of other
            // commands.
            for (h, flags, offset, len) in [
                (2, 0, size, 1),
                (3, 0, size - 10, 11),
                (4, 0, u64::MAX - 1, 4),
                (5, 0, 0, 0),
                (6, CMD_FLAG_DF, 0, 512),
                (7, CMD_FLAG_NO_HOLE, 0, 512),
                (8, 1 << 4, 0, 512),
            ] {
                c.receive(&req(flags, CMD_BLOCK_STATUS, h, offset, len));
                let out = c.take_output();
                assert_eq!(get_u32(&out, 0), STRUCTURED_REPLY_MAGIC);
                assert_eq!((get_u64(&out, 8), get_u32(&out, 20)), (h, EINVAL));
                assert!(events(&mut c).is_empty());
            }
            // REQ_ONE belongs to block status only.
            c.receive(&req(CMD_FLAG_REQ_ONE, CMD_READ, 9, 0, 1));
            let out = c.take_output();
            assert_eq!((get_u64(&out, 8), get_u32(&out, 20)), (9, EINVAL));
        }
    }

    #[test]
    fn block_status_reply_encoding() {
        let enc = ReplyEncoder { structured: true };
        let b = enc.block_status(42, 7, &[(4096, STATE_HOLE | STATE_ZERO), (512, 0)]);
        assert_eq!(get_u32(&b, 0), STRUCTURED_REPLY_MAGIC);
        assert_eq!(get_u16(&b, 4), REPLY_FLAG_DONE);
        assert_eq!(get_u16(&b, 6), REPLY_TYPE_BLOCK_STATUS);
        assert_eq!(get_u64(&b, 8), 42);
        assert_eq!(get_u32(&b, 16), 4 + 16);
        assert_eq!(b.len(), 20 + 4 + 16);
        assert_eq!(get_u32(&b, 20), 7);
        assert_eq!((get_u32(&b, 24), get_u32(&b, 28)), (4096, 3));
        assert_eq!((get_u32(&b, 32), get_u32(&b, 36)), (512, 0));
    }

    #[test]
    fn block_status_descriptors_follow_the_rules() {
        const HZ: u32 = STATE_HOLE | STATE_ZERO;
        let d = |offset: u64, len: u32, one: bool, min: u32, ext: &[(u64, u32)]| {
            block_status_descriptors(offset, len, one, min, ext.iter().copied())
        };
        // Cut at the requested length; zero-length runs skipped; equal neighbours merged;
        // unknown flag bits dropped.
        assert_eq!(
            d(
                0,
                10_000,
                false,
                1,
                &[(4096, HZ), (0, 0), (4096, HZ | 0x80), (4096, 0), (9, HZ)]
            ),
            vec![(8192, HZ), (1808, 0)]
        );
        // REQ_ONE: the first run only, never longer than asked.
        assert_eq!(
            d(0, 100, true, 1, &[(4096, HZ), (4096, 0)]),
            vec![(100, HZ)]
        );
        assert_eq!(
            d(0, 8192, true, 1, &[(4096, HZ), (4096, 0)]),
            vec![(4096, HZ)]
        );
        // Nothing from the backend: the whole range as data.
        assert_eq!(d(512, 1000, false, 1, &[]), vec![(1000, 0)]);
        assert_eq!(d(512, 1000, true, 1, &[(0, HZ)]), vec![(1000, 0)]);
        // Short answers stay short.
        assert_eq!(d(0, 8192, false, 1, &[(1000, HZ)]), vec![(1000, HZ)]);
        // A minimum block size of 512: the bytes around a boundary at 1000, [512, 1024),
        // keep only the flags both sides have.
        assert_eq!(
            d(0, 4096, false, 512, &[(1000, HZ), (3096, 0)]),
            vec![(512, HZ), (3584, 0)]
        );
        // [0, 1000) HZ, [1000, 1100) ZERO, [1100, 4096) HZ: [512, 1024) and [1024, 1536)
        // hold bytes of a ZERO run and of an HZ one.
        assert_eq!(
            d(
                0,
                4096,
                false,
                512,
                &[(1000, HZ), (100, STATE_ZERO), (2996, HZ)]
            ),
            vec![(512, HZ), (1024, STATE_ZERO), (2560, HZ)]
        );
        // Runs smaller than the minimum are swallowed whole.
        assert_eq!(
            d(
                0,
                2048,
                false,
                1024,
                &[(1024, HZ), (10, 0), (10, HZ), (1004, HZ)]
            ),
            vec![(1024, HZ), (1024, 0)]
        );
        // The backend stopped at an unaligned byte: the answer stops at the multiple before
        // it, or goes on to the next as unknown when the run is shorter than the minimum.
        assert_eq!(
            d(0, 4096, false, 512, &[(1024, HZ), (100, HZ)]),
            vec![(1024, HZ)]
        );
        assert_eq!(d(0, 4096, false, 512, &[(100, HZ)]), vec![(512, 0)]);
        assert_eq!(
            d(0, 4096, false, 512, &[(512, 0), (100, HZ)]),
            vec![(1024, 0)]
        );
        // Every descriptor is a multiple of the minimum (the request is aligned), lengths
        // are nonzero and sum to at most the request.
        let mut seed = 0x1234_5678_9abc_def1u64;
        let mut rnd = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..2000 {
            let min = 1u32 << rnd(13);
            let offset = rnd(64) * u64::from(min);
            let len = ((rnd(40) + 1) * u64::from(min)) as u32;
            let one = rnd(2) == 0;
            let ext: Vec<(u64, u32)> = (0..rnd(12))
                .map(|_| (rnd(3 * u64::from(min) + 2), rnd(8) as u32))
                .collect();
            let out = d(offset, len, one, min, &ext);
            assert!(!out.is_empty());
            assert!(!one || out.len() == 1);
            assert!(out
                .iter()
                .all(|x| x.0 > 0 && x.0 % min == 0 && x.1 & !HZ == 0));
            assert!(out.iter().map(|x| u64::from(x.0)).sum::<u64>() <= u64::from(len));
            assert!(out.windows(2).all(|w| w[0].1 != w[1].1));
            // No byte gains a flag the backend did not give it (bytes it said nothing of have
            // none).
            let mut runs: Vec<(u64, u64, u32)> = Vec::new();
            let mut pos = 0u64;
            for &(n, f) in &ext {
                runs.push((pos, pos + n, f));
                pos += n;
            }
            runs.push((pos, u64::MAX, 0));
            let mut at = 0u64;
            for &(l, f) in &out {
                let end = at + u64::from(l);
                for &(rs, re, g) in &runs {
                    if rs < re && rs < end && at < re {
                        assert_eq!(f & !g, 0, "{at}..{end}: {out:?} from {ext:?}");
                    }
                }
                at = end;
            }
        }
    }

    #[test]
    fn garbage_never_panics() {
        // Seeded xorshift; random bytes injected at every stage of a valid conversation.
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut prefix = Vec::new();
        prefix.extend_from_slice(&1u32.to_be_bytes());
        prefix.extend_from_slice(&opt(OPT_STRUCTURED_REPLY, &[]));
        prefix.extend_from_slice(&opt(OPT_GO, &go_data("a", &[3])));
        for round in 0..2000 {
            let mut c = ServerConn::new(config());
            let cut = (rnd() as usize) % (prefix.len() + 1);
            c.receive(&prefix[..cut]);
            let n = (rnd() % 300) as usize;
            let mut junk: Vec<u8> = (0..n).map(|_| rnd() as u8).collect();
            // Sometimes a valid-looking header with random fields.
            if round % 3 == 0 && cut == prefix.len() {
                let mut r = req(
                    rnd() as u16,
                    (rnd() % 9) as u16,
                    rnd(),
                    rnd() % (2 << 20),
                    (rnd() % 70_000) as u32,
                );
                r.extend_from_slice(&junk);
                junk = r;
            }
            for p in junk.chunks(1 + (rnd() % 17) as usize) {
                c.receive(p);
                let _ = c.take_output();
                while c.poll_event().is_some() {}
            }
            if rnd() % 2 == 0 {
                c.receive_eof();
            }
            while c.poll_event().is_some() {}
        }
    }
}
