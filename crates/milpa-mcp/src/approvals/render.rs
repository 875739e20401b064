//! The page's HTML, rendered on the server from the askama templates under
//! `templates/approvals/`: no external resource, one inline stylesheet (`style.css`), and
//! scripts only from the page's own path: `/approvals/refresh.js` on the queue (it keeps the
//! list fresh, see [`super::refresh`]) and `/approvals/passkeys.js` on the pages of an
//! approver with a passkey (and the enrolment page), which carries WebAuthn options and
//! answers. The templates escape every value they write
//! ([`PageHtml`](super::html_escaper::PageHtml)); summaries, arguments, tool descriptions
//! and client names come from agents, upstreams and clients, and are hostile input. This
//! module gathers what each template shows (a held definition change's diff comes from
//! [`definition_diff`], which `milpa approvals show` prints too).

use std::fmt::Write as _;
use std::time::Duration;

use askama::Template;
use milpa::approval::{Approval, ApprovalKind, ApprovalState, DefinitionChange, rfc3339};
use milpa::audit::Redactor;
use milpa::escape::EscapeControl;

use super::definition_diff::definition_diff;
use super::path_segment::path_segment;
use super::relative_time;

/// The stylesheet, inlined in every page (`style-src 'unsafe-inline'` in the page's CSP).
pub(crate) const STYLE: &str = include_str!("style.css");

/// How much of a parked call's arguments a card shows; the rest is cut with a marker.
const MAX_ARGS_SHOWN: usize = 8 * 1024;

/// How much of a held change's diff a card shows (whole lines, then a marker): the queue
/// renders every pending card on each refresh, and an upstream picks the definitions' size.
/// `milpa approvals show` prints all of it.
const MAX_DIFF_SHOWN: usize = 16 * 1024;

/// What a page tells the person above everything else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Notice {
    /// Something they did worked.
    Done(String),
    /// Something they asked for was refused; nothing changed.
    Refused(String),
}

/// Who is looking at a page.
#[derive(Debug, Clone)]
pub(crate) struct Viewer<'a> {
    /// Their principal.
    pub principal: &'a str,
    /// The CSRF token every form of their session carries.
    pub csrf: &'a str,
    /// Whether they hold `approvals:grant`.
    pub may_decide: bool,
    /// Whether they enrolled a passkey: their decision forms then run the passkey check
    /// (the page loads `/approvals/passkeys.js`).
    pub passkey: bool,
    /// Why this page's host cannot use the passkeys (opened as `127.0.0.1`, not the RP
    /// id), to say so.
    pub passkey_host_note: Option<String>,
}

impl Viewer<'_> {
    /// Whether this viewer gets the decision form for `approval`: they hold the scope and
    /// did not ask for it themselves.
    fn decides(&self, approval: &Approval) -> bool {
        self.may_decide && approval.requested_by() != Some(self.principal)
    }
}

/// The login form.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LoginForm<'a> {
    /// The login CSRF token (also in its cookie).
    pub csrf: &'a str,
    /// Where to go after logging in (a path under `/approvals`).
    pub next: &'a str,
    /// Why the form is shown again.
    pub message: Option<&'a str>,
    /// Whether the server can log anyone in (it has an authenticator).
    pub available: bool,
}

/// What every page's frame (`page.html`) shows: the title, and who is signed in.
struct Frame<'a> {
    title: &'a str,
    viewer: Option<&'a Viewer<'a>>,
    /// Whether the page loads the refresh script (the queue, when it refreshes).
    refresh_script: bool,
}

impl Frame<'_> {
    /// Whether the page loads the passkey script: only for an approver with a passkey.
    fn passkey_script(&self) -> bool {
        self.viewer.is_some_and(|viewer| viewer.passkey)
    }
}

/// The login page (`login.html`).
#[derive(Template)]
#[template(path = "approvals/login.html")]
struct LoginPage<'a> {
    frame: Frame<'a>,
    form: &'a LoginForm<'a>,
}

/// The queue (`queue.html`): the pending cards, then the recent decisions (its `live`
/// part).
#[derive(Template)]
#[template(path = "approvals/queue.html")]
struct QueuePage<'a> {
    frame: Frame<'a>,
    viewer: &'a Viewer<'a>,
    notice: Option<&'a Notice>,
    passkey_note: Option<&'a str>,
    live: Live<'a>,
}

/// The part of the queue the refresh replaces (`live.html`): the pending cards and the
/// recent decisions. Served alone at `/approvals/live` ([`live_list`]).
#[derive(Template)]
#[template(path = "approvals/live.html")]
struct LiveList<'a> {
    viewer: &'a Viewer<'a>,
    live: Live<'a>,
}

/// What the live part of the queue shows.
pub(crate) struct Live<'a> {
    pending: Vec<Card<'a>>,
    more: bool,
    decided: Vec<DecisionRow<'a>>,
    /// How often the script fetches it again, in milliseconds (0: it does not).
    refresh_ms: u128,
}

impl<'a> Live<'a> {
    /// The live part for `viewer`: `pending` (`more`: and more than shown) and the last
    /// decisions, as seen `now_ms`, fetched again every `refresh` (zero: never).
    pub(crate) fn new(
        viewer: &Viewer<'_>,
        pending: &'a [Approval],
        more: bool,
        decided: &'a [Approval],
        redactor: &Redactor,
        now_ms: u64,
        refresh: Duration,
    ) -> Live<'a> {
        Live {
            pending: pending
                .iter()
                .map(|approval| Card::pending(viewer, approval, redactor, now_ms))
                .collect(),
            more,
            decided: decided
                .iter()
                .map(|approval| DecisionRow::new(approval, now_ms))
                .collect(),
            refresh_ms: refresh.as_millis(),
        }
    }
}

