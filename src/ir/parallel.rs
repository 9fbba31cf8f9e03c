//! The one switch between parallel and sequential iteration.
//!
//! With the `parallel` feature (on by default) these run on the current `rayon`
//! pool; without it, the same closures run in order on the calling thread. Every
//! caller collects results in input order, so the output never depends on the
//! feature or on the number of threads.

#[cfg(feature = "parallel")]
use rayon::prelude::*;

/// `f` over `items`, results in input order; in parallel in chunks of at least
/// `min_len` items.
pub fn map<T, R>(items: &[T], min_len: usize, f: impl Fn(&T) -> R + Sync + Send) -> Vec<R>
where
    T: Sync,
    R: Send,
{
    #[cfg(feature = "parallel")]
    {
        items.par_iter().with_min_len(min_len).map(f).collect()
    }
    #[cfg(not(feature = "parallel"))]
    {
        let _ = min_len;
        items.iter().map(f).collect()
    }
}

/// Like [`map`], with a scratch state per worker made by `init` (one in all when
/// sequential).
pub fn map_init<T, S, R>(
    items: &[T],
    min_len: usize,
    init: impl Fn() -> S + Sync + Send,
    f: impl Fn(&mut S, &T) -> R + Sync + Send,
) -> Vec<R>
where
    T: Sync,
    R: Send,
{
    map_init_indexed(items, min_len, init, |state, _, item| f(state, item))
}

/// Like [`map_init`], with `f` given each item's position in `items` too.
pub fn map_init_indexed<T, S, R>(
    items: &[T],
    min_len: usize,
    init: impl Fn() -> S + Sync + Send,
    f: impl Fn(&mut S, usize, &T) -> R + Sync + Send,
) -> Vec<R>
where
    T: Sync,
    R: Send,
{
    #[cfg(feature = "parallel")]
    {
        items
            .par_iter()
            .enumerate()
            .with_min_len(min_len)
            .map_init(init, |state, (position, item)| f(state, position, item))
            .collect()
    }
    #[cfg(not(feature = "parallel"))]
    {
        let _ = min_len;
        let mut state = init();
        items
            .iter()
            .enumerate()
            .map(|(position, item)| f(&mut state, position, item))
            .collect()
    }
}

/// `f` on every item, in parallel in chunks of at least `min_len` items.
pub fn for_each_mut<T: Send>(items: &mut [T], min_len: usize, f: impl Fn(&mut T) + Sync + Send) {
    #[cfg(feature = "parallel")]
    {
        items.par_iter_mut().with_min_len(min_len).for_each(f);
    }
    #[cfg(not(feature = "parallel"))]
    {
        let _ = min_len;
        items.iter_mut().for_each(f);
    }
}
