//! Test helpers: a temporary directory, an in-process server on a Unix socket, a raw client
//! that speaks the protocol byte by byte, and the lookup of real client tools (which fails
//! the test under CI when a tool is missing, and skips it with a note otherwise).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use nbd::proto::*;
use nbd::{Backend, Export, ExportInfo, MemBackend, Server, ServerOptions};

pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "nbdt-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server on a Unix socket in its own directory; stops (and joins) when dropped.
pub struct TestServer {
    pub server: Arc<Server>,
    pub socket: PathBuf,
    pub backends: Vec<Arc<MemBackend>>,
    thread: Option<JoinHandle<()>>,
    _dir: TempDir,
}

impl TestServer {
    /// Memory exports of the given names and sizes.
    pub fn start(exports: &[(&str, usize)]) -> TestServer {
        Self::start_with(exports, ServerOptions::default())
    }

    pub fn start_with(exports: &[(&str, usize)], opts: ServerOptions) -> TestServer {
        let backends: Vec<Arc<MemBackend>> = exports
            .iter()
            .map(|(_, size)| Arc::new(MemBackend::new(*size)))
            .collect();
        let ex = exports
            .iter()
            .zip(&backends)
            .map(|((name, _), b)| Export {
                info: ExportInfo::new(*name, b.size()),
                backend: Arc::clone(b) as Arc<dyn Backend>,
            })
            .collect();
        let mut t = Self::start_exports(ex, opts);
        t.backends = backends;
        t
    }

    /// Exports as given (`backends` is left empty).
    pub fn start_exports(ex: Vec<Export>, opts: ServerOptions) -> TestServer {
        let dir = TempDir::new("srv");
        let socket = dir.path().join("nbd.sock");
        let backends = Vec::new();
        let server = Server::new(ex, opts);
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let s2 = Arc::clone(&server);
        let thread = std::thread::spawn(move || s2.serve_unix(listener).unwrap());
        TestServer {
            server,
            socket,
            backends,
            thread: Some(thread),
            _dir: dir,
        }
    }

    pub fn uri(&self, export: &str) -> String {
        format!("nbd+unix:///{export}?socket={}", self.socket.display())
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.server.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The path of a client tool. Missing: under CI (env CI set) the test fails; otherwise it is
/// skipped with a note (None).
pub fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        if std::env::var_os("CI").is_some() {
            panic!("{name} is required under CI (install libnbd-bin, qemu-utils and fio: .ci/run does)");
        }
        eprintln!("note: {name} not found; skipping this test (it fails under CI)");
    }
    found
}

/// Deterministic pseudo-random bytes.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

/// A client speaking the protocol by hand.
pub struct RawClient {
    pub s: UnixStream,
    pub structured: bool,
}

pub fn opt_bytes(option: u32, data: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&IHAVEOPT.to_be_bytes());
    v.extend_from_slice(&option.to_be_bytes());
    v.extend_from_slice(&(data.len() as u32).to_be_bytes());
    v.extend_from_slice(data);
    v
}

pub fn go_bytes(name: &str) -> Vec<u8> {
    let mut d = Vec::new();
    d.extend_from_slice(&(name.len() as u32).to_be_bytes());
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&1u16.to_be_bytes());
    d.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
    d
}

pub fn req_bytes(flags: u16, cmd: u16, handle: u64, offset: u64, len: u32) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
    v.extend_from_slice(&flags.to_be_bytes());
    v.extend_from_slice(&cmd.to_be_bytes());
    v.extend_from_slice(&handle.to_be_bytes());
    v.extend_from_slice(&offset.to_be_bytes());
    v.extend_from_slice(&len.to_be_bytes());
    v
}

/// A reply as the raw client sees it.
#[derive(Debug, PartialEq, Eq)]
pub struct Reply {
    pub handle: u64,
    pub error: u32,
    pub data: Vec<u8>,
}

impl RawClient {
    /// Connects and reads the greeting.
    pub fn connect(path: &Path) -> RawClient {
        let s = UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut c = RawClient {
            s,
            structured: false,
        };
        let g = c.read_n(18);
        assert_eq!(&g[..8], b"NBDMAGIC");
        assert_eq!(&g[8..16], b"IHAVEOPT");
        c
    }

