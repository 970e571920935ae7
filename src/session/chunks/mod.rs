//! A session's chunks: refs (`refs`: look up, set, list), bytes written inline or as
//! native chunk objects (`writes`), small native chunks several to one object
//! (`packs`), bytes read one chunk or many at a time (`reads`),
//! and the session's chunk port for one array (`port`, [`SessionChunks`](super::SessionChunks)).

pub(crate) mod packs;
pub(crate) mod port;
pub(crate) mod reads;
pub(crate) mod refs;
pub(crate) mod writes;
