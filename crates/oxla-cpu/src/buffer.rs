//! Array storage for kernel outputs and temporaries. Fresh memory costs a
//! page fault per 4 KiB page on first write (about 0.65 us each here, more
//! than the copy itself for large arrays), and memory the allocator hands
//! back for reuse must be zeroed by `calloc`. So each executable keeps a
//! [`Pool`] of the arrays its executions have finished with: a kernel's
//! output comes from the pool when an array of the same type and length is
//! free, and the executor gives an array back at its last use, which the
//! compile-time liveness analysis fixed. Large fresh buffers ask for
//! transparent huge pages: one fault per 2 MiB instead of 512.

use std::collections::HashMap;
use std::sync::Mutex;

use oxla_hlo::{ArrayData, NativeType, PrimitiveType};

use crate::value::{Buf, Value};

/// Buffers at least this large ask for huge pages.
const HUGE_MIN_BYTES: usize = 4 << 20;

/// Arrays smaller than this are left to the allocator, which serves them
/// from its own caches faster than a locked pool could.
const POOL_MIN_BYTES: usize = 16 << 10;

/// The pool holds at most this much idle memory.
const POOL_MAX_BYTES: usize = 2 << 30;

#[cfg(target_os = "linux")]
unsafe extern "C" {
    fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
}

#[cfg(target_os = "linux")]
const MADV_HUGEPAGE: i32 = 14;

/// `n` default values (zeros), in memory that prefers huge pages when
/// large. The zeros come from the allocator (`calloc`), so no page is
/// touched here: the kernel writing the buffer faults its pages in, in
/// parallel when the kernel is.
pub(crate) fn zeroed<T: Copy + Default>(n: usize) -> Vec<T> {
    let mut v: Vec<T> = vec![T::default(); n];
    let bytes = n * std::mem::size_of::<T>();
    #[cfg(target_os = "linux")]
    if bytes >= HUGE_MIN_BYTES {
        // Advise the 2 MiB-aligned interior of the allocation.
        const HUGE: usize = 2 << 20;
        let start = v.as_mut_ptr() as usize;
        let first = start.div_ceil(HUGE) * HUGE;
        let end = (start + bytes) / HUGE * HUGE;
        if end > first {
            // SAFETY: the range lies inside this vector's own allocation; madvise
            // only changes how the kernel backs it and cannot fail unsafely.
            unsafe {
                madvise(first as *mut std::ffi::c_void, end - first, MADV_HUGEPAGE);
            }
        }
    }
    v
}

/// Idle arrays by element type and length.
#[derive(Default)]
pub(crate) struct Pool {
    free: Mutex<Free>,
}

#[derive(Default)]
struct Free {
    arrays: HashMap<(PrimitiveType, usize), Vec<ArrayData>>,
    bytes: usize,
}

impl Pool {
    /// `n` elements whose values are unspecified (left from an earlier
    /// use, or zero): the caller writes every one before it is read.
    pub(crate) fn take<T: NativeType>(&self, n: usize) -> Vec<T> {
        if n * std::mem::size_of::<T>() >= POOL_MIN_BYTES {
            let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(data) = free.arrays.get_mut(&(T::TYPE, n)).and_then(Vec::pop) {
                free.bytes -= n * std::mem::size_of::<T>();
                if let Ok(v) = T::into_vec(data) {
                    return v;
                }
            }
        }
        zeroed(n)
    }

    /// `n` copies of `value`.
    pub(crate) fn filled<T: NativeType>(&self, n: usize, value: T) -> Vec<T> {
        let mut v = self.take(n);
        v.fill(value);
        v
    }

    /// Takes back an array nothing reads any more.
    pub(crate) fn give<T: NativeType>(&self, v: Vec<T>) {
        self.give_data(T::wrap(v));
    }

    pub(crate) fn give_data(&self, data: ArrayData) {
        let n = data.len();
        let bytes = n * data.element_type().byte_size();
        if bytes < POOL_MIN_BYTES {
            return;
        }
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.bytes + bytes <= POOL_MAX_BYTES {
            free.bytes += bytes;
            free.arrays
                .entry((data.element_type(), n))
                .or_default()
                .push(data);
        }
    }

    /// Takes back the arrays of a value at its last use, those it alone holds.
    pub(crate) fn give_value(&self, value: Value<'_>) {
        match value {
            Value::Array(Buf::Own(a)) => {
                if let Ok(a) = std::sync::Arc::try_unwrap(a) {
                    self.give_data(a.into_data());
                }
            }
            Value::Tuple(t) => crate::value::unshare(t)
                .into_iter()
                .for_each(|v| self.give_value(v)),
            Value::Array(Buf::Arg(_)) | Value::Token => {}
        }
    }
}
