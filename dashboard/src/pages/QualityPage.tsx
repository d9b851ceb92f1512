import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useMemo } from 'react';
import { Link, useSearchParams } from 'react-router';
import { api } from '../api/client';
import { RATINGS } from '../api/types';
import { Bar } from '../components/Bar';
import { useConfiguration } from '../components/hooks';
import { scoreBand } from '../components/ScoreBadge';

const WINDOWS = [7, 30, 90, 365];
const BANDS: [string, string][] = [
  ['good', 'Scored 60–100'],
  ['partial', 'Scored 35–59'],
  ['poor', 'Scored 0–34'],
];

/**
 * How good the investigations were: the judge's scores over time by chain
 * and alert type, the failure tags it gives most, where people's ratings
 * disagree with its scores, and the tools its reports ask for most — the
 * list of what to build next.
 */
export function QualityPage() {
  const [params, setParams] = useSearchParams();
  const days = Number(params.get('days') ?? 30) || 30;
  const chain = params.get('chain_id') ?? '';
  const alertType = params.get('alert_type') ?? '';
  const set = (key: string, value: string) =>
    setParams((p) => {
      const next = new URLSearchParams(p);
      if (value) next.set(key, value);
      else next.delete(key);
      return next;
    });
  const config = useConfiguration();
  const alertTypes = useMemo(
    () => [...new Set(config.data?.chains.flatMap((c) => c.alert_types) ?? [])].sort(),
    [config.data],
  );
  const quality = useQuery({
    queryKey: ['quality', days, chain, alertType],
    queryFn: () => api.quality({ days, chain_id: chain, alert_type: alertType }),
    placeholderData: keepPreviousData,
  });

  const q = quality.data;
  const maxTag = Math.max(0, ...(q?.failure_tags.map((t) => t.count) ?? []));
  const maxTool = Math.max(0, ...(q?.missing_tools.map((t) => t.count) ?? []));
  const matrix = new Map((q?.ratings.matrix ?? []).map((m) => [`${m.rating}/${m.band}`, m.count]));

  return (
    <section aria-labelledby="quality-title" className="quality">
      <h1 id="quality-title">Quality</h1>
      <form className="filters" onSubmit={(e) => e.preventDefault()}>
        <div className="filter">
          <label htmlFor="quality-days">Window</label>
          <select id="quality-days" value={String(days)} onChange={(e) => set('days', e.target.value)}>
            {WINDOWS.map((d) => (
              <option key={d} value={d}>
                last {d} days
              </option>
            ))}
          </select>
        </div>
        <div className="filter">
          <label htmlFor="quality-chain">Chain</label>
          <select id="quality-chain" value={chain} onChange={(e) => set('chain_id', e.target.value)}>
            <option value="">any</option>
            {(config.data?.chains ?? []).map((c) => (
              <option key={c.name} value={c.name}>
                {c.name}
              </option>
            ))}
          </select>
        </div>
        <div className="filter">
          <label htmlFor="quality-alert-type">Alert type</label>
          <select id="quality-alert-type" value={alertType} onChange={(e) => set('alert_type', e.target.value)}>
            <option value="">any</option>
            {alertTypes.map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </div>
      </form>
      {quality.isError && (
        <p role="alert" className="error">
          Cannot load the quality figures: {quality.error.message}
        </p>
      )}
      {!q && !quality.isError && <p aria-busy="true">Loading…</p>}
      {q && (
        <>
          <section className="card" aria-labelledby="quality-missing">
            <h2 id="quality-missing">What to build next: the tools the judge asked for</h2>
            {q.missing_tools.length === 0 ? (
              <p className="empty">No missing tool reported.</p>
            ) : (
              <table>
                <thead>
                  <tr>
                    <th scope="col">Missing tool</th>
                    <th scope="col">Sessions</th>
                    <th scope="col">What it would answer</th>
                  </tr>
                </thead>
                <tbody>
                  {q.missing_tools.map((t) => (
                    <tr key={t.tool} data-tool={t.tool}>
                      <th scope="row">{t.tool}</th>
                      <td>
                        {t.count} <Bar value={t.count} max={maxTool} />
                      </td>
                      <td>
                        {t.notes.join(' · ')}{' '}
                        {t.sessions.map((id, i) => (
                          <Link key={id} to={`/sessions/${encodeURIComponent(id)}/scoring`} className="small">
                            [{i + 1}]<span className="visually-hidden"> session {id}</span>
                          </Link>
                        ))}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
            {q.hard_to_use.length > 0 && (
              <>
                <h3>Hard to use</h3>
                <ul>
                  {q.hard_to_use.map((t) => (
                    <li key={t.tool}>
                      <code>{t.tool}</code> ({t.count}): {t.notes.join(' · ')}
                    </li>
                  ))}
                </ul>
              </>
            )}
          </section>

          <section className="card" aria-labelledby="quality-scores">
            <h2 id="quality-scores">Scores over time</h2>
            {q.score_days.length === 0 ? (
              <p className="empty">No scored session in this window.</p>
            ) : (
              <table>
                <thead>
                  <tr>
                    <th scope="col">Day</th>
                    <th scope="col">Chain</th>
                    <th scope="col">Alert type</th>
                    <th scope="col">Scored</th>
                    <th scope="col">Average</th>
                    <th scope="col">60–100 / 35–59 / 0–34</th>
                  </tr>
                </thead>
                <tbody>
                  {q.score_days.map((d) => (
                    <tr key={`${d.day}/${d.chain_id}/${d.alert_type}`}>
                      <td>{d.day}</td>
                      <td>{d.chain_id}</td>
                      <td>{d.alert_type}</td>
                      <td>{d.scored}</td>
                      <td>
                        <span className={`score-badge score-${scoreBand(d.average)}`}>{d.average}</span>
                      </td>
                      <td>
                        {d.good} / {d.partial} / {d.poor}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
          </section>

          <section className="card" aria-labelledby="quality-tags">
            <h2 id="quality-tags">Failure tags</h2>
            {q.failure_tags.length === 0 ? (
              <p className="empty">No failure tag given.</p>
            ) : (
              <table>
                <tbody>
                  {q.failure_tags.map((t) => (
                    <tr key={t.tag} data-tag={t.tag}>
                      <th scope="row">
                        <Link to={`/?failure_tag=${encodeURIComponent(t.tag)}`}>{t.tag}</Link>
                      </th>
                      <td>
                        {t.count} <Bar value={t.count} max={maxTag} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
          </section>

          <section className="card" aria-labelledby="quality-ratings">
            <h2 id="quality-ratings">People against the judge</h2>
            <table>
              <thead>
                <tr>
                  <th scope="col">Rating</th>
                  {BANDS.map(([band, label]) => (
                    <th key={band} scope="col">
                      {label}
                    </th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {RATINGS.map(([rating, label]) => (
                  <tr key={rating}>
                    <th scope="row">{label}</th>
                    {BANDS.map(([band]) => (
                      <td key={band}>{matrix.get(`${rating}/${band}`) ?? 0}</td>
                    ))}
                  </tr>
                ))}
              </tbody>
            </table>
            <h3>Where they disagree</h3>
            {q.ratings.disagreements.length === 0 ? (
              <p className="empty">Nowhere.</p>
            ) : (
              <ul>
                {q.ratings.disagreements.map((d) => (
                  <li key={d.session_id} data-session-id={d.session_id}>
                    <Link to={`/sessions/${encodeURIComponent(d.session_id)}`}>{d.alert_type}</Link>: scored{' '}
                    {d.score}, rated {RATINGS.find(([r]) => r === d.rating)?.[1] ?? d.rating}
                  </li>
                ))}
              </ul>
            )}
          </section>
        </>
      )}
    </section>
  );
}
