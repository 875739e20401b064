//! Cedar policies for milpa.
mod args;
mod entity_model;
mod error;
mod location;
mod policy;
mod tool_view;

pub use error::CedarLoadError;
pub use policy::{CedarPolicy, DefaultEffect};
