//! `iota` of any element type (the fused loops make f32 and f64 iotas on
//! the fly): the values along the iota dimension are made once, at compile
//! time, by the interpreter's own conversion, and each execution copies
//! them out through a broadcasting view.

use oxla_hlo::{
    ArrayData, ArrayLiteral, ArrayShape, HloComputation, HloInstruction, InstrId, Literal,
    NativeType, Opcode, PrimitiveType, Shape, with_array_data,
};
use oxla_interp::ElementwiseFunction;

use super::Kernel;
use super::copy::CopyKernel;
use super::view::View;
use crate::buffer::Pool;
use crate::value::Value;

pub(crate) struct IotaKernel {
    /// The values along the iota dimension, made at the first execution
    /// (a long column costs milliseconds, which compilation need not pay).
    column: std::sync::OnceLock<Option<ArrayLiteral>>,
    n: usize,
    copy: CopyKernel,
}

/// `convert(i)` to `ty` for each `i` below `n`, with the interpreter's rules
/// (a typed conversion where there is one: a million elements through the
/// scalar code took 50 ms of compile time).
fn column(ty: PrimitiveType, n: usize) -> Option<ArrayLiteral> {
    let shape = ArrayShape::new(ty, [n as i64]).ok()?;
    if let Some(f) = super::typed::convert_fn(PrimitiveType::S64, ty) {
        let indices = ArrayData::S64((0..n as i64).collect());
        let mut out = ArrayData::zeros(ty, n);
        if f(&indices, &mut out) {
            return ArrayLiteral::new(shape, out).ok();
        }
    }
    let mut p = HloInstruction::new(
        "i",
        Opcode::Parameter,
        Shape::scalar(PrimitiveType::S64),
        Vec::new(),
    );
    p.attrs.parameter_number = Some(0);
    let c = HloInstruction::new(
        "c",
        Opcode::Convert,
        Shape::scalar(ty),
        vec![InstrId::new(0)],
    );
    let f =
        ElementwiseFunction::compile(&HloComputation::new("iota", vec![p, c], InstrId::new(1)))?;
    let indices = Literal::vec1(&(0..n as i64).collect::<Vec<_>>())
        .into_array()
        .ok()?;
    f.apply(&[&indices], &shape).ok()
}

pub(crate) fn plan(instr: &HloInstruction) -> Option<IotaKernel> {
    let out = instr.shape.as_array()?;
    let d = usize::try_from(instr.attrs.iota_dimension?).ok()?;
    let n = *out.dims().get(d)?;
    let mut strides = vec![0i64; out.rank()];
    strides[d] = 1;
    let view = View {
        dims: out.dims().to_vec(),
        offset: 0,
        strides,
    };
    // The type has a conversion (checked on one element).
    column(out.element_type(), 1)?;
    Some(IotaKernel {
        column: std::sync::OnceLock::new(),
        n: usize::try_from(n).ok()?,
        copy: CopyKernel {
            ty: out.element_type(),
            view,
            out_dims: out.dims().to_vec(),
        },
    })
}

impl Kernel for IotaKernel {
    fn name(&self) -> &'static str {
        "iota"
    }

    fn run<'a>(&self, _inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        if self.copy.out_dims.contains(&0) {
            let shape = ArrayShape::new(self.copy.ty, self.copy.out_dims.clone())
                .map_err(|e| e.to_string())?;
            return Ok(Value::owned(
                ArrayLiteral::new(shape, ArrayData::zeros(self.copy.ty, 0))
                    .map_err(|e| e.to_string())?,
            ));
        }
        let column = self
            .column
            .get_or_init(|| column(self.copy.ty, self.n))
            .as_ref()
            .ok_or_else(|| format!("no iota of {}", self.copy.ty))?;
        let data: ArrayData =
            with_array_data!(column.data(), v => NativeType::wrap(self.copy.copy(v, pool)));
        let shape =
            ArrayShape::new(self.copy.ty, self.copy.out_dims.clone()).map_err(|e| e.to_string())?;
        Ok(Value::owned(
            ArrayLiteral::new(shape, data).map_err(|e| e.to_string())?,
        ))
    }
}
