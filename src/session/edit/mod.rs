//! Changing a session's nodes: groups and arrays added, updated and deleted
//! (`nodes`), moved and renamed (`rearrange`), and chunk refs shifted or reindexed
//! inside an array's grid (`reindex`).

pub(crate) mod nodes;
pub(crate) mod rearrange;
pub(crate) mod reindex;
