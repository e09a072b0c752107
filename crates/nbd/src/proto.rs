//! Wire constants and message layouts of the NBD protocol (fixed newstyle negotiation, simple
//! and structured replies). Every number on the wire is big-endian.
//!
//! Layouts used here:
//!
//! - greeting (server): `NBDMAGIC` u64, `IHAVEOPT` u64, handshake flags u16;
//! - client flags: u32;
//! - option (client): `IHAVEOPT` u64, option u32, length u32, data;
//! - option reply (server): [`REP_MAGIC`] u64, option u32, reply type u32, length u32, data;
//! - `NBD_OPT_EXPORT_NAME` answer: size u64, transmission flags u16, 124 zero bytes unless
//!   both sides agreed on `NO_ZEROES`;
//! - `NBD_OPT_INFO` / `NBD_OPT_GO` data: name length u32, name, count u16, count info types u16;
//!   each `NBD_REP_INFO` reply starts with its info type u16 (`EXPORT`: size u64 + flags u16;
//!   `NAME`/`DESCRIPTION`: a string; `BLOCK_SIZE`: minimum, preferred, maximum payload u32);
//! - request (client): [`REQUEST_MAGIC`] u32, command flags u16, type u16, handle u64, offset
//!   u64, length u32, then `length` bytes for a write;
//! - simple reply: [`SIMPLE_REPLY_MAGIC`] u32, error u32, handle u64 (then data for a read);
//! - `NBD_OPT_LIST_META_CONTEXT` / `NBD_OPT_SET_META_CONTEXT` data: export name length u32,
//!   name, count u32, count queries (length u32, query string); each `NBD_REP_META_CONTEXT`
//!   reply is a context id u32 and the context's name;
//! - structured reply chunk: [`STRUCTURED_REPLY_MAGIC`] u32, flags u16, type u16, handle u64,
//!   length u32, payload (`OFFSET_DATA`: offset u64 + data; `ERROR`: error u32, message length
//!   u16, message; `BLOCK_STATUS`: context id u32, then descriptors of extent length u32 and
//!   status flags u32).

/// "NBDMAGIC", first word of the greeting.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// "IHAVEOPT": second word of the greeting and the magic of every client option.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Magic of option replies.
pub const REP_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Magic of transmission requests.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Magic of simple replies.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// Magic of structured reply chunks.
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

/// Handshake flag: the server speaks fixed newstyle.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Handshake flag: the server can omit the 124 zero bytes after `EXPORT_NAME`.
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flag: the client speaks fixed newstyle.
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
/// Client flag: omit the 124 zero bytes.
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

/// Transmission flags.
pub const TFLAG_HAS_FLAGS: u16 = 1 << 0;
pub const TFLAG_READ_ONLY: u16 = 1 << 1;
pub const TFLAG_SEND_FLUSH: u16 = 1 << 2;
pub const TFLAG_SEND_FUA: u16 = 1 << 3;
pub const TFLAG_ROTATIONAL: u16 = 1 << 4;
pub const TFLAG_SEND_TRIM: u16 = 1 << 5;
pub const TFLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const TFLAG_SEND_DF: u16 = 1 << 7;
pub const TFLAG_CAN_MULTI_CONN: u16 = 1 << 8;

/// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_STARTTLS: u32 = 5;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;
pub const OPT_LIST_META_CONTEXT: u32 = 9;
pub const OPT_SET_META_CONTEXT: u32 = 10;

/// Option reply types.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_META_CONTEXT: u32 = 4;
pub const REP_ERR: u32 = 1 << 31;
pub const REP_ERR_UNSUP: u32 = REP_ERR + 1;
pub const REP_ERR_POLICY: u32 = REP_ERR + 2;
pub const REP_ERR_INVALID: u32 = REP_ERR + 3;
pub const REP_ERR_PLATFORM: u32 = REP_ERR + 4;
pub const REP_ERR_TLS_REQD: u32 = REP_ERR + 5;
pub const REP_ERR_UNKNOWN: u32 = REP_ERR + 6;
pub const REP_ERR_SHUTDOWN: u32 = REP_ERR + 7;
pub const REP_ERR_BLOCK_SIZE_REQD: u32 = REP_ERR + 8;
pub const REP_ERR_TOO_BIG: u32 = REP_ERR + 9;

