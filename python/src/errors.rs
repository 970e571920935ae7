//! floe's errors as Python exceptions: Icechunk 2.3.0's exception tree, defined in
//! the pure-Python module `floe.exceptions` (imported at start-up and re-exported
//! by this module) and raised from here.
//!
//! Every failure maps in one place ([`classify`], [`classify_store`],
//! [`classify_storage`]) to a class (`ConflictError`, `NotFoundError` and its
//! subclasses, `AlreadyExistsError`, `ReadOnlyError`, `InvalidInputError`,
//! `SessionStateError`, `StorageError`, `FormatError`, `InternalError`), a
//! machine-readable kind (Icechunk's `ErrorKind` codes, [`Kind`]) and a message that
//! says what Icechunk's says where users match on it ("ref not found", "branch
//! update conflict", "the repository doesn't exist", "upgrade"). The full cause
//! chain rides along as a PEP 678 note. Errors raised through the zarr store keep
//! the class of the repository error behind them.

use pyo3::prelude::*;
use pyo3::types::PyList;

/// The exception classes of `floe.exceptions`, by their Python names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    Icechunk,
    Conflict,
    NodeNotFound,
    SnapshotNotFound,
    RefNotFound,
    RepositoryNotFound,
    AlreadyExists,
    ReadOnly,
    InvalidInput,
    SessionState,
    Storage,
    Format,
    Internal,
}

impl Class {
    /// Every class re-exported by `floe._floe`, with `RebaseFailedError`,
    /// `Conflict`, `ConflictType` and `ErrorKind`.
    const EXPORTED: &'static [&'static str] = &[
        "IcechunkError",
        "FloeError",
        "ConflictError",
        "RebaseFailedError",
        "Conflict",
        "ConflictType",
        "ErrorKind",
        "NotFoundError",
        "NodeNotFoundError",
        "SnapshotNotFoundError",
        "RefNotFoundError",
        "RepositoryNotFoundError",
        "AlreadyExistsError",
        "ReadOnlyError",
        "InvalidInputError",
        "SessionStateError",
        "StorageError",
        "FormatError",
        "InternalError",
    ];

    /// The class's name in `floe.exceptions`.
    fn name(self) -> &'static str {
        match self {
            Class::Icechunk => "IcechunkError",
            Class::Conflict => "ConflictError",
            Class::NodeNotFound => "NodeNotFoundError",
            Class::SnapshotNotFound => "SnapshotNotFoundError",
            Class::RefNotFound => "RefNotFoundError",
            Class::RepositoryNotFound => "RepositoryNotFoundError",
            Class::AlreadyExists => "AlreadyExistsError",
            Class::ReadOnly => "ReadOnlyError",
            Class::InvalidInput => "InvalidInputError",
            Class::SessionState => "SessionStateError",
            Class::Storage => "StorageError",
            Class::Format => "FormatError",
            Class::Internal => "InternalError",
        }
    }
}

/// Defines [`Kind`] with its codes and the list of all of them.
macro_rules! kinds {
    ($($variant:ident = $code:literal),* $(,)?) => {
        /// Icechunk 2.3.0's machine-readable error codes (`IcechunkError.kind`,
        /// Python's `floe.ErrorKind`): same set, same strings.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum Kind { $($variant),* }

        impl Kind {
            /// Every code, in Icechunk's order.
            pub(crate) const ALL: &'static [Kind] = &[$(Kind::$variant),*];

            /// The code's string (`"ref-not-found"`).
            pub(crate) fn code(self) -> &'static str {
                match self { $(Kind::$variant => $code),* }
            }
        }
    };
}

