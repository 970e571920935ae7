//! Reading kerchunk reference sets (JSON, versions 0 and 1), streaming: the document is
//! never held in memory as a whole, so sets with millions of references read in
//! bounded memory.
//!
//! Spec: `../shared/specs/kerchunk-references.txt` ("Version 0", "Version 1": templates,
//! `gen` with ranges or lists and their cartesian product, `base64:` inline data, ascii
//! data, `[url]` and `[url, offset, length]`). Template strings are Jinja; they are
//! rendered with `minijinja`. A plain absolute path as URL means a local file.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use base64::Engine;
use bytes::Bytes;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// Errors reading a reference set. Every variant says where.
#[derive(Debug, thiserror::Error)]
pub enum KerchunkError {
    /// The file cannot be read.
    #[error("cannot read references `{path}`: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid JSON or not a JSON object.
    #[error("references `{path}` are not a valid kerchunk JSON document: {reason}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The parser's message (with line and column).
        reason: String,
    },
    /// A version other than 0 or 1.
    #[error("unsupported kerchunk references version {version}")]
    UnsupportedVersion {
        /// The version found.
        version: String,
    },
    /// A reference value of the wrong form.
    #[error("invalid reference `{key}`: {reason}")]
    InvalidReference {
        /// The key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// A Jinja template that does not render.
    #[error("cannot render template `{template}`: {reason}")]
    Template {
        /// The template text.
        template: String,
        /// minijinja's message.
        reason: String,
    },
    /// A malformed `gen` entry.
    #[error("invalid gen entry {index}: {reason}")]
    InvalidGen {
        /// Position in the `gen` list.
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// The consumer of references failed (its message).
    #[error("{0}")]
    Sink(String),
}

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

/// The small parts of a version-1 document: templates and generators.
#[derive(Debug, Default)]
struct Header {
    version: Option<Value>,
    templates: BTreeMap<String, String>,
    gen: Vec<Value>,
    has_refs: bool,
}

struct HeaderVisitor;

impl<'de> Visitor<'de> for HeaderVisitor {
    type Value = Header;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Header, A::Error> {
        let mut h = Header::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "version" => h.version = Some(map.next_value()?),
                "templates" => {
                    let t: BTreeMap<String, Value> = map.next_value()?;
                    h.templates = t
                        .into_iter()
                        .map(|(k, v)| match v {
                            Value::String(s) => (k, s),
                            other => (k, other.to_string()),
                        })
                        .collect();
                }
                "gen" => h.gen = map.next_value()?,
                "refs" => {
                    h.has_refs = true;
                    map.next_value::<IgnoredAny>()?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(h)
    }
}

impl<'de> Deserialize<'de> for Header {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(HeaderVisitor)
    }
}

/// Renders Jinja strings with the document's templates: a template without `{{` is a
/// string variable; one with `{{` is a function whose keyword arguments are its context.
struct Renderer {
    env: minijinja::Environment<'static>,
}

impl Renderer {
    fn new(templates: &BTreeMap<String, String>) -> Self {
        let mut env = minijinja::Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        for (name, text) in templates {
            if text.contains("{{") {
                let text = text.clone();
                env.add_function(
                    name.clone(),
                    move |kwargs: minijinja::value::Kwargs| -> Result<String, minijinja::Error> {
                        let mut ctx = BTreeMap::new();
                        for k in kwargs.args() {
                            ctx.insert(k.to_string(), kwargs.get::<minijinja::Value>(k)?);
                        }
                        minijinja::Environment::new().render_str(&text, ctx)
                    },
                );
            } else {
                env.add_global(name.clone(), text.clone());
            }
        }
        Renderer { env }
    }

    fn render(&self, text: &str, ctx: &BTreeMap<String, i64>) -> Result<String, KerchunkError> {
        if !text.contains("{{") && !text.contains("{%") {
            return Ok(text.to_string());
        }
        self.env
            .render_str(text, ctx)
            .map_err(|e| KerchunkError::Template {
                template: text.to_string(),
                reason: e.to_string(),
            })
    }
}

/// A reference value as it appears in JSON: a string, or a list of a URL and
/// optionally an offset and a length. Parsed without building a JSON tree.
enum RawRef {
    Str(String),
    List(Vec<Value>),
    /// Anything else (numbers, objects, null): an invalid reference.
    Other,
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
        let mut items = Vec::with_capacity(3);
        while let Some(v) = seq.next_element::<Value>()? {
            items.push(v);
        }
        Ok(RawRef::List(items))
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
fn parse_reference(
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
        RawRef::List(parts) => {
            let url = parts
                .first()
                .and_then(Value::as_str)
                .ok_or_else(|| invalid("the first element must be a URL string"))?;
            let url = renderer.render(url, &none)?;
            match parts.len() {
                1 => Ok(Reference::Url(url)),
                3 => {
                    let num = |v: &Value, what: &str| {
                        v.as_u64().ok_or_else(|| {
                            invalid(&format!("{what} must be a non-negative integer"))
                        })
                    };
                    Ok(Reference::Range {
                        url,
                        offset: num(&parts[1], "offset")?,
                        length: num(&parts[2], "length")?,
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
struct RefsSeed<'a, F> {
    want: &'a dyn Fn(&str) -> bool,
    renderer: &'a Renderer,
    sink: &'a mut F,
    error: &'a mut Option<KerchunkError>,
    count: &'a mut u64,
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
struct V1Body<'a, F>(RefsSeed<'a, F>);

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

fn compile<'e, 's>(
    env: &'e minijinja::Environment<'static>,
    text: &'s str,
) -> Result<minijinja::Template<'e, 's>, KerchunkError> {
    env.template_from_str(text)
        .map_err(|e| KerchunkError::Template {
            template: text.to_string(),
            reason: e.to_string(),
        })
}

/// Expands one `gen` entry, calling `emit` for every generated reference.
fn expand_gen(
    index: usize,
    spec: &Value,
    renderer: &Renderer,
    emit: &mut dyn FnMut(String, Reference) -> Result<(), KerchunkError>,
) -> Result<u64, KerchunkError> {
    let bad = |reason: String| KerchunkError::InvalidGen { index, reason };
    let field = |name: &str| spec.get(name).and_then(Value::as_str).map(str::to_string);
    let key_t = field("key").ok_or_else(|| bad("`key` is required".into()))?;
    let url_t = field("url").ok_or_else(|| bad("`url` is required".into()))?;
    let text_field = |name: &str| -> Option<String> {
        spec.get(name).map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    };
    let offset_t = text_field("offset");
    let length_t = text_field("length");
    if offset_t.is_some() != length_t.is_some() {
        return Err(bad("`offset` and `length` go together".into()));
    }
    let dims = spec
        .get("dimensions")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("`dimensions` is required".into()))?;
    let mut axes: Vec<(String, Vec<i64>)> = Vec::new();
    for (name, d) in dims {
        let values: Vec<i64> = match d {
            Value::Array(items) => items
                .iter()
                .map(|v| {
                    v.as_i64()
                        .ok_or_else(|| bad(format!("dimension `{name}` lists a non-integer")))
                })
                .collect::<Result<_, _>>()?,
            Value::Object(o) => {
                let get = |k: &str, default: Option<i64>| -> Result<i64, KerchunkError> {
                    match o.get(k) {
                        Some(v) => v.as_i64().ok_or_else(|| {
                            bad(format!("dimension `{name}`: `{k}` must be an integer"))
                        }),
                        None => {
                            default.ok_or_else(|| bad(format!("dimension `{name}` needs `{k}`")))
                        }
                    }
                };
                let (start, stop, step) = (
                    get("start", Some(0))?,
                    get("stop", None)?,
                    get("step", Some(1))?,
                );
                if step <= 0 {
                    return Err(bad(format!("dimension `{name}`: step must be positive")));
                }
                (start..stop).step_by(step as usize).collect()
            }
            _ => return Err(bad(format!("dimension `{name}` must be a list or a range"))),
        };
        axes.push((name.clone(), values));
    }
    let env = &renderer.env;
    let key_tpl = compile(env, &key_t)?;
    let url_tpl = compile(env, &url_t)?;
    let offset_tpl = offset_t.as_deref().map(|t| compile(env, t)).transpose()?;
    let length_tpl = length_t.as_deref().map(|t| compile(env, t)).transpose()?;
    let render = |tpl: &minijinja::Template<'_, '_>, ctx: &BTreeMap<String, i64>, src: &str| {
        tpl.render(ctx).map_err(|e| KerchunkError::Template {
            template: src.to_string(),
            reason: e.to_string(),
        })
    };
    let total: usize = axes.iter().map(|(_, v)| v.len()).product();
    let mut positions = vec![0usize; axes.len()];
    let mut count = 0u64;
    for _ in 0..total {
        let ctx: BTreeMap<String, i64> = axes
            .iter()
            .zip(&positions)
            .map(|((n, v), &i)| (n.clone(), v[i]))
            .collect();
        let key = render(&key_tpl, &ctx, &key_t)?;
        let url = render(&url_tpl, &ctx, &url_t)?;
        let reference = match (&offset_tpl, &length_tpl) {
            (Some(o), Some(l)) => {
                let num = |s: String, what: &str| {
                    s.trim()
                        .parse::<u64>()
                        .map_err(|_| bad(format!("{what} `{s}` is not a non-negative integer")))
                };
                Reference::Range {
                    url,
                    offset: num(
                        render(o, &ctx, offset_t.as_deref().unwrap_or(""))?,
                        "offset",
                    )?,
                    length: num(
                        render(l, &ctx, length_t.as_deref().unwrap_or(""))?,
                        "length",
                    )?,
                }
            }
            _ => Reference::Url(url),
        };
        emit(key, reference)?;
        count += 1;
        // Odometer over the cartesian product, last dimension fastest.
        for d in (0..positions.len()).rev() {
            positions[d] += 1;
            if positions[d] < axes[d].1.len() {
                break;
            }
            positions[d] = 0;
        }
    }
    Ok(count)
}

fn open(
    path: &Path,
) -> Result<serde_json::Deserializer<serde_json::de::IoRead<BufReader<File>>>, KerchunkError> {
    let file = File::open(path).map_err(|source| KerchunkError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(serde_json::Deserializer::from_reader(
        BufReader::with_capacity(1 << 20, file),
    ))
}

/// Reads the reference set in `path`, calling `sink(key, reference)` for every
/// reference (those of `refs`, then those `gen` produces). Returns how many.
///
/// The file is read twice (templates and generators first, then the references) and
/// never held in memory as a whole.
///
/// # Errors
/// [`KerchunkError`]: unreadable or invalid JSON, unsupported version, malformed
/// references, templates or generators, or the sink's own error.
pub fn read_references(
    path: &Path,
    sink: impl FnMut(String, Reference) -> Result<(), KerchunkError>,
) -> Result<u64, KerchunkError> {
    read_references_where(path, &|_| true, sink)
}

/// Like [`read_references`], but only references whose key passes `want` are parsed
/// and handed to `sink` (the others are skipped without being decoded). Returns how
/// many were handed over.
///
/// # Errors
/// As [`read_references`].
pub fn read_references_where(
    path: &Path,
    want: &dyn Fn(&str) -> bool,
    mut sink: impl FnMut(String, Reference) -> Result<(), KerchunkError>,
) -> Result<u64, KerchunkError> {
    let json_err = |e: serde_json::Error| KerchunkError::Json {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let mut de = open(path)?;
    let header = Header::deserialize(&mut de).map_err(json_err)?;
    de.end().map_err(json_err)?;
    let v1 = match &header.version {
        Some(Value::Number(n)) if n.as_u64() == Some(1) => true,
        Some(Value::Number(n)) if n.as_u64() == Some(0) => false,
        Some(Value::Number(n)) => {
            return Err(KerchunkError::UnsupportedVersion {
                version: n.to_string(),
            });
        }
        // Version 0 has no version key; a key named "version" is then a reference.
        _ => false,
    };
    let no_templates = BTreeMap::new();
    let renderer = Renderer::new(if v1 { &header.templates } else { &no_templates });
    let mut error = None;
    let mut count = 0u64;
    let mut de = open(path)?;
    let seed = RefsSeed {
        want,
        renderer: &renderer,
        sink: &mut sink,
        error: &mut error,
        count: &mut count,
    };
    if v1 {
        serde::Deserializer::deserialize_map(&mut de, V1Body(seed)).map_err(json_err)?;
    } else {
        seed.deserialize(&mut de).map_err(json_err)?;
    }
    if let Some(e) = error {
        return Err(e);
    }
    if v1 {
        let mut filtered = |key: String, r: Reference| {
            if want(&key) {
                count += 1;
                sink(key, r)
            } else {
                Ok(())
            }
        };
        for (i, spec) in header.gen.iter().enumerate() {
            expand_gen(i, spec, &renderer, &mut filtered)?;
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(json: &str) -> Result<BTreeMap<String, Reference>, KerchunkError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("refs.json");
        std::fs::write(&path, json).unwrap();
        let mut out = BTreeMap::new();
        let n = read_references(&path, |k, r| {
            out.insert(k, r);
            Ok(())
        })?;
        assert_eq!(n as usize, out.len());
        Ok(out)
    }

    fn range(url: &str, offset: u64, length: u64) -> Reference {
        Reference::Range {
            url: url.into(),
            offset,
            length,
        }
    }

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
    fn gen_cartesian_product_with_lists_and_steps() {
        let refs = collect(
            r#"{"version": 1, "refs": {},
            "gen": [{"key": "v/{{a}}.{{b}}", "url": "/data/f{{a}}.nc",
                     "dimensions": {"a": [3, 7], "b": {"start": 1, "stop": 6, "step": 2}}}]}"#,
        )
        .unwrap();
        let keys: Vec<&String> = refs.keys().collect();
        assert_eq!(keys, ["v/3.1", "v/3.3", "v/3.5", "v/7.1", "v/7.3", "v/7.5"]);
        assert_eq!(refs["v/7.5"], Reference::Url("/data/f7.nc".into()));
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
