//! TARSy end-to-end test harness.
//!
//! The scenarios live in `tests/`; this library holds the parts they share:
//!
//! | module | what |
//! |---|---|
//! | [`llm_service`] | the real Python LLM service as a child process on a free port |
//! | [`fake_openai`] | a scripted OpenAI-compatible HTTP endpoint that records every request |

pub mod fake_openai;
pub mod llm_service;

pub use fake_openai::{FakeOpenAi, FakeReply, RecordedRequest};
pub use llm_service::{LlmService, LlmServiceError};
