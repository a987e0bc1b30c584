//! `ScorerService.Session`: one ordered stream per scheduler. Messages are handled one at a
//! time in the order they arrive, so a Reserve the client wrote without waiting is in the
//! snapshot before the next Evaluate is read. Evaluates are answered over the scorer's node
//! table (sent first whenever the client's generation differs), by index; Reserves and
//! Unreserves are acknowledged in batches: before each answer, every [`ACK_EVERY`]
//! messages, and when the stream goes quiet for [`ACK_IDLE`].
//!
//! The session is the response stream itself: the task that sends the answers (hyper's task
//! for this HTTP/2 stream) reads each request, handles it inline and yields what it gives,
//! as a unary call runs its handler. No task of its own and no channel between, so a round
//! trip costs no extra wake-up — each one a wait for a CPU on a busy node.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use tokio_stream::Stream;
use tonic::{Status, Streaming};
use waterline_api::v1 as pb;
use waterline_api::v1::session_request::Message as In;
use waterline_api::v1::session_response::Message as Out;
use waterline_convert::{duration, required_pod};
use waterline_core::UnixMillis;
use waterline_core::engine::Candidates;

use crate::service::Scorer;

pub type SessionStream = Pin<Box<dyn Stream<Item = Result<pb::SessionResponse, Status>> + Send>>;

/// Reserves/Unreserves handled before an ack goes out even with no Evaluate between.
const ACK_EVERY: u64 = 128;
/// A quiet stream acknowledges what it has handled after this long.
const ACK_IDLE: Duration = Duration::from_millis(50);

pub fn open(scorer: Scorer, inbound: Streaming<pb::SessionRequest>) -> SessionStream {
    Box::pin(Session {
        scorer,
        inbound,
        acks: Acks::default(),
        out: VecDeque::new(),
        idle: Box::pin(tokio::time::sleep(ACK_IDLE)),
        ended: false,
    })
}

/// One open session: yields what the requests read so far give, in order, and reads the
/// next request only once everything before it is out (so the client's flow control is
/// the session's backpressure, as with a bounded queue).
struct Session {
    scorer: Scorer,
    inbound: Streaming<pb::SessionRequest>,
    acks: Acks,
    /// Answers and acks of the last request handled, not yet yielded.
    out: VecDeque<pb::SessionResponse>,
    /// Fires [`ACK_IDLE`] after the last request (or the last time it fired).
    idle: Pin<Box<Sleep>>,
    ended: bool,
}

impl Stream for Session {
    type Item = Result<pb::SessionResponse, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(message) = this.out.pop_front() {
                return Poll::Ready(Some(Ok(message)));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.inbound).poll_next(cx) {
                Poll::Ready(Some(Ok(request))) => {
                    this.idle.as_mut().reset(Instant::now() + ACK_IDLE);
                    this.handle(request);
                }
                Poll::Ready(Some(Err(status))) => {
                    tracing::debug!(error = %status, "session stream ended");
                    this.ended = true;
                }
                Poll::Ready(None) => this.ended = true,
                Poll::Pending => {
                    if this.idle.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    // Quiet for ACK_IDLE: acknowledge what was handled, wait again.
                    this.idle.as_mut().reset(Instant::now() + ACK_IDLE);
                    this.out.extend(this.acks.take());
                }
            }
        }
    }
}

impl Session {
    /// Applies one request; what it gives (acks, node table, answer) goes to `out`.
    fn handle(&mut self, request: pb::SessionRequest) {
        let (scorer, acks, out) = (&self.scorer, &mut self.acks, &mut self.out);
        match request.message {
            Some(In::Reserve(r)) => {
                let call = pb::ReserveRequest {
                    pod: r.pod,
                    node_name: r.node_name,
                    provisional_ttl: r.provisional_ttl,
                };
                if let Err(status) = scorer.reserve_now(call) {
                    tracing::warn!(error = %status.message(), "session Reserve refused");
                }
                acks.handled(r.sequence);
                if acks.since_ack >= ACK_EVERY {
                    out.extend(acks.take());
                }
            }
            Some(In::Unreserve(u)) => {
                let call = pb::UnreserveRequest { pod: u.pod, node_name: u.node_name };
                if let Err(status) = scorer.unreserve_now(call) {
                    tracing::warn!(error = %status.message(), "session Unreserve refused");
                }
                acks.handled(u.sequence);
                if acks.since_ack >= ACK_EVERY {
                    out.extend(acks.take());
                }
            }
            Some(In::Evaluate(e)) => {
                out.extend(acks.take());
                out.extend(evaluate(scorer, e));
            }
            None => tracing::debug!("empty session message ignored"),
        }
    }
}

