//! The one table of HLO opcodes: each opcode's name in HLO text, how many
//! operands it takes, and its family. The parser, the printer and the verifier
//! all read it, so adding an opcode starts here.

use std::fmt;

/// How many operands an opcode takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    Exactly(usize),
    AtLeast(usize),
    Between(usize, usize),
}

impl Arity {
    pub fn accepts(self, n: usize) -> bool {
        match self {
            Arity::Exactly(k) => n == k,
            Arity::AtLeast(k) => n >= k,
            Arity::Between(lo, hi) => (lo..=hi).contains(&n),
        }
    }
}

impl fmt::Display for Arity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arity::Exactly(k) => write!(f, "exactly {k}"),
            Arity::AtLeast(k) => write!(f, "at least {k}"),
            Arity::Between(lo, hi) => write!(f, "{lo} to {hi}"),
        }
    }
}

/// The family an opcode belongs to; shape inference and the interpreter
/// treat each family with one rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpFamily {
    /// Element-wise, one operand, same shape out (element type may change).
    Unary,
    /// Element-wise, two operands of the same shape.
    Binary,
    /// Everything else has its own shape rule.
    Other,
}

macro_rules! opcodes {
    ($($variant:ident $name:literal $arity:expr, $family:ident;)*) => {
        /// An HLO operation.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Opcode {
            $($variant,)*
        }

        impl Opcode {
            /// Every opcode, in table order.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$variant,)*];

            /// The opcode's name in HLO text.
            pub fn name(self) -> &'static str {
                match self {
                    $(Opcode::$variant => $name,)*
                }
            }

            /// How many operands the opcode takes.
            pub fn arity(self) -> Arity {
                use Arity::*;
                match self {
                    $(Opcode::$variant => $arity,)*
                }
            }

            pub fn family(self) -> OpFamily {
                match self {
                    $(Opcode::$variant => OpFamily::$family,)*
                }
            }
        }
    };
}

