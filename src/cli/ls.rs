//! `floe ls`: the node tree of a repository snapshot or a plain Zarr store.

use std::io::Write;

use serde_json::{json, Value};

use super::args::{RefArgs, VirtualArgs};
use super::output;
use super::plain_store::{self, ListedNode};
use super::target::{open_source, Source};
use super::CliResult;
use crate::format::NodePath;

/// Lists the nodes at and below `path` (default the root): one summary line per node,
/// or with `json` one JSON Lines record `{path, node_type, metadata}` per node.
///
/// # Errors
/// Repository, ref and store errors; [`crate::Error::NodeNotFound`] when nothing is
/// at `path` (an empty repository's root lists nothing, without error).
pub(super) async fn ls(
    out: &mut impl Write,
    location: &str,
    path: Option<&str>,
    at: &RefArgs,
    json: bool,
) -> CliResult<()> {
    let root = NodePath::new(path.unwrap_or("/")).map_err(crate::Error::from)?;
    let nodes = match open_source(location, at, &VirtualArgs::default()).await? {
        Source::Plain(store) => plain_store::list(store.as_ref(), root.key_prefix()).await?,
        Source::Repo(session) => {
            let nodes = session.list_nodes_under(&root);
            if nodes.is_empty() && !root.is_root() {
                return Err(crate::Error::NodeNotFound { path: root }.into());
            }
            nodes
                .into_iter()
                .map(|n| ListedNode {
                    path: n.path.to_string(),
                    is_group: n.is_group(),
                    metadata: serde_json::from_slice(&n.user_data).unwrap_or(Value::Null),
                })
                .collect()
        }
    };
    for n in nodes {
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
    }
    Ok(())
}
