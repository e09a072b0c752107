//! IDO from the command line: `create --surrogate --zone-size`, zone popularity in `status
//! --json`, `rebuild --policy ido` of a pool no server has (hot zones first, reclaimed, every
//! byte back), the old `--policy sequential` spelling, and the errors.

use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;

use common::{members, ok, raidforge, status, TempDir};

/// `create POOL --scheme SCHEME --disks N --member STEM0.img ... --size SIZE --chunk 16K`.
fn create(dir: &Path, pool: &str, scheme: &str, n: usize, size: &str, extra: &[&str]) {
    let mut rest = vec!["--size", size, "--chunk", "16K"];
    rest.extend_from_slice(extra);
    let disks = n.to_string();
    let stem = pool.trim_end_matches(".json");
    common::create(
        dir,
        pool,
        &["--scheme", scheme, "--disks", &disks],
        &members(stem, n),
        &rest,
    );
}

fn refused(dir: &Path, args: &[&str], words: &[&str]) {
    let out = raidforge(dir, args);
    assert_eq!(out.status.code(), Some(2), "{args:?} should fail");
    let err = String::from_utf8_lossy(&out.stderr);
    for w in words {
        assert!(err.contains(w), "{args:?}: '{w}' not in: {err}");
    }
}

#[test]
fn create_with_surrogate_rebuild_with_ido_and_read_back() {
    let t = TempDir::new("cli-ido", "ido");
    let dir = t.path();
    create(dir, "s.json", "raid1", 2, "4M", &[]);
    create(
        dir,
        "p.json",
        "raid5",
        4,
        "5M",
        &["--surrogate", "s.json", "--zone-size", "384K"],
    );
    let st = status(dir, "p.json");
    assert_eq!(st["ido"]["zone_bytes"], 384 << 10);
    assert_eq!(st["ido"]["zones_total"], 32);
    assert_eq!(st["ido"]["phase"], "normal");
    assert!(st["ido"]["surrogate"].as_str().unwrap().ends_with("s.json"));

    // Writes to zone 5, many times: it becomes the hottest zone, and that is recorded.
    let data: Vec<u8> = (0..64 << 10).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(dir.join("d.bin"), &data).unwrap();
    let at = ((5 * 384) << 10).to_string();
    for _ in 0..4 {
        ok(
            dir,
            &["io", "write", "p.json", "--offset", &at, "--input", "d.bin"],
        );
    }
    let st = status(dir, "p.json");
    assert_eq!(st["ido"]["popular"][0][0], 5, "{}", st["ido"]);

    ok(dir, &["fail", "p.json", "--member", "1"]);
    ok(
        dir,
        &["replace", "p.json", "--member", "1", "--with", "new1.img"],
    );
    refused(
        dir,
        &["rebuild", "p.json", "--policy", "fast"],
        &["unknown rebuild policy", "pr, pro, workout, vdf or ido"],
    );
    let out = ok(dir, &["rebuild", "p.json", "--policy", "ido", "--json"]);
    let last: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(last["done"], true);
    assert_eq!(last["state"], "clean");
    assert_eq!(last["ido"]["hot_zones"][0], 5, "{}", last["ido"]);
    assert_eq!(last["ido"]["rebuilt_order"][0], 5, "{}", last["ido"]);
    assert_eq!(last["ido"]["phase"], "normal");
    assert_eq!(last["ido"]["dmap_entries"], 0);
    ok(dir, &["verify", "p.json"]);
    ok(
        dir,
        &[
            "io", "read", "p.json", "--offset", &at, "--length", "64K", "--output", "back.bin",
        ],
    );
    assert!(std::fs::read(dir.join("back.bin")).unwrap() == data);
}

