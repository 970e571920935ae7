//! What a REPO argument points at, and resolving `--ref` / `--as-of`.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::args::{RefArgs, VirtualArgs};
use super::{CliError, CliResult};
use floe::format::config::ContainerStore;
use floe::repository::{OpenOptions, Repository, VersionSelector};
use floe::session::Session;
use floe::storage::{
    create_storage, open_storage, parse_storage_url, StorageError, StorageLocation,
};
use floe::storage::{AzureCredentials, GcsCredentials};
use floe::virtual_refs::{ContainerCredentials, VirtualAccess};
use floe::zarr::Store;

/// Opens the repository at `location`.
///
/// # Errors
/// Storage errors for a bad URL; [`floe::Error::RepositoryNotFound`] and friends.
pub(super) async fn open_repo(location: &str, allow_virtual: &[String]) -> CliResult<Repository> {
    let virtual_reads = VirtualArgs {
        allow_virtual: allow_virtual.to_vec(),
        ..VirtualArgs::default()
    };
    open_repo_reading(location, &virtual_reads).await
}

/// Opens the repository at `location`, reading virtual chunks as `virtual_reads`
/// says (authorized prefixes, the reader's own containers, read deadline).
///
/// # Errors
/// As [`open_repo`]; [`CliError::Usage`] for a bad `--allow-virtual` or
/// `--virtual-container` prefix.
pub(super) async fn open_repo_reading(
    location: &str,
    virtual_reads: &VirtualArgs,
) -> CliResult<Repository> {
    let storage = repo_storage(location)?;
    let mut access = VirtualAccess::prefixes(&virtual_reads.allow_virtual)
        .map_err(|e| CliError::Usage(format!("--allow-virtual: {e}")))?;
    // The reader's own containers: authorized, trusted, and signed with the
    // environment's credentials.
    let mut credentials = Vec::new();
    for c in &virtual_reads.virtual_containers {
        access
            .authorize(&c.url_prefix)
            .map_err(|e| CliError::Usage(format!("--virtual-container: {e}")))?;
        match c.store {
            ContainerStore::Gcs(_) => credentials.push((
                c.url_prefix.clone(),
                ContainerCredentials::Gcs(GcsCredentials::FromEnv),
            )),
            ContainerStore::Azure(_) => credentials.push((
                c.url_prefix.clone(),
                ContainerCredentials::Azure(AzureCredentials::FromEnv),
            )),
            _ => {}
        }
    }
    let mut opts = OpenOptions::default()
        .virtual_access(access)
        .virtual_containers(virtual_reads.virtual_containers.clone())
        .virtual_credentials(credentials);
    if let Some(deadline) = virtual_reads.virtual_read_deadline {
        opts = opts.virtual_read_deadline(deadline);
    }
    Ok(Repository::open_with(storage, opts).await?)
}

/// The storage of the existing repository at `location`.
///
/// # Errors
/// Storage errors for a bad URL; [`floe::Error::RepositoryNotFound`] for a missing
/// directory.
pub(super) fn repo_storage(location: &str) -> CliResult<Arc<dyn floe::storage::Storage>> {
    match open_storage(location, None) {
        Ok(s) => Ok(s),
        Err(StorageError::NotFound { .. }) => Err(floe::Error::RepositoryNotFound {
            location: location.to_string(),
        }
        .into()),
        Err(e) => Err(e.into()),
    }
}

/// Creates a repository at `location`, storing `config` when given.
///
/// # Errors
/// As [`Repository::create`].
pub(super) async fn create_repo(
    location: &str,
    spec: floe::format::SpecVersion,
    config: Option<floe::format::config::RepositoryConfig>,
) -> CliResult<Repository> {
    let storage = create_storage(location, None)?;
    Ok(Repository::create_with(storage, config, spec, floe::OpenOptions::default()).await?)
}

/// Whether `location` is a plain Zarr filesystem store (a local directory with
/// `zarr.json`, `.zgroup` or `.zarray` at its root) rather than a repository.
pub(super) fn plain_zarr_store(location: &str) -> Option<std::path::PathBuf> {
    let Ok(StorageLocation::Local(path)) = parse_storage_url(location) else {
        return None;
    };
    if path.join(floe::format::keys::branch("main")).exists() {
        return None;
    }
    super::plain_store::is_zarr_dir(&path).then_some(path)
}

