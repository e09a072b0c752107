//! `raidforge serve --tls`: NBD's STARTTLS with real clients. libnbd's nbdinfo and nbdcopy
//! (`nbds://` URIs with `tls-certificates=DIR` and `tls-psk-file=FILE`) and QEMU's qemu-img and
//! qemu-io (`tls-creds-x509` and `tls-creds-psk` objects) write and read back each other's data
//! byte for byte; under `--tls require` a plain-text client is refused with
//! `NBD_REP_ERR_TLS_REQD`, and so are a client without a certificate when `--tls-ca` asks for
//! one and a client with a wrong pre-shared key; `--tls on` serves plain and TLS clients; bad
//! option combinations and unreadable credential files are refused in one line; a listener
//! other machines reach warns unless TLS is required.
//!
//! Certificates are made in each test with the `openssl` command (a CA, a server certificate
//! for 127.0.0.1, a client certificate). Servers listen on 127.0.0.1 or in a temporary
//! directory and are killed when their test ends. A missing tool fails the test under CI
//! (env CI set) and skips it with a note otherwise.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nbd::proto::*;

mod common;

use common::{json_here, pattern, TempDir};

fn tool(name: &str) -> Option<PathBuf> {
    common::tool(name, ".ci/run installs libnbd-bin, qemu-utils and openssl")
}

/// Runs a client; returns (success, stdout + stderr).
fn try_run(cmd: &mut Command) -> (bool, String) {
    let out = cmd.output().expect("client tool runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn run_ok(cmd: &mut Command) -> String {
    let (ok, text) = try_run(cmd);
    assert!(ok, "{cmd:?} failed: {text}");
    text
}

/// A CA, a server certificate for 127.0.0.1/localhost signed by it, and a client certificate
/// signed by it, in libnbd's and QEMU's directory layout (`ca-cert.pem`, `server-cert.pem`,
/// `server-key.pem`, `client-cert.pem`, `client-key.pem`).
fn make_pki(openssl: &Path, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let ossl = |args: &[&str]| {
        run_ok(Command::new(openssl).current_dir(dir).args(args));
    };
    ossl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca-key.pem",
        "-out",
        "ca-cert.pem",
        "-days",
        "2",
        "-subj",
        "/CN=raidforge test CA",
    ]);
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    for who in ["server", "client"] {
        ossl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &format!("{who}-key.pem"),
            "-out",
            &format!("{who}.csr"),
            "-subj",
            &format!("/CN={who}"),
        ]);
        ossl(&[
            "x509",
            "-req",
            "-in",
            &format!("{who}.csr"),
            "-CA",
            "ca-cert.pem",
            "-CAkey",
            "ca-key.pem",
            "-CAcreateserial",
            "-out",
            &format!("{who}-cert.pem"),
            "-days",
            "2",
            "-extfile",
            &format!("{who}.ext"),
        ]);
    }
}

/// A PSK file in psktool's format with one identity and a random 32-byte key.
fn make_psk(openssl: &Path, path: &Path, identity: &str) {
    let hex = run_ok(Command::new(openssl).args(["rand", "-hex", "32"]));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("{identity}:{}\n", hex.trim())).unwrap();
}

fn create_pool(dir: &TempDir) -> PathBuf {
    let pool = dir.join("p.json");
    let mut args: Vec<String> = vec!["create".into(), pool.display().to_string()];
    args.extend(["--scheme", "raid5", "--disks", "3"].map(String::from));
    for i in 0..3 {
        args.push("--member".into());
        args.push(dir.join(&format!("m{i}.img")).display().to_string());
    }
    args.extend(["--size", "4M", "--chunk", "64K", "--json"].map(String::from));
    let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    assert_eq!(json_here(&a)["state"], "clean");
    pool
}

/// A running `raidforge serve`; killed when dropped.
struct Served {
    child: Child,
    /// host:port of `--listen`.
    addr: String,
    /// What `listening on` said for TCP.
    scheme: String,
    stderr: mpsc::Receiver<String>,
}