kinds! {
    CommitConflict = "commit-conflict",
    BranchUpdateConflict = "branch-update-conflict",
    RebaseFailed = "rebase-failed",
    ConfigUpdated = "config-updated",
    RepoInfoUpdated = "repo-info-updated",
    UpdateAttemptsExhausted = "update-attempts-exhausted",
    GcDeletesFailing = "gc-deletes-failing",
    NodeNotFound = "node-not-found",
    AncestorNodeNotFound = "ancestor-node-not-found",
    ChunkNotFound = "chunk-not-found",
    KeyNotFound = "key-not-found",
    SnapshotNotFound = "snapshot-not-found",
    NoSnapshotAtTime = "no-snapshot-at-time",
    RefNotFound = "ref-not-found",
    BranchNotFound = "branch-not-found",
    TagNotFound = "tag-not-found",
    RepositoryNotFound = "repository-not-found",
    ManifestInfoNotFound = "manifest-info-not-found",
    NodeAlreadyExists = "node-already-exists",
    BranchAlreadyExists = "branch-already-exists",
    TagAlreadyExists = "tag-already-exists",
    TagPreviouslyDeleted = "tag-previously-deleted",
    MoveWontOverwrite = "move-wont-overwrite",
    ReadOnlySession = "read-only-session",
    ReadOnlyStore = "read-only-store",
    ReadOnlyStorage = "read-only-storage",
    ReadOnlyRepository = "read-only-repository",
    InvalidKey = "invalid-key",
    InvalidChunkIndex = "invalid-chunk-index",
    ZeroLengthChunk = "zero-length-chunk",
    InvalidManifestSplitIndex = "invalid-manifest-split-index",
    InvalidRefType = "invalid-ref-type",
    InvalidRefName = "invalid-ref-name",
    InvalidSnapshotId = "invalid-snapshot-id",
    InvalidPath = "invalid-path",
    BadKeyPrefix = "bad-key-prefix",
    BadMetadata = "bad-metadata",
    BadPrefix = "bad-prefix",
    NotAnArray = "not-an-array",
    NotAGroup = "not-a-group",
    InvalidByteRange = "invalid-byte-range",
    InvalidCommitConfiguration = "invalid-commit-configuration",
    InvalidArrayMetadata = "invalid-array-metadata",
    InvalidFeatureFlag = "invalid-feature-flag",
    InvalidVirtualRef = "invalid-virtual-ref",
    InvalidCredentials = "invalid-credentials",
    NoContainerForVirtualChunk = "no-container-for-virtual-chunk",
    UnauthorizedVirtualChunkContainer = "unauthorized-virtual-chunk-container",
    EmptyPrefixCreation = "empty-prefix-creation",
    ParentDirectoryNotClean = "parent-directory-not-clean",
    BadSnapshotChainForDiff = "bad-snapshot-chain-for-diff",
    CommitNotAllowed = "commit-not-allowed",
    MergeNotAllowed = "merge-not-allowed",
    CannotForkReadOnlySession = "cannot-fork-read-only-session",
    RearrangeSessionOnly = "rearrange-session-only",
    NonRearrangeSession = "non-rearrange-session",
    MoveIntoSelfOrDescendant = "move-into-self-or-descendant",
    MoveDestinationParentMissing = "move-destination-parent-missing",
    MoveDestinationParentNotGroup = "move-destination-parent-not-group",
    NoChangesToCommit = "no-changes-to-commit",
    NoAmendForInitialCommit = "no-amend-for-initial-commit",
    NotOnBranch = "not-on-branch",
    NoSnapshot = "no-snapshot",
    CannotDeleteMain = "cannot-delete-main",
    UncommittedChanges = "uncommitted-changes",
    MergeFailed = "merge-failed",
    NotAllowed = "not-allowed",
    Unimplemented = "unimplemented",
    RebaseTxLogPruned = "rebase-tx-log-pruned",
    FeatureFlagDisabled = "feature-flag-disabled",
    TagError = "tag-error",
    InvalidRepositoryMigration = "invalid-repository-migration",
    ObjectNotFound = "object-not-found",
    ObjectStore = "object-store",
    Io = "io",
    StorageConfig = "storage-config",
    CannotParseUrl = "cannot-parse-url",
    BadRedirect = "bad-redirect",
    SemaphoreAcquire = "semaphore-acquire",
    Throttled = "throttled",
    StorageOther = "storage-other",
    VirtualChunkFetch = "virtual-chunk-fetch",
    VirtualChunkModified = "virtual-chunk-modified",
    InvalidObjectSize = "invalid-object-size",
    Serialization = "serialization",
    Deserialization = "deserialization",
    ConfigDeserialization = "config-deserialization",
    InvalidFileFormat = "invalid-file-format",
    UnsupportedSpecVersion = "unsupported-spec-version",
    UnsupportedOperationForVersion = "unsupported-operation-for-version",
    SnapshotTimestamp = "snapshot-timestamp",
    DuplicateSnapshotId = "duplicate-snapshot-id",
    Concurrency = "concurrency",
    Flush = "flush",
    PartialValuesPanic = "partial-values-panic",
    ConflictingPathNotFound = "conflicting-path-not-found",
    InconsistentManifests = "inconsistent-manifests",
    PoisonLock = "poison-lock",
    Pickle = "pickle",
    Unknown = "unknown",
}

