//! Credentials for the storage constructors, as Icechunk 2.3.0's classes:
//! `S3StaticCredentials`, `S3Credentials` (`FromEnv`, `Anonymous`, `Static`,
//! `Refreshable`), `GcsBearerCredential`, `GcsStaticCredentials`, `GcsCredentials`,
//! `AzureRefreshableCredential`, `AzureStaticCredentials`, `AzureCredentials` and
//! `Credentials` (a credential for a virtual chunk container).
//!
//! Refreshable credentials hold a pickled Python function (Icechunk's
//! `get_credentials`, pickled by `s3_refreshable_credentials` & co.) and optionally a
//! first credential (`scatter_initial_credentials=True`). The storage built from them
//! unpickles the function once and calls it, off the async executor and with the GIL,
//! whenever it has no credential or its credential expired
//! (`floe::storage::cloud::RefreshingCredentials`); a credential without
//! `expires_after` serves that storage until the process ends.
//!
//! Every class pickles. The pickle of static credentials and of a refreshable
//! credential's first credential carries its secrets, as Icechunk's does: a storage
//! sent to a worker must be able to sign requests there.

use std::sync::{Arc, OnceLock};

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use floe::storage::cloud::{CredentialFetcher, Expiring, RefreshingCredentials};

/// An S3 access key (Icechunk's `S3StaticCredentials`): `access_key_id`,
/// `secret_access_key`, optional `session_token` and `expires_after` (a datetime;
/// refreshable credentials past it are fetched again, static ones ignore it).
#[pyclass(module = "floe._floe", get_all, set_all, from_py_object, eq)]
#[derive(Clone, PartialEq)]
pub(crate) struct S3StaticCredentials {
    /// The access key id.
    pub(crate) access_key_id: String,
    /// The secret access key.
    pub(crate) secret_access_key: String,
    /// The session token of temporary credentials.
    pub(crate) session_token: Option<String>,
    /// When the credentials expire (UTC); `None`: never.
    pub(crate) expires_after: Option<DateTime<Utc>>,
}

impl S3StaticCredentials {
    /// The redacted fields (name, text) shown by the displays.
    fn redacted(&self, py: Python<'_>) -> PyResult<Vec<(&'static str, String)>> {
        let key: String = self.access_key_id.chars().take(4).collect();
        let expires = match self.expires_after {
            Some(t) => t.into_pyobject(py)?.repr()?.extract::<String>()?,
            None => "None".to_string(),
        };
        Ok(vec![
            ("access_key_id", format!("{key}****")),
            ("secret_access_key", "****".to_string()),
            (
                "session_token",
                if self.session_token.is_some() {
                    "****"
                } else {
                    "None"
                }
                .to_string(),
            ),
            ("expires_after", expires),
        ])
    }

    /// `floe._display.<function>("credentials.S3StaticCredentials", fields)`.
    fn display(&self, py: Python<'_>, function: &str) -> PyResult<String> {
        let display = py.import("floe._display")?;
        let header = display.call_method1("qualified", ("credentials.S3StaticCredentials",))?;
        display
            .call_method1(function, (header, self.redacted(py)?))?
            .extract()
    }
}

#[pymethods]
impl S3StaticCredentials {
    #[new]
    #[pyo3(signature = (access_key_id, secret_access_key, session_token=None, expires_after=None))]
    fn new(
        access_key_id: String,
        secret_access_key: String,
        session_token: Option<String>,
        expires_after: Option<DateTime<Utc>>,
    ) -> Self {
        S3StaticCredentials {
            access_key_id,
            secret_access_key,
            session_token,
            expires_after,
        }
    }

    /// Icechunk's redacted layout: `<icechunk.credentials.S3StaticCredentials>`,
    /// then `access_key_id` as its first 4 characters and `****`, the secret and a
    /// token as `****`, and `expires_after`. Secrets are never shown.
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        self.display(py, "text_block")
    }

    fn __str__(&self, py: Python<'_>) -> PyResult<String> {
        self.display(py, "text_block")
    }

    /// The redacted fields as an HTML block (Jupyter).
    fn _repr_html_(&self, py: Python<'_>) -> PyResult<String> {
        self.display(py, "html_block")
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let s = slf.borrow();
        let args = (
            s.access_key_id.clone(),
            s.secret_access_key.clone(),
            s.session_token.clone(),
            s.expires_after,
        )
            .into_pyobject(slf.py())?;
        Ok((slf.get_type().into_any(), args))
    }
}

