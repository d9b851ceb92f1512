import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useCallback, useMemo, useState } from 'react';
import { Link, useParams, useSearchParams } from 'react-router';
import { api, ApiError } from '../api/client';
import { useChannel } from '../api/live';
import { TERMINAL_STATUSES, type SessionDetail } from '../api/types';
import { ChatPanel } from '../components/ChatPanel';
import { CopyButton } from '../components/CopyButton';
import { CostSummary } from '../components/Cost';
import { formatDuration, formatTime, prettyJson, sessionDuration } from '../components/format';
import { useNow } from '../components/hooks';
import { Kubectl } from '../components/Kubectl';
import { Markdown } from '../components/Markdown';
import { ScoreBadge } from '../components/ScoreBadge';
import { SessionCost } from '../components/SessionCost';
import { SessionMemories } from '../components/SessionMemories';
import { EndReason } from '../components/EndReason';
import { StatusBadge } from '../components/StatusBadge';
import { TimelineView } from '../components/TimelineView';
import { reportMarkdown } from '../state/report';
import { buildRows, locateEvent } from '../state/rows';
import type { LiveEvent } from '../state/timeline';
import { useLiveTimeline } from '../state/useLiveTimeline';
import { NotFoundPage } from './NotFoundPage';

export function SessionPage() {
  const { id = '' } = useParams();
  // A fresh state per session: the timeline of another one never leaks in.
  return <SessionView key={id} id={id} />;
}

function SessionView({ id }: { id: string }) {
  const session = useQuery({ queryKey: ['session', id], queryFn: () => api.session(id) });
  // Once loaded, the page stays: a failed refresh (the network blinked)
  // keeps what is shown, and the next event or reconnect refreshes it.
  if (session.data) return <SessionLoaded detail={session.data} />;
  if (session.error instanceof ApiError && session.error.status === 404) {
    return <NotFoundPage what={`There is no session ${id}.`} />;
  }
  if (session.isError) {
    return (
      <p role="alert" className="error">
        Cannot load the session: {session.error.message}
      </p>
    );
  }
  return <p aria-busy="true">Loading the session…</p>;
}