/// What a failure raises: class, kind, message (`None`: the error's own text).
pub(crate) struct Classified {
    class: Class,
    kind: Kind,
    message: Option<String>,
}

fn c(class: Class, kind: Kind) -> Classified {
    Classified {
        class,
        kind,
        message: None,
    }
}

fn cm(class: Class, kind: Kind, message: String) -> Classified {
    Classified {
        class,
        kind,
        message: Some(message),
    }
}

/// The class, kind and message of a storage failure.
fn classify_storage(e: &floe::storage::StorageError) -> Classified {
    use floe::storage::StorageError as S;
    match e {
        S::NotFound { .. } => c(Class::Storage, Kind::ObjectNotFound),
        S::ShortRead { .. } => c(Class::Storage, Kind::InvalidObjectSize),
        S::InvalidRange { .. } => c(Class::InvalidInput, Kind::InvalidByteRange),
        S::InvalidLocation { .. } => c(Class::Storage, Kind::StorageConfig),
        S::Backend { .. } => c(Class::Storage, Kind::ObjectStore),
        S::Io { .. } => c(Class::Storage, Kind::Io),
        _ => c(Class::Storage, Kind::StorageOther),
    }
}

/// The class, kind and message of a format failure.
fn classify_format(e: &floe::format::FormatError) -> Classified {
    use floe::format::FormatError as F;
    match e {
        F::InvalidId { .. } => c(Class::InvalidInput, Kind::InvalidSnapshotId),
        F::InvalidPath { .. } => c(Class::InvalidInput, Kind::InvalidPath),
        F::UnsupportedSpecVersion { .. } => c(Class::Format, Kind::UnsupportedSpecVersion),
        F::InvalidConfig { .. } => c(Class::Format, Kind::ConfigDeserialization),
        F::ChunkIndexTooLarge { .. } => c(Class::InvalidInput, Kind::InvalidChunkIndex),
        F::ObjectTooLarge { .. } | F::MetadataTooDeep { .. } => {
            c(Class::InvalidInput, Kind::Serialization)
        }
        _ => c(Class::Format, Kind::Deserialization),
    }
}

fn virtual_kind(e: &floe::error::VirtualChunkError) -> Classified {
    use floe::error::VirtualChunkError as V;
    match e {
        V::InvalidUrl { .. } => c(Class::InvalidInput, Kind::InvalidVirtualRef),
        V::NoContainer { .. } => c(Class::InvalidInput, Kind::NoContainerForVirtualChunk),
        V::Unauthorized { .. } | V::UntrustedEndpoint { .. } => {
            c(Class::InvalidInput, Kind::UnauthorizedVirtualChunkContainer)
        }
        V::InvalidCredentials { .. } => c(Class::InvalidInput, Kind::InvalidCredentials),
        V::ChecksumMismatch { .. } => c(Class::Storage, Kind::VirtualChunkModified),
        _ => c(Class::Storage, Kind::VirtualChunkFetch),
    }
}

