//! The page's passkey handlers: the script, the enrolment link's page and post, and the
//! challenge a decision's assertion answers.
//!
//! - `GET /approvals/passkeys.js`: the script.
//! - `GET /approvals/enroll/{token}`: signed in as the actor the link enrols (the safer
//!   choice: a link that leaks cannot enrol a stranger's authenticator without that
//!   actor's token too), the button that creates the passkey.
//! - `POST /approvals/enroll/{token}`: the attestation; the server checks it, uses the link
//!   up and stores the public key.
//! - `POST /approvals/{id}/challenge`: WebAuthn request options for one approval and
//!   verdict (JSON), the state kept for this session (see [`super::passkeys`]).

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use milpa::approval::Verdict;
use serde_json::json;

use super::logins::Login;
use super::render::{self, Notice};
use super::routes::{login_form, message, now_ms, passkey_host_note, see_other, viewer};
use super::security_headers::with_script_policy;
use super::signed_in_form::{self, FormRefusal, SignedInForm};
use super::{PAGE_PATH, PageState};

/// The script, served from the page's own path.
const SCRIPT: &str = include_str!("passkeys.js");

/// `GET /approvals/passkeys.js`.
pub(crate) async fn script() -> Response {
    super::routes::javascript(SCRIPT)
}

/// `GET /approvals/enroll/{token}`.
pub(crate) async fn enrol_page(
    State(page): State<Arc<PageState>>,
    Path(token): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(login) = page.login(&headers) else {
        let next = super::routes::safe_next(Some(&format!("{PAGE_PATH}/enroll/{token}")));
        return login_form(
            &page,
            &headers,
            StatusCode::OK,
            &next,
            None,
            page.can_log_in(),
        );
    };
    let actor = match enrolment_for(&page, &login, &token).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    let host_note = passkey_host_note(&page, &headers);
    let options = if host_note.is_some() {
        None
    } else {
        match page
            .passkeys
            .start_enrolment(&login.id, &token, &actor)
            .await
        {
            Ok(options) => Some(serde_json::to_string(&options).unwrap_or_default()),
            Err(refusal) => {
                return message(
                    &login,
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Enrolment unavailable",
                    &refusal.to_string(),
                );
            }
        }
    };
    let mut viewer = viewer(&login);
    viewer.passkey = true;
    let html = render::enrol_page(
        &viewer,
        &token,
        &actor,
        options.as_deref(),
        host_note.as_deref(),
    );
    with_script_policy((StatusCode::OK, Html(html)).into_response())
}

/// `POST /approvals/enroll/{token}`.
pub(crate) async fn enrol(
    State(page): State<Arc<PageState>>,
    Path(token): Path<String>,
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
                PAGE_PATH,
                Some("You are not signed in (or your session ended); nothing was enrolled."),
                page.can_log_in(),
            );
        }
        Err(FormRefusal::Unreadable(login, error)) => {
            return message(&login, error.status(), "Not enrolled", &error.message());
        }
        Err(FormRefusal::ForeignForm(login)) => {
            return message(
                &login,
                StatusCode::FORBIDDEN,
                "Not enrolled",
                "The form did not come from your current session; nothing was enrolled.",
            );
        }
    };
    let actor = match enrolment_for(&page, &login, &token).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    let credential = form.get("credential").unwrap_or("");
    match page
        .passkeys
        .finish_enrolment(&login.id, &token, &actor, credential, now_ms())
        .await
    {
        Ok(()) => {
            tracing::info!(target: "milpa_mcp", principal = %actor, "approvals page: passkey enrolled");
            page.logins.set_notice(
                &login.id,
                Notice::Done(format!(
                    "Passkey enrolled for {actor}. From now on each of your decisions needs it."
                )),
            );
            see_other(PAGE_PATH, None)
        }
        Err(refusal) => {
            tracing::warn!(target: "milpa_mcp", principal = %actor, error = %refusal, "approvals page: passkey enrolment refused");
            let status = if refusal.is_server_side() {
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                StatusCode::FORBIDDEN
            };
            message(&login, status, "Not enrolled", &refusal.to_string())
        }
    }
}

/// The actor the live link `token` enrols, if it is the signed-in principal; else the
/// page that says why not.
async fn enrolment_for(page: &PageState, login: &Login, token: &str) -> Result<String, Response> {
    match page.passkeys.enrolment_actor(token, now_ms()).await {
        Ok(Some(actor)) if actor == login.principal => Ok(actor),
        Ok(Some(actor)) => Err(message(
            login,
            StatusCode::FORBIDDEN,
            "Not your enrolment link",
            &format!(
                "This link enrols a passkey for {actor}, and you are signed in as {}. Sign in \
                 with {actor}'s token to use it.",
                login.principal
            ),
        )),
        Ok(None) => Err(message(
            login,
            StatusCode::NOT_FOUND,
            "Enrolment link not valid",
            "This enrolment link was used already, expired (links last 10 minutes) or never \
             existed. Ask for a new one with `milpa approvals enroll --actor NAME`.",
        )),
        Err(refusal) => Err(message(
            login,
            StatusCode::SERVICE_UNAVAILABLE,
            "Enrolment unavailable",
            &refusal.to_string(),
        )),
    }
}

/// `POST /approvals/{id}/challenge`: the WebAuthn options for deciding `id` with
/// `decision` (form fields `csrf`, `decision`), as JSON; errors as `{"error": …}`.
pub(crate) async fn challenge(
    State(page): State<Arc<PageState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let refuse =
        |status: StatusCode, text: &str| (status, Json(json!({"error": text}))).into_response();
    let (login, form) = match signed_in_form::read(&page, &headers, body).await {
        Ok(SignedInForm { login, form }) => (login, form),
        Err(FormRefusal::NotSignedIn) => {
            return refuse(
                StatusCode::UNAUTHORIZED,
                "You are not signed in (or your session ended); reload the page.",
            );
        }
        Err(FormRefusal::Unreadable(_, error)) => {
            return refuse(error.status(), &error.message());
        }
        Err(FormRefusal::ForeignForm(_)) => {
            return refuse(
                StatusCode::FORBIDDEN,
                "This form did not come from your current session; reload the page.",
            );
        }
    };
    let Some(verdict) = form.get("decision").and_then(Verdict::parse) else {
        return refuse(StatusCode::BAD_REQUEST, "Choose Grant or Reject.");
    };
    let passkeys = match page.passkeys.enrolled(&login.principal).await {
        Ok(passkeys) if passkeys.is_empty() => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "You have no passkey enrolled; decide with the plain form.",
            );
        }
        Ok(passkeys) => passkeys,
        Err(refusal) => return refuse(StatusCode::SERVICE_UNAVAILABLE, &refusal.to_string()),
    };
    match page
        .passkeys
        .start_assertion(&login.id, &id, verdict, &passkeys)
    {
        Ok(options) => Json(options).into_response(),
        Err(refusal) => refuse(StatusCode::SERVICE_UNAVAILABLE, &refusal.to_string()),
    }
}
