//! Why an upstream could not start: the kind of failure as a type, and its cause kept as the
//! error's source, with the messages people read unchanged.

use std::error::Error as _;

use milpa_gateway::{
    CallError, ConfigProblem, GatewayError, HandshakeFailure, Upstream, UpstreamConfig,
};

async fn start_error(config: UpstreamConfig) -> GatewayError {
    Upstream::start(config)
        .await
        .expect_err("the upstream should not start")
}

#[tokio::test]
async fn a_url_that_does_not_parse_keeps_the_parse_error() {
    let error = start_error(UpstreamConfig::http("web", "http://[::1".into(), None)).await;
    assert!(
        error
            .to_string()
            .starts_with("upstream `web`: `http://[::1` is not a URL ("),
        "{error}"
    );
    let GatewayError::Config { upstream, problem } = &error else {
        panic!("not a configuration error: {error:?}");
    };
    assert_eq!(upstream, "web");
    assert!(matches!(problem, ConfigProblem::NotAUrl { url, .. } if url == "http://[::1"));
    // The chain: the gateway error, the problem, the URI parser's error.
    let problem_source = error.source().expect("the problem is the source");
    assert!(problem_source.source().is_some(), "the parse error is kept");
}

#[tokio::test]
async fn other_schemes_and_empty_commands_are_configuration_problems() {
    let error = start_error(UpstreamConfig::http(
        "web",
        "ftp://example.com/".into(),
        None,
    ))
    .await;
    assert_eq!(
        error.to_string(),
        "upstream `web`: `ftp://example.com/`: only http:// and https:// upstreams are supported"
    );
    assert!(matches!(
        error,
        GatewayError::Config {
            problem: ConfigProblem::UnsupportedScheme { .. },
            ..
        }
    ));
    let error = start_error(UpstreamConfig::stdio("fs", Vec::new())).await;
    assert_eq!(error.to_string(), "upstream `fs`: the command is empty");
    assert!(matches!(
        error,
        GatewayError::Config {
            problem: ConfigProblem::EmptyCommand,
            ..
        }
    ));
}

#[tokio::test]
async fn an_unset_bearer_variable_keeps_what_reading_it_said() {
    let variable = "MILPA_GATEWAY_TEST_UNSET_BEARER";
    let config = UpstreamConfig::http(
        "web",
        "http://127.0.0.1:9/mcp".into(),
        Some(variable.into()),
    );
    let error = start_error(config).await;
    assert_eq!(
        error.to_string(),
        format!("upstream `web`: the variable `{variable}` (bearer_env) is not set")
    );
    let problem = error.source().expect("the problem is the source");
    let cause = problem
        .source()
        .and_then(|cause| cause.downcast_ref::<std::env::VarError>());
    assert_eq!(cause, Some(&std::env::VarError::NotPresent));
}

#[tokio::test]
async fn a_failed_handshake_says_which_step_and_keeps_the_call_error() {
    // A program that exits at once never answers `initialize`.
    let error = start_error(UpstreamConfig::stdio("mute", vec!["true".into()])).await;
    assert!(
        error
            .to_string()
            .starts_with("upstream `mute`: initialize failed: "),
        "{error}"
    );
    let GatewayError::Handshake {
        why: HandshakeFailure::Initialize(call),
        ..
    } = &error
    else {
        panic!("not a failed initialize: {error:?}");
    };
    assert!(matches!(call, CallError::Unavailable(_)), "{call:?}");
    let why = error.source().expect("the step is the source");
    let cause = why
        .source()
        .and_then(|cause| cause.downcast_ref::<CallError>());
    assert_eq!(cause, Some(call));
}
