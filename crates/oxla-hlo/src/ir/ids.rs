//! Typed indices into the IR's arenas (Cranelift's entity pattern): an
//! instruction id only indexes its own computation's instruction list, a
//! computation id only its module's computation list.

use std::fmt;

macro_rules! entity {
    ($(#[$m:meta])* $name:ident, $prefix:literal) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(u32);

        impl $name {
            /// The id of the `index`-th entry of its arena.
            pub fn new(index: usize) -> $name {
                // Arenas never reach 2^32 entries: the parser and the builder
                // bound module size long before that.
                $name(u32::try_from(index).expect(concat!(stringify!($name), " overflow")))
            }

            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

entity!(
    /// An instruction within one computation.
    InstrId,
    "i"
);
entity!(
    /// A computation within one module.
    ComputationId,
    "c"
);
