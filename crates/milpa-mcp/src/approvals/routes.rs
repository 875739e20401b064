//! The page's handlers: the queue, one item, login, logout and a decision.
//!
//! Forms follow POST/redirect/GET: a decision that goes through answers `303` to the queue
//! and the session keeps a notice for that page; a refused one is answered at once with
//! the item, the reason and the status that says which refusal (nothing changed).

use std::sync::Arc;

use axum::body::Body;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::Extension;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use milpa::ToolContext;
use milpa::approval::{APPROVE_SCOPE, Approval, ApprovalError, ApprovalState, Verdict};
use milpa::confirm::unix_millis;

use super::logins::Login;
use super::render::{self, LoginForm, Notice, Viewer};
use super::security_headers::with_script_policy;
use super::signed_in_form::{self, FormRefusal, SignedInForm};
use super::{MAX_REASON_CHARS, PAGE_PATH, PageState, cookies, form};
use crate::listener::throttle::retry_after_secs;

/// How many pending items the queue shows.
const PENDING_SHOWN: usize = 100;

/// How many past decisions the queue shows.
const DECISIONS_SHOWN: usize = 20;

/// `GET /approvals`: the login form, or the queue.
pub(crate) async fn queue(State(page): State<Arc<PageState>>, headers: HeaderMap) -> Response {
    let Some(login) = page.login(&headers) else {
        return login_form(
            &page,
            &headers,
            StatusCode::OK,
            PAGE_PATH,
            None,
            page.can_log_in(),
        );
    };
    queue_response(&page, &login, &headers, StatusCode::OK).await
}

/// `GET /approvals/{id}`: one approval (where an `approve_url` leads).
pub(crate) async fn item(
    State(page): State<Arc<PageState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(login) = page.login(&headers) else {
        let next = item_path(&id);
        return login_form(
            &page,
            &headers,
            StatusCode::OK,
            &next,
            None,
            page.can_log_in(),
        );
    };
    let notice = page.logins.take_notice(&login.id);
    item_response(&page, &login, &headers, &id, StatusCode::OK, notice).await
}

/// `GET /approvals/login`: there is nothing to get; the form is on the queue's page.
pub(crate) async fn login_get() -> Response {
    see_other(PAGE_PATH, None)
}

