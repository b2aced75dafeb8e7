//! Shapes: arrays (element type, dimensions, optional layout), tuples of shapes,
//! and the token shape. Sizes are checked: an element count or byte size that
//! does not fit in `usize` is an error, never an overflow.

use std::fmt;

use crate::element_type::PrimitiveType;

/// How deeply tuple shapes may nest. Deeper shapes are unusable in practice,
/// would not read back from HLO text (the parser bounds all nesting at 256
/// levels) and make every walk over a shape recursion-bound; the verifier
/// and the builder reject them.
pub const MAX_TUPLE_DEPTH: usize = 64;

/// The most parts (arrays, tokens and tuples, all levels together) one shape
/// may have. A tuple may repeat an operand, so a few nested `tuple`s can
/// describe exponentially many parts (and every copy of the shape costs as
/// much); the verifier and the builder reject shapes past this bound.
pub const MAX_SHAPE_PARTS: usize = 1 << 16;

/// Physical order of an array's dimensions, minor (fastest varying) first, as
/// XLA writes it in `f32[2,3]{1,0}`. oxla keeps layouts as metadata only: host
/// data is always stored row-major (the default layout `{rank-1, ..., 0}`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    pub minor_to_major: Vec<i64>,
}

impl Layout {
    /// The row-major layout for `rank` dimensions: `{rank-1, ..., 1, 0}`.
    pub fn row_major(rank: usize) -> Layout {
        Layout {
            minor_to_major: (0..rank as i64).rev().collect(),
        }
    }

    pub fn is_row_major(&self) -> bool {
        let n = self.minor_to_major.len() as i64;
        self.minor_to_major
            .iter()
            .enumerate()
            .all(|(i, &d)| d == n - 1 - i as i64)
    }
}

/// The shape of an array: element type, dimension sizes and an optional layout.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ArrayShape {
    element_type: PrimitiveType,
    dims: Vec<i64>,
    layout: Option<Layout>,
}

/// A value's shape: an array, a tuple of shapes (possibly nested or empty), or
/// a token (an ordering handle for side-effecting operations).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    Array(ArrayShape),
    Tuple(Vec<Shape>),
    Token,
}

/// Why a shape could not be made or measured.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    #[error("dimension {index} of {shape_text} is negative ({size})")]
    NegativeDimension {
        shape_text: String,
        index: usize,
        size: i64,
    },
    #[error("the element count of {0} overflows")]
    ElementCountOverflow(String),
    #[error("the byte size of {0} overflows")]
    ByteSizeOverflow(String),
    #[error("layout {layout:?} is not a permutation of the {rank} dimensions of {shape_text}")]
    BadLayout {
        shape_text: String,
        layout: Vec<i64>,
        rank: usize,
    },
    #[error("tuple shapes nest more than {MAX_TUPLE_DEPTH} levels deep")]
    TooDeep,
    #[error("the shape has more than {MAX_SHAPE_PARTS} parts (arrays, tokens and tuples)")]
    TooManyParts,
}

impl ArrayShape {
    /// An array shape with the default layout. Dimension sizes must be
    /// non-negative and their product must fit in `usize`.
    pub fn new(
        element_type: PrimitiveType,
        dims: impl Into<Vec<i64>>,
    ) -> Result<ArrayShape, ShapeError> {
        let shape = ArrayShape {
            element_type,
            dims: dims.into(),
            layout: None,
        };
        shape.validate()?;
        Ok(shape)
    }

    /// Like [`ArrayShape::new`], for dimensions known to be valid (small
    /// non-negative constants, or sizes taken from an existing array).
    pub fn new_unchecked(element_type: PrimitiveType, dims: impl Into<Vec<i64>>) -> ArrayShape {
        ArrayShape {
            element_type,
            dims: dims.into(),
            layout: None,
        }
    }

    pub fn scalar(element_type: PrimitiveType) -> ArrayShape {
        ArrayShape {
            element_type,
            dims: Vec::new(),
            layout: None,
        }
    }

    /// Checks what [`ArrayShape::new`] and [`ArrayShape::with_layout`]
    /// check: dimensions non-negative, element count and byte size within
    /// `usize`, layout a permutation of the dimensions. Shapes made with
    /// [`ArrayShape::new_unchecked`] from untrusted numbers may fail it.
    pub fn validate(&self) -> Result<(), ShapeError> {
        if let Some(i) = self.dims.iter().position(|&d| d < 0) {
            return Err(ShapeError::NegativeDimension {
                shape_text: self.to_string(),
                index: i,
                size: self.dims[i],
            });
        }
        self.element_count()?;
        self.byte_size()?;
        if let Some(layout) = &self.layout {
            let mut seen = vec![false; self.rank()];
            let ok = layout.minor_to_major.len() == self.rank()
                && layout.minor_to_major.iter().all(|&d| {
                    usize::try_from(d)
                        .ok()
                        .filter(|&d| d < seen.len())
                        .is_some_and(|d| !std::mem::replace(&mut seen[d], true))
                });
            if !ok {
                return Err(ShapeError::BadLayout {
                    shape_text: self.to_string(),
                    layout: layout.minor_to_major.clone(),
                    rank: self.rank(),
                });
            }
        }
        Ok(())
    }

