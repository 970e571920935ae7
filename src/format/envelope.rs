//! The envelope around snapshot, manifest and transaction-log files: a 39-byte header
//! followed by one zstd frame holding the flatbuffer.
//!
//! | offset | length | content |
//! |---|---|---|
//! | 0 | 12 | magic, the UTF-8 of `ICE🧊CHUNK` |
//! | 12 | 24 | writer name, ASCII, space padded |
//! | 36 | 1 | spec version (1 or 2; [`SpecVersion`]) |
//! | 37 | 1 | file type ([`FileType`](crate::format::envelope::FileType)) |
//! | 38 | 1 | compression (1 = zstd) |
//!
//! Spec: `../shared/docs/icechunk-format-v1.md`, "Envelope"; spec 2 adds file type 6
//! (the `repo` object) and the version byte 2 (`icechunk-format-notes.md` §3.1).

use std::io::Read;

use crate::format::limits::MAX_OBJECT_BYTES;
use crate::format::{FormatError, SpecVersion};
use crate::zstd_context::{with_compressor, with_decompressor};

/// The 12 magic bytes every envelope starts with.
pub const MAGIC: [u8; 12] = *b"ICE\xF0\x9F\xA7\x8ACHUNK";
/// Length of the envelope header, in bytes.
pub const HEADER_LEN: usize = 39;
/// Compression byte for zstd, the only one Icechunk readers accept.
pub const COMPRESSION_ZSTD: u8 = 1;
/// The zstd level snapshots and the `repo` object are written at unless the
/// repository config's `compression.level` says otherwise (Icechunk's default for
/// every file).
pub const DEFAULT_LEVEL: i32 = 3;
/// The zstd level manifests and transaction logs are written at unless the
/// repository config's `compression.level` says otherwise.
///
/// These files are millions of small flatbuffer tables, and on them zstd's level 1
/// makes files as small as level 3 or smaller in about half the CPU (zstd 1.5,
/// 150,000 refs: native refs with random chunk ids 2.38× at ~400 MB/s against
/// 2.27× at ~200 MB/s; virtual refs 7.8× against 6.9×; chunk indices of a
/// transaction log the same ratio at ~2× the speed). Inline refs come out up to ~10%
/// larger. A configured level applies to every file as it is.
pub const BULK_DEFAULT_LEVEL: i32 = 1;

/// The zstd level a file of type `file_type` is written at when the repository
/// config sets no `compression.level`: [`BULK_DEFAULT_LEVEL`] for manifests and
/// transaction logs, [`DEFAULT_LEVEL`] for the rest.
pub fn default_level(file_type: FileType) -> i32 {
    match file_type {
        FileType::Manifest | FileType::TransactionLog => BULK_DEFAULT_LEVEL,
        FileType::Snapshot | FileType::RepoInfo => DEFAULT_LEVEL,
    }
}

/// A declared content size this many times the compressed size (plus
/// [`TRUSTED_FLOOR`]) is allocated up front; a larger declaration is not trusted, and
/// the buffer grows with the bytes actually decompressed instead.
const TRUSTED_RATIO: u64 = 64;
/// Declared sizes up to this many bytes are always allocated up front.
const TRUSTED_FLOOR: u64 = 16 << 20;

/// The most a zstd frame may decompress to, in bytes: [`MAX_OBJECT_BYTES`] whatever
/// the frame's size, since a legitimate 2 GiB object of repeated bytes compresses to
/// a few hundred KiB (`limits` explains why there is no ratio bound).
pub fn decompressed_limit(_compressed: usize) -> u64 {
    MAX_OBJECT_BYTES
}

/// What an enveloped file holds (header byte 37).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FileType {
    /// `snapshots/<id>`
    Snapshot = 1,
    /// `manifests/<id>`
    Manifest = 2,
    /// `transactions/<id>`
    TransactionLog = 4,
    /// `repo` (spec 2)
    RepoInfo = 6,
}

impl FileType {
    fn name(self) -> &'static str {
        match self {
            FileType::Snapshot => "snapshot",
            FileType::Manifest => "manifest",
            FileType::TransactionLog => "transaction log",
            FileType::RepoInfo => "repo",
        }
    }
}

