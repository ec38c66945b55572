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
