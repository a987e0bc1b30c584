//! The three charts, drawn with plotters' SVG backend. Text stays SVG `<text>` (no fonts
//! needed); plotters estimates its width, so label areas are sized from the longest label.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{
    BIN_PP, HEATMAP_COLUMNS, LINE_POINTS, PlotError, Trace, bin, buckets, colour, drop_flat,
};

/// What every chart of a run shares.
pub struct Frame<'a> {
    pub scenario: &'a str,
    pub duration_s: f64,
    pub target: f64,
    pub threshold: f64,
}

impl Frame<'_> {
    /// Seconds per unit of the time axis and the unit's name: minutes up to 3 h, then hours.
    fn time_unit(&self) -> (f64, &'static str) {
        if self.duration_s > 3.0 * 3600.0 { (3600.0, "h") } else { (60.0, "min") }
    }
}

fn failed<E: std::fmt::Display>(path: &Path) -> impl Fn(E) -> PlotError + '_ {
    move |e| PlotError::Draw { path: path.to_owned(), why: e.to_string() }
}

/// Writes `svg` without the attributes plotters spells out at their SVG defaults
/// (`opacity="1"`, a rectangle's `stroke="none"`) and with font sizes to two decimals: a
/// third smaller, the same picture.
fn write_compact(path: &Path, svg: &str) -> Result<(), PlotError> {
    let mut out = svg.replace(" opacity=\"1\"", "").replace(" stroke=\"none\"/>", "/>");
    let key = "font-size=\"";
    let mut from = 0;
    while let Some(at) = out[from..].find(key) {
        let start = from + at + key.len();
        let len = out[start..].find('"').unwrap_or(0);
        let size: f64 = out[start..start + len].parse().unwrap_or(0.0);
        let short = format!("{}", (size * 100.0).round() / 100.0);
        out.replace_range(start..start + len, &short);
        from = start + short.len();
    }
    std::fs::write(path, out).map_err(|source| PlotError::Io { path: path.to_owned(), source })
}

fn rgb((r, g, b): (u8, u8, u8)) -> RGBColor {
    RGBColor(r, g, b)
}

/// One colour per strategy, the same in every chart and every scenario for the shipped
/// labels; a peer's variant in a lighter or darker shade of the peer's own.
fn strategy_colour(label: &str, index: usize) -> RGBColor {
    match label {
        "waterline" => RGBColor(0x1f, 0x77, 0xb4),
        "kube-default" => RGBColor(0x7f, 0x7f, 0x7f),
        "crane" => RGBColor(0xff, 0x7f, 0x0e),
        "crane-dynamic" => RGBColor(0xff, 0xbb, 0x78),
        "trimaran-tlp" => RGBColor(0x2c, 0xa0, 0x2c),
        "trimaran-tlp-prom" => RGBColor(0x98, 0xdf, 0x8a),
        "koordinator" => RGBColor(0x94, 0x67, 0xbd),
        "koord-scheduler" => RGBColor(0xc5, 0xb0, 0xd5),
        "old-weighted-mean" => RGBColor(0x17, 0xbe, 0xcf),
        _ => [
            RGBColor(0xd6, 0x27, 0x28),
            RGBColor(0x8c, 0x56, 0x4b),
            RGBColor(0xe3, 0x77, 0xc2),
            RGBColor(0xbc, 0xbd, 0x22),
        ][index % 4],
    }
}

/// Width in pixels plotters' estimate gives a label at `size` points (naive font: 0.7 em
/// per character, em = size / 1.24²), plus a margin.
fn text_width(text: &str, size: f64) -> u32 {
    (size / 1.24 / 1.24 * 0.7 * text.chars().count() as f64).ceil() as u32 + 12
}

