//! Chunk key encodings (the `chunk_key_encoding` extension point of the core spec).
//!
//! Implements `default` (`../shared/specs/zarr/v3/chunk-key-encodings/default`) and
//! `v2` (`../shared/specs/zarr/v3/chunk-key-encodings/v2`).

use std::fmt::Debug;

use serde_json::{json, Value};

/// Why a chunk key encoding (the `chunk_key_encoding` member of an array's metadata)
/// is refused. The Zarr layer reports it as
/// [`ZarrError::InvalidMetadata`](crate::zarr::ZarrError::InvalidMetadata) or
/// [`ZarrError::UnsupportedExtension`](crate::zarr::ZarrError::UnsupportedExtension)
/// naming the array (it converts with `?`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChunkKeyEncodingError {
    /// A malformed member (what is wrong).
    #[error("{0}")]
    Invalid(String),
    /// An encoding other than `default` and `v2` (its name).
    #[error("unsupported chunk key encoding `{0}`")]
    Unsupported(String),
}

/// The result of parsing a chunk key encoding.
pub type ChunkKeyEncodingResult<T> = Result<T, ChunkKeyEncodingError>;

/// Maps chunk grid indices to store keys relative to the array's prefix.
pub trait ChunkKeyEncoding: Send + Sync + Debug {
    /// The metadata JSON.
    fn to_json(&self) -> Value;

    /// The key of chunk `chunk`, relative to the array prefix (e.g. `c/1/0`).
    fn encode(&self, chunk: &[u64]) -> String;

    /// The chunk index encoded by `key` (relative to the array prefix) for an array of
    /// `ndim` dimensions, or `None` if `key` is not a chunk key of this encoding.
    fn decode(&self, key: &str, ndim: usize) -> Option<Vec<u64>>;
}

/// Separator of chunk key encodings: `/` or `.`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Separator {
    /// `/`
    Slash,
    /// `.`
    Dot,
}

impl Separator {
    /// The separator character as a string.
    pub fn as_str(self) -> &'static str {
        match self {
            Separator::Slash => "/",
            Separator::Dot => ".",
        }
    }

    /// Parses `/` or `.`.
    ///
    /// # Errors
    /// [`ChunkKeyEncodingError::Invalid`] for anything else.
    pub fn parse(s: &str) -> ChunkKeyEncodingResult<Self> {
        match s {
            "/" => Ok(Separator::Slash),
            "." => Ok(Separator::Dot),
            other => Err(ChunkKeyEncodingError::Invalid(format!(
                "chunk key separator must be \"/\" or \".\", not {other:?}"
            ))),
        }
    }
}

/// The `default` encoding: `c` followed by `<sep><index>` per dimension; `c` for 0-d.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DefaultChunkKeyEncoding {
    /// The separator (default `/`).
    pub separator: Separator,
}

/// The `v2` encoding: indices joined by the separator; `0` for 0-d.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct V2ChunkKeyEncoding {
    /// The separator (default `.`).
    pub separator: Separator,
}

fn join(chunk: &[u64], sep: &str) -> String {
    chunk
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(sep)
}

fn parse_indices(s: &str, sep: &str, ndim: usize) -> Option<Vec<u64>> {
    let v: Option<Vec<u64>> = s
        .split(sep)
        .map(|p| {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                None
            } else {
                p.parse().ok()
            }
        })
        .collect();
    v.filter(|v| v.len() == ndim)
}

impl ChunkKeyEncoding for DefaultChunkKeyEncoding {
    fn to_json(&self) -> Value {
        json!({"name": "default", "configuration": {"separator": self.separator.as_str()}})
    }

    fn encode(&self, chunk: &[u64]) -> String {
        if chunk.is_empty() {
            return "c".to_string();
        }
        let sep = self.separator.as_str();
        format!("c{sep}{}", join(chunk, sep))
    }

    fn decode(&self, key: &str, ndim: usize) -> Option<Vec<u64>> {
        if ndim == 0 {
            return (key == "c").then(Vec::new);
        }
        let sep = self.separator.as_str();
        let rest = key.strip_prefix('c')?.strip_prefix(sep)?;
        parse_indices(rest, sep, ndim)
    }
}

impl ChunkKeyEncoding for V2ChunkKeyEncoding {
    fn to_json(&self) -> Value {
        json!({"name": "v2", "configuration": {"separator": self.separator.as_str()}})
    }