impl Served {
    fn start(pool: &Path, listen: &str, extra: &[&str]) -> Served {
        let mut child = common::command()
            .arg("serve")
            .arg(pool)
            .args(["--listen", listen, "--verbose"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start raidforge serve");
        let rx = common::line_channel(child.stdout.take().unwrap());
        let erx = common::line_channel(child.stderr.take().unwrap());
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut listening = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = rx.recv_timeout(left) else {
                let _ = child.kill();
                let errs: Vec<String> = erx.try_iter().collect();
                panic!("raidforge serve did not get ready: {}", errs.join("\n"));
            };
            if let Some(rest) = line.strip_prefix("listening on ") {
                if let Some((scheme, addr)) = rest.split_once("://") {
                    if scheme.starts_with("nbd") && !scheme.contains("unix") {
                        listening = Some((scheme.to_string(), addr.trim_end_matches('/').into()));
                    }
                }
            }
            if line == "ready" {
                break;
            }
        }
        let (scheme, addr) = listening.expect("a TCP listener");
        Served {
            child,
            addr,
            scheme,
            stderr: erx,
        }
    }

    fn port(&self) -> &str {
        self.addr.rsplit_once(':').unwrap().1
    }

    fn stderr_lines(&self) -> Vec<String> {
        // Log lines arrive from the server's threads; give them a moment.
        std::thread::sleep(Duration::from_millis(300));
        self.stderr.try_iter().collect()
    }
}

impl Drop for Served {
    /// SIGTERM (the pool is closed cleanly, for the next server on it), SIGKILL after 20 s.
    fn drop(&mut self) {
        // SAFETY: a signal to our own child process.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a hand-made plain-text client gets for `NBD_OPT_GO` on the default export: the reply
/// type of the option's final reply.
fn plain_go_reply(addr: &str) -> u32 {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut greeting = [0u8; 18];
    s.read_exact(&mut greeting).unwrap();
    s.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes())
        .unwrap();
    // GO: empty name, no info requests.
    let data = [0u8; 6];
    let mut msg = Vec::new();
    msg.extend_from_slice(&IHAVEOPT.to_be_bytes());
    msg.extend_from_slice(&OPT_GO.to_be_bytes());
    msg.extend_from_slice(&(data.len() as u32).to_be_bytes());
    msg.extend_from_slice(&data);
    s.write_all(&msg).unwrap();
    loop {
        let mut h = [0u8; 20];
        s.read_exact(&mut h).unwrap();
        assert_eq!(u64::from_be_bytes(h[..8].try_into().unwrap()), REP_MAGIC);
        let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
        let mut d = vec![0u8; len as usize];
        s.read_exact(&mut d).unwrap();
        if kind != REP_INFO {
            return kind;
        }
    }
}

/// The first `len` bytes of a file.
fn head(path: &Path, len: usize) -> Vec<u8> {
    let mut v = std::fs::read(path).unwrap();
    v.truncate(len);
    v
}

/// `--image-opts` for QEMU reaching export `p` of `srv` with the TLS object `tls0`.
fn qemu_opts(srv: &Served) -> String {
    format!(
        "driver=nbd,host=127.0.0.1,port={},export=p,tls-creds=tls0",
        srv.port()
    )
}

/// qemu-img reads the whole export through TLS object `obj` into the raw file `out`.
fn qemu_img_read(qemu_img: &Path, obj: &str, srv: &Served, out: &Path) {
    let opts = qemu_opts(srv);
    let args = [
        "convert",
        "-O",
        "raw",
        "--object",
        obj,
        "--image-opts",
        &opts,
    ];
    run_ok(Command::new(qemu_img).args(args).arg(out));
}

// ---------- X.509 ----------

#[test]
fn x509_nbdinfo_nbdcopy_qemu_and_plain_clients_refused() {
    let (Some(openssl), Some(nbdinfo), Some(nbdcopy), Some(qemu_img), Some(qemu_io)) = (
        tool("openssl"),
        tool("nbdinfo"),
        tool("nbdcopy"),
        tool("qemu-img"),
        tool("qemu-io"),
    ) else {
        return;
    };
    let dir = TempDir::new("tls", "x509");
    let pool = create_pool(&dir);
    let pki = dir.join("pki");
    make_pki(&openssl, &pki);
    let socket = dir.join("s.sock");
    let p = |f: &str| pki.join(f).display().to_string();
    let srv = Served::start(
        &pool,
        "127.0.0.1:0",
        &[
            "--socket",
            &socket.display().to_string(),
            "--tls",
            "require",
            "--tls-cert",
            &p("server-cert.pem"),
            "--tls-key",
            &p("server-key.pem"),
            "--tls-ca",
            &p("ca-cert.pem"),
        ],
    );
    assert_eq!(srv.scheme, "nbds");
    // The Unix socket and the control socket are owner-only.
    for s in [&socket, &PathBuf::from(format!("{}.ctl", pool.display()))] {
        let mode = std::fs::metadata(s).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} has mode {mode:o}", s.display());
    }
    let uri = format!("nbds://{}/p?tls-certificates={}", srv.addr, pki.display());