opcodes! {
    // Leaves.
    Parameter "parameter" Exactly(0), Other;
    Constant "constant" Exactly(0), Other;
    Iota "iota" Exactly(0), Other;

    // Element-wise unary.
    Abs "abs" Exactly(1), Unary;
    Acos "acos" Exactly(1), Unary;
    Acosh "acosh" Exactly(1), Unary;
    Asin "asin" Exactly(1), Unary;
    Asinh "asinh" Exactly(1), Unary;
    Atan "atan" Exactly(1), Unary;
    Atanh "atanh" Exactly(1), Unary;
    Cosh "cosh" Exactly(1), Unary;
    Sinh "sinh" Exactly(1), Unary;
    Cbrt "cbrt" Exactly(1), Unary;
    Ceil "ceil" Exactly(1), Unary;
    Clz "count-leading-zeros" Exactly(1), Unary;
    Convert "convert" Exactly(1), Unary;
    BitcastConvert "bitcast-convert" Exactly(1), Other;
    Copy "copy" Exactly(1), Unary;
    Cos "cosine" Exactly(1), Unary;
    Erf "erf" Exactly(1), Unary;
    Exp "exponential" Exactly(1), Unary;
    Expm1 "exponential-minus-one" Exactly(1), Unary;
    Floor "floor" Exactly(1), Unary;
    Imag "imag" Exactly(1), Unary;
    IsFinite "is-finite" Exactly(1), Unary;
    Log "log" Exactly(1), Unary;
    Log1p "log-plus-one" Exactly(1), Unary;
    Logistic "logistic" Exactly(1), Unary;
    Negate "negate" Exactly(1), Unary;
    Not "not" Exactly(1), Unary;
    PopCnt "popcnt" Exactly(1), Unary;
    Real "real" Exactly(1), Unary;
    ReducePrecision "reduce-precision" Exactly(1), Unary;
    RoundNearestAfz "round-nearest-afz" Exactly(1), Unary;
    RoundNearestEven "round-nearest-even" Exactly(1), Unary;
    Rsqrt "rsqrt" Exactly(1), Unary;
    Sign "sign" Exactly(1), Unary;
    Sin "sine" Exactly(1), Unary;
    Sqrt "sqrt" Exactly(1), Unary;
    Tan "tan" Exactly(1), Unary;
    Tanh "tanh" Exactly(1), Unary;

    // Element-wise binary.
    Add "add" Exactly(2), Binary;
    And "and" Exactly(2), Binary;
    Atan2 "atan2" Exactly(2), Binary;
    Compare "compare" Exactly(2), Binary;
    Complex "complex" Exactly(2), Binary;
    Divide "divide" Exactly(2), Binary;
    Maximum "maximum" Exactly(2), Binary;
    Minimum "minimum" Exactly(2), Binary;
    Multiply "multiply" Exactly(2), Binary;
    MulHi "mulhi" Exactly(2), Binary;
    Or "or" Exactly(2), Binary;
    Power "power" Exactly(2), Binary;
    Remainder "remainder" Exactly(2), Binary;
    ShiftLeft "shift-left" Exactly(2), Binary;
    ShiftRightArithmetic "shift-right-arithmetic" Exactly(2), Binary;
    ShiftRightLogical "shift-right-logical" Exactly(2), Binary;
    Subtract "subtract" Exactly(2), Binary;
    Xor "xor" Exactly(2), Binary;

    // Element-wise ternary.
    Clamp "clamp" Exactly(3), Other;
    Select "select" Exactly(3), Other;

    // Data movement.
    Bitcast "bitcast" Exactly(1), Other;
    Broadcast "broadcast" Exactly(1), Other;
    Concatenate "concatenate" AtLeast(1), Other;
    DynamicSlice "dynamic-slice" AtLeast(1), Other;
    DynamicUpdateSlice "dynamic-update-slice" AtLeast(2), Other;
    Gather "gather" Exactly(2), Other;
    GetDimensionSize "get-dimension-size" Exactly(1), Other;
    Pad "pad" Exactly(2), Other;
    Reshape "reshape" Exactly(1), Other;
    Reverse "reverse" Exactly(1), Other;
    Scatter "scatter" AtLeast(3), Other;
    Slice "slice" Exactly(1), Other;
    Transpose "transpose" Exactly(1), Other;

    // Contractions and linear algebra.
    Cholesky "cholesky" Exactly(1), Other;
    Convolution "convolution" Exactly(2), Other;
    Dot "dot" Exactly(2), Other;
    Fft "fft" Exactly(1), Other;
    RaggedDot "ragged-dot" Exactly(3), Other;
    TriangularSolve "triangular-solve" Exactly(2), Other;

    // Reductions and computations applied per element or window.
    Map "map" AtLeast(1), Other;
    Reduce "reduce" AtLeast(2), Other;
    Scan "scan" AtLeast(1), Other;
    ReduceWindow "reduce-window" AtLeast(2), Other;
    SelectAndScatter "select-and-scatter" Exactly(3), Other;
    Sort "sort" AtLeast(1), Other;
    TopK "topk" Exactly(1), Other;

    // Tuples and control flow.
    Call "call" AtLeast(0), Other;
    Conditional "conditional" AtLeast(1), Other;
    GetTupleElement "get-tuple-element" Exactly(1), Other;
    OptimizationBarrier "opt-barrier" Exactly(1), Other;
    Tuple "tuple" AtLeast(0), Other;
    While "while" Exactly(1), Other;

    // Random numbers.
    Rng "rng" Exactly(2), Other;
    RngBitGenerator "rng-bit-generator" Exactly(1), Other;

    // Side effects, runtime services and collectives.
    AfterAll "after-all" AtLeast(0), Other;
    AllGather "all-gather" AtLeast(1), Other;
    AllReduce "all-reduce" AtLeast(1), Other;
    AllToAll "all-to-all" AtLeast(1), Other;
    CollectivePermute "collective-permute" Exactly(1), Other;
    CustomCall "custom-call" AtLeast(0), Other;
    Infeed "infeed" Exactly(1), Other;
    Outfeed "outfeed" Exactly(2), Other;
    PartitionId "partition-id" Exactly(0), Other;
    ReduceScatter "reduce-scatter" AtLeast(1), Other;
    ReplicaId "replica-id" Exactly(0), Other;
}

impl Opcode {
    /// The opcode with this HLO text name (also accepting XLA's older aliases).
    pub fn from_name(name: &str) -> Option<Opcode> {
        let name = match name {
            "cross-replica-sum" => "all-reduce",
            "optimization-barrier" => "opt-barrier",
            other => other,
        };
        Opcode::ALL.iter().copied().find(|op| op.name() == name)
    }

    /// Operations whose effect is not captured by their result: they run even
    /// when nothing uses their value, and are never removed or reordered.
    pub fn has_side_effect(self) -> bool {
        matches!(
            self,
            Opcode::Infeed
                | Opcode::Outfeed
                | Opcode::AllReduce
                | Opcode::AllGather
                | Opcode::AllToAll
                | Opcode::ReduceScatter
                | Opcode::CollectivePermute
                | Opcode::Rng
                | Opcode::CustomCall
                | Opcode::AfterAll
        )
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        let mut names: Vec<_> = Opcode::ALL.iter().map(|o| o.name()).collect();
        names.sort();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n);
        for &op in Opcode::ALL {
            assert_eq!(Opcode::from_name(op.name()), Some(op));
        }
        assert_eq!(
            Opcode::from_name("cross-replica-sum"),
            Some(Opcode::AllReduce)
        );
        assert_eq!(Opcode::from_name("frobnicate"), None);
    }

    #[test]
    fn arity() {
        assert!(Opcode::Add.arity().accepts(2));
        assert!(!Opcode::Add.arity().accepts(3));
        assert!(Opcode::Tuple.arity().accepts(0));
        assert!(!Opcode::Reduce.arity().accepts(1));
    }
}