/// How an S3 storage signs its requests (Icechunk's `S3Credentials`).
#[pyclass(module = "floe._floe", from_py_object, eq)]
#[derive(Clone, PartialEq)]
pub(crate) enum S3Credentials {
    /// The `AWS_*` environment variables (and object_store's other sources).
    FromEnv(),
    /// No signature (public buckets).
    Anonymous(),
    /// A fixed access key.
    Static(S3StaticCredentials),
    /// Keys from a pickled function, fetched when missing or expired.
    #[pyo3(constructor = (pickled_function, current=None))]
    Refreshable {
        /// `pickle.dumps(get_credentials)`.
        pickled_function: Vec<u8>,
        /// The first credential (scattered with the storage), or `None`.
        current: Option<S3StaticCredentials>,
    },
}

/// A GCS OAuth bearer token with its expiry (Icechunk's `GcsBearerCredential`).
#[pyclass(module = "floe._floe", get_all, from_py_object, eq)]
#[derive(Clone, PartialEq)]
pub(crate) struct GcsBearerCredential {
    /// The token.
    pub(crate) bearer: String,
    /// When it expires (UTC); `None`: never.
    pub(crate) expires_after: Option<DateTime<Utc>>,
}

#[pymethods]
impl GcsBearerCredential {
    #[new]
    #[pyo3(signature = (bearer, *, expires_after=None))]
    fn new(bearer: String, expires_after: Option<DateTime<Utc>>) -> Self {
        GcsBearerCredential {
            bearer,
            expires_after,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "GcsBearerCredential(bearer=<hidden>, expires_after={:?})",
            self.expires_after.map(|t| t.to_rfc3339())
        )
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let py = slf.py();
        let s = slf.borrow();
        let f = py
            .import("floe.credentials")?
            .getattr("_gcs_bearer_credential")?;
        Ok((
            f,
            (s.bearer.clone(), s.expires_after)
                .into_pyobject(py)?
                .into_any(),
        ))
    }
}

/// A fixed GCS credential (Icechunk's `GcsStaticCredentials`).
#[pyclass(module = "floe._floe", from_py_object, eq)]
#[derive(Clone, PartialEq)]
pub(crate) enum GcsStaticCredentials {
    /// A service account JSON file at this path.
    ServiceAccount(String),
    /// A serialized service account key.
    ServiceAccountKey(String),
    /// An application default credentials file at this path.
    ApplicationCredentials(String),
    /// A bearer token.
    BearerToken(String),
}

/// How a GCS storage authenticates (Icechunk's `GcsCredentials`).
#[pyclass(module = "floe._floe", from_py_object, eq)]
#[derive(Clone, PartialEq)]
pub(crate) enum GcsCredentials {
    /// Unsigned requests.
    Anonymous(),
    /// `GOOGLE_*` variables, application default credentials, the metadata server;
    /// `STORAGE_EMULATOR_HOST` points at an emulator.
    FromEnv(),
    /// A fixed credential.
    Static(GcsStaticCredentials),
    /// Bearer tokens from a pickled function, fetched when missing or expired.
    #[pyo3(constructor = (pickled_function, current=None))]
    Refreshable {
        /// `pickle.dumps(get_credentials)`.
        pickled_function: Vec<u8>,
        /// The first token, or `None`.
        current: Option<GcsBearerCredential>,
    },
}

/// An Azure credential with an expiry, as a refreshable function returns it
/// (Icechunk's `AzureRefreshableCredential`).
#[pyclass(module = "floe._floe", from_py_object, eq)]
#[derive(Clone, PartialEq)]
pub(crate) enum AzureRefreshableCredential {
    /// A storage account key (base64).
    #[pyo3(constructor = (key, *, expires_after=None))]
    AccessKey {
        /// The key.
        key: String,
        /// When it expires (UTC).
        expires_after: Option<DateTime<Utc>>,
    },
    /// A shared access signature (its query string).
    #[pyo3(constructor = (token, *, expires_after=None))]
    SasToken {
        /// The token.
        token: String,
        /// When it expires (UTC).
        expires_after: Option<DateTime<Utc>>,
    },
    /// An OAuth bearer token.
    #[pyo3(constructor = (bearer, *, expires_after=None))]
    BearerToken {
        /// The token.
        bearer: String,
        /// When it expires (UTC).
        expires_after: Option<DateTime<Utc>>,
    },
}

