//! [`Deferred`]: a value that is ready now or computed by a future.
//!
//! Every pluggable collaborator of the pipeline (a tool, a rate limiter, a confirmation
//! store, a rule provider) may be backed by memory or by the network. Returning a boxed
//! future from each of them would cost an allocation per call even when the answer is
//! already known, which is the common case (an in-memory limiter, a sync tool). `Deferred`
//! lets the in-memory implementations answer without allocating, while network-backed ones
//! return a boxed future.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};

/// A boxed, `Send` future, as returned by asynchronous collaborators.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A value that is either available now or will be produced by a future.
///
/// ```
/// use milpa::Deferred;
///
/// fn lookup(fast: bool) -> Deferred<'static, u32> {
///     if fast {
///         Deferred::ready(7)
///     } else {
///         Deferred::pending(async { 7 })
///     }
/// }
///
/// # futures_executor_block_on(async {
/// assert_eq!(lookup(true).await, 7);
/// assert_eq!(lookup(false).await, 7);
/// # });
/// # fn futures_executor_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
pub enum Deferred<'a, T> {
    /// The value is known already.
    Ready(T),
    /// The value will be produced by this future.
    Pending(BoxFuture<'a, T>),
}

impl<'a, T> Deferred<'a, T> {
    /// A value that is known now.
    pub fn ready(value: T) -> Self {
        Deferred::Ready(value)
    }

    /// A value that a future will produce.
    pub fn pending(future: impl Future<Output = T> + Send + 'a) -> Self {
        Deferred::Pending(Box::pin(future))
    }
}

impl<T> std::fmt::Debug for Deferred<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Deferred::Ready(_) => f.write_str("Deferred::Ready(..)"),
            Deferred::Pending(_) => f.write_str("Deferred::Pending(..)"),
        }
    }
}

/// The future behind `Deferred::into_future`.
pub struct DeferredFuture<'a, T> {
    inner: Option<Deferred<'a, T>>,
}

// `Deferred` holds either a plain value or an already pinned box, so moving it is sound.
impl<T> Unpin for DeferredFuture<'_, T> {}

impl<T> Future for DeferredFuture<'_, T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match self.inner.take() {
            Some(Deferred::Ready(value)) => Poll::Ready(value),
            Some(Deferred::Pending(mut future)) => match future.as_mut().poll(cx) {
                Poll::Ready(value) => Poll::Ready(value),
                Poll::Pending => {
                    self.inner = Some(Deferred::Pending(future));
                    Poll::Pending
                }
            },
            None => panic!("DeferredFuture polled after completion"),
        }
    }
}

impl<'a, T> IntoFuture for Deferred<'a, T> {
    type Output = T;
    type IntoFuture = DeferredFuture<'a, T>;

    fn into_future(self) -> Self::IntoFuture {
        DeferredFuture { inner: Some(self) }
    }
}
