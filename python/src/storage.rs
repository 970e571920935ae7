//! Storage constructors, as Icechunk 2.3.0's `Storage.new_*` class methods: local
//! filesystem, memory, S3 (and S3-compatible servers), Tigris, Cloudflare R2, Google
//! Cloud Storage, Azure Blob Storage and read-only HTTP; and `S3Options`.
//!
//! A `Storage` remembers how it was built (a `StorageRecipe`: the constructor and its
//! arguments, typed). It pickles as that recipe, in the `(constructor name, keyword
//! arguments)` form pickles have always had, so a worker rebuilds the same backend
//! with the same credentials objects: static keys travel (as in Icechunk),
//! from-environment credentials are read from the worker's environment, refreshable
//! ones carry their pickled function and, with `scatter_initial_credentials=True`,
//! their first credential. `Storage._with_settings(settings)` rebuilds it with a
//! `StorageSettings`' retries, timeouts and concurrency (large ranged reads split
//! into concurrent requests).

use std::sync::{Arc, Mutex, Weak};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};

use floe::storage::cloud::ClientSettings;
use floe::storage::{AzureCredentials as AzCreds, GcsCredentials as GsCreds};

use crate::credentials::{self as creds, AzureCredentials, GcsCredentials, S3Credentials};
use crate::errors::IntoPyResult;

/// Where a repository lives (Icechunk's `Storage`). Build it with the module's
/// constructors (`s3_storage`, `gcs_storage`, ...) or the `new_*` class methods.
#[pyclass(module = "floe._floe", frozen, subclass)]
#[derive(Clone)]
pub(crate) struct Storage {
    pub(crate) inner: Arc<dyn floe::storage::Storage>,
    /// How it was built; `None` for in-memory storage.
    recipe: Option<Arc<StorageRecipe>>,
}

/// Recipes of the storages built in this process, found again from the backend a
/// repository or session holds (for pickling them).
static RECIPES: Mutex<Vec<RecipeEntry>> = Mutex::new(Vec::new());

/// A backend (weakly held) and its recipe.
type RecipeEntry = (Weak<dyn floe::storage::Storage>, Arc<StorageRecipe>);

impl Storage {
    fn with_recipe(inner: Arc<dyn floe::storage::Storage>, recipe: Option<StorageRecipe>) -> Self {
        let recipe = recipe.map(Arc::new);
        if let Some(r) = &recipe {
            if let Ok(mut all) = RECIPES.lock() {
                all.retain(|(w, _)| w.strong_count() > 0);
                all.push((Arc::downgrade(&inner), Arc::clone(r)));
            }
        }
        Storage { inner, recipe }
    }

    /// The Python `Storage` for a backend built in this process, with its recipe (so
    /// it pickles with its credentials); otherwise one rebuilt from the URL, with
    /// credentials from the environment; `None` for in-memory storage.
    pub(crate) fn portable(
        _py: Python<'_>,
        inner: &Arc<dyn floe::storage::Storage>,
    ) -> PyResult<Option<Storage>> {
        let found = RECIPES.lock().ok().and_then(|all| {
            all.iter()
                .find(|(w, _)| w.upgrade().is_some_and(|s| Arc::ptr_eq(&s, inner)))
                .map(|(_, r)| Arc::clone(r))
        });
        if let Some(r) = found {
            return Ok(Some(Storage {
                inner: Arc::clone(inner),
                recipe: Some(r),
            }));
        }
        Ok(portable_url(inner.as_ref()).map(|url| Storage {
            inner: Arc::clone(inner),
            recipe: Some(Arc::new(StorageRecipe::FromUrl { url })),
        }))
    }
}

impl Storage {
    /// `floe._display.storage_display(function, recipe)`.
    fn display(&self, py: Python<'_>, function: &str) -> PyResult<String> {
        let recipe = match &self.recipe {
            Some(r) => r.to_parts(py)?,
            None => py.None().into_bound(py),
        };
        py.import("floe._display")?
            .call_method1("storage_display", (function, recipe))?
            .extract()
    }

    /// The storage a pickle carried: a `Storage`, or a URL (older pickles) opened
    /// with credentials from the environment.
    pub(crate) fn from_pickled(obj: &Bound<'_, PyAny>) -> PyResult<Storage> {
        if let Ok(s) = obj.cast::<Storage>() {
            return Ok(s.get().clone());
        }
        storage_from_url(&obj.extract::<String>()?)
    }
}

/// The URL a storage is re-created from in another process; `None` for in-memory
/// storage, which lives in one process only.
pub(crate) fn portable_url(storage: &dyn floe::storage::Storage) -> Option<String> {
    let url = storage.root_url();
    (!url.starts_with("memory://")).then_some(url)
}

/// Re-creates a storage from its URL (credentials from the environment): how
/// pickled sessions and forks come back in a worker.
///
/// Raises `FloeError` for an unknown scheme.
#[pyfunction]
pub(crate) fn storage_from_url(url: &str) -> PyResult<Storage> {
    StorageRecipe::FromUrl {
        url: url.to_string(),
    }
    .open(None)
}

/// Rebuilds a pickled storage: constructor `name` with keyword arguments `kwargs`.
#[pyfunction]
fn _storage_from_recipe(name: &str, kwargs: &Bound<'_, PyDict>) -> PyResult<Storage> {
    StorageRecipe::from_parts(name, kwargs)?.open(None)
}

/// The checksum S3 uploads carry (Icechunk's `ChecksumAlgorithm`). floe's S3 client
/// (`object_store`) computes SHA-256 only: `S3Options` takes `Sha256` (every upload
/// then sends `x-amz-checksum-sha256`, which S3 verifies) and refuses the others
/// with `ValueError`.
#[pyclass(module = "floe._floe", eq, eq_int, frozen, from_py_object)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChecksumAlgorithm {
    Crc32,
    Crc32c,
    Crc64Nvme,
    Sha1,
    Sha256,
}

impl ChecksumAlgorithm {
    fn name(self) -> &'static str {
        match self {
            ChecksumAlgorithm::Crc32 => "Crc32",
            ChecksumAlgorithm::Crc32c => "Crc32c",
            ChecksumAlgorithm::Crc64Nvme => "Crc64Nvme",
            ChecksumAlgorithm::Sha1 => "Sha1",
            ChecksumAlgorithm::Sha256 => "Sha256",
        }
    }
}

