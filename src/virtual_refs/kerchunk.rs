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

pub use crate::error::KerchunkError;
use base64::Engine;
use bytes::Bytes;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// Bounds on the work a reference set can make the reader do: the `gen` expansion
/// and Jinja template rendering (templates are code from the document).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct KerchunkLimits {
    /// Most references all `gen` entries of a document may generate together
    /// (default 10^7). Checked before anything is generated.
    pub max_generated_refs: u64,
    /// Fuel of one template rendering: minijinja instructions (default 100 000).
    pub template_fuel: u64,
    /// Fuel of all renderings of the document together (default 10^9).
    pub total_fuel: u64,
    /// Longest string one rendering may produce, in bytes (default 64 KiB).
    pub max_rendered_bytes: usize,
}

impl KerchunkLimits {
    /// These limits with at most `n` references from `gen` entries.
    pub fn max_generated_refs(mut self, n: u64) -> Self {
        self.max_generated_refs = n;
        self
    }

    /// These limits with `per_render` fuel per template rendering and `total` over
    /// the document.
    pub fn template_fuel(mut self, per_render: u64, total: u64) -> Self {
        self.template_fuel = per_render;
        self.total_fuel = total;
        self
    }

    /// These limits with renderings of at most `n` bytes.
    pub fn max_rendered_bytes(mut self, n: usize) -> Self {
        self.max_rendered_bytes = n;
        self
    }
}

impl Default for KerchunkLimits {
    fn default() -> Self {
        KerchunkLimits {
            max_generated_refs: 10_000_000,
            template_fuel: 100_000,
            total_fuel: 1_000_000_000,
            max_rendered_bytes: 64 << 10,
        }
    }
}

/// A `Write` that keeps at most `max` bytes and fails beyond.
struct BoundedOutput {
    buf: Vec<u8>,
    max: usize,
}