/// One approval (`item.html`).
#[derive(Template)]
#[template(path = "approvals/item.html")]
struct ItemPage<'a> {
    frame: Frame<'a>,
    viewer: &'a Viewer<'a>,
    notice: Option<&'a Notice>,
    shown: ItemCard<'a>,
}

/// The card of the item page: the decision form while it waits, or what became of it.
enum ItemCard<'a> {
    /// It waits: the card with its form.
    Pending(Card<'a>),
    /// It was decided or expired: the card and the sentence saying so.
    Decided(Card<'a>, String),
}

/// An id no approval has (`missing.html`).
#[derive(Template)]
#[template(path = "approvals/missing.html")]
struct MissingPage<'a> {
    frame: Frame<'a>,
    notice: Option<&'a Notice>,
    id: &'a str,
}

/// The passkey enrolment page (`enrol.html`).
#[derive(Template)]
#[template(path = "approvals/enrol.html")]
struct EnrolPage<'a> {
    frame: Frame<'a>,
    actor: &'a str,
    host_note: Option<&'a str>,
    options: Option<&'a str>,
    token_segment: String,
    csrf: &'a str,
}

/// A page with only a message (`message.html`).
#[derive(Template)]
#[template(path = "approvals/message.html")]
struct MessagePage<'a> {
    frame: Frame<'a>,
    message: &'a str,
}

/// A summary split at its first `(`, after which the template lets it wrap.
#[derive(Clone, Copy)]
struct Summary<'a> {
    head: &'a str,
    rest: Option<&'a str>,
}

impl<'a> Summary<'a> {
    /// `summary`, split at its first `(` (none: all of it is the head).
    fn new(summary: &'a str) -> Summary<'a> {
        match summary.split_once('(') {
            Some((head, rest)) => Summary {
                head,
                rest: Some(rest),
            },
            None => Summary {
                head: summary,
                rest: None,
            },
        }
    }
}

/// The line above a card's summary.
enum CardKind<'a> {
    /// A parked call of this tool.
    ToolCall(&'a str),
    /// A `request_verification` request.
    Verification,
    /// An upstream tool or prompt whose definition changed since it was pinned.
    DefinitionChange(ChangeView<'a>),
    /// Anything else.
    Other,
}

/// What the card of a held definition change shows: which tool or prompt, its
/// description before and now, and the diff of the rest.
struct ChangeView<'a> {
    /// `tool` or `prompt`.
    what: &'static str,
    /// The name clients know it by.
    served_as: &'a str,
    /// The pinned description, when it was a string.
    was: Option<&'a str>,
    /// The description offered now, when it is a string.
    now: Option<&'a str>,
    /// The diff without the description; `None` when only the description changed.
    diff: Option<Vec<DiffLine>>,
}

impl<'a> ChangeView<'a> {
    fn new(change: &'a DefinitionChange) -> ChangeView<'a> {
        let (was, now) = change.descriptions();
        ChangeView {
            what: change.kind.as_str(),
            served_as: &change.served_as,
            was,
            now,
            diff: definition_diff(change).map(|diff| diff_lines(&diff)),
        }
    }
}

/// One line of a change's diff, as the card shows it.
struct DiffLine {
    /// Its class: `head` (`---`/`+++`), `hunk` (`@@`), `del`, `add`, `same`, or `cut`.
    class: &'static str,
    /// The line, control and format characters escaped (an upstream wrote it; a bidi
    /// override would make the line read otherwise), ending in a newline so that the
    /// lines stay lines without the stylesheet.
    text: String,
}

/// A moment shown as `<time>`: the RFC 3339 instant and the relative text.
struct Moment {
    at: String,
    text: String,
}

/// A card's facts: who asked, through which client, on which server and channel, when it
/// was opened and when it expires.
struct Facts<'a> {
    /// `None` for a held change: an upstream changed it, nobody asked.
    asked_by: Option<&'a str>,
    client: Option<&'a str>,
    server: Option<&'a str>,
    channel: Option<&'a str>,
    opened: Moment,
    expires: Option<Moment>,
}

/// What a parked call's tool is: its badges (whether it changes state, the upstream it goes
/// to) and what it does. Calls parked before these were kept show none of them.
struct About<'a> {
    mutating: Option<bool>,
    upstream: Option<&'a str>,
    description: Option<&'a str>,
}

impl About<'_> {
    /// Whether the card has a line of badges.
    fn has_badges(&self) -> bool {
        self.mutating.is_some() || self.upstream.is_some()
    }
}

/// What a pending card offers under its facts.
enum DecisionForm {
    /// The grant/reject form (`true`: it runs the passkey check first).
    Form(bool),
    /// Nothing to decide: the viewer asked for it.
    OwnRequest,
    /// Nothing to decide: the viewer lacks the scope (the page says so once).
    None,
}

/// One approval as a card shows it.
struct Card<'a> {
    id: &'a str,
    segment: String,
    kind: CardKind<'a>,
    summary: Summary<'a>,
    about: About<'a>,
    facts: Facts<'a>,
    args: Option<String>,
    decision: DecisionForm,
}

