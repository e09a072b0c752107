//! `raidforge serve --metrics ADDR`: the served pools' health and traffic for Prometheus.
//!
//! What is counted where: member devices by `dev::metrics` (a wrapper around every member
//! handle the pool opens, replacements and spares included), export requests here
//! ([`MeteredBackend`] around each export's backend, timed from the backend's call to its
//! return, so network time is not in it), pool health by one short look under each pool's
//! mutex at scrape time ([`dev::metrics::PoolSnapshot`]). A scrape copies the counters and
//! renders outside every lock ([`text`]); [`http`] answers `GET /metrics`.
//!
//! Every series carries `pool` (the export name, unique within the server). The families:
//!
//! | family | type | labels | what |
//! |---|---|---|---|
//! | `raidforge_pool_info` | gauge | pool, descriptor, layout, uuid | 1 |
//! | `raidforge_pool_state` | gauge | pool, state | 1 for the pool's state (clean, degraded, rebuilding, failed: `status`'s words), 0 for the others |
//! | `raidforge_pool_failures_tolerated` | gauge | pool | member failures the pool survives now |
//! | `raidforge_pool_capacity_bytes` | gauge | pool | usable bytes |
//! | `raidforge_pool_rebuild_done_bytes`, `_total_bytes` | gauge | pool | capacity whose cycles are in the target layout, of the capacity |
//! | `raidforge_pool_rebuild_running` | gauge | pool | 1 while the background rebuild runs |
//! | `raidforge_pool_rebuild_rate_bytes_per_second` | gauge | pool | member bytes per second the running (or last) rebuild wrote, on average |
//! | `raidforge_pool_spares` | gauge | pool | hot spares left |
//! | `raidforge_pool_auto_rebuilds` | counter | pool | rebuilds the healer started |
//! | `raidforge_pool_health_events` | counter | pool, event | health events by kind |
//! | `raidforge_pool_lost_ranges`, `_lost_bytes` | gauge | pool | data known lost |
//! | `raidforge_pool_deferred_parity_stripes`, `_capacity_stripes` | gauge | pool | lazy parity only |
//! | `raidforge_pool_journal_used_bytes`, `_ring_bytes` | gauge | pool | write journal only |
//! | `raidforge_pool_journal_records`, `_commits`, `_checkpoints` | counter | pool | write journal only |
//! | `raidforge_pool_intent_regions_marked` | gauge | pool | write-intent bitmap only |
//! | `raidforge_member_state` | gauge | pool, member, device, state | 1 for the device's state (active, rebuilding, spare, failed; removed: replaced by another device) |
//! | `raidforge_member_read_bytes`, `_written_bytes` | counter | pool, member, device | bytes moved by I/Os that succeeded |
//! | `raidforge_member_ios` | counter | pool, member, device, op | I/Os completed (op read, write, flush), failed ones included |
//! | `raidforge_member_errors` | counter | pool, member, device, op | I/Os that failed |
//! | `raidforge_member_io_duration_seconds` | histogram | pool, member, device, op | how long each I/O took |
//! | `raidforge_export_requests`, `_request_errors` | counter | pool, op | client requests (read, write, flush, trim, write_zeroes) and failed ones |
//! | `raidforge_export_read_bytes`, `_written_bytes` | counter | pool | bytes of requests that succeeded |
//! | `raidforge_export_request_duration_seconds` | histogram | pool, op | time in the pool per request |
//! | `raidforge_nbd_connections_open`, `raidforge_nbd_connections` | gauge, counter | | client connections |
//!
//! Counters start at zero when `serve` starts; a replaced member device keeps its series
//! (state `removed`) until the server stops.

pub mod http;
pub mod text;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use dev::metrics::{IoMeter, PoolMeters, PoolSnapshot};
use dev::serve_support::SharedPool;
use nbd::Backend;

use text::{Families, Format, Kind, Value};

/// The operations an export's requests are counted by.
const EXPORT_OPS: [&str; 5] = ["read", "write", "flush", "trim", "write_zeroes"];

/// One export's requests, per operation ([`EXPORT_OPS`] order).
#[derive(Debug, Default)]
pub struct ExportMeter {
    ops: [IoMeter; 5],
}

/// An export's backend whose requests are counted into an [`ExportMeter`].
pub struct MeteredBackend {
    pub inner: Arc<dyn Backend>,
    pub meter: Arc<ExportMeter>,
}

impl MeteredBackend {
    fn timed<T>(
        &self,
        op: usize,
        bytes: usize,
        f: impl FnOnce() -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        let t0 = Instant::now();
        let r = f();
        self.meter.ops[op].done(t0, bytes, r.is_ok());
        r
    }
}

