//! Region writes of an [`Array`]: fully covered chunks are encoded and written,
//! partially covered ones read, modified and written back; all-fill chunks are erased
//! unless `write_empty_chunks`.

use super::chunk_io::stage;
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
            return self.store_chunk(&self.chunks(), &chunks.start, data).await;
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
    /// `concurrency` chunk buffers exist at once. Whole chunks that are each one run
    /// of `data` are encoded straight from it where the chain allows
    /// ([`Array::write_borrowed`]).
    pub(super) async fn write_from(
        &self,
        region: &ArraySubset,
        data: ElemsRef<'_>,
    ) -> ZarrResult<()> {
        if region.num_elements() == 0 {
            return Ok(());
        }
        let port = self.chunks();
        let port = &port;
        let borrowed = match data {
            ElemsRef::Fixed(bytes) if self.writes_borrowed() => Some(bytes),
            _ => None,
        };
        if let Some(bytes) = borrowed {
            self.write_borrowed(port, region, bytes).await?;
        }
        let grid = &self.derived.grid;
        let chunks = grid.chunks_intersecting(region);
        let dt = &self.metadata.data_type;
        futures::stream::iter(indices_in(&chunks.start, &chunks.shape))
            .filter(|idx| {
                let done = borrowed.is_some() && self.borrowed_run(region, idx).is_some();
                std::future::ready(!done)
            })
            .filter_map(|idx| {
                let part = grid.chunk_region(&idx).intersect(region).map(|inter| {
                    let local = inter.relative_to(&region.start);
                    let part = data.extract(dt, &region.shape, &local);
                    (idx, inter, part)
                });
                std::future::ready(part)
            })
            .map(|(idx, inter, part)| self.write_chunk_part(port, idx, inter, part))
            .buffer_unordered(self.options.concurrency.max(1))
            .try_collect::<Vec<()>>()
            .await?;
        Ok(())
    }

    /// Whether whole chunks may be encoded straight from the caller's buffer: the
    /// chain reads borrowed bytes ([`CodecChain::encodes_borrowed`]) or stores the
    /// elements as they are ([`CodecChain::stores_native_bytes`]: written from the
    /// buffer where the port can, [`ChunkPort::write_now_borrowed`]), a chunk is
    /// large enough for the compute pool, and the calling task may block (a
    /// multi-thread tokio runtime: on a current-thread one, waiting for the pool
    /// would stall every other task).
    fn writes_borrowed(&self) -> bool {
        let elem = self.metadata.data_type.fixed_size().unwrap_or(0);
        let size = self.derived.chunk_len.map_or(0, |n| n.saturating_mul(elem));
        let chain = &self.derived.chain;
        let repr = &self.derived.repr;
        crate::compute::may_wait_for_pool()
            && offloads(size)
            && (chain.encodes_borrowed(repr) || chain.stores_native_bytes(repr))
    }

    /// The whole chunks of `region` that are each one run of the caller's buffer
    /// ([`Array::borrowed_run`]), with their runs, by increasing start.
    pub(super) fn borrowed_plan(
        &self,
        region: &ArraySubset,
    ) -> Vec<(Vec<u64>, std::ops::Range<usize>)> {
        let chunks = self.derived.grid.chunks_intersecting(region);
        let mut plan: Vec<(Vec<u64>, std::ops::Range<usize>)> =
            indices_in(&chunks.start, &chunks.shape)
                .filter_map(|idx| self.borrowed_run(region, &idx).map(|run| (idx, run)))
                .collect();
        plan.sort_by_key(|(_, run)| run.start);
        plan
    }

    /// The bytes of `data` (elements of `region`, C order) that hold chunk `idx`,
    /// when the chunk lies wholly inside `region` (and so inside the array) and is
    /// one contiguous run of it: a region spanning the chunk's trailing dimensions.
    pub(super) fn borrowed_run(
        &self,
        region: &ArraySubset,
        idx: &[u64],
    ) -> Option<std::ops::Range<usize>> {
        let chunk = self.derived.grid.chunk_region(idx);
        if chunk.intersect(region).as_ref() != Some(&chunk) {
            return None;
        }
        let elem = self.metadata.data_type.fixed_size()?;
        let run = chunk
            .relative_to(&region.start)
            .contiguous_in(&region.shape)?;
        Some(run.start.checked_mul(elem)?..run.end.checked_mul(elem)?)
    }

    /// Writes the whole chunks of `region` that are each one run of `data`
    /// ([`Array::borrowed_run`]) without copying them out: they are encoded on the
    /// compute pool straight from `data` (a chain that stores the elements as they
    /// are writes the run itself to local chunk files, or copies it once for other
    /// ports), a window at a time (the calling thread
    /// waits for the pool and yields between windows; not `block_in_place`, which
    /// tokio refuses in a `LocalSet`), and written by the encoding thread where the
    /// port allows ([`ChunkPort::write_now`], local files).
    ///
    /// What the encoding threads cannot write (object storage) is uploaded by tasks
    /// spawned on the runtime, at most `ArrayOptions::concurrency` at a time, while
    /// the next window is encoded: encoding and uploads overlap instead of taking
    /// turns. The first window is 4 chunks, so the first uploads leave early; windows
    /// then double up to `concurrency` chunks, or grow to ~64 MiB of input once a
    /// window was written entirely by the encoding threads. The encoded chunks held
    /// at once are bounded by about two windows.
    ///
    /// # Errors
    /// As [`Array::write_region`]: chunk errors naming the key; store errors (the
    /// first upload that failed; the others are cancelled).
    async fn write_borrowed(
        &self,
        port: &Arc<dyn ChunkPort>,
        region: &ArraySubset,
        data: &[u8],
    ) -> ZarrResult<()> {
        use rayon::prelude::*;
        let plan = self.borrowed_plan(region);
        let Some(chunk_bytes) = plan.first().map(|(_, run)| run.len().max(1)) else {
            return Ok(());
        };
        let concurrency = self.options.concurrency.max(1);
        let large_window = (DIRECT_WINDOW_BYTES / chunk_bytes).max(4);
        // The first window is small so that the first uploads leave early; windows
        // then double up to `concurrency` chunks.
        let upload_window = concurrency.clamp(4, large_window);
        let mut window = 4.min(upload_window);
        let repr = &self.derived.repr;
        let chain = &self.derived.chain;
        // No codec changes the bytes: a chunk's bytes are its run of `data`.
        let raw = !chain.encodes_borrowed(repr);
        let write_empty = self.options.write_empty_chunks;
        let port_ref = port.as_ref();
        let mut uploads = Uploads::new(concurrency, &self.path);
        let mut rest = plan.as_slice();
        while !rest.is_empty() {
            let (part, after) = rest.split_at(window.min(rest.len()));
            rest = after;
            let staged = crate::compute::install(|| {
                part.par_iter()
                    .map(|(idx, run)| {
                        let bytes = data.get(run.clone()).ok_or_else(|| {
                            CodecError::invalid("codecs", "chunk run outside the input")
                        });
                        let put = bytes.and_then(|bytes| {
                            let fill = ElemsRef::Fixed(bytes).is_fill(&repr.fill_value);
                            if fill && !write_empty {
                                return Ok(stage(port_ref, idx, None, true));
                            }
                            if !raw {
                                let encoded = chain.encode_borrowed(bytes, repr)?;
                                return Ok(stage(port_ref, idx, Some(encoded), true));
                            }
                            // Stored as they are: written from the caller's buffer
                            // where the port can, else copied once.
                            Ok(match port_ref.write_now_borrowed(idx, bytes) {
                                Ok(true) => chunk_io::Put::Done(Ok(())),
                                Ok(false) => stage(port_ref, idx, Some(bytes.to_vec()), true),
                                Err(e) => chunk_io::Put::Done(Err(e)),
                            })
                        });
                        (idx.clone(), put)
                    })
                    .collect::<Vec<_>>()
            })
            .map_err(|panic| ZarrError::Chunk {
                path: self.path.clone(),
                key: self.key_of(&part[0].0),
                source: CodecError::Task(panic),
            })?;
            let mut all_written_here = true;
            for (idx, put) in staged {
                match put.map_err(|e| chunk_err(&self.path, &self.key_of(&idx), e))? {
                    chunk_io::Put::Done(stored) => stored?,
                    put => {
                        all_written_here = false;
                        let port = Arc::clone(port);
                        uploads
                            .spawn(
                                async move { chunk_io::finish_put(port.as_ref(), &idx, put).await },
                            )
                            .await?;
                    }
                }
            }
            window = if all_written_here {
                large_window
            } else {
                (window * 2).min(upload_window)
            };
            tokio::task::yield_now().await;
        }
        uploads.finish().await
    }

    /// Writes `part` (the input restricted to `inter`, array coordinates) into chunk
    /// `idx`, reading the chunk first unless `part` covers all its in-bounds elements.
    pub(super) async fn write_chunk_part(
        &self,
        port: &Arc<dyn ChunkPort>,
        idx: Vec<u64>,
        inter: ArraySubset,
        part: ArrayBytes,
    ) -> ZarrResult<()> {
        let chunk_region = self.derived.grid.chunk_region(&idx);
        if inter == chunk_region {
            return self.store_chunk(port, &idx, part).await;
        }
        let covers_in_bounds = inter == self.chunk_region(&idx);
        if !covers_in_bounds && self.derived.chain.supports_partial_encode() {
            return self.write_chunk_part_in_place(port, idx, inter, part).await;
        }
        // Covers every in-bounds element: start from the fill value, no read needed.
        let existing = if covers_in_bounds {
            None
        } else {
            self.fetch_chunk(port, &idx).await?
        };
        let chunk_len = self.chunk_len()?;
        let repr = self.derived.repr.clone();
        let elem = self.metadata.data_type.fixed_size().unwrap_or(0);
        let size = chunk_len.saturating_mul(elem);
        let chain = Arc::clone(&self.derived.chain);
        let write_empty = self.options.write_empty_chunks;
        self.encode_and_put(port, &idx, size, move || {
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
        port: &Arc<dyn ChunkPort>,
        idx: Vec<u64>,
        inter: ArraySubset,
        part: ArrayBytes,
    ) -> ZarrResult<()> {
        let existing = port.get(&idx).await?;
        let chunk_region = self.derived.grid.chunk_region(&idx);
        let local = inter.relative_to(&chunk_region.start);
        let chain = Arc::clone(&self.derived.chain);
        let repr = self.derived.repr.clone();
        let size = existing.as_ref().map_or(0, |b| b.len());
        let write_empty = self.options.write_empty_chunks;
        self.encode_and_put(port, &idx, size, move || {
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

    /// Writes `data`, native-endian element bytes in C order of a fixed-size data
    /// type (whatever its element type), into `region`, borrowed: no copy of the
    /// whole input is made (each chunk's part is copied out when its turn comes).
    ///
    /// # Errors
    /// [`ZarrError::ElementType`] for a data type of variable size;
    /// [`ZarrError::DataLength`] when `data` does not hold the region's bytes;
    /// otherwise as [`Array::write_region_bytes`].
    pub async fn write_region_from_bytes(
        &self,
        region: &ArraySubset,
        data: &[u8],
    ) -> ZarrResult<()> {
        if self.metadata.data_type.fixed_size().is_none() {
            return Err(self.element_type_err::<u8>());
        }
        self.check_writable()?;
        self.check_region(region)?;
        self.region_len(region)?;
        let view = ElemsRef::Fixed(data);
        self.check_data_len(region, view)?;
        self.write_from(region, view).await
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

/// Chunk uploads running as tasks on the runtime, at most `limit` at once (the
/// upload side of [`Array::write_borrowed`]). Dropping it cancels what is still
/// running.
struct Uploads {
    tasks: tokio::task::JoinSet<Result<(), crate::zarr::store::StoreError>>,
    limit: usize,
    /// The array's path, for the error of an upload task that panicked.
    path: String,
}

impl Uploads {
    fn new(limit: usize, path: &str) -> Self {
        Uploads {
            tasks: tokio::task::JoinSet::new(),
            limit: limit.max(1),
            path: path.to_string(),
        }
    }

    /// Starts `upload` once fewer than `limit` run.
    ///
    /// # Errors
    /// The error of an earlier upload that failed meanwhile.
    async fn spawn<F>(&mut self, upload: F) -> ZarrResult<()>
    where
        F: std::future::Future<Output = Result<(), crate::zarr::store::StoreError>>
            + Send
            + 'static,
    {
        while self.tasks.len() >= self.limit {
            self.join_one().await?;
        }
        self.tasks.spawn(upload);
        Ok(())
    }

    /// Waits for every upload.
    ///
    /// # Errors
    /// The first upload error.
    async fn finish(mut self) -> ZarrResult<()> {
        while !self.tasks.is_empty() {
            self.join_one().await?;
        }
        Ok(())
    }

    /// Waits for one upload to end.
    ///
    /// # Errors
    /// Its store error, or [`CodecError::Task`] when it panicked.
    async fn join_one(&mut self) -> ZarrResult<()> {
        match self.tasks.join_next().await {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(ZarrError::Store(e)),
            Some(Err(join)) => Err(ZarrError::Chunk {
                path: self.path.clone(),
                key: String::new(),
                source: CodecError::Task(join.to_string()),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::{ArrayBuilder, MemoryStore};

    fn zstd() -> Vec<Value> {
        vec![
            serde_json::json!({"name": "bytes", "configuration": {"endian": "little"}}),
            serde_json::json!({"name": "zstd", "configuration": {"level": 1, "checksum": true}}),
        ]
    }

    async fn float_array(store: Arc<dyn Store>, shape: [u64; 2], chunks: [u64; 2]) -> Array {
        named_array(store, "a", shape, chunks).await
    }

    async fn named_array(
        store: Arc<dyn Store>,
        name: &str,
        shape: [u64; 2],
        chunks: [u64; 2],
    ) -> Array {
        ArrayBuilder::new(shape.to_vec(), chunks.to_vec(), DataType::Float32)
            .codecs(zstd())
            .create(store, name)
            .await
            .expect("create array")
    }

    fn multi_thread() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .expect("runtime")
    }

    /// Which chunks are one run of the caller's buffer: wholly inside the region
    /// (and the array) and spanning its trailing dimension.
    #[test]
    fn borrowed_runs_are_whole_contiguous_chunks() {
        let rt = multi_thread();
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let rows = rt.block_on(float_array(Arc::clone(&store), [10, 8], [3, 8]));
        let full = ArraySubset::full(&[10, 8]);
        assert_eq!(rows.borrowed_run(&full, &[0, 0]), Some(0..96));
        assert_eq!(rows.borrowed_run(&full, &[2, 0]), Some(192..288));
        // Rows 9..12 pass the array's end.
        assert_eq!(rows.borrowed_run(&full, &[3, 0]), None);
        // Rows 1..7: chunk 1 (rows 3..6) is whole, at row 2 of the region.
        let middle = ArraySubset::new(vec![1, 0], vec![6, 8]);
        assert_eq!(rows.borrowed_run(&middle, &[1, 0]), Some(64..160));
        assert_eq!(rows.borrowed_run(&middle, &[0, 0]), None);
        // Chunks of half a row are not runs of a region two chunks wide.
        let halves = rt.block_on(named_array(store, "halves", [10, 8], [2, 4]));
        assert_eq!(halves.borrowed_run(&full, &[0, 0]), None);
        // A region of exactly one such chunk is one run.
        let one = ArraySubset::new(vec![2, 4], vec![2, 4]);
        assert_eq!(halves.borrowed_run(&one, &[1, 1]), Some(0..32));
    }

    /// Only chains that read borrowed bytes or store the elements as they are,
    /// chunks large enough for the pool and a runtime that lets the task block take
    /// the borrowed path.
    #[test]
    fn the_borrowed_path_needs_its_chain_chunk_size_and_runtime() {
        let mt = multi_thread();
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let big = mt.block_on(float_array(Arc::clone(&store), [256, 1024], [64, 1024]));
        assert!(mt.block_on(async { big.writes_borrowed() }));
        let small = mt.block_on(async {
            ArrayBuilder::new(vec![256, 1024], vec![4, 1024], DataType::Float32)
                .codecs(zstd())
                .create(Arc::clone(&store), "small")
                .await
                .expect("create")
        });
        assert!(
            !mt.block_on(async { small.writes_borrowed() }),
            "16 KiB chunks"
        );
        let raw = mt.block_on(async {
            ArrayBuilder::new(vec![256, 1024], vec![64, 1024], DataType::Float32)
                .codecs(vec![
                    serde_json::json!({"name": "bytes", "configuration": {"endian": "little"}}),
                ])
                .create(Arc::clone(&store), "raw")
                .await
                .expect("create")
        });
        // Stored as they are (native byte order): written from the buffer.
        assert_eq!(
            mt.block_on(async { raw.writes_borrowed() }),
            cfg!(target_endian = "little"),
            "no compressor"
        );
        let big_endian = mt.block_on(async {
            ArrayBuilder::new(vec![256, 1024], vec![64, 1024], DataType::Float32)
                .codecs(vec![
                    serde_json::json!({"name": "bytes", "configuration": {"endian": "big"}}),
                    serde_json::json!({"name": "zstd", "configuration": {"level": 1}}),
                ])
                .create(Arc::clone(&store), "be")
                .await
                .expect("create")
        });
        assert_eq!(
            !mt.block_on(async { big_endian.writes_borrowed() }),
            cfg!(target_endian = "little"),
            "bytes that must be swapped"
        );
        let current = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        assert!(
            !current.block_on(async { big.writes_borrowed() }),
            "current-thread runtime"
        );
        assert!(!big.writes_borrowed(), "no runtime");
    }

    /// A region of whole contiguous chunks, an edge chunk past the array's end and
    /// an all-fill chunk: written through the borrowed path on a multi-thread
    /// runtime, the store holds exactly the bytes the copying path writes on a
    /// current-thread runtime, and the array reads back as written.
    #[test]
    fn borrowed_writes_store_what_copying_writes_store() {
        let raw = vec![serde_json::json!({"name": "bytes", "configuration": {"endian": "little"}})];
        for codecs in [zstd(), raw] {
            borrowed_and_copied_writes_agree(codecs);
        }
    }

    fn borrowed_and_copied_writes_agree(codecs: Vec<Value>) {
        let (rows, cols) = (100u64, 1024u64);
        let mut values: Vec<f32> = (0..rows * cols).map(|i| (i % 977) as f32 * 0.5).collect();
        // Chunk 1 (rows 32..64) all fill value: erased, not written.
        values[32 * 1024..64 * 1024].fill(0.0);
        let region = ArraySubset::full(&[rows, cols]);
        let write = |rt: &tokio::runtime::Runtime| {
            let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
            rt.block_on(async {
                let a = ArrayBuilder::new(vec![rows, cols], vec![32, cols], DataType::Float32)
                    .codecs(codecs.clone())
                    .create(Arc::clone(&store), "a")
                    .await
                    .expect("create array");
                assert_eq!(
                    a.writes_borrowed(),
                    rt.handle().runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
                );
                a.write_region(&region, &values).await.expect("write");
                let back: Vec<f32> = a.read_all().await.expect("read");
                assert!(back == values, "reads back as written");
                let mut stored = Vec::new();
                for key in store.list_prefix("a/c/").await.expect("list") {
                    let bytes = store.get(&key).await.expect("get").expect("present");
                    stored.push((key, bytes));
                }
                stored
            })
        };
        let borrowed = write(&multi_thread());
        let copied = write(
            &tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("runtime"),
        );
        let keys: Vec<&str> = borrowed.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            ["a/c/0/0", "a/c/2/0", "a/c/3/0"],
            "the fill chunk is erased"
        );
        assert_eq!(borrowed, copied, "the same bytes either way");
    }
}
