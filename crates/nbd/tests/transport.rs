//! The threaded transport with hand-made clients: many requests in flight per connection with
//! replies out of order, several connections, and malformed input from one client that never
//! disturbs the others.

mod common;

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use common::*;
use nbd::proto::*;
use nbd::{Backend, Export, ExportInfo, MemBackend, Server, ServerOptions};

#[test]
fn write_read_flush_fua_trim_zeroes_simple_and_structured() {
    let t = TestServer::start(&[("disk", 1 << 20)]);
    for structured in [false, true] {
        let mut c = RawClient::open(&t.socket, "disk", structured);
        let data = pattern(structured as u64, 10_000);
        let mut w = req_bytes(0, CMD_WRITE, 1, 1234, data.len() as u32);
        w.extend_from_slice(&data);
        c.send(&w);
        assert_eq!(
            c.read_reply_for(0),
            Reply {
                handle: 1,
                error: 0,
                data: vec![]
            }
        );
        c.send(&req_bytes(0, CMD_READ, 2, 1234, data.len() as u32));
        assert_eq!(c.read_reply_for(data.len()).data, data);
        let before = t.backends[0].flushes();
        c.send(&req_bytes(0, CMD_FLUSH, 3, 0, 0));
        assert_eq!(c.read_reply_for(0).error, 0);
        let mut w = req_bytes(CMD_FLAG_FUA, CMD_WRITE, 4, 0, 3);
        w.extend_from_slice(b"fua");
        c.send(&w);
        assert_eq!(c.read_reply_for(0).error, 0);
        assert_eq!(
            t.backends[0].flushes(),
            before + 2,
            "FLUSH and FUA reach the backend"
        );
        c.send(&req_bytes(0, CMD_WRITE_ZEROES, 5, 1234, 100));
        assert_eq!(c.read_reply_for(0).error, 0);
        c.send(&req_bytes(0, CMD_TRIM, 6, 0, 4096));
        assert_eq!(c.read_reply_for(0).error, 0);
        c.send(&req_bytes(0, CMD_READ, 7, 1230, 110));
        let got = c.read_reply_for(110).data;
        assert_eq!(&got[..4], &t.backends[0].snapshot()[1230..1234]);
        assert!(got[4..104].iter().all(|&b| b == 0));
        assert_eq!(&got[104..], &data[100..106]);
        c.send(&req_bytes(0, CMD_DISC, 8, 0, 0));
        assert!(c.closed());
    }
}

/// A backend whose read of the first block waits until the test opens the gate (or, if it
/// never does, fails after `GATE_TIMEOUT`): replies the client receives while that read waits
/// were served while it was in flight.
struct Gated {
    mem: MemBackend,
    open: Mutex<bool>,
    opened: Condvar,
}

/// Below the test client's 10 s read timeout, so a server that served requests one at a time
/// shows up as the gated read's error reply arriving first.
const GATE_TIMEOUT: Duration = Duration::from_secs(8);

