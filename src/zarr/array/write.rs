//! Region writes of an [`Array`]: fully covered chunks are encoded and written,
//! partially covered ones read, modified and written back; all-fill chunks are erased
//! unless `write_empty_chunks`.

use super::*;

impl Array {
    /// Writes decoded elements (C order, shape `region.shape`) into `region`.
    /// Chunks fully covered (within the array bounds) are written without reading;
    /// partially covered chunks are read, modified and written back. Chunks that end
    /// up all fill value are erased unless `write_empty_chunks`.
    ///
    /// # Errors
    /// [`ZarrError::InvalidRegion`], [`ZarrError::DataLength`] (wrong element count or
    /// representation), [`ZarrError::ReadOnly`]; chunk errors naming the key; store
    /// errors.
    pub async fn write_region_bytes(
        &self,
        region: &ArraySubset,
        data: ArrayBytes,
    ) -> ZarrResult<()> {
        self.check_writable()?;
        self.check_region(region)?;
        self.region_len(region)?;
        self.check_data_len(region, data.as_view())?;
        let grid = &self.derived.grid;
        let chunks = grid.chunks_intersecting(region);
        if chunks.num_elements() == 1 && grid.chunk_region(&chunks.start) == *region {
            let key = self.key_of(&chunks.start);
            return self.store_chunk(key, data).await;
        }
        self.write_from(region, data.as_view()).await
    }

    pub(super) fn check_data_len(
        &self,
        region: &ArraySubset,
        data: ElemsRef<'_>,
    ) -> ZarrResult<()> {
        let n = region.num_elements();
        data.check_len(&self.metadata.data_type, n)
            .map_err(|got| ZarrError::DataLength {
                path: self.path.clone(),
                expected: n,
                got,
            })
    }

    /// Writes borrowed elements (already checked) chunk by chunk: the part of the
    /// input for each chunk is copied out as the chunk's turn comes, so at most
    /// `concurrency` chunk buffers exist at once.
    pub(super) async fn write_from(
        &self,
        region: &ArraySubset,
        data: ElemsRef<'_>,
    ) -> ZarrResult<()> {
        if region.num_elements() == 0 {
            return Ok(());
        }
        let grid = &self.derived.grid;
        let chunks = grid.chunks_intersecting(region);
        let dt = &self.metadata.data_type;
        futures::stream::iter(indices_in(&chunks.start, &chunks.shape))
            .filter_map(|idx| {
                let part = grid.chunk_region(&idx).intersect(region).map(|inter| {
                    let local = inter.relative_to(&region.start);
                    let part = data.extract(dt, &region.shape, &local);
                    (idx, inter, part)
                });
                std::future::ready(part)
            })
            .map(|(idx, inter, part)| self.write_chunk_part(idx, inter, part))
            .buffer_unordered(self.options.concurrency.max(1))
            .try_collect::<Vec<()>>()
            .await?;
        Ok(())
    }

    /// Writes `part` (the input restricted to `inter`, array coordinates) into chunk
    /// `idx`, reading the chunk first unless `part` covers all its in-bounds elements.
    pub(super) async fn write_chunk_part(
        &self,
        idx: Vec<u64>,
        inter: ArraySubset,
        part: ArrayBytes,
    ) -> ZarrResult<()> {
        let chunk_region = self.derived.grid.chunk_region(&idx);
        let key = self.key_of(&idx);
        if inter == chunk_region {
            return self.store_chunk(key, part).await;
        }
        let covers_in_bounds = inter == self.chunk_region(&idx);
        if !covers_in_bounds && self.derived.chain.supports_partial_encode() {
            return self.write_chunk_part_in_place(idx, inter, part).await;
        }
        // Covers every in-bounds element: start from the fill value, no read needed.
        let existing = if covers_in_bounds {
            None
        } else {
            self.fetch_chunk(&idx).await?
        };
        let chunk_len = self.chunk_len()?;
        let repr = self.derived.repr.clone();
        let elem = self.metadata.data_type.fixed_size().unwrap_or(0);
        let size = chunk_len.saturating_mul(elem);
        let chain = Arc::clone(&self.derived.chain);
        let write_empty = self.options.write_empty_chunks;
        self.encode_and_put(&key, size, move || {
            let mut chunk = match existing {
                Some(c) => c,
                None => ArrayBytes::new_fill(chunk_len, &repr.data_type, &repr.fill_value)
                    .map_err(|e| CodecError::unsupported("array", e.to_string()))?,
            };
            chunk.copy_from(
                &repr.shape,
                &inter.relative_to(&chunk_region.start).start,
                &part,
                &inter.shape,
                &vec![0; inter.ndim()],
                &inter.shape,
                elem,
            );
            encode_chunk(&chain, &repr, write_empty, chunk)
        })
        .await
    }

