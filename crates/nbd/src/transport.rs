//! Serving [`ServerConn`]s on sockets with threads.
//!
//! Per connection in transmission: a few threads (nbdkit's model), each of which takes the
//! next request itself (reading the socket under the session lock when none is parsed yet),
//! executes it on the export's [`Backend`] and sends its reply as soon as it is ready: small
//! replies in batches, one `write` for all that are waiting (`ReplyBatch`), reads' data alone
//! under the connection's writer mutex. Replies therefore leave in completion order, not
//! request order (the client matches them by handle), and a slow request does not hold up
//! the others. A client that sends faster than the backend works stops being read: every
//! thread is busy executing.
//!
//! Listeners accept without blocking and poll a shutdown flag, so [`Server::stop`] (or a signal
//! handler setting the flag) ends serving within a fraction of a second: open connections stop
//! reading, finish the requests already received, send their replies and close.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::backend::Backend;
use crate::proto::{errno_of, ReplyEncoder, EIO, META_BASE_ALLOCATION_ID};
use crate::server::{
    block_status_descriptors, Command, Event, ExportInfo, PayloadBuffers, Request, ServerConfig,
    ServerConn, TlsPolicy,
};
use crate::tls::TlsServer;

/// One export: what the protocol advertises and what serves it.
#[derive(Clone)]
pub struct Export {
    pub info: ExportInfo,
    pub backend: Arc<dyn Backend>,
}

/// A callback for log lines (connections, protocol errors).
pub type Logger = Arc<dyn Fn(&str) + Send + Sync>;

/// Tuning of the server.
#[derive(Clone)]
pub struct ServerOptions {
    /// Threads per connection at most (requests of one connection executed at once; each
    /// reads its next request itself, so at most this many are read ahead of their
    /// execution).
    pub workers_per_connection: usize,
    /// Threads over all connections in transmission: each runs
    /// `threads_total / connections` threads (at least one, at most
    /// [`ServerOptions::workers_per_connection`]), adjusted as connections come and go: a
    /// thread beyond its connection's share ends after its request, and one is started when
    /// the share grows. With 16 connections on 2 cores, 8 threads each ran 4 KiB random
    /// writes at about 0.85x of 2 each (74-77 K against 87-93 K IOPS, fio over NBD on tmpfs:
    /// more threads than the cores can run only switch), while one connection needs its 8
    /// to keep slow members busy.
    pub threads_total: usize,
    /// How often blocked reads and accepts look at the shutdown flag.
    pub poll_interval: Duration,
    /// How long a reply may wait for a client that does not read before the connection is
    /// dropped.
    pub write_timeout: Duration,
    /// Where log lines go (nowhere when `None`).
    pub log: Option<Logger>,
    /// TLS credentials: with them, clients may upgrade a connection with `NBD_OPT_STARTTLS`
    /// (on TCP and Unix sockets alike, as nbdkit does); without, STARTTLS is refused.
    pub tls: Option<TlsServer>,
    /// With [`ServerOptions::tls`]: refuse every option but STARTTLS until TLS is up
    /// (`NBD_REP_ERR_TLS_REQD`), instead of serving plain-text clients too.
    pub tls_required: bool,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            // As many as a typical client queue (fio, the kernel client and qemu keep 8 or
            // more requests in flight): on a loaded machine, 1 MiB reads were faster with 8
            // workers than with 4 (bench/nbd.sh).
            workers_per_connection: 8,
            threads_total: 32,
            poll_interval: Duration::from_millis(100),
            write_timeout: Duration::from_secs(30),
            log: None,
            tls: None,
            tls_required: false,
        }
    }
}

/// A socket the server can serve a connection on: a TCP or Unix socket, or a TLS session on
/// one ([`crate::tls::TlsStream`]). The transport is generic over it, so the plain-text paths
/// are compiled for their socket type with nothing in between.
pub trait Stream: Read + Write + AsRawFd + Send + 'static {
    /// A second handle on the same socket (the writer half).
    fn try_clone_stream(&self) -> io::Result<Self>
    where
        Self: Sized;
    /// Read timeout (to poll the shutdown flag).
    fn set_read_timeout_to(&self, d: Option<Duration>) -> io::Result<()>;
    /// Write timeout (a client that stops reading its replies is eventually dropped).
    fn set_write_timeout_to(&self, d: Option<Duration>) -> io::Result<()>;
    /// Closes both directions.
    fn shutdown_both(&self);
}