#[pymethods]
impl ChecksumAlgorithm {
    /// `icechunk.ChecksumAlgorithm.Sha256` (executable, as Icechunk's).
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let package: String = py
            .import("floe.exceptions")?
            .call_method0("_package")?
            .extract()?;
        Ok(format!("{package}.ChecksumAlgorithm.{}", self.name()))
    }

    /// Pickles as `getattr(ChecksumAlgorithm, name)`: the same member back.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let py = slf.py();
        let getattr = py.import("builtins")?.getattr("getattr")?;
        let args = (slf.as_any().get_type(), slf.get().name())
            .into_pyobject(py)?
            .into_any();
        Ok((getattr, args))
    }

    /// The member's name (`Sha256`).
    #[getter(name)]
    fn member_name(&self) -> &'static str {
        self.name()
    }
}

/// Options of an S3-compatible client (Icechunk's `S3Options`): `region`,
/// `endpoint_url`, `allow_http`, `anonymous` (unsigned requests),
/// `force_path_style`, `network_stream_timeout_seconds` (seconds a response may
/// stall before it fails; 0 disables; `None`: no limit) and `requester_pays`.
#[pyclass(module = "floe._floe", get_all, set_all, from_py_object, eq)]
#[derive(Clone, Default, PartialEq)]
pub(crate) struct S3Options {
    region: Option<String>,
    endpoint_url: Option<String>,
    allow_http: bool,
    anonymous: bool,
    force_path_style: bool,
    network_stream_timeout_seconds: Option<u32>,
    requester_pays: bool,
    /// `Some(Sha256)` or `None` (see `ChecksumAlgorithm`).
    checksum_algorithm: Option<ChecksumAlgorithm>,
}

#[pymethods]
impl S3Options {
    #[new]
    #[pyo3(signature = (region=None, endpoint_url=None, allow_http=false, anonymous=false, force_path_style=false, network_stream_timeout_seconds=None, requester_pays=false, checksum_algorithm=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        region: Option<String>,
        endpoint_url: Option<String>,
        allow_http: bool,
        anonymous: bool,
        force_path_style: bool,
        network_stream_timeout_seconds: Option<u32>,
        requester_pays: bool,
        checksum_algorithm: Option<ChecksumAlgorithm>,
    ) -> PyResult<Self> {
        if let Some(c) = checksum_algorithm.filter(|c| *c != ChecksumAlgorithm::Sha256) {
            return Err(PyValueError::new_err(format!(
                "checksum_algorithm={} is not supported by floe: its S3 client \
                 (object_store) computes Sha256 checksums only",
                c.name()
            )));
        }
        Ok(S3Options {
            region,
            endpoint_url,
            allow_http,
            anonymous,
            force_path_style,
            network_stream_timeout_seconds,
            requester_pays,
            checksum_algorithm,
        })
    }

    /// Icechunk's executable layout: `icechunk.storage.S3Options(` then one
    /// `field=value,` line per field and `)`; `eval` of it gives an equal object.
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let package: String = py
            .import("floe.exceptions")?
            .call_method0("_package")?
            .extract()?;
        let mut out = format!("{package}.storage.S3Options(\n");
        for (name, value) in self.fields(&package) {
            out.push_str(&format!("    {name}={value},\n"));
        }
        out.push(')');
        Ok(out)
    }

    /// `<icechunk.storage.S3Options>` and one `field: value` line per field.
    fn __str__(&self, py: Python<'_>) -> PyResult<String> {
        let display = py.import("floe._display")?;
        let header = display.call_method1("qualified", ("storage.S3Options",))?;
        display
            .call_method1("text_block", (header, self.fields(&package_name(py)?)))?
            .extract()
    }

    /// The fields as an HTML block (Jupyter).
    fn _repr_html_(&self, py: Python<'_>) -> PyResult<String> {
        let display = py.import("floe._display")?;
        let header = display.call_method1("qualified", ("storage.S3Options",))?;
        display
            .call_method1("html_block", (header, self.fields(&package_name(py)?)))?
            .extract()
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let s = slf.borrow();
        let args = (
            s.region.clone(),
            s.endpoint_url.clone(),
            s.allow_http,
            s.anonymous,
            s.force_path_style,
            s.network_stream_timeout_seconds,
            s.requester_pays,
            s.checksum_algorithm,
        )
            .into_pyobject(slf.py())?
            .into_any();
        Ok((slf.get_type().into_any(), args))
    }
}

impl S3Options {
    /// (name, Python literal) of every field, in Icechunk's order; `package` names
    /// the `ChecksumAlgorithm` enum (`floe` or `icechunk`).
    fn fields(&self, package: &str) -> Vec<(&'static str, String)> {
        vec![
            ("region", py_str(&self.region)),
            ("endpoint_url", py_str(&self.endpoint_url)),
            ("allow_http", py_bool(self.allow_http).to_string()),
            ("anonymous", py_bool(self.anonymous).to_string()),
            (
                "force_path_style",
                py_bool(self.force_path_style).to_string(),
            ),
            (
                "network_stream_timeout_seconds",
                self.network_stream_timeout_seconds
                    .map_or("None".to_string(), |s| s.to_string()),
            ),
            ("requester_pays", py_bool(self.requester_pays).to_string()),
            (
                "checksum_algorithm",
                match self.checksum_algorithm {
                    Some(c) => format!("{}.ChecksumAlgorithm.{}", package, c.name()),
                    None => "None".to_string(),
                },
            ),
        ]
    }
}

/// The package name reprs use: `icechunk` once floe is installed as it, else `floe`.
fn package_name(py: Python<'_>) -> PyResult<String> {
    py.import("floe.exceptions")?
        .call_method0("_package")?
        .extract()
}

/// An optional string as Python shows it.
fn py_str(s: &Option<String>) -> String {
    s.as_ref().map_or("None".to_string(), |s| format!("{s:?}"))
}

