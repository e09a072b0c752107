//! The control socket of a served pool: `raidforge serve` listens on `POOL.ctl` (a Unix
//! socket next to the pool descriptor), and the pool commands (`status`, `fail`, `replace`,
//! `rebuild`, `verify`) send their work there when a server answers, instead of opening the
//! pool themselves. Clients of the server keep running throughout.
//!
//! The protocol is one JSON object per connection each way: a request
//! `{"op": "status" | "fail" | "replace" | "add_spare" | "rebuild" | "verify" | "flush", ...}` and a reply
//! `{"ok": true, ...}` or `{"ok": false, "error": "..."}`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use dev::pool::{RebuildProgress, Status, VerifyReport};
use dev::serve_support::RebuildInfo;
use serde_json::{json, Value};

use crate::pool_cmd::{print_status_of, RebuildArgs};

/// The control socket of the pool whose descriptor is `pool`.
pub fn socket_path(pool: &Path) -> PathBuf {
    let mut s = pool.as_os_str().to_owned();
    s.push(".ctl");
    PathBuf::from(s)
}

/// A server that answers on a pool's control socket.
pub struct Live {
    path: PathBuf,
}

/// The live server of `pool`, if one answers on its control socket.
pub fn live(pool: &Path) -> Option<Live> {
    let path = socket_path(pool);
    if !path.exists() {
        return None;
    }
    // A socket file nobody listens on is left over from a server that was killed.
    UnixStream::connect(&path).ok().map(|_| Live { path })
}

/// Refuses to open a served pool directly (for commands that have no control operation).
pub fn refuse_if_served(pool: &Path, what: &str) -> anyhow::Result<()> {
    if live(pool).is_some() {
        bail!(
            "{} is being served by `raidforge serve` (control socket {}): {what} would race with \
             its clients; use an NBD client, or stop the server first",
            pool.display(),
            socket_path(pool).display()
        );
    }
    Ok(())
}

impl Live {
    /// Sends one request and returns the reply's fields (an error reply becomes an error).
    pub fn request(&self, req: &Value, timeout: Duration) -> anyhow::Result<Value> {
        let mut s = UnixStream::connect(&self.path)
            .with_context(|| format!("connecting to {}", self.path.display()))?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(Duration::from_secs(10)))?;
        let mut line = serde_json::to_vec(req)?;
        line.push(b'\n');
        s.write_all(&line)?;
        let mut reply = String::new();
        BufReader::new(&s)
            .read_line(&mut reply)
            .with_context(|| format!("reading the reply of {}", self.path.display()))?;
        let v: Value = serde_json::from_str(&reply).with_context(|| {
            format!("bad reply from {}: '{}'", self.path.display(), reply.trim())
        })?;
        if v["ok"].as_bool() != Some(true) {
            let e = v["error"]
                .as_str()
                .unwrap_or("the server refused the request");
            return Err(anyhow!("{e}"));
        }
        Ok(v)
    }

    fn status_of(v: &Value) -> anyhow::Result<Status> {
        serde_json::from_value(v["status"].clone()).context("status in the server's reply")
    }
}

const QUICK: Duration = Duration::from_secs(30);

/// `raidforge status` of a served pool.
pub fn status(l: &Live, json: bool) -> anyhow::Result<()> {
    let v = l.request(&json!({"op": "status"}), QUICK)?;
    print_status_of(&Live::status_of(&v)?, json)?;
    if !json {
        let info: RebuildInfo = serde_json::from_value(v["rebuild"].clone()).unwrap_or_default();
        if info.running {
            println!("      rebuild running in the server");
        }
        if let Some(e) = info.error {
            println!("      last rebuild stopped: {e}");
        }
        if let Some(c) = v["server"]["connections"].as_u64() {
            println!(
                "      served by pid {} ({c} client connections open)",
                v["server"]["pid"]
            );
        }
    }
    Ok(())
}

/// `raidforge fail` of a served pool.
pub fn fail(l: &Live, member: usize, force: bool, json: bool) -> anyhow::Result<()> {
    let v = l.request(
        &json!({"op": "fail", "member": member, "force": force}),
        QUICK,
    )?;
    print_status_of(&Live::status_of(&v)?, json)
}

