//! The streaming parser of kerchunk reference sets (JSON, versions 0 and 1): serde
//! visitors that read a document without building its JSON tree, so sets with
//! millions of references parse in bounded memory. The first pass ([`Scan`]) collects
//! the version-1 header (`version`, `templates`, `gen`) and the few references a caller
//! wants early; the second ([`RefsSeed`], [`V1Body`]) streams the references into a
//! sink. A reference value becomes a [`Reference`]: `base64:` or ascii inline data,
//! `[url]`, or `[url, offset, length]` (URLs rendered by [`super::templates`]).
//!
//! Spec: `../shared/specs/kerchunk-references.txt` ("Version 0", "Version 1"). A plain absolute path as URL
//! means a local file.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine;
use bytes::Bytes;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use super::templates::Renderer;
use crate::error::KerchunkError;

/// One reference: inline data, a whole object, or a byte range of an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reference {
    /// The value's bytes themselves (`base64:` decoded, or the ascii text).
    Data(Bytes),
    /// A whole object (`[url]`).
    Url(String),
    /// `length` bytes at `offset` in an object (`[url, offset, length]`).
    Range {
        /// The object's URL (a plain absolute path is a local file).
        url: String,
        /// Start, in bytes.
        offset: u64,
        /// Length, in bytes.
        length: u64,
    },
}

/// A reference value's JSON turned into the form [`parse_reference`] takes (for the
/// values of the top-level keys a version-0 document shares with version 1).
pub(super) fn raw_from_value(v: Value) -> RawRef {
    match v {
        Value::String(s) => RawRef::Str(s),
        Value::Array(items) => {
            let len = items.len();
            let mut items = items.into_iter().map(RawItem::from_value);
            RawRef::List([items.next(), items.next(), items.next()], len)
        }
        _ => RawRef::Other,
    }
}

/// What the first pass over a document collects before its version is known: the
/// header fields of version 1, and for both versions the references whose key
/// passes `early` (unparsed) and a count of the others.
pub(super) struct Scan<'a> {
    pub(super) early: &'a dyn Fn(&str) -> bool,
    pub(super) version: Option<Value>,
    pub(super) templates: Option<Value>,
    pub(super) gen: Option<Value>,
    /// Early entries of the `refs` object (version 1).
    pub(super) v1_early: Vec<(String, RawRef)>,
    /// Other entries of the `refs` object.
    pub(super) v1_others: u64,
    /// Early top-level entries (version 0).
    pub(super) v0_early: Vec<(String, RawRef)>,
    /// Other top-level entries.
    pub(super) v0_others: u64,
}

impl Scan<'_> {
    /// Records top-level entry `key` as a version-0 reference.
    fn top_level(&mut self, key: &str, value: impl FnOnce() -> RawRef) {
        if (self.early)(key) {
            self.v0_early.push((key.to_string(), value()));
        } else {
            self.v0_others += 1;
        }
    }
}

impl<'de> Visitor<'de> for &mut Scan<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "version" | "templates" | "gen" => {
                    let v: Value = map.next_value()?;
                    self.top_level(&key, || raw_from_value(v.clone()));
                    let slot = match key.as_str() {
                        "version" => &mut self.version,
                        "templates" => &mut self.templates,
                        _ => &mut self.gen,
                    };
                    *slot = Some(v);
                }
                "refs" => {
                    let early = self.early;
                    let as_v0 = map.next_value_seed(RefsScan {
                        early,
                        found: &mut self.v1_early,
                        others: &mut self.v1_others,
                    })?;
                    // An object is version 1's references (or, in version 0, an
                    // invalid reference named `refs`).
                    self.top_level(&key, || as_v0.unwrap_or(RawRef::Other));
                }
                _ if (self.early)(&key) => {
                    let raw: RawRef = map.next_value()?;
                    self.v0_early.push((key, raw));
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    self.v0_others += 1;
                }
            }
        }
        Ok(())
    }
}

/// The value of a top-level `refs` key: an object (version 1's references: the early
/// ones kept, the others counted; `None`), or anything else (a version-0 reference).
struct RefsScan<'a> {
    early: &'a dyn Fn(&str) -> bool,
    found: &'a mut Vec<(String, RawRef)>,
    others: &'a mut u64,
}

impl<'de> DeserializeSeed<'de> for RefsScan<'_> {
    type Value = Option<RawRef>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for RefsScan<'_> {
    type Value = Option<RawRef>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of references")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if (self.early)(&key) {
                let raw: RawRef = map.next_value()?;
                self.found.push((key, raw));
            } else {
                map.next_value::<IgnoredAny>()?;
                *self.others += 1;
            }
        }
        Ok(None)
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(RawRef::Str(v.to_string())))
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(RawRef::Str(v)))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        RawRefVisitor.visit_seq(seq).map(Some)
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Some(RawRef::Other))
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Some(RawRef::Other))
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Some(RawRef::Other))
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Some(RawRef::Other))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(Some(RawRef::Other))
    }
}

