//! Words of a command's text as the shell will treat them: whether one
//! substitutes or expands, its literal value unquoted, where a glob's
//! matches lie, and what a redirection's target is.

/// True when a raw word would run something while being expanded.
pub(super) fn substitutes(word: &str) -> bool {
    word.contains("$(") || word.contains('`') || word.contains("<(") || word.contains(">(")
}

/// True when the shell would expand `word` (parameters outside single
/// quotes; braces and globs outside any quotes). `{}` alone, what `find
/// -exec` fills in, is literal to the shell.
pub(super) fn expands(word: &str) -> bool {
    if word == "{}" {
        return false;
    }
    let (mut single, mut double, mut escaped) = (false, false, false);
    for c in word.chars() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' if !single => escaped = true,
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '$' | '`' if !single => return true,
            '{' | '*' | '?' | '[' if !single && !double => return true,
            _ => {}
        }
    }
    false
}

/// Where the matches of a word the shell expands as a glob lie: the
/// directory part of the word before its first unquoted `*`, `?`, `[` or
/// extglob `@(`, `+(`, `!(` (`/e*/x` → `/`, `"src"/*.rs` → `src/`); `/`
/// when an unquoted brace could take it anywhere (`{/etc,x}/h`, `{,}/etc`,
/// `{~,x}/.ssh`, `{.,}{.,}/x`) or the word holds a `..`. `None` for a word
/// that is no glob.
pub(super) fn glob_root(word: &str) -> Option<String> {
    let (mut single, mut double, mut escaped) = (false, false, false);
    let mut first = None;
    let mut anywhere = false;
    // The alternatives of the brace being read, at each depth.
    let mut braces: Vec<Vec<String>> = Vec::new();
    let mut params = 0usize;
    let mut prev = None;
    for (i, c) in word.char_indices() {
        let before = prev.replace(c);
        if escaped {
            escaped = false;
            if let Some(alt) = braces.last_mut().and_then(|b| b.last_mut()) {
                alt.push(c);
            }
            continue;
        }
        match c {
            '\\' if !single => escaped = true,
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '*' | '?' | '[' if !single && !double => {
                first.get_or_insert(i);
            }
            '(' if !single && !double && matches!(before, Some('@' | '+' | '!')) => {
                first.get_or_insert(i - 1);
            }
            // `${name}`: a parameter, no brace (its value is no literal
            // directory: the root it leaves is nowhere in the workspace).
            '{' if !single && before == Some('$') => params += 1,
            '}' if !single && params > 0 => params -= 1,
            '{' if !single && !double => {
                first.get_or_insert(i);
                // A brace inside another or in a parameter: what it makes
                // is not followed.
                anywhere |= !braces.is_empty() || params > 0;
                braces.push(vec![String::new()]);
            }
            ',' if !single && !double && !braces.is_empty() => {
                braces.last_mut().into_iter().for_each(|b| b.push(String::new()));
            }
            '}' if !single && !double => {
                if let Some(alts) = braces.pop() {
                    // An empty alternative (`{,}/etc` is `/etc`), or one
                    // that starts a path of its own or goes up.
                    anywhere |= alts.len() > 1
                        && alts.iter().any(|a| a.is_empty() || a.starts_with(['.', '~', '/']) || a.contains('/'));
                }
            }
            _ => {
                if let Some(alt) = braces.last_mut().and_then(|b| b.last_mut()) {
                    alt.push(c);
                }
            }
        }
    }
    let first = first?;
    if anywhere || word.contains("..") || unquote(word).contains("..") {
        return Some("/".to_owned());
    }
    let head = unquote(&word[..first]);
    Some(head.rfind('/').map(|i| head[..=i].to_owned()).unwrap_or_default())
}

/// A literal word's value, unquoted; `None` when it expands to something
/// only the shell knows.
pub(super) fn literal(word: &str) -> Option<String> {
    if word.contains('$') || word.contains('`') {
        return None;
    }
    Some(unquote(word))
}

/// A word's quotes removed as bash removes them: inside single quotes
/// everything is literal (`'r\m'` is `r\m`, not `rm`); inside double quotes
/// a backslash escapes only `$`, `` ` ``, `"`, `\` and a newline; outside
/// quotes it escapes any character, and a backslash-newline is nothing.
pub fn unquote(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut chars = word.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    out.push(c);
                }
            }
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => match chars.peek() {
                            Some('$' | '`' | '"' | '\\') => out.extend(chars.next()),
                            Some('\n') => {
                                chars.next();
                            }
                            _ => out.push('\\'),
                        },
                        _ => out.push(c),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(c) => out.push(c),
                None => out.push('\\'),
            },
            _ => out.push(c),
        }
    }
    out
}

/// A redirection target as the shell will open it: unquoted when literal;
/// otherwise the raw text, which keeps its `$`/backtick so callers see that
/// it is computed.
pub(super) fn target_text(word: &str) -> String {
    literal(word).unwrap_or_else(|| word.to_owned())
}

/// Whether a redirection target is computed by the shell (variables,
/// substitutions, globs, `~`) rather than written out.
pub fn target_is_computed(target: &str) -> bool {
    target.is_empty() || target.contains(['$', '`', '*', '?', '[', '{', '~'])
}