    // nbdinfo sees the export through TLS.
    let info = run_ok(Command::new(&nbdinfo).arg(&uri));
    assert!(info.contains("with TLS"), "{info}");
    let capacity: u64 = run_ok(Command::new(&nbdinfo).arg("--size").arg(&uri))
        .trim()
        .parse()
        .unwrap();
    let st = json_here(&["status", &pool.display().to_string(), "--json"]);
    assert_eq!(st["size_bytes"].as_u64(), Some(capacity), "{st}");

    // nbdcopy writes a pattern through TLS; qemu-img reads it back through TLS.
    let data = pattern(0x7157, 3 << 20);
    let src = dir.join("src.bin");
    std::fs::write(&src, &data).unwrap();
    run_ok(Command::new(&nbdcopy).arg(&src).arg(&uri));
    let obj = format!(
        "tls-creds-x509,id=tls0,endpoint=client,dir={}",
        pki.display()
    );
    let back = dir.join("back.raw");
    qemu_img_read(&qemu_img, &obj, &srv, &back);
    assert_eq!(std::fs::metadata(&back).unwrap().len(), capacity);
    assert!(
        head(&back, data.len()) == data,
        "qemu-img read back other bytes"
    );

    // qemu-io writes through TLS near the end; nbdcopy reads it back through TLS.
    let tail = capacity - (256 << 10);
    run_ok(Command::new(&qemu_io).args([
        "--object",
        &obj,
        "--image-opts",
        &qemu_opts(&srv),
        "-c",
        &format!("write -P 0xa5 {tail} 192k"),
    ]));
    let back2 = dir.join("back2.raw");
    run_ok(Command::new(&nbdcopy).arg(&uri).arg(&back2));
    let all = std::fs::read(&back2).unwrap();
    assert_eq!(all.len() as u64, capacity);
    assert!(
        all[..data.len()] == data[..],
        "nbdcopy read back other bytes"
    );
    let tail = tail as usize;
    assert!(all[tail..tail + (192 << 10)].iter().all(|&b| b == 0xa5));

    // Plain-text clients are refused: nbdinfo fails, the protocol's answer is TLS_REQD, on
    // TCP and on the Unix socket alike.
    let (ok, text) = try_run(Command::new(&nbdinfo).arg(format!("nbd://{}/p", srv.addr)));
    assert!(
        !ok,
        "a plain nbdinfo was served under --tls require: {text}"
    );
    let (ok, text) =
        try_run(Command::new(&nbdinfo).arg(format!("nbd+unix:///p?socket={}", socket.display())));
    assert!(!ok, "a plain nbdinfo was served on the Unix socket: {text}");
    assert_eq!(plain_go_reply(&srv.addr), REP_ERR_TLS_REQD);

    // --tls-ca: a client without a certificate is refused during the handshake.
    let nocert = dir.join("nocert");
    std::fs::create_dir_all(&nocert).unwrap();
    std::fs::copy(pki.join("ca-cert.pem"), nocert.join("ca-cert.pem")).unwrap();
    let (ok, text) = try_run(Command::new(&nbdinfo).arg(format!(
        "nbds://{}/p?tls-certificates={}",
        srv.addr,
        nocert.display()
    )));
    assert!(!ok, "a client without a certificate was served: {text}");
    // A client that does not trust the server's CA refuses it.
    let other = dir.join("other");
    make_pki(&openssl, &other);
    std::fs::copy(pki.join("client-cert.pem"), other.join("client-cert.pem")).unwrap();
    std::fs::copy(pki.join("client-key.pem"), other.join("client-key.pem")).unwrap();
    let (ok, text) = try_run(Command::new(&nbdinfo).arg(format!(
        "nbds://{}/p?tls-certificates={}",
        srv.addr,
        other.display()
    )));
    assert!(
        !ok,
        "a client trusting another CA accepted the server: {text}"
    );

