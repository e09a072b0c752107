//! `raidforge serve --config FILE` as systemd runs it (issue 25): the settings from a TOML
//! file, READY=1 on `$NOTIFY_SOCKET` once the export listens, STOPPING=1 at SIGTERM, clients
//! reading and writing through the export (qemu-io, nbdinfo), hot spares listed in the file
//! added once; bad files and options beside `--config` refused with one line and exit 2; the
//! unit in contrib/systemd checked (with `systemd-analyze verify` where it is installed).
//!
//! qemu-io or nbdinfo missing: the test fails under CI and is skipped with a note otherwise.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{create_small, TempDir};

fn tool(name: &str) -> Option<PathBuf> {
    common::tool(name, ".ci/run installs libnbd-bin and qemu-utils")
}

/// The server, killed if the test ends early.
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `raidforge serve --config CFG` in `dir`, told to notify `notify`.
fn serve(dir: &Path, cfg: &str, notify: &Path) -> Kid {
    Kid(common::command()
        .current_dir(dir)
        .args(["serve", "--config", cfg])
        .env("NOTIFY_SOCKET", notify)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start raidforge serve"))
}

/// The next datagram on `rx` (waiting at most `limit`), as text.
fn recv(rx: &UnixDatagram, limit: Duration) -> Option<String> {
    rx.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 4096];
    match rx.recv(&mut buf) {
        Ok(n) => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            None
        }
        Err(e) => panic!("receiving from the notify socket: {e}"),
    }
}

