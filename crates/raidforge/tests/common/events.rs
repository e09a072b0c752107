//! The `serve --events FILE` file: its JSON lines, their kinds, and waiting for one.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Every event written so far (none when the file does not exist yet).
pub fn read(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("event line {l:?}: {e}")))
        .collect()
}

/// The event kinds, in order.
pub fn kinds(ev: &[Value]) -> Vec<String> {
    ev.iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect()
}

/// (event, member) of each event, in order.
pub fn seq(ev: &[Value]) -> Vec<(String, Option<u64>)> {
    ev.iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap().to_string(),
                e["member"].as_u64(),
            )
        })
        .collect()
}

/// Waits (120 s at most) until the file holds `count` events of `kind`; returns every event.
pub fn wait_for(path: &Path, kind: &str, count: usize, what: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let ev = read(path);
        if ev.iter().filter(|e| e["event"] == kind).count() >= count {
            return ev;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: no {kind} event #{count} within 120 s; events so far: {:?}",
            seq(&ev)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
