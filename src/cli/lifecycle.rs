//! `floe expire`, `floe gc`, `floe upgrade`, `floe verify` and `floe clone`:
//! repository maintenance (see [`floe::lifecycle`]).

use std::io::Write;

use serde_json::json;

use super::target::parse_time;
use super::{output, progress, CliResult};
use floe::lifecycle::{ExpireOptions, GcOptions};
use floe::repository::Repository;

/// Expires snapshots older than `older_than` (RFC 3339, `now` or a time ago) and
/// prints what it did; with [`ExpireOptions::dry_run`], what it would do, naming
/// every snapshot and ref, and writes nothing.
///
/// # Errors
/// [`super::CliError::Usage`] for a bad time; repository and storage errors.
pub(super) async fn expire(
    out: &mut impl Write,
    repo: &Repository,
    older_than: &str,
    options: ExpireOptions,
    json: bool,
) -> CliResult<()> {
    let result = repo
        .expire_snapshots(parse_time("--older-than", older_than)?, options)
        .await?;
    if json {
        let ids = |set: &std::collections::BTreeSet<floe::SnapshotId>| {
            set.iter().map(ToString::to_string).collect::<Vec<_>>()
        };
        output::json_line(
            out,
            &json!({
                "expired": ids(&result.expired),
                "edited": ids(&result.edited),
                "deleted_branches": result.deleted_branches,
                "deleted_tags": result.deleted_tags,
                "kept_moved_branches": result.kept_moved_branches,
                "dry_run": options.dry_run,
            }),
        )?;
        return Ok(());
    }
    if options.dry_run {
        return expire_dry_run_text(out, &result);
    }
    writeln!(
        out,
        "Expired {} snapshot(s); rewrote {} snapshot(s) to start history at the initial snapshot",
        result.expired.len(),
        result.edited.len()
    )?;
    for b in &result.deleted_branches {
        writeln!(out, "Deleted expired branch {}", output::escape_controls(b))?;
    }
    for t in &result.deleted_tags {
        writeln!(out, "Deleted expired tag {}", output::escape_controls(t))?;
    }
    for b in &result.kept_moved_branches {
        writeln!(
            out,
            "Kept expired branch {b}: a commit moved it after it was judged expired"
        )?;
    }
    if !result.expired.is_empty() {
        writeln!(out, "Run `floe gc` to delete what is no longer reachable")?;
    }
    Ok(())
}

/// The text of `floe expire --dry-run`: every snapshot that would leave a history,
/// every snapshot that would be rewritten, every ref that would be deleted.
fn expire_dry_run_text(
    out: &mut impl Write,
    result: &floe::lifecycle::ExpireResult,
) -> CliResult<()> {
    writeln!(
        out,
        "Dry run: would expire {} snapshot(s) and rewrite {} snapshot(s) to start history \
         at the initial snapshot; nothing was written",
        result.expired.len(),
        result.edited.len()
    )?;
    for id in &result.expired {
        writeln!(out, "would expire snapshot {id}")?;
    }
    for id in &result.edited {
        writeln!(out, "would rewrite snapshot {id}")?;
    }
    for b in &result.deleted_branches {
        writeln!(out, "would delete branch {}", output::escape_controls(b))?;
    }
    for t in &result.deleted_tags {
        writeln!(out, "would delete tag {}", output::escape_controls(t))?;
    }
    Ok(())
}

/// Garbage-collects objects older than `older_than` (RFC 3339) and prints the summary.
///
/// # Errors
/// [`super::CliError::Usage`] for a bad time; repository and storage errors.
pub(super) async fn gc(
    out: &mut impl Write,
    repo: &Repository,
    older_than: &str,
    options: GcOptions,
    json: bool,
) -> CliResult<()> {
    let cut_off = parse_time("--older-than", older_than)?;
    let bar = progress::bar(0, "objects deleted");
    let report = |done: u64, phase: &str| {
        bar.set_message(phase.to_string());
        bar.set_position(done);
    };
    let summary = match repo.garbage_collect(cut_off, options, Some(&report)).await {
        Err(floe::Error::GcCutoffTooRecent {
            latest_allowed,
            window_seconds,
            ..
        }) => {
            bar.finish_and_clear();
            return Err(super::CliError::Usage(format!(
                "--older-than `{older_than}` is within gc's {window_seconds} s safety window \
                 (the newest cut-off accepted now is {latest_allowed}): objects of commits \
                 still in flight could be deleted; give an older time (e.g. --older-than 1d), \
                 or add --allow-recent-cutoff if no writer is active"
            )));
        }
        other => other?,
    };
    bar.finish_and_clear();
    if json {
        output::json_line(out, &serde_json::to_value(&summary).unwrap_or_default())?;
    } else {
        gc_summary_text(out, &summary, options.dry_run)?;
    }
    gc_failures(&summary)
}

