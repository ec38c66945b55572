//! Is a command read-only? Only when every simple command is a known
//! read-only program used without a flag that writes, with no output
//! redirection to a file and no command or process substitution; compound
//! commands, functions and computed program names are not read-only.

use super::{Effective, Script, SimpleCommand, effective};

/// Programs that only read whatever their arguments (output goes to stdout).
const ALWAYS: &[&str] = &[
    "cat",
    "head",
    "tail",
    "ls",
    "pwd",
    "echo",
    "printf",
    "wc",
    "grep",
    "egrep",
    "fgrep",
    "zgrep",
    "stat",
    "du",
    "df",
    "which",
    "whoami",
    "id",
    "uname",
    "true",
    "false",
    "test",
    "[",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "cut",
    "tr",
    "diff",
    "cmp",
    "comm",
    "nl",
    "od",
    "hexdump",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "cksum",
    "seq",
    "sleep",
    "type",
    "column",
    "fold",
    "expand",
    "rev",
    "strings",
    "nproc",
    "free",
    "uptime",
    "lsof",
    "locale",
    "tac",
    "pgrep",
];

/// `git` subcommands that never write.
const GIT_READS: &[&str] = &[
    "status",
    "log",
    "diff",
    "show",
    "rev-parse",
    "ls-files",
    "ls-tree",
    "blame",
    "grep",
    "describe",
    "shortlog",
    "cat-file",
    "rev-list",
    "merge-base",
    "name-rev",
    "whatchanged",
];

/// Whether `script` only reads (see the module docs).
pub fn is_read_only(script: &Script) -> bool {
    !script.has_compound
        && !script.commands.is_empty()
        && script.commands.iter().all(simple_is_clean)
        && effective(script)
            .iter()
            .all(|e| e.wrappers.iter().all(|w| QUIET_WRAPPERS.contains(&w.as_str())) && part_reads(e))
}

/// Wrappers that change nothing about what their program may do.
const QUIET_WRAPPERS: &[&str] = &["command", "builtin", "nice", "nohup", "time", "timeout", "stdbuf", "xargs"];

/// Variables a command may be given without changing what programs run
/// or where they read (anything else — `PATH`, `LD_*`, `GIT_*`, `PAGER`,
/// `BASH_ENV`, `IFS`, … — is not).
const SAFE_ASSIGNMENTS: &[&str] = &[
    "NODE_ENV",
    "RUST_LOG",
    "RUST_BACKTRACE",
    "CI",
    "DEBUG",
    "TZ",
    "LANG",
    "LANGUAGE",
    "NO_COLOR",
    "FORCE_COLOR",
    "TERM",
    "COLUMNS",
    "LINES",
    "CLICOLOR",
    "CARGO_TERM_COLOR",
    "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE",
];

/// Whether assigning `name` for a command can change what it runs or
/// reads (everything but a short list of known-harmless variables).
pub fn dangerous_assignment(name: &str) -> bool {
    !(SAFE_ASSIGNMENTS.contains(&name) || name.starts_with("LC_"))
}

fn simple_is_clean(cmd: &SimpleCommand) -> bool {
    !(cmd.has_substitution || cmd.has_expansion || cmd.has_assignment || !cmd.writes_files.is_empty())
}

fn part_reads(e: &Effective) -> bool {
    let Some(program) = e.program.as_deref() else { return false };
    // `printf -v NAME` assigns any variable (`PATH`): not a read.
    if program == "printf" && e.args.iter().any(|a| a.starts_with("-v")) {
        return false;
    }
    if e.opaque_args || !e.assigns.is_empty() {
        // Arguments filled in at run time may be options: only programs
        // that read whatever their options are.
        return e.assigns.is_empty() && ALWAYS.contains(&program);
    }
    let args: Vec<&str> = e.args.iter().map(String::as_str).collect();
    program_reads(program, &args)
}

/// Whether `script` only inspects, judged for a run in the read-only
/// sandbox, where the kernel stops any write, network use or signal: no
/// program known to change anything, no output redirection into a file, no
/// substitution the analysis cannot see into, no function, no assignment
/// that changes what programs run. Globs, variables, loops, `cd`, `xargs`
/// and version queries are fine here (they are not in [`is_read_only`]).
pub fn is_inspection(script: &Script) -> bool {
    if script.has_function || script.opaque || script.commands.is_empty() {
        return false;
    }
    // Substitutions are fine: their commands are in the script (walked)
    // and judged like the rest.
    let bare = |c: &SimpleCommand| !c.has_program_word && c.args.is_empty();
    let clean = script.commands.iter().all(|c| {
        c.writes_files.is_empty()
            && c.assigns.iter().all(|a| if bare(c) { !steers_the_shell(a) } else { !dangerous_assignment(a) })
            // `${CDPATH:=..}` assigns too.
            && !c.args.iter().chain(c.program.iter()).any(|w| default_assigns_steering(w))
    });
    clean
        && effective(script).iter().all(|e| {
            // `NOW=$(date)`: a variable of the script's own (its value's
            // commands are parts of their own, judged like the rest).
            if e.program.is_none() && e.args.is_empty() && e.wrappers.is_empty() {
                return script.commands.get(e.from).is_some_and(bare)
                    && !e.assigns.is_empty()
                    && !e.assigns.iter().any(|a| steers_the_shell(a));
            }
            // `find`: what an `-exec` runs, judged as its own part (here
            // only: in the read-only sandbox a symlink `{}` names cannot
            // carry a read outside).
            e.wrappers.iter().all(|w| QUIET_WRAPPERS.contains(&w.as_str()) || w == "env" || w == "find")
                && !e.assigns.iter().any(|a| dangerous_assignment(a))
                && part_inspects(e)
        })
}

