//! Package managers' caches in `workspace_write` (issue 49: `npm view`
//! failed on a read-only `~/.npm`): which places a call's tools write their
//! caches to, and the sandbox's own cache bound over each.
//!
//! Not the user's caches: a cache is read later by the user's own,
//! unconfined tools (Cargo builds what `~/.cargo/registry/src` holds, `npx`
//! runs what `~/.npm/_npx` holds, Go builds from `~/go/pkg/mod`), so a
//! command writing there would plant code that runs outside any sandbox.
//! The sandbox's cache (`<state>/caches/<name>`) is seen only by later
//! `workspace_write` calls, which could write the workspace anyway.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use crate::tool::ToolContext;

/// One package manager's cache.
pub(super) struct PackageCache {
    /// The sandbox's cache of it, under `<state>/caches/`.
    name: &'static str,
    /// Where the tool keeps it by default, under the home directory.
    place: &'static str,
    /// Programs whose presence on `PATH` lets a missing place be made (as
    /// the tool makes it on first use).
    tools: &'static [&'static str],
    /// Variables that move it, in the tool's order, and the part of the
    /// place under the variable's directory (`CARGO_HOME` → `registry`).
    env: &'static [(&'static str, &'static str)],
}

/// Only caches: never what configures a tool or runs later as itself
/// (`~/.npmrc`, `~/.cargo/config.toml`, `~/.cargo/bin`,
/// `~/.m2/settings.xml`, `~/.gradle/init.d` stay as the sandbox holds them).
const PACKAGE_CACHES: &[PackageCache] = &[
    PackageCache {
        name: "npm",
        place: ".npm",
        tools: &["npm", "npx"],
        env: &[("npm_config_cache", ""), ("NPM_CONFIG_CACHE", "")],
    },
    PackageCache { name: "pip", place: ".cache/pip", tools: &["pip", "pip3"], env: &[("PIP_CACHE_DIR", "")] },
    PackageCache {
        name: "cargo-registry",
        place: ".cargo/registry",
        tools: &["cargo"],
        env: &[("CARGO_HOME", "registry")],
    },
    PackageCache { name: "cargo-git", place: ".cargo/git", tools: &["cargo"], env: &[("CARGO_HOME", "git")] },
    PackageCache { name: "go-mod", place: "go/pkg/mod", tools: &["go"], env: &[("GOMODCACHE", "")] },
    PackageCache { name: "go-build", place: ".cache/go-build", tools: &["go"], env: &[("GOCACHE", "")] },
    PackageCache { name: "yarn", place: ".cache/yarn", tools: &["yarn"], env: &[("YARN_CACHE_FOLDER", "")] },
    PackageCache { name: "pnpm", place: ".cache/pnpm", tools: &["pnpm"], env: &[] },
    PackageCache {
        name: "pnpm-store",
        place: ".local/share/pnpm/store",
        tools: &["pnpm"],
        env: &[("npm_config_store_dir", "")],
    },
    PackageCache { name: "uv", place: ".cache/uv", tools: &["uv"], env: &[("UV_CACHE_DIR", "")] },
    PackageCache { name: "maven", place: ".m2/repository", tools: &["mvn"], env: &[] },
    PackageCache {
        name: "gradle",
        place: ".gradle/caches",
        tools: &["gradle"],
        env: &[("GRADLE_USER_HOME", "caches")],
    },
];

/// A variable as the call's command gets it: the session's environment,
/// else the daemon's. Never the command's own: it cannot move the wall.
pub(super) fn call_env(ctx: &ToolContext, var: &str) -> Option<OsString> {
    ctx.info.env.get(var).map(OsString::from).or_else(|| std::env::var_os(var))
}

/// Where each cache is for a call: the place its environment points the
/// tool at, or the default under `home`. A variable that names a place
/// outside the home directory (or the home directory itself, or a
/// relative path) makes the cache not one the sandbox provides: the tool
/// writes there, where the wall decides.
pub(super) fn cache_places(home: &Path, env: &dyn Fn(&str) -> Option<OsString>) -> Vec<(&'static str, PathBuf)> {
    let mut out = Vec::new();
    for cache in PACKAGE_CACHES {
        let moved = cache.env.iter().find_map(|(var, under)| {
            env(var).filter(|v| !v.is_empty()).map(|v| {
                let dir = PathBuf::from(v);
                if under.is_empty() { dir } else { dir.join(under) }
            })
        });
        match moved {
            None => out.push((cache.name, home.join(cache.place))),
            // Written out plainly: no `..` or `.` to take it elsewhere than
            // it says (`~/x/../.ssh`).
            Some(place)
                if place.is_absolute()
                    && place.components().all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
                    && place.starts_with(home)
                    && place != home =>
            {
                out.push((cache.name, place));
            }
            Some(_) => {}
        }
    }
    without_nesting(out)
}

/// `places` less every one that lies in another or holds another (attack
/// review: a cache bound inside another cache resolves through links the
/// outer one's writers planted). Both of a nested pair go.
fn without_nesting<T>(places: Vec<(T, PathBuf)>) -> Vec<(T, PathBuf)> {
    let paths: Vec<PathBuf> = places.iter().map(|(_, p)| p.clone()).collect();
    places
        .into_iter()
        .enumerate()
        .filter(|(i, (_, p))| !paths.iter().enumerate().any(|(j, q)| j != *i && (p.starts_with(q) || q.starts_with(p))))
        .map(|(_, place)| place)
        .collect()
}

