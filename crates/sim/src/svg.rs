//! Small SVG charts: line/scatter charts with vertical markers, and grouped bar charts.
//!
//! Written by hand: the plotting crates pull in font rendering and image codecs, and the
//! simulator's and the reproduction reports' plots need only axes, lines, bars and labels.
//! Output is deterministic text (same data, same bytes).
//!
//! What every chart does, so that a reader can trust it in black and white as well as in
//! colour:
//! - each line series has its own colour, dash pattern and marker shape; series whose points
//!   lie within [`COINCIDE`] pixels of an earlier series at three quarters of their points or
//!   more are drawn [`DODGE`] pixels apart sideways, and a note under the legend says so
//!   (nothing hides behind another line);
//! - the paper's values (`Series::published`, `BarChart::published`) are hollow markers of the
//!   series' shape and colour, each an element of class `published` carrying the value in
//!   `data-value`;
//! - x ticks sit at the data's x values when there are few of them (labels thinned where they
//!   would collide), a log axis labels its decades in one notation, and both axes carry their
//!   titles (elements of class `x-title` and `y-title`);
//! - notes (`notes`) are printed under the legend, and [`mark_scaled_down`] stamps a scaled-down
//!   run's plots.

use std::fmt::Write as _;

/// Colours of successive series (colour-blind friendly palette).
const COLOURS: [&str; 8] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#f0e442", "#000000",
];

/// Dash patterns of successive line series (empty: solid).
const DASHES: [&str; 6] = ["", "7,3", "2,3", "10,3,2,3", "4,4", "14,4"];

/// Marker shapes of successive series.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Shape {
    Circle,
    Square,
    Triangle,
    Diamond,
    TriangleDown,
    TriangleRight,
}

const SHAPES: [Shape; 6] = [
    Shape::Circle,
    Shape::Square,
    Shape::Triangle,
    Shape::Diamond,
    Shape::TriangleDown,
    Shape::TriangleRight,
];

const W: f64 = 720.0;
const H: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

/// Two series whose points are all closer than this (pixels) are drawn apart.
pub const COINCIDE: f64 = 2.5;
/// Sideways distance (pixels) between series drawn apart.
pub const DODGE: f64 = 4.0;
/// At most this many distinct x values get a tick each.
const DATA_TICKS_MAX: usize = 16;
/// A line series with more points than this shows a marker on every few points only.
const MARKERS_MAX: usize = 60;

/// One named series of points.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// (x, y) points, drawn in order.
    pub points: Vec<(f64, f64)>,
    /// Draw dots only (no connecting line).
    pub dots: bool,
    /// The paper's values for this series, drawn as hollow markers of its shape and colour.
    pub published: Vec<(f64, f64)>,
}

impl Series {
    /// A line series.
    pub fn line(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points,
            dots: false,
            published: Vec::new(),
        }
    }

    /// A scatter series.
    pub fn dots(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points,
            dots: true,
            published: Vec::new(),
        }
    }

    /// The same series with the paper's values at `points`.
    pub fn with_published(mut self, points: Vec<(f64, f64)>) -> Series {
        self.published = points;
        self
    }
}

/// A line or scatter chart.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LineChart {
    /// Title at the top.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// The series.
    pub series: Vec<Series>,
    /// Vertical dashed markers at x with a label (e.g. "failure", "rebuild done").
    pub markers: Vec<(f64, String)>,
    /// Logarithmic y axis (values <= 0 are left out).
    pub log_y: bool,
    /// Logarithmic x axis (values <= 0 are left out), for sizes and queue depths that double.
    pub log_x: bool,
    /// Notes printed under the legend (e.g. why a curve ends before a marker).
    pub notes: Vec<String>,
}

