//! `#[tool]` and `#[tools]`: declare [milpa](https://docs.rs/milpa) tools on plain Rust
//! functions. Use them through `milpa` (`use milpa::{tool, tools};`), which re-exports them
//! and holds what the generated code needs.
//!
//! # A function
//!
//! ```
//! use milpa::{ToolContext, ToolRegistry, tool};
//! use serde_json::json;
//!
//! /// Adds two integers.
//! #[tool]
//! fn add(a: i64, b: i64) -> i64 {
//!     a + b
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let mut registry = ToolRegistry::new();
//! registry.register(add_tool())?;
//! let result = registry.call("add", json!({"a": 2, "b": 40}), &ToolContext::cli()).await;
//! assert_eq!(result.data, json!(42));
//! # Ok::<(), milpa::RegistryError>(())
//! # }).unwrap();
//! ```
//!
//! `#[tool]` keeps the function as it is and adds, next to it and with its visibility, a
//! function `<fn name>_tool() -> milpa::ToolDefinition` (here `add_tool()`).
//!
//! # Methods with state
//!
//! ```
//! use std::sync::{Arc, Mutex};
//!
//! use milpa::{ErrorCode, ToolContext, ToolError, ToolRegistry, tools};
//! use serde_json::json;
//!
//! struct Notes {
//!     notes: Mutex<Vec<String>>,
//! }
//!
//! #[tools]
//! impl Notes {
//!     /// Reads one note.
//!     #[tool(scopes = ["notes:read"])]
//!     async fn get_note(&self, id: usize) -> Result<String, ToolError> {
//!         let notes = self.notes.lock().unwrap();
//!         let note = notes.get(id).cloned();
//!         note.ok_or_else(|| ToolError::with_code(ErrorCode::NotFound, format!("No note {id}")))
//!     }
//!
//!     /// Deletes every note.
//!     #[tool(mutating, confirm, scopes = ["notes:write"])]
//!     fn clear_notes(&self, ctx: &ToolContext) -> String {
//!         self.notes.lock().unwrap().clear();
//!         format!("cleared by {}", ctx.principal().unwrap_or("nobody"))
//!     }
//! }
//!
//! let mut registry = ToolRegistry::new();
//! let notes = Notes { notes: Mutex::new(vec!["milk".into()]) };
//! assert_eq!(registry.register_provider(Arc::new(notes))?, 2);
//! # Ok::<(), milpa::RegistryError>(())
//! ```
//!
//! `#[tools]` implements `milpa::ToolProvider` for the type: each `#[tool]` method becomes a
//! tool holding an `Arc` of the value. Methods take `&self` (or no receiver); methods
//! without `#[tool]` are left alone.
//!
//! # `#[tool(...)]` arguments
//!
//! | argument | meaning |
//! |---|---|
//! | `name = "x"` | the tool's name (default: the function's name) |
//! | `description = "…"` | what it does (default: the doc comment; one of the two is required) |
//! | `scopes = ["a", "b"]` | scopes of which the caller needs one |
//! | `mutating` | the tool changes state |
//! | `confirm` | every call needs a confirmation token first (the caller confirms) |
//! | `confirm = "human"` | every call is parked until a person other than the caller approves it (see `milpa::approval`) |
//! | `timeout = 10` | soft timeout in seconds (default 30) |
//! | `hard_timeout = 2.5` | hard timeout in seconds: the call is cancelled with `TIMEOUT` |
//! | `clamps(n = [0, 100], …)` | move an argument into `[lo, hi]` after validation |
//! | `version = "1.2"` | the tool's version |
//! | `output_schema` | infer the output schema from the return type (`T: JsonSchema`); a `Json<T>` return infers it without asking |
//! | `output_schema = { … }` | this output schema (JSON) |
//!
//! # Parameters
//!
//! Each parameter is an argument named exactly like the Rust parameter (no case
//! conversion; `r#type` is `type`). Its schema comes from its type's `schemars::JsonSchema`
//! (integers `integer`, unsigned ones with `minimum: 0`, floats `number`, `bool`, strings,
//! `Vec<T>` arrays, maps objects, `serde_json::Value` anything, your own types their derived
//! schema, inlined). `Option<T>` is optional and `"nullable": true`. A `&ToolContext`,
//! `ToolContext`, `&CallHandle` or `CallHandle` parameter is injected from the call and is
//! not an argument.
//!
//! `#[param(...)]` adds to a parameter's schema: `description = "…"`, `minimum = n`,
//! `maximum = n`, `min_length = n`, `max_length = n`, `pattern = "…"`, `enum = [..]`,
//! `default = <json>` (the argument becomes optional and the default is used when it is
//! absent), `object` (a `Value`/map parameter is `"type": "object"`). `path` makes a string
//! argument a file path, normalised before validation and policy (`milpa::schema::PathRule`),
//! with `within = "/abs"` or `within = ["/a", "/b"]`, `resolve` and `base = "/abs"`.
//!
//! The input schema is `{"type": "object", "properties": {…}, "required": […],
//! "additionalProperties": false}`: properties in parameter order, `required` left out when
//! empty, and unknown arguments refused (an extra argument is usually a model's mistake; the
//! legacy `confirm_token` argument of a replay is taken off at the edges, before the
//! pipeline sees the arguments).
//!
//! # Return values
//!
//! `T: Serialize` is the result's data (`()` is `null`); `Json<T>` too, with an output
//! schema; `serde_json::Value` is taken as is; `ToolResult` and `ToolOutput` pass through;
//! `Result<T, E>` with `E: Into<ToolError>` (`ToolError` or any `std::error::Error`) fails
//! the call with the error's code and message.
//!
//! # Binding
//!
//! Arguments are deserialized from the validated `&Value` without cloning it (`&str`
//! borrows). A value the schema accepted but the Rust type cannot hold (an integer over
//! `i32::MAX` for an `i32`) is a `VALIDATION_ERROR` naming the argument and what it takes
//! (`n: Expected an integer from -2147483648 to 2147483647, got 3000000000`); binding never
//! panics. A sync function runs inline (no allocation) and reports `runs_blocking`, so a hard timeout moves it to the blocking
//! pool; an async function's future borrows the arguments and context.