/// A bool as Python shows it.
fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// The client settings of a `StorageSettings` (duck-typed: `retries.max_tries`,
/// `retries.initial_backoff_ms`, `retries.max_backoff_ms`,
/// `timeouts.connect_timeout_ms`, `timeouts.read_timeout_ms`,
/// `timeouts.operation_timeout_ms`, `timeouts.operation_attempt_timeout_ms`).
fn client_settings(settings: Option<&Bound<'_, PyAny>>) -> PyResult<ClientSettings> {
    let mut out = ClientSettings::default();
    let Some(s) = settings.filter(|s| !s.is_none()) else {
        return Ok(out);
    };
    let field = |obj: &Bound<'_, PyAny>, name: &str| -> PyResult<Option<u64>> {
        match obj.getattr(name) {
            Ok(v) if !v.is_none() => Ok(Some(v.extract()?)),
            _ => Ok(None),
        }
    };
    if let Ok(r) = s.getattr("retries") {
        if !r.is_none() {
            out.max_tries = field(&r, "max_tries")?.map(|v| v.min(u32::MAX as u64) as u32);
            out.initial_backoff_ms = field(&r, "initial_backoff_ms")?;
            out.max_backoff_ms = field(&r, "max_backoff_ms")?;
        }
    }
    if let Ok(c) = s.getattr("concurrency") {
        if !c.is_none() {
            out.ideal_concurrent_request_size = field(&c, "ideal_concurrent_request_size")?;
            out.max_concurrent_requests_for_object =
                field(&c, "max_concurrent_requests_for_object")?
                    .map(|v| v.min(u64::from(u16::MAX)) as u16);
        }
    }
    if let Ok(t) = s.getattr("timeouts") {
        if !t.is_none() {
            out.connect_timeout_ms = field(&t, "connect_timeout_ms")?;
            out.read_timeout_ms = field(&t, "read_timeout_ms")?;
            out.operation_timeout_ms = field(&t, "operation_timeout_ms")?;
            out.operation_attempt_timeout_ms = field(&t, "operation_attempt_timeout_ms")?;
        }
    }
    Ok(out)
}

/// `dict[str, str]` pairs, in the dict's order.
type Pairs = Vec<(String, String)>;

/// A `dict[str, str]` argument as its pairs (`None` stays `None`); a value that is not
/// a dict raises `TypeError`: `not_a_dict` when given, else the cast's own message.
fn str_pairs(value: Option<Bound<'_, PyAny>>, not_a_dict: Option<&str>) -> PyResult<Option<Pairs>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let d = match not_a_dict {
        Some(msg) => value
            .cast::<PyDict>()
            .map_err(|_| PyTypeError::new_err(msg.to_string()))?,
        None => value.cast::<PyDict>()?,
    };
    d.iter()
        .map(|(k, v)| Ok((k.extract()?, v.extract()?)))
        .collect::<PyResult<_>>()
        .map(Some)
}

/// An argument extracted, `None` when absent or `None`.
fn arg<'py, T: FromPyObjectOwned<'py>>(value: Option<Bound<'py, PyAny>>) -> PyResult<Option<T>> {
    match value {
        Some(v) if !v.is_none() => Ok(Some(v.extract().map_err(Into::into)?)),
        _ => Ok(None),
    }
}

/// Header pairs of the optional header dicts, later ones first on a name clash (read
/// and write headers are sent with every request: object_store has one set of default
/// headers per client).
fn merged_headers(groups: &[&Option<Pairs>]) -> Pairs {
    let mut out: Pairs = Vec::new();
    for (k, v) in groups.iter().copied().flatten().flatten() {
        out.retain(|(o, _)| !o.eq_ignore_ascii_case(k));
        out.push((k.clone(), v.clone()));
    }
    out
}

/// Sorted pairs of an optional config dict.
fn sorted(config: &Option<Pairs>) -> Pairs {
    let mut v = config.clone().unwrap_or_default();
    v.sort();
    v
}

/// Whether an endpoint names a host that cannot serve virtual-hosted buckets (an IP
/// address or `localhost`): such endpoints need path-style requests.
fn needs_path_style(endpoint: &str) -> bool {
    url::Url::parse(endpoint)
        .ok()
        .and_then(|u| {
            u.host().map(|h| {
                matches!(h, url::Host::Ipv4(_) | url::Host::Ipv6(_))
                    || u.host_str() == Some("localhost")
            })
        })
        .unwrap_or(false)
}

/// How a storage was built: a constructor and its arguments, typed (`None`: the
/// argument was absent or `None`). A storage is opened from it (and again with other
/// settings); it pickles and displays as `(constructor name, keyword arguments)`
/// (`to_parts`/`from_parts`, the only place the names appear).
#[derive(Clone)]
enum StorageRecipe {
    /// `storage_from_url(url)`: credentials from the environment.
    FromUrl { url: String },
    /// `new_local_filesystem(path)`.
    Local { path: Option<String> },
    /// `new_s3`, `new_tigris`, `new_r2`.
    S3(S3Recipe),
    /// `new_gcs`.
    Gcs(GcsRecipe),
    /// `new_azure_blob`.
    Azure(AzureRecipe),
    /// `new_http`.
    Http(HttpRecipe),
    /// `_new_redirect`: `location` is where the redirects of `base_url` ended.
    Redirect {
        base_url: Option<String>,
        location: Option<String>,
    },
}

/// The arguments of `new_gcs`.
#[derive(Clone)]
struct GcsRecipe {
    bucket: Option<String>,
    prefix: Option<String>,
    credentials: Option<GcsCredentials>,
    config: Option<Pairs>,
    read_headers: Option<Pairs>,
    write_headers: Option<Pairs>,
    headers: Option<Pairs>,
}

/// The arguments of `new_azure_blob`.
#[derive(Clone)]
struct AzureRecipe {
    account: Option<String>,
    container: Option<String>,
    prefix: Option<String>,
    credentials: Option<AzureCredentials>,
    config: Option<Pairs>,
}

/// The arguments of `new_http`.
#[derive(Clone)]
struct HttpRecipe {
    base_url: Option<String>,
    config: Option<Pairs>,
    headers: Option<Pairs>,
}

