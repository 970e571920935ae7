//! Chunk I/O of an [`Array`]: reading, decoding, encoding and writing whole chunks
//! (decoded or as stored), and the size checks they share.

use super::*;

impl Array {
    /// Reads and decodes a whole chunk (shape [`Array::chunk_shape`], including any
    /// overhang past the array edge); `None` when the chunk is not stored.
    ///
    /// # Errors
    /// [`ZarrError::InvalidRegion`] for an index outside the grid;
    /// [`ZarrError::Chunk`] / [`ZarrError::ChunkSize`] for undecodable chunks;
    /// store errors.
    pub async fn read_chunk_bytes(&self, chunk: &[u64]) -> ZarrResult<Option<ArrayBytes>> {
        self.check_chunk_index(chunk)?;
        self.fetch_chunk(&self.chunks(), chunk).await
    }

    /// The chunk port of this array ([`open_chunk_port`]), opened once per
    /// operation: a region read or write resolves the array in its store once,
    /// while a later operation sees the array as the store then has it.
    pub(super) fn chunks(&self) -> Arc<dyn ChunkPort> {
        open_chunk_port(
            &self.store,
            ChunkKeys {
                prefix: node_prefix(&self.path),
                encoding: Arc::clone(&self.derived.keys),
            },
        )
    }

    /// Reads and decodes chunk `chunk` through `port`; `None` when it is not stored.
    pub(super) async fn fetch_chunk(
        &self,
        port: &Arc<dyn ChunkPort>,
        chunk: &[u64],
    ) -> ZarrResult<Option<ArrayBytes>> {
        let Some(bytes) = port.get(chunk).await? else {
            return Ok(None);
        };
        self.decode_chunk(chunk, bytes).await.map(Some)
    }

    /// Decodes the stored bytes of a whole chunk (`chunk`) on the compute pool and
    /// checks the element count.
    pub(super) async fn decode_chunk(&self, chunk: &[u64], bytes: Bytes) -> ZarrResult<ArrayBytes> {
        // Only a stored chunk needs decoding into a whole-chunk buffer.
        let chunk_len = self.chunk_len()?;
        let chain = Arc::clone(&self.derived.chain);
        let repr = self.derived.repr.clone();
        let elem = self.metadata.data_type.fixed_size().unwrap_or(0);
        let size = bytes.len().max(chunk_len.saturating_mul(elem));
        let decoded = run_blocking(size, move || chain.decode(bytes, &repr))
            .await
            .map_err(|e| chunk_err(&self.path, &self.key_of(chunk), e))?;
        self.check_decoded(chunk, &decoded, self.derived.repr.num_elements())?;
        Ok(decoded)
    }

    pub(super) fn check_decoded(&self, chunk: &[u64], data: &ArrayBytes, n: u64) -> ZarrResult<()> {
        data.check_len(&self.metadata.data_type, n)
            .map_err(|got| ZarrError::ChunkSize {
                path: self.path.clone(),
                key: self.key_of(chunk),
                expected: n,
                got,
            })
    }

    /// Reads a whole chunk as elements of `T` (C order, chunk shape), the fill value
    /// when it is not stored.
    ///
    /// # Errors
    /// [`ZarrError::ElementType`] when `T` does not match the data type; otherwise as
    /// [`Array::read_chunk_bytes`].
    pub async fn read_chunk<T: Element>(&self, chunk: &[u64]) -> ZarrResult<Vec<T>> {
        self.check_element::<T>()?;
        let data = match self.read_chunk_bytes(chunk).await? {
            Some(d) => d,
            None => self.fill_bytes(self.chunk_len()? as u64)?,
        };
        T::from_array_bytes(data, &self.metadata.data_type)
    }

    /// Encodes and stores a whole chunk (`data` has the chunk shape, C order); a
    /// chunk equal to the fill value is erased unless `write_empty_chunks`.
    ///
    /// # Errors
    /// [`ZarrError::DataLength`] for the wrong number of elements;
    /// [`ZarrError::Chunk`] on encoding failures; store errors.
    pub async fn write_chunk_bytes(&self, chunk: &[u64], data: ArrayBytes) -> ZarrResult<()> {
        self.check_writable()?;
        self.check_chunk_index(chunk)?;
        let n = self.derived.repr.num_elements();
        data.check_len(&self.metadata.data_type, n)
            .map_err(|got| ZarrError::DataLength {
                path: self.path.clone(),
                expected: n,
                got,
            })?;
        self.store_chunk(&self.chunks(), chunk, data).await
    }

