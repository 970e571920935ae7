//! `floe branch ...` and `floe tag ...`.

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::Value;

use super::args::{BranchCommand, RefArgs, TagCommand};
use super::output;
use super::target::{open_repo, selector};
use super::CliResult;
use floe::format::SnapshotId;
use floe::repository::Repository;

/// The snapshot ids of branches (or tags, with `tags`) `names`.
///
/// # Errors
/// Repository errors.
pub(super) async fn ref_map(
    repo: &Repository,
    names: Vec<String>,
    tags: bool,
) -> CliResult<BTreeMap<String, String>> {
    let mut map = BTreeMap::new();
    for n in names {
        let id = if tags {
            repo.lookup_tag(&n).await?
        } else {
            repo.lookup_branch(&n).await?
        };
        map.insert(n, id.to_string());
    }
    Ok(map)
}

/// Runs a `floe branch` subcommand.
///
/// # Errors
/// Unknown refs, existing or missing branches, repository errors.
pub(super) async fn branch(out: &mut impl Write, cmd: BranchCommand) -> CliResult<()> {
    match cmd {
        BranchCommand::List { repo, json } => {
            let repo = open_repo(&repo, &[]).await?;
            let map = ref_map(&repo, repo.list_branches().await?, false).await?;
            print_ref_map(out, &map, json)?;
        }
        BranchCommand::Create { repo, name, at } => {
            let repo = open_repo(&repo, &[]).await?;
            let id = repo.resolve(&selector(&repo, &at).await?).await?;
            repo.create_branch(&name, id).await?;
            writeln!(out, "Created branch {name} at {id}")?;
        }
        BranchCommand::Delete {
            repo,
            name,
            dry_run,
        } => {
            let repo = open_repo(&repo, &[]).await?;
            let was = repo.lookup_branch(&name).await?;
            let delete = (!dry_run).then(|| repo.delete_branch(&name));
            delete_ref(out, "branch", &name, was, delete).await?;
        }
        BranchCommand::Reset {
            repo,
            name,
            to,
            as_of,
            dry_run,
        } => {
            let repo = open_repo(&repo, &[]).await?;
            let at = RefArgs {
                reference: to,
                as_of,
            };
            let id = repo.resolve(&selector(&repo, &at).await?).await?;
            let was = repo.lookup_branch(&name).await?;
            if dry_run {
                writeln!(
                    out,
                    "Would reset branch {name}: was {was}, now {id}; nothing changed"
                )?;
            } else {
                // Compare-and-swap on the tip read: a commit landing meanwhile is
                // not silently orphaned.
                repo.reset_branch(&name, id, Some(was)).await?;
                writeln!(out, "Reset branch {name}: was {was}, now {id}")?;
            }
        }
    }
    Ok(())
}

/// Runs a `floe tag` subcommand.
///
/// # Errors
/// Unknown refs, existing, missing or deleted tags, repository errors.
pub(super) async fn tag(out: &mut impl Write, cmd: TagCommand) -> CliResult<()> {
    match cmd {
        TagCommand::List { repo, json } => {
            let repo = open_repo(&repo, &[]).await?;
            let map = ref_map(&repo, repo.list_tags().await?, true).await?;
            print_ref_map(out, &map, json)?;
        }
        TagCommand::Create { repo, name, at } => {
            let repo = open_repo(&repo, &[]).await?;
            let id = repo.resolve(&selector(&repo, &at).await?).await?;
            repo.create_tag(&name, id).await?;
            writeln!(out, "Created tag {name} at {id}")?;
        }
        TagCommand::Delete {
            repo,
            name,
            dry_run,
        } => {
            let repo = open_repo(&repo, &[]).await?;
            let was = repo.lookup_tag(&name).await?;
            let delete = (!dry_run).then(|| repo.delete_tag(&name));
            delete_ref(out, "tag", &name, was, delete).await?;
        }
    }
    Ok(())
}

/// Runs `delete` (the deletion of the `kind` ref `name`, which pointed at `was`) and
/// prints the id it pointed at; with no deletion (a dry run) only says what would go.
///
/// # Errors
/// The deletion's errors; output errors.
async fn delete_ref(
    out: &mut impl Write,
    kind: &str,
    name: &str,
    was: SnapshotId,
    delete: Option<impl std::future::Future<Output = floe::Result<()>>>,
) -> CliResult<()> {
    match delete {
        Some(delete) => {
            delete.await?;
            writeln!(out, "Deleted {kind} {name} (was {was})")?;
        }
        None => writeln!(
            out,
            "Would delete {kind} {name} (at {was}); nothing changed"
        )?,
    }
    Ok(())
}

fn print_ref_map(
    out: &mut impl Write,
    map: &BTreeMap<String, String>,
    json: bool,
) -> CliResult<()> {
    if json {
        output::json_line(out, &serde_json::to_value(map).unwrap_or(Value::Null))?;
    } else {
        // Names padded to the longest, so the ids line up.
        let names: Vec<_> = map.keys().map(|n| output::escape_controls(n)).collect();
        let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
        for (n, id) in names.iter().zip(map.values()) {
            writeln!(out, "{n:<width$}  {id}")?;
        }
    }
    Ok(())
}