/// Which S3 service an `S3Recipe` is for.
#[derive(Clone)]
enum S3Flavor {
    S3,
    /// Default endpoint `https://t3.storage.dev`, consistency headers, read-only with
    /// `use_weak_consistency`.
    Tigris {
        use_weak_consistency: Option<bool>,
    },
    /// Endpoint from `account_id`, region `auto`, path style.
    R2 {
        account_id: Option<String>,
    },
}

/// The arguments of the S3 family of constructors.
#[derive(Clone)]
struct S3Recipe {
    flavor: S3Flavor,
    config: Option<S3Options>,
    bucket: Option<String>,
    prefix: Option<String>,
    credentials: Option<S3Credentials>,
    legacy_rooted_keys: Option<bool>,
    read_headers: Option<Pairs>,
    write_headers: Option<Pairs>,
    headers: Option<Pairs>,
}

/// The arguments of an S3-family constructor, in the order they are checked.
struct S3Args<'py> {
    config: Option<Bound<'py, PyAny>>,
    bucket: Option<Bound<'py, PyAny>>,
    prefix: Option<Bound<'py, PyAny>>,
    credentials: Option<Bound<'py, PyAny>>,
    legacy_rooted_keys: Option<Bound<'py, PyAny>>,
    read_headers: Option<Bound<'py, PyAny>>,
    write_headers: Option<Bound<'py, PyAny>>,
    headers: Option<Bound<'py, PyAny>>,
}

impl S3Args<'_> {
    /// The typed recipe of an S3-family storage.
    fn recipe(self, flavor: S3Flavor) -> PyResult<StorageRecipe> {
        Ok(StorageRecipe::S3(S3Recipe {
            flavor,
            config: arg(self.config)?,
            bucket: arg(self.bucket)?,
            prefix: arg(self.prefix)?,
            credentials: arg(self.credentials)?,
            legacy_rooted_keys: arg(self.legacy_rooted_keys)?,
            headers: header_arg(self.headers, "headers")?,
            read_headers: header_arg(self.read_headers, "read_headers")?,
            write_headers: header_arg(self.write_headers, "write_headers")?,
        }))
    }
}

/// Header dict arguments (`headers`, `read_headers`, `write_headers`) as pairs.
fn header_arg(value: Option<Bound<'_, PyAny>>, name: &str) -> PyResult<Option<Pairs>> {
    str_pairs(value, Some(&format!("{name} must be a dict of str")))
}

impl StorageRecipe {
    /// The recipe of `new_gcs`.
    fn gcs<'py>(
        bucket: Option<Bound<'py, PyAny>>,
        prefix: Option<Bound<'py, PyAny>>,
        credentials: Option<Bound<'py, PyAny>>,
        config: Option<Bound<'py, PyAny>>,
        [read_headers, write_headers, headers]: [Option<Bound<'py, PyAny>>; 3],
    ) -> PyResult<Self> {
        Ok(StorageRecipe::Gcs(GcsRecipe {
            bucket: arg(bucket)?,
            prefix: arg(prefix)?,
            credentials: arg(credentials)?,
            config: str_pairs(config, None)?,
            headers: header_arg(headers, "headers")?,
            read_headers: header_arg(read_headers, "read_headers")?,
            write_headers: header_arg(write_headers, "write_headers")?,
        }))
    }

    /// The recipe of `new_azure_blob`.
    fn azure<'py>(
        account: Option<Bound<'py, PyAny>>,
        container: Option<Bound<'py, PyAny>>,
        prefix: Option<Bound<'py, PyAny>>,
        credentials: Option<Bound<'py, PyAny>>,
        config: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Self> {
        Ok(StorageRecipe::Azure(AzureRecipe {
            account: arg(account)?,
            container: arg(container)?,
            prefix: arg(prefix)?,
            credentials: arg(credentials)?,
            config: str_pairs(config, None)?,
        }))
    }

    /// The recipe of `new_http`.
    fn http<'py>(
        base_url: Option<Bound<'py, PyAny>>,
        config: Option<Bound<'py, PyAny>>,
        headers: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Self> {
        Ok(StorageRecipe::Http(HttpRecipe {
            base_url: arg(base_url)?,
            config: str_pairs(config, None)?,
            headers: header_arg(headers, "headers")?,
        }))
    }