    /// [`Array::write_chunk_bytes`] from elements of `T`.
    ///
    /// # Errors
    /// [`ZarrError::ElementType`], [`ZarrError::InvalidValue`]; otherwise as
    /// [`Array::write_chunk_bytes`].
    pub async fn write_chunk<T: Element>(&self, chunk: &[u64], data: &[T]) -> ZarrResult<()> {
        self.check_element::<T>()?;
        let bytes = T::to_array_bytes(data, &self.metadata.data_type)?;
        self.write_chunk_bytes(chunk, bytes).await
    }

    /// Removes a stored chunk (it then reads as the fill value).
    ///
    /// # Errors
    /// [`ZarrError::InvalidRegion`] for an index outside the grid; store errors.
    pub async fn erase_chunk(&self, chunk: &[u64]) -> ZarrResult<()> {
        self.check_writable()?;
        self.check_chunk_index(chunk)?;
        self.chunks().erase(chunk).await?;
        Ok(())
    }

    /// The encoded bytes of a chunk as stored, `None` when absent.
    ///
    /// # Errors
    /// [`ZarrError::InvalidRegion`]; store errors.
    pub async fn read_encoded_chunk(&self, chunk: &[u64]) -> ZarrResult<Option<Bytes>> {
        self.check_chunk_index(chunk)?;
        Ok(self.chunks().get(chunk).await?)
    }

    /// Stores already-encoded chunk bytes verbatim (no validation of the encoding).
    ///
    /// # Errors
    /// [`ZarrError::InvalidRegion`]; store errors.
    pub async fn write_encoded_chunk(&self, chunk: &[u64], bytes: Bytes) -> ZarrResult<()> {
        self.check_writable()?;
        self.check_chunk_index(chunk)?;
        self.chunks().set(chunk, bytes).await?;
        Ok(())
    }

    /// `n` elements of the fill value.
    ///
    /// # Errors
    /// [`ZarrError::TooLarge`] when `n` elements cannot be held in one buffer.
    pub(super) fn fill_bytes(&self, n: u64) -> ZarrResult<ArrayBytes> {
        let len = buffer_len(n, &self.metadata.data_type).ok_or_else(|| {
            self.too_large(format!(
                "{n} elements of {} do not fit in memory",
                self.metadata.data_type
            ))
        })?;
        ArrayBytes::new_fill(len, &self.metadata.data_type, &self.derived.repr.fill_value).map_err(
            |e| match e {
                ZarrError::TooLarge { reason, .. } => self.too_large(reason),
                e => e,
            },
        )
    }

    pub(super) fn too_large(&self, reason: String) -> ZarrError {
        ZarrError::TooLarge {
            path: self.path.clone(),
            reason,
        }
    }

    /// Elements of one chunk, checked to fit in memory.
    ///
    /// # Errors
    /// [`ZarrError::TooLarge`] when a chunk of the chunk shape cannot be held.
    pub(super) fn chunk_len(&self) -> ZarrResult<usize> {
        self.derived.chunk_len.ok_or_else(|| {
            self.too_large(format!(
                "a chunk of shape {:?} and data type {} does not fit in memory",
                self.metadata.chunk_shape, self.metadata.data_type
            ))
        })
    }

    /// Elements of `region` (already checked to be within the array), checked to fit
    /// in one buffer.
    ///
    /// # Errors
    /// [`ZarrError::TooLarge`] when the element count overflows `u64` or the region
    /// does not fit in memory.
    pub(super) fn region_len(&self, region: &ArraySubset) -> ZarrResult<usize> {
        region
            .checked_num_elements()
            .and_then(|n| buffer_len(n, &self.metadata.data_type))
            .ok_or_else(|| {
                self.too_large(format!(
                    "region of shape {:?} ({} elements of {}) does not fit in memory",
                    region.shape,
                    region
                        .checked_num_elements()
                        .map_or_else(|| "more than 2^64".to_string(), |n| n.to_string()),
                    self.metadata.data_type
                ))
            })
    }