    let log = srv.stderr_lines().join("\n");
    assert!(log.contains("TLS session established"), "{log}");
    assert!(log.contains("TLS handshake failed"), "{log}");
}

// ---------- PSK ----------

#[test]
fn psk_nbdcopy_nbdinfo_qemu_and_wrong_keys_refused() {
    let (Some(openssl), Some(nbdinfo), Some(nbdcopy), Some(qemu_img)) = (
        tool("openssl"),
        tool("nbdinfo"),
        tool("nbdcopy"),
        tool("qemu-img"),
    ) else {
        return;
    };
    let dir = TempDir::new("tls", "psk");
    let pool = create_pool(&dir);
    // QEMU reads DIR/keys.psk.
    let keys = dir.join("psk").join("keys.psk");
    make_psk(&openssl, &keys, "alice");
    let wrong = dir.join("wrong.psk");
    make_psk(&openssl, &wrong, "alice");
    let srv = Served::start(
        &pool,
        "127.0.0.1:0",
        &["--tls", "require", "--tls-psk", &keys.display().to_string()],
    );
    let uri = |user: &str, file: &Path| {
        format!(
            "nbds://{user}@{}/p?tls-psk-file={}",
            srv.addr,
            file.display()
        )
    };

    // nbdcopy writes through TLS-PSK, reads back through TLS-PSK.
    let data = pattern(0x95c, (2 << 20) + 12345);
    let src = dir.join("src.bin");
    std::fs::write(&src, &data).unwrap();
    run_ok(Command::new(&nbdcopy).arg(&src).arg(uri("alice", &keys)));
    let back = dir.join("back.raw");
    run_ok(Command::new(&nbdcopy).arg(uri("alice", &keys)).arg(&back));
    assert!(
        head(&back, data.len()) == data,
        "nbdcopy read back other bytes"
    );
    let info = run_ok(Command::new(&nbdinfo).arg(uri("alice", &keys)));
    assert!(info.contains("with TLS"), "{info}");

    // qemu-img with a tls-creds-psk object reads the same bytes.
    let obj = format!(
        "tls-creds-psk,id=tls0,endpoint=client,dir={},username=alice",
        keys.parent().unwrap().display()
    );
    let back2 = dir.join("back2.raw");
    qemu_img_read(&qemu_img, &obj, &srv, &back2);
    assert!(
        head(&back2, data.len()) == data,
        "qemu-img read back other bytes"
    );

    // A wrong key for a known identity, and an unknown identity (its key is the right
    // one), are refused.
    let (ok, text) = try_run(Command::new(&nbdinfo).arg(uri("alice", &wrong)));
    assert!(!ok, "a wrong key was accepted: {text}");
    let bob = dir.join("bob.psk");
    let key = std::fs::read_to_string(&keys).unwrap();
    std::fs::write(&bob, key.replacen("alice:", "bob:", 1)).unwrap();
    let (ok, text) = try_run(Command::new(&nbdinfo).arg(uri("bob", &bob)));
    assert!(!ok, "an unknown identity was accepted: {text}");
    // Plain text is refused.
    assert_eq!(plain_go_reply(&srv.addr), REP_ERR_TLS_REQD);
    let log = srv.stderr_lines().join("\n");
    assert!(log.contains("TLS handshake failed"), "{log}");
}

// ---------- --tls on ----------

#[test]
fn tls_on_serves_plain_and_tls_clients() {
    let (Some(openssl), Some(nbdinfo)) = (tool("openssl"), tool("nbdinfo")) else {
        return;
    };
    let dir = TempDir::new("tls", "on");
    let pool = create_pool(&dir);
    let keys = dir.join("keys.psk");
    make_psk(&openssl, &keys, "alice");
    let srv = Served::start(
        &pool,
        "127.0.0.1:0",
        &["--tls", "on", "--tls-psk", &keys.display().to_string()],
    );
    let plain = run_ok(Command::new(&nbdinfo).arg(format!("nbd://{}/p", srv.addr)));
    assert!(plain.contains("without TLS"), "{plain}");
    let tls = run_ok(Command::new(&nbdinfo).arg(format!(
        "nbds://alice@{}/p?tls-psk-file={}",
        srv.addr,
        keys.display()
    )));
    assert!(tls.contains("with TLS"), "{tls}");
    // The hand-made plain client is served too.
    assert_eq!(plain_go_reply(&srv.addr), REP_ACK);
}

// ---------- refusals and warnings ----------

#[test]
fn bad_tls_options_are_refused_in_one_line() {
    let Some(openssl) = tool("openssl") else {
        return;
    };
    let dir = TempDir::new("tls", "refused");
    let pool = create_pool(&dir);
    let pki = dir.join("pki");
    make_pki(&openssl, &pki);
    let keys = dir.join("keys.psk");
    make_psk(&openssl, &keys, "alice");
    let garbage = dir.join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let badpsk = dir.join("bad.psk");
    std::fs::write(&badpsk, "alice 0011\n").unwrap();
    let p = |f: &str| pki.join(f).display().to_string();
    let g = garbage.display().to_string();
    let k = keys.display().to_string();
    let b = badpsk.display().to_string();
    let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
        (
            vec!["--tls".into(), "require".into()],
            vec!["--tls require needs credentials"],
        ),
        (
            vec!["--tls".into(), "on".into()],
            vec!["--tls on needs credentials"],
        ),
        (
            vec!["--tls-psk".into(), k.clone()],
            vec!["--tls is off", "--tls require"],
        ),
        (
            vec![
                "--tls".into(),
                "require".into(),
                "--tls-cert".into(),
                p("server-cert.pem"),
                "--tls-key".into(),
                p("server-key.pem"),
                "--tls-psk".into(),
                k.clone(),
            ],
            vec!["not both"],
        ),
        (
            vec![
                "--tls".into(),
                "require".into(),
                "--tls-cert".into(),
                p("server-cert.pem"),
            ],
            vec!["--tls-cert needs --tls-key"],
        ),
        (
            vec![
                "--tls".into(),
                "require".into(),
                "--tls-cert".into(),
                g.clone(),
                "--tls-key".into(),
                p("server-key.pem"),
            ],
            vec!["certificate file", &g, "PEM"],
        ),
        (
            vec![
                "--tls".into(),
                "require".into(),
                "--tls-cert".into(),
                p("server-cert.pem"),
                "--tls-key".into(),
                g.clone(),
            ],
            vec!["key file", &g, "private key"],
        ),
        (
            vec![
                "--tls".into(),
                "require".into(),
                "--tls-cert".into(),
                p("server-cert.pem"),
                "--tls-key".into(),
                p("client-key.pem"),
            ],
            vec!["is not the private key of the certificate"],
        ),
        (
            vec![
                "--tls".into(),
                "require".into(),
                "--tls-cert".into(),
                p("server-cert.pem"),
                "--tls-key".into(),
                p("server-key.pem"),
                "--tls-ca".into(),
                dir.join("missing.pem").display().to_string(),
            ],
            vec!["cannot read CA file", "missing.pem"],
        ),
        (
            vec![
                "--tls".into(),
                "require".into(),
                "--tls-psk".into(),
                b.clone(),
            ],
            vec!["PSK file", &b, "line 1", "psktool"],
        ),
    ];
    for (args, needles) in cases {
        let out = common::command()
            .arg("serve")
            .arg(&pool)
            .args(["--listen", "127.0.0.1:0"])
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        for n in needles {
            assert!(err.contains(n), "{args:?}: '{n}' not in: {err}");
        }
        assert!(out.stdout.is_empty(), "{args:?} started serving");
    }
    // Nothing was opened: the pool is still clean and has no control socket.
    assert!(!PathBuf::from(format!("{}.ctl", pool.display())).exists());
}

