//! Reproductions of the seed papers' published results.
//!
//! Each seed has a module whose experiments are declared as data: an [`Experiment`] names the
//! paper's table or figure (`id`), the configuration that was run (`config`, shown verbatim in
//! the report), and one [`Row`] per reproduced number with the published value beside ours.
//! Qualitative claims of the paper (e.g. "S2-RAID rebuilds at least 2x faster than RAID5") are
//! [`Claim`]s, checked on every run; `--quick` runs scaled-down configurations whose claims CI
//! asserts. Where ours differs from the published value by more than [`TOLERANCE`], the row
//! carries a note saying why.
//!
//! Every experiment runs the engine's own code: layouts from `layout`, plans from `raidcore`,
//! timing from `sim` (one parameter set per drive, from its datasheet, for every experiment).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub mod coverage;
pub mod ido;
pub mod lpu;
pub mod mttdl;
pub mod power;
pub mod raid4s;
pub mod raide;
pub mod raidh;
pub mod raidplus;
pub(crate) mod raidplus_apps;
pub(crate) mod raidplus_mix;
pub(crate) mod raidplus_more;
pub mod s2raid;
pub(crate) mod simkit;
pub(crate) mod thesis;
pub(crate) mod thesis3;
pub(crate) mod thesis4;
pub(crate) mod thesis6;

/// Relative difference from the published value above which a row must say why.
pub const TOLERANCE: f64 = 0.20;

/// How a reproduction runs.
#[derive(Clone, Debug, Default)]
pub struct Opts {
    /// Scaled-down configurations (smaller disks, shorter traces): all seeds in under two
    /// minutes in a release build.
    pub quick: bool,
    /// Where the traces live (`--traces DIR`); by default `$RAIDFORGE_TRACES`, else the
    /// repository's `data/traces` (see [`sim::locate_traces_dir`]).
    pub traces_dir: Option<PathBuf>,
}

impl Opts {
    /// The trace folder: `opts.traces_dir`, else `$RAIDFORGE_TRACES`, else the repository's
    /// `data/traces`; an error that says how to name it when there is none.
    pub fn traces_dir(&self) -> anyhow::Result<PathBuf> {
        Ok(sim::locate_traces_dir(self.traces_dir.as_deref())?)
    }

    /// The trace `name` of the trace folder; an error naming the file and the ways to point at
    /// another folder when it is not there.
    pub fn trace(&self, name: &str) -> anyhow::Result<PathBuf> {
        let dir = self.traces_dir()?;
        let path = dir.join(name);
        if !path.is_file() {
            anyhow::bail!(
                "trace {} not found (pass --traces DIR or set RAIDFORGE_TRACES to a folder holding {name})",
                path.display()
            );
        }
        Ok(path)
    }
}

/// One reproduced number.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// What the row is, e.g. `size 2 device 3 reads %` or `RAID5 8+1 offline rebuild`.
    pub label: String,
    /// The paper's value, if it gives one.
    pub published: Option<f64>,
    /// Ours.
    pub ours: f64,
    /// Unit of both values (`s`, `ms`, `%`, `IOPS`, `x`, ...).
    pub unit: String,
    /// Why ours differs from the published value (required beyond [`TOLERANCE`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Row {
    /// A row with a published value.
    pub fn new(label: impl Into<String>, published: Option<f64>, ours: f64, unit: &str) -> Row {
        Row {
            label: label.into(),
            published,
            ours,
            unit: unit.into(),
            note: None,
        }
    }

    /// The same row with a note on why it differs.
    pub fn with_note(mut self, note: impl Into<String>) -> Row {
        self.note = Some(note.into());
        self
    }

    /// ours / published, when both exist and published is not zero.
    pub fn ratio(&self) -> Option<f64> {
        match self.published {
            Some(p) if p != 0.0 => Some(self.ours / p),
            _ => None,
        }
    }

    /// Differs from the published value by more than [`TOLERANCE`] (relative).
    pub fn differs(&self) -> bool {
        match self.published {
            Some(p) if p != 0.0 => ((self.ours - p) / p).abs() > TOLERANCE,
            Some(_) => self.ours.abs() > 1e-9,
            None => false,
        }
    }
}