/// The class, kind and message of a repository or session failure (Icechunk's
/// classification of the same failure).
pub(crate) fn classify(e: &floe::Error) -> Classified {
    use floe::Error as E;
    match e {
        E::Storage(s) => classify_storage(s),
        E::Format(f) => classify_format(f),
        E::RepositoryNotFound { location } => cm(
            Class::RepositoryNotFound,
            Kind::RepositoryNotFound,
            format!("the repository doesn't exist (no repository at `{location}`)"),
        ),
        E::RepositoryExists { location } => cm(
            Class::InvalidInput,
            Kind::ParentDirectoryNotClean,
            format!(
                "repositories can only be created in clean prefixes: a repository already \
                 exists at `{location}`"
            ),
        ),
        E::UnsupportedOnSpecVersion {
            operation,
            spec_version,
        } => cm(
            Class::Format,
            Kind::UnsupportedSpecVersion,
            if *operation == "upgrade" {
                // Icechunk: only spec-1 repositories can be migrated.
                format!(
                    "invalid repository version ({}.0), this function can only migrate \
                     repositories that use version 1.0 of the specification, to \
                     repositories with spec version 2.0",
                    *spec_version as u8
                )
            } else {
                format!(
                    "repository version error: `{operation}` needs a repository of Icechunk \
                     spec version 2 or later, this one is spec {}; upgrade it with \
                     `upgrade_icechunk_repository` first",
                    *spec_version as u8
                )
            },
        ),
        E::InvalidRefName { .. } => c(Class::InvalidInput, Kind::InvalidRefName),
        E::BranchNotFound { name } | E::TagNotFound { name } => cm(
            Class::RefNotFound,
            Kind::RefNotFound,
            format!("ref not found `{name}`"),
        ),
        E::RefNotFound { reference } => cm(
            Class::RefNotFound,
            Kind::RefNotFound,
            format!("ref not found `{reference}`"),
        ),
        E::BranchExists { name } => cm(
            Class::AlreadyExists,
            Kind::BranchAlreadyExists,
            format!("branch already exists `{name}`"),
        ),
        E::CannotDeleteMain => cm(
            Class::SessionState,
            Kind::CannotDeleteMain,
            "main branch cannot be deleted".to_string(),
        ),
        E::TagExists { name } => cm(
            Class::AlreadyExists,
            Kind::TagAlreadyExists,
            format!("tag already exists, tags are immutable: `{name}`"),
        ),
        E::TagDeleted { name } => cm(
            Class::AlreadyExists,
            Kind::TagPreviouslyDeleted,
            format!("tag `{name}` was deleted and tags cannot be reused: `{name}`"),
        ),
        E::SnapshotNotFound { id } => cm(
            Class::SnapshotNotFound,
            Kind::SnapshotNotFound,
            format!("snapshot id not found `{id}`"),
        ),
        E::AncestryLoop { .. } => c(Class::Format, Kind::InvalidFileFormat),
        E::NoSnapshotAtTime { .. } => c(Class::SnapshotNotFound, Kind::NoSnapshotAtTime),
        E::BranchMoved {
            branch,
            expected,
            actual,
        } => cm(
            Class::Conflict,
            Kind::BranchUpdateConflict,
            format!(
                "branch update conflict: branch `{branch}` was expected at {expected} \
                 but is at {actual}"
            ),
        ),
        E::Conflict(conflict) if conflict.conflicts.is_empty() => {
            c(Class::Conflict, Kind::CommitConflict)
        }
        E::Conflict(_) => c(Class::Conflict, Kind::RebaseFailed),
        E::MergeConflict { .. } => c(Class::Conflict, Kind::MergeFailed),
        E::ForkAlreadyMerged { .. } | E::NotAFork => c(Class::SessionState, Kind::MergeNotAllowed),
        E::ForkCannotCommit => cm(
            Class::SessionState,
            Kind::CommitNotAllowed,
            "commits are not allowed on read-only or forked sessions: merge forked \
             sessions back into the session they were forked from, and commit that"
                .to_string(),
        ),
        E::InvalidFork { .. } => c(Class::Format, Kind::Deserialization),
        E::NoAmendForInitialCommit => c(Class::SessionState, Kind::NoAmendForInitialCommit),
        E::CloneDestinationInUse { .. } => c(Class::InvalidInput, Kind::ParentDirectoryNotClean),
        E::InvalidRetentionPolicy { .. } | E::InvalidSquashRange { .. } => {
            c(Class::InvalidInput, Kind::NotAllowed)
        }
        E::NodeNotFound { path } => cm(
            Class::NodeNotFound,
            Kind::NodeNotFound,
            format!("node not found at `{path}`"),
        ),
        E::NodeExists { path } => cm(
            Class::AlreadyExists,
            Kind::NodeAlreadyExists,
            format!("node already exists at `{path}`"),
        ),
        E::ParentNotGroup { .. } => c(Class::SessionState, Kind::MoveDestinationParentNotGroup),
        E::MoveParentNotGroup { .. } => c(Class::SessionState, Kind::MoveDestinationParentNotGroup),
        E::MoveOverwrite { .. } => c(Class::AlreadyExists, Kind::NodeAlreadyExists),
        E::NotAnArray { .. } => c(Class::InvalidInput, Kind::NotAnArray),
        E::NotAGroup { .. } => c(Class::InvalidInput, Kind::NotAGroup),
        E::InvalidChunkIndex { .. } => c(Class::InvalidInput, Kind::InvalidChunkIndex),
        E::ChunkUnreadable { .. } => c(Class::Storage, Kind::ObjectNotFound),
        E::VirtualChunk { source, .. } => virtual_kind(source),
        E::ReadOnlySession => cm(
            Class::ReadOnly,
            Kind::ReadOnlySession,
            "cannot write: the session is read-only (a read-only store)".to_string(),
        ),
        E::NoChangesToCommit => cm(
            Class::SessionState,
            Kind::NoChangesToCommit,
            "cannot commit, no changes made to the session (use `allow_empty=True` to \
             commit anyway)"
                .to_string(),
        ),
        E::InvalidNodeMetadata { .. } => c(Class::InvalidInput, Kind::BadMetadata),
        E::UnsupportedChunkGridForReindex { .. } => c(Class::InvalidInput, Kind::BadMetadata),
        E::Kerchunk(_) => c(Class::InvalidInput, Kind::InvalidVirtualRef),
        E::InvalidConfig { .. } => c(Class::InvalidInput, Kind::InvalidCommitConfiguration),
        E::ConfigChanged => c(Class::Conflict, Kind::ConfigUpdated),
        E::NotARearrangeSession => cm(
            Class::SessionState,
            Kind::NonRearrangeSession,
            "to move nodes in the hierarchy you need a rearrange session \
             (Repository.rearrange_session); commit or abandon this session first"
                .to_string(),
        ),
        E::InvalidMove { from, to, reason } => {
            if to.starts_with(from) || from.is_root() {
                cm(
                    Class::SessionState,
                    Kind::MoveIntoSelfOrDescendant,
                    format!("cannot move `{from}` into itself or its own descendant `{to}`"),
                )
            } else {
                cm(
                    Class::InvalidInput,
                    Kind::InvalidPath,
                    format!("cannot move `{from}` to `{to}`: {reason}"),
                )
            }
        }
        E::RepositoryReadOnly { reason, .. } => cm(
            Class::ReadOnly,
            Kind::ReadOnlyRepository,
            format!(
                "the repository status is read-only{}: set it online again \
                 (Repository.set_status) to write",
                reason
                    .as_ref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            ),
        ),
        E::RepoObjectContention { .. } => c(Class::Conflict, Kind::UpdateAttemptsExhausted),
        E::FeatureDisabled { .. } => c(Class::SessionState, Kind::FeatureFlagDisabled),
        E::NoReadableRepoBackup { .. } => c(Class::Format, Kind::InvalidFileFormat),
        E::GcCutoffTooRecent { .. } => c(Class::InvalidInput, Kind::NotAllowed),
        E::GcDeletesFailing { .. } => c(Class::Storage, Kind::GcDeletesFailing),
        _ => c(Class::Internal, Kind::Unknown),
    }
}