#[test]
fn non_loopback_listener_warns_unless_tls_is_required() {
    let Some(openssl) = tool("openssl") else {
        return;
    };
    let dir = TempDir::new("tls", "warn");
    let pool = create_pool(&dir);
    let keys = dir.join("keys.psk");
    make_psk(&openssl, &keys, "alice");
    let k = keys.display().to_string();
    for (args, warns) in [
        (vec![], Some("NBD runs in plain text")),
        (
            vec!["--tls", "on", "--tls-psk", &k],
            Some("--tls on still serves"),
        ),
        (vec!["--tls", "require", "--tls-psk", &k], None),
    ] {
        let srv = Served::start(&pool, "0.0.0.0:0", &args);
        let warnings: Vec<String> = srv
            .stderr_lines()
            .into_iter()
            .filter(|l| l.contains("warning: --listen"))
            .collect();
        match warns {
            Some(w) => {
                assert_eq!(warnings.len(), 1, "{args:?}: {warnings:?}");
                assert!(warnings[0].contains(w), "{args:?}: {warnings:?}");
            }
            None => assert!(warnings.is_empty(), "{args:?}: {warnings:?}"),
        }
        drop(srv);
    }
    // On loopback, no warning.
    let srv = Served::start(&pool, "127.0.0.1:0", &[]);
    assert!(!srv
        .stderr_lines()
        .iter()
        .any(|l| l.contains("warning: --listen")));
}

// ---------- members over TLS ----------

/// An nbdkit serving a memory disk over TLS; killed when dropped.
struct Nbdkit(Child);

