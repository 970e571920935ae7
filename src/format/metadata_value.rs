//! The metadata values of commits and, in spec 2, of the repository: JSON values
//! stored as MessagePack in spec 1 and as FlexBuffers in spec 2
//! (`icechunk-format-notes.md` §2.5). One codec for both users, snapshots and the
//! spec-2 `repo` object.

use super::SpecVersion;

/// Decodes one metadata value: MessagePack in spec 1, FlexBuffers in spec 2 (both of
/// a JSON value), as Icechunk stores the metadata of commits and, in spec 2, of the
/// repository (`icechunk-format-notes.md` §2.5). A FlexBuffers value is checked
/// before it is read (bounds, nesting up to 128 levels, decoded size linear in its
/// length; see `format::flexbuffer`), so no input panics, loops or
/// allocates without bound.
///
/// # Errors
/// The decoder's message, or why the FlexBuffers check refused the bytes, when they
/// are not such a value.
pub fn decode_metadata_value(spec: SpecVersion, bytes: &[u8]) -> Result<serde_json::Value, String> {
    match spec {
        SpecVersion::V1 => {
            rmp_serde::from_slice(bytes).map_err(|e| format!("not MessagePack: {e}"))
        }
        SpecVersion::V2 => {
            super::flexbuffer::from_slice(bytes).map_err(|e| format!("not FlexBuffers: {e}"))
        }
    }
}

/// Encodes one metadata value as [`decode_metadata_value`] reads it: MessagePack in
/// spec 1, FlexBuffers in spec 2.
///
/// # Errors
/// The encoder's message.
pub fn encode_metadata_value(
    spec: SpecVersion,
    value: &serde_json::Value,
) -> Result<Vec<u8>, String> {
    match spec {
        SpecVersion::V1 => rmp_serde::to_vec(value).map_err(|e| e.to_string()),
        SpecVersion::V2 => flexbuffers::to_vec(value).map_err(|e| e.to_string()),
    }
}