/// `POST /approvals/login`: a token from the form becomes a session, if it carries
/// [`APPROVE_SCOPE`] (the page is for approvers; a token without it is refused, so nobody
/// without it sees the queue).
pub(crate) async fn login(
    State(page): State<Arc<PageState>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let available = page.can_log_in();
    // Without connect info (a router served without it) every client shares one count:
    // failures are still throttled, never let through uncounted.
    let client = peer.map_or(
        IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        |Extension(ConnectInfo(addr))| addr.ip(),
    );
    if let Some(wait) = page.sign_in_throttle.retry_after(client) {
        tracing::warn!(target: "milpa_mcp", client = %client, "approvals page: sign-in refused: too many failed sign-ins from this address");
        let seconds = retry_after_secs(wait);
        let mut response = login_form(
            &page,
            &headers,
            StatusCode::TOO_MANY_REQUESTS,
            PAGE_PATH,
            Some(&format!(
                "Too many failed sign-ins from your address; try again in {seconds} s."
            )),
            available,
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        return response;
    }
    let form = match form::read(&headers, body, page.body_read_timeout).await {
        Ok(form) => form,
        Err(error) => {
            return login_form(
                &page,
                &headers,
                error.status(),
                PAGE_PATH,
                Some(&error.message()),
                available,
            );
        }
    };
    let next = safe_next(form.get("next"));
    let expected = cookies::read(&headers, cookies::LOGIN_CSRF).unwrap_or("");
    if !page
        .login_csrf
        .verify(expected, form.get("csrf").unwrap_or(""), now_ms())
    {
        tracing::warn!(target: "milpa_mcp", client = %client, "approvals page: sign-in with a missing, unsigned or expired form token refused");
        page.sign_in_throttle.failed(client);
        return login_form(
            &page,
            &headers,
            StatusCode::FORBIDDEN,
            &next,
            Some("The sign-in form expired or did not come from this page. Please try again."),
            available,
        );
    }
    let Some(auth) = &page.auth else {
        return login_form(
            &page,
            &headers,
            StatusCode::UNAUTHORIZED,
            &next,
            Some("This server has no tokens configured, so nobody can sign in here."),
            available,
        );
    };
    let token = form.get("token").unwrap_or("").trim();
    let identity = if token.is_empty() {
        None
    } else {
        auth.authenticate(token).await
    };
    let Some(identity) = identity else {
        tracing::warn!(target: "milpa_mcp", client = %client, "approvals page: sign-in with an unknown token refused");
        page.sign_in_throttle.failed(client);
        let message = if token.is_empty() {
            "Enter a token."
        } else {
            "This server does not know that token."
        };
        return login_form(
            &page,
            &headers,
            StatusCode::UNAUTHORIZED,
            &next,
            Some(message),
            available,
        );
    };
    if !ToolContext::web(identity.principal.clone(), identity.scopes.clone())
        .has_scope(APPROVE_SCOPE)
    {
        tracing::warn!(target: "milpa_mcp", client = %client, principal = %identity.principal, "approvals page: sign-in without approvals:grant refused");
        page.sign_in_throttle.failed(client);
        return login_form(
            &page,
            &headers,
            StatusCode::FORBIDDEN,
            &next,
            Some(&format!(
                "This token does not carry the scope {APPROVE_SCOPE}; the approvals page is \
                 only for approvers."
            )),
            available,
        );
    }
    tracing::info!(target: "milpa_mcp", client = %client, principal = %identity.principal, "approvals page: signed in");
    page.sign_in_throttle.succeeded(client);
    let login = page.logins.start(identity);
    let secure = cookies::over_https(&headers);
    let mut response = see_other(
        &next,
        Some(cookies::set(cookies::SESSION, &login.id, secure)),
    );
    response.headers_mut().append(
        header::SET_COOKIE,
        cookies::clear(cookies::LOGIN_CSRF, secure),
    );
    response
}

/// `POST /approvals/logout`: ends the session.
pub(crate) async fn logout(
    State(page): State<Arc<PageState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let secure = cookies::over_https(&headers);
    let login = match signed_in_form::read(&page, &headers, body).await {
        Ok(SignedInForm { login, .. }) => login,
        Err(FormRefusal::NotSignedIn) => {
            return see_other(PAGE_PATH, Some(cookies::clear(cookies::SESSION, secure)));
        }
        Err(FormRefusal::Unreadable(login, error)) => {
            return message(&login, error.status(), "Not signed out", &error.message());
        }
        Err(FormRefusal::ForeignForm(login)) => {
            return message(
                &login,
                StatusCode::FORBIDDEN,
                "Not signed out",
                "The form did not come from this session; you are still signed in.",
            );
        }
    };
    page.logins.end(&login.id);
    see_other(PAGE_PATH, Some(cookies::clear(cookies::SESSION, secure)))
}

/// `POST /approvals/{id}`: a person's decision.
pub(crate) async fn decide(
    State(page): State<Arc<PageState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (login, form) = match signed_in_form::read(&page, &headers, body).await {
        Ok(SignedInForm { login, form }) => (login, form),
        Err(FormRefusal::NotSignedIn) => {
            return login_form(
                &page,
                &headers,
                StatusCode::UNAUTHORIZED,
                &item_path(&id),
                Some("You are not signed in (or your session ended); nothing was decided."),
                page.can_log_in(),
            );
        }
        Err(FormRefusal::Unreadable(login, error)) => {
            let notice = Notice::Refused(error.message());
            return item_response(&page, &login, &headers, &id, error.status(), Some(notice)).await;
        }
        Err(FormRefusal::ForeignForm(login)) => {
            let notice = Notice::Refused(
                "This form did not come from your current session (its CSRF token is missing or \
                 wrong); nothing was decided. Reload the page and try again."
                    .into(),
            );
            return item_response(
                &page,
                &login,
                &headers,
                &id,
                StatusCode::FORBIDDEN,
                Some(notice),
            )
            .await;
        }
    };
    let Some(verdict) = form.get("decision").and_then(Verdict::parse) else {
        let notice = Notice::Refused("Choose Grant or Reject; nothing was decided.".into());
        return item_response(
            &page,
            &login,
            &headers,
            &id,
            StatusCode::BAD_REQUEST,
            Some(notice),
        )
        .await;
    };
    let reason = form.get("reason").map(str::trim).filter(|r| !r.is_empty());
    if reason.is_some_and(|r| r.chars().count() > MAX_REASON_CHARS) {
        let notice = Notice::Refused(format!(
            "The reason is limited to {MAX_REASON_CHARS} characters; nothing was decided."
        ));
        return item_response(
            &page,
            &login,
            &headers,
            &id,
            StatusCode::BAD_REQUEST,
            Some(notice),
        )
        .await;
    }
    if let Err((status, text)) = passkey_check(&page, &login, &id, verdict, &form).await {
        let notice = Notice::Refused(text);
        return item_response(&page, &login, &headers, &id, status, Some(notice)).await;
    }
    let approver = ToolContext::web(login.principal.clone(), login.scopes.clone());
    match page
        .registry
        .decide_approval(&id, verdict, reason, &approver)
        .await
    {
        Ok(approval) => {
            page.logins
                .set_notice(&login.id, decided_notice(&approval, verdict));
            see_other(PAGE_PATH, None)
        }
        Err(error) => {
            let status = refusal_status(&error);
            let notice = Notice::Refused(error.to_string());
            item_response(&page, &login, &headers, &id, status, Some(notice)).await
        }
    }
}

/// Where the approver enrolled a passkey, the decision must carry an assertion made for
/// this approval and verdict in this session (see [`super::passkeys`]); nothing else (a
/// session alone, however it was signed in) decides for them.
async fn passkey_check(
    page: &PageState,
    login: &Login,
    id: &str,
    verdict: Verdict,
    form: &form::Form,
) -> Result<(), (StatusCode, String)> {
    let unavailable = |error: &dyn std::error::Error| {
        tracing::warn!(target: "milpa_mcp", error = %error, "approvals page: the passkey store failed");
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "The passkey store is unavailable; nothing was decided.".to_owned(),
        )
    };
    let enrolled = page
        .passkeys
        .enrolled(&login.principal)
        .await
        .map_err(|e| unavailable(&e))?;
    if enrolled.is_empty() {
        return Ok(());
    }
    let Some(assertion) = form.get("assertion").filter(|a| !a.trim().is_empty()) else {
        return Err((
            StatusCode::FORBIDDEN,
            format!(
                "{} enrolled a passkey: each decision needs it, made in this browser for this \
                 approval (the page's Grant and Reject buttons ask for it). None came with \
                 this form; nothing was decided.",
                login.principal
            ),
        ));
    };
    match page
        .passkeys
        .finish_assertion(&login.id, id, verdict, &login.principal, assertion)
        .await
    {
        Ok(()) => Ok(()),
        Err(refusal) if refusal.is_server_side() => Err(unavailable(&refusal)),
        Err(refusal) => {
            tracing::warn!(target: "milpa_mcp", principal = %login.principal, error = %refusal, "approvals page: a decision's passkey check failed");
            Err((StatusCode::FORBIDDEN, capitalised(&refusal.to_string())))
        }
    }
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The status a refused decision is answered with.
fn refusal_status(error: &ApprovalError) -> StatusCode {
    match error {
        ApprovalError::NotFound { .. } => StatusCode::NOT_FOUND,
        ApprovalError::SelfApproval { .. }
        | ApprovalError::NotAllowed { .. }
        | ApprovalError::Anonymous => StatusCode::FORBIDDEN,
        ApprovalError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
        // Already decided, expired, a duplicate grant, a lost race: the state moved on.
        _ => StatusCode::CONFLICT,
    }
}

fn decided_notice(approval: &Approval, verdict: Verdict) -> Notice {
    let summary = approval.summary();
    Notice::Done(match (verdict, approval.state(now_ms())) {
        (Verdict::Grant, ApprovalState::Pending) => {
            format!("Your grant of {summary} is recorded; it needs more grants before it passes.")
        }
        (Verdict::Grant, _) if approval.tool().is_some() => {
            format!("Granted {summary}. It runs once, when its caller comes back for it.")
        }
        (Verdict::Grant, _) => format!("Granted {summary}."),
        (Verdict::Reject, _) => format!("Rejected {summary}. It will not run."),
        _ => format!("Decided {summary}."),
    })
}

/// What the queue shows `login`: the pending approvals (at most [`PENDING_SHOWN`], and
/// whether there are more) and the last decisions, of this server's queue; or the page
/// saying the store failed.
pub(crate) struct QueueLists {
    pub pending: Vec<Approval>,
    pub more: bool,
    pub decided: Vec<Approval>,
}

impl QueueLists {
    /// The live part of the queue for `viewer`, as seen now.
    pub(crate) fn live<'a>(&'a self, page: &PageState, viewer: &Viewer<'_>) -> render::Live<'a> {
        render::Live::new(
            viewer,
            &self.pending,
            self.more,
            &self.decided,
            page.registry.redactor(),
            now_ms(),
            page.refresh,
        )
    }
}

/// The lists of the queue as `viewer` (signed in as `login`) sees them, or the page that
/// says the store failed.
pub(crate) async fn queue_lists(
    page: &PageState,
    login: &Login,
    viewer: &Viewer<'_>,
) -> Result<QueueLists, Response> {
    let queue = page.registry.approvals();
    // One more than shown, to know whether there are more.
    // This server's queue: servers sharing a store each show their own calls.
    let here = |a: &Approval| queue.server().is_none_or(|server| a.is_for(server));
    let lists = match queue.pending_here(PENDING_SHOWN + 1).await {
        Ok(pending) => queue
            .decided(DECISIONS_SHOWN)
            .await
            .map(|d| (pending, d.into_iter().filter(here).collect())),
        Err(error) => Err(error),
    };
    let (pending, decided): (Vec<Approval>, Vec<Approval>) = match lists {
        Ok(lists) => lists,
        Err(error) => {
            return Err(message(
                login,
                StatusCode::SERVICE_UNAVAILABLE,
                "Approvals unavailable",
                &error.to_string(),
            ));
        }
    };
    let (mut pending, decided) = if viewer.may_decide {
        (pending, decided)
    } else {
        // Sign-in needs approvals:grant, so this is a second line: a session without it
        // sees only what it asked for itself.
        let own = |a: &Approval| a.requested_by() == Some(login.principal.as_str());
        (
            pending.into_iter().filter(own).collect(),
            decided.into_iter().filter(own).collect(),
        )
    };
    let more = pending.len() > PENDING_SHOWN;
    pending.truncate(PENDING_SHOWN);
    Ok(QueueLists {
        pending,
        more,
        decided,
    })
}

async fn queue_response(
    page: &PageState,
    login: &Login,
    headers: &HeaderMap,
    status: StatusCode,
) -> Response {
    let viewer = decision_viewer(page, login, headers).await;
    let lists = match queue_lists(page, login, &viewer).await {
        Ok(lists) => lists,
        Err(failed) => return failed,
    };
    // Taken once the page can be shown: a failed read keeps it for the next page.
    let notice = page.logins.take_notice(&login.id);
    let html = render::queue_page(&viewer, notice.as_ref(), lists.live(page, &viewer));
    let response = (status, Html(html)).into_response();
    if viewer.passkey || !page.refresh.is_zero() {
        with_script_policy(response)
    } else {
        response
    }
}

pub(crate) async fn item_response(
    page: &PageState,
    login: &Login,
    headers: &HeaderMap,
    id: &str,
    status: StatusCode,
    notice: Option<Notice>,
) -> Response {
    let viewer = decision_viewer(page, login, headers).await;
    let found = page.registry.approvals().get(id.trim()).await;
    // Without approvals:grant (see `queue_response`), another principal's item is not shown.
    let found = found.map(|approval| {
        approval.filter(|a| viewer.may_decide || a.requested_by() == Some(login.principal.as_str()))
    });
    match found {
        Ok(Some(approval)) => {
            let html = render::item_page(
                &viewer,
                notice.as_ref(),
                &approval,
                page.registry.redactor(),
                now_ms(),
            );
            passkey_policy(&viewer, (status, Html(html)).into_response())
        }
        Ok(None) => {
            // A refusal keeps its own status; a plain look-up of an unknown id is a 404.
            let status = if status.is_success() {
                StatusCode::NOT_FOUND
            } else {
                status
            };
            (
                status,
                Html(render::missing_page(&viewer, notice.as_ref(), id)),
            )
                .into_response()
        }
        Err(error) => message(
            login,
            StatusCode::SERVICE_UNAVAILABLE,
            "Approvals unavailable",
            &error.to_string(),
        ),
    }
}

/// The viewer of a plain page (no decision forms: no passkey script).
pub(crate) fn viewer(login: &Login) -> Viewer<'_> {
    let may_decide =
        ToolContext::web(login.principal.clone(), login.scopes.clone()).has_scope(APPROVE_SCOPE);
    Viewer {
        principal: &login.principal,
        csrf: &login.csrf,
        may_decide,
        passkey: false,
        passkey_host_note: None,
    }
}