mod attrs;
mod codegen;
mod signature;

use proc_macro::TokenStream;
use quote::{ToTokens, format_ident, quote};
use syn::spanned::Spanned;
use syn::{ImplItem, Item, ItemFn, ItemImpl};

use attrs::{ToolArgs, combine};
use codegen::{Host, definition, identity};

/// Declares a tool on a function (see the [crate docs](crate)). On a free function it adds
/// `<fn>_tool() -> milpa::ToolDefinition`; on a method of a `#[tools]` block it marks the
/// method as a tool.
#[proc_macro_attribute]
pub fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    match syn::parse::<Item>(item) {
        // On error, the function as written (minus #[param]), so only the real error shows.
        Ok(Item::Fn(mut function)) => or_item(expand_fn(args.into(), &mut function), function),
        Ok(other) => or_item(
            Err(syn::Error::new(
                item_span(&other),
                "#[tool] goes on a function (or on a method inside an impl block marked #[tools])",
            )),
            other,
        ),
        Err(error) => error.to_compile_error().into(),
    }
}

/// Turns an inherent `impl` block into a `milpa::ToolProvider` whose tools are its methods
/// marked `#[tool]` (see the [crate docs](crate)). Register it with
/// `registry.register_provider(Arc::new(value))`.
#[proc_macro_attribute]
pub fn tools(args: TokenStream, item: TokenStream) -> TokenStream {
    let args = proc_macro2::TokenStream::from(args);
    if !args.is_empty() {
        return syn::Error::new_spanned(
            args,
            "#[tools] takes no arguments; put them on each #[tool]",
        )
        .to_compile_error()
        .into();
    }
    match syn::parse::<Item>(item) {
        // On error, the block as written (minus #[tool] and #[param]), so only the real
        // errors show.
        Ok(Item::Impl(mut block)) => or_item(expand_impl(&mut block), block),
        Ok(other) => or_item(
            Err(syn::Error::new(
                item_span(&other),
                "#[tools] goes on an `impl` block whose methods are marked #[tool]",
            )),
            other,
        ),
        Err(error) => error.to_compile_error().into(),
    }
}

/// The expansion; failing that, its errors followed by `item` as written, so the item
/// still exists and only the macro's errors show.
fn or_item(expanded: syn::Result<proc_macro2::TokenStream>, item: impl ToTokens) -> TokenStream {
    match expanded {
        Ok(tokens) => tokens.into(),
        Err(error) => {
            let mut out = error.to_compile_error();
            item.to_tokens(&mut out);
            out.into()
        }
    }
}

/// Both values, or every error of the two, `a`'s first.
fn both<A, B>(a: syn::Result<A>, b: syn::Result<B>) -> syn::Result<(A, B)> {
    match (a, b) {
        (Ok(a), Ok(b)) => Ok((a, b)),
        (Err(mut a), Err(b)) => {
            a.combine(b);
            Err(a)
        }
        (Err(e), _) | (_, Err(e)) => Err(e),
    }
}

/// Where to point an error about a whole item: its keyword and name.
fn item_span(item: &Item) -> proc_macro2::Span {
    match item {
        Item::Struct(s) => s
            .struct_token
            .span
            .join(s.ident.span())
            .unwrap_or(s.ident.span()),
        Item::Enum(e) => e
            .enum_token
            .span
            .join(e.ident.span())
            .unwrap_or(e.ident.span()),
        Item::Const(c) => c.ident.span(),
        Item::Static(s) => s.ident.span(),
        Item::Trait(t) => t.ident.span(),
        Item::Mod(m) => m.ident.span(),
        Item::Type(t) => t.ident.span(),
        Item::Union(u) => u.ident.span(),
        other => other.span(),
    }
}

