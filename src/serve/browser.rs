//! The history browser: server-rendered HTML pages (front page, commit log, a
//! snapshot's tree, a diff with the chunks changed per array drawn as a grid map),
//! every template in the binary and every value HTML-escaped (minijinja's
//! auto-escaping of `.html` templates). No script, no external asset.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};

use axum::extract::{Path, Query, State};
use axum::response::{Html, IntoResponse, Response};
use futures::StreamExt;
use http::StatusCode;
use minijinja::Environment;
use serde_json::{json, Value};

use super::http::Failure;
use super::AppState;
use crate::format::{ChunkIndices, SnapshotId};
use crate::repository::{SnapshotInfo, VersionSelector};

/// Commits on the front page and per log page.
const FRONT_COMMITS: usize = 10;
const LOG_PAGE: usize = 50;
/// Largest grid map side, in cells: bigger chunk grids are drawn in blocks.
const MAP_SIDE: u64 = 64;

const BASE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{% block title %}floe{% endblock %}</title>
<style>
body{font-family:system-ui,sans-serif;margin:0 auto;max-width:72rem;padding:1rem 2rem;color:#222}
nav a{margin-right:1rem}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}
td,th{border-bottom:1px solid #ddd;padding:.25rem .75rem;text-align:left;vertical-align:top}
code,.id{font-family:ui-monospace,monospace;font-size:.9em}
pre{white-space:pre-wrap;margin:0;font-size:.85em}
.muted{color:#777}
svg rect.on{fill:#d9480f}
svg rect.off{fill:#e9ecef}
</style></head>
<body><nav><a href="/">floe</a><a href="/log/main">log</a><a href="/api/refs">api</a></nav>
{% block body %}{% endblock %}
</body></html>"#;

const INDEX: &str = r#"{% extends "base.html" %}
{% block body %}
<h1>Repository</h1>
<h2>Branches</h2>
<table><tr><th>branch</th><th>snapshot</th><th>Zarr URL</th></tr>
{% for b in branches %}<tr><td><a href="/log/{{ b.url }}">{{ b.name }}</a></td>
<td class="id"><a href="/snapshot/{{ b.id }}">{{ b.id }}</a></td>
<td><code>/zarr/branch/{{ b.url }}/</code></td></tr>{% endfor %}
</table>
<h2>Tags</h2>
<table><tr><th>tag</th><th>snapshot</th><th>Zarr URL</th></tr>
{% for t in tags %}<tr><td><a href="/log/{{ t.url }}">{{ t.name }}</a></td>
<td class="id"><a href="/snapshot/{{ t.id }}">{{ t.id }}</a></td>
<td><code>/zarr/tag/{{ t.url }}/</code></td></tr>{% else %}<tr><td colspan="3" class="muted">no tags</td></tr>{% endfor %}
</table>
<h2>Newest commits of {{ head }}</h2>
{% include "commits.html" %}
<p><a href="/log/{{ head_url }}">the whole log of {{ head }}</a></p>
{% endblock %}"#;

const COMMITS: &str = r#"<table><tr><th>time</th><th>message</th><th>snapshot</th><th>parent</th><th>metadata</th><th></th></tr>
{% for c in commits %}<tr><td>{{ c.time }}</td><td>{{ c.message }}</td>
<td class="id"><a href="/snapshot/{{ c.id }}">{{ c.id }}</a></td>
<td class="id">{% if c.parent %}<a href="/snapshot/{{ c.parent }}">{{ c.parent }}</a>{% endif %}</td>
<td>{% if c.metadata %}<pre>{{ c.metadata }}</pre>{% endif %}</td>
<td>{% if c.parent %}<a href="/diff?from={{ c.parent }}&amp;to={{ c.id }}">diff</a>{% endif %}</td></tr>
{% endfor %}</table>"#;

const LOG: &str = r#"{% extends "base.html" %}
{% block title %}log of {{ reference }}{% endblock %}
{% block body %}
<h1>Log of {{ reference }}</h1>
{% include "commits.html" %}
{% if next %}<p><a href="/log/{{ reference_url }}?after={{ next }}">older commits</a></p>{% endif %}
{% endblock %}"#;

const SNAPSHOT: &str = r#"{% extends "base.html" %}
{% block title %}snapshot {{ commit.id }}{% endblock %}
{% block body %}
<h1>Snapshot <span class="id">{{ commit.id }}</span></h1>
<table>
<tr><th>message</th><td>{{ commit.message }}</td></tr>
<tr><th>time</th><td>{{ commit.time }}</td></tr>
<tr><th>parent</th><td class="id">{% if commit.parent %}<a href="/snapshot/{{ commit.parent }}">{{ commit.parent }}</a> (<a href="/diff?from={{ commit.parent }}&amp;to={{ commit.id }}">diff</a>){% else %}none{% endif %}</td></tr>
<tr><th>metadata</th><td><pre>{{ commit.metadata }}</pre></td></tr>
<tr><th>Zarr URL</th><td><code>/zarr/snapshot/{{ commit.id }}/</code></td></tr>
</table>
<h2>Tree</h2>
<table><tr><th>path</th><th>type</th><th>shape</th><th>data type</th><th>chunks</th><th>dimensions</th><th>codecs</th><th>attributes</th></tr>
{% for n in nodes %}<tr><td><code>{{ n.path }}</code>{% if n.preview %} <a href="/preview/{{ commit.id }}{{ n.preview }}">preview</a>{% endif %}</td><td>{{ n.node_type }}</td><td>{{ n.shape }}</td><td>{{ n.data_type }}</td>
<td>{{ n.chunks }}</td><td>{{ n.dimensions }}</td><td>{{ n.codecs }}</td><td>{% if n.attributes %}<pre>{{ n.attributes }}</pre>{% endif %}</td></tr>
{% endfor %}</table>
{% endblock %}"#;

const DIFF: &str = r#"{% extends "base.html" %}
{% block title %}diff{% endblock %}
{% block body %}
<h1>Diff</h1>
<p>from <a class="id" href="/snapshot/{{ from }}">{{ from }}</a> to <a class="id" href="/snapshot/{{ to }}">{{ to }}</a></p>
{% for section in sections %}{% if section.paths %}<h2>{{ section.title }}</h2><ul>
{% for p in section.paths %}<li><code>{{ p }}</code></li>{% endfor %}</ul>{% endif %}{% endfor %}
{% if moved %}<h2>Moved</h2><ul>{% for m in moved %}<li><code>{{ m.from }}</code> → <code>{{ m.to }}</code></li>{% endfor %}</ul>{% endif %}
<h2>Chunks changed</h2>
{% for a in arrays %}<h3><code>{{ a.path }}</code>: {{ a.count }} chunk(s)</h3>
{% if a.map %}<p class="muted">chunk grid {{ a.grid }}{% if a.block != "1 × 1" %}, one cell per {{ a.block }} chunks{% endif %}{% if a.projected %}, the last two dimensions{% endif %}</p>
<svg width="{{ a.map.width }}" height="{{ a.map.height }}" role="img" aria-label="chunks changed in {{ a.path }}">
{% for c in a.map.cells %}<rect class="{{ c.class }}" x="{{ c.x }}" y="{{ c.y }}" width="{{ a.map.cell }}" height="{{ a.map.cell }}"><title>{{ c.title }}</title></rect>{% endfor %}
</svg>{% endif %}
{% else %}<p class="muted">no chunk changed</p>{% endfor %}
{% endblock %}"#;

const PREVIEW: &str = r#"{% extends "base.html" %}
{% block title %}preview of {{ path }}{% endblock %}
{% block body %}
<h1>Preview of <code>{{ path }}</code></h1>
<p>snapshot <a class="id" href="/snapshot/{{ id }}">{{ id }}</a>; shape {{ shape }}, {{ data_type }};
elements [{{ region }}]{% if step > 1 %}, one cell per {{ step }} × {{ step }} elements (their first){% endif %};
values from {{ min }} (black) to {{ max }} (white){% if missing %}, {{ missing }} not a number (red){% endif %}</p>
<svg width="{{ width }}" height="{{ height }}" role="img" aria-label="values of {{ path }}" shape-rendering="crispEdges">
{% for c in cells %}<rect x="{{ c.x }}" y="{{ c.y }}" width="{{ cell }}" height="{{ cell }}" fill="{{ c.fill }}"><title>{{ c.title }}</title></rect>{% endfor %}
</svg>
{% endblock %}"#;

fn environment() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        for (name, source) in [
            ("base.html", BASE),
            ("index.html", INDEX),
            ("commits.html", COMMITS),
            ("log.html", LOG),
            ("snapshot.html", SNAPSHOT),
            ("diff.html", DIFF),
            ("preview.html", PREVIEW),
        ] {
            if let Err(e) = env.add_template(name, source) {
                tracing::error!(target: "floe::serve", template = name, error = %e, "bad template");
            }
        }
        env
    })
}

/// A JSON value as a template value.
fn template_value(v: Value) -> minijinja::Value {
    match v {
        Value::Null => minijinja::Value::from(()),
        Value::Bool(b) => minijinja::Value::from(b),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => minijinja::Value::from(u),
            (_, Some(i), _) => minijinja::Value::from(i),
            (_, _, Some(f)) => minijinja::Value::from(f),
            _ => minijinja::Value::from(n.to_string()),
        },
        Value::String(s) => minijinja::Value::from(s),
        Value::Array(a) => a.into_iter().map(template_value).collect(),
        Value::Object(o) => minijinja::Value::from_object(
            o.into_iter()
                .map(|(k, v)| (k, template_value(v)))
                .collect::<std::collections::BTreeMap<String, minijinja::Value>>(),
        ),
    }
}