    pub fn element_type(&self) -> PrimitiveType {
        self.element_type
    }

    pub fn dims(&self) -> &[i64] {
        &self.dims
    }

    /// Dimension sizes as `usize` (they are non-negative by construction).
    pub fn dims_usize(&self) -> Vec<usize> {
        self.dims.iter().map(|&d| d as usize).collect()
    }

    pub fn dim(&self, i: usize) -> i64 {
        self.dims[i]
    }

    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    pub fn is_scalar(&self) -> bool {
        self.dims.is_empty()
    }

    pub fn layout(&self) -> Option<&Layout> {
        self.layout.as_ref()
    }

    /// This shape with the given layout (checked to be a permutation of the dimensions).
    pub fn with_layout(mut self, layout: Option<Layout>) -> Result<ArrayShape, ShapeError> {
        self.layout = layout;
        self.validate()?;
        Ok(self)
    }

    /// The layout to print: the stored one, or row-major.
    pub fn layout_or_default(&self) -> Layout {
        self.layout
            .clone()
            .unwrap_or_else(|| Layout::row_major(self.rank()))
    }

    pub fn with_element_type(&self, element_type: PrimitiveType) -> ArrayShape {
        ArrayShape {
            element_type,
            dims: self.dims.clone(),
            layout: self.layout.clone(),
        }
    }

    /// Number of elements; an error if the product of the dimensions overflows.
    /// A zero dimension makes it 0 whatever the others are, so that
    /// `f32[0,2^40,2^40]` and its transpose `f32[2^40,2^40,0]` are equally valid.
    pub fn element_count(&self) -> Result<usize, ShapeError> {
        if self.dims.contains(&0) && self.dims.iter().all(|&d| d >= 0) {
            return Ok(0);
        }
        self.dims
            .iter()
            .try_fold(1usize, |acc, &d| {
                usize::try_from(d).ok().and_then(|d| acc.checked_mul(d))
            })
            .ok_or_else(|| ShapeError::ElementCountOverflow(self.to_string()))
    }

    /// Number of bytes of the dense row-major data.
    pub fn byte_size(&self) -> Result<usize, ShapeError> {
        self.element_count()?
            .checked_mul(self.element_type.byte_size())
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or_else(|| ShapeError::ByteSizeOverflow(self.to_string()))
    }

    /// Same element type and dimensions; layouts are ignored.
    pub fn compatible(&self, other: &ArrayShape) -> bool {
        self.element_type == other.element_type && self.dims == other.dims
    }

    /// Same dimensions, whatever the element type.
    pub fn same_dims(&self, other: &ArrayShape) -> bool {
        self.dims == other.dims
    }

    /// Row-major strides in elements. They fit in `usize` for arrays with
    /// elements; for an empty array (`f32[0,2^40,2^40]`) they saturate,
    /// which is harmless since nothing is indexed.
    pub fn strides(&self) -> Vec<usize> {
        let mut strides = vec![1usize; self.rank()];
        for i in (0..self.rank().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1].saturating_mul(self.dims[i + 1].max(0) as usize);
        }
        strides
    }

    /// Writes `f32[2,3]`, and the layout when `with_layout` (row-major if unset).
    pub fn write(&self, f: &mut impl fmt::Write, with_layout: bool) -> fmt::Result {
        write!(f, "{}[", self.element_type)?;
        for (i, d) in self.dims.iter().enumerate() {
            if i > 0 {
                f.write_char(',')?;
            }
            write!(f, "{d}")?;
        }
        f.write_char(']')?;
        if with_layout && !self.dims.is_empty() {
            let layout = self.layout_or_default();
            f.write_char('{')?;
            for (i, d) in layout.minor_to_major.iter().enumerate() {
                if i > 0 {
                    f.write_char(',')?;
                }
                write!(f, "{d}")?;
            }
            f.write_char('}')?;
        }
        Ok(())
    }
}

impl fmt::Display for ArrayShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, false)
    }
}

