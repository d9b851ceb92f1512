import { useQuery } from '@tanstack/react-query';
import { Link, useParams } from 'react-router';
import { api, ApiError } from '../api/client';
import type { LlmInteractionSummary, McpInteractionSummary } from '../api/types';
import { formatDuration, formatTime, prettyJson } from '../components/format';
import { NotFoundPage } from './NotFoundPage';

/** Every LLM and MCP interaction of a session, by stage and execution. */
export function TracePage() {
  const { id = '' } = useParams();
  const trace = useQuery({ queryKey: ['trace', id], queryFn: () => api.trace(id) });
  if (trace.error instanceof ApiError && trace.error.status === 404) {
    return <NotFoundPage what={`There is no session ${id}.`} />;
  }
  if (trace.isError) return <p role="alert" className="error">Cannot load the trace: {trace.error.message}</p>;
  if (!trace.data) return <p aria-busy="true">Loading the trace…</p>;
  const { stages, session_interactions } = trace.data;
  return (
    <section aria-labelledby="trace-title" className="trace">
      <h1 id="trace-title">Trace</h1>
      <p>
        <Link to={`/sessions/${encodeURIComponent(id)}`}>Back to the session</Link>
      </p>
      {stages.length === 0 && session_interactions.length === 0 && <p className="empty">No interactions yet.</p>}
      {stages.map((stage, index) => (
        <section key={stage.stage_id} className="card" aria-labelledby={`trace-stage-${stage.stage_id}`}>
          <h2 id={`trace-stage-${stage.stage_id}`}>
            Stage {index + 1}: {stage.stage_name}
          </h2>
          {stage.executions.map((execution) => (
            <section key={execution.execution_id} aria-label={`${execution.agent_name} interactions`}>
              <h3>{execution.agent_name}</h3>
              <h4>LLM interactions ({execution.llm_interactions.length})</h4>
              <ul className="interactions">
                {execution.llm_interactions.map((i) => (
                  <li key={i.id}>
                    <LlmInteraction sessionId={id} interaction={i} />
                  </li>
                ))}
              </ul>
              <h4>MCP interactions ({execution.mcp_interactions.length})</h4>
              <ul className="interactions">
                {execution.mcp_interactions.map((i) => (
                  <li key={i.id}>
                    <McpInteraction sessionId={id} interaction={i} />
                  </li>
                ))}
              </ul>
            </section>
          ))}
        </section>
      ))}
      {session_interactions.length > 0 && (
        <section className="card" aria-labelledby="trace-session">
          <h2 id="trace-session">Session</h2>
          <ul className="interactions">
            {session_interactions.map((i) => (
              <li key={i.id}>
                <LlmInteraction sessionId={id} interaction={i} />
              </li>
            ))}
          </ul>
        </section>
      )}
    </section>
  );
}

function tokens(i: LlmInteractionSummary): string {
  if (!i.usage) return 'tokens —';
  const u = i.usage;
  return `${u.input_tokens} in · ${u.output_tokens} out${u.thinking_tokens ? ` · ${u.thinking_tokens} thinking` : ''}`;
}

/** Summary line; the full conversation loads when opened. */
function LlmInteraction({ sessionId, interaction }: { sessionId: string; interaction: LlmInteractionSummary }) {
  return (
    <details>
      <summary>
        <span className="badge badge-info">{interaction.interaction_type}</span> {interaction.model} ({interaction.provider}) ·{' '}
        {tokens(interaction)} · {formatDuration(interaction.duration_ms)}
        {interaction.error_message && <span className="error"> · {interaction.error_message}</span>}
      </summary>
      <LlmDetail sessionId={sessionId} id={interaction.id} />
    </details>
  );
}

function LlmDetail({ sessionId, id }: { sessionId: string; id: string }) {
  const detail = useQuery({ queryKey: ['llm', sessionId, id], queryFn: () => api.llmInteraction(sessionId, id) });
  if (detail.isError) return <p className="error">{detail.error.message}</p>;
  if (!detail.data) return <p aria-busy="true">Loading…</p>;
  const d = detail.data;
  return (
    <div className="interaction-detail">
      <p className="muted small">{formatTime(d.created_at)} · conversation: {d.conversation_source}</p>
      <ol className="conversation">
        {d.conversation.map((m, index) => (
          <li key={index} className={`message message-${m.role}`}>
            <strong>{m.role}</strong>
            {m.tool_name && <code> {m.tool_name}</code>}
            <pre>{m.content}</pre>
            {m.tool_calls?.map((c) => (
              <pre key={c.id}>
                → {c.name}({prettyJson(c.arguments)})
              </pre>
            ))}
          </li>
        ))}
      </ol>
      {d.thinking_content && (
        <>
          <h5>Thinking</h5>
          <pre>{d.thinking_content}</pre>
        </>
      )}
      <h5>Response</h5>
      <pre>{d.response_text ?? ''}</pre>
    </div>
  );
}

function McpInteraction({ sessionId, interaction }: { sessionId: string; interaction: McpInteractionSummary }) {
  return (
    <details>
      <summary>
        <span className="badge badge-info">{interaction.interaction_type}</span> {interaction.server_name}
        {interaction.tool_name ? `.${interaction.tool_name}` : ''} · {formatDuration(interaction.duration_ms)}
        {interaction.error_message && <span className="error"> · {interaction.error_message}</span>}
      </summary>
      <McpDetail sessionId={sessionId} id={interaction.id} />
    </details>
  );
}

function McpDetail({ sessionId, id }: { sessionId: string; id: string }) {
  const detail = useQuery({ queryKey: ['mcp', sessionId, id], queryFn: () => api.mcpInteraction(sessionId, id) });
  if (detail.isError) return <p className="error">{detail.error.message}</p>;
  if (!detail.data) return <p aria-busy="true">Loading…</p>;
  const d = detail.data;
  return (
    <div className="interaction-detail">
      <h5>Arguments</h5>
      <pre>{prettyJson(d.tool_arguments)}</pre>
      <h5>Result</h5>
      <pre>{prettyJson(d.tool_result)}</pre>
      <details>
        <summary>Tools available</summary>
        <pre>{prettyJson(d.available_tools)}</pre>
      </details>
    </div>
  );
}