impl Stream for TcpStream {
    fn try_clone_stream(&self) -> io::Result<Self> {
        self.try_clone()
    }
    fn set_read_timeout_to(&self, d: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(d)
    }
    fn set_write_timeout_to(&self, d: Option<Duration>) -> io::Result<()> {
        self.set_write_timeout(d)
    }
    fn shutdown_both(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
}

impl Stream for UnixStream {
    fn try_clone_stream(&self) -> io::Result<Self> {
        self.try_clone()
    }
    fn set_read_timeout_to(&self, d: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(d)
    }
    fn set_write_timeout_to(&self, d: Option<Duration>) -> io::Result<()> {
        self.set_write_timeout(d)
    }
    fn shutdown_both(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
}

/// Counters of a server's activity.
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections accepted so far.
    pub connections: AtomicU64,
    /// Connections open now.
    pub open: AtomicUsize,
    /// Of them, those in transmission (past negotiation; their threads share
    /// [`ServerOptions::threads_total`]).
    pub transmitting: AtomicUsize,
    /// Requests executed.
    pub requests: AtomicU64,
    /// Connections dropped for a protocol violation.
    pub protocol_errors: AtomicU64,
}

/// An NBD server over a fixed set of exports.
pub struct Server {
    exports: Vec<Export>,
    config: ServerConfig,
    opts: ServerOptions,
    shutdown: Arc<AtomicBool>,
    stats: Stats,
}

impl Server {
    /// A server for `exports`; the first is the default export (empty name).
    pub fn new(exports: Vec<Export>, opts: ServerOptions) -> Arc<Server> {
        Self::with_flag(exports, opts, Arc::new(AtomicBool::new(false)))
    }

    /// A server that stops when `shutdown` becomes true.
    pub fn with_flag(
        exports: Vec<Export>,
        opts: ServerOptions,
        shutdown: Arc<AtomicBool>,
    ) -> Arc<Server> {
        let mut config = ServerConfig::new(exports.iter().map(|e| e.info.clone()).collect());
        config.tls = match (&opts.tls, opts.tls_required) {
            (None, _) => TlsPolicy::Off,
            (Some(_), false) => TlsPolicy::Optional,
            (Some(_), true) => TlsPolicy::Required,
        };
        Arc::new(Server {
            exports,
            config,
            opts,
            shutdown,
            stats: Stats::default(),
        })
    }

    /// Asks every listener and connection to finish.
    pub fn stop(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
    }

    /// True once [`Server::stop`] was called (or the flag set).
    pub fn stopping(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    /// Activity counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    fn log(&self, msg: &str) {
        if let Some(l) = &self.opts.log {
            l(msg);
        }
    }

    /// Serves connections from `listener` until the server stops, then waits for the
    /// connections to finish.
    pub fn serve_tcp(self: &Arc<Self>, listener: TcpListener) -> io::Result<()> {
        listener.set_nonblocking(true)?;
        self.accept_loop(|| match listener.accept() {
            Ok((s, peer)) => {
                s.set_nonblocking(false)?;
                let _ = s.set_nodelay(true);
                Ok(Some((s, peer.to_string())))
            }
            Err(e) => Err(e),
        })
    }

