//! The floating-point environment of an evaluation. By default arithmetic is
//! IEEE: denormals are kept. XLA:CPU instead runs with the x86 MXCSR
//! flush-to-zero and denormals-are-zero bits set; with
//! [`crate::EvalOptions::flush_denormals`] the interpreter models that:
//! arithmetic on f32 and f64 (and so on bf16, which is computed in f32, and on
//! the parts of complex numbers) reads denormal operands as zero and flushes
//! denormal results to zero. Bit operations are unaffected: negate, abs,
//! copy, select, data movement, bitcasts, total-order comparison,
//! reduce-precision, and the conversions XLA does with integer code (f32 to
//! bf16, bf16 and f16 to f32). f16 values are computed in f32, where f16
//! denormals are normal numbers, so they survive.
//!
//! Like the hardware mode, the setting belongs to the thread: `evaluate` sets
//! it for its duration and restores the previous setting afterwards.

use std::cell::Cell;

thread_local! {
    static FLUSH_DENORMALS: Cell<bool> = const { Cell::new(false) };
}

/// Whether denormals are flushed on this thread.
pub(crate) fn flushing() -> bool {
    FLUSH_DENORMALS.with(Cell::get)
}

/// Restores the previous setting when dropped.
pub(crate) struct FlushGuard(bool);

impl Drop for FlushGuard {
    fn drop(&mut self) {
        FLUSH_DENORMALS.with(|f| f.set(self.0));
    }
}

/// Sets whether denormals are flushed until the guard is dropped.
pub(crate) fn set_flushing(flush: bool) -> FlushGuard {
    FlushGuard(FLUSH_DENORMALS.with(|f| f.replace(flush)))
}

/// Reading a denormal as a signed zero (and writing one as such), when flushing.
pub(crate) trait Flush: Copy {
    fn flush(self) -> Self;
}

impl Flush for f32 {
    fn flush(self) -> f32 {
        if self.is_subnormal() && flushing() {
            0.0f32.copysign(self)
        } else {
            self
        }
    }
}

impl Flush for f64 {
    fn flush(self) -> f64 {
        if self.is_subnormal() && flushing() {
            0.0f64.copysign(self)
        } else {
            self
        }
    }
}

impl Flush for num_complex::Complex32 {
    fn flush(self) -> Self {
        num_complex::Complex32::new(self.re.flush(), self.im.flush())
    }
}

impl Flush for num_complex::Complex64 {
    fn flush(self) -> Self {
        num_complex::Complex64::new(self.re.flush(), self.im.flush())
    }
}
