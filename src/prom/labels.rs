//! The label set of one series: a short list of (name, value) pairs kept sorted by name.
//!
//! A series carries a handful of labels, and a run at 1,000 replicas holds tens of thousands of
//! them at once (a histogram's buckets per replica). A `BTreeMap` allocates a node with room for
//! eleven entries however few it holds (544 bytes for `String` pairs); a sorted vector holds what
//! it has. It reads like the map it replaces: the same method names, iteration in name order, the
//! same ordering between label sets (name by name, then value by value), and it is written and read
//! as a JSON object.

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Label set of one series, sorted by name, each name once.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Labels(Vec<(String, String)>);

impl Labels {
    pub fn new() -> Labels {
        Labels(Vec::new())
    }

    fn find(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(n, _)| n.as_str().cmp(name))
    }

    pub fn get(&self, name: &str) -> Option<&String> {
        self.find(name).ok().map(|i| &self.0[i].1)
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.find(name).is_ok()
    }

    /// Set a label, returning the value it replaced.
    pub fn insert(&mut self, name: String, value: String) -> Option<String> {
        match self.find(&name) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (name, value));
                None
            }
        }
    }

    pub fn remove(&mut self, name: &str) -> Option<String> {
        self.find(name).ok().map(|i| self.0.remove(i).1)
    }

    pub fn retain(&mut self, mut keep: impl FnMut(&String, &mut String) -> bool) {
        self.0.retain_mut(|(n, v)| keep(n, v));
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&String, &String)> + ExactSizeIterator {
        self.0.iter().map(|(n, v)| (n, v))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.0.iter().map(|(n, _)| n)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.0.iter().map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::ops::Index<&str> for Labels {
    type Output = String;

    /// The value of a label that must be there (panics otherwise, like a map's index).
    fn index(&self, name: &str) -> &String {
        self.get(name).unwrap_or_else(|| panic!("no label {name:?}"))
    }
}

impl FromIterator<(String, String)> for Labels {
    /// Later pairs win over earlier ones with the same name, as inserting into a map would.
    fn from_iter<I: IntoIterator<Item = (String, String)>>(pairs: I) -> Labels {
        let mut v: Vec<(String, String)> = pairs.into_iter().collect();
        // A stable sort keeps equal names in their order; the last of each is kept.
        v.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(String, String)> = Vec::with_capacity(v.len());
        for (n, val) in v {
            match out.last_mut() {
                Some(last) if last.0 == n => last.1 = val,
                _ => out.push((n, val)),
            }
        }
        out.shrink_to_fit();
        Labels(out)
    }
}

impl<const N: usize> From<[(String, String); N]> for Labels {
    fn from(pairs: [(String, String); N]) -> Labels {
        pairs.into_iter().collect()
    }
}

impl From<std::collections::BTreeMap<String, String>> for Labels {
    fn from(map: std::collections::BTreeMap<String, String>) -> Labels {
        Labels(map.into_iter().collect())
    }
}

impl From<Labels> for std::collections::BTreeMap<String, String> {
    fn from(l: Labels) -> Self {
        l.0.into_iter().collect()
    }
}

impl Extend<(String, String)> for Labels {
    fn extend<I: IntoIterator<Item = (String, String)>>(&mut self, pairs: I) {
        for (n, v) in pairs {
            self.insert(n, v);
        }
    }
}

impl IntoIterator for Labels {
    type Item = (String, String);
    type IntoIter = std::vec::IntoIter<(String, String)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Labels {
    type Item = (&'a String, &'a String);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (String, String)>, fn(&'a (String, String)) -> (&'a String, &'a String)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(n, v)| (n, v))
    }
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for Labels {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.len()))?;
        for (n, v) in self.iter() {
            m.serialize_entry(n, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Labels, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Labels;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of label names and values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Labels, A::Error> {
                let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
                while let Some(pair) = map.next_entry::<String, String>()? {
                    pairs.push(pair);
                }
                Ok(pairs.into_iter().collect())
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// What the map did, this does: lookups, inserts that replace, removal, name order, the same
    /// ordering and equality between label sets, and the same JSON both ways.
    #[test]
    fn label_sets_behave_as_the_sorted_map_they_replace() {
        let cases = [
            pairs(&[("b", "2"), ("a", "1"), ("c", "3")]),
            pairs(&[("a", "1"), ("b", "2")]),
            pairs(&[("a", "1"), ("b", "3")]),
            pairs(&[("a", "0"), ("a", "1"), ("b", "2")]),
            pairs(&[]),
            pairs(&[("z", "")]),
        ];
        let sets: Vec<(Labels, BTreeMap<String, String>)> = cases.iter().map(|c| (c.iter().cloned().collect(), c.iter().cloned().collect())).collect();
        for (l, m) in &sets {
            assert_eq!(l.iter().collect::<Vec<_>>(), m.iter().collect::<Vec<_>>());
            assert_eq!(l.len(), m.len());
            for k in ["a", "b", "c", "z", "q"] {
                assert_eq!(l.get(k), m.get(k));
                assert_eq!(l.contains_key(k), m.contains_key(k));
            }
            assert_eq!(serde_json::to_string(l).unwrap(), serde_json::to_string(m).unwrap());
            let back: Labels = serde_json::from_str(&serde_json::to_string(m).unwrap()).unwrap();
            assert_eq!(&back, l);
            assert_eq!(format!("{l:?}"), format!("{m:?}"));
        }
        for (a, am) in &sets {
            for (b, bm) in &sets {
                assert_eq!(a.cmp(b), am.cmp(bm), "{a:?} vs {b:?}");
                assert_eq!(a == b, am == bm);
            }
        }
        let mut l: Labels = pairs(&[("b", "2")]).into_iter().collect();
        assert_eq!(l.insert("a".into(), "1".into()), None);
        assert_eq!(l.insert("b".into(), "3".into()), Some("2".into()));
        assert_eq!(l.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(l.remove("a"), Some("1".into()));
        assert_eq!(l.remove("a"), None);
        assert_eq!(l["b"], "3");
        // A JSON object naming a label twice keeps the last, as the map did.
        let twice: Labels = serde_json::from_str(r#"{"a":"1","a":"2"}"#).unwrap();
        assert_eq!(twice.get("a").map(String::as_str), Some("2"));
    }
}