fn expand_fn(
    args: proc_macro2::TokenStream,
    function: &mut ItemFn,
) -> syn::Result<proc_macro2::TokenStream> {
    let (args, analysed) = both(
        ToolArgs::parse(args),
        signature::analyse(&mut function.sig, None),
    )?;
    let identity = identity(&args, &function.attrs, &function.sig.ident)?;
    let body = definition(&analysed, &args, &identity, &Host::Free)?;
    let vis = &function.vis;
    let fn_name = signature::unraw(&function.sig.ident);
    let tool_fn = format_ident!("{}_tool", fn_name, span = function.sig.ident.span());
    let doc = format!(
        "The definition of the `{}` tool, declared with `#[tool]` on [`{fn_name}`].",
        identity.name
    );
    Ok(quote! {
        #function

        #[doc = #doc]
        #[must_use]
        #vis fn #tool_fn() -> ::milpa::ToolDefinition #body
    })
}

fn expand_impl(block: &mut ItemImpl) -> syn::Result<proc_macro2::TokenStream> {
    let mut errors: syn::Result<()> = Ok(());
    // Checked first, reported last: the loop below still strips #[tool] and #[param] so
    // the block compiles as written and only these errors show.
    if let Some((_, path, _)) = &block.trait_ {
        combine(
            &mut errors,
            syn::Error::new_spanned(
                path,
                "#[tools] goes on an inherent impl block (`impl MyTools { ... }`), not on a trait impl",
            ),
        );
    }
    if !block.generics.params.is_empty() {
        combine(
            &mut errors,
            syn::Error::new_spanned(
                &block.generics,
                "#[tools] cannot be used on a generic impl block: a tool's schema is fixed at compile time; implement it for a concrete type",
            ),
        );
    }
    let self_ty = (*block.self_ty).clone();
    let mut definitions = Vec::new();
    let mut names: Vec<(String, proc_macro2::Span)> = Vec::new();
    for item in block.items.iter_mut() {
        let ImplItem::Fn(method) = item else { continue };
        let mut tool_attrs = Vec::new();
        method.attrs.retain(|attr| {
            let is_tool = attr
                .path()
                .segments
                .last()
                .is_some_and(|seg| seg.ident == "tool");
            if is_tool {
                tool_attrs.push(attr.clone());
            }
            !is_tool
        });
        let Some(attr) = tool_attrs.first() else {
            // Not a tool, but a stray #[param] would be an unknown attribute: say so.
            for input in &method.sig.inputs {
                if let syn::FnArg::Typed(pt) = input
                    && let Some(attr) = pt.attrs.iter().find(|a| a.path().is_ident("param"))
                {
                    combine(
                        &mut errors,
                        syn::Error::new_spanned(
                            attr,
                            "#[param] only applies to a method marked #[tool]",
                        ),
                    );
                }
            }
            continue;
        };
        if let Some(extra) = tool_attrs.get(1) {
            combine(
                &mut errors,
                syn::Error::new_spanned(extra, "a method takes one #[tool] attribute; merge them"),
            );
        }
        let (args, analysed) = match both(
            ToolArgs::from_attribute(attr),
            signature::analyse(&mut method.sig, Some(&self_ty)),
        ) {
            Ok(pair) => pair,
            Err(e) => {
                combine(&mut errors, e);
                continue;
            }
        };
        let identity = match identity(&args, &method.attrs, &method.sig.ident) {
            Ok(identity) => identity,
            Err(e) => {
                combine(&mut errors, e);
                continue;
            }
        };
        if let Some((_, first)) = names.iter().find(|(n, _)| *n == identity.name) {
            let mut error = syn::Error::new(
                identity.name_span,
                format!(
                    "two tools in this #[tools] block are named `{}`; give one of them another `#[tool(name = \"...\")]`",
                    identity.name
                ),
            );
            error.combine(syn::Error::new(*first, "the first tool with that name"));
            combine(&mut errors, error);
            continue;
        }
        names.push((identity.name.clone(), identity.name_span));
        match definition(
            &analysed,
            &args,
            &identity,
            &Host::Method { self_ty: &self_ty },
        ) {
            Ok(tokens) => definitions.push(tokens),
            Err(e) => combine(&mut errors, e),
        }
    }
    if names.is_empty() && errors.is_ok() {
        return Err(syn::Error::new_spanned(
            &block.self_ty,
            "this #[tools] block has no method marked #[tool]; mark at least one, or remove #[tools]",
        ));
    }
    errors?;
    Ok(quote! {
        #block

        impl ::milpa::ToolProvider for #self_ty {
            fn tool_definitions(
                self: ::std::sync::Arc<Self>,
            ) -> ::std::vec::Vec<::milpa::ToolDefinition> {
                ::std::vec![#(#definitions),*]
            }
        }
    })
}
