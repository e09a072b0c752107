//! Scraping `raidforge serve --metrics` and reading the page with a real parser: the Python
//! `prometheus_client` package's (its lenient Prometheus text 0.0.4 parser, and its strict
//! OpenMetrics 1.0.0 parser, which checks histograms, grouping and `# EOF` itself). The
//! interpreter is `$RAIDFORGE_PYTHON`, else the repository's virtualenv `.venv/bin/python`
//! (which `.ci/run` and `scripts/test.sh` make with the Python package's test extras, where
//! `prometheus-client` is listed), else `python3`. Without the package the checks fail under
//! CI and are skipped with a note otherwise.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

/// A Python interpreter that imports `prometheus_client`, or `None` (skip; a panic under CI).
pub fn python() -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    let candidates: Vec<PathBuf> = match std::env::var_os("RAIDFORGE_PYTHON") {
        Some(p) => vec![PathBuf::from(p)],
        None => vec![venv, PathBuf::from("python3")],
    };
    for p in &candidates {
        let ok = Command::new(p)
            .args(["-c", "import prometheus_client"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(p.clone());
        }
    }
    let why = format!(
        "no Python with prometheus_client among {candidates:?} (scripts/test.sh and .ci/run \
         install it into .venv with the Python package's test extras; or set RAIDFORGE_PYTHON)"
    );
    if std::env::var_os("CI").is_some() {
        panic!("{why}");
    }
    eprintln!("note: {why}; the metrics are not checked (they are under CI)");
    None
}

/// One HTTP request to `addr`; returns the status code, the head and the body.
pub fn http(addr: SocketAddr, request_line: &str, accept: Option<&str>) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut req = format!("{request_line}\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(a) = accept {
        req.push_str(&format!("Accept: {a}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut got = String::new();
    s.read_to_string(&mut got).unwrap();
    let (head, body) = got
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no end of the response head: {got:?}"));
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status code: {head:?}"));
    (code, head.to_string(), body.to_string())
}

/// `GET /metrics` in Prometheus text 0.0.4 (or OpenMetrics), checked to be a 200 of that
/// content type; the body.
pub fn fetch(addr: SocketAddr, openmetrics: bool) -> String {
    let (accept, want) = if openmetrics {
        (
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
            "application/openmetrics-text; version=1.0.0",
        )
    } else {
        ("text/plain", "text/plain; version=0.0.4")
    };
    let (code, head, body) = http(addr, "GET /metrics HTTP/1.1", Some(accept));
    assert_eq!(code, 200, "{head}\n{body}");
    assert!(
        head.to_ascii_lowercase()
            .contains(&format!("content-type: {want}")),
        "{head}"
    );
    body
}

/// A page as the parser read it: its families (name, type, help, samples).
pub struct Page {
    pub families: Vec<Value>,
}

const PARSE: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families as prom
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om
text = open(sys.argv[1], encoding="utf-8").read()
parse = om if sys.argv[2] == "openmetrics" else prom
out = [{"name": f.name, "type": f.type, "help": f.documentation,
        "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in f.samples]}
       for f in parse(text)]
print(json.dumps(out, allow_nan=False))
"#;

/// Parses `text` with prometheus_client (`python` from [`python`]); panics with the
/// parser's error when the page does not parse.
pub fn parse(python: &Path, dir: &Path, text: &str, openmetrics: bool) -> Page {
    let file = dir.join(if openmetrics {
        "scrape.om.txt"
    } else {
        "scrape.txt"
    });
    std::fs::write(&file, text).unwrap();
    let out = Command::new(python)
        .args(["-c", PARSE])
        .arg(&file)
        .arg(if openmetrics {
            "openmetrics"
        } else {
            "prometheus"
        })
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "prometheus_client refused the page ({}):\n{}\n--- page:\n{text}",
        if openmetrics {
            "OpenMetrics"
        } else {
            "text 0.0.4"
        },
        String::from_utf8_lossy(&out.stderr)
    );
    let families: Vec<Value> = serde_json::from_slice(&out.stdout).expect("parser JSON");
    Page { families }
}

impl Page {
    /// Samples named `name` whose labels include `labels`: (all labels, value).
    pub fn samples(
        &self,
        name: &str,
        labels: &[(&str, &str)],
    ) -> Vec<(BTreeMap<String, String>, f64)> {
        self.families
            .iter()
            .flat_map(|f| f["samples"].as_array().unwrap())
            .filter(|s| s["name"] == name)
            .filter(|s| labels.iter().all(|(k, v)| s["labels"][*k] == *v))
            .map(|s| {
                let l: BTreeMap<String, String> =
                    serde_json::from_value(s["labels"].clone()).unwrap();
                (l, s["value"].as_f64().unwrap())
            })
            .collect()
    }

    /// The one sample named `name` with `labels`.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let s = self.samples(name, labels);
        assert_eq!(s.len(), 1, "{name} {labels:?}: {s:?}");
        s[0].1
    }

    /// The sum of the samples named `name` with `labels`.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples(name, labels).iter().map(|(_, v)| v).sum()
    }

    /// The family named `name` (as the parser names it: a counter without `_total`) and its
    /// type.
    pub fn family_type(&self, name: &str) -> Option<String> {
        self.families
            .iter()
            .find(|f| f["name"] == name)
            .map(|f| f["type"].as_str().unwrap().to_string())
    }

    /// What every page must be: every sample in a family of a declared type (the lenient
    /// parser makes a sample whose name does not fit its `# TYPE` an untyped family of its
    /// own), help on every family, and every histogram's buckets cumulative in `le` order,
    /// ending with `+Inf` equal to `_count`.
    pub fn check_shape(&self) {
        for f in &self.families {
            let name = f["name"].as_str().unwrap();
            let ty = f["type"].as_str().unwrap();
            assert!(
                ["counter", "gauge", "histogram"].contains(&ty),
                "family {name} has type {ty}: {f}"
            );
            assert!(
                !f["help"].as_str().unwrap().is_empty(),
                "{name} has no help"
            );
            if ty != "histogram" {
                continue;
            }
            // Per label set (without `le`): the buckets (bound, count) and `_count`.
            type Series = (Vec<(f64, f64)>, Option<f64>);
            let mut groups: BTreeMap<String, Series> = BTreeMap::new();
            for s in f["samples"].as_array().unwrap() {
                let mut labels = s["labels"].as_object().unwrap().clone();
                let le = labels.remove("le");
                let key = serde_json::to_string(&labels).unwrap();
                let g = groups.entry(key).or_default();
                let v = s["value"].as_f64().unwrap();
                match s["name"].as_str().unwrap().strip_prefix(name) {
                    Some("_bucket") => {
                        let le = le.unwrap();
                        let le = le.as_str().unwrap();
                        let b = if le == "+Inf" {
                            f64::INFINITY
                        } else {
                            le.parse().unwrap()
                        };
                        g.0.push((b, v));
                    }
                    Some("_count") => g.1 = Some(v),
                    Some("_sum") => {}
                    other => panic!("{name}: sample {other:?}"),
                }
            }
            assert!(!groups.is_empty(), "{name} has no series");
            for (labels, (buckets, count)) in groups {
                assert!(
                    buckets
                        .windows(2)
                        .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
                    "{name}{labels}: buckets {buckets:?}"
                );
                let last = buckets.last().expect("buckets");
                assert_eq!(last.0, f64::INFINITY, "{name}{labels}: no +Inf bucket");
                assert_eq!(Some(last.1), count, "{name}{labels}: +Inf bucket != _count");
            }
        }
    }
}
