//! SVG charts of a run, one per workload, drawn from the run's JSON lines: throughput bars
//! and latency percentiles (p50 bar, p99 tick) per client and param.
//!
//! `zkwire-bench --svg DIR` draws them at the end of a run; `zkwire-bench chart FILE [DIR]`
//! draws them again from the JSON lines a run printed with `--json`. Both go through the
//! same JSON, so a chart always shows what the tables and the JSON say.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::BenchError;

/// The clients in the order and colours every chart uses.
const CLIENTS: [(&str, RGBColor); 4] = [
    ("zkwire", RGBColor(0x1f, 0x77, 0xb4)),
    ("kezhuw", RGBColor(0xff, 0x7f, 0x0e)),
    ("raw", RGBColor(0x7f, 0x7f, 0x7f)),
    ("relay", RGBColor(0x2c, 0xa0, 0x2c)),
];

/// One JSON line of a run.
pub(crate) type Point = crate::report::JsonRow;

/// Parses the JSON lines of a run (other lines, such as progress, are skipped).
///
/// # Errors
/// A line that starts like a JSON object but does not parse as one of ours.
pub(crate) fn parse_lines(text: &str) -> Result<Vec<Point>, BenchError> {
    text.lines()
        .filter(|line| line.trim_start().starts_with('{'))
        .map(|line| {
            serde_json::from_str(line)
                .map_err(|e| BenchError::msg(format!("not a result line ({e}): {line}")))
        })
        .collect()
}

/// `zkwire-bench chart FILE [DIR]`: the charts of the JSON lines in FILE, written to DIR
/// (default: the current directory).
pub(crate) fn main(file: &Path, dir: &Path) -> Result<bool, BenchError> {
    let text = std::fs::read_to_string(file)?;
    for written in write_all(&parse_lines(&text)?, dir)? {
        eprintln!("wrote {}", written.display());
    }
    Ok(true)
}

/// Writes `DIR/<workload>.svg` for every workload with throughput or latency figures (the
/// codec's are per record, not per request: it has none); returns the files written.
///
/// # Errors
/// The directory cannot be created, or a chart cannot be drawn.
pub(crate) fn write_all(points: &[Point], dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    std::fs::create_dir_all(dir)?;
    let mut workloads: Vec<&str> = Vec::new();
    for p in points {
        if p.workload != "codec" && !workloads.contains(&p.workload.as_str()) {
            workloads.push(&p.workload);
        }
    }
    let mut written = Vec::new();
    for workload in workloads {
        let rows: Vec<&Point> = points.iter().filter(|p| p.workload == workload).collect();
        let path = dir.join(format!("{workload}.svg"));
        draw(workload, &rows, &path).map_err(|e| BenchError::msg(format!("{workload}: {e}")))?;
        written.push(path);
    }
    Ok(written)
}

