//! What every form a signed-in person posts goes through first, in this order: a live
//! session (the cookie), a readable form (bounded, in time), and the session's CSRF token
//! in it. Each handler says how to answer each refusal (a login form, a message, JSON);
//! none can skip a step or take them in another order.

use axum::body::Body;
use axum::http::HeaderMap;

use super::PageState;
use super::form::{self, Form, FormError};
use super::logins::{Login, csrf_matches};

/// A form that passed the prelude.
pub(crate) struct SignedInForm {
    /// Whose session posted it.
    pub login: Login,
    /// Its fields (the CSRF token among them, already checked).
    pub form: Form,
}

/// Why a posted form was not taken.
pub(crate) enum FormRefusal {
    /// No live session: nobody to act for.
    NotSignedIn,
    /// The body was no form, too large, too slow or broken.
    Unreadable(Login, FormError),
    /// The form's CSRF token is not this session's: it came from elsewhere.
    ForeignForm(Login),
}

/// Checks the session, reads the form from `body` and checks its CSRF token.
pub(crate) async fn read(
    page: &PageState,
    headers: &HeaderMap,
    body: Body,
) -> Result<SignedInForm, FormRefusal> {
    let login = page.login(headers).ok_or(FormRefusal::NotSignedIn)?;
    let form = match form::read(headers, body, page.body_read_timeout).await {
        Ok(form) => form,
        Err(error) => return Err(FormRefusal::Unreadable(login, error)),
    };
    if !csrf_matches(&login.csrf, form.get("csrf").unwrap_or("")) {
        return Err(FormRefusal::ForeignForm(login));
    }
    Ok(SignedInForm { login, form })
}
