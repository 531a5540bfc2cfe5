//! OpenMetrics text for `promtool tsdb create-blocks-from openmetrics`.
//!
//! promtool wants a timestamp on every sample, all of a family's samples together, each series'
//! samples in time order and `# EOF` last. We write family by family, label set by label set,
//! time by time (a histogram's buckets, `_count` and `_sum` for one time together), which meets
//! all of that and keeps each label set's text rendered once. A series whose target stopped being
//! scraped simply has no more lines: OpenMetrics has no way to write Prometheus' staleness marker,
//! so the series stays visible to instant queries for the usual five-minute lookback.

use std::io::{self, Write};

use super::sim::Generated;

pub(crate) fn write(g: &Generated, out: &mut impl Write) -> io::Result<()> {
    let mut w = io::BufWriter::with_capacity(1 << 16, out);
    let stamps: Vec<String> = g.times_ms.iter().map(|t| timestamp(*t)).collect();
    for fam in &g.families {
        writeln!(w, "# TYPE {} {}", fam.name, fam.kind.as_str())?;
        writeln!(w, "# HELP {} {}", fam.name, fam.help)?;
        for metric in &fam.metrics {
            let prefixes: Vec<String> = metric
                .lines
                .iter()
                .map(|line| {
                    let mut s = format!("{}{}{{", fam.name, line.suffix);
                    let mut first = true;
                    let le = line.le.as_ref().map(|v| ("le", v.as_str()));
                    for (k, v) in metric.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).chain(le) {
                        if !first {
                            s.push(',');
                        }
                        first = false;
                        s.push_str(k);
                        s.push_str("=\"");
                        escape_into(&mut s, v);
                        s.push('"');
                    }
                    s.push_str("} ");
                    s
                })
                .collect();
            for (ti, stamp) in stamps.iter().enumerate() {
                for (line, prefix) in metric.lines.iter().zip(&prefixes) {
                    if let Some(Some(v)) = line.values.get(ti) {
                        w.write_all(prefix.as_bytes())?;
                        write_value(&mut w, *v)?;
                        w.write_all(b" ")?;
                        w.write_all(stamp.as_bytes())?;
                        w.write_all(b"\n")?;
                    }
                }
            }
        }
    }
    w.write_all(b"# EOF\n")?;
    w.flush()
}

/// Unix seconds, with milliseconds only when needed.
fn timestamp(ms: i64) -> String {
    if ms % 1000 == 0 {
        format!("{}", ms / 1000)
    } else {
        format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
    }
}

fn write_value(w: &mut impl Write, v: f64) -> io::Result<()> {
    if v.is_nan() {
        w.write_all(b"NaN")
    } else if v.is_infinite() {
        w.write_all(if v > 0.0 { b"+Inf" } else { b"-Inf" })
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        write!(w, "{}", v as i64)
    } else {
        write!(w, "{v}")
    }
}

fn escape_into(s: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_seconds_with_millis_only_when_needed() {
        assert_eq!(timestamp(1_768_464_000_000), "1768464000");
        assert_eq!(timestamp(1_768_464_000_250), "1768464000.250");
    }

    #[test]
    fn label_values_escape_quotes_backslashes_and_newlines() {
        let mut s = String::new();
        escape_into(&mut s, "a\"b\\c\nd");
        assert_eq!(s, "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn whole_values_are_written_without_a_fraction() {
        let mut out = Vec::new();
        write_value(&mut out, 42.0).expect("write to a Vec");
        out.push(b' ');
        write_value(&mut out, 0.125).expect("write to a Vec");
        assert_eq!(String::from_utf8_lossy(&out), "42 0.125");
    }
}
