//! Renderers: the registry's choice, and the text of each result type (snapshots).

use milpa::render::{ChannelRenderer, PlainRenderer, RendererRegistry, TerminalRenderer};
use milpa::{ToolContext, ToolResult};
use serde_json::{Value, json};

fn list() -> ToolResult {
    ToolResult::paginated(
        vec![
            json!({"id": 7, "name": "Compost bin", "available": true}),
            json!({"id": 12, "nombre": "Maíz", "available": false}),
            json!({"title": "No id here"}),
        ],
        2,
        23,
        10,
        Some("Garden items".into()),
    )
}

fn detail() -> ToolResult {
    ToolResult::detail(
        json!({"id": 7, "created_at": "2026-05-01", "active": true, "owner": null, "tags": ["a", "b"]}),
        "Note",
        Some("Loaded".into()),
        vec![
            json!({"label": "Edit", "action": "notes.update"}),
            json!({"label": "Delete", "action": "notes.delete"}),
        ],
    )
}

fn confirmation() -> ToolResult {
    ToolResult::confirmation(
        "Delete note 7?",
        json!({"note_id": 7, "title": "Groceries"}),
        "delete",
        "note",
        json!(7),
    )
}

fn blocked() -> ToolResult {
    ToolResult::blocked(
        "Restarts are not for agents.",
        Some("Ask an operator on the cli channel.".into()),
    )
}

fn error() -> ToolResult {
    ToolResult::error("disk full")
}

fn generic() -> ToolResult {
    ToolResult::success(json!({"user_name": "ana", "count": 3, "ok": false})).with_message("Done.")
}

/// Every result type, labelled, for one snapshot per renderer.
fn all_types() -> Vec<(&'static str, ToolResult)> {
    vec![
        ("list", list()),
        ("empty list", ToolResult::paginated(vec![], 1, 0, 10, None)),
        ("detail", detail()),
        ("confirmation", confirmation()),
        ("blocked", blocked()),
        (
            "blocked without suggestion",
            ToolResult::blocked("No.", None),
        ),
        ("error", error()),
        ("generic success", generic()),
        (
            "generic success without message",
            ToolResult::success(json!({"a_b": 1})),
        ),
        ("generic scalar", ToolResult::success(json!("hello"))),
        (
            "generic scalar with message",
            ToolResult::success(json!(5)).with_message("Sum"),
        ),
        ("generic list data", ToolResult::success(json!(["a", "b"]))),
        ("generic null data", ToolResult::success(Value::Null)),
        (
            "failure without type",
            ToolResult {
                success: false,
                data: Value::Null,
                message: None,
                error: Some("nope".into()),
                meta: Default::default(),
            },
        ),
    ]
}

