//! Serialises `Option<f64>` as a JSON number, `null`, or the strings "NaN", "+Inf", "-Inf".

use serde::{Deserialize, Deserializer, Serializer};

pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        None => s.serialize_none(),
        Some(x) if x.is_nan() => s.serialize_str("NaN"),
        Some(x) if *x == f64::INFINITY => s.serialize_str("+Inf"),
        Some(x) if *x == f64::NEG_INFINITY => s.serialize_str("-Inf"),
        Some(x) => s.serialize_f64(*x),
    }
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumOrStr {
        N(f64),
        S(String),
    }
    match Option::<NumOrStr>::deserialize(d)? {
        None => Ok(None),
        Some(NumOrStr::N(x)) => Ok(Some(x)),
        Some(NumOrStr::S(s)) => crate::prom::parse_sample_value(&s).map(Some).ok_or_else(|| serde::de::Error::custom(format!("not a number: {s:?}"))),
    }
}
