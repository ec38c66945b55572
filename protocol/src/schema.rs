//! The protocol as one JSON document: every method with the JSON Schema of its
//! params and result, the error codes, and the shared type definitions.
//!
//! The document is committed as `protocol/schema/agentd-protocol.json` so
//! clients in other languages can generate code from it; a test regenerates
//! it and fails when the committed copy has drifted.

use schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value, json};

use crate::error::ErrorCode;
use crate::methods::{Method, MethodVisitor, visit_methods};

/// Path of the committed schema, relative to the workspace root.
pub const SCHEMA_PATH: &str = "protocol/schema/agentd-protocol.json";

/// The command that rewrites the committed schema.
pub const REGENERATE_COMMAND: &str = "UPDATE_SCHEMA=1 cargo test -p agentd-protocol committed";

struct Entries<'a> {
    generator: &'a mut SchemaGenerator,
    methods: Map<String, Value>,
}

impl MethodVisitor for Entries<'_> {
    fn visit<M: Method>(&mut self) {
        let params = self.generator.subschema_for::<M::Params>();
        let result = self.generator.subschema_for::<M::Result>();
        let description = M::DOC.lines().map(str::trim).collect::<Vec<_>>().join(" ");
        self.methods
            .insert(M::NAME.to_owned(), json!({ "description": description, "params": params, "result": result }));
    }
}

fn definition<T: JsonSchema>(generator: &mut SchemaGenerator) -> Value {
    generator.subschema_for::<T>().to_value()
}

/// A subscription's entry: `[subscribe, notification, unsubscribe]`
/// methods, its params `P` and the item `I` each notification carries.
fn subscription<P: JsonSchema, I: JsonSchema>(
    generator: &mut SchemaGenerator,
    [subscribe, notification, unsubscribe]: [&str; 3],
    description: &str,
) -> (String, Value) {
    let entry = json!({
        "description": description,
        "params": generator.subschema_for::<P>(),
        "result": {"type": "string", "description": "subscription id"},
        "notification": notification,
        "unsubscribe": unsubscribe,
        "item": generator.subschema_for::<I>(),
    });
    (subscribe.to_owned(), entry)
}

/// Builds the protocol document.
pub fn protocol_schema() -> Value {
    let mut generator =
        SchemaSettings::draft2020_12().with(|s| s.definitions_path = "#/$defs/".into()).into_generator();
    let mut entries = Entries { generator: &mut generator, methods: Map::new() };
    visit_methods(&mut entries);
    let mut methods = entries.methods;
    let subscriptions = [
        subscription::<crate::turn::TurnStreamParams, crate::turn::Event>(
            &mut generator,
            [crate::methods::TURN_STREAM, crate::methods::TURN_EVENT, crate::methods::TURN_UNSTREAM],
            "`turn/stream`: a subscription of the session's events. It answers with a subscription id; events arrive as `turn/event` notifications whose `params.result` is an Event; `turn/unstream` with the id ends it.",
        ),
        subscription::<crate::methods::DaemonActivityParams, crate::methods::DaemonActivityResult>(
            &mut generator,
            [crate::methods::DAEMON_WATCH, crate::methods::DAEMON_ACTIVITY_EVENT, crate::methods::DAEMON_UNWATCH],
            "`daemon/watch`: a subscription of `daemon/activity`. It answers with a subscription id; a DaemonActivityResult arrives at once as a `daemon/activity_event` notification (its `params.result`), then again after each change of any session's work (a burst once, within 200 ms); `daemon/unwatch` with the id ends it.",
        ),
    ];
    methods.extend(subscriptions);
    let invalid_params_data = definition::<crate::error::InvalidParamsData>(&mut generator);

    let errors: Map<String, Value> = ErrorCode::ALL.iter().map(|c| (c.name().to_owned(), json!(c.code()))).collect();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "agentd protocol",
        "description": "JSON-RPC 2.0 over a Unix stream socket, one JSON object per line; params by name.",
        "protocol_version": crate::PROTOCOL_VERSION,
        "methods": methods,
        "errors": errors,
        "invalid_params_data": invalid_params_data,
        "$defs": generator.take_definitions(true),
    })
}

/// The document as committed: pretty JSON with a trailing newline.
pub fn protocol_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&protocol_schema()).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Compares the committed file at `rel` (from the workspace root) with
    /// `fresh`, or rewrites it when `UPDATE_SCHEMA` is set.
    pub(crate) fn committed_matches(rel: &str, fresh: &str) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel);
        if std::env::var_os("UPDATE_SCHEMA").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, fresh).unwrap();
            return;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == fresh,
            "{rel} is out of date with the protocol types; rewrite it with `{REGENERATE_COMMAND}` and commit it"
        );
    }

    #[test]
    fn committed_schema_matches_the_types() {
        committed_matches(SCHEMA_PATH, &protocol_schema_text());
    }

    #[test]
    fn every_method_has_params_and_result() {
        let doc = protocol_schema();
        let methods = doc["methods"].as_object().unwrap();
        assert!(methods.contains_key("session/create"));
        for (name, entry) in methods {
            assert!(name.contains('/'), "{name} is not noun/verb");
            assert!(entry.get("params").is_some() && entry.get("result").is_some());
        }
        // The cwd field's doc comment reaches the schema.
        let defs = doc["$defs"].as_object().unwrap();
        let create = &defs["SessionCreateParams"];
        assert!(create["properties"]["cwd"]["description"].as_str().unwrap().contains("workspace"));
        assert_eq!(create["required"], json!(["cwd"]));
    }
}