fn render(name: &str, ctx: Value) -> Response {
    let ctx = template_value(ctx);
    match environment().get_template(name).and_then(|t| t.render(ctx)) {
        Ok(html) => Html(html).into_response(),
        Err(e) => {
            tracing::error!(target: "floe::serve", template = name, error = %e, "render failed");
            Failure::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the page could not be rendered",
            )
            .into_response()
        }
    }
}

/// `text` percent-encoded as one URL path segment.
fn segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

fn page(result: Result<Response, Failure>) -> Response {
    result.unwrap_or_else(IntoResponse::into_response)
}

fn commit_view(info: &SnapshotInfo) -> Value {
    json!({
        "id": info.id.to_string(),
        "parent": info.parent_id.map(|p| p.to_string()),
        "time": info.flushed_at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        "message": info.message,
        "metadata": if info.metadata.is_empty() {
            String::new()
        } else {
            serde_json::to_string_pretty(&info.metadata).unwrap_or_default()
        },
    })
}

/// Commits of `sel`, newest first, after `after`, at most `limit`; and the id to
/// pass as `after` for the next page.
async fn commits(
    state: &AppState,
    sel: VersionSelector,
    after: Option<SnapshotId>,
    limit: usize,
) -> Result<(Vec<Value>, Option<String>), Failure> {
    let mut history = std::pin::pin!(state.repo.ancestry_stream(sel));
    let mut skipping = after.is_some();
    let mut out: Vec<Value> = Vec::new();
    while let Some(info) = history.next().await {
        let info = info?;
        if skipping {
            skipping = Some(info.id) != after;
            continue;
        }
        if out.len() == limit {
            let next = out
                .last()
                .and_then(|c| c["id"].as_str().map(str::to_string));
            return Ok((out, next));
        }
        out.push(commit_view(&info));
    }
    Ok((out, None))
}