impl std::io::Write for BoundedOutput {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.buf.len().saturating_add(data.len()) > self.max {
            return Err(std::io::Error::other("rendered text too long"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The execution budget of one document's templates, shared by every rendering
/// (including template functions rendered from inside other templates).
#[derive(Debug)]
struct Budget {
    limits: KerchunkLimits,
    /// Fuel consumed so far by all renderings.
    spent: std::sync::atomic::AtomicU64,
    /// Set when any rendering hit a limit (so an error surfacing through an outer
    /// template is still reported as [`KerchunkError::TemplateLimit`]).
    exceeded: std::sync::atomic::AtomicBool,
}

impl Budget {
    fn new(limits: KerchunkLimits) -> Self {
        Budget {
            limits,
            spent: Default::default(),
            exceeded: Default::default(),
        }
    }

    /// A template environment with strict undefined values and per-rendering fuel.
    fn environment(&self) -> minijinja::Environment<'static> {
        let mut env = minijinja::Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        env.set_fuel(Some(self.limits.template_fuel.max(1)));
        env
    }

    /// Renders `tpl` (source text `src`) within the limits.
    fn render(
        &self,
        tpl: &minijinja::Template<'_, '_>,
        ctx: minijinja::Value,
        src: &str,
    ) -> Result<String, KerchunkError> {
        use std::sync::atomic::Ordering;
        let mut out = BoundedOutput {
            buf: Vec::new(),
            max: self.limits.max_rendered_bytes,
        };
        let result = tpl.render_captured_to(ctx, &mut out);
        let consumed = match &result {
            Ok(c) => c.state().fuel_levels().map_or(0, |(used, _)| used),
            Err(_) => self.limits.template_fuel,
        };
        let spent = self
            .spent
            .fetch_add(consumed, Ordering::Relaxed)
            .saturating_add(consumed);
        let limit = |reason: String| {
            self.exceeded.store(true, Ordering::Relaxed);
            KerchunkError::TemplateLimit {
                template: src.to_string(),
                reason,
            }
        };
        match result {
            Err(e) if e.kind() == minijinja::ErrorKind::OutOfFuel => Err(limit(format!(
                "more than {} instructions in one rendering",
                self.limits.template_fuel
            ))),
            Err(_) if e_is_write_failure(&result) => Err(limit(format!(
                "renders to more than {} bytes",
                self.limits.max_rendered_bytes
            ))),
            Err(_) if self.exceeded.load(Ordering::Relaxed) => Err(limit(
                "a template function it calls exceeded its budget".into(),
            )),
            Err(e) => Err(KerchunkError::Template {
                template: src.to_string(),
                reason: e.to_string(),
            }),
            Ok(_) if spent > self.limits.total_fuel => Err(limit(format!(
                "the document's templates ran more than {} instructions in total",
                self.limits.total_fuel
            ))),
            Ok(_) => String::from_utf8(out.buf).map_err(|e| KerchunkError::Template {
                template: src.to_string(),
                reason: e.to_string(),
            }),
        }
    }
}

/// Whether a rendering failed writing its output (the [`BoundedOutput`] limit).
fn e_is_write_failure<T>(result: &Result<T, minijinja::Error>) -> bool {
    matches!(result, Err(e) if e.kind() == minijinja::ErrorKind::WriteFailure)
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

/// A reference value's JSON turned into the form [`parse_reference`] takes (for the
/// values of the top-level keys a version-0 document shares with version 1).
fn raw_from_value(v: Value) -> RawRef {
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
struct Scan<'a> {
    early: &'a dyn Fn(&str) -> bool,
    version: Option<Value>,
    templates: Option<Value>,
    gen: Option<Value>,
    /// Early entries of the `refs` object (version 1).
    v1_early: Vec<(String, RawRef)>,
    /// Other entries of the `refs` object.
    v1_others: u64,
    /// Early top-level entries (version 0).
    v0_early: Vec<(String, RawRef)>,
    /// Other top-level entries.
    v0_others: u64,
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

/// Renders Jinja strings with the document's templates: a template without `{{` is a
/// string variable; one with `{{` is a function whose keyword arguments are its context.
/// Every rendering (template functions included) runs within the shared [`Budget`].
struct Renderer {
    env: minijinja::Environment<'static>,
    budget: std::sync::Arc<Budget>,
}

impl Renderer {
    fn new(templates: &BTreeMap<String, String>, limits: &KerchunkLimits) -> Self {
        let budget = std::sync::Arc::new(Budget::new(limits.clone()));
        let mut env = budget.environment();
        for (name, text) in templates {
            if text.contains("{{") {
                let text = text.clone();
                let budget = std::sync::Arc::clone(&budget);
                env.add_function(
                    name.clone(),
                    move |kwargs: minijinja::value::Kwargs| -> Result<String, minijinja::Error> {
                        let mut ctx = BTreeMap::new();
                        for k in kwargs.args() {
                            ctx.insert(k.to_string(), kwargs.get::<minijinja::Value>(k)?);
                        }
                        let env = budget.environment();
                        let fail = |e: KerchunkError| {
                            minijinja::Error::new(
                                minijinja::ErrorKind::InvalidOperation,
                                e.to_string(),
                            )
                        };
                        let tpl = compile(&env, &text).map_err(fail)?;
                        budget
                            .render(&tpl, minijinja::Value::from(ctx), &text)
                            .map_err(fail)
                    },
                );
            } else {
                env.add_global(name.clone(), text.clone());
            }
        }
        Renderer { env, budget }
    }

    /// Renders `text` (returned as it is when it holds no template).
    fn render_owned(
        &self,
        text: String,
        ctx: &BTreeMap<String, i64>,
    ) -> Result<String, KerchunkError> {
        if !text.contains("{{") && !text.contains("{%") {
            return Ok(text);
        }
        let tpl = compile(&self.env, &text)?;
        self.render_compiled(&tpl, ctx, &text)
    }

    fn render_compiled(
        &self,
        tpl: &minijinja::Template<'_, '_>,
        ctx: &BTreeMap<String, i64>,
        src: &str,
    ) -> Result<String, KerchunkError> {
        self.budget
            .render(tpl, minijinja::Value::from(ctx.clone()), src)
    }
}

/// A reference value as it appears in JSON: a string, or a list of a URL and
/// optionally an offset and a length. Parsed without building a JSON tree (and
/// without a heap allocation besides the strings).
enum RawRef {
    Str(String),
    /// A list: its first three elements and its length.
    List([Option<RawItem>; 3], usize),
    /// Anything else (numbers, objects, null): an invalid reference.
    Other,
}

/// An element of a reference list, as much as a reference needs of it.
enum RawItem {
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

/// The values of one `gen` dimension: a list, or a range that is never materialized.
enum Axis {
    List(Vec<i64>),
    /// `len` values `start, start + step, ...` (all within `start..stop`, so in `i64`).
    Range {
        start: i64,
        step: i64,
        len: u64,
    },
}

impl Axis {
    fn len(&self) -> u64 {
        match self {
            Axis::List(v) => v.len() as u64,
            Axis::Range { len, .. } => *len,
        }
    }

    /// The `i`-th value (`i < len`).
    fn value(&self, i: u64) -> i64 {
        match self {
            Axis::List(v) => usize::try_from(i)
                .ok()
                .and_then(|i| v.get(i))
                .copied()
                .unwrap_or_default(),
            // start + i * step < stop <= i64::MAX, computed without overflow.
            Axis::Range { start, step, .. } => {
                let v = i128::from(*start) + i128::from(i) * i128::from(*step);
                i64::try_from(v).unwrap_or_default()
            }
        }
    }
}

/// Number of values of the range `start..stop` by `step` (`step > 0`).
fn range_len(start: i64, stop: i64, step: i64) -> u64 {
    if stop <= start {
        return 0;
    }
    let span = (i128::from(stop) - i128::from(start) - 1) / i128::from(step) + 1;
    u64::try_from(span).unwrap_or(u64::MAX)
}

/// The parsed dimensions of a `gen` entry and the number of references it generates
/// (`None` when the product overflows `u64`).
type Axes = (Vec<(String, Axis)>, Option<u64>);

/// Parses the dimensions of `gen` entry `index`.
fn gen_axes(index: usize, spec: &Value) -> Result<Axes, KerchunkError> {
    let bad = |reason: String| KerchunkError::InvalidGen { index, reason };
    let dims = spec
        .get("dimensions")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("`dimensions` is required".into()))?;
    let mut axes: Vec<(String, Axis)> = Vec::new();
    for (name, d) in dims {
        let axis = match d {
            Value::Array(items) => Axis::List(
                items
                    .iter()
                    .map(|v| {
                        v.as_i64()
                            .ok_or_else(|| bad(format!("dimension `{name}` lists a non-integer")))
                    })
                    .collect::<Result<_, _>>()?,
            ),
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
                Axis::Range {
                    start,
                    step,
                    len: range_len(start, stop, step),
                }
            }
            _ => return Err(bad(format!("dimension `{name}` must be a list or a range"))),
        };
        axes.push((name.clone(), axis));
    }
    let total = axes
        .iter()
        .try_fold(1u64, |acc, (_, a)| acc.checked_mul(a.len()));
    Ok((axes, total))
}

/// Checks that the `gen` entries generate at most `limit` references together,
/// before any is generated; returns how many they generate.
///
/// # Errors
/// [`KerchunkError::TooManyRefs`] naming the first entry past the limit;
/// [`KerchunkError::InvalidGen`] for malformed dimensions.
fn check_gen_total(gen: &[Value], limit: u64) -> Result<u64, KerchunkError> {
    let mut sum = Some(0u64);
    for (index, spec) in gen.iter().enumerate() {
        let (_, n) = gen_axes(index, spec)?;
        sum = sum.zip(n).and_then(|(a, b)| a.checked_add(b));
        match sum {
            Some(total) if total <= limit => {}
            other => {
                return Err(KerchunkError::TooManyRefs {
                    index,
                    count: other.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string()),
                    limit,
                })
            }
        }
    }
    Ok(sum.unwrap_or_default())
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
    let (axes, total) = gen_axes(index, spec)?;
    // Checked by `check_gen_total` against the limit; an overflow here is an error
    // too, never a wrapped count.
    let total = total.ok_or_else(|| KerchunkError::TooManyRefs {
        index,
        count: "more than 2^64".into(),
        limit: u64::MAX,
    })?;
    let env = &renderer.env;
    let key_tpl = compile(env, &key_t)?;
    let url_tpl = compile(env, &url_t)?;
    let offset_tpl = offset_t.as_deref().map(|t| compile(env, t)).transpose()?;
    let length_tpl = length_t.as_deref().map(|t| compile(env, t)).transpose()?;
    let render = |tpl: &minijinja::Template<'_, '_>, ctx: &BTreeMap<String, i64>, src: &str| {
        renderer.render_compiled(tpl, ctx, src)
    };
    let mut positions = vec![0u64; axes.len()];
    let mut count = 0u64;
    for _ in 0..total {
        let ctx: BTreeMap<String, i64> = axes
            .iter()
            .zip(&positions)
            .map(|((n, a), &i)| (n.clone(), a.value(i)))
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
    sink: impl FnMut(String, Reference) -> Result<(), KerchunkError>,
) -> Result<u64, KerchunkError> {
    read_references_limited(path, want, &KerchunkLimits::default(), sink)
}

/// Like [`read_references_where`], within `limits`: the `gen` entries together may
/// generate at most [`KerchunkLimits::max_generated_refs`] references (checked,
/// before any is generated), and every template rendering runs on a fuel budget
/// with a bounded output.
///
/// # Errors
/// As [`read_references`]; [`KerchunkError::TooManyRefs`] past the reference limit;
/// [`KerchunkError::TemplateLimit`] for a template past its budget.
pub fn read_references_limited(
    path: &Path,
    want: &dyn Fn(&str) -> bool,
    limits: &KerchunkLimits,
    sink: impl FnMut(String, Reference) -> Result<(), KerchunkError>,
) -> Result<u64, KerchunkError> {
    let (file, _) = ReferenceFile::open(path, limits, &|_| false)?;
    file.read(want, sink)
}

/// A reference file whose header (version, templates, generators) has been read:
/// [`ReferenceFile::read`] then streams its references in one more pass. Opening
/// also hands over the few references a caller needs first (e.g. an importer's
/// metadata documents), so an import reads the file twice in all.
#[derive(Debug)]
pub struct ReferenceFile {
    path: PathBuf,
    v1: bool,
    templates: BTreeMap<String, String>,
    gen: Vec<Value>,
    limits: KerchunkLimits,
    /// References not handed over by `open`: in `refs` (or at the top level of a
    /// version-0 document), plus the number `gen` makes.
    remaining: u64,
}

impl ReferenceFile {
    /// Reads the header of the reference file at `path` in one pass, returning the
    /// references whose key passes `early` (those of `refs` or, in version 0, of the
    /// top level; not those `gen` makes). The early references are held until the
    /// pass ends (templates may come after them), so they should be few.
    ///
    /// # Errors
    /// [`KerchunkError::Io`]; [`KerchunkError::Json`] for invalid JSON or a version-1
    /// `templates` or `gen` of the wrong type; [`KerchunkError::UnsupportedVersion`];
    /// [`KerchunkError::TooManyRefs`] when `gen` would make more references than
    /// `limits` allow; errors parsing the early references.
    pub fn open(
        path: &Path,
        limits: &KerchunkLimits,
        early: &dyn Fn(&str) -> bool,
    ) -> Result<(Self, Vec<(String, Reference)>), KerchunkError> {
        let json_err = |reason: String| KerchunkError::Json {
            path: path.to_path_buf(),
            reason,
        };
        let mut scan = Scan {
            early,
            version: None,
            templates: None,
            gen: None,
            v1_early: Vec::new(),
            v1_others: 0,
            v0_early: Vec::new(),
            v0_others: 0,
        };
        let mut de = open(path)?;
        serde::Deserializer::deserialize_map(&mut de, &mut scan)
            .map_err(|e| json_err(e.to_string()))?;
        de.end().map_err(|e| json_err(e.to_string()))?;
        let v1 = match &scan.version {
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
        let mut file = ReferenceFile {
            path: path.to_path_buf(),
            v1,
            templates: BTreeMap::new(),
            gen: Vec::new(),
            limits: limits.clone(),
            remaining: scan.v0_others,
        };
        let found = if v1 {
            file.templates = match scan.templates {
                None => BTreeMap::new(),
                Some(Value::Object(t)) => t
                    .into_iter()
                    .map(|(k, v)| match v {
                        Value::String(s) => (k, s),
                        other => (k, other.to_string()),
                    })
                    .collect(),
                Some(_) => return Err(json_err("`templates` must be an object".into())),
            };
            file.gen = match scan.gen {
                None => Vec::new(),
                Some(Value::Array(g)) => g,
                Some(_) => return Err(json_err("`gen` must be a list".into())),
            };
            let generated = check_gen_total(&file.gen, limits.max_generated_refs)?;
            file.remaining = scan.v1_others.saturating_add(generated);
            scan.v1_early
        } else {
            scan.v0_early
        };
        let renderer = file.renderer();
        let refs = found
            .into_iter()
            .map(|(key, raw)| parse_reference(&key, raw, &renderer).map(|r| (key, r)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((file, refs))
    }

    /// About how many references [`ReferenceFile::read`] will find besides those
    /// `open` handed over (exact unless `gen` makes keys that `open` took early).
    pub fn remaining_refs(&self) -> u64 {
        self.remaining
    }

    fn renderer(&self) -> Renderer {
        let no_templates = BTreeMap::new();
        let templates = if self.v1 {
            &self.templates
        } else {
            &no_templates
        };
        Renderer::new(templates, &self.limits)
    }

    /// Streams every reference whose key passes `want` into `sink` (those of `refs`
    /// in document order, then those `gen` makes), parsing only those; one pass over
    /// the file. Returns how many were handed over.
    ///
    /// # Errors
    /// [`KerchunkError::Io`]; [`KerchunkError::Json`]; malformed references,
    /// templates or generators; [`KerchunkError::TemplateLimit`]; the sink's own
    /// error.
    pub fn read(
        &self,
        want: &dyn Fn(&str) -> bool,
        mut sink: impl FnMut(String, Reference) -> Result<(), KerchunkError>,
    ) -> Result<u64, KerchunkError> {
        let json_err = |e: serde_json::Error| KerchunkError::Json {
            path: self.path.clone(),
            reason: e.to_string(),
        };
        let renderer = self.renderer();
        let mut error = None;
        let mut count = 0u64;
        let mut de = open(&self.path)?;
        let seed = RefsSeed {
            want,
            renderer: &renderer,
            sink: &mut sink,
            error: &mut error,
            count: &mut count,
        };
        if self.v1 {
            serde::Deserializer::deserialize_map(&mut de, V1Body(seed)).map_err(json_err)?;
        } else {
            seed.deserialize(&mut de).map_err(json_err)?;
        }
        if let Some(e) = error {
            return Err(e);
        }
        if self.v1 {
            let mut filtered = |key: String, r: Reference| {
                if want(&key) {
                    count += 1;
                    sink(key, r)
                } else {
                    Ok(())
                }
            };
            for (i, spec) in self.gen.iter().enumerate() {
                expand_gen(i, spec, &renderer, &mut filtered)?;
            }
        }
        Ok(count)
    }
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

    fn collect_limited(
        json: &str,
        limits: &KerchunkLimits,
    ) -> Result<BTreeMap<String, Reference>, KerchunkError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("refs.json");
        std::fs::write(&path, json).unwrap();
        let mut out = BTreeMap::new();
        read_references_limited(&path, &|_| true, limits, |k, r| {
            out.insert(k, r);
            Ok(())
        })?;
        Ok(out)
    }

    fn gen_doc(dimensions: &str) -> String {
        format!(
            r#"{{"version": 1, "refs": {{}}, "gen": [{{"key": "k/{{{{i}}}}", "url": "/d/f",
               "dimensions": {dimensions}}}]}}"#
        )
    }