/// A grouped bar chart: one group per category, one bar per series in each group.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BarChart {
    /// Title at the top.
    pub title: String,
    /// X axis label (what the categories are).
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Category labels along x.
    pub categories: Vec<String>,
    /// (series name, one value per category).
    pub series: Vec<(String, Vec<f64>)>,
    /// The paper's values: (series index, category index, value), drawn as a hollow marker
    /// and a bar-wide line on the bar they belong to.
    pub published: Vec<(usize, usize, f64)>,
    /// Notes printed under the legend.
    pub notes: Vec<String>,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// About five round tick values covering `[lo, hi]`.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(hi > lo) {
        return vec![lo];
    }
    let raw = (hi - lo) / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + step * 1e-9 {
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

/// A value that needs an exponent to be printed briefly.
fn needs_exponent(v: f64) -> bool {
    let a = v.abs();
    a != 0.0 && (a >= 1e6 || a < 1e-3)
}

fn fmt_tick(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if needs_exponent(v) {
        format!("{v:.1e}")
    } else if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

/// Labels of the ticks of one axis, all in one notation: with an exponent if any needs one.
fn fmt_ticks(ts: &[f64]) -> Vec<String> {
    if ts.iter().any(|&t| needs_exponent(t)) {
        ts.iter()
            .map(|&t| {
                if t == 0.0 {
                    "0".into()
                } else {
                    format!("{t:.1e}")
                }
            })
            .collect()
    } else {
        ts.iter().map(|&t| fmt_tick(t)).collect()
    }
}

/// Rough width in pixels of `s` in a sans-serif font of `size`.
fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.58
}

/// `s` cut into lines of at most `max` characters at spaces (a longer word stays whole).
fn wrap(s: &str, max: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for w in s.split_whitespace() {
        if !cur.is_empty() && cur.chars().count() + 1 + w.chars().count() > max {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(w);
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    lines
}

/// A marker of `shape` centred on (x, y), "radius" `r`; `attrs` go into the element.
fn shape_svg(shape: Shape, x: f64, y: f64, r: f64, attrs: &str) -> String {
    let poly = |pts: &[(f64, f64)]| {
        let d: Vec<String> = pts
            .iter()
            .map(|(dx, dy)| format!("{:.1},{:.1}", x + dx * r, y + dy * r))
            .collect();
        format!("<polygon points=\"{}\" {attrs}/>", d.join(" "))
    };
    match shape {
        Shape::Circle => format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r:.1}\" {attrs}/>"),
        Shape::Square => poly(&[(-0.85, -0.85), (0.85, -0.85), (0.85, 0.85), (-0.85, 0.85)]),
        Shape::Triangle => poly(&[(0.0, -1.15), (1.05, 0.75), (-1.05, 0.75)]),
        Shape::Diamond => poly(&[(0.0, -1.2), (1.2, 0.0), (0.0, 1.2), (-1.2, 0.0)]),
        Shape::TriangleDown => poly(&[(0.0, 1.15), (1.05, -0.75), (-1.05, -0.75)]),
        Shape::TriangleRight => poly(&[(1.15, 0.0), (-0.75, 1.05), (-0.75, -1.05)]),
    }
}

fn header(out: &mut String, title: &str) {
    // Centred over the plot area; a title too long for that is centred on the whole width and
    // set smaller until it fits.
    let plot_mid = (LEFT + W - RIGHT) / 2.0;
    let (x, size) = if text_width(title, 15.0) <= W - RIGHT - 10.0 {
        (plot_mid, 15.0)
    } else {
        let size = (15.0 * (W - 16.0) / text_width(title, 15.0)).clamp(8.0, 15.0);
        (W / 2.0, size)
    };
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" \
         viewBox=\"0 0 {W} {H}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"{W}\" height=\"{H}\" fill=\"white\"/>\n\
         <text class=\"title\" x=\"{x}\" y=\"22\" text-anchor=\"middle\" font-size=\"{size:.1}\">{}</text>\n",
        esc(title)
    );
}

/// What a legend entry shows beside its name.
enum Key<'a> {
    /// A filled swatch (bars).
    Swatch(&'a str),
    /// A line sample with its dash pattern and marker (line series), or the marker alone
    /// (scatter series).
    Line {
        colour: &'a str,
        dash: &'a str,
        shape: Shape,
        line: bool,
    },
    /// The paper's values: a hollow marker.
    Published(Shape),
}

/// The legend and the notes under it, in the right-hand column.
fn legend(out: &mut String, entries: &[(String, Key)], notes: &[String]) {
    let x = W - RIGHT + 12.0;
    let mut y = TOP + 10.0;
    for (name, key) in entries {
        let cy = y - 4.0;
        match key {
            Key::Swatch(c) => {
                let _ = write!(
                    out,
                    "<rect x=\"{x}\" y=\"{}\" width=\"14\" height=\"10\" fill=\"{c}\"/>",
                    y - 9.0
                );
            }
            Key::Line {
                colour,
                dash,
                shape,
                line,
            } => {
                if *line {
                    let dash = if dash.is_empty() {
                        String::new()
                    } else {
                        format!(" stroke-dasharray=\"{dash}\"")
                    };
                    let _ = write!(
                        out,
                        "<line x1=\"{x}\" x2=\"{}\" y1=\"{cy}\" y2=\"{cy}\" stroke=\"{colour}\" \
                         stroke-width=\"1.8\"{dash}/>",
                        x + 22.0
                    );
                }
                out.push_str(&shape_svg(
                    *shape,
                    x + 11.0,
                    cy,
                    3.0,
                    &format!("fill=\"{colour}\""),
                ));
            }
            Key::Published(shape) => {
                out.push_str(&shape_svg(
                    *shape,
                    x + 11.0,
                    cy,
                    5.0,
                    "fill=\"none\" stroke=\"#333\" stroke-width=\"1.6\"",
                ));
            }
        }
        let lines = wrap(name, 17);
        for (k, l) in lines.iter().enumerate() {
            let _ = write!(
                out,
                "<text x=\"{}\" y=\"{}\">{}</text>",
                x + 27.0,
                y + 13.0 * k as f64,
                esc(l)
            );
        }
        out.push('\n');
        y += 5.0 + 13.0 * lines.len() as f64;
    }
    y += 8.0;
    for n in notes {
        for l in wrap(n, 27) {
            let _ = writeln!(
                out,
                "<text class=\"note\" x=\"{}\" y=\"{y}\" font-size=\"10\" fill=\"#333\">{}</text>",
                x,
                esc(&l)
            );
            y += 12.0;
        }
        y += 5.0;
    }
}

