//! Parsing `#[tool(...)]` and `#[param(...)]` arguments.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::meta::ParseNestedMeta;
use syn::parse::{ParseStream, Parser};
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprLit, Ident, Lit, LitBool, LitInt, LitStr, Meta, Token};

/// The keys `#[tool(...)]` accepts, for error messages.
const TOOL_KEYS: &str = "name, description, scopes, mutating, confirm, timeout, hard_timeout, clamps, version, output_schema";

/// The keys `#[param(...)]` accepts, for error messages.
const PARAM_KEYS: &str = "description, minimum, maximum, min_length, max_length, pattern, enum, default, object, path, resolve, within, base";

/// A duration given in seconds, as an integer or a float literal.
pub enum Seconds {
    Whole(LitInt),
    Fraction(syn::LitFloat),
}

/// A number literal, possibly negative, kept as tokens for `json!` and as a value for checks.
#[derive(Clone)]
pub struct Number {
    pub tokens: TokenStream,
    pub value: f64,
    pub span: Span,
}

/// One `field = [lo, hi]` of `clamps(...)`.
pub struct ClampArg {
    pub field: Ident,
    pub lo: Number,
    pub hi: Number,
}

/// What `output_schema` said.
#[derive(Default)]
pub enum OutputSchemaArg {
    /// Nothing: inferred only from a `Json<T>` return type.
    #[default]
    Default,
    /// `output_schema`: infer from the return type, which must implement `JsonSchema`.
    Infer(Span),
    /// `output_schema = { ... }`: this JSON.
    Explicit(TokenStream),
}

/// The arguments of `#[tool(...)]`.
#[derive(Default)]
pub struct ToolArgs {
    pub name: Option<LitStr>,
    pub description: Option<LitStr>,
    pub scopes: Vec<LitStr>,
    pub mutating: bool,
    pub confirm: ConfirmArg,
    pub timeout: Option<Seconds>,
    pub hard_timeout: Option<Seconds>,
    pub clamps: Vec<ClampArg>,
    pub version: Option<LitStr>,
    pub output_schema: OutputSchemaArg,
    seen: Vec<String>,
}

impl ToolArgs {
    /// Parses the tokens inside `#[tool(...)]` (possibly empty).
    pub fn parse(tokens: TokenStream) -> syn::Result<ToolArgs> {
        let mut args = ToolArgs::default();
        let parser = syn::meta::parser(|meta| args.parse_one(meta));
        parser.parse2(tokens)?;
        Ok(args)
    }

    /// Parses a `#[tool]` / `#[tool(...)]` attribute found on a method.
    pub fn from_attribute(attr: &Attribute) -> syn::Result<ToolArgs> {
        match &attr.meta {
            Meta::Path(_) => Ok(ToolArgs::default()),
            Meta::List(list) => ToolArgs::parse(list.tokens.clone()),
            Meta::NameValue(nv) => Err(syn::Error::new_spanned(
                nv,
                "write `#[tool]` or `#[tool(name = \"...\", ...)]`, not `#[tool = ...]`",
            )),
        }
    }

