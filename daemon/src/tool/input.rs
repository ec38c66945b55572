//! Tool inputs as models write them, and their schemas as models read them.
//!
//! Models trained on Claude Code send what its tools took, in every version
//! they saw: `5.0` for a count, `"true"` for a flag, a field an earlier
//! version had. The deserializers here accept those forms (a hard failure
//! costs a turn); [`model_schema`] shapes the generated JSON Schema the way
//! Claude Code's own schemas look, which is also the cheapest in tokens:
//! plain optional properties (no `null` type, no `default: null`), `enum`
//! lists instead of `oneOf` of `const`s, `number` for every numeric field.

use serde::Deserialize;
use serde::de::{Deserializer, Error};
use serde_json::{Map, Value};

/// Schema extension that marks a property required in the advertised
/// schema although the deserializer has a default for it (a field Claude
/// Code requires that earlier versions did not send). Use it as
/// `#[schemars(extend("x-required" = true))]`.
pub const REQUIRED_MARK: &str = "x-required";

/// A property's older names (`#[schemars(extend("x-aliases" = ["old"]))]`
/// beside its `#[serde(alias = "old")]`): listed as properties of their
/// own by [`model_schema`].
pub const ALIASES_MARK: &str = "x-aliases";

/// A count or a duration: a non-negative JSON number (`5`, `5.0`; a
/// fraction is rounded down) or a string holding one (`"5"`).
fn count(value: Value) -> Result<u64, String> {
    let number = match &value {
        Value::Number(n) => n.as_u64().map(|n| n as f64).or_else(|| n.as_f64()),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    match number {
        Some(n) if n.is_finite() && n >= 0.0 => Ok(if n >= u64::MAX as f64 { u64::MAX } else { n as u64 }),
        Some(n) => Err(format!("expected a number of at least 0, got {n}")),
        None => Err(format!("expected a number, got {value}")),
    }
}

/// `deserialize_with` for an optional count (`Option<usize>`); use with
/// `#[serde(default)]`.
pub fn opt_usize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(v) => count(v).map(|n| Some(usize::try_from(n).unwrap_or(usize::MAX))).map_err(D::Error::custom),
    }
}

/// `deserialize_with` for an optional count (`Option<u64>`); use with
/// `#[serde(default)]`.
pub fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(v) => count(v).map(Some).map_err(D::Error::custom),
    }
}

/// `deserialize_with` for a flag: a boolean, or the strings `"true"` and
/// `"false"`; null is false. Use with `#[serde(default)]`.
pub fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    opt_flag(d).map(|b| b.unwrap_or(false))
}

/// `deserialize_with` for a flag that weakens a wall
/// (`dangerouslyDisableSandbox`): accepted as [`flag`] accepts it, but only
/// the JSON literal `true` sets it. A string `"true"` keeps the wall up, as
/// the permission check always judged it: leaving the sandbox must be meant.
pub fn literal_true<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    match Option::<Value>::deserialize(d)? {
        Some(Value::Bool(b)) => Ok(b),
        None | Some(Value::Null) => Ok(false),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") || s.eq_ignore_ascii_case("false") => Ok(false),
        Some(other) => Err(D::Error::custom(format!("expected true or false, got {other}"))),
    }
}

/// `deserialize_with` for an optional flag (see [`flag`]).
pub fn opt_flag<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(b)),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
        Some(other) => Err(D::Error::custom(format!("expected true or false, got {other}"))),
    }
}

/// Reshapes a generated input schema the way Claude Code's schemas look:
/// - no description on the input object itself (the tool has one);
/// - `Option<T>` as plain `T` (absence is the option), no `default: null`;
/// - `oneOf` of `const`s as an `enum` list (the variants' doc comments
///   belong in the field's description);
/// - `integer` as `number`, without `format` and the `minimum: 0` of
///   unsigned types (inputs take `5.0` anyway);
/// - properties marked [`REQUIRED_MARK`] added to `required`.
pub fn model_schema(mut schema: Value) -> Value {
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("description");
        obj.remove("title");
        obj.remove("$schema");
        obj.entry("type").or_insert_with(|| Value::String("object".into()));
        obj.entry("properties").or_insert_with(|| Value::Object(Map::new()));
    }
    reshape(&mut schema);
    schema
}

