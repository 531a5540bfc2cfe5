//! The data a success carries, read straight into typed samples by serde visitors: sample values
//! parsed as they are read, and, while [`super::decode_summed`] runs, only the labels it keeps.

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;

use super::excerpt::short;
use super::summed::KEEP;
use crate::prom::parse_sample_value;
use crate::source::{Data, Labels, Sample, Series};

#[derive(Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
pub(super) enum QueryData {
    Vector(Option<Vec<RawSample>>),
    Matrix(Option<Vec<RawSeries>>),
    Scalar(Point),
    String(StringPoint),
}

impl QueryData {
    /// The typed data and how many series carried only native histograms (and were dropped).
    pub(super) fn into_data(self) -> Result<(Data, usize), String> {
        match self {
            QueryData::Vector(raw) => {
                let mut ignored = 0;
                let mut samples: Vec<Sample> = Vec::new();
                for s in raw.unwrap_or_default() {
                    match (s.value, s.histogram) {
                        (Some(p), _) => samples.push(Sample { labels: s.metric.0.into(), t: p.t, v: p.v }),
                        (None, Some(_)) => ignored += 1,
                        (None, None) => return Err(format!("a vector sample has neither \"value\" nor \"histogram\" ({})", show_labels(&s.metric.0))),
                    }
                }
                samples.sort_by(|a, b| a.labels.cmp(&b.labels).then(a.t.total_cmp(&b.t)));
                Ok((Data::Vector(samples), ignored))
            }
            QueryData::Matrix(raw) => {
                let mut ignored = 0;
                let mut series: Vec<Series> = Vec::new();
                for s in raw.unwrap_or_default() {
                    if s.histograms.is_some() {
                        ignored += 1;
                    }
                    if let Some(values) = s.values {
                        let points = values.into_iter().map(|p| (p.t, p.v)).collect();
                        series.push(Series { labels: s.metric.0, points });
                    }
                }
                series.sort_by(|a, b| a.labels.cmp(&b.labels));
                Ok((Data::Matrix(series), ignored))
            }
            QueryData::Scalar(p) => Ok((Data::Scalar(p.v), 0)),
            QueryData::String(p) => Ok((Data::String(p.s), 0)),
        }
    }
}

/// A vector element. Either `value` or `histogram` is present.
#[derive(Deserialize)]
pub(super) struct RawSample {
    #[serde(default)]
    metric: Metric,
    #[serde(default)]
    value: Option<Point>,
    #[serde(default)]
    histogram: Option<IgnoredAny>,
}

/// A matrix element. `values`, `histograms`, or both.
#[derive(Deserialize)]
pub(super) struct RawSeries {
    #[serde(default)]
    metric: Metric,
    #[serde(default)]
    values: Option<Vec<Point>>,
    #[serde(default)]
    histograms: Option<IgnoredAny>,
}

/// A series' labels: all of them, or, while [`decode_summed`] runs, those it keeps (the others are
/// skipped unread).
#[derive(Default)]
struct Metric(Labels);

impl<'de> Deserialize<'de> for Metric {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let Some(keep) = KEEP.with(|k| k.borrow().clone()) else {
            return Labels::deserialize(d).map(Metric);
        };
        struct V(std::rc::Rc<[String]>);
        impl<'de> Visitor<'de> for V {
            type Value = Metric;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of label names and values")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Metric, A::Error> {
                let mut pairs = Vec::with_capacity(self.0.len());
                while let Some(name) = map.next_key::<Name<'de>>()? {
                    if self.0.iter().any(|k| *k == *name.0) {
                        let value = map.next_value::<String>()?;
                        // An empty value is no label, as for `sum by`.
                        if !value.is_empty() {
                            pairs.push((name.0.into_owned(), value));
                        }
                    } else {
                        // Still a string, as in any label set; not kept.
                        map.next_value::<Name<'de>>()?;
                    }
                }
                Ok(Metric(pairs.into_iter().collect()))
            }
        }
        d.deserialize_map(V(keep))
    }
}

/// A label name, borrowed from the body where it can be (no escapes in it).
struct Name<'de>(std::borrow::Cow<'de, str>);

impl<'de> Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Name<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a label name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Name<'de>, E> {
                Ok(Name(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Name<'de>, E> {
                Ok(Name(std::borrow::Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

/// `[<unix seconds>, "<value>"]` with the value already parsed.
pub(super) struct Point {
    t: f64,
    v: f64,
}

/// `[<unix seconds>, "<text>"]`.
pub(super) struct StringPoint {
    s: String,
}

impl<'de> Deserialize<'de> for Point {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Point;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a [timestamp, \"value\"] pair")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Point, A::Error> {
                let t: Num = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let v: Num = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(1, &self))?;
                if seq.next_element::<IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(3, &self));
                }
                Ok(Point { t: t.0, v: v.0 })
            }
        }
        d.deserialize_seq(V)
    }
}

impl<'de> Deserialize<'de> for StringPoint {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StringPoint;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a [timestamp, \"text\"] pair")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StringPoint, A::Error> {
                let _t: Num = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let s: String = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(1, &self))?;
                if seq.next_element::<IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(3, &self));
                }
                Ok(StringPoint { s })
            }
        }
        d.deserialize_seq(V)
    }
}

/// A number written either as a JSON number or as a Prometheus value string ("1.5", "NaN", "+Inf").
struct Num(f64);

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Num;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number or a number in a string")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Num, E> {
                Ok(Num(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Num, E> {
                parse_sample_value(v).map(Num).ok_or_else(|| E::custom(format!("sample value {:?} is not a number", short(v, 60))))
            }
        }
        d.deserialize_any(V)
    }
}

/// `{a="1", b="2"}`, cut short for messages.
fn show_labels(labels: &Labels) -> String {
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    short(&format!("{{{}}}", inner.join(", ")), 120)
}