/// `NBD_REP_INFO` types.
pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

/// Commands.
pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_CACHE: u16 = 5;
pub const CMD_WRITE_ZEROES: u16 = 6;
pub const CMD_BLOCK_STATUS: u16 = 7;

/// Command flags.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
pub const CMD_FLAG_DF: u16 = 1 << 2;
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;

/// Structured reply flag: last chunk of the reply.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
/// Structured reply types.
pub const REPLY_TYPE_NONE: u16 = 0;
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
pub const REPLY_TYPE_ERROR: u16 = (1 << 15) + 1;

/// The one metadata context served: `base:allocation` (the protocol's own).
pub const META_BASE_ALLOCATION: &str = "base:allocation";
/// The id `NBD_OPT_SET_META_CONTEXT` gives `base:allocation` (any value but the 0 that
/// `NBD_OPT_LIST_META_CONTEXT` replies carry would do; clients treat it as opaque).
pub const META_BASE_ALLOCATION_ID: u32 = 1;
/// `base:allocation` status flag: the extent is not allocated in the backing store.
pub const STATE_HOLE: u32 = 1 << 0;
/// `base:allocation` status flag: the extent reads as zeros.
pub const STATE_ZERO: u32 = 1 << 1;
/// Error values of the transmission phase.
pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const ENOMEM: u32 = 12;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const EOVERFLOW: u32 = 75;
pub const ENOTSUP: u32 = 95;
pub const ESHUTDOWN: u32 = 108;

/// Length of a request header.
pub const REQUEST_HEADER_BYTES: usize = 28;
/// Length of an option header.
pub const OPTION_HEADER_BYTES: usize = 16;

/// The longest string (export name, message) the protocol allows.
pub const MAX_STRING_BYTES: usize = 4096;

/// Name of a command, for messages.
pub fn command_name(cmd: u16) -> &'static str {
    match cmd {
        CMD_READ => "READ",
        CMD_WRITE => "WRITE",
        CMD_DISC => "DISC",
        CMD_FLUSH => "FLUSH",
        CMD_TRIM => "TRIM",
        CMD_CACHE => "CACHE",
        CMD_WRITE_ZEROES => "WRITE_ZEROES",
        CMD_BLOCK_STATUS => "BLOCK_STATUS",
        _ => "unknown command",
    }
}

/// Name of an option, for messages.
pub fn option_name(opt: u32) -> &'static str {
    match opt {
        OPT_EXPORT_NAME => "EXPORT_NAME",
        OPT_ABORT => "ABORT",
        OPT_LIST => "LIST",
        OPT_STARTTLS => "STARTTLS",
        OPT_INFO => "INFO",
        OPT_GO => "GO",
        OPT_STRUCTURED_REPLY => "STRUCTURED_REPLY",
        OPT_LIST_META_CONTEXT => "LIST_META_CONTEXT",
        OPT_SET_META_CONTEXT => "SET_META_CONTEXT",
        11 => "EXTENDED_HEADERS",
        _ => "unknown option",
    }
}

pub(crate) fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}
pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}
pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_be_bytes());
}
pub(crate) fn get_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
pub(crate) fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
pub(crate) fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Encodes one option reply.
pub fn option_reply(opt: u32, kind: u32, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(20 + data.len());
    put_u64(&mut out, REP_MAGIC);
    put_u32(&mut out, opt);
    put_u32(&mut out, kind);
    put_u32(&mut out, data.len() as u32);
    out.extend_from_slice(data);
    out
}

/// How replies of one connection are encoded (fixed once the transmission phase begins).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyEncoder {
    /// Structured replies were negotiated.
    pub structured: bool,
}

impl ReplyEncoder {
    /// A success without data (anything but a read).
    pub fn ok(&self, handle: u64) -> Vec<u8> {
        // A simple reply is allowed for every non-read command, structured or not.
        simple_reply(0, handle)
    }

