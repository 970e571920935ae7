//! Region reads of an [`Array`]: the chunks a region touches are fetched
//! concurrently and decoded into one C-order buffer; missing chunks read as the fill
//! value.

use super::*;

/// Chunk keys handed to one [`Store::get_many`] call by a region read: a store
/// coalesces reads within one call only, and holds this many keys at once.
const GET_MANY_BATCH: usize = 4096;

impl Array {
    /// Reads `region` as decoded elements (C order, native-endian for fixed-size
    /// types). Missing chunks read as the fill value; chunks are fetched and decoded
    /// concurrently; with sharding only the needed inner chunks are read.
    ///
    /// # Errors
    /// [`ZarrError::InvalidRegion`] when the region is not within the array;
    /// [`ZarrError::Chunk`] / [`ZarrError::ChunkSize`] naming the chunk key for
    /// undecodable chunks; store errors.
    pub async fn read_region_bytes(&self, region: &ArraySubset) -> ZarrResult<ArrayBytes> {
        self.check_region(region)?;
        let n = self.region_len(region)? as u64;
        if n == 0 {
            return self.fill_bytes(0);
        }
        let grid = &self.derived.grid;
        let chunks = grid.chunks_intersecting(region);
        // Fast path: the region is exactly one whole chunk.
        if chunks.num_elements() == 1 && grid.chunk_region(&chunks.start) == *region {
            return match self.fetch_chunk(&chunks.start).await? {
                Some(d) => Ok(d),
                None => self.fill_bytes(n),
            };
        }
        let mut out = self.fill_bytes(n)?;
        self.read_into(region, out.as_view_mut()).await?;
        Ok(out)
    }

    /// Reads `region` into `out` (C order, shape `region.shape`, already holding the
    /// fill value): chunks are fetched and decoded concurrently and copied in as they
    /// arrive; missing chunks are skipped. Chunks read whole are fetched in batches
    /// through [`Store::get_many`], so a store can read chunks that lie close
    /// together in one object (virtual chunks of one file) with one request; the
    /// others are decoded partially (sharding), one request per chunk for its index
    /// and one for the inner chunks it needs.
    pub(super) async fn read_into(
        &self,
        region: &ArraySubset,
        mut out: ElemsMut<'_>,
    ) -> ZarrResult<()> {
        let chunks = self.derived.grid.chunks_intersecting(region);
        let elem = self.metadata.data_type.fixed_size().unwrap_or(0);
        let concurrency = self.options.concurrency.max(1);
        let partial = self.derived.chain.supports_partial_decode();
        let repr_shape = &self.derived.repr.shape;
        // Which chunks are read whole; chunk indices stream lazily, in batches.
        let is_whole = move |idx: &Vec<u64>| -> bool {
            !partial || {
                let chunk_region = self.derived.grid.chunk_region(idx);
                chunk_region
                    .intersect(region)
                    .is_some_and(|inter| inter.relative_to(&chunk_region.start).is_full(repr_shape))
            }
        };
        let whole = futures::stream::iter(indices_in(&chunks.start, &chunks.shape))
            .filter(move |idx| futures::future::ready(is_whole(idx)))
            .chunks(GET_MANY_BATCH)
            .map(move |batch| {
                let keys: Vec<String> = batch.iter().map(|idx| self.key_of(idx)).collect();
                let batch = Arc::new(batch);
                self.store
                    .get_many(keys, concurrency)
                    .map(move |(i, r)| (Arc::clone(&batch), i, r))
            })
            .flatten()
            .map(|(batch, i, r)| async move {
                let Some(idx) = batch.get(i) else {
                    return Ok(None);
                };
                let Some(bytes) = r? else {
                    return Ok(None);
                };
                let data = self.decode_chunk(&self.key_of(idx), bytes).await?;
                let chunk_region = self.derived.grid.chunk_region(idx);
                let Some(inter) = chunk_region.intersect(region) else {
                    return Ok(None);
                };
                Ok(Some(ChunkPart {
                    data_start: inter.relative_to(&chunk_region.start).start,
                    inter,
                    data,
                    data_shape: self.derived.repr.shape.clone(),
                }))
            })
            .buffer_unordered(concurrency);
        let parts = futures::stream::iter(indices_in(&chunks.start, &chunks.shape))
            .filter(move |idx| futures::future::ready(!is_whole(idx)))
            .map(|idx| self.read_chunk_part(idx, region))
            .buffer_unordered(concurrency);
        let mut results = futures::stream::select(whole, parts);
        while let Some(r) = results.next().await {
            let Some(part) = r? else {
                continue;
            };
            out.copy_from(
                &region.shape,
                &part.inter.relative_to(&region.start).start,
                part.data.as_view(),
                &part.data_shape,
                &part.data_start,
                &part.inter.shape,
                elem,
            );
            if let ArrayBytes::Fixed(buf) = part.data {
                crate::buffer_pool::give(buf);
            }
        }
        Ok(())
    }