/// A qualitative claim of the paper and whether our run upholds it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Claim {
    /// The claim, e.g. `S2-RAID5 rebuilds >= 2x faster than RAID5 (offline)`.
    pub text: String,
    /// Whether it holds in this run.
    pub holds: bool,
    /// The figures that decided it, e.g. `3.1x`.
    pub evidence: String,
    /// Why a claim that does not hold fails here (what our model lacks, or what the paper's
    /// testbed had); a failing claim without one is a failed reproduction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Claim {
    /// A claim with the evidence that decided it.
    pub fn new(text: impl Into<String>, holds: bool, evidence: impl Into<String>) -> Claim {
        Claim {
            text: text.into(),
            holds,
            evidence: evidence.into(),
            note: None,
        }
    }

    /// The same claim with the reason it fails in our runs; kept only when it does fail (a
    /// claim that holds needs no excuse).
    pub fn unless(mut self, why: impl Into<String>) -> Claim {
        if !self.holds {
            self.note = Some(why.into());
        }
        self
    }
}

/// A plot of an experiment, written as `DIR/<seed>-<id>.svg`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plot {
    /// What it shows.
    pub caption: String,
    /// The SVG document (see `sim::svg`).
    #[serde(skip)]
    pub svg: String,
}

/// One reproduced table or figure.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Experiment {
    /// Named after the paper's table or figure: `table2`, `table3.3`, `table6.1`, `fig10a`.
    pub id: String,
    /// What it measures.
    pub title: String,
    /// The configuration run, as (key, value) pairs shown verbatim (scheme, disks, drive,
    /// chunk, workload, speed limits, ...).
    pub config: Vec<(String, String)>,
    /// The numbers.
    pub rows: Vec<Row>,
    /// The paper's qualitative claims this experiment checks.
    pub claims: Vec<Claim>,
    /// Free-form notes: modelling limits, labels such as "synthetic Financial1-like workload".
    pub notes: Vec<String>,
    /// Plots where the paper shows a figure.
    pub plots: Vec<Plot>,
}

impl Experiment {
    /// An empty experiment with its id, title and configuration.
    pub fn new(id: &str, title: &str, config: &[(&str, String)]) -> Experiment {
        Experiment {
            id: id.into(),
            title: title.into(),
            config: config
                .iter()
                .map(|(k, v)| ((*k).to_string(), v.clone()))
                .collect(),
            rows: Vec::new(),
            claims: Vec::new(),
            notes: Vec::new(),
            plots: Vec::new(),
        }
    }

    /// Claims that do not hold and carry no note saying why.
    pub fn unexplained_claims(&self) -> Vec<&Claim> {
        self.claims
            .iter()
            .filter(|c| !c.holds && c.note.is_none())
            .collect()
    }

    /// Rows that differ from the published value by more than [`TOLERANCE`] without a note.
    pub fn unexplained(&self) -> Vec<&Row> {
        self.rows
            .iter()
            .filter(|r| r.differs() && r.note.is_none())
            .collect()
    }
}

/// The published value of the row of `e` labelled `label` (for a plot to draw beside ours).
pub(crate) fn published(e: &Experiment, label: &str) -> Option<f64> {
    e.rows
        .iter()
        .find(|r| r.label == label)
        .and_then(|r| r.published)
}

