//! The wire shapes of resources, prompts and completions (MCP `resources/list`,
//! `resources/read`, `prompts/list`, `prompts/get`, `completion/complete`), written from
//! the core's types: the server answers with them, and `milpa resources --json` prints them.

use milpa::catalog::{
    Completion, Prompt, PromptContent, PromptMessage, PromptReply, Resource, ResourceContents,
    ResourceTemplate,
};
use serde_json::{Map, Value, json};

fn put(map: &mut Map<String, Value>, key: &str, value: Option<&str>) {
    if let Some(value) = value {
        map.insert(key.into(), Value::String(value.to_owned()));
    }
}

/// A `resources/list` entry.
pub fn resource_json(resource: &Resource) -> Value {
    let mut map = Map::new();
    map.insert("uri".into(), json!(resource.uri()));
    map.insert("name".into(), json!(resource.name()));
    put(&mut map, "title", resource.title());
    put(&mut map, "description", resource.description());
    put(&mut map, "mimeType", resource.mime_type());
    if let Some(size) = resource.size() {
        map.insert("size".into(), json!(size));
    }
    Value::Object(map)
}

/// A `resources/templates/list` entry.
pub fn template_json(template: &ResourceTemplate) -> Value {
    let mut map = Map::new();
    map.insert("uriTemplate".into(), json!(template.template().as_str()));
    map.insert("name".into(), json!(template.name()));
    put(&mut map, "title", template.title());
    put(&mut map, "description", template.description());
    put(&mut map, "mimeType", template.mime_type());
    Value::Object(map)
}

/// One piece of a read (and of an embedded resource).
pub fn contents_json(contents: &ResourceContents) -> Value {
    let mut map = Map::new();
    match contents {
        ResourceContents::Text {
            uri,
            mime_type,
            text,
        } => {
            map.insert("uri".into(), json!(uri));
            put(&mut map, "mimeType", mime_type.as_deref());
            map.insert("text".into(), json!(text));
        }
        ResourceContents::Blob {
            uri,
            mime_type,
            blob,
        } => {
            map.insert("uri".into(), json!(uri));
            put(&mut map, "mimeType", mime_type.as_deref());
            map.insert("blob".into(), json!(blob));
        }
        // A kind of contents this mapping does not know: its URI alone.
        _ => {
            map.insert("uri".into(), json!(contents.uri()));
        }
    }
    Value::Object(map)
}

/// A `prompts/list` entry.
pub fn prompt_json(prompt: &Prompt) -> Value {
    let mut map = Map::new();
    map.insert("name".into(), json!(prompt.name()));
    put(&mut map, "title", prompt.title());
    map.insert("description".into(), json!(prompt.description()));
    let arguments: Vec<Value> = prompt
        .arguments()
        .iter()
        .map(|argument| {
            let mut map = Map::new();
            map.insert("name".into(), json!(argument.name()));
            put(&mut map, "title", argument.title());
            put(&mut map, "description", argument.description());
            map.insert("required".into(), json!(argument.is_required()));
            Value::Object(map)
        })
        .collect();
    map.insert("arguments".into(), Value::Array(arguments));
    Value::Object(map)
}

/// One message of a rendered prompt.
pub fn message_json(message: &PromptMessage) -> Value {
    let content = match &message.content {
        PromptContent::Text(text) => json!({"type": "text", "text": text}),
        PromptContent::Image { data, mime_type } => {
            json!({"type": "image", "data": data, "mimeType": mime_type})
        }
        PromptContent::Audio { data, mime_type } => {
            json!({"type": "audio", "data": data, "mimeType": mime_type})
        }
        PromptContent::Resource(contents) => {
            json!({"type": "resource", "resource": contents_json(contents)})
        }
        _ => json!({"type": "text", "text": ""}),
    };
    json!({"role": message.role.as_str(), "content": content})
}

/// A `prompts/get` result (without `resultType`).
pub fn prompt_reply_json(reply: &PromptReply) -> Map<String, Value> {
    let mut map = Map::new();
    put(&mut map, "description", reply.description.as_deref());
    map.insert(
        "messages".into(),
        Value::Array(reply.messages.iter().map(message_json).collect()),
    );
    map
}

/// A `completion/complete` result.
pub fn completion_json(completion: &Completion) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert(
        "completion".into(),
        json!({
            "values": completion.values,
            "total": completion.total,
            "hasMore": completion.has_more,
        }),
    );
    map
}

#[cfg(test)]
mod tests {
    use milpa::catalog::PromptArgument;

    use super::*;

    #[test]
    fn entries_are_written_as_the_specification_names_them() {
        let resource = Resource::new("a://b", "b")
            .with_mime_type("text/plain")
            .with_size(3);
        assert_eq!(
            resource_json(&resource),
            json!({"uri": "a://b", "name": "b", "mimeType": "text/plain", "size": 3})
        );
        let template = ResourceTemplate::new("a://{x}", "x").unwrap();
        assert_eq!(
            template_json(&template),
            json!({"uriTemplate": "a://{x}", "name": "x"})
        );
        let prompt = Prompt::new("p", "d").with_argument(PromptArgument::required("a"));
        assert_eq!(
            prompt_json(&prompt),
            json!({"name": "p", "description": "d", "arguments": [{"name": "a", "required": true}]})
        );
        let blob = ResourceContents::blob("a://bin", "image/png", &[1, 2, 3]);
        assert_eq!(
            message_json(&PromptMessage::user_resource(blob)),
            json!({"role": "user", "content": {"type": "resource", "resource": {"uri": "a://bin", "mimeType": "image/png", "blob": "AQID"}}})
        );
    }
}
