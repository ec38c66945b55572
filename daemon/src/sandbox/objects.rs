//! A worktree's objects are add-only (issue 24). In the sandbox the
//! repository's `objects/` is read-only — no command can rewrite or delete
//! what the main branch is made of. A command in a worktree writes new
//! objects to a staging directory of its own (`GIT_OBJECT_DIRECTORY`, with
//! the repository's objects as an alternate); when the call ends the daemon
//! takes each staged loose object into the repository after checking that
//! it is what its name says (inflated and hashed), and never over one that
//! is there. Anything else (a pack, a misnamed or corrupt file) stays out.

use std::io::Read;
use std::path::{Path, PathBuf};

use miniz_oxide::inflate::stream::{InflateState, inflate};
use miniz_oxide::{DataFormat, MZError, MZFlush, MZStatus};

/// The staging directory of a worktree's git directory.
pub fn staging_dir(worktree_git_dir: &Path) -> PathBuf {
    worktree_git_dir.join("agentd-objects")
}

/// Largest staged object taken, compressed and inflated.
const MAX_COMPRESSED: u64 = 512 << 20;
const MAX_INFLATED: u64 = 1 << 30;
/// Bytes inflated in all for one call's objects: a zlib bomb, hard-linked
/// under many names, costs the daemon this much at most.
const BUDGET_INFLATED: u64 = 2 << 30;

/// What [`migrate`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Migrated {
    /// Objects taken into the repository.
    pub taken: usize,
    /// What stayed out, and why.
    pub refused: Vec<String>,
}

/// Takes the verified loose objects of `staging` into `objects` (the
/// repository's), for a repository hashing with SHA-256 when `sha256`.
pub fn migrate(staging: &Path, objects: &Path, sha256: bool) -> Migrated {
    let mut out = Migrated::default();
    // The staging directory is the command's: it must be a directory, not a
    // link to somewhere else.
    if !std::fs::symlink_metadata(staging).is_ok_and(|m| m.is_dir()) {
        return out;
    }
    let hex_len = if sha256 { 64 } else { 40 };
    let mut budget = BUDGET_INFLATED;
    for dir in std::fs::read_dir(staging).into_iter().flatten().flatten() {
        let name = dir.file_name().to_string_lossy().into_owned();
        let is_fanout = name.len() == 2 && name.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
        if !is_fanout {
            if name != "info" && name != "pack" {
                out.refused.push(format!("{name}: not a loose object directory"));
            } else if name == "pack" && std::fs::read_dir(dir.path()).is_ok_and(|mut d| d.next().is_some()) {
                out.refused.push("pack/: packs are not taken (run git without gc in the sandbox)".into());
            }
            continue;
        }
        if !dir.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        for file in std::fs::read_dir(dir.path()).into_iter().flatten().flatten() {
            let rest = file.file_name().to_string_lossy().into_owned();
            if rest.starts_with("tmp_obj_") {
                continue; // git's own, unfinished
            }
            let id = format!("{name}{rest}");
            if id.len() != hex_len || !id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
                out.refused.push(format!("{name}/{rest}: not an object name"));
                continue;
            }
            let target = objects.join(&name).join(&rest);
            if std::fs::symlink_metadata(&target).is_ok() {
                continue; // there already: never replaced
            }
            // What is taken is the very bytes that were checked, read once.
            match verify(&file.path(), &id, sha256, &mut budget) {
                Ok(bytes) => match install(&bytes, &objects.join(&name), &target) {
                    Ok(()) => out.taken += 1,
                    Err(e) => out.refused.push(format!("{id}: {e}")),
                },
                Err(e) => out.refused.push(format!("{id}: {e}")),
            }
        }
    }
    out
}

