//! Printing: JSON Lines, JSON objects and human-readable summaries of nodes.

use std::io::Write;

use serde_json::{json, Value};

use crate::repository::SnapshotInfo;
use crate::session::Diff;

/// Prints one JSON value on one line.
pub(super) fn json_line(out: &mut impl Write, value: &Value) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    out.write_all(b"\n")
}

/// The JSON Lines record of one commit: id, parent_id, flushed_at (RFC 3339),
/// message, metadata.
pub(super) fn commit_json(info: &SnapshotInfo) -> Value {
    json!({
        "id": info.id.to_string(),
        "parent_id": info.parent_id.map(|p| p.to_string()),
        "flushed_at": info.flushed_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        "message": info.message,
        "metadata": info.metadata,
    })
}

/// Prints one commit as text.
pub(super) fn commit_text(out: &mut impl Write, info: &SnapshotInfo) -> std::io::Result<()> {
    writeln!(out, "snapshot {}", info.id)?;
    if let Some(p) = info.parent_id {
        writeln!(out, "Parent:  {p}")?;
    }
    writeln!(
        out,
        "Date:    {}",
        info.flushed_at
            .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
    )?;
    if !info.metadata.is_empty() {
        writeln!(
            out,
            "Meta:    {}",
            serde_json::to_string(&info.metadata).unwrap_or_default()
        )?;
    }
    writeln!(out)?;
    for line in info.message.lines() {
        writeln!(out, "    {line}")?;
    }
    writeln!(out)
}

fn codec_names(meta: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(codecs) = meta.get("codecs").and_then(Value::as_array) {
        for c in codecs {
            let name = c
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string();
            if name == "sharding_indexed" {
                let inner = c
                    .get("configuration")
                    .map(codec_names)
                    .unwrap_or_default()
                    .join("+");
                out.push(format!("sharding_indexed[{inner}]"));
            } else {
                out.push(name);
            }
        }
    }
    out
}

fn compact(v: Option<&Value>) -> String {
    v.map(|v| serde_json::to_string(v).unwrap_or_default())
        .unwrap_or_else(|| "-".into())
}

/// A one-line human summary of a node's metadata.
pub(super) fn node_summary(path: &str, meta: &Value) -> String {
    let node_type = meta.get("node_type").and_then(Value::as_str).unwrap_or("?");
    let attrs = compact(meta.get("attributes"));
    if node_type == "array" {
        let dtype = match meta.get("data_type") {
            Some(Value::String(s)) => s.clone(),
            other => compact(other),
        };
        let chunks = meta
            .get("chunk_grid")
            .and_then(|g| g.get("configuration"))
            .and_then(|c| c.get("chunk_shape"));
        let dims = match meta.get("dimension_names") {
            Some(Value::Array(_)) => format!("  dims {}", compact(meta.get("dimension_names"))),
            _ => String::new(),
        };
        format!(
            "{path}  array  {dtype}  shape {}  chunks {}  codecs [{}]  fill {}{dims}  attrs {attrs}",
            compact(meta.get("shape")),
            compact(chunks),
            codec_names(meta).join(", "),
            compact(meta.get("fill_value")),
        )
    } else {
        format!("{path}  group  attrs {attrs}")
    }
}

/// Prints a diff as text.
pub(super) fn diff_text(out: &mut impl Write, d: &Diff) -> std::io::Result<()> {
    if d.is_empty() {
        return writeln!(out, "no changes");
    }
    let sections = [
        ("Groups created", &d.new_groups),
        ("Arrays created", &d.new_arrays),
        ("Groups deleted", &d.deleted_groups),
        ("Arrays deleted", &d.deleted_arrays),
        ("Group metadata updated", &d.updated_groups),
        ("Array metadata updated", &d.updated_arrays),
    ];
    for (title, set) in sections {
        if !set.is_empty() {
            writeln!(out, "{title}:")?;
            for p in set {
                writeln!(out, "    {p}")?;
            }
        }
    }
    if !d.updated_chunks.is_empty() {
        writeln!(out, "Chunks changed:")?;
        for (p, chunks) in &d.updated_chunks {
            let list: Vec<String> = chunks.iter().map(|c| format!("{c:?}")).collect();
            writeln!(out, "    {p}: {} chunk(s) {}", chunks.len(), list.join(" "))?;
        }
    }
    Ok(())
}
