//! The file API of the kerchunk reader: [`ReferenceFile`] reads a reference set's
//! header (and the few references a caller needs first) in one pass, then streams
//! its references (those of `refs`, then those `gen` makes) in a second pass, so the
//! document is never held in memory as a whole; [`read_references`] and its variants
//! do both for callers that want every reference.
//!
//! Spec: `../shared/specs/kerchunk-references.txt` ("Version 0", "Version 1").

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use serde::de::DeserializeSeed;
use serde_json::Value;

use super::gen::{check_gen_total, expand_gen};
use super::limits::KerchunkLimits;
use super::parse::{parse_reference, Reference, RefsSeed, Scan, V1Body};
use super::templates::Renderer;
use crate::error::KerchunkError;

/// A streaming JSON deserializer over the file at `path`.
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
    use bytes::Bytes;

    use super::super::test_support::range;
    use super::*;

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
}
