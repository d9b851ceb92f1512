//! The scripted LLM provider: canned answers, streamed as the LLM service
//! streams a model's.
//!
//! A [`ScriptedLlm`] holds the script: responses queued sequentially or per
//! agent (routed by an agent name found in the system prompt), which can
//! carry errors and tool calls, hang until the client cancels, or fail the
//! RPC; every request is recorded. [`ScriptedLlm::respond`] plays the next
//! response as the stream of `GenerateResponse`s, and is reached two ways:
//!
//! * in process, through the engine's `ScriptedLlmClient`: what an
//!   `LLMProvider` of type `scripted` runs (the offline example, `tarsy
//!   eval`);
//! * over gRPC, through [`ScriptedLlmServer`] (an `LLMService` on a local
//!   port): what tests put in place of the Python LLM service, so that the
//!   engine's real gRPC client path is exercised. Its `Embed` answers with a
//!   [`ScriptedEmbedder`] (deterministic hashed bag of words), unless
//!   [`ScriptedLlm::push_embed`] scripted the answer.
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

pub mod embed;
pub mod script;
pub mod server;

pub use embed::ScriptedEmbedder;
pub use script::{Ending, ScriptFile, ScriptedChunk, ScriptedResponse};
pub use server::{
    RecordedRequest, ResponseStream, ScriptedEmbedReply, ScriptedLlm, ScriptedLlmServer,
};
