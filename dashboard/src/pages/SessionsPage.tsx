import { keepPreviousData, useQuery, useQueryClient } from '@tanstack/react-query';
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { Link } from 'react-router';
import { api, type SessionQuery } from '../api/client';
import { useChannel } from '../api/live';
import { SESSION_STATUSES, type SessionPage } from '../api/types';
import { CostAmount } from '../components/Cost';
import { formatDuration, formatTime, sessionDuration, statusLabel } from '../components/format';
import { ScoreBadge } from '../components/ScoreBadge';
import { EndReason } from '../components/EndReason';
import { StatusBadge } from '../components/StatusBadge';
import { Filter } from '../components/Filter';
import { useConfiguration, useListParams, useNow } from '../components/hooks';
import { applySessionScore, applySessionStatus } from '../state/sessionList';
import type { LiveEvent } from '../state/timeline';

const SORT_KEYS: [string, string][] = [
  ['created_at', 'Submitted'],
  ['started_at', 'Started'],
  ['completed_at', 'Finished'],
  ['status', 'Status'],
  ['alert_type', 'Alert type'],
  ['chain_id', 'Chain'],
  ['author', 'Author'],
];

/** Reads the list's state from the URL (shareable, survives reloads). */
function useListQuery(): [SessionQuery & { attention: boolean }, (changes: Record<string, string | null>) => void] {
  const [params, update] = useListParams();
  const query = useMemo(
    () => ({
      status: params.get('status') ? [params.get('status') as string] : undefined,
      alert_type: params.get('alert_type') ?? undefined,
      chain_id: params.get('chain_id') ?? undefined,
      author: params.get('author') ?? undefined,
      q: params.get('q') ?? undefined,
      failure_tag: params.get('failure_tag') ?? undefined,
      page: Number(params.get('page') ?? '1') || 1,
      page_size: Number(params.get('page_size') ?? '20') || 20,
      sort: params.get('sort') ?? undefined,
      order: (params.get('order') as 'asc' | 'desc' | null) ?? undefined,
      attention: params.get('view') === 'attention',
    }),
    [params],
  );
  return [query, update];
}

