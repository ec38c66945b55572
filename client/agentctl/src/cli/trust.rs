//! `agentctl trust [DIR]`: what a workspace holds that agentd obeys only
//! once the user approved its content (settings, `.mcp.json`, skills,
//! agent definitions), shown whole and approved or withdrawn.

use super::{Asker, Failure, print_json};
use agentd_client::Client;
use agentd_client::protocol::methods::WorkspaceTrust;
use agentd_client::protocol::workspace::{TrustApproval, TrustStanding, WorkspaceTrustParams};

/// `agentctl trust [DIR] [--yes] [--revoke]`.
pub(super) async fn trust(
    client: &Client,
    json: bool,
    cwd: std::path::PathBuf,
    yes: bool,
    revoke: bool,
) -> Result<(), Failure> {
    let listed = client.call::<WorkspaceTrust>(WorkspaceTrustParams { cwd: cwd.clone(), ..Default::default() }).await?;
    if revoke {
        let revoke = vec![listed.cwd.clone()];
        let result = client.call::<WorkspaceTrust>(WorkspaceTrustParams { cwd, revoke, ..Default::default() }).await?;
        if json {
            print_json(&result);
        } else {
            println!(
                "withdrawn: every approval of a file under {} ({} there now wait again)",
                visible(&result.cwd.display().to_string()),
                result.files.len()
            );
        }
        return Ok(());
    }
    let waiting: Vec<_> = listed.files.iter().filter(|f| f.standing != TrustStanding::Trusted).collect();
    if waiting.is_empty() {
        if json {
            print_json(&listed);
        } else if listed.trust_all {
            println!("the daemon trusts every project file (--trust-project-files)");
        } else {
            let cwd = visible(&listed.cwd.display().to_string());
            println!("nothing waits: {} project file(s) of {cwd}, all trusted", listed.files.len());
        }
        return Ok(());
    }
    if !json || !yes {
        for f in &waiting {
            let standing = if f.standing == TrustStanding::New { "new" } else { "changed since approved" };
            let path = visible(&f.path.display().to_string());
            eprintln!("── {path} ({:?}, {standing}, {} bytes, sha256 {})", f.kind, f.bytes, f.sha256);
            for line in f.text.as_deref().unwrap_or("").split('\n') {
                eprintln!("   {}", visible(line));
            }
            if f.bytes > 64 * 1024 {
                eprintln!("   … (only the first 64 KiB shown)");
            }
        }
    }
    if !yes {
        let Some(asker) = Asker::find(false) else {
            return Err(Failure::Usage(
                "nobody to ask (no terminal): pass --yes to trust these files as they are".into(),
            ));
        };
        let question = format!("Trust these {} file(s) as shown? [y/N] ", waiting.len());
        if !asker.yes_no(&question) {
            eprintln!("not trusted: sessions on {} do not obey them", visible(&listed.cwd.display().to_string()));
            return Ok(());
        }
    }
    let approve = waiting.iter().map(|f| TrustApproval { path: f.path.clone(), sha256: f.sha256.clone() }).collect();
    let result = client.call::<WorkspaceTrust>(WorkspaceTrustParams { cwd, approve, ..Default::default() }).await?;
    if json {
        print_json(&result);
    } else {
        println!("trusted: {} file(s); sessions created from now on obey them", waiting.len());
    }
    Ok(())
}

/// `text` as the terminal must show it for the user to see what they
/// approve: control characters (a carriage return that overwrites a line,
/// an escape sequence that clears the screen), C1 controls and the
/// direction overrides are written as `\u{…}` escapes, never sent.
pub(super) fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let hidden = (c.is_control() && c != '\t')
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}');
        if hidden {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn what_would_hide_content_is_shown_escaped() {
        assert_eq!(super::visible("a\rb\x1b[2J\u{202e}c\td"), "a\\u{d}b\\u{1b}[2J\\u{202e}c\td");
        assert_eq!(super::visible("plain é"), "plain é");
    }
}