    /// Serves connections from a Unix socket listener until the server stops.
    pub fn serve_unix(self: &Arc<Self>, listener: UnixListener) -> io::Result<()> {
        listener.set_nonblocking(true)?;
        self.accept_loop(|| match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                Ok(Some((s, "unix".to_string())))
            }
            Err(e) => Err(e),
        })
    }

    fn accept_loop<S: Stream>(
        self: &Arc<Self>,
        mut accept: impl FnMut() -> io::Result<Option<(S, String)>>,
    ) -> io::Result<()> {
        let mut conns: Vec<JoinHandle<()>> = Vec::new();
        let idle = self.opts.poll_interval.min(Duration::from_millis(20));
        while !self.stopping() {
            match accept() {
                Ok(Some((s, peer))) => {
                    let me = Arc::clone(self);
                    conns.retain(|h| !h.is_finished());
                    conns.push(std::thread::spawn(move || me.serve_connection(s, &peer)));
                }
                Ok(None) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(idle),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of descriptors and the like: wait and go on serving.
                    self.log(&format!("accept failed: {e}"));
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        for h in conns {
            let _ = h.join();
        }
        Ok(())
    }

    /// Serves one connection to its end (the calling thread reads; workers execute). After
    /// STARTTLS, the same connection goes on inside TLS.
    pub fn serve_connection<S: Stream>(self: &Arc<Self>, stream: S, peer: &str) {
        self.stats.connections.fetch_add(1, Ordering::Relaxed);
        self.stats.open.fetch_add(1, Ordering::Relaxed);
        let conn = ServerConn::new(self.config.clone());
        let result = match self.run_connection(stream, conn, peer) {
            Ok(Some((stream, mut conn))) => match &self.opts.tls {
                Some(tls) => match tls.accept(stream, self.opts.write_timeout, &|| self.stopping())
                {
                    Ok(tls_stream) => {
                        self.log(&format!("{peer}: TLS session established"));
                        conn.tls_started();
                        // A second STARTTLS is refused by the state machine.
                        self.run_connection(tls_stream, conn, peer).map(|_| ())
                    }
                    Err(e) => Err(e),
                },
                None => unreachable!("STARTTLS is acknowledged only with TLS configured"),
            },
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            self.log(&format!("{peer}: {e}"));
        }
        self.stats.open.fetch_sub(1, Ordering::Relaxed);
    }

    /// Runs `conn` on `reader` until the session ends (`None`) or the client asked for TLS
    /// (the socket and the negotiation state are handed back, nothing else in flight).
    fn run_connection<S: Stream>(
        self: &Arc<Self>,
        mut reader: S,
        mut conn: ServerConn,
        peer: &str,
    ) -> io::Result<Option<(S, ServerConn)>> {
        let writer = Mutex::new(reader.try_clone_stream()?);
        reader.set_read_timeout_to(Some(self.opts.poll_interval))?;
        reader.set_write_timeout_to(Some(self.opts.write_timeout))?;
        let mut buf = vec![0u8; 256 << 10];
        // Negotiation, on this thread alone.
        let phase = (|| -> io::Result<Phase> {
            send(&writer, conn.take_output())?;
            loop {
                if self.stopping() {
                    // Still negotiating: nothing in flight, just go.
                    return Ok(Phase::End);
                }
                match reader.read(&mut buf) {
                    Ok(0) => conn.receive_eof(),
                    Ok(n) => conn.receive(&buf[..n]),
                    Err(e) if retry(&e) => continue,
                    Err(e) if e.kind() == io::ErrorKind::ConnectionReset => conn.receive_eof(),
                    Err(e) => return Err(e),
                }
                send(&writer, conn.take_output())?;
                // (Every event of negotiation ends it.)
                if let Some(ev) = conn.poll_event() {
                    match ev {
                        Event::Selected { export } => return Ok(Phase::Transmission(export)),
                        Event::Request(_) => unreachable!("requests follow the export selection"),
                        Event::Disconnect => return Ok(Phase::End),
                        Event::Fatal(e) => {
                            self.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
                            self.log(&format!("{peer}: protocol error, disconnecting: {e}"));
                            return Ok(Phase::End);
                        }
                        // The acknowledgement went out above; the handshake follows.
                        Event::StartTls => return Ok(Phase::StartTls),
                    }
                }
            }
        })();
        match phase {
            Ok(Phase::StartTls) => {
                drop(writer);
                Ok(Some((reader, conn)))
            }
            Ok(Phase::Transmission(export)) => {
                let e = &self.exports[export];
                self.log(&format!("{peer}: serving export '{}'", e.info.name));
                let backend = Arc::clone(&e.backend);
                let replies = Replies {
                    enc: conn.encoder(),
                    minimum: e.info.block.minimum,
                };
                let buffers = conn.payload_buffers();
                let _counted = Transmitting::new(&self.stats.transmitting);
                let threads = self.thread_share();
                let session = Mutex::new(Session {
                    reader,
                    conn,
                    buf,
                    shutdown_seen: None,
                    reading: true,
                    error: None,
                    threads,
                    exact_headers: false,
                });
                // Every thread of the connection reads its next request itself (one at a
                // time, under the session lock) and executes it: nbdkit's model. A request
                // then crosses no thread boundary; handing each one from a reader thread to a
                // worker cost two wake-ups per request (4 KiB random writes at 0.7x nbdkit).
                let batch = Mutex::new(ReplyBatch::default());
                let c = ConnThreads {
                    session: &session,
                    backend: &*backend,
                    replies,
                    writer: &writer,
                    batch: &batch,
                    buffers: &buffers,
                    peer,
                };
                std::thread::scope(|s| {
                    for _ in 1..threads {
                        s.spawn(|| self.serve_requests(s, &c));
                    }
                    self.serve_requests(s, &c);
                });
                let session = session.into_inner().unwrap_or_else(|e| e.into_inner());
                session.reader.shutdown_both();
                match session.error {
                    Some(e) => Err(e),
                    None => Ok(None),
                }
            }
            Ok(Phase::End) => {
                reader.shutdown_both();
                Ok(None)
            }
            Err(e) => {
                reader.shutdown_both();
                Err(e)
            }
        }
    }

    /// Threads a connection in transmission runs now: its share of
    /// [`ServerOptions::threads_total`], at least one, at most
    /// [`ServerOptions::workers_per_connection`].
    fn thread_share(&self) -> usize {
        let conns = self.stats.transmitting.load(Ordering::Acquire).max(1);
        (self.opts.threads_total / conns).clamp(1, self.opts.workers_per_connection.max(1))
    }

    /// One thread of a connection in transmission: takes the next request (reading from the
    /// socket when none is parsed yet), executes it and sends its reply, until the session
    /// ends. Requests already received are executed even when the server stops.
    ///
    /// Keeps the connection at its share of threads ([`ServerOptions::threads_total`]): a
    /// thread beyond it ends before reading again (never the last one), and a thread that
    /// took a request while the connection is below it starts another.
    fn serve_requests<'scope, 'env, S: Stream>(
        &'env self,
        scope: &'scope std::thread::Scope<'scope, 'env>,
        c: &'env ConnThreads<'env, S>,
    ) {
        let ConnThreads {
            session,
            backend,
            replies,
            writer,
            batch,
            buffers,
            peer,
        } = *c;
        // This thread's read buffer, reused from request to request (see `ReadBuf`).
        let mut rbuf = ReadBuf::default();
        loop {
            let (req, more) = {
                let mut g = session.lock().unwrap_or_else(|e| e.into_inner());
                let share = self.thread_share();
                if g.threads > share && g.threads > 1 {
                    g.threads -= 1;
                    return;
                }
                let Some(r) = self.next_request(&mut g, writer, batch, peer) else {
                    // Replies this connection's threads left in the batch go out before the
                    // connection closes.
                    let _ = ReplyBatch::flush(batch, writer);
                    return;
                };
                let more = g.reading && g.threads < share;
                if more {
                    g.threads += 1;
                }
                (r, more)
            };
            if more {
                scope.spawn(move || self.serve_requests(scope, c));
            }
            // Small writes come in streams of small requests, each quick: the reply may wait
            // while the next ones run. After anything else (a large transfer, a flush) the
            // next request may take long too, and a read may leave work for after its reply
            // (`Backend::after_reply`, IDO's copies) that the reply must not wait for: reply
            // at once.
            let quick = match &req.command {
                Command::Write { data, .. } => data.len() <= BATCH_PAYLOAD_MAX,
                _ => false,
            };
            let (header, payload) = execute(backend, replies, req, &mut rbuf, buffers);
            self.stats.requests.fetch_add(1, Ordering::Relaxed);
            // A client that went away cannot get its reply; the requests received are still
            // executed.
            let _ = ReplyBatch::reply(batch, writer, &header, payload, quick);
            backend.after_reply();
            rbuf.trim();
        }
    }

    /// Under the session lock: the next request received, reading from the socket until one
    /// is complete (a large write payload straight into its buffer); `None` once the session
    /// is over (the client left, a protocol error, a socket error, or the server stopping
    /// after a grace period).
    fn next_request<S: Stream>(
        &self,
        g: &mut Session<S>,
        writer: &Mutex<S>,
        batch: &Mutex<ReplyBatch>,
        peer: &str,
    ) -> Option<Request> {
        loop {
            while let Some(ev) = g.conn.poll_event() {
                match ev {
                    Event::Request(r) => return Some(r),
                    Event::Disconnect => g.reading = false,
                    Event::Fatal(e) => {
                        self.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
                        self.log(&format!("{peer}: protocol error, disconnecting: {e}"));
                        g.reading = false;
                    }
                    // Negotiation events do not occur in transmission.
                    Event::Selected { .. } | Event::StartTls => g.reading = false,
                }
            }
            if !g.reading {
                return None;
            }
            if self.stopping() && g.shutdown_seen.is_none() {
                g.shutdown_seen = Some(Instant::now());
                g.conn.begin_shutdown();
            }
            if let Some(t) = g.shutdown_seen {
                // Requests already received were taken above; stop reading new ones after a
                // short grace period.
                if t.elapsed() > self.opts.poll_interval * 2 {
                    g.reading = false;
                    return None;
                }
            }
            // The client may be waiting for replies before it sends more: the waiting ones
            // go out before this thread waits for the socket. (A failed send is a client that
            // went away, or does not read: the read below or the next send finds out, as for
            // the replies of the connection's other threads.)
            let _ = ReplyBatch::reading(batch, writer, true);
            let Session {
                reader,
                conn,
                buf,
                exact_headers,
                ..
            } = &mut *g;
            let got = match conn.payload_space() {
                Some(room) => reader.read(room).map(|n| (n, true)),
                None => {
                    let want = match conn.header_bytes_missing() {
                        Some(m) if *exact_headers && m > 0 => m.min(buf.len()),
                        _ => buf.len(),
                    };
                    reader.read(&mut buf[..want]).map(|n| (n, false))
                }
            };
            let _ = ReplyBatch::reading(batch, writer, false);
            match got {
                Ok((0, _)) => conn.receive_eof(),
                Ok((n, true)) => {
                    conn.payload_received(n);
                    *exact_headers = true;
                }
                Ok((n, false)) => {
                    conn.receive(&buf[..n]);
                    // A whole header read alone that did not start a direct payload: small
                    // requests again.
                    let mid_header = matches!(
                        conn.header_bytes_missing(),
                        Some(m) if m > 0 && m < crate::proto::REQUEST_HEADER_BYTES
                    );
                    if *exact_headers && !mid_header && conn.payload_space().is_none() {
                        *exact_headers = false;
                    }
                }
                Err(e) if retry(&e) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => conn.receive_eof(),
                Err(e) => {
                    g.error = Some(e);
                    g.reading = false;
                    return None;
                }
            }
            // Replies the state machine made itself (errors for invalid requests) go out
            // before the replies of the requests polled after them.
            if let Err(e) = send(writer, g.conn.take_output()) {
                g.error = Some(e);
                g.reading = false;
                return None;
            }
        }
    }
}

/// Where a connection's negotiation ended.
enum Phase {
    /// An export was selected: transmission follows.
    Transmission(usize),
    /// The client asked for TLS (acknowledged).
    StartTls,
    /// The session is over.
    End,
}

/// Counts a connection in transmission while it lives.
struct Transmitting<'a>(&'a AtomicUsize);