/// `/`: branches, tags, and the newest commits of `main` (or the first branch).
pub(crate) async fn index(State(state): State<Arc<AppState>>) -> Response {
    page(
        async {
            let repo = &state.repo;
            let mut branches = Vec::new();
            for name in repo.list_branches().await? {
                if let Ok(id) = repo.lookup_branch(&name).await {
                    branches.push(json!({"name": name, "url": segment(&name), "id": id.to_string()}));
                }
            }
            let mut tags = Vec::new();
            for name in repo.list_tags().await? {
                if let Ok(id) = repo.lookup_tag(&name).await {
                    tags.push(json!({"name": name, "url": segment(&name), "id": id.to_string()}));
                }
            }
            let head = if branches.iter().any(|b| b["name"] == "main") {
                "main".to_string()
            } else {
                branches
                    .first()
                    .and_then(|b| b["name"].as_str())
                    .unwrap_or("main")
                    .to_string()
            };
            let (commits, _) = commits(
                &state,
                VersionSelector::Branch(head.clone()),
                None,
                FRONT_COMMITS,
            )
            .await
            .unwrap_or_default();
            Ok(render(
                "index.html",
                json!({ "branches": branches, "tags": tags, "head_url": segment(&head), "head": head, "commits": commits }),
            ))
        }
        .await,
    )
}

