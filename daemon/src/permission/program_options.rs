//! Options that make an allowed program run another program, load code,
//! or read a configuration that can: what an allow rule with a wildcard
//! does not cover (`permission::rules`).

/// Options that make an allowed program run another program, load code,
/// or read a configuration that can (audited per program): an allow rule
/// with a wildcard (`Bash(npm test:*)`) does not cover a command that uses
/// one (`npm test --script-shell=./x`); it asks. A rule naming the whole
/// command does.
const PROGRAM_OPTIONS: &[(&[&str], &[&str])] = &[
    (
        &["npm", "pnpm", "yarn", "npx", "bun"],
        &[
            "--script-shell",
            "--node-options",
            "--prefix",
            "--userconfig",
            "--globalconfig",
            "--shell",
            "--call",
            "-c",
            "--cwd",
            "--dir",
            "-C",
            "--require",
            "--preload",
            "--init-module",
        ],
    ),
    (
        &["node", "deno", "tsx", "ts-node"],
        &["-r", "--require", "--import", "--loader", "--experimental-loader", "-e", "--eval", "-p", "--print"],
    ),
    (
        &["git"],
        &[
            "-c",
            "--config-env",
            "--exec-path",
            "--upload-pack",
            "-u",
            "--receive-pack",
            "--exec",
            "--open-files-in-pager",
            "-O",
            "--ext-diff",
            "--template",
            "--config",
            "--separate-git-dir",
            "--extcmd",
            "--tool",
        ],
    ),
    (&["cargo"], &["--config"]),
    (&["make", "gmake"], &["-f", "--file", "--makefile", "--eval", "-E", "SHELL", "MAKESHELL", ".SHELLFLAGS"]),
    (&["go"], &["-exec", "-toolexec", "-overlay", "-modfile"]),
    // Claude Code 2.1.332: `Bash(find:*)` does not approve running,
    // deleting or writing files.
    (&["find"], &["-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"]),
    (&["gradle", "gradlew", "./gradlew"], &["--init-script", "-I", "--settings-file", "-c", "-b", "--build-file"]),
    (&["mvn", "mvnw", "./mvnw"], &["-s", "--settings", "-gs", "--global-settings", "-f", "--file"]),
    (
        &["tar"],
        &[
            "--to-command",
            "--use-compress-program",
            "-I",
            "--checkpoint-action",
            "--rsh-command",
            "--info-script",
            "-F",
            "--new-volume-script",
        ],
    ),
    (&["rsync"], &["-e", "--rsh", "--rsync-path"]),
    (&["ssh", "scp", "sftp"], &["-o", "-F", "-S"]),
    (&["curl"], &["-K", "--config"]),
];

/// The first option of [`PROGRAM_OPTIONS`] `program` is given in `args`
/// (`--opt`, `--opt=value`, an unambiguous abbreviation of a long one, a
/// `NAME=value` argument for make's variables).
pub(crate) fn program_option(program: &str, args: &[String]) -> Option<String> {
    let name = program.rsplit('/').next().unwrap_or(program);
    let (names, options) =
        PROGRAM_OPTIONS.iter().find(|(names, _)| names.contains(&name) || names.contains(&program))?;
    // After the script (node) or the host (ssh) the arguments are theirs.
    let stops_at_operand = names.contains(&"node") || names.contains(&"ssh");
    for arg in args {
        // find's `--` ends only its own options: its expression follows.
        if (arg == "--" && name != "find") || (stops_at_operand && !arg.starts_with('-')) {
            break; // what follows is the script's, not the program's
        }
        let head = arg.split('=').next().unwrap_or(arg);
        // A variable as make takes it: `NAME=`, `NAME:=`, `NAME::=`,
        // `NAME+=`, `NAME?=`; `NAME!=cmd` runs cmd, whatever NAME.
        let variable = arg.split_once('=').map(|(n, _)| n);
        if names.contains(&"make") && variable.is_some_and(|n| n.ends_with('!')) {
            return Some(format!("{name} !="));
        }
        let variable = variable.map(|n| n.trim_end_matches([':', '+', '?']));
        let hit = options.iter().find(|opt| {
            head == **opt
                || (head.starts_with("--") && head.len() >= 5 && opt.starts_with(head))
                || (!opt.starts_with('-') && variable == Some(**opt))
                || (opt.len() == 2 && opt.starts_with('-') && clustered(arg, &opt[1..]))
        });
        if let Some(opt) = hit {
            return Some(format!("{name} {opt}"));
        }
    }
    // tar's old style: its first argument is a cluster without a dash.
    if name == "tar"
        && let Some(first) = args.first()
        && !first.starts_with('-')
        && first.chars().all(|c| c.is_ascii_alphabetic())
        && (first.contains('I') || first.contains('F'))
    {
        return Some("tar I".to_owned());
    }
    None
}

/// Whether `arg` is a cluster of short options (`-xvI`, `-voX=y`) holding
/// the option letter `letter`, before any `=`.
fn clustered(arg: &str, letter: &str) -> bool {
    let Some(cluster) = arg.strip_prefix('-') else { return false };
    if cluster.starts_with('-') || cluster.is_empty() {
        return false;
    }
    let cluster = cluster.split('=').next().unwrap_or(cluster);
    // Checking the whole cluster (a letter's value may follow it) errs on
    // asking.
    cluster.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '/') && cluster.contains(letter)
}
