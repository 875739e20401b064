//! The page's HTML, rendered on the server: no external resource, one inline stylesheet
//! (`style.css`), and no script except `/approvals/passkeys.js` on the pages of an approver
//! with a passkey (and the enrolment page), which carries WebAuthn options and answers. Every text the page did not write itself goes through
//! [`esc`]; summaries and arguments come from agents and are hostile input.

use std::fmt::Write as _;

use milpa::approval::{Approval, ApprovalKind, ApprovalState, rfc3339};
use milpa::audit::Redactor;

use super::escape::{esc, path_segment};
use super::relative_time;

/// The stylesheet, inlined in every page (`style-src 'unsafe-inline'` in the page's CSP).
const STYLE: &str = include_str!("style.css");

/// The passkey script, from the page's own path (`script-src 'self'`), run after parsing.
const PASSKEY_SCRIPT_TAG: &str = "<script src=\"/approvals/passkeys.js\" defer></script>";

/// How much of a parked call's arguments a card shows; the rest is cut with a marker.
const MAX_ARGS_SHOWN: usize = 8 * 1024;

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

/// The login page.
pub(crate) fn login_page(form: &LoginForm<'_>) -> String {
    let mut body = String::from(
        "<main class=\"wrap\"><div class=\"login card\">\
         <h1>Sign in</h1>\
         <p class=\"lead\">To see and decide the actions waiting for a person, sign in with a \
         bearer token this server knows.</p>",
    );
    if let Some(message) = form.message {
        let _ = write!(
            body,
            "<p class=\"notice refused\" role=\"alert\">{}</p>",
            esc(message)
        );
    }
    if form.available {
        let _ = write!(
            body,
            "<form method=\"post\" action=\"/approvals/login\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <input type=\"hidden\" name=\"next\" value=\"{next}\">\
             <label for=\"token\">Token</label>\
             <input id=\"token\" type=\"password\" name=\"token\" required autofocus \
             autocomplete=\"current-password\" autocapitalize=\"off\" spellcheck=\"false\">\
             <button class=\"primary\" type=\"submit\">Sign in</button>\
             </form>",
            csrf = esc(form.csrf),
            next = esc(form.next),
        );
    } else {
        body.push_str(
            "<p class=\"note\">This server has no tokens configured, so nobody can sign in \
             here. Decide approvals with <code>milpa approvals</code> on the server's machine, \
             or start the server with tokens.</p>",
        );
    }
    body.push_str("</div></main>");
    document("Sign in", None, &body)
}

/// The queue: what waits for a decision (`more`: and more than shown), then the last
/// decisions.
pub(crate) fn queue_page(
    viewer: &Viewer<'_>,
    notice: Option<&Notice>,
    pending: &[Approval],
    more: bool,
    decided: &[Approval],
    redactor: &Redactor,
    now_ms: u64,
) -> String {
    let mut body = String::from("<main class=\"wrap\">");
    notice_html(&mut body, notice);
    scope_note(&mut body, viewer);
    passkey_note(&mut body, viewer);
    let _ = write!(
        body,
        "<h1>Waiting for a decision <span class=\"count\" id=\"pending-count\">{}{}</span></h1>",
        pending.len(),
        if more { "+" } else { "" }
    );
    if pending.is_empty() {
        body.push_str("<p class=\"empty\">Nothing is waiting for a decision.</p>");
    }
    if more {
        let _ = write!(
            body,
            "<p class=\"notice info\">Showing the {} oldest; more are waiting. \
             <code>milpa approvals</code> lists them all.</p>",
            pending.len()
        );
    }
    body.push_str("<section id=\"pending\">");
    for approval in pending {
        pending_card(&mut body, viewer, approval, redactor, now_ms);
    }
    body.push_str("</section><h2>Recent decisions</h2>");
    if decided.is_empty() {
        body.push_str("<p class=\"empty\">No decisions yet.</p>");
    } else {
        body.push_str("<ol class=\"history\" id=\"decisions\">");
        for approval in decided {
            decision_row(&mut body, approval, now_ms);
        }
        body.push_str("</ol>");
    }
    body.push_str("</main>");
    document("Approvals", Some(viewer), &body)
}

