//! Shell command analysis with a real bash parser (brush-parser): what a
//! command runs, whether it only reads, and what its exit code means. The
//! Bash tool uses it for concurrency safety and semantic exit codes; the
//! permission engine will use the same parse for rules on sub-commands.
//!
//! Everything here is conservative: what the analysis does not understand
//! is not read-only.

mod effective;
mod readonly;
mod words;

use crate::sync::MutexExt;
pub use effective::{Effective, effective};
pub use readonly::{dangerous_assignment, is_inspection, is_read_only, program_reads};
use words::{expands, glob_root, literal, substitutes, target_text};
pub use words::{target_is_computed, unquote};

use brush_parser::ast;

/// One simple command of a script, as far as it can be known without
/// running anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    /// The program, unquoted; `None` when it is computed (`$CMD`, `$(…)`).
    pub program: Option<String>,
    /// The arguments, unquoted where they are literal.
    pub args: Vec<String>,
    /// Output redirections to files (not `/dev/null`, not fd duplication).
    pub writes_files: Vec<String>,
    /// Any word holds a command or process substitution.
    pub has_substitution: bool,
    /// Some argument is expanded by the shell (`$var`, `{a,b}`, globs), so
    /// what the program receives is not what the text says.
    pub has_expansion: bool,
    /// Variables are assigned for the command (`FOO=1 cmd`): they can change
    /// what a program does (`LD_PRELOAD`, `GIT_*`).
    pub has_assignment: bool,
    /// The names of those variables.
    pub assigns: Vec<String>,
    /// Input redirections from files (`< f`), unquoted where literal.
    pub reads_files: Vec<String>,
    /// It has a program word at all (literal or computed): `X=1` alone has
    /// none, `X=1 $C` has one.
    pub has_program_word: bool,
    /// For each argument or input redirection the shell expands as a glob
    /// (`/e*/hostname`, `src/*.rs`), the directory its matches lie under
    /// (`/`, `src/`, `` for the current one); `/` where braces or `..`
    /// could take it anywhere.
    pub glob_roots: Vec<String>,
}

impl SimpleCommand {
    /// A command of `program` with nothing else known yet.
    pub fn named(program: Option<String>) -> SimpleCommand {
        SimpleCommand {
            has_program_word: program.is_some(),
            program,
            args: Vec::new(),
            writes_files: Vec::new(),
            has_substitution: false,
            has_expansion: false,
            has_assignment: false,
            assigns: Vec::new(),
            reads_files: Vec::new(),
            glob_roots: Vec::new(),
        }
    }
}

/// What a script is made of.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Script {
    /// Every simple command, in source order (inside compound commands too).
    pub commands: Vec<SimpleCommand>,
    /// Contains compound commands (loops, `if`, subshells, groups), function
    /// definitions, coprocesses or `[[ … ]]`.
    pub has_compound: bool,
    /// Defines a function (whose body runs under another name).
    pub has_function: bool,
    /// Runs code the analysis cannot see (a substitution too deep or not
    /// understood, code built from escapes): deny rules fail closed.
    pub opaque: bool,
    /// The last simple command at the top level, whose exit code is the
    /// script's — `None` when that is not certain (a compound command last,
    /// or a last pipeline that runs only after `&&`/`||`).
    pub last: Option<SimpleCommand>,
}

/// Why a command could not be analysed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot parse the command: {message}")]
pub struct ParseError {
    /// What went wrong.
    pub message: String,
    /// The command is over a complexity limit (rather than malformed).
    pub too_complex: bool,
}

impl ParseError {
    fn syntax(message: String) -> Self {
        ParseError { message, too_complex: false }
    }

    fn limit(message: String) -> Self {
        ParseError { message, too_complex: true }
    }
}

/// Longest command analysed; longer ones count as not understood.
const MAX_COMMAND_BYTES: usize = 64 * 1024;

/// Deepest nesting analysed (brackets, `$(`, `if`/`while`/`for`/`case`).
/// The parser recurses per level: without a limit a command of a few
/// thousand `(` would overflow a worker thread's stack and abort the daemon.
pub const MAX_NESTING: usize = 64;

/// Most simple commands in one command line analysed.
pub const MAX_SUB_COMMANDS: usize = 500;

/// Why a command is over the complexity limits, if it is. Such a command
/// is denied, not asked about: nobody can review it.
pub fn too_complex(command: &str) -> Option<String> {
    if command.len() > MAX_COMMAND_BYTES {
        return Some(format!("the command is longer than {MAX_COMMAND_BYTES} bytes"));
    }
    let (depth, _) = nesting(command);
    if depth > MAX_NESTING {
        return Some(format!("the command nests {depth} levels deep (the limit is {MAX_NESTING})"));
    }
    None
}

