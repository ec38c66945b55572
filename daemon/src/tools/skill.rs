//! Skill: the model loads a skill's instructions. Skills are Claude Code's
//! `SKILL.md` files: `<workspace>/.claude/skills/<name>/SKILL.md` and
//! `~/.claude/skills/<name>/SKILL.md`, with YAML front matter naming the
//! skill (`name`) and saying when to use it (`description`). The tool's
//! description lists the skills a session has (found when it opens; the
//! workspace's win over the user's of the same name); a call returns the
//! skill's instructions and its directory, so the model can read the
//! files beside them. Without skills the tool is not offered.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::permission::Decision;
use crate::tool::{
    DynTool, ExternalToolSource, ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError,
};

/// Most skills a session lists.
const MAX_SKILLS: usize = 100;
/// Largest SKILL.md read.
const MAX_SKILL_BYTES: u64 = 256 * 1024;
/// Longest description listed, in characters.
const MAX_DESCRIPTION: usize = 300;

/// One skill found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillDef {
    /// Its name (what `skill` takes).
    pub name: String,
    /// When to use it.
    pub description: String,
    /// Its directory.
    pub dir: PathBuf,
    /// `project` or `user`.
    pub source: &'static str,
    /// A workspace's skill: the SHA-256 of the content the user approved;
    /// a call reads it again and refuses other content.
    pub approved: Option<String>,
}

use crate::definitions::{contained, read_definition, valid_name};

/// The skills of a workspace and the user, and what could not be read
/// (files outside their skills directory, or that `rules` deny reading,
/// are left out).
/// The workspace's own count only as `trust` approved them.
pub fn discover(
    cwd: &Path,
    rules: &crate::permission::rules::RuleSet,
    trust: &crate::trust::TrustStore,
) -> (Vec<SkillDef>, Vec<String>) {
    let home = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute());
    // The home directory's are the user's own (read below as theirs).
    let mut roots = vec![(cwd.join(".claude/skills"), "project")];
    if crate::trust::is_home(cwd) {
        roots.clear();
    }
    if let Some(home) = home {
        roots.push((home.join(".claude/skills"), "user"));
    }
    let (mut skills, mut errors): (Vec<SkillDef>, Vec<String>) = (Vec::new(), Vec::new());
    for (root, source) in roots {
        let Ok(entries) = std::fs::read_dir(&root) else { continue };
        let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
        dirs.sort();
        for dir in dirs {
            let file = dir.join("SKILL.md");
            if std::fs::metadata(&file).is_err() {
                continue;
            }
            let shown = file.display();
            let project = source == "project";
            let read = read_definition(&root, &file, rules, MAX_SKILL_BYTES, project.then_some(trust)).and_then(|d| {
                let dir =
                    contained(&root, &dir).ok_or_else(|| format!("leads outside {}; left out", root.display()))?;
                Ok((dir, d.pairs, project.then_some(d.sha256)))
            });
            let (dir, pairs, approved) = match read {
                Ok(x) => x,
                Err(why) => {
                    errors.push(format!("{shown}: {why}"));
                    continue;
                }
            };
            let get = |k: &str| pairs.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
            let dir_name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let name = get("name").unwrap_or(dir_name);
            if !valid_name(&name) {
                errors.push(format!("{shown}: the name {name:?} is not letters, digits, '-', '_', '.' or ':'"));
                continue;
            }
            let Some(description) = get("description").filter(|d| !d.trim().is_empty()) else {
                errors.push(format!("{shown}: no description in the front matter"));
                continue;
            };
            if skills.iter().any(|s| s.name == name) {
                continue;
            }
            if skills.len() >= MAX_SKILLS {
                errors.push(format!("{shown}: more than {MAX_SKILLS} skills; not listed"));
                continue;
            }
            skills.push(SkillDef {
                name,
                description: description.chars().take(MAX_DESCRIPTION).collect(),
                dir,
                source,
                approved,
            });
        }
    }
    (skills, errors)
}

/// The session's skills as a tool source: the Skill tool, when there are
/// skills.
pub struct SkillSource {
    tools: Vec<Arc<dyn DynTool>>,
    identity: String,
}

impl SkillSource {
    /// A source for `skills`.
    pub fn new(skills: Vec<SkillDef>) -> Self {
        let identity = skills.iter().map(|s| format!("{}={}:{}", s.name, s.dir.display(), s.description)).collect();
        let tools = if skills.is_empty() {
            Vec::new()
        } else {
            vec![Arc::new(crate::tool::erased::Erased::new(SkillTool { skills: Arc::new(skills) })) as Arc<dyn DynTool>]
        };
        SkillSource { tools, identity }
    }

    /// What sets this source apart (sessions with the same skills share a
    /// tool set).
    pub fn identity(&self) -> &str {
        &self.identity
    }
}

impl ExternalToolSource for SkillSource {
    fn source_name(&self) -> &str {
        "skills"
    }

    fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        self.tools.clone()
    }
}

/// The Skill tool, with the skills it offers.
#[derive(Debug, Clone)]
pub struct SkillTool {
    skills: Arc<Vec<SkillDef>>,
}

/// Input of Skill.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillInput {
    /// The skill name. E.g., "pdf" or "commit"
    pub skill: String,
    /// Optional arguments for the skill
    #[serde(default)]
    pub args: Option<String>,
}

/// A loaded skill.
#[derive(Debug, Clone, Serialize)]
pub struct SkillOutput {
    /// Its name.
    pub name: String,
    /// Its directory.
    pub dir: PathBuf,
    /// Its instructions (SKILL.md without the front matter).
    pub instructions: String,
    /// The arguments given.
    pub args: Option<String>,
}

impl SkillTool {
    fn find(&self, name: &str) -> Option<&SkillDef> {
        self.skills.iter().find(|s| s.name == name)
    }
}

/// Other names the Skill tool answers to.
pub const ALIASES: &[&str] = &["SlashCommand"];

impl Tool for SkillTool {
    type Input = SkillInput;
    type Output = SkillOutput;

    const NAME: &'static str = "Skill";
    const CONCURRENCY_SAFE: bool = true;

    /// Claude Code's older name for it.
    fn aliases(&self) -> &'static [&'static str] {
        ALIASES
    }

    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::READ_ONLY;

    fn description(&self) -> String {
        let mut text = String::from(
            "Loads a skill: instructions (and files beside them) for a kind of task. When a task matches a \
             skill's description, call this first with the skill's name and follow what it returns.\n\n\
             Available skills:\n",
        );
        for s in self.skills.iter() {
            text.push_str(&format!("- {}: {}\n", s.name, s.description));
        }
        text
    }

    fn validate_input(&self, input: &SkillInput, _ctx: &ToolContext) -> Result<(), ValidationError> {
        let name = input.skill.trim().trim_start_matches('/');
        if !valid_name(name) {
            return Err(ValidationError::new(format!("{:?} is not a skill name", input.skill)));
        }
        if self.find(name).is_none() {
            let names: Vec<&str> = self.skills.iter().map(|s| s.name.as_str()).collect();
            return Err(ValidationError::new(format!("no skill {name:?}; the skills are: {}", names.join(", "))));
        }
        Ok(())
    }

    fn check_permissions(&self, _input: &SkillInput, _ctx: &ToolContext) -> Decision {
        // Only files the user or the workspace put there as skills.
        Decision::Allow
    }

    async fn call(
        &self,
        input: SkillInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<SkillOutput>, ToolError> {
        let name = input.skill.trim().trim_start_matches('/');
        let def = self.find(name).ok_or_else(|| ToolError::new(format!("no skill {name:?}")))?;
        // Still where it was found, and still readable for this session.
        let file = def.dir.join("SKILL.md");
        let read = read_definition(&def.dir, &file, &ctx.rules, MAX_SKILL_BYTES, None)
            .map_err(|why| ToolError::new(format!("{}: {why}", file.display())))?;
        if def.approved.as_ref().is_some_and(|sha| *sha != read.sha256) {
            return Err(ToolError::new(format!(
                "{}: changed since the session opened, and the user has not approved the new content (approve it \
                 with `agentctl trust`, then open a new session)",
                file.display()
            )));
        }
        let body = read.body;
        Ok(ToolOutput::new(SkillOutput {
            name: def.name.clone(),
            dir: def.dir.clone(),
            instructions: body,
            args: input.args.filter(|a| !a.trim().is_empty()),
        }))
    }

    fn result_content(&self, out: &SkillOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        let mut text = format!(
            "Skill {} (its files are in {}; read them as the instructions say):\n\n{}",
            out.name,
            out.dir.display(),
            out.instructions
        );
        if let Some(args) = &out.args {
            text.push_str(&format!("\n\nARGUMENTS: {args}"));
        }
        vec![agentd_protocol::tools::ContentBlock::text(text)]
    }

    fn render_use(&self, input: &SkillInput) -> String {
        format!("Skill {}", input.skill)
    }

    fn render_result(&self, out: &SkillOutput) -> String {
        format!("loaded {}", out.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_is_read_and_bad_ones_are_reported() {
        use crate::definitions::front_matter;
        let (pairs, body) =
            front_matter("---\nname: pdf\ndescription: \"Fill PDF forms: any kind\"\n---\n# Steps\n").unwrap();
        assert_eq!(pairs, [("name".into(), "pdf".into()), ("description".into(), "Fill PDF forms: any kind".into())]);
        assert_eq!(body, "# Steps\n");
        assert!(front_matter("# no front matter").is_err());
        assert!(front_matter("---\nname: x\n").unwrap_err().contains("not closed"));
        assert!(front_matter("---\njust words\n---\n").unwrap_err().contains("key: value"));
        for bad in ["../x", "a/b", ".hidden", "", "a b"] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }
}