impl Backend for MeteredBackend {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let n = buf.len();
        self.timed(0, n, || self.inner.read(offset, buf))
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.timed(1, data.len(), || self.inner.write(offset, data))
    }
    fn flush(&self) -> std::io::Result<()> {
        self.timed(2, 0, || self.inner.flush())
    }
    fn trim(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.timed(3, 0, || self.inner.trim(offset, len))
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.timed(4, 0, || self.inner.write_zeroes(offset, len))
    }
    /// Not counted (no data moves): passed on, so that metering does not hide the holes.
    fn block_status(&self, offset: u64, len: u64) -> std::io::Result<Vec<nbd::Extent>> {
        self.inner.block_status(offset, len)
    }
}

/// One served pool as the metrics see it.
pub struct MeteredPool {
    /// The export name (the `pool` label).
    pub name: String,
    pub descriptor: PathBuf,
    pub layout: String,
    pub uuid: String,
    pub pool: Arc<SharedPool>,
    pub members: Arc<PoolMeters>,
    pub export: Arc<ExportMeter>,
}

/// Everything `GET /metrics` reports.
pub struct Metrics {
    pub pools: Vec<MeteredPool>,
    pub server: Option<Arc<nbd::Server>>,
}

const POOL_STATES: [&str; 4] = ["clean", "degraded", "rebuilding", "failed"];
const MEMBER_STATES: [&str; 5] = ["active", "rebuilding", "spare", "failed", "removed"];

fn l(pairs: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    pairs.iter().map(|(k, v)| (*k, v.to_string())).collect()
}

impl Metrics {
    /// The metrics now, as families (samples copied; no lock held afterwards).
    pub fn collect(&self) -> Families {
        let mut f = Families::default();
        for mp in &self.pools {
            let pool = mp.name.as_str();
            f.add(
                "raidforge_pool_info",
                "A served pool: its descriptor, layout and UUID (always 1).",
                Kind::Gauge,
                l(&[
                    ("pool", pool),
                    ("descriptor", &mp.descriptor.display().to_string()),
                    ("layout", &mp.layout),
                    ("uuid", &mp.uuid),
                ]),
                Value::Int(1),
            );
            // A pool closed under us (the server is stopping) has no health to report.
            if let Ok(s) = PoolSnapshot::of(&mp.pool) {
                pool_families(&mut f, pool, &s);
                member_families(&mut f, pool, &mp.members, Some(&s));
            } else {
                member_families(&mut f, pool, &mp.members, None);
            }
            export_families(&mut f, pool, &mp.export);
        }
        if let Some(srv) = &self.server {
            let st = srv.stats();
            f.add(
                "raidforge_nbd_connections_open",
                "NBD client connections open now.",
                Kind::Gauge,
                vec![],
                Value::Int(st.open.load(Ordering::Relaxed) as u64),
            );
            f.add(
                "raidforge_nbd_connections",
                "NBD client connections accepted since the server started.",
                Kind::Counter,
                vec![],
                Value::Int(st.connections.load(Ordering::Relaxed)),
            );
            f.add(
                "raidforge_nbd_protocol_errors",
                "NBD connections dropped for a protocol violation.",
                Kind::Counter,
                vec![],
                Value::Int(st.protocol_errors.load(Ordering::Relaxed)),
            );
        }
        f
    }

    /// The metrics as text in format `fmt`.
    pub fn render(&self, fmt: Format) -> String {
        text::render(&self.collect().0, fmt)
    }
}

