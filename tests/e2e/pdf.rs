//! Read of PDF files through the socket: their text page by page (whole
//! for a short one, by `pages` for a long one), as Claude Code 2.1 takes
//! `pages`, and every bad PDF — malformed, encrypted, a zip bomb, too
//! large — a clear error within the Read budget, the daemon unharmed.

use std::path::Path;
use std::time::{Duration, Instant};

use agentd_tests::{RawConn, TestDaemon};
use lopdf::content::{Content, Operation};
use lopdf::{Document, Object, Stream, dictionary};
use serde_json::{Value, json};

/// A PDF of `pages` pages, page N saying "Page N hello" (page 3 of a
/// longer one has no text), with `extra` as one more page's raw content.
fn pdf(pages: u32, extra: Option<Vec<u8>>) -> Document {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica", "Encoding" => "WinAnsiEncoding",
    });
    let resources = doc.add_object(dictionary! { "Font" => dictionary! { "F1" => font } });
    let mut kids: Vec<Object> = Vec::new();
    let mut contents: Vec<Vec<u8>> = (1..=pages)
        .map(|i| {
            let mut ops = vec![Operation::new("BT", vec![]), Operation::new("Tf", vec!["F1".into(), 24.into()])];
            if !(pages > 3 && i == 3) {
                ops.push(Operation::new("Td", vec![72.into(), 720.into()]));
                ops.push(Operation::new("Tj", vec![Object::string_literal(format!("Page {i} hello"))]));
            }
            ops.push(Operation::new("ET", vec![]));
            Content { operations: ops }.encode().unwrap()
        })
        .collect();
    contents.extend(extra);
    for content in contents {
        let mut stream = Stream::new(dictionary! {}, content);
        let _ = stream.compress();
        let content_id = doc.add_object(stream);
        let page = doc.add_object(dictionary! { "Type" => "Page", "Parent" => pages_id, "Contents" => content_id });
        kids.push(page.into());
    }
    let count = kids.len() as i64;
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages", "Kids" => kids, "Count" => count, "Resources" => resources,
            "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
        }),
    );
    let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog);
    doc
}

fn save(doc: &mut Document, path: &Path) {
    let mut bytes = Vec::new();
    doc.save_to(&mut bytes).unwrap();
    std::fs::write(path, bytes).unwrap();
}

async fn read(c: &mut RawConn, id: &str, input: Value) -> (bool, String) {
    let started = Instant::now();
    let r = c.tool(id, "Read", input.clone()).await;
    // Every PDF, however bad, answers within the reader's wall-clock limit
    // (15 s) and some slack for a loaded machine.
    assert!(started.elapsed() < Duration::from_secs(60), "{input}: took {:?}", started.elapsed());
    (r["is_error"] == true, r["content"][0]["text"].as_str().unwrap_or_default().to_owned())
}

#[tokio::test]
async fn a_pdf_is_read_as_its_text_page_by_page() {
    let d = TestDaemon::start().await;
    let ws = std::fs::canonicalize(d.dir.path()).unwrap();
    save(&mut pdf(3, None), &ws.join("short.pdf"));
    save(&mut pdf(12, None), &ws.join("long.pdf"));
    let mut c = d.raw().await;
    let id = c.session(json!({ "cwd": ws })).await;

    // A short PDF whole.
    let (err, text) = read(&mut c, &id, json!({ "file_path": "short.pdf" })).await;
    assert!(!err, "{text}");
    assert!(text.contains("PDF file read:") && text.contains("3 page(s)"), "{text}");
    for page in 1..=3 {
        assert!(text.contains(&format!("--- Page {page} ---\nPage {page} hello")), "{text}");
    }
    // One page of it, and a range running past its end.
    let (err, text) = read(&mut c, &id, json!({ "file_path": "short.pdf", "pages": "2" })).await;
    assert!(!err && text.contains("Page 2 hello") && !text.contains("Page 1 hello"), "{text}");
    let (err, text) = read(&mut c, &id, json!({ "file_path": "short.pdf", "pages": "2-9" })).await;
    assert!(!err && text.contains("Page 3 hello") && text.contains("the PDF has 3 pages"), "{text}");

    // A long one needs pages; a page without text says so.
    let (err, text) = read(&mut c, &id, json!({ "file_path": "long.pdf" })).await;
    assert!(err && text.contains("This PDF has 12 pages, which is too many to read at once"), "{text}");
    let (err, text) = read(&mut c, &id, json!({ "file_path": "long.pdf", "pages": "3-4" })).await;
    assert!(!err && text.contains("--- Page 3 ---\n[no text on this page") && text.contains("Page 4 hello"), "{text}");
    for (pages, needle) in [
        ("13-14", "Requested pages 13-14 is outside the document (PDF has 12 pages)"),
        ("1-21", "exceeds maximum of 20 pages"),
        ("5-", "exceeds maximum of 20 pages"),
        ("1,3", "Invalid pages parameter"),
        ("0", "Invalid pages parameter"),
    ] {
        let (err, text) = read(&mut c, &id, json!({ "file_path": "long.pdf", "pages": pages })).await;
        assert!(err && text.contains(needle), "{pages}: {text}");
    }
    // A text file that mentions the header is text (it can be edited).
    std::fs::write(ws.join("magic.py"), "PDF_MAGIC = b\"%PDF-\"\n").unwrap();
    let (err, text) = read(&mut c, &id, json!({ "file_path": "magic.py" })).await;
    assert!(!err && text.contains("PDF_MAGIC"), "{text}");
    // A page with more text than a Read returns: cut within it, saying so.
    let big = Content {
        operations: vec![
            Operation::new("BT", vec![]),
            Operation::new("Tf", vec!["F1".into(), 12.into()]),
            Operation::new("Tj", vec![Object::string_literal("A".repeat(3_000_000))]),
            Operation::new("ET", vec![]),
        ],
    };
    save(&mut pdf(1, Some(big.encode().unwrap())), &ws.join("wordy.pdf"));
    let (err, text) = read(&mut c, &id, json!({ "file_path": "wordy.pdf", "pages": "2" })).await;
    assert!(
        !err && text.contains("--- Page 2 ---\nAAAA") && text.contains("cut at 2 MiB, within page 2"),
        "{}",
        &text[..200]
    );
    assert!(text.len() < 2 * 1024 * 1024 + 4096, "{}", text.len());
    // `pages` on a text file changes nothing (as in Claude Code).
    std::fs::write(ws.join("notes.txt"), "just text\n").unwrap();
    let (err, text) = read(&mut c, &id, json!({ "file_path": "notes.txt", "pages": "1" })).await;
    assert!(!err && text.contains("just text"), "{text}");
}