impl<'a> Card<'a> {
    /// The card of `approval` as seen `now_ms`, without a decision form.
    fn new(approval: &'a Approval, redactor: &Redactor, now_ms: u64) -> Card<'a> {
        let kind = match (approval.kind(), approval.tool(), approval.change()) {
            (ApprovalKind::ToolCall, Some(tool), _) => CardKind::ToolCall(tool),
            (ApprovalKind::Verification, _, _) => CardKind::Verification,
            (ApprovalKind::DefinitionChange, _, Some(change)) => {
                CardKind::DefinitionChange(ChangeView::new(change))
            }
            _ => CardKind::Other,
        };
        let change = matches!(kind, CardKind::DefinitionChange(_));
        let created = approval.created_at_ms();
        let expires = match approval.expires_at_ms() {
            Some(expires) if approval.state(now_ms) == ApprovalState::Pending => Some(Moment {
                at: rfc3339(expires),
                text: relative_time::remaining(expires, now_ms),
            }),
            _ => None,
        };
        Card {
            id: approval.id(),
            segment: path_segment(approval.id()),
            kind,
            summary: Summary::new(approval.summary()),
            about: About {
                mutating: approval.mutating(),
                upstream: approval.upstream(),
                // A change shows the description it had beside the one it has now.
                description: approval.description().filter(|_| !change),
            },
            facts: Facts {
                asked_by: match approval.requested_by() {
                    None if change => None,
                    by => Some(by.unwrap_or("anonymous")),
                },
                client: approval.client(),
                server: approval.server(),
                channel: approval.channel(),
                opened: Moment {
                    at: rfc3339(created),
                    text: relative_time::ago(created, now_ms),
                },
                expires,
            },
            args: arguments(approval, redactor),
            decision: DecisionForm::None,
        }
    }

    /// What a decision does, said on the line before the buttons.
    fn effect(&self) -> &'static str {
        match self.kind {
            CardKind::ToolCall(_) => {
                "Grant runs nothing now: the caller's retry runs this call once, with these \
                 arguments, until it expires. Reject: it never runs, and the caller is told \
                 who rejected it and why."
            }
            CardKind::DefinitionChange(_) => {
                "Grant serves the definition the upstream offers now, and pins it in place of \
                 the old one. Reject: it stays held, neither listed nor callable, for as long \
                 as the upstream offers this definition."
            }
            _ => "Grant counts as your approval of this request; Reject refuses it for good.",
        }
    }

    /// What the upstream badge's tooltip says the upstream is to this approval.
    fn upstream_title(&self) -> &'static str {
        match self.kind {
            CardKind::DefinitionChange(_) => "The upstream MCP server that changed it.",
            _ => "The call is forwarded to this upstream MCP server.",
        }
    }

    /// The card of a pending approval, with what `viewer` may do about it.
    fn pending(
        viewer: &Viewer<'_>,
        approval: &'a Approval,
        redactor: &Redactor,
        now_ms: u64,
    ) -> Card<'a> {
        let mut card = Card::new(approval, redactor, now_ms);
        card.decision = if viewer.decides(approval) {
            DecisionForm::Form(viewer.passkey)
        } else if approval.requested_by() == Some(viewer.principal) {
            DecisionForm::OwnRequest
        } else {
            DecisionForm::None
        };
        card
    }
}

/// One line of the recent decisions.
struct DecisionRow<'a> {
    id: &'a str,
    badge: &'static str,
    label: &'static str,
    summary: Summary<'a>,
    meta: Vec<MetaPart<'a>>,
    reason: Option<&'a str>,
}

