//! The library half of the `oxla` command: what the binary shares with the
//! fuzz targets in `fuzz/`. It reads and writes `.npy` files ([`npy`]) and
//! makes a module's entry arguments from files or a seed ([`arguments`]);
//! `.npy` stays known to this crate only.

pub mod arguments;
pub mod npy;
pub mod random;