    fn parse_one(&mut self, meta: ParseNestedMeta<'_>) -> syn::Result<()> {
        let key = key_once(&meta, &mut self.seen, "tool")?;
        match key.as_str() {
            "name" => self.name = Some(meta.value()?.parse()?),
            "description" => self.description = Some(meta.value()?.parse()?),
            "version" => self.version = Some(meta.value()?.parse()?),
            "mutating" => self.mutating = flag(&meta)?,
            "confirm" => self.confirm = confirm(&meta)?,
            "scopes" => self.scopes = string_list(meta.value()?, "scopes")?,
            "timeout" => self.timeout = Some(seconds(meta.value()?, "timeout")?),
            "hard_timeout" => self.hard_timeout = Some(seconds(meta.value()?, "hard_timeout")?),
            "clamps" => {
                meta.parse_nested_meta(|field| {
                    let ident = field.path.get_ident().cloned().ok_or_else(|| {
                        field.error("a clamp is `parameter = [lo, hi]`, with a parameter name")
                    })?;
                    let value = field.value().map_err(|_| {
                        syn::Error::new(
                            ident.span(),
                            format!("write the clamp as `{ident} = [lo, hi]`"),
                        )
                    })?;
                    let (lo, hi) = number_pair(value, &ident)?;
                    if lo.value > hi.value {
                        return Err(syn::Error::new(
                            lo.span,
                            format!(
                                "the clamp on `{ident}` has lo > hi; write `[lo, hi]` with lo <= hi"
                            ),
                        ));
                    }
                    self.clamps.push(ClampArg {
                        field: ident,
                        lo,
                        hi,
                    });
                    Ok(())
                })?;
            }
            "output_schema" => {
                self.output_schema = if meta.input.peek(Token![=]) {
                    let value = meta.value()?;
                    if !value.peek(syn::token::Brace) {
                        return Err(value.error(
                            "`output_schema = { ... }` takes a JSON object; write bare `output_schema` to infer it from the return type",
                        ));
                    }
                    OutputSchemaArg::Explicit(json_tokens(value)?)
                } else {
                    OutputSchemaArg::Infer(meta.path.span())
                };
            }
            other => {
                return Err(meta.error(format!(
                    "unknown #[tool] argument `{other}`; expected one of: {TOOL_KEYS}"
                )));
            }
        }
        Ok(())
    }
}

/// The arguments of `#[param(...)]` on one parameter.
#[derive(Default)]
pub struct ParamArgs {
    pub description: Option<LitStr>,
    pub minimum: Option<Number>,
    pub maximum: Option<Number>,
    pub min_length: Option<LitInt>,
    pub max_length: Option<LitInt>,
    pub pattern: Option<LitStr>,
    pub enumeration: Option<TokenStream>,
    pub default: Option<TokenStream>,
    pub object: bool,
    /// `path`: the argument is a file path, normalised before validation and policy
    /// (`milpa::schema::PathRule`).
    pub path: bool,
    /// `resolve`: a path argument is resolved against the filesystem (symlinks followed).
    pub resolve: bool,
    /// `within = "/abs"` or `within = ["/a", "/b"]`: the folders a path must be in.
    pub within: Vec<LitStr>,
    /// `base = "/abs"`: what a relative path is taken against.
    pub base: Option<LitStr>,
    /// The first `#[param]` attribute, to point errors at.
    pub span: Option<Span>,
    seen: Vec<String>,
}

impl ParamArgs {
    /// Reads every `#[param(...)]` among `attrs`, removing them (they are not real
    /// attributes once the macro has read them).
    pub fn take(attrs: &mut Vec<Attribute>) -> syn::Result<ParamArgs> {
        let mut args = ParamArgs::default();
        let mut result = Ok(());
        attrs.retain(|attr| {
            if !attr.path().is_ident("param") {
                return true;
            }
            args.span.get_or_insert(attr.span());
            let parsed = match &attr.meta {
                Meta::List(_) => attr.parse_nested_meta(|meta| args.parse_one(meta)),
                _ => Err(syn::Error::new_spanned(
                    attr,
                    "write `#[param(description = \"...\", ...)]`",
                )),
            };
            if let Err(error) = parsed {
                combine(&mut result, error);
            }
            false
        });
        if let Err(error) = args.check_path_keys() {
            combine(&mut result, error);
        }
        result.map(|()| args)
    }

    /// `resolve`, `within` and `base` need `path`; folders are absolute.
    fn check_path_keys(&self) -> syn::Result<()> {
        let span = self.span.unwrap_or_else(Span::call_site);
        if !self.path && (self.resolve || !self.within.is_empty() || self.base.is_some()) {
            return Err(syn::Error::new(
                span,
                "`resolve`, `within` and `base` are for path arguments; add `path` to #[param(...)]",
            ));
        }
        if let Some(relative) = self
            .within
            .iter()
            .chain(&self.base)
            .find(|folder| !folder.value().starts_with('/'))
        {
            return Err(syn::Error::new(
                relative.span(),
                "a folder in `within` or `base` must be absolute (start with `/`)",
            ));
        }
        Ok(())
    }

