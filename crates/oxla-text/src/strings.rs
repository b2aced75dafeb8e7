//! String literals as XLA writes them: C escapes when reading (absl's
//! `CUnescape`) and when printing (`CEscape`: quotes, backslash, `\n \t \r`,
//! and three-digit octal for every other byte outside printable ASCII).

/// The body of a quoted string (between the quotes) with escapes resolved.
/// The error is the message and the byte offset of the bad escape in `body`.
pub(crate) fn unescape(body: &str) -> Result<String, (String, usize)> {
    let bytes = body.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let start = i;
        let Some(&e) = bytes.get(i + 1) else {
            return Err(("a string cannot end with a lone backslash".into(), start));
        };
        i += 2;
        match e {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'a' => out.push(0x07),
            b'b' => out.push(0x08),
            b'f' => out.push(0x0c),
            b'v' => out.push(0x0b),
            b'\\' | b'\'' | b'"' | b'?' => out.push(e),
            b'0'..=b'7' => {
                let mut value = u32::from(e - b'0');
                for _ in 0..2 {
                    match bytes.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            value = value * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                let byte = u8::try_from(value)
                    .map_err(|_| (format!("octal escape \\{value:o} is above \\377"), start))?;
                out.push(byte);
            }
            b'x' => {
                let digits = hex_run(bytes, i, 2);
                if digits == 0 {
                    return Err(("\\x must be followed by hex digits".into(), start));
                }
                let value = hex_value(bytes, i, digits);
                i += digits;
                // Two hex digits never exceed 0xff.
                out.push(value as u8);
            }
            b'u' | b'U' => {
                let want = if e == b'u' { 4 } else { 8 };
                if hex_run(bytes, i, want) != want {
                    return Err((
                        format!("\\{} must be followed by {want} hex digits", e as char),
                        start,
                    ));
                }
                let value = hex_value(bytes, i, want);
                i += want;
                let c = char::from_u32(value).ok_or_else(|| {
                    (
                        format!(
                            "\\{}{value:0want$x} is not a Unicode scalar value",
                            e as char
                        ),
                        start,
                    )
                })?;
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
            other => {
                let shown = body[start..].chars().nth(1).unwrap_or(other as char);
                return Err((format!("unknown escape sequence \\{shown}"), start));
            }
        }
    }
    String::from_utf8(out).map_err(|e| {
        (
            "string is not valid UTF-8 once its escapes are resolved".into(),
            e.utf8_error().valid_up_to().min(body.len()),
        )
    })
}

fn hex_run(bytes: &[u8], from: usize, max: usize) -> usize {
    bytes
        .iter()
        .skip(from)
        .take(max)
        .take_while(|b| b.is_ascii_hexdigit())
        .count()
}

fn hex_value(bytes: &[u8], from: usize, n: usize) -> u32 {
    bytes.iter().skip(from).take(n).fold(0u32, |acc, &b| {
        acc * 16 + (b as char).to_digit(16).unwrap_or(0)
    })
}

/// `s` as a double-quoted HLO string, escaped as XLA's printer does.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for &b in s.as_bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\'' => out.push_str("\\'"),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'\r' => out.push_str("\\r"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_round_trip() {
        let original = "a\"b'c\\d\ne\tf\rg\u{7}é";
        let quoted = quote(original);
        assert_eq!(quoted, r#""a\"b\'c\\d\ne\tf\rg\007\303\251""#);
        let body = &quoted[1..quoted.len() - 1];
        assert_eq!(unescape(body).unwrap(), original);
    }

    #[test]
    fn every_escape_form() {
        assert_eq!(
            unescape(r"\a\b\f\v\?\x41\101\u00e9\U0001F600").unwrap(),
            "\u{7}\u{8}\u{c}\u{b}?AAé😀"
        );
        assert_eq!(
            unescape(r"ok\/").unwrap_err(),
            ("unknown escape sequence \\/".to_string(), 2)
        );
        assert_eq!(
            unescape(r"\777").unwrap_err().0,
            "octal escape \\777 is above \\377"
        );
        assert_eq!(
            unescape(r"\377").unwrap_err().0,
            "string is not valid UTF-8 once its escapes are resolved"
        );
        assert_eq!(
            unescape(r"\u12").unwrap_err().0,
            "\\u must be followed by 4 hex digits"
        );
    }
}