fn render_all(renderer: &dyn ChannelRenderer) -> String {
    all_types()
        .into_iter()
        .map(|(label, result)| {
            format!(
                "### {label}\n{}\n",
                renderer.render(&result, Some(&ToolContext::cli()))
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Escape codes made visible, so the snapshot reads as text.
fn visible(text: &str) -> String {
    text.replace('\u{1b}', "\\e")
}

#[test]
fn plain_renders_every_result_type() {
    insta::assert_snapshot!("plain", render_all(&PlainRenderer));
}

#[test]
fn terminal_without_colour_renders_every_result_type() {
    insta::assert_snapshot!("terminal_plain", render_all(&TerminalRenderer::new(false)));
}

#[test]
fn terminal_with_colour_renders_every_result_type() {
    insta::assert_snapshot!(
        "terminal_colour",
        visible(&render_all(&TerminalRenderer::new(true)))
    );
}

#[test]
fn plain_list_data_renders_one_line_per_item_instead_of_crashing() {
    let text = PlainRenderer.render(&ToolResult::success(json!(["a", {"b": 1}, 3])), None);
    assert_eq!(
        text,
        "Operation completed successfully.\n\n- a\n- {\"b\":1}\n- 3"
    );
}

#[test]
fn plain_layouts_exactly() {
    assert_eq!(
        PlainRenderer.render(&list(), None),
        "Garden items\n\n#7: Compost bin\n#12: Maíz\n#3: No id here\n\nPage 2 of 3 (23 items total)"
    );
    assert_eq!(
        PlainRenderer.render(&blocked(), None),
        "Error: Restarts are not for agents.\n\nSuggestion: Ask an operator on the cli channel."
    );
    assert_eq!(PlainRenderer.render(&error(), None), "Error: disk full");
    assert_eq!(
        PlainRenderer.render(&generic(), None),
        "Done.\n\n- User name: ana\n- Count: 3\n- Ok: false"
    );
}

#[test]
fn terminal_list_aligns_ids_in_four_columns() {
    let text = TerminalRenderer::new(false).render(&list(), None);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "Garden items");
    assert_eq!(lines[1], "-".repeat(50));
    assert_eq!(lines[2], "  [OK] #7    Compost bin");
    assert_eq!(lines[3], "  [--] #12   Maíz");
    assert_eq!(lines[4], "   #3    No id here");
    assert_eq!(lines[6], "Page 2/3 (23 total items)");
    assert!(text.ends_with('\n'));
}

#[test]
fn terminal_detail_pads_labels_to_fifteen() {
    let text = TerminalRenderer::new(false).render(&detail(), None);
    assert!(text.starts_with("Note - Loaded\n========================================\n"));
    assert!(text.contains("\n  Created at:     2026-05-01\n"));
    assert!(text.contains("\n  Active:         Yes\n"));
    assert!(text.contains("\n  Owner:          N/A\n"));
    assert!(
        text.ends_with("\nAvailable actions:\n  - Edit: notes.update\n  - Delete: notes.delete\n")
    );
}

#[test]
fn the_terminal_renderer_serves_only_cli() {
    let terminal = TerminalRenderer::new(false);
    assert!(terminal.supports("cli"));
    assert!(!terminal.supports("tui"));
    assert!(!terminal.supports("mcp"));
    assert!(PlainRenderer.supports("anything"));
}

struct Fixed(&'static str, &'static str);

impl ChannelRenderer for Fixed {
    fn supports(&self, channel: &str) -> bool {
        channel == self.0
    }
    fn render(&self, _result: &ToolResult, _ctx: Option<&ToolContext>) -> String {
        self.1.to_owned()
    }
}

#[test]
fn the_registry_picks_the_first_supporting_renderer_then_the_default_then_json() {
    let result = ToolResult::success(json!({"id": 1}));
    let empty = RendererRegistry::new();
    assert!(!empty.has_renderer("cli"));
    assert_eq!(empty.render(&result, None), result.to_json_pretty());

    let mut registry = RendererRegistry::new();
    registry
        .add_renderer(Fixed("cli", "first"))
        .add_renderer(Fixed("cli", "second"))
        .add_renderer(Fixed("default", "no context"));
    assert_eq!(registry.render(&result, Some(&ToolContext::cli())), "first");
    assert_eq!(registry.render(&result, None), "no context");
    let web = ToolContext::web("ana", ["x"]);
    assert!(!registry.has_renderer("web"));
    assert_eq!(
        registry.render(&result, Some(&web)),
        result.to_json_pretty()
    );

    registry.set_default_renderer(PlainRenderer);
    assert!(registry.has_renderer("web"));
    assert_eq!(
        registry.render(&result, Some(&web)),
        "Operation completed successfully.\n\n- Id: 1"
    );
    assert!(registry.renderer_for("web").is_some());
}

#[test]
fn the_builtin_registry_uses_the_terminal_for_cli_and_plain_text_elsewhere() {
    let registry = RendererRegistry::with_builtins();
    let result = ToolResult::error("boom");
    // Colours depend on where the tests run; the layout does not.
    let expected = TerminalRenderer::detect().render(&result, None);
    assert_eq!(
        registry.render(&result, Some(&ToolContext::cli())),
        expected
    );
    assert_eq!(
        TerminalRenderer::new(false).render(&result, None),
        "✗ Error: boom\n"
    );
    let mcp = ToolContext::mcp("r", Some("a".into()), ["x"]);
    assert_eq!(registry.render(&result, Some(&mcp)), "Error: boom");
}

#[test]
fn the_terminal_renderer_escapes_control_characters_of_the_result() {
    let hostile = "\u{1b}]0;pwned\u{7}\u{1b}[2Jgone\rover\u{9b}31m";
    let shown = "\\u{1b}]0;pwned\\u{7}\\u{1b}[2Jgone\\rover\\u{9b}31m";
    let results = [
        ToolResult::success(json!(hostile)),
        ToolResult::success(json!({"out": hostile, hostile: 1}))
            .with_message(format!("ran: {hostile}\nline two\tcol")),
        ToolResult::error(hostile),
        ToolResult::blocked(hostile, Some(hostile.to_owned())),
        ToolResult::detail(
            json!({"k": hostile}),
            hostile,
            None,
            vec![json!({"label": hostile, "action": "a"})],
        ),
        list().with_message(hostile),
    ];
    for colour in [false, true] {
        let renderer = TerminalRenderer::new(colour);
        for result in &results {
            let text = renderer.render(result, None);
            assert!(!text.contains(['\u{7}', '\r', '\u{9b}']), "{text:?}");
            assert!(text.contains(shown), "{text:?}");
            let escapes = text.matches('\u{1b}').count();
            // Only the renderer's own colour codes: `ESC[<n>m` … `ESC[0m`.
            assert_eq!(escapes, text.matches("\u{1b}[0m").count() * 2, "{text:?}");
            if !colour {
                assert_eq!(escapes, 0, "{text:?}");
            }
        }
    }
    // Newlines and tabs keep the layout.
    assert_eq!(
        TerminalRenderer::new(false).render(&results[1], None),
        format!("✓ ran: {shown}\nline two\tcol\n  Out: {shown}\n  {shown}: 1\n")
    );
}
