//! The web assets built into the binary: the live dashboard of `serve` and
//! the canvas charts it shares with the offline HTML report of
//! `ddscope report` (which takes [`CHARTS_JS`] from here). One copy of each
//! file, in this crate's `assets/` folder.

/// Box plots, time series and CDFs on a canvas (`window.DDSCharts`).
pub const CHARTS_JS: &str = include_str!("../../assets/charts.js");
/// The dashboard page: no inline script or style, so that the
/// Content-Security-Policy `serve` sends can forbid both.
pub const DASHBOARD_HTML: &str = include_str!("../../assets/dashboard.html");
pub const DASHBOARD_JS: &str = include_str!("../../assets/dashboard.js");
pub const DASHBOARD_CSS: &str = include_str!("../../assets/dashboard.css");