fn run_tool(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run the client");
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A refused start: exit status 2, one line on stderr naming every needle, no READY=1.
fn refused_start(dir: &Path, cfg: &str, extra: &[&str], rx: &UnixDatagram, needles: &[&str]) {
    let out = common::command()
        .current_dir(dir)
        .args(["serve", "--config", cfg])
        .args(extra)
        .env("NOTIFY_SOCKET", dir.join("notify.sock"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{cfg} {extra:?}: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{cfg} {extra:?}: not one line: {err}");
    for n in needles {
        assert!(
            lines[0].contains(n),
            "{cfg} {extra:?}: '{n}' missing: {err}"
        );
    }
    assert_eq!(recv(rx, Duration::from_millis(50)), None, "{cfg}: notified");
}

#[test]
fn serve_from_a_config_file_tells_systemd_when_ready_and_serves() {
    let (Some(qemu_io), Some(nbdinfo)) = (tool("qemu-io"), tool("nbdinfo")) else {
        return;
    };
    let t = TempDir::new("config", "serve");
    let dir = t.path();
    create_small(
        dir,
        "p.json",
        &["--scheme", "raid5", "--disks", "4"],
        "m",
        4,
        &[],
    );
    let spare = dir.join("spare.img");
    std::fs::File::create(&spare)
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    // Bound by the test, as systemd binds its notify socket.
    let rx = UnixDatagram::bind(dir.join("notify.sock")).unwrap();
    std::fs::write(
        dir.join("serve.toml"),
        r#"# raidforge serve --config
socket = "nbd.sock"
events = "events.jsonl"
rebuild-delay = 0
rebuild-speed-max = "100M"
io-timeout = 5
workers = 4

[[pool]]
path = "p.json"
export = "vol"
spares = ["spare.img"]
"#,
    )
    .unwrap();
    let sock = dir.join("nbd.sock");
    let uri = format!("nbd+unix:///vol?socket={}", sock.display());

    for round in 0..2 {
        let mut kid = serve(dir, "serve.toml", &dir.join("notify.sock"));
        let msg = recv(&rx, Duration::from_secs(60)).expect("no READY=1 within 60 s");
        // Ready means listening: a client connects at once, no retry.
        let size = run_tool(Command::new(&nbdinfo).args(["--size", &uri]));
        assert!(msg.lines().any(|l| l == "READY=1"), "{msg}");
        assert!(msg.contains("STATUS=serving vol"), "{msg}");
        let cap: u64 = size.trim().parse().unwrap();
        assert!(cap >= 4 << 20, "{size}");
        // The spare in the file is the pool's (added once: the second start finds it listed).
        let st = common::status(dir, "p.json");
        assert_eq!(
            st["spares"].as_array().map(|s| s.len()),
            Some(1),
            "round {round}: {st}"
        );
        // Writes and reads through the export; the second round reads the first's bytes.
        let pat = format!("0x{:x}", 0x5a + round);
        let off = round * (1 << 20);
        run_tool(Command::new(&qemu_io).args([
            "-f",
            "raw",
            "-c",
            &format!("write -P {pat} {off} 256k"),
            &uri,
        ]));
        for (p, o) in [(0x5a, 0), (pat_of(round), off)] {
            let out = run_tool(Command::new(&qemu_io).args([
                "-f",
                "raw",
                "-c",
                &format!("read -P 0x{p:x} {o} 256k"),
                &uri,
            ]));
            assert!(!out.contains("Pattern verification failed"), "{out}");
        }
        // SIGTERM, as `systemctl stop` sends: STOPPING=1, then a clean exit.
        unsafe {
            libc::kill(kid.0.id() as i32, libc::SIGTERM);
        }
        let msg = recv(&rx, Duration::from_secs(30)).expect("no STOPPING=1 within 30 s");
        assert!(msg.lines().any(|l| l == "STOPPING=1"), "{msg}");
        let status = kid.0.wait().unwrap();
        let mut out = String::new();
        for l in BufReader::new(kid.0.stdout.take().unwrap()).lines() {
            out.push_str(&l.unwrap());
            out.push('\n');
        }
        assert!(status.success(), "round {round}: {status:?}; {out}");
        assert!(out.contains("export 'vol'"), "{out}");
    }
    // The healthy pool gave no event.
    assert_eq!(
        std::fs::read_to_string(dir.join("events.jsonl")).unwrap(),
        ""
    );

    // Bad files and options beside --config: exit 2, one line, nothing notified.
    std::fs::write(
        dir.join("typo.toml"),
        "socket = \"nbd.sock\"\nrebuild-dealy = 3\n[[pool]]\npath = \"p.json\"\n",
    )
    .unwrap();
    refused_start(
        dir,
        "typo.toml",
        &[],
        &rx,
        &["typo.toml line 2", "unknown field `rebuild-dealy`"],
    );
    std::fs::write(
        dir.join("gone.toml"),
        "socket = \"nbd.sock\"\n[[pool]]\npath = \"gone.json\"\n",
    )
    .unwrap();
    refused_start(dir, "gone.toml", &[], &rx, &["gone.json"]);
    std::fs::write(dir.join("empty.toml"), "socket = \"nbd.sock\"\n").unwrap();
    refused_start(
        dir,
        "empty.toml",
        &[],
        &rx,
        &["empty.toml", "missing field `pool`"],
    );
    // A spare that cannot be added: refused, the pool opened for it closed again.
    std::fs::write(
        dir.join("nospare.toml"),
        "socket = \"nbd.sock\"\n[[pool]]\npath = \"p.json\"\nspares = [\"nope.img\"]\n",
    )
    .unwrap();
    refused_start(dir, "nospare.toml", &[], &rx, &["nope.img", "p.json"]);
    let st = common::status(dir, "p.json");
    assert_eq!(st["state"], "clean", "{st}");
    refused_start(
        dir,
        "serve.toml",
        &["--listen", "127.0.0.1:0"],
        &rx,
        &[
            "--listen was given with --config",
            "set `listen` in serve.toml",
        ],
    );
    assert!(!sock.exists(), "a refused start left {}", sock.display());
}

fn pat_of(round: u64) -> u64 {
    0x5a + round
}

/// The unit shipped in contrib/systemd: what `raidforge serve` needs of it, and systemd's own
/// check where systemd-analyze is installed.
#[test]
fn the_systemd_unit_is_type_notify_and_verifies() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let unit = std::fs::read_to_string(root.join("contrib/systemd/raidforge@.service")).unwrap();
    let has = |l: &str| unit.lines().any(|u| u.trim() == l);
    assert!(has("Type=notify"), "{unit}");
    assert!(has("Restart=on-failure"), "{unit}");
    assert!(has("NotifyAccess=main"), "{unit}");
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart");
    assert!(exec.contains(" serve --config "), "{exec}");
    // Members are block and loop devices: nothing may hide /dev or deny devices.
    for bad in [
        "PrivateDevices=yes",
        "PrivateDevices=true",
        "DevicePolicy=closed",
        "DevicePolicy=strict",
        "ProtectSystem=strict",
    ] {
        assert!(
            !has(bad),
            "{bad} would keep the service from its member devices"
        );
    }
    // The options of ExecStart exist: parse them with the binary's own --help.
    let help = common::run(&["serve", "--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("--config <FILE>"));

    let Some(analyze) = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("systemd-analyze"))
            .find(|p| p.is_file())
    }) else {
        // Not in .ci/run's packages: the checks above stand alone there.
        eprintln!("note: systemd-analyze not found; the unit was checked without it");
        return;
    };
    let t = TempDir::new("config", "unit");
    // An instance of the template, its ExecStart the binary under test (verify checks that
    // the program exists).
    let inst = t.join("raidforge@test.service");
    std::fs::write(
        &inst,
        unit.replace("/usr/local/bin/raidforge", env!("CARGO_BIN_EXE_raidforge")),
    )
    .unwrap();
    let out = Command::new(analyze)
        .args(["verify", "--man=no"])
        .arg(&inst)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // Parse problems are warnings ("..., ignoring") with exit status 0: any output fails.
    assert!(out.status.success() && err.trim().is_empty(), "{err}");
}
