//! Region reads of an [`Array`]: the chunks a region touches are fetched
//! concurrently and decoded into one C-order buffer; missing chunks read as the fill
//! value.

use super::*;
use crate::zarr::array_bytes::fill_repeated;

/// Chunk keys handed to one [`Store::get_many`] call by a region read: a store
/// coalesces reads within one call only, and holds this many keys at once.
const GET_MANY_BATCH: usize = 4096;

/// How [`Array::read_direct`] puts whole chunks into the caller's output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direct {
    /// The stored bytes are the elements: the store reads them into the output.
    Stored,
    /// Compressed: fetched, then decoded into the output.
    Decoded,
}

/// Whole chunks of a region with the bytes of the output each one fills
/// ([`Array::borrowed_plan`]), sorted by position.
type RunPlan = Vec<(Vec<u64>, std::ops::Range<usize>)>;

/// Disjoint slices of `out`, one per run of `plan` (sorted, non-overlapping, within
/// `out`), in order; `None` when the runs overlap or pass the end.
fn split_runs<'o, 'p>(
    out: &'o mut [u8],
    plan: &'p [(Vec<u64>, std::ops::Range<usize>)],
) -> Option<Vec<(&'p Vec<u64>, &'o mut [u8])>> {
    let mut dests = Vec::with_capacity(plan.len());
    let mut rest = out;
    let mut at = 0;
    for (idx, run) in plan {
        let skip = run.start.checked_sub(at)?;
        if rest.len() < skip.checked_add(run.len())? {
            return None;
        }
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(skip);
        let (dest, tail) = tail.split_at_mut(run.len());
        dests.push((idx, dest));
        rest = tail;
        at = run.end;
    }
    Some(dests)
}

/// What one chunk's transfer step did ([`transfer_window`]).
enum Step {
    /// In its slice (or missing, and filled as needed).
    Read,
    /// Not read here; the caller reads it the general way.
    Left,
    /// The port does not read it this way.
    Declined,
    /// The transfer failed: the error of the whole read.
    Failed(ZarrError),
}

