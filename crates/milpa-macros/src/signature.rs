//! Reading a tool function's signature: which parameters are arguments (and their schema
//! types), which are injected from the context, and what the function returns.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{
    FnArg, GenericArgument, GenericParam, Ident, Pat, PathArguments, PathSegment, ReturnType,
    Signature, Type,
};

use crate::attrs::{ParamArgs, combine};

/// How a method reaches its state.
pub enum Receiver {
    /// A free function, or an associated function without `self`.
    None,
    /// `&self`.
    Ref,
}

/// One parameter of a tool function.
pub enum Param {
    /// `&ToolContext` (or an owned `ToolContext`, cloned).
    Context { by_ref: bool },
    /// `&CallHandle` (or an owned `CallHandle`, cloned).
    Handle { by_ref: bool },
    /// An argument read from the call's arguments.
    Arg(Box<ArgParam>),
}

/// A parameter bound from the arguments.
pub struct ArgParam {
    /// The wire name: the Rust name, without `r#`.
    pub wire: String,
    /// The type to bind (lifetimes erased, `Self` replaced).
    pub bind_ty: Type,
    /// The type whose schema describes the argument (the `T` of `Option<T>`).
    pub schema_ty: Type,
    /// Whether the argument may be absent (an `Option`).
    pub optional: bool,
    /// Whether it is a `&serde_json::Value`, borrowed as is.
    pub borrow_value: bool,
    /// What `#[param(...)]` said.
    pub args: ParamArgs,
    /// The parameter's type, for error spans.
    pub span: Span,
}

/// What the function returns, as far as output conversion cares.
pub struct Return {
    /// A `Result<T, E>` (or an alias `Result<T>`): errors become failed results.
    pub fallible: bool,
    /// The success type, if the function names one.
    pub ok_ty: Option<Type>,
    /// The `T` of a `Json<T>` success type.
    pub json_inner: Option<Type>,
    /// The return type, for error spans.
    pub span: Span,
}

/// A tool function's signature, analysed.
pub struct ToolFn {
    pub ident: Ident,
    pub is_async: bool,
    pub receiver: Receiver,
    pub params: Vec<Param>,
    pub ret: Return,
}

/// Analyses `sig`, removing the `#[param]` attributes from its parameters. `self_ty` is the
/// type of the `#[tools]` block (for methods), which replaces `Self` in parameter types.
pub fn analyse(sig: &mut Signature, self_ty: Option<&Type>) -> syn::Result<ToolFn> {
    let mut errors: syn::Result<()> = Ok(());
    if let Some(unsafety) = &sig.unsafety {
        combine(
            &mut errors,
            syn::Error::new_spanned(
                unsafety,
                "a tool cannot be an `unsafe fn`: callers cannot uphold its contract; make it safe and use `unsafe` inside",
            ),
        );
    }
    if let Some(abi) = &sig.abi {
        combine(
            &mut errors,
            syn::Error::new_spanned(abi, "a tool cannot be an `extern` function; remove the ABI"),
        );
    }
    if let Some(variadic) = &sig.variadic {
        combine(
            &mut errors,
            syn::Error::new_spanned(variadic, "a tool cannot be variadic"),
        );
    }
    for param in &sig.generics.params {
        match param {
            GenericParam::Lifetime(_) => {}
            other => combine(
                &mut errors,
                syn::Error::new_spanned(
                    other,
                    "a tool function cannot be generic: its schema is fixed at compile time; use concrete parameter types",
                ),
            ),
        }
    }

    let mut receiver = Receiver::None;
    let mut params = Vec::new();
    for input in sig.inputs.iter_mut() {
        match input {
            FnArg::Receiver(recv) => {
                let by_shared_ref = recv.reference.is_some() && recv.mutability.is_none();
                let plain = recv.colon_token.is_none();
                if self_ty.is_none() {
                    combine(
                        &mut errors,
                        syn::Error::new_spanned(
                            &*recv,
                            "#[tool] on a method needs the impl block to be marked #[tools]; put #[tools] on the `impl`",
                        ),
                    );
                } else if by_shared_ref && plain {
                    receiver = Receiver::Ref;
                } else {
                    combine(
                        &mut errors,
                        syn::Error::new_spanned(
                            &*recv,
                            "a tool method takes `&self`: tools may run concurrently, so keep mutable state behind a Mutex or an atomic",
                        ),
                    );
                }
            }
            FnArg::Typed(pat_type) => {
                let args = match ParamArgs::take(&mut pat_type.attrs) {
                    Ok(args) => args,
                    Err(error) => {
                        combine(&mut errors, error);
                        ParamArgs::default()
                    }
                };
                match param(&pat_type.pat, &pat_type.ty, args, self_ty) {
                    Ok(p) => params.push(p),
                    Err(error) => combine(&mut errors, error),
                }
            }
        }
    }

    let ret = match &sig.output {
        ReturnType::Default => Return {
            fallible: false,
            ok_ty: None,
            json_inner: None,
            span: sig.ident.span(),
        },
        ReturnType::Type(_, ty) => {
            let ty = erase(ty, self_ty);
            let (fallible, ok_ty) = match last_segment(&ty) {
                Some(seg) if seg.ident == "Result" => match first_type_arg(seg) {
                    Some(ok) => (true, Some(ok.clone())),
                    None => (false, Some(ty.clone())),
                },
                _ => (false, Some(ty.clone())),
            };
            let json_inner = ok_ty.as_ref().and_then(|ok| match last_segment(ok) {
                Some(seg) if seg.ident == "Json" => single_type_arg(seg).cloned(),
                _ => None,
            });
            Return {
                fallible,
                ok_ty,
                json_inner,
                span: ty.span(),
            }
        }
    };

    errors.map(|()| ToolFn {
        ident: sig.ident.clone(),
        is_async: sig.asyncness.is_some(),
        receiver,
        params,
        ret,
    })
}

