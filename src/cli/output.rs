//! Printing: JSON Lines, JSON objects and human-readable summaries of nodes.

use std::io::Write;

use serde_json::{json, Value};

use floe::repository::SnapshotInfo;
use floe::session::Diff;

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

/// Writes `byte` (a control character) as the escape `\u00XX`: readable text, and a
/// valid JSON escape of the same character inside a JSON string.
fn write_escape(out: &mut impl Write, byte: u8) -> std::io::Result<()> {
    write!(out, "\\u{byte:04x}")
}

/// Whether `byte`, outside a UTF-8 sequence, is a control character to escape: C0
/// except line feed and tab, and DEL.
fn escaped_c0(byte: u8) -> bool {
    (byte < 0x20 && byte != b'\n' && byte != b'\t') || byte == 0x7f
}

/// Writes text output with every control character escaped as `\u00XX` except line
/// feed and tab, which structure the output: C0 controls, DEL and the C1 controls
/// (U+0080 to U+009F, in UTF-8 `C2 80` to `C2 9F`). Everything the CLI prints goes
/// through it (except `cat --format raw`, which is data), so no repository-provided
/// string (names, commit messages, metadata, paths, attributes, values) can send a
/// terminal escape sequence. JSON output stays valid JSON with the same values: its
/// strings hold no raw C0 controls (serde escapes them), and `\u007f` or `\u009b` in
/// a string is the character escaped.
pub(super) struct TerminalSafe<W: Write> {
    inner: W,
    /// A `C2` byte held back until the next byte says whether it starts a C1 control.
    pending_c2: bool,
}

impl<W: Write> TerminalSafe<W> {
    /// Escapes what is written to `inner`.
    pub(super) fn new(inner: W) -> Self {
        TerminalSafe {
            inner,
            pending_c2: false,
        }
    }
}

impl<W: Write> Write for TerminalSafe<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut start = 0;
        for (i, &b) in buf.iter().enumerate() {
            if self.pending_c2 {
                self.pending_c2 = false;
                if (0x80..=0x9f).contains(&b) {
                    write_escape(&mut self.inner, b)?;
                    start = i + 1;
                    continue;
                }
                self.inner.write_all(&[0xc2])?;
                start = i;
            }
            if b == 0xc2 || escaped_c0(b) {
                self.inner.write_all(&buf[start..i])?;
                start = i + 1;
                if b == 0xc2 {
                    self.pending_c2 = true;
                } else {
                    write_escape(&mut self.inner, b)?;
                }
            }
        }
        self.inner.write_all(&buf[start..])?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if std::mem::take(&mut self.pending_c2) {
            // A lone lead byte: not a control character.
            self.inner.write_all(&[0xc2])?;
        }
        self.inner.flush()
    }
}

/// `text` with every control character (C0, DEL, C1, line breaks included) escaped as
/// `\u00XX`, for one-line messages.
pub(crate) fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through(parts: &[&[u8]]) -> Vec<u8> {
        let mut out = TerminalSafe::new(Vec::new());
        for p in parts {
            out.write_all(p).unwrap();
        }
        out.flush().unwrap();
        out.inner
    }

    #[test]
    fn controls_are_escaped_and_text_kept() {
        let text = "a\u{1b}[31mred\u{7}\r\n\tb\u{9b}2Jé\u{7f}ü\n";
        assert_eq!(
            String::from_utf8(through(&[text.as_bytes()])).unwrap(),
            "a\\u001b[31mred\\u0007\\u000d\n\tb\\u009b2Jé\\u007fü\n"
        );
        // A C1 control split between two writes, and a lone lead byte at the end.
        assert_eq!(through(&[b"x\xc2", b"\x9by\xc2"]), b"x\\u009by\xc2");
        // Other two-byte characters after C2 stay (U+00A0 to U+00BF).
        assert_eq!(through(&["\u{a9}".as_bytes()]), "\u{a9}".as_bytes());
    }

    #[test]
    fn json_stays_valid_with_the_same_value() {
        let v = serde_json::json!({"name": "x\u{1b}y\u{9b}z\u{7f}"});
        let line = through(&[serde_json::to_string(&v).unwrap().as_bytes()]);
        assert!(!line.iter().any(|&b| escaped_c0(b)));
        let back: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn messages_escape_line_breaks_too() {
        assert_eq!(escape_controls("a\nb\u{1b}"), "a\\u000ab\\u001b");
        assert_eq!(escape_controls("plain"), "plain");
    }
}
