//! TARSy end-to-end test harness.
//!
//! The scenarios live in `tests/`; this library holds the parts they share:
//!
//! | module | what |
//! |---|---|
//! | [`llm_service`] | the real Python LLM service as a child process on a free port |
//! | [`fake_openai`] | a scripted OpenAI-compatible HTTP endpoint that records every request |
//! | [`fake_slack`] | a local fake of Slack's `chat.postMessage` that records every message |
//! | [`h2_tap`] | a loopback relay that times HTTP/2 (gRPC) requests and responses from outside both ends |
//! | [`paced_llm`] | a slow model over gRPC that answers from the conversation it is sent (the same answer when asked again) |
//! | [`harness`] | local mode booted per test (SQLite / Postgres, scripted LLM over gRPC, test MCP server), HTTP and WebSocket clients |
//! | [`golden`] | golden files with normalised ids, times and durations (`TARSY_UPDATE_GOLDEN=1` rewrites) |
//! | [`layers`] | a session's four data layers and WebSocket events as one deterministic document |
//! | [`memory_scenario`] | investigation memory's three-session scenario and its checks, for both modes |

pub mod fake_openai;
pub mod fake_slack;
pub mod golden;
pub mod h2_tap;
pub mod harness;
pub mod layers;
pub mod llm_service;
pub mod memory_scenario;
pub mod paced_llm;

pub use fake_openai::{FakeOpenAi, FakeReply, RecordedRequest};
pub use llm_service::{LlmService, LlmServiceError};
