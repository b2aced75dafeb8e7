//! Runtime services: the NoServices defaults and their errors, and a client
//! style implementation (one thread per replica with a rendezvous, an infeed
//! queue, an outfeed sink, a custom-call registry) driving every collective.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};

use oxla_hlo::{Literal, Shape};
use oxla_interp::{
    CollectiveKey, EvalError, EvalOptions, NoServices, ServiceError, ServiceKind, Services,
};

use crate::common::{assert_bits, eval, eval_err, lit, module, try_eval_with};

#[test]
fn no_services_is_one_replica() {
    let text = "HloModule t\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[] add(a, b)\n}\nENTRY e {\n  x = f32[2] parameter(0)\n  ar = f32[2] all-reduce(x), replica_groups={}, to_apply=add\n  id = u32[] replica-id()\n  pid = u32[] partition-id()\n  ROOT t = (f32[2], u32[], u32[]) tuple(ar, id, pid)\n}\n";
    let out = eval(text, &[lit("f32[2]", "{1, 2}")]);
    assert_bits(&out, &lit("(f32[2], u32[], u32[])", "({1, 2}, 0, 0)"));
}

#[test]
fn missing_services_are_clear_errors() {
    let infeed = "HloModule t\nENTRY e {\n  t = token[] after-all()\n  in = (f32[2], token[]) infeed(t)\n  ROOT d = f32[2] get-tuple-element(in), index=0\n}\n";
    let e = eval_err(infeed, &[]);
    assert!(
        matches!(
            e,
            EvalError::Service {
                service: ServiceKind::Infeed,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("instruction `in` (infeed)"), "{e}");
    assert!(
        e.to_string().contains("no infeed service configured"),
        "{e}"
    );

    let call = "HloModule t\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT c = f32[2] custom-call(x), custom_call_target=\"foo\"\n}\n";
    let e = eval_err(call, &[lit("f32[2]", "{1, 2}")]);
    assert!(
        e.to_string()
            .contains("custom-call target `foo` is not registered"),
        "{e}"
    );

    // Outfeed runs although nothing uses its token (a side effect).
    let outfeed = "HloModule t\nENTRY e {\n  x = f32[2] parameter(0)\n  t = token[] after-all()\n  o = token[] outfeed(x, t), outfeed_shape=f32[2]\n  ROOT r = f32[2] negate(x)\n}\n";
    let e = eval_err(outfeed, &[lit("f32[2]", "{1, 2}")]);
    assert!(
        e.to_string().contains("no outfeed service configured"),
        "{e}"
    );

    let pair = "HloModule t\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[] add(a, b)\n}\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT ar = f32[2] all-reduce(x), replica_groups={{0,1}}, to_apply=add\n}\n";
    let e = eval_err(pair, &[lit("f32[2]", "{1, 2}")]);
    assert!(
        matches!(
            e,
            EvalError::Service {
                service: ServiceKind::Collective,
                ..
            }
        ),
        "{e:?}"
    );
}

/// What a client might build: replicas meet at a rendezvous per collective.
#[derive(Default)]
struct Shared {
    slots: Mutex<HashMap<String, (Vec<Option<Literal>>, usize)>>,
    ready: Condvar,
    infeed: Mutex<Vec<Literal>>,
    outfeed: Mutex<Vec<(u32, Literal)>>,
}

struct Replica {
    id: u32,
    count: u32,
    shared: Arc<Shared>,
}

impl Services for Replica {
    fn replica_id(&self) -> u32 {
        self.id
    }

    fn replica_count(&self) -> u32 {
        self.count
    }

    fn collective(
        &self,
        key: &CollectiveKey,
        participants: &[u32],
        value: Literal,
    ) -> Result<Vec<Literal>, ServiceError> {
        let name = format!("{key:?}{participants:?}");
        let n = participants.len();
        let me = participants
            .iter()
            .position(|&p| p == self.id)
            .ok_or_else(|| ServiceError::new("not a participant"))?;
        let mut slots = self.shared.slots.lock().unwrap();
        slots
            .entry(name.clone())
            .or_insert_with(|| (vec![None; n], 0))
            .0[me] = Some(value);
        self.shared.ready.notify_all();
        while slots[&name].0.iter().any(Option::is_none) {
            slots = self.shared.ready.wait(slots).unwrap();
        }
        let slot = slots.get_mut(&name).unwrap();
        let values = slot.0.iter().map(|v| v.clone().unwrap()).collect();
        slot.1 += 1;
        if slot.1 == n {
            slots.remove(&name);
        }
        Ok(values)
    }

    fn infeed(&self, _shape: &Shape) -> Result<Literal, ServiceError> {
        self.shared
            .infeed
            .lock()
            .unwrap()
            .pop()
            .ok_or_else(|| ServiceError::new("the infeed queue is empty"))
    }

    fn outfeed(&self, value: Literal) -> Result<(), ServiceError> {
        self.shared.outfeed.lock().unwrap().push((self.id, value));
        Ok(())
    }

    fn custom_call(
        &self,
        target: &str,
        operands: &[Literal],
        _shape: &Shape,
        config: &str,
    ) -> Result<Literal, ServiceError> {
        match target {
            "twice" => {
                let v: Vec<f32> = operands[0]
                    .to_vec::<f32>()
                    .unwrap()
                    .iter()
                    .map(|x| x * 2.0)
                    .collect();
                Ok(Literal::vec1(&v))
            }
            "wrong_shape" => Ok(Literal::scalar(1i32)),
            "config" => Ok(Literal::scalar(config.len() as i32)),
            other => Err(ServiceError::new(format!("unknown target {other}"))),
        }
    }
}

const COLLECTIVES: &str = r#"HloModule collectives
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
ENTRY e {
  x = f32[2] parameter(0)
  y = f32[4] parameter(1)
  ar = f32[2] all-reduce(x), replica_groups={{0,2},{1,3}}, to_apply=add
  ag = f32[8] all-gather(x), replica_groups={}, dimensions={0}
  rs = f32[1] reduce-scatter(x), replica_groups={{0,1},{2,3}}, dimensions={0}, to_apply=add
  a2a = f32[4] all-to-all(y), replica_groups={}, dimensions={0}
  cp = f32[2] collective-permute(x), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  id = u32[] replica-id()
  ROOT t = (f32[2], f32[8], f32[1], f32[4], f32[2], u32[]) tuple(ar, ag, rs, a2a, cp, id)
}
"#;

#[test]
fn collectives_across_four_replicas() {
    let shared = Arc::new(Shared::default());
    let m = Arc::new(module(COLLECTIVES));
    let handles: Vec<_> = (0..4u32)
        .map(|r| {
            let (shared, m) = (shared.clone(), m.clone());
            std::thread::spawn(move || {
                let services = Replica {
                    id: r,
                    count: 4,
                    shared,
                };
                let x = Literal::vec1(&[r as f32, 10.0 * r as f32]);
                let y = Literal::vec1(&[
                    (4 * r) as f32,
                    (4 * r + 1) as f32,
                    (4 * r + 2) as f32,
                    (4 * r + 3) as f32,
                ]);
                oxla_interp::evaluate(&m, &[x, y], &EvalOptions::default(), &services)
            })
        })
        .collect();
    let results: Vec<Literal> = handles
        .into_iter()
        .map(|h| h.join().unwrap().unwrap())
        .collect();
    let ty = "(f32[2], f32[8], f32[1], f32[4], f32[2], u32[])";
    let all = "{0, 0, 1, 10, 2, 20, 3, 30}";
    assert_bits(
        &results[0],
        &lit(
            ty,
            &format!("({{2, 20}}, {all}, {{1}}, {{0, 4, 8, 12}}, {{3, 30}}, 0)"),
        ),
    );
    assert_bits(
        &results[1],
        &lit(
            ty,
            &format!("({{4, 40}}, {all}, {{10}}, {{1, 5, 9, 13}}, {{0, 0}}, 1)"),
        ),
    );
    assert_bits(
        &results[2],
        &lit(
            ty,
            &format!("({{2, 20}}, {all}, {{5}}, {{2, 6, 10, 14}}, {{1, 10}}, 2)"),
        ),
    );
    assert_bits(
        &results[3],
        &lit(
            ty,
            &format!("({{4, 40}}, {all}, {{50}}, {{3, 7, 11, 15}}, {{2, 20}}, 3)"),
        ),
    );
}

#[test]
fn collectives_in_a_loop_meet_per_iteration() {
    // Each iteration's all-reduce is a separate rendezvous (the key's sequence number).
    let text = r#"HloModule loop
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT r = s32[] add(a, b)
}
cond {
  p = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  v = s32[] get-tuple-element(p), index=1
  s = s32[] all-reduce(v), replica_groups={}, to_apply=add
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], s32[]) tuple(i2, s)
}
ENTRY e {
  v = s32[] parameter(0)
  z = s32[] constant(0)
  init = (s32[], s32[]) tuple(z, v)
  w = (s32[], s32[]) while(init), condition=cond, body=body
  ROOT r = s32[] get-tuple-element(w), index=1
}
"#;
    let shared = Arc::new(Shared::default());
    let m = Arc::new(module(text));
    let handles: Vec<_> = (0..2u32)
        .map(|r| {
            let (shared, m) = (shared.clone(), m.clone());
            std::thread::spawn(move || {
                let services = Replica {
                    id: r,
                    count: 2,
                    shared,
                };
                oxla_interp::evaluate(
                    &m,
                    &[Literal::scalar(r as i32 + 1)],
                    &EvalOptions::default(),
                    &services,
                )
            })
        })
        .collect();
    for h in handles {
        // (1 + 2) -> 3 + 3 = 6 -> 12.
        assert_eq!(h.join().unwrap().unwrap().to_scalar::<i32>().unwrap(), 12);
    }
}

