//! raidforge's Python bindings: the extension module `raidforge._native` of the `raidforge`
//! package (`python/`, built by maturin). Every call runs the functions behind the CLI's
//! `--json` output (the `raidforge` package's library) on arguments parsed by the CLI's own
//! definitions (clap), so a notebook gets what `raidforge ... --json` prints for the same
//! input, with the same defaults and the same error messages. The Python side turns keywords
//! into those arguments and the JSON into DataFrames; nothing is computed twice.
//!
//! Long calls (simulations, reproductions, traces, pool I/O and rebuilds) run with the GIL
//! released. Without the `python` feature (a plain `cargo build --workspace`) the crate is
//! empty, so the workspace builds and tests without Python.

#![cfg(feature = "python")]

use std::path::PathBuf;
use std::sync::Mutex;

use clap::{ArgAction, Args, Command, FromArgMatches};
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use raidforge::layout_cmd::{CheckArgs, CompareArgs, ShowArgs};
use raidforge::model_cmd::MttdlArgs;
use raidforge::pool_args::{check_speeds, parse_speed, CreateArgs};
use raidforge::sim_cmd::SimArgs;
use raidforge::trace_cmd::{TraceReadArgs, TraceRequests};

pyo3::create_exception!(
    raidforge,
    RaidforgeError,
    PyException,
    "An error raidforge reports: the message is the one the CLI prints after `raidforge: error:`."
);

/// A raidforge error as the Python exception, with the CLI's message (causes joined by ": ").
fn error(e: impl Into<anyhow::Error>) -> PyErr {
    RaidforgeError::new_err(format!("{:#}", e.into()))
}

/// The commands whose arguments Python passes through (name -> the clap definition).
fn command(name: &str) -> PyResult<Command> {
    let title: &'static str = match name {
        "sim" => "raidforge sim",
        "layout_show" => "raidforge layout show",
        "layout_check" => "raidforge layout check",
        "layout_compare" => "raidforge layout compare",
        "model_mttdl" => "raidforge model mttdl",
        "create" => "raidforge create",
        "trace_read" => "raidforge trace read",
        "trace_stats" => "raidforge trace stats",
        "advise" => "raidforge advise",
        _ => return Err(error(anyhow::anyhow!("no command {name:?}"))),
    };
    let cmd = Command::new(title).no_binary_name(true);
    Ok(match name {
        "sim" => SimArgs::augment_args(cmd),
        "layout_show" => ShowArgs::augment_args(cmd),
        "layout_check" => CheckArgs::augment_args(cmd),
        "layout_compare" => CompareArgs::augment_args(cmd),
        "model_mttdl" => MttdlArgs::augment_args(cmd),
        "create" => CreateArgs::augment_args(cmd),
        "trace_read" => TraceReadArgs::augment_args(cmd),
        "trace_stats" => raidforge::trace_cmd::TraceStatsArgs::augment_args(cmd),
        "advise" => raidforge::advise_cmd::AdviseArgs::augment_args(cmd),
        _ => return Err(error(anyhow::anyhow!("no command {name:?}"))),
    })
}

/// Parses `argv` (no program name) with the CLI's definition of `name`. A clap error becomes
/// a [`RaidforgeError`] with clap's first paragraph (what was wrong), without the usage lines.
fn parse<A: FromArgMatches>(name: &str, argv: Vec<String>) -> PyResult<A> {
    let matches = command(name)?.try_get_matches_from(argv).map_err(|e| {
        let text = e.render().to_string();
        let first = text.split("\n\n").next().unwrap_or(&text).trim();
        RaidforgeError::new_err(first.trim_start_matches("error: ").to_string())
    })?;
    A::from_arg_matches(&matches).map_err(|e| RaidforgeError::new_err(e.to_string()))
}

