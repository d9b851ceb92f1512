//! Iteration controllers, one per strategy family, behind [`Controller`].
//!
//! * [`FunctionCallingController`] (`native-thinking`, `langchain`): tools
//!   bound to the request, structured tool calls, tool-role results.
//! * [`ReactController`] (`react`): tools described in the prompt, the
//!   response parsed by [`crate::react_parser`], observations as user
//!   messages.
//! * [`SingleCallController`] (`synthesis`, `synthesis-native-thinking`,
//!   `single-call`): one tool-less call whose text is the final analysis.
//!
//! Shared behaviour lives in [`run`]: streaming of timeline events, LLM
//! interaction records, provider fallback, context management, tool
//! execution with summarization, timeouts and cancellation.

mod function_calling;
mod react;
pub(crate) mod run;
mod single;

use async_trait::async_trait;
use tarsy_core::{ExecutionStatus, IterationStrategy};

pub use function_calling::FunctionCallingController;
pub use react::ReactController;
pub use single::SingleCallController;

use crate::execution::{ExecutionContext, ExecutionResult};
use run::{Run, Stop};

/// An iteration strategy.
#[async_trait]
pub trait Controller: Send + Sync {
    /// Runs the execution to a terminal result.
    async fn run(
        &self,
        ctx: &ExecutionContext,
        prev_stage_context: Option<&str>,
    ) -> ExecutionResult;
}

/// The controller for a strategy.
pub fn controller_for(strategy: IterationStrategy) -> Box<dyn Controller> {
    match strategy {
        IterationStrategy::NativeThinking | IterationStrategy::Langchain => {
            Box::new(FunctionCallingController)
        }
        IterationStrategy::React => Box::new(ReactController),
        IterationStrategy::Synthesis
        | IterationStrategy::SynthesisNativeThinking
        | IterationStrategy::SingleCall => Box::new(SingleCallController),
    }
}

/// Maps how a run stopped to its result.
pub(crate) fn finish(run: &Run<'_>, outcome: Result<ExecutionResult, Stop>) -> ExecutionResult {
    match outcome {
        Ok(r) => r,
        Err(stop) => {
            let (status, msg) = match stop {
                Stop::Cancelled => (
                    ExecutionStatus::Cancelled,
                    "execution cancelled".to_string(),
                ),
                Stop::SessionTimeout => (
                    ExecutionStatus::TimedOut,
                    "session timeout reached".to_string(),
                ),
                Stop::Record(e) => (
                    ExecutionStatus::Failed,
                    format!("recording the execution failed: {e}"),
                ),
                Stop::Fatal(message) => (ExecutionStatus::Failed, message),
            };
            ExecutionResult::ended(status, msg, run.usage, run.state.current_iteration)
        }
    }
}

#[async_trait]
impl<T: Controller + ?Sized> Controller for Box<T> {
    async fn run(
        &self,
        ctx: &ExecutionContext,
        prev_stage_context: Option<&str>,
    ) -> ExecutionResult {
        (**self).run(ctx, prev_stage_context).await
    }
}