/// One approval, as the `approve_url` of a parked call shows it.
pub(crate) fn item_page(
    viewer: &Viewer<'_>,
    notice: Option<&Notice>,
    approval: &Approval,
    redactor: &Redactor,
    now_ms: u64,
) -> String {
    let mut body = String::from(
        "<main class=\"wrap\"><a class=\"back\" href=\"/approvals\">&larr; All approvals</a>",
    );
    notice_html(&mut body, notice);
    match approval.state(now_ms) {
        ApprovalState::Pending => {
            scope_note(&mut body, viewer);
            pending_card(&mut body, viewer, approval, redactor, now_ms);
        }
        state => decided_card(&mut body, approval, state, redactor, now_ms),
    }
    body.push_str("</main>");
    document(approval.summary(), Some(viewer), &body)
}

/// The page for an id no approval has.
pub(crate) fn missing_page(viewer: &Viewer<'_>, notice: Option<&Notice>, id: &str) -> String {
    let mut body = String::from(
        "<main class=\"wrap\"><a class=\"back\" href=\"/approvals\">&larr; All approvals</a>",
    );
    notice_html(&mut body, notice);
    let _ = write!(
        body,
        "<h1>Not found</h1><p class=\"empty\">No approval has the id <code>{}</code>. \
         The link may be wrong, or the approval may have been removed.</p></main>",
        esc(id)
    );
    document("Not found", Some(viewer), &body)
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
    let mut body = format!(
        "<main class=\"wrap\"><a class=\"back\" href=\"/approvals\">&larr; All approvals</a>\
         <h1>Enrol a passkey</h1><p class=\"lead\">This link enrols a passkey for \
         <b id=\"enrol-actor\">{}</b>. From then on every grant and reject you make needs it \
         (with your PIN or biometrics), here on this page; nothing else decides for you, \
         not the shell and not a token alone.</p>",
        esc(actor)
    );
    if let Some(note) = host_note {
        let _ = write!(
            body,
            "<p class=\"notice refused\" role=\"alert\" id=\"passkey-host\">{}</p>",
            esc(note)
        );
    }
    if let Some(options) = options {
        let _ = write!(
            body,
            "<form id=\"passkey-enroll\" method=\"post\" action=\"/approvals/enroll/{token}\" \
             data-options=\"{options}\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <input type=\"hidden\" name=\"credential\" value=\"\">\
             <button class=\"primary\" type=\"submit\">Create a passkey</button></form>",
            token = esc(&path_segment(token)),
            options = esc(options),
            csrf = esc(viewer.csrf),
        );
    }
    body.push_str("</main>");
    document("Enrol a passkey", Some(viewer), &body)
}

/// A page that only says what went wrong (the store failed, a form could not be read).
pub(crate) fn message_page(viewer: Option<&Viewer<'_>>, title: &str, message: &str) -> String {
    let body = format!(
        "<main class=\"wrap\"><a class=\"back\" href=\"/approvals\">&larr; All approvals</a>\
         <h1>{}</h1><p class=\"notice refused\" role=\"alert\">{}</p></main>",
        esc(title),
        esc(message)
    );
    document(title, viewer, &body)
}

fn document(title: &str, viewer: Option<&Viewer<'_>>, body: &str) -> String {
    let mut page = String::with_capacity(STYLE.len() + body.len() + 1024);
    let _ = write!(
        page,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"referrer\" content=\"same-origin\">\
         <title>{} · milpa approvals</title><style>{STYLE}</style>{script}</head><body>\
         <header class=\"bar\"><div class=\"wrap\">\
         <a class=\"brand\" href=\"/approvals\">milpa <span>approvals</span></a>",
        esc(title),
        script = if viewer.is_some_and(|v| v.passkey) {
            PASSKEY_SCRIPT_TAG
        } else {
            ""
        },
    );
    if let Some(viewer) = viewer {
        let _ = write!(
            page,
            "<div class=\"who\"><span><span class=\"label\">Signed in as </span>\
             <b id=\"principal\">{principal}</b></span>\
             <form method=\"post\" action=\"/approvals/logout\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <button class=\"quiet\" type=\"submit\">Log out</button></form></div>",
            principal = esc(viewer.principal),
            csrf = esc(viewer.csrf),
        );
    }
    page.push_str("</div></header>");
    page.push_str(body);
    page.push_str("</body></html>");
    page
}

