//! Tokens of HLO text, following XLA's `hlo_lexer.cc`: names (`%x`),
//! identifiers with `.` and `-` inside (`get-tuple-element.4`), numbers and
//! the compound forms XLA lexes as one token (`3x3`, `1_2x0_1`,
//! `b01f_01io->b01f`, `nan(0x7f)`), strings with C escapes, and comments,
//! which are skipped everywhere. It also scans raw attribute values, which
//! oxla keeps as text without understanding them.

use crate::error::{PResult, ParseError};
use crate::strings;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok<'a> {
    Eof,
    /// A bare identifier (`add`, `f32`, `Arg_0.1`, `ROOT`, `true`).
    Ident(&'a str),
    /// `%name`, without the `%`.
    Name(&'a str),
    /// An integer as written, perhaps with a leading `-`.
    Int(&'a str),
    /// A number with a `.` or an exponent, as written.
    Float(&'a str),
    Inf {
        negative: bool,
    },
    Nan {
        negative: bool,
        payload: Option<u64>,
    },
    /// A string literal with its escapes resolved.
    Str(String),
    /// Convolution dimension labels, `b01f_01io->b01f`.
    DimLabels(&'a str),
    /// `3x3`: one number per window dimension.
    Dxd(&'a str),
    /// `1_2x0_-1_1`: padding per dimension.
    Pad(&'a str),
    Equal,
    Comma,
    Colon,
    Star,
    Hash,
    Plus,
    Tilde,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    LParen,
    RParen,
    Arrow,
    Leq,
    Ellipsis,
    Question,
}

impl Tok<'_> {
    /// How the token is named in "found ..." messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Eof => "end of input".into(),
            Tok::Ident(s) => format!("identifier \"{s}\""),
            Tok::Name(s) => format!("name \"%{s}\""),
            Tok::Int(s) => format!("integer {s}"),
            Tok::Float(s) => format!("number {s}"),
            Tok::Inf { negative } => if *negative { "-inf" } else { "inf" }.into(),
            Tok::Nan { negative, payload } => {
                let sign = if *negative { "-" } else { "" };
                match payload {
                    Some(p) => format!("{sign}nan(0x{p:x})"),
                    None => format!("{sign}nan"),
                }
            }
            Tok::Str(s) => format!("string {}", strings::quote(s)),
            Tok::DimLabels(s) => format!("dimension labels {s}"),
            Tok::Dxd(s) | Tok::Pad(s) => format!("\"{s}\""),
            Tok::Equal => "'='".into(),
            Tok::Comma => "','".into(),
            Tok::Colon => "':'".into(),
            Tok::Star => "'*'".into(),
            Tok::Hash => "'#'".into(),
            Tok::Plus => "'+'".into(),
            Tok::Tilde => "'~'".into(),
            Tok::LBracket => "'['".into(),
            Tok::RBracket => "']'".into(),
            Tok::LBrace => "'{'".into(),
            Tok::RBrace => "'}'".into(),
            Tok::LParen => "'('".into(),
            Tok::RParen => "')'".into(),
            Tok::Arrow => "'->'".into(),
            Tok::Leq => "'<='".into(),
            Tok::Ellipsis => "'...'".into(),
            Tok::Question => "'?'".into(),
        }
    }
}

/// A token and the byte offset where it starts.
#[derive(Clone, Debug)]
pub(crate) struct Token<'a> {
    pub tok: Tok<'a>,
    pub start: usize,
}

#[derive(Clone)]
pub(crate) struct Lexer<'a> {
    src: &'a str,
    pos: usize,
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

fn count_while(s: &[u8], from: usize, pred: impl Fn(u8) -> bool) -> usize {
    s.iter().skip(from).take_while(|&&b| pred(b)).count()
}

/// Length of a dim-labels token (`[0-9bf?]{2,}_[0-9io?]{2,}->[0-9bf?]{2,}`) at the start of `s`.
fn dim_labels_len(s: &[u8]) -> Option<usize> {
    let io_side = |b: u8| b.is_ascii_digit() || matches!(b, b'b' | b'f' | b'?');
    let kernel = |b: u8| b.is_ascii_digit() || matches!(b, b'i' | b'o' | b'?');
    let a = count_while(s, 0, io_side);
    if a < 2 || s.get(a) != Some(&b'_') {
        return None;
    }
    let b = count_while(s, a + 1, kernel);
    let arrow = a + 1 + b;
    if b < 2 || s.get(arrow..arrow + 2) != Some(b"->") {
        return None;
    }
    let c = count_while(s, arrow + 2, io_side);
    let end = arrow + 2 + c;
    if c < 2 || s.get(end).is_some_and(|&b| is_ident_char(b)) {
        return None;
    }
    Some(end)
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(src: &'a str) -> Lexer<'a> {
        Lexer { src, pos: 0 }
    }

    pub(crate) fn src(&self) -> &'a str {
        self.src
    }

    pub(crate) fn set_pos(&mut self, pos: usize) {
        self.pos = pos;
    }

    fn bytes(&self) -> &'a [u8] {
        self.src.as_bytes()
    }

    fn err(&self, at: usize, message: impl Into<String>) -> ParseError {
        ParseError::at(self.src, at, message)
    }

    /// The offset of the first byte at or after `pos` that is neither
    /// whitespace nor inside a comment.
    pub(crate) fn skip_trivia(&self, mut pos: usize) -> PResult<usize> {
        let s = self.bytes();
        loop {
            pos += count_while(s, pos, |b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'));
            match s.get(pos..pos + 2) {
                Some(b"//") => {
                    pos += count_while(s, pos, |b| b != b'\n');
                }
                Some(b"/*") => match self.src.get(pos + 2..).and_then(|r| r.find("*/")) {
                    Some(i) => pos += 2 + i + 2,
                    None => return Err(self.err(pos, "unterminated comment")),
                },
                _ => return Ok(pos),
            }
        }
    }

    pub(crate) fn next_token(&mut self) -> PResult<Token<'a>> {
        let start = self.skip_trivia(self.pos)?;
        let (tok, end) = self.lex_at(start)?;
        self.pos = end;
        Ok(Token { tok, start })
    }

    fn lex_at(&self, start: usize) -> PResult<(Tok<'a>, usize)> {
        let s = self.bytes();
        let Some(&c) = s.get(start) else {
            return Ok((Tok::Eof, start));
        };
        let may_be_labels = c.is_ascii_digit() || matches!(c, b'b' | b'f' | b'?');
        if let Some(len) = dim_labels_len(&s[start..]).filter(|_| may_be_labels) {
            return Ok((Tok::DimLabels(&self.src[start..start + len]), start + len));
        }
        let punct = |t: Tok<'a>| Ok((t, start + 1));
        match c {
            b'=' => punct(Tok::Equal),
            b',' => punct(Tok::Comma),
            b':' => punct(Tok::Colon),
            b'*' => punct(Tok::Star),
            b'#' => punct(Tok::Hash),
            b'+' => punct(Tok::Plus),
            b'~' => punct(Tok::Tilde),
            b'[' => punct(Tok::LBracket),
            b']' => punct(Tok::RBracket),
            b'{' => punct(Tok::LBrace),
            b'}' => punct(Tok::RBrace),
            b'(' => punct(Tok::LParen),
            b')' => punct(Tok::RParen),
            b'?' => punct(Tok::Question),
            b'<' if s.get(start + 1) == Some(&b'=') => Ok((Tok::Leq, start + 2)),
            b'.' if s.get(start..start + 3) == Some(b"...") => Ok((Tok::Ellipsis, start + 3)),
            b'"' | b'\'' => self.lex_string(start),
            b'%' => {
                if !s.get(start + 1).is_some_and(|&b| is_ident_start(b)) {
                    return Err(self.err(start, "expected a name after '%'"));
                }
                let end = start + 1 + count_while(s, start + 1, is_ident_char);
                Ok((Tok::Name(&self.src[start + 1..end]), end))
            }
            b'-' if s.get(start + 1) == Some(&b'>') => Ok((Tok::Arrow, start + 2)),
            b'-' => {
                let rest = &s[start + 1..];
                if rest.starts_with(b"inf") && !rest.get(3).is_some_and(|&b| is_ident_char(b)) {
                    return Ok((Tok::Inf { negative: true }, start + 4));
                }
                if rest.starts_with(b"nan") && !rest.get(3).is_some_and(|&b| is_ident_char(b)) {
                    return self.lex_nan(start, start + 4, true);
                }
                let digit_next = rest.first().is_some_and(u8::is_ascii_digit)
                    || (rest.first() == Some(&b'.') && rest.get(1).is_some_and(u8::is_ascii_digit));
                if digit_next {
                    return Ok(self.lex_number(start));
                }
                Err(self.err(start, "unexpected character '-'"))
            }
            b'0'..=b'9' => Ok(self.lex_number(start)),
            _ if is_ident_start(c) => {
                let end = start + count_while(s, start, is_ident_char);
                let word = &self.src[start..end];
                match word {
                    "inf" => Ok((Tok::Inf { negative: false }, end)),
                    "nan" => self.lex_nan(start, end, false),
                    _ => Ok((Tok::Ident(word), end)),
                }
            }
            _ => {
                let ch = self.src[start..].chars().next().unwrap_or('?');
                Err(self.err(start, format!("unexpected character {ch:?}")))
            }
        }
    }

    /// `nan`, optionally followed by a hex payload `(0x7f)`.
    fn lex_nan(&self, start: usize, end: usize, negative: bool) -> PResult<(Tok<'a>, usize)> {
        let s = self.bytes();
        if s.get(end..end + 3) != Some(b"(0x") {
            return Ok((
                Tok::Nan {
                    negative,
                    payload: None,
                },
                end,
            ));
        }
        let digits_at = end + 3;
        let n = count_while(s, digits_at, |b| b.is_ascii_hexdigit());
        let close = digits_at + n;
        if n == 0 || s.get(close) != Some(&b')') {
            return Err(self.err(start, "malformed NaN payload: expected nan(0x<hex digits>)"));
        }
        let payload = u64::from_str_radix(&self.src[digits_at..close], 16)
            .map_err(|_| self.err(start, "NaN payload does not fit in 64 bits"))?;
        Ok((
            Tok::Nan {
                negative,
                payload: Some(payload),
            },
            close + 1,
        ))
    }

    /// Integers, floats, `3x3` and pad specs (`1_2x0_1_1`), which all start
    /// with a digit or a `-` before a digit.
    fn lex_number(&self, start: usize) -> (Tok<'a>, usize) {
        let s = self.bytes();
        let neg = usize::from(s.get(start) == Some(&b'-'));
        let digits_at = start + neg;
        let int_end = digits_at + count_while(s, digits_at, |b| b.is_ascii_digit());
        let text = |end: usize| &self.src[start..end];
        let exponent_len = |at: usize| -> usize {
            if !matches!(s.get(at), Some(b'e' | b'E')) {
                return 0;
            }
            let sign = usize::from(matches!(s.get(at + 1), Some(b'+' | b'-')));
            let digits = count_while(s, at + 1 + sign, |b| b.is_ascii_digit());
            if digits == 0 { 0 } else { 1 + sign + digits }
        };
        match s.get(int_end) {
            Some(b'.') if s.get(int_end + 1) != Some(&b'.') => {
                let frac_end = int_end + 1 + count_while(s, int_end + 1, |b| b.is_ascii_digit());
                let end = frac_end + exponent_len(frac_end);
                (Tok::Float(text(end)), end)
            }
            Some(b'e' | b'E') if exponent_len(int_end) > 0 => {
                let end = int_end + exponent_len(int_end);
                (Tok::Float(text(end)), end)
            }
            Some(b'x') if neg == 0 && s.get(int_end + 1).is_some_and(u8::is_ascii_digit) => {
                let end = int_end + count_while(s, int_end, |b| b.is_ascii_digit() || b == b'x');
                (Tok::Dxd(text(end)), end)
            }
            Some(b'_') => {
                // Loose on purpose: the padding parser checks each part.
                let mut end = int_end;
                while let Some(&b) = s.get(end) {
                    let arrow = b == b'-' && s.get(end + 1) == Some(&b'>');
                    if arrow || !(b.is_ascii_digit() || matches!(b, b'_' | b'x' | b'-')) {
                        break;
                    }
                    end += 1;
                }
                (Tok::Pad(text(end)), end)
            }
            _ => (Tok::Int(text(int_end)), int_end),
        }
    }

    fn lex_string(&self, start: usize) -> PResult<(Tok<'a>, usize)> {
        let s = self.bytes();
        let quote = s[start];
        let mut i = start + 1;
        loop {
            match s.get(i) {
                None => return Err(self.err(start, "unterminated string")),
                Some(b'\\') => i += 2,
                Some(&b) if b == quote => break,
                Some(_) => i += 1,
            }
        }
        let body = &self.src[start + 1..i];
        let value = strings::unescape(body).map_err(|(m, at)| self.err(start + 1 + at, m))?;
        Ok((Tok::Str(value), i + 1))
    }

    /// The end of the string literal starting at `start` (after its closing quote).
    fn skip_string(&self, start: usize) -> PResult<usize> {
        self.lex_string(start).map(|(_, end)| end)
    }

    /// The end of the bracketed group (`{...}`, `[...]` or `(...)`) that
    /// opens at `start`, skipping strings and comments inside it. This is how
    /// XLA reads raw JSON blocks, and how oxla keeps attribute values it
    /// does not interpret.
    pub(crate) fn scan_group(&self, start: usize) -> PResult<usize> {
        let s = self.bytes();
        let mut stack: Vec<u8> = Vec::new();
        let mut i = start;
        loop {
            let Some(&b) = s.get(i) else {
                return Err(self.err(start, "unclosed bracket in attribute value"));
            };
            match b {
                b'{' => stack.push(b'}'),
                b'[' => stack.push(b']'),
                b'(' => stack.push(b')'),
                b'}' | b']' | b')' => {
                    if stack.pop() != Some(b) {
                        return Err(
                            self.err(i, format!("unbalanced '{}' in attribute value", b as char))
                        );
                    }
                    if stack.is_empty() {
                        return Ok(i + 1);
                    }
                }
                b'"' | b'\'' => {
                    i = self.skip_string(i)?;
                    continue;
                }
                b'/' if matches!(s.get(i + 1), Some(b'/' | b'*')) => {
                    i = self.skip_trivia(i)?;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }

    /// The end of a raw attribute value starting at `start`: one or more
    /// atoms (words, strings, bracketed groups) up to the next top-level
    /// `,`, the end of the computation, or the start of the next instruction
    /// or computation. Most values are one atom (`{...}`, `true`,
    /// `dot_tf32_tf32_f32`); custom-call's `literal=s32[] 7` has several.
    pub(crate) fn scan_value(&self, start: usize) -> PResult<usize> {
        let s = self.bytes();
        let mut end = self.scan_atom(start)?;
        loop {
            let next = self.skip_trivia(end)?;
            match s.get(next) {
                None | Some(b',' | b'}' | b')' | b']') => return Ok(end),
                _ => {}
            }
            // Atoms written without space between them (`s32[]`, `T(1,0)`) belong together.
            if next == end {
                end = self.scan_atom(next)?;
                continue;
            }
            if self.starts_new_item(next)? {
                return Ok(end);
            }
            end = self.scan_atom(next)?;
        }
    }

    /// Whether the text at `pos` begins an instruction (`ROOT`, `name =`) or
    /// a computation (`ENTRY`, `name {`, `%name (`), which ends a raw value.
    fn starts_new_item(&self, pos: usize) -> PResult<bool> {
        let s = self.bytes();
        let name_at = pos + usize::from(s.get(pos) == Some(&b'%'));
        if !s.get(name_at).is_some_and(|&b| is_ident_start(b)) {
            return Ok(false);
        }
        let end = name_at + count_while(s, name_at, is_ident_char);
        let word = &self.src[name_at..end];
        if name_at == pos && matches!(word, "ROOT" | "ENTRY" | "FileNames") {
            return Ok(true);
        }
        let after = self.skip_trivia(end)?;
        Ok(matches!(s.get(after), Some(b'=' | b'{' | b'(')))
    }

    fn scan_atom(&self, start: usize) -> PResult<usize> {
        let s = self.bytes();
        match s.get(start) {
            None => Err(self.err(start, "expected an attribute value, found end of input")),
            Some(b'{' | b'[' | b'(') => self.scan_group(start),
            Some(b'"' | b'\'') => self.skip_string(start),
            Some(b'}' | b']' | b')' | b',') => {
                let (tok, _) = self.lex_at(start)?;
                Err(self.err(
                    start,
                    format!("expected an attribute value, found {}", tok.describe()),
                ))
            }
            Some(_) => {
                let n = count_while(s, start, |b| {
                    !b.is_ascii_whitespace()
                        && !matches!(
                            b,
                            b'{' | b'}' | b'[' | b']' | b'(' | b')' | b',' | b'"' | b'\''
                        )
                });
                Ok(start + n.max(1))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lex_all(src: &str) -> Vec<Tok<'_>> {
        let mut l = Lexer::new(src);
        let mut out = Vec::new();
        loop {
            let t = l.next_token().unwrap();
            if t.tok == Tok::Eof {
                return out;
            }
            out.push(t.tok);
        }
    }

    #[test]
    fn compound_tokens() {
        assert_eq!(
            lex_all(
                "%get-tuple-element.4 = b01f_01io->b01f 3x3 1_2x0_-1_1 -0 1. -.5 1e5 nan(0x7f) -inf"
            ),
            vec![
                Tok::Name("get-tuple-element.4"),
                Tok::Equal,
                Tok::DimLabels("b01f_01io->b01f"),
                Tok::Dxd("3x3"),
                Tok::Pad("1_2x0_-1_1"),
                Tok::Int("-0"),
                Tok::Float("1."),
                Tok::Float("-.5"),
                Tok::Float("1e5"),
                Tok::Nan {
                    negative: false,
                    payload: Some(0x7f)
                },
                Tok::Inf { negative: true },
            ]
        );
    }

    #[test]
    fn comments_and_strings() {
        assert_eq!(
            lex_all("// c\n/*index=5*/ 'a\\'b' \"x\\ty\" {...} <= ->"),
            vec![
                Tok::Str("a'b".into()),
                Tok::Str("x\ty".into()),
                Tok::LBrace,
                Tok::Ellipsis,
                Tok::RBrace,
                Tok::Leq,
                Tok::Arrow,
            ]
        );
    }

    #[test]
    fn raw_values() {
        let src = "{devices=[2]0,1 \"}\"}, next=1";
        let l = Lexer::new(src);
        assert_eq!(l.scan_value(0).unwrap(), src.find("}, next").unwrap() + 1);
        let src = "s32[] 7\n  ROOT r = f32[] add(a, b)";
        assert_eq!(Lexer::new(src).scan_value(0).unwrap(), 7);
        let src = "dot_tf32_tf32_f32\n  tuple.1 = (f32[]) tuple(a)";
        assert_eq!(Lexer::new(src).scan_value(0).unwrap(), 17);
    }
}
