//! Serving [`ServerConn`]s on sockets with threads.
//!
//! Per connection: one thread reads the socket and runs the protocol state machine; requests
//! go through a bounded queue to a small pool of worker threads, which execute them on the
//! export's [`Backend`] and write each reply under the connection's writer mutex as soon as it
//! is ready. Replies therefore leave in completion order, not request order (the client
//! matches them by handle), and a slow request does not hold up the others. The queue bound
//! gives back-pressure: a client that sends faster than the backend works stops being read.
//!
//! Listeners accept without blocking and poll a shutdown flag, so [`Server::stop`] (or a signal
//! handler setting the flag) ends serving within a fraction of a second: open connections stop
//! reading, finish the requests already received, send their replies and close.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::backend::Backend;
use crate::proto::{errno_of, ReplyEncoder, EIO};
use crate::server::{Command, Event, ExportInfo, Request, ServerConfig, ServerConn};

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
    /// Worker threads per connection (requests of one connection executed at once).
    pub workers_per_connection: usize,
    /// Requests queued per connection before the reader stops reading.
    pub queue_depth: usize,
    /// How often blocked reads and accepts look at the shutdown flag.
    pub poll_interval: Duration,
    /// How long a reply may wait for a client that does not read before the connection is
    /// dropped.
    pub write_timeout: Duration,
    /// Where log lines go (nowhere when `None`).
    pub log: Option<Logger>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            workers_per_connection: 4,
            queue_depth: 64,
            poll_interval: Duration::from_millis(100),
            write_timeout: Duration::from_secs(30),
            log: None,
        }
    }
}

/// A socket the server can serve a connection on.
pub trait Stream: Read + Write + Send + 'static {
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
        let config = ServerConfig::new(exports.iter().map(|e| e.info.clone()).collect());
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

    /// Serves one connection to its end (the calling thread reads; workers execute).
    pub fn serve_connection<S: Stream>(self: &Arc<Self>, stream: S, peer: &str) {
        self.stats.connections.fetch_add(1, Ordering::Relaxed);
        self.stats.open.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = self.run_connection(stream, peer) {
            self.log(&format!("{peer}: {e}"));
        }
        self.stats.open.fetch_sub(1, Ordering::Relaxed);
    }

    fn run_connection<S: Stream>(self: &Arc<Self>, mut reader: S, peer: &str) -> io::Result<()> {
        let writer = Arc::new(Mutex::new(reader.try_clone_stream()?));
        reader.set_read_timeout_to(Some(self.opts.poll_interval))?;
        reader.set_write_timeout_to(Some(self.opts.write_timeout))?;
        let mut conn = ServerConn::new(self.config.clone());
        let mut workers: Option<Workers> = None;
        let mut buf = vec![0u8; 256 << 10];
        let send = |bytes: Vec<u8>| -> io::Result<()> {
            if bytes.is_empty() {
                return Ok(());
            }
            let mut w = writer.lock().unwrap_or_else(|e| e.into_inner());
            w.write_all(&bytes)?;
            w.flush()
        };
        let result = (|| -> io::Result<()> {
            send(conn.take_output())?;
            let mut shutdown_seen: Option<Instant> = None;
            loop {
                if self.stopping() && shutdown_seen.is_none() {
                    shutdown_seen = Some(Instant::now());
                    conn.begin_shutdown();
                    if !conn.in_transmission() {
                        // Still negotiating: nothing in flight, just go.
                        return Ok(());
                    }
                }
                if let Some(t) = shutdown_seen {
                    // Requests already received are executed (below, when the workers are
                    // dropped); stop reading new ones after a short grace period.
                    if t.elapsed() > self.opts.poll_interval * 2 {
                        return Ok(());
                    }
                }
                match reader.read(&mut buf) {
                    Ok(0) => conn.receive_eof(),
                    Ok(n) => conn.receive(&buf[..n]),
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock
                                | io::ErrorKind::TimedOut
                                | io::ErrorKind::Interrupted
                        ) =>
                    {
                        continue
                    }
                    Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                        conn.receive_eof();
                    }
                    Err(e) => return Err(e),
                }
                send(conn.take_output())?;
                while let Some(ev) = conn.poll_event() {
                    match ev {
                        Event::Selected { export } => {
                            let e = &self.exports[export];
                            self.log(&format!("{peer}: serving export '{}'", e.info.name));
                            workers = Some(Workers::start(
                                self,
                                Arc::clone(&e.backend),
                                conn.encoder(),
                                Arc::clone(&writer),
                            ));
                        }
                        Event::Request(r) => match &workers {
                            Some(w) => w.submit(r),
                            None => unreachable!("requests follow the export selection"),
                        },
                        Event::Disconnect => return Ok(()),
                        Event::Fatal(e) => {
                            self.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
                            self.log(&format!("{peer}: protocol error, disconnecting: {e}"));
                            return Ok(());
                        }
                    }
                }
            }
        })();
        // Finish what was received (replies go out if the socket still works), then close.
        drop(workers);
        reader.shutdown_both();
        result
    }
}