pub fn heatmap(path: &Path, frame: &Frame, trace: &Trace) -> Result<(), PlotError> {
    let n = trace.nodes.len().max(1);
    let row_px = (640 / n as u32).clamp(3, 18);
    let label_every = (14 / row_px as usize).max(1);
    let name_width = trace.nodes.iter().map(|s| text_width(s, 13.0)).max().unwrap_or(40);
    let height = 110 + row_px * n as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (820, height)).into_drawing_area();
        root.fill(&WHITE).map_err(failed(path))?;
        let (main, legend) = root.split_horizontally(720);

        let (per_unit, unit) = frame.time_unit();
        let x_max = frame.duration_s / per_unit;
        let interval = match trace.times_s.as_slice() {
            [a, b, ..] => b - a,
            _ => frame.duration_s,
        };
        let columns = buckets(trace.times_s.len(), HEATMAP_COLUMNS);
        let cell = columns.first().map_or(0.0, |c| c.len() as f64 * interval);
        let cell_text = if cell >= 60.0 && cell % 60.0 == 0.0 {
            format!("{:.0} min", cell / 60.0)
        } else {
            format!("{cell:.0} s")
        };
        // Row 0 (the first node) at the top: node i spans y ∈ [n − 1 − i, n − i). The node names
        // are drawn beside the rows (plotters' own labels would sit at round numbers).
        let mut chart = ChartBuilder::on(&main)
            .caption(
                format!("{} — {}: node utilisation", frame.scenario, trace.label),
                ("sans-serif", 17),
            )
            .margin(10)
            .x_label_area_size(44)
            .y_label_area_size(name_width)
            .build_cartesian_2d(0.0..x_max, 0.0..n as f64)
            .map_err(failed(path))?;
        chart
            .configure_mesh()
            .disable_mesh()
            .y_labels(0)
            .x_labels(12)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .x_desc(format!("time since start ({unit}); each cell is the maximum over {cell_text}"))
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 13))
            .draw()
            .map_err(failed(path))?;
        let name_style =
            ("sans-serif", 13).into_font().color(&BLACK).pos(Pos::new(HPos::Right, VPos::Center));
        for (i, name) in trace.nodes.iter().enumerate().step_by(label_every) {
            let (px, py) = chart.backend_coord(&(0.0, (n - 1 - i) as f64 + 0.5));
            root.draw(&Text::new(name.as_str(), (px - 6, py), name_style.clone()))
                .map_err(failed(path))?;
        }

        let bin_colour = |b: usize| {
            let mid = if b as f64 * BIN_PP >= 100.0 { 100.0 } else { (b as f64 + 0.5) * BIN_PP };
            rgb(colour(mid, frame.target, frame.threshold))
        };
        let mut cells = Vec::new();
        for node in 0..trace.nodes.len() {
            let y = (n - 1 - node) as f64;
            let column_bin = |c: &std::ops::Range<usize>| {
                let max =
                    trace.util[c.clone()].iter().map(|row| row[node]).fold(f64::NAN, f64::max);
                (!max.is_nan()).then(|| bin(max))
            };
            // One rectangle per run of columns in the same bin keeps the file small.
            let mut run: Option<(f64, usize)> = None;
            for (k, c) in columns.iter().enumerate() {
                let start = trace.times_s[c.start] / per_unit;
                let here = column_bin(c);
                if run.map(|r| Some(r.1)) != Some(here) {
                    if let Some((x0, b)) = run.take() {
                        cells.push(Rectangle::new(
                            [(x0, y), (start, y + 1.0)],
                            bin_colour(b).filled(),
                        ));
                    }
                    run = here.map(|b| (start, b));
                }
                if k + 1 == columns.len()
                    && let Some((x0, b)) = run
                {
                    let end = ((trace.times_s[c.end - 1] + interval) / per_unit).min(x_max);
                    cells.push(Rectangle::new([(x0, y), (end, y + 1.0)], bin_colour(b).filled()));
                }
            }
        }
        chart.draw_series(cells).map_err(failed(path))?;

        // The colour scale: one swatch per bin, 0 at the bottom, labelled at the target, the
        // threshold, every 20 % and "≥ 100".
        let top_bin = bin(100.0);
        let (x0, y_top) = (8, 40);
        let swatch = ((height as i32 - 120) / (top_bin as i32 + 1)).clamp(6, 22);
        let style = ("sans-serif", 12).into_font().color(&BLACK);
        legend
            .draw(&Text::new("utilisation %", (0, y_top - 22), style.clone()))
            .map_err(failed(path))?;
        for b in 0..=top_bin {
            let y = y_top + (top_bin - b) as i32 * swatch;
            legend
                .draw(&Rectangle::new([(x0, y), (x0 + 18, y + swatch)], bin_colour(b).filled()))
                .map_err(failed(path))?;
            let low = b as f64 * BIN_PP;
            let mark = if b == top_bin {
                Some("≥ 100".to_owned())
            } else if low == frame.target {
                Some(format!("{low:.0} target"))
            } else if low == frame.threshold {
                Some(format!("{low:.0} threshold"))
            } else if low % 20.0 == 0.0 {
                Some(format!("{low:.0}"))
            } else {
                None
            };
            if let Some(text) = mark {
                // Each label sits at its bin's lower edge (the bottom of the swatch).
                let at = if b == top_bin { y + swatch / 2 + 4 } else { y + swatch + 4 };
                legend
                    .draw(&Text::new(text, (x0 + 22, at), style.clone()))
                    .map_err(failed(path))?;
            }
        }
        root.present().map_err(failed(path))?;
    }
    write_compact(path, &svg)
}

/// A line's points in chart coordinates.
type Line = Vec<(f64, f64)>;

/// The target and threshold as horizontal (or vertical) reference lines.
fn reference_lines(frame: &Frame, vertical: bool, extent: f64) -> Vec<(String, RGBColor, Line)> {
    [
        (format!("target {} %", frame.target), RGBColor(0x41, 0xab, 0x5d), frame.target),
        (format!("threshold {} %", frame.threshold), RGBColor(0xd6, 0x27, 0x28), frame.threshold),
    ]
    .into_iter()
    .map(|(label, colour, at)| {
        let line =
            if vertical { vec![(at, 0.0), (at, extent)] } else { vec![(0.0, at), (extent, at)] };
        (label, colour, line)
    })
    .collect()
}

