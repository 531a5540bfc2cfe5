//! OpenMetrics text for `promtool tsdb create-blocks-from openmetrics`, written with the product's
//! writer ([`vllm_diag::prom::openmetrics`]), so the simulator and `--save-samples` format values,
//! timestamps and escapes the same way.
//!
//! promtool wants a timestamp on every sample, all of a family's samples together, each series'
//! samples in time order and `# EOF` last. We write family by family, label set by label set,
//! time by time (a histogram's buckets, `_count` and `_sum` for one time together), which meets
//! all of that and keeps each label set's text rendered once. A series whose target stopped being
//! scraped simply has no more lines: OpenMetrics has no way to write Prometheus' staleness marker,
//! so the series stays visible to instant queries for the usual five-minute lookback.

use std::io::{self, Write};

use vllm_diag::prom::openmetrics::{series, Writer};

use super::sim::Generated;

pub(crate) fn write(g: &Generated, out: &mut impl Write) -> io::Result<()> {
    let mut w = Writer::new(out);
    for fam in &g.families {
        w.family(&fam.name, fam.kind.as_str(), fam.help)?;
        for metric in &fam.metrics {
            let heads: Vec<String> = metric
                .lines
                .iter()
                .map(|line| {
                    let le = line.le.as_deref().map(|v| ("le", v));
                    let labels = metric.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).chain(le);
                    series(&format!("{}{}", fam.name, line.suffix), labels)
                })
                .collect();
            for (ti, t_ms) in g.times_ms.iter().enumerate() {
                for (line, head) in metric.lines.iter().zip(&heads) {
                    if let Some(Some(v)) = line.values.get(ti) {
                        w.sample(head, *v, *t_ms)?;
                    }
                }
            }
        }
    }
    w.finish()
}
