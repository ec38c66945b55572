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
        let revoke = listed.files.iter().map(|f| f.path.clone()).collect();
        let result = client.call::<WorkspaceTrust>(WorkspaceTrustParams { cwd, revoke, ..Default::default() }).await?;
        if json {
            print_json(&result);
        } else {
            println!("withdrawn: {} file(s) of {} wait for approval again", result.files.len(), result.cwd.display());
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
            println!("nothing waits: {} project file(s) of {}, all trusted", listed.files.len(), listed.cwd.display());
        }
        return Ok(());
    }
    if !json || !yes {
        for f in &waiting {
            let standing = if f.standing == TrustStanding::New { "new" } else { "changed since approved" };
            eprintln!("── {} ({:?}, {standing}, {} bytes, sha256 {})", f.path.display(), f.kind, f.bytes, f.sha256);
            for line in f.text.as_deref().unwrap_or("").lines() {
                eprintln!("   {line}");
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
            eprintln!("not trusted: sessions on {} do not obey them", listed.cwd.display());
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