fn notice_html(body: &mut String, notice: Option<&Notice>) {
    match notice {
        Some(Notice::Done(text)) => {
            let _ = write!(
                body,
                "<p class=\"notice done\" role=\"status\" id=\"notice\">{}</p>",
                esc(text)
            );
        }
        Some(Notice::Refused(text)) => {
            let _ = write!(
                body,
                "<p class=\"notice refused\" role=\"alert\" id=\"notice\">{}</p>",
                esc(text)
            );
        }
        None => {}
    }
}

fn passkey_note(body: &mut String, viewer: &Viewer<'_>) {
    if let Some(note) = viewer
        .passkey_host_note
        .as_deref()
        .filter(|_| viewer.passkey)
    {
        let _ = write!(
            body,
            "<p class=\"notice info\" id=\"passkey-host\">{}</p>",
            esc(note)
        );
    }
}

fn scope_note(body: &mut String, viewer: &Viewer<'_>) {
    if !viewer.may_decide {
        body.push_str(
            "<p class=\"notice info\">Your token does not carry the scope \
             <code>approvals:grant</code>: you can see what waits, but not decide.</p>",
        );
    }
}

/// A summary, escaped, that may wrap after its opening parenthesis: on a phone a long
/// `tool(first_argument=…` would otherwise break in the middle of a name.
fn summary_html(summary: &str) -> String {
    // `(` never occurs in an escape sequence, so the markup cannot split one.
    esc(summary).to_string().replacen('(', "(<wbr>", 1)
}

/// The line above the summary: what kind of approval, and for a call, which tool.
fn kind_line(approval: &Approval) -> String {
    match (approval.kind(), approval.tool()) {
        (ApprovalKind::ToolCall, Some(tool)) => {
            format!("Tool call · <span class=\"tool\">{}</span>", esc(tool))
        }
        (ApprovalKind::Verification, _) => "Verification request".to_owned(),
        _ => "Approval".to_owned(),
    }
}

/// A card for an approval still waiting: what, who, when, the arguments, and the decision
/// form or why there is none.
fn pending_card(
    body: &mut String,
    viewer: &Viewer<'_>,
    approval: &Approval,
    redactor: &Redactor,
    now_ms: u64,
) {
    let id = approval.id();
    let _ = write!(
        body,
        "<article class=\"card waiting\" data-approval-id=\"{id}\">\
         <p class=\"kind\">{kind}</p><p class=\"summary mono\">{summary}</p>",
        id = esc(id),
        kind = kind_line(approval),
        summary = summary_html(approval.summary()),
    );
    facts(body, approval, now_ms);
    arguments(body, approval, redactor);
    if viewer.decides(approval) {
        let passkey = if viewer.passkey {
            format!(
                " data-passkey data-challenge=\"/approvals/{}/challenge\"",
                esc(&path_segment(id))
            )
        } else {
            String::new()
        };
        let _ = write!(
            body,
            "<form class=\"decide\" method=\"post\" action=\"/approvals/{segment}\"{passkey}>\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <label for=\"reason-{id}\">Reason <span>(optional, kept in the audit trail)</span></label>\
             <input id=\"reason-{id}\" type=\"text\" name=\"reason\" maxlength=\"{max}\" \
             autocomplete=\"off\">\
             <div class=\"buttons\">\
             <button class=\"grant\" type=\"submit\" name=\"decision\" value=\"grant\">Grant</button>\
             <button class=\"reject\" type=\"submit\" name=\"decision\" value=\"reject\">Reject</button>\
             </div></form>",
            id = esc(id),
            segment = esc(&path_segment(id)),
            csrf = esc(viewer.csrf),
            max = super::MAX_REASON_CHARS,
        );
    } else if approval.requested_by() == Some(viewer.principal) {
        body.push_str("<p class=\"note\">You asked for this; another person must decide.</p>");
    }
    let _ = write!(body, "<p class=\"id mono\">ID {}</p></article>", esc(id));
}