/// The worker threads of one connection.
struct Workers {
    tx: Option<SyncSender<Request>>,
    handles: Vec<JoinHandle<()>>,
}

impl Workers {
    fn start<S: Stream>(
        server: &Arc<Server>,
        backend: Arc<dyn Backend>,
        enc: ReplyEncoder,
        writer: Arc<Mutex<S>>,
    ) -> Workers {
        let (tx, rx) = sync_channel::<Request>(server.opts.queue_depth.max(1));
        let rx = Arc::new(Mutex::new(rx));
        let handles = (0..server.opts.workers_per_connection.max(1))
            .map(|_| {
                let rx: Arc<Mutex<Receiver<Request>>> = Arc::clone(&rx);
                let backend = Arc::clone(&backend);
                let writer = Arc::clone(&writer);
                let server = Arc::clone(server);
                std::thread::spawn(move || loop {
                    let req = {
                        let r = rx.lock().unwrap_or_else(|e| e.into_inner());
                        r.recv()
                    };
                    let Ok(req) = req else { return };
                    let reply = execute(&*backend, enc, req);
                    server.stats.requests.fetch_add(1, Ordering::Relaxed);
                    let mut w = writer.lock().unwrap_or_else(|e| e.into_inner());
                    // A client that went away cannot get its reply; keep draining the queue.
                    let _ = w
                        .write_all(&reply.0)
                        .and_then(|_| w.write_all(&reply.1))
                        .and_then(|_| w.flush());
                })
            })
            .collect();
        Workers {
            tx: Some(tx),
            handles,
        }
    }

    fn submit(&self, r: Request) {
        if let Some(tx) = &self.tx {
            // Blocks while the queue is full: back-pressure on the reader.
            let _ = tx.send(r);
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.tx = None;
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// Runs one request; returns the reply as header and data.
fn execute(backend: &dyn Backend, enc: ReplyEncoder, req: Request) -> (Vec<u8>, Vec<u8>) {
    let handle = req.handle;
    let fua = req.fua();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(
        || -> io::Result<(Vec<u8>, Vec<u8>)> {
            let sync = |r: io::Result<()>| -> io::Result<()> {
                r?;
                if fua {
                    backend.flush()?;
                }
                Ok(())
            };
            match req.command {
                Command::Read { offset, len } => {
                    let mut data = vec![0u8; len as usize];
                    if len > 0 {
                        backend.read(offset, &mut data)?;
                    }
                    Ok((enc.read_ok_header(handle, offset, len), data))
                }
                Command::Write { offset, data } => {
                    sync(if data.is_empty() {
                        Ok(())
                    } else {
                        backend.write(offset, &data)
                    })?;
                    Ok((enc.ok(handle), Vec::new()))
                }
                Command::Flush => {
                    backend.flush()?;
                    Ok((enc.ok(handle), Vec::new()))
                }
                Command::Trim { offset, len } => {
                    sync(backend.trim(offset, len as u64))?;
                    Ok((enc.ok(handle), Vec::new()))
                }
                Command::WriteZeroes { offset, len } => {
                    sync(if len == 0 {
                        Ok(())
                    } else {
                        backend.write_zeroes(offset, len as u64)
                    })?;
                    Ok((enc.ok(handle), Vec::new()))
                }
            }
        },
    ));
    match outcome {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => (enc.error(handle, errno_of(&e), &e.to_string()), Vec::new()),
        Err(_) => (
            enc.error(handle, EIO, "internal error in the backend"),
            Vec::new(),
        ),
    }
}