    /// Partial write into a chunk whose codec can re-encode in place (a shard: only
    /// the inner chunks that `inter` touches are decoded and re-encoded).
    pub(super) async fn write_chunk_part_in_place(
        &self,
        idx: Vec<u64>,
        inter: ArraySubset,
        part: ArrayBytes,
    ) -> ZarrResult<()> {
        let key = self.key_of(&idx);
        let existing = self.store.get(&key).await?;
        let chunk_region = self.derived.grid.chunk_region(&idx);
        let local = inter.relative_to(&chunk_region.start);
        let chain = Arc::clone(&self.derived.chain);
        let repr = self.derived.repr.clone();
        let size = existing.as_ref().map_or(0, |b| b.len());
        let write_empty = self.options.write_empty_chunks;
        self.encode_and_put(&key, size, move || {
            let (bytes, all_fill) = chain.partial_encode(existing, &repr, &local, &part)?;
            Ok((!all_fill || write_empty).then_some(bytes))
        })
        .await
    }

    /// Writes elements of `T` (C order, shape `region.shape`) into `region`.
    /// Plain numeric element types are read from `data` in place (no intermediate
    /// copy of the whole input).
    ///
    /// # Errors
    /// [`ZarrError::ElementType`], [`ZarrError::InvalidValue`]; otherwise as
    /// [`Array::write_region_bytes`].
    pub async fn write_region<T: Element>(
        &self,
        region: &ArraySubset,
        data: &[T],
    ) -> ZarrResult<()> {
        self.check_element::<T>()?;
        let dt = &self.metadata.data_type;
        match T::as_fixed_bytes(data) {
            Some(bytes) if dt.fixed_size().is_some() => {
                self.check_writable()?;
                self.check_region(region)?;
                self.region_len(region)?;
                let view = ElemsRef::Fixed(bytes);
                self.check_data_len(region, view)?;
                self.write_from(region, view).await
            }
            _ => {
                let owned = T::to_array_bytes(data, dt)?;
                self.write_region_bytes(region, owned).await
            }
        }
    }

    /// Writes an `ndarray` (any memory layout) with its origin at `start`.
    ///
    /// # Errors
    /// As [`Array::write_region`]; [`ZarrError::InvalidRegion`] when `start` and the
    /// array's dimensionality differ.
    pub async fn write_region_ndarray<T, S, D>(
        &self,
        start: &[u64],
        data: &ArrayBase<S, D>,
    ) -> ZarrResult<()>
    where
        T: Element,
        S: Data<Elem = T>,
        D: Dimension,
    {
        if start.len() != data.ndim() {
            return Err(self.region_err(format!(
                "start {start:?} and data of {} dimensions differ",
                data.ndim()
            )));
        }
        let region = ArraySubset::new(
            start.to_vec(),
            data.shape().iter().map(|&x| x as u64).collect(),
        );
        match data.as_slice() {
            Some(s) => self.write_region(&region, s).await,
            None => {
                let v: Vec<T> = data.iter().cloned().collect();
                self.write_region(&region, &v).await
            }
        }
    }
}