/// Axes, grid and labels for y in `[y0, y1]` (already transformed when logarithmic).
fn y_axis(out: &mut String, y_label: &str, y0: f64, y1: f64, log: bool) {
    let ph = H - TOP - BOTTOM;
    let ticks: Vec<(f64, String)> = if log {
        let (a, b) = (y0.floor() as i32, y1.ceil() as i32);
        // Decades in plain numbers when every one of them reads well that way (0.001 to
        // 100000), else every one as a power of ten: one notation per axis.
        let plain = (a..=b).all(|e| (-3..=5).contains(&e));
        let mut t: Vec<(f64, String)> = (a..=b)
            .map(|e| {
                let label = if plain {
                    fmt_tick(10f64.powi(e))
                } else {
                    format!("10<tspan dy=\"-5\" font-size=\"9\">{e}</tspan>")
                };
                (e as f64, label)
            })
            .collect();
        if plain && b - a <= 1 {
            // One decade: 2x and 5x too, in the same notation.
            for e in a..b.max(a + 1) {
                for m in [2.0, 5.0] {
                    let v = m * 10f64.powi(e);
                    t.push((v.log10(), fmt_tick(v)));
                }
            }
        }
        t
    } else {
        let ts = ticks(y0, y1);
        let labels = fmt_ticks(&ts);
        ts.into_iter().zip(labels).collect()
    };
    for (t, label) in ticks {
        if t < y0 - 1e-9 || t > y1 + 1e-9 {
            continue;
        }
        let y = TOP + ph * (1.0 - (t - y0) / (y1 - y0));
        let _ = writeln!(
            out,
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{label}</text>",
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0
        );
    }
    let _ = writeln!(
        out,
        "<line x1=\"{LEFT}\" x2=\"{LEFT}\" y1=\"{TOP}\" y2=\"{}\" stroke=\"black\"/>\
         <line x1=\"{LEFT}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"black\"/>\
         <text class=\"y-title\" transform=\"translate(16,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        H - BOTTOM,
        W - RIGHT,
        H - BOTTOM,
        H - BOTTOM,
        (TOP + H - BOTTOM) / 2.0,
        esc(y_label)
    );
}

fn x_title(out: &mut String, label: &str) {
    let _ = writeln!(
        out,
        "<text class=\"x-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
        LEFT + (W - LEFT - RIGHT) / 2.0,
        H - 10.0,
        esc(label)
    );
}

fn bounds(vals: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let mut b: Option<(f64, f64)> = None;
    for v in vals.filter(|v| v.is_finite()) {
        b = Some(match b {
            None => (v, v),
            Some((lo, hi)) => (lo.min(v), hi.max(v)),
        });
    }
    b.map(|(lo, hi)| {
        if hi > lo {
            (lo, hi)
        } else {
            (lo - 0.5 - lo.abs() * 0.1, hi + 0.5 + hi.abs() * 0.1)
        }
    })
}

/// Of tick positions `at` (pixels, increasing) with their labels, the ones to label so that
/// no two labels overlap: greedily from the left, the last one always kept.
fn thin_labels(at: &[(f64, String)]) -> Vec<bool> {
    let fits = |a: &(f64, String), b: &(f64, String)| {
        b.0 - a.0 >= (text_width(&a.1, 12.0) + text_width(&b.1, 12.0)) / 2.0 + 6.0
    };
    let mut keep = vec![false; at.len()];
    let mut last: Option<usize> = None;
    for i in 0..at.len() {
        if last.map_or(true, |l| fits(&at[l], &at[i])) {
            keep[i] = true;
            last = Some(i);
        }
    }
    if let Some(end) = at.len().checked_sub(1) {
        if !keep[end] {
            // Drop labels before the last until it fits.
            for i in (0..end).rev() {
                if keep[i] {
                    if fits(&at[i], &at[end]) {
                        break;
                    }
                    keep[i] = false;
                }
            }
            keep[end] = true;
        }
    }
    keep
}

/// Names joined as "a", "a and b", "a, b and c".
fn and_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [a] => (*a).to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