/// The class, kind and message of a zarr store failure: the repository error
/// behind it keeps its class.
fn classify_store(e: &floe::zarr::store::StoreError) -> Classified {
    use floe::zarr::store::StoreError as S;
    match e {
        S::ReadOnly { key } => cm(
            Class::ReadOnly,
            Kind::ReadOnlyStore,
            format!("cannot write key `{key}`: this is a read-only store"),
        ),
        S::InvalidKey { .. } => c(Class::InvalidInput, Kind::InvalidKey),
        S::InvalidRange { .. } => c(Class::InvalidInput, Kind::InvalidByteRange),
        S::Io { .. } => c(Class::Storage, Kind::Io),
        S::Repository { .. } => match e.repository_error() {
            Some(inner) => {
                let mut out = classify(inner);
                // The store's message names the key; keep Icechunk's wording first.
                out.message = Some(match out.message {
                    Some(m) => format!("{m} ({e})"),
                    None => e.to_string(),
                });
                out
            }
            None => c(Class::Icechunk, Kind::Unknown),
        },
        S::Backend { .. } => c(Class::Storage, Kind::ObjectStore),
        _ => c(Class::Icechunk, Kind::Unknown),
    }
}

/// `e`'s message and its cause chain, one cause a line: the PEP 678 note.
fn report(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = format!("{e}");
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(&format!("\n  caused by: {cause}"));
        source = cause.source();
    }
    text
}

