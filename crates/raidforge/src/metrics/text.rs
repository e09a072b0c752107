//! The text formats Prometheus scrapes: the Prometheus exposition format 0.0.4 (what every
//! scraper reads) and OpenMetrics 1.0.0 (what Prometheus asks for first in its `Accept`
//! header). They differ in three places this renderer handles: a counter's `# TYPE` and
//! `# HELP` name its family without the `_total` suffix in OpenMetrics, OpenMetrics escapes
//! `"` in help text too, and it ends with `# EOF`. Samples, label escaping and histograms
//! (`_bucket` cumulative per `le`, ending with `+Inf` equal to `_count`, then `_sum`) are
//! the same.

use dev::metrics::HistogramSnapshot;

/// Which text format to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `text/plain; version=0.0.4`.
    Prometheus,
    /// `application/openmetrics-text; version=1.0.0`.
    OpenMetrics,
}

impl Format {
    /// The `Content-Type` of a response in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// A metric family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One sample's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Int(u64),
    Float(f64),
    Histogram(HistogramSnapshot),
}

/// One series of a family: its labels and value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub labels: Vec<(&'static str, String)>,
    pub value: Value,
}

/// A metric family. `name` is the family's name: a counter's samples are written as
/// `name_total`, a histogram's as `name_bucket`, `name_sum`, `name_count`.
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    pub samples: Vec<Sample>,
}

/// Families in the order they were first named; samples added to a family by name.
#[derive(Default)]
pub struct Families(pub Vec<Family>);

impl Families {
    /// Adds a sample to family `name` (created with `help` and `kind` the first time).
    pub fn add(
        &mut self,
        name: &'static str,
        help: &'static str,
        kind: Kind,
        labels: Vec<(&'static str, String)>,
        value: Value,
    ) {
        debug_assert!(valid_name(name), "metric name {name}");
        let i = match self.0.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.0.push(Family {
                    name,
                    help,
                    kind,
                    samples: Vec::new(),
                });
                self.0.len() - 1
            }
        };
        debug_assert_eq!(self.0[i].kind, kind, "{name} used with two kinds");
        self.0[i].samples.push(Sample { labels, value });
    }
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`, the names both formats allow unquoted.
fn valid_name(n: &str) -> bool {
    let mut cs = n.chars();
    cs.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// A label value as both formats quote it: `\` `"` and newline escaped.
pub fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Help text: `\` and newline escaped, and `"` in OpenMetrics.
fn escape_help(v: &str, f: Format) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if f == Format::OpenMetrics => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out
}

/// A float as both formats write it (`+Inf`, `-Inf`, `NaN`; otherwise the shortest decimal
/// that reads back as the same number).
pub fn float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