impl<'a> Transmitting<'a> {
    fn new(n: &'a AtomicUsize) -> Transmitting<'a> {
        n.fetch_add(1, Ordering::AcqRel);
        Transmitting(n)
    }
}

impl Drop for Transmitting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What the threads of a connection in transmission share.
struct ConnThreads<'a, S> {
    session: &'a Mutex<Session<S>>,
    backend: &'a dyn Backend,
    replies: Replies,
    writer: &'a Mutex<S>,
    /// Small replies waiting to be sent together (see [`ReplyBatch`]).
    batch: &'a Mutex<ReplyBatch>,
    buffers: &'a PayloadBuffers,
    peer: &'a str,
}

/// A connection in transmission, shared by its threads: whichever holds it reads.
struct Session<S> {
    reader: S,
    conn: ServerConn,
    /// Where plain reads land (payloads of 64 KiB and more go straight to their buffers).
    buf: Vec<u8>,
    /// When the server began stopping.
    shutdown_seen: Option<Instant>,
    /// Still reading requests.
    reading: bool,
    /// The socket error that ended the session.
    error: Option<io::Error>,
    /// The connection's threads alive.
    threads: usize,
    /// Read request headers alone, not into the 256 KiB buffer: set while requests carry
    /// payloads read straight to their buffers (`ServerConn::payload_space`), since a read
    /// into the buffer takes up to 256 KiB of the next payload with its header, to be copied
    /// again (16-job 1 MiB sequential writes, fio over NBD on tmpfs: that copy was 5.9 % of
    /// the server's samples, 0.7 % after, and RAID0 / nbdkit-file went from 0.80-0.83x to
    /// 0.97-1.01x); cleared by the first header read alone that is not followed by such a
    /// payload, so that small requests arrive many per read again.
    exact_headers: bool,
}