export function SessionsPage() {
  const [query, update] = useListQuery();
  const queryClient = useQueryClient();
  const config = useConfiguration();
  const now = useNow(1000);
  const { attention, ...rest } = query;
  const apiQuery: SessionQuery = { ...rest, needs_attention: attention };
  const sessions = useQuery({
    queryKey: ['sessions', apiQuery],
    queryFn: () => api.sessions(apiQuery),
    placeholderData: keepPreviousData,
  });

  // Live: statuses change in place at once; the page is refetched shortly
  // after (new sessions, order, filters), coalescing bursts of events.
  const refetchTimer = useRef<ReturnType<typeof setTimeout> | null>(null);
  useEffect(() => () => {
    if (refetchTimer.current) clearTimeout(refetchTimer.current);
  }, []);
  const onEvent = useCallback(
    (event: LiveEvent) => {
      if (event.type !== 'session.status' && event.type !== 'session.score') return;
      queryClient.setQueriesData<SessionPage>({ queryKey: ['sessions'] }, (page) =>
        page ? applySessionScore(applySessionStatus(page, event), event) : page,
      );
      if (refetchTimer.current) clearTimeout(refetchTimer.current);
      refetchTimer.current = setTimeout(() => {
        void queryClient.invalidateQueries({ queryKey: ['sessions'] });
      }, 300);
    },
    [queryClient],
  );
  useChannel('sessions', onEvent);

  const [search, setSearch] = useState(query.q ?? '');
  useEffect(() => {
    const timer = setTimeout(() => {
      if ((query.q ?? '') !== search) update({ q: search });
    }, 300);
    return () => clearTimeout(timer);
  }, [search, query.q, update]);

  const alertTypes = useMemo(
    () => [...new Set(config.data?.chains.flatMap((c) => c.alert_types) ?? [])].sort(),
    [config.data],
  );
  const chains = config.data?.chains ?? [];
  // Stage records a chain makes: one per stage, plus a synthesis stage after
  // each stage that runs several executions.
  const stageCount = (chain: string) =>
    chains
      .find((c) => c.name === chain)
      ?.stages.reduce((n, s) => n + (s.replicas > 1 || s.agents.length > 1 ? 2 : 1), 0);
  const data = sessions.data;

  return (
    <section aria-labelledby="sessions-title">
      <h1 id="sessions-title">Sessions</h1>
      <div className="tabs-row" role="group" aria-label="View">
        <button type="button" aria-pressed={!attention} onClick={() => update({ view: null })}>
          All sessions
        </button>
        <button type="button" aria-pressed={attention} onClick={() => update({ view: 'attention' })}>
          Needs attention
        </button>
      </div>
      {attention && <p className="hint">Failed, timed out, or completed with a failed agent or no executive summary.</p>}
      <form className="filters" role="search" aria-label="Filter sessions" onSubmit={(e) => e.preventDefault()}>
        <Filter id="filter-search" label="Search">
          <input
            id="filter-search"
            type="search"
            value={search}
            onChange={(e) => setSearch(e.target.value)}
            placeholder="id, alert data, analysis…"
          />
        </Filter>
        <Filter id="filter-status" label="Status">
          <select id="filter-status" value={query.status?.[0] ?? ''} onChange={(e) => update({ status: e.target.value })}>
            <option value="">any</option>
            {SESSION_STATUSES.map((s) => (
              <option key={s} value={s}>
                {statusLabel(s)}
              </option>
            ))}
          </select>
        </Filter>
        <Filter id="filter-alert-type" label="Alert type">
          <select
            id="filter-alert-type"
            value={query.alert_type ?? ''}
            onChange={(e) => update({ alert_type: e.target.value })}
          >
            <option value="">any</option>
            {alertTypes.map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </Filter>
        <Filter id="filter-chain" label="Chain">
          <select id="filter-chain" value={query.chain_id ?? ''} onChange={(e) => update({ chain_id: e.target.value })}>
            <option value="">any</option>
            {chains.map((c) => (
              <option key={c.name} value={c.name}>
                {c.name}
              </option>
            ))}
          </select>
        </Filter>
        <Filter id="filter-author" label="Author">
          <AuthorFilter key={query.author ?? ''} value={query.author ?? ''} onChange={(author) => update({ author })} />
        </Filter>
        <Filter id="filter-sort" label="Sort by">
          <select id="filter-sort" value={query.sort ?? 'created_at'} onChange={(e) => update({ sort: e.target.value })}>
            {SORT_KEYS.map(([key, label]) => (
              <option key={key} value={key}>
                {label}
              </option>
            ))}
          </select>
        </Filter>
        <Filter id="filter-order" label="Order">
          <select id="filter-order" value={query.order ?? 'desc'} onChange={(e) => update({ order: e.target.value })}>
            <option value="desc">descending</option>
            <option value="asc">ascending</option>
          </select>
        </Filter>
      </form>

      {query.failure_tag && (
        <p className="filter-note">
          Only sessions whose score is tagged <code>{query.failure_tag}</code>{' '}
          <button type="button" className="button-small" onClick={() => update({ failure_tag: null })}>
            Show all
          </button>
        </p>
      )}
      {sessions.isError && (
        <p role="alert" className="error">
          Cannot load sessions: {sessions.error.message}
        </p>
      )}
      <table className="sessions">
        <caption className="visually-hidden">Sessions{data ? `, ${data.pagination.total_items} in all` : ''}</caption>
        <thead>
          <tr>
            <th scope="col">Status</th>
            <th scope="col">Alert type</th>
            <th scope="col">Chain</th>
            <th scope="col">Author</th>
            <th scope="col">Submitted</th>
            <th scope="col">Duration</th>
            <th scope="col">Stage</th>
            <th scope="col" className="number">
              Cost
            </th>
            <th scope="col">Score</th>
          </tr>
        </thead>
        <tbody>
          {data?.sessions.map((s) => {
            const total = stageCount(s.chain_id);
            // Stage indexes count from 1.
            const current = s.current_stage_index;
            const progress =
              s.status === 'completed' && total ? `${total}/${total}` : current ? `${current}/${total ?? '?'}` : '—';
            return (
              <tr key={s.id} data-session-id={s.id}>
                <td>
                  <StatusBadge status={s.status} /> <EndReason reason={s.end_reason} hold={s.hold_reason} />
                </td>
                <td>
                  <Link to={`/sessions/${encodeURIComponent(s.id)}`}>{s.alert_type}</Link>
                  {s.error_message && <div className="muted small">{s.error_message}</div>}
                </td>
                <td>{s.chain_id}</td>
                <td>{s.author ?? '—'}</td>
                <td>{formatTime(s.created_at)}</td>
                <td>{formatDuration(sessionDuration(s, now))}</td>
                <td>{progress}</td>
                <td className="number">
                  <CostAmount cost={s.cost} />
                </td>
                <td>
                  <ScoreBadge score={s.score} />
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {data && data.sessions.length === 0 && <p className="empty">No sessions match.</p>}
      {data && (
        <nav className="pagination" aria-label="Pages">
          <button
            type="button"
            disabled={data.pagination.page <= 1}
            onClick={() => update({ page: String(data.pagination.page - 1) })}
          >
            Previous
          </button>
          <span>
            Page {data.pagination.page} of {Math.max(1, data.pagination.total_pages)} ({data.pagination.total_items}{' '}
            sessions)
          </span>
          <button
            type="button"
            disabled={data.pagination.page >= data.pagination.total_pages}
            onClick={() => update({ page: String(data.pagination.page + 1) })}
          >
            Next
          </button>
          <label htmlFor="page-size">Per page</label>
          <select id="page-size" value={String(query.page_size ?? 20)} onChange={(e) => update({ page_size: e.target.value })}>
              {[20, 50, 100].map((n) => (
                <option key={n} value={n}>
                  {n}
                </option>
              ))}
          </select>
        </nav>
      )}
    </section>
  );
}

/**
 * The author filter applies when the field is left or Enter is pressed.
 * Keyed by the applied value, so it restarts when the URL changes.
 */
function AuthorFilter({ value, onChange }: { value: string; onChange: (v: string) => void }) {
  const [text, setText] = useState(value);
  return (
    <input
        id="filter-author"
        value={text}
        onChange={(e) => setText(e.target.value)}
        onBlur={() => text !== value && onChange(text.trim())}
        onKeyDown={(e) => {
          if (e.key === 'Enter') onChange(text.trim());
        }}
      />
  );
}
