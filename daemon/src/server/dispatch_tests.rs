//! The dispatcher's subscription and async paths, driven without a socket.
//! (The daemon's production methods are all synchronous until the executor
//! issue; these register test methods on a module of their own.)

use std::sync::Arc;
use std::time::Duration;

use jsonrpsee::{MethodSink, RpcModule, SubscriptionMessage};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

use super::*;

struct Harness {
    dispatcher: Arc<Dispatcher>,
    outbox: mpsc::Receiver<Reply>,
    ended: Arc<Notify>,
}

fn harness() -> Harness {
    let ended = Arc::new(Notify::new());
    let mut module = RpcModule::new(ended.clone());
    module
        .register_subscription("test/ticks", "test/tick", "test/unticks", |_params, pending, _ctx, _ext| async move {
            let sink = pending.accept().await?;
            for n in 0..3 {
                let msg = SubscriptionMessage::from(serde_json::value::to_raw_value(&n)?);
                sink.send(msg).await?;
            }
            Ok(())
        })
        .unwrap();
    module
        .register_subscription(
            "test/forever",
            "test/ever",
            "test/unforever",
            |_params, pending, ended, _ext| async move {
                let sink = pending.accept().await?;
                sink.closed().await;
                ended.notify_one();
                Ok(())
            },
        )
        .unwrap();
    module
        .register_subscription(
            "test/refuse",
            "test/refused",
            "test/unrefuse",
            |_params, pending, _ctx, _ext| async move {
                pending.reject(jsonrpsee::types::ErrorObject::owned(-32003, "no", None::<()>)).await;
                Ok(())
            },
        )
        .unwrap();
    module
        .register_async_method("test/slow_echo", |params, _ctx, _ext| async move {
            tokio::task::yield_now().await;
            params.parse::<Value>()
        })
        .unwrap();
    let (tx, outbox) = mpsc::channel(64);
    let dispatcher = Arc::new(Dispatcher::new(module.into(), 7, MethodSink::new(tx)));
    Harness { dispatcher, outbox, ended }
}

async fn run(handled: Handled) -> Option<Value> {
    let reply = match handled {
        Handled::Ready(r) => r,
        Handled::Later(fut) => tokio::time::timeout(Duration::from_secs(10), fut).await.unwrap(),
    };
    reply.map(|r| serde_json::from_str(r.get()).unwrap())
}

async fn next(outbox: &mut mpsc::Receiver<Reply>) -> Value {
    let r = tokio::time::timeout(Duration::from_secs(10), outbox.recv()).await.unwrap().unwrap();
    serde_json::from_str(r.get()).unwrap()
}

