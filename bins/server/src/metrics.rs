//! Prometheus metrics (contract 19.4). Every family of the specification is registered at
//! start-up; families without samples yet still show their `# HELP` and `# TYPE` lines.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(&self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A metric family of the specification.
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
    /// Families with labels get no zero sample (there is no label value to show yet).
    pub labelled: bool,
    pub buckets: &'static [f64],
}

const SECONDS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
const SCORES: &[f64] = &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];
const BATCH: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
];
const WRITE_SECONDS: &[f64] = &[
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0,
];
const CONFIRM: &[f64] = &[60.0, 300.0, 900.0, 3600.0, 14400.0, 86400.0, 604800.0];

pub const FAMILIES: &[Family] = &[
    Family {
        name: "anomaly_ml_backend_total",
        kind: Kind::Counter,
        help: "Anomaly scorings per backend used (rules when no ML score was used).",
        labelled: true,
        buckets: &[],
    },
    Family {
        name: "anomaly_processing_seconds",
        kind: Kind::Histogram,
        help: "Duration of one anomaly scoring.",
        labelled: false,
        buckets: SECONDS,
    },
    Family {
        name: "anomaly_score_histogram",
        kind: Kind::Histogram,
        help: "Composite anomaly scores.",
        labelled: false,
        buckets: SCORES,
    },
    Family {
        name: "anomaly_false_positive_reports_total",
        kind: Kind::Counter,
        help: "Anomaly feedback labelled as false positive (label 0).",
        labelled: false,
        buckets: &[],
    },
    Family {
        name: "anomaly_model_version_info",
        kind: Kind::Gauge,
        help: "1 for the active anomaly model version of a tenant.",
        labelled: true,
        buckets: &[],
    },
    Family {
        name: "siem_events_dropped_total",
        kind: Kind::Counter,
        help: "SIEM events dropped because the in-memory queue (100,000) was full while the outbox could not be written.",
        labelled: false,
        buckets: &[],
    },
    Family {
        name: "anomaly_external_escalations_total",
        kind: Kind::Counter,
        help: "Anomaly composites in [0.4, 0.7) sent to ANOMALY_EXTERNAL_URL, by outcome (scored, timeout, unreachable, bad_status, bad_answer).",
        labelled: true,
        buckets: &[],
    },
    Family {
        name: "guard_external_escalations_total",
        kind: Kind::Counter,
        help: "Guard results in [warn, block) sent to GUARD_EXTERNAL_URL, by outcome (scored, timeout, unreachable, bad_status, bad_answer).",
        labelled: true,
        buckets: &[],
    },
    Family {
        name: "shadow_candidates_total",
        kind: Kind::Counter,
        help: "Discovery candidates created (merges not counted).",
        labelled: false,
        buckets: &[],
    },
    Family {
        name: "shadow_time_to_confirm_seconds",
        kind: Kind::Histogram,
        help: "Time from a candidate's first sighting to its confirmation.",
        labelled: false,
        buckets: CONFIRM,
    },
    Family {
        name: "audit_write_batch_entries",
        kind: Kind::Histogram,
        help: "Audit entries written together by one batch of the writer (group commit).",
        labelled: false,
        buckets: BATCH,
    },
    Family {
        name: "audit_write_batch_seconds",
        kind: Kind::Histogram,
        help: "Duration of one audit writer batch, from taking the queue to the commit.",
        labelled: false,
        buckets: WRITE_SECONDS,
    },
    Family {
        name: "websocket_connections",
        kind: Kind::Gauge,
        help: "Open WebSocket connections on this instance",
        labelled: false,
        buckets: &[],
    },
    Family {
        name: "websocket_dropped_total",
        kind: Kind::Counter,
        help: "WebSocket connections closed by the server because their send queue was full",
        labelled: true,
        buckets: &[],
    },
    Family {
        name: "background_tasks_in_progress",
        kind: Kind::Gauge,
        help: "Queued or running background tasks.",
        labelled: false,
        buckets: &[],
    },
];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the global recorder once per process and registers every family.
/// `None` when another recorder was installed first (metrics are then not exported).
pub fn install() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let mut builder = PrometheusBuilder::new();
            for f in FAMILIES.iter().filter(|f| f.kind == Kind::Histogram) {
                builder = match builder
                    .set_buckets_for_metric(Matcher::Full(f.name.to_owned()), f.buckets)
                {
                    Ok(b) => b,
                    Err(e) => {
                        tracing::error!(error = %e, metric = f.name, "invalid histogram buckets");
                        return None;
                    }
                };
            }
            let handle = match builder.install_recorder() {
                Ok(h) => h,
                Err(e) => {
                    tracing::error!(error = %e, "cannot install the metrics recorder");
                    return None;
                }
            };
            for f in FAMILIES {
                match f.kind {
                    Kind::Counter => {
                        metrics::describe_counter!(f.name, f.help);
                        if !f.labelled {
                            metrics::counter!(f.name).absolute(0);
                        }
                    }
                    Kind::Gauge => {
                        metrics::describe_gauge!(f.name, f.help);
                        if !f.labelled {
                            metrics::gauge!(f.name).set(0.0);
                        }
                    }
                    Kind::Histogram => metrics::describe_histogram!(f.name, f.help),
                }
            }
            Some(handle)
        })
        .clone()
}

/// The exposition text: the recorder's output plus the families that have no sample yet.
pub fn render(handle: Option<&PrometheusHandle>) -> String {
    let mut out = handle.map(|h| h.render()).unwrap_or_default();
    for f in FAMILIES {
        let typed = format!("# TYPE {} ", f.name);
        if out.contains(&typed) {
            continue;
        }
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!(
            "# HELP {} {}\n# TYPE {} {}\n",
            f.name,
            f.help,
            f.name,
            f.kind.as_str()
        ));
        if f.kind == Kind::Histogram && !f.labelled {
            // An empty histogram: every bucket 0.
            for b in f.buckets {
                out.push_str(&format!("{}_bucket{{le=\"{b}\"}} 0\n", f.name));
            }
            out.push_str(&format!(
                "{n}_bucket{{le=\"+Inf\"}} 0\n{n}_sum 0\n{n}_count 0\n",
                n = f.name
            ));
        }
    }
    out
}
