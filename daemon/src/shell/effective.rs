//! What a simple command really runs once its wrappers are taken off:
//! `/bin/rm` is `rm`, `timeout 30 npm test` is `npm test`, `env -i FOO=1
//! rm x` is `rm x` (with `FOO` assigned), `bash -c 'a; b'` is `a` and `b`,
//! `find . -exec rm {} ;` is `find` and `rm`. Permission rules and the
//! read-only judgement look at these, so neither a wrapper nor a path can
//! hide a program from a deny rule.
//!
//! What cannot be seen is said: a computed program (`$CMD`, `$'rm'`, `eval
//! "$x"`, `sh -c "$x"`) has `program: None`; arguments that the shell or a
//! wrapper fills in at run time (`$x`, globs, `xargs`, `find -exec {}`)
//! make `opaque_args`.

use super::{Script, SimpleCommand};

/// How deep `bash -c` / `eval` nesting is followed.
const MAX_DEPTH: usize = 4;

/// One program a command runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effective {
    /// The program's name without its directory; `None` when computed.
    pub program: Option<String>,
    /// Its arguments as the text gives them.
    pub args: Vec<String>,
    /// The wrappers taken off to get here (`timeout`, `env`, `sudo`, …).
    pub wrappers: Vec<String>,
    /// Variables assigned for it (`FOO=1 cmd`, `env FOO=1 cmd`).
    pub assigns: Vec<String>,
    /// Its arguments are filled in at run time (not what the text says).
    pub opaque_args: bool,
    /// Which simple command of the script it comes from.
    pub from: usize,
    /// A shell running a script given in the text (`bash -c '…'`), whose
    /// commands follow as parts of their own.
    pub runs_inner: bool,
}

impl Effective {
    /// `program args…` joined by spaces, the text rules match against;
    /// `None` when the program is computed.
    pub fn text(&self) -> Option<String> {
        let program = self.program.as_ref()?;
        let mut words = vec![program.as_str()];
        words.extend(self.args.iter().map(String::as_str));
        Some(words.join(" "))
    }
}

/// Every program `script` runs, wrappers taken off, in order.
pub fn effective(script: &Script) -> Vec<Effective> {
    let mut out = Vec::new();
    for (i, cmd) in script.commands.iter().enumerate() {
        unwrap_command(cmd, i, 0, &mut out);
    }
    out
}

/// Directories whose programs are the ones their names say.
const SYSTEM_BIN: &[&str] = &["/usr/bin/", "/bin/", "/usr/sbin/", "/sbin/", "/usr/local/bin/", "/usr/local/sbin/"];

/// A program's name for rules and the read-only judgement: `/bin/rm` is
/// `rm`, but `./echo` or `tools/git` (the workspace's own executables) keep
/// their path, so no rule or list for `echo` or `git` covers them.
fn basename(program: &str) -> String {
    match SYSTEM_BIN.iter().find_map(|dir| program.strip_prefix(dir)) {
        Some(name) if !name.contains('/') => name.to_owned(),
        _ => program.to_owned(),
    }
}

fn unwrap_command(cmd: &SimpleCommand, from: usize, depth: usize, out: &mut Vec<Effective>) {
    let start = Effective {
        program: cmd.program.as_deref().map(basename),
        args: cmd.args.clone(),
        wrappers: Vec::new(),
        assigns: cmd.assigns.clone(),
        opaque_args: cmd.has_expansion || cmd.has_substitution,
        from,
        runs_inner: false,
    };
    unwrap(start, depth, out);
}