    #[test]
    fn gen_with_a_huge_stop_is_refused_before_expanding() {
        // The old code collected the range into a Vec (capacity overflow panic).
        for dims in [
            r#"{"i": {"stop": 9223372036854775807}}"#,
            r#"{"i": {"start": -9223372036854775808, "stop": 9223372036854775807}}"#,
            r#"{"i": {"stop": 10000001}}"#,
        ] {
            let e = collect(&gen_doc(dims)).unwrap_err();
            assert!(
                matches!(
                    e,
                    KerchunkError::TooManyRefs {
                        index: 0,
                        limit: 10_000_000,
                        ..
                    }
                ),
                "{dims}: {e}"
            );
        }
        // Exactly at the limit, and a long range with a big step, are fine.
        let limits = KerchunkLimits {
            max_generated_refs: 3,
            ..Default::default()
        };
        let refs = collect_limited(
            &gen_doc(r#"{"i": {"start": -9223372036854775808, "stop": 9223372036854775807, "step": 6148914691236517205}}"#),
            &limits,
        )
        .unwrap();
        let keys: Vec<&String> = refs.keys().collect();
        assert_eq!(
            keys,
            [
                "k/-3074457345618258603",
                "k/-9223372036854775808",
                "k/3074457345618258602"
            ]
        );
    }

    #[test]
    fn gen_product_overflow_is_an_error_not_zero() {
        // 65536^4 = 2^64 wrapped to 0 (nothing imported, no error) in the old code.
        let dims = r#"{"a": {"stop": 65536}, "b": {"stop": 65536}, "c": {"stop": 65536}, "d": {"stop": 65536}}"#;
        let e = collect(&gen_doc(dims)).unwrap_err();
        match &e {
            KerchunkError::TooManyRefs { count, .. } => assert_eq!(count, "more than 2^64"),
            other => panic!("{other}"),
        }
        // The limit counts all entries together and can be raised.
        let two = r#"{"version": 1, "gen": [
            {"key": "a/{{i}}", "url": "/d/f", "dimensions": {"i": {"stop": 6}}},
            {"key": "b/{{i}}", "url": "/d/f", "dimensions": {"i": [1, 2, 3, 4, 5]}}]}"#;
        let small = KerchunkLimits {
            max_generated_refs: 10,
            ..Default::default()
        };
        let e = collect_limited(two, &small).unwrap_err();
        assert!(
            matches!(&e, KerchunkError::TooManyRefs { index: 1, count, limit: 10 } if count == "11"),
            "{e}"
        );
        let raised = KerchunkLimits {
            max_generated_refs: 11,
            ..Default::default()
        };
        assert_eq!(collect_limited(two, &raised).unwrap().len(), 11);
    }

