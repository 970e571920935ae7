//! Command-line arguments (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use floe::format::config::{ContainerStore, VirtualChunkContainer};

/// floe: transactional, versioned Zarr v3 repositories (Icechunk spec 1 and 2).
///
/// REPO is a path or URL (`file://`, `s3://bucket/prefix`); REF is a branch name, a tag
/// name or a snapshot id (default `main`). S3 endpoints and credentials come from the
/// standard AWS_* environment variables.
#[derive(Debug, Parser)]
#[command(name = "floe", version, about, long_about = None)]
pub(crate) struct Cli {
    /// More log output on stderr (-v info, -vv debug); FLOE_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub(crate) verbose: u8,
    /// The command.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Which snapshot to read: a ref, optionally as of a time.
#[derive(Debug, Clone, Args)]
pub(crate) struct RefArgs {
    /// Branch, tag or snapshot id.
    #[arg(long = "ref", value_name = "REF", default_value = "main")]
    pub(crate) reference: String,
    /// A branch's state at this time: RFC 3339 (2024-05-01T12:00:00Z), `now`, or a
    /// time ago (7d, 12h, 30m, 1d12h).
    #[arg(long, value_name = "TIME")]
    pub(crate) as_of: Option<String>,
}

/// How virtual chunks may be read.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct VirtualArgs {
    /// Authorize reading virtual chunks under this URL prefix (repeatable).
    #[arg(long = "allow-virtual", value_name = "PREFIX")]
    pub(crate) allow_virtual: Vec<String>,
    /// Give up a virtual chunk request (with its retries) after this many seconds
    /// (default 60).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub(crate) virtual_read_deadline: Option<std::time::Duration>,
    /// The reader's own virtual chunk container (repeatable): authorizes PREFIX and
    /// reads it through a store the reader chose, replacing the repository's
    /// container of that prefix (so its endpoint is trusted with the reader's
    /// credentials). `s3://bucket/path/=ENDPOINT` (an S3-compatible server,
    /// path-style; no `=ENDPOINT`: AWS), `gs://bucket/path/=BASE_URL` (no `=`:
    /// Google), `az://container/path/=ACCOUNT` (endpoint or emulator from
    /// `AZURE_STORAGE_*`), `file:///dir/` and `http(s)://host/path/` (no `=`).
    /// Credentials come from the environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`).
    #[arg(long = "virtual-container", value_name = "PREFIX[=STORE]", value_parser = parse_virtual_container)]
    pub(crate) virtual_containers: Vec<VirtualChunkContainer>,
}

/// A `--virtual-container PREFIX[=STORE]` value: the container of PREFIX's scheme
/// (see [`VirtualArgs::virtual_containers`]). The first `=` ends the prefix.
fn parse_virtual_container(s: &str) -> Result<VirtualChunkContainer, String> {
    let (prefix, setting) = match s.split_once('=') {
        Some((p, v)) => (p, Some(v).filter(|v| !v.is_empty())),
        None => (s, None),
    };
    let scheme = prefix
        .split_once("://")
        .map(|(s, _)| s.to_ascii_lowercase())
        .ok_or_else(|| format!("`{prefix}` is not a URL prefix (scheme://...)"))?;
    let no_setting = |kind: &str| match setting {
        Some(v) => Err(format!("a {kind} container takes no `={v}`")),
        None => Ok(()),
    };
    let store = match scheme.as_str() {
        "s3" => ContainerStore::S3 {
            compatible: setting.is_some(),
            region: None,
            endpoint_url: setting.map(str::to_string),
            anonymous: false,
            allow_http: setting.is_some_and(|e| e.starts_with("http://")),
            force_path_style: setting.is_some(),
        },
        "gs" | "gcs" => ContainerStore::Gcs(
            setting
                .map(|b| vec![("google_base_url".to_string(), b.to_string())])
                .unwrap_or_default(),
        ),
        "az" | "azure" | "abfs" => {
            let account = setting
                .ok_or_else(|| format!("`{prefix}` needs its account: `{prefix}=ACCOUNT`"))?;
            ContainerStore::Azure(vec![("account".to_string(), account.to_string())])
        }
        "file" => {
            no_setting("file://")?;
            let path = url::Url::parse(prefix)
                .ok()
                .and_then(|u| u.to_file_path().ok())
                .ok_or_else(|| format!("`{prefix}` is not a local directory URL"))?;
            ContainerStore::LocalFileSystem(path.display().to_string())
        }
        "http" | "https" => {
            no_setting("HTTP")?;
            ContainerStore::Http
        }
        other => return Err(format!("no virtual chunk store for `{other}://` URLs")),
    };
    Ok(VirtualChunkContainer {
        name: None,
        url_prefix: prefix.to_string(),
        store,
    })
}

