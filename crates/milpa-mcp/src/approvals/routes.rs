//! The page's handlers: the queue, one item, login, logout and a decision.
//!
//! Forms follow POST/redirect/GET: a decision that goes through answers `303` to the queue
//! and the session keeps a notice for that page; a refused one is answered at once with
//! the item, the reason and the status that says which refusal (nothing changed).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use milpa::ToolContext;
use milpa::approval::{APPROVE_SCOPE, Approval, ApprovalError, ApprovalState, Verdict};
use milpa::confirm::{random_hex_128, unix_millis};

use super::logins::{Login, csrf_matches};
use super::render::{self, LoginForm, Notice, Viewer};
use super::{MAX_REASON_CHARS, PAGE_PATH, PageState, cookies, form};

/// How many pending items the queue shows.
const PENDING_SHOWN: usize = 100;

/// How many past decisions the queue shows.
const DECISIONS_SHOWN: usize = 20;

/// `GET /approvals`: the login form, or the queue.
pub(crate) async fn queue(State(page): State<Arc<PageState>>, headers: HeaderMap) -> Response {
    let Some(login) = page.login(&headers) else {
        return login_form(&headers, StatusCode::OK, PAGE_PATH, None, page.can_log_in());
    };
    queue_response(&page, &login, StatusCode::OK).await
}

/// `GET /approvals/{id}`: one approval (where an `approve_url` leads).
pub(crate) async fn item(
    State(page): State<Arc<PageState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(login) = page.login(&headers) else {
        let next = item_path(&id);
        return login_form(&headers, StatusCode::OK, &next, None, page.can_log_in());
    };
    let notice = page.logins.take_notice(&login.id);
    item_response(&page, &login, &id, StatusCode::OK, notice).await
}

/// `GET /approvals/login`: there is nothing to get; the form is on the queue's page.
pub(crate) async fn login_get() -> Response {
    see_other(PAGE_PATH, None)
}