/// An estimate of how deep `command` nests: brackets and braces, and the
/// shell's compound keywords, quotes ignored (so a quoted closer can hide
/// a level: the estimate is a policy limit, not a safety bound).
///
/// Also returns how many openers there are in all (backticks included):
/// a command can nest no deeper than that, whatever its quotes.
fn nesting(command: &str) -> (usize, usize) {
    let (mut depth, mut max, mut openers) = (0usize, 0usize, 0usize);
    let mut word = String::new();
    let end_word = |word: &mut String, depth: &mut usize, openers: &mut usize| {
        match word.as_str() {
            "if" | "while" | "until" | "for" | "case" | "select" => {
                *depth += 1;
                *openers += 1;
            }
            "fi" | "done" | "esac" => *depth = depth.saturating_sub(1),
            _ => {}
        }
        word.clear();
    };
    for c in command.chars() {
        if c.is_ascii_alphabetic() {
            word.push(c);
            continue;
        }
        end_word(&mut word, &mut depth, &mut openers);
        match c {
            '(' | '{' | '[' => {
                depth += 1;
                openers += 1;
            }
            ')' | '}' | ']' => depth = depth.saturating_sub(1),
            '`' => openers += 1,
            _ => {}
        }
        max = max.max(depth);
    }
    end_word(&mut word, &mut depth, &mut openers);
    (max.max(depth), openers)
}

/// Commands with at most this many openers parse on the caller's stack.
/// A debug build's frames are large: 120 nested subshells once overflowed
/// a tokio worker's 2 MiB (found by an attack review), so only shallow
/// commands stay inline.
const INLINE_OPENERS: usize = 16;

/// Parses a bash command line.
pub fn parse(command: &str) -> Result<Script, ParseError> {
    // One call asks about its command many times (the policy, each rule,
    // the tool): it is parsed once, and the last few parses are kept.
    if let Some(hit) = recent().iter().find(|(c, _)| c == command) {
        return hit.1.clone();
    }
    let parsed = parse_uncached(command);
    let mut recent = recent();
    if recent.len() >= RECENT_PARSES {
        let _ = recent.remove(0);
    }
    recent.push((command.to_owned(), parsed.clone()));
    parsed
}

/// How many parses are kept (a few turns' worth of commands; bounded, as
/// a command is at most 64 KiB).
const RECENT_PARSES: usize = 32;

type Recent = Vec<(String, Result<Script, ParseError>)>;

fn recent() -> std::sync::MutexGuard<'static, Recent> {
    static RECENT: std::sync::Mutex<Recent> = std::sync::Mutex::new(Vec::new());
    RECENT.locked()
}

fn parse_uncached(command: &str) -> Result<Script, ParseError> {
    if let Some(why) = too_complex(command) {
        return Err(ParseError::limit(why));
    }
    // The parser recurses once per nesting level, and the nesting check
    // above is an estimate (quotes can hide closers from it): a command
    // that could nest deeper than a worker's stack allows parses on a
    // thread whose stack holds the deepest nesting 64 KiB can spell. The
    // stack is reserved, not touched, unless a command is that deep.
    if nesting(command).1 <= INLINE_OPENERS {
        return parse_here(command);
    }
    let owned = command.to_owned();
    let worker = std::thread::Builder::new().name("shell-parse".into()).stack_size(PARSE_STACK).spawn(move || {
        std::panic::catch_unwind(|| parse_here(&owned))
            .unwrap_or_else(|_| Err(ParseError::syntax("the parser failed".into())))
    });
    match worker {
        Ok(handle) => handle.join().unwrap_or_else(|_| Err(ParseError::syntax("the parser failed".into()))),
        Err(e) => Err(ParseError::limit(format!("cannot start the parser: {e}"))),
    }
}

/// Stack of the parser's thread.
const PARSE_STACK: usize = 512 << 20;

fn parse_here(command: &str) -> Result<Script, ParseError> {
    let mut parser = brush_parser::Parser::new(std::io::Cursor::new(command), &brush_parser::ParserOptions::default());
    let program = parser.parse_program().map_err(|e| ParseError::syntax(e.to_string()))?;
    let mut script = Script::default();
    for list in &program.complete_commands {
        walk_list(list, &mut script, true);
    }
    if script.commands.len() > MAX_SUB_COMMANDS {
        return Err(ParseError::limit(format!(
            "the command has {} sub-commands (the limit is {MAX_SUB_COMMANDS})",
            script.commands.len()
        )));
    }
    Ok(script)
}

