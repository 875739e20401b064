//! What `serve --http`'s `/metrics` reports about the manifest's upstreams: up or not, and
//! how many times each was restarted (`milpa_upstream_up`, `milpa_upstream_restarts_total`).

use std::sync::Arc;

use milpa_gateway::{Upstream, UpstreamState};
use milpa_mcp::{UpstreamReport, UpstreamReports};

/// The upstreams of one `serve`, read on every scrape (a state lock and an atomic each).
pub(crate) struct ServeUpstreams(Arc<Vec<Upstream>>);

impl ServeUpstreams {
    /// Reports on `upstreams` (kept alive as long as this is).
    pub(crate) fn new(upstreams: Arc<Vec<Upstream>>) -> ServeUpstreams {
        ServeUpstreams(upstreams)
    }
}

impl UpstreamReports for ServeUpstreams {
    fn upstreams(&self) -> Vec<UpstreamReport> {
        self.0
            .iter()
            .map(|upstream| {
                UpstreamReport::new(
                    upstream.name(),
                    matches!(upstream.state(), UpstreamState::Ready),
                    upstream.restarts(),
                )
            })
            .collect()
    }
}
