//! An in-memory [`Store`]: a sorted map from keys to values behind a lock.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use bytes::Bytes;

use super::chunks::KeyTransfer;
use super::{
    ByteRange, ChunkKeys, ChunkPort, KeyedChunks, ListDirResult, ReadInto, ReadNow, Store,
    StoreError,
};

/// A store that keeps every value in memory (for tests, benchmarks and scratch
/// arrays). Cloning the `Bytes` values is cheap; reads never copy.
#[derive(Debug, Default)]
pub struct MemoryStore {
    map: Arc<RwLock<BTreeMap<String, Bytes>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of keys stored.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Total size of all values, in bytes.
    pub fn total_bytes(&self) -> u64 {
        self.read().values().map(|v| v.len() as u64).sum()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Bytes>> {
        // A poisoned lock only means a writer panicked mid-insert of a whole value;
        // the map itself is still consistent.
        self.map.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Bytes>> {
        self.map.write().unwrap_or_else(|e| e.into_inner())
    }
}

fn check_key(key: &str) -> Result<(), StoreError> {
    if key.is_empty() || key.starts_with('/') {
        return Err(StoreError::InvalidKey {
            key: key.to_string(),
            reason: "keys must be non-empty and must not start with `/`".into(),
        });
    }
    Ok(())
}

/// The transfer step of a [`MemoryStore`]'s chunk port: a stored value of exactly
/// the buffer's length copied into it.
#[derive(Debug)]
struct MemoryTransfer(MemoryStore);

impl KeyTransfer for MemoryTransfer {
    fn read_into(&self, key: &str, dest: &mut [u8]) -> Result<ReadInto, StoreError> {
        Ok(match self.0.read().get(key) {
            None => ReadInto::Missing,
            Some(value) if value.len() == dest.len() => {
                dest.copy_from_slice(value);
                ReadInto::Read
            }
            Some(_) => ReadInto::Elsewhere,
        })
    }

    fn read_now(&self, key: &str, max_len: usize) -> Result<ReadNow, StoreError> {
        Ok(match self.0.read().get(key) {
            None => ReadNow::Missing,
            Some(value) if value.len() <= max_len => ReadNow::Read(value.clone()),
            Some(_) => ReadNow::Elsewhere,
        })
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn get(&self, key: &str) -> Result<Option<Bytes>, StoreError> {
        Ok(self.read().get(key).cloned())
    }

    /// Keys built once per array; values of the right length copied straight into
    /// an array's output.
    fn chunk_port(&self, keys: &ChunkKeys) -> Option<Arc<dyn ChunkPort>> {
        let shared = MemoryStore {
            map: Arc::clone(&self.map),
        };
        let transfer = Arc::new(MemoryTransfer(MemoryStore {
            map: Arc::clone(&self.map),
        }));
        Some(Arc::new(KeyedChunks::with_transfer(
            Arc::new(shared),
            keys.clone(),
            transfer,
        )))
    }

    async fn get_partial_values(
        &self,
        key: &str,
        ranges: &[ByteRange],
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        let Some(value) = self.read().get(key).cloned() else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(ranges.len());
        for r in ranges {
            let range = r.to_range(key, value.len() as u64)?;
            out.push(value.slice(range.start as usize..range.end as usize));
        }
        Ok(Some(out))
    }

    async fn set(&self, key: &str, value: Bytes) -> Result<(), StoreError> {
        check_key(key)?;
        self.write().insert(key.to_string(), value);
        Ok(())
    }

    async fn erase(&self, key: &str) -> Result<(), StoreError> {
        self.write().remove(key);
        Ok(())
    }

    async fn erase_prefix(&self, prefix: &str) -> Result<(), StoreError> {
        let mut map = self.write();
        if prefix.is_empty() {
            map.clear();
            return Ok(());
        }
        let keys: Vec<String> = map
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            map.remove(&k);
        }
        Ok(())
    }

    async fn list_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        Ok(self
            .read()
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, _)| k.clone())
            .collect())
    }

    async fn list_dir(&self, prefix: &str) -> Result<ListDirResult, StoreError> {
        let map = self.read();
        let mut out = ListDirResult::default();
        for (k, _) in map
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
        {
            let rest = &k[prefix.len()..];
            match rest.find('/') {
                None => out.keys.push(k.clone()),
                Some(i) => {
                    let p = format!("{prefix}{}", &rest[..=i]);
                    if out.prefixes.last() != Some(&p) {
                        out.prefixes.push(p);
                    }
                }
            }
        }
        out.prefixes.dedup();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn conformance() {
        let store = MemoryStore::new();
        super::super::conformance::store_conformance(&store).await;
    }
}
