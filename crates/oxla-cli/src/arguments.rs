//! A module's entry arguments: one `.npy` file per parameter leaf, or random
//! values from a seed. Each leaf's size is checked against the memory limit
//! before anything is read or generated, so a module declaring a huge
//! parameter is an error, not an allocation.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use oxla_hlo::{ArrayShape, HloModule, Literal, Shape};

use crate::{npy, random};

/// The entry arguments of `module`: read from `inputs` (one file per
/// parameter leaf, depth first), or random from `seed` when `inputs` is
/// empty. No array larger than `max_array_bytes` is made.
pub fn entry_arguments(
    module: &HloModule,
    inputs: &[PathBuf],
    seed: u64,
    max_array_bytes: u64,
) -> Result<Vec<Literal>> {
    let params = module.program_shape().parameters;
    for (i, p) in params.iter().enumerate() {
        for leaf in p.leaves() {
            check_size(i, leaf, max_array_bytes)?;
        }
    }
    if inputs.is_empty() {
        return random::arguments(&params, seed);
    }
    let leaves: usize = params.iter().map(|p| p.leaves().len()).sum();
    if inputs.len() != leaves {
        bail!(
            "the module takes {leaves} input arrays (parameter leaves) but {} --input files were given",
            inputs.len()
        );
    }
    let mut files = inputs.iter();
    params.iter().map(|p| assemble(p, &mut files)).collect()
}

/// An error unless an array of `shape` fits in `limit` bytes.
fn check_size(parameter: usize, shape: &ArrayShape, limit: u64) -> Result<()> {
    let bytes = shape.byte_size()?;
    if bytes as u64 > limit {
        bail!(
            "entry parameter {parameter} has an array of shape {shape} ({bytes} bytes), more than the memory limit of {limit} bytes"
        );
    }
    Ok(())
}

/// Builds one parameter value from the next files, leaf by leaf.
fn assemble<'a>(shape: &Shape, files: &mut impl Iterator<Item = &'a PathBuf>) -> Result<Literal> {
    Ok(match shape {
        Shape::Array(a) => {
            let path = files.next().context("too few --input files")?;
            npy::read(path, a)?
        }
        Shape::Tuple(t) => Literal::Tuple(
            t.iter()
                .map(|s| assemble(s, files))
                .collect::<Result<_>>()?,
        ),
        Shape::Token => Literal::Token,
    })
}
