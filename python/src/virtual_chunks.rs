//! Icechunk's Python virtual chunk API on floe's virtual refs: `VirtualChunkSpec`,
//! the native halves of `store.set_virtual_ref`, `store.set_virtual_refs`,
//! `store.set_virtual_refs_arr` and `session.all_virtual_chunk_locations`, and the
//! open options behind `Repository.open(..., authorize_virtual_chunk_access=...)`.
//!
//! A virtual ref points at bytes `offset..offset+length` of an object outside the
//! repository (Icechunk spec, "Chunk Manifest Files", virtual chunk refs). Locations
//! are stored as given (Icechunk keeps them verbatim); they are normalized only to
//! check them against the repository's virtual chunk containers. Reads go through
//! floe's resolver ([`floe::virtual_refs`]), which refuses any location the caller
//! did not authorize.

use chrono::{DateTime, Utc};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyString;

use floe::format::manifest::{Checksum, ChunkPayload, VirtualChunkRef};
use floe::format::{ChunkIndices, NodePath};
use floe::virtual_refs::{normalize_url, ContainerCredentials, VirtualAccess};

use crate::credentials::{self as creds, Credentials, S3Credentials};
use crate::errors::{store_to_py, to_py, IntoPyResult, Kind};
use crate::runtime::block_on;
use crate::session::Session;

/// One virtual chunk ref for `store.set_virtual_refs` (Icechunk's `VirtualChunkSpec`):
/// chunk `index` (chunk grid coordinates) is bytes `offset..offset+length` of the
/// object at `location`, optionally pinned to the object's ETag or to a last-modified
/// time (reads fail when the object changed after it).
#[pyclass(module = "floe._floe", frozen, get_all)]
#[derive(Clone)]
pub(crate) struct VirtualChunkSpec {
    /// Chunk grid coordinates.
    index: Vec<u64>,
    /// URL of the object (`file:///...`, `s3://...`, `https://...`).
    location: String,
    /// Start within the object, in bytes.
    offset: u64,
    /// Length in bytes.
    length: u64,
    /// The object's ETag when the ref was made.
    etag_checksum: Option<String>,
    /// Reads fail when the object was modified after this time.
    last_updated_at_checksum: Option<DateTime<Utc>>,
}

#[pymethods]
impl VirtualChunkSpec {
    #[new]
    #[pyo3(signature = (index, location, offset, length, etag_checksum=None, last_updated_at_checksum=None))]
    fn new(
        index: Vec<u64>,
        location: String,
        offset: u64,
        length: u64,
        etag_checksum: Option<String>,
        last_updated_at_checksum: Option<DateTime<Utc>>,
    ) -> Self {
        VirtualChunkSpec {
            index,
            location,
            offset,
            length,
            etag_checksum,
            last_updated_at_checksum,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "VirtualChunkSpec(index={:?}, location={:?}, offset={}, length={})",
            self.index, self.location, self.offset, self.length
        )
    }
}

impl VirtualChunkSpec {
    fn checksum(&self) -> PyResult<Option<Checksum>> {
        if let Some(e) = &self.etag_checksum {
            return Ok(Some(Checksum::ETag(e.clone())));
        }
        self.last_updated_at_checksum
            .map(|t| {
                let secs = t.timestamp() + i64::from(t.timestamp_subsec_nanos() > 0);
                seconds(secs).map(Checksum::LastModified)
            })
            .transpose()
    }
}

/// A last-modified checksum: seconds since the Unix epoch, as the format's `u32`.
/// Callers round sub-second times up, as floe's kerchunk importer does: reads refuse
/// an object modified after that second, so a truncated time would refuse a file
/// whose modification time is exactly the given one.
fn seconds(secs: i64) -> PyResult<u32> {
    u32::try_from(secs).map_err(|_| {
        PyValueError::new_err(format!(
            "last-modified checksum {secs} s is outside 1970-01-01..2106-02-07"
        ))
    })
}

