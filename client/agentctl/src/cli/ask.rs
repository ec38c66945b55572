//! Asking the user at the terminal during `agentctl run`: a permission
//! request (yes, no, always), AskUserQuestion's questions, and an MCP
//! server's elicitation (a form of its fields, or a page to go to).

use super::*;

/// How `agentctl run` answers permission requests.
#[derive(Debug, Clone, Copy)]
pub(super) enum Answering {
    /// Allow all (`--yes`).
    Yes,
    /// Ask on the terminal.
    Prompt(Asker),
    /// Deny all (nobody to ask).
    Deny,
}

/// Asks on the terminal (blocking): a yes/no/always question, or
/// AskUserQuestion's questions. A terminal that cannot be opened or is
/// closed (end of input) refuses.
pub(super) fn prompt(
    asker: Asker,
    tool: &str,
    input: &serde_json::Value,
    suggestions: &[String],
) -> (PermissionDecision, Option<std::collections::BTreeMap<String, String>>) {
    use std::io::{BufRead, Write};
    let Ok((mut term_in, mut out)) = asker.open() else {
        return (PermissionDecision::Deny, None);
    };
    let mut read = || {
        let mut line = String::new();
        let _ = term_in.read_line(&mut line);
        line.trim().to_owned()
    };
    if tool == "AskUserQuestion" {
        let mut answers = std::collections::BTreeMap::new();
        for q in input["questions"].as_array().into_iter().flatten() {
            let question = q["question"].as_str().unwrap_or_default();
            let _ = writeln!(out, "? {question}");
            let options: Vec<&serde_json::Value> = q["options"].as_array().into_iter().flatten().collect();
            let label = |o: &serde_json::Value| o["label"].as_str().unwrap_or_default().to_owned();
            for (i, o) in options.iter().enumerate() {
                let _ = writeln!(out, "  {}. {}  {}", i + 1, label(o), o["description"].as_str().unwrap_or_default());
            }
            let _ = write!(out, "  number(s), or your own answer: ");
            let _ = out.flush();
            let line = read();
            let picked: Option<Vec<String>> = line
                .split([',', ' '])
                .filter(|s| !s.is_empty())
                .map(|n| n.parse::<usize>().ok().and_then(|n| options.get(n.wrapping_sub(1)).map(|o| label(o))))
                .collect();
            let answer = match picked {
                Some(labels) if !labels.is_empty() => labels.join(", "),
                _ => line,
            };
            answers.insert(question.to_owned(), answer);
        }
        return (PermissionDecision::Allow, Some(answers));
    }
    let always = suggestions.first().map(|s| format!(", [a]lways ({s})")).unwrap_or_default();
    loop {
        let _ = write!(out, "  allow? [y]es, [N]o (Enter){always}: ");
        let _ = out.flush();
        match decide(&read(), !always.is_empty()) {
            Some(decision) => return (decision, None),
            // Not a silent refusal (issue 49 #13): said, and asked again.
            None => {
                let _ = writeln!(out, "  no rule to allow always here (the daemon suggests none); answer y or n");
            }
        }
    }
}

/// An answer to `allow?`: `None` for `a` where "always" is not offered.
fn decide(answer: &str, always_offered: bool) -> Option<PermissionDecision> {
    match answer.to_lowercase().as_str() {
        "y" | "yes" => Some(PermissionDecision::Allow),
        "a" | "always" if always_offered => Some(PermissionDecision::AllowAlways),
        "a" | "always" => None,
        _ => Some(PermissionDecision::Deny),
    }
}

/// Where `run` asks: on its stdin and stdout, or on the terminal itself
/// (`/dev/tty`) when stdin is the turn (`run -`) or not a terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Asker {
    Stdio,
    Tty,
}

impl Asker {
    /// Where to ask, if anywhere: stdin when it is a terminal and not the
    /// turn's input, else the process's terminal when it has one.
    pub(super) fn find(stdin_is_input: bool) -> Option<Asker> {
        if !stdin_is_input && std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            return Some(Asker::Stdio);
        }
        Asker::tty().ok().map(|_| Asker::Tty)
    }

    /// Asks `question`; whether the answer is yes.
    pub(super) fn yes_no(self, question: &str) -> bool {
        use std::io::{BufRead, Write};
        let Ok((mut term_in, mut out)) = self.open() else { return false };
        let _ = write!(out, "{question}");
        let _ = out.flush();
        let mut line = String::new();
        let _ = term_in.read_line(&mut line);
        matches!(line.trim().to_lowercase().as_str(), "y" | "yes")
    }

    fn tty() -> std::io::Result<std::fs::File> {
        std::fs::OpenOptions::new().read(true).write(true).open("/dev/tty")
    }

    #[allow(clippy::type_complexity)]
    fn open(self) -> std::io::Result<(Box<dyn std::io::BufRead>, Box<dyn std::io::Write>)> {
        match self {
            Asker::Stdio => Ok((Box::new(std::io::stdin().lock()), Box::new(std::io::stdout()))),
            Asker::Tty => {
                let tty = Asker::tty()?;
                Ok((Box::new(std::io::BufReader::new(tty.try_clone()?)), Box::new(tty)))
            }
        }
    }
}