/// The legend beside a line chart, never over its lines: (label, colour, stroke width).
fn side_legend(
    path: &Path,
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    entries: &[(String, RGBColor, u32)],
) -> Result<(), PlotError> {
    let style =
        ("sans-serif", 13).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
    for (k, (label, colour, width)) in entries.iter().enumerate() {
        let y = 60 + 22 * k as i32;
        area.draw(&PathElement::new(vec![(4, y), (26, y)], colour.stroke_width(*width)))
            .map_err(failed(path))?;
        area.draw(&Text::new(label.as_str(), (32, y), style.clone())).map_err(failed(path))?;
    }
    Ok(())
}

pub fn hottest(path: &Path, frame: &Frame, traces: &[Trace]) -> Result<(), PlotError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(failed(path))?;
        let (area, legend) = root.split_horizontally(660);
        let mut entries = Vec::new();
        let (per_unit, unit) = frame.time_unit();
        let x_max = frame.duration_s / per_unit;
        let lines: Vec<Vec<(f64, f64)>> = traces
            .iter()
            .map(|t| {
                let hot = t.hottest();
                let points = buckets(hot.len(), LINE_POINTS).into_iter().map(|r| {
                    (t.times_s[r.start] / per_unit, hot[r].iter().copied().fold(0.0, f64::max))
                });
                drop_flat(points.collect())
            })
            .collect();
        let peak = lines.iter().flatten().map(|p| p.1).fold(0.0, f64::max);
        let y_max = (peak.max(100.0) / 10.0).ceil() * 10.0 + 5.0;
        let mut chart = ChartBuilder::on(&area)
            .caption(format!("{} — hottest node over time", frame.scenario), ("sans-serif", 17))
            .margin(10)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(failed(path))?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(RGBColor(0xe4, 0xe4, 0xe4))
            .x_desc(format!("time since start ({unit})"))
            .y_desc("hottest node's utilisation (%)")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 13))
            .draw()
            .map_err(failed(path))?;
        for (label, colour, line) in reference_lines(frame, false, x_max) {
            chart
                .draw_series(LineSeries::new(line, colour.mix(0.8).stroke_width(1)))
                .map_err(failed(path))?;
            entries.push((label, colour, 1));
        }
        for (k, (trace, line)) in traces.iter().zip(lines).enumerate() {
            let colour = strategy_colour(&trace.label, k);
            chart
                .draw_series(LineSeries::new(line, colour.stroke_width(2)))
                .map_err(failed(path))?;
            entries.push((trace.label.clone(), colour, 2));
        }
        side_legend(path, &legend, &entries)?;
        root.present().map_err(failed(path))?;
    }
    write_compact(path, &svg)
}

pub fn cdf(path: &Path, frame: &Frame, traces: &[Trace]) -> Result<(), PlotError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(failed(path))?;
        let (area, legend) = root.split_horizontally(660);
        let mut entries = Vec::new();
        let sorted: Vec<Vec<f64>> = traces.iter().map(Trace::sorted_samples).collect();
        let peak = sorted.iter().filter_map(|s| s.last()).copied().fold(0.0, f64::max);
        let x_max = (peak.max(100.0) / 10.0).ceil() * 10.0;
        let mut chart = ChartBuilder::on(&area)
            .caption(
                format!("{} — node utilisation, all nodes and times", frame.scenario),
                ("sans-serif", 17),
            )
            .margin(10)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..x_max, 0.0..100.0)
            .map_err(failed(path))?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(RGBColor(0xe4, 0xe4, 0xe4))
            .x_desc("node utilisation (%, the larger of cpu and memory)")
            .y_desc("node-samples at or below (%)")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 13))
            .draw()
            .map_err(failed(path))?;
        for (label, colour, line) in reference_lines(frame, true, 100.0) {
            chart
                .draw_series(LineSeries::new(line, colour.mix(0.8).stroke_width(1)))
                .map_err(failed(path))?;
            entries.push((label, colour, 1));
        }
        for (k, (trace, values)) in traces.iter().zip(&sorted).enumerate() {
            if values.is_empty() {
                continue;
            }
            let colour = strategy_colour(&trace.label, k);
            // The empirical CDF at 100 quantiles (enough for the eye, small in SVG).
            let last = values.len() - 1;
            let points: Vec<(f64, f64)> = (0..=100)
                .map(|q| {
                    let i = (q as f64 / 100.0 * last as f64).round() as usize;
                    (values[i], (i + 1) as f64 / values.len() as f64 * 100.0)
                })
                .collect();
            let above = values.iter().filter(|&&u| u > frame.threshold).count() as f64
                / values.len() as f64
                * 100.0;
            chart
                .draw_series(LineSeries::new(points, colour.stroke_width(2)))
                .map_err(failed(path))?;
            entries.push((
                format!("{}: {above:.1} % > {} %", trace.label, frame.threshold),
                colour,
                2,
            ));
        }
        side_legend(path, &legend, &entries)?;
        root.present().map_err(failed(path))?;
    }
    write_compact(path, &svg)
}