/// Decompresses a frame that declares its content size `declared` (already checked
/// against the limit) with this thread's reused context, into a buffer of exactly
/// that size: a frame holding more fails, one holding less is caught by the caller.
fn decompress_declared(frame: &[u8], declared: usize) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(declared);
    with_decompressor(|d| d.decompress_to_buffer(frame, &mut out))?;
    Ok(out)
}

/// The writer name floe puts in the header: `floe-<crate version>`.
pub fn writer_name() -> String {
    format!("floe-{}", env!("CARGO_PKG_VERSION"))
}

/// Wraps a finished flatbuffer into a spec-1 envelope of type `file_type`.
///
/// # Errors
/// [`FormatError::Compression`] if zstd fails.
#[cfg_attr(not(feature = "testing"), allow(dead_code))]
pub fn seal(file_type: FileType, flatbuffer: &[u8]) -> Result<Vec<u8>, FormatError> {
    seal_at(file_type, SpecVersion::V1, DEFAULT_LEVEL, flatbuffer)
}

/// Wraps a finished flatbuffer into an envelope of type `file_type` and version
/// `spec`, compressed at zstd level `level` (the config's `compression.level`) into
/// one frame that declares its content size. zstd compresses the whole input in one
/// pass, straight into the output after the header (not zero-filled first).
///
/// # Errors
/// [`FormatError::Compression`] if zstd fails.
pub fn seal_at(
    file_type: FileType,
    spec: SpecVersion,
    level: i32,
    input: &[u8],
) -> Result<Vec<u8>, FormatError> {
    use zstd::zstd_safe::{zstd_sys::ZSTD_EndDirective, InBuffer, OutBuffer, ResetDirective};
    let bound = zstd::zstd_safe::compress_bound(input.len());
    let mut out = Vec::with_capacity(HEADER_LEN + bound);
    out.extend_from_slice(&MAGIC);
    let mut name = [b' '; 24];
    let w = writer_name();
    let n = w.len().min(24);
    name[..n].copy_from_slice(&w.as_bytes()[..n]);
    out.extend_from_slice(&name);
    out.push(spec as u8);
    out.push(file_type as u8);
    out.push(COMPRESSION_ZSTD);
    let compression = |reason: String| FormatError::Compression {
        what: file_type.name(),
        reason,
    };
    let zstd_error = |code: usize| compression(zstd::zstd_safe::get_error_name(code).to_string());
    with_compressor(level, false, |c| {
        let cx = c.context_mut();
        Ok(cx
            .reset(ResetDirective::SessionOnly)
            .and_then(|_| cx.set_pledged_src_size(Some(input.len() as u64)))
            .map_err(zstd_error)
            .and_then(|_| {
                // With room for the worst case, one call with `e_end` compresses the
                // whole input and ends the frame (0: nothing left to flush).
                let mut output = OutBuffer::around_pos(&mut out, HEADER_LEN);
                let mut src = InBuffer::around(input);
                let left = cx
                    .compress_stream2(&mut output, &mut src, ZSTD_EndDirective::ZSTD_e_end)
                    .map_err(zstd_error)?;
                if left != 0 || src.pos() != input.len() {
                    return Err(compression("zstd did not finish the frame".into()));
                }
                Ok(())
            }))
    })
    .map_err(|e| compression(e.to_string()))??;
    Ok(out)
}

/// The parsed header of an envelope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Writer name without padding, e.g. `ic-0.3.24` or `floe-0.1.0`.
    pub writer: String,
    /// Spec version byte.
    pub spec_version: u8,
    /// File type byte.
    pub file_type: u8,
    /// Compression byte.
    pub compression: u8,
}

