//! Instructions that need the runtime: infeed, outfeed, custom-call and the
//! collectives (all-reduce, all-gather, reduce-scatter, all-to-all,
//! collective-permute), all through [`crate::Services`]. Every collective
//! exchanges its operand (a tuple of them, when there are several) with the
//! replicas of its group in one call of [`crate::Services::collective`], then
//! computes its result locally from the values, in participant order.

use oxla_hlo::{ArrayData, ArrayLiteral, HloInstruction, Literal, Shape};

use super::movement::{concat_arrays, slice_along};
use super::reduce::result_arrays;
use super::{attr, result_array};
use crate::element::Elem;
use crate::error::{OpError, OpResult, ServiceKind, fail};
use crate::interpreter::{Interpreter, Site};
use crate::services::CollectiveKey;
use crate::value::{Value, make_array};

pub(crate) fn u32_scalar(v: u32) -> Value {
    Value::scalar(Elem::U32(v))
}

fn service_error(kind: ServiceKind, message: impl Into<String>) -> OpError {
    OpError::Service(kind, message.into())
}

/// The operands as one value: the array itself, or a tuple of several.
fn bundle(operands: &[Value]) -> Value {
    if operands.len() == 1 {
        operands[0].clone()
    } else {
        Value::tuple(operands.to_vec())
    }
}

/// The arrays of one participant's contribution (the inverse of [`bundle`]).
fn unbundle(v: &Value, n: usize) -> OpResult<Vec<&ArrayLiteral>> {
    if n == 1 {
        Ok(vec![v.as_array()?])
    } else {
        let t = v.as_tuple()?;
        if t.len() != n {
            return fail(format!(
                "a participant sent {} values, expected {n}",
                t.len()
            ));
        }
        t.iter().map(Value::as_array).collect()
    }
}

