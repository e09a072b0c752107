//! A member that is an NBD export (`nbd://HOST[:PORT]/EXPORT`, `nbd+unix:///EXPORT?socket=PATH`,
//! and over TLS `nbds://[NAME@]HOST[:PORT]/EXPORT?tls-certificates=DIR` or
//! `...?tls-psk-file=FILE`, libnbd's spelling; see [`nbd::client::Target`]), so that a pool
//! can span machines and tests can put real faults under a pool (nbdkit's
//! `error` and `delay` filters).
//!
//! Requests go over a small set of connections (one per concurrent caller, kept for reuse) made
//! with [`nbd::client::Client`]. Every socket read and write is bounded by the I/O timeout
//! ([`io_timeout`], 30 s unless `raidforge serve --io-timeout` says otherwise). A connection
//! that breaks (dropped, reset, timed out) is replaced by a new one and the request is sent
//! again (positional reads and writes can be repeated) until the timeout has passed since the
//! request began; only then does the request fail, and the pool fails the member. An error the
//! server *replies* with (EIO from a dying disk) is returned at once: that is the member's
//! answer, not the network's.
//!
//! Not done: locking against a second raidforge process using the same export (a file
//! member's `flock` has no NBD equivalent).

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nbd::client::{Client, Target};

use crate::Member;

/// Milliseconds of the I/O timeout of NBD members opened from now on.
static IO_TIMEOUT_MS: AtomicU64 = AtomicU64::new(30_000);

/// The I/O timeout of NBD members opened from now on.
pub fn io_timeout() -> Duration {
    Duration::from_millis(IO_TIMEOUT_MS.load(Ordering::Relaxed))
}

/// Sets the I/O timeout of NBD members opened from now on (`raidforge serve --io-timeout`).
pub fn set_io_timeout(t: Duration) {
    IO_TIMEOUT_MS.store(t.as_millis().max(1) as u64, Ordering::Relaxed);
}

/// Whether a member path names an NBD export rather than a file or device.
pub fn is_nbd_path(p: &std::path::Path) -> bool {
    p.to_str().is_some_and(nbd::client::is_uri)
}

/// An NBD export as a member.
pub struct NbdMember {
    uri: String,
    addr: Target,
    size: u64,
    timeout: Duration,
    idle: Mutex<Vec<Client>>,
    /// Set when a request gave up because no connection could be made again within the
    /// timeout (the server is gone); cleared by a request that gets through.
    gone: Mutex<Option<String>>,
}

impl NbdMember {
    /// Connects to the export named by `uri` (its size is the member's).
    pub fn open(uri: &str) -> io::Result<NbdMember> {
        let addr =
            Target::parse(uri).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let timeout = io_timeout();
        let c = Client::connect_target(&addr, Some(timeout)).map_err(|e| {
            io::Error::new(e.kind(), format!("connecting to the NBD member {uri}: {e}"))
        })?;
        if c.read_only() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("the NBD export {uri} is read-only: a member must be writable"),
            ));
        }
        Ok(NbdMember {
            uri: uri.to_string(),
            addr,
            size: c.size(),
            timeout,
            idle: Mutex::new(vec![c]),
            gone: Mutex::new(None),
        })
    }

    /// Runs `f` on a connection, reconnecting and repeating while connections break, until
    /// the timeout has passed since the start.
    fn with_client(&self, mut f: impl FnMut(&mut Client) -> io::Result<()>) -> io::Result<()> {
        let start = Instant::now();
        let mut last: Option<io::Error>;
        // The last attempt was a connection that could not be made.
        let mut unreachable;
        loop {
            unreachable = false;
            let taken = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let mut c = match taken {
                Some(c) => c,
                None => match Client::connect_target(&self.addr, Some(self.timeout)) {
                    Ok(c) => c,
                    Err(e) => {
                        last = Some(e);
                        unreachable = true;
                        if start.elapsed() >= self.timeout {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                        continue;
                    }
                },
            };
            let r = f(&mut c);
            if !c.is_broken() {
                self.idle.lock().unwrap_or_else(|e| e.into_inner()).push(c);
                *self.gone.lock().unwrap_or_else(|e| e.into_inner()) = None;
                return r;
            }
            last = r.err();
            if start.elapsed() >= self.timeout {
                break;
            }
        }
        let why = last.map(|e| e.to_string()).unwrap_or_default();
        if unreachable {
            *self.gone.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!(
                "the NBD server of {} could not be reached again within {:?} ({why})",
                self.uri, self.timeout
            ));
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "NBD member {}: no answer within {:?} ({why})",
                self.uri, self.timeout
            ),
        ))
    }
}

impl Member for NbdMember {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.with_client(|c| c.read_at(buf, offset))
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.with_client(|c| c.write_at(buf, offset, false))
    }
    fn flush(&self) -> io::Result<()> {
        self.with_client(|c| c.flush())
    }
    fn size_bytes(&self) -> u64 {
        self.size
    }
    fn gone(&self) -> Option<String> {
        self.gone.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    fn describe(&self) -> String {
        self.uri.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nbd::{MemBackend, Server, ServerOptions};
    use std::sync::Arc;

    #[test]
    fn reads_writes_and_reconnects_after_the_server_restarts() {
        let dir = std::env::temp_dir().join(format!("rf-nbdm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("m.sock");
        let backend = Arc::new(MemBackend::new(1 << 20));
        let serve = |b: Arc<MemBackend>| {
            let _ = std::fs::remove_file(&sock);
            let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
            let export = nbd::Export {
                info: nbd::ExportInfo::new("m", 1 << 20),
                backend: b,
            };
            let s = Server::new(vec![export], ServerOptions::default());
            let s2 = s.clone();
            let h = std::thread::spawn(move || s2.serve_unix(l).unwrap());
            (s, h)
        };
        let (s1, h1) = serve(backend.clone());
        let uri = format!("nbd+unix:///m?socket={}", sock.display());
        let m = NbdMember::open(&uri).unwrap();
        assert_eq!(m.size_bytes(), 1 << 20);
        m.write_at(&[7u8; 4096], 8192).unwrap();
        // The server goes away and comes back: the next request reconnects.
        s1.stop();
        h1.join().unwrap();
        let (s2, h2) = serve(backend);
        let mut got = vec![0u8; 4096];
        m.read_at(&mut got, 8192).unwrap();
        assert_eq!(got, vec![7u8; 4096]);
        assert_eq!(m.gone(), None);
        s2.stop();
        h2.join().unwrap();
        // Gone for good: the request fails after the timeout and the member says why.
        let _ = std::fs::remove_file(&sock);
        let m = NbdMember {
            timeout: Duration::from_millis(300),
            ..m
        };
        assert!(m.read_at(&mut got, 0).is_err());
        let gone = m.gone().expect("gone after the server went away");
        assert!(gone.contains("could not be reached again"), "{gone}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
