//! The runtime services a client gives each replica: its id, the rendezvous
//! for collectives, infeed and outfeed queues, and custom-call targets.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use oxla_hlo::{Literal, Shape};
use oxla_interp::{CollectiveKey, ServiceError, Services};

use super::custom_call::{Registry, invoke};
use super::rendezvous::Rendezvous;

/// Per-replica queues of values, with waiting for the next one.
#[derive(Default)]
pub(crate) struct Queues {
    queues: Mutex<HashMap<usize, VecDeque<Literal>>>,
    arrived: Condvar,
}

impl Queues {
    pub(crate) fn push(&self, replica: usize, value: Literal) {
        self.queues
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(replica)
            .or_default()
            .push_back(value);
        self.arrived.notify_all();
    }

    /// The next value for `replica`, waiting up to `timeout` for one.
    pub(crate) fn pop(&self, replica: usize, timeout: Duration) -> Option<Literal> {
        let deadline = Instant::now() + timeout;
        let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(v) = queues.get_mut(&replica).and_then(VecDeque::pop_front) {
                return Some(v);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            queues = self
                .arrived
                .wait_timeout(queues, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }
}

/// The services of one replica in one execution.
pub(crate) struct ReplicaServices {
    pub replica: u32,
    pub replica_count: u32,
    pub rendezvous: Arc<Rendezvous>,
    pub infeed: Arc<Queues>,
    pub outfeed: Arc<Queues>,
    pub infeed_timeout: Duration,
    pub custom_calls: Arc<Registry>,
}

impl Services for ReplicaServices {
    fn replica_id(&self) -> u32 {
        self.replica
    }

    fn replica_count(&self) -> u32 {
        self.replica_count
    }

    fn collective(
        &self,
        key: &CollectiveKey,
        participants: &[u32],
        value: Literal,
    ) -> Result<Vec<Literal>, ServiceError> {
        self.rendezvous
            .exchange(self.replica, key, participants, value)
    }

    fn infeed(&self, shape: &Shape) -> Result<Literal, ServiceError> {
        // An empty tuple reads nothing from the queue, as the spec says.
        if matches!(shape, Shape::Tuple(t) if t.is_empty()) {
            return Ok(Literal::Tuple(vec![]));
        }
        let value = self.infeed.pop(self.replica as usize, self.infeed_timeout).ok_or_else(|| {
            ServiceError(format!(
                "the infeed queue of replica {} stayed empty for {:?} (a value of shape {shape} was requested)",
                self.replica, self.infeed_timeout
            ))
        })?;
        if !value.shape().compatible(shape) {
            return Err(ServiceError(format!(
                "infeed of replica {}: the queued value has shape {} but the program reads {shape}",
                self.replica,
                value.shape()
            )));
        }
        Ok(value)
    }

    fn outfeed(&self, value: Literal) -> Result<(), ServiceError> {
        self.outfeed.push(self.replica as usize, value);
        Ok(())
    }

    fn custom_call(
        &self,
        target: &str,
        operands: &[Literal],
        result_shape: &Shape,
        _backend_config: &str,
    ) -> Result<Literal, ServiceError> {
        let t = self.custom_calls.get(target).ok_or_else(|| {
            ServiceError(format!("custom-call target `{target}` is not registered"))
        })?;
        invoke(target, &t, operands, result_shape).map_err(ServiceError)
    }
}
