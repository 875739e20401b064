//! [`RendererRegistry`]: picks the renderer for a result's channel.

use std::sync::Arc;

use crate::context::ToolContext;
use crate::render::{ChannelRenderer, PlainRenderer, TerminalRenderer};
use crate::result::ToolResult;

/// The renderers a host uses, tried in the order added.
///
/// [`render`](Self::render) uses the first renderer that supports the context's channel
/// (`"default"` without a context), else the default renderer, else pretty JSON. Nothing is
/// registered by [`new`](Self::new); [`with_builtins`](Self::with_builtins) has the
/// terminal renderer for `cli` and the plain renderer as default.
#[derive(Clone, Default)]
pub struct RendererRegistry {
    renderers: Vec<Arc<dyn ChannelRenderer>>,
    default: Option<Arc<dyn ChannelRenderer>>,
}

impl std::fmt::Debug for RendererRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RendererRegistry")
            .field("renderers", &self.renderers.len())
            .field("default", &self.default.is_some())
            .finish()
    }
}

impl RendererRegistry {
    /// A registry without renderers: everything renders as pretty JSON.
    pub fn new() -> Self {
        Self::default()
    }

    /// [`TerminalRenderer::detect`] for `cli` and [`PlainRenderer`] for every other channel.
    pub fn with_builtins() -> Self {
        Self::new()
            .with_renderer(TerminalRenderer::detect())
            .with_default_renderer(PlainRenderer)
    }

    /// Adds a renderer, tried after the ones added before.
    pub fn add_renderer(&mut self, renderer: impl ChannelRenderer + 'static) -> &mut Self {
        self.renderers.push(Arc::new(renderer));
        self
    }

    /// Adds a shared renderer.
    pub fn add_renderer_arc(&mut self, renderer: Arc<dyn ChannelRenderer>) -> &mut Self {
        self.renderers.push(renderer);
        self
    }

    /// Sets the renderer used when none supports the channel.
    pub fn set_default_renderer(&mut self, renderer: impl ChannelRenderer + 'static) -> &mut Self {
        self.default = Some(Arc::new(renderer));
        self
    }

    /// [`add_renderer`](Self::add_renderer), by value.
    pub fn with_renderer(mut self, renderer: impl ChannelRenderer + 'static) -> Self {
        self.add_renderer(renderer);
        self
    }

    /// [`set_default_renderer`](Self::set_default_renderer), by value.
    pub fn with_default_renderer(mut self, renderer: impl ChannelRenderer + 'static) -> Self {
        self.set_default_renderer(renderer);
        self
    }

    /// The renderer for `channel`: the first that supports it, else the default.
    pub fn renderer_for(&self, channel: &str) -> Option<&dyn ChannelRenderer> {
        self.renderers
            .iter()
            .find(|renderer| renderer.supports(channel))
            .or(self.default.as_ref())
            .map(|renderer| &**renderer)
    }

    /// Whether [`render`](Self::render) would use a renderer (not the JSON fallback).
    pub fn has_renderer(&self, channel: &str) -> bool {
        self.renderer_for(channel).is_some()
    }

    /// `result` as text for the context's channel.
    pub fn render(&self, result: &ToolResult, ctx: Option<&ToolContext>) -> String {
        let channel = ctx.map_or("default", ToolContext::channel);
        match self.renderer_for(channel) {
            Some(renderer) => renderer.render(result, ctx),
            None => result.to_json_pretty(),
        }
    }
}