fn reshape(value: &mut Value) {
    match value {
        Value::Object(obj) => {
            reshape_object(obj);
            for v in obj.values_mut() {
                reshape(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(reshape),
        _ => {}
    }
}

fn reshape_object(obj: &mut Map<String, Value>) {
    // `anyOf: [T, {type: null}]` (an optional enum or struct) → T's members.
    if let Some(Value::Array(branches)) = obj.get("anyOf") {
        let is_null = |b: &Value| b.get("type").and_then(Value::as_str) == Some("null");
        let rest: Vec<&Value> = branches.iter().filter(|b| !is_null(b)).collect();
        if rest.len() == 1 && branches.len() == 2 {
            let inner = rest[0].as_object().cloned().unwrap_or_default();
            obj.remove("anyOf");
            for (k, v) in inner {
                // The field's own description wins over its type's.
                obj.entry(k).or_insert(v);
            }
        }
    }
    // `type: [T, "null"]` → `type: T`.
    if let Some(Value::Array(types)) = obj.get("type") {
        let kept: Vec<Value> = types.iter().filter(|t| t.as_str() != Some("null")).cloned().collect();
        if kept.len() == 1 {
            obj.insert("type".into(), kept[0].clone());
        }
    }
    if obj.get("default") == Some(&Value::Null) {
        obj.remove("default");
    }
    // `oneOf` of constants → `enum`.
    if let Some(Value::Array(branches)) = obj.get("oneOf")
        && !branches.is_empty()
        && branches.iter().all(|b| b.get("const").is_some())
    {
        let values: Vec<Value> = branches.iter().filter_map(|b| b.get("const").cloned()).collect();
        let all_strings = values.iter().all(Value::is_string);
        obj.remove("oneOf");
        if all_strings {
            obj.insert("type".into(), Value::String("string".into()));
        }
        obj.insert("enum".into(), Value::Array(values));
    }
    if obj.get("type").and_then(Value::as_str) == Some("integer") {
        obj.insert("type".into(), Value::String("number".into()));
        if obj.get("minimum").and_then(Value::as_f64) == Some(0.0) {
            obj.remove("minimum");
        }
    }
    obj.remove("format");
    // Older names a property is accepted under (serde aliases) are
    // properties too, optional, saying whose older name they are: a client
    // that validates against the schema takes what the daemon takes. (Not
    // for required properties: a call with only the older name fails the
    // schema's `required` anyway, so they would cost tokens for nothing.)
    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        let mut older = Vec::new();
        for (name, prop) in props.iter_mut() {
            let Some(p) = prop.as_object_mut() else { continue };
            let Some(Value::Array(aliases)) = p.remove(ALIASES_MARK) else { continue };
            for alias in aliases.iter().filter_map(Value::as_str) {
                let mut copy = p.clone();
                copy.remove(REQUIRED_MARK);
                copy.insert("description".into(), Value::String(format!("Older name of `{name}`.")));
                older.push((alias.to_owned(), Value::Object(copy)));
            }
        }
        for (alias, schema) in older {
            props.entry(alias).or_insert(schema);
        }
    }
    // Marked properties join `required`, in property order.
    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        let mut marked = Vec::new();
        for (name, prop) in props.iter_mut() {
            if let Some(p) = prop.as_object_mut()
                && p.remove(REQUIRED_MARK).is_some()
            {
                marked.push(Value::String(name.clone()));
            }
        }
        if !marked.is_empty() {
            let required = obj.entry("required").or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(list) = required {
                for name in marked {
                    if !list.contains(&name) {
                        list.push(name);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, Deserialize)]
    struct Counts {
        #[serde(default, deserialize_with = "opt_usize")]
        n: Option<usize>,
        #[serde(default, deserialize_with = "flag")]
        f: bool,
    }

    fn counts(v: Value) -> Result<Counts, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn numbers_come_as_models_write_them() {
        assert_eq!(counts(json!({"n": 5})).unwrap().n, Some(5));
        assert_eq!(counts(json!({"n": 5.0})).unwrap().n, Some(5));
        assert_eq!(counts(json!({"n": 1000.5})).unwrap().n, Some(1000));
        assert_eq!(counts(json!({"n": "7"})).unwrap().n, Some(7));
        assert_eq!(counts(json!({"n": null})).unwrap().n, None);
        assert_eq!(counts(json!({})).unwrap().n, None);
        assert!(counts(json!({"n": -1})).unwrap_err().contains("at least 0"));
        assert!(counts(json!({"n": "five"})).unwrap_err().contains("expected a number"));
        assert!(counts(json!({"n": [1]})).is_err());
        assert!(counts(json!({"n": 1e300})).unwrap().n.is_some());
    }

    #[test]
    fn flags_take_booleans_and_their_strings() {
        assert!(counts(json!({"f": true})).unwrap().f);
        assert!(counts(json!({"f": "true"})).unwrap().f);
        assert!(!counts(json!({"f": "False"})).unwrap().f);
        assert!(!counts(json!({"f": null})).unwrap().f);
        assert!(counts(json!({"f": "yes"})).is_err());
        assert!(counts(json!({"f": 1})).is_err());
    }

    #[test]
    fn schemas_are_reshaped_as_claude_code_writes_them() {
        let generated = json!({
            "description": "Input of X.",
            "type": "object",
            "properties": {
                "a": {"type": ["string", "null"], "default": null, "description": "A."},
                "n": {"type": ["integer", "null"], "format": "uint", "minimum": 0, "default": null},
                "m": {"oneOf": [{"const": "x", "type": "string", "description": "X."}, {"const": "y", "type": "string"}], "default": "x"},
                "o": {"anyOf": [{"description": "Kind.", "oneOf": [{"const": "p"}, {"const": "q"}]}, {"type": "null"}], "description": "Mine."},
                "r": {"type": "string", "x-required": true},
            },
            "required": ["z"],
        });
        let s = model_schema(generated);
        assert!(s.get("description").is_none());
        assert_eq!(s["properties"]["a"], json!({"type": "string", "description": "A."}));
        assert_eq!(s["properties"]["n"], json!({"type": "number"}));
        assert_eq!(s["properties"]["m"], json!({"type": "string", "enum": ["x", "y"], "default": "x"}));
        assert_eq!(s["properties"]["o"], json!({"type": "string", "enum": ["p", "q"], "description": "Mine."}));
        assert_eq!(s["properties"]["r"], json!({"type": "string"}));
        assert_eq!(s["required"], json!(["z", "r"]));
    }
}
