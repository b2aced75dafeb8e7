//! Custom-call targets: Rust closures, or C functions with the spec's
//! signature `void target(void* out, void** in)`, registered by name or found
//! by name among the running process's exported symbols.

use std::collections::HashMap;
use std::ffi::{CString, c_char, c_void};
use std::sync::{Arc, RwLock};

use oxla_hlo::{ArrayLiteral, Literal, Shape};

/// A Rust custom-call target: operands and the requested result shape in,
/// the result (or a message) out.
pub type CustomCallFn = dyn Fn(&[Literal], &Shape) -> Result<Literal, String> + Send + Sync;

/// The C signature from XLA's operation semantics: `out` points to the result
/// buffer, `ins[i]` to operand `i`, all row-major with XLA's element layout.
pub type CustomCallCFn = unsafe extern "C" fn(out: *mut c_void, ins: *const *const c_void);

#[derive(Clone)]
pub(crate) enum Target {
    Rust(Arc<CustomCallFn>),
    C(CustomCallCFn),
}

/// Targets by name, shared by a client and its executables.
#[derive(Default)]
pub(crate) struct Registry {
    targets: RwLock<HashMap<String, Target>>,
}

impl Registry {
    pub(crate) fn insert(&self, name: &str, target: Target) {
        self.targets
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_string(), target);
    }

    pub(crate) fn get(&self, name: &str) -> Option<Target> {
        self.targets
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }
}

unsafe extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

/// glibc's `RTLD_DEFAULT`: search the global symbols of the process.
const RTLD_DEFAULT: *mut c_void = std::ptr::null_mut();

/// The address of an exported C function of the running process.
pub(crate) fn find_symbol(name: &str) -> Result<CustomCallCFn, String> {
    let c_name =
        CString::new(name).map_err(|_| format!("symbol name {name:?} contains a NUL byte"))?;
    // SAFETY: dlsym only reads the NUL-terminated name; RTLD_DEFAULT asks for
    // the process's global scope.
    let address = unsafe { dlsym(RTLD_DEFAULT, c_name.as_ptr()) };
    if address.is_null() {
        return Err(format!(
            "no exported symbol `{name}` in this process (executables export symbols only when linked with -rdynamic)"
        ));
    }
    // SAFETY: the caller registers `name` as a custom-call target, promising it
    // has the spec's signature; a function pointer and a data pointer have the
    // same size on every platform oxla runs on.
    Ok(unsafe { std::mem::transmute::<*mut c_void, CustomCallCFn>(address) })
}

/// Runs a target on operand values, checking the result's shape.
pub(crate) fn invoke(
    name: &str,
    target: &Target,
    operands: &[Literal],
    shape: &Shape,
) -> Result<Literal, String> {
    let result = match target {
        Target::Rust(f) => f(operands, shape)?,
        Target::C(f) => invoke_c(name, *f, operands, shape)?,
    };
    if !result.shape().compatible(shape) {
        return Err(format!(
            "custom-call target `{name}` returned {} where {shape} was expected",
            result.shape()
        ));
    }
    Ok(result)
}

fn invoke_c(
    name: &str,
    f: CustomCallCFn,
    operands: &[Literal],
    shape: &Shape,
) -> Result<Literal, String> {
    let out_shape = shape
        .as_array()
        .ok_or_else(|| format!("C custom-call target `{name}` must return an array, not {shape}; register a Rust closure for tuples"))?;
    let inputs: Vec<Vec<u8>> = operands
        .iter()
        .map(|l| match l {
            Literal::Array(a) => Ok(a.to_bytes()),
            other => Err(format!("C custom-call target `{name}` takes arrays, not {}; register a Rust closure for tuples", other.shape())),
        })
        .collect::<Result<_, _>>()?;
    let out_len = out_shape.byte_size().map_err(|e| e.to_string())?;
    // u64 words keep every element type's alignment (up to 8 bytes) satisfied.
    let mut out = vec![0u64; out_len.div_ceil(8).max(1)];
    let aligned: Vec<Vec<u64>> = inputs
        .iter()
        .map(|b| {
            let mut w = vec![0u64; b.len().div_ceil(8).max(1)];
            for (i, chunk) in b.chunks(8).enumerate() {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                w[i] = u64::from_le_bytes(word);
            }
            w
        })
        .collect();
    let pointers: Vec<*const c_void> = aligned
        .iter()
        .map(|w| w.as_ptr() as *const c_void)
        .collect();
    // SAFETY: the target was registered with the spec's signature. Each input
    // pointer addresses a buffer holding its operand's bytes, and `out` holds
    // at least the result's byte size, all 8-byte aligned and alive for the call.
    unsafe { f(out.as_mut_ptr() as *mut c_void, pointers.as_ptr()) };
    let bytes: Vec<u8> = out
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .take(out_len)
        .collect();
    ArrayLiteral::from_bytes(out_shape.clone(), &bytes)
        .map(Literal::Array)
        .map_err(|e| e.to_string())
}
