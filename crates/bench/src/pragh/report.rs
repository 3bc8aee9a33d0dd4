//! What an experiment of [`super::run`] measured ([`Report`]), written as
//! JSON and PNGs, and redrawn from an earlier run's JSON ([`replot`]).

use std::path::PathBuf;

use serde::Serialize;

use super::timeline::Timeline;
use super::{plots, Experiment, PlacementBound, Row, Settings};
use crate::output::{MachineMeta, OutDir};
use crate::{BenchError, Result};

/// What one experiment measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The experiment.
    pub experiment: &'static str,
    /// The settings it ran with.
    pub settings: Settings,
    /// Vertices of the graph.
    pub vertices: u64,
    /// Stored (directed) edges.
    pub stored_edges: u64,
    /// What placement alone could achieve (schemes, uniform).
    pub placement_bound: Option<PlacementBound>,
    /// Scheme rows (schemes, uniform, scope, put-heavy, replica-budget):
    /// medians over the runs.
    pub rows: Vec<Row>,
    /// Every run's rows, round by round (`<name>.runs.json`).
    pub run_rows: Vec<Vec<Row>>,
    /// Timelines (eager-deferred, dynamic).
    pub timelines: Vec<Timeline>,
    /// The machine it ran on.
    pub machine: MachineMeta,
}

impl Report {
    /// The base name of the experiment's files (`pragh-<experiment>`).
    pub fn name(&self) -> String {
        format!("pragh-{}", self.experiment)
    }

    /// Writes `<name>.json` (rows or timelines), `<name>.runs.json`,
    /// `<name>.meta.json` and then the PNG plots into `dir`: every result is
    /// on disk before the first plot is drawn, so a plot that fails loses
    /// nothing (`--plot-only` redraws it). Returns the files written.
    pub fn write(&self, dir: &std::path::Path) -> Result<Vec<PathBuf>> {
        let mut out = OutDir::create(dir)?;
        let name = self.name();
        if self.timelines.is_empty() {
            out.json(&format!("{name}.json"), &self.rows)?;
            out.json(&format!("{name}.runs.json"), &self.run_rows)?;
        } else {
            out.json(&format!("{name}.json"), &self.timelines)?;
        }
        let c = self.settings.config();
        let meta = serde_json::json!({
            "experiment": name,
            "preset": self.settings.preset,
            "settings": self.settings,
            "vertices": self.vertices,
            "stored_edges": self.stored_edges,
            "graph_seed": c.graph.seed,
            "latency_ns": c.cluster.latency_ns,
            "placement_bound": self.placement_bound,
            "machine": self.machine,
        });
        out.json(&format!("{name}.meta.json"), &meta)?;
        if !self.timelines.is_empty() {
            plots::plot_timelines(dir, &name, &self.timelines)?;
            out.wrote(out.path(&format!("{name}.png")));
        }
        if !self.rows.is_empty() {
            for f in plots::plot_rows(dir, &name, &self.rows)? {
                out.wrote(f);
            }
        }
        if let Some(f) = plots::plot_host(dir, &name, &self.run_rows)? {
            out.wrote(f);
        }
        Ok(out.written().to_vec())
    }
}

/// Redraws the PNG plots of a row experiment from the `pragh-<experiment>.json`
/// an earlier run wrote into `dir`, as [`Report::write`] draws them.
/// Returns the files written.
pub fn replot(experiment: Experiment, dir: &std::path::Path) -> Result<Vec<PathBuf>> {
    let name = format!("pragh-{}", experiment.name());
    if matches!(experiment, Experiment::EagerDeferred | Experiment::Dynamic) {
        return Err(BenchError::setting(
            "--plot-only",
            experiment.name(),
            "redraws the row experiments only (a timeline is drawn when it is run)",
        ));
    }
    let path = dir.join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).map_err(|source| BenchError::Io {
        action: "reading",
        path: path.clone(),
        source,
    })?;
    let rows: Vec<Row> = serde_json::from_str(&text).map_err(|e| BenchError::ResultsFile {
        path: path.clone(),
        reason: format!("not the rows of `bench pragh {}`: {e}", experiment.name()),
    })?;
    let mut wrote = plots::plot_rows(dir, &name, &rows)?;
    // Every run's row, if the run wrote them (older directories may not).
    let runs_path = dir.join(format!("{name}.runs.json"));
    if let Ok(text) = std::fs::read_to_string(&runs_path) {
        let run_rows: Vec<Vec<Row>> =
            serde_json::from_str(&text).map_err(|e| BenchError::ResultsFile {
                path: runs_path.clone(),
                reason: format!("not the runs of `bench pragh {}`: {e}", experiment.name()),
            })?;
        wrote.extend(plots::plot_host(dir, &name, &run_rows)?);
    }
    Ok(wrote)
}