/// For a plot whose axes cannot show them (ratios, peaks, sentences of the paper), one note
/// per row of `e` with a published value that `pick` selects: `paper: LABEL PUB UNIT (ours
/// OURS UNIT)`.
pub(crate) fn published_notes(e: &Experiment, pick: impl Fn(&Row) -> bool) -> Vec<String> {
    e.rows
        .iter()
        .filter(|r| r.published.is_some() && pick(r))
        .map(|r| {
            // "2x", "44 %", "858 s": no trailing zeros, ratios without a space.
            let v = |x: f64| {
                let t = num(x);
                let t = if t.contains('.') && !t.contains('e') {
                    t.trim_end_matches('0').trim_end_matches('.').to_string()
                } else {
                    t
                };
                if r.unit == "x" {
                    format!("{t}x")
                } else {
                    format!("{t} {}", r.unit)
                }
            };
            format!(
                "paper: {} {} (ours {})",
                r.label,
                v(r.published.expect("filtered")),
                v(r.ours)
            )
        })
        .collect()
}

/// The reproduction of one seed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// `s2raid`, `raidplus`, `raid4s`, `raidh`, `lpu`, `ido`.
    pub name: String,
    /// The paper.
    pub source: String,
    /// Scaled-down run.
    pub quick: bool,
    /// Wall time of the run, seconds.
    pub runtime_s: f64,
    /// The experiments.
    pub experiments: Vec<Experiment>,
}

/// A seed that can be reproduced: name, paper, runner.
pub struct Seed {
    /// Command-line name.
    pub name: &'static str,
    /// The paper, as cited in the report.
    pub source: &'static str,
    /// The ids of the experiments `run` returns, in order (quick and full runs alike): what
    /// the coverage manifest ([`coverage`]) refers to without running anything.
    pub experiments: &'static [&'static str],
    /// Runs every experiment; `progress` receives one line per step.
    pub run: fn(&Opts, &mut dyn FnMut(&str)) -> anyhow::Result<Vec<Experiment>>,
}

/// Every reproducible seed, in the order `all` runs them.
pub const SEEDS: &[Seed] = &[
    Seed {
        name: "s2raid",
        source: s2raid::SOURCE,
        experiments: s2raid::EXPERIMENTS,
        run: s2raid::run,
    },
    Seed {
        name: "raidplus",
        source: raidplus::SOURCE,
        experiments: raidplus::EXPERIMENTS,
        run: raidplus::run,
    },
    Seed {
        name: "raid4s",
        source: raid4s::SOURCE,
        experiments: raid4s::EXPERIMENTS,
        run: raid4s::run,
    },
    Seed {
        name: "raide",
        source: raide::SOURCE,
        experiments: raide::EXPERIMENTS,
        run: raide::run,
    },
    Seed {
        name: "raidh",
        source: raidh::SOURCE,
        experiments: raidh::EXPERIMENTS,
        run: raidh::run,
    },
    Seed {
        name: "lpu",
        source: lpu::SOURCE,
        experiments: lpu::EXPERIMENTS,
        run: lpu::run,
    },
    Seed {
        name: "ido",
        source: ido::SOURCE,
        experiments: ido::EXPERIMENTS,
        run: ido::run,
    },
];

/// The seed called `name`.
pub fn seed(name: &str) -> Option<&'static Seed> {
    SEEDS.iter().find(|s| s.name == name)
}

/// Runs `seed` and times it.
pub fn reproduce(
    seed: &Seed,
    opts: &Opts,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<Report> {
    let t = std::time::Instant::now();
    let mut experiments = (seed.run)(opts, progress)?;
    if opts.quick {
        for p in experiments.iter_mut().flat_map(|e| e.plots.iter_mut()) {
            p.svg = sim::svg::mark_scaled_down(&p.svg);
        }
    }
    let ids: Vec<&str> = experiments.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids, seed.experiments,
        "{}: the experiments run differ from the ones the seed declares",
        seed.name
    );
    Ok(Report {
        name: seed.name.into(),
        source: seed.source.into(),
        quick: opts.quick,
        runtime_s: t.elapsed().as_secs_f64(),
        experiments,
    })
}

fn num(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.2e}")
    }
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