/// `/log/{ref}?after=ID`: the commit log of a branch, tag or snapshot.
pub(crate) async fn log(
    State(state): State<Arc<AppState>>,
    Path(reference): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    page(
        async {
            let after = match query.get("after") {
                Some(a) => Some(
                    a.parse::<SnapshotId>()
                        .map_err(|_| Failure::bad_request(format!("`{a}` is not a snapshot id")))?,
                ),
                None => None,
            };
            let sel = state.repo.resolve_ref(&reference).await?;
            let (commits, next) = commits(&state, sel, after, LOG_PAGE).await?;
            Ok(render(
                "log.html",
                json!({ "reference_url": segment(&reference), "reference": reference, "commits": commits, "next": next }),
            ))
        }
        .await,
    )
}

/// A short text of a JSON value (`-` for none).
fn text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    }
}

/// The chunk shape of a regular grid, from an array's `zarr.json`.
fn chunk_shape(meta: &Value) -> Option<Vec<u64>> {
    let grid = meta.get("chunk_grid")?;
    if grid.get("name").and_then(Value::as_str) != Some("regular") {
        return None;
    }
    grid.get("configuration")?
        .get("chunk_shape")?
        .as_array()?
        .iter()
        .map(Value::as_u64)
        .collect()
}

/// `/snapshot/{id}`: the commit and its tree.
pub(crate) async fn snapshot(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Response {
    page(
        async {
            let id: SnapshotId = id
                .parse()
                .map_err(|_| Failure::bad_request(format!("`{id}` is not a snapshot id")))?;
            let version = state.versions.snapshot(id).await?;
            let mut history =
                std::pin::pin!(state.repo.ancestry_stream(VersionSelector::Snapshot(id)));
            let commit = match history.next().await {
                Some(info) => commit_view(&info?),
                None => return Err(crate::Error::SnapshotNotFound { id }.into()),
            };
            let nodes: Vec<Value> = version
                .session
                .list_nodes()?
                .iter()
                .map(|n| {
                    let meta: Value = serde_json::from_slice(&n.user_data).unwrap_or(Value::Null);
                    let attrs = meta
                        .get("attributes")
                        .filter(|a| a.as_object().is_some_and(|o| !o.is_empty()))
                        .map(|a| serde_json::to_string_pretty(a).unwrap_or_default())
                        .unwrap_or_default();
                    let codecs: Vec<String> = meta
                        .get("codecs")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(|c| text(c.get("name")))
                        .collect();
                    json!({
                        "path": n.path.to_string(),
                        "node_type": if n.is_group() { "group" } else { "array" },
                        "shape": meta
                            .get("shape")
                            .and_then(Value::as_array)
                            .and_then(|s| s.iter().map(Value::as_u64).collect::<Option<Vec<_>>>())
                            .map(|s| format!("{s:?}"))
                            .unwrap_or_default(),
                        "data_type": text(meta.get("data_type")),
                        "chunks": chunk_shape(&meta).map(|c| format!("{c:?}")).unwrap_or_else(|| {
                            text(meta.get("chunk_grid").and_then(|g| g.get("name")))
                        }),
                        "dimensions": text(meta.get("dimension_names")),
                        "codecs": codecs.join(", "),
                        "attributes": attrs,
                        "preview": (!n.is_group() && numeric(&meta)).then(|| {
                            n.path.to_string().split('/').map(segment).collect::<Vec<_>>().join("/")
                        }),
                    })
                })
                .collect();
            Ok(render(
                "snapshot.html",
                json!({ "commit": commit, "nodes": nodes }),
            ))
        }
        .await,
    )
}

/// The last two of `dims` as (rows, columns), as a 2-D page draws an N-D array:
/// (1, 1) for none, (1, n) for one.
fn last_two(dims: &[u64]) -> (u64, u64) {
    match dims {
        [] => (1, 1),
        [cols] => (1, *cols),
        [.., rows, cols] => (*rows, *cols),
    }
}

/// The grid map of the chunks `changed` of an array of `shape` in chunks of
/// `chunks`: its last two dimensions (one row for 1-D), cells of blocks of chunks
/// when the grid is larger than [`MAP_SIDE`] a side.
fn grid_map(shape: &[u64], chunks: &[u64], changed: &BTreeSet<ChunkIndices>) -> Value {
    let grid: Vec<u64> = shape
        .iter()
        .zip(chunks)
        .map(|(&s, &c)| s.div_ceil(c.max(1)).max(1))
        .collect();
    let (rows, cols) = last_two(&grid);
    let (row_block, col_block) = (rows.div_ceil(MAP_SIDE), cols.div_ceil(MAP_SIDE));
    let (map_rows, map_cols) = (rows.div_ceil(row_block), cols.div_ceil(col_block));
    let mut on: HashMap<(u64, u64), u64> = HashMap::new();
    for idx in changed {
        let (r, c) = match idx.len() {
            0 => (0, 0),
            1 => (0, idx[0]),
            k => (idx[k - 2], idx[k - 1]),
        };
        *on.entry((r / row_block, c / col_block)).or_default() += 1;
    }
    let cell = if map_cols > 32 { 8 } else { 16 };
    let mut cells = Vec::new();
    for r in 0..map_rows {
        for c in 0..map_cols {
            let count = on.get(&(r, c)).copied().unwrap_or(0);
            cells.push(json!({
                "x": c * (cell + 1),
                "y": r * (cell + 1),
                "class": if count > 0 { "on" } else { "off" },
                "title": format!(
                    "chunks [{}..{}, {}..{}]: {count} changed",
                    r * row_block,
                    ((r + 1) * row_block).min(rows),
                    c * col_block,
                    ((c + 1) * col_block).min(cols)
                ),
            }));
        }
    }
    json!({
        "grid": grid.iter().map(u64::to_string).collect::<Vec<_>>().join(" × "),
        "block": format!("{row_block} × {col_block}"),
        "projected": grid.len() > 2,
        "map": {
            "width": map_cols * (cell + 1),
            "height": map_rows * (cell + 1),
            "cell": cell,
            "cells": cells,
        },
    })
}

/// `/diff?from=REF&to=REF`: nodes added, deleted, updated and moved, and a grid
/// map of the chunks changed per array.
pub(crate) async fn diff(
    State(state): State<Arc<AppState>>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    page(
        async {
            let (Some(from), Some(to)) = (query.get("from"), query.get("to")) else {
                return Err(Failure::bad_request("give `from` and `to`"));
            };
            let from_id = state
                .versions
                .resolve(&state.repo.resolve_ref(from).await?)
                .await?;
            let to_id = state
                .versions
                .resolve(&state.repo.resolve_ref(to).await?)
                .await?;
            let d = state.repo.diff(from_id, to_id).await?;
            let version = state.versions.snapshot(to_id).await?;
            let paths = |s: &BTreeSet<crate::format::NodePath>| {
                s.iter().map(ToString::to_string).collect::<Vec<_>>()
            };
            let sections = vec![
                json!({"title": "Arrays added", "paths": paths(&d.new_arrays)}),
                json!({"title": "Groups added", "paths": paths(&d.new_groups)}),
                json!({"title": "Arrays deleted", "paths": paths(&d.deleted_arrays)}),
                json!({"title": "Groups deleted", "paths": paths(&d.deleted_groups)}),
                json!({"title": "Arrays changed (metadata)", "paths": paths(&d.updated_arrays)}),
                json!({"title": "Groups changed (metadata)", "paths": paths(&d.updated_groups)}),
            ];
            let moved: Vec<Value> = d
                .moved_nodes
                .iter()
                .map(|(to, from)| json!({"from": from.to_string(), "to": to.to_string()}))
                .collect();
            let arrays: Vec<Value> = d
                .updated_chunks
                .iter()
                .map(|(path, changed)| {
                    let meta: Option<Value> = version
                        .session
                        .get_node(path)
                        .ok()
                        .and_then(|n| serde_json::from_slice(&n.user_data).ok());
                    let shape: Option<Vec<u64>> = meta
                        .as_ref()
                        .and_then(|m| m.get("shape"))
                        .and_then(Value::as_array)
                        .and_then(|s| s.iter().map(Value::as_u64).collect());
                    let chunks = meta.as_ref().and_then(chunk_shape);
                    let mut view = match (shape, chunks) {
                        (Some(s), Some(c)) if s.len() == c.len() => grid_map(&s, &c, changed),
                        _ => json!({}),
                    };
                    view["path"] = json!(path.to_string());
                    view["count"] = json!(changed.len());
                    view
                })
                .collect();
            Ok(render(
                "diff.html",
                json!({
                    "from": from_id.to_string(),
                    "to": to_id.to_string(),
                    "sections": sections,
                    "moved": moved,
                    "arrays": arrays,
                }),
            ))
        }
        .await,
    )
}

/// Whether an array's `zarr.json` names a numeric (or boolean) data type.
fn numeric(meta: &Value) -> bool {
    meta.get("data_type")
        .and_then(Value::as_str)
        .is_some_and(|t| {
            t == "bool"
                || ["int", "uint", "float"].iter().any(|p| {
                    t.strip_prefix(p)
                        .is_some_and(|r| r.bytes().all(|b| b.is_ascii_digit()))
                })
        })
}

/// Most elements read per side of a preview, and most cells drawn per side.
const PREVIEW_READ: u64 = 512;
const PREVIEW_CELLS: u64 = 128;
/// Largest decoded chunk a preview reads.
const PREVIEW_MAX_CHUNK_BYTES: u64 = 64 << 20;

/// `/preview/{id}/{array path}`: the first 2-D slice of a numeric array (index 0
/// along the leading dimensions, at most 512 × 512 elements from the origin), drawn
/// as an SVG image of at most 128 × 128 cells.
pub(crate) async fn preview(
    State(state): State<Arc<AppState>>,
    Path((id, path)): Path<(String, String)>,
) -> Response {
    page(
        async {
            let id: SnapshotId = id
                .parse()
                .map_err(|_| Failure::bad_request(format!("`{id}` is not a snapshot id")))?;
            let node_path = crate::format::NodePath::new(&path)
                .map_err(|e| Failure::bad_request(e.to_string()))?;
            let version = state.versions.snapshot(id).await?;
            let node = version.session.get_node(&node_path)?;
            let meta: Value = serde_json::from_slice(&node.user_data).unwrap_or(Value::Null);
            if node.is_group() || !numeric(&meta) {
                return Err(Failure::not_found(format!(
                    "`{node_path}` is not an array of numbers"
                )));
            }
            let store: Arc<dyn crate::zarr::Store> = Arc::new(version.store.clone());
            let array = crate::zarr::Array::open(store, node_path.key_prefix())
                .await
                .map_err(|e| Failure::new(StatusCode::BAD_GATEWAY, e.to_string()))?;
            let shape = array.shape().to_vec();
            // A preview decodes whole chunks: refuse arrays whose chunks are too big.
            let chunk_bytes = array
                .chunk_shape()
                .iter()
                .fold(1u64, |a, &c| a.saturating_mul(c))
                .saturating_mul(array.data_type().fixed_size().unwrap_or(1) as u64);
            if chunk_bytes > PREVIEW_MAX_CHUNK_BYTES {
                return Err(Failure::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "`{node_path}` has chunks of {chunk_bytes} bytes: previews decode \
                         chunks of at most {PREVIEW_MAX_CHUNK_BYTES} bytes"
                    ),
                ));
            }
            let n = shape.len();
            let (rows, cols) = last_two(&shape);
            let (rows, cols) = (rows.min(PREVIEW_READ), cols.min(PREVIEW_READ));
            let start = vec![0; n];
            let mut size = vec![1; n];
            if n >= 1 {
                size[n - 1] = cols;
            }
            if n >= 2 {
                size[n - 2] = rows;
            }
            if size.contains(&0) {
                return Err(Failure::not_found(format!("`{node_path}` is empty")));
            }
            let region = crate::zarr::ArraySubset::new(start, size);
            let data = array
                .read_region_bytes(&region)
                .await
                .map_err(|e| Failure::new(StatusCode::BAD_GATEWAY, e.to_string()))?;
            let dt = array.data_type().clone();
            let elem = dt.fixed_size().unwrap_or(0);
            let crate::zarr::ArrayBytes::Fixed(bytes) = data else {
                return Err(Failure::not_found("not an array of numbers"));
            };
            let value = |r: u64, c: u64| -> Option<f64> {
                let i = usize::try_from(r * cols + c).ok()?;
                let b = bytes.get(i * elem..(i + 1) * elem)?;
                let v = crate::zarr::data_type::element_to_json(&dt, b);
                v.as_f64().or_else(|| v.as_bool().map(|b| f64::from(u8::from(b))))
            };
            let step = rows.max(cols).div_ceil(PREVIEW_CELLS).max(1);
            let samples: Vec<(u64, u64, Option<f64>)> = (0..rows)
                .step_by(step as usize)
                .flat_map(|r| (0..cols).step_by(step as usize).map(move |c| (r, c)))
                .map(|(r, c)| (r, c, value(r, c).filter(|v| v.is_finite())))
                .collect();
            let (min, max) = samples
                .iter()
                .filter_map(|s| s.2)
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
            let missing = samples.iter().filter(|s| s.2.is_none()).count();
            // Cells of 4 to 32 pixels, the image about 512 pixels across.
            let cell = (512 / rows.div_ceil(step).max(cols.div_ceil(step)).max(1)).clamp(4, 32);
            let cells: Vec<Value> = samples
                .iter()
                .map(|&(r, c, v)| {
                    let fill = match v {
                        Some(v) => {
                            let t = if max > min { (v - min) / (max - min) } else { 0.5 };
                            let g = (t * 255.0).round().clamp(0.0, 255.0) as u8;
                            format!("rgb({g},{g},{g})")
                        }
                        None => "rgb(220,40,40)".to_string(),
                    };
                    json!({
                        "x": c / step * cell,
                        "y": r / step * cell,
                        "fill": fill,
                        "title": format!("[{r}, {c}] = {}", v.map_or("NaN".to_string(), |v| v.to_string())),
                    })
                })
                .collect();
            Ok(render(
                "preview.html",
                json!({
                    "id": id.to_string(),
                    "path": node_path.to_string(),
                    "shape": format!("{shape:?}"),
                    "data_type": dt.to_string(),
                    "region": region.start.iter().zip(&region.shape)
                        .map(|(s, l)| format!("{s}:{}", s + l)).collect::<Vec<_>>().join(", "),
                    "step": step,
                    "min": if min.is_finite() { min.to_string() } else { "-".into() },
                    "max": if max.is_finite() { max.to_string() } else { "-".into() },
                    "missing": missing,
                    "cell": cell,
                    "width": cols.div_ceil(step) * cell,
                    "height": rows.div_ceil(step) * cell,
                    "cells": cells,
                }),
            ))
        }
        .await,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_parse_and_escape() {
        let env = environment();
        for name in [
            "base.html",
            "index.html",
            "commits.html",
            "log.html",
            "snapshot.html",
            "diff.html",
        ] {
            assert!(env.get_template(name).is_ok(), "{name}");
        }
        let html = env
            .get_template("log.html")
            .unwrap()
            .render(template_value(json!({
                "reference": "<script>x</script>",
                "reference_url": "x",
                "commits": [{"id": "A", "message": "<b>m</b>", "metadata": "", "time": "t"}],
                "next": null,
            })))
            .unwrap();
        assert!(!html.contains("<script>x"), "{html}");
        assert!(
            html.contains("&lt;b&gt;m&lt;&#x2f;b&gt;") || html.contains("&lt;b&gt;m&lt;/b&gt;"),
            "{html}"
        );
    }

    #[test]
    fn grid_maps_block_large_grids() {
        let changed: BTreeSet<ChunkIndices> = [vec![0, 0], vec![999, 999]].into();
        let v = grid_map(&[1000, 1000], &[1, 1], &changed);
        assert_eq!(v["block"], "16 × 16");
        let cells = v["map"]["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 63 * 63);
        assert_eq!(cells.iter().filter(|c| c["class"] == "on").count(), 2);
    }
}
