//! Why a request to the client got no answer, by kind, keeping the cause where there is
//! one (the timer that ran out, the answer channel that closed, the client's own error).

use std::time::Duration;

use milpa::PeerError;
use tokio::sync::oneshot;

/// A request to the client that could not be sent or was not answered.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientRequestError {
    /// The client did not declare the capability the method needs.
    #[error("the client did not declare the {capability} capability")]
    CapabilityNotDeclared {
        /// The capability the method needs (`sampling`, `elicitation`, `roots`).
        capability: &'static str,
    },
    /// The client did not declare the elicitation mode asked for.
    #[error("the client did not declare {mode}-mode elicitation")]
    ElicitationModeNotDeclared {
        /// The mode asked for (`form`, `url`, or one nobody knows).
        mode: String,
    },
    /// The client is gone.
    #[error("the client is not connected")]
    NotConnected,
    /// No stream to the client was open to carry the request.
    #[error("no open stream to the client to send the request on")]
    NoStream,
    /// The client did not answer in time.
    #[error("the client did not answer {method} within {} s", limit.as_secs())]
    TimedOut {
        /// The method asked.
        method: String,
        /// How long the request waited.
        limit: Duration,
        /// The timer that ran out.
        #[source]
        source: tokio::time::error::Elapsed,
    },
    /// The request was dropped unanswered (the client went away, its pending requests
    /// failed).
    #[error("the client went away")]
    WentAway(#[source] oneshot::error::RecvError),
    /// The client answered with a JSON-RPC error.
    #[error(transparent)]
    Answered(PeerError),
}

impl From<ClientRequestError> for PeerError {
    /// What a tool sees: the client's own code when it answered with an error, the reason
    /// as the message and the link's error itself as the cause (its own source, such as
    /// the timer that ran out, follows it).
    fn from(error: ClientRequestError) -> PeerError {
        match error {
            ClientRequestError::Answered(answer) => answer,
            other => PeerError::new(other.to_string()).with_cause(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    /// The kind shows in the message a tool reads; the cause stays reachable.
    #[tokio::test]
    async fn a_timeout_keeps_its_timer_and_an_answer_its_code() {
        let elapsed = tokio::time::timeout(Duration::ZERO, std::future::pending::<()>())
            .await
            .unwrap_err();
        let error = ClientRequestError::TimedOut {
            method: "sampling/createMessage".into(),
            limit: Duration::from_secs(3),
            source: elapsed,
        };
        assert!(error.source().is_some());
        let peer = PeerError::from(error);
        assert_eq!(
            peer.message,
            "the client did not answer sampling/createMessage within 3 s"
        );
        assert_eq!(peer.code, None);
        let answered = ClientRequestError::Answered(PeerError::with_code(-32600, "no"));
        assert_eq!(PeerError::from(answered).code, Some(-32600));
    }

    /// The tool's error has the link's error as its source, of its own kind, and the
    /// chain goes on to what that one kept (the timer).
    #[tokio::test]
    async fn the_peer_error_s_source_is_the_link_s_error() {
        let elapsed = tokio::time::timeout(Duration::ZERO, std::future::pending::<()>())
            .await
            .unwrap_err();
        let peer = PeerError::from(ClientRequestError::TimedOut {
            method: "elicitation/create".into(),
            limit: Duration::from_secs(1),
            source: elapsed,
        });
        let cause = peer.source().expect("the link's error is kept");
        let kind = cause.downcast_ref::<ClientRequestError>();
        assert!(
            matches!(kind, Some(ClientRequestError::TimedOut { .. })),
            "{kind:?}"
        );
        let timer = cause.source().expect("the timer follows");
        assert!(
            timer
                .downcast_ref::<tokio::time::error::Elapsed>()
                .is_some()
        );
        let gone = PeerError::from(ClientRequestError::NotConnected);
        assert!(matches!(
            gone.source()
                .and_then(|cause| cause.downcast_ref::<ClientRequestError>()),
            Some(ClientRequestError::NotConnected)
        ));
    }
}