/// What a session has handled and acknowledged.
#[derive(Default)]
struct Acks {
    /// Highest Reserve/Unreserve sequence handled.
    handled: Option<u64>,
    acked: Option<u64>,
    since_ack: u64,
}

impl Acks {
    fn handled(&mut self, sequence: u64) {
        self.handled = Some(self.handled.map_or(sequence, |h| h.max(sequence)));
        self.since_ack += 1;
    }

    /// The ack to send now, if anything is unacknowledged.
    fn take(&mut self) -> Option<pb::SessionResponse> {
        let up_to = self.handled.filter(|h| self.acked.is_none_or(|a| a < *h))?;
        self.acked = Some(up_to);
        self.since_ack = 0;
        Some(response(Out::Ack(pb::SessionAck { up_to_sequence: up_to })))
    }
}

fn response(message: Out) -> pb::SessionResponse {
    pb::SessionResponse { message: Some(message) }
}

/// The answer to one Evaluate: the node table first when the client's is another
/// generation, then the evaluation over it.
fn evaluate(scorer: &Scorer, request: pb::SessionEvaluate) -> Vec<pb::SessionResponse> {
    let timer = scorer.rpc.start("Session.Evaluate");
    // One generation for the whole answer: the node table sent is the one the rows follow.
    let generation = scorer.store.read();
    let table = generation.node_table().clone();
    let mut out = Vec::with_capacity(2);
    if request.node_table_generation != table.generation {
        out.push(response(Out::NodeTable(pb::NodeTable {
            generation: table.generation,
            node_names: table.names.clone(),
        })));
    }
    let now = UnixMillis::now();
    let mut answer = pb::SessionEvaluation {
        request_id: request.request_id,
        node_table_generation: table.generation,
        snapshot_age: Some(duration(scorer.store.age(now))),
        ..Default::default()
    };
    let asked = if scorer.store.is_synced() {
        scorer.policies.index_of(&request.policy).and_then(|policy| {
            let pod = required_pod(request.pod.as_ref()).map_err(|e| e.to_string())?;
            Ok((policy, pod))
        })
    } else {
        Err("waiting for the first snapshot from the collector".to_owned())
    };
    match asked {
        Err(reason) => {
            answer.error = reason;
            timer.finish("INVALID_ARGUMENT");
        }
        Ok((policy, pod)) => {
            let evaluation = scorer.evaluate(&generation, policy, &pod, Candidates::All, now);
            answer.scores = evaluation.scores.iter().map(|s| s.unwrap_or(-1)).collect();
            answer.rejected_indexes.reserve(evaluation.rejected.len());
            answer.rejected_reasons.reserve(evaluation.rejected.len());
            for (index, reason) in evaluation.rejected.iter() {
                answer.rejected_indexes.push(index as u32);
                answer.rejected_reasons.push(reason.to_owned());
            }
            answer.unknown_node_score = evaluation.unknown_node_score;
            timer.finish("OK");
        }
    }
    out.push(response(Out::Evaluation(answer)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_cover_everything_handled_once() {
        let mut acks = Acks::default();
        assert!(acks.take().is_none(), "nothing handled, nothing to ack");
        acks.handled(3);
        acks.handled(2);
        let ack = acks.take().and_then(|r| r.message);
        assert_eq!(ack, Some(Out::Ack(pb::SessionAck { up_to_sequence: 3 })));
        assert!(acks.take().is_none(), "already acknowledged");
        acks.handled(4);
        assert!(acks.take().is_some());
    }
}
