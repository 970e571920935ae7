//! `floe ls`: the node tree of a repository snapshot or a plain Zarr store.

use std::io::Write;

use serde_json::{json, Value};

use super::args::RefArgs;
use super::output;
use super::plain_store::{self, ListedNode};
use super::target::{open_repo, plain_zarr_store, selector};
use super::CliResult;
use floe::format::NodePath;

/// Lists the nodes at and below `path` (default the root), in path order: one
/// summary line per node, or with `json` one JSON Lines record
/// `{path, node_type, metadata}` per node.
///
/// A repository snapshot's nodes are read from its file one at a time and printed as
/// they are read: memory holds the file's flatbuffer, not a decoded tree
/// ([`floe::Repository::snapshot_nodes`]).
///
/// # Errors
/// Repository, ref and store errors; [`floe::Error::NodeNotFound`] when nothing is
/// at `path` (an empty repository's root lists nothing, without error).
pub(super) async fn ls(
    out: &mut impl Write,
    location: &str,
    path: Option<&str>,
    at: &RefArgs,
    json: bool,
) -> CliResult<()> {
    let root = NodePath::new(path.unwrap_or("/")).map_err(floe::Error::from)?;
    if let Some(dir) = plain_zarr_store(location) {
        let store = plain_store::open(&dir)?;
        for n in plain_store::list(store.as_ref(), root.key_prefix()).await? {
            print_node(out, &n, json)?;
        }
        return Ok(());
    }
    let repo = open_repo(location, &[]).await?;
    let id = repo.resolve(&selector(&repo, at).await?).await?;
    let nodes = repo.snapshot_nodes(&id).await?;
    let mut listed = 0usize;
    for n in nodes.under(&root) {
        let n = n.map_err(floe::Error::from)?;
        let listed_node = ListedNode {
            path: n.path.to_string(),
            is_group: n.is_group(),
            metadata: serde_json::from_slice(&n.user_data).unwrap_or(Value::Null),
        };
        print_node(out, &listed_node, json)?;
        listed += 1;
    }
    if listed == 0 && !root.is_root() {
        return Err(floe::Error::NodeNotFound { path: root }.into());
    }
    Ok(())
}

/// Prints one node: its summary line, or with `json` its JSON Lines record.
fn print_node(out: &mut impl Write, n: &ListedNode, json: bool) -> CliResult<()> {
    if json {
        let node_type = if n.is_group { "group" } else { "array" };
        output::json_line(
            out,
            &json!({"path": n.path, "node_type": node_type, "metadata": n.metadata}),
        )?;
    } else {
        let line = output::node_summary(&n.path, &n.metadata);
        writeln!(out, "{}", output::escape_controls(&line))?;
    }
    Ok(())
}
