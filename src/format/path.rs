//! Node paths: absolute, `/`-separated, `/` for the root, no trailing `/`
//! (Icechunk spec, "Snapshot Files": `NodeSnapshot.path`).

use std::fmt;
use std::str::FromStr;

use crate::format::FormatError;

/// An absolute node path such as `/`, `/a` or `/a/b`. Ordering is by UTF-8 bytes,
/// the order of nodes in a snapshot.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodePath(String);

impl NodePath {
    /// The root path `/`.
    pub fn root() -> Self {
        NodePath("/".to_string())
    }

    /// Parses and validates a path. A missing leading `/` is added, so `a/b` and
    /// `/a/b` are the same path; a trailing `/` is removed.
    ///
    /// # Errors
    /// [`FormatError::InvalidPath`] for empty segments (`/a//b`), `.` or `..`
    /// segments, or control characters.
    pub fn new(path: &str) -> Result<Self, FormatError> {
        let invalid = |reason| FormatError::InvalidPath {
            path: path.to_string(),
            reason,
        };
        let trimmed = path.trim_start_matches('/').trim_end_matches('/');
        if trimmed.is_empty() {
            return Ok(Self::root());
        }
        for seg in trimmed.split('/') {
            if seg.is_empty() {
                return Err(invalid("empty path segment"));
            }
            if seg == "." || seg == ".." {
                return Err(invalid("`.` and `..` segments are not allowed"));
            }
            if seg.chars().any(char::is_control) {
                return Err(invalid("control characters are not allowed"));
            }
        }
        if path.starts_with("//") {
            return Err(invalid("empty path segment"));
        }
        Ok(NodePath(format!("/{trimmed}")))
    }

    /// The path as a string (`/a/b`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the root `/`.
    pub fn is_root(&self) -> bool {
        self.0 == "/"
    }

    /// The parent path; `None` for the root.
    pub fn parent(&self) -> Option<NodePath> {
        if self.is_root() {
            return None;
        }
        match self.0.rfind('/') {
            Some(0) => Some(Self::root()),
            Some(i) => Some(NodePath(self.0[..i].to_string())),
            None => None,
        }
    }

    /// The last segment (`b` for `/a/b`, empty for the root).
    pub fn name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or("")
    }

    /// The child path `self/name`.
    ///
    /// # Errors
    /// [`FormatError::InvalidPath`] when `name` is not a valid single segment.
    pub fn child(&self, name: &str) -> Result<NodePath, FormatError> {
        if name.contains('/') || name.is_empty() {
            return Err(FormatError::InvalidPath {
                path: name.to_string(),
                reason: "a child name is one non-empty segment",
            });
        }
        if self.is_root() {
            NodePath::new(&format!("/{name}"))
        } else {
            NodePath::new(&format!("{}/{name}", self.0))
        }
    }

    /// Whether `self` is `other` or lies below it.
    pub fn starts_with(&self, other: &NodePath) -> bool {
        other.is_root()
            || self.0 == other.0
            || (self.0.starts_with(&other.0) && self.0.as_bytes().get(other.0.len()) == Some(&b'/'))
    }

    /// The path without its leading `/` (empty for the root): the Zarr store key
    /// prefix of the node.
    pub fn key_prefix(&self) -> &str {
        &self.0[1..]
    }
}

impl fmt::Display for NodePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for NodePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// Compares as its string (`/a/b`), so sets and maps keyed by paths can be looked
/// up with `&str`.
impl std::borrow::Borrow<str> for NodePath {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for NodePath {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for NodePath {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// Serialized as its string (`"/a/b"`).
impl serde::Serialize for NodePath {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// Deserialized from a string, validated as [`NodePath::new`] does.
impl<'de> serde::Deserialize<'de> for NodePath {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        NodePath::new(&text).map_err(serde::de::Error::custom)
    }
}

impl FromStr for NodePath {
    type Err = FormatError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        NodePath::new(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(NodePath::new("").unwrap(), NodePath::root());
        assert_eq!(NodePath::new("a/b").unwrap().as_str(), "/a/b");
        assert_eq!(NodePath::new("/a/b/").unwrap().as_str(), "/a/b");
        assert_err!(
            NodePath::new("/a//b"),
            crate::format::FormatError::InvalidPath { .. }
        );
        assert_err!(
            NodePath::new("/a/../b"),
            crate::format::FormatError::InvalidPath { .. }
        );
        let p = NodePath::new("/a/b").unwrap();
        assert_eq!(p.parent().unwrap().as_str(), "/a");
        assert_eq!(p.parent().unwrap().parent().unwrap(), NodePath::root());
        assert_eq!(p.name(), "b");
        assert!(p.starts_with(&NodePath::new("/a").unwrap()));
        assert!(!NodePath::new("/ab")
            .unwrap()
            .starts_with(&NodePath::new("/a").unwrap()));
        assert_eq!(NodePath::root().child("x").unwrap().as_str(), "/x");
        assert_eq!(p.key_prefix(), "a/b");
    }
}
