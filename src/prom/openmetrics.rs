//! Writing OpenMetrics text with a timestamp on every sample: what `--save-samples` writes, what
//! `--baseline-from` and `promtool tsdb create-blocks-from openmetrics` read, and what the test
//! simulator writes for Prometheus to load.
//!
//! The caller keeps promtool's order (a family's samples together, each series' samples in time
//! order); this writes the lines. Values are written as Prometheus writes them in its API
//! ([`super::format_go_float`]: the shortest text that reads back to the same float, never an
//! exponent, `NaN`, `+Inf`, `-Inf`), timestamps as seconds with milliseconds only when there are
//! some, label values and HELP text escaped as the format says. OpenMetrics cannot carry
//! Prometheus' staleness marker: callers leave those samples out.

use std::io::{self, Write};

use super::escape::{escape_exposition_value_into, escape_help};

/// `name{a="x",b="y"}`, or `name` alone without labels: labels in the order given, values escaped.
pub fn series<'a>(name: &str, labels: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::from(name);
    let mut first = true;
    for (k, v) in labels {
        out.push(if first { '{' } else { ',' });
        first = false;
        out.push_str(k);
        out.push_str("=\"");
        escape_exposition_value_into(&mut out, v);
        out.push('"');
    }
    if !first {
        out.push('}');
    }
    out
}

/// Unix seconds from milliseconds: `1768464000`, or `1768464000.250` when there are milliseconds.
pub fn format_timestamp(ms: i64) -> String {
    let mut out = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = write_timestamp(&mut out, ms);
    String::from_utf8(out).unwrap_or_default()
}

fn write_timestamp(w: &mut impl Write, ms: i64) -> io::Result<()> {
    if ms.rem_euclid(1000) == 0 {
        write!(w, "{}", ms.div_euclid(1000))
    } else {
        write!(w, "{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
    }
}

/// [`super::format_go_float`] without a String per value: files of millions of samples are written.
fn write_value(w: &mut impl Write, v: f64) -> io::Result<()> {
    if v.is_nan() {
        w.write_all(b"NaN")
    } else if v == f64::INFINITY {
        w.write_all(b"+Inf")
    } else if v == f64::NEG_INFINITY {
        w.write_all(b"-Inf")
    } else {
        write!(w, "{v}")
    }
}

/// An OpenMetrics file being written: families, samples, then [`Writer::finish`] for `# EOF`.
pub struct Writer<W: Write> {
    out: io::BufWriter<W>,
}

impl<W: Write> Writer<W> {
    pub fn new(out: W) -> Writer<W> {
        Writer { out: io::BufWriter::with_capacity(1 << 16, out) }
    }

    /// `# TYPE name kind` and `# HELP name text`, before the family's samples.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) -> io::Result<()> {
        writeln!(self.out, "# TYPE {name} {kind}")?;
        writeln!(self.out, "# HELP {name} {}", escape_help(help, true))
    }

    /// One sample: `series value timestamp`, `series` as [`series`] writes it.
    pub fn sample(&mut self, series: &str, value: f64, t_ms: i64) -> io::Result<()> {
        self.out.write_all(series.as_bytes())?;
        self.out.write_all(b" ")?;
        write_value(&mut self.out, value)?;
        self.out.write_all(b" ")?;
        write_timestamp(&mut self.out, t_ms)?;
        self.out.write_all(b"\n")
    }

    /// `# EOF`, and everything flushed.
    pub fn finish(mut self) -> io::Result<()> {
        self.out.write_all(b"# EOF\n")?;
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prom::exposition::{self, Format};
    use crate::prom::format_go_float;

    fn written(f: impl FnOnce(&mut Writer<&mut Vec<u8>>) -> io::Result<()>) -> String {
        let mut buf = Vec::new();
        let mut w = Writer::new(&mut buf);
        f(&mut w).unwrap();
        w.finish().unwrap();
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn timestamps_are_seconds_with_millis_only_when_needed() {
        assert_eq!(format_timestamp(1_768_464_000_000), "1768464000");
        assert_eq!(format_timestamp(1_768_464_000_250), "1768464000.250");
        assert_eq!(format_timestamp(1_768_464_000_007), "1768464000.007");
        assert_eq!(format_timestamp(-1), "-1.999");
    }

    #[test]
    fn series_escape_label_values_and_drop_empty_braces() {
        assert_eq!(series("up", []), "up");
        assert_eq!(series("x", [("a", "q\"b\\c\nd"), ("le", "+Inf")]), "x{a=\"q\\\"b\\\\c\\nd\",le=\"+Inf\"}");
    }

    #[test]
    fn values_are_written_as_format_go_float_writes_them() {
        for v in [0.0, -0.0, 42.0, 0.125, 0.1, 1e21, 1e-7, 1.5e300, f64::MAX, f64::MIN_POSITIVE, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut out = Vec::new();
            write_value(&mut out, v).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), format_go_float(v));
        }
        assert_eq!(format_go_float(42.0), "42");
        assert_eq!(format_go_float(1e21), "1000000000000000000000");
    }

    #[test]
    fn a_written_file_reads_back_exactly() {
        let values = [0.1, -0.0, 1e21, 1e-7, 123456.789, f64::INFINITY, f64::NEG_INFINITY, 5e-324];
        let s = series("vllm:x", [("model_name", "a\"b"), ("job", "vllm")]);
        let text = written(|w| {
            w.family("vllm:x", "gauge", "Help with \"quotes\", a \\ and a\nline.")?;
            for (i, v) in values.iter().enumerate() {
                w.sample(&s, *v, 1_700_000_000_000 + i as i64 * 1500)?;
            }
            Ok(())
        });
        assert!(text.ends_with("# EOF\n"), "{text}");
        let back = exposition::parse(&text, Format::Detect).unwrap();
        assert!(back.openmetrics);
        assert_eq!(back.help["vllm:x"], "Help with \"quotes\", a \\ and a\nline.");
        assert_eq!(back.types["vllm:x"], "gauge");
        for (i, (sample, v)) in back.samples.iter().zip(values).enumerate() {
            assert_eq!(sample.value.to_bits(), v.to_bits(), "{v}");
            assert_eq!(sample.timestamp_ms, Some(1_700_000_000_000 + i as i64 * 1500));
            assert_eq!(sample.labels["model_name"], "a\"b");
        }
    }

    #[test]
    fn nan_is_written_as_nan() {
        let text = written(|w| w.sample("x", f64::NAN, 1000));
        assert_eq!(text, "x NaN 1\n# EOF\n");
    }
}
