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

/// Writes `annotations`, `icons` and `_meta` as the entry was given them (each left out
/// when it has none).
fn put_given(
    map: &mut Map<String, Value>,
    annotations: Option<&Map<String, Value>>,
    icons: &[Value],
    meta: Option<&Map<String, Value>>,
) {
    if let Some(annotations) = annotations.filter(|a| !a.is_empty()) {
        map.insert("annotations".into(), Value::Object(annotations.clone()));
    }
    if !icons.is_empty() {
        map.insert("icons".into(), Value::Array(icons.to_vec()));
    }
    if let Some(meta) = meta.filter(|m| !m.is_empty()) {
        map.insert("_meta".into(), Value::Object(meta.clone()));
    }
}

/// A `resources/list` entry (its `annotations`, `icons` and `_meta` as given, when it has
/// them).
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
    put_given(
        &mut map,
        resource.annotations(),
        resource.icons(),
        resource.meta(),
    );
    Value::Object(map)
}

/// A `resources/templates/list` entry (its `annotations`, `icons` and `_meta` as given,
/// when it has them).
pub fn template_json(template: &ResourceTemplate) -> Value {
    let mut map = Map::new();
    map.insert("uriTemplate".into(), json!(template.template().as_str()));
    map.insert("name".into(), json!(template.name()));
    put(&mut map, "title", template.title());
    put(&mut map, "description", template.description());
    put(&mut map, "mimeType", template.mime_type());
    put_given(
        &mut map,
        template.annotations(),
        template.icons(),
        template.meta(),
    );
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

/// A `prompts/list` entry (its `icons` and `_meta` as given, when it has them).
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
    put_given(&mut map, None, prompt.icons(), prompt.meta());
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
        let annotations =
            json!({"audience": ["user"], "priority": 0.5, "lastModified": "2025-01-12T15:00:58Z"});
        let meta = json!({"example.com/origin": "x"});
        let icon = json!({"src": "https://example.com/i.png", "mimeType": "image/png"});
        let object = |value: &Value| value.as_object().unwrap().clone();
        assert_eq!(
            resource_json(
                &Resource::new("a://b", "b")
                    .with_annotations(object(&annotations))
                    .with_icons(vec![icon.clone()])
                    .with_meta(object(&meta))
            ),
            json!({"uri": "a://b", "name": "b", "annotations": annotations, "icons": [icon], "_meta": meta})
        );
        assert_eq!(
            template_json(&template.with_annotations(object(&annotations))),
            json!({"uriTemplate": "a://{x}", "name": "x", "annotations": annotations})
        );
        assert_eq!(
            prompt_json(&Prompt::new("p", "d").with_meta(object(&meta))),
            json!({"name": "p", "description": "d", "arguments": [], "_meta": meta})
        );
        let blob = ResourceContents::blob("a://bin", "image/png", &[1, 2, 3]);
        assert_eq!(
            message_json(&PromptMessage::user_resource(blob)),
            json!({"role": "user", "content": {"type": "resource", "resource": {"uri": "a://bin", "mimeType": "image/png", "blob": "AQID"}}})
        );
    }
}