/// The options of a command, for the Python side to map keywords onto: (keyword, long flag,
/// kind, help, defaults, required), kind one of "flag" (a switch), "list" (repeated),
/// "csv" (comma-separated), "positional" or "value".
#[pyfunction]
#[allow(clippy::type_complexity)]
fn options(name: &str) -> PyResult<Vec<(String, String, String, String, Vec<String>, bool)>> {
    let cmd = command(name)?;
    Ok(cmd
        .get_arguments()
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "json"))
        .map(|a| {
            let kind = if a.is_positional() {
                "positional"
            } else if matches!(a.get_action(), ArgAction::SetTrue) {
                "flag"
            } else if a.get_value_delimiter().is_some() {
                "csv"
            } else if matches!(a.get_action(), ArgAction::Append) {
                "list"
            } else {
                "value"
            };
            (
                a.get_id().to_string(),
                a.get_long().map(|l| format!("--{l}")).unwrap_or_default(),
                kind.to_string(),
                a.get_long_help()
                    .or(a.get_help())
                    .map(|h| h.to_string())
                    .unwrap_or_default(),
                a.get_default_values()
                    .iter()
                    .map(|v| v.to_string_lossy().into_owned())
                    .collect(),
                a.is_required_set(),
            )
        })
        .collect())
}

/// Runs a data command on `argv` and returns what `raidforge <command> --json` prints, as
/// compact JSON text. The GIL is released while it runs.
#[pyfunction]
fn run_json(py: Python<'_>, name: &str, argv: Vec<String>) -> PyResult<String> {
    let value = match name {
        "sim" => {
            let a: SimArgs = parse(name, argv)?;
            py.detach(|| raidforge::sim_cmd::execute(&a).map(|(_, v)| v))
        }
        "layout_show" => {
            let a: ShowArgs = parse(name, argv)?;
            py.detach(|| raidforge::layout_cmd::show_json(&a.scheme))
        }
        "layout_check" => {
            let a: CheckArgs = parse(name, argv)?;
            py.detach(|| raidforge::layout_cmd::check_json(&a))
        }
        "layout_compare" => {
            let a: CompareArgs = parse(name, argv)?;
            py.detach(|| raidforge::layout_cmd::compare_json(&a))
        }
        "model_mttdl" => {
            let a: MttdlArgs = parse(name, argv)?;
            py.detach(|| raidforge::model_cmd::mttdl_json(&a))
        }
        "trace_stats" => {
            let a: raidforge::trace_cmd::TraceStatsArgs = parse(name, argv)?;
            py.detach(|| raidforge::trace_cmd::stats_json(&a))
        }
        "advise" => {
            let a: raidforge::advise_cmd::AdviseArgs = parse(name, argv)?;
            py.detach(|| raidforge::advise_cmd::advise_json(&a))
        }
        _ => return Err(error(anyhow::anyhow!("no data command {name:?}"))),
    }
    .map_err(error)?;
    serde_json::to_string(&value).map_err(error)
}

/// Runs the reproduction `name` (a seed or `all`) and returns (what `raidforge reproduce NAME
/// --json` prints, whether every claim held). `out`: also write the reports there, as the
/// CLI does. `progress` receives the CLI's progress lines. The GIL is released while it runs.
#[pyfunction]
#[pyo3(signature = (name, quick, traces=None, out=None, progress=None))]
fn reproduce_json(
    py: Python<'_>,
    name: &str,
    quick: bool,
    traces: Option<PathBuf>,
    out: Option<PathBuf>,
    progress: Option<Py<PyAny>>,
) -> PyResult<(String, bool)> {
    let seeds = raidforge::reproduce_cmd::seeds(name).map_err(error)?;
    let opts = repro::Opts {
        quick,
        traces_dir: traces,
    };
    let (reports, callback_error) = py
        .detach(|| {
            let mut callback_error: Option<PyErr> = None;
            let mut say = |line: &str| {
                if let (Some(cb), None) = (&progress, &callback_error) {
                    Python::attach(|py| {
                        if let Err(e) = cb.call1(py, (line,)) {
                            callback_error = Some(e);
                        }
                    });
                }
            };
            let mut reports = Vec::new();
            for s in seeds {
                let r = repro::reproduce(s, &opts, &mut say)
                    .map_err(|e| e.context(format!("reproducing {}", s.name)))?;
                if let Some(dir) = &out {
                    r.write(dir).map_err(|e| {
                        anyhow::Error::from(e)
                            .context(format!("writing the report into {}", dir.display()))
                    })?;
                }
                reports.push(r);
            }
            Ok::<_, anyhow::Error>((reports, callback_error))
        })
        .map_err(error)?;
    if let Some(e) = callback_error {
        return Err(e);
    }
    let ok = reports.iter().all(|r| r.failed_claims().is_empty());
    let v = raidforge::reproduce_cmd::reports_json(&reports);
    Ok((serde_json::to_string(&v).map_err(error)?, ok))
}