#[test]
fn old_policy_spelling_and_missing_surrogate() {
    let t = TempDir::new("cli-ido", "errors");
    let dir = t.path();
    create(dir, "p.json", "raid5", 4, "3M", &[]);
    ok(dir, &["fail", "p.json", "--member", "0"]);
    ok(
        dir,
        &["replace", "p.json", "--member", "0", "--with", "new0.img"],
    );
    refused(
        dir,
        &["rebuild", "p.json", "--policy", "ido"],
        &["surrogate", "--surrogate POOL"],
    );
    refused(
        dir,
        &[
            "create",
            "q.json",
            "--scheme",
            "raid1",
            "--disks",
            "2",
            "--member",
            "q0.img",
            "--member",
            "q1.img",
            "--size",
            "2M",
            "--surrogate",
            "nothere.json",
        ],
        &["nothere.json", "create it first"],
    );
    // The schedule's old name still works (with a note), and so does the old --order.
    let out = raidforge(dir, &["rebuild", "p.json", "--policy", "sequential"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rebuild-order sequential"));
    assert_eq!(status(dir, "p.json")["state"], "clean");
    ok(dir, &["rebuild", "p.json", "--order", "parallel"]);
}

#[path = "../../dev/tests/support/ido_rig.rs"]
mod ido_rig;

/// `raidforge serve POOL --socket SOCK --export s` as a child process, killed when dropped.
struct Server(std::process::Child);

impl Server {
    fn start(dir: &Path, pool: &str, sock: &Path) -> Server {
        use std::io::BufRead;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_raidforge"))
            .current_dir(dir)
            .args(["serve", pool, "--export", "s", "--socket"])
            .arg(sock)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let ready = std::io::BufReader::new(out)
            .lines()
            .any(|l| l.is_ok_and(|l| l == "ready"));
        assert!(ready, "raidforge serve {pool} did not get ready");
        Server(child)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The surrogate is a pool that another process serves (`raidforge serve`, reached as
/// nbd+unix://): an IDO rebuild migrates hot zones and redirects requests to it, keeps every
/// byte right while the surrogate's server is killed and started again and while the main
/// pool crashes mid-rebuild, then reclaims everything and empties the D-Map.
#[test]
fn ido_with_a_surrogate_served_by_another_process() {
    use dev::ido::RebuildPolicy;
    use dev::serve_support::{PolicyStep, RebuildCursor};
    use ido_rig::*;
    let mut server = None;
    let mut sock = PathBuf::new();
    let (mut rig, mut sp) = Rig::with_surrogate("remote", |dir| {
        sock = dir.join("s.sock");
        server = Some(Server::start(dir, "sur.json", &sock));
        PathBuf::from(format!("nbd+unix:///s?socket={}", sock.display()))
    });
    let uri = format!("nbd+unix:///s?socket={}", sock.display());
    assert_eq!(
        ido_status(&sp).surrogate.unwrap().to_string_lossy(),
        uri.as_str()
    );
    rig.fail_and_replace(&sp);
    assert!(sp
        .begin_policy_rebuild(Some(RebuildPolicy::Ido), None)
        .unwrap());
    let s = ido_status(&sp);
    assert_eq!(s.surrogate_state, "attached");
    let mut hot: Vec<u64> = s.hot_zones.iter().take(3).copied().collect();
    hot.sort();
    let mut want = HOT.to_vec();
    want.sort();
    assert_eq!(hot, want);
    let mut cur = RebuildCursor::new();
    let (mut server_restarted, mut crashed) = (false, false);
    let (mut max_migrated, mut max_dmap) = (0, 0);
    let mut saw_redirected = (false, false);
    loop {
        rig.workload(&sp, 12);
        let step = sp.policy_step(&ido_rig::opts(), &mut cur).unwrap();
        let s = ido_status(&sp);
        max_migrated = max_migrated.max(s.zones_migrated);
        max_dmap = max_dmap.max(s.dmap_dirty_bytes);
        // (Request counters start over when the main pool restarts.)
        saw_redirected.0 |= s.redirected_reads > 0;
        saw_redirected.1 |= s.redirected_writes > 0;
        if matches!(step, PolicyStep::Done) {
            break;
        }
        if !server_restarted && s.zones_rebuilt == 6 {
            // The surrogate's server dies (SIGKILL) and comes back: the next request
            // reconnects, and what the surrogate acknowledged is still there.
            server_restarted = true;
            assert!(s.dmap_dirty_bytes > 0 && s.zones_migrated >= 3, "{s:?}");
            drop(server.take());
            server = Some(Server::start(rig.dir.0.as_path(), "sur.json", &sock));
            rig.check_all(&sp);
        }
        if !crashed && s.zones_rebuilt == 10 {
            // The main pool's process dies mid-rebuild: the D-Map is found again and the
            // rebuild resumes with the same surrogate.
            crashed = true;
            sp = crash(&rig, sp);
            let again = ido_status(&sp);
            assert_eq!(again.phase, "rebuilding");
            assert_eq!(again.dmap_entries, s.dmap_entries);
            rig.check_all(&sp);
            assert!(sp.begin_policy_rebuild(None, None).unwrap());
            cur = RebuildCursor::new();
        }
    }
    assert!(server_restarted && crashed);
    let s = ido_status(&sp);
    assert_eq!(s.phase, "normal");
    assert_eq!(s.dmap_entries, 0, "{s:?}");
    assert!(max_migrated >= 3 && max_dmap > 0);
    assert_eq!(saw_redirected, (true, true), "{s:?}");
    assert!(s.reclaimed_bytes > 0, "{s:?}");
    assert_eq!(sp.status().unwrap().state, "clean");
    rig.check_all(&sp);
    assert!(sp.verify().unwrap().inconsistent.is_empty());
    sp.close().unwrap();
    // An address without its socket is refused saying what it must look like; with its
    // server gone, the surrogate is refused saying what to check.
    drop(server);
    let e = dev::pool::Pool::open(&rig.main())
        .unwrap()
        .configure_ido(None, Some(Path::new("nbd+unix:///s")))
        .unwrap_err();
    assert!(e.to_string().contains("not an NBD address"), "{e}");
    let sp = reopen(&rig);
    let e = sp
        .begin_policy_rebuild(Some(RebuildPolicy::Ido), Some(Path::new(&uri)))
        .unwrap_err();
    assert!(
        e.to_string().contains("is `raidforge serve` running"),
        "{e}"
    );
    sp.close().unwrap();
}
