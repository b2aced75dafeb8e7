//! Values of the structured attributes: slices, padding, windows,
//! convolution dimension labels, replica groups (including XLA's iota
//! form) and source-target pairs.

use oxla_hlo::ir::{ConvDimensionNumbers, PadDim, SliceDim, Window, WindowDim};

use super::Parser;
use crate::error::PResult;
use crate::lexer::Tok;

impl<'a> Parser<'a> {
    /// `{[0:2:1], [1:3]}`.
    #[inline(never)]
    pub(super) fn slice_value(&mut self) -> PResult<Vec<SliceDim>> {
        self.expect(&Tok::LBrace, "'{' to start a slice")?;
        let mut dims = Vec::new();
        if self.eat(&Tok::RBrace)? {
            return Ok(dims);
        }
        loop {
            self.expect(
                &Tok::LBracket,
                "'[' to start a slice dimension [start:limit:stride]",
            )?;
            let start = self.int("a slice start")?;
            self.expect(&Tok::Colon, "':' after the slice start")?;
            let limit = self.int("a slice limit")?;
            let stride = if self.eat(&Tok::Colon)? {
                self.int("a slice stride")?
            } else {
                1
            };
            self.expect(&Tok::RBracket, "']' to end a slice dimension")?;
            dims.push(SliceDim {
                start,
                limit,
                stride,
            });
            let t = self.next()?;
            match t.tok {
                Tok::Comma => {}
                Tok::RBrace => return Ok(dims),
                _ => return Err(self.expected("',' or '}' in a slice", &t)),
            }
        }
    }

    /// `low_high[_interior]` per dimension, joined by `x`. A rank-0 pad has
    /// no dimensions, and XLA prints its padding as nothing at all
    /// (`padding=` at the end of the line or before a comma), so that reads
    /// as an empty configuration.
    #[inline(never)]
    pub(super) fn padding_value(&mut self) -> PResult<Vec<PadDim>> {
        let next = self.peek()?;
        if !matches!(next.tok, Tok::Pad(_)) {
            let start = next.start;
            let ends_value = matches!(next.tok, Tok::Comma | Tok::Eof);
            let gap = &self.src()[self.src()[..start].trim_end().len()..start];
            if ends_value || gap.contains('\n') {
                return Ok(Vec::new());
            }
        }
        let t = self.next()?;
        let Tok::Pad(text) = t.tok else {
            return Err(self.expected("padding such as 0_0x1_1_0", &t));
        };
        text.split('x')
            .map(|dim| {
                let parts = split_ints(dim, '_');
                match parts.as_deref() {
                    Some(&[low, high]) => Some(PadDim { low, high, interior: 0 }),
                    Some(&[low, high, interior]) => Some(PadDim { low, high, interior }),
                    _ => None,
                }
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                self.error(t.start, format!("malformed padding {text}: expected low_high[_interior] per dimension, joined by x"))
            })
    }