/// The viewer of a page with decision forms: whether they run the passkey check, and
/// whether this host can (a store that cannot say counts as enrolled: the forms then ask
/// for a passkey and the decision is refused rather than let through without one).
pub(crate) async fn decision_viewer<'a>(
    page: &PageState,
    login: &'a Login,
    headers: &HeaderMap,
) -> Viewer<'a> {
    let mut viewer = viewer(login);
    viewer.passkey = page
        .passkeys
        .enrolled(&login.principal)
        .await
        .map_or(true, |keys| !keys.is_empty());
    viewer.passkey_host_note = passkey_host_note(page, headers);
    viewer
}

/// A decision page of an approver with a passkey runs the passkey script.
fn passkey_policy(viewer: &Viewer<'_>, response: Response) -> Response {
    if viewer.passkey {
        with_script_policy(response)
    } else {
        response
    }
}

/// What to tell a person whose page's host cannot use the passkeys' RP id.
pub(crate) fn passkey_host_note(page: &PageState, headers: &HeaderMap) -> Option<String> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if page.passkeys.serves_host(host) {
        return None;
    }
    let rp_id = page.passkeys.rp_id();
    let port = host
        .rsplit_once(':')
        .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
        .map(|(_, port)| format!(":{port}"))
        .unwrap_or_default();
    Some(format!(
        "Passkeys on this server belong to the name {rp_id}; a browser offers them only on a \
         page under that name. You opened the page as {host}: open \
         http://{rp_id}{port}/approvals instead (127.0.0.1 is not {rp_id} to a browser)."
    ))
}

