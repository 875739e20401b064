//! `milpa resources`, `milpa prompts`, `milpa read URI` and `milpa prompt NAME`: the
//! registry's resources and prompts from the command line, read and rendered through the
//! same gates as `milpa call` (and audited the same way).

use std::collections::BTreeMap;

use milpa::catalog::{AccessRefusal, PromptContent, ResourceContents};
use milpa::{ToolContext, ToolRegistry};
use milpa_mcp::catalog_mapping::{
    contents_json, prompt_json, prompt_reply_json, resource_json, template_json,
};
use serde_json::{Value, json};

use crate::cli::{PromptArgs, ReadArgs};
use crate::terminal_output::{emit, print_json, printable, printable_lines, table};
use crate::{CliError, EXIT_CALL_FAILED, EXIT_OK};

/// `milpa resources`: the resources and templates, as a table or as JSON.
pub(crate) fn list_resources(registry: &ToolRegistry, json: bool) -> Result<u8, CliError> {
    let catalog = registry.catalog_snapshot();
    if json {
        print_json(&json!({
            "resources": catalog.resources().map(resource_json).collect::<Vec<_>>(),
            "resourceTemplates": catalog.templates().map(template_json).collect::<Vec<_>>(),
        }))?;
        return Ok(EXIT_OK);
    }
    let mut rows: Vec<Vec<String>> = catalog
        .resources()
        .map(|r| {
            vec![
                r.uri().to_owned(),
                r.mime_type().unwrap_or("-").to_owned(),
                scopes(r.scopes()),
                r.description().unwrap_or("").to_owned(),
            ]
        })
        .collect();
    rows.extend(catalog.templates().map(|t| {
        vec![
            t.template().as_str().to_owned(),
            t.mime_type().unwrap_or("-").to_owned(),
            scopes(t.scopes()),
            t.description().unwrap_or("(template)").to_owned(),
        ]
    }));
    if rows.is_empty() {
        emit("No resources. Declare them with [[resources]] in the manifest.\n");
    } else {
        emit(&table(&["URI", "TYPE", "SCOPES", "DESCRIPTION"], &rows));
    }
    Ok(EXIT_OK)
}

/// `milpa prompts`: the prompts, as a table or as JSON.
pub(crate) fn list_prompts(registry: &ToolRegistry, json: bool) -> Result<u8, CliError> {
    let catalog = registry.catalog_snapshot();
    if json {
        print_json(&json!({"prompts": catalog.prompts().map(prompt_json).collect::<Vec<_>>()}))?;
        return Ok(EXIT_OK);
    }
    let rows: Vec<Vec<String>> = catalog
        .prompts()
        .map(|p| {
            let arguments: Vec<String> = p
                .arguments()
                .iter()
                .map(|a| {
                    if a.is_required() {
                        a.name().to_owned()
                    } else {
                        format!("[{}]", a.name())
                    }
                })
                .collect();
            vec![
                p.name().to_owned(),
                arguments.join(" "),
                scopes(p.scopes()),
                p.description().to_owned(),
            ]
        })
        .collect();
    if rows.is_empty() {
        emit("No prompts. Declare them with [[prompts]] in the manifest.\n");
    } else {
        emit(&table(
            &["NAME", "ARGUMENTS", "SCOPES", "DESCRIPTION"],
            &rows,
        ));
    }
    Ok(EXIT_OK)
}

fn scopes(scopes: &[String]) -> String {
    if scopes.is_empty() {
        "-".to_owned()
    } else {
        scopes.join(",")
    }
}

/// A refusal as the command prints it: on standard error (or as JSON), exit 1; exit 3
/// when it waits for a person's approval (nothing was read, as `milpa call` says of a
/// parked call).
fn refused(refusal: &AccessRefusal, json: bool) -> Result<u8, CliError> {
    if json {
        let mut printed = json!({
            "success": false,
            "error": refusal.message(),
            "code": refusal.code().as_str(),
        });
        if let Some(id) = refusal.approval_id() {
            printed["approval_id"] = json!(id);
        }
        print_json(&printed)?;
    } else {
        eprintln!(
            "milpa: {} ({})",
            printable(refusal.message()),
            refusal.code().as_str()
        );
    }
    if refusal.code() == &milpa::ErrorCode::ApprovalPending {
        return Ok(crate::EXIT_NOT_RUN);
    }
    Ok(EXIT_CALL_FAILED)
}

/// `milpa read URI`: the contents (text as it is, a blob described), or the refusal.
pub(crate) async fn read(
    registry: &ToolRegistry,
    ctx: &ToolContext,
    args: &ReadArgs,
) -> Result<u8, CliError> {
    let contents = match registry.read_resource(&args.uri, ctx).await {
        Ok(contents) => contents,
        Err(refusal) => return refused(&refusal, args.json),
    };
    if args.json {
        print_json(&json!({"contents": contents.iter().map(contents_json).collect::<Vec<_>>()}))?;
        return Ok(EXIT_OK);
    }
    for piece in &contents {
        match piece {
            ResourceContents::Text { text, .. } => {
                emit(&printable_lines(text));
                if !text.ends_with('\n') {
                    emit("\n");
                }
            }
            ResourceContents::Blob {
                mime_type, blob, ..
            } => emit(&format!(
                "({} bytes of {}, base64; use --json to get them)\n",
                blob.len() / 4 * 3,
                mime_type.as_deref().unwrap_or("binary data")
            )),
            _ => emit("(contents of a kind this command does not show; use --json)\n"),
        }
    }
    Ok(EXIT_OK)
}

/// Parses a prompt's ARGS_JSON: an object of strings (default `{}`).
fn prompt_arguments(text: Option<&str>) -> Result<BTreeMap<String, String>, CliError> {
    let Some(text) = text else {
        return Ok(BTreeMap::new());
    };
    serde_json::from_str::<BTreeMap<String, String>>(text).map_err(|error| {
        CliError::usage(format!(
            "ARGS_JSON must be a JSON object of strings ({error}), e.g. '{{\"diff\": \"...\"}}'"
        ))
    })
}

/// `milpa prompt NAME [ARGS_JSON]`: the rendered messages, or the refusal.
pub(crate) async fn prompt(
    registry: &ToolRegistry,
    ctx: &ToolContext,
    args: &PromptArgs,
) -> Result<u8, CliError> {
    let arguments = prompt_arguments(args.args.as_deref())?;
    let reply = match registry.get_prompt(&args.name, &arguments, ctx).await {
        Ok(reply) => reply,
        Err(refusal) => return refused(&refusal, args.json),
    };
    if args.json {
        print_json(&Value::Object(prompt_reply_json(&reply)))?;
        return Ok(EXIT_OK);
    }
    for message in &reply.messages {
        let text = match &message.content {
            PromptContent::Text(text) => printable_lines(text),
            PromptContent::Image { mime_type, .. } => format!("({mime_type} image; use --json)"),
            PromptContent::Audio { mime_type, .. } => format!("({mime_type} audio; use --json)"),
            PromptContent::Resource(contents) => {
                format!("(embedded {}; use --json)", contents.uri())
            }
            _ => "(content of a kind this command does not show; use --json)".to_owned(),
        };
        emit(&format!("{}: {text}\n", message.role.as_str()));
    }
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_arguments_are_an_object_of_strings() {
        assert_eq!(prompt_arguments(Some(r#"{"a": "1"}"#)).unwrap()["a"], "1");
        assert!(prompt_arguments(Some(r#"{"a": 1}"#)).is_err());
        assert!(prompt_arguments(Some("[]")).is_err());
        assert!(prompt_arguments(None).unwrap().is_empty());
    }
}
