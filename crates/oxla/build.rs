//! Examples and tests find custom-call targets among the process's exported
//! symbols, as XLA's CPU backend does; executables export them only when
//! linked with `-rdynamic`.

fn main() {
    println!("cargo:rustc-link-arg-examples=-rdynamic");
    println!("cargo:rustc-link-arg-tests=-rdynamic");
}
