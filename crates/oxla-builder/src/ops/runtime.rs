//! Ops served by the runtime around a computation: infeed and outfeed,
//! cross-replica sums, custom calls, and random numbers.

use std::panic::Location;

use oxla_hlo::ir::{ComparisonDirection, Opcode, RngAlgorithm, RngDistribution};
use oxla_hlo::shape_inference as infer;
use oxla_hlo::{ArrayShape, PrimitiveType, Shape};

use crate::builder::{Extra, XlaBuilder};
use crate::computation::XlaComputation;
use crate::error::BuildError;
use crate::op::XlaOp;

/// `(T, T) -> T` adding its parameters: the reduction of CrossReplicaSum.
fn adder(ty: PrimitiveType) -> Result<XlaComputation, BuildError> {
    let b = XlaBuilder::new(format!("add_{ty}"));
    let x = b.parameter(0, &Shape::scalar(ty), "lhs");
    let y = b.parameter(1, &Shape::scalar(ty), "rhs");
    b.build(x + y)
}

impl<'b> XlaOp<'b> {
    /// The seed's `CrossReplicaSum`: the sum of this value over all replicas.
    #[track_caller]
    pub fn cross_replica_sum(self) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Ok(s) = self.shape() else {
            return b.failed();
        };
        let Some(a) = s.as_array() else {
            return b.record_error(BuildError::new(
                "all-reduce",
                format!("operand must be an array, got {s}"),
                loc,
            ));
        };
        match adder(a.element_type()) {
            Ok(add) => b.all_reduce_at(&[self], &add, &[], loc),
            Err(e) => b.record_error(BuildError::new("all-reduce", e.to_string(), loc)),
        }
    }
}

