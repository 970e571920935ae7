//! The implementation of each subcommand.

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::{json, Value};

use super::args::{BranchCommand, Cli, Command, RefArgs, TagCommand};
use super::output;
use super::target::{create_repo, open_repo, selector};
use super::{CliError, CliResult};
use crate::format::NodePath;
use crate::repository::Repository;

/// Runs one parsed command line.
///
/// # Errors
/// Whatever the command fails with; printed as one line by the caller.
pub async fn run(cli: Cli) -> CliResult<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match cli.command {
        Command::Init { repo } => {
            let r = create_repo(&repo).await?;
            writeln!(
                out,
                "Initialized empty floe repository at {}",
                r.storage().root_url()
            )?;
        }
        Command::Info { repo, json } => info(&mut out, &open_repo(&repo, &[]).await?, json).await?,
        Command::Log { repo, at, json } => {
            log(&mut out, &open_repo(&repo, &[]).await?, &at, json).await?
        }
        Command::Branch(cmd) => branch(&mut out, cmd).await?,
        Command::Tag(cmd) => tag(&mut out, cmd).await?,
        Command::Diff {
            repo,
            from,
            to,
            json,
        } => diff(&mut out, &open_repo(&repo, &[]).await?, &from, &to, json).await?,
        Command::Ls {
            repo,
            path,
            at,
            json,
        } => ls(&mut out, &repo, path.as_deref(), &at, json).await?,
        Command::Cat { .. }
        | Command::Import(_)
        | Command::Export { .. }
        | Command::Demo { .. } => {
            return Err(CliError::Usage("this command is not available yet".into()));
        }
    }
    out.flush()?;
    Ok(())
}

async fn ref_map(
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

async fn info(out: &mut impl Write, repo: &Repository, json: bool) -> CliResult<()> {
    let branches = ref_map(repo, repo.list_branches().await?, false).await?;
    let tags = ref_map(repo, repo.list_tags().await?, true).await?;
    let config = repo.config();
    if json {
        let cfg: Value = serde_json::to_value(config.raw()).unwrap_or(Value::Null);
        output::json_line(
            out,
            &json!({
                "location": repo.storage().root_url(),
                "spec_version": 1,
                "branches": branches,
                "tags": tags,
                "config": cfg,
            }),
        )?;
        return Ok(());
    }
    writeln!(out, "Repository:   {}", repo.storage().root_url())?;
    writeln!(out, "Spec version: 1")?;
    writeln!(out, "Branches:")?;
    for (n, id) in &branches {
        writeln!(out, "    {n}  {id}")?;
    }
    writeln!(out, "Tags:")?;
    for (n, id) in &tags {
        writeln!(out, "    {n}  {id}")?;
    }
    writeln!(out, "Config:")?;
    writeln!(
        out,
        "    inline_chunk_threshold_bytes: {}",
        config.inline_chunk_threshold_bytes()
    )?;
    for c in config
        .virtual_chunk_containers()
        .map_err(crate::Error::from)?
    {
        writeln!(
            out,
            "    virtual chunk container: {} ({:?})",
            c.url_prefix, c.store
        )?;
    }
    Ok(())
}

async fn log(out: &mut impl Write, repo: &Repository, at: &RefArgs, json: bool) -> CliResult<()> {
    let id = repo.resolve(&selector(repo, at).await?).await?;
    for info in repo.ancestry(id).await? {
        if json {
            output::json_line(out, &output::commit_json(&info))?;
        } else {
            output::commit_text(out, &info)?;
        }
    }
    Ok(())
}

async fn branch(out: &mut impl Write, cmd: BranchCommand) -> CliResult<()> {
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
        BranchCommand::Delete { repo, name } => {
            open_repo(&repo, &[]).await?.delete_branch(&name).await?;
            writeln!(out, "Deleted branch {name}")?;
        }
        BranchCommand::Reset { repo, name, at } => {
            let repo = open_repo(&repo, &[]).await?;
            let id = repo.resolve(&selector(&repo, &at).await?).await?;
            repo.reset_branch(&name, id, None).await?;
            writeln!(out, "Reset branch {name} to {id}")?;
        }
    }
    Ok(())
}

async fn tag(out: &mut impl Write, cmd: TagCommand) -> CliResult<()> {
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
        TagCommand::Delete { repo, name } => {
            open_repo(&repo, &[]).await?.delete_tag(&name).await?;
            writeln!(out, "Deleted tag {name}")?;
        }
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
        for (n, id) in map {
            writeln!(out, "{n}  {id}")?;
        }
    }
    Ok(())
}

async fn diff(
    out: &mut impl Write,
    repo: &Repository,
    from: &str,
    to: &str,
    json: bool,
) -> CliResult<()> {
    let from_id = repo.resolve(&repo.resolve_ref(from).await?).await?;
    let to_id = repo.resolve(&repo.resolve_ref(to).await?).await?;
    let d = repo.diff(from_id, to_id).await?;
    if json {
        let mut v = serde_json::to_value(&d).unwrap_or(Value::Null);
        v["from"] = json!(from_id.to_string());
        v["to"] = json!(to_id.to_string());
        output::json_line(out, &v)?;
    } else {
        writeln!(out, "diff {from_id}..{to_id}")?;
        output::diff_text(out, &d)?;
    }
    Ok(())
}

async fn ls(
    out: &mut impl Write,
    location: &str,
    path: Option<&str>,
    at: &RefArgs,
    json: bool,
) -> CliResult<()> {
    let root = NodePath::new(path.unwrap_or("/")).map_err(crate::Error::from)?;
    let repo = open_repo(location, &[]).await?;
    let session = repo.readonly_session(&selector(&repo, at).await?).await?;
    let nodes = session.list_nodes_under(&root);
    if nodes.is_empty() {
        return Err(crate::Error::NodeNotFound { path: root }.into());
    }
    for n in nodes {
        let meta: Value = serde_json::from_slice(&n.user_data).unwrap_or(Value::Null);
        if json {
            let node_type = if n.is_group() { "group" } else { "array" };
            output::json_line(
                out,
                &json!({"path": n.path.to_string(), "node_type": node_type, "metadata": meta}),
            )?;
        } else {
            writeln!(out, "{}", output::node_summary(n.path.as_str(), &meta))?;
        }
    }
    Ok(())
}
