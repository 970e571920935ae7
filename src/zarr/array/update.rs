//! Changing an existing [`Array`]: its attributes, its shape (resize, dropping or
//! trimming chunks outside a smaller shape), and deleting it.

use super::*;

impl Array {
    pub(super) async fn store_metadata(&self) -> ZarrResult<()> {
        if self.format != ZarrFormat::V3 {
            return Err(ZarrError::InvalidMetadata {
                path: self.path.clone(),
                reason: "metadata of Zarr v2 and v1 arrays cannot be modified".into(),
            });
        }
        self.check_writable()?;
        self.store
            .set(
                &metadata_key(&self.path),
                Bytes::from(self.metadata.to_bytes()),
            )
            .await?;
        Ok(())
    }

    /// Replaces the user attributes and writes the metadata.
    ///
    /// # Errors
    /// [`ZarrError::ReadOnly`]; [`ZarrError::InvalidMetadata`] for Zarr v2 arrays;
    /// store errors.
    pub async fn set_attributes(&mut self, attributes: Map<String, Value>) -> ZarrResult<()> {
        let old = std::mem::replace(&mut self.metadata.attributes, attributes);
        if let Err(e) = self.store_metadata().await {
            self.metadata.attributes = old;
            return Err(e);
        }
        Ok(())
    }

    /// Merges `attributes` into the user attributes (keys with `null` values are
    /// removed) and writes the metadata.
    ///
    /// # Errors
    /// As [`Array::set_attributes`].
    pub async fn update_attributes(&mut self, attributes: Map<String, Value>) -> ZarrResult<()> {
        let merged = crate::zarr::node::merge_attributes(&self.metadata.attributes, attributes);
        self.set_attributes(merged).await
    }

    /// Changes the shape and writes the metadata. When shrinking, chunks now fully
    /// outside the shape are erased, and stored chunks that straddle the new edge have
    /// their out-of-bounds elements reset to the fill value (so growing again later
    /// shows the fill value there, as the regular grid spec recommends).
    ///
    /// # Errors
    /// [`ZarrError::InvalidRegion`] for a different dimensionality;
    /// [`ZarrError::ReadOnly`]; chunk and store errors.
    pub async fn resize(&mut self, new_shape: Vec<u64>) -> ZarrResult<()> {
        self.check_writable()?;
        if self.format != ZarrFormat::V3 {
            return Err(ZarrError::InvalidMetadata {
                path: self.path.clone(),
                reason: "metadata of Zarr v2 and v1 arrays cannot be modified".into(),
            });
        }
        if new_shape.len() != self.ndim() {
            return Err(self.region_err(format!(
                "new shape {new_shape:?} does not have {} dimensions",
                self.ndim()
            )));
        }
        let shrinks = new_shape
            .iter()
            .zip(&self.metadata.shape)
            .any(|(n, o)| n < o);
        if shrinks {
            let prefix = node_prefix(&self.path);
            let keys = self.store.list_prefix(&prefix).await?;
            let new_full = ArraySubset::full(&new_shape);
            let mut erase = Vec::new();
            let mut trim = Vec::new();
            for key in keys {
                let Some(idx) = self.derived.keys.decode(&key[prefix.len()..], self.ndim()) else {
                    continue;
                };
                let r = self.derived.grid.chunk_region(&idx);
                match r.intersect(&new_full) {
                    None => erase.push(idx),
                    Some(inside) => {
                        let old_in = self.chunk_region(&idx);
                        if inside != old_in {
                            trim.push((idx, inside));
                        }
                    }
                }
            }
            let this = &*self;
            let port = self.chunks();
            let port = &port;
            futures::stream::iter(erase)
                .map(|idx| async move { port.erase(&idx).await })
                .buffer_unordered(self.options.concurrency.max(1))
                .try_collect::<Vec<()>>()
                .await?;
            futures::stream::iter(trim)
                .map(|(idx, inside)| this.trim_chunk(port, idx, inside))
                .buffer_unordered(self.options.concurrency.max(1))
                .try_collect::<Vec<()>>()
                .await?;
        }
        let old = std::mem::replace(&mut self.metadata.shape, new_shape);
        if let Err(e) = self.store_metadata().await {
            self.metadata.shape = old;
            return Err(e);
        }
        Ok(())
    }

    /// Resets the elements of chunk `idx` outside `inside` (array coordinates) to the
    /// fill value.
    pub(super) async fn trim_chunk(
        &self,
        port: &Arc<dyn ChunkPort>,
        idx: Vec<u64>,
        inside: ArraySubset,
    ) -> ZarrResult<()> {
        let Some(existing) = self.fetch_chunk(port, &idx).await? else {
            return Ok(());
        };
        let chunk_region = self.derived.grid.chunk_region(&idx);
        let local = inside.relative_to(&chunk_region.start);
        let kept = existing.extract(&self.metadata.data_type, &self.derived.repr.shape, &local);
        let mut fresh = self.fill_bytes(self.chunk_len()? as u64)?;
        fresh.copy_from(
            &self.derived.repr.shape,
            &local.start,
            &kept,
            &local.shape,
            &vec![0; local.ndim()],
            &local.shape,
            self.metadata.data_type.fixed_size().unwrap_or(0),
        );
        self.store_chunk(port, &idx, fresh).await
    }

    /// Deletes the array (its metadata and all chunks).
    ///
    /// # Errors
    /// [`ZarrError::ReadOnly`]; store errors.
    pub async fn delete(self) -> ZarrResult<()> {
        self.check_writable()?;
        self.store.erase_prefix(&node_prefix(&self.path)).await?;
        Ok(())
    }
}