/// Whether a shell variable set on its own (`NAME=value`, no command)
/// changes how the shell goes on (what it runs, how it splits and expands
/// words, what it reads at start-up) or what the loader and git do in the
/// programs after it: those keep the script from being judged as written.
/// Other names are the script's own (exported only by `export`, whose
/// names are judged as assignments).
/// Whether a word assigns a variable that steers the shell by a default
/// expansion (`${CDPATH:=/elsewhere}`, `${PATH=.}`).
fn default_assigns_steering(word: &str) -> bool {
    word.match_indices("${").any(|(i, _)| {
        let rest = &word[i + 2..];
        let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        let mut after = &rest[name.len()..];
        // `${CDPATH[0]:=…}`: an element of it.
        if after.starts_with('[') {
            after = after.find(']').map_or("", |i| &after[i + 1..]);
        }
        !name.is_empty() && (after.starts_with(":=") || after.starts_with('=')) && steers_the_shell(&name)
    })
}

/// Whether a builtin sets a variable that steers the shell: `printf -v
/// NAME`, `read NAME`, `mapfile NAME`, `getopts spec NAME` (any argument
/// naming one counts, whatever its place).
fn sets_steering(program: &str, args: &[&str]) -> bool {
    matches!(program, "printf" | "read" | "mapfile" | "readarray" | "getopts")
        && args.iter().any(|a| steers_the_shell(a.strip_prefix("-v").filter(|n| !n.is_empty()).unwrap_or(a)))
}

fn steers_the_shell(name: &str) -> bool {
    // `PATH[0]` makes PATH an array: command lookup then searches `.`.
    let name = name.split('[').next().unwrap_or(name);
    const STEERING: &[&str] = &[
        "PATH",
        "IFS",
        "CDPATH",
        "HOME",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "PROMPT_COMMAND",
        "GLOBIGNORE",
        "EXECIGNORE",
        "POSIXLY_CORRECT",
        "FUNCNEST",
        "OPTIND",
        "SHELL",
        "TMPDIR",
        "PWD",
        "OLDPWD",
    ];
    STEERING.contains(&name) || ["BASH", "LD_", "GIT_", "DYLD_"].iter().any(|p| name.starts_with(p))
}

fn part_inspects(e: &Effective) -> bool {
    let Some(program) = e.program.as_deref() else { return false };
    let args: Vec<&str> = e.args.iter().map(String::as_str).collect();
    // A version query of a program found by name; `./x --version` runs
    // the workspace's own executable, which may do anything.
    if args.len() == 1
        && matches!(args[0], "--version" | "-V" | "version" | "--help")
        && !MUTATES.contains(&program)
        && !program.contains('/')
        && !CHOSEN_BY_WORKSPACE.contains(&program)
    {
        return true;
    }
    if sets_steering(program, &args) {
        return false;
    }
    match program {
        "cd" | "pushd" | "popd" | "dirs" | ":" | "read" | "break" | "continue" | "return" | "exit" | "whereis" => true,
        // Without `globskipdots` a glob matches `..` (`.?/.?/etc`): where
        // globs reach is judged with it on.
        "shopt" => !e.opaque_args && !args.contains(&"globskipdots"),
        // `hash -p ./x ls` chooses what `ls` runs; listing is fine.
        "hash" => args.len() <= 1 && args.iter().all(|a| matches!(*a, "-l" | "-t")),
        // `set -a` exports every variable set after it.
        "set" => !args.iter().any(|a| (a.starts_with('-') && a.contains('a')) || *a == "allexport"),
        // What `export` (and `local`) hands to the programs after it is
        // judged as an assignment for them.
        "export" | "local" => args.iter().all(|a| {
            let name = a.split('=').next().unwrap_or_default();
            a.starts_with('-') || !dangerous_assignment(name) || (program == "local" && !steers_the_shell(name))
        }),
        "command" => args.first().is_some_and(|a| matches!(*a, "-v" | "-V")),
        "awk" | "gawk" | "mawk" | "nawk" => !args.iter().any(|a| *a == "-i" || a.starts_with("--include")),
        "tree" => !args.iter().any(|a| a.starts_with("-o") || *a == "--fromfile"),
        "git" => git_inspects(&args),
        // `bash -n script.sh`: parsed, not run (here only, in the read-only
        // sandbox: a `BASH_ENV` would still be read).
        "bash" | "sh" | "dash" => {
            // No option after `-n` (`+n`, `+o noexec` turn it off again).
            args.first() == Some(&"-n") && args.len() > 1 && args[1..].iter().all(|a| !a.starts_with(['-', '+']))
        }
        _ if e.opaque_args => ALWAYS.contains(&program) || INSPECT_ANY.contains(&program),
        _ => program_reads(program, &args),
    }
}

