//! `raidforge serve --config FILE`: serve's settings from a TOML file, for running it as a
//! service (`contrib/systemd/raidforge@.service`).
//!
//! The file is read into [`ServeConfig`] and laid over the same [`ServeArgs`] that the command
//! line fills, so everything after parsing is one code path (`serve_cmd::run`): the file's
//! keys are the long options' names (`listen`, `rebuild-delay`, `max-request`, ...), each pool a
//! `[[pool]]` table (`path`, `export`, `spares`). Options other than `--config` given with it
//! are refused rather than merged: the file says everything, and no precedence rule has to be
//! remembered. An unknown key is an error naming the key, the file and the line
//! (`deny_unknown_fields`); a test checks that every option of `serve` has its key.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args};
use serde::Deserialize;

use crate::serve_cmd::{default_export_name, ServeArgs};
use raidforge::pool_args::{parse_size, parse_speed, Speed};

/// A size or speed: a number (bytes, bytes per second) or text as the options take it ("32M").
#[derive(Deserialize, Debug)]
#[serde(untagged)]
enum Amount {
    Number(u64),
    Text(String),
}

/// One `[[pool]]` table.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct PoolEntry {
    /// The pool's descriptor file.
    path: PathBuf,
    /// Its export name (default: the descriptor's file stem).
    export: Option<String>,
    /// Hot spares added at start unless the pool lists them already.
    #[serde(default)]
    spares: Vec<PathBuf>,
}

/// The file: one key per long option of `serve` (see its `--help` for each).
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ServeConfig {
    #[serde(rename = "pool")]
    pools: Vec<PoolEntry>,
    listen: Option<String>,
    socket: Option<PathBuf>,
    concurrency: Option<String>,
    workers: Option<usize>,
    threads_total: Option<usize>,
    max_request: Option<Amount>,
    verbose: Option<bool>,
    force: Option<bool>,
    no_zone_tracking: Option<bool>,
    no_auto_heal: Option<bool>,
    rebuild_delay: Option<f64>,
    rebuild_speed_min: Option<Amount>,
    rebuild_speed_max: Option<Amount>,
    rebuild_policy: Option<String>,
    events: Option<PathBuf>,
    on_event: Option<String>,
    io_timeout: Option<f64>,
    metrics: Option<String>,
    /// `--tls`: off, on or require.
    tls: Option<String>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_ca: Option<PathBuf>,
    tls_psk: Option<PathBuf>,
}

/// `serve`'s arguments with `--config FILE` resolved: the file's settings, or `a` unchanged
/// without `--config`. `matches` are serve's own, to tell which options were typed.
pub fn resolve(mut a: ServeArgs, matches: Option<&ArgMatches>) -> anyhow::Result<ServeArgs> {
    let Some(file) = a.config.clone() else {
        return Ok(a);
    };
    if let Some(m) = matches {
        refuse_other_options(m, &file)?;
    }
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("reading the --config file {}", file.display()))?;
    let cfg: ServeConfig = toml::from_str(&text).map_err(|e| one_line(&file, &text, &e))?;
    let base = file
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    cfg.apply(&mut a, &base)
        .with_context(|| format!("in {}", file.display()))?;
    Ok(a)
}

/// Every option typed besides `--config` is refused, naming it and the key that takes its
/// place.
fn refuse_other_options(m: &ArgMatches, file: &Path) -> anyhow::Result<()> {
    let cmd = ServeArgs::augment_args(clap::Command::new("serve"));
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if id == "config" || m.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let (given, key) = match (id, arg.get_long()) {
            ("pools", _) => ("a pool descriptor".to_string(), "[[pool]] path".to_string()),
            ("exports", _) => ("--export".to_string(), "[[pool]] export".to_string()),
            (_, Some(long)) => (format!("--{long}"), long.to_string()),
            (id, None) => (id.to_string(), id.to_string()),
        };
        bail!(
            "{given} was given with --config: with --config every setting comes from the file; \
             set `{key}` in {} instead",
            file.display()
        );
    }
    Ok(())
}

