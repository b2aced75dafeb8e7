//! Literals for a known shape (`constant(...)`): scalars, nested braces
//! with one level per dimension in row-major order, tuples in parentheses.
//! Elements are range-checked for their type. NaN payloads set the mantissa
//! bits exactly, so values are built from bits rather than through `f64`
//! (converting a signalling NaN between widths would quiet it).
//!
//! One deliberate departure from XLA: XLA lexes `-0` as the integer 0, so it
//! reads `f32[] constant(-0)` back as +0 although its own printer writes
//! negative zero that way. oxla reads a float element written `-0` as -0.0,
//! so printing and parsing round-trip exactly.

use oxla_hlo::num_complex::Complex;
use oxla_hlo::{ArrayData, ArrayShape, Literal, PrimitiveType, Shape};

use super::Parser;
use crate::error::PResult;
use crate::floats::FloatBits;
use crate::lexer::Tok;

/// A float element as written, before it meets its type.
enum FloatText<'a> {
    Finite(f64, &'a str),
    Inf {
        negative: bool,
    },
    Nan {
        negative: bool,
        payload: Option<u64>,
    },
}

impl<'a> Parser<'a> {
    /// A literal of `shape`.
    pub(crate) fn literal(&mut self, shape: &Shape) -> PResult<Literal> {
        match shape {
            Shape::Tuple(elements) => {
                let open = self.expect(&Tok::LParen, "'(' to start a tuple literal")?;
                self.enter(open.start)?;
                let mut values = Vec::with_capacity(elements.len());
                for (i, element) in elements.iter().enumerate() {
                    if i > 0 {
                        self.expect(&Tok::Comma, "',' between tuple elements")?;
                    }
                    values.push(self.literal(element)?);
                }
                let close = self.next()?;
                if close.tok != Tok::RParen {
                    let what = format!("')' after the {} elements of the tuple", elements.len());
                    return Err(self.expected(&what, &close));
                }
                self.leave();
                Ok(Literal::Tuple(values))
            }
            Shape::Token => {
                let at = self.peek()?.start;
                Err(self.error(at, "token constants are not supported"))
            }
            Shape::Array(a) => self.array_literal(a),
        }
    }

    fn array_literal(&mut self, shape: &ArrayShape) -> PResult<Literal> {
        let start = self.peek()?.start;
        let ty = shape.element_type();
        let mut data = ArrayData::zeros(ty, 0);
        if shape.rank() == 0 {
            self.element(ty, &mut data)?;
        } else {
            if self.peek_tok()? == &Tok::LBrace && self.peek_nth(1)?.tok == Tok::Ellipsis {
                return Err(self.error(
                    start,
                    "elided constant {...}: the text does not contain the values \
                     (print it with print_large_constants)",
                ));
            }
            // `{}` is any array with no elements (oxla prints large ones so).
            let empty = shape.dims().contains(&0)
                && self.peek_tok()? == &Tok::LBrace
                && self.peek_nth(1)?.tok == Tok::RBrace;
            if empty {
                self.next()?;
                self.next()?;
            } else {
                self.dense_level(shape.dims(), 0, ty, &mut data)?;
            }
        }
        Literal::from_data(shape.clone(), data).map_err(|e| self.error(start, e.to_string()))
    }

    /// One brace level of a dense array: `dims[level]` entries, each an
    /// element (innermost level) or the next level. Commas are optional, as in XLA.
    fn dense_level(
        &mut self,
        dims: &[i64],
        level: usize,
        ty: PrimitiveType,
        data: &mut ArrayData,
    ) -> PResult<()> {
        let open = self.expect(&Tok::LBrace, "'{' to start a dimension of the array")?;
        self.enter(open.start)?;
        let size = dims.get(level).copied().unwrap_or(0);
        let innermost = level + 1 == dims.len();
        let mut count: i64 = 0;
        loop {
            let t = self.peek()?.clone();
            if t.tok == Tok::RBrace {
                if count != size {
                    return Err(self.error(
                        t.start,
                        format!(
                            "dimension {level} has size {size}, but {count} entries were given"
                        ),
                    ));
                }
                self.next()?;
                break;
            }
            if count == size {
                let what = format!("'}}' after the {size} entries of dimension {level}");
                return Err(self.expected(&what, &t));
            }
            if innermost {
                self.element(ty, data)?;
            } else {
                self.dense_level(dims, level + 1, ty, data)?;
            }
            count += 1;
            self.eat(&Tok::Comma)?;
        }
        self.leave();
        Ok(())
    }

