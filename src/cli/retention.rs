//! `floe expire --keep-last/--keep-within`, `floe retention`, `floe maintain`,
//! `floe squash` and `floe compact` (see [`floe::lifecycle::retention`],
//! [`floe::lifecycle::squash`] and [`floe::Repository::compact`]).

use std::collections::BTreeSet;
use std::io::Write;

use serde_json::json;

use super::target::{parse_duration, parse_time};
use super::{output, CliError, CliResult};
use floe::lifecycle::{ExpireResult, RetentionPolicy, RetentionRule};
use floe::repository::{CompactOptions, Repository};
use floe::{NodePath, SnapshotId};

/// The rule `--keep-last` and `--keep-within` give.
///
/// # Errors
/// [`CliError::Usage`] for a malformed duration, `--keep-last 0`, or neither.
pub(super) fn rule(keep_last: Option<u64>, keep_within: Option<&str>) -> CliResult<RetentionRule> {
    let mut rule = RetentionRule::default();
    match keep_last {
        Some(0) => {
            return Err(CliError::Usage(
                "--keep-last must be at least 1 (the tip is always kept)".into(),
            ))
        }
        Some(n) => rule = rule.keep_last(n),
        None => {}
    }
    if let Some(text) = keep_within {
        rule = rule.keep_within(parse_duration("--keep-within", text)?);
    }
    if rule.keep_last.is_none() && rule.keep_within.is_none() {
        return Err(CliError::Usage(
            "give --keep-last N, --keep-within DURATION, or both".into(),
        ));
    }
    Ok(rule)
}

fn ids(set: &BTreeSet<SnapshotId>) -> Vec<String> {
    set.iter().map(ToString::to_string).collect()
}

/// Prints what a retention run released (or, dry, would release).
fn retention_text(out: &mut impl Write, r: &ExpireResult, dry_run: bool) -> CliResult<()> {
    if dry_run {
        writeln!(
            out,
            "Dry run: would release {} snapshot(s) from branch histories and re-parent {}; \
             nothing was written",
            r.expired.len(),
            r.edited.len()
        )?;
        for id in &r.expired {
            writeln!(out, "would release snapshot {id}")?;
        }
        for id in &r.edited {
            writeln!(out, "would re-parent snapshot {id}")?;
        }
        return Ok(());
    }
    writeln!(
        out,
        "Released {} snapshot(s) from branch histories; re-parented {} onto their nearest \
         kept ancestor",
        r.expired.len(),
        r.edited.len()
    )?;
    if !r.expired.is_empty() {
        writeln!(out, "Run `floe gc` to delete what is no longer reachable")?;
    }
    Ok(())
}

/// `floe expire --keep-last/--keep-within [--branch B...]`: applies `rule` to the
/// named branches (every branch when none is named).
///
/// # Errors
/// Repository errors, [`floe::Error::UnsupportedOnSpecVersion`] on spec 1.
pub(super) async fn expire_by_rule(
    out: &mut impl Write,
    repo: &Repository,
    rule: RetentionRule,
    branches: &[String],
    dry_run: bool,
    json: bool,
) -> CliResult<()> {
    let policy = if branches.is_empty() {
        RetentionPolicy::default().default_rule(rule)
    } else {
        branches
            .iter()
            .fold(RetentionPolicy::default(), |p, b| p.branch(b.clone(), rule))
    };
    let result = repo.apply_retention(Some(&policy), dry_run).await?;
    if json {
        output::json_line(
            out,
            &json!({"expired": ids(&result.expired), "edited": ids(&result.edited),
                    "dry_run": dry_run}),
        )?;
        return Ok(());
    }
    retention_text(out, &result, dry_run)
}

/// What `floe retention` does to the stored policy.
pub(super) enum Change {
    /// Print it.
    Show,
    /// Set the default rule (`None`) or a branch's.
    Set(Option<String>, RetentionRule),
    /// Remove the default rule and every branch rule (`None`), or one branch's.
    Clear(Option<String>),
}