/// Whether a read error only means "nothing yet" (the poll timeout, a signal).
fn retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Sends `bytes` (if any) under the writer lock.
fn send<S: Stream>(writer: &Mutex<S>, bytes: Vec<u8>) -> io::Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    let mut w = writer.lock().unwrap_or_else(|e| e.into_inner());
    w.write_all(&bytes)?;
    w.flush()
}

/// Replies of this many payload bytes or fewer are sent in batches ([`ReplyBatch`]); larger
/// ones (reads) go out alone, from their own buffer, not copied.
const BATCH_PAYLOAD_MAX: usize = 8 << 10;

/// A batch with this many replies, or this many bytes, is sent at once rather than left for
/// the thread that next reads the socket.
const BATCH_REPLIES_MAX: usize = 32;
const BATCH_BYTES_MAX: usize = 64 << 10;

/// A connection's small replies that wait to be sent, and who sends them.
///
/// A thread that finished a small write adds its reply here and goes on to the next request
/// without sending it, as long as other requests are already received (parsed, not waiting
/// for the socket). (After a large transfer or a flush the next request may take long too,
/// and the reply would wait for all of it; after a read, the work the backend left for after
/// the reply would: those replies are sent at once.) Whichever thread is about to read the
/// socket sends the batch first ([`ReplyBatch::reading`]): a client that waits for replies
/// before it sends more is never kept waiting, and while requests arrive faster than they are executed one
/// `write` carries the replies of many (4 KiB random writes at queue depth 32, fio over NBD on
/// tmpfs: one `writev` per reply was a fifth of the server's samples, and `sendto` calls fell
/// from one per request to about one per socket read). A reply added while a thread waits in
/// the socket read, or to a full batch, is sent at once. One thread at a time sends
/// (`sending`); replies added meanwhile go with its next write, and it stops only when
/// nothing is waiting, so none is ever left behind. A reply is never split or interleaved
/// with another.
#[derive(Default)]
struct ReplyBatch {
    /// Whole replies, one after another.
    pending: Vec<u8>,
    /// Replies in `pending`.
    count: usize,
    /// A thread is sending: it sends everything added to `pending` before it stops.
    sending: bool,
    /// A thread is in (or about to enter) a socket read.
    reading: bool,
    /// The sending thread's last buffer, kept for the next one (no allocation per batch).
    spare: Vec<u8>,
}

impl ReplyBatch {
    /// Sends one reply, `header` then `payload`: a large one at once, alone; a small one
    /// into the batch, sent now unless it may `wait` (see [`ReplyBatch`]: the request was
    /// a small write), no thread is reading the socket and the batch is not full. A
    /// socket error is returned to the thread that met it; replies that other threads added
    /// fail with it silently, as they would for a client that went away.
    fn reply<W: Write>(
        batch: &Mutex<ReplyBatch>,
        writer: &Mutex<W>,
        header: &[u8],
        payload: &[u8],
        wait: bool,
    ) -> io::Result<()> {
        if payload.len() > BATCH_PAYLOAD_MAX {
            let mut w = writer.lock().unwrap_or_else(|e| e.into_inner());
            return write_all_vectored(&mut *w, header, payload).and_then(|_| w.flush());
        }
        let mut b = batch.lock().unwrap_or_else(|e| e.into_inner());
        b.pending.extend_from_slice(header);
        b.pending.extend_from_slice(payload);
        b.count += 1;
        if !wait || b.reading || b.count >= BATCH_REPLIES_MAX || b.pending.len() >= BATCH_BYTES_MAX
        {
            Self::send(batch, b, writer)
        } else {
            Ok(())
        }
    }

    /// Marks the start (`true`) or end (`false`) of a socket read; before one, sends what
    /// is waiting.
    fn reading<W: Write>(
        batch: &Mutex<ReplyBatch>,
        writer: &Mutex<W>,
        reading: bool,
    ) -> io::Result<()> {
        let mut b = batch.lock().unwrap_or_else(|e| e.into_inner());
        b.reading = reading;
        if reading {
            Self::send(batch, b, writer)
        } else {
            Ok(())
        }
    }

