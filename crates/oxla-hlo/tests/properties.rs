//! Property tests for broadcasting and shape inference: each rule against a
//! direct, independent transcription of what the spec says.

use oxla_hlo::ir::{SliceDim, WindowDim};
use oxla_hlo::shape_inference::{broadcast_binary, reshape, slice, transpose, window_output_size};
use oxla_hlo::{PrimitiveType, Shape};
use proptest::prelude::*;

fn dims(max_rank: usize) -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(0i64..5, 0..=max_rank)
}

/// The broadcasting document, transcribed: expand the lower-rank operand
/// (unmatched dimensions become 1), then each pair must be equal or contain a 1.
fn reference(lhs: &[i64], rhs: &[i64], bd: &[i64]) -> Option<Vec<i64>> {
    let (small, large) = if lhs.len() < rhs.len() {
        (lhs, rhs)
    } else {
        (rhs, lhs)
    };
    let expanded: Vec<i64> = if lhs.len() == rhs.len() {
        if !bd.is_empty() && bd != (0..lhs.len() as i64).collect::<Vec<_>>().as_slice() {
            return None;
        }
        small.to_vec()
    } else {
        if bd.len() != small.len() || (bd.is_empty() && !small.is_empty()) {
            return None;
        }
        if bd.windows(2).any(|w| w[0] >= w[1])
            || bd.iter().any(|&d| d < 0 || d as usize >= large.len())
        {
            return None;
        }
        let mut e = vec![1; large.len()];
        for (i, &d) in bd.iter().enumerate() {
            e[d as usize] = small[i];
        }
        e
    };
    expanded
        .iter()
        .zip(large)
        .map(|(&a, &b)| match (a, b) {
            (a, b) if a == b => Some(a),
            (1, b) => Some(b),
            (a, 1) => Some(a),
            _ => None,
        })
        .collect()
}

proptest! {
    #[test]
    fn degenerate_broadcasting_matches_the_rule_and_is_symmetric(
        lhs in dims(4),
        flips in prop::collection::vec(0u8..3, 4),
    ) {
        // Make rhs the same rank, each dimension equal, 1, or something else.
        let rhs: Vec<i64> = lhs.iter().zip(&flips).map(|(&d, &f)| match f { 0 => d, 1 => 1, _ => d + 1 }).collect();
        let a = broadcast_binary("add", &lhs, &rhs, &[]).ok().map(|b| b.dims);
        let b = broadcast_binary("add", &rhs, &lhs, &[]).ok().map(|b| b.dims);
        prop_assert_eq!(&a, &reference(&lhs, &rhs, &[]));
        prop_assert_eq!(a, b);
    }

    #[test]
    fn in_dim_broadcasting_matches_the_rule(
        large in prop::collection::vec(1i64..5, 1..5),
        pick in prop::collection::vec(any::<bool>(), 5),
        sizes in prop::collection::vec(0u8..3, 5),
        scramble in any::<bool>(),
    ) {
        let mut bd: Vec<i64> = (0..large.len() as i64).filter(|&i| pick[i as usize]).collect();
        if bd.len() == large.len() {
            bd.pop();
        }
        if scramble && bd.len() > 1 {
            bd.swap(0, 1);
        }
        let small: Vec<i64> = bd.iter().zip(&sizes).map(|(&d, &s)| match s {
            0 => large[d as usize],
            1 => 1,
            _ => large[d as usize] + 1,
        }).collect();
        let got = broadcast_binary("add", &large, &small, &bd).ok().map(|b| b.dims);
        let swapped = broadcast_binary("add", &small, &large, &bd).ok().map(|b| b.dims);
        prop_assert_eq!(&got, &reference(&large, &small, &bd));
        prop_assert_eq!(got, swapped);
    }

    #[test]
    fn reshape_keeps_element_count(d in dims(4)) {
        let s = Shape::array(PrimitiveType::F32, d.clone()).unwrap();
        let n: i64 = d.iter().product();
        prop_assert!(reshape(&s, &[n]).is_ok());
        prop_assert_eq!(reshape(&s, &[n + 1]).is_ok(), false);
    }

    #[test]
    fn transpose_then_inverse_is_identity(d in dims(5), seed in any::<u64>()) {
        let rank = d.len();
        let mut perm: Vec<i64> = (0..rank as i64).collect();
        // A deterministic shuffle from the seed.
        let mut x = seed;
        for i in (1..rank).rev() {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            perm.swap(i, (x >> 33) as usize % (i + 1));
        }
        let mut inverse = vec![0i64; rank];
        for (i, &p) in perm.iter().enumerate() {
            inverse[p as usize] = i as i64;
        }
        let s = Shape::array(PrimitiveType::S32, d.clone()).unwrap();
        let t = transpose(&s, &perm).unwrap();
        prop_assert_eq!(transpose(&t, &inverse).unwrap(), s);
    }

    #[test]
    fn slice_size_counts_taken_elements(size in 0i64..20, start in 0i64..20, len in 0i64..20, stride in 1i64..5) {
        let s = Shape::array(PrimitiveType::F32, [size]).unwrap();
        let limit = start + len;
        let got = slice(&s, &[SliceDim { start, limit, stride }]);
        if limit <= size {
            let taken = (start..limit).step_by(stride as usize).count() as i64;
            prop_assert_eq!(got.unwrap().to_string(), format!("f32[{taken}]"));
        } else {
            prop_assert!(got.is_err());
        }
    }

    #[test]
    fn window_positions_match_brute_force(
        base in 0i64..12, size in 1i64..5, stride in 1i64..4,
        lo in -3i64..4, hi in -3i64..4, base_dilation in 1i64..3, window_dilation in 1i64..3,
    ) {
        let w = WindowDim { size, stride, pad_low: lo, pad_high: hi, window_dilation, base_dilation, window_reversal: false };
        let dilated = if base == 0 { 0 } else { (base - 1) * base_dilation + 1 };
        let padded = dilated + lo + hi;
        let got = window_output_size("reduce-window", base, &w);
        if padded < 0 {
            prop_assert!(got.is_err());
        } else {
            // Count window starts (multiples of the stride) whose last tap stays inside.
            let extent = (size - 1) * window_dilation + 1;
            let count = (0..padded).step_by(stride as usize).filter(|&p| p + extent <= padded).count() as i64;
            prop_assert_eq!(got.unwrap(), count);
        }
    }
}

#[test]
fn huge_window_and_slice_values_are_errors_not_overflows() {
    let base = WindowDim::new(1);
    for w in [
        WindowDim {
            base_dilation: i64::MAX,
            ..base
        },
        WindowDim {
            pad_low: i64::MAX,
            pad_high: i64::MAX,
            ..base
        },
        WindowDim {
            size: i64::MAX,
            window_dilation: 2,
            ..base
        },
    ] {
        assert!(window_output_size("reduce-window", 4, &w).is_err(), "{w:?}");
    }
    let s = Shape::array(PrimitiveType::F32, [4]).unwrap();
    assert_eq!(
        slice(
            &s,
            &[SliceDim {
                start: 0,
                limit: 4,
                stride: i64::MAX
            }]
        )
        .unwrap()
        .to_string(),
        "f32[1]"
    );
    assert_eq!(
        oxla_hlo::shape_inference::make_padding(
            &[5],
            &[3],
            &[i64::MAX],
            oxla_hlo::shape_inference::Padding::Same
        ),
        vec![(0, 0)]
    );
}
