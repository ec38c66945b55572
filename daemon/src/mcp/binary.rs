//! Audio and binary resources in MCP results. A model API takes neither in
//! a tool result, so each is kept as a file of the call, in the session's
//! output directory (where Read reads it, a PDF or an image included), and
//! the result names it. At most [`MAX_CALL_BYTES`] are kept a call.

use std::path::PathBuf;

use base64::Engine;

/// Bytes of audio and binary resources kept for one call.
pub const MAX_CALL_BYTES: usize = 20 * 1024 * 1024;

/// One piece of binary content of a result.
pub struct Binary<'a> {
    /// What it is, as the result says it: `audio`, `resource file:///x`.
    pub what: &'a str,
    /// Its MIME type, as the server gave it.
    pub media_type: &'a str,
    /// Its bytes, base64.
    pub data: &'a str,
}

/// Keeps one call's binary content.
pub struct Saver {
    dir: PathBuf,
    prefix: String,
    count: usize,
    left: usize,
}

impl Saver {
    /// Files named `<prefix>-<n>.<ext>` in `dir`.
    pub fn new(dir: PathBuf, prefix: &str) -> Self {
        let prefix: String =
            prefix.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
        Saver { dir, prefix, count: 0, left: MAX_CALL_BYTES }
    }

    /// Keeps `binary`; what the result says of it.
    pub fn save(&mut self, binary: Binary<'_>) -> String {
        let Binary { what, media_type, data } = binary;
        // The decoded size, before decoding anything.
        let size = data.len() / 4 * 3;
        if size > self.left + 2 {
            return format!(
                "[{what} ({media_type}, about {size} bytes): not kept, over the {} MiB a call keeps]",
                MAX_CALL_BYTES >> 20
            );
        }
        let bytes = match base64::engine::general_purpose::STANDARD.decode(data.trim()) {
            Ok(bytes) => bytes,
            Err(_) => return format!("[{what} ({media_type}): not kept, its data is not base64]"),
        };
        self.left = self.left.saturating_sub(bytes.len());
        self.count += 1;
        let file = self.dir.join(format!("{}-{}.{}", self.prefix, self.count, extension(media_type)));
        match write_new(&file, &bytes) {
            Ok(()) => format!("[{what} ({media_type}, {} bytes) saved to {}]", bytes.len(), file.display()),
            Err(e) => format!("[{what} ({media_type}, {} bytes): not kept: {e}]", bytes.len()),
        }
    }
}

fn write_new(file: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(file)?;
    f.write_all(bytes)
}

/// A file extension for `media_type` (`bin` when unknown).
fn extension(media_type: &str) -> &'static str {
    let essence = media_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    match essence.as_str() {
        "audio/wav" | "audio/x-wav" | "audio/wave" => "wav",
        "audio/mpeg" | "audio/mp3" => "mp3",
        "audio/ogg" => "ogg",
        "audio/flac" => "flac",
        "audio/webm" => "webm",
        "audio/mp4" | "audio/aac" => "m4a",
        "application/pdf" => "pdf",
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "application/json" => "json",
        "application/zip" => "zip",
        e if e.starts_with("text/") => "txt",
        _ => "bin",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_content_is_kept_as_files_within_the_calls_budget() {
        let dir = tempfile::tempdir().unwrap();
        let mut saver = Saver::new(dir.path().join("out"), "mcp/call 1");
        let said = saver.save(Binary { what: "audio", media_type: "audio/wav", data: "UklGRg==" });
        let file = dir.path().join("out/mcp_call_1-1.wav");
        assert_eq!(said, format!("[audio (audio/wav, 4 bytes) saved to {}]", file.display()));
        assert_eq!(std::fs::read(&file).unwrap(), b"RIFF");
        let said =
            saver.save(Binary { what: "resource file:///r.pdf", media_type: "application/pdf", data: "JVBERg==" });
        assert!(said.contains("mcp_call_1-2.pdf"), "{said}");
        assert!(saver.save(Binary { what: "audio", media_type: "audio/wav", data: "%%%" }).contains("not base64"));
        // Over the budget: not decoded, not kept.
        let big = "A".repeat((MAX_CALL_BYTES / 3 + 10) * 4);
        let said = saver.save(Binary { what: "audio", media_type: "audio/ogg", data: &big });
        assert!(said.contains("not kept, over the 20 MiB"), "{said}");
        assert_eq!(std::fs::read_dir(dir.path().join("out")).unwrap().count(), 2);
        assert_eq!(extension("text/plain; charset=utf-8"), "txt");
        assert_eq!(extension("application/x-unknown"), "bin");
    }
}