fn param(pat: &Pat, ty: &Type, args: ParamArgs, self_ty: Option<&Type>) -> syn::Result<Param> {
    let ident = match pat {
        Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => &p.ident,
        other => {
            return Err(syn::Error::new_spanned(
                other,
                "a tool parameter must be a plain name (its wire name), e.g. `count: u32`; destructure inside the function",
            ));
        }
    };
    let ty = erase(ty, self_ty);
    let (referenced, by_ref, mutable) = match &ty {
        Type::Reference(r) => (&*r.elem, true, r.mutability.is_some()),
        other => (other, false, false),
    };
    let injected = match last_segment(referenced) {
        Some(seg) if seg.ident == "ToolContext" && seg.arguments.is_none() => {
            Some(Param::Context { by_ref })
        }
        Some(seg) if seg.ident == "CallHandle" && seg.arguments.is_none() => {
            Some(Param::Handle { by_ref })
        }
        _ => None,
    };
    if mutable {
        return Err(syn::Error::new_spanned(
            &ty,
            "a tool parameter cannot be `&mut`: arguments are read-only; take the value by value (or `&T`)",
        ));
    }
    if let Some(injected) = injected {
        if let Some(span) = args.span {
            return Err(syn::Error::new(
                span,
                "#[param] describes an argument, but this parameter is injected from the call's context; remove #[param]",
            ));
        }
        return Ok(injected);
    }
    if let Type::ImplTrait(_) | Type::Infer(_) | Type::Never(_) | Type::Macro(_) = &ty {
        return Err(syn::Error::new_spanned(
            &ty,
            "a tool parameter needs a concrete type, e.g. `String` or a struct deriving `schemars::JsonSchema` and `serde::Deserialize`",
        ));
    }
    let borrow_value = by_ref
        && last_segment(referenced)
            .is_some_and(|seg| seg.ident == "Value" && seg.arguments.is_none());
    let (optional, schema_ty) = match last_segment(&ty) {
        Some(seg) if seg.ident == "Option" => match single_type_arg(seg) {
            Some(inner) => (true, inner.clone()),
            None => (false, ty.clone()),
        },
        _ => (false, ty.clone()),
    };
    let schema_ty = if borrow_value {
        referenced.clone()
    } else {
        schema_ty
    };
    if args.object && !(borrow_value || is_object_like(&schema_ty)) {
        return Err(syn::Error::new(
            args.span.unwrap_or_else(|| ty.span()),
            "`object` marks a `serde_json::Value` (or a map) parameter as a JSON object; other types already have a schema",
        ));
    }
    Ok(Param::Arg(Box::new(ArgParam {
        wire: unraw(ident),
        span: ty.span(),
        bind_ty: ty,
        schema_ty,
        optional,
        borrow_value,
        args,
    })))
}

/// `Value`, `Map`, `HashMap`, `BTreeMap` (for `#[param(object)]`).
fn is_object_like(ty: &Type) -> bool {
    last_segment(ty).is_some_and(|seg| {
        ["Value", "Map", "HashMap", "BTreeMap", "IndexMap"]
            .iter()
            .any(|name| seg.ident == name)
    })
}

/// The name without a leading `r#`.
pub fn unraw(ident: &Ident) -> String {
    let text = ident.to_string();
    match text.strip_prefix("r#") {
        Some(rest) => rest.to_owned(),
        None => text,
    }
}

/// The last path segment of a plain path type (through parentheses and groups).
fn last_segment(ty: &Type) -> Option<&PathSegment> {
    match ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last(),
        Type::Paren(p) => last_segment(&p.elem),
        Type::Group(g) => last_segment(&g.elem),
        _ => None,
    }
}

fn type_args(seg: &PathSegment) -> impl Iterator<Item = &Type> {
    let args = match &seg.arguments {
        PathArguments::AngleBracketed(a) => Some(a.args.iter()),
        _ => None,
    };
    args.into_iter().flatten().filter_map(|arg| match arg {
        GenericArgument::Type(t) => Some(t),
        _ => None,
    })
}

fn first_type_arg(seg: &PathSegment) -> Option<&Type> {
    type_args(seg).next()
}

fn single_type_arg(seg: &PathSegment) -> Option<&Type> {
    let mut args = type_args(seg);
    let first = args.next()?;
    args.next().is_none().then_some(first)
}

/// `ty` with every lifetime made `'_` (generated code names no lifetimes) and `Self`
/// replaced by the `#[tools]` block's type.
pub fn erase(ty: &Type, self_ty: Option<&Type>) -> Type {
    struct Eraser<'t> {
        self_ty: Option<&'t Type>,
    }
    impl VisitMut for Eraser<'_> {
        fn visit_lifetime_mut(&mut self, lifetime: &mut syn::Lifetime) {
            lifetime.ident = Ident::new("_", lifetime.ident.span());
        }
        fn visit_type_mut(&mut self, ty: &mut Type) {
            if let (Some(self_ty), Type::Path(p)) = (self.self_ty, &*ty)
                && p.qself.is_none()
                && p.path.is_ident("Self")
            {
                *ty = self_ty.clone();
                return;
            }
            syn::visit_mut::visit_type_mut(self, ty);
        }
    }
    let mut ty = ty.clone();
    Eraser { self_ty }.visit_type_mut(&mut ty);
    ty
}