/// `floe.exceptions.<name>`.
fn exception_class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("floe.exceptions")?.getattr(name)
}

/// `floe.exceptions.Conflict` objects for floe's conflicts.
fn conflicts_to_py<'py>(
    py: Python<'py>,
    conflicts: &[floe::error::Conflict],
) -> PyResult<Bound<'py, PyList>> {
    use floe::error::Conflict as C;
    use floe::format::snapshot::NodeKind;
    let class = exception_class(py, "Conflict")?;
    let list = PyList::empty(py);
    for conflict in conflicts {
        // Icechunk's ConflictType numbers.
        let (ty, path, chunks): (u8, String, Option<Vec<Vec<u64>>>) = match conflict {
            C::NewNodeAtExistingPath { path } => (1, path.to_string(), None),
            C::NodeMetadataChangedByBoth { path } => (3, path.to_string(), None),
            C::ChunksChangedByBoth { path, chunks, .. } => (
                6,
                path.to_string(),
                Some(chunks.iter().map(|c| c.to_vec()).collect()),
            ),
            C::ChunksWrittenWhileArrayChanged { path } => (8, path.to_string(), None),
            C::ChangedNodeWasDeleted { path } => (4, path.to_string(), None),
            C::DeletedNodeWasChanged { path, kind, .. } => (
                if matches!(kind, NodeKind::Group) {
                    10
                } else {
                    9
                },
                path.to_string(),
                None,
            ),
            C::BaseNotAncestor { .. } => (2, "/".to_string(), None),
            C::MovesCannotBeRebased { .. } => (11, "/".to_string(), None),
            _ => (2, "/".to_string(), None),
        };
        let ty = exception_class(py, "ConflictType")?.call1((ty,))?;
        list.append(class.call1((ty, path, chunks))?)?;
    }
    Ok(list)
}

/// The Python exception for `classified`, with `note` attached; `conflict`, when
/// given, fills `ConflictError`'s parents or `RebaseFailedError`'s conflicts.
fn build(
    py: Python<'_>,
    classified: Classified,
    text: String,
    note: String,
    conflict: Option<&floe::error::ConflictError>,
) -> PyResult<PyErr> {
    let message = classified.message.unwrap_or(text);
    let kind = classified.kind.code();
    let value = match (classified.class, conflict) {
        (Class::Conflict, Some(ce)) if !ce.conflicts.is_empty() => {
            let conflicts = conflicts_to_py(py, &ce.conflicts)?;
            exception_class(py, "RebaseFailedError")?
                .call1((ce.winning_snapshot.to_string(), conflicts))?
        }
        (Class::Conflict, Some(ce)) => exception_class(py, "ConflictError")?.call1((
            ce.base.to_string(),
            ce.winning_snapshot.to_string(),
            Option::<String>::None,
            kind,
        ))?,
        (Class::Conflict, None) => exception_class(py, "ConflictError")?.call1((
            Option::<String>::None,
            Option::<String>::None,
            message,
            kind,
        ))?,
        (class, _) => exception_class(py, class.name())?.call1((message, kind))?,
    };
    value.call_method1("add_note", (note,))?;
    Ok(PyErr::from_value(value))
}