    /// The recipe a pickle (or a display) carries as `(name, kwargs)`.
    fn from_parts(name: &str, kwargs: &Bound<'_, PyDict>) -> PyResult<Self> {
        let get = |key: &str| kwargs.get_item(key);
        let s3 = || -> PyResult<S3Args<'_>> {
            Ok(S3Args {
                config: get("config")?,
                bucket: get("bucket")?,
                prefix: get("prefix")?,
                credentials: get("credentials")?,
                legacy_rooted_keys: get("legacy_rooted_keys")?,
                read_headers: get("read_headers")?,
                write_headers: get("write_headers")?,
                headers: get("headers")?,
            })
        };
        let headers = || -> PyResult<_> {
            Ok([get("read_headers")?, get("write_headers")?, get("headers")?])
        };
        match name {
            "from_url" => Ok(StorageRecipe::FromUrl {
                url: arg(get("url")?)?.unwrap_or_default(),
            }),
            "new_local_filesystem" => Ok(StorageRecipe::Local {
                path: arg(get("path")?)?,
            }),
            "new_s3" => s3()?.recipe(S3Flavor::S3),
            "new_tigris" => s3()?.recipe(S3Flavor::Tigris {
                use_weak_consistency: arg(get("use_weak_consistency")?)?,
            }),
            "new_r2" => s3()?.recipe(S3Flavor::R2 {
                account_id: arg(get("account_id")?)?,
            }),
            "new_gcs" => Self::gcs(
                get("bucket")?,
                get("prefix")?,
                get("credentials")?,
                get("config")?,
                headers()?,
            ),
            "new_azure_blob" => Self::azure(
                get("account")?,
                get("container")?,
                get("prefix")?,
                get("credentials")?,
                get("config")?,
            ),
            "new_http" => Self::http(get("base_url")?, get("config")?, get("headers")?),
            "new_redirect" => Ok(StorageRecipe::Redirect {
                base_url: arg(get("base_url")?)?,
                location: arg(get("location")?)?,
            }),
            other => Err(PyValueError::new_err(format!(
                "unknown storage constructor `{other}`"
            ))),
        }
    }

    /// `(constructor name, keyword arguments)`: how the recipe pickles and displays
    /// (every argument present, `None` when it was).
    fn to_parts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        fn py_pairs<'py>(py: Python<'py>, p: &Option<Pairs>) -> PyResult<Bound<'py, PyAny>> {
            match p {
                None => Ok(py.None().into_bound(py)),
                Some(p) => {
                    let d = PyDict::new(py);
                    for (k, v) in p {
                        d.set_item(k, v)?;
                    }
                    Ok(d.into_any())
                }
            }
        }
        let d = PyDict::new(py);
        let name = match self {
            StorageRecipe::FromUrl { url } => {
                d.set_item("url", url)?;
                "from_url"
            }
            StorageRecipe::Local { path } => {
                d.set_item("path", path)?;
                "new_local_filesystem"
            }
            StorageRecipe::S3(s) => {
                d.set_item("config", s.config.clone())?;
                d.set_item("bucket", &s.bucket)?;
                d.set_item("prefix", &s.prefix)?;
                let name = match &s.flavor {
                    S3Flavor::S3 => "new_s3",
                    S3Flavor::Tigris {
                        use_weak_consistency,
                    } => {
                        d.set_item("use_weak_consistency", use_weak_consistency)?;
                        "new_tigris"
                    }
                    S3Flavor::R2 { account_id } => {
                        d.set_item("account_id", account_id)?;
                        "new_r2"
                    }
                };
                d.set_item("credentials", s.credentials.clone())?;
                d.set_item("legacy_rooted_keys", s.legacy_rooted_keys)?;
                d.set_item("read_headers", py_pairs(py, &s.read_headers)?)?;
                d.set_item("write_headers", py_pairs(py, &s.write_headers)?)?;
                d.set_item("headers", py_pairs(py, &s.headers)?)?;
                name
            }
            StorageRecipe::Gcs(g) => {
                d.set_item("bucket", &g.bucket)?;
                d.set_item("prefix", &g.prefix)?;
                d.set_item("credentials", g.credentials.clone())?;
                d.set_item("config", py_pairs(py, &g.config)?)?;
                d.set_item("read_headers", py_pairs(py, &g.read_headers)?)?;
                d.set_item("write_headers", py_pairs(py, &g.write_headers)?)?;
                d.set_item("headers", py_pairs(py, &g.headers)?)?;
                "new_gcs"
            }
            StorageRecipe::Azure(a) => {
                d.set_item("account", &a.account)?;
                d.set_item("container", &a.container)?;
                d.set_item("prefix", &a.prefix)?;
                d.set_item("credentials", a.credentials.clone())?;
                d.set_item("config", py_pairs(py, &a.config)?)?;
                "new_azure_blob"
            }
            StorageRecipe::Http(h) => {
                d.set_item("base_url", &h.base_url)?;
                d.set_item("config", py_pairs(py, &h.config)?)?;
                d.set_item("headers", py_pairs(py, &h.headers)?)?;
                "new_http"
            }
            StorageRecipe::Redirect { base_url, location } => {
                d.set_item("base_url", base_url)?;
                d.set_item("location", location)?;
                "new_redirect"
            }
        };
        Ok((name, d).into_pyobject(py)?.into_any())
    }

    /// Opens the backend, with `settings` (a `StorageSettings` or `None`).
    fn open(self, settings: Option<&Bound<'_, PyAny>>) -> PyResult<Storage> {
        let mut client = client_settings(settings)?;
        let inner = self.backend(&mut client)?;
        Ok(Storage::with_recipe(inner, Some(self)))
    }

    /// The engine storage the recipe describes.
    fn backend(&self, client: &mut ClientSettings) -> PyResult<Arc<dyn floe::storage::Storage>> {
        let text = |s: &Option<String>| s.clone().unwrap_or_default();
        Ok(match self {
            StorageRecipe::FromUrl { url } => floe::storage::create_storage(url, None).py()?,
            StorageRecipe::Local { path } => {
                Arc::new(floe::storage::LocalStorage::new(std::path::Path::new(&text(path))).py()?)
            }
            StorageRecipe::S3(s) => s.backend(client)?,
            StorageRecipe::Gcs(g) => {
                let credentials = match &g.credentials {
                    None => GsCreds::FromEnv,
                    Some(c) => creds::gcs_credentials(c.clone()),
                };
                if !merged_headers(&[&g.headers, &g.read_headers, &g.write_headers]).is_empty() {
                    return Err(PyValueError::new_err(
                        "extra HTTP headers are not supported on GCS storage by floe",
                    ));
                }
                let mut config = sorted(&g.config);
                config.retain(|(k, _)| !k.is_empty());
                let (bucket, prefix) = (text(&g.bucket), text(&g.prefix));
                floe::storage::new_gcs_storage(&bucket, &prefix, credentials, &config, client)
                    .py()?
            }
            StorageRecipe::Azure(a) => {
                let credentials = match &a.credentials {
                    None => AzCreds::FromEnv,
                    Some(c) => creds::azure_credentials(c.clone())?,
                };
                let (account, container) = (text(&a.account), text(&a.container));
                let config = sorted(&a.config);
                floe::storage::new_azure_storage(
                    &account,
                    &container,
                    &text(&a.prefix),
                    credentials,
                    &config,
                    client,
                )
                .py()?
            }
            StorageRecipe::Http(h) => {
                let (config, headers) = (sorted(&h.config), merged_headers(&[&h.headers]));
                floe::storage::new_http_storage(&text(&h.base_url), &config, &headers, client)
                    .py()?
            }
            StorageRecipe::Redirect { location, .. } => {
                // `http(s)+icechunk://` is a repository served over HTTP; other schemes
                // are storage URLs.
                let location = text(location);
                let storage = if let Some(rest) = location.strip_prefix("http+icechunk://") {
                    floe::storage::new_http_storage(&format!("http://{rest}"), &[], &[], client)
                        .py()?
                } else if let Some(rest) = location.strip_prefix("https+icechunk://") {
                    floe::storage::new_http_storage(&format!("https://{rest}"), &[], &[], client)
                        .py()?
                } else if location.starts_with("memory://") {
                    return Err(PyValueError::new_err(
                        "a redirect cannot lead to in-memory storage",
                    ));
                } else {
                    floe::storage::create_storage(&location, None).py()?
                };
                Arc::new(floe::storage::ReadOnlyStorage::new(storage))
            }
        })
    }
}