#[tokio::test]
async fn a_bad_pdf_is_a_clear_error_and_harms_nothing() {
    let d = TestDaemon::start().await;
    let ws = std::fs::canonicalize(d.dir.path()).unwrap();
    std::fs::write(ws.join("garbage.pdf"), b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 9 0 R >>\ngarbage").unwrap();
    let mut truncated = Vec::new();
    pdf(3, None).save_to(&mut truncated).unwrap();
    truncated.truncate(truncated.len() / 2);
    std::fs::write(ws.join("truncated.pdf"), truncated).unwrap();
    // A page whose content inflates to 40 MiB (a zip bomb).
    save(&mut pdf(1, Some(vec![b' '; 40 * 1024 * 1024])), &ws.join("bomb.pdf"));
    // Encrypted with a user password.
    let mut locked = pdf(2, None);
    locked
        .trailer
        .set("ID", vec![Object::string_literal("0123456789abcdef"), Object::string_literal("0123456789abcdef")]);
    let state = lopdf::EncryptionState::try_from(lopdf::EncryptionVersion::V2 {
        document: &locked,
        owner_password: "owner",
        user_password: "secret",
        key_length: 128,
        permissions: lopdf::Permissions::all(),
    })
    .unwrap();
    locked.encrypt(&state).unwrap();
    save(&mut locked, &ws.join("locked.pdf"));
    // Larger than Read takes.
    let mut huge = b"%PDF-1.4\n".to_vec();
    huge.resize(33 * 1024 * 1024, b' ');
    std::fs::write(ws.join("huge.pdf"), huge).unwrap();

    let mut c = d.raw().await;
    let id = c.session(json!({ "cwd": ws })).await;
    for (file, needle) in [
        ("garbage.pdf", "corrupted or invalid"),
        ("truncated.pdf", "corrupted or invalid"),
        ("locked.pdf", "password-protected"),
        ("huge.pdf", "more than the 32.0 MB Read takes"),
    ] {
        let (err, text) = read(&mut c, &id, json!({ "file_path": file })).await;
        assert!(err && text.contains(needle), "{file}: {text}");
    }
    // The bomb's page is refused on its own; the page before it reads.
    let (err, text) = read(&mut c, &id, json!({ "file_path": "bomb.pdf" })).await;
    assert!(!err && text.contains("Page 1 hello"), "{text}");
    assert!(text.contains("--- Page 2 ---\n[the text of this page could not be extracted"), "{text}");
    // The daemon is unharmed and no reader is left running.
    let (err, text) = read(&mut c, &id, json!({ "file_path": "locked.pdf", "pages": "1" })).await;
    assert!(err && text.contains("password-protected"), "{text}");
    // This daemon's (it runs in this process): other tests read PDFs too.
    let me = std::process::id().to_string();
    let out = std::process::Command::new("pgrep").args(["-P", &me, "-f", "pdf-text"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).trim().is_empty(), "a PDF reader is left");
}