/// A trace opened as `raidforge trace read` reads it; `read(n)` returns the next `n`
/// requests as columns.
#[pyclass(module = "raidforge._native")]
struct TraceReader {
    inner: Mutex<TraceRequests>,
}

/// Columns of requests: time_ns, offset_bytes, len_bytes, is_write, volume.
type Columns = (Vec<u64>, Vec<u64>, Vec<u64>, Vec<bool>, Vec<u32>);

#[pymethods]
impl TraceReader {
    #[new]
    fn new(py: Python<'_>, argv: Vec<String>) -> PyResult<TraceReader> {
        let a: TraceReadArgs = parse("trace_read", argv)?;
        let inner = py.detach(|| TraceRequests::open(&a)).map_err(error)?;
        Ok(TraceReader {
            inner: Mutex::new(inner),
        })
    }

    /// The next `n` requests (fewer at the end of the trace), with the GIL released while
    /// reading.
    fn read(&self, py: Python<'_>, n: usize) -> PyResult<Columns> {
        py.detach(|| {
            let mut it = self.inner.lock().expect("trace reader lock");
            let cap = n.min(1 << 20);
            let mut c: Columns = (
                Vec::with_capacity(cap),
                Vec::with_capacity(cap),
                Vec::with_capacity(cap),
                Vec::with_capacity(cap),
                Vec::with_capacity(cap),
            );
            for r in it.by_ref().take(n) {
                let r = r?;
                c.0.push(r.time_ns);
                c.1.push(r.offset_bytes);
                c.2.push(r.len_bytes);
                c.3.push(r.op == sim::Op::Write);
                c.4.push(r.volume);
            }
            Ok(c)
        })
        .map_err(|e: anyhow::Error| error(e))
    }

    /// The trace's format (detected unless it was given).
    #[getter]
    fn format(&self) -> String {
        self.inner.lock().expect("lock").format().name().to_string()
    }

    /// Malformed lines skipped so far (lenient reading).
    #[getter]
    fn skipped(&self) -> u64 {
        self.inner.lock().expect("lock").skipped()
    }
}

/// A pool (`dev::Pool`) open in this process: the operations of `raidforge create`,
/// `assemble`, `io`, `fail`, `replace`, `re-add`, `rebuild`, `verify`, `flush` and `status`.
/// The members stay locked against other processes until `close()`.
#[pyclass(module = "raidforge._native")]
struct Pool {
    inner: Mutex<Option<dev::pool::Pool>>,
}

impl Pool {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut dev::pool::Pool) -> anyhow::Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            // Not `lock`: a call from a rebuild's progress callback (on the thread that holds
            // the pool) would wait for itself.
            let mut guard = match self.inner.try_lock() {
                Ok(g) => g,
                Err(std::sync::TryLockError::WouldBlock) => {
                    anyhow::bail!("the pool is busy: another call (a rebuild?) is running on it")
                }
                Err(std::sync::TryLockError::Poisoned(_)) => {
                    anyhow::bail!("the pool is unusable: a call on it panicked")
                }
            };
            let pool = guard
                .as_mut()
                .ok_or_else(|| anyhow::anyhow!("the pool is closed"))?;
            f(pool)
        })
        .map_err(error)
    }
}

