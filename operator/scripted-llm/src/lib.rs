//! The scripted LLM provider: an `LLMService` gRPC server that replays
//! canned answers.
//!
//! It is what an `LLMProvider` of type `scripted` runs (offline demos, the
//! README's first command) and what the tests put in place of the Python
//! LLM service, so that the engine's real gRPC client path is exercised: responses are queued sequentially or per agent
//! (routed by an agent name found in the system prompt), can carry errors,
//! can hang until the client cancels, and every request is recorded.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use tarsy_scripted_llm::{ScriptedLlm, ScriptedLlmServer, ScriptedResponse};
//! let script = ScriptedLlm::new();
//! script.push(ScriptedResponse::text("The pod is OOMKilled."));
//! let server = ScriptedLlmServer::start(script.clone()).await?;
//! println!("LLM service at {}", server.endpoint());
//! # Ok(()) }
//! ```

pub mod script;
pub mod server;

pub use script::{Ending, ScriptFile, ScriptedChunk, ScriptedResponse};
pub use server::{RecordedRequest, ScriptedLlm, ScriptedLlmServer};