/// `floe retention`: shows, sets or clears the stored policy, then prints it.
///
/// # Errors
/// Repository errors, [`floe::Error::UnsupportedOnSpecVersion`] on spec 1.
pub(super) async fn retention(
    out: &mut impl Write,
    repo: &Repository,
    change: Change,
    json: bool,
) -> CliResult<()> {
    let current = repo.retention_policy().await?;
    let policy = match change {
        Change::Show => current,
        Change::Set(branch, rule) => {
            let p = current.unwrap_or_default();
            let p = match branch {
                Some(b) => p.branch(b, rule),
                None => p.default_rule(rule),
            };
            repo.set_retention_policy(Some(&p)).await?;
            Some(p)
        }
        Change::Clear(branch) => {
            let p = match (branch, current) {
                (None, _) | (_, None) => None,
                (Some(b), Some(mut p)) => {
                    p.branches.remove(&b);
                    (!p.is_empty()).then_some(p)
                }
            };
            repo.set_retention_policy(p.as_ref()).await?;
            p
        }
    };
    if json {
        output::json_line(out, &serde_json::to_value(&policy).unwrap_or_default())?;
        return Ok(());
    }
    let Some(policy) = policy else {
        writeln!(
            out,
            "No retention policy: every branch keeps its whole history"
        )?;
        return Ok(());
    };
    let describe = |r: &RetentionRule| {
        let mut parts = Vec::new();
        if let Some(n) = r.keep_last {
            parts.push(format!("the last {n} commit(s)"));
        }
        if let Some(d) = r.keep_within {
            let secs = d.as_secs();
            let span = match secs {
                s if s > 0 && s % 86_400 == 0 => format!("{} day(s)", s / 86_400),
                s if s > 0 && s % 3_600 == 0 => format!("{} hour(s)", s / 3_600),
                s => format!("{s} s"),
            };
            parts.push(format!("the commits of the last {span}"));
        }
        format!("keep {}", parts.join(" and "))
    };
    match &policy.default {
        Some(r) => writeln!(out, "default: {}", describe(r))?,
        None => writeln!(out, "default: keep the whole history")?,
    }
    for (b, r) in &policy.branches {
        writeln!(
            out,
            "branch {}: {}",
            output::escape_controls(b),
            describe(r)
        )?;
    }
    Ok(())
}

/// `floe maintain`: the stored retention policy, then garbage collection.
///
/// # Errors
/// [`CliError::Usage`] for a bad time; repository and storage errors.
pub(super) async fn maintain(
    out: &mut impl Write,
    repo: &Repository,
    gc_older_than: Option<&str>,
    dry_run: bool,
    json: bool,
) -> CliResult<()> {
    let cut = gc_older_than
        .map(|t| parse_time("--gc-older-than", t))
        .transpose()?;
    let summary = repo.maintain(cut, dry_run).await?;
    if json {
        let retention = summary
            .retention
            .as_ref()
            .map(|r| json!({"expired": ids(&r.expired), "edited": ids(&r.edited)}));
        output::json_line(
            out,
            &json!({"retention": retention,
                    "gc": serde_json::to_value(&summary.gc).unwrap_or_default(),
                    "dry_run": dry_run}),
        )?;
        return super::lifecycle::gc_failures(&summary.gc);
    }
    match &summary.retention {
        Some(r) => retention_text(out, r, dry_run)?,
        None => writeln!(
            out,
            "No retention policy stored: histories left as they are"
        )?,
    }
    super::lifecycle::gc_summary_text(out, &summary.gc, dry_run)?;
    super::lifecycle::gc_failures(&summary.gc)
}

/// The snapshot a `--from`/`--to` value names: a snapshot id, a tag or a branch.
async fn snapshot_of(repo: &Repository, text: &str) -> CliResult<SnapshotId> {
    let selector = repo.resolve_ref(text).await?;
    Ok(repo.resolve(&selector).await?)
}