impl Shape {
    /// An array shape with the default layout; see [`ArrayShape::new`].
    pub fn array(
        element_type: PrimitiveType,
        dims: impl Into<Vec<i64>>,
    ) -> Result<Shape, ShapeError> {
        ArrayShape::new(element_type, dims).map(Shape::Array)
    }

    pub fn scalar(element_type: PrimitiveType) -> Shape {
        Shape::Array(ArrayShape::scalar(element_type))
    }

    pub fn tuple(elements: impl Into<Vec<Shape>>) -> Shape {
        Shape::Tuple(elements.into())
    }

    pub fn token() -> Shape {
        Shape::Token
    }

    pub fn as_array(&self) -> Option<&ArrayShape> {
        match self {
            Shape::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn tuple_shapes(&self) -> Option<&[Shape]> {
        match self {
            Shape::Tuple(t) => Some(t),
            _ => None,
        }
    }

    pub fn is_array(&self) -> bool {
        matches!(self, Shape::Array(_))
    }

    pub fn is_tuple(&self) -> bool {
        matches!(self, Shape::Tuple(_))
    }

    pub fn is_token(&self) -> bool {
        matches!(self, Shape::Token)
    }

    pub fn is_scalar(&self) -> bool {
        self.as_array().is_some_and(|a| a.is_scalar())
    }

    /// The element type of an array shape.
    pub fn element_type(&self) -> Option<PrimitiveType> {
        self.as_array().map(|a| a.element_type())
    }

    /// Same structure, element types and dimensions; layouts are ignored.
    pub fn compatible(&self, other: &Shape) -> bool {
        match (self, other) {
            (Shape::Array(a), Shape::Array(b)) => a.compatible(b),
            (Shape::Tuple(a), Shape::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.compatible(y))
            }
            (Shape::Token, Shape::Token) => true,
            _ => false,
        }
    }

    /// Array leaves, depth first (tuples flattened; tokens skipped).
    pub fn leaves(&self) -> Vec<&ArrayShape> {
        let mut out = Vec::new();
        self.collect_leaves(&mut out);
        out
    }

    fn collect_leaves<'a>(&'a self, out: &mut Vec<&'a ArrayShape>) {
        match self {
            Shape::Array(a) => out.push(a),
            Shape::Tuple(t) => t.iter().for_each(|s| s.collect_leaves(out)),
            Shape::Token => {}
        }
    }

    /// Total bytes of all array leaves.
    pub fn byte_size(&self) -> Result<usize, ShapeError> {
        match self {
            Shape::Array(a) => a.byte_size(),
            Shape::Tuple(t) => t.iter().try_fold(0usize, |acc, s| {
                acc.checked_add(s.byte_size()?)
                    .ok_or_else(|| ShapeError::ByteSizeOverflow(self.to_string()))
            }),
            Shape::Token => Ok(0),
        }
    }

    /// Checks every array of the shape (see [`ArrayShape::validate`]) and
    /// that tuples nest at most [`MAX_TUPLE_DEPTH`] levels, and that the
    /// shape has at most [`MAX_SHAPE_PARTS`] parts. Never recurses deeper
    /// than the first bound nor visits more than the second, whatever the
    /// shape.
    pub fn validate(&self) -> Result<(), ShapeError> {
        self.validate_below(0, &mut 0)
    }

    /// `depth` tuples enclose this shape; `parts` have been visited.
    fn validate_below(&self, depth: usize, parts: &mut usize) -> Result<(), ShapeError> {
        if *parts >= MAX_SHAPE_PARTS {
            return Err(ShapeError::TooManyParts);
        }
        *parts += 1;
        match self {
            Shape::Tuple(_) if depth >= MAX_TUPLE_DEPTH => Err(ShapeError::TooDeep),
            Shape::Tuple(elements) => elements
                .iter()
                .try_for_each(|s| s.validate_below(depth + 1, parts)),
            Shape::Array(a) => a.validate(),
            Shape::Token => Ok(()),
        }
    }

    /// Nesting depth: 0 for arrays and tokens, 1 + the deepest element for tuples.
    pub fn tuple_depth(&self) -> usize {
        match self {
            Shape::Tuple(t) => 1 + t.iter().map(Shape::tuple_depth).max().unwrap_or(0),
            _ => 0,
        }
    }

    /// Writes the shape as HLO text, with layouts when `with_layout`.
    pub fn write(&self, f: &mut impl fmt::Write, with_layout: bool) -> fmt::Result {
        match self {
            Shape::Array(a) => a.write(f, with_layout),
            Shape::Tuple(t) => {
                f.write_char('(')?;
                for (i, s) in t.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    s.write(f, with_layout)?;
                }
                f.write_char(')')
            }
            Shape::Token => f.write_str("token[]"),
        }
    }

    /// HLO text of the shape with layouts (`f32[2,3]{1,0}`), as XLA prints instructions.
    pub fn to_string_with_layout(&self) -> String {
        let mut s = String::new();
        // Writing into a String cannot fail.
        let _ = self.write(&mut s, true);
        s
    }
}