    /// The bytes that precede `len` bytes of read data at `offset` in a successful read reply.
    pub fn read_ok_header(&self, handle: u64, offset: u64, len: u32) -> Vec<u8> {
        if self.structured && len == 0 {
            // A data chunk describes at least one byte: an empty read is just "done".
            let mut out = Vec::with_capacity(20);
            put_u32(&mut out, STRUCTURED_REPLY_MAGIC);
            put_u16(&mut out, REPLY_FLAG_DONE);
            put_u16(&mut out, REPLY_TYPE_NONE);
            put_u64(&mut out, handle);
            put_u32(&mut out, 0);
            out
        } else if self.structured {
            // One data chunk, marked final: the data are complete in memory before the
            // header is sent, so no error can follow.
            let mut out = Vec::with_capacity(28);
            put_u32(&mut out, STRUCTURED_REPLY_MAGIC);
            put_u16(&mut out, REPLY_FLAG_DONE);
            put_u16(&mut out, REPLY_TYPE_OFFSET_DATA);
            put_u64(&mut out, handle);
            put_u32(&mut out, len + 8);
            put_u64(&mut out, offset);
            out
        } else {
            simple_reply(0, handle)
        }
    }

    /// A successful block status reply: one final `NBD_REPLY_TYPE_BLOCK_STATUS` chunk for
    /// context `context_id` with `descriptors` (extent length, status flags), which must be
    /// one or more, each of nonzero length (see [`crate::server::block_status_descriptors`]).
    /// Block status is only ever negotiated with structured replies.
    pub fn block_status(
        &self,
        handle: u64,
        context_id: u32,
        descriptors: &[(u32, u32)],
    ) -> Vec<u8> {
        debug_assert!(self.structured, "block status needs structured replies");
        debug_assert!(!descriptors.is_empty() && descriptors.iter().all(|d| d.0 > 0));
        let len = 4 + 8 * descriptors.len();
        let mut out = Vec::with_capacity(20 + len);
        put_u32(&mut out, STRUCTURED_REPLY_MAGIC);
        put_u16(&mut out, REPLY_FLAG_DONE);
        put_u16(&mut out, REPLY_TYPE_BLOCK_STATUS);
        put_u64(&mut out, handle);
        put_u32(&mut out, len as u32);
        put_u32(&mut out, context_id);
        for &(l, f) in descriptors {
            put_u32(&mut out, l);
            put_u32(&mut out, f);
        }
        out
    }

    /// An error reply. With structured replies it is a final `NBD_REPLY_TYPE_ERROR` chunk
    /// carrying `message`; otherwise a simple reply with the error set and no payload.
    pub fn error(&self, handle: u64, error: u32, message: &str) -> Vec<u8> {
        debug_assert!(error != 0);
        if self.structured {
            let msg = truncate_utf8(message, MAX_STRING_BYTES);
            let mut out = Vec::with_capacity(26 + msg.len());
            put_u32(&mut out, STRUCTURED_REPLY_MAGIC);
            put_u16(&mut out, REPLY_FLAG_DONE);
            put_u16(&mut out, REPLY_TYPE_ERROR);
            put_u64(&mut out, handle);
            put_u32(&mut out, 6 + msg.len() as u32);
            put_u32(&mut out, error);
            put_u16(&mut out, msg.len() as u16);
            out.extend_from_slice(msg.as_bytes());
            out
        } else {
            simple_reply(error, handle)
        }
    }
}

fn simple_reply(error: u32, handle: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    put_u32(&mut out, SIMPLE_REPLY_MAGIC);
    put_u32(&mut out, error);
    put_u64(&mut out, handle);
    out
}

/// `s` cut to at most `max` bytes on a character boundary.
pub(crate) fn truncate_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Maps an I/O error to the NBD error value a client should see.
pub fn errno_of(e: &std::io::Error) -> u32 {
    use std::io::ErrorKind as K;
    if let Some(code) = e.raw_os_error() {
        match code {
            libc::EPERM | libc::EACCES | libc::EROFS => return EPERM,
            libc::ENOSPC | libc::EDQUOT | libc::EFBIG => return ENOSPC,
            libc::EINVAL => return EINVAL,
            libc::ENOMEM => return ENOMEM,
            libc::EOVERFLOW => return EOVERFLOW,
            _ => return EIO,
        }
    }
    match e.kind() {
        K::PermissionDenied | K::ReadOnlyFilesystem => EPERM,
        K::InvalidInput => EINVAL,
        K::StorageFull => ENOSPC,
        K::OutOfMemory => ENOMEM,
        K::Unsupported => ENOTSUP,
        _ => EIO,
    }
}
