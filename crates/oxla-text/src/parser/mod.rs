//! A recursive-descent parser over the token stream: the state shared by the
//! grammar's parts (lookahead, nesting depth, the computations parsed so
//! far) and the small helpers they use. Each part of the grammar lives in
//! its own file.

mod attr_values;
mod attributes;
mod instruction;
mod literal;
mod module;
mod shape;

use std::collections::{HashMap, VecDeque};

use oxla_hlo::{ComputationId, HloComputation};

use crate::error::{PResult, ParseError};
use crate::lexer::{Lexer, Tok, Token};

/// How deeply tuples, literal braces, nested instructions and inline
/// computations may nest. Parsing recurses once per level, so the bound
/// keeps hostile input from exhausting the stack.
pub(crate) const MAX_DEPTH: usize = 256;

pub(crate) struct Parser<'a> {
    lexer: Lexer<'a>,
    ahead: VecDeque<Token<'a>>,
    depth: usize,
    /// Computations parsed so far, callees first; calls may only name these.
    computations: Vec<HloComputation>,
    computation_names: HashMap<String, ComputationId>,
    /// The next suffix to try for an inline computation's name (`_`, `_.1`, ...).
    inline_suffix: usize,
}

impl<'a> Parser<'a> {
    pub(crate) fn new(src: &'a str) -> Parser<'a> {
        Parser {
            lexer: Lexer::new(src),
            ahead: VecDeque::new(),
            depth: 0,
            computations: Vec::new(),
            computation_names: HashMap::new(),
            inline_suffix: 0,
        }
    }

    fn src(&self) -> &'a str {
        self.lexer.src()
    }

    /// The `n`-th token ahead (0 is the next one).
    fn peek_nth(&mut self, n: usize) -> PResult<&Token<'a>> {
        while self.ahead.len() <= n {
            let t = self.lexer.next_token()?;
            self.ahead.push_back(t);
        }
        // The loop above filled the buffer up to `n`.
        Ok(&self.ahead[n])
    }

    fn peek(&mut self) -> PResult<&Token<'a>> {
        self.peek_nth(0)
    }

    fn peek_tok(&mut self) -> PResult<&Tok<'a>> {
        Ok(&self.peek()?.tok)
    }

    fn next(&mut self) -> PResult<Token<'a>> {
        match self.ahead.pop_front() {
            Some(t) => Ok(t),
            None => self.lexer.next_token(),
        }
    }

    fn error(&self, offset: usize, message: impl Into<String>) -> ParseError {
        ParseError::at(self.src(), offset, message)
    }

    /// "expected {what}, found {token}" at the token.
    fn expected(&self, what: &str, found: &Token<'_>) -> ParseError {
        self.error(
            found.start,
            format!("expected {what}, found {}", found.tok.describe()),
        )
    }

    /// Consumes the next token if it is `tok` (compared by kind and value).
    fn eat(&mut self, tok: &Tok<'_>) -> PResult<bool> {
        if self.peek_tok()? == tok {
            self.next()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Consumes `tok` or fails with "expected {what}".
    fn expect(&mut self, tok: &Tok<'_>, what: &str) -> PResult<Token<'a>> {
        let t = self.next()?;
        if &t.tok == tok {
            return Ok(t);
        }
        Err(self.expected(what, &t))
    }

    fn at_ident(&mut self, word: &str) -> PResult<bool> {
        Ok(matches!(self.peek_tok()?, Tok::Ident(w) if *w == word))
    }

    /// Enters one level of nesting at `offset`, failing past [`MAX_DEPTH`].
    fn enter(&mut self, offset: usize) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error(
                offset,
                format!("nesting is too deep (more than {MAX_DEPTH} levels)"),
            ));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Reads a raw attribute value (see [`Lexer::scan_value`]) and returns its text.
    fn raw_value(&mut self) -> PResult<String> {
        let start = self.peek()?.start;
        let end = self.lexer.scan_value(start)?;
        self.jump_to(end);
        Ok(self.src()[start..end].to_string())
    }

    /// Reads a raw bracketed group (see [`Lexer::scan_group`]) and returns its text.
    fn raw_group(&mut self) -> PResult<String> {
        let start = self.peek()?.start;
        let end = self.lexer.scan_group(start)?;
        self.jump_to(end);
        Ok(self.src()[start..end].to_string())
    }

    /// Continues lexing at `offset`, dropping any lookahead.
    fn jump_to(&mut self, offset: usize) {
        self.ahead.clear();
        self.lexer.set_pos(offset);
    }

    pub(crate) fn expect_eof(&mut self) -> PResult<()> {
        let t = self.next()?;
        if t.tok != Tok::Eof {
            return Err(self.expected("end of input", &t));
        }
        Ok(())
    }

    /// An integer token as an `i64`.
    fn int(&mut self, what: &str) -> PResult<i64> {
        let t = self.next()?;
        match t.tok {
            Tok::Int(text) => text.parse::<i64>().map_err(|_| {
                self.error(t.start, format!("integer {text} does not fit in 64 bits"))
            }),
            _ => Err(self.expected(what, &t)),
        }
    }

    /// A non-negative integer token as a `usize`.
    fn index(&mut self, what: &str) -> PResult<usize> {
        let start = self.peek()?.start;
        let v = self.int(what)?;
        usize::try_from(v)
            .map_err(|_| self.error(start, format!("{what} must not be negative, found {v}")))
    }

    /// `{1,2,3}` (possibly empty).
    fn int_list(&mut self) -> PResult<Vec<i64>> {
        self.expect(&Tok::LBrace, "'{' to start a list of integers")?;
        let mut out = Vec::new();
        if self.eat(&Tok::RBrace)? {
            return Ok(out);
        }
        loop {
            out.push(self.int("an integer")?);
            let t = self.next()?;
            match t.tok {
                Tok::Comma => {}
                Tok::RBrace => return Ok(out),
                _ => return Err(self.expected("',' or '}' in a list of integers", &t)),
            }
        }
    }

    /// `true` or `false`.
    fn bool(&mut self) -> PResult<bool> {
        let t = self.next()?;
        match t.tok {
            Tok::Ident("true") => Ok(true),
            Tok::Ident("false") => Ok(false),
            _ => Err(self.expected("true or false", &t)),
        }
    }

    /// An instruction or computation name, written with or without `%`.
    fn name(&mut self, what: &str) -> PResult<(String, usize)> {
        let t = self.next()?;
        match t.tok {
            Tok::Ident(n) | Tok::Name(n) => Ok((n.to_string(), t.start)),
            _ => Err(self.expected(what, &t)),
        }
    }
}

pub(crate) use attributes::default_comparison_type;