/// Takes wrappers off `e` until a real program is left; pushes it (and
/// whatever else it runs) to `out`.
fn unwrap(mut e: Effective, depth: usize, out: &mut Vec<Effective>) {
    for _ in 0..16 {
        let Some(program) = e.program.clone() else { break };
        let args = std::mem::take(&mut e.args);
        let rest = match program.as_str() {
            "command" | "builtin" => {
                // `command -v x` only looks x up.
                if args.iter().take_while(|a| a.starts_with('-')).any(|a| a.contains('v') || a.contains('V')) {
                    e.args = args;
                    break;
                }
                skip_options(&args, &[])
            }
            "exec" => skip_options(&args, &["-a"]),
            // Builtins that run a string of code as a callback.
            "mapfile" | "readarray" | "complete" | "compgen"
                if args.iter().any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains('C')) =>
            {
                e.args = args;
                e.wrappers.push(program);
                e.program = None;
                break;
            }
            "bind" if args.iter().any(|a| a.starts_with('-') && a.contains('x')) => {
                e.args = args;
                e.wrappers.push(program);
                e.program = None;
                break;
            }
            "nohup" | "time" | "setsid" | "unbuffer" => skip_options(&args, &[]),
            "ionice" => skip_options(&args, &["-c", "-n", "-p", "-P", "-u", "--class", "--classdata"]),
            // A positional before the program: the CPU mask, the priority,
            // the new root.
            "taskset" | "chrt" | "chroot" => {
                skip_options(&args, &["-p", "--pid"]).map(|r| r.iter().skip(1).cloned().collect())
            }
            "busybox" => Some(args.clone()),
            // `flock FILE cmd…` (or `-c 'cmd'`, a script like bash -c).
            "flock" if !args.iter().any(|a| a == "-c" || a == "--command") => {
                skip_options(&args, &["-w", "--timeout", "-E", "--conflict-exit-code"])
                    .map(|r| r.iter().skip(1).cloned().collect())
            }
            // They run a command line given as one string, or what the
            // analysis cannot follow: the program is not known.
            "flock" | "watch" | "script" | "su" | "runuser" | "parallel" | "nsenter" | "unshare" | "ssh"
            | "systemd-run" | "at" | "batch" | "expect" | "tmux" | "screen" => {
                e.args = args;
                e.wrappers.push(program);
                e.program = None;
                break;
            }
            "nice" => skip_options(&args, &["-n", "--adjustment"]),
            "stdbuf" => skip_options(&args, &["-i", "-o", "-e", "--input", "--output", "--error"]),
            "timeout" => {
                let after = skip_options(&args, &["-s", "-k", "--signal", "--kill-after"]);
                after.map(|r| r.iter().skip(1).cloned().collect())
            }
            "sudo" | "doas" => {
                let value_opts = ["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "--user", "--group"];
                if args.iter().take_while(|a| a.starts_with('-')).any(|a| matches!(a.as_str(), "-s" | "-i" | "-e")) {
                    // A shell or an editor: what runs is not in the text.
                    e.wrappers.push(program);
                    e.program = None;
                    break;
                }
                // `sudo NAME=value cmd` sets NAME for cmd, as `env` does.
                skip_options(&args, &value_opts).map(|rest| {
                    let names = rest.iter().take_while(|w| is_assignment(w)).count();
                    e.assigns.extend(rest[..names].iter().map(|w| w.split('=').next().unwrap_or("").to_owned()));
                    rest[names..].to_vec()
                })
            }
            "env" => match unwrap_env(&args, &mut e) {
                Some(r) => Some(r),
                None => {
                    e.wrappers.push(program);
                    e.program = None;
                    break;
                }
            },
            "xargs" => {
                let value_opts = [
                    "-I",
                    "-L",
                    "-n",
                    "-P",
                    "-s",
                    "-d",
                    "-E",
                    "-a",
                    "--arg-file",
                    "--delimiter",
                    "--max-args",
                    "--max-procs",
                    "--max-chars",
                    "--max-lines",
                    "--replace",
                    "--eof",
                    "--process-slot-var",
                ];
                e.opaque_args = true;
                match skip_options(&args, &value_opts) {
                    Some(r) if r.is_empty() => Some(vec!["echo".to_owned()]),
                    other => other,
                }
            }
            // A shell's environment can make it run anything first.
            "bash" | "sh" | "zsh" | "dash" | "ksh"
                if e.assigns.iter().any(|a| {
                    matches!(a.as_str(), "BASH_ENV" | "ENV" | "PROMPT_COMMAND" | "SHELLOPTS" | "BASHOPTS")
                }) =>
            {
                e.args = args;
                e.wrappers.push(program);
                e.program = None;
                break;
            }
            // Run a file or a string the text does not show.
            "source" | "." => {
                e.args = args;
                e.wrappers.push(program);
                e.program = None;
                break;
            }
            "git" if git_alias(&args) => {
                e.args = args;
                e.wrappers.push(program);
                e.program = None;
                break;
            }
            "bash" | "sh" | "zsh" | "dash" | "ksh" | "eval" | "trap" => {
                let script = match program.as_str() {
                    "eval" => Some(args.join(" ")),
                    // `trap 'cmd' SIGNAL…` runs cmd later.
                    "trap" => args.first().filter(|a| !a.starts_with('-')).cloned(),
                    _ => match shell_c_script(&args) {
                        ShellRuns::Script(s) => Some(s),
                        ShellRuns::File => None,
                        // Commands from stdin, or options not understood.
                        ShellRuns::Unknown => {
                            e.args = args;
                            e.wrappers.push(program);
                            e.program = None;
                            break;
                        }
                    },
                };
                match script {
                    // `bash file.sh` runs a file: bash is the program.
                    None if program != "eval" && program != "trap" => {
                        e.args = args;
                        break;
                    }
                    Some(text) if !e.opaque_args && depth < MAX_DEPTH => {
                        match super::parse(&text) {
                            Ok(inner) => {
                                // The wrapper itself is a part too (rules on `bash` see it).
                                out.push(Effective { args: args.clone(), runs_inner: true, ..e.clone() });
                                for cmd in &inner.commands {
                                    let mut sub = Effective {
                                        program: cmd.program.as_deref().map(basename),
                                        args: cmd.args.clone(),
                                        wrappers: e.wrappers.iter().cloned().chain([program.clone()]).collect(),
                                        assigns: e.assigns.iter().chain(&cmd.assigns).cloned().collect(),
                                        opaque_args: cmd.has_expansion || cmd.has_substitution || inner.has_compound,
                                        from: e.from,
                                        runs_inner: false,
                                    };
                                    if !cmd.writes_files.is_empty() {
                                        sub.opaque_args = true;
                                    }
                                    unwrap(sub, depth + 1, out);
                                }
                                return;
                            }
                            Err(_) => {
                                e.wrappers.push(program);
                                e.program = None;
                                break;
                            }
                        }
                    }
                    _ => {
                        e.wrappers.push(program);
                        e.program = None;
                        break;
                    }
                }
            }
            "find" => {
                find_execs(&args, &e, depth, out);
                e.args = args;
                break;
            }
            _ => {
                e.args = args;
                break;
            }
        };
        match rest {
            Some(rest) if !rest.is_empty() => {
                e.wrappers.push(program);
                e.program = Some(basename(&rest[0]));
                e.args = rest[1..].to_vec();
            }
            // A wrapper with nothing to run (`nohup`, `env`): itself.
            Some(_) => {
                e.args = args;
                break;
            }
            // Options the table does not know: what runs is not certain.
            None => {
                e.wrappers.push(program);
                e.program = None;
                break;
            }
        }
    }
    out.push(e);
}