/// A positive, finite number of seconds.
fn parse_seconds(s: &str) -> Result<std::time::Duration, String> {
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .and_then(|v| std::time::Duration::try_from_secs_f64(v).ok())
        .ok_or_else(|| format!("`{s}` is not a positive number of seconds"))
}

/// `floe init --chunk-packing`: when sessions pack small chunks
/// ([`floe::format::config::ChunkPackingMode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ChunkPackingArg {
    /// On for object storage, off for local directories.
    Auto,
    /// Always on.
    Enabled,
    /// Always off (one chunk object per chunk).
    Disabled,
}

impl From<ChunkPackingArg> for floe::format::config::ChunkPackingMode {
    fn from(a: ChunkPackingArg) -> Self {
        match a {
            ChunkPackingArg::Auto => Self::Auto,
            ChunkPackingArg::Enabled => Self::Enabled,
            ChunkPackingArg::Disabled => Self::Disabled,
        }
    }
}

/// Output format of `floe cat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum CatFormat {
    /// Human-readable text.
    Text,
    /// Nested JSON lists (strings as JSON strings).
    Json,
    /// C-order little-endian bytes of the data type.
    Raw,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List the commits of a ref, newest first.
    ///
    /// List the commits of a ref, newest first, down to the initial snapshot.
    Log {
        /// Repository path or URL.
        repo: String,
        /// Which snapshot.
        #[command(flatten)]
        at: RefArgs,
        /// Print JSON Lines (id, parent_id, flushed_at, message, metadata).
        #[arg(long)]
        json: bool,
        /// Print at most this many commits (only their snapshots are read).
        #[arg(short = 'n', long)]
        max_count: Option<usize>,
    },
    /// List the node tree of a ref.
    ///
    /// List the node tree with shape, data type, chunks, codecs and attributes.
    Ls {
        /// Repository path or URL, or a plain Zarr v3/v2/v1 filesystem store.
        repo: String,
        /// Node path to list below (default: the root).
        path: Option<String>,
        /// Which snapshot.
        #[command(flatten)]
        at: RefArgs,
        /// Print JSON Lines (path, node_type, metadata).
        #[arg(long)]
        json: bool,
    },
    /// Print an array's values.
    Cat {
        /// Repository path or URL, or a plain Zarr v3/v2/v1 filesystem store.
        repo: String,
        /// Array path.
        array: String,
        /// Which snapshot.
        #[command(flatten)]
        at: RefArgs,
        /// Region per dimension, e.g. `0:10,5:7` (`:` for a whole dimension, `3` for
        /// one index).
        #[arg(long)]
        region: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value = "text")]
        format: CatFormat,
        /// Virtual chunk reads: authorized prefixes, read deadline.
        #[command(flatten)]
        virtual_reads: VirtualArgs,
    },
    /// Show what changed between two refs.
    ///
    /// Show what changed between two refs: nodes added, deleted and updated, and chunks
    /// changed per array.
    Diff {
        /// Repository path or URL.
        repo: String,
        /// The older ref.
        from: String,
        /// The newer ref.
        to: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Show the spec version, branches, tags and configuration.
    ///
    /// Show spec version, branches, tags and configuration.
    Info {
        /// Repository path or URL.
        repo: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Manage branches.
    #[command(subcommand)]
    Branch(BranchCommand),
    /// Manage tags.
    #[command(subcommand)]
    Tag(TagCommand),
    /// Spec 2: list the repository's operations, newest first.
    ///
    /// Spec 2: the repository's operations (commits, ref and config changes), newest first.
    OpsLog {
        /// Repository path or URL.
        repo: String,
        /// Print one JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Create an empty repository.
    Init {
        /// Repository path or URL.
        repo: String,
        /// Icechunk spec version: 2 (the default, as Icechunk 2.x creates: ops
        /// log, repository metadata) or 1 (opens in Icechunk 1.x and 2.x).
        #[arg(long, value_name = "N", default_value_t = floe::Repository::DEFAULT_SPEC_VERSION as u8, value_parser = clap::value_parser!(u8).range(1..=2))]
        spec_version: u8,
        /// Store `chunk_packing.mode` in the configuration: whether sessions write
        /// chunks of at most 64 KiB several to one chunk object. Unset: auto (on for
        /// object storage, off for local directories).
        #[arg(long, value_name = "MODE")]
        chunk_packing: Option<ChunkPackingArg>,
    },
    /// Import data into a repository.
    #[command(subcommand)]
    Import(ImportCommand),
    /// Write a ref's tree as a plain Zarr v3 filesystem store.
    Export {
        /// Repository path or URL.
        repo: String,
        /// Destination directory (must not exist or be empty).
        dest: PathBuf,
        /// Which snapshot.
        #[command(flatten)]
        at: RefArgs,
        /// Virtual chunk reads: authorized prefixes, read deadline.
        #[command(flatten)]
        virtual_reads: VirtualArgs,
    },
    /// Serve every version of a repository over HTTP, read-only, as plain Zarr.
    ///
    /// Serve every branch, tag and snapshot over HTTP as a plain Zarr v3 store
    /// (`/zarr/branch/NAME/`, `/zarr/tag/NAME/`, `/zarr/snapshot/ID/`), with a JSON API
    /// under `/api/`. Read-only; loopback only unless `--public`. Runs until ctrl-c or
    /// SIGTERM, then finishes the requests in flight.
    Serve(ServeArgs),
    /// Expire snapshots older than a time from every branch's and tag's history.
    ///
    /// Expire snapshots flushed before a time from every branch's and tag's history
    /// (nothing is deleted until `floe gc`).
    Expire {
        /// Repository path or URL.
        repo: String,
        /// Cut-off time: RFC 3339 (2024-05-01T12:00:00Z), `now`, or a time ago (7d, 12h).
        #[arg(
            long,
            value_name = "TIME",
            required_unless_present_any = ["keep_last", "keep_within"],
            conflicts_with_all = ["keep_last", "keep_within", "branch"]
        )]
        older_than: Option<String>,
        /// Spec 2, retention instead of a cut-off: keep the last N commits of each
        /// branch (or of the `--branch` ones), the tip included.
        #[arg(long, value_name = "N")]
        keep_last: Option<u64>,
        /// Spec 2, retention instead of a cut-off: keep every commit of the last
        /// DURATION (30d, 12h, 1w) on each branch (or the `--branch` ones). With
        /// `--keep-last`, a commit either keeps is kept.
        #[arg(long, value_name = "DURATION")]
        keep_within: Option<String>,
        /// With `--keep-last`/`--keep-within`: apply them to this branch only
        /// (repeatable); other branches keep their whole history.
        #[arg(long, value_name = "BRANCH")]
        branch: Vec<String>,
        /// Also delete branches (never `main`) whose tip is expired.
        #[arg(long)]
        delete_expired_branches: bool,
        /// Also delete tags whose snapshot is expired.
        #[arg(long)]
        delete_expired_tags: bool,
        /// Print what would be expired, rewritten and deleted; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print one JSON object (`expired`, `edited`, `deleted_branches`,
        /// `deleted_tags`, `kept_moved_branches`, `dry_run`).
        #[arg(long)]
        json: bool,
    },
    /// Delete the objects no branch or tag reaches (garbage collection).
    ///
    /// Delete snapshots, transaction logs, manifests and chunks that no branch or tag
    /// reaches and that were last modified before a time.
    Gc {
        /// Repository path or URL.
        repo: String,
        /// Cut-off time (RFC 3339, `now`, or a time ago such as 7d): only objects older
        /// than this are deleted.
        #[arg(long, value_name = "TIME")]
        older_than: String,
        /// Report what would be deleted without deleting anything.
        #[arg(long)]
        dry_run: bool,
        /// Accept a cut-off less than an hour old (the safety window), or in the
        /// future. Such a cut-off can delete objects of commits still being written:
        /// use it only when no writer is active.
        #[arg(long)]
        allow_recent_cutoff: bool,
        /// Fetch every retained manifest instead of taking the chunk ids of those an
        /// earlier collection read from floe's collection state (`floe/gc-state`).
        /// The same objects are deleted either way; the state is left as it is.
        #[arg(long)]
        full: bool,
        /// Print one JSON object with the summary fields (`chunks_deleted`,
        /// `manifests_deleted`, `snapshots_deleted`, `transaction_logs_deleted`,
        /// `attributes_deleted`, `bytes_deleted`).
        #[arg(long)]
        json: bool,
    },
    /// Copy a repository, with its history, to another storage.
    ///
    /// Copy a repository between storages (paths, s3://, gs://, az://) with its full
    /// history, or only what the --ref branches and tags reach (main always comes
    /// along). Objects are copied byte for byte, chunks never decoded; virtual chunk
    /// refs are copied as refs. Run it again after an interruption (even kill -9) to
    /// resume: objects already copied are skipped, and the refs are written last, so
    /// DST holds no repository until the copy is complete. The clone is verified at
    /// the end (as `floe verify`) unless --no-verify; exits with status 1 when that
    /// finds problems.
    Clone {
        /// Source repository path or URL.
        src: String,
        /// Destination path or URL (empty, or an interrupted clone of SRC).
        dst: String,
        /// Copy only what this branch or tag reaches (repeatable; `branch:NAME`,
        /// `tag:NAME` or a name, looked up as a branch first).
        #[arg(long = "ref", value_name = "REF")]
        refs: Vec<String>,
        /// Objects copied at once.
        #[arg(long, value_name = "N", default_value_t = 32)]
        concurrency: usize,
        /// Do not verify the clone at the end.
        #[arg(long)]
        no_verify: bool,
        /// Print one JSON object (`objects_copied`, `bytes_copied`,
        /// `objects_skipped`, `refs`, `verify`: the report of `floe verify --json`).
        #[arg(long)]
        json: bool,
    },
    /// Check that everything the refs reach is there and decodes (fsck).
    ///
    /// Check a repository's integrity: every branch and tag resolves; every snapshot,
    /// transaction log and manifest they reach exists and decodes; every native chunk
    /// object exists, is not empty and holds the bytes its refs ask for (sizes from
    /// listings of chunks/, no chunk bytes read unless --read-chunks); with --virtual,
    /// every virtual chunk's object exists, is long enough and still matches its
    /// recorded ETag or modification time. Prints a summary and each problem with its
    /// ref, snapshot, array, chunk index and object key; exits with status 1 when
    /// there is any problem.
    Verify {
        /// Repository path or URL.
        repo: String,
        /// Also read every native chunk's bytes.
        #[arg(long)]
        read_chunks: bool,
        /// Also check the objects virtual chunks point into (one HEAD per object),
        /// under the prefixes authorized by --allow-virtual / --virtual-container.
        #[arg(long = "virtual")]
        check_virtual: bool,
        /// Virtual chunk access: authorized prefixes, read deadline.
        #[command(flatten)]
        virtual_reads: VirtualArgs,
        /// Print one JSON object: the counts checked (`refs`, `snapshots`,
        /// `transaction_logs`, `manifests`, `native_refs`, `chunk_objects`,
        /// `inline_refs`, `virtual_refs`, `virtual_objects`), `problems` (each with
        /// `kind`, `message`, `ref`, `snapshot`, `array`, `chunk`, `key`),
        /// `problems_omitted` and `ok`.
        #[arg(long)]
        json: bool,
    },
    /// Upgrade a spec-1 repository to spec 2.
    ///
    /// Upgrade a spec-1 repository to spec 2, as Icechunk 2.x's
    /// `upgrade_icechunk_repository` does: metadata only, refs and config folded into the
    /// `repo` object. Run it with no other writer on the repository.
    Upgrade {
        /// Repository path or URL.
        repo: String,
        /// Build and check everything, change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Spec 2: show, set or clear the retention policy stored in the repository.
    ///
    /// Spec 2: show, set or clear the retention policy stored in the repository
    /// (repository metadata `floe:retention`, which Icechunk keeps and ignores).
    /// `floe maintain` applies it. Without options, prints the policy.
    Retention {
        /// Repository path or URL.
        repo: String,
        /// Keep the last N commits of each branch (or of `--branch`).
        #[arg(long, value_name = "N")]
        keep_last: Option<u64>,
        /// Keep every commit of the last DURATION (30d, 12h, 1w).
        #[arg(long, value_name = "DURATION")]
        keep_within: Option<String>,
        /// Set (or with `--clear`, remove) the rule of this branch instead of the
        /// default rule.
        #[arg(long, value_name = "BRANCH")]
        branch: Option<String>,
        /// Remove the default rule (or `--branch`'s); with neither, the whole policy.
        #[arg(long, conflicts_with_all = ["keep_last", "keep_within"])]
        clear: bool,
        /// Print the policy as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Apply the stored retention policy, then collect garbage: the scheduled job.
    ///
    /// Apply the stored retention policy (spec 2, when one is stored: `floe
    /// retention`), then delete what no branch or tag reaches and is older than the
    /// cut-off (`floe gc`), with one summary.
    Maintain {
        /// Repository path or URL.
        repo: String,
        /// Garbage-collection cut-off (RFC 3339, or a time ago such as 7d); default:
        /// one hour ago (the safety window).
        #[arg(long, value_name = "TIME")]
        gc_older_than: Option<String>,
        /// Say what would be released and deleted; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print one JSON object (`retention`: `expired`, `edited`; `gc`: the `floe
        /// gc --json` fields).
        #[arg(long)]
        json: bool,
    },
    /// Squash a stretch of a branch's history into its last commit.
    ///
    /// Squash the commits of BRANCH after `--from` up to `--to` (the tip by default)
    /// into the `--to` commit, which keeps its id, tree and message and becomes
    /// `--from`'s child. The branch does not move, so no writer loses a commit;
    /// `floe gc` later deletes what only the squashed commits reached.
    Squash {
        /// Repository path or URL.
        repo: String,
        /// The branch.
        branch: String,
        /// The commit the squashed one follows (a snapshot id).
        #[arg(long, value_name = "SNAPSHOT")]
        from: String,
        /// The last commit of the range (a snapshot id); default: the tip.
        #[arg(long, value_name = "SNAPSHOT")]
        to: Option<String>,
        /// Say which commits would be squashed; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print one JSON object (`branch`, `from`, `to`, `squashed`, `removed`,
        /// `dry_run`).
        #[arg(long)]
        json: bool,
    },
    /// Rewrite a branch's small chunks into packs, in one commit.
    ///
    /// Rewrite the small native chunks of BRANCH's arrays (at most the repository's
    /// `chunk_packing.threshold_bytes`, default 64 KiB, each in an object of its own)
    /// into packs of about `chunk_packing.target_size_bytes` (default 8 MiB), whatever
    /// the packing mode, in one new commit on BRANCH with the same tree and values:
    /// only chunk refs change, bytes are copied as stored. Inline and virtual chunks,
    /// larger chunks and chunks already in packs are left. A failed or killed run
    /// changes nothing (its packs are garbage for `floe gc`); when another writer
    /// commits to BRANCH meanwhile it fails with a conflict: run it again. After
    /// `floe expire` and `floe gc`, the single-chunk objects are deleted.
    Compact {
        /// Repository path or URL.
        repo: String,
        /// The branch.
        branch: String,
        /// Compact only this array, or the arrays below this group (repeatable);
        /// default: every array.
        #[arg(long = "path", value_name = "PATH")]
        paths: Vec<String>,
        /// The commit message; default `compact: N chunks into M packs`.
        #[arg(long, short)]
        message: Option<String>,
        /// Say how many chunks and packs; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print one JSON object (`branch`, `base`, `snapshot`, `arrays`, `chunks`,
        /// `bytes`, `packs`, `chunks_left`, `threshold_bytes`, `target_size_bytes`,
        /// `dry_run`).
        #[arg(long)]
        json: bool,
    },
    /// Spec 2: restore an unreadable `repo` object from its newest readable copy.
    ///
    /// Spec 2: put back the newest readable copy of an unreadable `repo` object (from
    /// `overwritten/`), after saving the unreadable one there. Does nothing when the object
    /// reads. The newest copy is found from the copies' ops logs, not from the writers'
    /// clocks.
    Repair {
        /// Repository path or URL.
        repo: String,
        /// Find the copy, change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Build a demo repository and show its log, tree, values and a diff.
    ///
    /// Build a demo repository (several arrays, commits, a branch, a tag) and show its log,
    /// tree, values and a diff: floe's main job on the local filesystem.
    Demo {
        /// Directory for the demo repository (created; must not hold a repository).
        dir: PathBuf,
    },
}

/// `floe branch ...`
#[derive(Debug, Subcommand)]
pub(crate) enum BranchCommand {
    /// List branches and the snapshots they point to.
    List {
        /// Repository path or URL.
        repo: String,
        /// Print one JSON object `{name: snapshot_id}`.
        #[arg(long)]
        json: bool,
    },
    /// Create a branch at a ref.
    Create {
        /// Repository path or URL.
        repo: String,
        /// New branch name.
        name: String,
        /// Which snapshot.
        #[command(flatten)]
        at: RefArgs,
    },
    /// Delete a branch.
    Delete {
        /// Repository path or URL.
        repo: String,
        /// Branch name.
        name: String,
        /// Print what would be deleted, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Move a branch to another snapshot (prints the old and the new tip).
    ///
    /// The branch's commits after the new tip stay in storage, unreachable from it,
    /// until they expire; the old tip printed here (and `floe ops-log`) is how to
    /// come back to them.
    Reset {
        /// Repository path or URL.
        repo: String,
        /// Branch name.
        name: String,
        /// Where the branch goes: a branch, tag or snapshot id (required: no default).
        #[arg(long = "to", alias = "ref", value_name = "REF")]
        to: String,
        /// The state of `--to` (a branch) at this time (RFC 3339, `now`, or a time ago
        /// such as 7d).
        #[arg(long, value_name = "TIME")]
        as_of: Option<String>,
        /// Print the old and the new tip, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// `floe tag ...`
#[derive(Debug, Subcommand)]
pub(crate) enum TagCommand {
    /// List tags and the snapshots they point to.
    List {
        /// Repository path or URL.
        repo: String,
        /// Print one JSON object `{name: snapshot_id}`.
        #[arg(long)]
        json: bool,
    },
    /// Create a tag at a ref; tags never move.
    Create {
        /// Repository path or URL.
        repo: String,
        /// New tag name.
        name: String,
        /// Which snapshot.
        #[command(flatten)]
        at: RefArgs,
    },
    /// Delete a tag; its name can never be used again.
    Delete {
        /// Repository path or URL.
        repo: String,
        /// Tag name.
        name: String,
        /// Print what would be deleted, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// `floe import ...`
#[derive(Debug, Subcommand)]
pub(crate) enum ImportCommand {
    /// Copy a plain Zarr v3, v2 or v1 filesystem store into the repository as one commit.
    Zarr {
        /// Source store directory.
        src: PathBuf,
        #[command(flatten)]
        target: ImportTarget,
    },
    /// Import a kerchunk reference set (JSON) as virtual chunk refs, as one commit.
    Kerchunk {
        /// Reference file (kerchunk JSON, version 0 or 1).
        refs: PathBuf,
        #[command(flatten)]
        target: ImportTarget,
        /// Most references the file's `gen` entries may generate together.
        #[arg(long, value_name = "N", default_value_t = 10_000_000)]
        max_refs: u64,
    },
}

/// Where an import goes: repository, node path, branch, commit message.
#[derive(Debug, Clone, Args)]
pub(crate) struct ImportTarget {
    /// Repository path or URL.
    pub(crate) repo: String,
    /// Node path to import under (default: the root).
    #[arg(long)]
    pub(crate) path: Option<String>,
    /// Branch to commit to.
    #[arg(long, default_value = "main")]
    pub(crate) branch: String,
    /// Commit message.
    #[arg(short = 'm', long = "message")]
    pub(crate) message: String,
}

/// `floe serve` arguments.
#[derive(Debug, Clone, Args)]
pub(crate) struct ServeArgs {
    /// Repository path or URL.
    pub(crate) repo: String,
    /// Address to listen on (port 0: any free port, printed at start).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8080")]
    pub(crate) bind: std::net::SocketAddr,
    /// Allow a non-loopback `--bind` address (anyone who reaches it reads the
    /// repository, unless `--token-file`).
    #[arg(long)]
    pub(crate) public: bool,
    /// Require `Authorization: Bearer TOKEN`, TOKEN read from this file.
    #[arg(long, value_name = "FILE")]
    pub(crate) token_file: Option<PathBuf>,
    /// Allow cross-origin requests (CORS) from this origin (`https://host:port`, or `*`).
    #[arg(long, value_name = "ORIGIN")]
    pub(crate) cors_origin: Option<String>,
    /// Serve virtual chunks under this container (repeatable): authorizes PREFIX
    /// and reads it through a store of the reader's choice, as for `floe cat`
    /// (`s3://bucket/path/=ENDPOINT`, `gs://...`, `az://...=ACCOUNT`, `file:///dir/`,
    /// `http(s)://host/path/`). Other virtual chunks answer 403.
    #[arg(long = "virtual-container", value_name = "PREFIX[=STORE]", value_parser = parse_virtual_container)]
    pub(crate) virtual_containers: Vec<VirtualChunkContainer>,
    /// Connections served at once (more wait).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub(crate) max_connections: usize,
    /// Cut off a request after this many seconds.
    #[arg(long, value_name = "SECONDS", default_value = "60", value_parser = parse_seconds)]
    pub(crate) request_timeout: std::time::Duration,
}