    fn parse_one(&mut self, meta: ParseNestedMeta<'_>) -> syn::Result<()> {
        let key = key_once(&meta, &mut self.seen, "param")?;
        match key.as_str() {
            "description" => self.description = Some(meta.value()?.parse()?),
            "minimum" => self.minimum = Some(number(meta.value()?)?),
            "maximum" => self.maximum = Some(number(meta.value()?)?),
            "min_length" => self.min_length = Some(meta.value()?.parse()?),
            "max_length" => self.max_length = Some(meta.value()?.parse()?),
            "pattern" => self.pattern = Some(meta.value()?.parse()?),
            "enum" => {
                let value = meta.value()?;
                if !value.peek(syn::token::Bracket) {
                    return Err(value.error("write `enum = [\"a\", \"b\", ...]`"));
                }
                self.enumeration = Some(json_tokens(value)?);
            }
            "default" => self.default = Some(json_tokens(meta.value()?)?),
            "object" => self.object = flag(&meta)?,
            "path" => self.path = flag(&meta)?,
            "resolve" => self.resolve = flag(&meta)?,
            "within" => {
                let value = meta.value()?;
                self.within = if value.peek(syn::token::Bracket) {
                    let content;
                    syn::bracketed!(content in value);
                    content
                        .parse_terminated(|folder| folder.parse::<LitStr>(), Token![,])?
                        .into_iter()
                        .collect()
                } else {
                    vec![value.parse()?]
                };
            }
            "base" => self.base = Some(meta.value()?.parse()?),
            other => {
                return Err(meta.error(format!(
                    "unknown #[param] argument `{other}`; expected one of: {PARAM_KEYS}"
                )));
            }
        }
        Ok(())
    }
}

/// Adds `error` to `result`.
pub fn combine(result: &mut syn::Result<()>, error: syn::Error) {
    match result {
        Ok(()) => *result = Err(error),
        Err(existing) => existing.combine(error),
    }
}

/// The entry's key ([`path_key`]), refused if `seen` already holds it; `attr` names the
/// attribute (`tool`, `param`) in the message.
fn key_once(meta: &ParseNestedMeta<'_>, seen: &mut Vec<String>, attr: &str) -> syn::Result<String> {
    let key = path_key(meta)?;
    if seen.contains(&key) {
        return Err(meta.error(format!(
            "`{key}` is given twice; keep one `{key}` in #[{attr}(...)]"
        )));
    }
    seen.push(key.clone());
    Ok(key)
}

/// The key of one `key`, `key = value` or `key(...)` entry (keywords such as `enum` allowed).
fn path_key(meta: &ParseNestedMeta<'_>) -> syn::Result<String> {
    match meta.path.get_ident() {
        Some(ident) => Ok(ident.to_string()),
        None => Err(meta.error(format!(
            "expected a plain key, found `{}`",
            meta.path.to_token_stream()
        ))),
    }
}

/// A flag: bare `key`, or `key = true|false`.
/// Who confirms a call: `confirm` / `confirm = true` (the caller, with a token),
/// `confirm = "human"` (a person, through the approval queue), `confirm = false` (nobody).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConfirmArg {
    #[default]
    None,
    Caller,
    Human,
}

fn confirm(meta: &ParseNestedMeta<'_>) -> syn::Result<ConfirmArg> {
    if !meta.input.peek(Token![=]) {
        return Ok(ConfirmArg::Caller);
    }
    let value = meta.value()?;
    if value.peek(LitStr) {
        let text: LitStr = value.parse()?;
        return match text.value().as_str() {
            "human" => Ok(ConfirmArg::Human),
            other => Err(syn::Error::new(
                text.span(),
                format!(
                    "`confirm = \"{other}\"` is not a confirmation mode; write `confirm` (the caller confirms), `confirm = \"human\"` (a person approves) or `confirm = false`"
                ),
            )),
        };
    }
    let lit: LitBool = value.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            "write `confirm`, `confirm = true|false` or `confirm = \"human\"`",
        )
    })?;
    Ok(if lit.value {
        ConfirmArg::Caller
    } else {
        ConfirmArg::None
    })
}