    /// One element of type `ty`, appended to `data` (whose type is `ty`).
    fn element(&mut self, ty: PrimitiveType, data: &mut ArrayData) -> PResult<()> {
        match data {
            ArrayData::Pred(v) => v.push(self.pred_element()?),
            ArrayData::S8(v) => v.push(self.int_element(ty)?),
            ArrayData::S16(v) => v.push(self.int_element(ty)?),
            ArrayData::S32(v) => v.push(self.int_element(ty)?),
            ArrayData::S64(v) => v.push(self.int_element(ty)?),
            ArrayData::U8(v) => v.push(self.int_element(ty)?),
            ArrayData::U16(v) => v.push(self.int_element(ty)?),
            ArrayData::U32(v) => v.push(self.int_element(ty)?),
            ArrayData::U64(v) => v.push(self.int_element(ty)?),
            ArrayData::F16(v) => v.push(self.float_element(ty)?),
            ArrayData::BF16(v) => v.push(self.float_element(ty)?),
            ArrayData::F32(v) => v.push(self.float_element(ty)?),
            ArrayData::F64(v) => v.push(self.float_element(ty)?),
            ArrayData::C64(v) => {
                let (re, im) = self.complex_element::<f32>(ty)?;
                v.push(Complex::new(re, im));
            }
            ArrayData::C128(v) => {
                let (re, im) = self.complex_element::<f64>(ty)?;
                v.push(Complex::new(re, im));
            }
        }
        Ok(())
    }

    /// `true`, `false`, or an integer (non-zero is true).
    fn pred_element(&mut self) -> PResult<bool> {
        let t = self.next()?;
        match t.tok {
            Tok::Ident("true") => Ok(true),
            Tok::Ident("false") => Ok(false),
            Tok::Int(text) => Ok(text.bytes().any(|b| b.is_ascii_digit() && b != b'0')),
            _ => Err(self.expected("a pred value (true, false, 1 or 0)", &t)),
        }
    }

    fn int_element<T: TryFrom<i128>>(&mut self, ty: PrimitiveType) -> PResult<T> {
        let t = self.next()?;
        let Tok::Int(text) = t.tok else {
            return Err(self.expected(&format!("an integer for {ty}"), &t));
        };
        text.parse::<i128>()
            .ok()
            .and_then(|v| T::try_from(v).ok())
            .ok_or_else(|| self.error(t.start, format!("value {text} is out of range for {ty}")))
    }

    fn float_text(&mut self, ty: PrimitiveType) -> PResult<(FloatText<'a>, usize)> {
        let t = self.next()?;
        let value = match t.tok {
            Tok::Int(text) | Tok::Float(text) => {
                let x: f64 = text
                    .parse()
                    .map_err(|_| self.expected(&format!("a value of type {ty}"), &t))?;
                if x.is_infinite() {
                    return Err(
                        self.error(t.start, format!("value {text} is out of range for {ty}"))
                    );
                }
                FloatText::Finite(x, text)
            }
            Tok::Inf { negative } => FloatText::Inf { negative },
            Tok::Nan { negative, payload } => FloatText::Nan { negative, payload },
            _ => return Err(self.expected(&format!("a value of type {ty}"), &t)),
        };
        Ok((value, t.start))
    }

    fn float_element<T: FloatBits>(&mut self, ty: PrimitiveType) -> PResult<T> {
        let (value, at) = self.float_text(ty)?;
        match value {
            FloatText::Finite(x, text) => {
                let v = T::round_from(x);
                if v.is_infinite_value() {
                    return Err(self.error(at, format!("value {text} is out of range for {ty}")));
                }
                Ok(v)
            }
            FloatText::Inf { negative } => Ok(T::round_from(if negative {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            })),
            FloatText::Nan { negative, payload } => {
                let payload = payload.unwrap_or_else(T::default_nan_payload);
                T::nan_with_payload(negative, payload).ok_or_else(|| {
                    let mask = (1u64 << T::MANTISSA_BITS) - 1;
                    self.error(
                        at,
                        format!(
                            "NaN payload 0x{payload:x} does not fit the {}-bit mantissa of {ty} \
                             (it must be between 0x1 and 0x{mask:x})",
                            T::MANTISSA_BITS
                        ),
                    )
                })
            }
        }
    }

    /// `(re, im)`.
    fn complex_element<T: FloatBits>(&mut self, ty: PrimitiveType) -> PResult<(T, T)> {
        let part = ty.component_type();
        let open = self.next()?;
        if open.tok != Tok::LParen {
            return Err(self.expected(
                &format!("'(' to start a complex value (re, im) of type {ty}"),
                &open,
            ));
        }
        let re = self.float_element(part)?;
        self.expect(&Tok::Comma, "',' between the real and imaginary parts")?;
        let im = self.float_element(part)?;
        self.expect(&Tok::RParen, "')' after the imaginary part")?;
        Ok((re, im))
    }
}