/// `raidforge replace` of a served pool. `with` is made absolute here (the server's working
/// directory may differ).
pub fn replace(l: &Live, member: usize, with: &Path, json: bool) -> anyhow::Result<()> {
    let abs = if with.is_absolute() {
        with.to_path_buf()
    } else {
        std::env::current_dir()?.join(with)
    };
    let v = l.request(
        &json!({"op": "replace", "member": member, "with": abs}),
        QUICK,
    )?;
    print_status_of(&Live::status_of(&v)?, json)
}

/// `raidforge add --spare` of a served pool (the path made absolute, as for `replace`).
pub fn add_spare(l: &Live, spare: &Path, json: bool) -> anyhow::Result<()> {
    let abs = if spare.is_absolute() || dev::nbd_member::is_nbd_path(spare) {
        spare.to_path_buf()
    } else {
        std::env::current_dir()?.join(spare)
    };
    let v = l.request(&json!({"op": "add_spare", "spare": abs}), QUICK)?;
    print_status_of(&Live::status_of(&v)?, json)
}

/// The control request that starts a served pool's rebuild (read by the server's
/// `serve_cmd::rebuild_opts`).
pub fn rebuild_request(
    parallel: usize,
    speed_max: Option<u64>,
    speed_min: Option<u64>,
    (window_bytes, windows_in_flight): (u64, usize),
    policy: Option<&str>,
    surrogate: Option<&std::path::Path>,
) -> serde_json::Value {
    json!({"op": "rebuild", "parallel": parallel, "speed_max": speed_max,
        "speed_min": speed_min, "window_bytes": window_bytes,
        "windows_in_flight": windows_in_flight, "policy": policy, "surrogate": surrogate})
}

/// `raidforge rebuild` of a served pool: starts the rebuild in the server, then follows its
/// progress until it ends (clients keep being served meanwhile).
pub fn rebuild(l: &Live, a: &RebuildArgs, parallel: usize) -> anyhow::Result<()> {
    let req = rebuild_request(
        parallel,
        a.speed_max.as_ref().map(|s| s.bytes_per_sec),
        a.speed_min.as_ref().map(|s| s.bytes_per_sec),
        (
            a.memory_window,
            a.windows_in_flight
                .map_or(dev::pool::WINDOWS_IN_FLIGHT_BY_MEMBERS, |w| w as usize),
        ),
        a.rebuild_policy.as_deref(),
        a.surrogate.as_deref(),
    );
    let v = l.request(&req, QUICK)?;
    let mut info: RebuildInfo = serde_json::from_value(v["rebuild"].clone())?;
    let mut last: Option<RebuildProgress> = None;
    loop {
        if let Some(pr) = info.progress {
            if a.json && last.map(|l| l.cycles_done) != Some(pr.cycles_done) {
                println!("{}", serde_json::to_string(&pr)?);
            }
            last = Some(pr);
        }
        if !info.running {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        let v = l.request(&json!({"op": "status"}), QUICK)?;
        info = serde_json::from_value(v["rebuild"].clone())?;
    }
    if let Some(e) = info.error {
        bail!("rebuild stopped: {e}");
    }
    let v = l.request(&json!({"op": "status"}), QUICK)?;
    let status = Live::status_of(&v)?;
    let pr = last.unwrap_or(RebuildProgress {
        cycles_done: status.cycles_clean,
        cycles_total: status.cycles,
        bytes_written: 0,
        elapsed_s: 0.0,
    });
    if a.json {
        println!(
            "{}",
            json!({"done": true, "elapsed_s": pr.elapsed_s, "rebuilt_s": info.rebuilt_s,
                "bytes_written": pr.bytes_written, "cycles": pr.cycles_total,
                "state": status.state, "served": true})
        );
    } else {
        println!(
            "rebuilt {} bytes in {:.2} s ({:.1} MB/s) while serving; pool is {}",
            pr.bytes_written,
            pr.elapsed_s,
            pr.bytes_written as f64 / 1e6 / pr.elapsed_s.max(1e-9),
            status.state
        );
    }
    Ok(())
}

/// `raidforge flush` of a served pool (deferred parity, under stripe locks).
pub fn flush(l: &Live, json: bool) -> anyhow::Result<()> {
    let v = l.request(&json!({"op": "flush"}), Duration::from_secs(3600))?;
    print_status_of(&Live::status_of(&v)?, json)
}

/// `raidforge verify` of a served pool (a cycle at a time, under its stripe locks).
pub fn verify(l: &Live) -> anyhow::Result<VerifyReport> {
    let v = l.request(&json!({"op": "verify"}), Duration::from_secs(3600))?;
    Ok(serde_json::from_value(v["verify"].clone())?)
}