/// A fixed Azure credential (Icechunk's `AzureStaticCredentials`).
#[pyclass(module = "floe._floe", from_py_object, eq)]
#[derive(Clone, PartialEq)]
pub(crate) enum AzureStaticCredentials {
    /// A storage account key (base64).
    AccessKey(String),
    /// A shared access signature (its query string).
    SasToken(String),
    /// An OAuth bearer token.
    BearerToken(String),
}

/// How an Azure storage authenticates (Icechunk's `AzureCredentials`).
#[pyclass(module = "floe._floe", from_py_object, eq)]
#[derive(Clone, PartialEq)]
pub(crate) enum AzureCredentials {
    /// Unsigned requests (public containers).
    Anonymous(),
    /// `AZURE_*` variables (`AZURE_STORAGE_ACCOUNT_KEY`, `AZURE_STORAGE_USE_EMULATOR`,
    /// ...), managed identity, the Azure CLI.
    FromEnv(),
    /// A fixed credential.
    Static(AzureStaticCredentials),
    /// Credentials from a pickled function, fetched when missing or expired.
    #[pyo3(constructor = (pickled_function, current=None))]
    Refreshable {
        /// `pickle.dumps(get_credentials)`.
        pickled_function: Vec<u8>,
        /// The first credential, or `None`.
        current: Option<AzureRefreshableCredential>,
    },
}

/// A credential for a virtual chunk container (Icechunk's `Credentials`), as
/// `containers_credentials` builds them.
#[pyclass(module = "floe._floe", from_py_object, eq)]
#[derive(Clone, PartialEq)]
pub(crate) enum Credentials {
    /// S3 credentials.
    S3(S3Credentials),
    /// GCS credentials.
    Gcs(GcsCredentials),
    /// Azure credentials.
    Azure(AzureCredentials),
    /// Access to a `file://` container (no credential needed).
    LocalFileSystemAccess(),
    /// Access to an `http(s)://` container (no credential needed).
    HttpAccess(),
}

/// `__reduce__` of a complex-enum variant: its class and its fields, read back
/// through the variant's own attributes (`_0`, `_1`... or field names).
fn reduce_variant<'py>(
    slf: &Bound<'py, PyAny>,
    fields: &[&str],
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
    let values = fields
        .iter()
        .map(|f| slf.getattr(*f))
        .collect::<PyResult<Vec<_>>>()?;
    Ok((slf.get_type().into_any(), PyTuple::new(slf.py(), values)?))
}

/// The pickled function of a refreshable variant, read back as `bytes` (Icechunk's
/// constructor argument type).
fn reduce_refreshable<'py>(
    slf: &Bound<'py, PyAny>,
    pickled: &[u8],
    current: Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
    let py = slf.py();
    let args = PyTuple::new(py, [PyBytes::new(py, pickled).into_any(), current])?;
    Ok((slf.get_type().into_any(), args))
}

#[pymethods]
impl S3Credentials {
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let any = slf.as_any();
        match &*slf.borrow() {
            S3Credentials::FromEnv() | S3Credentials::Anonymous() => reduce_variant(any, &[]),
            S3Credentials::Static(_) => reduce_variant(any, &["_0"]),
            S3Credentials::Refreshable {
                pickled_function, ..
            } => reduce_refreshable(any, pickled_function, any.getattr("current")?),
        }
    }

    /// The variant; static keys redacted as `S3StaticCredentials`' display.
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(match self {
            S3Credentials::FromEnv() => "S3Credentials.FromEnv()".into(),
            S3Credentials::Anonymous() => "S3Credentials.Anonymous()".into(),
            S3Credentials::Static(c) => {
                format!("S3Credentials.Static({})", c.display(py, "text_block")?)
            }
            S3Credentials::Refreshable { current, .. } => format!(
                "S3Credentials.Refreshable(<function>, current={})",
                match current {
                    Some(c) => c.display(py, "text_block")?,
                    None => "None".into(),
                }
            ),
        })
    }
}

#[pymethods]
impl GcsStaticCredentials {
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        reduce_variant(slf.as_any(), &["_0"])
    }
}

#[pymethods]
impl GcsCredentials {
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let any = slf.as_any();
        match &*slf.borrow() {
            GcsCredentials::FromEnv() | GcsCredentials::Anonymous() => reduce_variant(any, &[]),
            GcsCredentials::Static(_) => reduce_variant(any, &["_0"]),
            GcsCredentials::Refreshable {
                pickled_function, ..
            } => reduce_refreshable(any, pickled_function, any.getattr("current")?),
        }
    }
}