    /// Sends what is waiting, unless a thread is already sending (it will take it).
    fn flush<W: Write>(batch: &Mutex<ReplyBatch>, writer: &Mutex<W>) -> io::Result<()> {
        Self::send(
            batch,
            batch.lock().unwrap_or_else(|e| e.into_inner()),
            writer,
        )
    }

    /// Sends what is waiting, with `b` the batch's guard, unless a thread is already
    /// sending (it will take it).
    fn send<'a, W: Write>(
        batch: &'a Mutex<ReplyBatch>,
        mut b: std::sync::MutexGuard<'a, ReplyBatch>,
        writer: &Mutex<W>,
    ) -> io::Result<()> {
        if b.sending {
            return Ok(());
        }
        b.sending = true;
        let mut result = Ok(());
        while !b.pending.is_empty() {
            let mut out = std::mem::take(&mut b.spare);
            std::mem::swap(&mut out, &mut b.pending);
            b.count = 0;
            drop(b);
            let sent = {
                let mut w = writer.lock().unwrap_or_else(|e| e.into_inner());
                w.write_all(&out).and_then(|_| w.flush())
            };
            if result.is_ok() {
                result = sent;
            }
            out.clear();
            b = batch.lock().unwrap_or_else(|e| e.into_inner());
            b.spare = out;
        }
        b.sending = false;
        result
    }
}

/// A worker's buffer for read replies, kept from one request to the next so that a read
/// does not allocate and zero a fresh buffer every time (zeroing 1 MiB costs about a tenth of
/// serving it from the page cache). It is zeroed when it grows, never handed out
/// uninitialised; its bytes are overwritten by [`Backend::read`] (which fills the whole
/// buffer) before being sent, and the data of a failed read are never sent. It only ever holds
/// data this connection read.
#[derive(Default)]
struct ReadBuf(Vec<u8>);

/// Read buffers up to this size are kept between requests; a larger one (a rare big read) is
/// freed once its reply is sent, so idle connections do not pin much memory.
const READ_BUF_KEEP: usize = 4 << 20;

impl ReadBuf {
    /// The first `len` bytes, growing (with zeros) when needed.
    fn get(&mut self, len: usize) -> &mut [u8] {
        if self.0.len() < len {
            self.0.resize(len, 0);
        }
        &mut self.0[..len]
    }
    /// Frees an oversized buffer.
    fn trim(&mut self) {
        if self.0.len() > READ_BUF_KEEP {
            self.0 = Vec::new();
        }
    }
}

/// Writes `header` then `payload` with as few system calls as the socket allows (one
/// `writev` when the socket buffer has room), instead of a separate write for each.
fn write_all_vectored<W: Write + ?Sized>(
    w: &mut W,
    header: &[u8],
    payload: &[u8],
) -> io::Result<()> {
    let mut parts = [io::IoSlice::new(header), io::IoSlice::new(payload)];
    let mut bufs: &mut [io::IoSlice<'_>] = &mut parts;
    // Skip empty parts up front (a write of nothing would look like a closed socket).
    io::IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        match w.write_vectored(bufs) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "failed to write the whole reply",
                ))
            }
            Ok(n) => io::IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// How one connection's replies are made: its encoder and its export's minimum block size
/// (block status descriptors are multiples of it).
#[derive(Clone, Copy, Debug)]
struct Replies {
    enc: ReplyEncoder,
    minimum: u32,
}