impl Gated {
    fn open_gate(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

impl Backend for Gated {
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        if offset == 0 {
            let open = self.open.lock().unwrap();
            let (open, _) = self
                .opened
                .wait_timeout_while(open, GATE_TIMEOUT, |open| !*open)
                .unwrap();
            if !*open {
                return Err(std::io::Error::other("the gate was never opened"));
            }
        }
        self.mem.read(offset, buf)
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.mem.write(offset, data)
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Requests with large payloads (read from the socket straight into their buffers, headers
/// read alone between them) pipelined with small ones (many per read), in any mix: every
/// write lands and every read returns the right bytes. (Requests in flight together may run
/// in any order, so no two writes overlap and the reads are of a region no write of the mix
/// touches, filled first.)
#[test]
fn large_and_small_requests_pipelined_in_any_mix() {
    const MIB: usize = 1 << 20;
    const SIZE: usize = 12 * MIB;
    let t = TestServer::start(&[("disk", SIZE)]);
    let mut c = RawClient::open(&t.socket, "disk", false);
    let mut model = vec![0u8; SIZE];
    // The last MiB: filled, then only read.
    let fill = pattern(99, MIB);
    let filled = SIZE - MIB;
    let mut w = req_bytes(0, CMD_WRITE, 1, filled as u64, MIB as u32);
    w.extend_from_slice(&fill);
    c.send(&w);
    assert_eq!(c.read_reply_for(0).error, 0);
    model[filled..].copy_from_slice(&fill);
    let sizes = [MIB, 4096, 512, 256 << 10, 65536, 65535, 8192, MIB, 100];
    let mut handle = 1u64;
    let mut reads: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut lens = std::collections::HashMap::new();
    let mut stream = Vec::new();
    let mut at = 0;
    for round in 0..3u64 {
        for (i, &n) in sizes.iter().enumerate() {
            at += 4096 - at % 4096 + (i * 512) % 4096;
            let data = pattern(round * 100 + i as u64, n);
            handle += 1;
            stream.extend_from_slice(&req_bytes(0, CMD_WRITE, handle, at as u64, n as u32));
            stream.extend_from_slice(&data);
            model[at..at + n].copy_from_slice(&data);
            at += n;
            lens.insert(handle, 0);
            // Reads of each size from the filled region, between the writes.
            handle += 1;
            let rn = n.min(MIB / 2);
            let ra = filled + (i * 40_009) % (MIB / 2);
            stream.extend_from_slice(&req_bytes(0, CMD_READ, handle, ra as u64, rn as u32));
            reads.push((handle, fill[ra - filled..ra - filled + rn].to_vec()));
            lens.insert(handle, rn);
        }
    }
    // Sent from another thread while the replies are read (the socket buffers hold less).
    let mut w = c.s.try_clone().unwrap();
    let th = std::thread::spawn(move || w.write_all(&stream).unwrap());
    let mut replies = std::collections::HashMap::new();
    for _ in 0..lens.len() {
        let r = c.read_reply(|h| lens[&h]);
        assert_eq!(r.error, 0, "request {}", r.handle);
        replies.insert(r.handle, r.data);
    }
    th.join().unwrap();
    for (h, want) in reads {
        assert!(replies[&h] == want, "read {h} returned other bytes");
    }
    assert!(at <= filled);
    let mut back = vec![0u8; SIZE];
    nbd::Backend::read(&*t.backends[0], 0, &mut back).unwrap();
    assert!(back == model, "the backend holds what was written");
    drop(c);
    still_serves(&t);
}

#[test]
fn replies_leave_in_completion_order_matched_by_handle() {
    let dir = TempDir::new("ooo");
    let sock = dir.path().join("s");
    let backend = Arc::new(Gated {
        mem: MemBackend::new(1 << 20),
        open: Mutex::new(false),
        opened: Condvar::new(),
    });
    let server = Server::new(
        vec![Export {
            info: ExportInfo::new("x", 1 << 20),
            backend: backend.clone(),
        }],
        ServerOptions::default(),
    );
    let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let s2 = Arc::clone(&server);
    let th = std::thread::spawn(move || s2.serve_unix(l).unwrap());
    let mut c = RawClient::open(&sock, "x", true);
    // The gated read first, then 20 others: all 20 are answered while the gated one waits,
    // and it is answered once the gate opens.
    c.send(&req_bytes(0, CMD_READ, 100, 0, 512));
    for h in 0..20u64 {
        c.send(&req_bytes(0, CMD_READ, h, 4096 * (h + 1), 512));
    }
    let first: Vec<Reply> = (0..20).map(|_| c.read_reply_for(512)).collect();
    let mut fast: Vec<u64> = first.iter().map(|r| r.handle).collect();
    assert!(
        first.iter().all(|r| r.error == 0 && r.data.len() == 512),
        "replies before the gate opened: {:?}",
        first
            .iter()
            .map(|r| (r.handle, r.error))
            .collect::<Vec<_>>()
    );
    fast.sort();
    assert_eq!(fast, (0..20).collect::<Vec<_>>());
    backend.open_gate();
    let last = c.read_reply_for(512);
    assert_eq!((last.handle, last.error), (100, 0));
    server.stop();
    th.join().unwrap();
}

#[test]
fn many_connections_at_once() {
    let t = TestServer::start(&[("a", 4 << 20), ("b", 1 << 20)]);
    let threads: Vec<_> = (0..6u64)
        .map(|i| {
            let sock = t.socket.clone();
            std::thread::spawn(move || {
                let export = if i % 2 == 0 { "a" } else { "b" };
                let mut c = RawClient::open(&sock, export, i % 3 == 0);
                // 32 writes in flight, then 32 reads in flight, of this client's own region.
                let base = i * 131_072;
                let blocks: Vec<Vec<u8>> = (0..32).map(|k| pattern(i * 100 + k, 4096)).collect();
                let mut batch = Vec::new();
                for (k, b) in blocks.iter().enumerate() {
                    batch.extend_from_slice(&req_bytes(
                        0,
                        CMD_WRITE,
                        k as u64,
                        base + 4096 * k as u64,
                        4096,
                    ));
                    batch.extend_from_slice(b);
                }
                c.send(&batch);
                for _ in 0..32 {
                    assert_eq!(c.read_reply_for(0).error, 0);
                }
                let mut batch = Vec::new();
                for k in 0..32u64 {
                    batch.extend_from_slice(&req_bytes(
                        0,
                        CMD_READ,
                        1000 + k,
                        base + 4096 * k,
                        4096,
                    ));
                }
                c.send(&batch);
                for _ in 0..32 {
                    let r = c.read_reply_for(4096);
                    assert_eq!(r.data, blocks[(r.handle - 1000) as usize]);
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    assert!(
        t.server
            .stats()
            .connections
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 6
    );
}

/// A working client on the same server, checked after each misbehaving one.
fn still_serves(t: &TestServer) {
    let mut c = RawClient::open(&t.socket, "disk", false);
    let mut w = req_bytes(0, CMD_WRITE, 1, 0, 4);
    w.extend_from_slice(b"live");
    c.send(&w);
    assert_eq!(c.read_reply_for(0).error, 0);
    c.send(&req_bytes(0, CMD_READ, 2, 0, 4));
    assert_eq!(c.read_reply_for(4).data, b"live");
}

#[test]
fn malformed_clients_get_errors_or_a_clean_disconnect_and_others_keep_working() {
    let t = TestServer::start(&[("disk", 1 << 20)]);
    // A long-lived client that works throughout.
    let mut bystander = RawClient::open(&t.socket, "disk", true);
    let mut probe = |n: u64| {
        bystander.send(&req_bytes(0, CMD_READ, n, 0, 16));
        assert_eq!(bystander.read_reply_for(16).handle, n);
    };

    // Bad option magic: disconnected.
    let mut c = RawClient::connect(&t.socket);
    c.send(&1u32.to_be_bytes());
    let mut o = opt_bytes(OPT_LIST, &[]);
    o[0] = b'X';
    c.send(&o);
    assert!(c.closed());
    probe(1);

    // Unknown client flags: disconnected.
    let mut c = RawClient::connect(&t.socket);
    c.send(&0xffu32.to_be_bytes());
    assert!(c.closed());

    // Unknown option: NBD_REP_ERR_UNSUP, and negotiation goes on.
    let mut c = RawClient::connect(&t.socket);
    c.send(&1u32.to_be_bytes());
    c.send(&opt_bytes(0x1234, b"whatever"));
    assert_eq!(c.read_opt_reply().1, REP_ERR_UNSUP);
    c.send(&opt_bytes(OPT_GO, &go_bytes("nosuch")));
    assert_eq!(c.read_opt_reply().1, REP_ERR_UNKNOWN);
    c.send(&opt_bytes(OPT_LIST, &[]));
    let r = c.read_opt_reply();
    assert_eq!((r.1, &r.2[4..]), (REP_SERVER, &b"disk"[..]));
    assert_eq!(c.read_opt_reply().1, REP_ACK);
    c.send(&opt_bytes(OPT_ABORT, &[]));
    assert_eq!(c.read_opt_reply().1, REP_ACK);
    assert!(c.closed());
    probe(2);

    // EXPORT_NAME of an unknown export: the session ends.
    let mut c = RawClient::connect(&t.socket);
    c.send(&1u32.to_be_bytes());
    c.send(&opt_bytes(OPT_EXPORT_NAME, b"nosuch"));
    assert!(c.closed());

    // Requests beyond the export and oversized requests: errors, connection continues.
    for structured in [false, true] {
        let mut c = RawClient::open(&t.socket, "disk", structured);
        c.send(&req_bytes(0, CMD_READ, 1, (1 << 20) - 100, 200));
        assert_eq!(c.read_reply_for(0).error, EINVAL);
        let mut w = req_bytes(0, CMD_WRITE, 2, 1 << 20, 8);
        w.extend_from_slice(&[1; 8]);
        c.send(&w);
        assert_eq!(c.read_reply_for(0).error, ENOSPC);
        c.send(&req_bytes(0, CMD_READ, 3, 0, (32 << 20) + 1));
        assert_eq!(c.read_reply_for(0).error, EOVERFLOW);
        let big = (32usize << 20) + 512;
        let mut w = req_bytes(0, CMD_WRITE, 4, 0, big as u32);
        w.resize(w.len() + big, 0xab);
        c.send(&w);
        assert_eq!(c.read_reply_for(0).error, EOVERFLOW);
        c.send(&req_bytes(0, 99, 5, 0, 0));
        assert_eq!(c.read_reply_for(0).error, EINVAL);
        c.send(&req_bytes(0, CMD_READ, 6, 0, 4));
        let r = c.read_reply_for(4);
        assert_eq!((r.handle, r.error), (6, 0));
        // Nothing of the refused writes reached the export.
        assert!(!t.backends[0].snapshot().contains(&0xab));
        // Then a bad request magic: disconnected.
        let mut bad = req_bytes(0, CMD_READ, 7, 0, 4);
        bad[1] = 0;
        c.send(&bad);
        assert!(c.closed());
        probe(3 + structured as u64);
    }

    // A client that disconnects in the middle of a write payload, and one that disconnects
    // with requests in flight.
    let mut c = RawClient::open(&t.socket, "disk", false);
    let mut w = req_bytes(0, CMD_WRITE, 1, 4096, 65536);
    w.extend_from_slice(&[7u8; 1000]);
    c.send(&w);
    drop(c);
    let mut c = RawClient::open(&t.socket, "disk", true);
    let mut batch = Vec::new();
    for h in 0..16 {
        batch.extend_from_slice(&req_bytes(0, CMD_READ, h, 0, 65536));
    }
    c.send(&batch);
    drop(c);
    // A client that stops in the middle of a header and hangs up.
    let mut c = RawClient::open(&t.socket, "disk", false);
    c.send(&req_bytes(0, CMD_READ, 1, 0, 4)[..11]);
    drop(c);
    // And one that sends garbage right after connecting.
    let mut c = RawClient::connect(&t.socket);
    let _ = c.s.write_all(&pattern(5, 5000));
    assert!(c.closed());

    probe(10);
    still_serves(&t);
    assert!(
        !t.backends[0].snapshot()[4096..8192].contains(&7),
        "a truncated write is not executed"
    );
    let errs = t
        .server
        .stats()
        .protocol_errors
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(errs >= 5, "protocol errors counted: {errs}");
}

#[test]
fn tcp_on_loopback_and_stop_ends_connections() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let backend = Arc::new(MemBackend::new(65536));
    let server = Server::new(
        vec![Export {
            info: ExportInfo::new("t", 65536),
            backend: backend.clone(),
        }],
        ServerOptions::default(),
    );
    let s2 = Arc::clone(&server);
    let (done, stopped) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        s2.serve_tcp(listener).unwrap();
        let _ = done.send(());
    });
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut g = [0u8; 18];
    std::io::Read::read_exact(&mut s, &mut g).unwrap();
    assert_eq!(&g[..8], b"NBDMAGIC");
    s.write_all(&3u32.to_be_bytes()).unwrap();
    s.write_all(&opt_bytes(OPT_EXPORT_NAME, b"t")).unwrap();
    let mut info = [0u8; 10];
    std::io::Read::read_exact(&mut s, &mut info).unwrap();
    assert_eq!(u64::from_be_bytes(info[..8].try_into().unwrap()), 65536);
    let mut w = req_bytes(0, CMD_WRITE, 9, 100, 3);
    w.extend_from_slice(b"tcp");
    s.write_all(&w).unwrap();
    let mut r = [0u8; 16];
    std::io::Read::read_exact(&mut s, &mut r).unwrap();
    assert_eq!(&r[4..8], &[0, 0, 0, 0]);
    assert_eq!(&backend.snapshot()[100..103], b"tcp");
    // Stop: the listener ends (the serving thread returns) and so does the open connection:
    // the client reads end of file or a reset, not its 10 s read timeout.
    // (The 30 s bound only turns a server that never stops into a failure, not a hang.)
    server.stop();
    stopped
        .recv_timeout(Duration::from_secs(30))
        .expect("serve_tcp did not return within 30 s of stop()");
    let mut b = [0u8; 1];
    let end = std::io::Read::read(&mut s, &mut b);
    assert!(
        matches!(&end, Ok(0))
            || matches!(&end, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "the connection outlived the server's stop: {end:?}"
    );
}

/// The crate's own client against the server: reads what it wrote (across the request split),
/// flushes, and turns a range past the end and an unknown export into errors that say so.
#[test]
fn the_client_reads_writes_and_flushes_through_the_server() {
    use nbd::client::{Address, Client, CLIENT_MAX_REQUEST};
    let size = 3 * CLIENT_MAX_REQUEST + 8192;
    let t = TestServer::start(&[("disk", size)]);
    let addr = Address::parse(&t.uri("disk")).unwrap();
    let mut c = Client::connect(&addr).unwrap();
    assert_eq!(c.size(), size as u64);
    assert!(!c.read_only());
    let data = pattern(7, CLIENT_MAX_REQUEST + 12288);
    c.write_at(&data, 4096, false).unwrap();
    c.flush().unwrap();
    c.write_at(&data[..4096], 0, true).unwrap();
    let mut back = vec![0u8; data.len()];
    c.read_at(&mut back, 4096).unwrap();
    assert_eq!(back, data);
    let mut mem = vec![0u8; data.len()];
    nbd::Backend::read(&*t.backends[0], 4096, &mut mem).unwrap();
    assert_eq!(mem, data, "the backend holds what the client wrote");
    assert_eq!(t.backends[0].flushes(), 2, "one flush, one FUA write");
    let e = c.read_at(&mut [0u8; 8192], size as u64 - 4096).unwrap_err();
    assert!(e.to_string().contains("past the end"), "{e}");
    let e = Client::connect(&Address::parse(&t.uri("nope")).unwrap())
        .err()
        .expect("unknown export refused");
    assert!(e.to_string().contains("no such export"), "{e}");
    drop(c);
    still_serves(&t);
}

/// A connection that negotiated structured replies and selected `base:allocation` on
/// `export`; returns the client and the context id the server gave.
fn open_with_block_status(socket: &std::path::Path, export: &str) -> (RawClient, u32) {
    let mut c = RawClient::connect(socket);
    c.send(&3u32.to_be_bytes());
    c.send(&opt_bytes(OPT_STRUCTURED_REPLY, &[]));
    assert_eq!(c.read_opt_reply().1, REP_ACK);
    c.structured = true;
    let mut d = Vec::new();
    d.extend_from_slice(&(export.len() as u32).to_be_bytes());
    d.extend_from_slice(export.as_bytes());
    d.extend_from_slice(&1u32.to_be_bytes());
    d.extend_from_slice(&(META_BASE_ALLOCATION.len() as u32).to_be_bytes());
    d.extend_from_slice(META_BASE_ALLOCATION.as_bytes());
    c.send(&opt_bytes(OPT_SET_META_CONTEXT, &d));
    let (o, kind, data) = c.read_opt_reply();
    assert_eq!((o, kind), (OPT_SET_META_CONTEXT, REP_META_CONTEXT));
    assert_eq!(&data[4..], META_BASE_ALLOCATION.as_bytes());
    let id = u32::from_be_bytes(data[..4].try_into().unwrap());
    assert_eq!(c.read_opt_reply().1, REP_ACK);
    c.send(&opt_bytes(OPT_GO, &go_bytes(export)));
    while c.read_opt_reply().1 != REP_ACK {}
    (c, id)
}

/// A block status reply's payload: (context id, descriptors).
fn descriptors(data: &[u8]) -> (u32, Vec<(u32, u32)>) {
    let id = u32::from_be_bytes(data[..4].try_into().unwrap());
    let d = data[4..]
        .chunks_exact(8)
        .map(|c| {
            (
                u32::from_be_bytes(c[..4].try_into().unwrap()),
                u32::from_be_bytes(c[4..].try_into().unwrap()),
            )
        })
        .collect();
    (id, d)
}

#[test]
fn block_status_reports_holes_and_data_of_a_memory_export() {
    const HZ: u32 = STATE_HOLE | STATE_ZERO;
    let t = TestServer::start(&[("disk", 1 << 20)]);
    t.backends[0].write(8192, &[1u8; 5000]).unwrap();
    t.backends[0].write(100_000, b"x").unwrap();
    let (mut c, id) = open_with_block_status(&t.socket, "disk");
    // The whole export: zeros, the 5000 bytes (in blocks 2..=3), zeros, the byte at 100000
    // (block 24), zeros.
    c.send(&req_bytes(0, CMD_BLOCK_STATUS, 1, 0, 1 << 20));
    let r = c.read_reply_for(0);
    assert_eq!((r.handle, r.error), (1, 0));
    assert_eq!(
        descriptors(&r.data),
        (
            id,
            vec![
                (8192, HZ),
                (8192, 0),
                (24 * 4096 - 16384, HZ),
                (4096, 0),
                ((1 << 20) - 25 * 4096, HZ)
            ]
        )
    );
    // REQ_ONE: one descriptor, no longer than asked; an unaligned start.
    c.send(&req_bytes(
        CMD_FLAG_REQ_ONE,
        CMD_BLOCK_STATUS,
        2,
        100,
        50_000,
    ));
    assert_eq!(
        descriptors(&c.read_reply_for(0).data),
        (id, vec![(8092, HZ)])
    );
    c.send(&req_bytes(CMD_FLAG_REQ_ONE, CMD_BLOCK_STATUS, 3, 9000, 10));
    assert_eq!(descriptors(&c.read_reply_for(0).data), (id, vec![(10, 0)]));
    // Writing zeros over the data makes it a hole again (this backend looks at the bytes).
    c.send(&req_bytes(0, CMD_WRITE_ZEROES, 4, 8192, 8192));
    assert_eq!(c.read_reply_for(0).error, 0);
    c.send(&req_bytes(0, CMD_BLOCK_STATUS, 5, 0, 65536));
    assert_eq!(
        descriptors(&c.read_reply_for(0).data),
        (id, vec![(65536, HZ)])
    );
    // Past the end, and empty: EINVAL, and the connection goes on.
    for (h, off, len) in [(6u64, (1u64 << 20) - 1, 2u32), (7, 0, 0)] {
        c.send(&req_bytes(0, CMD_BLOCK_STATUS, h, off, len));
        let r = c.read_reply_for(0);
        assert_eq!((r.handle, r.error), (h, EINVAL));
    }
    c.send(&req_bytes(0, CMD_READ, 8, 100_000, 1));
    assert_eq!(c.read_reply_for(1).data, b"x");

    // Without the context selected, the same request is refused.
    let mut plain = RawClient::open(&t.socket, "disk", true);
    plain.send(&req_bytes(0, CMD_BLOCK_STATUS, 9, 0, 4096));
    let r = plain.read_reply_for(0);
    assert_eq!((r.handle, r.error), (9, EINVAL));
    assert!(String::from_utf8_lossy(&r.data).contains("not negotiated"));
}

/// A backend whose block status fails, and one that reports runs the protocol does not allow
/// as such (past the range, unaligned, empty).
struct OddStatus {
    mem: MemBackend,
    fail: bool,
}

impl Backend for OddStatus {
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.mem.read(offset, buf)
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.mem.write(offset, data)
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn block_status(&self, _offset: u64, _len: u64) -> std::io::Result<Vec<nbd::Extent>> {
        if self.fail {
            return Err(std::io::Error::other("no status today"));
        }
        Ok(vec![
            nbd::Extent::hole(0),
            nbd::Extent::hole(1000),
            nbd::Extent::data(10),
            nbd::Extent::hole(1 << 40),
        ])
    }
}

#[test]
fn block_status_replies_keep_the_rules_whatever_the_backend_says() {
    let dir = TempDir::new("odd");
    let socket = dir.path().join("s.sock");
    let mut info = ExportInfo::new("odd", 1 << 20);
    info.block.minimum = 512;
    let mut failing = ExportInfo::new("failing", 1 << 20);
    failing.block.minimum = 512;
    let exports = vec![
        Export {
            info,
            backend: Arc::new(OddStatus {
                mem: MemBackend::new(1 << 20),
                fail: false,
            }),
        },
        Export {
            info: failing,
            backend: Arc::new(OddStatus {
                mem: MemBackend::new(1 << 20),
                fail: true,
            }),
        },
    ];
    let server = Server::new(exports, ServerOptions::default());
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let s2 = Arc::clone(&server);
    let th = std::thread::spawn(move || s2.serve_unix(listener).unwrap());
    {
        let (mut c, id) = open_with_block_status(&socket, "odd");
        // [0, 1000) hole, [1000, 1010) data, then a hole past the end of the export: the
        // boundary moves to 1024 with the data, and the answer stops at the request's end.
        c.send(&req_bytes(0, CMD_BLOCK_STATUS, 1, 0, 8192));
        assert_eq!(
            descriptors(&c.read_reply_for(0).data),
            (
                id,
                vec![
                    (512, STATE_HOLE | STATE_ZERO),
                    (512, 0),
                    (7168, STATE_HOLE | STATE_ZERO)
                ]
            )
        );
        let (mut c, _) = open_with_block_status(&socket, "failing");
        c.send(&req_bytes(0, CMD_BLOCK_STATUS, 2, 0, 8192));
        let r = c.read_reply_for(0);
        assert_eq!((r.handle, r.error), (2, EIO));
        assert!(String::from_utf8_lossy(&r.data).contains("no status today"));
        // The connection goes on.
        c.send(&req_bytes(0, CMD_READ, 3, 0, 16));
        assert_eq!(c.read_reply_for(16).data, vec![0u8; 16]);
    }
    server.stop();
    th.join().unwrap();
}

/// A backend whose reads each take `READ_TIME` and that keeps the most reads it ran at once.
struct Concurrency {
    mem: MemBackend,
    running: Mutex<(usize, usize)>,
}

const READ_TIME: Duration = Duration::from_millis(150);

impl Concurrency {
    /// The most reads that ran at once since the last call.
    fn take_peak(&self) -> usize {
        std::mem::take(&mut self.running.lock().unwrap().1)
    }
}

impl Backend for Concurrency {
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        {
            let mut r = self.running.lock().unwrap();
            r.0 += 1;
            r.1 = r.1.max(r.0);
        }
        std::thread::sleep(READ_TIME);
        self.running.lock().unwrap().0 -= 1;
        self.mem.read(offset, buf)
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.mem.write(offset, data)
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The connections in transmission share `threads_total` threads: a lone connection runs
/// `workers_per_connection` requests at once, one among four runs one at a time, and it runs
/// its full number again once the others have gone.
#[test]
fn connections_share_the_threads_and_get_them_back() {
    let backend = Arc::new(Concurrency {
        mem: MemBackend::new(1 << 20),
        running: Mutex::new((0, 0)),
    });
    let t = TestServer::start_exports(
        vec![Export {
            info: ExportInfo::new("x", 1 << 20),
            backend: backend.clone(),
        }],
        ServerOptions {
            workers_per_connection: 4,
            threads_total: 4,
            ..ServerOptions::default()
        },
    );
    let transmitting = |n: usize| {
        let started = std::time::Instant::now();
        while t
            .server
            .stats()
            .transmitting
            .load(std::sync::atomic::Ordering::SeqCst)
            != n
        {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "never {n} connections"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    // Eight reads in flight on `c`; the peak number run at once.
    let burst = |c: &mut RawClient| {
        let mut batch = Vec::new();
        for h in 0..8u64 {
            batch.extend_from_slice(&req_bytes(0, CMD_READ, h, 4096 * h, 512));
        }
        c.send(&batch);
        for _ in 0..8 {
            assert_eq!(c.read_reply_for(512).error, 0);
        }
        backend.take_peak()
    };
    let mut c = RawClient::open(&t.socket, "x", false);
    transmitting(1);
    assert_eq!(
        burst(&mut c),
        4,
        "a lone connection runs workers_per_connection at once"
    );
    let others: Vec<RawClient> = (0..3)
        .map(|_| RawClient::open(&t.socket, "x", false))
        .collect();
    transmitting(4);
    // The first request may still find the threads of before (each ends after its request).
    burst(&mut c);
    assert_eq!(
        burst(&mut c),
        1,
        "one of four connections runs 4 / 4 threads"
    );
    drop(others);
    transmitting(1);
    assert_eq!(
        burst(&mut c),
        4,
        "the share comes back when the others leave"
    );
}