fn walk_list(list: &ast::CompoundList, script: &mut Script, top: bool) {
    for ast::CompoundListItem(and_or, _sep) in &list.0 {
        walk_pipeline(&and_or.first, script, top);
        for next in &and_or.additional {
            let (ast::AndOr::And(p) | ast::AndOr::Or(p)) = next;
            walk_pipeline(p, script, top);
        }
        if top && !and_or.additional.is_empty() {
            // `a && grep x`: exit 1 may be a's failure, not grep's "no match".
            script.last = None;
        }
    }
}

fn walk_pipeline(pipeline: &ast::Pipeline, script: &mut Script, top: bool) {
    for command in &pipeline.seq {
        match command {
            ast::Command::Simple(simple) => {
                let cmd = simple_command(simple);
                let inspect = cmd.has_substitution || cmd.has_expansion;
                // Builtins that evaluate array subscripts run `$(…)` even
                // from a single-quoted word (`test -v 'a[$(rm x)]'`).
                const EVALUATES: &[&str] = &[
                    "test",
                    "[",
                    "let",
                    "declare",
                    "typeset",
                    "local",
                    "export",
                    "readonly",
                    "printf",
                    "read",
                    "unset",
                    "mapfile",
                    "readarray",
                    "shift",
                    "return",
                    "exit",
                    "wait",
                    "kill",
                    "ulimit",
                ];
                if cmd.program.as_deref().is_some_and(|p| EVALUATES.contains(&p))
                    && cmd.args.iter().any(|a| a.contains("$(") || a.contains('`'))
                {
                    script.opaque = true;
                }
                if top {
                    script.last = Some(cmd.clone());
                }
                script.commands.push(cmd);
                if inspect {
                    let text = simple.to_string();
                    absorb(&text, script);
                    // Code built from escapes and run by an expansion
                    // (`${x=$'…\050…'} ${PWD:x}`): nobody can see it.
                    script.opaque |= text.contains("$'") && text.contains('\\') && text.contains("${");
                }
                // Process substitutions come parsed: walk them.
                let items =
                    simple.prefix.iter().flat_map(|p| p.0.iter()).chain(simple.suffix.iter().flat_map(|s| s.0.iter()));
                for item in items {
                    match item {
                        ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub) => {
                            walk_list(&sub.list, script, false)
                        }
                        ast::CommandPrefixOrSuffixItem::IoRedirect(ast::IoRedirect::File(
                            _,
                            _,
                            ast::IoFileRedirectTarget::ProcessSubstitution(_, sub),
                        )) => walk_list(&sub.list, script, false),
                        _ => {}
                    }
                }
            }
            ast::Command::Compound(compound, redirects) => {
                script.has_compound = true;
                if top {
                    script.last = None;
                }
                walk_compound(compound, script);
                // `{ …; } > f` writes f like `cmd > f` does.
                if let Some(list) = redirects {
                    let mut cmd = SimpleCommand::named(Some(":".into()));
                    for r in &list.0 {
                        redirect(r, &mut cmd);
                    }
                    script.commands.push(cmd);
                }
            }
            ast::Command::Function(def) => {
                script.has_compound = true;
                script.has_function = true;
                if top {
                    script.last = None;
                }
                // What the function runs is what the script runs.
                walk_compound(&def.body.0, script);
            }
            ast::Command::ExtendedTest(test, _) => {
                script.has_compound = true;
                if top {
                    script.last = None;
                }
                absorb(&test.to_string(), script);
            }
        }
    }
}

/// The bodies of the command substitutions in `text` (`$(…)`, backticks),
/// outside single quotes; arithmetic `$((…))` is not one.
fn substitution_bodies(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut single) = (0, false);
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && !single {
            i += 2;
            continue;
        }
        if c == '\'' {
            single = !single;
        } else if !single
            && matches!(c, '$' | '<' | '>')
            && chars.get(i + 1) == Some(&'(')
            && chars.get(i + 2) != Some(&'(')
        {
            let (mut depth, mut j) = (1, i + 2);
            while j < chars.len() && depth > 0 {
                match chars[j] {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                j += 1;
            }
            out.push(chars[i + 2..j.saturating_sub(1).max(i + 2)].iter().collect());
            i = j;
            continue;
        } else if !single && c == '`' {
            let end = chars[i + 1..].iter().position(|&d| d == '`').map_or(chars.len(), |p| i + 1 + p);
            out.push(chars[i + 1..end].iter().collect());
            i = end + 1;
            continue;
        }
        i += 1;
    }
    out
}