/// Runs `transfer` on every chunk of one window of a direct read, on the compute
/// pool: the first chunk alone first when `probe` (when the port declines it,
/// nothing else is tried: `None`), then the rest in parallel (declined ones are
/// left to the caller). Returns the chunks read, or the first failed transfer; the
/// panic message of a transfer that panicked.
#[allow(clippy::type_complexity)]
fn transfer_window(
    part: &mut [(&Vec<u64>, &mut [u8])],
    probe: bool,
    transfer: &(dyn Fn(&Vec<u64>, &mut [u8]) -> Step + Sync),
) -> Result<Option<ZarrResult<Vec<Vec<u64>>>>, String> {
    use rayon::prelude::*;
    crate::compute::install(|| {
        let (first, rest) = match part.split_first_mut() {
            Some((first, rest)) if probe => (Some(first), rest),
            _ => (None, &mut part[..]),
        };
        let mut read_ok = Vec::new();
        if let Some((idx, dest)) = first {
            match transfer(idx, dest) {
                Step::Read => read_ok.push((*idx).clone()),
                Step::Left => {}
                Step::Declined => return None,
                Step::Failed(e) => return Some(Err(e)),
            }
        }
        let rest: ZarrResult<Vec<Option<Vec<u64>>>> = rest
            .par_iter_mut()
            .map(|(idx, dest)| match transfer(idx, dest) {
                Step::Read => Ok(Some((*idx).clone())),
                Step::Left | Step::Declined => Ok(None),
                Step::Failed(e) => Err(e),
            })
            .collect();
        Some(rest.map(|rest| {
            read_ok.extend(rest.into_iter().flatten());
            read_ok
        }))
    })
}

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
            return match self.fetch_chunk(&self.chunks(), &chunks.start).await? {
                Some(d) => Ok(d),
                None => self.fill_bytes(n),
            };
        }
        let mut out = self.fill_bytes(n)?;
        self.read_into(region, out.as_view_mut(), None).await?;
        Ok(out)
    }

    /// Reads `region` into `out` (C order, shape `region.shape`): chunks are fetched
    /// and decoded concurrently and copied in as they arrive; missing chunks are
    /// skipped. `out` already holds the fill value, unless `covering` is the plan of
    /// an `out` of fixed-size elements whose every chunk is one run of it
    /// ([`Array::covering_plan`]): the direct read then writes the fill value into
    /// the runs of the chunks it finds missing or leaves to the general way. Chunks
    /// read whole are fetched in batches
    /// through [`ChunkPort::get_many`], so a store can read chunks that lie close
    /// together in one object (virtual chunks of one file) with one request; the
    /// others are decoded partially (sharding), one request per chunk for its index
    /// and one for the inner chunks it needs.
    pub(super) async fn read_into(
        &self,
        region: &ArraySubset,
        mut out: ElemsMut<'_>,
        covering: Option<RunPlan>,
    ) -> ZarrResult<()> {
        let port = self.chunks();
        let port = &port;
        // Whole uncompressed chunks that are each one run of `out` first, straight
        // from the store; `direct` holds those read, the others go the general way.
        let direct = match (&mut out, self.direct_mode()) {
            (ElemsMut::Fixed(bytes), Some(mode)) => {
                self.read_direct(port, region, bytes, mode, covering)
                    .await?
            }
            _ => std::collections::HashSet::new(),
        };
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
        let direct = &direct;
        let whole = futures::stream::iter(indices_in(&chunks.start, &chunks.shape))
            .filter(move |idx| futures::future::ready(is_whole(idx) && !direct.contains(idx)))
            .chunks(GET_MANY_BATCH)
            .map(move |batch: Vec<Vec<u64>>| {
                let batch = Arc::new(batch);
                port.get_many(batch.as_ref().clone(), concurrency)
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
                let data = self.decode_chunk(idx, bytes).await?;
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
            .filter(move |idx| futures::future::ready(!is_whole(idx) && !direct.contains(idx)))
            .map(|idx| self.read_chunk_part(port, idx, region))
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

    /// How whole chunks may be read straight into the caller's output, if at all:
    /// the calling task must be allowed to block (a multi-thread tokio runtime), and
    /// the chain must either store a chunk's elements as they are
    /// ([`CodecChain::stores_native_bytes`]) or decode into a borrowed buffer
    /// ([`CodecChain::decodes_into`]: `bytes` without a swap, then compressors; or
    /// `sharding_indexed`, whose inner chunks go straight to their places).
    fn direct_mode(&self) -> Option<Direct> {
        if !crate::compute::may_wait_for_pool() || self.metadata.data_type.fixed_size().is_none() {
            return None;
        }
        let (chain, repr) = (&self.derived.chain, &self.derived.repr);
        if chain.stores_native_bytes(repr) {
            Some(Direct::Stored)
        } else if chain.decodes_into(repr) {
            Some(Direct::Decoded)
        } else {
            None
        }
    }

    /// Reads the whole chunks of `region` that are each one run of `out`
    /// ([`Array::borrowed_run`]) straight into `out`, on the compute pool, and
    /// returns those it read (missing ones included: `out` keeps their fill value);
    /// the caller reads the others the general way, after they got their fill value
    /// back. The calling thread waits for the pool one window (~64 MiB of output) at
    /// a time and yields between windows (not `block_in_place`, which tokio refuses
    /// in a `LocalSet`).
    /// Both modes first take the port's async step ([`ChunkPort::prepare`]: a
    /// repository session fetches the manifests of the region), so the port knows
    /// every chunk's ref from the first transfer on, also on a fresh session.
    /// - [`Direct::Stored`]: the port's transfer step reads each chunk into its
    ///   slice where it can
    ///   ([`ChunkPort::read_into`]: a repository session on a local disk): one copy
    ///   and no buffer per chunk. When the first chunk is declined, none is tried;
    ///   a transfer that fails is the error of the whole read.
    /// - [`Direct::Decoded`]: where the port reads chunks on the calling thread
    ///   ([`ChunkPort::read_now`]: local files, memory), each chunk is read and
    ///   decoded into its slice ([`CodecChain::decode_into`]) on one compute thread;
    ///   otherwise (the first chunk declined) a window (~64 MiB of output) of chunks
    ///   is fetched with [`ChunkPort::get_many`], then each is decoded into its
    ///   slice. A chunk that fails to fetch or decode is left to the caller, which
    ///   reports the error.
    ///
    /// With `covering` (the plan of an `out` that does not hold the fill value yet,
    /// used instead of computing it again), every run of a chunk found missing or not
    /// read this way is filled with the fill value.
    ///
    /// # Errors
    /// A failed transfer of [`Direct::Stored`]; the async step's store errors.
    async fn read_direct(
        &self,
        port: &Arc<dyn ChunkPort>,
        region: &ArraySubset,
        out: &mut [u8],
        mode: Direct,
        covering: Option<RunPlan>,
    ) -> ZarrResult<std::collections::HashSet<Vec<u64>>> {
        let mut done = std::collections::HashSet::new();
        let unfilled = covering.is_some();
        let mut plan = covering.unwrap_or_else(|| self.borrowed_plan(region));
        plan.retain(|(_, run)| run.end <= out.len());
        if plan.is_empty() {
            return Ok(done);
        }
        let fill = self.derived.repr.fill_value.as_bytes();
        let refill = |dest: &mut [u8]| fill_repeated(dest, fill);
        let refill_runs = |out: &mut [u8], skip: &std::collections::HashSet<Vec<u64>>| {
            for (idx, run) in &plan {
                if !skip.contains(idx) {
                    if let Some(dest) = out.get_mut(run.clone()) {
                        refill(dest);
                    }
                }
            }
        };
        // The async step: the chunk refs of the region become known without I/O, so
        // the transfer step can take chunks on the compute pool from the first one.
        port.prepare(&self.derived.grid.chunks_intersecting(region))
            .await?;
        let Some(mut dests) = split_runs(out, &plan) else {
            if unfilled {
                refill_runs(out, &done);
            }
            return Ok(done);
        };
        let window = (DIRECT_WINDOW_BYTES / plan[0].1.len().max(1)).max(1);
        let mut read: Result<Vec<Vec<u64>>, String> = Ok(Vec::new());
        // Decoded chunks are read on the compute pool while the port reads them
        // there (`ChunkPort::read_now`: local files, memory), else fetched.
        let mut decode_now = true;
        for (k, part) in dests.chunks_mut(window).enumerate() {
            if mode == Direct::Decoded && decode_now {
                match self.read_decoded_now(port.as_ref(), part, &refill, unfilled, k == 0) {
                    Ok(None) => decode_now = false,
                    Ok(Some(read_ok)) => {
                        if let Ok(all) = &mut read {
                            all.extend(read_ok);
                        }
                        tokio::task::yield_now().await;
                        continue;
                    }
                    Err(panic) => {
                        read = Err(panic);
                        continue;
                    }
                }
            }
            let got = match mode {
                Direct::Stored => {
                    match self.read_stored_into(port.as_ref(), part, &refill, unfilled, k == 0) {
                        // The port declined the first chunk: it reads none this way.
                        Ok(None) => break,
                        Ok(Some(Ok(read_ok))) => Ok(read_ok),
                        Ok(Some(Err(failed))) => return Err(failed),
                        Err(panic) => Err(panic),
                    }
                }
                Direct::Decoded => self.read_decoded_into(port, part, &refill, unfilled).await,
            };
            match (&mut read, got) {
                (Ok(all), Ok(some)) => all.extend(some),
                (_, Err(panic)) => read = Err(panic),
                (Err(_), Ok(_)) => {}
            }
            tokio::task::yield_now().await;
        }
        match read {
            Ok(read_ok) => {
                done.extend(read_ok);
                if unfilled {
                    refill_runs(out, &done);
                }
            }
            // A store or codec panicked: every chunk goes the general way.
            Err(_) => refill_runs(out, &done),
        }
        Ok(done)
    }

    /// [`Direct::Stored`] for one window: each chunk read into its slice by the
    /// port's transfer step; the chunks read (missing ones included) or the first
    /// failed transfer, `None` when `probe` and the port declined the first chunk
    /// (nothing else tried), or the panic message of a port that panicked.
    #[allow(clippy::type_complexity)]
    fn read_stored_into(
        &self,
        port: &dyn ChunkPort,
        part: &mut [(&Vec<u64>, &mut [u8])],
        refill: &(dyn Fn(&mut [u8]) + Sync),
        fill_missing: bool,
        probe: bool,
    ) -> Result<Option<ZarrResult<Vec<Vec<u64>>>>, String> {
        transfer_window(part, probe, &|idx, dest| match port.read_into(idx, dest) {
            Ok(ReadInto::Read) => Step::Read,
            Ok(ReadInto::Missing) => {
                if fill_missing {
                    refill(dest);
                }
                Step::Read
            }
            Ok(ReadInto::Elsewhere) => {
                // Untouched by contract; back to the fill value all the same.
                refill(dest);
                Step::Declined
            }
            Err(e) => Step::Failed(e.into()),
        })
    }

    /// [`Direct::Decoded`] for one window where the port reads chunks on the
    /// calling thread ([`ChunkPort::read_now`]): each chunk read and decoded into
    /// its slice by one compute thread, without a task or a hop per chunk. Returns
    /// the chunks read (missing ones included); `None` when `probe` and the port
    /// declined the first chunk (nothing else tried: the window is fetched
    /// instead); the panic message of a port or codec that panicked. A chunk the
    /// port declines, fails to read or that fails to decode gets the fill value
    /// back and is left to the caller, which reports the error.
    fn read_decoded_now(
        &self,
        port: &dyn ChunkPort,
        part: &mut [(&Vec<u64>, &mut [u8])],
        refill: &(dyn Fn(&mut [u8]) + Sync),
        fill_missing: bool,
        probe: bool,
    ) -> Result<Option<Vec<Vec<u64>>>, String> {
        let (chain, repr) = (&self.derived.chain, &self.derived.repr);
        let read = transfer_window(part, probe, &|idx, dest| {
            // Stored bytes no chunk of this size needs (compressors and indexes add
            // little); a manifest's larger claim is read the general way.
            let max_len = dest.len().saturating_mul(2).saturating_add(1 << 20);
            let step = match port.read_now(idx, max_len) {
                Ok(ReadNow::Read(bytes)) => match chain.decode_into(bytes, repr, dest) {
                    Ok(()) => return Step::Read,
                    Err(_) => Step::Left,
                },
                Ok(ReadNow::Missing) => {
                    if fill_missing {
                        refill(dest);
                    }
                    return Step::Read;
                }
                Ok(ReadNow::Elsewhere) => Step::Declined,
                Err(_) => Step::Left,
            };
            refill(dest);
            step
        })?;
        // Failures are left to the caller: `Step::Failed` is never returned here.
        Ok(read.map(|r| r.unwrap_or_default()))
    }

    /// [`Direct::Decoded`] for one window: its chunks fetched by a task on the
    /// runtime ([`ChunkPort::get_many`], `concurrency` requests in flight) while the
    /// compute pool decodes those already fetched into their slices, so fetching and
    /// decoding overlap; the chunks read (missing ones included), or the panic
    /// message. A chunk that fails to fetch or decode is left to the caller.
    async fn read_decoded_into(
        &self,
        port: &Arc<dyn ChunkPort>,
        part: &mut [(&Vec<u64>, &mut [u8])],
        refill: &(dyn Fn(&mut [u8]) + Sync),
        fill_missing: bool,
    ) -> Result<Vec<Vec<u64>>, String> {
        use rayon::prelude::*;
        type Fetched = (usize, Result<Option<Bytes>, crate::zarr::StoreError>);
        let chunks: Vec<Vec<u64>> = part.iter().map(|(idx, _)| (*idx).clone()).collect();
        let concurrency = self.options.concurrency.max(1);
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Fetched>(concurrency * 2);
        let fetch_port = Arc::clone(port);
        let fetcher = super::chunk_io::AbortOnDrop(tokio::spawn(async move {
            let mut stream = fetch_port.get_many(chunks, concurrency);
            while let Some(got) = stream.next().await {
                if tx.send(got).await.is_err() {
                    break;
                }
            }
        }));
        let mut dests: Vec<Option<(&Vec<u64>, &mut [u8])>> = part
            .iter_mut()
            .map(|(idx, dest)| Some((*idx, std::mem::take(dest))))
            .collect();
        let (chain, repr) = (&self.derived.chain, &self.derived.repr);
        let mut read = Vec::new();
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            while let Ok(more) = rx.try_recv() {
                batch.push(more);
            }
            let work: Vec<_> = batch
                .into_iter()
                .filter_map(|(i, got)| Some((dests.get_mut(i)?.take()?, got)))
                .collect();
            let decoded: Vec<Vec<u64>> = crate::compute::install(|| {
                work.into_par_iter()
                    .filter_map(|((idx, dest), got)| match got {
                        Ok(None) => {
                            if fill_missing {
                                refill(dest);
                            }
                            Some(idx.clone())
                        }
                        Ok(Some(bytes)) => match chain.decode_into(bytes, repr, dest) {
                            Ok(()) => Some(idx.clone()),
                            Err(_) => {
                                refill(dest);
                                None
                            }
                        },
                        Err(_) => None,
                    })
                    .collect()
            })?;
            read.extend(decoded);
        }
        drop(fetcher);
        Ok(read)
    }

    /// Reads the part of chunk `idx` inside `region`, `None` when the chunk is
    /// missing. The data is the whole decoded chunk when the chain cannot decode
    /// partially or the region covers the chunk (the caller copies the intersection
    /// out of it, saving a copy; region reads fetch those chunks in batches instead),
    /// else just the intersection.
    pub(super) async fn read_chunk_part(
        &self,
        port: &Arc<dyn ChunkPort>,
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
            return Ok(self.fetch_chunk(port, &idx).await?.map(|data| ChunkPart {
                inter,
                data,
                data_shape: repr.shape.clone(),
                data_start: local.start,
            }));
        }
        let source = PortSource {
            port: port.as_ref(),
            chunk: &idx,
        };
        let part = self
            .derived
            .chain
            .partial_decode(&source, repr, &local)
            .await
            .map_err(|e| chunk_err(&self.path, &self.key_of(&idx), e))?;
        match part {
            None => Ok(None),
            Some(data) => {
                self.check_decoded(&idx, &data, local.num_elements())?;
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

    /// Reads `region` into `out`: native-endian element bytes in C order, exactly
    /// the region's size, for a fixed-size data type whatever its element type (the
    /// caller's buffer, reused between reads, instead of the new one
    /// [`Array::read_region_bytes`] returns: a fresh buffer of hundreds of MiB costs
    /// the kernel's zeroing of every page on top of the copy). Missing chunks read
    /// as the fill value.
    ///
    /// # Errors
    /// [`ZarrError::ElementType`] for a data type of variable size;
    /// [`ZarrError::InvalidRegion`] when `out` does not hold exactly the region's
    /// bytes; otherwise as [`Array::read_region_bytes`].
    pub async fn read_region_into_bytes(
        &self,
        region: &ArraySubset,
        out: &mut [u8],
    ) -> ZarrResult<()> {
        self.check_region(region)?;
        let n = self.region_len(region)?;
        let Some(elem) = self.metadata.data_type.fixed_size() else {
            return Err(self.element_type_err::<u8>());
        };
        if Some(out.len()) != n.checked_mul(elem) {
            return Err(self.region_err(format!(
                "the output buffer holds {} bytes, the region {n} elements of {elem} bytes",
                out.len()
            )));
        }
        if out.is_empty() {
            return Ok(());
        }
        let fill = match self.fill_bytes(1)? {
            ArrayBytes::Fixed(f) if f.len() == elem => f,
            _ => return Err(self.element_type_err::<u8>()),
        };
        // Filled beforehand only when some of `out` is not read straight into it: the
        // direct read fills the runs of missing chunks itself (one write of `out`
        // fewer: ~20 ms per 256 MiB on the 2-core VM).
        let covering = self.covering_plan(region, out.len());
        if covering.is_none() {
            fill_repeated(out, &fill);
        }
        self.read_into(region, ElemsMut::Fixed(out), covering).await
    }

    /// The plan of a read of `region` into `out_len` bytes that goes straight into
    /// the output for every chunk, `None` for any other read: [`Array::read_direct`]
    /// may run here, and each chunk of the region is whole in it and one run of the
    /// output, the runs adding up to all of it.
    fn covering_plan(&self, region: &ArraySubset, out_len: usize) -> Option<RunPlan> {
        self.direct_mode()?;
        let plan = self.borrowed_plan(region);
        let mut covered = 0usize;
        for (_, run) in &plan {
            if run.end > out_len {
                return None;
            }
            covered += run.len();
        }
        (covered == out_len).then_some(plan)
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
        self.read_into(region, ElemsMut::Fixed(bytes), None).await
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::{ArrayBuilder, MemoryStore, StoreError};

    fn runtime(multi: bool) -> tokio::runtime::Runtime {
        if multi {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .build()
                .expect("runtime")
        } else {
            tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("runtime")
        }
    }

    /// A memory store whose chunk port declines (after scribbling on the buffer)
    /// direct reads of chunks 1 (stored) and 2 (never written), into a buffer or not
    /// (`read_now`: a region starting at chunk 1 is fetched instead).
    #[derive(Debug, Default)]
    struct Declining(MemoryStore);

    #[derive(Debug)]
    struct DecliningPort(Arc<dyn ChunkPort>);

    #[async_trait]
    impl ChunkPort for DecliningPort {
        fn key(&self, chunk: &[u64]) -> String {
            self.0.key(chunk)
        }
        async fn get(&self, chunk: &[u64]) -> Result<Option<Bytes>, StoreError> {
            self.0.get(chunk).await
        }
        async fn get_ranges(
            &self,
            chunk: &[u64],
            ranges: &[ByteRange],
        ) -> Result<Option<Vec<Bytes>>, StoreError> {
            self.0.get_ranges(chunk, ranges).await
        }
        async fn set(&self, chunk: &[u64], bytes: Bytes) -> Result<(), StoreError> {
            self.0.set(chunk, bytes).await
        }
        async fn erase(&self, chunk: &[u64]) -> Result<(), StoreError> {
            self.0.erase(chunk).await
        }
        fn read_into(&self, chunk: &[u64], dest: &mut [u8]) -> Result<ReadInto, StoreError> {
            if chunk == [1, 0] || chunk == [2, 0] {
                dest.fill(0xAB);
                return Ok(ReadInto::Elsewhere);
            }
            self.0.read_into(chunk, dest)
        }
        fn read_now(&self, chunk: &[u64], max_len: usize) -> Result<ReadNow, StoreError> {
            if chunk == [1, 0] || chunk == [2, 0] {
                return Ok(ReadNow::Elsewhere);
            }
            self.0.read_now(chunk, max_len)
        }
    }

    #[async_trait]
    impl Store for Declining {
        async fn get(&self, key: &str) -> Result<Option<Bytes>, StoreError> {
            self.0.get(key).await
        }
        async fn get_partial_values(
            &self,
            key: &str,
            ranges: &[ByteRange],
        ) -> Result<Option<Vec<Bytes>>, StoreError> {
            self.0.get_partial_values(key, ranges).await
        }
        fn chunk_port(&self, keys: &ChunkKeys) -> Option<Arc<dyn ChunkPort>> {
            Some(Arc::new(DecliningPort(self.0.chunk_port(keys)?)))
        }
        async fn set(&self, key: &str, value: Bytes) -> Result<(), StoreError> {
            self.0.set(key, value).await
        }
        async fn erase(&self, key: &str) -> Result<(), StoreError> {
            self.0.erase(key).await
        }
        async fn list_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
            self.0.list_prefix(prefix).await
        }
        async fn list_dir(&self, prefix: &str) -> Result<crate::zarr::ListDirResult, StoreError> {
            self.0.list_dir(prefix).await
        }
    }

    /// An array of 100 x 64 float32 in chunks of 16 whole rows (uncompressed, or
    /// zstd and crc32c), fill value 7.5, with chunk 2 never written; every region
    /// read straight into the output on a multi-thread runtime (from a store that
    /// declines chunks 1 and 2 or not) equals the same read the general way on a
    /// current-thread runtime.
    #[test]
    fn direct_reads_equal_general_reads() {
        let values: Vec<f32> = (0..100 * 64).map(|i| i as f32 * 0.25).collect();
        let regions = [
            ArraySubset::full(&[100, 64]),
            ArraySubset::new(vec![5, 0], vec![60, 64]),
            ArraySubset::new(vec![16, 0], vec![32, 64]),
            ArraySubset::new(vec![3, 8], vec![50, 16]),
            ArraySubset::new(vec![96, 0], vec![4, 64]),
        ];
        let le = serde_json::json!({"name": "bytes", "configuration": {"endian": "little"}});
        let zstd = serde_json::json!({"name": "zstd", "configuration": {"level": 1}});
        // Shards of 16 x 64 in inner chunks of 4 x 16, stored as they are or
        // compressed; one inner chunk is written with the fill value (empty).
        let sharded = |inner: Vec<Value>| {
            vec![
                serde_json::json!({"name": "sharding_indexed", "configuration": {
                    "chunk_shape": [4, 16],
                    "codecs": inner,
                    "index_codecs": [le.clone(), {"name": "crc32c"}],
                    "index_location": "end",
                }}),
            ]
        };
        let chains = [
            (vec![le.clone()], Direct::Stored),
            (
                vec![
                    le.clone(),
                    zstd.clone(),
                    serde_json::json!({"name": "crc32c"}),
                ],
                Direct::Decoded,
            ),
            (sharded(vec![le.clone()]), Direct::Decoded),
            (sharded(vec![le.clone(), zstd]), Direct::Decoded),
        ];
        let hole = ArraySubset::new(vec![20, 16], vec![4, 16]);
        for (codecs, mode) in chains {
            let is_sharded = codecs[0]["name"] == "sharding_indexed";
            let read = |multi: bool, store: Arc<dyn Store>| -> Vec<Vec<f32>> {
                runtime(multi).block_on(async {
                    let a = ArrayBuilder::new(vec![100, 64], vec![16, 64], DataType::Float32)
                        .codecs(codecs.clone())
                        .fill_value(serde_json::json!(7.5))
                        .create(store, "a")
                        .await
                        .expect("create");
                    assert_eq!(a.direct_mode(), multi.then_some(mode));
                    for rows in [0..32usize, 48..100] {
                        let region = ArraySubset::new(
                            vec![rows.start as u64, 0],
                            vec![(rows.end - rows.start) as u64, 64],
                        );
                        a.write_region(&region, &values[rows.start * 64..rows.end * 64])
                            .await
                            .expect("write");
                    }
                    if is_sharded {
                        a.write_region(&hole, &[7.5f32; 64]).await.expect("write");
                    }
                    let mut out = Vec::new();
                    for region in &regions {
                        let got = a.read_region::<f32>(region).await.expect("read");
                        // Into bytes that do not hold the fill value beforehand: the
                        // direct read fills missing and declined chunks itself when
                        // it covers the region.
                        let len = usize::try_from(region.num_elements()).expect("len") * 4;
                        assert_eq!(
                            a.covering_plan(region, len).is_some(),
                            // Whole chunks only (the array's last chunk, rows 96..112,
                            // passes its end: not one whole run of the output).
                            multi
                                && region.shape[1] == 64
                                && region.start[0] % 16 == 0
                                && (region.start[0] + region.shape[0]) % 16 == 0,
                            "{region:?}"
                        );
                        let mut bytes = vec![0xEEu8; len];
                        a.read_region_into_bytes(region, &mut bytes)
                            .await
                            .expect("read into bytes");
                        let via_bytes: Vec<f32> = bytes
                            .chunks_exact(4)
                            .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                            .collect();
                        assert_eq!(via_bytes, got, "{region:?}");
                        out.push(got);
                    }
                    out
                })
            };
            let general = read(false, Arc::new(MemoryStore::new()));
            let direct = read(true, Arc::new(MemoryStore::new()));
            let declined = read(true, Arc::new(Declining::default()));
            assert_eq!(direct, general, "{mode:?}");
            assert_eq!(declined, general, "{mode:?}");
            // The fill value where chunk 2 was never written (and in the empty
            // inner chunk).
            assert!(general[0][32 * 64..48 * 64].iter().all(|&v| v == 7.5));
            let mut expected = values[..32 * 64].to_vec();
            if is_sharded {
                for row in 20..24 {
                    expected[row * 64 + 16..row * 64 + 32].fill(7.5);
                }
            }
            assert_eq!(general[0][..32 * 64], expected[..]);
        }
    }

    /// A corrupt compressed chunk read directly is an error naming its key, as
    /// read the general way.
    #[test]
    fn a_corrupt_chunk_read_directly_is_a_chunk_error() {
        let rt = runtime(true);
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        rt.block_on(async {
            let a = ArrayBuilder::new(vec![64, 64], vec![16, 64], DataType::Float32)
                .codecs(vec![
                    serde_json::json!({"name": "bytes", "configuration": {"endian": "little"}}),
                    serde_json::json!({"name": "zstd", "configuration": {"level": 1}}),
                ])
                .create(Arc::clone(&store), "a")
                .await
                .expect("create");
            assert_eq!(a.direct_mode(), Some(Direct::Decoded));
            a.write_region(&ArraySubset::full(&[64, 64]), &vec![1.5f32; 64 * 64])
                .await
                .expect("write");
            store
                .set("a/c/2/0", Bytes::from_static(b"not zstd"))
                .await
                .expect("corrupt");
            match a.read_all::<f32>().await {
                Err(ZarrError::Chunk { key, .. }) => assert_eq!(key, "a/c/2/0"),
                other => panic!("expected a chunk error, got {other:?}"),
            }
        });
    }

    /// Chains that change the bytes beyond compression, and current-thread
    /// runtimes, do not take a direct path.
    #[test]
    fn direct_reads_need_native_bytes_and_a_multi_thread_runtime() {
        let rt = runtime(true);
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let make = |name: &str, codecs: Vec<Value>| {
            rt.block_on(
                ArrayBuilder::new(vec![8], vec![4], DataType::UInt32)
                    .codecs(codecs)
                    .create(Arc::clone(&store), name),
            )
            .expect("create")
        };
        let le = serde_json::json!({"name": "bytes", "configuration": {"endian": "little"}});
        let be = serde_json::json!({"name": "bytes", "configuration": {"endian": "big"}});
        let raw = make("raw", vec![le.clone()]);
        let zstd = make(
            "zstd",
            vec![le.clone(), serde_json::json!({"name": "zstd"})],
        );
        let transposed = make(
            "t",
            vec![
                serde_json::json!({"name": "transpose", "configuration": {"order": [0]}}),
                le,
            ],
        );
        let swapped = make("be", vec![be]);
        let mode = |a: &Array| rt.block_on(async { a.direct_mode() });
        assert_eq!(mode(&raw), Some(Direct::Stored));
        assert_eq!(mode(&zstd), Some(Direct::Decoded));
        assert_eq!(mode(&transposed), None);
        assert_eq!(mode(&swapped).is_some(), cfg!(target_endian = "big"));
        assert_eq!(runtime(false).block_on(async { raw.direct_mode() }), None);
        assert_eq!(raw.direct_mode(), None, "no runtime");
    }
}
