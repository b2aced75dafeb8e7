//! The runtime services an evaluation may need from its host: which replica
//! it runs as, a rendezvous for collectives, infeed and outfeed queues, and
//! custom-call targets. The client crate implements [`Services`] (one thread
//! per replica, queues, a registry of targets); [`NoServices`] is the
//! single-replica default with no queues and no targets.

use oxla_hlo::{Literal, Shape};

use crate::error::ServiceError;

/// Identifies one execution of one collective instruction, the same on every
/// replica: all replicas run the same module, so the `sequence`-th execution
/// of a given instruction on one replica meets the `sequence`-th execution of
/// that instruction on the others.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CollectiveKey {
    /// Name of the computation holding the instruction.
    pub computation: String,
    /// Name of the collective instruction.
    pub instruction: String,
    /// How many times this instruction had already executed in this
    /// evaluation (0 the first time; loops and repeated calls increase it).
    pub sequence: u64,
}

/// Runtime services used by [`crate::evaluate`].
///
/// Every method has a default that behaves like [`NoServices`], so an
/// implementation overrides only what it provides. Methods take `&self` and
/// the trait is `Send + Sync`: a multi-replica client evaluates each replica
/// on its own thread with one shared services object, and the methods are
/// called from those threads concurrently.
///
/// Errors are returned as [`ServiceError`]; the interpreter turns them into an
/// [`crate::EvalError::Service`] naming the instruction that needed the service.
///
/// # Replicas
/// [`Services::replica_id`] is this evaluation's replica and
/// [`Services::replica_count`] the number of replicas running the module.
/// `replica-id` returns the first; replica groups that are empty (`{}`) stand
/// for all `replica_count` replicas. `partition-id` returns
/// [`Services::partition_id`].
///
/// # Collectives
/// `all-reduce`, `all-gather`, `reduce-scatter`, `all-to-all` and
/// `collective-permute` all go through one primitive,
/// [`Services::collective`]: each participating replica hands in its own value
/// and gets back the values of every participant of its group, in the order of
/// `participants`. The interpreter does the rest itself (applying the
/// reduction computation in participant order, concatenating, slicing, or
/// picking the permutation's source), so every replica computes the same
/// result from the same values.
///
/// An implementation is a rendezvous keyed by `(key, participants)`: block
/// until every replica in `participants` has called with the same key, then
/// return all their values to each of them. `participants` always contains
/// this replica. For `collective-permute` the participants are all replicas.
///
/// # Infeed and outfeed
/// `infeed` asks for the next value of this replica's infeed queue with the
/// given data shape (the instruction's result is that value paired with a
/// token); the interpreter checks the returned literal's shape.
/// `outfeed` hands over a value for this replica's outfeed queue. Both are
/// called in the order the program executes them.
///
/// # Custom calls
/// `custom_call` runs the target registered under `target` on the operand
/// values and must return a literal of `result_shape` (checked, layouts
/// ignored). `backend_config` is the instruction's `backend_config` string
/// (empty when absent).
pub trait Services: Send + Sync {
    /// This evaluation's replica (`replica-id`). Default: 0.
    fn replica_id(&self) -> u32 {
        0
    }

    /// How many replicas run the module. Default: 1.
    fn replica_count(&self) -> u32 {
        1
    }

    /// This evaluation's partition (`partition-id`). Default: 0.
    fn partition_id(&self) -> u32 {
        0
    }

    /// Exchanges `value` with the other `participants` of one collective and
    /// returns every participant's value, in the order of `participants`.
    ///
    /// Default: a group of this replica alone gets its own value back (so an
    /// all-reduce over one replica is the identity); any larger group is an
    /// error, since there is no one to exchange with.
    fn collective(
        &self,
        key: &CollectiveKey,
        participants: &[u32],
        value: Literal,
    ) -> Result<Vec<Literal>, ServiceError> {
        if participants == [self.replica_id()] {
            Ok(vec![value])
        } else {
            Err(ServiceError(format!(
                "no collective service configured: `{}` needs replicas {participants:?}",
                key.instruction
            )))
        }
    }

    /// The next value of this replica's infeed queue, of shape `shape`.
    /// Default: an error ("no infeed service configured").
    fn infeed(&self, shape: &Shape) -> Result<Literal, ServiceError> {
        Err(ServiceError(format!(
            "no infeed service configured (a value of shape {shape} was requested)"
        )))
    }

    /// Appends `value` to this replica's outfeed queue.
    /// Default: an error ("no outfeed service configured").
    fn outfeed(&self, value: Literal) -> Result<(), ServiceError> {
        Err(ServiceError(format!(
            "no outfeed service configured (a value of shape {} was sent)",
            value.shape()
        )))
    }

    /// Runs the custom-call target `target`.
    /// Default: an error ("custom-call target `X` is not registered").
    fn custom_call(
        &self,
        target: &str,
        operands: &[Literal],
        result_shape: &Shape,
        backend_config: &str,
    ) -> Result<Literal, ServiceError> {
        let _ = (operands, result_shape, backend_config);
        Err(ServiceError(format!(
            "custom-call target `{target}` is not registered"
        )))
    }
}

/// One replica (id 0), no infeed or outfeed, no custom-call targets.
/// Collectives over that single replica return its own value.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoServices;

impl Services for NoServices {}
