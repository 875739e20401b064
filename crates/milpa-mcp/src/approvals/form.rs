//! Reading a posted form: `application/x-www-form-urlencoded`, at most
//! [`MAX_FORM_BYTES`], arriving within the server's body read timeout.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use http_body_util::LengthLimitError;

/// The largest form body (a CSRF token, a decision and a reason fit many times over).
pub(crate) const MAX_FORM_BYTES: usize = 16 * 1024;

/// Why a form could not be read.
#[derive(Debug)]
pub(crate) enum FormError {
    /// Not `application/x-www-form-urlencoded`.
    NotAForm,
    /// Larger than [`MAX_FORM_BYTES`].
    TooLarge,
    /// The body did not arrive in time.
    Timeout,
    /// The connection broke while reading.
    Unreadable,
}

impl FormError {
    /// The status the page answers with.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            FormError::NotAForm => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            FormError::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            FormError::Timeout => StatusCode::REQUEST_TIMEOUT,
            FormError::Unreadable => StatusCode::BAD_REQUEST,
        }
    }

    /// What the page tells the person.
    pub(crate) fn message(&self) -> String {
        match self {
            FormError::NotAForm => {
                "The form was not sent as a web form; nothing was changed.".into()
            }
            FormError::TooLarge => format!(
                "The form is larger than {} KiB; nothing was changed.",
                MAX_FORM_BYTES / 1024
            ),
            FormError::Timeout => "The form did not arrive in time; nothing was changed.".into(),
            FormError::Unreadable => "The form could not be read; nothing was changed.".into(),
        }
    }
}

/// A form's fields in the order sent.
#[derive(Debug, Default)]
pub(crate) struct Form {
    fields: Vec<(String, String)>,
}

impl Form {
    /// The first value of field `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// Parses an urlencoded body.
    pub(crate) fn parse(bytes: &[u8]) -> Form {
        Form {
            fields: form_urlencoded::parse(bytes).into_owned().collect(),
        }
    }
}

/// Reads and parses the form in `body`.
pub(crate) async fn read(
    headers: &HeaderMap,
    body: Body,
    timeout: Duration,
) -> Result<Form, FormError> {
    let is_form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| {
            v.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !is_form {
        return Err(FormError::NotAForm);
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_FORM_BYTES as u64) {
        return Err(FormError::TooLarge);
    }
    let bytes =
        match tokio::time::timeout(timeout, axum::body::to_bytes(body, MAX_FORM_BYTES)).await {
            Err(_) => return Err(FormError::Timeout),
            Ok(Err(error)) => {
                let cause = error.into_inner();
                return Err(if cause.downcast_ref::<LengthLimitError>().is_some() {
                    FormError::TooLarge
                } else {
                    FormError::Unreadable
                });
            }
            Ok(Ok(bytes)) => bytes,
        };
    Ok(Form::parse(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn form_headers() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded; charset=UTF-8"),
        );
        headers
    }

    #[tokio::test]
    async fn fields_are_decoded() {
        let form = read(
            &form_headers(),
            Body::from("csrf=ab&decision=grant&reason=looks+right%21&decision=reject"),
            Duration::from_secs(1),
        )
        .await
        .unwrap();
        assert_eq!(form.get("reason"), Some("looks right!"));
        assert_eq!(form.get("decision"), Some("grant"));
        assert_eq!(form.get("missing"), None);
    }

    #[tokio::test]
    async fn large_bodies_and_other_types_are_refused() {
        let big = vec![b'a'; MAX_FORM_BYTES + 1];
        let error = read(&form_headers(), Body::from(big), Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(matches!(error, FormError::TooLarge), "{error:?}");
        assert_eq!(error.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let mut json = HeaderMap::new();
        json.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let error = read(&json, Body::from("{}"), Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(matches!(error, FormError::NotAForm), "{error:?}");
    }
}
