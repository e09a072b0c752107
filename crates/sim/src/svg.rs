//! Small SVG charts: line/scatter charts with vertical markers, and grouped bar charts.
//!
//! Written by hand: the plotting crates pull in font rendering and image codecs, and the
//! simulator's and the reproduction reports' plots need only axes, lines, bars and labels.
//! Output is deterministic text (same data, same bytes).

use std::fmt::Write as _;

/// Colours of successive series (colour-blind friendly palette).
const COLOURS: [&str; 8] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#f0e442", "#000000",
];

const W: f64 = 720.0;
const H: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

/// One named series of points.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// (x, y) points, drawn in order.
    pub points: Vec<(f64, f64)>,
    /// Draw dots only (no connecting line).
    pub dots: bool,
}

impl Series {
    /// A line series.
    pub fn line(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points,
            dots: false,
        }
    }

    /// A scatter series.
    pub fn dots(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points,
            dots: true,
        }
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
}

/// A grouped bar chart: one group per category, one bar per series in each group.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BarChart {
    /// Title at the top.
    pub title: String,
    /// Y axis label.
    pub y_label: String,
    /// Category labels along x.
    pub categories: Vec<String>,
    /// (series name, one value per category).
    pub series: Vec<(String, Vec<f64>)>,
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

fn fmt_tick(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 || a < 1e-3 {
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

fn header(out: &mut String, title: &str) {
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" \
         viewBox=\"0 0 {W} {H}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"{W}\" height=\"{H}\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
        (LEFT + W - RIGHT) / 2.0,
        esc(title)
    );
}

fn legend(out: &mut String, names: &[&str]) {
    for (i, n) in names.iter().enumerate() {
        let y = TOP + 10.0 + 18.0 * i as f64;
        let x = W - RIGHT + 12.0;
        let _ = writeln!(
            out,
            "<rect x=\"{x}\" y=\"{}\" width=\"14\" height=\"10\" fill=\"{}\"/>\
             <text x=\"{}\" y=\"{}\">{}</text>",
            y - 9.0,
            COLOURS[i % COLOURS.len()],
            x + 20.0,
            y,
            esc(n)
        );
    }
}

/// Axes, grid and labels for y in `[y0, y1]` (already transformed when logarithmic).
fn y_axis(out: &mut String, y_label: &str, y0: f64, y1: f64, log: bool) {
    let ph = H - TOP - BOTTOM;
    let ticks: Vec<(f64, String)> = if log {
        let (a, b) = (y0.floor() as i32, y1.ceil() as i32);
        (a..=b)
            .map(|e| (e as f64, fmt_tick(10f64.powi(e))))
            .collect()
    } else {
        ticks(y0, y1)
            .into_iter()
            .map(|t| (t, fmt_tick(t)))
            .collect()
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
         <text transform=\"translate(16,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        H - BOTTOM,
        W - RIGHT,
        H - BOTTOM,
        H - BOTTOM,
        (TOP + H - BOTTOM) / 2.0,
        esc(y_label)
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

impl LineChart {
    /// The chart as an SVG document.
    pub fn to_svg(&self) -> String {
        let mut out = String::new();
        header(&mut out, &self.title);
        let ty = |y: f64| if self.log_y { y.log10() } else { y };
        let pts = || {
            self.series
                .iter()
                .flat_map(|s| s.points.iter())
                .filter(|(_, y)| !self.log_y || *y > 0.0)
        };
        let xb = bounds(pts().map(|p| p.0).chain(self.markers.iter().map(|m| m.0)))
            .unwrap_or((0.0, 1.0));
        let yb = bounds(pts().map(|p| ty(p.1))).unwrap_or((0.0, 1.0));
        let (y0, y1) = if self.log_y {
            (yb.0.floor(), yb.1.ceil().max(yb.0.floor() + 1.0))
        } else {
            (yb.0.min(0.0), yb.1 + (yb.1 - yb.0.min(0.0)) * 0.05)
        };
        let (x0, x1) = xb;
        let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
        let sx = |x: f64| LEFT + pw * (x - x0) / (x1 - x0);
        let sy = |y: f64| TOP + ph * (1.0 - (ty(y) - y0) / (y1 - y0));
        y_axis(&mut out, &self.y_label, y0, y1, self.log_y);
        for t in ticks(x0, x1) {
            let _ = writeln!(
                out,
                "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                sx(t),
                H - BOTTOM + 16.0,
                fmt_tick(t)
            );
        }
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            LEFT + pw / 2.0,
            H - 10.0,
            esc(&self.x_label)
        );
        for (i, (x, label)) in self.markers.iter().enumerate() {
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
        for (i, s) in self.series.iter().enumerate() {
            let c = COLOURS[i % COLOURS.len()];
            let p: Vec<(f64, f64)> = s
                .points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite() && (!self.log_y || *y > 0.0))
                .map(|&(x, y)| (sx(x), sy(y)))
                .collect();
            if s.dots {
                for (x, y) in &p {
                    let _ = writeln!(
                        out,
                        "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"1.6\" fill=\"{c}\"/>"
                    );
                }
            } else if !p.is_empty() {
                let d: Vec<String> = p.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
                let _ = writeln!(
                    out,
                    "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"1.8\" points=\"{}\"/>",
                    d.join(" ")
                );
                for (x, y) in &p {
                    let _ = writeln!(
                        out,
                        "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"2.5\" fill=\"{c}\"/>"
                    );
                }
            }
        }
        let names: Vec<&str> = self.series.iter().map(|s| s.name.as_str()).collect();
        legend(&mut out, &names);
        out.push_str("</svg>\n");
        out
    }
}

impl BarChart {
    /// The chart as an SVG document.
    pub fn to_svg(&self) -> String {
        let mut out = String::new();
        header(&mut out, &self.title);
        let hi = bounds(self.series.iter().flat_map(|s| s.1.iter().copied()))
            .map_or(1.0, |b| b.1.max(0.0));
        let hi = if hi > 0.0 { hi * 1.05 } else { 1.0 };
        y_axis(&mut out, &self.y_label, 0.0, hi, false);
        let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
        let groups = self.categories.len().max(1) as f64;
        let gw = pw / groups;
        let bw = gw * 0.8 / self.series.len().max(1) as f64;
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
                    gx + gw * 0.1 + bw * i as f64,
                    H - BOTTOM - h,
                    bw,
                    h,
                    COLOURS[i % COLOURS.len()]
                );
            }
        }
        let names: Vec<&str> = self.series.iter().map(|s| s.0.as_str()).collect();
        legend(&mut out, &names);
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
            log_y: false,
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
        };
        let s = b.to_svg();
        // Three positive values: three bars (and legend swatches, one per series).
        assert_eq!(s.matches("<rect x=").count(), 3 + 2);
    }
}