impl S3Recipe {
    /// The S3 family's backend: `new_s3`, `new_tigris` and `new_r2`.
    fn backend(&self, client: &mut ClientSettings) -> PyResult<Arc<dyn floe::storage::Storage>> {
        let config = self.config.clone().unwrap_or_default();
        let Some(bucket) = &self.bucket else {
            return Err(PyValueError::new_err("a bucket is required"));
        };
        let prefix = self.prefix.clone().unwrap_or_default();
        if self.legacy_rooted_keys == Some(true) {
            if !prefix.trim_matches('/').is_empty() {
                // Icechunk's check: the escape hatch exists for bucket-root repositories.
                return Err(PyValueError::new_err(
                    "legacy_rooted_keys is only valid with an empty prefix",
                ));
            }
            return Err(PyValueError::new_err(
                "legacy_rooted_keys=True (keys with a leading `/`) is not supported by floe",
            ));
        }
        let from_env = matches!(self.credentials, None | Some(S3Credentials::FromEnv()));
        let mut o = if from_env {
            floe::storage::S3Options::from_env()
        } else {
            floe::storage::S3Options::default()
        };
        let mut endpoint = config.endpoint_url.clone();
        let mut region = config.region.clone();
        let mut force_path_style = config.force_path_style;
        let mut extra = merged_headers(&[&self.headers, &self.read_headers, &self.write_headers]);
        let mut read_only = false;
        match &self.flavor {
            S3Flavor::Tigris {
                use_weak_consistency,
            } => {
                endpoint.get_or_insert_with(|| "https://t3.storage.dev".to_string());
                if use_weak_consistency.unwrap_or(false) {
                    read_only = true;
                } else {
                    let Some(r) = region.clone() else {
                        return Err(PyValueError::new_err(
                            "Tigris storage needs a region for consistent reads and writes; pass \
                             region=..., or use_weak_consistency=True for read-only, eventually \
                             consistent access",
                        ));
                    };
                    for (k, v) in [
                        ("X-Tigris-Regions", r.as_str()),
                        ("X-Tigris-Consistent", "true"),
                        ("Cache-Control", "no-cache"),
                    ] {
                        extra.retain(|(o, _)| !o.eq_ignore_ascii_case(k));
                        extra.push((k.to_string(), v.to_string()));
                    }
                }
            }
            S3Flavor::R2 { account_id } => {
                if endpoint.is_none() {
                    match account_id {
                        Some(a) => endpoint = Some(format!("https://{a}.r2.cloudflarestorage.com")),
                        None => {
                            return Err(PyValueError::new_err(
                                "R2 storage needs endpoint_url or account_id",
                            ))
                        }
                    }
                }
                region.get_or_insert_with(|| "auto".to_string());
                force_path_style = true;
            }
            S3Flavor::S3 => {}
        }
        if let Some(e) = endpoint {
            force_path_style |= needs_path_style(&e);
            o.endpoint = Some(e);
        }
        if region.is_some() {
            o.region = region;
        }
        o.allow_http |= config.allow_http;
        o.force_path_style |= force_path_style;
        o.anonymous |= config.anonymous;
        let mut provider = None;
        match &self.credentials {
            None | Some(S3Credentials::FromEnv()) => {}
            Some(S3Credentials::Anonymous()) => {
                o.anonymous = true;
                o.access_key_id = None;
                o.secret_access_key = None;
                o.session_token = None;
            }
            Some(S3Credentials::Static(c)) => {
                o.access_key_id = Some(c.access_key_id.clone());
                o.secret_access_key = Some(c.secret_access_key.clone());
                o.session_token = c.session_token.clone();
            }
            Some(S3Credentials::Refreshable {
                pickled_function,
                current,
            }) => {
                provider = Some(creds::refreshing(
                    pickled_function.clone(),
                    current.as_ref().map(creds::aws),
                    creds::convert_s3,
                ) as _);
            }
        }
        if let Some(s) = config.network_stream_timeout_seconds {
            if client.read_timeout_ms.is_none() {
                client.read_timeout_ms = Some(u64::from(s) * 1000);
            }
        }
        let storage = floe::storage::cloud::new_s3_storage_with(
            bucket,
            &prefix,
            &o,
            provider,
            client,
            &floe::storage::cloud::S3Extras {
                headers: extra,
                requester_pays: config.requester_pays,
                checksum_sha256: config.checksum_algorithm == Some(ChecksumAlgorithm::Sha256),
            },
        )
        .py()?;
        Ok(if read_only {
            Arc::new(floe::storage::ReadOnlyStorage::new(storage))
        } else {
            storage
        })
    }
}

