//! AskUserQuestion: the model asks the user multiple-choice questions. The
//! questions go to the client as a `permission/request` (tool
//! `AskUserQuestion`, the questions in `input`); the client answers with
//! `permission/respond {decision: allow, answers: {question: answer}}`.
//! It always asks, in every mode, and no rule can answer for the user.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::permission::Decision;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// The tool's name, which the executor always asks about.
pub const NAME: &str = "AskUserQuestion";

/// The AskUserQuestion tool.
#[derive(Debug, Clone, Copy)]
pub struct AskUserQuestion;

/// One choice of a question.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuestionOption {
    /// The choice, in 1 to 5 words.
    pub label: String,
    /// What choosing it means or leads to.
    #[serde(default)]
    #[schemars(extend("x-required" = true))]
    pub description: String,
    /// Content shown while the choice is focused (a mockup, a snippet),
    /// for a client that can show it (`markdown` in Claude Code 2.1.45).
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "markdown")]
    #[schemars(extend("x-aliases" = ["markdown"]))]
    pub preview: Option<String>,
}

/// One question.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Question {
    /// The whole question, ending with a question mark.
    pub question: String,
    /// A short label for it (at most 12 characters), e.g. "Database".
    #[serde(default)]
    #[schemars(extend("x-required" = true))]
    pub header: String,
    /// 2 to 4 choices; the user may also answer in their own words.
    pub options: Vec<QuestionOption>,
    /// The user may pick more than one choice.
    #[serde(default, deserialize_with = "crate::tool::input::flag", rename = "multiSelect", alias = "multi_select")]
    #[schemars(extend("x-aliases" = ["multi_select"]))]
    #[schemars(extend("x-required" = true))]
    pub multi_select: bool,
}

/// Input of AskUserQuestion.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskUserQuestionInput {
    /// 1 to 4 questions.
    pub questions: Vec<Question>,
    /// Claude Code's own prompt's (ignored: the user answers through the
    /// client).
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    #[expect(dead_code, reason = "accepted from the model, never used")]
    pub answers: Option<serde_json::Value>,
    /// Claude Code 2.1's per-question notes and previews (ignored).
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    #[expect(dead_code, reason = "accepted from the model, never used")]
    pub annotations: Option<serde_json::Value>,
    /// Claude Code 2.1's `{source}` (ignored).
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    #[expect(dead_code, reason = "accepted from the model, never used")]
    pub metadata: Option<serde_json::Value>,
}

/// The user's answers.
#[derive(Debug, Clone, Serialize)]
pub struct AskUserQuestionOutput {
    /// Question text → answer.
    pub answers: BTreeMap<String, String>,
}

impl Tool for AskUserQuestion {
    type Input = AskUserQuestionInput;
    type Output = AskUserQuestionOutput;

    const NAME: &'static str = NAME;
    const KIND: crate::tool::ToolKind = crate::tool::ToolKind::Question;

    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::READ_ONLY;

    fn description(&self) -> String {
        "Asks the user 1 to 4 multiple-choice questions and waits for the answers. Use it when a choice \
         is the user's to make (a library, an approach, what a vague request means) rather than guessing; \
         give 2 to 4 distinct options per question. The user can always answer in their own words."
            .to_owned()
    }

    fn validate_input(&self, input: &AskUserQuestionInput, _ctx: &ToolContext) -> Result<(), ValidationError> {
        if !(1..=4).contains(&input.questions.len()) {
            return Err(ValidationError::new(format!("ask 1 to 4 questions, not {}", input.questions.len())));
        }
        let mut seen = std::collections::HashSet::new();
        for (i, q) in input.questions.iter().enumerate() {
            if q.question.trim().is_empty() {
                return Err(ValidationError::new(format!("question {i} is empty")));
            }
            if !seen.insert(q.question.trim()) {
                return Err(ValidationError::new(format!("question {i} repeats an earlier one")));
            }
            if !(2..=4).contains(&q.options.len()) {
                return Err(ValidationError::new(format!(
                    "question {i} needs 2 to 4 options, not {}",
                    q.options.len()
                )));
            }
            if q.options.iter().any(|o| o.label.trim().is_empty()) {
                return Err(ValidationError::new(format!("question {i} has an option without a label")));
            }
        }
        Ok(())
    }

    fn check_permissions(&self, input: &AskUserQuestionInput, _ctx: &ToolContext) -> Decision {
        let first = input.questions.first().map(|q| q.question.as_str()).unwrap_or_default();
        Decision::ask(format!("the model asks: {first}"))
    }

    async fn call(
        &self,
        input: AskUserQuestionInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<AskUserQuestionOutput>, ToolError> {
        let given = ctx.grant.answers.as_deref().cloned().unwrap_or_default();
        let mut answers = BTreeMap::new();
        for q in &input.questions {
            let answer = given.get(&q.question).or_else(|| given.get(q.question.trim())).map(|a| a.trim());
            match answer {
                Some(a) if !a.is_empty() => answers.insert(q.question.clone(), a.to_owned()),
                _ => return Err(ToolError::new(format!("the user did not answer {:?}", q.question))),
            };
        }
        Ok(ToolOutput::new(AskUserQuestionOutput { answers }))
    }

    fn result_content(&self, out: &AskUserQuestionOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        let mut text = String::from("The user answered your questions:\n");
        for (q, a) in &out.answers {
            text.push_str(&format!("- {q} → {a}\n"));
        }
        text.push_str("Go on with these answers in mind.");
        vec![agentd_protocol::tools::ContentBlock::text(text)]
    }

    fn render_use(&self, input: &AskUserQuestionInput) -> String {
        match input.questions.as_slice() {
            [one] => format!("Asking: {}", one.question),
            many => format!("Asking {} questions", many.len()),
        }
    }

    fn render_result(&self, out: &AskUserQuestionOutput) -> String {
        format!("{} answered", out.answers.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Claude Code 2.1.45 named an option's preview `markdown`.
    #[test]
    fn an_options_markdown_is_its_preview() {
        let option: QuestionOption =
            serde_json::from_value(serde_json::json!({"label": "A", "description": "d", "markdown": "```\nx\n```"}))
                .unwrap();
        assert_eq!(option.preview.as_deref(), Some("```\nx\n```"));
        let schema =
            crate::tool::input::model_schema(serde_json::to_value(schemars::schema_for!(QuestionOption)).unwrap());
        assert!(schema["properties"].get("markdown").is_some(), "{schema}");
    }
}