/// [`super::CliError::Check`] (non-zero exit) when some deletes of a collection
/// failed: the objects stay, garbage for the next run, which the summary says.
pub(super) fn gc_failures(summary: &floe::lifecycle::GcSummary) -> CliResult<()> {
    if summary.objects_failed_to_delete == 0 {
        return Ok(());
    }
    Err(super::CliError::Check(format!(
        "{} object(s) could not be deleted; run gc again to delete them{}",
        summary.objects_failed_to_delete,
        if summary.skipped_phases.is_empty() {
            String::new()
        } else {
            format!(" and the {}", summary.skipped_phases.join(", "))
        }
    )))
}

/// The line `floe gc` and `floe maintain` print for a garbage collection: what it
/// deleted (or, dry, would delete), by kind, and the bytes.
pub(super) fn gc_summary_text(
    out: &mut impl Write,
    summary: &floe::lifecycle::GcSummary,
    dry_run: bool,
) -> CliResult<()> {
    let verb = if dry_run { "Would delete" } else { "Deleted" };
    writeln!(
        out,
        "{verb} {} snapshot(s), {} transaction log(s), {} manifest(s) and {} chunk(s): {} bytes",
        summary.snapshots_deleted,
        summary.transaction_logs_deleted,
        summary.manifests_deleted,
        summary.chunks_deleted,
        summary.bytes_deleted
    )?;
    if summary.objects_failed_to_delete > 0 {
        writeln!(
            out,
            "Could not delete {} object(s){}",
            summary.objects_failed_to_delete,
            if summary.skipped_phases.is_empty() {
                String::new()
            } else {
                format!(
                    "; not swept after them: {}",
                    summary.skipped_phases.join(", ")
                )
            }
        )?;
        for message in &summary.delete_errors {
            writeln!(out, "  {message}")?;
        }
    }
    Ok(())
}

/// Upgrades the spec-1 repository at `location` to spec 2 and prints what it did.
///
/// # Errors
/// As [`floe::lifecycle::upgrade_to_spec2`]; storage location errors.
pub(super) async fn upgrade(
    out: &mut impl Write,
    location: &str,
    dry_run: bool,
    json: bool,
) -> CliResult<()> {
    let storage = super::target::repo_storage(location)?;
    let report = floe::lifecycle::upgrade_to_spec2(storage, dry_run).await?;
    if json {
        output::json_line(out, &serde_json::to_value(&report).unwrap_or_default())?;
        return Ok(());
    }
    let verb = if dry_run { "Would upgrade" } else { "Upgraded" };
    writeln!(
        out,
        "{verb} to Icechunk spec 2: {} branch(es), {} tag(s), {} deleted tag(s), {} snapshot(s), {} ops-log entries",
        report.branches, report.tags, report.deleted_tags, report.snapshots, report.ops_log_entries
    )?;
    if dry_run {
        writeln!(out, "Dry run: nothing was changed")?;
    } else {
        writeln!(
            out,
            "Removed {} spec-1 file(s); Icechunk 1.x can no longer open this repository",
            report.removed_files
        )?;
    }
    Ok(())
}

/// What `floe verify` is asked to do.
pub(super) struct VerifyRequest<'a> {
    /// Repository path or URL.
    pub(super) location: &'a str,
    /// Whether to check virtual chunks' objects.
    pub(super) check_virtual: bool,
    /// Virtual chunk access (used with `check_virtual`).
    pub(super) virtual_reads: &'a super::args::VirtualArgs,
    /// Library options.
    pub(super) options: floe::lifecycle::VerifyOptions,
    /// One JSON object instead of text.
    pub(super) json: bool,
}

