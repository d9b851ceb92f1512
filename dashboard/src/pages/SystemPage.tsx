import { Fragment } from 'react';
import { useQuery } from '@tanstack/react-query';
import { api } from '../api/client';
import { formatTime } from '../components/format';
import { useConfiguration } from '../components/hooks';
import { StatusBadge } from '../components/StatusBadge';

/** Health, warnings, MCP servers and the configuration (read-only). */
export function SystemPage() {
  const health = useQuery({ queryKey: ['health'], queryFn: api.health, refetchInterval: 15_000 });
  const config = useConfiguration();
  const h = health.data;
  const c = config.data;
  return (
    <section aria-labelledby="system-title" className="system">
      <h1 id="system-title">System</h1>
      <section className="card" aria-labelledby="health-title">
        <h2 id="health-title">Health</h2>
        {health.isError && <p role="alert" className="error">Cannot reach the API: {health.error.message}</p>}
        {h && (
          <dl className="meta">
            <dt>Status</dt>
            <dd>
              <StatusBadge status={h.status} />
            </dd>
            <dt>Version</dt>
            <dd>{h.version}</dd>
            <dt>Database</dt>
            <dd>
              {h.database.backend}: {h.database.status}
              {h.database.error ? ` (${h.database.error})` : ''}
              {h.database.sessions_in_progress !== undefined ? `, ${h.database.sessions_in_progress} sessions in progress` : ''}
            </dd>
            {Object.entries(h.dependencies ?? {}).map(([name, d]) => (
              <Fragment key={name}>
                <dt>{name === 'kubernetes' ? 'Kubernetes API' : name}</dt>
                <dd>
                  {d.status}
                  {d.error ? ` (${d.error})` : ''}, checked {formatTime(d.checked_at)}
                </dd>
              </Fragment>
            ))}
            <dt>Live connections</dt>
            <dd>
              {h.websocket.connections} WebSockets, {h.websocket.subscriptions} subscriptions
            </dd>
            {c && (
              <>
                <dt>Mode</dt>
                <dd>
                  {c.mode}
                  {c.namespace ? ` (namespace ${c.namespace})` : ''}
                </dd>
              </>
            )}
          </dl>
        )}
      </section>
      <section className="card" aria-labelledby="warnings-title">
        <h2 id="warnings-title">Warnings</h2>
        {h && h.warnings.length === 0 && <p>None.</p>}
        <ul>
          {h?.warnings.map((w) => (
            <li key={w.id} className="warning">
              <strong>{w.message}</strong> <span className="muted">({w.category}, {formatTime(w.created_at)})</span>
              {w.details && <div className="small">{w.details}</div>}
            </li>
          ))}
        </ul>
      </section>
      <section className="card" aria-labelledby="mcp-title">
        <h2 id="mcp-title">MCP servers</h2>
        <table>
          <thead>
            <tr>
              <th scope="col">Server</th>
              <th scope="col">Transport</th>
              <th scope="col">Health</th>
              <th scope="col">Checked</th>
            </tr>
          </thead>
          <tbody>
            {(c?.mcp_servers ?? []).map((s) => {
              const status = h?.mcp.servers[s.name];
              return (
                <tr key={s.name}>
                  <td>{s.name}</td>
                  <td>{s.transport}</td>
                  <td>
                    {status ? (
                      <>
                        <StatusBadge status={status.healthy ? 'healthy' : 'unhealthy'} />
                        {status.error && <span className="small"> {status.error}</span>}
                      </>
                    ) : (
                      <span className="muted">not checked (unused)</span>
                    )}
                  </td>
                  <td>{status ? formatTime(status.checked_at) : '—'}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </section>
      {config.isError && <p role="alert" className="error">Cannot read the configuration: {config.error.message}</p>}
      {c && (
        <>
          <section className="card" aria-labelledby="chains-title">
            <h2 id="chains-title">Chains</h2>
            <table>
              <thead>
                <tr>
                  <th scope="col">Chain</th>
                  <th scope="col">Alert types</th>
                  <th scope="col">Stages</th>
                  <th scope="col">LLM provider</th>
                  <th scope="col">Chat</th>
                </tr>
              </thead>
              <tbody>
                {c.chains.map((chain) => (
                  <tr key={chain.name}>
                    <td>{chain.name}</td>
                    <td>{chain.alert_types.join(', ')}</td>
                    <td>
                      <ol className="compact">
                        {chain.stages.map((s) => (
                          <li key={s.name}>
                            {s.name}: {s.agents.join(', ')}
                            {s.replicas > 1 ? ` ×${s.replicas}` : ''}
                            {s.synthesis_agent ? ` → ${s.synthesis_agent}` : ''}
                          </li>
                        ))}
                      </ol>
                    </td>
                    <td>{chain.llm_provider ?? 'default'}</td>
                    <td>{chain.chat_enabled ? 'enabled' : 'off'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </section>
          <section className="card" aria-labelledby="agents-title">
            <h2 id="agents-title">Agents</h2>
            <table>
              <thead>
                <tr>
                  <th scope="col">Agent</th>
                  <th scope="col">Name</th>
                  <th scope="col">Description</th>
                  <th scope="col">MCP servers</th>
                  <th scope="col">Strategy</th>
                  <th scope="col">Origin</th>
                </tr>
              </thead>
              <tbody>
                {c.agents.map((a) => (
                  <tr key={a.name}>
                    <td>{a.label}</td>
                    <td>
                      <code>{a.name}</code>
                    </td>
                    <td>{a.description ?? ''}</td>
                    <td>{a.mcp_servers.join(', ')}</td>
                    <td>{a.iteration_strategy ?? 'default'}</td>
                    <td>{a.origin}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </section>
          <section className="card" aria-labelledby="providers-title">
            <h2 id="providers-title">LLM providers</h2>
            <table>
              <thead>
                <tr>
                  <th scope="col">Provider</th>
                  <th scope="col">Type</th>
                  <th scope="col">Model</th>
                  <th scope="col">Fallback</th>
                  <th scope="col">Origin</th>
                </tr>
              </thead>
              <tbody>
                {c.llm_providers.map((p) => (
                  <tr key={p.name}>
                    <td>{p.name}</td>
                    <td>{p.type}</td>
                    <td>{p.model}</td>
                    <td>{p.fallback.join(' → ') || '—'}</td>
                    <td>{p.origin}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </section>
        </>
      )}
    </section>
  );
}