/// Reads and checks the 39-byte header.
///
/// # Errors
/// [`FormatError::Truncated`], [`FormatError::BadMagic`],
/// [`FormatError::UnsupportedSpecVersion`], [`FormatError::WrongFileType`],
/// [`FormatError::UnsupportedCompression`].
pub fn read_header(expected: FileType, bytes: &[u8]) -> Result<Header, FormatError> {
    let what = expected.name();
    if bytes.len() < HEADER_LEN {
        return Err(FormatError::Truncated {
            what,
            len: bytes.len(),
        });
    }
    if bytes[..12] != MAGIC {
        return Err(FormatError::BadMagic { what });
    }
    let header = Header {
        writer: String::from_utf8_lossy(&bytes[12..36])
            .trim_end()
            .to_string(),
        spec_version: bytes[36],
        file_type: bytes[37],
        compression: bytes[38],
    };
    SpecVersion::from_byte(header.spec_version)?;
    if header.file_type != expected as u8 {
        return Err(FormatError::WrongFileType {
            expected: what,
            found: header.file_type,
        });
    }
    if header.compression != COMPRESSION_ZSTD {
        return Err(FormatError::UnsupportedCompression {
            what,
            code: header.compression,
        });
    }
    Ok(header)
}

/// Checks the header and returns the decompressed flatbuffer.
///
/// # Errors
/// As [`open_versioned`].
pub fn open(expected: FileType, bytes: &[u8]) -> Result<Vec<u8>, FormatError> {
    open_versioned(expected, bytes).map(|(_, payload)| payload)
}

/// Checks the header and returns the file's spec version and decompressed
/// flatbuffer. A repository upgraded from spec 1 mixes files of both versions; each
/// is decoded by its own header.
///
/// # Errors
/// As [`read_header`], plus [`FormatError::Compression`] for a corrupt or truncated
/// zstd frame and [`FormatError::TooLarge`] for one that decompresses past the limit.
pub fn open_versioned(
    expected: FileType,
    bytes: &[u8],
) -> Result<(SpecVersion, Vec<u8>), FormatError> {
    let spec = SpecVersion::from_byte(read_header(expected, bytes)?.spec_version)?;
    let what = expected.name();
    let frame = &bytes[HEADER_LEN..];
    let compression = |reason: String| FormatError::Compression { what, reason };
    let limit = decompressed_limit(frame.len());
    // A frame that declares its size is checked before anything is allocated.
    let declared = zstd::zstd_safe::get_frame_content_size(frame)
        .ok()
        .flatten();
    if declared.is_some_and(|n| n > limit) {
        return Err(FormatError::TooLarge { what, limit });
    }
    let compressed = u64::try_from(frame.len()).unwrap_or(u64::MAX);
    let trusted = compressed
        .saturating_mul(TRUSTED_RATIO)
        .saturating_add(TRUSTED_FLOOR);
    let out = match declared
        .filter(|&n| n <= trusted)
        .and_then(|n| usize::try_from(n).ok())
    {
        Some(n) => decompress_declared(frame, n).map_err(|e| compression(e.to_string()))?,
        None => {
            let decoder =
                zstd::stream::read::Decoder::new(frame).map_err(|e| compression(e.to_string()))?;
            // The buffer grows with what really comes out (a declared size may lie).
            let mut out = Vec::with_capacity(
                usize::try_from(trusted.min(declared.unwrap_or(0))).unwrap_or(0),
            );
            // One byte past the limit tells a frame that reaches it from one that
            // exceeds it.
            decoder
                .take(limit.saturating_add(1))
                .read_to_end(&mut out)
                .map_err(|e| compression(e.to_string()))?;
            out
        }
    };
    if u64::try_from(out.len()).unwrap_or(u64::MAX) > limit {
        return Err(FormatError::TooLarge { what, limit });
    }
    if let Some(n) = declared.filter(|&n| usize::try_from(n).ok() != Some(out.len())) {
        return Err(compression(format!(
            "the frame declares {n} bytes but holds {}",
            out.len()
        )));
    }
    Ok((spec, out))
}

/// The payload of an enveloped file, decompressed from its start only as far as a
/// reader asks: one that needs the first bytes of a large file (the commit facts of
/// a snapshot, which floe writes at the front of the flatbuffer, before its node
/// table) decompresses those and stops. Limits are those of [`open_versioned`]:
/// a frame that declares more than the limit fails before anything is decompressed,
/// one that holds more fails once the limit is passed, and the buffer never holds
/// more than what was decompressed (nor more than the frame declares).
pub struct PayloadPrefix<'a> {
    what: &'static str,
    spec: SpecVersion,
    /// `None` once the frame is decompressed to its end.
    decoder: Option<zstd::stream::read::Decoder<'static, &'a [u8]>>,
    data: Vec<u8>,
    declared: Option<u64>,
    limit: u64,
}

