//! The job's metrics in the Prometheus text format (`hotlist run --metrics-addr ADDR`): the
//! small registry every subsystem's counters register into at each scrape.
//!
//! Each subsystem's stats struct (`crate::stats`) names its own series (name, type, help,
//! labels) in its `register`, next to its counters, so adding a metric is one edit there;
//! [`JobStats::render_metrics`](crate::stats::JobStats::render_metrics) renders them all, every
//! series labelled `job="<job.id>"`, sorted by name.

use prometheus::core::Collector;
use prometheus::{
    Encoder, GaugeVec, Histogram, HistogramOpts, IntCounterVec, IntGauge, IntGaugeVec, Opts, TextEncoder,
};

/// One scrape's registry, with the job's label on every series.
pub struct Metrics(prometheus::Registry);

impl Metrics {
    /// An empty registry whose series all carry `job="<job>"` (`None` if the label is invalid).
    pub fn new(job: &str) -> Option<Metrics> {
        prometheus::Registry::new_custom(None, Some([("job".to_string(), job.to_string())].into()))
            .ok()
            .map(Metrics)
    }

    /// Registers `metric` (a name already taken is skipped: every name is registered once).
    pub fn add(&self, metric: impl Collector + 'static) {
        let _ = self.0.register(Box::new(metric));
    }

    /// A counter (`…_total`) or else a gauge holding `v`.
    pub fn scalar(&self, name: &str, help: &str, v: i64) {
        if name.ends_with("_total") {
            let c = prometheus::IntCounter::new(name, help).expect("valid metric");
            c.inc_by(v.max(0) as u64);
            self.add(c);
        } else {
            let g = IntGauge::new(name, help).expect("valid metric");
            g.set(v);
            self.add(g);
        }
    }

    /// [`scalar`](Metrics::scalar) for each `(name, help, value)`.
    pub fn scalars<'a>(&self, series: impl IntoIterator<Item = (&'a str, &'a str, i64)>) {
        for (name, help, v) in series {
            self.scalar(name, help, v);
        }
    }

    /// A float gauge holding `v`.
    pub fn gauge(&self, name: &str, help: &str, v: f64) {
        let g = prometheus::Gauge::new(name, help).expect("valid metric");
        g.set(v);
        self.add(g);
    }

    /// The registered series in the text format.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.0.gather(), &mut buf) {
            return format!("# error encoding metrics: {e}\n");
        }
        String::from_utf8_lossy(&buf).into_owned()
    }
}

/// A float gauge vector with `labels` (register it once filled).
pub fn gauge_vec(name: &str, help: &str, labels: &[&str]) -> GaugeVec {
    GaugeVec::new(Opts::new(name, help), labels).expect("valid metric")
}

/// An integer gauge vector with `labels`.
pub fn int_gauge_vec(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric")
}

/// An integer counter vector with `labels`.
pub fn int_counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric")
}

/// A histogram with `buckets` (seconds), kept by a stats struct and registered at each scrape.
pub fn histogram(name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets)).expect("valid histogram")
}
