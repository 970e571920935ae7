//! Kerchunk reference sets (JSON, versions 0 and 1): reading them, streaming, in
//! bounded memory, and importing them into a session as virtual chunk refs.
//!
//! One job per file:
//! - `limits.rs`: [`KerchunkLimits`](crate::ops::KerchunkLimits), the bounds on the
//!   work a document can cause (`gen` totals, template fuel and output size);
//! - `parse.rs`: the streaming parser (serde visitors, never a JSON tree) and
//!   [`Reference`];
//! - `templates.rs`: Jinja template rendering (`minijinja`) within the limits;
//! - `gen.rs`: expansion of `gen` entries (cartesian products of dimensions);
//! - `file.rs`: the file API, [`ReferenceFile`] and [`read_references`];
//! - `import.rs`: the import into a session
//!   ([`import_kerchunk`](crate::ops::import_kerchunk)).
//!
//! The limits and the import are public at [`crate::ops`]; the reader here.
//!
//! Spec: `../shared/specs/kerchunk-references.txt` ("Version 0", "Version 1": templates,
//! `gen` with ranges or lists and their cartesian product, `base64:` inline data, ascii
//! data, `[url]` and `[url, offset, length]`). Template strings are Jinja; they are
//! rendered with `minijinja`. A plain absolute path as URL means a local file.

mod file;
mod gen;
pub(super) mod import;
pub(super) mod limits;
mod parse;
mod templates;

pub use file::{read_references, read_references_limited, read_references_where, ReferenceFile};
pub use parse::Reference;

/// Helpers of the reader's unit tests (in the files of each job).
#[cfg(test)]
mod test_support {
    use std::collections::BTreeMap;

    use super::limits::KerchunkLimits;
    use super::{read_references, read_references_limited, Reference};
    use crate::error::KerchunkError;

    pub(super) fn collect(json: &str) -> Result<BTreeMap<String, Reference>, KerchunkError> {
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

    pub(super) fn collect_limited(
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

    pub(super) fn range(url: &str, offset: u64, length: u64) -> Reference {
        Reference::Range {
            url: url.into(),
            offset,
            length,
        }
    }
}
