//! `.npy` files: the first byte picks the expected element type, the rest is
//! the file. Reading gives an array of exactly the expected shape or an
//! error, and what is read writes back to a file that reads the same.
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use oxla_cli::npy;
use oxla_hlo::{ArrayShape, Literal, PrimitiveType};

fuzz_target!(|data: &[u8]| {
    let Some((&t, file)) = data.split_first() else {
        return;
    };
    let ty = PrimitiveType::ALL[t as usize % PrimitiveType::ALL.len()];
    // Expect the file's own dimensions when they are small (so that the
    // data path is reached), otherwise some other shape.
    let dims: Vec<i64> = match npy::read_header(&mut Cursor::new(file)) {
        Ok(h) => h
            .shape
            .iter()
            .map(|&d| d.min(i64::MAX as u64) as i64)
            .collect(),
        Err(_) => vec![2],
    };
    let expected = match ArrayShape::new(ty, dims) {
        Ok(s) if s.byte_size().is_ok_and(|b| b <= 1 << 20) => s,
        _ => ArrayShape::new_unchecked(ty, [2]),
    };
    let Ok(literal) = npy::read_from(Cursor::new(file), "fuzz.npy", &expected) else {
        return;
    };
    let array = literal.as_array().expect("reading gives an array");
    assert!(array.shape().compatible(&expected));
    let mut written = Vec::new();
    npy::write_to(&mut written, array).expect("writing to memory succeeds");
    let again = npy::read_from(Cursor::new(&written), "again.npy", &expected)
        .unwrap_or_else(|e| panic!("written file does not read back: {e}"));
    assert!(again.bitwise_eq(&Literal::Array(array.clone())));
});