/// toml's error (which quotes the line over several) as one line: file, line, message.
fn one_line(file: &Path, text: &str, e: &toml::de::Error) -> anyhow::Error {
    let line = e
        .span()
        .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
    let msg = e.message().trim().replace('\n', "; ");
    match line {
        Some(l) => anyhow!("{} line {l}: {msg}", file.display()),
        None => anyhow!("{}: {msg}", file.display()),
    }
}

fn size(key: &str, v: Amount) -> anyhow::Result<u64> {
    match v {
        Amount::Number(n) => Ok(n),
        Amount::Text(t) => parse_size(&t).map_err(|e| anyhow!("{key} = \"{t}\": {e}")),
    }
}

fn speed(key: &str, v: Amount) -> anyhow::Result<Speed> {
    match v {
        Amount::Number(n) => Ok(Speed {
            given: n.to_string(),
            bytes_per_sec: n,
        }),
        Amount::Text(t) => parse_speed(&t).map_err(|e| anyhow!("{key} = \"{t}\": {e}")),
    }
}

/// A path from the file, taken from the file's directory when relative (an NBD URI is kept).
fn from(base: &Path, p: PathBuf) -> PathBuf {
    if p.is_absolute() || dev::nbd_member::is_nbd_path(&p) {
        p
    } else {
        base.join(p)
    }
}

impl ServeConfig {
    /// Sets in `a` (serve's defaults) what the file says.
    fn apply(self, a: &mut ServeArgs, base: &Path) -> anyhow::Result<()> {
        if self.pools.is_empty() {
            bail!("no pool to serve: add a [[pool]] table with the descriptor's path");
        }
        let named = self.pools.iter().any(|p| p.export.is_some());
        for (i, p) in self.pools.into_iter().enumerate() {
            let path = from(base, p.path);
            if named {
                a.exports
                    .push(p.export.unwrap_or_else(|| default_export_name(i, &path)));
            }
            a.spares
                .extend(p.spares.into_iter().map(|s| (i, from(base, s))));
            a.pools.push(path);
        }
        let set = |dst: &mut bool, v: Option<bool>| {
            if let Some(v) = v {
                *dst = v;
            }
        };
        a.listen = self.listen.or(a.listen.take());
        a.socket = self.socket.map(|p| from(base, p)).or(a.socket.take());
        if let Some(c) = self.concurrency {
            a.concurrency = c;
        }
        if let Some(w) = self.workers {
            a.workers = w;
        }
        if let Some(t) = self.threads_total {
            a.threads_total = t;
        }
        if let Some(v) = self.max_request {
            a.max_request = size("max-request", v)?;
        }
        set(&mut a.verbose, self.verbose);
        set(&mut a.force, self.force);
        set(&mut a.no_zone_tracking, self.no_zone_tracking);
        set(&mut a.no_auto_heal, self.no_auto_heal);
        if let Some(d) = self.rebuild_delay {
            a.rebuild_delay = d;
        }
        if let Some(v) = self.rebuild_speed_min {
            a.rebuild_speed_min = Some(speed("rebuild-speed-min", v)?);
        }
        if let Some(v) = self.rebuild_speed_max {
            a.rebuild_speed_max = Some(speed("rebuild-speed-max", v)?);
        }
        if let Some(v) = self.rebuild_policy {
            a.rebuild_policy =
                Some(dev::ido::parse_policy(&v).map_err(|e| anyhow!("rebuild-policy: {e}"))?);
        }
        a.events = self.events.map(|p| from(base, p)).or(a.events.take());
        a.on_event = self.on_event.or(a.on_event.take());
        if let Some(t) = self.io_timeout {
            a.io_timeout = t;
        }
        a.metrics = self.metrics.or(a.metrics.take());
        if let Some(m) = self.tls {
            a.tls = <crate::serve_tls::TlsMode as clap::ValueEnum>::from_str(&m, true)
                .map_err(|_| anyhow!("tls = \"{m}\": give off, on or require"))?;
        }
        a.tls_cert = self.tls_cert.map(|p| from(base, p)).or(a.tls_cert.take());
        a.tls_key = self.tls_key.map(|p| from(base, p)).or(a.tls_key.take());
        a.tls_ca = self.tls_ca.map(|p| from(base, p)).or(a.tls_ca.take());
        a.tls_psk = self.tls_psk.map(|p| from(base, p)).or(a.tls_psk.take());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::FromArgMatches;

    /// serve's arguments as the command line `serve ARGS` gives them, and its matches.
    fn parse(args: &[&str]) -> (ServeArgs, ArgMatches) {
        let cmd = ServeArgs::augment_args(clap::Command::new("serve"));
        let m = cmd
            .try_get_matches_from(std::iter::once("serve").chain(args.iter().copied()))
            .unwrap();
        (ServeArgs::from_arg_matches(&m).unwrap(), m)
    }

    fn write(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rf-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// Every option of `serve` has a key in the file: a key the file does not know is
    /// refused as unknown, one it knows with a value of the wrong type as a bad value. A new
    /// option of `serve` fails this until `ServeConfig` takes it.
    #[test]
    fn every_option_of_serve_has_a_key() {
        let cmd = ServeArgs::augment_args(clap::Command::new("serve"));
        let mut checked = 0;
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            // In [[pool]] tables, or the option that names the file.
            if matches!(id, "pools" | "exports" | "config") {
                continue;
            }
            let long = arg
                .get_long()
                .unwrap_or_else(|| panic!("{id} has no long name"));
            let text = format!("{long} = [[1]]\n[[pool]]\npath = \"p.json\"\n");
            let err = toml::from_str::<ServeConfig>(&text)
                .unwrap_err()
                .to_string();
            assert!(
                !err.contains("unknown field"),
                "--{long} has no key in serve --config's file (add it to ServeConfig and \
                 apply()): {err}"
            );
            checked += 1;
        }
        assert!(checked >= 15, "{checked}");
        // And the check itself tells an unknown key.
        let err = toml::from_str::<ServeConfig>("listn = 1\n[[pool]]\npath = \"p\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `listn`"), "{err}");
    }