    /// Connects, negotiates (optionally structured replies) and enters transmission.
    pub fn open(path: &Path, export: &str, structured: bool) -> RawClient {
        let mut c = Self::connect(path);
        c.send(&3u32.to_be_bytes());
        if structured {
            c.send(&opt_bytes(OPT_STRUCTURED_REPLY, &[]));
            let r = c.read_opt_reply();
            assert_eq!(r.1, REP_ACK);
            c.structured = true;
        }
        c.send(&opt_bytes(OPT_GO, &go_bytes(export)));
        loop {
            let r = c.read_opt_reply();
            if r.1 == REP_ACK {
                break;
            }
            assert_eq!(r.1, REP_INFO, "GO failed: {r:?}");
        }
        c
    }

    pub fn send(&mut self, b: &[u8]) {
        self.s.write_all(b).unwrap();
    }

    pub fn read_n(&mut self, n: usize) -> Vec<u8> {
        let mut b = vec![0u8; n];
        self.s.read_exact(&mut b).unwrap();
        b
    }

    /// (option, type, data)
    pub fn read_opt_reply(&mut self) -> (u32, u32, Vec<u8>) {
        let h = self.read_n(20);
        assert_eq!(u64::from_be_bytes(h[..8].try_into().unwrap()), REP_MAGIC);
        let opt = u32::from_be_bytes(h[8..12].try_into().unwrap());
        let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
        (opt, kind, self.read_n(len))
    }

    /// Reads one reply; `read_len` tells how much data a successful simple read reply carries
    /// (the caller knows which request it answers: see [`RawClient::read_reply_for`]).
    pub fn read_reply(&mut self, read_len: impl Fn(u64) -> usize) -> Reply {
        let m = self.read_n(4);
        let magic = u32::from_be_bytes(m[..4].try_into().unwrap());
        if magic == SIMPLE_REPLY_MAGIC {
            let h = self.read_n(12);
            let error = u32::from_be_bytes(h[..4].try_into().unwrap());
            let handle = u64::from_be_bytes(h[4..12].try_into().unwrap());
            let data = if error == 0 {
                let n = read_len(handle);
                self.read_n(n)
            } else {
                Vec::new()
            };
            return Reply {
                handle,
                error,
                data,
            };
        }
        assert_eq!(magic, STRUCTURED_REPLY_MAGIC);
        let h = self.read_n(16);
        let flags = u16::from_be_bytes(h[..2].try_into().unwrap());
        let kind = u16::from_be_bytes(h[2..4].try_into().unwrap());
        let handle = u64::from_be_bytes(h[4..12].try_into().unwrap());
        let len = u32::from_be_bytes(h[12..16].try_into().unwrap()) as usize;
        assert!(flags & REPLY_FLAG_DONE != 0, "we always send one chunk");
        let payload = self.read_n(len);
        match kind {
            REPLY_TYPE_OFFSET_DATA => Reply {
                handle,
                error: 0,
                data: payload[8..].to_vec(),
            },
            REPLY_TYPE_NONE => Reply {
                handle,
                error: 0,
                data: Vec::new(),
            },
            // The raw payload: context id, then (length, flags) descriptors.
            REPLY_TYPE_BLOCK_STATUS => Reply {
                handle,
                error: 0,
                data: payload,
            },
            REPLY_TYPE_ERROR => Reply {
                handle,
                error: u32::from_be_bytes(payload[..4].try_into().unwrap()),
                data: payload[6..].to_vec(),
            },
            k => panic!("unexpected chunk type {k}"),
        }
    }

    /// Reads one reply to a request that is not a read (or a read of `n` bytes).
    pub fn read_reply_for(&mut self, n: usize) -> Reply {
        self.read_reply(|_| n)
    }

    /// True when the server closed the connection: end of file or a reset within the read
    /// timeout (a timeout is not a close: the connection is still open).
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        match self.s.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}
