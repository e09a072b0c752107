//! # nbd: serving block devices over the Network Block Device protocol
//!
//! - [`proto`]: wire constants and reply encoding.
//! - [`client`]: a small blocking client (one request at a time), for reaching an export
//!   served by another process (the engine's remote surrogate pool).
//! - [`server`]: the server side of one connection as a sans-I/O state machine
//!   ([`ServerConn`]): bytes in, events and bytes out. It implements the fixed newstyle
//!   handshake (options `EXPORT_NAME`, `GO`, `INFO`, `LIST`, `ABORT`, `STRUCTURED_REPLY`,
//!   `LIST_META_CONTEXT` and `SET_META_CONTEXT` with the `base:allocation` context, and
//!   `STARTTLS` when TLS is configured; anything else is answered `NBD_REP_ERR_UNSUP`),
//!   advertises block size constraints and a maximum payload through `NBD_INFO_BLOCK_SIZE`,
//!   and validates every transmission request (`READ`, `WRITE`, `FLUSH`, `TRIM`,
//!   `WRITE_ZEROES`, `BLOCK_STATUS`, `DISC`; flags `FUA`, `NO_HOLE`, `DF`, `REQ_ONE`) before
//!   the transport sees it.
//! - [`backend`]: the [`Backend`] trait an export is served from (with a default block status
//!   of "all allocated data", always true), and [`MemBackend`].
//! - [`transport`]: [`Server`], threads serving the state machine on TCP and Unix sockets: one
//!   reader per connection, a small worker pool per connection, replies written under a mutex
//!   as they complete (out of order, matched by handle), many connections at once.
//! - [`tls`]: STARTTLS over OpenSSL: server credentials (X.509 with optional client
//!   certificates, or nbdkit-style PSK files) and [`TlsStream`], a TLS session the transport
//!   serves like a socket.
//!
//! ## Durability
//!
//! `NBD_CMD_FLUSH` is answered only after [`Backend::flush`] returned; a request with
//! `NBD_CMD_FLAG_FUA` is followed by a flush before its reply. The transmission flags
//! advertise `SEND_FLUSH`, `SEND_FUA`, `SEND_TRIM`, `SEND_WRITE_ZEROES`, `CAN_MULTI_CONN` (a
//! backend shares its state between connections) and, with structured replies, `SEND_DF`
//! (reads are always one data chunk).
//!
//! ## Block status
//!
//! `NBD_CMD_BLOCK_STATUS` is answered from [`Backend::block_status`] with one
//! `NBD_REPLY_TYPE_BLOCK_STATUS` chunk for `base:allocation` (`NBD_STATE_HOLE`,
//! `NBD_STATE_ZERO`), shaped to the protocol's rules by
//! [`server::block_status_descriptors`] (`NBD_CMD_FLAG_REQ_ONE`, the minimum block size, the
//! requested range). Clients such as `nbdcopy` and `qemu-img convert` then skip what reads as
//! zeros. Without a selected context the command is refused with `EINVAL`.
//!
//! ## Errors
//!
//! Invalid requests get the error the protocol prescribes (`EINVAL` for unknown commands or
//! flags and reads or trims past the end, `ENOSPC` for writes past the end, `EOVERFLOW` for
//! requests longer than the maximum payload, `EPERM` for writes to a read-only export) and
//! the connection continues. Violations that desynchronise the stream (bad magic, unknown
//! client flags, `EXPORT_NAME` of an unknown export, absurd lengths, a message cut short) end
//! the connection; other connections are not affected.

pub mod backend;
pub mod client;
pub mod proto;
pub mod server;
pub mod tls;
pub mod transport;

pub use backend::{Backend, Extent, MemBackend};
pub use server::{
    block_status_descriptors, BlockSize, Command, Event, ExportInfo, PayloadBuffers, ProtocolError,
    Request, ServerConfig, ServerConn, TlsPolicy, DEFAULT_MAX_PAYLOAD, DIRECT_PAYLOAD_BYTES,
};
pub use tls::{TlsError, TlsServer, TlsStream};
pub use transport::{Export, Logger, Server, ServerOptions, Stats, Stream};