impl LineChart {
    /// The chart as an SVG document.
    pub fn to_svg(&self) -> String {
        let mut out = String::new();
        header(&mut out, &self.title);
        let ok = |&(x, y): &(f64, f64)| {
            x.is_finite() && y.is_finite() && (!self.log_y || y > 0.0) && (!self.log_x || x > 0.0)
        };
        let tx = |x: f64| if self.log_x { x.log10() } else { x };
        let ty = |y: f64| if self.log_y { y.log10() } else { y };
        let pts = || {
            self.series
                .iter()
                .flat_map(|s| s.points.iter().chain(s.published.iter()))
                .filter(|p| ok(p))
        };
        let xb = bounds(
            pts().map(|p| tx(p.0)).chain(
                self.markers
                    .iter()
                    .filter(|m| !self.log_x || m.0 > 0.0)
                    .map(|m| tx(m.0)),
            ),
        )
        .unwrap_or((0.0, 1.0));
        let yb = bounds(pts().map(|p| ty(p.1))).unwrap_or((0.0, 1.0));
        let (y0, y1) = if self.log_y {
            (yb.0.floor(), yb.1.ceil().max(yb.0.floor() + 1.0))
        } else {
            (yb.0.min(0.0), yb.1 + (yb.1 - yb.0.min(0.0)) * 0.05)
        };
        let (x0, x1) = xb;
        let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
        let sx = |x: f64| LEFT + pw * (tx(x) - x0) / (x1 - x0);
        let sy = |y: f64| TOP + ph * (1.0 - (ty(y) - y0) / (y1 - y0));
        y_axis(&mut out, &self.y_label, y0, y1, self.log_y);
        self.x_ticks(&mut out, &sx, x0, x1);
        x_title(&mut out, &self.x_label);
        for (i, (x, label)) in self.markers.iter().enumerate() {
            if self.log_x && *x <= 0.0 {
                continue;
            }
            // Labels on successive rows; in the right half of the plot, left of the line (so
            // they stay clear of the legend).
            let right_half = sx(*x) > LEFT + (W - LEFT - RIGHT) / 2.0;
            let (tx, anchor) = if right_half {
                (sx(*x) - 3.0, "end")
            } else {
                (sx(*x) + 3.0, "start")
            };
            let _ = writeln!(
                out,
                "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{TOP}\" y2=\"{1}\" stroke=\"#c00\" \
                 stroke-dasharray=\"5,4\"/><text x=\"{2:.1}\" y=\"{3}\" fill=\"#c00\" \
                 text-anchor=\"{anchor}\">{4}</text>",
                sx(*x),
                H - BOTTOM,
                tx,
                TOP + 12.0 + 14.0 * (i % 3) as f64,
                esc(label)
            );
        }
        // Screen points of every series, then series that coincide with an earlier one are
        // grouped and drawn side by side.
        let screen: Vec<Vec<(f64, f64)>> = self
            .series
            .iter()
            .map(|s| {
                s.points
                    .iter()
                    .filter(|p| ok(p))
                    .map(|&(x, y)| (sx(x), sy(y)))
                    .collect()
            })
            .collect();
        // Points of `a` within COINCIDE of `b`'s, when both have the same x positions.
        let close = |a: &[(f64, f64)], b: &[(f64, f64)]| -> Option<usize> {
            (!a.is_empty()
                && a.len() == b.len()
                && a.iter().zip(b).all(|(p, q)| (p.0 - q.0).abs() < 0.5))
            .then(|| {
                a.iter()
                    .zip(b)
                    .filter(|(p, q)| (p.1 - q.1).abs() < COINCIDE)
                    .count()
            })
        };
        // Two series coincide when at least three quarters of their points do (a line hidden
        // but for a point or two is as good as hidden).
        let mut group: Vec<usize> = (0..screen.len()).collect();
        let mut everywhere = vec![true; screen.len()];
        for i in 0..screen.len() {
            let n = screen[i].len();
            if let Some((j, k)) = (0..i).filter(|&j| group[j] == j).find_map(|j| {
                close(&screen[i], &screen[j])
                    .filter(|&k| 4 * k >= 3 * n && (k >= 2 || k == n))
                    .map(|k| (j, k))
            }) {
                group[i] = j;
                everywhere[j] &= k == n;
            }
        }
        let mut dx = vec![0.0; screen.len()];
        let mut notes: Vec<String> = Vec::new();
        for g in 0..screen.len() {
            let members: Vec<usize> = (0..screen.len()).filter(|&i| group[i] == g).collect();
            if members.len() < 2 {
                continue;
            }
            let mid = (members.len() - 1) as f64 / 2.0;
            for (k, &i) in members.iter().enumerate() {
                dx[i] = (k as f64 - mid) * DODGE;
            }
            let names: Vec<&str> = members
                .iter()
                .map(|&i| self.series[i].name.as_str())
                .collect();
            notes.push(format!(
                "{} overlap (under {COINCIDE} px apart {}): drawn {DODGE} px apart sideways.",
                and_list(&names),
                if everywhere[g] {
                    "everywhere"
                } else {
                    "at most points"
                }
            ));
        }
        for (i, s) in self.series.iter().enumerate() {
            let c = COLOURS[i % COLOURS.len()];
            let shape = SHAPES[i % SHAPES.len()];
            let p: Vec<(f64, f64)> = screen[i].iter().map(|&(x, y)| (x + dx[i], y)).collect();
            if s.dots {
                for (x, y) in &p {
                    out.push_str(&shape_svg(shape, *x, *y, 2.0, &format!("fill=\"{c}\"")));
                    out.push('\n');
                }
            } else if !p.is_empty() {
                let d: Vec<String> = p.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
                let dash = DASHES[i % DASHES.len()];
                let dash = if dash.is_empty() {
                    String::new()
                } else {
                    format!(" stroke-dasharray=\"{dash}\"")
                };
                let _ = writeln!(
                    out,
                    "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"1.8\"{dash} points=\"{}\"/>",
                    d.join(" ")
                );
                // A marker on every point; on every few points of a long series.
                let step = p.len().div_ceil(MARKERS_MAX / 2).max(1);
                let step = if p.len() <= MARKERS_MAX { 1 } else { step };
                for (x, y) in p.iter().step_by(step) {
                    out.push_str(&shape_svg(shape, *x, *y, 3.0, &format!("fill=\"{c}\"")));
                    out.push('\n');
                }
            }
        }
        // The paper's values on top of everything, hollow so that the line shows through.
        let mut any_published = false;
        for (i, s) in self.series.iter().enumerate() {
            let c = COLOURS[i % COLOURS.len()];
            let shape = SHAPES[i % SHAPES.len()];
            for &(x, y) in s.published.iter().filter(|p| ok(p)) {
                any_published = true;
                out.push_str(&shape_svg(
                    shape,
                    sx(x) + dx[i],
                    sy(y),
                    6.0,
                    &format!(
                        "class=\"published\" data-value=\"{y}\" fill=\"none\" stroke=\"{c}\" \
                         stroke-width=\"2\""
                    ),
                ));
                out.push('\n');
            }
        }
        let mut entries: Vec<(String, Key)> = self
            .series
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (
                    s.name.clone(),
                    Key::Line {
                        colour: COLOURS[i % COLOURS.len()],
                        dash: DASHES[i % DASHES.len()],
                        shape: SHAPES[i % SHAPES.len()],
                        line: !s.dots,
                    },
                )
            })
            .collect();
        if any_published {
            entries.push(("published value".into(), Key::Published(Shape::Circle)));
        }
        notes.extend(self.notes.iter().cloned());
        legend(&mut out, &entries, &notes);
        out.push_str("</svg>\n");
        out
    }

    /// Tick labels along x: at the data's x values when there are few distinct ones (labels
    /// thinned where they would collide, a tick mark on every one), else round values.
    fn x_ticks(&self, out: &mut String, sx: &dyn Fn(f64) -> f64, x0: f64, x1: f64) {
        let mut xs: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().chain(s.published.iter()))
            .filter(|(x, y)| {
                x.is_finite()
                    && y.is_finite()
                    && (!self.log_x || *x > 0.0)
                    && (!self.log_y || *y > 0.0)
            })
            .map(|p| p.0)
            .collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup_by(|a, b| (*a - *b).abs() <= 1e-9 * b.abs().max(1.0));
        let at: Vec<f64> = if (2..=DATA_TICKS_MAX).contains(&xs.len()) {
            xs
        } else if self.log_x {
            let (a, b) = (x0.floor() as i32, x1.ceil() as i32);
            (a..=b)
                .map(|e| 10f64.powi(e))
                .filter(|v| (x0..=x1).contains(&v.log10()))
                .collect()
        } else {
            ticks(x0, x1)
        };
        let labels = fmt_ticks(&at);
        let placed: Vec<(f64, String)> = at.iter().map(|&t| sx(t)).zip(labels).collect();
        let keep = thin_labels(&placed);
        for ((x, label), k) in placed.iter().zip(keep) {
            let _ = write!(
                out,
                "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{}\" y2=\"{}\" stroke=\"black\"/>",
                H - BOTTOM,
                H - BOTTOM + 4.0
            );
            if k {
                let _ = write!(
                    out,
                    "<text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{label}</text>",
                    H - BOTTOM + 17.0
                );
            }
            out.push('\n');
        }
    }
}