fn labels(out: &mut String, labels: &[(&'static str, String)], extra: Option<(&str, &str)>) {
    if labels.is_empty() && extra.is_none() {
        return;
    }
    out.push('{');
    let mut first = true;
    let all = labels.iter().map(|(k, v)| (*k, v.as_str())).chain(extra);
    for (k, v) in all {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(k);
        out.push_str("=\"");
        out.push_str(&escape_label(v));
        out.push('"');
    }
    out.push('}');
}

/// The families as text in format `f`.
pub fn render(families: &[Family], f: Format) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for fam in families {
        let (type_name, kind) = match fam.kind {
            Kind::Counter => (
                match f {
                    Format::Prometheus => format!("{}_total", fam.name),
                    Format::OpenMetrics => fam.name.to_string(),
                },
                "counter",
            ),
            Kind::Gauge => (fam.name.to_string(), "gauge"),
            Kind::Histogram => (fam.name.to_string(), "histogram"),
        };
        let _ = writeln!(out, "# HELP {type_name} {}", escape_help(fam.help, f));
        let _ = writeln!(out, "# TYPE {type_name} {kind}");
        for s in &fam.samples {
            match (&s.value, fam.kind) {
                (Value::Histogram(h), Kind::Histogram) => {
                    let mut cumulative = 0u64;
                    for (i, c) in h.counts.iter().enumerate() {
                        cumulative += c;
                        let le = h.bounds_s.get(i).map_or("+Inf".to_string(), |b| float(*b));
                        out.push_str(fam.name);
                        out.push_str("_bucket");
                        labels(&mut out, &s.labels, Some(("le", &le)));
                        let _ = writeln!(out, " {cumulative}");
                    }
                    let _ = write!(out, "{}_count", fam.name);
                    labels(&mut out, &s.labels, None);
                    let _ = writeln!(out, " {cumulative}");
                    let _ = write!(out, "{}_sum", fam.name);
                    labels(&mut out, &s.labels, None);
                    let _ = writeln!(out, " {}", float(h.sum_s));
                }
                (Value::Histogram(_), _) | (_, Kind::Histogram) => {
                    unreachable!("{}: histogram value and kind disagree", fam.name)
                }
                (v, k) => {
                    out.push_str(fam.name);
                    if k == Kind::Counter {
                        out.push_str("_total");
                    }
                    labels(&mut out, &s.labels, None);
                    match v {
                        Value::Int(i) => {
                            let _ = writeln!(out, " {i}");
                        }
                        Value::Float(x) => {
                            let _ = writeln!(out, " {}", float(*x));
                        }
                        Value::Histogram(_) => unreachable!(),
                    }
                }
            }
        }
    }
    if f == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(counts: &[u64], bounds: &[f64], sum: f64) -> HistogramSnapshot {
        HistogramSnapshot {
            bounds_s: bounds.to_vec(),
            counts: counts.to_vec(),
            sum_s: sum,
        }
    }

    #[test]
    fn label_values_escape_backslash_quote_and_newline_only() {
        assert_eq!(escape_label(r"a\b"), r"a\\b");
        assert_eq!(escape_label("say \"hi\""), r#"say \"hi\""#);
        assert_eq!(escape_label("two\nlines"), r"two\nlines");
        // Everything else goes through as it is (UTF-8, tabs, braces, commas, equals).
        assert_eq!(escape_label("m1.img,{x=y}\tü"), "m1.img,{x=y}\tü");
    }

    #[test]
    fn a_sample_with_awkward_labels_is_one_line_with_escapes() {
        let mut f = Families::default();
        f.add(
            "raidforge_member_errors",
            "Errors \"per\" member\\device\nsecond line.",
            Kind::Counter,
            vec![
                ("pool", "p".into()),
                ("device", "/tmp/a \"b\"\\c\nd.img".into()),
            ],
            Value::Int(3),
        );
        let text = render(&f.0, Format::Prometheus);
        assert_eq!(
            text,
            "# HELP raidforge_member_errors_total Errors \"per\" member\\\\device\\nsecond line.\n\
             # TYPE raidforge_member_errors_total counter\n\
             raidforge_member_errors_total{pool=\"p\",device=\"/tmp/a \\\"b\\\"\\\\c\\nd.img\"} 3\n"
        );
        let om = render(&f.0, Format::OpenMetrics);
        assert_eq!(
            om,
            "# HELP raidforge_member_errors Errors \\\"per\\\" member\\\\device\\nsecond line.\n\
             # TYPE raidforge_member_errors counter\n\
             raidforge_member_errors_total{pool=\"p\",device=\"/tmp/a \\\"b\\\"\\\\c\\nd.img\"} 3\n\
             # EOF\n"
        );
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_inf_equals_count() {
        let mut f = Families::default();
        f.add(
            "x_seconds",
            "h",
            Kind::Histogram,
            vec![("op", "read".into())],
            Value::Histogram(hist(&[2, 0, 5, 1], &[0.001, 0.01, 0.5], 1.25)),
        );
        let text = render(&f.0, Format::Prometheus);
        let want = "# HELP x_seconds h\n\
                    # TYPE x_seconds histogram\n\
                    x_seconds_bucket{op=\"read\",le=\"0.001\"} 2\n\
                    x_seconds_bucket{op=\"read\",le=\"0.01\"} 2\n\
                    x_seconds_bucket{op=\"read\",le=\"0.5\"} 7\n\
                    x_seconds_bucket{op=\"read\",le=\"+Inf\"} 8\n\
                    x_seconds_count{op=\"read\"} 8\n\
                    x_seconds_sum{op=\"read\"} 1.25\n";
        assert_eq!(text, want);
        // Empty: every bucket 0, count 0.
        let mut f = Families::default();
        f.add(
            "y_seconds",
            "h",
            Kind::Histogram,
            vec![],
            Value::Histogram(hist(&[0, 0], &[1.0], 0.0)),
        );
        assert_eq!(
            render(&f.0, Format::Prometheus),
            "# HELP y_seconds h\n# TYPE y_seconds histogram\ny_seconds_bucket{le=\"1\"} 0\n\
             y_seconds_bucket{le=\"+Inf\"} 0\ny_seconds_count 0\ny_seconds_sum 0\n"
        );
    }

    #[test]
    fn a_real_histogram_renders_cumulative_buckets_ending_at_its_count() {
        let h = dev::metrics::Histogram::default();
        for us in [10u64, 60, 60, 2_000, 700_000, 40_000_000] {
            h.observe(std::time::Duration::from_micros(us));
        }
        let snap = h.snapshot();
        let mut f = Families::default();
        f.add(
            "z_seconds",
            "h",
            Kind::Histogram,
            vec![],
            Value::Histogram(snap.clone()),
        );
        let text = render(&f.0, Format::Prometheus);
        let buckets: Vec<(String, u64)> = text
            .lines()
            .filter_map(|l| l.strip_prefix("z_seconds_bucket{le=\""))
            .map(|l| {
                let (le, rest) = l.split_once("\"} ").unwrap();
                (le.to_string(), rest.parse().unwrap())
            })
            .collect();
        assert_eq!(buckets.len(), snap.bounds_s.len() + 1);
        assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "{buckets:?}");
        assert_eq!(buckets[0], ("0.00005".to_string(), 1));
        assert_eq!(buckets[1], ("0.0001".to_string(), 3));
        assert_eq!(buckets.last().unwrap(), &("+Inf".to_string(), 6));
        assert!(text.contains("\nz_seconds_count 6\n"));
        // 40 s is past the last bound (30 s): only +Inf holds it.
        assert_eq!(buckets[buckets.len() - 2], ("30".to_string(), 5));
    }

    #[test]
    fn gauges_and_special_floats() {
        let mut f = Families::default();
        for (v, state) in [(1, "clean"), (0, "degraded")] {
            f.add(
                "raidforge_pool_state",
                "s",
                Kind::Gauge,
                vec![("pool", "p".into()), ("state", state.into())],
                Value::Int(v),
            );
        }
        f.add("r", "r", Kind::Gauge, vec![], Value::Float(f64::INFINITY));
        f.add("q", "q", Kind::Gauge, vec![], Value::Float(0.5));
        let text = render(&f.0, Format::Prometheus);
        assert!(text.contains(
            "raidforge_pool_state{pool=\"p\",state=\"clean\"} 1\n\
             raidforge_pool_state{pool=\"p\",state=\"degraded\"} 0\n"
        ));
        assert!(text.contains("\nr +Inf\n"));
        assert!(text.contains("\nq 0.5\n"));
        assert_eq!(float(f64::NAN), "NaN");
        assert_eq!(float(-0.25), "-0.25");
        assert_eq!(float(1e-7), "0.0000001");
    }
}