#[test]
fn infeed_outfeed_and_custom_calls_go_through_the_services() {
    let shared = Arc::new(Shared::default());
    shared
        .infeed
        .lock()
        .unwrap()
        .push(lit("(f32[2], s32[])", "({3, 4}, 7)"));
    let services = Replica {
        id: 0,
        count: 1,
        shared: shared.clone(),
    };
    let text = r#"HloModule feeds
ENTRY e {
  t = token[] after-all()
  in = ((f32[2], s32[]), token[]) infeed(t)
  d = (f32[2], s32[]) get-tuple-element(in), index=0
  t2 = token[] get-tuple-element(in), index=1
  x = f32[2] get-tuple-element(d), index=0
  o = token[] outfeed(x, t2), outfeed_shape=f32[2]
  c = f32[2] custom-call(x), custom_call_target="twice"
  k = s32[] custom-call(), custom_call_target="config", backend_config="abcd"
  ROOT r = (f32[2], s32[]) tuple(c, k)
}
"#;
    let out = try_eval_with(text, &[], &EvalOptions::default(), &services).unwrap();
    assert_bits(&out, &lit("(f32[2], s32[])", "({6, 8}, 4)"));
    let sent = shared.outfeed.lock().unwrap();
    assert_eq!(sent.len(), 1);
    assert_bits(&sent[0].1, &lit("f32[2]", "{3, 4}"));
    drop(sent);

    // The interpreter checks what a service returns.
    let wrong = "HloModule t\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT c = f32[2] custom-call(x), custom_call_target=\"wrong_shape\"\n}\n";
    let e = try_eval_with(
        wrong,
        &[lit("f32[2]", "{1, 2}")],
        &EvalOptions::default(),
        &services,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("returned a value of shape s32[], expected f32[2]"),
        "{e}"
    );
    // An empty infeed queue is the service's error, tied to the instruction.
    let e = try_eval_with(text, &[], &EvalOptions::default(), &services).unwrap_err();
    assert!(e.to_string().contains("the infeed queue is empty"), "{e}");
    let _ = NoServices;
}
