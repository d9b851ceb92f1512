//! Engine tests: every iteration strategy driven through the real gRPC client
//! against the scripted LLM server.

mod budget;
mod common;
mod function_calling;
mod outage;
mod react;
mod reference_timeline;
mod reflection;
mod resilience;
mod resume;
mod scoring;
mod single_call;
