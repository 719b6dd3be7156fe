//! Short lists on the stack: placement runs many times in every pass (every job it looks at,
//! and the head again after each job end for its reservation), and its working lists hold a
//! host's leaves, GPUs or core words at most, so for hosts of usual size they need no heap.
//! A host's free-core bitmap is one too, so that copying the free state copies it in place.

use std::fmt;
use std::ops::{Deref, DerefMut};

/// A list of up to `N` items on the stack (or inline), moved to the heap past that.
#[derive(Clone)]
pub(crate) struct Scratch<T: Copy, const N: usize> {
    buf: [T; N],
    len: usize,
    /// Every item once there are more than `N`.
    heap: Vec<T>,
}

impl<T: Copy, const N: usize> Scratch<T, N> {
    /// An empty list; `fill` only initializes the unused stack slots.
    pub(crate) fn new(fill: T) -> Self {
        Self {
            buf: [fill; N],
            len: 0,
            heap: Vec::new(),
        }
    }

    /// A list of `len` copies of `x`.
    pub(crate) fn filled(x: T, len: usize) -> Self {
        let mut s = Self::new(x);
        if len <= N {
            s.len = len;
        } else {
            s.heap = vec![x; len];
            s.len = len;
        }
        s
    }

    pub(crate) fn push(&mut self, x: T) {
        if self.len < N {
            self.buf[self.len] = x;
        } else {
            if self.len == N {
                self.heap.extend_from_slice(&self.buf);
            }
            self.heap.push(x);
        }
        self.len += 1;
    }

    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.heap.clear();
    }
}

impl<T: Copy + fmt::Debug, const N: usize> fmt::Debug for Scratch<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Copy, const N: usize> Extend<T> for Scratch<T, N> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, items: I) {
        for x in items {
            self.push(x);
        }
    }
}

impl<T: Copy, const N: usize> Deref for Scratch<T, N> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        if self.len <= N {
            &self.buf[..self.len]
        } else {
            &self.heap
        }
    }
}

impl<T: Copy, const N: usize> DerefMut for Scratch<T, N> {
    fn deref_mut(&mut self) -> &mut [T] {
        if self.len <= N {
            &mut self.buf[..self.len]
        } else {
            &mut self.heap
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Scratch;

    #[test]
    fn spills_to_the_heap_and_keeps_every_item_in_order() {
        let mut s: Scratch<u32, 3> = Scratch::new(0);
        for x in 1..=5 {
            s.push(x);
            assert_eq!(&s[..], &(1..=x).collect::<Vec<_>>()[..]);
        }
        s[4] = 9;
        assert_eq!(&s[..], &[1, 2, 3, 4, 9]);
        s.clear();
        assert!(s.is_empty());
        s.extend([7, 8]);
        assert_eq!(&s[..], &[7, 8]);
        assert_eq!(&Scratch::<u32, 2>::filled(6, 2)[..], &[6, 6]);
        let mut big = Scratch::<u32, 2>::filled(6, 3);
        big.push(1);
        assert_eq!(&big[..], &[6, 6, 6, 1]);
    }
}