thread_local! {
    static ABSORB_DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Adds the commands that substitutions in `text` run to `script` (a few
/// levels deep; deeper, or unparseable, the script is marked opaque).
fn absorb(text: &str, script: &mut Script) {
    for body in substitution_bodies(text) {
        let depth = ABSORB_DEPTH.with(|d| d.get());
        if depth >= 8 {
            script.opaque = true;
            continue;
        }
        ABSORB_DEPTH.with(|d| d.set(depth + 1));
        let inner = parse_here(&body);
        ABSORB_DEPTH.with(|d| d.set(depth));
        match inner {
            Ok(inner) => {
                script.commands.extend(inner.commands);
                script.has_compound |= inner.has_compound;
                script.has_function |= inner.has_function;
                script.opaque |= inner.opaque;
            }
            Err(_) => script.opaque = true,
        }
    }
}

fn walk_compound(compound: &ast::CompoundCommand, script: &mut Script) {
    use ast::CompoundCommand as C;
    match compound {
        C::BraceGroup(g) => walk_list(&g.list, script, false),
        C::Subshell(s) => walk_list(&s.list, script, false),
        C::ForClause(f) => {
            // The words iterated over are arguments like any others (a
            // path to judge, a substitution that runs).
            let words: Vec<&ast::Word> = f.values.iter().flatten().collect();
            let mut list = SimpleCommand::named(Some(":".into()));
            walk_list(&f.body.list, script, false);
            for w in words {
                list.has_substitution |= substitutes(&w.value);
                list.has_expansion |= expands(&w.value);
                list.glob_roots.extend(glob_root(&w.value));
                list.args.push(literal(&w.value).unwrap_or_else(|| w.value.clone()));
                absorb(&w.value, script);
            }
            script.commands.push(list);
        }
        C::WhileClause(w) | C::UntilClause(w) => {
            walk_list(&w.0, script, false);
            walk_list(&w.1.list, script, false);
        }
        C::IfClause(i) => {
            walk_list(&i.condition, script, false);
            walk_list(&i.then, script, false);
            for e in i.elses.iter().flatten() {
                if let Some(c) = &e.condition {
                    walk_list(c, script, false);
                }
                walk_list(&e.body, script, false);
            }
        }
        C::CaseClause(c) => {
            absorb(&c.value.value, script);
            for item in &c.cases {
                if let Some(cmd) = &item.cmd {
                    walk_list(cmd, script, false);
                }
            }
        }
        C::ArithmeticForClause(f) => walk_list(&f.body.list, script, false),
        C::Arithmetic(a) => absorb(&a.to_string(), script),
        C::Coprocess(c) => {
            let pipeline = ast::Pipeline { timed: None, bang: false, seq: vec![(*c.body).clone()] };
            walk_pipeline(&pipeline, script, false);
        }
    }
}

fn simple_command(simple: &ast::SimpleCommand) -> SimpleCommand {
    let mut cmd = SimpleCommand::named(None);
    if let Some(word) = &simple.word_or_name {
        cmd.has_substitution |= substitutes(&word.value);
        cmd.program = literal(&word.value);
        cmd.has_program_word = true;
    }
    // After the program, `name=value` is an argument (`pip install
    // six==1.16.0`, `make CC=gcc`), not an assignment — but for the
    // declaration builtins, whose arguments do assign (`export PAGER=x`).
    const DECLARES: &[&str] = &["export", "declare", "typeset", "local", "readonly"];
    let declares = cmd.program.as_deref().is_some_and(|p| DECLARES.contains(&p));
    let prefix = simple.prefix.iter().flat_map(|p| p.0.iter()).map(|item| (item, true));
    let suffix = simple.suffix.iter().flat_map(|s| s.0.iter()).map(|item| (item, false));
    for (item, before_program) in prefix.chain(suffix) {
        match item {
            ast::CommandPrefixOrSuffixItem::Word(w) => argument(&mut cmd, &w.value),
            ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) if !before_program && !declares => {
                argument(&mut cmd, &w.value)
            }
            ast::CommandPrefixOrSuffixItem::AssignmentWord(a, w) => {
                cmd.has_substitution |= substitutes(&w.value);
                cmd.has_assignment = true;
                cmd.assigns.push(match &a.name {
                    ast::AssignmentName::VariableName(n) | ast::AssignmentName::ArrayElementName(n, _) => n.clone(),
                });
            }
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(..) => cmd.has_substitution = true,
            ast::CommandPrefixOrSuffixItem::IoRedirect(r) => redirect(r, &mut cmd),
        }
    }
    cmd
}

/// Adds one argument word to `cmd`.
fn argument(cmd: &mut SimpleCommand, word: &str) {
    cmd.has_substitution |= substitutes(word);
    cmd.has_expansion |= expands(word);
    cmd.glob_roots.extend(glob_root(word));
    cmd.args.push(literal(word).unwrap_or_else(|| word.to_owned()));
}

/// Whether the script may change its working directory: a `cd`, `pushd`
/// or `popd` anywhere, also behind a wrapper (`builtin cd`, `command cd`),
/// or a program computed at run time (which may be one).
pub fn changes_directory(script: &Script) -> bool {
    let moves = |p: Option<&str>| matches!(p, Some("cd" | "pushd" | "popd"));
    script.commands.iter().any(|c| moves(c.program.as_deref()) || (c.program.is_none() && c.has_program_word))
        || effective(script)
            .iter()
            .any(|e| moves(e.program.as_deref()) || (e.program.is_none() && !e.wrappers.is_empty()))
}

/// Whether a `cd`, `pushd` or `popd` runs behind a wrapper (`builtin cd`),
/// where a walk of the script's own commands does not see it.
pub fn wrapped_cd(script: &Script) -> bool {
    effective(script).iter().any(|e| {
        matches!(e.program.as_deref(), Some("cd" | "pushd" | "popd"))
            && script.commands.get(e.from).is_none_or(|c| c.program != e.program)
    })
}

/// Whether a command walks a tree following its symbolic links (`grep -R`,
/// `find -L`, `rg -L`, `ls -LR`, `du -L`, `tree -l`, `fd -L`, `ag -f`):
/// a link in the workspace then leads the walk anywhere, which no judgement
/// of the command's own paths sees. Wrappers are looked through (`xargs`,
/// `timeout`, …); arguments filled in at run time count as following.
pub fn follows_links(script: &Script) -> bool {
    let short = |a: &str, c: char| a.starts_with('-') && !a.starts_with("--") && a[1..].contains(c);
    let long =
        |a: &str, name: &str| a.starts_with("--") && name.starts_with(a.split('=').next().unwrap_or(a)) && a.len() > 3;
    effective(script).iter().any(|e| {
        let args: Vec<&str> = e.args.iter().map(String::as_str).collect();
        let any = |f: &dyn Fn(&str) -> bool| args.iter().any(|a| f(a));
        match e.program.as_deref() {
            Some("grep" | "egrep" | "fgrep") => {
                e.opaque_args || any(&|a| short(a, 'R') || long(a, "--dereference-recursive"))
            }
            Some("find") => e.opaque_args || any(&|a| a == "-L" || a == "-follow"),
            Some("rg") => e.opaque_args || any(&|a| short(a, 'L') || long(a, "--follow")),
            Some("ls") => {
                any(&|a| short(a, 'L') || long(a, "--dereference")) && any(&|a| short(a, 'R') || long(a, "--recursive"))
            }
            Some("du") => any(&|a| short(a, 'L') || long(a, "--dereference")),
            Some("tree") => any(&|a| short(a, 'l') || long(a, "--follow")),
            Some("fd" | "fdfind") => any(&|a| short(a, 'L') || long(a, "--follow")),
            Some("ag") => any(&|a| short(a, 'f') || long(a, "--follow")),
            _ => false,
        }
    })
}

fn redirect(r: &ast::IoRedirect, cmd: &mut SimpleCommand) {
    use ast::{IoFileRedirectKind as K, IoFileRedirectTarget as T, IoRedirect as R};
    match r {
        R::File(_, kind, target) => {
            let output = !matches!(kind, K::Read | K::DuplicateInput);
            match target {
                T::Filename(w) => {
                    cmd.has_substitution |= substitutes(&w.value);
                    if output && literal(&w.value).as_deref() != Some("/dev/null") {
                        cmd.writes_files.push(target_text(&w.value));
                    } else if !output {
                        cmd.glob_roots.extend(glob_root(&w.value));
                        cmd.reads_files.push(target_text(&w.value));
                    }
                }
                T::ProcessSubstitution(..) => cmd.has_substitution = true,
                T::Fd(_) => {}
                // `>&2` duplicates a descriptor; `>&file` (bash) writes a file.
                T::Duplicate(w) => {
                    let target = w.value.trim_end_matches('-');
                    if output && !target.chars().all(|c| c.is_ascii_digit()) {
                        cmd.writes_files.push(target_text(&w.value));
                    }
                }
            }
        }
        R::OutputAndError(w, _) => {
            if literal(&w.value).as_deref() != Some("/dev/null") {
                cmd.writes_files.push(target_text(&w.value));
            }
        }
        // A here-document with an unquoted delimiter is expanded like a
        // double-quoted word (`$(…)` in its body runs); a here-string is a
        // word like any other.
        R::HereDocument(_, doc) => {
            if doc.requires_expansion {
                cmd.has_substitution |= substitutes(&doc.doc.value);
                cmd.has_expansion |= doc.doc.value.contains('$') || doc.doc.value.contains('`');
            }
        }
        R::HereString(_, w) => {
            cmd.has_substitution |= substitutes(&w.value);
            cmd.has_expansion |= expands(&w.value);
        }
    }
}

/// What a non-zero exit code means for `script`: `Some(note)` when, by the
/// final command's own convention, it is an answer rather than a failure
/// (`grep` exit 1 = no match, `diff`/`cmp` exit 1 = files differ, `test`
/// exit 1 = false, `find` exit 1 = some directory unreadable). The notes are
/// Claude Code 2.1.332's `returnCodeInterpretation` strings, word for word,
/// as models trained on it read them.
pub fn benign_exit(script: &Script, code: i32) -> Option<&'static str> {
    const NO_MATCHES: &str = "No matches found";
    const DIFFER: &str = "Files differ";
    let last = script.last.as_ref()?;
    let program = last.program.as_deref()?;
    let program = program.rsplit('/').next().unwrap_or(program);
    match (program, code) {
        ("grep" | "egrep" | "fgrep" | "zgrep" | "rg" | "ag" | "ack", 1) => Some(NO_MATCHES),
        ("git", 1) => match git_subcommand(&last.args) {
            Some("grep") => Some(NO_MATCHES),
            // `git diff --exit-code`/`--quiet` say "differ" with 1.
            Some("diff") => Some(DIFFER),
            _ => None,
        },
        ("diff" | "cmp", 1) => Some(DIFFER),
        ("test" | "[", 1) => Some("Condition is false"),
        ("find", 1) => Some("Some directories were inaccessible"),
        _ => None,
    }
}