/// `floe squash`.
///
/// # Errors
/// Unknown refs; [`floe::Error::InvalidSquashRange`]; repository and storage errors.
pub(super) async fn squash(
    out: &mut impl Write,
    repo: &Repository,
    branch: &str,
    from: &str,
    to: Option<&str>,
    dry_run: bool,
    json: bool,
) -> CliResult<()> {
    let from = snapshot_of(repo, from).await?;
    let to = match to {
        Some(t) => Some(snapshot_of(repo, t).await?),
        None => None,
    };
    let r = repo.squash(branch, from, to, dry_run).await?;
    let list = |v: &[SnapshotId]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
    if json {
        output::json_line(
            out,
            &json!({"branch": r.branch, "from": r.from.to_string(), "to": r.to.to_string(),
                    "squashed": list(&r.squashed), "removed": list(&r.removed),
                    "dry_run": r.dry_run}),
        )?;
        return Ok(());
    }
    let branch = output::escape_controls(&r.branch);
    if r.squashed.is_empty() {
        writeln!(
            out,
            "Nothing to squash: {} follows {} directly on {branch}",
            r.to, r.from
        )?;
        return Ok(());
    }
    let verb = if dry_run { "Would squash" } else { "Squashed" };
    writeln!(
        out,
        "{verb} {} commit(s) of {branch} into {}, now the child of {}",
        r.squashed.len(),
        r.to,
        r.from
    )?;
    for id in &r.squashed {
        writeln!(out, "  {id}")?;
    }
    if dry_run {
        writeln!(out, "Dry run: nothing was written")?;
    } else if !r.squashed.is_empty() {
        writeln!(out, "Run `floe gc` to delete what only they reached")?;
    }
    Ok(())
}

/// What `floe compact` was asked.
pub(super) struct CompactRequest<'a> {
    pub(super) branch: &'a str,
    pub(super) paths: &'a [String],
    pub(super) message: Option<String>,
    pub(super) dry_run: bool,
    pub(super) json: bool,
}

/// `floe compact`.
///
/// # Errors
/// Malformed paths; [`floe::Error::BranchNotFound`], [`floe::Error::NodeNotFound`],
/// [`floe::Error::Conflict`]; repository and storage errors.
pub(super) async fn compact(
    out: &mut impl Write,
    repo: &Repository,
    request: CompactRequest<'_>,
) -> CliResult<()> {
    let paths = request
        .paths
        .iter()
        .map(|p| NodePath::new(p).map_err(floe::Error::from))
        .collect::<Result<Vec<_>, _>>()?;
    let mut options = CompactOptions::default()
        .paths(paths)
        .dry_run(request.dry_run);
    if let Some(m) = request.message {
        options = options.message(m);
    }
    let r = repo.compact(request.branch, &options).await?;
    if request.json {
        output::json_line(
            out,
            &json!({"branch": r.branch, "base": r.base.to_string(),
                    "snapshot": r.snapshot.map(|s| s.to_string()), "arrays": r.arrays,
                    "chunks": r.chunks, "bytes": r.bytes, "packs": r.packs,
                    "chunks_left": r.chunks_left, "threshold_bytes": r.threshold_bytes,
                    "target_size_bytes": r.target_size_bytes, "dry_run": r.dry_run}),
        )?;
        return Ok(());
    }
    let branch = output::escape_controls(&r.branch);
    if r.packs == 0 {
        writeln!(
            out,
            "Nothing to compact on {branch}: no two chunks of at most {} bytes in objects of their own ({} array(s), {} chunk(s) left as they are)",
            r.threshold_bytes, r.arrays, r.chunks_left
        )?;
        return Ok(());
    }
    let verb = if r.dry_run {
        "Would rewrite"
    } else {
        "Rewrote"
    };
    writeln!(
        out,
        "{verb} {} chunk(s) ({} bytes) of {} array(s) into {} pack(s); {} chunk(s) left as they are",
        r.chunks, r.bytes, r.arrays, r.packs, r.chunks_left
    )?;
    match r.snapshot {
        Some(id) => {
            writeln!(out, "Committed {id} on {branch}")?;
            writeln!(
                out,
                "Run `floe expire` and `floe gc` to delete the single-chunk objects"
            )?;
        }
        None => writeln!(out, "Dry run: nothing was written")?,
    }
    Ok(())
}