/// The package caches a `workspace_write` call writes: `(source, target)`,
/// the sandbox's own cache in `<state>/caches/` (made 0700) to bind over
/// each place of [`cache_places`]. A place that is missing is made (empty,
/// 0700) only when its tool is on `PATH`; one inside a workspace root is
/// writable already (and not made there); one that is or covers a
/// protected path, or lies in one through a link, is left alone.
pub(super) fn package_caches(
    state: Option<&Path>,
    home: Option<&Path>,
    roots: &[PathBuf],
    path: Option<&std::ffi::OsStr>,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Vec<(PathBuf, PathBuf)> {
    use std::os::unix::fs::DirBuilderExt;
    let (Some(state), Some(home)) = (state, home) else { return Vec::new() };
    let on_path = |tool: &str| path.is_some_and(|p| std::env::split_paths(p).any(|d| d.join(tool).is_file()));
    let protected: Vec<PathBuf> =
        crate::permission::user_protected_paths().into_iter().map(|p| std::fs::canonicalize(&p).unwrap_or(p)).collect();
    let Ok(home_real) = std::fs::canonicalize(home) else { return Vec::new() };
    let in_root = |p: &Path| roots.iter().any(|r| p.starts_with(r));
    let mut out = Vec::new();
    for (name, target) in cache_places(home, env) {
        let tools = PACKAGE_CACHES.iter().find(|c| c.name == name).map(|c| c.tools).unwrap_or_default();
        // The same place as spelled under the real home directory.
        let lexical = target.strip_prefix(home).map(|rel| home_real.join(rel)).unwrap_or_else(|_| target.clone());
        if in_root(&target) || in_root(&lexical) {
            continue;
        }
        let missing = std::fs::symlink_metadata(&target).is_err();
        if missing
            && (!tools.iter().any(|t| on_path(t))
                || std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&target).is_err())
        {
            continue;
        }
        let Ok(real) = std::fs::canonicalize(&target) else { continue };
        // Bound over a protected path, it would show later calls a
        // writable one in its place; a link may point a cache at one
        // (`~/.npm` -> `~/.local/bin`). The tool's own place inside a
        // protected directory (`~/.gradle/caches`) is fine: only the cache
        // is covered.
        let linked = real != lexical;
        let covers = protected.iter().any(|p| p.starts_with(&real) || (linked && real.starts_with(p)));
        // Nor a place that holds a workspace root or agentd's state (the
        // root's binds would resolve inside the shared cache).
        let holds = roots.iter().any(|r| r.starts_with(&real)) || state.starts_with(&real) || real.starts_with(state);
        if !real.is_dir()
            || covers
            || holds
            || home_real.starts_with(&real)
            || !real.starts_with(&home_real)
            || in_root(&real)
        {
            continue;
        }
        let source = state.join("caches").join(name);
        if std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&source).is_ok() {
            out.push((source, real));
        }
    }
    // Places that nest once links are followed.
    without_nesting(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places(vars: &[(&str, &str)]) -> Vec<(&'static str, PathBuf)> {
        let env = |var: &str| vars.iter().find(|(k, _)| *k == var).map(|(_, v)| OsString::from(v));
        cache_places(Path::new("/home/u"), &env)
    }

    fn place_of(vars: &[(&str, &str)], name: &str) -> Option<PathBuf> {
        places(vars).into_iter().find(|(n, _)| *n == name).map(|(_, p)| p)
    }

    #[test]
    fn the_environment_moves_a_cache_within_the_home_directory_only() {
        /// (the environment, a cache, where it is or None).
        type Case = (&'static [(&'static str, &'static str)], &'static str, Option<&'static str>);
        let cases: &[Case] = &[
            (&[], "npm", Some("/home/u/.npm")),
            (&[], "cargo-registry", Some("/home/u/.cargo/registry")),
            (&[("npm_config_cache", "/home/u/cache/npm")], "npm", Some("/home/u/cache/npm")),
            (&[("CARGO_HOME", "/home/u/.rust/cargo")], "cargo-git", Some("/home/u/.rust/cargo/git")),
            (&[("GRADLE_USER_HOME", "/home/u/g")], "gradle", Some("/home/u/g/caches")),
            // Outside the home directory, the home directory itself, a
            // relative path: not a cache the sandbox provides.
            (&[("npm_config_cache", "/etc")], "npm", None),
            (&[("npm_config_cache", "/home/u")], "npm", None),
            (&[("PIP_CACHE_DIR", "cache")], "pip", None),
            (&[("npm_config_cache", "/home/user2/npm")], "npm", None),
            // `..` in the value: not written out plainly.
            (&[("CARGO_HOME", "/home/u/x/../.ssh")], "cargo-registry", None),
            (&[("npm_config_cache", "/home/u/../v/npm")], "npm", None),
            // One cache inside another: neither (pnpm's store in its cache).
            (&[("npm_config_store_dir", "/home/u/.cache/pnpm/store")], "pnpm", None),
            (&[("npm_config_store_dir", "/home/u/.cache/pnpm/store")], "pnpm-store", None),
            (&[("GOMODCACHE", "/home/u/.npm/mod")], "npm", None),
            // An empty variable is no variable.
            (&[("UV_CACHE_DIR", "")], "uv", Some("/home/u/.cache/uv")),
        ];
        for (vars, name, want) in cases {
            assert_eq!(place_of(vars, name), want.map(PathBuf::from), "{vars:?} {name}");
        }
    }

    #[test]
    fn no_cache_is_a_place_that_configures_or_runs() {
        let home = Path::new("/home/u");
        for (_, place) in places(&[]) {
            for not in [".npmrc", ".cargo/bin", ".cargo/config.toml", ".cargo/env", ".m2/settings.xml", ".gradle"] {
                assert!(!home.join(not).starts_with(&place), "{} covers ~/{not}", place.display());
            }
            assert!(!place.starts_with(home.join(".cargo/bin")));
        }
    }
}