/// An MCP server's elicitation at the terminal: accept, decline or
/// cancel, then each field of its (flat) form: its title or name, its
/// description, its choices; Enter keeps the default (or leaves out an
/// optional field).
pub(super) fn elicit_prompt(
    asker: Asker,
    server: &str,
    message: &str,
    schema: &serde_json::Value,
) -> (agentd_client::protocol::mcp::McpElicitationAction, Option<serde_json::Map<String, serde_json::Value>>) {
    use agentd_client::protocol::mcp::McpElicitationAction as Action;
    use serde_json::Value;
    use std::io::{BufRead, Write};
    let Ok((mut term_in, mut out)) = asker.open() else {
        return (Action::Decline, None);
    };
    let mut read = || {
        let mut line = String::new();
        let _ = term_in.read_line(&mut line);
        line.trim().to_owned()
    };
    let _ = writeln!(out, "? {server} asks: {message}");
    let _ = write!(out, "  answer? [y]es, [n]o (decline, Enter), [c]ancel: ");
    let _ = out.flush();
    match read().to_lowercase().as_str() {
        "y" | "yes" => {}
        "c" | "cancel" => return (Action::Cancel, None),
        _ => return (Action::Decline, None),
    }
    let required: Vec<&str> = schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let mut content = serde_json::Map::new();
    for (name, field) in schema["properties"].as_object().into_iter().flatten() {
        let title = field["title"].as_str().unwrap_or(name);
        let kind = field["type"].as_str().unwrap_or("string");
        // Choices: `enum`, or `oneOf`/`anyOf` of `{const, title}`; of the
        // items for several choices (an array).
        let (choices, labels) = form_choices(if kind == "array" { &field["items"] } else { field });
        let mut hint = match kind {
            "boolean" => "y/n".to_owned(),
            _ if !choices.is_empty() => {
                let list = labels.iter().enumerate().map(|(i, c)| format!("{}. {c}", i + 1)).collect::<Vec<_>>();
                let several = if kind == "array" { "; several: 1,3" } else { "" };
                format!("{}{several}", list.join("  "))
            }
            other => other.to_owned(),
        };
        if let Some(default) = field.get("default") {
            hint.push_str(&format!("; Enter: {default}"));
        } else if !required.contains(&name.as_str()) {
            hint.push_str("; Enter: leave out");
        }
        if let Some(about) = field["description"].as_str() {
            let _ = writeln!(out, "  {about}");
        }
        let _ = write!(out, "  {title} ({hint}): ");
        let _ = out.flush();
        let line = read();
        let value = if line.is_empty() {
            match field.get("default") {
                Some(default) => default.clone(),
                None => continue,
            }
        } else {
            match kind {
                "boolean" => Value::Bool(matches!(line.to_lowercase().as_str(), "y" | "yes" | "true")),
                "integer" => line.parse::<i64>().map(Value::from).unwrap_or(Value::String(line)),
                "number" => line.parse::<f64>().map(Value::from).unwrap_or(Value::String(line)),
                "array" => Value::Array(
                    line.split(',')
                        .map(str::trim)
                        .filter(|p| !p.is_empty())
                        .map(|p| match p.parse::<usize>().ok().and_then(|n| choices.get(n.wrapping_sub(1))) {
                            Some(choice) => Value::String((*choice).to_owned()),
                            None => Value::String(p.to_owned()),
                        })
                        .collect(),
                ),
                _ if !choices.is_empty() => {
                    match line.parse::<usize>().ok().and_then(|n| choices.get(n.wrapping_sub(1))) {
                        Some(choice) => Value::String((*choice).to_owned()),
                        None => Value::String(line),
                    }
                }
                _ => Value::String(line),
            }
        };
        content.insert(name.clone(), value);
    }
    (Action::Accept, Some(content))
}

/// The values a form field offers and how to show each: `enum` (with
/// `enumNames`), or `oneOf`/`anyOf` of `{const, title}`.
fn form_choices(field: &serde_json::Value) -> (Vec<&str>, Vec<String>) {
    if let Some(values) = field["enum"].as_array() {
        let values: Vec<&str> = values.iter().filter_map(serde_json::Value::as_str).collect();
        let names = field["enumNames"].as_array();
        let labels = values
            .iter()
            .enumerate()
            .map(|(i, v)| match names.and_then(|n| n.get(i)).and_then(serde_json::Value::as_str) {
                Some(name) => format!("{name} ({v})"),
                None => (*v).to_owned(),
            })
            .collect();
        return (values, labels);
    }
    let options = field["oneOf"].as_array().or_else(|| field["anyOf"].as_array()).into_iter().flatten();
    let pairs: Vec<(&str, String)> = options
        .filter_map(|o| {
            let value = o["const"].as_str()?;
            Some((value, o["title"].as_str().map_or_else(|| value.to_owned(), |t| format!("{t} ({value})"))))
        })
        .collect();
    pairs.into_iter().unzip()
}
