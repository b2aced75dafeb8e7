//! Every element-wise opcode, and the main structured ones, evaluate for
//! every element type oxla-hlo's shape inference accepts (the interpreter
//! never answers "not implemented" for a verified module).

use oxla_hlo::ir::{Attrs, ComparisonDirection, ComparisonType, DotDimensionNumbers, OpFamily};
use oxla_hlo::shape_inference as si;
use oxla_hlo::{
    ArrayData, ArrayLiteral, ArrayShape, Literal, Opcode, PrimitiveType, Scalar, Shape,
};
use oxla_interp::{EvalOptions, NoServices, evaluate};

use crate::common::{CompBuilder, build_module};

fn sample(ty: PrimitiveType, dims: &[i64]) -> Literal {
    let shape = ArrayShape::new(ty, dims).unwrap();
    let n = shape.element_count().unwrap();
    let pool = [
        Scalar::Int(0),
        Scalar::Int(1),
        Scalar::Int(-3),
        Scalar::Float(2.5),
        Scalar::Float(-0.5),
        Scalar::Int(7),
    ];
    let values: Vec<Scalar> = (0..n).map(|i| pool[i % pool.len()]).collect();
    Literal::Array(ArrayLiteral::new(shape, ArrayData::from_scalars(ty, &values)).unwrap())
}

/// Builds `ROOT = opcode(params...)` with the given result shape and attributes, and evaluates it.
fn run(opcode: Opcode, result: Shape, params: &[Literal], attrs: Attrs) -> Result<Literal, String> {
    let mut b = CompBuilder::new("main");
    let ids: Vec<_> = params
        .iter()
        .enumerate()
        .map(|(i, p)| b.param(i, p.shape()))
        .collect();
    let root = b.add(opcode, result, &ids, attrs);
    let m = build_module(vec![b.finish(root)]);
    evaluate(&m, params, &EvalOptions::default(), &NoServices).map_err(|e| e.to_string())
}

#[test]
fn unary_and_binary_ops_for_every_accepted_type() {
    let mut ran = 0;
    for &op in Opcode::ALL {
        for ty in PrimitiveType::ALL {
            let s = Shape::array(ty, [6]).unwrap();
            let result = match op.family() {
                OpFamily::Unary
                    if !matches!(op, Opcode::Convert | Opcode::ReducePrecision | Opcode::Copy) =>
                {
                    si::unary(op, &s)
                }
                OpFamily::Binary if op != Opcode::Compare => si::binary(op, &s, &s),
                _ => continue,
            };
            let Ok(result) = result else { continue };
            let params: Vec<Literal> = (0..op.arity_count()).map(|_| sample(ty, &[6])).collect();
            if let Err(e) = run(op, result, &params, Attrs::default()) {
                panic!("{op} on {ty}: {e}");
            }
            ran += 1;
        }
    }
    assert!(ran > 200, "{ran}");
}

trait ArityCount {
    fn arity_count(self) -> usize;
}

impl ArityCount for Opcode {
    fn arity_count(self) -> usize {
        if self.family() == OpFamily::Binary {
            2
        } else {
            1
        }
    }
}

