//! The manifest's `[[prompts]]` served as a [`PromptProvider`]: each a text with
//! `{argument}` placeholders, rendered into one user message.

use std::collections::BTreeMap;

use milpa::catalog::{
    CatalogError, Prompt, PromptArgument, PromptMessage, PromptProvider, PromptReply,
};
use milpa::{Deferred, ToolContext};

use crate::catalog_section::PromptSpec;
use crate::prompt_text::PromptText;

/// The manifest's prompts.
#[derive(Debug)]
pub(crate) struct ManifestPrompts {
    prompts: Vec<(Prompt, PromptText)>,
}

impl ManifestPrompts {
    /// The prompts of `specs` (checked when the manifest loaded).
    pub(crate) fn new(specs: &[PromptSpec]) -> Result<ManifestPrompts, String> {
        let mut prompts = Vec::new();
        for spec in specs {
            let text = PromptText::parse(spec.template.get_ref())?;
            let mut prompt = Prompt::new(spec.name.get_ref().clone(), spec.description.clone())
                .with_scopes(spec.scopes.iter().cloned());
            if let Some(title) = &spec.title {
                prompt = prompt.with_title(title.clone());
            }
            for (name, argument) in &spec.arguments {
                let mut declared = if argument.required.unwrap_or(true) {
                    PromptArgument::required(name.clone())
                } else {
                    PromptArgument::optional(name.clone())
                };
                if let Some(description) = &argument.description {
                    declared = declared.with_description(description.clone());
                }
                prompt = prompt.with_argument(declared);
            }
            prompts.push((prompt, text));
        }
        Ok(ManifestPrompts { prompts })
    }
}

impl PromptProvider for ManifestPrompts {
    fn prompts(&self) -> Vec<Prompt> {
        self.prompts
            .iter()
            .map(|(prompt, _)| prompt.clone())
            .collect()
    }

    fn get<'a>(
        &'a self,
        name: &'a str,
        arguments: &'a BTreeMap<String, String>,
        _ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<PromptReply, CatalogError>> {
        let Some((prompt, text)) = self.prompts.iter().find(|(p, _)| p.name() == name) else {
            return Deferred::ready(Err(CatalogError::NotFound(name.to_owned())));
        };
        if let Some(unknown) = arguments.keys().find(|given| {
            !prompt
                .arguments()
                .iter()
                .any(|a| a.name() == given.as_str())
        }) {
            return Deferred::ready(Err(CatalogError::InvalidArguments(format!(
                "Prompt '{name}' has no argument '{unknown}'"
            ))));
        }
        Deferred::ready(Ok(PromptReply::new(vec![PromptMessage::user(
            text.render(arguments),
        )])))
    }
}
