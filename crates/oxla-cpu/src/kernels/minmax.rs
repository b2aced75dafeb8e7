//! XLA's float maximum and minimum, as every kernel computes them: NaN
//! propagates (the first operand's when both are NaN), and between equal
//! zeros +0 is the larger (`max(-0, +0) = +0`, `min(-0, +0) = -0`, in either
//! order), which is what XLA:CPU gives and the interpreter computes. Written
//! without short-circuits so loops compile to compares and blends.

pub(crate) trait MinMax: Copy + PartialOrd {
    fn nan(self) -> bool;
    fn negative(self) -> bool;
}

impl MinMax for f32 {
    #[inline(always)]
    fn nan(self) -> bool {
        self.is_nan()
    }
    #[inline(always)]
    fn negative(self) -> bool {
        self.is_sign_negative()
    }
}

impl MinMax for f64 {
    #[inline(always)]
    fn nan(self) -> bool {
        self.is_nan()
    }
    #[inline(always)]
    fn negative(self) -> bool {
        self.is_sign_negative()
    }
}

macro_rules! int_min_max {
    ($($t:ty),*) => {$(
        impl MinMax for $t {
            #[inline(always)]
            fn nan(self) -> bool {
                false
            }
            #[inline(always)]
            fn negative(self) -> bool {
                false
            }
        }
    )*};
}

int_min_max!(i8, i16, i32, i64, u8, u16, u32, u64);

#[inline(always)]
pub(crate) fn max<T: MinMax>(a: T, b: T) -> T {
    let take_b = (b > a) | (b.nan() & !a.nan()) | ((a == b) & a.negative());
    if take_b { b } else { a }
}

#[inline(always)]
pub(crate) fn min<T: MinMax>(a: T, b: T) -> T {
    let take_b = (b < a) | (b.nan() & !a.nan()) | ((a == b) & b.negative());
    if take_b { b } else { a }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeros_and_nans_as_xla() {
        assert!(max(-0.0f32, 0.0).is_sign_positive());
        assert!(max(0.0f32, -0.0).is_sign_positive());
        assert!(min(-0.0f32, 0.0).is_sign_negative());
        assert!(min(0.0f32, -0.0).is_sign_negative());
        assert!(max(f32::NAN, 1.0).is_nan());
        assert!(max(1.0, f32::NAN).is_nan());
        assert!(min(f64::NAN, 1.0).is_nan());
        let (a, b) = (f32::from_bits(0x7fc0_0001), f32::from_bits(0x7fc0_0002));
        assert_eq!(max(a, b).to_bits(), a.to_bits());
        assert_eq!(max(2.0f64, 3.0), 3.0);
        assert_eq!(min(2.0f64, 3.0), 2.0);
    }
}