#[pymethods]
impl Pool {
    /// `raidforge create` with these arguments; the pool is returned open.
    #[staticmethod]
    fn create(py: Python<'_>, argv: Vec<String>) -> PyResult<Pool> {
        let a: CreateArgs = parse("create", argv)?;
        let p = py
            .detach(|| raidforge::pool_args::create_pool(&a))
            .map_err(error)?;
        Ok(Pool {
            inner: Mutex::new(Some(p)),
        })
    }

    /// `raidforge assemble`: writes the descriptor at `path` from the members' superblocks
    /// and opens the pool; refused over another pool's descriptor, as the CLI refuses it.
    /// Returns the pool and the notes the CLI prints (an adopted MD array's).
    #[staticmethod]
    #[pyo3(signature = (path, members, emulate=None, force=false))]
    fn assemble(
        py: Python<'_>,
        path: PathBuf,
        members: Vec<PathBuf>,
        emulate: Option<String>,
        force: bool,
    ) -> PyResult<(Pool, Vec<String>)> {
        let p = py
            .detach(|| dev::pool::Pool::assemble_with(&path, &members, emulate, force))
            .map_err(error)?;
        let notes = p.md_notes();
        Ok((
            Pool {
                inner: Mutex::new(Some(p)),
            },
            notes,
        ))
    }

    /// Opens the pool of a descriptor file.
    #[staticmethod]
    fn open(py: Python<'_>, path: PathBuf) -> PyResult<Pool> {
        let p = py.detach(|| dev::pool::Pool::open(&path)).map_err(error)?;
        Ok(Pool {
            inner: Mutex::new(Some(p)),
        })
    }