fn pool_families(f: &mut Families, pool: &str, s: &PoolSnapshot) {
    for st in POOL_STATES {
        f.add(
            "raidforge_pool_state",
            "The pool's state, as `raidforge status` says it: 1 for the state it is in \
             (clean, degraded: members failed and not rebuilt, rebuilding, failed: data lost), \
             0 for the others.",
            Kind::Gauge,
            l(&[("pool", pool), ("state", st)]),
            Value::Int((s.state == st) as u64),
        );
    }
    let g = |f: &mut Families, name, help, v: u64| {
        f.add(name, help, Kind::Gauge, l(&[("pool", pool)]), Value::Int(v))
    };
    g(
        f,
        "raidforge_pool_failures_tolerated",
        "Member failures the pool survives now without losing data.",
        s.fault_tolerance as u64,
    );
    g(
        f,
        "raidforge_pool_capacity_bytes",
        "Usable bytes of the pool.",
        s.capacity_bytes,
    );
    g(
        f,
        "raidforge_pool_rebuild_done_bytes",
        "Bytes of the pool's capacity whose stripes are in the layout the pool moves to \
         (rebuild progress; equal to raidforge_pool_rebuild_total_bytes when nothing needs \
         rebuilding).",
        s.rebuilt_bytes,
    );
    g(
        f,
        "raidforge_pool_rebuild_total_bytes",
        "Bytes a rebuild covers: the pool's capacity.",
        s.capacity_bytes,
    );
    g(
        f,
        "raidforge_pool_rebuild_running",
        "1 while a background rebuild runs.",
        s.rebuild.running as u64,
    );
    f.add(
        "raidforge_pool_rebuild_rate_bytes_per_second",
        "Member bytes per second the running rebuild (or the last one) has written on average; \
         0 before the first rebuild.",
        Kind::Gauge,
        l(&[("pool", pool)]),
        Value::Float(s.rebuild_rate_bytes_per_sec()),
    );
    g(
        f,
        "raidforge_pool_spares",
        "Hot spares left to take the place of failed members.",
        s.spares as u64,
    );
    if let Some((started, events)) = &s.heal {
        f.add(
            "raidforge_pool_auto_rebuilds",
            "Rebuilds the server started by itself (automatic failure handling).",
            Kind::Counter,
            l(&[("pool", pool)]),
            Value::Int(*started),
        );
        for (kind, n) in events {
            f.add(
                "raidforge_pool_health_events",
                "Health events by kind (Fail, DegradedArray, SpareActive, RebuildStarted, ...).",
                Kind::Counter,
                l(&[("pool", pool), ("event", kind)]),
                Value::Int(*n),
            );
        }
    }
    g(
        f,
        "raidforge_pool_lost_ranges",
        "Logical ranges known lost (reads of them fail).",
        s.lost_ranges as u64,
    );
    g(
        f,
        "raidforge_pool_lost_bytes",
        "Bytes in the ranges known lost.",
        s.lost_bytes,
    );
    if let Some((len, cap)) = s.deferred_parity {
        g(
            f,
            "raidforge_pool_deferred_parity_stripes",
            "Stripes whose background parity is deferred (lazy parity), waiting for a flush.",
            len as u64,
        );
        g(
            f,
            "raidforge_pool_deferred_parity_capacity_stripes",
            "How many stripes the deferred-parity list holds at most.",
            cap as u64,
        );
    }
    if let Some(j) = s.journal {
        g(
            f,
            "raidforge_pool_journal_used_bytes",
            "Bytes of the write journal's ring held by records not yet retired.",
            j.live_bytes,
        );
        g(
            f,
            "raidforge_pool_journal_ring_bytes",
            "Bytes of the write journal's ring.",
            j.ring_bytes,
        );
        let c = |f: &mut Families, name, help, v: u64| {
            f.add(
                name,
                help,
                Kind::Counter,
                l(&[("pool", pool)]),
                Value::Int(v),
            )
        };
        c(
            f,
            "raidforge_pool_journal_records",
            "Write journal records appended since the pool was opened.",
            j.records,
        );
        c(
            f,
            "raidforge_pool_journal_commits",
            "Write journal group commits since the pool was opened.",
            j.commits,
        );
        c(
            f,
            "raidforge_pool_journal_checkpoints",
            "Write journal checkpoints since the pool was opened.",
            j.checkpoints,
        );
    }
    if let Some(n) = s.intent_regions_marked {
        g(
            f,
            "raidforge_pool_intent_regions_marked",
            "Write-intent regions marked now: what a crash would leave to resynchronise.",
            n as u64,
        );
    }
}