#[test]
fn compare_convert_bitcast_and_reduce_precision_for_every_accepted_type() {
    for ty in PrimitiveType::ALL {
        let s = Shape::array(ty, [6]).unwrap();
        for &dir in ComparisonDirection::ALL {
            let types = ComparisonType::ALL.iter().copied().map(Some).chain([None]);
            for ct in types {
                let Ok(result) = si::compare(&s, &s, dir, ct) else {
                    continue;
                };
                let attrs = Attrs {
                    comparison_direction: Some(dir),
                    comparison_type: ct,
                    ..Attrs::default()
                };
                run(
                    Opcode::Compare,
                    result,
                    &[sample(ty, &[6]), sample(ty, &[6])],
                    attrs,
                )
                .unwrap_or_else(|e| panic!("compare {dir} {ct:?} on {ty}: {e}"));
            }
        }
        for to in PrimitiveType::ALL {
            if let Ok(result) = si::convert(&s, to) {
                run(
                    Opcode::Convert,
                    result,
                    &[sample(ty, &[6])],
                    Attrs::default(),
                )
                .unwrap_or_else(|e| panic!("convert {ty} to {to}: {e}"));
            }
            let (from_bits, to_bits) = (ty.bit_width() as i64, to.bit_width() as i64);
            let dims: Vec<i64> = if from_bits < to_bits {
                vec![6, to_bits / from_bits]
            } else {
                vec![6]
            };
            let operand = Shape::array(ty, dims.clone()).unwrap();
            if let Ok(result) = si::bitcast_convert(&operand, to) {
                run(
                    Opcode::BitcastConvert,
                    result,
                    &[sample(ty, &dims)],
                    Attrs::default(),
                )
                .unwrap_or_else(|e| panic!("bitcast-convert {ty} to {to}: {e}"));
            }
        }
        if let Ok(result) = si::reduce_precision(&s, 5, 2) {
            let attrs = Attrs {
                exponent_bits: Some(5),
                mantissa_bits: Some(2),
                ..Attrs::default()
            };
            run(Opcode::ReducePrecision, result, &[sample(ty, &[6])], attrs)
                .unwrap_or_else(|e| panic!("reduce-precision {ty}: {e}"));
        }
        if let Ok(result) = si::clamp(&s, &s, &s) {
            run(
                Opcode::Clamp,
                result,
                &[sample(ty, &[6]), sample(ty, &[6]), sample(ty, &[6])],
                Attrs::default(),
            )
            .unwrap_or_else(|e| panic!("clamp {ty}: {e}"));
        }
    }
}

#[test]
fn dot_iota_and_rng_for_every_accepted_type() {
    for ty in PrimitiveType::ALL {
        let m = Shape::array(ty, [2, 3]).unwrap();
        let dn = DotDimensionNumbers {
            lhs_contracting_dimensions: vec![1],
            rhs_contracting_dimensions: vec![1],
            ..Default::default()
        };
        if let Ok(result) = si::dot_general(&m, &m, &dn, None) {
            let attrs = Attrs {
                dot_dnums: Some(dn.clone()),
                ..Attrs::default()
            };
            run(
                Opcode::Dot,
                result,
                &[sample(ty, &[2, 3]), sample(ty, &[2, 3])],
                attrs,
            )
            .unwrap_or_else(|e| panic!("dot {ty}: {e}"));
        }
        let out = ArrayShape::new(ty, [3, 2]).unwrap();
        if si::iota(&out, 1).is_ok() {
            let attrs = Attrs {
                iota_dimension: Some(1),
                ..Attrs::default()
            };
            run(Opcode::Iota, Shape::Array(out.clone()), &[], attrs)
                .unwrap_or_else(|e| panic!("iota {ty}: {e}"));
        }
        for dist in [
            oxla_hlo::ir::RngDistribution::Uniform,
            oxla_hlo::ir::RngDistribution::Normal,
        ] {
            let scalar = Shape::scalar(ty);
            if si::rng(dist, &scalar, &scalar, &Shape::Array(out.clone())).is_ok() {
                let attrs = Attrs {
                    rng_distribution: Some(dist),
                    ..Attrs::default()
                };
                run(
                    Opcode::Rng,
                    Shape::Array(out.clone()),
                    &[sample(ty, &[]), sample(ty, &[])],
                    attrs,
                )
                .unwrap_or_else(|e| panic!("rng {dist} {ty}: {e}"));
            }
        }
        let state = Shape::array(PrimitiveType::U64, [2]).unwrap();
        let result = Shape::tuple(vec![state.clone(), Shape::Array(out.clone())]);
        if si::rng_bit_generator(&state, &result).is_ok() {
            for alg in oxla_hlo::ir::RngAlgorithm::ALL {
                let attrs = Attrs {
                    rng_algorithm: Some(*alg),
                    ..Attrs::default()
                };
                run(
                    Opcode::RngBitGenerator,
                    result.clone(),
                    &[Literal::vec1(&[1u64, 2])],
                    attrs,
                )
                .unwrap_or_else(|e| panic!("rng-bit-generator {alg} {ty}: {e}"));
            }
        }
    }
}