/// Programs that change things whatever their arguments: never run
/// unasked, not even for `--version`.
const MUTATES: &[&str] = &[
    "rm", "rmdir", "mv", "cp", "ln", "mkdir", "touch", "chmod", "chown", "dd", "truncate", "shred", "install", "tee",
    "sudo", "doas", "kill", "pkill", "killall", "reboot", "shutdown",
];

/// Programs whose launcher runs what a file in the workspace chooses, even
/// for `--version`: rustup's proxies (`rust-toolchain.toml` `path =
/// "…"`), Yarn (`.yarnrc.yml` `yarnPath`), corepack's managers
/// (`packageManager`).
const CHOSEN_BY_WORKSPACE: &[&str] = &[
    "cargo",
    "rustc",
    "rustup",
    "rustfmt",
    "rustdoc",
    "cargo-clippy",
    "clippy-driver",
    "rust-analyzer",
    "yarn",
    "yarnpkg",
    "pnpm",
    "pnpx",
    "corepack",
];

/// Programs the read-only judgement knows with arguments computed at run
/// time (their flags cannot write).
const INSPECT_ANY: &[&str] = &["ls", "cat", "head", "tail", "wc", "grep", "stat", "du", "file"];

/// `git` that only reads (more than [`git_reads`] admits without the
/// sandbox): the current branch, worktrees, remotes, configuration reads.
fn git_inspects(args: &[&str]) -> bool {
    if git_reads(args) {
        return true;
    }
    let sub: Vec<&str> = args.iter().copied().skip_while(|a| a.starts_with('-')).collect();
    match sub.as_slice() {
        ["branch", "--list", ..] | ["branch", "-l", ..] => true,
        ["branch", rest @ ..] => {
            rest.iter().all(|a| matches!(*a, "--show-current" | "-a" | "-r" | "-v" | "-vv" | "--list"))
        }
        ["worktree", "list", ..] | ["remote"] | ["remote", "-v"] | ["remote", "show", ..] => true,
        // `git config user.name`: one name, no value, reads it.
        ["config", name] if !name.starts_with('-') => true,
        ["config", first, ..] => matches!(*first, "--get" | "--get-all" | "--get-regexp" | "--list" | "-l"),
        ["remote", "get-url", ..] => true,
        ["tag", rest @ ..] => rest.iter().all(|a| matches!(*a, "-l" | "--list" | "-n")),
        ["reflog"] | ["reflog", "show", ..] | ["version"] | ["help", ..] => true,
        _ => false,
    }
}

/// Whether `program` with `args` (as written) only reads.
pub fn program_reads(program: &str, args: &[&str]) -> bool {
    match program {
        p if ALWAYS.contains(&p) => true,
        // What `-exec`/`-execdir` run is a part of its own (wrapped in
        // `find`), judged like any program.
        "find" => !args
            .iter()
            .any(|a| matches!(*a, "-ok" | "-okdir" | "-delete" | "-fprint" | "-fprint0" | "-fprintf" | "-fls")),
        "sed" => sed_reads(args),
        // Short flags may be clustered (`-uo out`): look inside them; long
        // ones may be abbreviated (`--o=out` is `--output`).
        "sort" => !args
            .iter()
            .any(|a| abbreviates(a, "--output") || abbreviates(a, "--compress-program") || short_cluster_has(a, 'o')),
        "uniq" | "xxd" => {
            // `-` counts: `uniq - out` writes `out`.
            let operands = args.iter().filter(|a| !a.starts_with('-') || **a == "-").count();
            operands <= 1 && !(program == "xxd" && args.iter().any(|a| a.starts_with("-r")))
        }
        // `env` and `printenv` would hand the environment (API keys) over.
        "hostname" => args.is_empty(),
        "date" => !args.iter().any(|a| {
            short_cluster_has(a, 's')
                || short_cluster_has(a, 'f')
                || abbreviates(a, "--set")
                || abbreviates(a, "--file")
        }),
        "file" => !args.iter().any(|a| abbreviates(a, "--compile") || short_cluster_has(a, 'C')),
        // `ps e` (BSD style) prints every process's environment.
        "ps" => !args.iter().any(|a| !a.starts_with('-') && a.contains('e')),
        // `env`, `$ENV` hand the environment over.
        "jq" => !args.iter().any(|a| a.contains("env") || a.contains("$ENV") || a.starts_with("--rawfile")),
        // Options that run another program.
        "rg" => !args.iter().any(|a| abbreviates(a, "--pre") || abbreviates(a, "--hostname-bin")),
        "ag" => !args.iter().any(|a| abbreviates(a, "--pager")),
        "git" => git_reads(args),
        _ => false,
    }
}