    /// Encodes `data` (a whole chunk) and stores it through `port`, or erases the
    /// chunk when it is all fill value and empty chunks are not written.
    pub(super) async fn store_chunk(
        &self,
        port: &Arc<dyn ChunkPort>,
        chunk: &[u64],
        data: ArrayBytes,
    ) -> ZarrResult<()> {
        let chunk_len = self.chunk_len()?;
        let chain = Arc::clone(&self.derived.chain);
        let repr = self.derived.repr.clone();
        let write_empty = self.options.write_empty_chunks;
        let elem = self.metadata.data_type.fixed_size().unwrap_or(0);
        let size = chunk_len.saturating_mul(elem);
        self.encode_and_put(port, chunk, size, move || {
            encode_chunk(&chain, &repr, write_empty, data)
        })
        .await
    }

    /// Runs `encode` (work of about `size` bytes: on the compute pool when large) and
    /// stores the chunk it returns, or erases it for `None`. A chunk encoded on the
    /// pool is handed to the port's transfer step by the same thread
    /// ([`ChunkPort::write_now`]: local disks write it there, while its bytes are in
    /// cache and with no hop to the blocking pool); what is left goes through
    /// [`ChunkPort::set`].
    pub(super) async fn encode_and_put(
        &self,
        port: &Arc<dyn ChunkPort>,
        chunk: &[u64],
        size: usize,
        encode: impl FnOnce() -> Result<Option<Vec<u8>>, CodecError> + Send + 'static,
    ) -> ZarrResult<()> {
        let on_pool = offloads(size);
        let owned_port = Arc::clone(port);
        let owned_chunk = chunk.to_vec();
        let put = run_blocking(size, move || {
            Ok(stage(owned_port.as_ref(), &owned_chunk, encode()?, on_pool))
        })
        .await
        .map_err(|e| chunk_err(&self.path, &self.key_of(chunk), e))?;
        Ok(finish_put(port.as_ref(), chunk, put).await?)
    }
}

/// Does what [`stage`] left of storing chunk `chunk` through `port`.
///
/// # Errors
/// The port's store error.
pub(super) async fn finish_put(
    port: &dyn ChunkPort,
    chunk: &[u64],
    put: Put,
) -> Result<(), crate::zarr::store::StoreError> {
    match put {
        Put::Done(stored) => stored,
        Put::Set(bytes) => port.set(chunk, bytes).await,
        Put::Erase => port.erase(chunk).await,
    }
}

/// The first step of storing an encoded chunk (`None`: all fill value, erased), on
/// the thread that encoded it: with `may_block` (a compute or blocking thread), the
/// port's transfer step ([`ChunkPort::write_now`]); what is left goes to
/// [`finish_put`].
pub(super) fn stage(
    port: &dyn ChunkPort,
    chunk: &[u64],
    encoded: Option<Vec<u8>>,
    may_block: bool,
) -> Put {
    let Some(bytes) = encoded else {
        return Put::Erase;
    };
    let bytes = crate::buffer_pool::bytes_of(bytes);
    if !may_block {
        return Put::Set(bytes);
    }
    match port.write_now(chunk, bytes) {
        Ok(WriteNow::Written) => Put::Done(Ok(())),
        Ok(WriteNow::Elsewhere(bytes)) => Put::Set(bytes),
        Err(e) => Put::Done(Err(e)),
    }
}

/// What is left to do with an encoded chunk once [`stage`] returns.
pub(super) enum Put {
    /// Written from the encoding thread, with this outcome.
    Done(Result<(), crate::zarr::store::StoreError>),
    /// To be written with [`ChunkPort::set`].
    Set(Bytes),
    /// All fill value: the chunk is erased.
    Erase,
}

/// A task on the runtime that is cancelled when this handle is dropped (a read or
/// write that ends early, by an error or by being dropped itself, stops its
/// background fetches).
pub(super) struct AbortOnDrop<T>(pub(super) tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