/// `POST /approvals/login`: a token from the form becomes a session.
pub(crate) async fn login(
    State(page): State<Arc<PageState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let available = page.can_log_in();
    let form = match form::read(&headers, body, page.body_read_timeout).await {
        Ok(form) => form,
        Err(error) => {
            return login_form(
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
    if !csrf_matches(expected, form.get("csrf").unwrap_or("")) {
        return login_form(
            &headers,
            StatusCode::FORBIDDEN,
            &next,
            Some("The sign-in form expired or did not come from this page. Please try again."),
            available,
        );
    }
    let Some(auth) = &page.auth else {
        return login_form(
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
        tracing::warn!(target: "milpa_mcp", "approvals page: sign-in with an unknown token refused");
        let message = if token.is_empty() {
            "Enter a token."
        } else {
            "This server does not know that token."
        };
        return login_form(
            &headers,
            StatusCode::UNAUTHORIZED,
            &next,
            Some(message),
            available,
        );
    };
    tracing::info!(target: "milpa_mcp", principal = %identity.principal, "approvals page: signed in");
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
    let Some(login) = page.login(&headers) else {
        return see_other(PAGE_PATH, Some(cookies::clear(cookies::SESSION, secure)));
    };
    let form = match form::read(&headers, body, page.body_read_timeout).await {
        Ok(form) => form,
        Err(error) => return message(&login, error.status(), "Not signed out", &error.message()),
    };
    if !csrf_matches(&login.csrf, form.get("csrf").unwrap_or("")) {
        return message(
            &login,
            StatusCode::FORBIDDEN,
            "Not signed out",
            "The form did not come from this session; you are still signed in.",
        );
    }
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
    let Some(login) = page.login(&headers) else {
        return login_form(
            &headers,
            StatusCode::UNAUTHORIZED,
            &item_path(&id),
            Some("You are not signed in (or your session ended); nothing was decided."),
            page.can_log_in(),
        );
    };
    let form = match form::read(&headers, body, page.body_read_timeout).await {
        Ok(form) => form,
        Err(error) => {
            let notice = Notice::Refused(error.message());
            return item_response(&page, &login, &id, error.status(), Some(notice)).await;
        }
    };
    if !csrf_matches(&login.csrf, form.get("csrf").unwrap_or("")) {
        let notice = Notice::Refused(
            "This form did not come from your current session (its CSRF token is missing or \
             wrong); nothing was decided. Reload the page and try again."
                .into(),
        );
        return item_response(&page, &login, &id, StatusCode::FORBIDDEN, Some(notice)).await;
    }
    let Some(verdict) = form.get("decision").and_then(Verdict::parse) else {
        let notice = Notice::Refused("Choose Grant or Reject; nothing was decided.".into());
        return item_response(&page, &login, &id, StatusCode::BAD_REQUEST, Some(notice)).await;
    };
    let reason = form.get("reason").map(str::trim).filter(|r| !r.is_empty());
    if reason.is_some_and(|r| r.chars().count() > MAX_REASON_CHARS) {
        let notice = Notice::Refused(format!(
            "The reason is limited to {MAX_REASON_CHARS} characters; nothing was decided."
        ));
        return item_response(&page, &login, &id, StatusCode::BAD_REQUEST, Some(notice)).await;
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
            item_response(&page, &login, &id, status, Some(notice)).await
        }
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

async fn queue_response(page: &PageState, login: &Login, status: StatusCode) -> Response {
    let notice = page.logins.take_notice(&login.id);
    let queue = page.registry.approvals();
    // One more than shown, to know whether there are more.
    let lists = match queue.pending(PENDING_SHOWN + 1).await {
        Ok(pending) => queue.decided(DECISIONS_SHOWN).await.map(|d| (pending, d)),
        Err(error) => Err(error),
    };
    let (mut pending, decided) = match lists {
        Ok(lists) => lists,
        Err(error) => {
            return message(
                login,
                StatusCode::SERVICE_UNAVAILABLE,
                "Approvals unavailable",
                &error.to_string(),
            );
        }
    };
    let more = pending.len() > PENDING_SHOWN;
    pending.truncate(PENDING_SHOWN);
    let viewer = viewer(login);
    let html = render::queue_page(
        &viewer,
        notice.as_ref(),
        &pending,
        more,
        &decided,
        page.registry.redactor(),
        now_ms(),
    );
    (status, Html(html)).into_response()
}

async fn item_response(
    page: &PageState,
    login: &Login,
    id: &str,
    status: StatusCode,
    notice: Option<Notice>,
) -> Response {
    let viewer = viewer(login);
    match page.registry.approvals().get(id.trim()).await {
        Ok(Some(approval)) => {
            let html = render::item_page(
                &viewer,
                notice.as_ref(),
                &approval,
                page.registry.redactor(),
                now_ms(),
            );
            (status, Html(html)).into_response()
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

fn viewer(login: &Login) -> Viewer<'_> {
    let may_decide =
        ToolContext::web(login.principal.clone(), login.scopes.clone()).has_scope(APPROVE_SCOPE);
    Viewer {
        principal: &login.principal,
        csrf: &login.csrf,
        may_decide,
    }
}

fn message(login: &Login, status: StatusCode, title: &str, text: &str) -> Response {
    let html = render::message_page(Some(&viewer(login)), title, text);
    (status, Html(html)).into_response()
}

/// The login form with a fresh CSRF token (in the form and in its cookie).
fn login_form(
    headers: &HeaderMap,
    status: StatusCode,
    next: &str,
    message: Option<&str>,
    available: bool,
) -> Response {
    let csrf = random_hex_128();
    let html = render::login_page(&LoginForm {
        csrf: &csrf,
        next,
        message,
        available,
    });
    let cookie = cookies::set(cookies::LOGIN_CSRF, &csrf, cookies::over_https(headers));
    (status, [(header::SET_COOKIE, cookie)], Html(html)).into_response()
}

fn see_other(location: &str, cookie: Option<HeaderValue>) -> Response {
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
fn safe_next(next: Option<&str>) -> String {
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

fn now_ms() -> u64 {
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