#[pymethods]
impl AzureRefreshableCredential {
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let py = slf.py();
        let (kind, secret, expires) = match &*slf.borrow() {
            AzureRefreshableCredential::AccessKey { key, expires_after } => {
                ("access_key", key.clone(), *expires_after)
            }
            AzureRefreshableCredential::SasToken {
                token,
                expires_after,
            } => ("sas_token", token.clone(), *expires_after),
            AzureRefreshableCredential::BearerToken {
                bearer,
                expires_after,
            } => ("bearer_token", bearer.clone(), *expires_after),
        };
        let f = py
            .import("floe.credentials")?
            .getattr("_azure_refreshable_credential")?;
        Ok((f, (kind, secret, expires).into_pyobject(py)?.into_any()))
    }
}

#[pymethods]
impl AzureStaticCredentials {
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        reduce_variant(slf.as_any(), &["_0"])
    }
}

#[pymethods]
impl AzureCredentials {
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let any = slf.as_any();
        match &*slf.borrow() {
            AzureCredentials::FromEnv() | AzureCredentials::Anonymous() => reduce_variant(any, &[]),
            AzureCredentials::Static(_) => reduce_variant(any, &["_0"]),
            AzureCredentials::Refreshable {
                pickled_function, ..
            } => reduce_refreshable(any, pickled_function, any.getattr("current")?),
        }
    }
}

#[pymethods]
impl Credentials {
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let any = slf.as_any();
        match &*slf.borrow() {
            Credentials::LocalFileSystemAccess() | Credentials::HttpAccess() => {
                reduce_variant(any, &[])
            }
            _ => reduce_variant(any, &["_0"]),
        }
    }
}

/// Converts what a Python credential function returned into a credential.
type Convert<C> = fn(&Bound<'_, PyAny>) -> PyResult<Expiring<C>>;

/// Calls a pickled Python function for credentials: unpickled on first use, called
/// on a blocking thread with the GIL.
pub(crate) struct PyFetcher<C> {
    inner: Arc<PyFunction<C>>,
}

/// The function of a [`PyFetcher`], shared with the blocking task that calls it.
struct PyFunction<C> {
    pickled: Vec<u8>,
    function: OnceLock<Py<PyAny>>,
    convert: Convert<C>,
}

impl<C> std::fmt::Debug for PyFetcher<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PyFetcher(<python function>)")
    }
}

impl<C> PyFunction<C> {
    /// Unpickles (once) and calls the function; the error names what failed.
    fn call(&self) -> Result<Expiring<C>, String> {
        Python::attach(|py| {
            let f = match self.function.get() {
                Some(f) => f.clone_ref(py),
                None => {
                    let f = py
                        .import("pickle")?
                        .getattr("loads")?
                        .call1((PyBytes::new(py, &self.pickled),))?
                        .unbind();
                    let _ = self.function.set(f.clone_ref(py));
                    f
                }
            };
            let out = f.bind(py).call0()?;
            (self.convert)(&out)
        })
        .map_err(|e: PyErr| format!("get_credentials failed: {e}"))
    }
}

impl<C: Send + 'static> CredentialFetcher<C> for PyFetcher<C> {
    fn fetch(&self) -> BoxFuture<'static, Result<Expiring<C>, String>> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || inner.call())
                .await
                .map_err(|e| format!("get_credentials did not finish: {e}"))?
        })
    }
}

/// A refreshing provider calling the pickled function, starting from `initial`.
pub(crate) fn refreshing<C>(
    pickled: Vec<u8>,
    initial: Option<Expiring<C>>,
    convert: Convert<C>,
) -> Arc<RefreshingCredentials<C>>
where
    C: Send + Sync + std::fmt::Debug + 'static,
{
    let fetcher = PyFetcher {
        inner: Arc::new(PyFunction {
            pickled,
            function: OnceLock::new(),
            convert,
        }),
    };
    Arc::new(RefreshingCredentials::new(Arc::new(fetcher), initial))
}

/// An S3 credential from static keys.
pub(crate) fn aws(c: &S3StaticCredentials) -> Expiring<object_store::aws::AwsCredential> {
    Expiring {
        credential: object_store::aws::AwsCredential {
            key_id: c.access_key_id.clone(),
            secret_key: c.secret_access_key.clone(),
            token: c.session_token.clone(),
        },
        expires_after: c.expires_after,
    }
}

/// What an S3 `get_credentials` returned (an `S3StaticCredentials`).
pub(crate) fn convert_s3(
    v: &Bound<'_, PyAny>,
) -> PyResult<Expiring<object_store::aws::AwsCredential>> {
    Ok(aws(&v.extract::<S3StaticCredentials>()?))
}