function SessionLoaded({ detail }: { detail: SessionDetail }) {
  const id = detail.id;
  const queryClient = useQueryClient();
  const now = useNow(1000);
  const [params] = useSearchParams();
  const target = params.get('event') ?? params.get('stage');
  const executionIds = useMemo(
    () => new Set(detail.stages.flatMap((s) => s.executions.map((e) => e.id))),
    [detail.stages],
  );
  const timeline = useLiveTimeline(id, executionIds);
  // A score that arrives (or a re-score that starts) refreshes the session.
  const onScore = useCallback(
    (event: LiveEvent) => {
      if (event.type === 'session.score') void queryClient.invalidateQueries({ queryKey: ['session', id] });
    },
    [queryClient, id],
  );
  useChannel(`session:${id}`, onScore);
  const trace = useQuery({ queryKey: ['trace', id], queryFn: () => api.trace(id) });
  const forced = useMemo(() => {
    const set = new Set<string>();
    for (const stage of trace.data?.stages ?? []) {
      for (const e of stage.executions) {
        if (e.llm_interactions.some((i) => i.interaction_type === 'forced_conclusion')) set.add(e.execution_id);
      }
    }
    return set;
  }, [trace.data]);

  const [selected, setSelected] = useState<Map<string, string>>(() => new Map());
  const onSelectExecution = useCallback((stageId: string, executionId: string) => {
    setSelected((m) => new Map(m).set(stageId, executionId));
  }, []);
  // A deep link into a parallel stage opens the right tab.
  const eventParam = params.get('event');
  const located = useMemo(
    () => (eventParam ? locateEvent(detail.stages, timeline, eventParam) : null),
    [eventParam, detail.stages, timeline],
  );
  const effectiveSelected = useMemo(() => {
    if (!located || selected.has(located[0])) return selected;
    return new Map(selected).set(located[0], located[1]);
  }, [located, selected]);
  const rows = useMemo(
    () => buildRows(detail.stages, timeline, effectiveSelected),
    [detail.stages, timeline, effectiveSelected],
  );

  const terminal = TERMINAL_STATUSES.has(detail.status);
  const chatAnswering = Boolean(detail.chat?.active_stage_id);
  const cancel = useMutation({
    mutationFn: () => api.cancel(id),
    onSettled: () => queryClient.invalidateQueries({ queryKey: ['session', id] }),
  });

  return (
    <article className="session" aria-labelledby="session-title">
      <header className="session-header">
        <h1 id="session-title">
          {detail.alert_type} <StatusBadge status={detail.status} /> <EndReason reason={detail.end_reason} hold={detail.hold_reason} /> <ScoreBadge score={detail.score} tags={false} />
        </h1>
        <dl className="meta">
          <dt>Session</dt>
          <dd>
            <code>{detail.id}</code>
          </dd>
          <dt>Chain</dt>
          <dd>{detail.chain_id}</dd>
          <dt>Author</dt>
          <dd>{detail.author ?? '—'}</dd>
          <dt>Submitted</dt>
          <dd>{formatTime(detail.created_at)}</dd>
          <dt>Finished</dt>
          <dd>{formatTime(detail.completed_at)}</dd>
          <dt>Duration</dt>
          <dd>{formatDuration(sessionDuration(detail, now))}</dd>
          <dt>Cost</dt>
          <dd className="session-cost">
            <CostSummary cost={detail.cost} />
          </dd>
          {detail.runbook_url && (
            <>
              <dt>Runbook</dt>
              <dd>
                <a href={detail.runbook_url} target="_blank" rel="noopener noreferrer">
                  {detail.runbook_url}
                </a>
              </dd>
            </>
          )}
        </dl>
        <div className="actions">
          {(!terminal || chatAnswering) && (
            <button
              type="button"
              className="button-danger"
              disabled={cancel.isPending || detail.status === 'cancelling'}
              onClick={() => cancel.mutate()}
            >
              {chatAnswering && terminal ? 'Cancel the chat answer' : 'Cancel investigation'}
            </button>
          )}
          <Link className="button" to={`/sessions/${encodeURIComponent(id)}/trace`}>
            Trace
          </Link>
          {terminal && (
            <Link className="button" to={`/sessions/${encodeURIComponent(id)}/scoring`}>
              Scoring
            </Link>
          )}
          <CopyButton text={reportMarkdown(detail, timeline)} label="Copy report as markdown" />
        </div>
        <div role="status" aria-live="polite">
          {cancel.isSuccess && cancel.data.message}
          {cancel.isError && <span className="error">{cancel.error.message}</span>}
        </div>
      </header>

      {detail.cluster && (
        <section className="card" aria-labelledby="cluster-title">
          <h2 id="cluster-title">Cluster</h2>
          <p>
            Alert <code>{detail.cluster.name}</code> in namespace <code>{detail.cluster.namespace}</code>
            {detail.cluster.phase ? ` (${detail.cluster.phase})` : ''}
          </p>
          <Kubectl command={`kubectl -n ${detail.cluster.namespace} describe alert ${detail.cluster.name}`} />
          <Kubectl command={`kubectl -n ${detail.cluster.namespace} get agentexecutions -l tarsy.dev/session=${id}`} />
        </section>
      )}

      {detail.error_message && (
        <p role="alert" className="error card">
          {detail.error_message}
        </p>
      )}

      {detail.warnings.length > 0 && (
        <section className="card" aria-labelledby="warnings-title">
          <h2 id="warnings-title">Warnings</h2>
          <p className="warning">This investigation ran with less than it was configured with (some of its tools or its runbook); its answer may be incomplete.</p>
          <ul>
            {detail.warnings.map((w) => (
              <li key={w.event_id}>{w.message}</li>
            ))}
          </ul>
        </section>
      )}

      {detail.score && (
        <section className="card" aria-labelledby="score-title">
          <h2 id="score-title">Score</h2>
          <p>
            <ScoreBadge score={detail.score} />
          </p>
          <p>
            <Link to={`/sessions/${encodeURIComponent(id)}/scoring`}>The judge's assessment and tool report</Link>
          </p>
        </section>
      )}

      <SessionMemories sessionId={id} />

      {(detail.executive_summary || detail.executive_summary_error) && (
        <section className="card" aria-labelledby="summary-title">
          <h2 id="summary-title">Executive summary</h2>
          {detail.executive_summary && <Markdown text={detail.executive_summary} />}
          {detail.executive_summary_error && (
            <p className="warning">The executive summary could not be written: {detail.executive_summary_error}</p>
          )}
        </section>
      )}
      {detail.final_analysis && (
        <section className="card" aria-labelledby="analysis-title">
          <h2 id="analysis-title">Final analysis</h2>
          <Markdown text={detail.final_analysis} />
        </section>
      )}

      <SessionCost detail={detail} />

      <details className="card">
        <summary>
          <h2 className="inline-heading">Alert data</h2>
        </summary>
        <pre className="alert-data">{prettyJson(detail.alert_data)}</pre>
        {detail.mcp_selection ? (
          <>
            <h3>MCP selection override</h3>
            <pre>{prettyJson(detail.mcp_selection)}</pre>
          </>
        ) : null}
      </details>

      <div className="timeline">
        <h2>Timeline</h2>
        <TimelineView
          rows={rows}
          forced={forced}
          target={target}
          onSelectExecution={onSelectExecution}
          live={!terminal || chatAnswering}
        />
      </div>

      {detail.chat_available && <ChatPanel session={detail} />}
    </article>
  );
}
