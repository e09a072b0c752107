//! `NBD_FLAG_CAN_MULTI_CONN` promises that a flush on one connection makes durable every
//! write completed on any connection. A served pool keeps that promise because all
//! connections share one `SharedPool` (one set of member handles, no cache per connection)
//! and a flush syncs every present member. Checked here to the bytes with the crash
//! simulator (member writes stay in memory until their member is flushed): writes
//! acknowledged on two connections, a flush on a third, a crash that loses every write not
//! flushed; the first two survive and a write after the flush does not.

use std::path::PathBuf;
use std::sync::Arc;

use dev::crash::{Apply, CrashSim};
use dev::pool::{test_opts, CreateOpts, Pool};
use dev::serve_support::{Concurrency, PoolBackend, SharedPool};
use layout::SchemeKind;
use nbd::client::{Address, Client};
use nbd::{Export, ExportInfo, Server, ServerOptions};

struct Dir(PathBuf);
impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("rf-multiconn-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
}
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn bytes(seed: u8, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed | 1)
        .collect()
}

#[test]
fn a_flush_on_one_connection_makes_writes_of_the_others_durable() {
    for mode in [Concurrency::Stripes, Concurrency::Serial] {
        let dir = Dir::new(&format!("{mode:?}"));
        let desc = dir.0.join("pool.json");
        let mut pool = Pool::create(
            &desc,
            CreateOpts {
                chunk_bytes: 16 << 10,
                ..test_opts(SchemeKind::Raid5, &dir.0, 4, 4 << 20)
            },
        )
        .unwrap();
        let sim = CrashSim::new();
        pool.wrap_members(|i, m| sim.wrap(i, m));
        let sp = SharedPool::new(pool, mode).unwrap();
        let cap = sp.capacity_bytes();
        let mut info = ExportInfo::new("p", cap);
        assert!(info.multi_conn, "served pools advertise CAN_MULTI_CONN");
        info.multi_conn = true;
        let server = Server::new(
            vec![Export {
                info,
                backend: Arc::new(PoolBackend(Arc::clone(&sp))),
            }],
            ServerOptions::default(),
        );
        let socket = dir.0.join("s.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let s2 = Arc::clone(&server);
        let th = std::thread::spawn(move || s2.serve_unix(listener).unwrap());
        let addr = Address::parse(&format!("nbd+unix:///p?socket={}", socket.display())).unwrap();
        let mut a = Client::connect(&addr).unwrap();
        let mut b = Client::connect(&addr).unwrap();
        let mut c = Client::connect(&addr).unwrap();

        let (da, db, dz) = (bytes(1, 70_000), bytes(2, 5000), bytes(3, 4096));
        let (oa, ob, oz) = (12_345u64, cap / 2 + 7, cap - 3 * 4096);
        a.write_at(&da, oa, false).unwrap();
        b.write_at(&db, ob, false).unwrap();
        assert!(
            !sim.pending().is_empty(),
            "{mode:?}: the acknowledged writes are not durable yet"
        );
        c.flush().unwrap();
        assert!(
            sim.pending().is_empty(),
            "{mode:?}: a flush on another connection left writes pending"
        );
        a.write_at(&dz, oz, false).unwrap();
        assert!(!sim.pending().is_empty());
        // The machine crashes: every member write not flushed is lost.
        sim.crash();
        drop((a, b, c));
        server.stop();
        th.join().unwrap();
        drop(server);
        sp.abandon();
        drop(sp);
        sim.finish(|_| Apply::Skip).unwrap();

        let mut p = Pool::open(&desc).unwrap();
        assert!(
            p.read(oa, da.len() as u64).unwrap() == da,
            "{mode:?}: A's write lost"
        );
        assert!(
            p.read(ob, db.len() as u64).unwrap() == db,
            "{mode:?}: B's write lost"
        );
        assert!(
            p.read(oz, dz.len() as u64).unwrap() != dz,
            "{mode:?}: the write after the flush survived a crash that lost it"
        );
        p.close().unwrap();
    }
}