/// A reference value as it appears in JSON: a string, or a list of a URL and
/// optionally an offset and a length. Parsed without building a JSON tree (and
/// without a heap allocation besides the strings).
pub(super) enum RawRef {
    Str(String),
    /// A list: its first three elements and its length.
    List([Option<RawItem>; 3], usize),
    /// Anything else (numbers, objects, null): an invalid reference.
    Other,
}

/// An element of a reference list, as much as a reference needs of it.
pub(super) enum RawItem {
    Str(String),
    U64(u64),
    /// Anything else: never valid in a reference list.
    Other,
}

impl RawItem {
    fn from_value(v: Value) -> Self {
        match v {
            Value::String(s) => RawItem::Str(s),
            Value::Number(n) => n.as_u64().map_or(RawItem::Other, RawItem::U64),
            _ => RawItem::Other,
        }
    }
}

impl<'de> Deserialize<'de> for RawItem {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ItemVisitor;
        impl<'de> Visitor<'de> for ItemVisitor {
            type Value = RawItem;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a reference list element")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawItem, E> {
                Ok(RawItem::Str(v.to_string()))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<RawItem, E> {
                Ok(RawItem::Str(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<RawItem, E> {
                Ok(RawItem::U64(v))
            }
            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<RawItem, E> {
                Ok(RawItem::Other)
            }
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<RawItem, E> {
                Ok(RawItem::Other)
            }
            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<RawItem, E> {
                Ok(RawItem::Other)
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<RawItem, E> {
                Ok(RawItem::Other)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<RawItem, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(RawItem::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawItem, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(RawItem::Other)
            }
        }
        d.deserialize_any(ItemVisitor)
    }
}

struct RawRefVisitor;

impl<'de> Visitor<'de> for RawRefVisitor {
    type Value = RawRef;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string or a list")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawRef, E> {
        Ok(RawRef::Str(v.to_string()))
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<RawRef, E> {
        Ok(RawRef::Str(v))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<RawRef, A::Error> {
        let mut first: [Option<RawItem>; 3] = [None, None, None];
        let mut len = 0usize;
        for slot in &mut first {
            match seq.next_element::<RawItem>()? {
                Some(item) => {
                    *slot = Some(item);
                    len += 1;
                }
                None => return Ok(RawRef::List(first, len)),
            }
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {
            len = len.saturating_add(1);
        }
        Ok(RawRef::List(first, len))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawRef, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(RawRef::Other)
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<RawRef, E> {
        Ok(RawRef::Other)
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<RawRef, E> {
        Ok(RawRef::Other)
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<RawRef, E> {
        Ok(RawRef::Other)
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<RawRef, E> {
        Ok(RawRef::Other)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<RawRef, E> {
        Ok(RawRef::Other)
    }
}

impl<'de> Deserialize<'de> for RawRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RawRefVisitor)
    }
}

/// Parses one reference value.
pub(super) fn parse_reference(
    key: &str,
    value: RawRef,
    renderer: &Renderer,
) -> Result<Reference, KerchunkError> {
    let invalid = |reason: &str| KerchunkError::InvalidReference {
        key: key.to_string(),
        reason: reason.to_string(),
    };
    let none = BTreeMap::new();
    match value {
        RawRef::Str(s) => match s.strip_prefix("base64:") {
            Some(b64) => base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map(|b| Reference::Data(Bytes::from(b)))
                .map_err(|e| invalid(&format!("bad base64 data: {e}"))),
            None => Ok(Reference::Data(Bytes::from(s.into_bytes()))),
        },
        RawRef::List([url, offset, length], len) => {
            let Some(RawItem::Str(url)) = url else {
                return Err(invalid("the first element must be a URL string"));
            };
            let url = renderer.render_owned(url, &none)?;
            match len {
                1 => Ok(Reference::Url(url)),
                3 => {
                    let num = |v: Option<RawItem>, what: &str| match v {
                        Some(RawItem::U64(n)) => Ok(n),
                        _ => Err(invalid(&format!("{what} must be a non-negative integer"))),
                    };
                    Ok(Reference::Range {
                        url,
                        offset: num(offset, "offset")?,
                        length: num(length, "length")?,
                    })
                }
                n => Err(invalid(&format!(
                    "a reference list has 1 or 3 elements, found {n}"
                ))),
            }
        }
        _ => Err(invalid("a reference is a string or a list")),
    }
}

/// Streams the entries of a refs object into a sink.
pub(super) struct RefsSeed<'a, F> {
    pub(super) want: &'a dyn Fn(&str) -> bool,
    pub(super) renderer: &'a Renderer,
    pub(super) sink: &'a mut F,
    pub(super) error: &'a mut Option<KerchunkError>,
    pub(super) count: &'a mut u64,
}

impl<'de, F> Visitor<'de> for RefsSeed<'_, F>
where
    F: FnMut(String, Reference) -> Result<(), KerchunkError>,
{
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object of references")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if self.error.is_some() || !(self.want)(&key) {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let value: RawRef = map.next_value()?;
            let result =
                parse_reference(&key, value, self.renderer).and_then(|r| (self.sink)(key, r));
            match result {
                Ok(()) => *self.count += 1,
                Err(e) => *self.error = Some(e),
            }
        }
        Ok(())
    }
}

impl<'de, F> DeserializeSeed<'de> for RefsSeed<'_, F>
where
    F: FnMut(String, Reference) -> Result<(), KerchunkError>,
{
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

/// Visits a version-1 document, streaming only its `refs` object.
pub(super) struct V1Body<'a, F>(pub(super) RefsSeed<'a, F>);

impl<'de, F> Visitor<'de> for V1Body<'_, F>
where
    F: FnMut(String, Reference) -> Result<(), KerchunkError>,
{
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seed = Some(self.0);
        while let Some(key) = map.next_key::<String>()? {
            if key == "refs" {
                if let Some(s) = seed.take() {
                    map.next_value_seed(s)?;
                    continue;
                }
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use bytes::Bytes;

    use super::super::read_references;
    use super::super::test_support::{collect, range};
    use super::Reference;
    use crate::error::KerchunkError;

    #[test]
    fn spec_example_version_1() {
        let refs = collect(
            r#"{
            "version": 1,
            "templates": {"u": "server.domain/path", "f": "{{c}}"},
            "gen": [{"key": "gen_key{{i}}", "url": "http://{{u}}_{{i}}",
                     "offset": "{{(i + 1) * 1000}}", "length": "1000",
                     "dimensions": {"i": {"stop": 5}}}],
            "refs": {
              "key0": "data",
              "key1": ["http://target_url", 10000, 100],
              "key2": ["http://{{u}}", 10000, 100],
              "key3": ["http://{{f(c='text')}}", 10000, 100],
              "key4": "base64:aGVsbG8=",
              "key5": ["s3://bucket/whole"]
            }}"#,
        )
        .unwrap();
        assert_eq!(refs["key0"], Reference::Data(Bytes::from_static(b"data")));
        assert_eq!(refs["key1"], range("http://target_url", 10000, 100));
        assert_eq!(refs["key2"], range("http://server.domain/path", 10000, 100));
        assert_eq!(refs["key3"], range("http://text", 10000, 100));
        assert_eq!(refs["key4"], Reference::Data(Bytes::from_static(b"hello")));
        assert_eq!(refs["key5"], Reference::Url("s3://bucket/whole".into()));
        for i in 0..5u64 {
            assert_eq!(
                refs[&format!("gen_key{i}")],
                range(
                    &format!("http://server.domain/path_{i}"),
                    (i + 1) * 1000,
                    1000
                )
            );
        }
        assert_eq!(refs.len(), 11);
    }

    #[test]
    fn version_0_is_a_flat_map() {
        let refs = collect(r#"{".zgroup": "{\"zarr_format\": 2}", "x/0": ["/data/x.nc", 5, 6], "version": "not a number"}"#).unwrap();
        assert_eq!(refs["x/0"], range("/data/x.nc", 5, 6));
        assert_eq!(
            refs[".zgroup"],
            Reference::Data(Bytes::from_static(b"{\"zarr_format\": 2}"))
        );
        assert_eq!(
            refs["version"],
            Reference::Data(Bytes::from_static(b"not a number"))
        );
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        assert!(matches!(collect("{"), Err(KerchunkError::Json { .. })));
        assert!(matches!(collect("[1]"), Err(KerchunkError::Json { .. })));
        assert!(matches!(
            collect(r#"{"version": 2, "refs": {}}"#),
            Err(KerchunkError::UnsupportedVersion { .. })
        ));
        assert!(matches!(
            collect(r#"{"version": 1, "refs": {"a": [1, 2, 3]}}"#),
            Err(KerchunkError::InvalidReference { .. })
        ));
        assert!(matches!(
            collect(r#"{"version": 1, "refs": {"a": ["u", 1]}}"#),
            Err(KerchunkError::InvalidReference { .. })
        ));
        assert!(matches!(
            collect(r#"{"version": 1, "refs": {"a": ["u", -1, 2]}}"#),
            Err(KerchunkError::InvalidReference { .. })
        ));
        assert!(matches!(
            collect(r#"{"version": 1, "refs": {"a": "base64:***"}}"#),
            Err(KerchunkError::InvalidReference { .. })
        ));
        assert!(matches!(
            collect(r#"{"version": 1, "refs": {"a": ["http://{{nope}}", 1, 2]}}"#),
            Err(KerchunkError::Template { .. })
        ));
        assert!(matches!(
            collect(r#"{"version": 1, "gen": [{"key": "k", "url": "u"}]}"#),
            Err(KerchunkError::InvalidGen { .. })
        ));
        let missing = read_references(Path::new("/nonexistent/refs.json"), |_, _| Ok(()));
        assert!(matches!(missing, Err(KerchunkError::Io { .. })));
    }
}