/// `sed` parsed as GNU sed parses its options (bundled short flags,
/// attached and separate values, abbreviated long options): read-only only
/// with no option that edits in place or takes the script from elsewhere,
/// and a script (the first operand) with no command that writes a file or
/// runs one (`w`, `W`, `e`); conservative.
fn sed_reads(args: &[&str]) -> bool {
    // Long options that cannot change what sed does to files.
    const HARMLESS: &[&str] = &[
        "--quiet",
        "--silent",
        "--regexp-extended",
        "--posix",
        "--unbuffered",
        "--null-data",
        "--zero-terminated",
        "--debug",
        "--sandbox",
        "--separate",
    ];
    let mut script = None;
    let mut scripts = 0;
    let mut i = 0;
    while i < args.len() {
        let a = args[i];
        i += 1;
        if a == "--" {
            script = script.or(args.get(i).copied());
            break;
        } else if let Some(long) = a.strip_prefix("--") {
            if abbreviates(a, "--line-length") && long.len() >= "line".len() {
                if !a.contains('=') {
                    i += 1;
                }
                continue;
            }
            // Exactly one harmless option may be meant (an abbreviation
            // that could also be --in-place or --expression is not).
            let name = long.split('=').next().unwrap_or("");
            let candidates: Vec<&&str> = HARMLESS.iter().filter(|o| o[2..].starts_with(name)).collect();
            let risky = ["--in-place", "--expression", "--file", "--follow-symlinks", "--line-length"]
                .iter()
                .any(|o| o[2..].starts_with(name));
            if name.is_empty() || candidates.is_empty() || risky {
                return false;
            }
        } else if a.len() > 1 && a.starts_with('-') {
            for (j, c) in a[1..].char_indices() {
                match c {
                    'n' | 'E' | 'r' | 'u' | 'z' | 's' => {}
                    // -l N: the rest of the word, or the next one.
                    'l' => {
                        if a[1 + j + 1..].is_empty() {
                            i += 1;
                        }
                        break;
                    }
                    // -e SCRIPT: the rest of the word, or the next one.
                    'e' => {
                        let rest = &a[1 + j + 1..];
                        let expr = if rest.is_empty() {
                            i += 1;
                            args.get(i - 1).copied()
                        } else {
                            Some(rest)
                        };
                        match expr {
                            Some(e) if sed_script_reads(e) => scripts += 1,
                            _ => return false,
                        }
                        break;
                    }
                    // -i (in place), -f (script elsewhere), anything unknown.
                    _ => return false,
                }
            }
        } else if script.is_none() && scripts == 0 {
            script = Some(a);
        }
    }
    // With -e the scripts were judged as they came; the operands are files.
    scripts > 0 || script.is_some_and(sed_script_reads)
}

