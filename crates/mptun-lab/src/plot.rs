//! `mptun lab --plot`: a PNG with goodput over time per system, and mptun's
//! throughput per path over time, so aggregation and failover show at a
//! glance.

use std::path::Path;

use anyhow::{anyhow, Context};
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use crate::run::LabReport;

/// Fonts tried in turn; plotters draws text with a font it is handed.
const FONTS: [&str; 3] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

const INTERVAL_S: f64 = 0.5;

fn load_font() -> anyhow::Result<()> {
    for path in FONTS {
        if let Ok(bytes) = std::fs::read(path) {
            // plotters keeps the font for the life of the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            return register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| anyhow!("{path}: not a usable font"));
        }
    }
    Err(anyhow!(
        "no DejaVuSans.ttf found for the chart's text (apt-get install fonts-dejavu-core)"
    ))
}

fn series_points(series: &[f64]) -> Vec<(f64, f64)> {
    series
        .iter()
        .enumerate()
        .map(|(i, &v)| ((i as f64 + 1.0) * INTERVAL_S, v))
        .collect()
}

/// Draw line charts of Mbit/s over seconds into `area`: one line per
/// `(label, series)`, colours from `palette_offset` on.
fn draw_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    duration: f64,
    y_max: f64,
    lines: Vec<(String, &[f64])>,
    palette_offset: usize,
) -> anyhow::Result<()> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..duration, 0.0..y_max * 1.1)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("Mbit/s")
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (i, (label, series)) in lines.into_iter().enumerate() {
        let color = Palette99::pick(i + palette_offset).to_rgba();
        chart
            .draw_series(LineSeries::new(
                series_points(series),
                color.stroke_width(2),
            ))
            .map_err(|e| anyhow!("{e}"))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// Draw the report's time series into a PNG at `path`.
pub fn draw(report: &LabReport, path: &Path) -> anyhow::Result<()> {
    load_font()?;
    let root = BitMapBackend::new(path, (1000, 800)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let (top, bottom) = root.split_vertically(400);
    let duration = report.scenario.duration;
    let sum: f64 = report.path_rates_mbps.iter().sum();
    let max_system = report
        .systems
        .iter()
        .flat_map(|s| s.series_mbps.iter().copied())
        .fold(sum, f64::max);
    let systems = report
        .systems
        .iter()
        .map(|s| (s.name.clone(), s.series_mbps.as_slice()))
        .collect();
    let caption = format!("{}: goodput of one TCP flow", report.scenario_name);
    draw_chart(&top, &caption, duration, max_system, systems, 0)?;

    let per_path = &report.mptun.path_series_mbps;
    let max_path = per_path.iter().flatten().copied().fold(1.0, f64::max);
    let paths = per_path
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("path {}", i + 1), s.as_slice()))
        .collect();
    draw_chart(
        &bottom,
        "mptun: throughput per path",
        duration,
        max_path,
        paths,
        5,
    )?;
    root.present()
        .with_context(|| format!("write {}", path.display()))?;
    Ok(())
}

/// Highest ratio the sweep chart's axis shows: one row far above the rest
/// (a path alone crippled by loss) would flatten every other row to the
/// axis. Points above are drawn at it, with their value beside them.
const SWEEP_AXIS_MAX: f64 = 4.0;

/// One scenario of a sweep, as its chart shows it.
#[derive(Clone, Copy, Debug)]
pub struct SweepPoint {
    pub number: usize,
    pub ratio_to_best: f64,
    pub fraction_of_sum: f64,
    pub ratio_to_mptcp_wireguard: Option<f64>,
}

/// Draw a sweep of `seed` into a PNG at `path`: one point per scenario for
/// mptun against the best path, the sum and MPTCP over WireGuard, with the
/// 0.95 line the best path ratio must stay above.
pub fn draw_sweep(seed: u64, scenarios: &[SweepPoint], path: &Path) -> anyhow::Result<()> {
    load_font()?;
    let root = BitMapBackend::new(path, (1000, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let n = scenarios.len().max(1) as f64;
    let ratios = |f: &dyn Fn(&SweepPoint) -> Option<f64>| -> Vec<(f64, f64)> {
        scenarios
            .iter()
            .filter_map(|p| f(p).map(|v| (p.number as f64, v)))
            .collect()
    };
    let series = [
        ("mptun / best path", ratios(&|p| Some(p.ratio_to_best))),
        ("mptun / sum of paths", ratios(&|p| Some(p.fraction_of_sum))),
        (
            "mptun / MPTCP over WireGuard",
            ratios(&|p| p.ratio_to_mptcp_wireguard),
        ),
    ];
    let y_max = series
        .iter()
        .flat_map(|(_, s)| s.iter().map(|p| p.1))
        .fold(1.2, f64::max)
        .min(SWEEP_AXIS_MAX);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("sweep, seed {seed}: mptun per scenario"),
            ("sans-serif", 20),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..n + 1.0, 0.0..y_max * 1.4)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("scenario")
        .y_desc("ratio")
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .draw_series(LineSeries::new(
            [(0.0, 0.95), (n + 1.0, 0.95)],
            BLACK.mix(0.5).stroke_width(1),
        ))
        .map_err(|e| anyhow!("{e}"))?
        .label("0.95")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.5)));
    for (i, (label, points)) in series.into_iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let above: Vec<(f64, f64)> = points.iter().copied().filter(|p| p.1 > y_max).collect();
        chart
            .draw_series(
                points
                    .into_iter()
                    .map(move |(x, y)| Circle::new((x, y.min(y_max)), 4, color.filled())),
            )
            .map_err(|e| anyhow!("{e}"))?
            .label(label)
            .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
        chart
            .draw_series(above.into_iter().map(move |(x, y)| {
                Text::new(
                    format!("{y:.1}"),
                    // Stacked by series, above the capped points.
                    (x + 0.25, y_max * (1.08 + 0.06 * i as f64)),
                    ("sans-serif", 12).into_font().color(&color),
                )
            }))
            .map_err(|e| anyhow!("{e}"))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    root.present()
        .with_context(|| format!("write {}", path.display()))?;
    Ok(())
}