    /// The file's settings land where the command line puts them; paths are taken from the
    /// file's directory; omitted keys keep the command line's defaults.
    #[test]
    fn the_file_sets_what_the_options_set() {
        let f = write(
            "full.toml",
            r#"
listen = "127.0.0.1:0"
socket = "nbd.sock"
workers = 3
threads-total = 12
max-request = "1M"
no-auto-heal = false
rebuild-delay = 2
rebuild-speed-max = "50M"
rebuild-speed-min = 1000000
rebuild-policy = "pro"
io-timeout = 1.5
events = "/var/log/ev.jsonl"
on-event = "logger x"
metrics = "127.0.0.1:9109"
verbose = true
tls = "require"
tls-cert = "tls/server-cert.pem"
tls-key = "/etc/raidforge/server-key.pem"
tls-ca = "tls/ca-cert.pem"

[[pool]]
path = "a.json"
spares = ["s.img", "nbd+unix:///?socket=/x"]

[[pool]]
path = "/srv/b.json"
export = "bee"
"#,
        );
        let dir = f.parent().unwrap().to_path_buf();
        let (a, m) = parse(&["--config", f.to_str().unwrap()]);
        let a = resolve(a, Some(&m)).unwrap();
        assert_eq!(
            a.pools,
            vec![dir.join("a.json"), PathBuf::from("/srv/b.json")]
        );
        assert_eq!(a.exports, vec!["a".to_string(), "bee".to_string()]);
        assert_eq!(
            a.spares,
            vec![
                (0, dir.join("s.img")),
                (0, PathBuf::from("nbd+unix:///?socket=/x"))
            ]
        );
        assert_eq!(a.listen.as_deref(), Some("127.0.0.1:0"));
        assert_eq!(a.socket, Some(dir.join("nbd.sock")));
        assert_eq!(
            (a.workers, a.threads_total, a.max_request),
            (3, 12, 1 << 20)
        );
        assert_eq!((a.rebuild_delay, a.io_timeout), (2.0, 1.5));
        assert_eq!(a.rebuild_speed_max.unwrap().bytes_per_sec, 50 << 20);
        assert_eq!(a.rebuild_speed_min.unwrap().bytes_per_sec, 1_000_000);
        assert_eq!(a.rebuild_policy, Some(dev::ido::RebuildPolicy::Pro));
        assert_eq!(a.events, Some(PathBuf::from("/var/log/ev.jsonl")));
        assert_eq!(a.on_event.as_deref(), Some("logger x"));
        assert_eq!(a.metrics.as_deref(), Some("127.0.0.1:9109"));
        assert!(a.verbose && !a.no_auto_heal && !a.force);
        assert_eq!(a.tls, crate::serve_tls::TlsMode::Require);
        assert_eq!(a.tls_cert, Some(dir.join("tls/server-cert.pem")));
        assert_eq!(
            a.tls_key,
            Some(PathBuf::from("/etc/raidforge/server-key.pem"))
        );
        assert_eq!(a.tls_ca, Some(dir.join("tls/ca-cert.pem")));
        assert_eq!(a.tls_psk, None);
        // Left out: the command line's defaults.
        assert_eq!(a.concurrency, "stripes");

        let f = write("min.toml", "[[pool]]\npath = \"p.json\"\n");
        let (a, m) = parse(&["--config", f.to_str().unwrap()]);
        let a = resolve(a, Some(&m)).unwrap();
        let (d, _) = parse(&["x.json"]);
        assert_eq!(
            (a.workers, a.max_request, a.rebuild_delay, a.io_timeout),
            (d.workers, d.max_request, d.rebuild_delay, d.io_timeout)
        );
        assert!(a.exports.is_empty() && a.listen.is_none());
    }