    /// Reads the part of chunk `idx` inside `region`, `None` when the chunk is
    /// missing. The data is the whole decoded chunk when the chain cannot decode
    /// partially or the region covers the chunk (the caller copies the intersection
    /// out of it, saving a copy; region reads fetch those chunks in batches instead),
    /// else just the intersection.
    pub(super) async fn read_chunk_part(
        &self,
        idx: Vec<u64>,
        region: &ArraySubset,
    ) -> ZarrResult<Option<ChunkPart>> {
        let chunk_region = self.derived.grid.chunk_region(&idx);
        let Some(inter) = chunk_region.intersect(region) else {
            return Ok(None);
        };
        let local = inter.relative_to(&chunk_region.start);
        let repr = &self.derived.repr;
        if local.is_full(&repr.shape) || !self.derived.chain.supports_partial_decode() {
            return Ok(self.fetch_chunk(&idx).await?.map(|data| ChunkPart {
                inter,
                data,
                data_shape: repr.shape.clone(),
                data_start: local.start,
            }));
        }
        let key = self.key_of(&idx);
        let source = StoreSource {
            store: Arc::clone(&self.store),
            key: key.clone(),
        };
        let part = self
            .derived
            .chain
            .partial_decode(&source, repr, &local)
            .await
            .map_err(|e| chunk_err(&self.path, &key, e))?;
        match part {
            None => Ok(None),
            Some(data) => {
                self.check_decoded(&key, &data, local.num_elements())?;
                Ok(Some(ChunkPart {
                    data_start: vec![0; inter.ndim()],
                    data_shape: inter.shape.clone(),
                    inter,
                    data,
                }))
            }
        }
    }

    /// Reads `region` as elements of `T` in C order.
    ///
    /// # Errors
    /// [`ZarrError::ElementType`] when `T` does not match the data type; otherwise
    /// as [`Array::read_region_bytes`].
    pub async fn read_region<T: Element>(&self, region: &ArraySubset) -> ZarrResult<Vec<T>> {
        self.check_element::<T>()?;
        self.check_region(region)?;
        let n = self.region_len(region)?;
        if n > 1 && T::as_fixed_bytes(&[]).is_some() {
            // Decode straight into the caller's vector (no conversion copy).
            if let Some(fill) = self.fixed_fill::<T>()? {
                let mut out = crate::zarr::array_bytes::try_filled_vec(n, fill)
                    .ok_or_else(|| self.too_large(format!("cannot allocate {n} elements")))?;
                self.read_into_filled(region, &mut out).await?;
                return Ok(out);
            }
        }
        let data = self.read_region_bytes(region).await?;
        T::from_array_bytes(data, &self.metadata.data_type)
    }

    /// Reads `region` into the caller's buffer `out` (C order, `region.num_elements()`
    /// elements of a fixed-size type): no output allocation, so a loop of reads can
    /// reuse one buffer. Elements of missing chunks are set to the fill value; chunks
    /// are fetched and decoded concurrently.
    ///
    /// # Errors
    /// [`ZarrError::ElementType`] when `T` does not match the data type or is not a
    /// plain fixed-size element (strings: use [`Array::read_region`]);
    /// [`ZarrError::InvalidRegion`] when `out` does not hold exactly the region's
    /// element count or the region is not within the array; otherwise as
    /// [`Array::read_region_bytes`].
    pub async fn read_region_into<T: Element>(
        &self,
        region: &ArraySubset,
        out: &mut [T],
    ) -> ZarrResult<()> {
        self.check_element::<T>()?;
        self.check_region(region)?;
        let n = self.region_len(region)?;
        if out.len() != n {
            return Err(self.region_err(format!(
                "the output buffer holds {} elements, the region {n}",
                out.len()
            )));
        }
        let Some(fill) = self.fixed_fill::<T>()? else {
            return Err(self.element_type_err::<T>());
        };
        out.fill(fill);
        self.read_into_filled(region, out).await
    }

    /// The fill value as one `T`, `None` for a data type of variable size.
    fn fixed_fill<T: Element>(&self) -> ZarrResult<Option<T>> {
        let dt = &self.metadata.data_type;
        if dt.fixed_size().is_none() {
            return Ok(None);
        }
        Ok(T::from_array_bytes(self.fill_bytes(1)?, dt)?.pop())
    }

    /// Reads `region` into `out`, which already holds the fill value (missing chunks
    /// are skipped).
    async fn read_into_filled<T: Element>(
        &self,
        region: &ArraySubset,
        out: &mut [T],
    ) -> ZarrResult<()> {
        if out.is_empty() {
            return Ok(());
        }
        let Some(bytes) = T::as_fixed_bytes_mut(out) else {
            return Err(self.element_type_err::<T>());
        };
        self.read_into(region, ElemsMut::Fixed(bytes)).await
    }

    /// Reads `region` as an `ndarray` of shape `region.shape`.
    ///
    /// # Errors
    /// As [`Array::read_region`].
    pub async fn read_region_ndarray<T: Element>(
        &self,
        region: &ArraySubset,
    ) -> ZarrResult<ArrayD<T>> {
        let v = self.read_region::<T>(region).await?;
        let shape: Vec<usize> = region.shape.iter().map(|&x| x as usize).collect();
        ArrayD::from_shape_vec(IxDyn(&shape), v).map_err(|e| self.region_err(e.to_string()))
    }

    /// Reads the whole array as elements of `T`.
    ///
    /// # Errors
    /// As [`Array::read_region`].
    pub async fn read_all<T: Element>(&self) -> ZarrResult<Vec<T>> {
        self.read_region(&ArraySubset::full(&self.metadata.shape))
            .await
    }
}
