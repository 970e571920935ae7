//! The JSON API under `/api/`: refs, a paged commit log, snapshot info, a tree with
//! array metadata, diffs, the ops log.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::Json;
use futures::StreamExt;
use serde_json::{json, Value};

use super::http::Failure;
use super::AppState;
use crate::format::snapshot::micros_to_time;
use crate::format::SnapshotId;
use crate::repository::{SnapshotInfo, VersionSelector};

/// Commits per page of `/api/log` by default, and at most.
const DEFAULT_LOG_PAGE: usize = 50;
const MAX_LOG_PAGE: usize = 1000;

type ApiResult = Result<Json<Value>, Failure>;

/// `/api`: where things are.
pub(crate) async fn index() -> Json<Value> {
    Json(json!({
        "zarr": ["/zarr/branch/{name}/", "/zarr/tag/{name}/", "/zarr/snapshot/{id}/"],
        "browser": ["/", "/log/{ref}", "/snapshot/{id}", "/diff?from=&to="],
        "api": ["/api/refs", "/api/log/{ref}?limit=&after=", "/api/snapshot/{id}",
                "/api/tree/{ref}", "/api/diff?from=&to=", "/api/ops-log"],
    }))
}

fn commit_json(info: &SnapshotInfo) -> Value {
    json!({
        "id": info.id.to_string(),
        "parent_id": info.parent_id.map(|p| p.to_string()),
        "flushed_at": info.flushed_at.to_rfc3339(),
        "message": info.message,
        "metadata": info.metadata,
    })
}

/// A ref given in a URL: a branch, else a tag, else a snapshot id.
async fn selector(state: &AppState, reference: &str) -> Result<VersionSelector, Failure> {
    Ok(state.repo.resolve_ref(reference).await?)
}

fn parse_id(text: &str) -> Result<SnapshotId, Failure> {
    text.parse()
        .map_err(|_| Failure::bad_request(format!("`{text}` is not a snapshot id")))
}

/// `/api/refs`: `{"branches": {name: id}, "tags": {name: id}}`.
pub(crate) async fn refs(State(state): State<Arc<AppState>>) -> ApiResult {
    let repo = &state.repo;
    let mut branches = serde_json::Map::new();
    for b in repo.list_branches().await? {
        match repo.lookup_branch(&b).await {
            Ok(id) => {
                branches.insert(b, json!(id.to_string()));
            }
            Err(crate::Error::BranchNotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let mut tags = serde_json::Map::new();
    for t in repo.list_tags().await? {
        match repo.lookup_tag(&t).await {
            Ok(id) => {
                tags.insert(t, json!(id.to_string()));
            }
            Err(crate::Error::TagNotFound { .. } | crate::Error::TagDeleted { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Json(json!({"branches": branches, "tags": tags})))
}

/// `/api/log/{ref}?limit=N&after=ID`: the commits of `ref`, newest first, at most
/// `limit` (default 50, at most 1000), starting after the commit `after`;
/// `{"commits": [...], "next": ID or null}` where `next` is the `after` of the next
/// page.
pub(crate) async fn log(
    State(state): State<Arc<AppState>>,
    Path(reference): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let limit = match query.get("limit") {
        Some(l) => l
            .parse::<usize>()
            .ok()
            .filter(|&l| l > 0)
            .ok_or_else(|| Failure::bad_request("`limit` must be a positive integer"))?
            .min(MAX_LOG_PAGE),
        None => DEFAULT_LOG_PAGE,
    };
    let after = query.get("after").map(|a| parse_id(a)).transpose()?;
    let sel = selector(&state, &reference).await?;
    let mut history = std::pin::pin!(state.repo.ancestry_stream(sel));
    let mut skipping = after.is_some();
    let mut commits = Vec::new();
    let mut next = None;
    while let Some(info) = history.next().await {
        let info = info?;
        if skipping {
            skipping = Some(info.id) != after;
            continue;
        }
        if commits.len() == limit {
            next = commits
                .last()
                .and_then(|c: &Value| c["id"].as_str().map(str::to_string));
            break;
        }
        commits.push(commit_json(&info));
    }
    if skipping {
        return Err(Failure::not_found(format!(
            "`after`: no commit {} in the history of `{reference}`",
            after.map(|a| a.to_string()).unwrap_or_default()
        )));
    }
    Ok(Json(json!({"commits": commits, "next": next})))
}

/// `/api/snapshot/{id}`: the commit (id, parent, time, message, metadata), the
/// branches and tags pointing at it, and its number of nodes.
pub(crate) async fn snapshot(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult {
    let id = parse_id(&id)?;
    let version = state.versions.snapshot(id).await?;
    let mut history = std::pin::pin!(state.repo.ancestry_stream(VersionSelector::Snapshot(id)));
    let info = match history.next().await {
        Some(info) => info?,
        None => return Err(crate::Error::SnapshotNotFound { id }.into()),
    };
    let mut out = commit_json(&info);
    let nodes = version.session.list_nodes()?;
    out["nodes"] = json!(nodes.len());
    out["arrays"] = json!(nodes.iter().filter(|n| !n.is_group()).count());
    Ok(Json(out))
}

/// `/api/tree/{ref}`: `{"snapshot": id, "nodes": [{path, node_type, metadata}]}`,
/// with each node's `zarr.json` as `metadata`.
pub(crate) async fn tree(
    State(state): State<Arc<AppState>>,
    Path(reference): Path<String>,
) -> ApiResult {
    let sel = selector(&state, &reference).await?;
    let id = state.versions.resolve(&sel).await?;
    let version = state.versions.snapshot(id).await?;
    let nodes: Vec<Value> = version
        .session
        .list_nodes()?
        .iter()
        .map(|n| {
            let metadata: Value = serde_json::from_slice(&n.user_data).unwrap_or(Value::Null);
            json!({
                "path": n.path.to_string(),
                "node_type": if n.is_group() { "group" } else { "array" },
                "metadata": metadata,
            })
        })
        .collect();
    Ok(Json(json!({"snapshot": id.to_string(), "nodes": nodes})))
}

/// `/api/diff?from=REF&to=REF`: nodes added, deleted, updated and moved, and the
/// chunks changed per array, between two refs or snapshots.
pub(crate) async fn diff(
    State(state): State<Arc<AppState>>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let (Some(from), Some(to)) = (query.get("from"), query.get("to")) else {
        return Err(Failure::bad_request(
            "give `from` and `to` (refs or snapshot ids)",
        ));
    };
    let from_id = state
        .versions
        .resolve(&selector(&state, from).await?)
        .await?;
    let to_id = state.versions.resolve(&selector(&state, to).await?).await?;
    let d = state.repo.diff(from_id, to_id).await?;
    let mut v = serde_json::to_value(&d).unwrap_or(Value::Null);
    v["from"] = json!(from_id.to_string());
    v["to"] = json!(to_id.to_string());
    Ok(Json(v))
}

/// `/api/ops-log`: spec 2's operations, newest first (404 on spec 1).
pub(crate) async fn ops_log(State(state): State<Arc<AppState>>) -> ApiResult {
    let updates: Vec<Value> = state
        .repo
        .ops_log()
        .await?
        .iter()
        .map(|u| {
            let mut v = serde_json::to_value(u).unwrap_or(Value::Null);
            if let Some(o) = v.as_object_mut() {
                o.insert(
                    "updated_at".into(),
                    json!(micros_to_time(u.updated_at).to_rfc3339()),
                );
            }
            v
        })
        .collect();
    Ok(Json(json!({ "operations": updates })))
}