    fn encode(&self, chunk: &[u64]) -> String {
        if chunk.is_empty() {
            return "0".to_string();
        }
        join(chunk, self.separator.as_str())
    }

    fn decode(&self, key: &str, ndim: usize) -> Option<Vec<u64>> {
        if ndim == 0 {
            return (key == "0").then(Vec::new);
        }
        parse_indices(key, self.separator.as_str(), ndim)
    }
}

/// Parses the `chunk_key_encoding` metadata member (`default` or `v2`, with an
/// optional `separator`).
///
/// # Errors
/// [`ChunkKeyEncodingError::Unsupported`] for other encodings;
/// [`ChunkKeyEncodingError::Invalid`] for a malformed configuration.
pub fn chunk_key_encoding_from_json(
    json: &Value,
) -> ChunkKeyEncodingResult<Box<dyn ChunkKeyEncoding>> {
    let bad = |reason: String| {
        ChunkKeyEncodingError::Invalid(format!("chunk_key_encoding {json}: {reason}"))
    };
    let name = match json {
        Value::String(s) => s.as_str(),
        Value::Object(o) => o
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("missing name".into()))?,
        _ => return Err(bad("must be an object or a name".into())),
    };
    let config = json.get("configuration");
    if let Some(c) = config {
        let obj = c
            .as_object()
            .ok_or_else(|| bad("configuration must be an object".into()))?;
        if let Some(k) = obj.keys().find(|k| *k != "separator") {
            return Err(bad(format!("unknown configuration key `{k}`")));
        }
    }
    let sep = match config.and_then(|c| c.get("separator")) {
        None => None,
        Some(Value::String(s)) => Some(Separator::parse(s).map_err(|e| bad(e.to_string()))?),
        Some(_) => return Err(bad("separator must be a string".into())),
    };
    match name {
        "default" => Ok(Box::new(DefaultChunkKeyEncoding {
            separator: sep.unwrap_or(Separator::Slash),
        })),
        "v2" => Ok(Box::new(V2ChunkKeyEncoding {
            separator: sep.unwrap_or(Separator::Dot),
        })),
        other => Err(ChunkKeyEncodingError::Unsupported(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_encoding() {
        let e = DefaultChunkKeyEncoding {
            separator: Separator::Slash,
        };
        assert_eq!(e.encode(&[1, 23, 45]), "c/1/23/45");
        assert_eq!(e.encode(&[]), "c");
        assert_eq!(e.decode("c/1/23/45", 3), Some(vec![1, 23, 45]));
        assert_eq!(e.decode("c/1/23", 3), None);
        assert_eq!(e.decode("zarr.json", 1), None);
        assert_eq!(e.decode("c", 0), Some(vec![]));
        let d = DefaultChunkKeyEncoding {
            separator: Separator::Dot,
        };
        assert_eq!(d.encode(&[1, 23, 45]), "c.1.23.45");
        assert_eq!(d.decode("c.1.2", 2), Some(vec![1, 2]));
    }

    #[test]
    fn v2_encoding() {
        let e = V2ChunkKeyEncoding {
            separator: Separator::Dot,
        };
        assert_eq!(e.encode(&[1, 23, 45]), "1.23.45");
        assert_eq!(e.encode(&[]), "0");
        assert_eq!(e.decode("1.23.45", 3), Some(vec![1, 23, 45]));
        assert_eq!(e.decode(".zarray", 1), None);
        let s = V2ChunkKeyEncoding {
            separator: Separator::Slash,
        };
        assert_eq!(s.encode(&[1, 23, 45]), "1/23/45");
    }

    #[test]
    fn parse_encodings() {
        let e = chunk_key_encoding_from_json(&json!({"name": "default"})).unwrap();
        assert_eq!(e.encode(&[0, 1]), "c/0/1");
        let e = chunk_key_encoding_from_json(&json!({"name": "v2"})).unwrap();
        assert_eq!(e.encode(&[0, 1]), "0.1");
        let e = chunk_key_encoding_from_json(
            &json!({"name": "default", "configuration": {"separator": "."}}),
        )
        .unwrap();
        assert_eq!(e.encode(&[0, 1]), "c.0.1");
        assert_err!(
            chunk_key_encoding_from_json(
                &json!({"name": "default", "configuration": {"separator": "-"}})
            ),
            ChunkKeyEncodingError::Invalid(_)
        );
        assert!(matches!(
            chunk_key_encoding_from_json(&json!({"name": "fanout"})),
            Err(ChunkKeyEncodingError::Unsupported(_))
        ));
    }
}