    #[test]
    fn templates_run_on_a_budget() {
        let is_limit = |r: Result<BTreeMap<String, Reference>, KerchunkError>| {
            matches!(r, Err(KerchunkError::TemplateLimit { .. }))
        };
        // Nested loops in a reference URL: out of fuel, not 10^10 iterations.
        let nested = r#"{"version": 1, "refs": {"a": ["{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}/x", 0, 1]}}"#;
        let started = std::time::Instant::now();
        assert!(is_limit(collect(nested)));
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
        // ... and inside a template function called from a reference.
        let in_function = r#"{"version": 1,
            "templates": {"f": "{% for i in range(100000) %}{% for j in range(100000) %}{{c}}{% endfor %}{% endfor %}"},
            "refs": {"a": ["/{{f(c='x')}}", 0, 1]}}"#;
        assert!(is_limit(collect(in_function)));
        // A rendered string longer than the bound.
        let long = r#"{"version": 1, "refs": {"a": ["/{{ 'x' * 100000 }}", 0, 1]}}"#;
        assert!(is_limit(collect(long)));
        let long_fn = r#"{"version": 1, "templates": {"f": "{{ c * 100000 }}"},
            "refs": {"a": ["/{{ f(c='x') }}", 0, 1]}}"#;
        assert!(is_limit(collect(long_fn)));
        // The whole document's renderings share one budget.
        let many = r#"{"version": 1, "refs": {}, "gen": [{"key": "k/{{i}}",
            "url": "/{% for j in range(50) %}{% endfor %}f", "dimensions": {"i": {"stop": 1000}}}]}"#;
        assert_eq!(collect(many).unwrap().len(), 1000);
        let tight = KerchunkLimits {
            total_fuel: 10_000,
            ..Default::default()
        };
        assert!(is_limit(collect_limited(many, &tight)));
        // Ordinary template errors stay `Template`.
        assert!(matches!(
            collect(r#"{"version": 1, "refs": {"a": ["/{{ nope }}", 0, 1]}}"#),
            Err(KerchunkError::Template { .. })
        ));
    }

    fn range(url: &str, offset: u64, length: u64) -> Reference {
        Reference::Range {
            url: url.into(),
            offset,
            length,
        }
    }

    #[test]
    fn open_reads_the_header_and_early_refs_in_one_pass() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("refs.json");
        let limits = KerchunkLimits::default();
        // Templates after the references that use them.
        std::fs::write(
            &path,
            r#"{"version": 1, "refs": {"a/.zarray": "{}", "a/0": ["{{u}}/f", 1, 2], "m": ["{{u}}/m", 0, 3]},
            "gen": [{"key": "a/{{i}}", "url": "{{u}}/g", "dimensions": {"i": {"start": 1, "stop": 4}}}],
            "templates": {"u": "s3://b"}}"#,
        )
        .unwrap();
        let early = |k: &str| k.ends_with(".zarray") || k == "m";
        let (file, first) = ReferenceFile::open(&path, &limits, &early).unwrap();
        assert_eq!(
            first,
            [
                (
                    "a/.zarray".to_string(),
                    Reference::Data(Bytes::from_static(b"{}"))
                ),
                ("m".to_string(), range("s3://b/m", 0, 3)),
            ]
        );
        assert_eq!(file.remaining_refs(), 4);
        let mut all = Vec::new();
        let n = file
            .read(&|k| !early(k), |k, r| {
                all.push((k, r));
                Ok(())
            })
            .unwrap();
        assert_eq!(n, 4);
        assert_eq!(all[0], ("a/0".to_string(), range("s3://b/f", 1, 2)));
        assert_eq!(
            all[3],
            ("a/3".to_string(), Reference::Url("s3://b/g".into()))
        );

        // Version 0: every top-level key is a reference, `templates` and `refs` too.
        std::fs::write(
            &path,
            r#"{"templates": "t", ".zgroup": "{}", "x/0": ["/d", 1, 2], "refs": ["/r"]}"#,
        )
        .unwrap();
        let early = |k: &str| k != "x/0";
        let (file, first) = ReferenceFile::open(&path, &limits, &early).unwrap();
        let keys: Vec<&str> = first.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["templates", ".zgroup", "refs"]);
        assert_eq!(first[2].1, Reference::Url("/r".into()));
        assert_eq!(file.remaining_refs(), 1);

        // Version 1 header fields of the wrong type.
        for doc in [
            r#"{"version": 1, "templates": [1], "refs": {}}"#,
            r#"{"version": 1, "gen": {}, "refs": {}}"#,
        ] {
            std::fs::write(&path, doc).unwrap();
            let e = ReferenceFile::open(&path, &limits, &|_| true).unwrap_err();
            assert!(matches!(e, KerchunkError::Json { .. }), "{doc}: {e}");
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
