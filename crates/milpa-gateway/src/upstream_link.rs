//! What the parts of an upstream that outlive a call need of it: its configuration, and
//! its session now. The upstream's shared state implements [`UpstreamLink`]; its forwarded
//! tools hold it, and its catalog holds it weakly, so neither keeps a copy of the session.

use std::sync::Arc;

use crate::config::UpstreamConfig;
use crate::connection::{CallError, Connection};

/// An upstream as its tools and its catalog see it.
pub(crate) trait UpstreamLink: Send + Sync + 'static {
    /// How it is configured (its name, prefix and overrides).
    fn config(&self) -> &UpstreamConfig;
    /// Its live session, or why there is none.
    fn connection(&self) -> Result<Arc<Connection>, CallError>;
    /// Its name.
    fn name(&self) -> &str {
        &self.config().name
    }
}
