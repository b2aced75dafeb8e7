//! Shapes: `f32[2,3]{1,0}`, tuples `(s32[], (f32[2]{0}, ()))` and `token[]`.
//! Of a layout only `minor_to_major` is kept; tiling and the other
//! `:`-suffixes (`{1,0:T(8,128)S(1)}`) describe device memory, which oxla
//! does not model, so they are read and dropped on purpose. The default
//! (row-major) layout is stored as `None`, so a shape reads back equal
//! whether or not its text spelled the default out.

use oxla_hlo::{ArrayShape, Layout, PrimitiveType, ProgramShape, Shape};

use super::Parser;
use crate::attr_table::XLA_ONLY_TYPES;
use crate::error::PResult;
use crate::lexer::Tok;

impl<'a> Parser<'a> {
    /// Whether a shape starts here: `(` or an identifier followed by `[`.
    pub(super) fn at_shape(&mut self) -> PResult<bool> {
        Ok(match self.peek_tok()? {
            Tok::LParen => true,
            Tok::Ident(_) => self.peek_nth(1)?.tok == Tok::LBracket,
            _ => false,
        })
    }

    pub(crate) fn shape(&mut self) -> PResult<Shape> {
        let t = self.next()?;
        match t.tok {
            Tok::LParen => {
                self.enter(t.start)?;
                let mut elements = Vec::new();
                if !self.eat(&Tok::RParen)? {
                    loop {
                        elements.push(self.shape()?);
                        let sep = self.next()?;
                        match sep.tok {
                            Tok::Comma => {}
                            Tok::RParen => break,
                            _ => return Err(self.expected("',' or ')' in a tuple shape", &sep)),
                        }
                    }
                }
                self.leave();
                Ok(Shape::Tuple(elements))
            }
            Tok::Ident("token") => {
                self.expect(&Tok::LBracket, "'[' after token")?;
                self.expect(&Tok::RBracket, "']' (token[] has no dimensions)")?;
                Ok(Shape::Token)
            }
            Tok::Ident(name) => {
                let ty = match name.parse::<PrimitiveType>() {
                    Ok(ty) => ty,
                    Err(_) if XLA_ONLY_TYPES.contains(&name) => {
                        return Err(self.error(
                            t.start,
                            format!("element type {name} is not supported by oxla"),
                        ));
                    }
                    Err(_) if self.peek_tok()? == &Tok::LBracket => {
                        return Err(self.error(t.start, format!("unknown element type {name}")));
                    }
                    Err(_) => return Err(self.expected("a shape", &t)),
                };
                self.array_shape(ty, t.start)
            }
            _ => Err(self.expected("a shape", &t)),
        }
    }

    /// The dimensions and layout after an element type.
    fn array_shape(&mut self, ty: PrimitiveType, start: usize) -> PResult<Shape> {
        self.expect(&Tok::LBracket, "'[' after the element type")?;
        let mut dims = Vec::new();
        if !self.eat(&Tok::RBracket)? {
            loop {
                let t = self.peek()?.clone();
                match t.tok {
                    Tok::Leq | Tok::Question => {
                        return Err(self.error(t.start, "dynamic dimensions are not supported"));
                    }
                    Tok::Int(text) if text.starts_with('-') => {
                        return Err(self.error(
                            t.start,
                            format!("dimension sizes must not be negative, found {text}"),
                        ));
                    }
                    _ => dims.push(self.int("a dimension size")?),
                }
                let sep = self.next()?;
                match sep.tok {
                    Tok::Comma => {}
                    Tok::RBracket => break,
                    _ => return Err(self.expected("',' or ']' after a dimension size", &sep)),
                }
            }
        }
        let shape = ArrayShape::new(ty, dims).map_err(|e| self.error(start, e.to_string()))?;
        // As in XLA, `{` starts a layout only before an integer or ':';
        // otherwise it opens a computation body or a literal.
        let layout_next = self.peek_tok()? == &Tok::LBrace
            && matches!(self.peek_nth(1)?.tok, Tok::Int(_) | Tok::Colon);
        if !layout_next {
            return Ok(Shape::Array(shape));
        }
        let layout_start = self.peek()?.start;
        let minor_to_major = self.layout()?;
        let layout = Layout { minor_to_major };
        let layout = (!layout.is_row_major() || layout.minor_to_major.len() != shape.rank())
            .then_some(layout);
        shape
            .with_layout(layout)
            .map(Shape::Array)
            .map_err(|e| self.error(layout_start, e.to_string()))
    }

    /// `{1,0}` or `{1,0:T(8,128)...}`; returns minor_to_major.
    fn layout(&mut self) -> PResult<Vec<i64>> {
        self.expect(&Tok::LBrace, "'{' to start a layout")?;
        let mut minor_to_major = Vec::new();
        loop {
            match self.peek_tok()? {
                Tok::RBrace => {
                    self.next()?;
                    return Ok(minor_to_major);
                }
                Tok::Colon => {
                    self.next()?;
                    break;
                }
                Tok::Int(_) => {
                    minor_to_major.push(self.int("a dimension number")?);
                    let sep = self.peek()?.clone();
                    match sep.tok {
                        Tok::Comma => {
                            self.next()?;
                        }
                        Tok::RBrace | Tok::Colon => {}
                        _ => return Err(self.expected("',', ':' or '}' in a layout", &sep)),
                    }
                }
                _ => {
                    let t = self.next()?;
                    return Err(self.expected("a dimension number in a layout", &t));
                }
            }
        }
        // Tiles, memory space, element size...: skipped up to the closing brace.
        let mut parens = 0usize;
        loop {
            let t = self.next()?;
            match t.tok {
                Tok::LParen => parens += 1,
                Tok::RParen => parens = parens.saturating_sub(1),
                Tok::RBrace if parens == 0 => return Ok(minor_to_major),
                Tok::Eof => return Err(self.expected("'}' to close the layout", &t)),
                _ => {}
            }
        }
    }

    /// `(shape, ...) -> shape`, as in `entry_computation_layout={...}`.
    pub(super) fn program_shape(&mut self) -> PResult<ProgramShape> {
        self.expect(&Tok::LParen, "'(' to start the parameter shapes")?;
        let mut parameters = Vec::new();
        if !self.eat(&Tok::RParen)? {
            loop {
                parameters.push(self.shape()?);
                let t = self.next()?;
                match t.tok {
                    Tok::Comma => {}
                    Tok::RParen => break,
                    _ => return Err(self.expected("',' or ')' after a parameter shape", &t)),
                }
            }
        }
        self.expect(&Tok::Arrow, "'->' before the result shape")?;
        let result = self.shape()?;
        Ok(ProgramShape { parameters, result })
    }
}