fn flag(meta: &ParseNestedMeta<'_>) -> syn::Result<bool> {
    if meta.input.peek(Token![=]) {
        let lit: LitBool = meta.value()?.parse()?;
        Ok(lit.value)
    } else {
        Ok(true)
    }
}

/// `["a", "b"]`.
fn string_list(input: ParseStream<'_>, key: &str) -> syn::Result<Vec<LitStr>> {
    let content;
    syn::bracketed!(content in input);
    let items = content
        .parse_terminated(|p| p.parse::<LitStr>(), Token![,])
        .map_err(|e| {
            syn::Error::new(
                e.span(),
                format!("write `{key} = [\"a\", \"b\"]`: a list of string literals"),
            )
        })?;
    Ok(items.into_iter().collect())
}

/// Seconds: `5` or `2.5`.
fn seconds(input: ParseStream<'_>, key: &str) -> syn::Result<Seconds> {
    let expr: Expr = input.parse()?;
    match &expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => {
            i.base10_parse::<u64>()?;
            Ok(Seconds::Whole(i.clone()))
        }
        Expr::Lit(ExprLit {
            lit: Lit::Float(f), ..
        }) => {
            let value = f.base10_parse::<f64>()?;
            if !value.is_finite() || value < 0.0 {
                return Err(syn::Error::new_spanned(
                    f,
                    format!("`{key}` must be a positive number of seconds"),
                ));
            }
            Ok(Seconds::Fraction(f.clone()))
        }
        other => Err(syn::Error::new_spanned(
            other,
            format!("`{key}` takes a number of seconds, e.g. `{key} = 10` or `{key} = 2.5`"),
        )),
    }
}

/// A number literal, possibly negative.
fn number(input: ParseStream<'_>) -> syn::Result<Number> {
    let negative: Option<Token![-]> = input.parse()?;
    let lit: Lit = input.parse()?;
    let span = lit.span();
    let value = match &lit {
        Lit::Int(i) => i.base10_parse::<f64>()?,
        Lit::Float(f) => f.base10_parse::<f64>()?,
        _ => {
            return Err(syn::Error::new(
                span,
                "expected a number, e.g. `0` or `-1.5`",
            ));
        }
    };
    let (tokens, value) = match negative {
        Some(minus) => (quote::quote!(#minus #lit), -value),
        None => (lit.to_token_stream(), value),
    };
    Ok(Number {
        tokens,
        value,
        span,
    })
}

/// `[lo, hi]` for a clamp.
fn number_pair(input: ParseStream<'_>, field: &Ident) -> syn::Result<(Number, Number)> {
    let message = || format!("write the clamp as `{field} = [lo, hi]` with two numbers");
    let content;
    syn::bracketed!(content in input);
    let lo = number(&content).map_err(|e| syn::Error::new(e.span(), message()))?;
    content.parse::<Token![,]>()?;
    let hi = number(&content).map_err(|e| syn::Error::new(e.span(), message()))?;
    let _: Option<Token![,]> = content.parse()?;
    if !content.is_empty() {
        return Err(content.error(message()));
    }
    Ok((lo, hi))
}

/// The tokens of a value up to the next top-level comma (for `json!`).
fn json_tokens(input: ParseStream<'_>) -> syn::Result<TokenStream> {
    let mut tokens = TokenStream::new();
    while !input.is_empty() && !input.peek(Token![,]) {
        let tree: TokenTree = input.parse()?;
        tokens.extend([tree]);
    }
    if tokens.is_empty() {
        return Err(input.error("expected a value"));
    }
    Ok(tokens)
}