    /// `{size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=1x1 rhs_dilate=2x2 rhs_reversal=1x0}`.
    #[inline(never)]
    pub(super) fn window_value(&mut self) -> PResult<Window> {
        self.expect(&Tok::LBrace, "'{' to start a window")?;
        let mut fields: [Option<Vec<i64>>; 5] = Default::default();
        let mut pad: Option<Vec<(i64, i64)>> = None;
        const KEYS: [&str; 5] = ["size", "stride", "lhs_dilate", "rhs_dilate", "rhs_reversal"];
        loop {
            let key = self.next()?;
            let name = match key.tok {
                Tok::RBrace => break,
                Tok::Ident(name) => name,
                _ => {
                    return Err(self.expected(
                        "a window field (size, stride, pad, lhs_dilate, rhs_dilate, rhs_reversal) or '}'",
                        &key,
                    ));
                }
            };
            self.expect(&Tok::Equal, &format!("'=' after window field {name}"))?;
            let value = self.next()?;
            let text = match value.tok {
                Tok::Int(s) | Tok::Dxd(s) | Tok::Pad(s) => s,
                _ => return Err(self.expected(&format!("a value for window field {name}"), &value)),
            };
            let duplicate = || self.error(key.start, format!("duplicate window field {name}"));
            let malformed = |what: &str| {
                self.error(
                    value.start,
                    format!("malformed window {name} {text}: expected {what}"),
                )
            };
            if name == "pad" {
                if pad.is_some() {
                    return Err(duplicate());
                }
                let dims = text
                    .split('x')
                    .map(|d| match split_ints(d, '_').as_deref() {
                        Some(&[low, high]) => Some((low, high)),
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| malformed("low_high per dimension, joined by x"))?;
                pad = Some(dims);
                continue;
            }
            let Some(k) = KEYS.iter().position(|&k| k == name) else {
                return Err(self.error(key.start, format!("unknown window field {name}")));
            };
            if fields[k].is_some() {
                return Err(duplicate());
            }
            let values = split_ints(text, 'x').ok_or_else(|| malformed("integers joined by x"))?;
            fields[k] = Some(values);
        }
        let [size, stride, lhs_dilate, rhs_dilate, rhs_reversal] = fields;
        let Some(size) = size else {
            if stride.is_some()
                || pad.is_some()
                || lhs_dilate.is_some()
                || rhs_dilate.is_some()
                || rhs_reversal.is_some()
            {
                let at = self.peek()?.start;
                return Err(self.error(at, "a window with fields other than size needs size"));
            }
            return Ok(Window::default());
        };
        let n = size.len();
        let check = |name: &str, len: Option<usize>| match len {
            Some(m) if m != n => Err(format!("window {name} has {m} dimensions but size has {n}")),
            _ => Ok(()),
        };
        let lens = [
            ("stride", stride.as_ref().map(Vec::len)),
            ("pad", pad.as_ref().map(Vec::len)),
            ("lhs_dilate", lhs_dilate.as_ref().map(Vec::len)),
            ("rhs_dilate", rhs_dilate.as_ref().map(Vec::len)),
            ("rhs_reversal", rhs_reversal.as_ref().map(Vec::len)),
        ];
        for (name, len) in lens {
            if let Err(m) = check(name, len) {
                let at = self.peek()?.start;
                return Err(self.error(at, m));
            }
        }
        let at = |v: &Option<Vec<i64>>, i: usize, default: i64| {
            v.as_ref()
                .and_then(|v| v.get(i))
                .copied()
                .unwrap_or(default)
        };
        let dims = (0..n)
            .map(|i| WindowDim {
                size: size[i],
                stride: at(&stride, i, 1),
                pad_low: pad.as_ref().and_then(|p| p.get(i)).map_or(0, |p| p.0),
                pad_high: pad.as_ref().and_then(|p| p.get(i)).map_or(0, |p| p.1),
                window_dilation: at(&rhs_dilate, i, 1),
                base_dilation: at(&lhs_dilate, i, 1),
                window_reversal: at(&rhs_reversal, i, 0) != 0,
            })
            .collect();
        Ok(Window { dims })
    }

    /// `b01f_01io->b01f`: which position of the input, kernel and output is
    /// the batch/feature dimension and which are spatial (by index).
    #[inline(never)]
    pub(super) fn dim_labels_value(&mut self) -> PResult<ConvDimensionNumbers> {
        let t = self.next()?;
        let Tok::DimLabels(text) = t.tok else {
            return Err(self.expected("dimension labels such as b01f_01io->b01f", &t));
        };
        parse_dim_labels(text).map_err(|m| self.error(t.start, format!("dim_labels {text}: {m}")))
    }

    /// `{{0,1},{2,3}}`, or the iota form `[2,2]<=[4]` / `[2,2]<=[2,2]T(1,0)`.
    #[inline(never)]
    pub(super) fn replica_groups_value(&mut self) -> PResult<Vec<Vec<i64>>> {
        if self.peek_tok()? != &Tok::LBracket {
            return self.list_of_int_lists("'{' to start the replica groups");
        }
        let start = self.peek()?.start;
        self.next()?;
        let groups = self.index("the number of groups")?;
        self.expect(
            &Tok::Comma,
            "',' between the group count and the group size",
        )?;
        let group_size = self.index("the group size")?;
        self.expect(&Tok::RBracket, "']' after the group size")?;
        self.expect(&Tok::Leq, "'<=' in iota replica groups")?;
        self.expect(&Tok::LBracket, "'[' to start the iota dimensions")?;
        let mut dims = Vec::new();
        loop {
            dims.push(self.index("an iota dimension")?);
            let t = self.next()?;
            match t.tok {
                Tok::Comma => {}
                Tok::RBracket => break,
                _ => return Err(self.expected("',' or ']' in the iota dimensions", &t)),
            }
        }
        let mut perm: Vec<usize> = (0..dims.len()).collect();
        if self.at_ident("T")? {
            self.next()?;
            self.expect(&Tok::LParen, "'(' after T")?;
            perm.clear();
            loop {
                perm.push(self.index("a dimension of the transpose")?);
                let t = self.next()?;
                match t.tok {
                    Tok::Comma => {}
                    Tok::RParen => break,
                    _ => return Err(self.expected("',' or ')' in the transpose", &t)),
                }
            }
        }
        iota_groups(groups, group_size, &dims, &perm).map_err(|m| self.error(start, m))
    }

    /// `{{0,1},{1,2}}`.
    #[inline(never)]
    pub(super) fn pairs_value(&mut self) -> PResult<Vec<(i64, i64)>> {
        let start = self.peek()?.start;
        let lists = self.list_of_int_lists("'{' to start the source-target pairs")?;
        lists
            .into_iter()
            .map(|l| match l.as_slice() {
                &[a, b] => Ok((a, b)),
                _ => Err(self.error(
                    start,
                    format!("a source-target pair needs 2 entries, found {l:?}"),
                )),
            })
            .collect()
    }

    #[inline(never)]
    pub(super) fn list_of_int_lists(&mut self, what: &str) -> PResult<Vec<Vec<i64>>> {
        self.expect(&Tok::LBrace, what)?;
        let mut out = Vec::new();
        if self.eat(&Tok::RBrace)? {
            return Ok(out);
        }
        loop {
            out.push(self.int_list()?);
            let t = self.next()?;
            match t.tok {
                Tok::Comma => {}
                Tok::RBrace => return Ok(out),
                _ => return Err(self.expected("',' or '}' in a list of lists", &t)),
            }
        }
    }
}

/// Integers separated by `sep`, or `None` if any part is not one.
fn split_ints(text: &str, sep: char) -> Option<Vec<i64>> {
    text.split(sep).map(|p| p.parse::<i64>().ok()).collect()
}

/// Reads one side of dim labels: the position of each named role and of
/// each spatial dimension (by its digit).
fn label_positions(part: &str, roles: [char; 2]) -> Result<([i64; 2], Vec<i64>), String> {
    let mut role_pos = [None, None];
    let n_spatial = part.len().saturating_sub(2);
    let mut spatial: Vec<Option<i64>> = vec![None; n_spatial];
    for (pos, ch) in part.chars().enumerate() {
        let pos = pos as i64;
        if let Some(r) = roles.iter().position(|&c| c == ch) {
            if role_pos[r].replace(pos).is_some() {
                return Err(format!("'{ch}' appears twice in {part}"));
            }
        } else if ch == '?' {
            return Err("dimensions labelled '?' are not supported".into());
        } else {
            let slot = ch
                .to_digit(10)
                .and_then(|d| spatial.get_mut(d as usize))
                .ok_or_else(|| {
                    format!("'{ch}' in {part} is not a spatial dimension below {n_spatial}")
                })?;
            if slot.replace(pos).is_some() {
                return Err(format!("'{ch}' appears twice in {part}"));
            }
        }
    }
    let [Some(a), Some(b)] = role_pos else {
        return Err(format!(
            "{part} must name '{}' and '{}' once each",
            roles[0], roles[1]
        ));
    };
    let spatial = spatial
        .into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| {
            format!(
                "{part} must number its spatial dimensions 0..{}",
                part.len().saturating_sub(2)
            )
        })?;
    Ok(([a, b], spatial))
}