/// A card for a decided or expired approval (the item page).
fn decided_card(
    body: &mut String,
    approval: &Approval,
    state: ApprovalState,
    redactor: &Redactor,
    now_ms: u64,
) {
    let _ = write!(
        body,
        "<article class=\"card\" data-decided-id=\"{id}\">\
         <p class=\"kind\">{kind}</p><p class=\"summary mono\">{summary}</p>",
        id = esc(approval.id()),
        kind = kind_line(approval),
        summary = summary_html(approval.summary()),
    );
    let outcome = match state {
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
    };
    let _ = write!(
        body,
        "<p class=\"notice info\" id=\"outcome\">{}</p>",
        esc(&outcome)
    );
    facts(body, approval, now_ms);
    arguments(body, approval, redactor);
    let _ = write!(
        body,
        "<p class=\"id mono\">ID {}</p></article>",
        esc(approval.id())
    );
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

fn facts(body: &mut String, approval: &Approval, now_ms: u64) {
    body.push_str("<dl class=\"facts\">");
    let mut fact = |label: &str, value: &str| {
        let _ = write!(body, "<dt>{label}</dt><dd>{}</dd>", esc(value));
    };
    fact("Asked by", approval.requested_by().unwrap_or("anonymous"));
    if let Some(channel) = approval.channel() {
        fact("Channel", channel);
    }
    let created = approval.created_at_ms();
    let _ = write!(
        body,
        "<dt>Opened</dt><dd><time datetime=\"{at}\" title=\"{at}\">{ago}</time></dd>",
        at = rfc3339(created),
        ago = relative_time::ago(created, now_ms),
    );
    match approval.expires_at_ms() {
        Some(expires) if approval.state(now_ms) == ApprovalState::Pending => {
            let _ = write!(
                body,
                "<dt>Expires</dt><dd><time datetime=\"{at}\" title=\"{at}\">{left}</time></dd>",
                at = rfc3339(expires),
                left = relative_time::remaining(expires, now_ms),
            );
        }
        _ => {}
    }
    body.push_str("</dl>");
}

fn arguments(body: &mut String, approval: &Approval, redactor: &Redactor) {
    let Some(args) = approval.redacted_args(redactor) else {
        return;
    };
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
    let _ = write!(
        body,
        "<p class=\"args-label\">Arguments</p><pre class=\"args\">{}</pre>",
        esc(&text)
    );
}

fn decision_row(body: &mut String, approval: &Approval, now_ms: u64) {
    let state = approval.state(now_ms);
    let badge = match state {
        ApprovalState::Granted | ApprovalState::Executed => "granted",
        ApprovalState::Rejected => "rejected",
        _ => "other",
    };
    let _ = write!(
        body,
        "<li data-decided-id=\"{id}\"><span class=\"badge {badge}\">{label}</span>\
         <p class=\"summary mono\">{summary}</p><p class=\"meta\">",
        id = esc(approval.id()),
        label = state_label(approval, state),
        summary = summary_html(approval.summary()),
    );
    let mut meta = Vec::new();
    if let Some((by, _)) = approval.decided_by() {
        meta.push(format!("by <b>{}</b>", esc(by)));
    }
    if let Some(at) = approval.decided_at_ms() {
        meta.push(format!(
            "<time datetime=\"{at}\" title=\"{at}\">{ago}</time>",
            at = rfc3339(at),
            ago = relative_time::ago(at, now_ms)
        ));
    }
    if let Some(requester) = approval.requested_by() {
        meta.push(format!("asked by {}", esc(requester)));
    }
    body.push_str(&meta.join(" · "));
    body.push_str("</p>");
    if let Some((_, Some(reason))) = approval.decided_by() {
        let _ = write!(
            body,
            "<p class=\"reason\">\u{201c}{}\u{201d}</p>",
            esc(reason)
        );
    }
    body.push_str("</li>");
}
