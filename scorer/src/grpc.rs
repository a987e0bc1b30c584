//! The tonic service: each `waterline.v1.ScorerService` RPC timed and answered by
//! [`Scorer`] (`service.rs`), a Session stream opened by `session.rs`. Above both, so that
//! neither needs the other's file.

use tonic::{Request, Response, Status};
use waterline_api::v1 as pb;
use waterline_api::v1::scorer_service_server::ScorerService;

use crate::service::Scorer;
use crate::session::{self, SessionStream};

#[tonic::async_trait]
impl ScorerService for Scorer {
    type SessionStream = SessionStream;

    async fn evaluate(
        &self,
        request: Request<pb::EvaluateRequest>,
    ) -> Result<Response<pb::EvaluateResponse>, Status> {
        let timer = self.rpc.start("Evaluate");
        let result = self.evaluate_now(request.into_inner());
        timer.finish_grpc(&result);
        result.map(Response::new)
    }

    async fn session(
        &self,
        request: Request<tonic::Streaming<pb::SessionRequest>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        Ok(Response::new(session::open(self.clone(), request.into_inner())))
    }

    async fn filter(
        &self,
        request: Request<pb::FilterRequest>,
    ) -> Result<Response<pb::FilterResponse>, Status> {
        let timer = self.rpc.start("Filter");
        let result = self.filter_now(request.into_inner());
        timer.finish_grpc(&result);
        result.map(Response::new)
    }

    async fn score(
        &self,
        request: Request<pb::ScoreRequest>,
    ) -> Result<Response<pb::ScoreResponse>, Status> {
        let timer = self.rpc.start("Score");
        let result = self.score_now(request.into_inner());
        timer.finish_grpc(&result);
        result.map(Response::new)
    }

    async fn reserve(
        &self,
        request: Request<pb::ReserveRequest>,
    ) -> Result<Response<pb::ReserveResponse>, Status> {
        let timer = self.rpc.start("Reserve");
        let result = self.reserve_now(request.into_inner());
        timer.finish_grpc(&result);
        result.map(Response::new)
    }

    async fn unreserve(
        &self,
        request: Request<pb::UnreserveRequest>,
    ) -> Result<Response<pb::UnreserveResponse>, Status> {
        let timer = self.rpc.start("Unreserve");
        let result = self.unreserve_now(request.into_inner());
        timer.finish_grpc(&result);
        result.map(Response::new)
    }
}