/// Runs one request; returns the reply as header and data (the data of a read live in
/// `rbuf`).
fn execute<'b>(
    backend: &dyn Backend,
    replies: Replies,
    req: Request,
    rbuf: &'b mut ReadBuf,
    buffers: &PayloadBuffers,
) -> (Vec<u8>, &'b [u8]) {
    let enc = replies.enc;
    let handle = req.handle;
    let fua = req.fua();
    let req_one = req.req_one();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(
        || -> io::Result<(Vec<u8>, usize)> {
            let sync = |r: io::Result<()>| -> io::Result<()> {
                r?;
                if fua {
                    backend.flush()?;
                }
                Ok(())
            };
            match req.command {
                Command::Read { offset, len } => {
                    if len > 0 {
                        backend.read(offset, rbuf.get(len as usize))?;
                    }
                    Ok((enc.read_ok_header(handle, offset, len), len as usize))
                }
                Command::Write { offset, data } => {
                    sync(if data.is_empty() {
                        Ok(())
                    } else {
                        backend.write(offset, &data)
                    })?;
                    buffers.give(data);
                    Ok((enc.ok(handle), 0))
                }
                Command::Flush => {
                    backend.flush()?;
                    Ok((enc.ok(handle), 0))
                }
                Command::Trim { offset, len } => {
                    sync(backend.trim(offset, len as u64))?;
                    Ok((enc.ok(handle), 0))
                }
                Command::WriteZeroes { offset, len } => {
                    sync(if len == 0 {
                        Ok(())
                    } else {
                        backend.write_zeroes(offset, len as u64)
                    })?;
                    Ok((enc.ok(handle), 0))
                }
                Command::BlockStatus { offset, len } => {
                    let extents = backend.block_status(offset, u64::from(len))?;
                    let d = block_status_descriptors(
                        offset,
                        len,
                        req_one,
                        replies.minimum,
                        extents.iter().map(|e| (e.len, e.flags)),
                    );
                    Ok((enc.block_status(handle, META_BASE_ALLOCATION_ID, &d), 0))
                }
            }
        },
    ));
    match outcome {
        Ok(Ok((header, data_len))) => (header, &rbuf.0[..data_len]),
        Ok(Err(e)) => (enc.error(handle, errno_of(&e), &e.to_string()), &[]),
        Err(_) => (enc.error(handle, EIO, "internal error in the backend"), &[]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::MemBackend;

    /// Takes at most 5 bytes per call and is interrupted every other call.
    struct Dribble {
        out: Vec<u8>,
        calls: usize,
    }

    impl Write for Dribble {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.calls += 1;
            if self.calls.is_multiple_of(2) {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let n = b.len().min(5);
            self.out.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn vectored_reply_writes_survive_short_and_interrupted_writes() {
        let header: Vec<u8> = (0..28).collect();
        let payload: Vec<u8> = (0..100u8).rev().collect();
        for p in [&payload[..], &[][..]] {
            let mut w = Dribble {
                out: Vec::new(),
                calls: 0,
            };
            write_all_vectored(&mut w, &header, p).unwrap();
            assert_eq!(w.out, [&header[..], p].concat());
        }
    }

    /// The reused read buffer never leaks an earlier, longer read into a shorter reply, and a
    /// failed read sends no data.
    #[test]
    fn read_replies_from_a_reused_buffer_carry_exactly_their_data() {
        let backend = MemBackend::new(1 << 20);
        let data: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
        backend.write(0, &data).unwrap();
        let enc = ReplyEncoder { structured: false };
        let replies = Replies { enc, minimum: 1 };
        let mut rbuf = ReadBuf::default();
        let bufs = PayloadBuffers::default();
        let read = |offset: u64, len: u32| Request {
            handle: 7,
            flags: 0,
            command: Command::Read { offset, len },
        };
        for (offset, len) in [(0u64, 1u32 << 20), (1000, 10), (5, 0), (4096, 65536)] {
            let (header, payload) = execute(&backend, replies, read(offset, len), &mut rbuf, &bufs);
            assert_eq!(header, enc.read_ok_header(7, offset, len));
            assert_eq!(payload, &data[offset as usize..][..len as usize]);
        }
        // Past the end: an error reply, no data.
        let (_, payload) = execute(
            &backend,
            replies,
            read((1 << 20) - 10, 20),
            &mut rbuf,
            &bufs,
        );
        assert!(payload.is_empty());
        // An oversized buffer is freed after its reply; a normal one is kept.
        rbuf.get(READ_BUF_KEEP + 1);
        rbuf.trim();
        assert_eq!(rbuf.0.capacity(), 0);
        rbuf.get(4096);
        rbuf.trim();
        assert_eq!(rbuf.0.len(), 4096);
    }

    /// Records every `write` call; the first one waits until the test opens the gate.
    struct Gated {
        writes: Arc<Mutex<Vec<Vec<u8>>>>,
        gate: std::sync::mpsc::Receiver<()>,
        entered: std::sync::mpsc::Sender<()>,
    }

    impl Write for Gated {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            let mut writes = self.writes.lock().unwrap();
            if writes.is_empty() {
                drop(writes);
                self.entered.send(()).unwrap();
                self.gate.recv().unwrap();
                writes = self.writes.lock().unwrap();
            }
            writes.push(b.to_vec());
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// While one thread is writing, small replies of other threads wait in the batch (their
    /// threads go on at once) and then leave together in one write; a large reply goes out
    /// alone.
    #[test]
    fn small_replies_wait_for_the_sender_and_leave_in_one_write() {
        let (open, gate) = std::sync::mpsc::channel();
        let (entered, in_write) = std::sync::mpsc::channel();
        let writes = Arc::new(Mutex::new(Vec::new()));
        let writer = Mutex::new(Gated {
            writes: Arc::clone(&writes),
            gate,
            entered,
        });
        let batch = Mutex::new(ReplyBatch::default());
        let big = vec![7u8; BATCH_PAYLOAD_MAX + 1];
        // A thread waits in the socket read: replies go out at once.
        ReplyBatch::reading(&batch, &writer, true).unwrap();
        std::thread::scope(|s| {
            let first = s.spawn(|| ReplyBatch::reply(&batch, &writer, b"one-", b"1111", true));
            in_write.recv().unwrap();
            // The sender is blocked in its write: these return without writing (a thread
            // that waited for the socket here would never return).
            let (done, returned) = std::sync::mpsc::channel();
            let (w, b) = (&writer, &batch);
            s.spawn(move || {
                ReplyBatch::reply(b, w, b"two-", b"22", true).unwrap();
                ReplyBatch::reply(b, w, b"three-", b"", true).unwrap();
                done.send(()).unwrap();
            });
            let joined = returned.recv_timeout(Duration::from_secs(10)).is_ok();
            if !joined {
                open.send(()).unwrap();
            }
            assert!(
                joined,
                "small replies waited for the socket instead of joining the batch"
            );
            assert_eq!(writes.lock().unwrap().len(), 0);
            let large = s.spawn(|| ReplyBatch::reply(&batch, &writer, b"big-", &big, true));
            open.send(()).unwrap();
            first.join().unwrap().unwrap();
            large.join().unwrap().unwrap();
        });
        let mut writes = writes.lock().unwrap().clone();
        assert_eq!(writes.remove(0), b"one-1111");
        // The two waiting replies in one write; the large one (in its own writes) may go
        // before or after it.
        let batched = writes.iter().position(|w| w.starts_with(b"two-"));
        let batched = writes.remove(batched.expect("the waiting replies were sent"));
        assert_eq!(batched, b"two-22three-");
        let large: Vec<u8> = writes.concat();
        assert_eq!(&large[..4], b"big-");
        assert_eq!(&large[4..], &big[..]);
        let batch = batch.lock().unwrap();
        assert!(batch.pending.is_empty() && !batch.sending);
    }

    /// Records each write (a vectored one as one).
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl Write for Writes {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.push(b.to_vec());
            Ok(b.len())
        }
        fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
            let all: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            self.0.push(all.clone());
            Ok(all.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// With no thread reading the socket, small replies wait (the requests already received
    /// are executed first) and leave together when a thread is about to read, or when the
    /// batch is full; while a thread reads, each leaves at once; a large one never waits.
    #[test]
    fn small_replies_wait_until_a_thread_reads_or_the_batch_is_full() {
        let writer = Mutex::new(Writes::default());
        let batch = Mutex::new(ReplyBatch::default());
        let writes = || writer.lock().unwrap().0.clone();
        ReplyBatch::reply(&batch, &writer, b"a", b"1", true).unwrap();
        ReplyBatch::reply(&batch, &writer, b"b", b"", true).unwrap();
        assert!(writes().is_empty(), "replies left before a thread read");
        ReplyBatch::reply(&batch, &writer, b"big", &[9u8; BATCH_PAYLOAD_MAX + 1], true).unwrap();
        assert_eq!(writes().len(), 1, "a large reply waited");
        ReplyBatch::reading(&batch, &writer, true).unwrap();
        assert_eq!(writes()[1], b"a1b");
        ReplyBatch::reply(&batch, &writer, b"c", b"", true).unwrap();
        assert_eq!(writes()[2], b"c");
        ReplyBatch::reading(&batch, &writer, false).unwrap();
        for i in 0..BATCH_REPLIES_MAX {
            assert_eq!(writes().len(), 3, "sent before the batch was full");
            ReplyBatch::reply(&batch, &writer, &[i as u8], b"", true).unwrap();
        }
        assert_eq!(writes().len(), 4);
        assert_eq!(writes()[3].len(), BATCH_REPLIES_MAX);
        ReplyBatch::reply(&batch, &writer, b"d", b"", true).unwrap();
        ReplyBatch::flush(&batch, &writer).unwrap();
        assert_eq!(writes()[4], b"d");
        // A reply that may not wait (after a large transfer or a flush) leaves at once, with
        // whatever waits beside it.
        ReplyBatch::reply(&batch, &writer, b"e", b"", true).unwrap();
        ReplyBatch::reply(&batch, &writer, b"f", b"", false).unwrap();
        assert_eq!(writes()[5], b"ef");
    }

    /// Many threads sending replies of every size at once, with a reader coming and going:
    /// the stream holds each reply exactly once, whole (never split by another reply), once
    /// the batch is flushed at the end as a closing connection does.
    #[test]
    fn concurrent_replies_arrive_whole_and_once() {
        let writer = Mutex::new(Vec::<u8>::new());
        let batch = Mutex::new(ReplyBatch::default());
        let (threads, each) = (6u32, 400u32);
        std::thread::scope(|s| {
            for t in 0..threads {
                let (writer, batch) = (&writer, &batch);
                s.spawn(move || {
                    for i in 0..each {
                        let id = t * each + i;
                        if t == 0 && i % 7 == 0 {
                            ReplyBatch::reading(batch, writer, i % 2 == 0).unwrap();
                        }
                        // Payload sizes on both sides of the batching bound.
                        let len = (id as usize * 977) % (2 * BATCH_PAYLOAD_MAX);
                        let mut header = id.to_le_bytes().to_vec();
                        header.extend_from_slice(&(len as u32).to_le_bytes());
                        let payload = vec![id as u8; len];
                        ReplyBatch::reply(batch, writer, &header, &payload, id % 3 != 0).unwrap();
                    }
                });
            }
        });
        ReplyBatch::flush(&batch, &writer).unwrap();
        let out = writer.into_inner().unwrap();
        let mut seen = vec![false; (threads * each) as usize];
        let mut at = 0;
        while at < out.len() {
            let id = u32::from_le_bytes(out[at..at + 4].try_into().unwrap());
            let len = u32::from_le_bytes(out[at + 4..at + 8].try_into().unwrap()) as usize;
            assert_eq!(len, (id as usize * 977) % (2 * BATCH_PAYLOAD_MAX));
            assert!(
                out[at + 8..at + 8 + len].iter().all(|&b| b == id as u8),
                "reply {id} was split or mixed"
            );
            assert!(
                !std::mem::replace(&mut seen[id as usize], true),
                "reply {id} twice"
            );
            at += 8 + len;
        }
        assert!(seen.iter().all(|&s| s), "a reply was never sent");
        assert!(batch.lock().unwrap().pending.is_empty());
    }
}
