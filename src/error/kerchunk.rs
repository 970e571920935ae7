//! Errors reading kerchunk reference sets (defined here so that [`super::Error`]
//! depends on no layer above it; the reading lives in `ops::kerchunk`).

use std::path::PathBuf;

/// Errors reading a reference set. Every variant says where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    /// The `gen` entries would generate more references than
    /// [`crate::ops::KerchunkLimits::max_generated_refs`] (or a number that overflows 64 bits).
    #[error(
        "gen entry {index} would generate {count} references, more than the limit of \
         {limit} (raise it with --max-refs)"
    )]
    TooManyRefs {
        /// Position in the `gen` list of the entry that crosses the limit.
        index: usize,
        /// The references all entries up to this one would generate (a decimal
        /// number, or `more than 2^64`).
        count: String,
        /// The limit in force.
        limit: u64,
    },
    /// A template exceeded its execution budget (minijinja fuel, per rendering or
    /// for the whole document) or rendered a string longer than
    /// [`crate::ops::KerchunkLimits::max_rendered_bytes`].
    #[error("template `{template}` exceeds its budget: {reason}")]
    TemplateLimit {
        /// The template text.
        template: String,
        /// Which limit.
        reason: String,
    },
}