#[pymethods]
impl Storage {
    /// Icechunk's layout: `<icechunk.Storage>`, `type: <backend>` and the
    /// backend's location fields (see `floe._display.storage_fields`).
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        self.display(py, "text_block")
    }

    fn __str__(&self, py: Python<'_>) -> PyResult<String> {
        self.display(py, "text_block")
    }

    /// The same fields as an HTML block (Jupyter).
    fn _repr_html_(&self, py: Python<'_>) -> PyResult<String> {
        self.display(py, "html_block")
    }

    /// The storage's root URL.
    #[getter]
    fn url(&self) -> String {
        self.inner.root_url()
    }

    /// Pickles as its recipe: the constructor and its arguments (credentials
    /// objects included; see the module documentation). In-memory storage lives in
    /// one process and raises `TypeError`.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let py = slf.py();
        let recipe = slf
            .get()
            .recipe
            .as_ref()
            .ok_or_else(|| PyTypeError::new_err("in-memory storage cannot be pickled"))?;
        let f = py.import("floe._floe")?.getattr("_storage_from_recipe")?;
        Ok((f, recipe.to_parts(py)?))
    }

    /// The settings a repository on this storage uses when its configuration sets
    /// none (Icechunk's `default_settings`): a `floe.storage.StorageSettings` whose
    /// `retries` hold the object-store client's defaults (11 tries, 100 ms first and
    /// 15 s longest backoff) and whose `concurrency` is an unset
    /// `StorageConcurrencySettings`, ready to be changed in place.
    fn default_settings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("floe.storage")?
            .getattr("_default_settings")?
            .call0()
    }

    /// This storage rebuilt with `settings` (a `StorageSettings`): its retries
    /// (`max_tries`, `initial_backoff_ms`, `max_backoff_ms`) and timeouts (connect,
    /// read, operation, attempt; milliseconds) go to the object-store client.
    /// In-memory storage is returned as it is.
    fn _with_settings(&self, settings: &Bound<'_, PyAny>) -> PyResult<Storage> {
        match &self.recipe {
            Some(recipe) => StorageRecipe::clone(recipe).open(Some(settings)),
            None => Ok(self.clone()),
        }
    }

    /// A repository in the local directory `path` (created when missing).
    #[classmethod]
    fn new_local_filesystem(_cls: &Bound<'_, PyType>, path: &str) -> PyResult<Storage> {
        local_filesystem_storage(path)
    }

    /// A read-only repository at `location`, where the HTTP redirects of
    /// `base_url` led (Icechunk's `Storage.new_redirect`, with the redirects already
    /// followed by `floe.storage.redirect_storage`): a storage URL (`s3://`, `gs://`,
    /// `az://`, `file://`) opened with credentials from the environment, or
    /// `http(s)+icechunk://...` for a repository served over HTTP. Writes raise
    /// `FloeError` (read-only storage). Pickles with both URLs (not resolved again).
    #[classmethod]
    fn _new_redirect(
        _cls: &Bound<'_, PyType>,
        base_url: &str,
        location: &str,
    ) -> PyResult<Storage> {
        StorageRecipe::Redirect {
            base_url: Some(base_url.to_string()),
            location: Some(location.to_string()),
        }
        .open(None)
    }

    /// A repository in this process's memory (not picklable).
    #[classmethod]
    fn new_in_memory(_cls: &Bound<'_, PyType>) -> Storage {
        Storage::with_recipe(floe::storage::new_in_memory_storage(), None)
    }

    /// S3 or an S3-compatible server (Icechunk's `Storage.new_s3`): `config` an
    /// `S3Options`, `credentials` an `S3Credentials` variant (`None`: from the
    /// environment). Raises `ValueError` for `legacy_rooted_keys=True`.
    #[classmethod]
    #[pyo3(signature = (config, bucket, prefix, credentials=None, legacy_rooted_keys=None, *, read_headers=None, write_headers=None, headers=None))]
    #[allow(clippy::too_many_arguments)]
    fn new_s3<'py>(
        _cls: &Bound<'py, PyType>,
        config: Bound<'py, PyAny>,
        bucket: Bound<'py, PyAny>,
        prefix: Bound<'py, PyAny>,
        credentials: Option<Bound<'py, PyAny>>,
        legacy_rooted_keys: Option<Bound<'py, PyAny>>,
        read_headers: Option<Bound<'py, PyAny>>,
        write_headers: Option<Bound<'py, PyAny>>,
        headers: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Storage> {
        S3Args {
            config: Some(config),
            bucket: Some(bucket),
            prefix: Some(prefix),
            credentials,
            legacy_rooted_keys,
            read_headers,
            write_headers,
            headers,
        }
        .recipe(S3Flavor::S3)?
        .open(None)
    }

    /// Tigris (Icechunk's `Storage.new_tigris`): S3 at `https://t3.storage.dev`
    /// unless `config.endpoint_url` says otherwise, with Tigris' consistency headers
    /// for `config.region` (required); `use_weak_consistency=True` makes it
    /// read-only, without them.
    #[classmethod]
    #[pyo3(signature = (config, bucket, prefix, use_weak_consistency, credentials=None, legacy_rooted_keys=None, *, read_headers=None, write_headers=None, headers=None))]
    #[allow(clippy::too_many_arguments)]
    fn new_tigris<'py>(
        _cls: &Bound<'py, PyType>,
        config: Bound<'py, PyAny>,
        bucket: Bound<'py, PyAny>,
        prefix: Bound<'py, PyAny>,
        use_weak_consistency: Bound<'py, PyAny>,
        credentials: Option<Bound<'py, PyAny>>,
        legacy_rooted_keys: Option<Bound<'py, PyAny>>,
        read_headers: Option<Bound<'py, PyAny>>,
        write_headers: Option<Bound<'py, PyAny>>,
        headers: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Storage> {
        let flavor = S3Flavor::Tigris {
            use_weak_consistency: arg(Some(use_weak_consistency))?,
        };
        S3Args {
            config: Some(config),
            bucket: Some(bucket),
            prefix: Some(prefix),
            credentials,
            legacy_rooted_keys,
            read_headers,
            write_headers,
            headers,
        }
        .recipe(flavor)?
        .open(None)
    }

    /// Cloudflare R2 (Icechunk's `Storage.new_r2`): S3 at
    /// `https://<account_id>.r2.cloudflarestorage.com` (or `config.endpoint_url`;
    /// one of them is required, else `ValueError`), region `auto` by default, path
    /// style.
    #[classmethod]
    #[pyo3(signature = (config, bucket=None, prefix=None, account_id=None, credentials=None, legacy_rooted_keys=None, *, read_headers=None, write_headers=None, headers=None))]
    #[allow(clippy::too_many_arguments)]
    fn new_r2<'py>(
        _cls: &Bound<'py, PyType>,
        config: Bound<'py, PyAny>,
        bucket: Option<Bound<'py, PyAny>>,
        prefix: Option<Bound<'py, PyAny>>,
        account_id: Option<Bound<'py, PyAny>>,
        credentials: Option<Bound<'py, PyAny>>,
        legacy_rooted_keys: Option<Bound<'py, PyAny>>,
        read_headers: Option<Bound<'py, PyAny>>,
        write_headers: Option<Bound<'py, PyAny>>,
        headers: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Storage> {
        let flavor = S3Flavor::R2 {
            account_id: arg(account_id)?,
        };
        S3Args {
            config: Some(config),
            bucket,
            prefix,
            credentials,
            legacy_rooted_keys,
            read_headers,
            write_headers,
            headers,
        }
        .recipe(flavor)?
        .open(None)
    }

    /// Google Cloud Storage (Icechunk's `Storage.new_gcs`): `credentials` a
    /// `GcsCredentials` variant (`None`: from the environment; `STORAGE_EMULATOR_HOST`
    /// points at an emulator), `config` object_store `GoogleConfigKey` options.
    /// Extra headers raise `ValueError` (not supported on GCS by floe).
    #[classmethod]
    #[pyo3(signature = (bucket, prefix, credentials=None, *, config=None, read_headers=None, write_headers=None, headers=None))]
    #[allow(clippy::too_many_arguments)]
    fn new_gcs<'py>(
        _cls: &Bound<'py, PyType>,
        bucket: Bound<'py, PyAny>,
        prefix: Bound<'py, PyAny>,
        credentials: Option<Bound<'py, PyAny>>,
        config: Option<Bound<'py, PyAny>>,
        read_headers: Option<Bound<'py, PyAny>>,
        write_headers: Option<Bound<'py, PyAny>>,
        headers: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Storage> {
        StorageRecipe::gcs(
            Some(bucket),
            Some(prefix),
            credentials,
            config,
            [read_headers, write_headers, headers],
        )?
        .open(None)
    }

    /// Azure Blob Storage (Icechunk's `Storage.new_azure_blob`): `credentials` an
    /// `AzureCredentials` variant (`None`: from the environment), `config`
    /// object_store `AzureConfigKey` options (`azure_storage_use_emulator`, ...).
    #[classmethod]
    #[pyo3(signature = (account, container, prefix, credentials=None, *, config=None))]
    fn new_azure_blob<'py>(
        _cls: &Bound<'py, PyType>,
        account: Bound<'py, PyAny>,
        container: Bound<'py, PyAny>,
        prefix: Bound<'py, PyAny>,
        credentials: Option<Bound<'py, PyAny>>,
        config: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Storage> {
        StorageRecipe::azure(
            Some(account),
            Some(container),
            Some(prefix),
            credentials,
            config,
        )?
        .open(None)
    }

    /// A read-only repository served over HTTP(S) at `base_url` (Icechunk's
    /// `Storage.new_http`): `config` object_store `ClientConfigKey` options,
    /// `headers` sent with every request. Writes raise `FloeError` (read-only
    /// storage) before any request.
    #[classmethod]
    #[pyo3(signature = (base_url, config=None, headers=None))]
    fn new_http<'py>(
        _cls: &Bound<'py, PyType>,
        base_url: Bound<'py, PyAny>,
        config: Option<Bound<'py, PyAny>>,
        headers: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Storage> {
        StorageRecipe::http(Some(base_url), config, headers)?.open(None)
    }
}