/// The words after a wrapper's options (`--` ends them); `None` when an
/// option is not understood. `with_value` lists options taking a value
/// (separate, or attached as `-n5` / `--opt=v`).
fn skip_options(args: &[String], with_value: &[&str]) -> Option<Vec<String>> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            return Some(args[i + 1..].to_vec());
        }
        if !a.starts_with('-') || a == "-" {
            return Some(args[i..].to_vec());
        }
        if a.starts_with("--") {
            let name = a.split('=').next().unwrap_or(a);
            if with_value.contains(&name) && !a.contains('=') {
                i += 1;
            }
        } else if a.len() > 2 && a[1..].chars().all(|c| c.is_ascii_digit()) {
            // `nice -10`
        } else {
            // A cluster (`-vs KILL`, `-0tI {}`): a letter that takes a value
            // takes the rest of the word, or the next word when it is last.
            let takes = |c: char| with_value.iter().any(|v| v.len() == 2 && v.ends_with(c));
            for (j, c) in a[1..].char_indices() {
                if takes(c) {
                    if a[1 + j + 1..].is_empty() {
                        i += 1;
                    }
                    break;
                }
            }
        }
        i += 1;
    }
    Some(Vec::new())
}

/// `env`'s own options and `NAME=value` words; the rest is the program.
/// `None` for `-S`/`--split-string` anywhere (a command line in one word,
/// `-vS'…'` included) or an option `env` does not have.
fn unwrap_env(args: &[String], e: &mut Effective) -> Option<Vec<String>> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            // `env -- NAME=value cmd` still assigns NAME.
            "--" => {
                let rest = &args[i + 1..];
                let names = rest.iter().take_while(|w| is_assignment(w)).count();
                e.assigns.extend(rest[..names].iter().map(|w| w.split('=').next().unwrap_or("").to_owned()));
                return Some(rest[names..].to_vec());
            }
            "--unset" | "--chdir" => i += 1,
            _ if a.starts_with("--split-string") => return None,
            _ if a.starts_with("--unset=") || a.starts_with("--chdir=") => {}
            "--ignore-environment" | "--null" | "--debug" | "--list-signal-handling" => {}
            _ if a.starts_with("--") => return None,
            _ if a.starts_with('-') && a != "-" => {
                // A cluster of short options: `-i`, `-0`, `-v` are flags;
                // `-u NAME` / `-C DIR` take a value (the rest of the word, or
                // the next one); `-S` (and anything else) hides the program.
                for (j, c) in a[1..].char_indices() {
                    match c {
                        'i' | '0' | 'v' => {}
                        'u' | 'C' => {
                            if a[1 + j + 1..].is_empty() {
                                i += 1;
                            }
                            break;
                        }
                        _ => return None,
                    }
                }
            }
            _ if a.contains('=') && !a.starts_with('=') => {
                e.assigns.push(a.split('=').next().unwrap_or("").to_owned());
            }
            _ => return Some(args[i..].to_vec()),
        }
        i += 1;
    }
    Some(Vec::new())
}