    /// Options typed with --config are refused, naming the option and the key; a bad file is
    /// one line naming the file and the line.
    #[test]
    fn options_beside_config_and_bad_files_are_refused() {
        let f = write("ok.toml", "[[pool]]\npath = \"p.json\"\n");
        let fs = f.to_str().unwrap();
        for (args, needle) in [
            (
                &["--config", fs, "--workers", "4"][..],
                "--workers was given with --config",
            ),
            (
                &["--config", fs, "p.json"][..],
                "a pool descriptor was given",
            ),
            (
                &["--config", fs, "--no-auto-heal"][..],
                "set `no-auto-heal` in",
            ),
            // Given, even as the default value.
            (
                &["--config", fs, "--rebuild-delay", "0"][..],
                "--rebuild-delay was given",
            ),
        ] {
            let (a, m) = parse(args);
            let e = format!("{:#}", resolve(a, Some(&m)).unwrap_err());
            assert!(e.contains(needle), "{args:?}: {e}");
        }
        for (text, needle) in [
            (
                "wrkers = 4\n[[pool]]\npath = \"p\"\n",
                "line 1: unknown field `wrkers`",
            ),
            (
                "[[pool]]\npath = \"p\"\nexprot = \"x\"\n",
                "line 3: unknown field `exprot`",
            ),
            ("listen = \"x\"\n", "missing field `pool`"),
            ("pool = []\n", "no pool to serve"),
            (
                "workers = \"many\"\n[[pool]]\npath = \"p\"\n",
                "line 1: invalid type",
            ),
            (
                "max-request = \"lots\"\n[[pool]]\npath = \"p\"\n",
                "max-request = \"lots\"",
            ),
            (
                "tls = \"maybe\"\n[[pool]]\npath = \"p\"\n",
                "tls = \"maybe\": give off, on or require",
            ),
            ("listen = \n", "line 1"),
        ] {
            let f = write("bad.toml", text);
            let (a, m) = parse(&["--config", f.to_str().unwrap()]);
            let e = format!("{:#}", resolve(a, Some(&m)).unwrap_err());
            assert!(e.contains(needle), "{text:?}: {e}");
            assert!(e.contains(f.to_str().unwrap()), "{text:?}: {e}");
            assert!(!e.contains('\n'), "{text:?}: {e}");
        }
    }
}
