//! Rust types and gRPC stubs generated from `proto/llm_service.proto`.
//!
//! The orchestrator uses the client ([`llm::v1::llm_service_client`]); the
//! scripted test server implements the server trait
//! ([`llm::v1::llm_service_server`]). The Python LLM service generates its own
//! code from the same file.

/// Package `llm`.
pub mod llm {
    /// Package `llm.v1`.
    pub mod v1 {
        #![allow(missing_docs, clippy::all)]
        tonic::include_proto!("llm.v1");
    }
}

pub use llm::v1;