impl BarChart {
    /// The chart as an SVG document.
    pub fn to_svg(&self) -> String {
        let mut out = String::new();
        header(&mut out, &self.title);
        let hi = bounds(
            self.series
                .iter()
                .flat_map(|s| s.1.iter().copied())
                .chain(self.published.iter().map(|p| p.2)),
        )
        .map_or(1.0, |b| b.1.max(0.0));
        let hi = if hi > 0.0 { hi * 1.05 } else { 1.0 };
        y_axis(&mut out, &self.y_label, 0.0, hi, false);
        x_title(&mut out, &self.x_label);
        let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
        let groups = self.categories.len().max(1) as f64;
        let gw = pw / groups;
        let bw = gw * 0.8 / self.series.len().max(1) as f64;
        let bar_x = |g: usize, i: usize| LEFT + gw * g as f64 + gw * 0.1 + bw * i as f64;
        for (g, cat) in self.categories.iter().enumerate() {
            let gx = LEFT + gw * g as f64;
            let _ = writeln!(
                out,
                "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                gx + gw / 2.0,
                H - BOTTOM + 16.0,
                esc(cat)
            );
            for (i, (_, vals)) in self.series.iter().enumerate() {
                let v = vals.get(g).copied().unwrap_or(0.0);
                if !v.is_finite() || v <= 0.0 {
                    continue;
                }
                let h = ph * v / hi;
                let _ = writeln!(
                    out,
                    "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"/>",
                    bar_x(g, i),
                    H - BOTTOM - h,
                    bw,
                    h,
                    COLOURS[i % COLOURS.len()]
                );
            }
        }
        for &(i, g, v) in &self.published {
            if !v.is_finite() || i >= self.series.len() || g >= self.categories.len() {
                continue;
            }
            let (x, y) = (bar_x(g, i) + bw / 2.0, H - BOTTOM - ph * v.max(0.0) / hi);
            let _ = writeln!(
                out,
                "<g class=\"published\" data-value=\"{v}\"><line x1=\"{:.1}\" x2=\"{:.1}\" \
                 y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#333\" stroke-width=\"2\"/>{}</g>",
                x - bw / 2.0,
                x + bw / 2.0,
                shape_svg(
                    Shape::Circle,
                    x,
                    y,
                    (bw / 2.0).clamp(2.5, 5.0),
                    "fill=\"white\" stroke=\"#333\" stroke-width=\"1.6\""
                )
            );
        }
        let mut entries: Vec<(String, Key)> = self
            .series
            .iter()
            .enumerate()
            .map(|(i, s)| (s.0.clone(), Key::Swatch(COLOURS[i % COLOURS.len()])))
            .collect();
        if !self.published.is_empty() {
            entries.push(("published value".into(), Key::Published(Shape::Circle)));
        }
        legend(&mut out, &entries, &self.notes);
        out.push_str("</svg>\n");
        out
    }
}

/// Charts stacked top to bottom in one SVG document: each chart (a whole document from
/// `to_svg`) becomes a nested `<svg>` placed below the previous one.
pub fn stack(charts: &[String]) -> String {
    let mut out = String::new();
    let total = H * charts.len() as f64;
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{total}\" \
         viewBox=\"0 0 {W} {total}\">"
    );
    for (i, c) in charts.iter().enumerate() {
        let placed = c.replacen("<svg ", &format!("<svg x=\"0\" y=\"{}\" ", H * i as f64), 1);
        out.push_str(&placed);
    }
    out.push_str("</svg>\n");
    out
}

/// The label [`mark_scaled_down`] puts on a plot.
pub const SCALED_DOWN: &str = "QUICK RUN: scaled down";
/// Its second line.
pub const SCALED_DOWN_WHY: &str = "not the paper's configuration; compare shapes, not values";