/// A checksum argument: a `str` is an ETag, a `datetime` a last-modified time
/// (timezone-aware, or naive in local time as `datetime.timestamp()` takes it),
/// rounded up to whole seconds.
fn checksum_arg(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Checksum>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Some(Checksum::ETag(s.to_str()?.to_owned())));
    }
    if obj.hasattr("timestamp")? {
        let secs: f64 = obj.call_method0("timestamp")?.extract()?;
        return Ok(Some(Checksum::LastModified(seconds(secs.ceil() as i64)?)));
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "checksum must be a str (ETag), a datetime (last modified) or None, got {}",
        obj.get_type().name()?
    )))
}

/// An `InvalidInputError` (kind `invalid-virtual-ref`) with `message`.
fn invalid_input(_py: Python<'_>, message: String) -> PyErr {
    crate::errors::invalid_input(Kind::InvalidVirtualRef, message)
}

/// An array path as Python gives it (`"/a/b"` or `"a/b"`).
fn array_path(path: &str) -> PyResult<NodePath> {
    let trimmed = path.trim_matches('/');
    let p = if trimmed.is_empty() {
        Ok(NodePath::root())
    } else {
        NodePath::new(trimmed)
    };
    p.map_err(|e| to_py(e.into()))
}

/// Refuses a location that is no absolute URL (`scheme:...`, RFC 3986 scheme
/// syntax), with `InvalidInputError` ("error parsing ...", as Icechunk). Only the
/// syntax is checked: the location is kept verbatim (userinfo, port, query, `//` and
/// `..` segments preserved, as Icechunk 2.3.0).
fn check_location(py: Python<'_>, location: &str) -> PyResult<()> {
    let scheme = location.split_once(':').map(|(s, _)| s);
    let ok = scheme.is_some_and(|s| {
        s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    if ok {
        return Ok(());
    }
    Err(invalid_input(
        py,
        format!(
            "error parsing virtual chunk location `{location}`: not an absolute URL \
             (scheme://...)"
        ),
    ))
}

/// Whether `location` lies under one of the repository's virtual chunk containers
/// (authorized or not). A location that is no valid URL is covered by none.
fn covered(session: &Session, location: &str) -> bool {
    let resolver = session.repo.virtual_resolver();
    // A `vcc://name/...` location is covered when a container has that name.
    resolver
        .expand_location(location)
        .is_ok_and(|url| normalize_url(&url).is_ok_and(|u| resolver.covers(&u)))
}

fn virtual_payload(
    location: String,
    offset: u64,
    length: u64,
    checksum: Option<Checksum>,
) -> ChunkPayload {
    ChunkPayload::Virtual(VirtualChunkRef {
        location,
        offset,
        length,
        checksum,
    })
}

/// `store.set_virtual_ref`: stores chunk `key` (a chunk key of an existing array,
/// e.g. `"temp/c/0/1"`) as bytes `offset..offset+length` of `location`.
///
/// Errors: `InvalidInputError` when `validate_container` and no virtual chunk
/// container covers `location` (as Icechunk), or when `key` is no chunk key;
/// `FloeError` (Icechunk's `NodeNotFoundError`) when the array does not exist; out of
/// grid indices and read-only sessions as any chunk write.
#[pyfunction]
#[pyo3(signature = (session, key, location, offset, length, checksum=None, validate_container=true))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _set_virtual_ref(
    py: Python<'_>,
    session: &Session,
    key: &str,
    location: String,
    offset: u64,
    length: u64,
    checksum: Option<&Bound<'_, PyAny>>,
    validate_container: bool,
) -> PyResult<()> {
    session.check_not_committed(py, "set a virtual ref")?;
    let checksum = checksum_arg(checksum)?;
    check_location(py, &location)?;
    if validate_container && !covered(session, &location) {
        return Err(invalid_input(
            py,
            format!("invalid chunk location, no matching virtual chunk container: `{location}`"),
        ));
    }
    let store = session.loaded(py)?.store();
    let Some((path, index)) = store.chunk_of_key(key).map_err(store_to_py)? else {
        // A default-encoding chunk key of an array that does not exist.
        if let Some((array, _)) = key
            .rsplit_once("/c/")
            .or_else(|| key.strip_suffix("/c").map(|a| (a, "")))
        {
            if let Ok(path) = NodePath::new(array) {
                return Err(to_py(floe::Error::NodeNotFound { path }));
            }
        }
        return Err(invalid_input(
            py,
            format!("`{key}` is not a chunk key of an existing array"),
        ));
    };
    session
        .inner
        .set_chunk_ref(
            &path,
            &index,
            Some(virtual_payload(location, offset, length, checksum)),
        )
        .py()
}

/// `store.set_virtual_refs`: stores many virtual refs of the array at `array_path`
/// under one lock. With `validate_containers`, refs whose location no container
/// covers are skipped, and their indices returned (`None` when every ref was
/// stored), as Icechunk.
///
/// Errors: as `session.set_chunk_refs` (unknown array, out-of-grid index: nothing is
/// stored); `TypeError` for items that are not `VirtualChunkSpec`.
#[pyfunction]
#[pyo3(signature = (session, array_path, chunks, validate_containers=true))]
pub(crate) fn _set_virtual_refs(
    py: Python<'_>,
    session: &Session,
    array_path: &str,
    chunks: Vec<PyRef<'_, VirtualChunkSpec>>,
    validate_containers: bool,
) -> PyResult<Option<Vec<Vec<u64>>>> {
    session.check_not_committed(py, "set virtual refs")?;
    let path = self::array_path(array_path)?;
    let mut failed = Vec::new();
    let mut refs: Vec<(ChunkIndices, Option<ChunkPayload>)> = Vec::with_capacity(chunks.len());
    for c in &chunks {
        check_location(py, &c.location)?;
        if validate_containers && !covered(session, &c.location) {
            failed.push(c.index.clone());
            continue;
        }
        let payload = virtual_payload(c.location.clone(), c.offset, c.length, c.checksum()?);
        refs.push((c.index.clone(), Some(payload)));
    }
    session.loaded(py)?.set_chunk_refs(&path, refs).py()?;
    Ok((!failed.is_empty()).then_some(failed))
}

/// Little-endian `u64`s from bytes (the Python side sends numpy arrays as `<u8`
/// bytes, so no Python object is made per ref).
fn u64s(name: &str, bytes: &[u8]) -> PyResult<Vec<u64>> {
    if !bytes.len().is_multiple_of(8) {
        return Err(PyValueError::new_err(format!(
            "{name}: {} bytes is not a whole number of uint64",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|b| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_le_bytes(a)
        })
        .collect())
}

/// `store.set_virtual_refs_arr`: the vectorized form. Ref `i` (C order over a chunk
/// grid of shape `chunk_grid_shape`, shifted by `arr_offset`) is bytes
/// `offsets[i]..offsets[i]+lengths[i]` of `locations[i]`; an empty location is no
/// ref. `offsets` and `lengths` are little-endian `uint64` bytes. One `checksum`
/// (ETag `str` or last-modified `datetime`) applies to every ref.
///
/// Returns the indices of refs skipped because no container covers their location
/// (with `validate_containers`), `None` when there are none.
///
/// Errors: `ValueError` when the lengths disagree with the grid's size or
/// `arr_offset` has another rank; as `_set_virtual_refs` otherwise.
#[pyfunction]
#[pyo3(signature = (session, array_path, chunk_grid_shape, locations, offsets, lengths, validate_containers=true, arr_offset=None, checksum=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _set_virtual_refs_arr(
    py: Python<'_>,
    session: &Session,
    array_path: &str,
    chunk_grid_shape: Vec<u64>,
    locations: Vec<String>,
    offsets: &[u8],
    lengths: &[u8],
    validate_containers: bool,
    arr_offset: Option<Vec<u64>>,
    checksum: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<Vec<Vec<u64>>>> {
    session.check_not_committed(py, "set virtual refs")?;
    let path = self::array_path(array_path)?;
    let checksum = checksum_arg(checksum)?;
    let (offsets, lengths) = (u64s("offsets", offsets)?, u64s("lengths", lengths)?);
    let n: u64 = chunk_grid_shape.iter().product();
    for (name, len) in [
        ("locations", locations.len()),
        ("offsets", offsets.len()),
        ("lengths", lengths.len()),
    ] {
        if len as u64 != n {
            return Err(PyValueError::new_err(format!(
                "product of chunk_grid_shape ({n}) != {name} length ({len})"
            )));
        }
    }
    let shift = arr_offset.unwrap_or_else(|| vec![0; chunk_grid_shape.len()]);
    if shift.len() != chunk_grid_shape.len() {
        return Err(PyValueError::new_err(format!(
            "arr_offset has {} dimensions, chunk_grid_shape {}",
            shift.len(),
            chunk_grid_shape.len()
        )));
    }
    // Containers are checked once per distinct location, not once per ref.
    let mut verdicts: std::collections::HashMap<&str, bool> = std::collections::HashMap::new();
    let mut failed = Vec::new();
    let mut refs = Vec::with_capacity(locations.len());
    let mut index = vec![0u64; chunk_grid_shape.len()];
    for (i, loc) in locations.iter().enumerate() {
        if i > 0 {
            // The next index in C order.
            for d in (0..index.len()).rev() {
                index[d] += 1;
                if index[d] < chunk_grid_shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        if loc.is_empty() {
            continue;
        }
        check_location(py, loc)?;
        let at: ChunkIndices = index.iter().zip(&shift).map(|(i, s)| i + s).collect();
        let ok = !validate_containers
            || *verdicts
                .entry(loc.as_str())
                .or_insert_with(|| covered(session, loc));
        if !ok {
            failed.push(at);
            continue;
        }
        refs.push((
            at,
            Some(virtual_payload(
                loc.clone(),
                offsets[i],
                lengths[i],
                checksum.clone(),
            )),
        ));
    }
    session.loaded(py)?.set_chunk_refs(&path, refs).py()?;
    Ok((!failed.is_empty()).then_some(failed))
}

/// `session.all_virtual_chunk_locations`: the location of every virtual ref of every
/// array (uncommitted changes included; `vcc://name/path` expanded), one entry per ref (a location repeats once
/// per chunk that points into it, as Icechunk), arrays in path order.
///
/// Errors: storage and format errors reading manifests.
#[pyfunction]
pub(crate) fn _all_virtual_chunk_locations(
    py: Python<'_>,
    session: &Session,
) -> PyResult<Vec<String>> {
    let s = session.inner.clone();
    let resolver = session.repo.virtual_resolver();
    block_on(py, async move {
        let mut out = Vec::new();
        s.load().await?;
        for node in s.list_nodes()? {
            if node.array().is_none() {
                continue;
            }
            for (_, payload) in s.chunk_refs(&node.path).await? {
                if let ChunkPayload::Virtual(v) = payload {
                    // `vcc://` locations expanded to the URLs they stand for, as
                    // Icechunk (an unknown name is left as it is).
                    let expanded = match resolver.expand_location(&v.location) {
                        Ok(std::borrow::Cow::Owned(url)) => url,
                        _ => v.location,
                    };
                    out.push(expanded);
                }
            }
        }
        Ok::<_, floe::Error>(out)
    })
    .py()
}

/// One virtual ref as `_virtual_chunk_refs` returns it: chunk index, location,
/// offset and length in bytes, and the checksum as `("etag", str)`,
/// `("last_modified", seconds)` or `None`.
type RefRow = (Vec<u64>, String, u64, u64, Option<(&'static str, String)>);

/// The virtual refs of the array at `array_path` (uncommitted changes included),
/// sorted by chunk index: what tests compare between writers (the kerchunk importer
/// and the Python API). Not part of Icechunk's API.
///
/// Errors: `FloeError` for an unknown path or a group; storage and format errors.
#[pyfunction]
pub(crate) fn _virtual_chunk_refs(
    py: Python<'_>,
    session: &Session,
    array_path: &str,
) -> PyResult<Vec<RefRow>> {
    let path = self::array_path(array_path)?;
    let s = session.inner.clone();
    let mut refs = block_on(py, async move { s.chunk_refs(&path).await }).py()?;
    refs.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(refs
        .into_iter()
        .filter_map(|(idx, p)| match p {
            ChunkPayload::Virtual(v) => {
                let checksum = v.checksum.map(|c| match c {
                    Checksum::ETag(e) => ("etag", e),
                    Checksum::LastModified(t) => ("last_modified", t.to_string()),
                });
                Some((idx, v.location, v.offset, v.length, checksum))
            }
            _ => None,
        })
        .collect())
}

/// What `authorize_virtual_chunk_access` holds once Python made it native: Icechunk's
/// map of URL prefix to `Credentials` (or `None`), or a plain list of prefixes
/// (authorized with no credentials of their own).
#[derive(FromPyObject)]
pub(crate) enum Authorization {
    /// URL prefix to credentials.
    Map(std::collections::HashMap<String, Option<Credentials>>),
    /// URL prefixes.
    List(Vec<String>),
}

/// A container credential as the engine takes it (a refreshable one calls its
/// pickled Python function when the first read needs it, and again when it expired).
///
/// # Errors
/// `ValueError` for an Azure access key that is not base64.
fn container_credentials(c: Credentials) -> PyResult<ContainerCredentials> {
    Ok(match c {
        Credentials::S3(s3) => match s3 {
            S3Credentials::FromEnv() => ContainerCredentials::S3FromEnv,
            S3Credentials::Anonymous() => ContainerCredentials::S3Anonymous,
            S3Credentials::Static(k) => ContainerCredentials::S3Static {
                access_key_id: k.access_key_id,
                secret_access_key: k.secret_access_key,
                session_token: k.session_token,
            },
            S3Credentials::Refreshable {
                pickled_function,
                current,
            } => ContainerCredentials::S3Refreshable(creds::refreshing(
                pickled_function,
                current.as_ref().map(creds::aws),
                creds::convert_s3,
            )),
        },
        Credentials::Gcs(g) => ContainerCredentials::Gcs(creds::gcs_credentials(g)),
        Credentials::Azure(a) => ContainerCredentials::Azure(creds::azure_credentials(a)?),
        Credentials::LocalFileSystemAccess() => ContainerCredentials::LocalFileSystemAccess,
        Credentials::HttpAccess() => ContainerCredentials::HttpAccess,
    })
}

/// The open options of a repository whose caller authorizes virtual chunk reads
/// under the prefixes of `access` (Icechunk's `authorize_virtual_chunk_access`: its
/// keys are authorized, and each key's credentials sign the reads under it; nothing
/// is authorized when `None`), and whose own configuration (`config`, the one passed
/// to `open`/`create`/`open_or_create`) lists virtual chunk containers: those are the
/// reader's, win over the repository's of the same prefix, and only their S3
/// endpoints (beside the reader's `AWS_ENDPOINT_URL`) are contacted.
///
/// Errors: `InvalidInputError` for a prefix that is no valid URL or absolute path,
/// or a `config` whose containers cannot be read.
pub(crate) fn open_options(
    py: Python<'_>,
    access: Option<Authorization>,
    config: Option<&floe::format::config::RepositoryConfig>,
) -> PyResult<floe::OpenOptions> {
    let entries: Vec<(String, Option<Credentials>)> = match access {
        None => Vec::new(),
        Some(Authorization::List(l)) => l.into_iter().map(|p| (p, None)).collect(),
        Some(Authorization::Map(m)) => m.into_iter().collect(),
    };
    let prefixes = VirtualAccess::prefixes(entries.iter().map(|(p, _)| p))
        .map_err(|e| invalid_input(py, e.to_string()))?;
    let credentials = entries
        .into_iter()
        .filter_map(|(p, c)| Some((p, c?)))
        .map(|(p, c)| Ok((p, container_credentials(c)?)))
        .collect::<PyResult<Vec<_>>>()?;
    let containers = match config {
        Some(c) => c
            .virtual_chunk_containers()
            .map_err(|e| invalid_input(py, e.to_string()))?,
        None => Vec::new(),
    };
    Ok(floe::OpenOptions::default()
        .virtual_access(prefixes)
        .virtual_credentials(credentials)
        .virtual_containers(containers))
}

/// The open options of a repository reopened (`Repository.reopen`) from one opened
/// with `current`: the virtual chunk containers of `config` join the reader's own
/// (trusted, winning over earlier ones of the same prefix); `access`, when given,
/// replaces the authorization and the credentials (as Icechunk's `reopen`), which
/// are kept when `None`.
///
/// Errors: as [`open_options`].
pub(crate) fn reopen_options(
    py: Python<'_>,
    current: &floe::OpenOptions,
    access: Option<Authorization>,
    config: Option<&floe::format::config::RepositoryConfig>,
) -> PyResult<floe::OpenOptions> {
    let mut options = current.clone();
    let given = access.is_some();
    let new = open_options(py, access, config)?;
    if given {
        options.virtual_access = new.virtual_access;
        options.virtual_credentials = new.virtual_credentials;
    }
    options.virtual_containers.extend(new.virtual_containers);
    Ok(options)
}

#[pymethods]
impl crate::session::NativeStore {
    /// The values of many whole keys, read together: chunk keys go through the
    /// session's batched chunk read (`Session::get_chunks`), so virtual chunks of one
    /// file at nearby offsets (and chunks sharing a native chunk object) are read with
    /// one request per merged span, every location authorized as a single read's;
    /// at most `concurrency` (default 10) requests in flight. Awaitable of a list in
    /// the order of `keys`: `bytes`, `None` for an absent key, or the exception the
    /// key's own `get` would raise (returned, not raised, so one failing key does not
    /// fail the others). Used by `FloeStore.get` (concurrent gets of one event-loop
    /// turn) and `FloeStore.get_partial_values`.
    #[pyo3(signature = (keys, concurrency=None))]
    fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: Vec<String>,
        concurrency: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        use floe::zarr::Store;
        use futures::StreamExt;
        let store = self.inner.clone();
        let n = keys.len();
        let concurrency = concurrency.unwrap_or(10).max(1);
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            type Outcome = Result<Option<bytes::Bytes>, floe::zarr::store::StoreError>;
            let mut out: Vec<Option<Outcome>> = (0..n).map(|_| None).collect();
            let mut stream = store.get_many(keys, concurrency);
            while let Some((i, r)) = stream.next().await {
                if let Some(slot) = out.get_mut(i) {
                    *slot = Some(r);
                }
            }
            drop(stream);
            Python::attach(|py| -> PyResult<Py<pyo3::types::PyList>> {
                let items = out.into_iter().map(|r| -> Py<PyAny> {
                    match r {
                        Some(Ok(Some(b))) => pyo3::types::PyBytes::new(py, &b).into_any().unbind(),
                        Some(Ok(None)) | None => py.None(),
                        Some(Err(e)) => crate::errors::store_to_py(e).into_value(py).into_any(),
                    }
                });
                Ok(pyo3::types::PyList::new(py, items)?.unbind())
            })
        })
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<VirtualChunkSpec>()?;
    m.add_function(wrap_pyfunction!(_set_virtual_ref, m)?)?;
    m.add_function(wrap_pyfunction!(_set_virtual_refs, m)?)?;
    m.add_function(wrap_pyfunction!(_set_virtual_refs_arr, m)?)?;
    m.add_function(wrap_pyfunction!(_all_virtual_chunk_locations, m)?)?;
    m.add_function(wrap_pyfunction!(_virtual_chunk_refs, m)?)?;
    Ok(())
}
