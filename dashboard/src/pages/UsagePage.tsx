import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useMemo, type ReactNode } from 'react';
import { Link } from 'react-router';
import { api } from '../api/client';
import type { Cost, UsageGroup } from '../api/types';
import { Bar } from '../components/Bar';
import { CostAmount, TokenCount } from '../components/Cost';
import { formatCount, formatShare, formatTime, pricedShare, tokenBreakdown } from '../components/format';
import { Filter } from '../components/Filter';
import { useListParams, useNow } from '../components/hooks';
import { StatusBadge } from '../components/StatusBadge';
import { USAGE_WINDOWS, readUsageParams, usageWindow, windowDays, type UsageRank } from '../state/usageWindow';

const RANKS: [UsageRank, string][] = [
  ['cost', 'Cost'],
  ['tokens', 'Tokens'],
];

/**
 * What the investigations cost over a window of days: sessions, tokens,
 * the estimated cost and how complete it is, by model, alert type, chain
 * and scope, and the sessions that cost most (or used most tokens). The
 * window and the ranking live in the URL; each asks the API once.
 */
export function UsagePage() {
  const [params, update] = useListParams();
  const state = useMemo(() => readUsageParams(params), [params]);
  // Windows are whole UTC days: the request changes when the day does
  // (the window is computed from the day alone, so it stays the same
  // object, and the same query, all day).
  const today = new Date(useNow(60_000)).toISOString().slice(0, 10);
  const chosen = useMemo(() => usageWindow(state, new Date(`${today}T00:00:00Z`)), [state, today]);
  const ok = 'from' in chosen ? chosen : null;
  const usage = useQuery({
    queryKey: ['usage', ok?.from, ok?.to, state.rank],
    queryFn: () => api.usage({ from: ok?.from ?? '', to: ok?.to ?? '', rank: state.rank }),
    enabled: ok !== null,
    placeholderData: keepPreviousData,
  });

  // Choosing custom dates starts from the window shown.
  const chooseWindow = (kind: string) => {
    if (kind === 'custom' && ok) update({ window: kind, ...windowDays(ok) });
    else update({ window: kind, from: null, to: null });
  };

  const u = ok ? usage.data : undefined;
  const total = u?.cost;

  return (
    <section aria-labelledby="usage-title" className="usage">
      <h1 id="usage-title">Usage</h1>
      <p className="hint">
        What the investigations cost: the LLM tokens and the estimated US dollars of the sessions submitted in a
        window (hidden ones included), with every LLM call of a session counted — its stages, chat, executive
        summary, scoring and memory. Each call is priced when it is made, at that day&apos;s price.
      </p>
      <form className="filters" aria-label="Usage window" onSubmit={(e) => e.preventDefault()}>
        <Filter id="usage-window" label="Window">
          <select id="usage-window" value={state.window} onChange={(e) => chooseWindow(e.target.value)}>
            {USAGE_WINDOWS.map(([kind, label]) => (
              <option key={kind} value={kind}>
                {label}
              </option>
            ))}
          </select>
        </Filter>
        {state.window === 'custom' && (
          <>
            <Filter id="usage-from" label="First day (UTC)">
              <input id="usage-from" type="date" value={state.from} onChange={(e) => update({ from: e.target.value })} />
            </Filter>
            <Filter id="usage-to" label="Last day (UTC)">
              <input id="usage-to" type="date" value={state.to} onChange={(e) => update({ to: e.target.value })} />
            </Filter>
          </>
        )}
      </form>
      {'error' in chosen && (
        <p role="alert" className="error">
          {chosen.error}
        </p>
      )}
      {ok && usage.isError && (
        <p role="alert" className="error">
          Cannot load the usage: {usage.error.message}
        </p>
      )}
      {ok && !u && !usage.isError && <p aria-busy="true">Loading…</p>}
      {u && total && (
        <>
          <p className="muted usage-window">
            Sessions submitted from {windowDays(u).from} to {windowDays(u).to}, whole days in UTC.
          </p>
          <section className="card" aria-labelledby="usage-totals">
            <h2 id="usage-totals">Totals</h2>
            <dl className="stats">
              <div data-stat="sessions">
                <dt>Sessions</dt>
                <dd>{formatCount(u.sessions)}</dd>
              </div>
              <div data-stat="tokens">
                <dt>Tokens</dt>
                <dd>
                  <TokenCount tokens={total.tokens} />
                  <span className="muted small stat-detail">{tokenBreakdown(total.tokens)}</span>
                </dd>
              </div>
              <div data-stat="cost">
                <dt>Estimated cost</dt>
                <dd>
                  <CostAmount cost={total} />
                  <span className="muted small stat-detail">
                    {total.calls === 1 ? '1 LLM call' : `${formatCount(total.calls)} LLM calls`}
                  </span>
                </dd>
              </div>
              <div data-stat="completeness">
                <dt>Completeness</dt>
                <dd>
                  {total.calls > 0 ? formatShare(pricedShare(total)) : '—'}
                  <span className="muted small stat-detail">of the calls have a price</span>
                </dd>
              </div>
            </dl>
            {total.unpriced_calls > 0 && <UnpricedNote cost={total} models={u.by_model} />}
          </section>

          <Breakdown
            id="usage-by-model"
            title="By model"
            keyLabel="Model"
            groups={u.by_model}
            total={total}
            provider
          />
          <Breakdown
            id="usage-by-alert-type"
            title="By alert type"
            keyLabel="Alert type"
            groups={u.by_alert_type}
            total={total}
            link={(key) => `/?alert_type=${encodeURIComponent(key)}`}
          />
          <Breakdown
            id="usage-by-chain"
            title="By chain"
            keyLabel="Chain"
            groups={u.by_chain}
            total={total}
            link={(key) => `/?chain_id=${encodeURIComponent(key)}`}
          />
          <Breakdown id="usage-by-scope" title="By scope" keyLabel="Scope" groups={u.by_scope} total={total} />

          <section className="card" aria-labelledby="usage-top">
            <h2 id="usage-top">Top sessions</h2>
            <div className="tabs-row" role="group" aria-label="Rank the top sessions by">
              {RANKS.map(([rank, label]) => (
                <button
                  key={rank}
                  type="button"
                  aria-pressed={state.rank === rank}
                  onClick={() => update({ rank: rank === 'cost' ? null : rank })}
                >
                  {label}
                </button>
              ))}
            </div>
            {u.top_sessions.length === 0 ? (
              <p className="empty">No session in this window.</p>
            ) : (
              <table className="usage-top">
                <caption className="visually-hidden">
                  The {u.top_sessions.length} sessions that {state.rank === 'cost' ? 'cost most' : 'used most tokens'}
                </caption>
                <thead>
                  <tr>
                    <th scope="col">#</th>
                    <th scope="col">Alert type</th>
                    <th scope="col">Chain</th>
                    <th scope="col">Status</th>
                    <th scope="col">Submitted</th>
                    <th scope="col" className="number">
                      Tokens
                    </th>
                    <th scope="col" className="number">
                      Cost
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {u.top_sessions.map((s, i) => (
                    <tr key={s.session_id} data-session-id={s.session_id}>
                      <td>{i + 1}</td>
                      <td>
                        <Link to={`/sessions/${encodeURIComponent(s.session_id)}`}>
                          {s.alert_type}
                          <span className="visually-hidden"> session {s.session_id}</span>
                        </Link>
                      </td>
                      <td>{s.chain_id}</td>
                      <td>
                        <StatusBadge status={s.status} />
                      </td>
                      <td>{formatTime(s.created_at)}</td>
                      <td className="number">
                        <TokenCount tokens={s.cost.tokens} />
                      </td>
                      <td className="number">
                        <CostAmount cost={s.cost} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
          </section>
        </>
      )}
    </section>
  );
}

/** Why the total is a lower bound, and which models lack a price. */
function UnpricedNote({ cost, models }: { cost: Cost; models: UsageGroup[] }) {
  const unpriced = models.filter((m) => m.cost.unpriced_calls > 0).map((m) => m.key);
  const calls = cost.unpriced_calls === 1 ? '1 LLM call' : `${formatCount(cost.unpriced_calls)} LLM calls`;
  return (
    <p className="warning usage-unpriced">
      {calls} of {formatCount(cost.calls)} used tokens but {cost.unpriced_calls === 1 ? 'has' : 'have'} no price
      estimate, so the real cost is higher than shown
      {unpriced.length > 0 && (
        <>
          {' '}
          (without a price: {unpriced.map((m, i) => (
            <span key={m}>
              {i > 0 && ', '}
              <code>{m}</code>
            </span>
          ))}
          ; give an LLMProvider a <code>pricing</code> block)
        </>
      )}
      .
    </p>
  );
}

/** One breakdown of the window's usage, costliest first, each value's share of the cost as a bar. */
function Breakdown({
  id,
  title,
  keyLabel,
  groups,
  total,
  provider = false,
  link,
}: {
  id: string;
  title: string;
  keyLabel: string;
  groups: UsageGroup[];
  total: Cost;
  provider?: boolean;
  link?: (key: string) => string;
}) {
  const maxUsd = Math.max(0, ...groups.map((g) => g.cost.usd));
  return (
    <section className="card" aria-labelledby={id}>
      <h2 id={id}>{title}</h2>
      {groups.length === 0 ? (
        <p className="empty">No session in this window.</p>
      ) : (
        <table className="usage-breakdown">
          <thead>
            <tr>
              <th scope="col">{keyLabel}</th>
              {provider && <th scope="col">LLM provider</th>}
              <th scope="col" className="number">
                Sessions
              </th>
              <th scope="col" className="number">
                LLM calls
              </th>
              <th scope="col" className="number">
                Tokens
              </th>
              <th scope="col" className="number">
                Cost
              </th>
              <th scope="col">Share of the cost</th>
            </tr>
          </thead>
          <tbody>
            {groups.map((g) => (
              <tr key={`${g.key}/${g.provider ?? ''}`} data-key={g.key}>
                <th scope="row">
                  <KeyName name={g.key} link={link} />
                </th>
                {provider && <td>{g.provider ?? '—'}</td>}
                <td className="number">{formatCount(g.sessions)}</td>
                <td className="number">{formatCount(g.cost.calls)}</td>
                <td className="number">
                  <TokenCount tokens={g.cost.tokens} />
                </td>
                <td className="number">
                  <CostAmount cost={g.cost} />
                </td>
                <td className="share">
                  {total.usd > 0 ? formatShare(g.cost.usd / total.usd) : '—'} <Bar value={g.cost.usd} max={maxUsd} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** A breakdown's value: a link when it filters the session list; the empty scope named. */
function KeyName({ name, link }: { name: string; link: ((key: string) => string) | undefined }): ReactNode {
  if (name === '') return <span className="muted">(no scope)</span>;
  if (link) return <Link to={link(name)}>{name}</Link>;
  return name;
}
