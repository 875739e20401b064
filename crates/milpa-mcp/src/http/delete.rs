//! `DELETE`: ends the caller's session; its running calls are cancelled (and audited so).

use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};

use super::rejection::HttpRejection;
use super::sessions::Lookup;
use super::{HttpState, session_id};
use crate::session::Caller;

pub(crate) async fn delete(
    State(state): State<Arc<HttpState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
) -> Result<StatusCode, HttpRejection> {
    let id = session_id(&headers);
    match state.sessions.lookup(id, &caller) {
        Lookup::Found(_) => {
            if let Some(id) = id {
                state.sessions.end(id);
            }
            Ok(StatusCode::OK)
        }
        Lookup::Unknown => Err(HttpRejection::SessionNotFound),
        Lookup::Missing => Err(HttpRejection::SessionRequired { id: None }),
    }
}
