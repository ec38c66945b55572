//! Where the daemon listens by default, shared by the daemon and its clients
//! so both find the same socket without configuration.

use std::path::{Path, PathBuf};

/// Environment variable that overrides the socket path (as `--socket` does).
pub const SOCKET_ENV: &str = "AGENTD_SOCKET";

/// File name of the socket inside its directory.
pub const SOCKET_FILE: &str = "agentd.sock";

/// The default socket path: `$XDG_RUNTIME_DIR/agentd/agentd.sock`, or when
/// that variable is unset or not absolute, `<tmp>/agentd-<uid>/agentd.sock`.
pub fn default_socket_path(xdg_runtime_dir: Option<&Path>, uid: u32, tmp: &Path) -> PathBuf {
    match xdg_runtime_dir {
        Some(dir) if dir.is_absolute() => dir.join("agentd").join(SOCKET_FILE),
        _ => tmp.join(format!("agentd-{uid}")).join(SOCKET_FILE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_dir_wins_and_relative_is_ignored() {
        let tmp = Path::new("/tmp");
        assert_eq!(
            default_socket_path(Some(Path::new("/run/user/7")), 7, tmp),
            PathBuf::from("/run/user/7/agentd/agentd.sock")
        );
        assert_eq!(
            default_socket_path(Some(Path::new("relative")), 7, tmp),
            PathBuf::from("/tmp/agentd-7/agentd.sock")
        );
        assert_eq!(default_socket_path(None, 7, tmp), PathBuf::from("/tmp/agentd-7/agentd.sock"));
    }
}
