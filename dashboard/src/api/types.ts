// The shapes of the TARSy REST API (operator/api/API.md), as the dashboard reads them.

export type SessionStatus =
  | 'pending'
  | 'in_progress'
  | 'cancelling'
  | 'completed'
  | 'failed'
  | 'cancelled'
  | 'timed_out';

export const SESSION_STATUSES: SessionStatus[] = [
  'pending',
  'in_progress',
  'cancelling',
  'completed',
  'failed',
  'cancelled',
  'timed_out',
];

export const TERMINAL_STATUSES: ReadonlySet<string> = new Set(['completed', 'failed', 'cancelled', 'timed_out']);

export interface SessionSummary {
  id: string;
  alert_type: string;
  chain_id: string;
  status: SessionStatus;
  author: string | null;
  executive_summary: string | null;
  error_message: string | null;
  current_stage_index: number | null;
  pod_id: string | null;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  deleted_at: string | null;
}

export interface SessionPage {
  sessions: SessionSummary[];
  pagination: { page: number; page_size: number; total_items: number; total_pages: number };
}

/** Cluster mode only: the AgentExecution behind an execution. */
export interface ExecutionObject {
  namespace: string;
  name: string;
  phase?: string;
  pod_name?: string;
}

/** Cluster mode only: the Alert behind a session. */
export interface AlertObject {
  namespace: string;
  name: string;
  phase?: string;
}

export interface AgentExecution {
  id: string;
  stage_id: string;
  session_id: string;
  agent_name: string;
  agent_index: number;
  kind: 'investigation' | 'synthesis' | 'chat' | string;
  iteration_strategy: string;
  llm_provider: string | null;
  status: string;
  error_message: string | null;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  cluster?: ExecutionObject;
}

export interface Stage {
  id: string;
  session_id: string;
  stage_name: string;
  /** investigation, synthesis or chat (absent from older servers). */
  kind?: 'investigation' | 'synthesis' | 'chat' | string;
  stage_index: number;
  expected_agent_count: number;
  parallel_type: string | null;
  success_policy: string | null;
  chat_id: string | null;
  chat_user_message_id: string | null;
  status: string;
  error_message: string | null;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  executions: AgentExecution[];
}

export interface SessionDetail {
  id: string;
  alert_data: string;
  alert_type: string;
  chain_id: string;
  status: SessionStatus;
  author: string | null;
  runbook_url: string | null;
  mcp_selection: unknown;
  final_analysis: string | null;
  executive_summary: string | null;
  executive_summary_error: string | null;
  error_message: string | null;
  current_stage_index: number | null;
  current_stage_id: string | null;
  pod_id: string | null;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  last_interaction_at: string | null;
  chat_available: boolean;
  chat: {
    chat_id: string;
    created_by: string | null;
    created_at: string;
    message_count: number;
    active_stage_id: string | null;
  } | null;
  stages: Stage[];
  /** What made the investigation run with less than it was configured with. */
  warnings: SessionWarning[];
  cluster?: AlertObject;
}

/** An MCP server the agent could not use or a runbook it could not fetch, say: the answer may be incomplete. */
export interface SessionWarning {
  kind: string;
  message: string;
  server?: string;
  stage_id: string | null;
  execution_id: string | null;
  event_id: string;
}

export interface TimelineEvent {
  id: string;
  session_id: string;
  stage_id: string | null;
  execution_id: string | null;
  sequence_number: number;
  event_type: string;
  status: string;
  content: string;
  metadata: Record<string, unknown>;
  created_at: string;
  updated_at?: string;
}

export interface TokenUsage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  thinking_tokens: number;
}

export interface LlmInteractionSummary {
  id: string;
  interaction_type: string;
  provider: string;
  model: string;
  usage: TokenUsage | null;
  duration_ms: number | null;
  error_message: string | null;
  created_at: string;
}

export interface McpInteractionSummary {
  id: string;
  interaction_type: string;
  server_name: string;
  tool_name: string | null;
  duration_ms: number | null;
  error_message: string | null;
  created_at: string;
}

export interface SessionTrace {
  stages: {
    stage_id: string;
    stage_name: string;
    stage_index: number;
    executions: {
      execution_id: string;
      agent_name: string;
      agent_index: number;
      llm_interactions: LlmInteractionSummary[];
      mcp_interactions: McpInteractionSummary[];
    }[];
  }[];
  session_interactions: LlmInteractionSummary[];
}

export interface ConversationMessage {
  role: string;
  content: string;
  tool_calls?: { id: string; name: string; arguments: string }[];
  tool_call_id?: string;
  tool_name?: string;
}

export interface LlmInteractionDetail extends LlmInteractionSummary {
  thinking_content: string | null;
  response_text: string | null;
  conversation_source: 'messages' | 'inline' | 'none';
  conversation: ConversationMessage[];
}

export interface McpInteractionDetail extends McpInteractionSummary {
  tool_arguments: unknown;
  tool_result: unknown;
  available_tools: unknown;
}

export interface Health {
  status: 'healthy' | 'degraded' | 'unhealthy';
  version: string;
  database: { status: string; backend: string; sessions_in_progress?: number; error?: string };
  /** Services the API depends on besides its database (cluster mode: `kubernetes`). */
  dependencies?: Record<string, { status: string; checked_at: string; error?: string }>;
  mcp: { healthy: boolean; servers: Record<string, { healthy: boolean; checked_at: string; error?: string }> };
  warnings: {
    id: string;
    category: string;
    message: string;
    details: string;
    server_id?: string;
    created_at: string;
  }[];
  websocket: { connections: number; subscriptions: number };
}

export interface SystemConfiguration {
  mode: 'local' | 'cluster' | string;
  namespace?: string;
  chains: {
    name: string;
    alert_types: string[];
    stages: { name: string; agents: string[]; replicas: number; success_policy?: string; synthesis_agent?: string }[];
    llm_provider?: string;
    iteration_strategy?: string;
    mcp_servers: string[];
    chat_enabled: boolean;
    session_timeout?: string;
    origin: string;
  }[];
  agents: {
    name: string;
    description?: string;
    mcp_servers: string[];
    iteration_strategy?: string;
    max_iterations?: number;
    origin: string;
  }[];
  llm_providers: {
    name: string;
    type: string;
    model: string;
    context_window_tokens?: number;
    fallback: string[];
    origin: string;
  }[];
  mcp_servers: { name: string; transport: string; instructions?: string; origin: string }[];
}

export interface McpSelection {
  servers: { name: string; tools?: string[] }[];
  native_tools?: Record<string, boolean>;
}

export interface AlertRequest {
  alert_type: string;
  data: unknown;
  chain?: string;
  runbook_url?: string;
  mcp_selection?: McpSelection;
}
