//! The protocol as a document for people: `docs/protocol.md`, rendered
//! from the same JSON Schema document as `protocol/schema/`, so the two
//! cannot disagree. A test regenerates it and fails when the committed copy
//! has drifted.

use std::fmt::Write as _;

use serde_json::{Map, Value};

/// Path of the committed document, relative to the workspace root.
pub const DOCS_PATH: &str = "docs/protocol.md";

/// Renders the protocol document as markdown.
pub fn protocol_markdown() -> String {
    let doc = crate::schema::protocol_schema();
    let defs = doc["$defs"].as_object().cloned().unwrap_or_default();
    let mut out = String::new();
    let _ = writeln!(out, "# The agentd protocol");
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "<!-- Generated from the protocol crate's types by `{}`; do not edit by hand. -->",
        crate::schema::REGENERATE_COMMAND
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "{}", doc["description"].as_str().unwrap_or_default());
    let _ = writeln!(
        out,
        "Protocol version {}. The same contract as JSON Schema (draft 2020-12) is in `{}`. Wire names are \
         extended, never renamed.",
        doc["protocol_version"],
        crate::schema::SCHEMA_PATH
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Request ids may be any string, any number (echoed byte for byte) or null. A line holding an array \
         is a batch; its members are run in order."
    );

    let _ = writeln!(out, "\n## Methods\n");
    let methods = doc["methods"].as_object().cloned().unwrap_or_default();
    for (name, entry) in &methods {
        let _ = writeln!(out, "### `{name}`\n");
        let _ = writeln!(out, "{}\n", entry["description"].as_str().unwrap_or_default().trim());
        let _ = writeln!(out, "- params: {}", type_name(&entry["params"]));
        let _ = writeln!(out, "- result: {}", type_name(&entry["result"]));
        if let Some(n) = entry["notification"].as_str() {
            let _ = writeln!(out, "- notifications: `{n}`, each carrying an {}", type_name(&entry["item"]));
            let _ = writeln!(out, "- ends with: `{}`", entry["unsubscribe"].as_str().unwrap_or_default());
        }
        let _ = writeln!(out);
    }

    let _ = writeln!(out, "## Errors\n");
    let _ = writeln!(out, "| code | name |\n|---|---|");
    let mut errors: Vec<(i64, String)> = doc["errors"]
        .as_object()
        .map(|o| o.iter().map(|(k, v)| (v.as_i64().unwrap_or_default(), k.clone())).collect())
        .unwrap_or_default();
    errors.sort();
    for (code, name) in errors {
        let _ = writeln!(out, "| {code} | `{name}` |");
    }
    let _ =
        writeln!(out, "\n`invalid_params` errors carry `data` of type {}.\n", type_name(&doc["invalid_params_data"]));

    let _ = writeln!(out, "## Types\n");
    for (name, schema) in &defs {
        let _ = writeln!(out, "### {name}\n");
        if let Some(d) = schema["description"].as_str() {
            let _ = writeln!(out, "{}\n", one_line(d));
        }
        render_type(&mut out, schema);
        let _ = writeln!(out);
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

fn render_type(out: &mut String, schema: &Value) {
    if let Some(values) = constants(schema) {
        let _ = writeln!(out, "One of:\n");
        for (value, description) in values {
            let _ =
                writeln!(out, "- `{value}`{}", description.map(|d| format!(": {}", one_line(&d))).unwrap_or_default());
        }
        return;
    }
    if schema.get("properties").is_some() {
        fields(out, schema);
    }
    if let Some(variants) = schema["oneOf"].as_array() {
        let tag = variants.first().and_then(|v| {
            v["properties"].as_object()?.iter().find(|(_, p)| p.get("const").is_some()).map(|(k, _)| k.clone())
        });
        for v in variants {
            let title = match &tag {
                Some(t) => format!("`{t}: {}`", v["properties"][t]["const"]),
                None => "variant".to_owned(),
            };
            let _ = writeln!(
                out,
                "\n**{title}**{}\n",
                v["description"].as_str().map(|d| format!(" — {}", one_line(d))).unwrap_or_default()
            );
            fields(out, v);
        }
    }
}

/// A table of an object schema's fields.
fn fields(out: &mut String, schema: &Value) {
    let props: Map<String, Value> = schema["properties"].as_object().cloned().unwrap_or_default();
    if props.is_empty() {
        let _ = writeln!(out, "(no fields)");
        return;
    }
    let required: Vec<&str> =
        schema["required"].as_array().map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let _ = writeln!(out, "| field | type | required | description |\n|---|---|---|---|");
    for (name, p) in &props {
        let description = p["description"].as_str().map(one_line).unwrap_or_default();
        let _ = writeln!(
            out,
            "| `{name}` | {} | {} | {} |",
            type_name(p).replace('|', "\\|"),
            if required.contains(&name.as_str()) { "yes" } else { "" },
            description.replace('|', "\\|")
        );
    }
}

/// The values of an enum schema (`enum`, or `oneOf` of `const`s).
fn constants(schema: &Value) -> Option<Vec<(String, Option<String>)>> {
    if let Some(values) = schema["enum"].as_array() {
        return Some(values.iter().map(|v| (v.as_str().map(str::to_owned).unwrap_or(v.to_string()), None)).collect());
    }
    let variants = schema["oneOf"].as_array()?;
    variants
        .iter()
        .map(|v| {
            let c = v.get("const")?;
            Some((c.as_str().map(str::to_owned).unwrap_or(c.to_string()), v["description"].as_str().map(str::to_owned)))
        })
        .collect()
}

/// A short name for a schema's type: a `$ref`'s name, `string`,
/// `array of X`, `X or null`.
fn type_name(schema: &Value) -> String {
    if let Some(r) = schema["$ref"].as_str() {
        return format!("`{}`", r.rsplit('/').next().unwrap_or(r));
    }
    if let Some(any) = schema["anyOf"].as_array().or_else(|| schema["oneOf"].as_array()) {
        if let Some(values) = constants(schema) {
            return values.iter().map(|(v, _)| format!("`{v}`")).collect::<Vec<_>>().join(", ");
        }
        return any.iter().map(type_name).collect::<Vec<_>>().join(" or ");
    }
    if let Some(values) = schema["enum"].as_array() {
        return values
            .iter()
            .map(|v| format!("`{}`", v.as_str().map(str::to_owned).unwrap_or(v.to_string())))
            .collect::<Vec<_>>()
            .join(", ");
    }
    if let Some(c) = schema.get("const") {
        return format!("`{c}`");
    }
    let base = |t: &str| -> String {
        match t {
            "array" => format!("array of {}", type_name(&schema["items"])),
            "object" => match schema.get("additionalProperties") {
                Some(v) if v.is_object() => format!("map of {}", type_name(v)),
                _ => "object".to_owned(),
            },
            other => other.to_owned(),
        }
    };
    match &schema["type"] {
        Value::String(t) => base(t),
        Value::Array(types) => types.iter().filter_map(Value::as_str).map(base).collect::<Vec<_>>().join(" or "),
        _ => "any".to_owned(),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_docs_match_the_types() {
        crate::schema::tests::committed_matches(DOCS_PATH, &protocol_markdown());
    }

    #[test]
    fn every_method_event_and_type_is_documented() {
        let text = protocol_markdown();
        for name in crate::methods::METHOD_NAMES {
            assert!(text.contains(&format!("### `{name}`")), "{name}");
        }
        assert!(text.contains("### `turn/stream`") && text.contains("`type: \"tool/result\"`"), "events");
        assert!(text.contains("### PermissionRespondParams"));
        assert!(text.contains("| `cwd` | string | yes |"), "a field row");
    }
}