impl Report {
    /// Every claim that fails without a note saying why, as `id: text (evidence)`: a failed
    /// reproduction.
    pub fn failed_claims(&self) -> Vec<String> {
        self.experiments
            .iter()
            .flat_map(|e| {
                e.unexplained_claims()
                    .into_iter()
                    .map(move |c| format!("{}: {} ({})", e.id, c.text, c.evidence))
            })
            .collect()
    }

    /// Every claim that fails with a note saying why, as `id: text`.
    pub fn explained_failures(&self) -> Vec<String> {
        self.experiments
            .iter()
            .flat_map(|e| {
                e.claims
                    .iter()
                    .filter(|c| !c.holds && c.note.is_some())
                    .map(move |c| format!("{}: {}", e.id, c.text))
            })
            .collect()
    }

    /// The JSON form: `{"name", "source", "quick", "runtime_s", "experiments": [{"id",
    /// "title", "config", "rows": [{"label", "published", "ours", "unit", "ratio", "note"}],
    /// "claims", "notes", "plots"}]}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).expect("reports serialise");
        for (e, ej) in self
            .experiments
            .iter()
            .zip(v["experiments"].as_array_mut().expect("experiments array"))
        {
            ej["config"] = e
                .config
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::from(v.clone())))
                .collect::<serde_json::Map<_, _>>()
                .into();
            for (r, rj) in e.rows.iter().zip(ej["rows"].as_array_mut().expect("rows")) {
                rj["ratio"] = r.ratio().into();
            }
            for (i, (p, pj)) in e
                .plots
                .iter()
                .zip(ej["plots"].as_array_mut().expect("plots"))
                .enumerate()
            {
                pj["file"] = self.plot_file(&e.id, i).into();
                let _ = p;
            }
        }
        v
    }

    fn plot_file(&self, id: &str, i: usize) -> String {
        if i == 0 {
            format!("{}-{}.svg", self.name, id)
        } else {
            format!("{}-{}-{}.svg", self.name, id, i + 1)
        }
    }

    /// The Markdown report.
    pub fn to_markdown(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "# Reproduction: {}\n", self.name);
        let _ = writeln!(o, "Source: {}.\n", self.source);
        let _ = writeln!(
            o,
            "Generated by `raidforge reproduce {}{}` in {:.1} s. Ratio = ours / published; rows \
             more than {:.0} % off carry a note saying why.\n",
            self.name,
            if self.quick { " --quick" } else { "" },
            self.runtime_s,
            TOLERANCE * 100.0
        );
        if self.quick {
            let _ = writeln!(
                o,
                "**Quick run**: scaled-down configurations; absolute values are not comparable \
                 with the paper's, the qualitative claims are.\n"
            );
        }
        for e in &self.experiments {
            let _ = writeln!(o, "## {}: {}\n", e.id, e.title);
            let _ = writeln!(o, "| row | published | ours | ratio | unit | note |");
            let _ = writeln!(o, "|---|---:|---:|---:|---|---|");
            for r in &e.rows {
                let note = match (&r.note, r.differs()) {
                    (Some(n), _) => cell(n),
                    (None, true) => "**unexplained difference**".into(),
                    (None, false) => String::new(),
                };
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {} | {} | {} |",
                    cell(&r.label),
                    r.published.map_or("-".into(), num),
                    num(r.ours),
                    r.ratio().map_or("-".into(), |x| format!("{x:.2}")),
                    cell(&r.unit),
                    note
                );
            }
            if !e.claims.is_empty() {
                let _ = writeln!(o, "\nClaims:\n");
                for c in &e.claims {
                    let _ = write!(
                        o,
                        "- [{}] {} ({})",
                        if c.holds { "x" } else { " " },
                        c.text,
                        c.evidence
                    );
                    match (&c.note, c.holds) {
                        (Some(n), false) => {
                            let _ = writeln!(o, ". **Not upheld here**: {n}");
                        }
                        (None, false) => {
                            let _ = writeln!(o, ". **Not upheld, unexplained**");
                        }
                        _ => o.push('\n'),
                    }
                }
            }
            for (i, p) in e.plots.iter().enumerate() {
                let f = self.plot_file(&e.id, i);
                let _ = writeln!(o, "\n![{}]({f})", cell(&p.caption));
            }
            if !e.notes.is_empty() {
                let _ = writeln!(o, "\nNotes:\n");
                for n in &e.notes {
                    let _ = writeln!(o, "- {n}");
                }
            }
            let _ = writeln!(o, "\nConfiguration:\n");
            for (k, v) in &e.config {
                let _ = writeln!(o, "- {k}: {v}");
            }
            o.push('\n');
        }
        o
    }

    /// Writes `DIR/NAME.md`, `DIR/NAME.json` and the plots; returns the paths written.
    pub fn write(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir)?;
        let mut out = Vec::new();
        let md = dir.join(format!("{}.md", self.name));
        std::fs::write(&md, self.to_markdown())?;
        out.push(md);
        let js = dir.join(format!("{}.json", self.name));
        let mut text = serde_json::to_string_pretty(&self.to_json()).expect("json");
        text.push('\n');
        std::fs::write(&js, text)?;
        out.push(js);
        for e in &self.experiments {
            for (i, p) in e.plots.iter().enumerate() {
                let f = dir.join(self.plot_file(&e.id, i));
                std::fs::write(&f, &p.svg)?;
                out.push(f);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Report {
        let mut e = Experiment::new("table5", "Offline rebuild", &[("disks", "9".into())]);
        e.rows.push(Row::new("RAID5", Some(157.0), 150.0, "s"));
        e.rows.push(Row::new("S2-RAID5", Some(51.0), 80.0, "s"));
        e.rows
            .push(Row::new("S2-RAID5 again", Some(51.0), 80.0, "s").with_note("slower disks"));
        e.claims.push(Claim::new("faster", true, "1.9x"));
        e.claims.push(Claim::new("much faster", false, "1.9x"));
        e.plots.push(Plot {
            caption: "p".into(),
            svg: "<svg/>".into(),
        });
        Report {
            name: "s2raid".into(),
            source: "paper".into(),
            quick: true,
            runtime_s: 1.0,
            experiments: vec![e],
        }
    }

    #[test]
    fn differences_need_notes() {
        let r = sample();
        let e = &r.experiments[0];
        assert!(!e.rows[0].differs());
        assert!(e.rows[1].differs() && e.rows[2].differs());
        assert_eq!(e.unexplained().len(), 1);
        assert_eq!(e.unexplained()[0].label, "S2-RAID5");
        assert!(r.to_markdown().contains("**unexplained difference**"));
        assert_eq!(r.failed_claims().len(), 1);
    }

    #[test]
    fn json_has_the_documented_shape() {
        let j = sample().to_json();
        let e = &j["experiments"][0];
        assert_eq!(e["id"], "table5");
        assert_eq!(e["config"]["disks"], "9");
        assert_eq!(e["rows"][0]["published"], 157.0);
        assert_eq!(e["rows"][0]["ours"], 150.0);
        assert!((e["rows"][0]["ratio"].as_f64().unwrap() - 150.0 / 157.0).abs() < 1e-12);
        assert_eq!(e["rows"][0]["unit"], "s");
        assert_eq!(e["plots"][0]["file"], "s2raid-table5.svg");
        assert_eq!(e["claims"][1]["holds"], false);
    }

    #[test]
    fn write_puts_files_in_the_directory() {
        let dir = std::env::temp_dir().join(format!("repro-test-{}", std::process::id()));
        let files = sample().write(&dir).unwrap();
        assert_eq!(files.len(), 3);
        assert!(files.iter().all(|f| f.exists()));
        let md = std::fs::read_to_string(dir.join("s2raid.md")).unwrap();
        assert!(md.contains("| RAID5 | 157.0 | 150.0 | 0.96 | s |"), "{md}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