/// The params of `rows` in first-seen order.
fn params<'a>(rows: &[&'a Point]) -> Vec<&'a str> {
    let mut params: Vec<&str> = Vec::new();
    for r in rows {
        if !params.contains(&r.param.as_str()) {
            params.push(&r.param);
        }
    }
    params
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn draw(workload: &str, rows: &[&Point], path: &Path) -> DrawResult {
    let params = params(rows);
    let width = 360 + 150 * u32::try_from(params.len()).unwrap_or(8).min(8);
    let root = SVGBackend::new(path, (width * 2, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        &format!("zkwire-bench: {workload} (zkwire, kezhuw, raw socket)"),
        ("sans-serif", 22),
    )?;
    let (left, right) = root.split_horizontally(width);
    panel(
        &left,
        "throughput (ops/s, higher is better)",
        rows,
        &params,
        Metric::Ops,
    )?;
    panel(
        &right,
        "latency (µs: bar p50, tick p99; lower is better)",
        rows,
        &params,
        Metric::Latency,
    )?;
    root.present()?;
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Metric {
    Ops,
    Latency,
}

/// One grouped bar panel: a group per param, a bar per client.
fn panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    title: &str,
    rows: &[&Point],
    params: &[&str],
    metric: Metric,
) -> DrawResult {
    let value = |p: &Point| match metric {
        Metric::Ops => p.ops_per_sec,
        Metric::Latency => p.p50_us,
    };
    let top = rows
        .iter()
        .filter_map(|p| match metric {
            Metric::Ops => p.ops_per_sec,
            Metric::Latency => p.p99_us.or(p.p50_us),
        })
        .fold(0.0_f64, f64::max)
        .max(1.0)
        // Headroom for the legend above the bars.
        * 1.35;
    let groups = params.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5..groups - 0.5, 0.0..top)?;
    let labels: Vec<String> = params.iter().map(|p| (*p).to_owned()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(params.len().max(1))
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() > 0.01 || i < 0.0 {
                return String::new();
            }
            labels.get(i as usize).cloned().unwrap_or_default()
        })
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;
    let bar = 0.8 / CLIENTS.len() as f64;
    for (c, (client, colour)) in CLIENTS.iter().enumerate() {
        let mine: Vec<(f64, &Point)> = params
            .iter()
            .enumerate()
            .filter_map(|(g, param)| {
                rows.iter()
                    .find(|p| p.client == *client && p.param == *param)
                    .map(|p| (g as f64 - 0.4 + bar * c as f64, *p))
            })
            .collect();
        let bars = mine.iter().filter_map(|(x, p)| {
            value(p).map(|v| Rectangle::new([(*x, 0.0), (*x + bar * 0.9, v)], colour.filled()))
        });
        chart
            .draw_series(bars)?
            .label(*client)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled()));
        if metric == Metric::Latency {
            let ticks = mine.iter().filter_map(|(x, p)| {
                p.p99_us.map(|v| {
                    PathElement::new(vec![(*x, v), (*x + bar * 0.9, v)], BLACK.stroke_width(2))
                })
            });
            chart.draw_series(ticks)?;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_come_from_json_lines() {
        let text = "progress line\n\
            {\"workload\":\"pipeline\",\"client\":\"zkwire\",\"param\":\"K=1\",\"ops_per_sec\":9000.0,\"p50_us\":100.0,\"p99_us\":300.0,\"cpu_us_per_op\":1.0,\"allocs_per_op\":2.0,\"rss_kb\":null,\"requests_per_op\":1.0,\"fairness\":null}\n\
            {\"workload\":\"pipeline\",\"client\":\"raw\",\"param\":\"K=1\",\"ops_per_sec\":9500.0,\"p50_us\":95.0,\"p99_us\":250.0,\"cpu_us_per_op\":1.0,\"allocs_per_op\":0.0,\"rss_kb\":null,\"requests_per_op\":1.0,\"fairness\":null}\n\
            {\"workload\":\"codec\",\"client\":\"zkwire\",\"param\":\"encode\",\"ops_per_sec\":1e7,\"p50_us\":null,\"p99_us\":null,\"cpu_us_per_op\":0.1,\"allocs_per_op\":0.0,\"rss_kb\":null,\"requests_per_op\":null,\"fairness\":null}\n";
        let points = parse_lines(text).unwrap_or_default();
        assert_eq!(points.len(), 3);
        let dir = std::env::temp_dir().join(format!("zkwire-chart-{}", std::process::id()));
        let written = write_all(&points, &dir).unwrap_or_default();
        assert_eq!(
            written,
            [dir.join("pipeline.svg")],
            "one chart, none for the codec"
        );
        let svg = std::fs::read_to_string(&written[0]).unwrap_or_default();
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
        for text in ["K=1", "zkwire", "raw", "throughput"] {
            assert!(svg.contains(text), "{text} missing");
        }
        assert!(parse_lines("{\"workload\": 1}").is_err());
        let _ = std::fs::remove_dir_all(dir);
    }
}
