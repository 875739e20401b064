//! Generating the `Tool` implementation and the `ToolDefinition` of one tool function.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::{Attribute, Expr, ExprLit, Ident, Lit, LitStr, Meta, Type};

use crate::attrs::{ConfirmArg, OutputSchemaArg, Seconds, ToolArgs, combine};
use crate::signature::{Param, Receiver, ToolFn, unraw};

/// Where the tool function lives.
pub enum Host<'a> {
    /// A free function, called by name.
    Free,
    /// A method of a `#[tools]` block; the tool holds an `Arc` of this type.
    Method { self_ty: &'a Type },
}

/// A tool's name and description, resolved from the attribute and the doc comment.
pub struct Identity {
    pub name: String,
    pub name_span: Span,
    pub description: String,
}

/// Resolves the name (default: the function's name) and description (default: the doc
/// comment); a tool with no description is an error.
pub fn identity(args: &ToolArgs, attrs: &[Attribute], ident: &Ident) -> syn::Result<Identity> {
    let (name, name_span) = match &args.name {
        Some(lit) => (lit.value(), lit.span()),
        None => (unraw(ident), ident.span()),
    };
    let mut errors = Ok(());
    let valid = (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if !valid {
        combine(
            &mut errors,
            syn::Error::new(
                name_span,
                format!(
                    "invalid tool name {name:?}: use 1 to 128 ASCII letters, digits, '_', '-' or '.' (set one with `name = \"...\"`)"
                ),
            ),
        );
    }
    let description = match &args.description {
        Some(lit) => lit.value().trim().to_owned(),
        None => doc_comment(attrs),
    };
    if description.is_empty() {
        let message = match &args.description {
            Some(_) => "the tool's description is empty; say what the tool does".to_owned(),
            None => format!(
                "tool `{name}` has no description: add a doc comment (`/// What it does`) or `#[tool(description = \"...\")]`"
            ),
        };
        let span = args
            .description
            .as_ref()
            .map_or_else(|| ident.span(), LitStr::span);
        combine(&mut errors, syn::Error::new(span, message));
    }
    errors.map(|()| Identity {
        name,
        name_span,
        description,
    })
}

/// The doc comment's text: each line without its first space, joined, trimmed.
fn doc_comment(attrs: &[Attribute]) -> String {
    let mut lines = Vec::new();
    for attr in attrs {
        if let Meta::NameValue(nv) = &attr.meta
            && nv.path.is_ident("doc")
            && let Expr::Lit(ExprLit {
                lit: Lit::Str(text),
                ..
            }) = &nv.value
        {
            let text = text.value();
            for line in text.split('\n') {
                lines.push(line.strip_prefix(' ').unwrap_or(line).trim_end().to_owned());
            }
        }
    }
    lines.join("\n").trim().to_owned()
}

/// A block expression that evaluates to the tool's `ToolDefinition`. For a method, the
/// block expects `self: Arc<Self>` in scope.
pub fn definition(
    f: &ToolFn,
    args: &ToolArgs,
    identity: &Identity,
    host: &Host<'_>,
) -> syn::Result<TokenStream> {
    check_clamps(f, args)?;
    let milpa = quote!(::milpa);
    let private = quote!(::milpa::__private);
    let value_ty = quote!(#private::serde_json::Value);

    // The tool struct: the provider (for methods) and the parsed defaults.
    let mut fields = Vec::new();
    let mut field_inits = Vec::new();
    if let Host::Method { self_ty } = host {
        fields.push(quote!(this: ::std::sync::Arc<#self_ty>));
        field_inits.push(quote!(this: ::std::sync::Arc::clone(&self)));
    }

    // Binding statements, the call's arguments, and the schema's properties.
    let mut bindings = Vec::new();
    let mut call_args = Vec::new();
    let mut properties = Vec::new();
    for (index, param) in f.params.iter().enumerate() {
        let var = format_ident!("__milpa_p{}", index);
        match param {
            Param::Context { by_ref: true } => bindings.push(quote!(let #var = __milpa_ctx;)),
            Param::Context { by_ref: false } => {
                bindings.push(quote!(let #var = ::core::clone::Clone::clone(__milpa_ctx);));
            }
            Param::Handle { by_ref: true } => {
                bindings.push(quote!(let #var = __milpa_ctx.call_handle();));
            }
            Param::Handle { by_ref: false } => bindings
                .push(quote!(let #var = ::core::clone::Clone::clone(__milpa_ctx.call_handle());)),
            Param::Arg(arg) => {
                let wire = &arg.wire;
                let bind_ty = &arg.bind_ty;
                let default_field = format_ident!("default_{}", index);
                if let Some(default) = &arg.args.default {
                    fields.push(quote!(#default_field: #value_ty));
                    field_inits.push(quote!(#default_field: #private::serde_json::json!(#default)));
                }
                let bound = match (&arg.args.default, arg.borrow_value) {
                    (None, true) => quote!(#private::bind_value(__milpa_args, #wire)),
                    (Some(_), true) => {
                        quote!(#private::bind_value_or(__milpa_args, #wire, &self.#default_field))
                    }
                    (None, false) => quote_spanned! {arg.span=>
                        #private::bind::<#bind_ty>(__milpa_args, #wire)
                    },
                    (Some(_), false) => quote_spanned! {arg.span=>
                        #private::bind_or::<#bind_ty>(__milpa_args, #wire, &self.#default_field)
                    },
                };
                if arg.borrow_value {
                    bindings.push(quote!(let #var = #bound;));
                } else {
                    bindings.push(quote! {
                        let #var = match #bound {
                            ::core::result::Result::Ok(__milpa_value) => __milpa_value,
                            ::core::result::Result::Err(__milpa_error) => {
                                return #milpa::Deferred::ready(::core::result::Result::Err(__milpa_error));
                            }
                        };
                    });
                }
                properties.push(property(arg, index));
            }
        }
        call_args.push(var);
    }

    let ident = &f.ident;
    let call = match (host, &f.receiver) {
        (Host::Free, _) => quote!(#ident(#(#call_args),*)),
        (Host::Method { self_ty }, Receiver::Ref) => {
            quote!(<#self_ty>::#ident(&*self.this, #(#call_args),*))
        }
        (Host::Method { self_ty }, Receiver::None) => quote!(<#self_ty>::#ident(#(#call_args),*)),
    };
    let output = output(f, quote!(__milpa_returned));
    let invoke_body = if f.is_async {
        quote! {
            #(#bindings)*
            let __milpa_future = #call;
            #milpa::Deferred::pending(async move {
                let __milpa_returned = __milpa_future.await;
                #output
            })
        }
    } else {
        quote! {
            #(#bindings)*
            let __milpa_returned = #call;
            #milpa::Deferred::ready(#output)
        }
    };
    let runs_blocking = !f.is_async;

    let options = options(f, args)?;
    let name = &identity.name;
    let description = &identity.description;
    let input_schema = quote! {{
        #[allow(unused_mut)]
        let mut __milpa_generator = #private::input_generator();
        let __milpa_properties: ::std::vec::Vec<(&'static str, #private::serde_json::Map<::std::string::String, #value_ty>, bool)> =
            ::std::vec![#(#properties),*];
        #private::input_schema(__milpa_generator, __milpa_properties)
    }};

    Ok(quote! {{
        struct __MilpaTool {
            #(#fields,)*
        }

        impl #milpa::Tool for __MilpaTool {
            fn invoke<'a>(
                &'a self,
                __milpa_args: &'a #value_ty,
                __milpa_ctx: &'a #milpa::ToolContext,
            ) -> #milpa::Invocation<'a> {
                #invoke_body
            }

            fn runs_blocking(&self) -> bool {
                #runs_blocking
            }
        }

        #milpa::ToolDefinition::new(
            #name,
            #description,
            #input_schema,
            #options,
            ::std::sync::Arc::new(__MilpaTool { #(#field_inits,)* }),
        )
    }})
}

/// `(wire, schema, required)` for one argument.
fn property(arg: &crate::signature::ArgParam, index: usize) -> TokenStream {
    let private = quote!(::milpa::__private);
    let json = quote!(#private::serde_json::json);
    let schema_ty = &arg.schema_ty;
    let var = format_ident!("__milpa_s{}", index);
    let mut sets = Vec::new();
    let p = &arg.args;
    if p.object {
        sets.push(quote!(#private::set_object(&mut #var);));
    }
    if arg.optional {
        sets.push(quote!(#private::set(&mut #var, "nullable", #json!(true));));
    }
    if let Some(description) = &p.description {
        sets.push(quote!(#private::set(&mut #var, "description", #json!(#description));));
    }
    if let Some(values) = &p.enumeration {
        sets.push(quote!(#private::set(&mut #var, "enum", #json!(#values));));
    }
    if let Some(n) = &p.minimum {
        let n = &n.tokens;
        sets.push(quote!(#private::set(&mut #var, "minimum", #json!(#n));));
    }
    if let Some(n) = &p.maximum {
        let n = &n.tokens;
        sets.push(quote!(#private::set(&mut #var, "maximum", #json!(#n));));
    }
    if let Some(n) = &p.min_length {
        sets.push(quote!(#private::set(&mut #var, "minLength", #json!(#n));));
    }
    if let Some(n) = &p.max_length {
        sets.push(quote!(#private::set(&mut #var, "maxLength", #json!(#n));));
    }
    if let Some(pattern) = &p.pattern {
        sets.push(quote!(#private::set(&mut #var, "pattern", #json!(#pattern));));
    }
    if let Some(default) = &p.default {
        sets.push(quote!(#private::set(&mut #var, "default", #json!(#default));));
    }
    let required = !arg.optional && p.default.is_none();
    let wire = &arg.wire;
    let schema = quote_spanned! {arg.span=>
        #private::param_schema::<#schema_ty>(&mut __milpa_generator)
    };
    quote! {{
        #[allow(unused_mut)]
        let mut #var = #schema;
        #(#sets)*
        (#wire, #var, #required)
    }}
}

/// Turns `value` (what the function returned, awaited) into the runtime's outcome.
fn output(f: &ToolFn, value: TokenStream) -> TokenStream {
    let private = quote!(::milpa::__private);
    // Spanned at the return type, so "cannot be serialized" points at it.
    let span = f.ret.span;
    let convert = |v: TokenStream| {
        quote_spanned! {span=> {
            #[allow(unused_imports)]
            use #private::{DirectOutput as _, SerializeOutput as _};
            (&#private::Out::new(#v)).__milpa_output()
        }}
    };
    if f.ret.fallible {
        let ok = convert(quote!(__milpa_ok));
        quote! {
            match #value {
                ::core::result::Result::Ok(__milpa_ok) => #ok,
                ::core::result::Result::Err(__milpa_err) => {
                    ::core::result::Result::Err(#private::error(__milpa_err))
                }
            }
        }
    } else {
        convert(value)
    }
}

/// Every clamp must name an argument.
fn check_clamps(f: &ToolFn, args: &ToolArgs) -> syn::Result<()> {
    let mut errors = Ok(());
    for clamp in &args.clamps {
        let field = unraw(&clamp.field);
        let known = f
            .params
            .iter()
            .any(|p| matches!(p, Param::Arg(a) if a.wire == field));
        if !known {
            combine(
                &mut errors,
                syn::Error::new(
                    clamp.field.span(),
                    format!(
                        "no argument named `{field}` to clamp; a clamp names one of the function's parameters"
                    ),
                ),
            );
        }
    }
    errors
}

/// The `ToolOptions` expression.
fn options(f: &ToolFn, args: &ToolArgs) -> syn::Result<TokenStream> {
    let private = quote!(::milpa::__private);
    let mut sets = Vec::new();
    if !args.scopes.is_empty() {
        let scopes = &args.scopes;
        sets.push(quote!(__milpa_options.scopes = ::std::vec![#(::std::string::String::from(#scopes)),*];));
    }
    if args.mutating {
        sets.push(quote!(__milpa_options.mutating = true;));
    }
    match args.confirm {
        ConfirmArg::None => {}
        ConfirmArg::Caller => sets.push(quote!(__milpa_options.requires_confirmation = true;)),
        ConfirmArg::Human => {
            sets.push(quote!(__milpa_options.requires_human_approval = true;));
        }
    }
    if let Some(timeout) = &args.timeout {
        let d = duration(timeout);
        sets.push(quote!(__milpa_options.timeout = #d;));
    }
    if let Some(timeout) = &args.hard_timeout {
        let d = duration(timeout);
        sets.push(quote!(__milpa_options.hard_timeout = ::core::option::Option::Some(#d);));
    }
    if !args.clamps.is_empty() {
        let clamps = args.clamps.iter().map(|c| {
            let field = unraw(&c.field);
            let (lo, hi) = (&c.lo.tokens, &c.hi.tokens);
            quote! {
                (
                    ::std::string::String::from(#field),
                    #private::clamp_range(#private::serde_json::json!(#lo), #private::serde_json::json!(#hi)),
                )
            }
        });
        sets.push(quote!(__milpa_options.clamps = ::std::vec![#(#clamps),*];));
    }
    let paths: Vec<TokenStream> = f
        .params
        .iter()
        .filter_map(|param| match param {
            Param::Arg(arg) if arg.args.path => Some(arg),
            _ => None,
        })
        .map(|arg| {
            let wire = &arg.wire;
            let resolve = arg.args.resolve;
            let within = &arg.args.within;
            let base = arg.args.base.as_ref().map(|base| quote!(.base(#base)));
            quote! {
                (
                    ::std::string::String::from(#wire),
                    ::milpa::schema::PathRule::new()
                        .resolve(#resolve)
                        .within({
                            let __milpa_within: ::std::vec::Vec<&'static str> = ::std::vec![#(#within),*];
                            __milpa_within
                        })
                        #base,
                )
            }
        })
        .collect();
    if !paths.is_empty() {
        sets.push(quote!(__milpa_options.paths = ::std::vec![#(#paths),*];));
    }
    if let Some(version) = &args.version {
        sets.push(
            quote!(__milpa_options.version = ::core::option::Option::Some(::std::string::String::from(#version));),
        );
    }
    let output_schema = match &args.output_schema {
        OutputSchemaArg::Explicit(json) => Some(quote!(#private::serde_json::json!(#json))),
        OutputSchemaArg::Infer(span) => {
            let ty = f
                .ret
                .json_inner
                .as_ref()
                .or(f.ret.ok_ty.as_ref())
                .ok_or_else(|| {
                    syn::Error::new(
                        *span,
                        "`output_schema` infers the schema from the return type, but the function returns nothing; return a type that implements `schemars::JsonSchema`, or write `output_schema = { ... }`",
                    )
                })?;
            Some(quote_spanned!(f.ret.span=> #private::output_schema::<#ty>()))
        }
        OutputSchemaArg::Default => f
            .ret
            .json_inner
            .as_ref()
            .map(|ty| quote_spanned!(f.ret.span=> #private::output_schema::<#ty>())),
    };
    if let Some(schema) = output_schema {
        sets.push(quote!(__milpa_options.output_schema = ::core::option::Option::Some(#schema);));
    }
    // Field by field on the defaults: `ToolOptions` is `#[non_exhaustive]`, so code in the
    // user's crate cannot write it as a struct literal.
    Ok(quote! {
        {
            #[allow(unused_mut)]
            let mut __milpa_options: ::milpa::ToolOptions = ::core::default::Default::default();
            #(#sets)*
            __milpa_options
        }
    })
}

fn duration(seconds: &Seconds) -> TokenStream {
    match seconds {
        Seconds::Whole(n) => quote!(::core::time::Duration::from_secs(#n)),
        Seconds::Fraction(f) => quote!(::core::time::Duration::from_secs_f64(#f)),
    }
}
