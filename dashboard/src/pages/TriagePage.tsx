import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useCallback, useEffect, useRef, useState } from 'react';
import { Link } from 'react-router';
import { api } from '../api/client';
import { useChannel } from '../api/live';
import { RATINGS, type ReviewRequest, type SessionSummary, type TriageGroup } from '../api/types';
import { formatTime } from '../components/format';
import { ReviewDialog, type ReviewTarget } from '../components/ReviewDialog';
import { ScoreBadge } from '../components/ScoreBadge';
import { StatusBadge } from '../components/StatusBadge';
import type { LiveEvent } from '../state/timeline';

type GroupKey = 'investigating' | 'needs_review' | 'in_progress' | 'reviewed';

const GROUPS: [GroupKey, string][] = [
  ['investigating', 'Investigating'],
  ['needs_review', 'Needs review'],
  ['in_progress', 'In progress'],
  ['reviewed', 'Reviewed'],
];

const RATING_LABEL = new Map<string, string>(RATINGS);

/** What the review dialog is open on: one session or the selected ones. */
interface Open {
  ids: string[];
  target: ReviewTarget;
}

/**
 * The review queue: sessions still investigating, waiting for review, being
 * reviewed and reviewed, with counts, updated live as anyone changes a
 * review. Claim, unclaim and review from the list; select several to review
 * them at once.
 */
export function TriagePage() {
  const queryClient = useQueryClient();
  const triage = useQuery({ queryKey: ['triage'], queryFn: () => api.triage() });
  const refetch = useRef<ReturnType<typeof setTimeout> | null>(null);
  useEffect(() => () => {
    if (refetch.current) clearTimeout(refetch.current);
  }, []);
  const onEvent = useCallback(
    (event: LiveEvent) => {
      if (!['session.status', 'session.review', 'session.score'].includes(event.type)) return;
      if (refetch.current) clearTimeout(refetch.current);
      refetch.current = setTimeout(() => void queryClient.invalidateQueries({ queryKey: ['triage'] }), 200);
    },
    [queryClient],
  );
  useChannel('sessions', onEvent);

  const [selected, setSelected] = useState<Set<string>>(() => new Set());
  const [open, setOpen] = useState<Open | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const done = () => void queryClient.invalidateQueries({ queryKey: ['triage'] });
  const change = useMutation({
    mutationFn: ({ id, request }: { id: string; request: ReviewRequest }) => api.review(id, request),
    onSuccess: () => {
      setOpen(null);
      setNotice(null);
    },
    onError: (e) => setNotice(e.message),
    onSettled: done,
  });
  const bulk = useMutation({
    mutationFn: ({ ids, request }: { ids: string[]; request: ReviewRequest }) =>
      api.bulkReview({
        session_ids: ids,
        action: request.action,
        rating: request.rating,
        action_taken: request.action_taken,
        feedback: request.feedback,
      }),
    onSuccess: (answer) => {
      const failed = answer.results.filter((r) => r.error);
      setOpen(null);
      setSelected(new Set());
      setNotice(
        failed.length
          ? `${answer.results.length - failed.length} reviewed; ${failed.length} not: ${failed.map((r) => r.error?.message).join('; ')}`
          : `${answer.results.length} sessions reviewed.`,
      );
    },
    onError: (e) => setNotice(e.message),
    onSettled: done,
  });

  const toggle = (id: string) =>
    setSelected((s) => {
      const next = new Set(s);
      if (next.has(id)) next.delete(id);
      else next.add(id);
      return next;
    });
  const review = (s: SessionSummary) =>
    setOpen({
      ids: [s.id],
      target: { title: s.alert_type, editing: s.review?.status === 'reviewed', rating: s.review?.rating ?? null },
    });

  if (triage.isError) return <p role="alert" className="error">Cannot load the triage: {triage.error.message}</p>;
  if (!triage.data) return <p aria-busy="true">Loading the triage…</p>;
  const data = triage.data;
  const dialogError = (open && (open.ids.length > 1 ? bulk.error?.message : change.error?.message)) ?? null;

  return (
    <section aria-labelledby="triage-title" className="triage">
      <h1 id="triage-title">Triage</h1>
      <div className="actions">
        <button
          type="button"
          disabled={selected.size === 0}
          onClick={() => setOpen({ ids: [...selected], target: { title: `${selected.size} sessions`, editing: false } })}
        >
          Review selected ({selected.size})
        </button>
      </div>
      <div role="status" aria-live="polite">
        {notice}
      </div>
      <div className="triage-groups">
        {GROUPS.map(([key, label]) => (
          <Group
            key={key}
            id={key}
            label={label}
            group={data[key]}
            selected={selected}
            onToggle={key === 'needs_review' || key === 'in_progress' ? toggle : null}
            actions={(s) => (
              <>
                {key === 'needs_review' && (
                  <button
                    type="button"
                    className="button-small"
                    onClick={() => change.mutate({ id: s.id, request: { action: 'claim' } })}
                  >
                    Claim<span className="visually-hidden"> {s.alert_type}</span>
                  </button>
                )}
                {key === 'in_progress' && (
                  <button
                    type="button"
                    className="button-small"
                    onClick={() => change.mutate({ id: s.id, request: { action: 'unclaim' } })}
                  >
                    Unclaim<span className="visually-hidden"> {s.alert_type}</span>
                  </button>
                )}
                {key !== 'investigating' && (
                  <button type="button" className="button-small" onClick={() => review(s)}>
                    {key === 'reviewed' ? 'Edit' : 'Review'}
                    <span className="visually-hidden"> {s.alert_type}</span>
                  </button>
                )}
              </>
            )}
          />
        ))}
      </div>
      {open && (
        <ReviewDialog
          target={open.target}
          pending={change.isPending || bulk.isPending}
          error={dialogError}
          onClose={() => setOpen(null)}
          onSubmit={(request) =>
            open.ids.length > 1
              ? bulk.mutate({ ids: open.ids, request })
              : change.mutate({ id: open.ids[0] ?? '', request })
          }
        />
      )}
    </section>
  );
}

function Group({
  id,
  label,
  group,
  selected,
  onToggle,
  actions,
}: {
  id: string;
  label: string;
  group: TriageGroup;
  selected: Set<string>;
  onToggle: ((id: string) => void) | null;
  actions: (s: SessionSummary) => React.ReactNode;
}) {
  const heading = `triage-${id}`;
  return (
    <section className="card triage-group" aria-labelledby={heading} data-group={id}>
      <h2 id={heading}>
        {label} <span className="count">({group.count})</span>
      </h2>
      {group.sessions.length === 0 && <p className="empty">None.</p>}
      <ul>
        {group.sessions.map((s) => (
          <li key={s.id} data-session-id={s.id}>
            {onToggle && (
              <input
                type="checkbox"
                aria-label={`Select ${s.alert_type} of ${formatTime(s.created_at)}`}
                checked={selected.has(s.id)}
                onChange={() => onToggle(s.id)}
              />
            )}
            <Link to={`/sessions/${encodeURIComponent(s.id)}`}>{s.alert_type}</Link> <StatusBadge status={s.status} />{' '}
            <ScoreBadge score={s.score} />
            <div className="muted small">
              {formatTime(s.created_at)}
              {s.review?.assignee && ` · ${s.review.status === 'reviewed' ? 'reviewed by' : 'with'} ${s.review.assignee}`}
              {s.review?.status === 'reviewed' &&
                ` · ${s.review.rating ? RATING_LABEL.get(s.review.rating) : 'acknowledged'}`}
            </div>
            <div className="triage-actions">{actions(s)}</div>
          </li>
        ))}
      </ul>
    </section>
  );
}
