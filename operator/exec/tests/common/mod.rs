//! What the launcher tests share: a launcher on a real store and the
//! scripted LLM service, with no MCP server.

use std::collections::BTreeMap;
use std::sync::Arc;

use tarsy_engine::fallback::CircuitBreakers;
use tarsy_exec::runbook::runbook_source;
use tarsy_exec::{Launcher, LlmRouter};
use tarsy_masking::MaskingService;
use tarsy_mcp::McpClientFactory;
use tarsy_scripted_llm::ScriptedLlmServer;
use tarsy_store::Store;

/// A launcher fetching runbooks as `defaults` say, sending the runbook
/// `token` (if any) where they allow.
pub fn launcher(
    store: &Store,
    llm: &ScriptedLlmServer,
    defaults: &tarsy_config::Defaults,
    token: Option<&str>,
) -> Launcher {
    let router = LlmRouter::new(&llm.endpoint(), ".").unwrap();
    let masking = Arc::new(MaskingService::new([], Default::default()).unwrap());
    Launcher {
        store: store.clone(),
        llm: Arc::new(router),
        mcp: Arc::new(McpClientFactory::new(Vec::new(), masking)),
        mcp_configs: BTreeMap::new(),
        publisher: Arc::new(tarsy_engine::memory::MemoryRecorder::new()),
        breakers: Arc::new(CircuitBreakers::default()),
        runbooks: Arc::new(runbook_source(
            defaults,
            token.map(tarsy_core::SecretValue::new),
        )),
        memory: tarsy_exec::memory::MemoryService::new(&defaults.memory, None),
    }
}