/// The bytes of the loose object file at `path` when they inflate to
/// `<type> <size>\0` and `size` bytes whose hash is `id`; what is inflated
/// comes off `budget`.
fn verify(path: &Path, id: &str, sha256: bool, budget: &mut u64) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("cannot open: {e}"))?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() || meta.len() > MAX_COMPRESSED {
        return Err("not a regular file of a sane size".into());
    }
    if std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
        return Err("a file with more than one name".into());
    }
    let algorithm = if sha256 { &ring::digest::SHA256 } else { &ring::digest::SHA1_FOR_LEGACY_USE_ONLY };
    let mut hash = ring::digest::Context::new(algorithm);
    let mut state = InflateState::new_boxed(DataFormat::Zlib);
    let mut input = Vec::new();
    file.take(MAX_COMPRESSED).read_to_end(&mut input).map_err(|e| e.to_string())?;
    let mut consumed = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    let mut header: Option<(u64, u64)> = None; // (declared size, body bytes seen)
    let mut head = Vec::new();
    loop {
        let r = inflate(&mut state, &input[consumed..], &mut buf, MZFlush::None);
        consumed += r.bytes_consumed;
        let chunk = &buf[..r.bytes_written];
        hash.update(chunk);
        match &mut header {
            Some((_, seen)) => *seen += chunk.len() as u64,
            None => {
                head.extend_from_slice(chunk);
                if let Some(nul) = head.iter().position(|b| *b == 0) {
                    let text = std::str::from_utf8(&head[..nul]).map_err(|_| "a bad header")?;
                    let (kind, size) = text.split_once(' ').ok_or("a bad header")?;
                    if !matches!(kind, "blob" | "tree" | "commit" | "tag") {
                        return Err(format!("an object of type {kind:?}"));
                    }
                    let size: u64 = size.parse().map_err(|_| "a bad size")?;
                    if size > MAX_INFLATED || size > *budget {
                        return Err("too large to take".into());
                    }
                    header = Some((size, (head.len() - nul - 1) as u64));
                } else if head.len() > 64 {
                    return Err("a bad header".into());
                }
            }
        }
        if header.is_some_and(|(size, seen)| seen > size || seen > MAX_INFLATED) {
            return Err("more data than its header says, or too large".into());
        }
        *budget = budget.checked_sub(chunk.len() as u64).ok_or("over what one call may stage")?;
        match r.status {
            Ok(MZStatus::StreamEnd) => break,
            Ok(_) if r.bytes_consumed == 0 && r.bytes_written == 0 => return Err("truncated".into()),
            Ok(_) => {}
            Err(MZError::Buf) if r.bytes_written > 0 => {}
            Err(e) => return Err(format!("not zlib data ({e:?})")),
        }
    }
    match header {
        Some((size, seen)) if size == seen => {}
        _ => return Err("less data than its header says".into()),
    }
    let digest: String = hash.finish().as_ref().iter().map(|b| format!("{b:02x}")).collect();
    if digest != id {
        return Err(format!("its content hashes to {digest}, not to its name"));
    }
    Ok(input)
}

/// Writes the verified `bytes` to `target` (in `dir`), read-only, without
/// ever replacing a file there.
fn install(bytes: &[u8], dir: &Path, target: &Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    match std::fs::DirBuilder::new().mode(0o755).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot make {}: {e}", dir.display())),
    }
    let tmp = dir.join(format!("tmp_obj_agentd_{}", uuid::Uuid::new_v4().simple()));
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o444).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    };
    let result = write().map_err(|e| e.to_string()).and_then(|()| match std::fs::hard_link(&tmp, target) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e.to_string()),
    });
    let _ = std::fs::remove_file(&tmp);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loose(kind: &str, body: &[u8]) -> (String, Vec<u8>) {
        let mut raw = format!("{kind} {}\0", body.len()).into_bytes();
        raw.extend_from_slice(body);
        let id: String = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &raw)
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        (id, miniz_oxide::deflate::compress_to_vec_zlib(&raw, 6))
    }

    #[test]
    fn only_objects_that_are_what_they_say_are_taken() {
        let staging = tempfile::tempdir().unwrap();
        let objects = tempfile::tempdir().unwrap();
        let put = |id: &str, bytes: &[u8]| {
            let dir = staging.path().join(&id[..2]);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(&id[2..]), bytes).unwrap();
        };
        let (good, good_bytes) = loose("blob", b"hello\n");
        put(&good, &good_bytes);
        // A file named after one object holding another.
        let (other, _) = loose("blob", b"future content\n");
        let (_, evil_bytes) = loose("blob", b"poison\n");
        put(&other, &evil_bytes);
        // One that exists already: never replaced.
        let (there, there_bytes) = loose("blob", b"main\n");
        put(&there, b"garbage");
        std::fs::create_dir_all(objects.path().join(&there[..2])).unwrap();
        std::fs::write(objects.path().join(&there[..2]).join(&there[2..]), &there_bytes).unwrap();
        let got = migrate(staging.path(), objects.path(), false);
        assert_eq!(got.taken, 1, "{got:?}");
        assert_eq!(got.refused.len(), 1, "{got:?}");
        assert!(objects.path().join(&good[..2]).join(&good[2..]).is_file());
        assert!(!objects.path().join(&other[..2]).join(&other[2..]).exists());
        assert_eq!(std::fs::read(objects.path().join(&there[..2]).join(&there[2..])).unwrap(), there_bytes);
    }
}