/// git's subcommand: the first argument that is no option, past the
/// values of `-C` and `-c` (as Claude Code reads it).
fn git_subcommand(args: &[String]) -> Option<&str> {
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-C" | "-c" => {
                args.next();
            }
            a if a.starts_with('-') => {}
            a => return Some(a),
        }
    }
    None
}

#[cfg(test)]
mod follow_tests {
    use super::*;

    #[test]
    fn walkers_that_follow_links_are_told_apart() {
        let follows = |cmd: &str| follows_links(&parse(cmd).unwrap());
        for yes in [
            "grep -R needle .",
            "grep -rR x .",
            "grep --dereference-recursive x .",
            "grep --deref x .",
            "find -L . -name '*.rs'",
            "find . -follow",
            "rg -L x",
            "rg --follow x",
            "ls -LR .",
            "ls -R -L",
            "du -L .",
            "tree -l",
            "fd -L x",
            "printf '%s\\n' . | xargs grep -R x",
            "timeout 5 grep -R x .",
        ] {
            assert!(follows(yes), "{yes}");
        }
        for no in [
            "grep -r needle .",
            "grep -ri x .",
            "find . -name x",
            "rg x",
            "ls -R .",
            "ls -L link",
            "du -sh .",
            "tree",
            "cat -A f",
        ] {
            assert!(!follows(no), "{no}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_come_off_as_bash_takes_them_off() {
        let rows = [
            (r"'r\m'", r"r\m"),
            (r#""c\d""#, r"c\d"),
            (r#""a\$b\`c\"d\\e""#, r#"a$b`c"d\e"#),
            (r"e\f", "ef"),
            (r#"'a'"b"c"#, "abc"),
            ("a\\\nb", "ab"),
            ("\"a\\\nb\"", "ab"),
            ("'a\\\nb'", "a\\\nb"),
            (r"'\%x%p'", r"\%x%p"),
            (r"trailing\", r"trailing\"),
        ];
        for (word, want) in rows {
            assert_eq!(unquote(word), want, "{word}");
        }
        // What a program is called, as bash would look it up.
        assert_eq!(parse(r"'r\m' -rf x").unwrap().commands[0].program.as_deref(), Some(r"r\m"));
    }

    #[test]
    fn parses_lists_pipelines_and_compounds() {
        let s = parse("cd src && grep -rn 'fn main' . | head -5; echo done").unwrap();
        let programs: Vec<_> = s.commands.iter().map(|c| c.program.clone().unwrap()).collect();
        assert_eq!(programs, ["cd", "grep", "head", "echo"]);
        assert_eq!(s.commands[1].args, ["-rn", "fn main", "."]);
        assert_eq!(s.last.as_ref().unwrap().program.as_deref(), Some("echo"));
        assert!(!s.has_compound);
        let s = parse("for f in *.rs; do wc -l \"$f\"; done").unwrap();
        assert!(s.has_compound);
        assert_eq!(s.commands[0].program.as_deref(), Some("wc"));
        assert!(s.last.is_none());
    }

    #[test]
    fn quoted_closers_cannot_overflow_a_workers_stack() {
        // Run on a thread with a worker's stack, as the daemon would.
        for n in [110, 120, 128, 200, 400] {
            let command = "(')';".repeat(n) + "true";
            let result =
                std::thread::Builder::new().stack_size(2 << 20).spawn(move || parse(&command).is_ok()).unwrap().join();
            assert!(result.is_ok(), "{n} levels");
        }
    }

    #[test]
    fn compound_redirections_are_writes() {
        let s = parse("{ echo a; echo b; } > out.txt").unwrap();
        assert!(s.commands.iter().any(|c| c.writes_files == ["out.txt"]), "{s:?}");
        let s = parse("while read l; do echo $l; done < in.txt").unwrap();
        assert!(s.commands.iter().any(|c| c.reads_files == ["in.txt"]), "{s:?}");
    }

    #[test]
    fn finds_substitutions_and_redirections() {
        assert!(parse("echo $(rm -rf /)").unwrap().commands[0].has_substitution);
        assert!(parse("echo \"`id`\"").unwrap().commands[0].has_substitution);
        assert!(parse("diff <(ls a) <(ls b)").unwrap().commands[0].has_substitution);
        assert_eq!(parse("ls > out.txt").unwrap().commands[0].writes_files, ["out.txt"]);
        assert!(parse("ls 2>/dev/null >/dev/null 2>&1").unwrap().commands[0].writes_files.is_empty());
        assert!(parse("cat < in.txt").unwrap().commands[0].writes_files.is_empty());
        assert_eq!(parse("$CMD arg").unwrap().commands[0].program, None);
        assert_eq!(parse("echo x >&victim").unwrap().commands[0].writes_files, ["victim"]);
        assert!(parse("echo x >&2").unwrap().commands[0].writes_files.is_empty());
        assert!(parse("find . {-delete,-print}").unwrap().commands[0].has_expansion);
        assert!(parse("ls *.rs").unwrap().commands[0].has_expansion);
        assert!(!parse("grep 'a*b' \"x?\" file").unwrap().commands[0].has_expansion);
        assert!(parse("LD_PRELOAD=./x.so cat f").unwrap().commands[0].has_assignment);
        assert!(parse("echo 'unterminated").is_err());
    }

    #[test]
    fn a_glob_reads_under_the_directory_it_spells() {
        let roots = |command: &str| parse(command).unwrap().commands[0].glob_roots.clone();
        assert_eq!(roots("cat /e*/hostname"), ["/"]);
        assert_eq!(roots("cat \"/etc\"/host?ame src/*.rs *.md"), ["/etc/", "src/", ""]);
        assert_eq!(roots("ls {/etc,src} {a,b}.txt"), ["/", ""]);
        assert_eq!(roots("cat src/../../*"), ["/"]);
        assert_eq!(roots("cat < /e*/x"), ["/"]);
        assert!(roots("sed -n '/TODO*/p' f \"a*\" a\\*").is_empty(), "quoted: no glob");
        // Braces that make another path, extglob, loops (attack review).
        assert_eq!(roots("cat {,}/etc/h {~,x}/.ssh {.,}{.,}/x {{a,b},c}/x"), ["/", "/", "/", "/"]);
        assert_eq!(roots("cat /@(etc)/h ${HOME}/.b* {a,b}.txt"), ["/", "${HOME}/", ""]);
        assert_eq!(parse("for f in /e*/h; do cat $f; done").unwrap().commands[1].glob_roots, ["/"]);
    }

    #[test]
    fn a_name_value_argument_is_an_argument_not_an_assignment() {
        let c = &parse("pip download six==1.16.0").unwrap().commands[0];
        assert!(!c.has_assignment && c.assigns.is_empty(), "{c:?}");
        assert_eq!(c.args, ["download", "six==1.16.0"]);
        let c = &parse("make CC=gcc 'CFLAGS=-O2 -g' all").unwrap().commands[0];
        assert_eq!(c.args, ["CC=gcc", "CFLAGS=-O2 -g", "all"]);
        assert!(!c.has_assignment);
        assert!(parse("echo x=$(id)").unwrap().commands[0].has_substitution);
        assert!(parse("echo x=*").unwrap().commands[0].has_expansion);
        // Before the program, and as the declaration builtins' arguments,
        // `name=value` does assign.
        let c = &parse("PAGER=x git log").unwrap().commands[0];
        assert_eq!((c.has_assignment, c.assigns.clone()), (true, vec!["PAGER".to_owned()]));
        for command in ["export PAGER=x", "declare -x GIT_DIR=/x", "local PATH=.", "readonly IFS=x", "typeset A=1"] {
            assert!(parse(command).unwrap().commands[0].has_assignment, "{command}");
        }
        assert!(parse("echo 'unterminated").is_err());
    }

    #[test]
    fn benign_exit_codes_follow_the_final_command() {
        let grep = parse("cat x | grep foo").unwrap();
        assert_eq!(benign_exit(&grep, 1), Some("No matches found"));
        assert_eq!(benign_exit(&grep, 2), None, "grep exit 2 is an error");
        assert_eq!(benign_exit(&parse("diff a b").unwrap(), 1), Some("Files differ"));
        assert_eq!(benign_exit(&parse("[ -f x ]").unwrap(), 1), Some("Condition is false"));
        assert_eq!(benign_exit(&parse("test -f x").unwrap(), 1), Some("Condition is false"));
        assert_eq!(benign_exit(&parse("/usr/bin/rg x").unwrap(), 1), Some("No matches found"));
        assert_eq!(benign_exit(&parse("git grep x").unwrap(), 1), Some("No matches found"));
        assert_eq!(benign_exit(&parse("git -C sub grep x").unwrap(), 1), Some("No matches found"));
        assert_eq!(benign_exit(&parse("git diff --quiet").unwrap(), 1), Some("Files differ"));
        assert_eq!(benign_exit(&parse("git commit").unwrap(), 1), None);
        assert_eq!(benign_exit(&parse("find / -name x").unwrap(), 1), Some("Some directories were inaccessible"));
        assert_eq!(benign_exit(&parse("grep x f; false").unwrap(), 1), None);
        assert_eq!(benign_exit(&parse("npm run lint && grep -q ok log").unwrap(), 1), None, "exit 1 may be npm's");
        assert_eq!(benign_exit(&parse("make").unwrap(), 1), None);
    }
}

#[cfg(test)]
mod limit_tests {
    /// Parses on a thread with the stack of a tokio worker (2 MiB): a
    /// parse that recursed too deep would abort the whole test binary.
    fn parse_small_stack(command: String) -> Result<super::Script, super::ParseError> {
        std::thread::Builder::new().stack_size(2 << 20).spawn(move || super::parse(&command)).unwrap().join().unwrap()
    }

    #[test]
    fn deep_or_huge_commands_are_refused_before_the_parser_can_overflow_its_stack() {
        let n = 20_000;
        for command in [
            format!("{}true{}", "(".repeat(n), ")".repeat(n)),
            format!("{}true{}", "$(".repeat(n), ")".repeat(n)),
            format!("{}true{}", "{ ".repeat(n), "; }".repeat(n)),
            format!("{}true{}", "if true; then ".repeat(n), "; fi".repeat(n)),
            format!("{}true{}", "while true; do ".repeat(2000), "; done".repeat(2000)),
        ] {
            let e = parse_small_stack(command).unwrap_err();
            assert!(e.too_complex, "{e}");
        }
        let many = "true && ".repeat(2_000) + "true";
        assert!(parse_small_stack(many).unwrap_err().message.contains("sub-commands"));
        let pipes = "true | ".repeat(2_000) + "true";
        assert!(parse_small_stack(pipes).unwrap_err().too_complex);
        assert!(!super::parse("echo 'open").unwrap_err().too_complex);
        let nested = format!("{}true{}", "(".repeat(40), ")".repeat(40));
        assert!(parse_small_stack(nested).is_ok(), "ordinary nesting parses");
        assert!(super::too_complex("python3 -c 'print((1, [2, {3: 4}]))'").is_none());
    }

    #[test]
    fn quoted_closers_cannot_hide_deep_nesting_from_a_crash() {
        let hidden = "(')';".repeat(12_000);
        assert!(super::too_complex(&hidden).is_none(), "the estimate is fooled; the parse must still be safe");
        let _ = parse_small_stack(hidden);
        let words = "( echo done; ".repeat(5_000);
        let _ = parse_small_stack(words);
    }

    #[test]
    fn redirection_targets_are_unquoted_or_marked_computed() {
        let s = super::parse("echo a > \".env\" 2> 'b c' >> $HOME/x").unwrap();
        assert_eq!(s.commands[0].writes_files, [".env", "b c", "$HOME/x"]);
        assert!(super::target_is_computed("$HOME/x") && !super::target_is_computed(".env"));
    }
}