fn member_families(f: &mut Families, pool: &str, meters: &PoolMeters, s: Option<&PoolSnapshot>) {
    for (d, newest) in meters.devices() {
        let slot = d.slot.to_string();
        let base = [
            ("pool", pool),
            ("member", slot.as_str()),
            ("device", d.device.as_str()),
        ];
        let state = if !newest {
            Some("removed")
        } else {
            s.and_then(|s| s.members.get(d.slot).copied())
        };
        if let Some(state) = state {
            for st in MEMBER_STATES {
                let mut labels = l(&base);
                labels.push(("state", st.to_string()));
                f.add(
                    "raidforge_member_state",
                    "A member device's state: 1 for the state it is in (active, rebuilding: \
                     replaced and not rebuilt yet, spare: a layout's spare disk, failed, \
                     removed: another device took its place), 0 for the others.",
                    Kind::Gauge,
                    labels,
                    Value::Int((st == state) as u64),
                );
            }
        }
        f.add(
            "raidforge_member_read_bytes",
            "Bytes read from a member device by reads that succeeded.",
            Kind::Counter,
            l(&base),
            Value::Int(d.read.bytes.load(Ordering::Relaxed)),
        );
        f.add(
            "raidforge_member_written_bytes",
            "Bytes written to a member device by writes that succeeded.",
            Kind::Counter,
            l(&base),
            Value::Int(d.write.bytes.load(Ordering::Relaxed)),
        );
        // (Families keep each family's samples together, whatever the order they come in.)
        for (op, m) in [("read", &d.read), ("write", &d.write), ("flush", &d.flush)] {
            let mut labels = l(&base);
            labels.push(("op", op.to_string()));
            let h = m.latency.snapshot();
            f.add(
                "raidforge_member_ios",
                "I/Os a member device completed (op read, write, flush), failed ones included.",
                Kind::Counter,
                labels.clone(),
                Value::Int(h.count()),
            );
            f.add(
                "raidforge_member_errors",
                "I/Os of a member device that failed.",
                Kind::Counter,
                labels.clone(),
                Value::Int(m.errors.load(Ordering::Relaxed)),
            );
            f.add(
                "raidforge_member_io_duration_seconds",
                "How long each I/O of a member device took, failed ones included.",
                Kind::Histogram,
                labels,
                Value::Histogram(h),
            );
        }
    }
}