impl Drop for Nbdkit {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn nbdkit(nbdkit: &Path, listen: &[String], tls: &[String]) -> Nbdkit {
    let child = Command::new(nbdkit)
        .args(["--exit-with-parent", "-f", "--tls=require"])
        .args(tls)
        .args(listen)
        .args(["memory", "8M"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start nbdkit");
    Nbdkit(child)
}

/// Waits until something listens at the Unix socket or TCP address.
fn wait_listening(unix: Option<&Path>, tcp: Option<&str>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let up = match (unix, tcp) {
            (Some(p), _) => std::os::unix::net::UnixStream::connect(p).is_ok(),
            (_, Some(a)) => TcpStream::connect(a).is_ok(),
            _ => unreachable!(),
        };
        if up {
            return;
        }
        assert!(Instant::now() < deadline, "nbdkit did not start listening");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn pool_of_nbds_members_served_by_nbdkit_with_psk_and_x509() {
    let (Some(openssl), Some(nbdkit_bin)) = (tool("openssl"), tool("nbdkit")) else {
        return;
    };
    let dir = TempDir::new("tls", "members");
    let pki = dir.join("pki");
    make_pki(&openssl, &pki);
    let keys = dir.join("keys.psk");
    make_psk(&openssl, &keys, "alice");
    let wrong = dir.join("wrong.psk");
    make_psk(&openssl, &wrong, "alice");
    // Two members with a PSK on Unix sockets, one with X.509 on TCP (the server's
    // certificate is checked against the CA and 127.0.0.1; nbdkit checks ours).
    let mut servers = Vec::new();
    let mut members = Vec::new();
    for i in 0..2 {
        let sock = dir.join(&format!("k{i}.sock"));
        servers.push(nbdkit(
            &nbdkit_bin,
            &["-U".into(), sock.display().to_string()],
            &[format!("--tls-psk={}", keys.display())],
        ));
        wait_listening(Some(&sock), None);
        members.push(format!(
            "nbds+unix://alice@/?socket={}&tls-psk-file={}",
            sock.display(),
            keys.display()
        ));
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    servers.push(nbdkit(
        &nbdkit_bin,
        &[
            "-i".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
        ],
        &[
            format!("--tls-certificates={}", pki.display()),
            "--tls-verify-peer".into(),
        ],
    ));
    wait_listening(None, Some(&format!("127.0.0.1:{port}")));
    members.push(format!(
        "nbds://127.0.0.1:{port}/?tls-certificates={}",
        pki.display()
    ));

    // A wrong key, and a server certificate from a CA we do not trust, are refused, naming
    // the member, in one line.
    let other = dir.join("other");
    make_pki(&openssl, &other);
    let mut wrong_key = members.clone();
    wrong_key[0] = wrong_key[0].replace(&*keys.display().to_string(), &wrong.display().to_string());
    let mut wrong_ca = members.clone();
    wrong_ca[2] = wrong_ca[2].replace(&*pki.display().to_string(), &other.display().to_string());
    for (bad, which) in [(wrong_key, "member 0"), (wrong_ca, "member 2")] {
        let pool_bad = dir.join("bad.json").display().to_string();
        let mut args = vec![
            "create".to_string(),
            pool_bad,
            "--scheme".into(),
            "raid5".into(),
        ];
        args.extend(["--disks".into(), "3".into()]);
        for m in &bad {
            args.extend(["--member".into(), m.clone()]);
        }
        args.extend(["--size".into(), "4M".into(), "--chunk".into(), "16K".into()]);
        let out = common::raidforge(dir.path(), &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(
            err.contains(which) && err.contains("TLS handshake"),
            "{err}"
        );
    }

    // The pool over the three TLS members: data written are read back byte for byte.
    let mut args = vec![
        "create".to_string(),
        "p.json".into(),
        "--scheme".into(),
        "raid5".into(),
    ];
    args.extend(["--disks".into(), "3".into()]);
    for m in &members {
        args.extend(["--member".into(), m.clone()]);
    }
    args.extend(["--size".into(), "4M".into(), "--chunk".into(), "16K".into()]);
    common::ok(dir.path(), &args);
    let data = pattern(0x5e1, (1 << 20) + 777);
    common::write(dir.path(), "p.json", 12345, &data);
    assert!(common::read(dir.path(), "p.json", 12345, data.len() as u64) == data);
    let st = common::status(dir.path(), "p.json");
    assert_eq!(st["state"], "clean", "{st}");
    drop(servers);
}