pub(crate) fn message(login: &Login, status: StatusCode, title: &str, text: &str) -> Response {
    let html = render::message_page(Some(&viewer(login)), title, text);
    (status, Html(html)).into_response()
}

/// The login form with a fresh CSRF token (in the form and in its cookie).
pub(crate) fn login_form(
    page: &PageState,
    headers: &HeaderMap,
    status: StatusCode,
    next: &str,
    message: Option<&str>,
    available: bool,
) -> Response {
    let csrf = page.login_csrf.issue(now_ms());
    let html = render::login_page(&LoginForm {
        csrf: &csrf,
        next,
        message,
        available,
    });
    let cookie = cookies::set(cookies::LOGIN_CSRF, &csrf, cookies::over_https(headers));
    (status, [(header::SET_COOKIE, cookie)], Html(html)).into_response()
}

/// A script of the page's own, served from its path.
pub(crate) fn javascript(script: &'static str) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/javascript; charset=utf-8"),
        )],
        script,
    )
        .into_response()
}

pub(crate) fn see_other(location: &str, cookie: Option<HeaderValue>) -> Response {
    let mut response = Response::builder()
        .status(StatusCode::SEE_OTHER)
        .header(header::LOCATION, location);
    if let Some(cookie) = cookie {
        response = response.header(header::SET_COOKIE, cookie);
    }
    response
        .body(Body::empty())
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// The path of one item, for the login form's `next` (checked by [`safe_next`]).
fn item_path(id: &str) -> String {
    safe_next(Some(&format!("{PAGE_PATH}/{id}")))
}

/// Where a login may send the browser: a path of this page made of plain characters, so
/// the redirect can never leave the page (no `//host`, no scheme, no escapes).
pub(crate) fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(path)
            if (path == PAGE_PATH || path.starts_with("/approvals/"))
                && !path.contains("//")
                && path.len() <= 200
                && path
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_')) =>
        {
            path.to_owned()
        }
        _ => PAGE_PATH.to_owned(),
    }
}

pub(crate) fn now_ms() -> u64 {
    unix_millis(std::time::SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn logins_only_redirect_within_the_page() {
        assert_eq!(safe_next(Some("/approvals/abc-123")), "/approvals/abc-123");
        assert_eq!(safe_next(Some("/approvals")), "/approvals");
        for hostile in [
            "//evil.example/approvals",
            "https://evil.example/",
            "/approvals//evil",
            "/approvalsx",
            "/approvals/%2f%2fevil",
            "/approvals/a?b",
            "/mcp",
        ] {
            assert_eq!(safe_next(Some(hostile)), "/approvals", "{hostile}");
        }
        assert_eq!(safe_next(None), "/approvals");
    }
}