fn export_families(f: &mut Families, pool: &str, m: &ExportMeter) {
    for (op, o) in EXPORT_OPS.iter().zip(&m.ops) {
        let labels = l(&[("pool", pool), ("op", op)]);
        let h = o.latency.snapshot();
        f.add(
            "raidforge_export_requests",
            "NBD requests the export served (op read, write, flush, trim, write_zeroes), \
             failed ones included.",
            Kind::Counter,
            labels.clone(),
            Value::Int(h.count()),
        );
        f.add(
            "raidforge_export_request_errors",
            "NBD requests of the export that failed (the client got an error).",
            Kind::Counter,
            labels.clone(),
            Value::Int(o.errors.load(Ordering::Relaxed)),
        );
        f.add(
            "raidforge_export_request_duration_seconds",
            "How long the pool took per NBD request (from the request's start in the pool to \
             its end; network time not included).",
            Kind::Histogram,
            labels,
            Value::Histogram(h),
        );
    }
    f.add(
        "raidforge_export_read_bytes",
        "Bytes clients read from the export.",
        Kind::Counter,
        l(&[("pool", pool)]),
        Value::Int(m.ops[0].bytes.load(Ordering::Relaxed)),
    );
    f.add(
        "raidforge_export_written_bytes",
        "Bytes clients wrote to the export.",
        Kind::Counter,
        l(&[("pool", pool)]),
        Value::Int(m.ops[1].bytes.load(Ordering::Relaxed)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    use dev::pool::{test_opts, Pool, RebuildOpts};
    use dev::serve_support::{Concurrency, PoolBackend};
    use layout::SchemeKind;

    /// The value of the one line of `text` that is exactly `series` followed by a value.
    fn value(text: &str, series: &str) -> f64 {
        let found: Vec<f64> = text
            .lines()
            .filter_map(|l| l.strip_prefix(series))
            .filter_map(|rest| rest.strip_prefix(' '))
            .map(|v| v.parse().unwrap())
            .collect();
        assert_eq!(found.len(), 1, "{series}:\n{text}");
        found[0]
    }

    fn member_state(text: &str, slot: usize, device: &Path, state: &str) -> f64 {
        value(
            text,
            &format!(
                "raidforge_member_state{{pool=\"p\",member=\"{slot}\",device=\"{}\",state=\"{state}\"}}",
                device.display()
            ),
        )
    }

    #[test]
    fn a_pool_failed_replaced_and_rebuilt_in_process_reports_each_state() {
        let dir = std::env::temp_dir().join(format!("rf-metrics-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let desc = dir.join("p.json");
        Pool::create(&desc, test_opts(SchemeKind::Raid5, &dir, 3, 6 << 20)).unwrap();
        let meters = PoolMeters::new();
        let pool = Pool::open_wrapped(&desc, meters.wrap()).unwrap();
        let sp = SharedPool::new(pool, Concurrency::Stripes).unwrap();
        let export = Arc::new(ExportMeter::default());
        let backend = MeteredBackend {
            inner: Arc::new(PoolBackend(Arc::clone(&sp))),
            meter: Arc::clone(&export),
        };
        let st = sp.status().unwrap();
        let m = Metrics {
            pools: vec![MeteredPool {
                name: "p".into(),
                descriptor: desc.clone(),
                layout: st.layout.clone(),
                uuid: st.uuid.clone(),
                pool: Arc::clone(&sp),
                members: Arc::clone(&meters),
                export,
            }],
            server: None,
        };
        let cap = sp.capacity_bytes();
        backend.write(0, &[7u8; 65536]).unwrap();
        let mut buf = vec![0u8; 4096];
        backend.read(4096, &mut buf).unwrap();
        // Past the end: the pool refuses it, the export counts an error.
        assert!(backend.read(cap, &mut buf).is_err());

        let t = m.render(Format::Prometheus);
        assert_eq!(
            value(&t, "raidforge_pool_state{pool=\"p\",state=\"clean\"}"),
            1.0
        );
        assert_eq!(
            value(&t, "raidforge_pool_failures_tolerated{pool=\"p\"}"),
            1.0
        );
        assert_eq!(
            value(&t, "raidforge_pool_rebuild_done_bytes{pool=\"p\"}"),
            cap as f64
        );
        assert_eq!(
            value(
                &t,
                "raidforge_export_requests_total{pool=\"p\",op=\"write\"}"
            ),
            1.0
        );
        assert_eq!(
            value(
                &t,
                "raidforge_export_requests_total{pool=\"p\",op=\"read\"}"
            ),
            2.0
        );
        assert_eq!(
            value(
                &t,
                "raidforge_export_request_errors_total{pool=\"p\",op=\"read\"}"
            ),
            1.0
        );
        assert_eq!(
            value(&t, "raidforge_export_written_bytes_total{pool=\"p\"}"),
            65536.0
        );
        assert_eq!(
            value(&t, "raidforge_export_read_bytes_total{pool=\"p\"}"),
            4096.0
        );
        for i in 0..3 {
            assert_eq!(
                member_state(&t, i, &dir.join(format!("m{i}.img")), "active"),
                1.0
            );
        }
        // The healer is off: no automatic-rebuild series.
        assert!(!t.contains("raidforge_pool_auto_rebuilds"));

        sp.fail(1).unwrap();
        let t = m.render(Format::Prometheus);
        assert_eq!(
            value(&t, "raidforge_pool_state{pool=\"p\",state=\"degraded\"}"),
            1.0
        );
        assert_eq!(
            value(&t, "raidforge_pool_state{pool=\"p\",state=\"clean\"}"),
            0.0
        );
        assert_eq!(
            value(&t, "raidforge_pool_failures_tolerated{pool=\"p\"}"),
            0.0
        );
        assert_eq!(member_state(&t, 1, &dir.join("m1.img"), "failed"), 1.0);

        let new = dir.join("m3.img");
        sp.replace(1, &new).unwrap();
        let t = m.render(Format::Prometheus);
        assert_eq!(
            value(&t, "raidforge_pool_state{pool=\"p\",state=\"rebuilding\"}"),
            1.0
        );
        assert_eq!(member_state(&t, 1, &dir.join("m1.img"), "removed"), 1.0);
        assert_eq!(member_state(&t, 1, &new, "rebuilding"), 1.0);
        assert!(value(&t, "raidforge_pool_rebuild_done_bytes{pool=\"p\"}") < cap as f64);

        sp.start_rebuild(RebuildOpts::default()).unwrap();
        let deadline = Instant::now() + std::time::Duration::from_secs(60);
        while !sp.rebuild_info().finished {
            assert!(Instant::now() < deadline, "{:?}", sp.rebuild_info());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let t = m.render(Format::Prometheus);
        assert_eq!(
            value(&t, "raidforge_pool_state{pool=\"p\",state=\"clean\"}"),
            1.0
        );
        assert_eq!(
            value(&t, "raidforge_pool_failures_tolerated{pool=\"p\"}"),
            1.0
        );
        assert_eq!(
            value(&t, "raidforge_pool_rebuild_done_bytes{pool=\"p\"}"),
            cap as f64
        );
        assert!(
            value(
                &t,
                "raidforge_pool_rebuild_rate_bytes_per_second{pool=\"p\"}"
            ) > 0.0
        );
        assert_eq!(member_state(&t, 1, &new, "active"), 1.0);
        let series = |name: &str, dev: &Path| {
            format!(
                "{name}{{pool=\"p\",member=\"1\",device=\"{}\"}}",
                dev.display()
            )
        };
        // The replacement got member 1's whole share (a RAID5 of 3: half the capacity).
        assert!(
            value(&t, &series("raidforge_member_written_bytes_total", &new)) >= (cap / 2) as f64
        );
        // The failed device's counts stay as they were when it left.
        assert!(
            value(
                &t,
                &series("raidforge_member_written_bytes_total", &dir.join("m1.img"))
            ) > 0.0
        );
        sp.close().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