/// Whether a word is `NAME=value` with a shell variable's name.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// What a shell's arguments make it run.
enum ShellRuns {
    /// `-c SCRIPT` (`-c` alone or in a cluster like `-lc`).
    Script(String),
    /// A script file (`bash build.sh`).
    File,
    /// Its standard input (no operand, `-s`, `-i`), or options that are
    /// not understood.
    Unknown,
}

fn shell_c_script(args: &[String]) -> ShellRuns {
    let mut seen_c = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        i += 1;
        match a {
            "--" => break,
            // Options that take a value.
            "-O" | "+O" | "-o" | "+o" => i += 1,
            "--norc" | "--noprofile" | "--posix" | "--login" | "--noediting" | "--restricted" => {}
            _ if a.starts_with("--") => return ShellRuns::Unknown,
            _ if (a.starts_with('-') || a.starts_with('+')) && a.len() > 1 => {
                if a[1..].contains(['s', 'i']) {
                    return ShellRuns::Unknown;
                }
                seen_c |= a[1..].contains('c');
            }
            _ => {
                return if seen_c { ShellRuns::Script(a.to_owned()) } else { ShellRuns::File };
            }
        }
    }
    match args.get(i) {
        Some(a) if seen_c => ShellRuns::Script(a.clone()),
        Some(_) => ShellRuns::File,
        None => ShellRuns::Unknown,
    }
}

/// `git -c alias.x='!cmd' x`: an alias that runs a shell command.
fn git_alias(args: &[String]) -> bool {
    args.windows(2).any(|w| w[0] == "-c" && w[1].to_ascii_lowercase().starts_with("alias."))
        || args.iter().any(|a| a.starts_with("--config-env") || a.to_ascii_lowercase().starts_with("-calias."))
}