/// Parses the time given to `flag` (`--as-of`, `--older-than`): an RFC 3339 time
/// (`2024-05-01T12:00:00Z`), `now`, or a time ago as one or more `<count><unit>`
/// groups with units `s`, `m`, `h`, `d` and `w` (`7d`, `12h`, `1d12h`, `90s`).
///
/// # Errors
/// [`CliError::Usage`] naming the flag and the value, with the accepted forms.
pub(super) fn parse_time(flag: &str, text: &str) -> CliResult<DateTime<Utc>> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("now") {
        return Ok(Utc::now());
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    let bad = || {
        CliError::Usage(format!(
            "{flag} `{text}` is not a time: give an RFC 3339 time (2024-05-01T12:00:00Z), \
             `now`, or a time ago such as 7d, 12h, 30m or 1d12h"
        ))
    };
    let seconds = duration_seconds(text).ok_or_else(bad)?;
    chrono::Duration::try_seconds(seconds)
        .and_then(|ago| Utc::now().checked_sub_signed(ago))
        .ok_or_else(bad)
}

/// Parses the length of time given to `flag` (`--keep-within`): one or more
/// `<count><unit>` groups with units `s`, `m`, `h`, `d` and `w` (`30d`, `1d12h`).
///
/// # Errors
/// [`CliError::Usage`] naming the flag and the value, with the accepted forms.
pub(super) fn parse_duration(flag: &str, text: &str) -> CliResult<std::time::Duration> {
    duration_seconds(text.trim())
        .and_then(|s| u64::try_from(s).ok())
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| {
            CliError::Usage(format!(
                "{flag} `{text}` is not a length of time: give counts with units s, m, h, d \
                 or w, such as 30d, 12h or 1d12h"
            ))
        })
}

/// Seconds in `text`, one or more `<count><unit>` groups (units `s`, `m`, `h`,
/// `d`, `w`); `None` when malformed, empty or beyond `i64`.
fn duration_seconds(text: &str) -> Option<i64> {
    let mut seconds: i64 = 0;
    let mut digits = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit: i64 = match c {
            's' => 1,
            'm' => 60,
            'h' => 3_600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return None,
        };
        let count: i64 = digits.parse().ok()?;
        digits.clear();
        seconds = count
            .checked_mul(unit)
            .and_then(|s| seconds.checked_add(s))?;
    }
    (digits.is_empty() && !text.is_empty()).then_some(seconds)
}

/// The snapshot selector for `--ref` / `--as-of`.
///
/// # Errors
/// Unknown refs, deleted tags, `--as-of` on something other than a branch.
pub(super) async fn selector(repo: &Repository, at: &RefArgs) -> CliResult<VersionSelector> {
    let sel = repo.resolve_ref(&at.reference).await?;
    match (&at.as_of, sel) {
        (None, sel) => Ok(sel),
        (Some(t), VersionSelector::Branch(branch)) => Ok(VersionSelector::AsOf {
            branch,
            time: parse_time("--as-of", t)?,
        }),
        (Some(_), _) => Err(CliError::Usage(format!(
            "--as-of needs a branch, and `{}` is not one",
            at.reference
        ))),
    }
}

/// What `ls` and `cat` read: a snapshot of a repository, or a plain Zarr store.
pub(super) enum Source {
    /// A read-only session of a repository at `--ref` / `--as-of`.
    Repo(Session),
    /// A plain Zarr v3/v2 filesystem store (`--ref` does not apply).
    Plain(Arc<dyn Store>),
}

impl Source {
    /// The Zarr store view.
    pub(super) fn store(&self) -> Arc<dyn Store> {
        match self {
            Source::Repo(s) => Arc::new(s.store()),
            Source::Plain(s) => Arc::clone(s),
        }
    }
}

/// Opens `location` for reading: a plain Zarr store when it is one (see
/// [`plain_zarr_store`]), else a repository session at `at`, authorized to read
/// virtual chunks as `virtual_reads` says.
///
/// # Errors
/// As [`open_repo`] and [`selector`]; plain store errors.
pub(super) async fn open_source(
    location: &str,
    at: &RefArgs,
    virtual_reads: &VirtualArgs,
) -> CliResult<Source> {
    if let Some(dir) = plain_zarr_store(location) {
        return Ok(Source::Plain(super::plain_store::open(&dir)?));
    }
    let repo = open_repo_reading(location, virtual_reads).await?;
    let session = repo.readonly_session(&selector(&repo, at).await?).await?;
    Ok(Source::Repo(session))
}
