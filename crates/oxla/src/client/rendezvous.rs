//! Where replicas meet for collectives. Each replica hands in its value under
//! the collective's key and waits for the other participants; a participant
//! that has already finished, or a wait longer than the timeout, ends the wait
//! with an error instead of a hang (the spec's hazard: one replica running a
//! collective more often than another).

use std::collections::{HashMap, HashSet};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use oxla_hlo::Literal;
use oxla_interp::{CollectiveKey, ServiceError};

#[derive(Default)]
struct State {
    /// Values handed in so far, per collective instance.
    slots: HashMap<(CollectiveKey, Vec<u32>), HashMap<u32, Literal>>,
    /// How many participants have collected the values of each complete instance.
    collected: HashMap<(CollectiveKey, Vec<u32>), usize>,
    /// Replicas whose evaluation has ended.
    finished: HashSet<u32>,
}

/// The meeting point of one replicated execution.
pub(crate) struct Rendezvous {
    state: Mutex<State>,
    changed: Condvar,
    timeout: Duration,
}

impl Rendezvous {
    pub(crate) fn new(timeout: Duration) -> Rendezvous {
        Rendezvous {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            timeout,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A replica thread that panicked cannot leave the map half-written:
        // every update is a single insert, so the data is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks `replica` as done, waking replicas waiting for it.
    pub(crate) fn finish(&self, replica: u32) {
        self.lock().finished.insert(replica);
        self.changed.notify_all();
    }

    /// Hands in `value` and returns every participant's value in participant order.
    pub(crate) fn exchange(
        &self,
        replica: u32,
        key: &CollectiveKey,
        participants: &[u32],
        value: Literal,
    ) -> Result<Vec<Literal>, ServiceError> {
        let slot = (key.clone(), participants.to_vec());
        let deadline = Instant::now() + self.timeout;
        let mut state = self.lock();
        state
            .slots
            .entry(slot.clone())
            .or_default()
            .insert(replica, value);
        self.changed.notify_all();
        loop {
            let arrived = state.slots.get(&slot).map_or(0, HashMap::len);
            if arrived == participants.len() {
                break;
            }
            let missing: Vec<u32> = participants
                .iter()
                .copied()
                .filter(|p| !state.slots.get(&slot).is_some_and(|s| s.contains_key(p)))
                .collect();
            if let Some(&gone) = missing.iter().find(|p| state.finished.contains(p)) {
                return Err(ServiceError(format!(
                    "replica {gone} finished without reaching `{}` (execution #{}): the replicas ran this collective different numbers of times",
                    key.instruction, key.sequence
                )));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(ServiceError(format!(
                    "timed out after {:?} waiting at `{}` (execution #{}) for replicas {missing:?}",
                    self.timeout, key.instruction, key.sequence
                )));
            }
            state = self
                .changed
                .wait_timeout(state, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        let values: Vec<Literal> = match state.slots.get(&slot) {
            Some(s) => participants
                .iter()
                .filter_map(|p| s.get(p).cloned())
                .collect(),
            None => Vec::new(),
        };
        // The last participant to collect frees the slot.
        let done = {
            let c = state.collected.entry(slot.clone()).or_insert(0);
            *c += 1;
            *c == participants.len()
        };
        if done {
            state.slots.remove(&slot);
            state.collected.remove(&slot);
        }
        Ok(values)
    }
}