/// Verifies the repository and prints the summary and each problem; fails with
/// [`super::CliError::Check`] (non-zero exit) when there is any problem. Without
/// `--virtual` the repository is not opened (its storage is checked as is, so a
/// repository too damaged to open is still verified); with it, it is opened for its
/// virtual chunk containers and the caller's authorization.
///
/// # Errors
/// [`super::CliError::Check`] on problems; storage and repository errors.
pub(super) async fn verify(out: &mut impl Write, request: VerifyRequest<'_>) -> CliResult<()> {
    let bar = progress::bar(0, "checked");
    let report_progress = |done: u64, phase: &str| {
        bar.set_message(phase.to_string());
        bar.set_position(done);
    };
    let report = if request.check_virtual {
        let repo =
            super::target::open_repo_reading(request.location, request.virtual_reads).await?;
        repo.verify(true, request.options, Some(&report_progress))
            .await?
    } else {
        let storage = super::target::repo_storage(request.location)?;
        floe::lifecycle::verify(storage, None, request.options, Some(&report_progress)).await?
    };
    bar.finish_and_clear();
    if request.json {
        let mut value = serde_json::to_value(&report).unwrap_or_default();
        if let Some(map) = value.as_object_mut() {
            map.insert("ok".into(), json!(report.is_ok()));
        }
        output::json_line(out, &value)?;
    } else {
        verify_text(out, &report)?;
    }
    if report.is_ok() {
        Ok(())
    } else {
        out.flush()?;
        Err(super::CliError::Check(format!(
            "verify found {} problem(s)",
            report.problem_count()
        )))
    }
}

/// The text of `floe verify`: a summary line, then one line per problem.
fn verify_text(out: &mut impl Write, report: &floe::lifecycle::VerifyReport) -> CliResult<()> {
    writeln!(
        out,
        "Checked {} ref(s), {} snapshot(s), {} transaction log(s), {} manifest(s), {} native \
         chunk ref(s) in {} chunk object(s), {} inline and {} virtual chunk ref(s) ({} virtual \
         object(s) checked)",
        report.refs,
        report.snapshots,
        report.transaction_logs,
        report.manifests,
        report.native_refs,
        report.chunk_objects,
        report.inline_refs,
        report.virtual_refs,
        report.virtual_objects
    )?;
    if report.is_ok() {
        writeln!(out, "No problem found")?;
        return Ok(());
    }
    writeln!(out, "{} problem(s):", report.problem_count())?;
    for p in &report.problems {
        let kind = serde_json::to_value(p.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let mut place = Vec::new();
        if let Some(r) = &p.ref_name {
            place.push(format!("ref {r}"));
        }
        if let Some(s) = &p.snapshot {
            place.push(format!("snapshot {s}"));
        }
        if let Some(a) = &p.array {
            place.push(format!("array {a}"));
        }
        if let Some(c) = &p.chunk {
            let index: Vec<String> = c.iter().map(ToString::to_string).collect();
            place.push(format!("chunk [{}]", index.join(", ")));
        }
        if let Some(k) = &p.key {
            place.push(format!("key {k}"));
        }
        writeln!(
            out,
            "{kind}: {} ({})",
            output::escape_controls(&p.message),
            output::escape_controls(&place.join(", "))
        )?;
    }
    if report.problems_omitted > 0 {
        writeln!(
            out,
            "... and {} more problem(s) not listed",
            report.problems_omitted
        )?;
    }
    Ok(())
}

/// Clones the repository at `src` to `dst` (created if missing) and prints what was
/// copied and the verification's summary; fails with [`super::CliError::Check`]
/// when the verification finds problems.
///
/// # Errors
/// [`super::CliError::Check`]; storage location, repository and storage errors.
pub(super) async fn clone(
    out: &mut impl Write,
    src: &str,
    dst: &str,
    refs: &[String],
    options: floe::lifecycle::CloneOptions,
    json: bool,
) -> CliResult<()> {
    let source = super::target::repo_storage(src)?;
    let destination = floe::storage::create_storage(dst, None)?;
    let bar = progress::bar(0, "objects");
    let report_progress = |done: u64, phase: &str| {
        bar.set_message(phase.to_string());
        bar.set_position(done);
    };
    let report = floe::lifecycle::clone_repository(
        source,
        destination,
        refs,
        options,
        Some(&report_progress),
    )
    .await?;
    bar.finish_and_clear();
    let verified = report.verify.as_ref();
    if json {
        let mut value = serde_json::to_value(&report).unwrap_or_default();
        if let (Some(v), Some(map)) = (
            verified,
            value.get_mut("verify").and_then(|v| v.as_object_mut()),
        ) {
            map.insert("ok".into(), json!(v.is_ok()));
        }
        output::json_line(out, &value)?;
    } else {
        writeln!(
            out,
            "Copied {} object(s) ({} bytes); {} already there; refs: {}",
            report.objects_copied,
            report.bytes_copied,
            report.objects_skipped,
            output::escape_controls(&report.refs.join(", "))
        )?;
        if let Some(v) = verified {
            verify_text(out, v)?;
        }
    }
    match verified {
        Some(v) if !v.is_ok() => {
            out.flush()?;
            Err(super::CliError::Check(format!(
                "the clone at {dst} failed verification: {} problem(s)",
                v.problem_count()
            )))
        }
        _ => Ok(()),
    }
}