/// The programs `find … -exec prog args… ;` runs, as parts of their own.
fn find_execs(args: &[String], find: &Effective, depth: usize, out: &mut Vec<Effective>) {
    let mut i = 0;
    while i < args.len() {
        if matches!(args[i].as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            let end = args[i + 1..].iter().position(|a| a == ";" || a == "+").map_or(args.len(), |p| i + 1 + p);
            if let Some(prog) = args.get(i + 1).filter(|_| i + 1 < end) {
                let sub = Effective {
                    program: Some(basename(prog)),
                    args: args[i + 2..end].to_vec(),
                    wrappers: find.wrappers.iter().cloned().chain(["find".to_owned()]).collect(),
                    assigns: find.assigns.clone(),
                    opaque_args: true,
                    from: find.from,
                    runs_inner: false,
                };
                unwrap(sub, depth + 1, out);
            }
            i = end;
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;

    fn programs(cmd: &str) -> Vec<String> {
        effective(&parse(cmd).unwrap()).iter().map(|e| e.text().unwrap_or_else(|| "<computed>".into())).collect()
    }

    #[test]
    fn wrappers_paths_and_quotes_come_off() {
        let rows: &[(&str, &[&str])] = &[
            ("/bin/rm f", &["rm f"]),
            ("r\"\"m f", &["rm f"]),
            ("command rm f", &["rm f"]),
            ("builtin echo x", &["echo x"]),
            ("exec rm f", &["rm f"]),
            ("env rm f", &["rm f"]),
            ("env -i FOO=1 /usr/bin/rm f", &["rm f"]),
            ("env -u HOME rm f", &["rm f"]),
            ("nice -n 5 rm f", &["rm f"]),
            ("nohup rm f", &["rm f"]),
            ("timeout 30 npm test", &["npm test"]),
            ("timeout -s KILL 5 npm test", &["npm test"]),
            ("stdbuf -oL rm f", &["rm f"]),
            ("sudo -u root rm f", &["rm f"]),
            ("xargs rm", &["rm"]),
            ("xargs -n 1 rm -f", &["rm -f"]),
            ("bash -c 'rm f; ls'", &["bash -c rm f; ls", "rm f", "ls"]),
            ("sh -lc \"rm f\"", &["sh -lc rm f", "rm f"]),
            ("find . -name x -exec rm {} \\;", &["rm {}", "find . -name x -exec rm {} ;"]),
            ("timeout 5 env nice rm f", &["rm f"]),
            ("command -v rm", &["command -v rm"]),
            ("setsid rm f", &["rm f"]),
            ("ionice -c 3 rm f", &["rm f"]),
            ("taskset -c 0 rm f", &["rm f"]),
            ("chrt 5 rm f", &["rm f"]),
            ("busybox rm f", &["rm f"]),
            ("flock /tmp/l rm f", &["rm f"]),
            ("unbuffer rm f", &["rm f"]),
            ("bash -O extglob -c 'rm f'", &["bash -O extglob -c rm f", "rm f"]),
            ("timeout -vs KILL 5 rm f", &["rm f"]),
            ("env -iu X rm f", &["rm f"]),
            ("ionice -tc 3 rm f", &["rm f"]),
            ("exec -la x rm f", &["rm f"]),
            ("xargs -0tI {} rm -f {}", &["rm -f {}"]),
            ("trap 'rm f' EXIT", &["trap rm f EXIT", "rm f"]),
            ("./echo hi", &["./echo hi"]),
            ("/usr/bin/git status", &["git status"]),
        ];
        for (cmd, want) in rows {
            assert_eq!(programs(cmd), want.iter().map(|s| s.to_string()).collect::<Vec<_>>(), "{cmd}");
        }
    }

    #[test]
    fn what_cannot_be_seen_is_computed() {
        for cmd in [
            "$'rm' f",
            "$CMD f",
            "eval \"$x\"",
            "bash -c \"$x\"",
            "env -S 'rm f'",
            "sudo -s",
            "x=rm; $x f",
            "watch rm f",
            "script -c 'rm f'",
            "flock /tmp/l -c 'rm f'",
            "su -c 'rm f'",
            "parallel rm ::: f",
            "env -vS'rm f' echo",
            "env -iS 'rm f'",
            "env --bogus rm f",
            "mapfile -C 'rm f #' -c 1 < a",
            "bind -x '\"\\C-x\": rm f'",
            "printf 'rm f' | bash",
            "bash <<< 'rm f'",
            "source /dev/stdin",
            ". ./x.sh",
            "PROMPT_COMMAND='rm f' bash -i",
            "BASH_ENV=./x bash build.sh",
            "git -c alias.x='!rm f' x",
        ] {
            assert!(programs(cmd).iter().any(|p| p == "<computed>"), "{cmd}: {:?}", programs(cmd));
        }
        let e = effective(&parse("ls | xargs head -n 3").unwrap());
        assert!(e[1].opaque_args);
        assert_eq!(e[1].assigns, Vec::<String>::new());
        let e = effective(&parse("env GIT_DIR=x git status").unwrap());
        assert_eq!(e[0].assigns, vec!["GIT_DIR".to_owned()]);
        let e = effective(&parse("env -- GIT_DIR=x git status").unwrap());
        assert_eq!((e[0].program.as_deref(), e[0].assigns.clone()), (Some("git"), vec!["GIT_DIR".to_owned()]));
        let e = effective(&parse("sudo -u root GIT_DIR=x git status").unwrap());
        assert_eq!((e[0].program.as_deref(), e[0].assigns.clone()), (Some("git"), vec!["GIT_DIR".to_owned()]));
    }
}