/// A repository in the local directory `path` (created when missing), with
/// cross-process compare-and-swap.
#[pyfunction]
fn local_filesystem_storage(path: &str) -> PyResult<Storage> {
    StorageRecipe::Local {
        path: Some(path.to_string()),
    }
    .open(None)
}

/// A repository in this process's memory.
#[pyfunction]
fn in_memory_storage() -> Storage {
    Storage::with_recipe(floe::storage::new_in_memory_storage(), None)
}

/// A storage that waits before each request it forwards to `inner` (Icechunk
/// 2.3.0's `icechunk.testing.LatencyStorage`, for tests and benchmarks that need the
/// timing of a distant object store): `write_latency_ms` milliseconds before each
/// write (`put`, conditional writes, deletes), `read_latency_ms` before each read
/// (gets, heads, the start of a listing). Both are integers >= 0 (a negative value
/// raises `OverflowError`) and can be changed at any time; repositories and sessions
/// already using the storage see the new values on their next request. Not
/// picklable (`TypeError`), like in-memory storage: the latencies live in this
/// process.
#[pyclass(module = "floe._floe", name = "LatencyStorage", extends = Storage, frozen)]
pub(crate) struct LatencyStorage {
    latency: Arc<floe::storage::LatencyStorage>,
}

#[pymethods]
impl LatencyStorage {
    #[new]
    #[pyo3(signature = (inner, *, write_latency_ms = 0, read_latency_ms = 0))]
    fn new(
        inner: PyRef<'_, Storage>,
        write_latency_ms: u64,
        read_latency_ms: u64,
    ) -> PyClassInitializer<Self> {
        let latency = Arc::new(floe::storage::LatencyStorage::new(
            Arc::clone(&inner.inner),
            write_latency_ms,
            read_latency_ms,
        ));
        let base = Storage {
            inner: Arc::clone(&latency) as Arc<dyn floe::storage::Storage>,
            recipe: None,
        };
        PyClassInitializer::from(base).add_subclass(LatencyStorage { latency })
    }

    /// Milliseconds waited before each write.
    #[getter]
    fn write_latency_ms(&self) -> u64 {
        self.latency.write_delay_ms()
    }

    #[setter]
    fn set_write_latency_ms(&self, ms: u64) {
        self.latency.set_write_delay_ms(ms);
    }

    /// Milliseconds waited before each read.
    #[getter]
    fn read_latency_ms(&self) -> u64 {
        self.latency.read_delay_ms()
    }

    #[setter]
    fn set_read_latency_ms(&self, ms: u64) {
        self.latency.set_read_delay_ms(ms);
    }

    fn __repr__(&self) -> String {
        format!(
            "LatencyStorage(write_latency_ms={}, read_latency_ms={})",
            self.latency.write_delay_ms(),
            self.latency.read_delay_ms()
        )
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Storage>()?;
    m.add_class::<LatencyStorage>()?;
    m.add_class::<S3Options>()?;
    m.add_class::<ChecksumAlgorithm>()?;
    m.add_function(wrap_pyfunction!(local_filesystem_storage, m)?)?;
    m.add_function(wrap_pyfunction!(in_memory_storage, m)?)?;
    m.add_function(wrap_pyfunction!(storage_from_url, m)?)?;
    m.add_function(wrap_pyfunction!(_storage_from_recipe, m)?)?;
    Ok(())
}
