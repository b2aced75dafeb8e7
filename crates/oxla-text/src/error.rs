//! The two ways reading HLO text can fail: the text does not follow the
//! grammar ([`ParseError`], located at a line and column), or it does but the
//! module it describes breaks an IR rule ([`TextError::Verify`]).

use std::fmt;

use oxla_hlo::verifier::VerifyErrors;

/// A syntax error, or a semantic error the parser can place in the text.
/// `line` and `column` are 1-based; columns count characters, not bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl ParseError {
    /// An error at byte `offset` of `src` (clamped to the text).
    pub(crate) fn at(src: &str, offset: usize, message: impl Into<String>) -> ParseError {
        let mut offset = offset.min(src.len());
        while !src.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &src[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        ParseError {
            line,
            column,
            message: message.into(),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for ParseError {}

/// Why [`crate::parse_module`] refused a text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    #[error(transparent)]
    Parse(#[from] ParseError),
    #[error("the module does not verify:\n{0}")]
    Verify(#[from] VerifyErrors),
}

pub(crate) type PResult<T> = Result<T, ParseError>;