pub(crate) fn parse_dim_labels(text: &str) -> Result<ConvDimensionNumbers, String> {
    let (inputs, output) = text.split_once("->").ok_or("missing '->'")?;
    let (input, kernel) = inputs.split_once('_').ok_or("missing '_'")?;
    let ([ib, if_], is) = label_positions(input, ['b', 'f'])?;
    let ([ki, ko], ks) = label_positions(kernel, ['i', 'o'])?;
    let ([ob, of], os) = label_positions(output, ['b', 'f'])?;
    if is.len() != ks.len() || is.len() != os.len() {
        return Err(
            "input, kernel and output must have the same number of spatial dimensions".into(),
        );
    }
    Ok(ConvDimensionNumbers {
        input_batch_dimension: ib,
        input_feature_dimension: if_,
        input_spatial_dimensions: is,
        kernel_input_feature_dimension: ki,
        kernel_output_feature_dimension: ko,
        kernel_spatial_dimensions: ks,
        output_batch_dimension: ob,
        output_feature_dimension: of,
        output_spatial_dimensions: os,
    })
}

/// Device ids at most this many are expanded from an iota list; the bound
/// keeps a short text from asking for a huge allocation.
const MAX_IOTA_DEVICES: usize = 1 << 20;

/// Expands `[groups,group_size]<=[dims]T(perm)`: iota over `dims`,
/// transposed by `perm`, read in row-major order and cut into groups.
fn iota_groups(
    groups: usize,
    group_size: usize,
    dims: &[usize],
    perm: &[usize],
) -> Result<Vec<Vec<i64>>, String> {
    let total = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= MAX_IOTA_DEVICES)
        .ok_or_else(|| {
            format!("iota replica groups may list at most {MAX_IOTA_DEVICES} devices")
        })?;
    if groups.checked_mul(group_size) != Some(total) {
        return Err(format!(
            "iota replica groups [{groups},{group_size}] need {} devices, but the iota has {total}",
            groups.saturating_mul(group_size)
        ));
    }
    let mut seen = vec![false; dims.len()];
    let is_perm = perm.len() == dims.len()
        && perm
            .iter()
            .all(|&p| p < seen.len() && !std::mem::replace(&mut seen[p], true));
    if !is_perm {
        return Err(format!(
            "T{perm:?} is not a permutation of the {} iota dimensions",
            dims.len()
        ));
    }
    // Row-major strides of the untransposed iota.
    let mut strides = vec![1usize; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * dims[i + 1];
    }
    let new_dims: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
    let mut index = vec![0usize; dims.len()];
    let mut ids = Vec::with_capacity(total);
    for _ in 0..total {
        let id: usize = index.iter().zip(perm).map(|(&i, &p)| i * strides[p]).sum();
        ids.push(id as i64);
        for k in (0..index.len()).rev() {
            index[k] += 1;
            if index[k] < new_dims[k] {
                break;
            }
            index[k] = 0;
        }
    }
    Ok(ids.chunks(group_size.max(1)).map(<[i64]>::to_vec).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iota_replica_groups() {
        assert_eq!(
            iota_groups(2, 2, &[4], &[0]).unwrap(),
            vec![vec![0, 1], vec![2, 3]]
        );
        assert_eq!(
            iota_groups(2, 2, &[2, 2], &[1, 0]).unwrap(),
            vec![vec![0, 2], vec![1, 3]]
        );
        assert_eq!(
            iota_groups(3, 2, &[2, 3], &[1, 0]).unwrap(),
            vec![vec![0, 3], vec![1, 4], vec![2, 5]]
        );
        assert!(iota_groups(2, 3, &[4], &[0]).is_err());
        assert!(iota_groups(2, 2, &[2, 2], &[0, 0]).is_err());
    }

    #[test]
    fn dim_labels() {
        let d = parse_dim_labels("b01f_01io->b01f").unwrap();
        assert_eq!(d.input_batch_dimension, 0);
        assert_eq!(d.input_feature_dimension, 3);
        assert_eq!(d.input_spatial_dimensions, vec![1, 2]);
        assert_eq!(d.kernel_input_feature_dimension, 2);
        assert_eq!(d.kernel_output_feature_dimension, 3);
        assert_eq!(d.kernel_spatial_dimensions, vec![0, 1]);
        assert_eq!(
            parse_dim_labels("bf01_oi01->bf01").unwrap(),
            ConvDimensionNumbers::seed_layout(2)
        );
        assert!(parse_dim_labels("b0?f_01io->b01f").is_err());
        assert!(parse_dim_labels("bb0f_0io->b0f").is_err());
    }
}