impl Interpreter<'_> {
    pub(crate) fn infeed(&mut self, instr: &HloInstruction) -> OpResult<Value> {
        let data_shape = match &instr.shape {
            Shape::Tuple(t) if t.len() == 2 => &t[0],
            other => {
                return fail(format!(
                    "the result must be a (data, token) tuple, got {other}"
                ));
            }
        };
        let value = self
            .services
            .infeed(data_shape)
            .map_err(|e| service_error(ServiceKind::Infeed, e.0))?;
        if !value.shape().compatible(data_shape) {
            return Err(service_error(
                ServiceKind::Infeed,
                format!(
                    "the infeed returned a value of shape {}, expected {data_shape}",
                    value.shape()
                ),
            ));
        }
        Ok(Value::tuple(vec![Value::from_literal(value), Value::Token]))
    }

    pub(crate) fn outfeed(&mut self, operands: &[Value]) -> OpResult<Value> {
        self.services
            .outfeed(operands[0].to_literal())
            .map_err(|e| service_error(ServiceKind::Outfeed, e.0))?;
        Ok(Value::Token)
    }

    pub(crate) fn custom_call(
        &mut self,
        instr: &HloInstruction,
        operands: &[Value],
    ) -> OpResult<Value> {
        let target = attr(&instr.attrs.custom_call_target, "custom_call_target")?;
        if IDENTITY_TARGETS.contains(&target.as_str()) {
            return match operands {
                [x] if x.shape().compatible(&instr.shape) => Ok(x.clone()),
                _ => fail(format!(
                    "`{target}` passes one operand of the custom-call's shape {} through",
                    instr.shape
                )),
            };
        }
        if let Some(result) = super::lapack::call(target, instr, operands) {
            return result;
        }
        let literals: Vec<Literal> = operands.iter().map(Value::to_literal).collect();
        let config = instr.attrs.backend_config.as_deref().unwrap_or("");
        let value = self
            .services
            .custom_call(target, &literals, &instr.shape, config)
            .map_err(|e| service_error(ServiceKind::CustomCall, e.0))?;
        if !value.shape().compatible(&instr.shape) {
            return Err(service_error(
                ServiceKind::CustomCall,
                format!(
                    "target `{target}` returned a value of shape {}, expected {}",
                    value.shape(),
                    instr.shape
                ),
            ));
        }
        Ok(Value::from_literal(value))
    }

    /// The replicas taking part with this one, in group order.
    fn participants(&self, instr: &HloInstruction) -> OpResult<Vec<u32>> {
        let me = self.services.replica_id();
        let groups = instr.attrs.replica_groups.as_deref().unwrap_or(&[]);
        if groups.iter().all(|g| g.is_empty()) {
            return Ok((0..self.services.replica_count()).collect());
        }
        match groups.iter().find(|g| g.contains(&(me as i64))) {
            Some(g) => Ok(g.iter().map(|&r| r as u32).collect()),
            None => Err(service_error(
                ServiceKind::Collective,
                format!("replica {me} is in none of the replica groups {groups:?}"),
            )),
        }
    }

    /// Exchanges `value` with `participants`; returns every participant's value in order.
    fn exchange(
        &mut self,
        site: &Site<'_>,
        participants: &[u32],
        value: Value,
    ) -> OpResult<Vec<Value>> {
        let key = CollectiveKey {
            computation: site.computation.name.clone(),
            instruction: site.instr.name.clone(),
            sequence: self.next_collective_sequence(site),
        };
        let shape = value.shape();
        let values = self
            .services
            .collective(&key, participants, value.into_literal())
            .map_err(|e| service_error(ServiceKind::Collective, e.0))?;
        if values.len() != participants.len() {
            return Err(service_error(
                ServiceKind::Collective,
                format!(
                    "got {} values for {} participants",
                    values.len(),
                    participants.len()
                ),
            ));
        }
        if let Some(v) = values.iter().find(|v| !v.shape().compatible(&shape)) {
            return Err(service_error(
                ServiceKind::Collective,
                format!(
                    "a participant sent a value of shape {}, expected {shape}",
                    v.shape()
                ),
            ));
        }
        Ok(values.into_iter().map(Value::from_literal).collect())
    }

    /// Element-wise reduction of the participants' arrays with `to_apply`, in participant order.
    fn reduce_contributions(
        &mut self,
        instr: &HloInstruction,
        contributions: &[Value],
        n: usize,
    ) -> OpResult<Vec<ArrayLiteral>> {
        let mut f = self.scalar_fn(instr.called.to_apply, "reduction", Vec::new())?;
        let per: Vec<Vec<&ArrayLiteral>> = contributions
            .iter()
            .map(|c| unbundle(c, n))
            .collect::<OpResult<_>>()?;
        let mut results = Vec::with_capacity(n);
        let mut out = Vec::with_capacity(1);
        for j in 0..n {
            let first = per[0][j];
            let mut data: ArrayData = first.data().clone();
            for p in per.iter().skip(1) {
                for i in 0..data.len() {
                    out.clear();
                    self.apply(
                        &mut f,
                        &[Elem::read(&data, i), Elem::read(p[j].data(), i)],
                        &mut out,
                    )?;
                    match out.as_slice() {
                        [v] if v.write(&mut data, i) => {}
                        _ => {
                            return fail(
                                "the reduction must return one value of the operand's type",
                            );
                        }
                    }
                }
            }
            results.push(make_array(first.shape(), data)?);
        }
        Ok(results)
    }

    pub(crate) fn all_reduce(&mut self, site: &Site<'_>, operands: &[Value]) -> OpResult<Value> {
        let participants = self.participants(site.instr)?;
        let contributions = self.exchange(site, &participants, bundle(operands))?;
        let results = self.reduce_contributions(site.instr, &contributions, operands.len())?;
        Ok(Value::tuple_or_single(results))
    }

    fn dimension(instr: &HloInstruction) -> OpResult<usize> {
        match attr(&instr.attrs.dimensions, "dimensions")?[..] {
            [d] if d >= 0 => Ok(d as usize),
            ref other => fail(format!("needs exactly one dimension, got {other:?}")),
        }
    }

    /// Concatenates the participants' operands along `dimensions`, in group order.
    pub(crate) fn all_gather(&mut self, site: &Site<'_>, operands: &[Value]) -> OpResult<Value> {
        let d = Self::dimension(site.instr)?;
        let shapes = result_arrays(&site.instr.shape)?;
        let participants = self.participants(site.instr)?;
        let contributions = self.exchange(site, &participants, bundle(operands))?;
        let per: Vec<Vec<&ArrayLiteral>> = contributions
            .iter()
            .map(|c| unbundle(c, operands.len()))
            .collect::<OpResult<_>>()?;
        let mut results = Vec::with_capacity(operands.len());
        for (j, shape) in shapes.iter().enumerate().take(operands.len()) {
            let parts: Vec<&ArrayLiteral> = per.iter().map(|p| p[j]).collect();
            results.push(concat_arrays(&parts, d, shape)?);
        }
        Ok(Value::tuple_or_single(results))
    }

    /// Reduces like all-reduce, then keeps this replica's block along `dimensions`.
    pub(crate) fn reduce_scatter(
        &mut self,
        site: &Site<'_>,
        operands: &[Value],
    ) -> OpResult<Value> {
        let d = Self::dimension(site.instr)?;
        let shapes = result_arrays(&site.instr.shape)?;
        let participants = self.participants(site.instr)?;
        let me = self.my_position(&participants)?;
        let contributions = self.exchange(site, &participants, bundle(operands))?;
        let reduced = self.reduce_contributions(site.instr, &contributions, operands.len())?;
        let mut results = Vec::with_capacity(reduced.len());
        for (r, shape) in reduced.iter().zip(&shapes) {
            let size = shape.dims().get(d).copied().unwrap_or(0).max(0) as usize;
            results.push(slice_along(r, d, me * size, size)?);
        }
        Ok(Value::tuple_or_single(results))
    }

    fn my_position(&self, participants: &[u32]) -> OpResult<usize> {
        let me = self.services.replica_id();
        participants.iter().position(|&p| p == me).ok_or_else(|| {
            service_error(
                ServiceKind::Collective,
                format!("replica {me} is not in its own group"),
            )
        })
    }

    /// With `dimensions={d}`: splits the operand into one block per participant
    /// along `d`, sends block `j` to participant `j`, and concatenates the
    /// blocks received along `d`. Without: operand `j` goes to participant `j`,
    /// and result `i` is what participant `i` sent here.
    pub(crate) fn all_to_all(&mut self, site: &Site<'_>, operands: &[Value]) -> OpResult<Value> {
        let participants = self.participants(site.instr)?;
        let me = self.my_position(&participants)?;
        let contributions = self.exchange(site, &participants, bundle(operands))?;
        let n = operands.len();
        match site.instr.attrs.dimensions.as_deref() {
            Some([_]) => {
                let d = Self::dimension(site.instr)?;
                let out = result_array(site.instr)?;
                let mut blocks = Vec::with_capacity(participants.len());
                for c in &contributions {
                    let a = c.as_array()?;
                    let size =
                        a.dims().get(d).copied().unwrap_or(0).max(0) as usize / participants.len();
                    blocks.push(slice_along(a, d, me * size, size)?);
                }
                let parts: Vec<&ArrayLiteral> = blocks.iter().collect();
                Ok(Value::array(concat_arrays(&parts, d, out)?))
            }
            _ => {
                if n != participants.len() {
                    return fail(format!(
                        "the tuple form needs one operand per participant ({}), got {n}",
                        participants.len()
                    ));
                }
                let results = contributions
                    .iter()
                    .map(|c| Ok(unbundle(c, n)?[me].clone()))
                    .collect::<OpResult<Vec<_>>>()?;
                Ok(Value::tuple_or_single(results))
            }
        }
    }

    /// Each replica receives the operand of the replica paired with it as
    /// source in `source_target_pairs`, or zeros if none is.
    pub(crate) fn collective_permute(
        &mut self,
        site: &Site<'_>,
        operands: &[Value],
    ) -> OpResult<Value> {
        let participants: Vec<u32> = (0..self.services.replica_count()).collect();
        let me = self.services.replica_id() as i64;
        let contributions = self.exchange(site, &participants, operands[0].clone())?;
        let pairs = site
            .instr
            .attrs
            .source_target_pairs
            .as_deref()
            .unwrap_or(&[]);
        match pairs.iter().find(|&&(_, t)| t == me) {
            Some(&(s, _)) => match participants.iter().position(|&p| p as i64 == s) {
                Some(i) => Ok(contributions[i].clone()),
                None => fail(format!("source replica {s} does not exist")),
            },
            None => Ok(Value::from_literal(Literal::zeros(&operands[0].shape())?)),
        }
    }
}

/// Custom-call targets that are the identity on one device: XLA's SPMD
/// partitioner consumes these sharding annotations (JAX writes `Sharding`
/// for `with_sharding_constraint`), leaving the value as it was.
const IDENTITY_TARGETS: [&str; 3] = ["Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"];

/// Whether `target` is a custom-call target oxla runs itself, without a
/// registered implementation: the sharding annotations (the identity on one
/// device) and the LAPACK routines JAX calls on CPU (`eval/lapack.rs`).
pub fn is_builtin_custom_call(target: &str) -> bool {
    IDENTITY_TARGETS.contains(&target) || super::lapack::is_builtin(target)
}