/// A part of a decision's meta line, joined with ` · `.
enum MetaPart<'a> {
    /// Who decided.
    DecidedBy(&'a str),
    /// When.
    DecidedAt(Moment),
    /// Who asked.
    AskedBy(&'a str),
}

impl<'a> DecisionRow<'a> {
    /// The row of a decided `approval` as seen `now_ms`.
    fn new(approval: &'a Approval, now_ms: u64) -> DecisionRow<'a> {
        let state = approval.state(now_ms);
        let badge = match state {
            ApprovalState::Granted | ApprovalState::Executed => "granted",
            ApprovalState::Rejected => "rejected",
            _ => "other",
        };
        let mut meta = Vec::new();
        if let Some((by, _)) = approval.decided_by() {
            meta.push(MetaPart::DecidedBy(by));
        }
        if let Some(at) = approval.decided_at_ms() {
            meta.push(MetaPart::DecidedAt(Moment {
                at: rfc3339(at),
                text: relative_time::ago(at, now_ms),
            }));
        }
        if let Some(requester) = approval.requested_by() {
            meta.push(MetaPart::AskedBy(requester));
        }
        DecisionRow {
            id: approval.id(),
            badge,
            label: state_label(approval, state),
            summary: Summary::new(approval.summary()),
            meta,
            reason: approval.decided_by().and_then(|(_, reason)| reason),
        }
    }
}

/// Renders `page`; a template of this module writes only into a `String`, which cannot fail.
fn render(page: &impl Template) -> String {
    page.render()
        .unwrap_or_else(|error| unreachable!("rendering a page into a String failed: {error}"))
}

/// The login page.
pub(crate) fn login_page(form: &LoginForm<'_>) -> String {
    render(&LoginPage {
        frame: Frame {
            title: "Sign in",
            viewer: None,
            refresh_script: false,
        },
        form,
    })
}

/// The queue: what waits for a decision, then the last decisions (`live`).
pub(crate) fn queue_page(viewer: &Viewer<'_>, notice: Option<&Notice>, live: Live<'_>) -> String {
    render(&QueuePage {
        frame: Frame {
            title: "Approvals",
            viewer: Some(viewer),
            refresh_script: live.refresh_ms > 0,
        },
        viewer,
        notice,
        passkey_note: viewer
            .passkey_host_note
            .as_deref()
            .filter(|_| viewer.passkey),
        live,
    })
}

/// The live part of the queue alone, for the refresh script.
pub(crate) fn live_list(viewer: &Viewer<'_>, live: Live<'_>) -> String {
    render(&LiveList { viewer, live })
}

/// One approval, as the `approve_url` of a parked call shows it.
pub(crate) fn item_page(
    viewer: &Viewer<'_>,
    notice: Option<&Notice>,
    approval: &Approval,
    redactor: &Redactor,
    now_ms: u64,
) -> String {
    let shown = match approval.state(now_ms) {
        ApprovalState::Pending => {
            ItemCard::Pending(Card::pending(viewer, approval, redactor, now_ms))
        }
        state => ItemCard::Decided(
            Card::new(approval, redactor, now_ms),
            outcome(approval, state, now_ms),
        ),
    };
    render(&ItemPage {
        frame: Frame {
            title: approval.summary(),
            viewer: Some(viewer),
            refresh_script: false,
        },
        viewer,
        notice,
        shown,
    })
}

/// The page for an id no approval has.
pub(crate) fn missing_page(viewer: &Viewer<'_>, notice: Option<&Notice>, id: &str) -> String {
    render(&MissingPage {
        frame: Frame {
            title: "Not found",
            viewer: Some(viewer),
            refresh_script: false,
        },
        notice,
        id,
    })
}

/// The enrolment page: who the link enrols and the button that creates the passkey
/// (`options`: the WebAuthn creation options, JSON), or, when the page's host cannot use
/// the RP id, where to open it instead (`host_note`).
pub(crate) fn enrol_page(
    viewer: &Viewer<'_>,
    token: &str,
    actor: &str,
    options: Option<&str>,
    host_note: Option<&str>,
) -> String {
    render(&EnrolPage {
        frame: Frame {
            title: "Enrol a passkey",
            viewer: Some(viewer),
            refresh_script: false,
        },
        actor,
        host_note,
        options,
        token_segment: path_segment(token),
        csrf: viewer.csrf,
    })
}

/// A page that only says what went wrong (the store failed, a form could not be read).
pub(crate) fn message_page(viewer: Option<&Viewer<'_>>, title: &str, message: &str) -> String {
    render(&MessagePage {
        frame: Frame {
            title,
            viewer,
            refresh_script: false,
        },
        message,
    })
}

/// What became of a decided or expired approval (the item page), as a sentence.
fn outcome(approval: &Approval, state: ApprovalState, now_ms: u64) -> String {
    match state {
        ApprovalState::Expired => format!(
            "Nobody decided in time: it expired {}. It can no longer be decided.",
            approval
                .expires_at_ms()
                .map(|at| relative_time::ago(at, now_ms))
                .unwrap_or_default()
        ),
        _ => format!(
            "Already decided: {}.",
            decision_sentence(approval, state, now_ms)
        ),
    }
}

/// `granted by bob 2 min ago ("reason"); the call ran`.
fn decision_sentence(approval: &Approval, state: ApprovalState, now_ms: u64) -> String {
    let mut text = state_label(approval, state).to_lowercase();
    if let Some((by, reason)) = approval.decided_by() {
        let _ = write!(text, " by {by}");
        if let Some(at) = approval.decided_at_ms() {
            let _ = write!(text, " {}", relative_time::ago(at, now_ms));
        }
        if let Some(reason) = reason {
            let _ = write!(text, " (\u{201c}{reason}\u{201d})");
        }
    }
    text
}

/// The outcome's label (a badge, the start of a decided item's sentence).
fn state_label(approval: &Approval, state: ApprovalState) -> &'static str {
    match (state, approval.kind()) {
        (ApprovalState::Executed, _) => "Granted, ran",
        (ApprovalState::Granted, ApprovalKind::ToolCall) => "Granted, not run yet",
        (ApprovalState::Granted, _) => "Granted",
        (ApprovalState::Rejected, _) => "Rejected",
        (ApprovalState::Waived, _) => "Waived",
        (ApprovalState::Expired, _) => "Expired",
        _ => "Pending",
    }
}

/// The parked call's arguments, redacted and pretty-printed, cut past [`MAX_ARGS_SHOWN`]
/// with a marker; `None` for a verification request.
fn arguments(approval: &Approval, redactor: &Redactor) -> Option<String> {
    let args = approval.redacted_args(redactor)?;
    let mut text = serde_json::to_string_pretty(&args).unwrap_or_default();
    if text.len() > MAX_ARGS_SHOWN {
        let total = text.len();
        let mut cut = MAX_ARGS_SHOWN;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        let _ = write!(text, "\n… cut: {total} bytes in all");
    }
    Some(text)
}

/// `diff` as the card's lines, cut after [`MAX_DIFF_SHOWN`] bytes with a marker.
fn diff_lines(diff: &str) -> Vec<DiffLine> {
    let total = diff.lines().count();
    let mut shown = 0;
    let mut lines = Vec::new();
    for (at, line) in diff.lines().enumerate() {
        if shown + line.len() > MAX_DIFF_SHOWN && !lines.is_empty() {
            lines.push(DiffLine {
                class: "cut",
                text: format!(
                    "… cut: {} of {total} lines shown; `milpa approvals show` prints all\n",
                    lines.len()
                ),
            });
            break;
        }
        shown += line.len();
        // The header is the first two lines; a removed line could start with `--` too.
        let class = if at < 2 && (line.starts_with("--- ") || line.starts_with("+++ ")) {
            "head"
        } else if line.starts_with("@@") {
            "hunk"
        } else if line.starts_with('-') {
            "del"
        } else if line.starts_with('+') {
            "add"
        } else {
            "same"
        };
        lines.push(DiffLine {
            class,
            text: format!("{}\n", EscapeControl::all(line)),
        });
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use milpa::approval::ApprovalQueue;
    use milpa::approval::pins::{DefinitionKind, PinnedDefinition};
    use milpa::verification::VerificationRecord;

    use super::super::definition_diff::tests::read_tool;
    use serde_json::{Value, json};

    const NOW: u64 = 1_800_000_000_000;

    fn approval(record: Value) -> Approval {
        Approval::from_record(serde_json::from_value::<VerificationRecord>(record).unwrap())
    }

    /// A parked call by `by`, hostile text in every field an agent fills.
    fn parked(id: &str, by: &str, status: &str) -> Value {
        json!({
            "id": id, "subject": "deploy(env='prod', note=<b>\"x\" & y)", "policy": "single",
            "required_grants": 1, "requested_by": by,
            "payload": {"parked_call": {
                "binding": {"tool": "dep<l>oy", "principal": by, "channel": "m'cp"},
                "args": {"note": "it's <b>"},
                "expires_at_ms": NOW + 3_600_000, "executed_at_ms": null}},
            "status": status, "grants": [], "rejection": null,
            "created_at_ms": NOW - 65_000, "resolved_at_ms": null, "revision": 0
        })
    }

    fn viewer(passkey: bool) -> Viewer<'static> {
        Viewer {
            principal: "al'ice",
            csrf: "cs\"rf",
            may_decide: true,
            passkey,
            passkey_host_note: Some("open <localhost>".into()),
        }
    }

    /// The page without its stylesheet, which is long and not the template's.
    fn without_style(page: String) -> String {
        page.replace(STYLE, "")
    }

    #[test]
    fn the_login_page_escapes_its_values_in_text_and_attributes() {
        let page = without_style(login_page(&LoginForm {
            csrf: "c'1",
            next: "/approvals/a b",
            message: Some("<x>'\"&"),
            available: true,
        }));
        assert!(page.starts_with(
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <meta name=\"referrer\" content=\"same-origin\"><title>Sign in · milpa approvals\
             </title><style></style></head><body><header class=\"bar\"><div class=\"wrap\">\
             <a class=\"brand\" href=\"/approvals\">milpa <span>approvals</span></a></div>\
             </header><main class=\"wrap\">"
        ));
        assert!(page.contains(
            "<p class=\"notice refused\" role=\"alert\">&lt;x&gt;&#39;&quot;&amp;</p>\
             <form method=\"post\" action=\"/approvals/login\">\
             <input type=\"hidden\" name=\"csrf\" value=\"c&#39;1\">\
             <input type=\"hidden\" name=\"next\" value=\"/approvals/a b\">"
        ));
        assert!(
            page.ends_with("</form></div></main></body></html>"),
            "{page}"
        );
    }

    #[test]
    fn a_pending_card_shows_its_facts_and_the_passkey_decision_form() {
        let pending = approval(parked("a/b'1", "agent-7", "pending"));
        let viewer = viewer(true);
        let live = Live::new(
            &viewer,
            std::slice::from_ref(&pending),
            true,
            &[],
            &Redactor::default(),
            NOW,
            Duration::ZERO,
        );
        let page = without_style(queue_page(
            &viewer,
            Some(&Notice::Done("Granted x(<y>)".into())),
            live,
        ));
        for fragment in [
            "<script src=\"/approvals/passkeys.js\" defer></script></head>",
            "<b id=\"principal\">al&#39;ice</b>",
            "<main class=\"wrap\"><p class=\"notice done\" role=\"status\" id=\"notice\">\
             Granted x(&lt;y&gt;)</p><p class=\"notice info\" id=\"passkey-host\">\
             open &lt;localhost&gt;</p><div id=\"live\"><h1>Waiting for a decision \
             <span class=\"count\" id=\"pending-count\">1+</span></h1>",
            "<article class=\"card waiting\" data-approval-id=\"a/b&#39;1\">\
             <p class=\"kind\">Tool call · <span class=\"tool\">dep&lt;l&gt;oy</span></p>\
             <p class=\"summary mono\">deploy(<wbr>env=&#39;prod&#39;, \
             note=&lt;b&gt;&quot;x&quot; &amp; y)</p><dl class=\"facts\"><dt>Asked by</dt>\
             <dd>agent-7</dd><dt>Channel</dt><dd>m&#39;cp</dd><dt>Opened</dt><dd>",
            ">1 min ago</time></dd><dt>Expires</dt><dd>",
            ">in 1 h</time></dd></dl><p class=\"args-label\">Arguments</p>\
             <pre class=\"args\">{\n  &quot;note&quot;: &quot;it&#39;s &lt;b&gt;&quot;\n}</pre>\
             <form class=\"decide\" method=\"post\" action=\"/approvals/a%2Fb%271\" \
             data-passkey data-challenge=\"/approvals/a%2Fb%271/challenge\">\
             <input type=\"hidden\" name=\"csrf\" value=\"cs&quot;rf\">\
             <label for=\"reason-a/b&#39;1\">",
            "maxlength=\"500\" autocomplete=\"off\"><p class=\"effect\">Grant runs nothing \
             now: the caller&#39;s retry runs this call once, with these arguments, until it \
             expires. Reject: it never runs, and the caller is told who rejected it and \
             why.</p><div class=\"buttons\">",
            "</div></form><p class=\"id mono\">ID a/b&#39;1</p></article></section>\
             <h2>Recent decisions</h2><p class=\"empty\" id=\"no-decisions\">No decisions \
             yet.</p></div></main>",
        ] {
            assert!(page.contains(fragment), "{fragment}\n\n{page}");
        }
        // Parked before the tool's facts were kept: no badges, description, client or
        // server, and nothing in their place.
        for absent in [
            "class=\"badges\"",
            "class=\"description\"",
            "<dt>Client</dt>",
            "<dt>Server</dt>",
        ] {
            assert!(!page.contains(absent), "{absent}\n\n{page}");
        }
        // The refresh is off: no script, no status line, no refresh attributes.
        assert!(!page.contains("refresh.js"));
        assert!(!page.contains("refresh-status"));
        assert!(!page.contains("data-refresh-ms"));
    }

    /// A parked call that carries the tool's facts and the caller's client, hostile text in
    /// each.
    fn parked_with_facts(id: &str, mutating: bool, upstream: Option<&str>) -> Value {
        let mut record = parked(id, "agent-7", "pending");
        let call = record["payload"]["parked_call"].as_object_mut().unwrap();
        call.insert(
            "description".into(),
            json!("Deletes <b>everything</b>\n& more"),
        );
        call.insert("mutating".into(), json!(mutating));
        if let Some(upstream) = upstream {
            call.insert("upstream".into(), json!(upstream));
        }
        call.insert("client".into(), json!("claude'<script>"));
        call.insert("server".into(), json!("o\"ps"));
        record
    }

    #[test]
    fn a_card_shows_its_badges_description_client_and_server_escaped() {
        let mutating = approval(parked_with_facts("m1", true, Some("fi<l>es")));
        let reading = approval(parked_with_facts("r1", false, None));
        let viewer = viewer(false);
        let pending = [mutating, reading];
        let live = Live::new(
            &viewer,
            &pending,
            false,
            &[],
            &Redactor::default(),
            NOW,
            Duration::from_millis(1500),
        );
        let page = without_style(queue_page(&viewer, None, live));
        for fragment in [
            "<script src=\"/approvals/refresh.js\" defer></script></head>",
            "<div id=\"live\" data-refresh-ms=\"1500\" data-refresh-url=\"/approvals/live\">\
             <h1>",
            "<p class=\"summary mono\">deploy(<wbr>env=&#39;prod&#39;, \
             note=&lt;b&gt;&quot;x&quot; &amp; y)</p><p class=\"badges\"><span class=\"badge \
             mutating\" title=\"This tool changes state: it writes, deletes or sends \
             something.\">Mutating</span><span class=\"badge upstream\" title=\"The call is \
             forwarded to this upstream MCP server.\">Upstream <b>fi&lt;l&gt;es</b></span></p>\
             <p class=\"description\">Deletes &lt;b&gt;everything&lt;/b&gt;\n&amp; more</p>\
             <dl class=\"facts\"><dt>Asked by</dt><dd>agent-7</dd><dt>Client</dt>\
             <dd class=\"client\">claude&#39;&lt;script&gt;</dd><dt>Server</dt>\
             <dd class=\"server\">o&quot;ps</dd><dt>Channel</dt><dd>m&#39;cp</dd>",
            "<p class=\"badges\"><span class=\"badge read-only\" title=\"This tool only \
             reads.\">Read-only</span></p>",
            "</section><h2>Recent decisions</h2><p class=\"empty\" id=\"no-decisions\">No \
             decisions yet.</p></div><p class=\"refresh-status\" id=\"refresh-status\" \
             role=\"status\" hidden></p></main>",
        ] {
            assert!(page.contains(fragment), "{fragment}\n\n{page}");
        }
        assert!(!page.contains("<script>"), "{page}");
        // The live part alone is the same list, without the frame.
        let live = Live::new(
            &viewer,
            &pending,
            false,
            &[],
            &Redactor::default(),
            NOW,
            Duration::from_millis(1500),
        );
        let fragment = live_list(&viewer, live);
        assert!(fragment.starts_with(
            "<div id=\"live\" data-refresh-ms=\"1500\" data-refresh-url=\"/approvals/live\">\
             <h1>Waiting for a decision <span class=\"count\" id=\"pending-count\">2</span>"
        ));
        assert!(fragment.ends_with("</div>"), "{fragment}");
        assert!(fragment.contains("data-approval-id=\"m1\""));
        assert!(!fragment.contains("<html"));
    }

    #[test]
    fn a_verification_requests_effect_line_says_what_a_grant_counts_for() {
        let record = json!({
            "id": "v1", "subject": "Open the vault", "policy": "single",
            "required_grants": 1, "requested_by": "agent-7", "payload": {},
            "status": "pending", "grants": [], "rejection": null,
            "created_at_ms": NOW - 5_000, "resolved_at_ms": null, "revision": 0
        });
        let request = approval(record);
        let viewer = viewer(false);
        let live = Live::new(
            &viewer,
            std::slice::from_ref(&request),
            false,
            &[],
            &Redactor::default(),
            NOW,
            Duration::ZERO,
        );
        let page = queue_page(&viewer, None, live);
        assert!(
            page.contains(
                "<p class=\"effect\">Grant counts as your approval of this request; Reject \
                 refuses it for good.</p>"
            ),
            "{page}"
        );
        assert!(!page.contains("class=\"badges\""));
    }

    #[test]
    fn ones_own_request_gets_no_form_and_a_decision_row_joins_its_meta() {
        let mine = approval(parked("mine", "al'ice", "pending"));
        let mut record = parked("done", "agent-7", "passed");
        record["grants"] = json!([{"principal": "b<o>b", "reason": "'fine'", "at_ms": NOW}]);
        record["resolved_at_ms"] = json!(NOW - 30_000);
        let granted = approval(record);
        let viewer = viewer(false);
        let live = Live::new(
            &viewer,
            std::slice::from_ref(&mine),
            false,
            std::slice::from_ref(&granted),
            &Redactor::default(),
            NOW,
            Duration::ZERO,
        );
        let page = queue_page(&viewer, None, live);
        assert!(!page.contains("passkeys.js"));
        assert!(!page.contains("passkey-host"));
        assert!(page.contains(
            "</pre><p class=\"note\">You asked for this; another person must decide.</p>\
             <p class=\"id mono\">ID mine</p>"
        ));
        assert!(page.contains(
            "<ol class=\"history\" id=\"decisions\"><li data-decided-id=\"done\">\
             <span class=\"badge granted\">Granted, not run yet</span>\
             <p class=\"summary mono\">deploy(<wbr>"
        ));
        assert!(page.contains("<p class=\"meta\">by <b>b&lt;o&gt;b</b> · <time datetime=\""));
        assert!(
            page.contains(
                "30 s ago</time> · asked by agent-7</p><p class=\"reason\">“&#39;fine&#39;”</p>\
             </li></ol></div></main></body></html>"
            ),
            "{page}"
        );
    }

    #[test]
    fn a_decided_item_says_what_became_of_it() {
        let mut record = parked("r", "agent-7", "failed");
        record["rejection"] = json!({"principal": "carol", "reason": "no <way>", "at_ms": NOW});
        record["resolved_at_ms"] = json!(NOW - 120_000);
        let page = item_page(
            &viewer(false),
            Some(&Notice::Refused("late".into())),
            &approval(record),
            &Redactor::default(),
            NOW,
        );
        assert!(page.contains(
            "<a class=\"back\" href=\"/approvals\">&larr; All approvals</a>\
             <p class=\"notice refused\" role=\"alert\" id=\"notice\">late</p>\
             <article class=\"card\" data-decided-id=\"r\">"
        ));
        assert!(
            page.contains(
                "<p class=\"notice info\" id=\"outcome\">Already decided: rejected by carol \
             2 min ago (“no &lt;way&gt;”).</p><dl class=\"facts\">"
            ),
            "{page}"
        );
        assert!(!page.contains("<dt>Expires</dt>"));
        assert!(!page.contains("name=\"decision\""));
    }

    #[test]
    fn enrolment_missing_and_message_pages_escape_their_values() {
        let enrol = enrol_page(
            &viewer(true),
            "to/k'en",
            "ac<t>or",
            Some("{\"a\":\"b'\"}"),
            Some("host <note>"),
        );
        assert!(enrol.contains("<b id=\"enrol-actor\">ac&lt;t&gt;or</b>. From then on"));
        assert!(enrol.contains(
            "<p class=\"notice refused\" role=\"alert\" id=\"passkey-host\">host &lt;note&gt;</p>\
             <form id=\"passkey-enroll\" method=\"post\" action=\"/approvals/enroll/to%2Fk%27en\" \
             data-options=\"{&quot;a&quot;:&quot;b&#39;&quot;}\">"
        ));
        let missing = missing_page(&viewer(false), None, "<id'>");
        assert!(missing.contains(
            "<h1>Not found</h1><p class=\"empty\">No approval has the id \
             <code>&lt;id&#39;&gt;</code>."
        ));
        let message = without_style(message_page(None, "Ti'tle", "Me<ss>age"));
        assert!(message.contains("<title>Ti&#39;tle · milpa approvals</title>"));
        assert!(message.ends_with(
            "</div></header><main class=\"wrap\"><a class=\"back\" href=\"/approvals\">\
             &larr; All approvals</a><h1>Ti&#39;tle</h1>\
             <p class=\"notice refused\" role=\"alert\">Me&lt;ss&gt;age</p></main></body></html>"
        ));
    }

    /// A change of the upstream `fs`'s tool `read` (served as `fs__read`) from `previous`
    /// to `current`, held in a queue of its own.
    async fn held_change(kind: DefinitionKind, previous: Value, current: Value) -> Approval {
        let pin = PinnedDefinition::new("fs", kind, "read", previous, 1);
        let (approval, opened) = ApprovalQueue::in_memory()
            .hold_change(DefinitionChange::new(&pin, "fs", "fs__read", current))
            .await
            .unwrap();
        assert!(opened);
        approval
    }

    #[test]
    fn the_cards_diff_lines_are_classed_escaped_and_cut() {
        let lines = diff_lines("--- pinned\n+++ offered\n@@ -1 +1 @@\n-a\u{202e}b\n+c\n d\n");
        let shown: Vec<(&str, &str)> = lines
            .iter()
            .map(|line| (line.class, line.text.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                ("head", "--- pinned\n"),
                ("head", "+++ offered\n"),
                ("hunk", "@@ -1 +1 @@\n"),
                ("del", "-a\\u{202e}b\n"),
                ("add", "+c\n"),
                ("same", " d\n"),
            ]
        );
        let long = format!("--- pinned\n+++ offered\n{}", "+x\n".repeat(MAX_DIFF_SHOWN));
        let lines = diff_lines(&long);
        let last = lines.last().unwrap();
        assert_eq!(last.class, "cut");
        assert!(last.text.starts_with("… cut: "), "{}", last.text);
        assert!(lines.len() < MAX_DIFF_SHOWN / 2);
    }

    #[tokio::test]
    async fn a_change_card_shows_the_upstream_both_descriptions_and_the_diff_escaped() {
        let previous = read_tool("Reads a file", json!({"path": {"type": "string"}}));
        let current = read_tool(
            "Reads a file. <script>alert('x')</script>",
            json!({"path": {"type": "string"}, "<b>\u{202e}": {"type": "string"}}),
        );
        let held = held_change(DefinitionKind::Tool, previous, current).await;
        let id = held.id().to_owned();
        let viewer = viewer(false);
        let live = Live::new(
            &viewer,
            std::slice::from_ref(&held),
            false,
            &[],
            &Redactor::default(),
            NOW,
            Duration::ZERO,
        );
        let page = without_style(queue_page(&viewer, None, live));
        for fragment in [
            format!(
                "<article class=\"card waiting\" data-approval-id=\"{id}\"><p class=\"kind\">\
                 Changed tool · <span class=\"tool\">fs__read</span></p>\
                 <p class=\"summary mono\">upstream &#39;fs&#39; changed tool \
                 &#39;fs__read&#39;</p><p class=\"badges\"><span class=\"badge upstream\" \
                 title=\"The upstream MCP server that changed it.\">Upstream <b>fs</b></span>\
                 </p><dl class=\"change\"><dt>Description was</dt><dd class=\"description\">\
                 Reads a file</dd><dt>Description now</dt><dd class=\"description\">Reads a \
                 file. &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;</dd></dl>"
            ),
            "<pre class=\"diff\"><span class=\"head\">--- pinned\n</span>\
             <span class=\"head\">+++ offered\n</span><span class=\"hunk\">@@ "
                .to_owned(),
            "<span class=\"add\">+      &quot;&lt;b&gt;\\u{202e}&quot;: {\n</span>\
             <span class=\"add\">+        &quot;type&quot;: &quot;string&quot;\n</span>\
             <span class=\"add\">+      },\n</span><span class=\"same\">       \
             &quot;path&quot;: {\n</span>"
                .to_owned(),
            // Nobody asked: no "Asked by" (and no expiry: a change waits for a person).
            "</pre><dl class=\"facts\"><dt>Opened</dt><dd><time datetime=\"".to_owned(),
            format!(
                "<form class=\"decide\" method=\"post\" action=\"/approvals/{id}\">\
                 <input type=\"hidden\" name=\"csrf\" value=\"cs&quot;rf\">"
            ),
            "<p class=\"effect\">Grant serves the definition the upstream offers now, and \
             pins it in place of the old one. Reject: it stays held, neither listed nor \
             callable, for as long as the upstream offers this definition.</p>\
             <div class=\"buttons\"><button class=\"grant\" type=\"submit\" name=\"decision\" \
             value=\"grant\">Grant</button><button class=\"reject\" type=\"submit\" \
             name=\"decision\" value=\"reject\">Reject</button></div></form>"
                .to_owned(),
            format!("<p class=\"id mono\">ID {id}</p></article>"),
        ] {
            assert!(page.contains(&fragment), "{fragment}\n\n{page}");
        }
        assert!(!page.contains("<script>"), "{page}");
        assert!(!page.contains("<b>\u{202e}"), "{page}");
        assert!(!page.contains("<dt>Asked by</dt>"), "{page}");
        assert!(!page.contains("<dt>Expires</dt>"), "{page}");
        // The description is beside the diff, not in it.
        assert!(!page.contains("&quot;description&quot;"), "{page}");
    }

    #[tokio::test]
    async fn a_prompt_whose_description_alone_changed_says_so() {
        let previous = json!({"name": "read", "description": "Summarise", "arguments": []});
        let current = json!({"arguments": [], "name": "read"});
        let held = held_change(DefinitionKind::Prompt, previous, current).await;
        let page = item_page(&viewer(false), None, &held, &Redactor::default(), NOW);
        for fragment in [
            "<p class=\"kind\">Changed prompt · <span class=\"tool\">fs__read</span></p>",
            "<dt>Description was</dt><dd class=\"description\">Summarise</dd>\
             <dt>Description now</dt><dd class=\"description\"><i>none</i></dd></dl>\
             <p class=\"note unchanged\">Only the description changed; the rest of the \
             definition is as pinned.</p><dl class=\"facts\"><dt>Opened</dt>",
            "name=\"decision\" value=\"grant\"",
            "name=\"decision\" value=\"reject\"",
        ] {
            assert!(page.contains(fragment), "{fragment}\n\n{page}");
        }
        assert!(!page.contains("class=\"diff\""), "{page}");
    }
}