/// `svg` (a document from `to_svg`; of [`stack`], its top chart) stamped across its plot
/// area with [`SCALED_DOWN`] and [`SCALED_DOWN_WHY`], large, red and translucent, so that a
/// plot of a scaled-down run cannot pass for a full one.
pub fn mark_scaled_down(svg: &str) -> String {
    let Some(end) = svg.rfind("</svg>") else {
        return svg.to_string();
    };
    let (cx, cy) = ((LEFT + W - RIGHT) / 2.0, (TOP + H - BOTTOM) / 2.0);
    format!(
        "{}<g class=\"scaled-down\" font-family=\"sans-serif\" font-weight=\"bold\" \
         fill=\"#b00000\" fill-opacity=\"0.22\" text-anchor=\"middle\" \
         transform=\"rotate(-18 {cx} {cy})\"><text x=\"{cx}\" y=\"{cy}\" font-size=\"36\">{}</text>\
         <text x=\"{cx}\" y=\"{}\" font-size=\"15\">{}</text></g>\n{}",
        &svg[..end],
        esc(SCALED_DOWN),
        cy + 26.0,
        esc(SCALED_DOWN_WHY),
        &svg[end..]
    )
}

/// The text of every `<text>` element of class `class` in `svg` (tags inside it dropped): what
/// the tests of the charts (here and in `repro`) read back.
pub fn texts_of(svg: &str, class: &str) -> Vec<String> {
    svg.split(&format!("class=\"{class}\""))
        .skip(1)
        .map(|rest| {
            let body = &rest[rest.find('>').unwrap() + 1..rest.find("</text>").unwrap()];
            let mut out = String::new();
            let mut in_tag = false;
            for c in body.chars() {
                match c {
                    '<' => in_tag = true,
                    '>' => in_tag = false,
                    c if !in_tag => out.push(c),
                    _ => {}
                }
            }
            out
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacked_charts_are_one_document() {
        let one = LineChart {
            title: "one".into(),
            ..LineChart::default()
        }
        .to_svg();
        let two = BarChart {
            title: "two".into(),
            ..BarChart::default()
        }
        .to_svg();
        let s = stack(&[one, two]);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert_eq!(s.matches("<svg").count(), 3);
        assert_eq!(s.matches("</svg>").count(), 3);
        assert!(s.contains(&format!("height=\"{}\"", 2.0 * H)));
        assert!(s.contains(&format!("y=\"{H}\"")));
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t = ticks(3.0, 97.0);
        assert!(t.first().unwrap() >= &3.0 && t.last().unwrap() <= &97.0);
        assert!(t.len() >= 4 && t.len() <= 11, "{t:?}");
        assert_eq!(fmt_tick(2.5), "2.5");
        assert_eq!(fmt_tick(40.0), "40");
    }

    #[test]
    fn charts_place_points_inside_the_plot_area() {
        let c = LineChart {
            title: "a < b".into(),
            x_label: "time (s)".into(),
            y_label: "ms".into(),
            series: vec![Series::line("r", vec![(0.0, 1.0), (10.0, 5.0)])],
            markers: vec![(4.0, "failure".into())],
            ..LineChart::default()
        };
        let s = c.to_svg();
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert!(s.contains("a &lt; b") && s.contains("failure"));
        // The polyline's points are within the plot rectangle.
        let pts = s
            .split("points=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        for p in pts.split(' ') {
            let (x, y) = p.split_once(',').unwrap();
            let (x, y): (f64, f64) = (x.parse().unwrap(), y.parse().unwrap());
            assert!((LEFT..=W - RIGHT).contains(&x) && (TOP..=H - BOTTOM).contains(&y));
        }
        let b = BarChart {
            title: "t".into(),
            y_label: "s".into(),
            categories: vec!["x".into(), "y".into()],
            series: vec![
                ("one".into(), vec![1.0, 2.0]),
                ("two".into(), vec![3.0, 0.0]),
            ],
            ..BarChart::default()
        };
        let s = b.to_svg();
        // Three positive values: three bars (and legend swatches, one per series).
        assert_eq!(s.matches("<rect x=").count(), 3 + 2);
    }

    use super::texts_of;

    /// The labels of the x ticks: `<text>` elements just below the x axis.
    fn x_tick_labels(svg: &str) -> Vec<String> {
        let at = format!("y=\"{}\" text-anchor=\"middle\">", H - BOTTOM + 17.0);
        svg.split(&at)
            .skip(1)
            .map(|r| r[..r.find("</text>").unwrap()].to_string())
            .collect()
    }

    /// The (x, y) pairs of the `n`-th polyline.
    fn polyline(svg: &str, n: usize) -> Vec<(f64, f64)> {
        let line = svg.split("<polyline").nth(n + 1).unwrap();
        let pts = line.split("points=\"").nth(1).unwrap();
        pts[..pts.find('"').unwrap()]
            .split(' ')
            .map(|p| {
                let (x, y) = p.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect()
    }

    #[test]
    fn published_values_are_one_marker_each_carrying_the_value() {
        let c = LineChart {
            title: "t".into(),
            x_label: "write size (KiB)".into(),
            y_label: "MB/s".into(),
            series: vec![
                Series::line("RAID5", vec![(32.0, 4.0), (64.0, 8.4), (128.0, 15.0)])
                    .with_published(vec![(64.0, 8.0)]),
                Series::line("RAID4S", vec![(32.0, 6.0), (64.0, 13.0), (128.0, 15.5)])
                    .with_published(vec![(64.0, 14.0), (128.0, 17.0)]),
            ],
            ..LineChart::default()
        };
        let s = c.to_svg();
        assert_eq!(s.matches("class=\"published\"").count(), 3);
        for v in ["8", "14", "17"] {
            assert!(
                s.contains(&format!("class=\"published\" data-value=\"{v}\"")),
                "{v}"
            );
        }
        // The legend says what the hollow markers are.
        assert!(s.contains(">published value<"));
        // A published value outside ours widens the axis: 17 is inside the plot area.
        let y17 = s
            .split("data-value=\"17\"")
            .next()
            .unwrap()
            .rsplit("points=\"")
            .next()
            .unwrap();
        let ys: Vec<f64> = y17
            .split(['"', ' '])
            .filter_map(|p| p.split_once(',').and_then(|(_, y)| y.parse().ok()))
            .collect();
        assert!(ys.iter().all(|y| (TOP..=H - BOTTOM).contains(y)), "{ys:?}");

        let b = BarChart {
            title: "t".into(),
            x_label: "trace".into(),
            y_label: "%".into(),
            categories: vec!["Fin1".into(), "Fin2".into()],
            series: vec![("ido".into(), vec![91.8, 74.6])],
            published: vec![(0, 0, 88.1), (0, 1, 78.7)],
            ..BarChart::default()
        };
        let s = b.to_svg();
        assert_eq!(s.matches("class=\"published\"").count(), 2);
        assert!(s.contains("data-value=\"88.1\"") && s.contains("data-value=\"78.7\""));
        assert!(s.contains(">published value<"));
    }

    #[test]
    fn every_axis_has_its_title() {
        let l = LineChart {
            title: "t".into(),
            x_label: "queue depth".into(),
            y_label: "IOPS".into(),
            series: vec![Series::line("a", vec![(1.0, 1.0), (2.0, 3.0)])],
            ..LineChart::default()
        }
        .to_svg();
        assert_eq!(texts_of(&l, "x-title"), vec!["queue depth"]);
        assert_eq!(texts_of(&l, "y-title"), vec!["IOPS"]);
        let b = BarChart {
            title: "t".into(),
            x_label: "member disk".into(),
            y_label: "member I/Os".into(),
            categories: vec!["0".into(), "1".into()],
            series: vec![("fg".into(), vec![1.0, 2.0])],
            ..BarChart::default()
        }
        .to_svg();
        assert_eq!(texts_of(&b, "x-title"), vec!["member disk"]);
        assert_eq!(texts_of(&b, "y-title"), vec!["member I/Os"]);
    }

    #[test]
    fn series_that_coincide_are_drawn_apart_and_said_to() {
        let pts = vec![(1.0, 100.0), (2.0, 300.0), (4.0, 450.0), (8.0, 560.0)];
        let near: Vec<(f64, f64)> = pts.iter().map(|&(x, y)| (x, y + 0.5)).collect();
        let c = LineChart {
            title: "t".into(),
            x_label: "queue depth".into(),
            y_label: "IOPS".into(),
            series: vec![
                Series::line(
                    "RAID5",
                    vec![(1.0, 90.0), (2.0, 200.0), (4.0, 300.0), (8.0, 350.0)],
                ),
                Series::line("RM2", pts.clone()),
                Series::line("RM2+LPU", near),
            ],
            log_x: true,
            ..LineChart::default()
        };
        let s = c.to_svg();
        let (a, b, r5) = (polyline(&s, 1), polyline(&s, 2), polyline(&s, 0));
        for ((p, q), r) in a.iter().zip(&b).zip(&r5) {
            // Side by side, DODGE apart, each half of it off the data's x (RAID5's).
            assert!((q.0 - p.0 - DODGE).abs() < 0.11, "{p:?} {q:?}");
            assert!((r.0 - (p.0 + q.0) / 2.0).abs() < 0.11, "{r:?}");
        }
        assert!(texts_of(&s, "note")
            .concat()
            .contains("RM2 and RM2+LPU overlap"));
        // Each line has its own dash pattern: solid, then two different dashes.
        let dashes: Vec<&str> = s
            .split("<polyline")
            .skip(1)
            .map(|p| {
                let p = &p[..p.find("/>").unwrap()];
                p.split("stroke-dasharray=\"")
                    .nth(1)
                    .map_or("", |d| &d[..d.find('"').unwrap()])
            })
            .collect();
        assert_eq!(dashes.len(), 3);
        assert!(dashes[0].is_empty() && !dashes[1].is_empty() && !dashes[2].is_empty());
        assert_ne!(dashes[1], dashes[2]);
        // A line that leaves the other at one point of eight is as good as hidden: drawn
        // apart, "at most points"; one that follows it at half the points only is not.
        let base: Vec<(f64, f64)> = (1..=8).map(|x| (x as f64, 10.0 * x as f64)).collect();
        let one_off: Vec<(f64, f64)> = base
            .iter()
            .map(|&(x, y)| (x, if x == 5.0 { y + 30.0 } else { y }))
            .collect();
        let half: Vec<(f64, f64)> = base
            .iter()
            .map(|&(x, y)| (x, if x > 4.0 { y + 30.0 } else { y }))
            .collect();
        let s = LineChart {
            series: vec![
                Series::line("a", base.clone()),
                Series::line("b", one_off),
                Series::line("c", half),
            ],
            ..LineChart::default()
        }
        .to_svg();
        let (a, b, c) = (polyline(&s, 0), polyline(&s, 1), polyline(&s, 2));
        assert!((b[0].0 - a[0].0 - DODGE).abs() < 0.11, "{a:?} {b:?}");
        assert!(
            (c[0].0 - (a[0].0 + b[0].0) / 2.0).abs() < 0.11,
            "c stays put: {c:?}"
        );
        let notes = texts_of(&s, "note").join(" ");
        assert!(
            notes.contains("a and b overlap (under 2.5 px apart at most points)"),
            "{notes}"
        );
        // Series far apart are not moved.
        let apart = LineChart {
            series: vec![
                Series::line("a", vec![(1.0, 1.0), (2.0, 2.0)]),
                Series::line("b", vec![(1.0, 5.0), (2.0, 6.0)]),
            ],
            ..LineChart::default()
        }
        .to_svg();
        assert_eq!(polyline(&apart, 0)[0].0, polyline(&apart, 1)[0].0);
        assert!(texts_of(&apart, "note").is_empty());
    }

    #[test]
    fn x_ticks_sit_at_the_data_points() {
        let c = LineChart {
            title: "t".into(),
            x_label: "pool size n".into(),
            y_label: "s".into(),
            series: vec![Series::line(
                "RAID+",
                vec![(41.0, 69.0), (47.0, 60.0), (53.0, 53.0), (59.0, 48.0)],
            )],
            ..LineChart::default()
        };
        assert_eq!(x_tick_labels(&c.to_svg()), vec!["41", "47", "53", "59"]);
        // Crowded points keep a tick mark each, their labels thinned so none overlap, the
        // last one kept.
        let sizes = [4.0, 8.0, 12.0, 16.0, 32.0, 64.0, 128.0, 256.0];
        let c = LineChart {
            series: vec![Series::line("a", sizes.iter().map(|&k| (k, k)).collect())],
            ..LineChart::default()
        };
        let s = c.to_svg();
        let labels = x_tick_labels(&s);
        assert!(
            labels.len() < sizes.len() && labels.last().unwrap() == "256",
            "{labels:?}"
        );
        assert_eq!(
            s.matches(&format!("y2=\"{}\" stroke=\"black\"/>", H - BOTTOM + 4.0))
                .count(),
            sizes.len()
        );
        // On a log axis they all fit.
        let c = LineChart { log_x: true, ..c };
        assert_eq!(
            x_tick_labels(&c.to_svg()),
            vec!["4", "8", "12", "16", "32", "64", "128", "256"]
        );
    }

    #[test]
    fn a_log_axis_uses_one_notation() {
        let chart = |lo: f64, hi: f64| {
            LineChart {
                series: vec![Series::line("a", vec![(1.0, lo), (2.0, hi)])],
                log_y: true,
                ..LineChart::default()
            }
            .to_svg()
        };
        // 1e2 .. 1e9: every decade as a power of ten, none plain, none as 1.0e6.
        let s = chart(300.0, 4e8);
        assert!(!s.contains("e6<") && !s.contains(">100<") && !s.contains(">1000<"));
        for e in 2..=9 {
            assert!(s.contains(&format!(">10<tspan dy=\"-5\" font-size=\"9\">{e}</tspan>")));
        }
        // 0.1 .. 100: plain numbers only.
        let s = chart(0.3, 40.0);
        assert!(!s.contains("<tspan") && s.contains(">0.1<") && s.contains(">100<"));
        // A linear axis in the millions: every label with an exponent.
        let s = LineChart {
            series: vec![Series::line("a", vec![(1.0, 0.0), (2.0, 2.0e6)])],
            ..LineChart::default()
        }
        .to_svg();
        assert!(s.contains(">5.0e5<") && s.contains(">1.0e6<") && !s.contains(">500000<"));
    }

    #[test]
    fn scaled_down_plots_say_so() {
        let c = LineChart {
            title: "t".into(),
            series: vec![Series::line("a", vec![(1.0, 1.0), (2.0, 2.0)])],
            ..LineChart::default()
        }
        .to_svg();
        assert!(!c.contains("scaled-down"));
        let q = mark_scaled_down(&c);
        assert!(q.starts_with("<svg") && q.ends_with("</svg>\n"));
        assert_eq!(q.matches("class=\"scaled-down\"").count(), 1);
        assert!(q.contains(SCALED_DOWN) && q.contains(&esc(SCALED_DOWN_WHY)));
        // Inside the document, after everything else (on top).
        assert!(q.find("scaled-down").unwrap() > q.find("</polyline>").unwrap_or(0));
        assert!(q.rfind("</svg>").unwrap() > q.find("scaled-down").unwrap());
    }

    #[test]
    fn notes_and_long_names_are_wrapped_into_the_legend_column() {
        let c = LineChart {
            title: "t".into(),
            series: vec![Series::line(
                "RAID-5C 8x(6+1) + 3 spares, 2 MiB chunks",
                vec![(1.0, 1.0), (2.0, 2.0)],
            )],
            notes: vec!["The response-time curve ends at 30 s, the last request's arrival.".into()],
            ..LineChart::default()
        }
        .to_svg();
        let notes = texts_of(&c, "note");
        assert!(notes.len() >= 2, "{notes:?}");
        assert!(notes.iter().all(|l| l.chars().count() <= 27));
        assert!(c.contains(">RAID-5C 8x(6+1) +<") && c.contains(">3 spares, 2 MiB<"));
    }
}
