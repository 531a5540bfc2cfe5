//! [`Trace`]: the series one replica's samples collect into, interval by interval.

use super::families::{Fam, Kind, Line, Metric};
use super::hist::{format_le, Hist};
use vllm_diag::source::Labels;

/// Collects a replica's values step by step: the first step creates the series, later steps
/// append to them in the same order. When a replica's labels change (a new pod, a new cache
/// configuration), [`Trace::relabel`] starts new series; [`Trace::finish`] pads every series to
/// the full timeline and joins those that kept their labels.
#[derive(Default)]
pub(super) struct Trace {
    items: Vec<(Fam, Metric)>,
    cursor: usize,
    started: bool,
    /// While set, calls advance through the series without giving them a sample.
    pub(super) absent: bool,
    /// Steps emitted so far.
    steps: usize,
    /// Where the series of the current label generation begin in `items`.
    base: usize,
}

impl Trace {
    pub(super) fn begin_step(&mut self) {
        self.cursor = 0;
        self.absent = false;
    }

    pub(super) fn end_step(&mut self) {
        self.started = true;
        self.steps += 1;
    }

    /// The replica's labels changed: the next step creates its series again.
    pub(super) fn relabel(&mut self) {
        self.base = self.items.len();
        self.started = false;
    }

    /// Every series padded to the timeline (no sample before it began or after it ended), series
    /// whose labels came back after a relabel joined into one, series without any sample dropped.
    pub(super) fn finish(mut self) -> Vec<(Fam, Metric)> {
        for (_, m) in &mut self.items {
            for line in &mut m.lines {
                line.values.resize(self.steps, None);
            }
        }
        if self.base == 0 {
            return self.items;
        }
        let mut out: Vec<(Fam, Metric)> = Vec::with_capacity(self.items.len());
        for (fam, m) in self.items {
            match out.iter_mut().find(|(f, o)| *f == fam && o.labels == m.labels) {
                Some((_, o)) => {
                    for (into, from) in o.lines.iter_mut().zip(m.lines) {
                        for (a, b) in into.values.iter_mut().zip(from.values) {
                            if a.is_none() {
                                *a = b;
                            }
                        }
                    }
                }
                None => out.push((fam, m)),
            }
        }
        out.retain(|(_, m)| m.lines.iter().any(|l| l.values.iter().any(Option::is_some)));
        out
    }

    pub(super) fn scalar(&mut self, fam: Fam, labels: &Labels, extra: &[(&str, &str)], v: f64) {
        let value = if self.absent { None } else { Some(v) };
        if self.started {
            if let Some((_, m)) = self.items.get_mut(self.base + self.cursor) {
                if let Some(line) = m.lines.first_mut() {
                    line.values.push(value);
                }
            }
        } else {
            let mut l = labels.clone();
            for (k, val) in extra {
                l.insert((*k).to_string(), (*val).to_string());
            }
            let suffix = if fam.kind() == Kind::Counter { "_total" } else { "" };
            let mut values = vec![None; self.steps];
            values.push(value);
            self.items.push((fam, Metric { labels: l, lines: vec![Line { suffix, le: None, values }] }));
        }
        self.cursor += 1;
    }

    pub(super) fn hist(&mut self, fam: Fam, labels: &Labels, h: &Hist) {
        let mut cumulative = Vec::with_capacity(h.counts.len() + 2);
        let mut acc = 0u64;
        for c in &h.counts {
            acc += c;
            cumulative.push(acc as f64);
        }
        cumulative.push(acc as f64); // _count
        cumulative.push(h.sum); // _sum
        let absent = self.absent;
        if self.started {
            if let Some((_, m)) = self.items.get_mut(self.base + self.cursor) {
                for (line, v) in m.lines.iter_mut().zip(cumulative) {
                    line.values.push(if absent { None } else { Some(v) });
                }
            }
        } else {
            let mut lines = Vec::with_capacity(cumulative.len());
            for (i, v) in cumulative.into_iter().enumerate() {
                let (suffix, le) = if i < h.bounds.len() {
                    ("_bucket", Some(format_le(h.bounds[i])))
                } else if i == h.bounds.len() {
                    ("_bucket", Some("+Inf".to_string()))
                } else if i == h.bounds.len() + 1 {
                    ("_count", None)
                } else {
                    ("_sum", None)
                };
                let mut values = vec![None; self.steps];
                values.push(if absent { None } else { Some(v) });
                lines.push(Line { suffix, le, values });
            }
            self.items.push((fam, Metric { labels: labels.clone(), lines }));
        }
        self.cursor += 1;
    }
}