/// A GCS credential from a bearer token.
pub(crate) fn gcp(c: &GcsBearerCredential) -> Expiring<object_store::gcp::GcpCredential> {
    Expiring {
        credential: object_store::gcp::GcpCredential {
            bearer: c.bearer.clone(),
        },
        expires_after: c.expires_after,
    }
}

/// What a GCS `get_credentials` returned (a `GcsBearerCredential`).
pub(crate) fn convert_gcs(
    v: &Bound<'_, PyAny>,
) -> PyResult<Expiring<object_store::gcp::GcpCredential>> {
    Ok(gcp(&v.extract::<GcsBearerCredential>()?))
}

/// An Azure credential from a refreshable one.
pub(crate) fn azure(
    c: &AzureRefreshableCredential,
) -> PyResult<Expiring<object_store::azure::AzureCredential>> {
    let (kind, secret, expires_after) = match c {
        AzureRefreshableCredential::AccessKey { key, expires_after } => {
            ("access_key", key, *expires_after)
        }
        AzureRefreshableCredential::SasToken {
            token,
            expires_after,
        } => ("sas_token", token, *expires_after),
        AzureRefreshableCredential::BearerToken {
            bearer,
            expires_after,
        } => ("bearer_token", bearer, *expires_after),
    };
    let credential = floe::storage::cloud::azure_credential(kind, secret)
        .map_err(pyo3::exceptions::PyValueError::new_err)?;
    Ok(Expiring {
        credential,
        expires_after,
    })
}

/// The engine's GCS credentials of a Python `GcsCredentials` (a refreshable one
/// calls its pickled function when a request first needs a token, and again when
/// it expired).
pub(crate) fn gcs_credentials(c: GcsCredentials) -> floe::storage::GcsCredentials {
    use floe::storage::GcsCredentials as G;
    match c {
        GcsCredentials::FromEnv() => G::FromEnv,
        GcsCredentials::Anonymous() => G::Anonymous,
        GcsCredentials::Static(s) => match s {
            GcsStaticCredentials::ServiceAccount(p) => G::ServiceAccountFile(p),
            GcsStaticCredentials::ServiceAccountKey(k) => G::ServiceAccountKey(k),
            GcsStaticCredentials::ApplicationCredentials(p) => G::ApplicationCredentials(p),
            GcsStaticCredentials::BearerToken(t) => G::BearerToken(t),
        },
        GcsCredentials::Refreshable {
            pickled_function,
            current,
        } => G::Refreshable(refreshing(
            pickled_function,
            current.as_ref().map(gcp),
            convert_gcs,
        )),
    }
}

/// The engine's Azure credentials of a Python `AzureCredentials` (refreshable ones
/// as [`gcs_credentials`]).
///
/// # Errors
/// `ValueError` for an initial access key that is not base64.
pub(crate) fn azure_credentials(c: AzureCredentials) -> PyResult<floe::storage::AzureCredentials> {
    use floe::storage::AzureCredentials as A;
    Ok(match c {
        AzureCredentials::FromEnv() => A::FromEnv,
        AzureCredentials::Anonymous() => A::Anonymous,
        AzureCredentials::Static(s) => match s {
            AzureStaticCredentials::AccessKey(k) => A::AccessKey(k),
            AzureStaticCredentials::SasToken(t) => A::SasToken(t),
            AzureStaticCredentials::BearerToken(t) => A::BearerToken(t),
        },
        AzureCredentials::Refreshable {
            pickled_function,
            current,
        } => A::Refreshable(refreshing(
            pickled_function,
            current.as_ref().map(azure).transpose()?,
            convert_azure,
        )),
    })
}

/// What an Azure `get_credentials` returned (an `AzureRefreshableCredential`).
pub(crate) fn convert_azure(
    v: &Bound<'_, PyAny>,
) -> PyResult<Expiring<object_store::azure::AzureCredential>> {
    azure(&v.extract::<AzureRefreshableCredential>()?)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<S3StaticCredentials>()?;
    m.add_class::<S3Credentials>()?;
    m.add_class::<GcsBearerCredential>()?;
    m.add_class::<GcsStaticCredentials>()?;
    m.add_class::<GcsCredentials>()?;
    m.add_class::<AzureRefreshableCredential>()?;
    m.add_class::<AzureStaticCredentials>()?;
    m.add_class::<AzureCredentials>()?;
    m.add_class::<Credentials>()?;
    Ok(())
}