impl XlaBuilder {
    /// Today's `all-reduce`: combines each operand across the replicas of each
    /// group in `replica_groups` (empty: all replicas) with `computation: (T, T) -> T`.
    #[track_caller]
    pub fn all_reduce<'b>(
        &'b self,
        operands: &[XlaOp<'b>],
        computation: &XlaComputation,
        replica_groups: &[Vec<i64>],
    ) -> XlaOp<'b> {
        self.all_reduce_at(operands, computation, replica_groups, Location::caller())
    }

    fn all_reduce_at<'b>(
        &'b self,
        operands: &[XlaOp<'b>],
        computation: &XlaComputation,
        replica_groups: &[Vec<i64>],
        loc: &'static Location<'static>,
    ) -> XlaOp<'b> {
        let Some((ids, s)) = self.shapes("all-reduce", operands, loc) else {
            return self.failed();
        };
        let (comp, sig) = self.embed(computation);
        let refs: Vec<&Shape> = s.iter().collect();
        let mut extra = Extra::default();
        extra.attrs.replica_groups = Some(replica_groups.to_vec());
        extra.called.to_apply = Some(comp);
        self.add(
            Opcode::AllReduce,
            infer::all_reduce(&refs, &sig),
            ids,
            extra,
            loc,
        )
    }

    /// The seed's `Infeed`: reads one value of `shape` from the device's infeed
    /// queue. Nested tuple shapes are not supported; an empty tuple reads nothing.
    #[track_caller]
    pub fn infeed(&self, shape: &Shape) -> XlaOp<'_> {
        let loc = Location::caller();
        if shape.tuple_depth() > 1 {
            return self.record_error(BuildError::new(
                "infeed",
                format!("nested tuple shapes are not supported, got {shape}"),
                loc,
            ));
        }
        if shape.is_token() {
            return self.record_error(BuildError::new("infeed", "cannot infeed a token", loc));
        }
        let token = self.after_all(&[]);
        self.infeed_with_token(token, shape).get_tuple_element(0)
    }

    /// Today's `infeed`: reads a value after `token`, returning `(value, token)`.
    #[track_caller]
    pub fn infeed_with_token<'b>(&'b self, token: XlaOp<'b>, shape: &Shape) -> XlaOp<'b> {
        let loc = Location::caller();
        let Some((ids, s)) = self.shapes("infeed", &[token], loc) else {
            return self.failed();
        };
        let result = Shape::Tuple(vec![shape.clone(), Shape::Token]);
        self.add(
            Opcode::Infeed,
            infer::infeed(&s[0], &result),
            ids,
            Extra::default(),
            loc,
        )
    }

    /// Writes `value` to the outfeed after `token`; returns the new token.
    #[track_caller]
    pub fn outfeed<'b>(&'b self, value: XlaOp<'b>, token: XlaOp<'b>) -> XlaOp<'b> {
        let loc = Location::caller();
        let Some((ids, s)) = self.shapes("outfeed", &[value, token], loc) else {
            return self.failed();
        };
        let mut extra = Extra::default();
        extra.attrs.outfeed_shape = Some(s[0].clone());
        self.add(
            Opcode::Outfeed,
            infer::outfeed(&s[0], &s[1]),
            ids,
            extra,
            loc,
        )
    }

    /// A token ordered after all of `tokens` (a fresh token when empty).
    #[track_caller]
    pub fn after_all<'b>(&'b self, tokens: &[XlaOp<'b>]) -> XlaOp<'b> {
        let loc = Location::caller();
        let Some((ids, s)) = self.shapes("after-all", tokens, loc) else {
            return self.failed();
        };
        let refs: Vec<&Shape> = s.iter().collect();
        self.add(
            Opcode::AfterAll,
            infer::after_all(&refs),
            ids,
            Extra::default(),
            loc,
        )
    }

    /// The seed's `CustomCall`: calls the runtime's function `target_name` with
    /// `args`; it returns a value of `shape`.
    #[track_caller]
    pub fn custom_call<'b>(
        &'b self,
        target_name: &str,
        args: &[XlaOp<'b>],
        shape: &Shape,
    ) -> XlaOp<'b> {
        let loc = Location::caller();
        let Some((ids, _)) = self.shapes("custom-call", args, loc) else {
            return self.failed();
        };
        if target_name.is_empty() {
            return self.record_error(BuildError::new(
                "custom-call",
                "the target name must not be empty",
                loc,
            ));
        }
        let mut extra = Extra::default();
        extra.attrs.custom_call_target = Some(target_name.to_string());
        self.add(Opcode::CustomCall, Ok(shape.clone()), ids, extra, loc)
    }

    /// The seed's `RngUniform`: values uniform on `[a, b)`; `a`, `b` and the
    /// result are f32, s32 or u32 (all the same), `a` and `b` scalars.
    #[track_caller]
    pub fn rng_uniform<'b>(&'b self, a: XlaOp<'b>, b: XlaOp<'b>, shape: &Shape) -> XlaOp<'b> {
        let loc = Location::caller();
        self.rng_at(
            RngDistribution::Uniform,
            a,
            b,
            shape,
            &[PrimitiveType::F32, PrimitiveType::S32, PrimitiveType::U32],
            loc,
        )
    }

    /// The seed's `RngNormal`: values from N(mu, sigma); all f32, `mu` and `sigma` scalars.
    #[track_caller]
    pub fn rng_normal<'b>(&'b self, mu: XlaOp<'b>, sigma: XlaOp<'b>, shape: &Shape) -> XlaOp<'b> {
        let loc = Location::caller();
        self.rng_at(
            RngDistribution::Normal,
            mu,
            sigma,
            shape,
            &[PrimitiveType::F32],
            loc,
        )
    }

    fn rng_at<'b>(
        &'b self,
        distribution: RngDistribution,
        a: XlaOp<'b>,
        b: XlaOp<'b>,
        shape: &Shape,
        allowed: &[PrimitiveType],
        loc: &'static Location<'static>,
    ) -> XlaOp<'b> {
        let Some((ids, s)) = self.shapes("rng", &[a, b], loc) else {
            return self.failed();
        };
        let ty = shape.element_type();
        if !ty.is_some_and(|t| allowed.contains(&t)) {
            let names: Vec<&str> = allowed.iter().map(|t| t.name()).collect();
            return self.record_error(BuildError::new(
                "rng",
                format!(
                    "{distribution} needs a result of element type {}, got {shape}",
                    names.join(", ")
                ),
                loc,
            ));
        }
        let mut extra = Extra::default();
        extra.attrs.rng_distribution = Some(distribution);
        self.add(
            Opcode::Rng,
            infer::rng(distribution, &s[0], &s[1], shape),
            ids,
            extra,
            loc,
        )
    }

    /// The seed's `RngBernoulli`: u32 values that are 1 with probability `mean`
    /// (an f32 scalar) and 0 otherwise.
    #[track_caller]
    pub fn rng_bernoulli<'b>(&'b self, mean: XlaOp<'b>, shape: &Shape) -> XlaOp<'b> {
        let loc = Location::caller();
        let Ok(m) = mean.shape() else {
            return self.failed();
        };
        if !m
            .as_array()
            .is_some_and(|a| a.is_scalar() && a.element_type() == PrimitiveType::F32)
        {
            return self.record_error(BuildError::new(
                "RngBernoulli",
                format!("mean must be an f32 scalar, got {m}"),
                loc,
            ));
        }
        let Some(out) = shape
            .as_array()
            .filter(|a| a.element_type() == PrimitiveType::U32)
        else {
            return self.record_error(BuildError::new(
                "RngBernoulli",
                format!("the result must be a u32 array, got {shape}"),
                loc,
            ));
        };
        let uniform_shape = Shape::Array(ArrayShape::new_unchecked(
            PrimitiveType::F32,
            out.dims().to_vec(),
        ));
        let zero = self.constant_r0(0.0f32);
        let one = self.constant_r0(1.0f32);
        let u = self.rng_at(
            RngDistribution::Uniform,
            zero,
            one,
            &uniform_shape,
            &[PrimitiveType::F32],
            loc,
        );
        let hit = u.binary(
            Opcode::Compare,
            mean,
            &[],
            Some((ComparisonDirection::Lt, None)),
            loc,
        );
        hit.convert_element_type(PrimitiveType::U32)
    }

    /// Today's `rng-bit-generator`: from a u64 state, `(new_state, bits of shape)`.
    #[track_caller]
    pub fn rng_bit_generator<'b>(
        &'b self,
        algorithm: RngAlgorithm,
        initial_state: XlaOp<'b>,
        shape: &Shape,
    ) -> XlaOp<'b> {
        let loc = Location::caller();
        let Some((ids, s)) = self.shapes("rng-bit-generator", &[initial_state], loc) else {
            return self.failed();
        };
        let result = Shape::Tuple(vec![s[0].clone(), shape.clone()]);
        let mut extra = Extra::default();
        extra.attrs.rng_algorithm = Some(algorithm);
        self.add(
            Opcode::RngBitGenerator,
            infer::rng_bit_generator(&s[0], &result),
            ids,
            extra,
            loc,
        )
    }

    /// The id of the replica running the computation (u32).
    #[track_caller]
    pub fn replica_id(&self) -> XlaOp<'_> {
        self.add(
            Opcode::ReplicaId,
            Ok(Shape::scalar(PrimitiveType::U32)),
            vec![],
            Extra::default(),
            Location::caller(),
        )
    }
}
