//! In-memory storage (`memory://`): for tests and scratch repositories. Its contents
//! live as long as the returned handle and are never shared between processes.

use std::sync::Arc;

use object_store::memory::InMemory;

use super::object::ObjectStorage;
use super::Storage;

/// A new, empty in-memory [`Storage`]. Conditional writes are atomic within the process.
pub fn new_in_memory_storage() -> Arc<dyn Storage> {
    // InMemory's `get_ranges` slices each range, clamped to the object.
    Arc::new(
        ObjectStorage::new(Arc::new(InMemory::new()), "", "memory://".to_string())
            .with_vectored_ranges(true)
            .with_split_reads(super::SplitReads::NEVER)
            .with_serialized_conditional_writes(),
    )
}