    /// `raidforge status --json`, as JSON text.
    fn status(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |p| Ok(serde_json::to_string(&p.status())?))
    }

    fn read<'py>(
        &self,
        py: Python<'py>,
        offset: u64,
        length: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let data = self.with(py, |p| Ok(p.read(offset, length)?))?;
        Ok(PyBytes::new(py, &data))
    }

    fn write(&self, py: Python<'_>, offset: u64, data: Vec<u8>) -> PyResult<()> {
        self.with(py, |p| Ok(p.write(offset, &data)?))
    }

    /// `raidforge fail`: refused, as the CLI refuses it without `--force`, when the pool
    /// would lose data (`raidforge::pool_args::fail_loss`) unless `force`.
    #[pyo3(signature = (member, force=false))]
    fn fail(&self, py: Python<'_>, member: usize, force: bool) -> PyResult<String> {
        self.with(py, |p| {
            if let Some(why) = raidforge::pool_args::fail_loss(p, member).filter(|_| !force) {
                anyhow::bail!(
                    "{why} (Pool.status()[\"fault_tolerance\"] says how many more failures the \
                     pool survives); rebuild first, or pass force=True to fail it anyway"
                );
            }
            p.fail(member)?;
            Ok(serde_json::to_string(&p.status())?)
        })
    }

    /// `raidforge re-add`: lets a failed member whose file came back unchanged rejoin;
    /// returns (the stripes read with it back, the status as JSON text).
    fn re_add(&self, py: Python<'_>, member: usize) -> PyResult<(u64, String)> {
        self.with(py, |p| {
            let checked = p.re_add(member)?;
            Ok((checked, serde_json::to_string(&p.status())?))
        })
    }

    fn replace(&self, py: Python<'_>, member: usize, with: PathBuf) -> PyResult<String> {
        self.with(py, |p| {
            p.replace(member, &with)?;
            Ok(serde_json::to_string(&p.status())?)
        })
    }

    /// `raidforge rebuild` (without a rebuild policy): `rebuild_order` parallel or
    /// sequential, `rebuild_window` cycles in flight, speeds as `--speed-min/--speed-max`
    /// take them ("50M", "50MB/s"). `progress` is called with each progress record as JSON
    /// text; returns the final summary as JSON text.
    #[pyo3(signature = (rebuild_order, rebuild_window, speed_min=None, speed_max=None, progress=None))]
    fn rebuild(
        &self,
        py: Python<'_>,
        rebuild_order: &str,
        rebuild_window: usize,
        speed_min: Option<String>,
        speed_max: Option<String>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<String> {
        let parallel = match rebuild_order {
            "parallel" => rebuild_window.max(1),
            "sequential" => 1,
            other => {
                return Err(error(anyhow::anyhow!(
                    "unknown --rebuild-order '{other}'; choose parallel or sequential"
                )))
            }
        };
        let speed = |s: Option<String>, what: &str| {
            s.map(|s| parse_speed(&s).map_err(|e| error(anyhow::anyhow!("{what}: {e}"))))
                .transpose()
        };
        let speed_min = speed(speed_min, "--speed-min")?;
        let speed_max = speed(speed_max, "--speed-max")?;
        check_speeds(speed_min.as_ref(), speed_max.as_ref()).map_err(error)?;
        let speed_min = speed_min.map(|s| s.bytes_per_sec);
        let speed_max = speed_max.map(|s| s.bytes_per_sec);
        let mut callback_error: Option<PyErr> = None;
        let summary = self.with(py, |p| {
            let result = p.rebuild(
                &dev::pool::RebuildOpts {
                    parallel_cycles: parallel,
                    speed_max_bytes_per_sec: speed_max,
                    speed_min_bytes_per_sec: speed_min,
                    ..dev::pool::RebuildOpts::default()
                },
                |pr| {
                    if let (Some(cb), None) = (&progress, &callback_error) {
                        let line = serde_json::to_string(&pr).expect("progress serializes");
                        Python::attach(|py| {
                            if let Err(e) = cb.call1(py, (line,)) {
                                callback_error = Some(e);
                            }
                        });
                    }
                },
            )?;
            let status = p.status();
            Ok(raidforge::pool_args::rebuild_summary_json(&result, &status).to_string())
        })?;
        match callback_error {
            Some(e) => Err(e),
            None => Ok(summary),
        }
    }

    /// `raidforge verify --json`, as JSON text.
    fn verify(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |p| Ok(serde_json::to_string(&p.verify()?)?))
    }

    /// Recomputes every deferred parity (`raidforge flush`); returns the stripes flushed.
    fn flush(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |p| Ok(p.flush_bpgl(0)?))
    }

    /// Closes the pool (syncs members, marks it clean, unlocks the members). Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| {
            let p = match self.inner.try_lock() {
                Ok(mut g) => g.take(),
                Err(_) => anyhow::bail!("the pool is busy: another call is running on it"),
            };
            match p {
                Some(p) => Ok(p.close()?),
                None => Ok(()),
            }
        })
        .map_err(|e: anyhow::Error| error(e))
    }

    #[getter]
    fn closed(&self) -> bool {
        matches!(self.inner.try_lock().as_deref(), Ok(None))
    }
}

/// `raidforge wipe PATH`: erases a member's raidforge superblock (refused on anything that
/// is not a raidforge member, or one a running process holds); returns the pool's uuid (hex).
#[pyfunction]
fn wipe(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    let uuid = py.detach(|| dev::pool::wipe_member(&path)).map_err(error)?;
    Ok(uuid.iter().map(|b| format!("{b:02x}")).collect())
}

/// A member index as the CLI takes it (`1` or `m1`), with the CLI's message when it is not.
#[pyfunction]
fn parse_member(s: &str) -> PyResult<usize> {
    raidforge::pool_args::parse_member(s).map_err(RaidforgeError::new_err)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("RaidforgeError", m.py().get_type::<RaidforgeError>())?;
    m.add_function(wrap_pyfunction!(options, m)?)?;
    m.add_function(wrap_pyfunction!(run_json, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce_json, m)?)?;
    m.add_function(wrap_pyfunction!(wipe, m)?)?;
    m.add_function(wrap_pyfunction!(parse_member, m)?)?;
    m.add_class::<TraceReader>()?;
    m.add_class::<Pool>()?;
    Ok(())
}
