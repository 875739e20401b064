//! The queue keeps itself fresh: a person leaves the page open at night and sees new calls
//! arrive without reloading it, and without losing the reason they were typing.
//!
//! - `GET /approvals/refresh.js`: the script (`refresh.js`), loaded by the queue when the
//!   refresh is on ([`DEFAULT_REFRESH`], or `HttpServer::approvals_refresh`). Every
//!   interval it fetches the live part of the queue and puts it in place of the one shown,
//!   card by card: a card someone has focused or typed a reason into stays the very same
//!   element (its text, cursor, focus and any passkey message kept), and so does a card the
//!   server sends unchanged; the others and the decisions are replaced. It waits while someone is typing, while a decision is being
//!   sent and while the tab is hidden (and refreshes as soon as it is shown again), and it
//!   says under the list when it last did. Without JavaScript the page is the same, without
//!   the refresh; every form works either way.
//! - `GET /approvals/live`: the live part of the queue alone (the pending cards and the
//!   last decisions, the HTML the queue embeds), for the signed-in session; `401` without
//!   one. It does not take the session's notice (that belongs to the next full page), and
//!   it does not count as the person's request: a tab left open still ends its session
//!   after the idle timeout (30 min), then the script says to reload and sign in again.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};

use super::PageState;
use super::render;
use super::routes::{decision_viewer, javascript, queue_lists};

/// How often the queue fetches its list again when nothing else is configured: 15 s.
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(15);

/// The script, served from the page's own path.
const SCRIPT: &str = include_str!("refresh.js");

/// `GET /approvals/refresh.js`.
pub(crate) async fn script() -> Response {
    javascript(SCRIPT)
}

/// `GET /approvals/live`.
pub(crate) async fn live(State(page): State<Arc<PageState>>, headers: HeaderMap) -> Response {
    // A timed refresh is not the person using the page: it must not keep the session
    // alive, or a tab left open would never reach the idle timeout.
    let Some(login) = page.unattended_login(&headers) else {
        return (
            StatusCode::UNAUTHORIZED,
            "Not signed in (or the session ended): reload the page to sign in.",
        )
            .into_response();
    };
    let viewer = decision_viewer(&page, &login, &headers).await;
    match queue_lists(&page, &login, &viewer).await {
        Ok(lists) => Html(render::live_list(&viewer, lists.live(&page, &viewer))).into_response(),
        Err(failed) => failed,
    }
}