/// Whether a sed script only prints: parsed as GNU sed parses it, every
/// command is one that cannot write a file or run a program — not `w`,
/// `W`, `e`, nor `s` with its `w` or `e` flag. `/error/p` or `s/## //` are
/// fine although they hold the letters. Text that sed takes to the end of
/// the line (`a`, `i`, `c`, `r`, `R`) is skipped as sed skips it; what the
/// parse does not know is not read-only.
pub(crate) fn sed_script_reads(script: &str) -> bool {
    let b: Vec<char> = script.chars().collect();
    let at = |i: usize| b.get(i).copied();
    let mut i = 0;
    let skip_blanks = |mut i: usize| {
        while matches!(at(i), Some(' ' | '\t')) {
            i += 1;
        }
        i
    };
    // A delimited part (`/re/`, `s`'s two, `y`'s two): the index after its
    // closing delimiter. A backslash escapes the next character (a newline
    // too, in a replacement); an unescaped newline ends sed's parse.
    // In a regex a bracket expression hides the delimiter (GNU sed's
    // snarf_char_class): `[/]`, `[]/]`, `[^]/]`, `[[:alpha:]/]`.
    let bracket = |mut i: usize| -> Option<usize> {
        if at(i) == Some('^') {
            i += 1;
        }
        if at(i) == Some(']') {
            i += 1;
        }
        let (mut state, mut open) = (0, ' ');
        loop {
            let c = at(i)?;
            match c {
                '\n' => return None,
                '.' | ':' | '=' if state == 1 => (state, open) = (2, c),
                '.' | ':' | '=' if state == 2 && c == open => state = 3,
                '[' if state == 0 => state = 1,
                '[' => {}
                ']' if state <= 1 => return Some(i + 1),
                ']' if state == 3 => state = 0,
                _ => state &= !1,
            }
            i += 1;
        }
    };
    let delimited = |mut i: usize, delim: char, regex: bool| -> Option<usize> {
        loop {
            match at(i)? {
                '\\' => i += 2,
                '\n' => return None,
                c if c == delim => return Some(i + 1),
                '[' if regex => i = bracket(i + 1)?,
                _ => i += 1,
            }
        }
    };
    let address = |mut i: usize| -> Option<usize> {
        match at(i) {
            Some(c) if c.is_ascii_digit() => {
                while at(i).is_some_and(|c| c.is_ascii_digit() || c == '~') {
                    i += 1;
                }
            }
            Some('$') => i += 1,
            Some('/') => i = delimited(i + 1, '/', true)?,
            Some('\\') => {
                let delim = at(i + 1).filter(|c| *c != '\n' && *c != '\\')?;
                i = delimited(i + 2, delim, true)?;
            }
            _ => return Some(i),
        }
        // Regex address flags.
        while matches!(at(i), Some('I' | 'M')) {
            i += 1;
        }
        Some(i)
    };
    // To the end of the line (a/i/c text may go on after a backslash).
    let to_line_end = |mut i: usize| {
        while let Some(c) = at(i) {
            match c {
                '\\' => i += 2,
                '\n' => return i,
                _ => i += 1,
            }
        }
        i
    };
    // A comment or a file name: to the newline, a backslash included.
    let to_newline = |mut i: usize| {
        while at(i).is_some_and(|c| c != '\n') {
            i += 1;
        }
        i
    };
    // A label or a version (GNU sed's read_label): to a blank, `;`, `}`,
    // `#` or the end of the line; the next command may follow a blank.
    let to_word_end = |mut i: usize| {
        i = skip_blanks(i);
        while at(i).is_some_and(|c| !matches!(c, ' ' | '\t' | ';' | '\n' | '}' | '#')) {
            i += 1;
        }
        i
    };
    loop {
        while at(i).is_some_and(|c| c.is_whitespace() || c == ';') {
            i += 1;
        }
        let Some(c) = at(i) else { return true };
        if c == '#' {
            i = to_newline(i);
            continue;
        }
        let Some(mut j) = address(i) else { return false };
        if j > i {
            j = skip_blanks(j);
            if at(j) == Some(',') {
                j = skip_blanks(j + 1);
                if matches!(at(j), Some('+' | '~')) {
                    j += 1;
                }
                let Some(k) = address(j) else { return false };
                if k == j {
                    return false;
                }
                j = k;
            }
        }
        j = skip_blanks(j);
        while at(j) == Some('!') {
            j = skip_blanks(j + 1);
        }
        let Some(cmd) = at(j) else { return false };
        i = j + 1;
        match cmd {
            // A block's first command may follow at once.
            '{' => continue,
            '}' | '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x' | 'z' | 'F' => {}
            // An optional number (line length, exit code).
            'l' | 'L' | 'q' | 'Q' => {
                i = skip_blanks(i);
                while at(i).is_some_and(|c| c.is_ascii_digit()) {
                    i += 1;
                }
            }
            // Text (a backslash-newline carries it on).
            'a' | 'i' | 'c' => i = to_line_end(i),
            // `r`/`R` read any file, past every path check
            // (`r /proc/self/environ`): not read-only.
            ':' | 'b' | 't' | 'T' | 'v' => i = to_word_end(i),
            's' | 'y' => {
                let Some(delim) = at(i).filter(|c| *c != '\n' && *c != '\\') else { return false };
                let Some(k) = delimited(i + 1, delim, cmd == 's').and_then(|k| delimited(k, delim, false)) else {
                    return false;
                };
                i = k;
                if cmd == 's' {
                    while let Some(f) = at(i) {
                        match f {
                            'g' | 'p' | 'i' | 'I' | 'm' | 'M' => i += 1,
                            d if d.is_ascii_digit() => i += 1,
                            // `w file` and `e`: a write, a program run.
                            _ => break,
                        }
                    }
                }
            }
            // `w`, `W`, `e` and whatever this parse does not know.
            _ => return false,
        }
        // A command ends at a blank, `;`, a newline, `}` or a comment.
        i = skip_blanks(i);
        if !matches!(at(i), None | Some(';' | '\n' | '}' | '#')) {
            return false;
        }
    }
}

/// Whether `arg` is `full` or an abbreviation of it GNU getopt would take
/// (`--o`, `--out=x` for `--output`); ambiguity does not matter here, as
/// getopt refuses an ambiguous one (the command then fails, harmlessly).
fn abbreviates(arg: &str, full: &str) -> bool {
    let name = arg.split('=').next().unwrap_or(arg);
    name.len() > 2 && name.starts_with("--") && full.starts_with(name)
}

