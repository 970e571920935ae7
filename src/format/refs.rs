//! Ref files: the content of a branch or tag ref (`{"snapshot": "<id>"}`) and the rules
//! for branch and tag names. Reading and writing them is `crate::refs`; their keys are
//! in [`super::keys`].
//!
//! Spec: Icechunk specification, "Reference Files", "Creating and Updating Branches",
//! "Tags"; tombstone naming as in `../shared/docs/icechunk-format-v1.md`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::format::{FormatError, SnapshotId};

/// The content of a ref file: `{"snapshot":"<20-character id>"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefData {
    /// The snapshot the ref points to.
    pub snapshot: SnapshotId,
}

impl RefData {
    /// Compact JSON without a trailing newline, as Icechunk writes it.
    pub fn to_bytes(&self) -> Bytes {
        Bytes::from(format!("{{\"snapshot\":\"{}\"}}", self.snapshot))
    }

    /// Parses a ref file.
    ///
    /// # Errors
    /// [`FormatError::InvalidRef`] for anything but `{"snapshot": "<id>"}`.
    pub fn parse(key: &str, bytes: &[u8]) -> std::result::Result<Self, FormatError> {
        serde_json::from_slice(bytes).map_err(|e| FormatError::InvalidRef {
            key: key.to_string(),
            reason: e.to_string(),
        })
    }
}

/// Longest branch or tag name, in bytes of UTF-8: `branch.<name>`, the directory of
/// a spec-1 branch, then fits in the 255-byte file names of common file systems.
pub const MAX_REF_NAME_BYTES: usize = 248;

/// What is wrong with a branch or tag name, if anything: it must be non-empty, at
/// most [`MAX_REF_NAME_BYTES`] bytes, not `.` or `..`, and hold no `/` and no control
/// characters. The same rules apply to names given to create a ref and to names read
/// from storage (ref files, the spec-2 `repo` object). Icechunk itself only refuses
/// `/`, so an Icechunk repository may hold refs floe does not list.
pub fn ref_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("names cannot be empty")
    } else if name.len() > MAX_REF_NAME_BYTES {
        Some("names are at most 248 bytes long")
    } else if name.contains('/') {
        Some("names cannot contain `/`")
    } else if name.chars().any(char::is_control) {
        Some("names cannot contain control characters")
    } else if name == "." || name == ".." {
        Some("`.` and `..` are not names")
    } else {
        None
    }
}