#[tokio::test]
async fn a_subscription_answers_with_a_string_id_then_streams_through_the_sink() {
    let mut h = harness();
    let direct = run(h.dispatcher.handle(r#"{"jsonrpc":"2.0","id":1,"method":"test/ticks"}"#)).await;
    assert_eq!(direct, None, "the reply goes through the sink, once");
    let accepted = next(&mut h.outbox).await;
    assert_eq!(accepted["id"], json!(1));
    let sub_id = accepted["result"].as_str().expect("string subscription ids (Neovim turns big integers into floats)");
    for n in 0..3 {
        let note = next(&mut h.outbox).await;
        assert_eq!(note["method"], json!("test/tick"));
        assert_eq!(note["params"]["subscription"], json!(sub_id));
        assert_eq!(note["params"]["result"], json!(n));
    }
}

#[tokio::test]
async fn a_rejected_subscription_gets_exactly_one_error_reply() {
    let mut h = harness();
    assert_eq!(run(h.dispatcher.handle(r#"{"jsonrpc":"2.0","id":2,"method":"test/refuse"}"#)).await, None);
    let reply = next(&mut h.outbox).await;
    assert_eq!(reply["error"]["code"], json!(-32003));
    assert!(h.outbox.try_recv().is_err(), "no second reply");
}

#[tokio::test]
async fn a_subscription_ends_when_its_connection_closes() {
    let mut h = harness();
    run(h.dispatcher.handle(r#"{"jsonrpc":"2.0","id":1,"method":"test/forever"}"#)).await;
    let _accepted = next(&mut h.outbox).await;
    let ended = h.ended.clone();
    drop(h.outbox);
    tokio::time::timeout(Duration::from_secs(10), ended.notified()).await.expect("subscription noticed the close");
}

#[tokio::test]
async fn subscriptions_are_refused_inside_a_batch_and_counted_per_connection() {
    let mut h = harness();
    let reply = run(h.dispatcher.handle(r#"[{"jsonrpc":"2.0","id":1,"method":"test/ticks"},{"jsonrpc":"2.0","id":2,"method":"test/slow_echo","params":{"a":1}}]"#)).await.unwrap();
    assert_eq!(reply[0]["error"]["code"], json!(-32600));
    assert!(reply[0]["error"]["message"].as_str().unwrap().contains("batch"));
    assert_eq!(reply[1]["result"], json!({"a": 1}), "the async member still ran");

    for id in 0..MAX_SUBSCRIPTIONS_PER_CONNECTION {
        let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"test/forever"}}"#);
        run(h.dispatcher.handle(&line)).await;
        assert!(next(&mut h.outbox).await["result"].is_string());
    }
    let over = run(h.dispatcher.handle(r#"{"jsonrpc":"2.0","id":99,"method":"test/forever"}"#)).await.unwrap();
    assert_eq!(over["error"]["code"], json!(-32600), "{over}");
}

#[tokio::test]
async fn an_async_method_replies_later_and_its_notification_replies_never() {
    let h = harness();
    let reply = run(h.dispatcher.handle(r#"{"jsonrpc":"2.0","id":"x","method":"test/slow_echo","params":{"b":2}}"#))
        .await
        .unwrap();
    assert_eq!(reply, json!({"jsonrpc": "2.0", "id": "x", "result": {"b": 2}}));
    let none = run(h.dispatcher.handle(r#"{"jsonrpc":"2.0","method":"test/slow_echo","params":{"b":2}}"#)).await;
    assert_eq!(none, None);
}

/// The examples of the JSON-RPC 2.0 specification (section 7), line for
/// line, against methods that do what the spec's do. Error messages are
/// ours; codes, ids and results are the spec's.
#[tokio::test]
async fn the_specifications_examples() {
    let mut module = RpcModule::new(());
    let numbers = |p: &jsonrpsee::types::Params<'_>| -> Vec<i64> {
        p.parse::<Vec<i64>>()
            .or_else(|_| {
                p.parse::<Value>()
                    .map(|v| vec![v["minuend"].as_i64().unwrap_or(0), v["subtrahend"].as_i64().unwrap_or(0)])
            })
            .unwrap_or_default()
    };
    module
        .register_method("subtract", move |p, _, _| {
            let n = numbers(&p);
            n[0] - n[1]
        })
        .unwrap();
    module.register_method("sum", |p, _, _| p.parse::<Vec<i64>>().unwrap_or_default().iter().sum::<i64>()).unwrap();
    module.register_method("get_data", |_, _, _| json!(["hello", 5])).unwrap();
    for note in ["update", "notify_hello", "notify_sum"] {
        module.register_method(note, |_, _, _| Value::Null).unwrap();
    }
    let (tx, _outbox) = mpsc::channel(64);
    let d = Arc::new(Dispatcher::new(module.into(), 1, MethodSink::new(tx)));
    let reply = |line: &str| {
        let d = d.clone();
        let line = line.to_owned();
        async move { run(d.handle(&line)).await }
    };
    let error = |code: i64, id: Value| json!({"code": code, "id": id});
    // Results compare whole; errors by code and id.
    fn shape(v: &Value) -> Value {
        match v {
            Value::Array(items) => Value::Array(items.iter().map(shape).collect()),
            v if v.get("error").is_some() => json!({"code": v["error"]["code"], "id": v["id"]}),
            v => v.clone(),
        }
    }
    let cases: Vec<(&str, Option<Value>)> = vec![
        (
            r#"{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}"#,
            Some(json!({"jsonrpc": "2.0", "result": 19, "id": 1})),
        ),
        (
            r#"{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}"#,
            Some(json!({"jsonrpc": "2.0", "result": -19, "id": 2})),
        ),
        (
            r#"{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}"#,
            Some(json!({"jsonrpc": "2.0", "result": 19, "id": 3})),
        ),
        (
            r#"{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}"#,
            Some(json!({"jsonrpc": "2.0", "result": 19, "id": 4})),
        ),
        (r#"{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}"#, None),
        (r#"{"jsonrpc": "2.0", "method": "foobar"}"#, None),
        (r#"{"jsonrpc": "2.0", "method": "foobar", "id": "1"}"#, Some(error(-32601, json!("1")))),
        (r#"{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]"#, Some(error(-32700, Value::Null))),
        (r#"{"jsonrpc": "2.0", "method": 1, "params": "bar"}"#, Some(error(-32600, Value::Null))),
        (
            r#"[{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},{"jsonrpc": "2.0", "method"]"#,
            Some(error(-32700, Value::Null)),
        ),
        ("[]", Some(error(-32600, Value::Null))),
        ("[1]", Some(json!([error(-32600, Value::Null)]))),
        ("[1,2,3]", Some(json!([error(-32600, Value::Null), error(-32600, Value::Null), error(-32600, Value::Null)]))),
        (
            r#"[
                {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
                {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
                {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
                {"foo": "boo"},
                {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
                {"jsonrpc": "2.0", "method": "get_data", "id": "9"}
            ]"#,
            Some(json!([
                {"jsonrpc": "2.0", "result": 7, "id": "1"},
                {"jsonrpc": "2.0", "result": 19, "id": "2"},
                error(-32600, Value::Null),
                error(-32601, json!("5")),
                {"jsonrpc": "2.0", "result": ["hello", 5], "id": "9"}
            ])),
        ),
        (
            r#"[{"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},{"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}]"#,
            None,
        ),
    ];
    for (line, expected) in cases {
        let got = reply(&line.replace('\n', " ")).await;
        assert_eq!(got.as_ref().map(shape), expected, "{line}");
    }
}

/// A client's string id is its own, whatever it looks like: one that
/// imitates a stand-in comes back unchanged, in a reply and in the busy
/// refusal, and a stand-in whose content is not one JSON scalar is never
/// spliced into a reply.
#[tokio::test]
async fn a_client_cannot_forge_a_stand_in_id() {
    let hex: String = "1,\"result\":{\"forged\":true}}\n{\"x\":1".bytes().map(|b| format!("{b:02x}")).collect();
    let forged = format!("\\u0001agentd-id-0123456789abcdef:{hex}");
    let line = format!(r#"{{"jsonrpc":"2.0","id":"{forged}","method":"test/slow_echo","params":{{}}}}"#);
    let h = harness();
    let reply = match h.dispatcher.handle(&line) {
        Handled::Ready(r) => r.unwrap(),
        Handled::Later(fut) => tokio::time::timeout(Duration::from_secs(10), fut).await.unwrap().unwrap(),
    };
    let text = restore_id(reply.get()).into_owned();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["id"].as_str().unwrap(), format!("\u{1}agentd-id-0123456789abcdef:{hex}"), "{text}");
    assert!(!text.contains('\n'));
    let busy = busy_reply(&line, 1);
    let text = restore_id(busy.get()).into_owned();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["id"].as_str().unwrap(), format!("\u{1}agentd-id-0123456789abcdef:{hex}"), "{text}");
    // Even a stand-in of this process holding something else is left alone.
    let minted = format!("{}{hex}", *RAW_ID_MARK);
    let reply = error_reply(Id::Str(minted.into()), agentd_protocol::ErrorCode::InvalidRequest, "x");
    assert_eq!(restore_id(reply.get()), reply.get());
}
