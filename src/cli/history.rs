//! `floe info`, `floe log` and `floe diff`: a repository's state and history.

use std::io::Write;

use serde_json::{json, Value};

use super::args::RefArgs;
use super::output;
use super::refs::ref_map;
use super::target::selector;
use super::CliResult;
use floe::repository::Repository;

/// Prints spec version, branches, tags and configuration (text, or one JSON object).
///
/// # Errors
/// Repository and storage errors.
pub(super) async fn info(out: &mut impl Write, repo: &Repository, json: bool) -> CliResult<()> {
    let branches = ref_map(repo, repo.list_branches().await?, false).await?;
    let tags = ref_map(repo, repo.list_tags().await?, true).await?;
    let config = repo.config();
    // The same configuration in text and JSON: what the repository stores (only what
    // was set; `{}` is every default) and the values in effect.
    let stored: Value = serde_json::to_value(config.raw()).unwrap_or(Value::Null);
    let containers: Vec<Value> = config
        .virtual_chunk_containers()
        .map_err(floe::Error::from)?
        .iter()
        .map(|c| json!({"url_prefix": c.url_prefix, "store": format!("{:?}", c.store)}))
        .collect();
    let effective = json!({
        "inline_chunk_threshold_bytes": config.inline_chunk_threshold_bytes(),
        "virtual_chunk_containers": containers,
    });
    if json {
        output::json_line(
            out,
            &json!({
                "location": repo.storage().root_url(),
                "spec_version": repo.spec_version() as u8,
                "branches": branches,
                "tags": tags,
                "config": stored,
                "effective_config": effective,
            }),
        )?;
        return Ok(());
    }
    writeln!(out, "Repository:   {}", repo.storage().root_url())?;
    writeln!(out, "Spec version: {}", repo.spec_version())?;
    writeln!(out, "Branches:")?;
    // Names are checked when read (no control characters); escaped all the same.
    for (n, id) in &branches {
        writeln!(out, "    {}  {id}", output::escape_controls(n))?;
    }
    writeln!(out, "Tags:")?;
    for (n, id) in &tags {
        writeln!(out, "    {}  {id}", output::escape_controls(n))?;
    }
    writeln!(out, "Config (as stored; `--json`: \"config\"):")?;
    match stored.as_object() {
        Some(o) if !o.is_empty() => {
            for (k, v) in o {
                writeln!(
                    out,
                    "    {}: {}",
                    output::escape_controls(k),
                    output::escape_controls(&v.to_string())
                )?;
            }
        }
        _ => writeln!(out, "    (nothing set: every default)")?,
    }
    writeln!(out, "In effect (`--json`: \"effective_config\"):")?;
    writeln!(
        out,
        "    inline_chunk_threshold_bytes: {}",
        effective["inline_chunk_threshold_bytes"]
    )?;
    for c in effective["virtual_chunk_containers"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let line = format!(
            "virtual_chunk_container: {} ({})",
            c["url_prefix"].as_str().unwrap_or_default(),
            c["store"].as_str().unwrap_or_default()
        );
        writeln!(out, "    {}", output::escape_controls(&line))?;
    }
    Ok(())
}

/// Prints the ops log of a spec-2 repository, newest first (text, or JSON Lines with
/// `type`, the operation's fields, `updated_at` in RFC 3339 and `backup_path`).
///
/// # Errors
/// [`floe::Error::UnsupportedOnSpecVersion`] on spec 1; repository errors.
pub(super) async fn ops_log(out: &mut impl Write, repo: &Repository, json: bool) -> CliResult<()> {
    for u in repo.ops_log().await? {
        let time = floe::format::snapshot::micros_to_time(u.updated_at);
        if json {
            let mut v = serde_json::to_value(&u).unwrap_or(Value::Null);
            if let Some(o) = v.as_object_mut() {
                o.insert("updated_at".into(), json!(time.to_rfc3339()));
            }
            output::json_line(out, &v)?;
        } else {
            let what = serde_json::to_value(&u.kind).unwrap_or(Value::Null);
            let kind = what
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string();
            let mut fields: Vec<String> = what
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| *k != "type")
                .map(|(k, v)| {
                    format!(
                        "{k}={}",
                        v.as_str().map_or_else(|| v.to_string(), str::to_string)
                    )
                })
                .collect();
            fields.sort();
            let line = format!("{}  {kind}  {}", time.to_rfc3339(), fields.join(" "));
            writeln!(out, "{}", output::escape_controls(&line))?;
        }
    }
    Ok(())
}

/// Prints the commits of `at`, newest first, down to the initial snapshot or at most
/// `max_count` of them, each as soon as it is read (text, or JSON Lines with id,
/// parent_id, flushed_at, message, metadata).
///
/// # Errors
/// Unknown refs, bad `--as-of`; repository errors.
pub(super) async fn log(
    out: &mut impl Write,
    repo: &Repository,
    at: &RefArgs,
    json: bool,
    max_count: Option<usize>,
) -> CliResult<()> {
    use futures::StreamExt;
    let history = repo
        .ancestry_stream(selector(repo, at).await?)
        .take(max_count.unwrap_or(usize::MAX));
    let mut history = std::pin::pin!(history);
    while let Some(info) = history.next().await {
        let info = info?;
        if json {
            output::json_line(out, &output::commit_json(&info))?;
        } else {
            output::commit_text(out, &info)?;
        }
    }
    Ok(())
}

/// Prints what changed between two refs: nodes added, deleted and updated, and
/// chunks changed per array (text, or one JSON object).
///
/// # Errors
/// Unknown refs; repository errors.
pub(super) async fn diff(
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