impl std::fmt::Debug for PayloadPrefix<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PayloadPrefix")
            .field("what", &self.what)
            .field("spec", &self.spec)
            .field("decompressed", &self.data.len())
            .field("complete", &self.is_complete())
            .field("declared", &self.declared)
            .finish()
    }
}

impl<'a> PayloadPrefix<'a> {
    /// Checks the header of `bytes`, a file of type `expected`, and prepares to
    /// decompress its payload; nothing is decompressed yet.
    ///
    /// # Errors
    /// As [`read_header`]; [`FormatError::TooLarge`] when the frame declares more
    /// than the limit; [`FormatError::Compression`] when it is not a zstd frame.
    pub fn open(expected: FileType, bytes: &'a [u8]) -> Result<Self, FormatError> {
        let spec = SpecVersion::from_byte(read_header(expected, bytes)?.spec_version)?;
        let what = expected.name();
        let frame = &bytes[HEADER_LEN..];
        let limit = decompressed_limit(frame.len());
        let declared = zstd::zstd_safe::get_frame_content_size(frame)
            .ok()
            .flatten();
        if declared.is_some_and(|n| n > limit) {
            return Err(FormatError::TooLarge { what, limit });
        }
        let decoder = zstd::stream::read::Decoder::with_buffer(frame).map_err(|e| {
            FormatError::Compression {
                what,
                reason: e.to_string(),
            }
        })?;
        Ok(PayloadPrefix {
            what,
            spec,
            decoder: Some(decoder),
            data: Vec::new(),
            declared,
            limit,
        })
    }

    /// The file's spec version.
    pub fn spec_version(&self) -> SpecVersion {
        self.spec
    }

    /// The payload decompressed so far, from its first byte.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// Whether [`PayloadPrefix::data`] is the whole payload.
    pub fn is_complete(&self) -> bool {
        self.decoder.is_none()
    }

    /// The whole payload (decompressing the rest).
    ///
    /// # Errors
    /// As [`PayloadPrefix::fill`].
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub fn into_complete(mut self) -> Result<Vec<u8>, FormatError> {
        self.fill(usize::MAX)?;
        Ok(self.data)
    }

    /// The payload size the frame declares, in bytes, if it declares one (not
    /// trusted: a frame holding another size fails once decompressed to its end).
    pub fn declared_len(&self) -> Option<u64> {
        self.declared
    }

    /// The payload without bytes `keep..from`: its first `keep` bytes followed by
    /// those from byte `from` to the end (the first `keep` only, when it ends before
    /// `from`), for a reader that needs the front and the back of a large payload but
    /// not its middle (a snapshot's root table and the commit facts Icechunk writes
    /// after the nodes). The middle is decompressed and dropped as it goes, never
    /// held.
    ///
    /// # Errors
    /// As [`PayloadPrefix::fill`].
    pub fn into_without(mut self, keep: usize, from: usize) -> Result<Vec<u8>, FormatError> {
        let what = self.what;
        let compression = |reason: String| FormatError::Compression { what, reason };
        self.fill(keep.min(from))?;
        let Some(mut decoder) = self.decoder.take() else {
            let end = from.min(self.data.len());
            let start = keep.min(end);
            self.data.drain(start..end);
            return Ok(self.data);
        };
        // Payload bytes decompressed so far (the buffer is cut below).
        let mut at = u64::try_from(self.data.len()).unwrap_or(u64::MAX);
        if self.data.len() > keep {
            self.data.truncate(keep);
        }
        let from64 = u64::try_from(from).unwrap_or(u64::MAX);
        let skip = from64.saturating_sub(at);
        let ask = skip.min(self.limit.saturating_add(1).saturating_sub(at));
        let skipped = std::io::copy(&mut (&mut decoder).take(ask), &mut std::io::sink())
            .map_err(|e| compression(e.to_string()))?;
        at = at.saturating_add(skipped);
        let ended = skipped < ask;
        if !ended && at <= self.limit {
            let room = self.limit.saturating_add(1).saturating_sub(at);
            if let Some(n) = self.declared {
                let left = n.saturating_add(1).saturating_sub(at).min(room);
                self.data.reserve_exact(usize::try_from(left).unwrap_or(0));
            }
            let got = (&mut decoder)
                .take(room)
                .read_to_end(&mut self.data)
                .map_err(|e| compression(e.to_string()))?;
            at = at.saturating_add(u64::try_from(got).unwrap_or(u64::MAX));
        }
        if at > self.limit {
            return Err(FormatError::TooLarge {
                what,
                limit: self.limit,
            });
        }
        if let Some(n) = self.declared.filter(|&n| n != at) {
            return Err(compression(format!(
                "the frame declares {n} bytes but holds {at}"
            )));
        }
        Ok(self.data)
    }