impl From<ArrayShape> for Shape {
    fn from(a: ArrayShape) -> Shape {
        Shape::Array(a)
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, false)
    }
}

/// The signature of a computation: parameter shapes and result shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramShape {
    pub parameters: Vec<Shape>,
    pub result: Shape,
}

impl fmt::Display for ProgramShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('(')?;
        for (i, p) in self.parameters.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{p}")?;
        }
        write!(f, ") -> {}", self.result)
    }
}

use std::fmt::Write as _;

#[cfg(test)]
mod tests {
    use super::*;
    use PrimitiveType::*;

    #[test]
    fn display_and_layout() {
        let s = Shape::array(F32, [2, 3]).unwrap();
        assert_eq!(s.to_string(), "f32[2,3]");
        assert_eq!(s.to_string_with_layout(), "f32[2,3]{1,0}");
        assert_eq!(Shape::scalar(S32).to_string_with_layout(), "s32[]");
        let t = Shape::tuple(vec![s.clone(), Shape::Token, Shape::tuple(vec![])]);
        assert_eq!(t.to_string(), "(f32[2,3], token[], ())");
        assert_eq!(t.tuple_depth(), 2);
        assert_eq!(t.leaves().len(), 1);
    }

    #[test]
    fn sizes_are_checked() {
        let big = Shape::array(F32, [i64::MAX, 4]);
        assert!(matches!(big, Err(ShapeError::ElementCountOverflow(_))));
        let bytes = Shape::array(C128, [1i64 << 40, 1 << 20]);
        assert!(matches!(bytes, Err(ShapeError::ByteSizeOverflow(_))));
        let empty = Shape::array(F32, [1 << 40, 1 << 40, 0]).unwrap();
        assert_eq!(empty.byte_size(), Ok(0));
        let neg = Shape::array(F32, [2, -1]);
        assert_eq!(
            neg.unwrap_err().to_string(),
            "dimension 1 of f32[2,-1] is negative (-1)"
        );
        let a = ArrayShape::new(U8, [2, 3, 4]).unwrap();
        assert_eq!(a.element_count(), Ok(24));
        assert_eq!(a.strides(), vec![12, 4, 1]);
    }

    #[test]
    fn validation_bounds_tuple_depth_and_catches_unchecked_dims() {
        let mut deep = Shape::scalar(F32);
        for _ in 0..MAX_TUPLE_DEPTH {
            deep = Shape::tuple(vec![Shape::Token, deep]);
        }
        assert_eq!(deep.tuple_depth(), MAX_TUPLE_DEPTH);
        assert_eq!(deep.validate(), Ok(()));
        assert_eq!(
            Shape::tuple(vec![deep]).validate(),
            Err(ShapeError::TooDeep)
        );
        // Shapes are trees: nine levels of a tuple repeating its operand four
        // times have over 4^9 parts.
        let mut wide = Shape::scalar(F32);
        for _ in 0..9 {
            wide = Shape::tuple(vec![wide.clone(), wide.clone(), wide.clone(), wide]);
        }
        assert_eq!(wide.validate(), Err(ShapeError::TooManyParts));
        let bad = Shape::tuple(vec![Shape::Array(ArrayShape::new_unchecked(
            F32,
            [i64::MAX, 4],
        ))]);
        assert!(matches!(
            bad.validate(),
            Err(ShapeError::ElementCountOverflow(_))
        ));
    }

    #[test]
    fn layouts_must_be_permutations() {
        let a = ArrayShape::new(F32, [2, 3]).unwrap();
        assert!(
            a.clone()
                .with_layout(Some(Layout {
                    minor_to_major: vec![0, 1]
                }))
                .is_ok()
        );
        assert!(
            a.clone()
                .with_layout(Some(Layout {
                    minor_to_major: vec![0, 0]
                }))
                .is_err()
        );
        assert!(
            a.with_layout(Some(Layout {
                minor_to_major: vec![2, 1]
            }))
            .is_err()
        );
        assert!(Layout::row_major(3).is_row_major());
    }

    #[test]
    fn compatibility_ignores_layout() {
        let a = ArrayShape::new(F32, [2, 3]).unwrap();
        let b = a
            .clone()
            .with_layout(Some(Layout {
                minor_to_major: vec![0, 1],
            }))
            .unwrap();
        assert_ne!(a, b);
        assert!(Shape::Array(a).compatible(&Shape::Array(b)));
    }
}
