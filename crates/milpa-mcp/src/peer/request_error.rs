//! Why a tool's request to its client (through its [`Peer`](super::Peer)) got no answer,
//! by kind: the link's own reasons keep their cause.

use milpa::PeerError;

use crate::client_link::ClientRequestError;
use crate::protocol::MISSING_REQUIRED_CLIENT_CAPABILITY;

/// A request a tool made of its client that was not answered.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ToolRequestError {
    /// The call was cancelled before it asked.
    #[error("the call was cancelled")]
    Cancelled,
    /// 2026-07-28: the request did not declare the capability the method needs; the call
    /// is answered with `-32021`.
    #[error("the request did not declare the {capability} capability")]
    NotDeclaredByRequest {
        /// The capability the method needs.
        capability: &'static str,
    },
    /// 2026-07-28: asked in the call's `input_required` result instead; the retry
    /// carries the answer.
    #[error(
        "{method} ({key}) is asked of the client in an input_required result; the call is retried with its answer"
    )]
    AskedInRound {
        /// The method asked.
        method: String,
        /// The input key the answer comes back under.
        key: String,
    },
    /// The client link could not send the request or got no answer.
    #[error(transparent)]
    Client(#[from] ClientRequestError),
}

impl From<ToolRequestError> for PeerError {
    /// What the tool sees: `-32021` for a capability its request did not declare, the
    /// client's own code when it answered with an error, the reason as the message. The
    /// cause is the error of the kind that said no: this one, or for the client link's
    /// reasons the [`ClientRequestError`] itself (which this one only wraps).
    fn from(error: ToolRequestError) -> PeerError {
        match error {
            ToolRequestError::Client(client) => client.into(),
            error @ ToolRequestError::NotDeclaredByRequest { .. } => PeerError::with_code(
                MISSING_REQUIRED_CLIENT_CAPABILITY.value(),
                error.to_string(),
            )
            .with_cause(error),
            other => PeerError::new(other.to_string()).with_cause(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn an_undeclared_capability_carries_its_code_and_the_rest_their_reason() {
        let missing = PeerError::from(ToolRequestError::NotDeclaredByRequest {
            capability: "sampling",
        });
        assert_eq!(
            missing.code,
            Some(MISSING_REQUIRED_CLIENT_CAPABILITY.value())
        );
        assert_eq!(
            missing.message,
            "the request did not declare the sampling capability"
        );
        let gone = PeerError::from(ToolRequestError::from(ClientRequestError::NotConnected));
        assert_eq!(gone, PeerError::new("the client is not connected"));
    }

    /// Each kind stays reachable as the tool's error's source.
    #[test]
    fn the_peer_error_s_source_is_the_refusal_of_its_kind() {
        let missing = PeerError::from(ToolRequestError::NotDeclaredByRequest {
            capability: "elicitation",
        });
        assert!(matches!(
            missing
                .source()
                .and_then(|cause| cause.downcast_ref::<ToolRequestError>()),
            Some(ToolRequestError::NotDeclaredByRequest {
                capability: "elicitation"
            })
        ));
        let cancelled = PeerError::from(ToolRequestError::Cancelled);
        assert!(matches!(
            cancelled
                .source()
                .and_then(|cause| cause.downcast_ref::<ToolRequestError>()),
            Some(ToolRequestError::Cancelled)
        ));
        let gone = PeerError::from(ToolRequestError::from(ClientRequestError::NoStream));
        assert!(matches!(
            gone.source()
                .and_then(|cause| cause.downcast_ref::<ClientRequestError>()),
            Some(ClientRequestError::NoStream)
        ));
    }
}