/// The exception to raise; the `IcechunkError` base (or, should the module fail,
/// a `RuntimeError`) when building the proper one fails.
fn finish(
    classified: Classified,
    text: String,
    note: String,
    conflict: Option<&floe::error::ConflictError>,
) -> PyErr {
    Python::attach(|py| {
        build(py, classified, text.clone(), note, conflict).unwrap_or_else(|err| {
            exception_class(py, "IcechunkError")
                .and_then(|cls| cls.call1((text,)))
                .map(PyErr::from_value)
                .unwrap_or(err)
        })
    })
}

/// A floe error as the Python exception it raises.
pub(crate) fn to_py(e: floe::Error) -> PyErr {
    let classified = classify(&e);
    let conflict = match &e {
        floe::Error::Conflict(ce) => Some(ce.as_ref()),
        _ => None,
    };
    finish(classified, e.to_string(), report(&e), conflict)
}

/// A store error as the Python exception it raises: `ReadOnlyError` for writes to a
/// read-only store, `InvalidInputError` for invalid keys, the class of the repository
/// error behind it otherwise (as Icechunk's store keeps its errors' types).
pub(crate) fn store_to_py(e: floe::zarr::store::StoreError) -> PyErr {
    let classified = classify_store(&e);
    let conflict = match e.repository_error() {
        Some(floe::Error::Conflict(ce)) => Some(ce.as_ref()),
        _ => None,
    };
    finish(classified, e.to_string(), report(&e), conflict)
}

/// A Zarr layer error as a Python exception: store failures keep the store's
/// exception class; every other failure (a chunk that does not decode, with its key in
/// the message; wrong metadata) is a `FormatError`.
pub(crate) fn zarr_to_py(e: floe::zarr::ZarrError) -> PyErr {
    match e {
        floe::zarr::ZarrError::Store(e) => store_to_py(e),
        floe::zarr::ZarrError::ReadOnly { .. } => {
            error(Class::ReadOnly, Kind::ReadOnlySession, e.to_string())
        }
        e => error(Class::Format, Kind::Deserialization, e.to_string()),
    }
}

/// An exception of class `class` and kind `kind` with `message` (for failures the
/// bindings detect themselves).
pub(crate) fn error(class: Class, kind: Kind, message: String) -> PyErr {
    finish(
        cm(class, kind, message.clone()),
        message.clone(),
        message,
        None,
    )
}

/// A `ReadOnlyError` (kind `read-only-session`) with `message`.
pub(crate) fn read_only_error(_py: Python<'_>, message: String) -> PyErr {
    error(Class::ReadOnly, Kind::ReadOnlySession, message)
}

/// A `SessionStateError` (kind `commit-not-allowed`) with `message`.
pub(crate) fn session_state_error(_py: Python<'_>, message: String) -> PyErr {
    error(Class::SessionState, Kind::CommitNotAllowed, message)
}

/// An `InvalidInputError` of `kind` with `message`.
pub(crate) fn invalid_input(kind: Kind, message: String) -> PyErr {
    error(Class::InvalidInput, kind, message)
}

/// Converts floe results.
pub(crate) trait IntoPyResult<T> {
    /// The result with floe's error as a Python exception.
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for Result<T, floe::Error> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

impl<T> IntoPyResult<T> for Result<T, floe::storage::StorageError> {
    fn py(self) -> PyResult<T> {
        self.map_err(|e| to_py(e.into()))
    }
}

/// Every error code the bindings know (Icechunk's `_all_error_kinds`): the values
/// of Python's `ErrorKind`.
#[pyfunction]
fn _all_error_kinds() -> Vec<&'static str> {
    Kind::ALL.iter().map(|k| k.code()).collect()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let exceptions = py.import("floe.exceptions")?;
    for name in Class::EXPORTED {
        m.add(*name, exceptions.getattr(*name)?)?;
    }
    m.add_function(wrap_pyfunction!(_all_error_kinds, m)?)?;
    Ok(())
}