    /// Decompresses until the first `len` bytes of the payload (or all of it, when
    /// shorter) are in [`PayloadPrefix::data`].
    ///
    /// # Errors
    /// [`FormatError::Compression`] for a corrupt or truncated frame, or one that
    /// holds other than the size it declares; [`FormatError::TooLarge`] past the
    /// limit.
    pub fn fill(&mut self, len: usize) -> Result<(), FormatError> {
        let what = self.what;
        let have = self.data.len();
        let Some(decoder) = self.decoder.as_mut() else {
            return Ok(());
        };
        if have >= len {
            return Ok(());
        }
        let compression = |reason: String| FormatError::Compression { what, reason };
        let have64 = u64::try_from(have).unwrap_or(u64::MAX);
        let want = u64::try_from(len - have).unwrap_or(u64::MAX);
        // One byte past the limit tells a payload that reaches it from one that
        // exceeds it.
        let ask = want.min(self.limit.saturating_add(1).saturating_sub(have64));
        if let Some(n) = self.declared {
            // Room for what the frame says is left (one byte more, to see a frame
            // that holds more), never more than asked.
            let left = n.saturating_add(1).saturating_sub(have64).min(ask);
            self.data.reserve_exact(usize::try_from(left).unwrap_or(0));
        }
        let got = decoder
            .take(ask)
            .read_to_end(&mut self.data)
            .map_err(|e| compression(e.to_string()))?;
        let total = u64::try_from(self.data.len()).unwrap_or(u64::MAX);
        if total > self.limit {
            return Err(FormatError::TooLarge {
                what,
                limit: self.limit,
            });
        }
        if self.declared.is_some_and(|n| total > n) {
            return Err(compression(format!(
                "the frame declares {} bytes but holds more",
                self.declared.unwrap_or(0)
            )));
        }
        if u64::try_from(got).unwrap_or(u64::MAX) < ask {
            // The frame ended.
            self.decoder = None;
            if let Some(n) = self.declared.filter(|&n| n != total) {
                return Err(compression(format!(
                    "the frame declares {n} bytes but holds {total}"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header of type `t` followed by `frame`.
    fn enveloped(t: FileType, frame: &[u8]) -> Vec<u8> {
        let mut out = seal(t, b"").unwrap()[..HEADER_LEN].to_vec();
        out.extend_from_slice(frame);
        out
    }

    /// A zstd frame whose header declares `declared` bytes of content and whose one
    /// raw block holds `content`.
    fn frame_declaring(declared: u64, content: &[u8]) -> Vec<u8> {
        // Magic, then a descriptor with an 8-byte content size and a single segment.
        let mut f = vec![0x28, 0xB5, 0x2F, 0xFD, 0xE0];
        f.extend_from_slice(&declared.to_le_bytes());
        // Last block, raw, `content.len()` bytes.
        let header = 1 | (u32::try_from(content.len()).unwrap() << 3);
        f.extend_from_slice(&header.to_le_bytes()[..3]);
        f.extend_from_slice(content);
        f
    }

    #[test]
    fn highly_compressible_objects_are_read_back_whatever_their_ratio() {
        // 64 MiB of one byte compress ~10,000:1; floe wrote such objects (a large
        // attribute) and then refused to read them under a 1000:1 bound.
        let size = 64usize << 20;
        let payload = vec![b'a'; size];
        let sealed = seal(FileType::Snapshot, &payload).unwrap();
        assert!(sealed.len() < (size >> 12), "{}", sealed.len());
        assert_eq!(open(FileType::Snapshot, &sealed).unwrap().len(), size);
        // The same bytes in a frame that does not declare its size.
        let mut streamed = Vec::new();
        let mut enc = zstd::stream::write::Encoder::new(&mut streamed, 1).unwrap();
        enc.include_contentsize(false).unwrap();
        std::io::copy(&mut &payload[..], &mut enc).unwrap();
        enc.finish().unwrap();
        assert_eq!(
            zstd::zstd_safe::get_frame_content_size(&streamed)
                .ok()
                .flatten(),
            None
        );
        let opened = open(
            FileType::Manifest,
            &enveloped(FileType::Manifest, &streamed),
        )
        .unwrap();
        assert_eq!(opened.len(), size);
        assert_eq!(decompressed_limit(1 << 10), MAX_OBJECT_BYTES);
    }

    #[test]
    fn frames_declaring_more_than_an_object_can_hold_are_refused_unread() {
        let err = open(
            FileType::Snapshot,
            &enveloped(
                FileType::Snapshot,
                &frame_declaring(MAX_OBJECT_BYTES + 1, b"x"),
            ),
        );
        assert!(matches!(
            err,
            Err(FormatError::TooLarge {
                what: "snapshot",
                limit: MAX_OBJECT_BYTES
            })
        ));
    }

    #[test]
    fn a_declared_size_is_not_trusted_for_allocation() {
        // 1 GiB declared, 5 bytes held: refused as a lying frame, without allocating
        // the declared size first.
        let err = open(
            FileType::Manifest,
            &enveloped(FileType::Manifest, &frame_declaring(1 << 30, b"hello")),
        );
        assert!(
            matches!(
                err,
                Err(FormatError::Compression {
                    what: "manifest",
                    ..
                })
            ),
            "{err:?}"
        );
        // A truthful small frame decodes.
        let ok = open(
            FileType::Manifest,
            &enveloped(FileType::Manifest, &frame_declaring(5, b"hello")),
        )
        .unwrap();
        assert_eq!(ok, b"hello");
    }

    #[test]
    fn seal_open_round_trip() {
        let payload = b"hello flatbuffer payload".repeat(10);
        let sealed = seal(FileType::Manifest, &payload).unwrap();
        assert_eq!(&sealed[..12], "ICE🧊CHUNK".as_bytes());
        assert_eq!(sealed[36..39], [1, 2, 1]);
        let h = read_header(FileType::Manifest, &sealed).unwrap();
        assert_eq!(h.writer, writer_name());
        assert_eq!(open(FileType::Manifest, &sealed).unwrap(), payload);
        let v2 = seal_at(FileType::RepoInfo, SpecVersion::V2, DEFAULT_LEVEL, &payload).unwrap();
        assert_eq!(v2[36..39], [2, 6, 1]);
        assert_eq!(
            open_versioned(FileType::RepoInfo, &v2).unwrap(),
            (SpecVersion::V2, payload)
        );
    }

    #[test]
    fn rejects_bad_input() {
        let sealed = seal(FileType::Snapshot, b"abcdefgh").unwrap();
        assert!(matches!(
            open(FileType::Manifest, &sealed),
            Err(FormatError::WrongFileType { .. })
        ));
        assert!(matches!(
            open(FileType::Snapshot, &sealed[..20]),
            Err(FormatError::Truncated { .. })
        ));
        assert!(matches!(
            open(FileType::Snapshot, &sealed[..sealed.len() - 3]),
            Err(FormatError::Compression { .. })
        ));
        let mut bad = sealed.clone();
        bad[0] = b'X';
        assert!(matches!(
            open(FileType::Snapshot, &bad),
            Err(FormatError::BadMagic { .. })
        ));
        let mut v2 = sealed.clone();
        v2[36] = 2;
        assert_eq!(
            open_versioned(FileType::Snapshot, &v2).unwrap(),
            (SpecVersion::V2, b"abcdefgh".to_vec())
        );
        let mut v3 = sealed.clone();
        v3[36] = 3;
        assert!(matches!(
            open(FileType::Snapshot, &v3),
            Err(FormatError::UnsupportedSpecVersion { version: 3 })
        ));
        let mut comp = sealed;
        comp[38] = 0;
        assert!(matches!(
            open(FileType::Snapshot, &comp),
            Err(FormatError::UnsupportedCompression { .. })
        ));
    }
}