/// `-abc`-style cluster of short flags containing `flag`.
fn short_cluster_has(arg: &str, flag: char) -> bool {
    arg.starts_with('-')
        && !arg.starts_with("--")
        && arg[1..].chars().take_while(|c| c.is_ascii_alphabetic()).any(|c| c == flag)
}

fn git_reads(args: &[&str]) -> bool {
    let mut rest = args.iter().copied();
    while let Some(arg) = rest.next() {
        match arg {
            // `-c key=value` could set an alias or hook; `-C dir` may be a
            // repository whose own configuration runs programs.
            "-C" | "-c" => return false,
            "--no-pager" | "--no-optional-locks" => {}
            sub if sub.starts_with('-') => return false,
            sub if GIT_READS.contains(&sub) => {
                let rest: Vec<&str> = rest.collect();
                // `git diff --output=f` writes a file; `git grep -O` runs a pager.
                // Long options may be abbreviated (`--open=sh`).
                return !rest.iter().any(|a| {
                    abbreviates(a, "--output")
                        || abbreviates(a, "--ext-diff")
                        || abbreviates(a, "--textconv")
                        || abbreviates(a, "--open-files-in-pager")
                        || abbreviates(a, "--exec")
                        || abbreviates(a, "--upload-pack")
                        || (a.starts_with('-') && !a.starts_with("--") && a.contains('O'))
                });
            }
            "branch" | "tag" | "remote" => {
                let rest: Vec<&str> = rest.collect();
                let listing = |a: &&str| matches!(*a, "-a" | "-r" | "-v" | "-vv" | "--list" | "-l" | "--all");
                return rest.iter().all(listing);
            }
            // A bare `git stash` is `git stash push`.
            "stash" => {
                let rest: Vec<&str> = rest.collect();
                return matches!(rest.first(), Some(&"list") | Some(&"show"));
            }
            _ => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;

    fn ro(cmd: &str) -> bool {
        parse(cmd).map(|s| is_read_only(&s)).unwrap_or(false)
    }

    #[test]
    fn reads_are_read_only() {
        for cmd in [
            "ls -la",
            "cat a.txt | grep foo | wc -l",
            "grep -rn TODO src && echo found",
            "find . -name '*.rs' -type f",
            "git status",
            "git branch",
            "git stash list",
            "echo x >&2",
            "grep 'a.*b' file",
            "sed -n 1,10p file.txt",
            "sort -u names.txt",
            "head -5 x 2>/dev/null",
            "cat < input.txt",
            "sed -n -l 80 1,5p f",
            "sed -e 's/a/b/' f",
            "sed -n -e 1p -e 2p f",
            "sed --quiet 1p f",
            "sed -E -n 's/a+/b/p' f",
            "sort -k2 -t, f",
            "rg -n TODO src",
            "ag TODO",
            "cat <<'EOF'\n$(not run)\nEOF",
            "cat <<EOF\nplain text\nEOF",
            // sed scripts with the letters e, w, W that write nothing.
            "sed -n '/error/p' log.txt",
            "sed 's/## Session: //' notes.md",
            "sed -n '/Warning/,/^--/p' f",
            "sed -e 's/we/We/g' -e '/west/d' f",
            "sed -n '/x/{p;q}' f",
            "sed '1a wow; w not a write' f",
            "sed -n 's|/home/w|~|gp' f",
            "sed ':loop; /ewe/b loop' f",
            "sed 'y/abcwe/ABCWE/' f",
            "sed -n '\\%/etc/w%p' f",
            "sed -n '2,+3p;0~4p;/we/I p' f",
            "sed -E 's/(e|w)+/x/2g' f",
            "sed '# a comment with w and e\np' f",
            "pgrep -fa node",
            // a/i/c text does continue after a backslash-newline.
            "sed '1a foo\\\nw not a write' f",
            "sed -n '/a\\/w/p' f",
        ] {
            assert!(ro(cmd), "{cmd} should be read-only");
        }
    }

    #[test]
    fn anything_that_writes_or_is_unknown_is_not() {
        for cmd in [
            "rm -rf build",
            "ls > listing.txt",
            "echo hi >> log",
            "find . -name '*.tmp' -delete",
            "find . -exec rm {} \\;",
            "sed -i s/a/b/ f",
            "sort -o out in",
            "git commit -m x",
            "git push",
            "git -C repo log --oneline -5",
            "git branch -D old",
            "git -c alias.st=!rm status",
            "echo $(rm x)",
            "cat `which rm`",
            "diff <(ls) <(ls -a)",
            "$CMD",
            "for f in *; do cat $f; done",
            "(ls)",
            "f() { ls; }; f",
            "cd src",
            "env rm x",
            "find . {-delete,-print}",
            "find . $'-delete'",
            "LD_PRELOAD=./x.so cat f",
            "echo x >&victim",
            "sort -uo out in",
            "uniq - victim",
            "xxd - victim",
            "sed --expression='1w x' a.txt",
            "rg --pre=sh x",
            "file -C -m magic",
            "date -s 2020-01-01",
            "hostname evil",
            "git stash",
            "git grep -Ovim x",
            "git grep --open-files-in-p=sh x",
            "git grep --open=sh x",
            "git -c core.pager=x log",
            "date --se=x",
            "date -us x",
            "file --comp x",
            "ps axeww",
            "jq -n env.KEY",
            "jq -n '$ENV'",
            "tree -o out",
            "sed -ni 1p f",
            "sed -n -i 1p f",
            "sed --in=bak 1p f",
            "sed --e='1e touch x' f",
            "sed -l 5 '1e touch x' f",
            "sed -l5 -n '1e touch x' f",
            "sed -e '1e touch x' f",
            "sed -e 's/a/b/w out' f",
            "sed -e",
            "sed -s -f script f",
            // What sed really writes or runs, however spelled.
            "sed -n '/x/w out' f",
            "sed 's/a/b/w out' f",
            "sed 's/a/b/gw out' f",
            "sed 's/a/b/e' f",
            "sed 's|a|b|pe' f",
            "sed '1e touch x' f",
            "sed '1!e touch x' f",
            "sed '/x/ ! e touch x' f",
            "sed '/x/{p;w out\n}' f",
            "sed -n '1p;W out' f",
            "sed 'e' f",
            "sed '$!N;e date' f",
            "sed '1,/re/ w out' f",
            "sed '\\,x,w out' f",
            "sed 's/a\\/w/b/;w out' f",
            "sed 'y/ab/cd/w out' f",
            "sed 's/a/b' f",
            "sed 's/a\nb/c/' f",
            "sed '1 k' f",
            "sed 'pw out' f",
            "find . -exec rm {} +",
            "find . -exec sh -c 'rm \"$1\"' _ {} \\;",
            "find . -exec cat {} \\; -exec rm {} \\;",
            "find . -ok cat {} \\;",
            "find . -exec $CMD {} +",
            "pkill node",
            // Attack review (sed parser): GNU sed ends a label / version at a
            // blank (read_label stops at blank ; } #), then reads the next command.
            "sed -n ':a w out' f",
            "sed -n 'b a w out\n:a' f",
            "sed -n 't x w out\n:x' f",
            "sed -n 'T x w out\n:x' f",
            "sed -n 'v 4.2 w out' f",
            "sed ':a e touch pwned' f",
            // A comment and r/R's file name end at the newline; a backslash
            // does not carry them on (only a/i/c text continues).
            "sed -n '# c\\\nw out' f",
            "sed -n '1r f\\\nw out' f",
            "sed -n 'R f\\\nw out' f",
            "sed -n '1r f\\\n1e touch pwned' f",
            // A regex's bracket expression hides its delimiter from sed 4.9
            // (match_slash -> snarf_char_class): s/[/]/#/ is s with regex [/].
            "sed -n 's/[/]/#/w out' f",
            "sed -n 's/[/]/;s|x|/w out|' f",
            "sed -n '/[/p;#/]/w out' f",
            "sed '1s/[/]/#/;1e touch pwned' f",
            "sed -n '\\,x[,p;#],w out' f",
            // r/R read any file, which no path check sees (the environment's secrets).
            "sed -n '1r /proc/self/environ' f",
            "sed -n 'R /etc/shadow' f",
            // Near misses, refused already (keep them so).
            "sed -e 'a\\' -e 'w out' f",
            "sed 's/[/]/X/w out' f",
            "sed 'y/[/]/w out/' f",
            "sed -n '/x/ I w out' f",
            "sed 's/a/b/ w out' f",
            "sed -s -n 'F;W /dev/stdout' f",
            "sed -n '/x/{p;b\nw out\n}' f",
            "find . -exec env cat {} +",
            "find . -exec cat + -exec rm {} \\;",
            "find . -exec nice timeout 5 rm {} +",
            "find . -execdir sh -n {} \\;",
            "find . -exec {} \\;",
            "find . -exec ./cat {} +",
            "find . -exec xargs -0 rm {} +",
            "find . -fprint0 out",
            "sort --o=w f",
            "sort --outp w f",
            "sort --compress=sh f",
            "rg --hostname-bin=prog x",
            "rg --host=prog x",
            "ag --pager=prog x",
            "printenv",
            "printenv OPENAI_API_KEY",
            "env",
            "cat <<EOF\n$(touch x)\nEOF",
            "cat <<< \"$(touch x)\"",
            "cat <<< $'\\x41'",
            "npm test",
            "ls && rm x",
            "unterminated '",
            "",
        ] {
            assert!(!ro(cmd), "{cmd} should not be read-only");
        }
    }

    fn inspects(cmd: &str) -> bool {
        parse(cmd).map(|s| is_inspection(&s)).unwrap_or(false)
    }

    /// Attack review of issue 49: a version query through a launcher that
    /// reads the workspace (`rust-toolchain.toml` with `path = "…"` makes
    /// `cargo --version` run the workspace's own `bin/cargo`).
    #[test]
    fn version_queries_through_workspace_chosen_launchers_are_no_inspection() {
        for cmd in ["cargo --version", "rustc -V", "yarn --version", "pnpm --version"] {
            assert!(!inspects(cmd), "{cmd} should not be an inspection");
        }
        assert!(inspects("git --version") && inspects("python3 --version"));
    }

    #[test]
    fn printf_v_assigns_and_is_not_a_read() {
        assert!(ro("printf '%s\\n' a b"));
        for cmd in ["printf -v PATH %s tools; ls", "printf -vX %s y", "printf -v X %s y"] {
            assert!(!ro(cmd), "{cmd} should not be read-only");
        }
    }

    #[test]
    fn a_variable_of_the_scripts_own_is_an_inspection() {
        for cmd in [
            "NOW=$(date)",
            "NOW=$(date); echo $NOW",
            "n=$(wc -l < f); echo lines: $n",
            "FILES=$(ls src); for f in $FILES; do head -1 $f; done",
            "export NO_COLOR=1; ls",
        ] {
            assert!(inspects(cmd), "{cmd} should be an inspection");
        }
        for cmd in [
            // Its value's commands are judged like the rest.
            "NOW=$(touch x)",
            "X=$(rm -rf src); echo $X",
            // Names that steer the shell or what runs after them.
            "PATH=.:$PATH; ls",
            "IFS=/; ls $x",
            "BASH_ENV=./x.sh bash -c ls",
            "BASH_ENV=./x.sh; bash -c ls",
            "LD_PRELOAD=./x.so; export LD_PRELOAD; cat f",
            "export LD_PRELOAD=./x.so; cat f",
            "export GIT_CONFIG_PARAMETERS=x; git status",
            "set -a; PAGER=x; git log",
            "set -o allexport; PAGER=x; git log",
            "GIT_DIR=/elsewhere; export GIT_DIR; git log",
            "PS4='$(touch x)'; set -x; ls",
            // The attack review's: builtins that assign, default
            // expansions, a computed program after an assignment.
            "printf -v PATH %s tools; ls",
            "printf -vPATH %s tools; ls",
            "read -r PATH <<< tools; ls",
            "mapfile -t IFS < f; ls",
            "getopts ab BASH_ENV; bash -c ls",
            "hash -p ./evil ls; ls",
            ": ${CDPATH:=/tmp}; cd x; ls",
            "echo ${PATH=.}; ls",
            "C='id -u'; X=1 $C",
            "X=1 $(echo touch pwned)",
            "set -- touch pwned; X=1 \"$@\"",
            // The second review's: an element of a steering variable.
            "printf -v 'PATH[0]' %s x; ls",
            "printf -vPATH[0] %s x; ls",
            "builtin printf -v 'PATH[0]' %s x; ls",
            "read 'PATH[0]' <<< x; ls",
            "printf -v 'IFS[0]' %s x; ls",
            ": ${CDPATH[0]:=/etc}; cd x",
        ] {
            assert!(!inspects(cmd), "{cmd} should not be an inspection");
        }
    }

    #[test]
    fn bash_n_only_parses() {
        for cmd in [
            "bash -n build.sh",
            "sh -n a.sh b",
            "dash -n x.sh",
            "find . -name '*.sh' -exec bash -n {} \\;",
            // find's -exec of a reading program, in the sandbox only (a
            // symlink it is handed is seen by no path check).
            "find . -name '*.md' -exec cat {} +",
            "find src -type f -exec wc -l {} \\;",
            "find . -execdir head -1 {} \\;",
        ] {
            assert!(inspects(cmd), "{cmd} should be an inspection");
            assert!(!ro(cmd), "{cmd} is not read-only without the sandbox");
        }
        for cmd in [
            // `+n` (and `+o noexec`) turn noexec off again: the file runs.
            "bash -n +n x.sh",
            "sh -n +n x.sh",
            "dash -n +n x.sh",
            "bash -n +o noexec x.sh",
            "bash -n +n <(echo printenv)",
            "find . -name '*.sh' -exec bash -n +n {} \\;",
            // Near misses, refused already.
            "bash -n -- x.sh",
            "bash -n x.sh -c 'touch y'",
            "bash -nc 'touch y'",
            "bash -n <(touch y)",
            "bash -n $(touch y)",
            "bash -n +nc printenv",
            "echo printenv | bash -n +n",
        ] {
            assert!(!inspects(cmd), "{cmd} should not be an inspection");
        }
    }
}
