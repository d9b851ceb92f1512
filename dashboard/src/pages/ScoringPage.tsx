import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useCallback } from 'react';
import { Link, useParams } from 'react-router';
import { api, ApiError } from '../api/client';
import { useChannel } from '../api/live';
import type { SessionScore } from '../api/types';
import { formatTime } from '../components/format';
import { Markdown } from '../components/Markdown';
import { ScoreBadge } from '../components/ScoreBadge';
import type { LiveEvent } from '../state/timeline';
import { NotFoundPage } from './NotFoundPage';

/**
 * The judge's scores of one session: every attempt, newest first — the score
 * with its verdict and failure tags, the assessment by dimension, the tool
 * report, or why the attempt failed — and a button to score it again.
 */
export function ScoringPage() {
  const { id = '' } = useParams();
  const queryClient = useQueryClient();
  const scores = useQuery({ queryKey: ['scores', id], queryFn: () => api.scores(id) });
  const onEvent = useCallback(
    (event: LiveEvent) => {
      if (event.type === 'session.score') void queryClient.invalidateQueries({ queryKey: ['scores', id] });
    },
    [queryClient, id],
  );
  useChannel(`session:${id}`, onEvent);
  const rescore = useMutation({
    mutationFn: () => api.rescore(id),
    onSettled: () => queryClient.invalidateQueries({ queryKey: ['scores', id] }),
  });

  if (scores.error instanceof ApiError && scores.error.status === 404) {
    return <NotFoundPage what={`There is no session ${id}.`} />;
  }
  if (scores.isError) return <p role="alert" className="error">Cannot load the scores: {scores.error.message}</p>;
  if (!scores.data) return <p aria-busy="true">Loading the scores…</p>;
  const attempts = scores.data.attempts;
  const running = attempts.some((a) => a.status === 'in_progress');
  return (
    <section aria-labelledby="scoring-title" className="scoring">
      <h1 id="scoring-title">Scoring</h1>
      <p>
        <Link to={`/sessions/${encodeURIComponent(id)}`}>Back to the session</Link>
      </p>
      <p className="muted">
        A judge reads the whole investigation and scores it from 0 to 100 within the range of its verdict: correct
        60–100, partial 35–59, wrong 0–34.
      </p>
      <div className="actions">
        <button type="button" disabled={rescore.isPending || running} onClick={() => rescore.mutate()}>
          Score again
        </button>
      </div>
      <div role="status" aria-live="polite">
        {rescore.isSuccess && 'Scoring requested: the judge is at work.'}
        {rescore.isError && <span className="error">{rescore.error.message}</span>}
      </div>
      {attempts.length === 0 && <p className="empty">This session has not been scored.</p>}
      {attempts.map((a) => (
        <Attempt key={a.id} attempt={a} />
      ))}
    </section>
  );
}

function Attempt({ attempt }: { attempt: SessionScore }) {
  const heading = `attempt-${attempt.id}`;
  return (
    <section className="card attempt" aria-labelledby={heading}>
      <h2 id={heading}>
        Attempt {attempt.attempt}{' '}
        <ScoreBadge
          score={{
            status: attempt.status,
            score: attempt.score ?? null,
            failure_tags: attempt.failure_tags,
          }}
        />
      </h2>
      <p className="muted small">
        Started {formatTime(attempt.created_at)}
        {attempt.completed_at ? `, ended ${formatTime(attempt.completed_at)}` : ''}
        {attempt.outcome ? ` · verdict: ${attempt.outcome}` : ''}
      </p>
      {attempt.status === 'in_progress' && <p aria-busy="true">The judge is at work…</p>}
      {attempt.error && (
        <p className="error">
          No score: {attempt.error}
        </p>
      )}
      {attempt.assessment && (
        <details open>
          <summary>
            <h3 className="inline-heading">Assessment</h3>
          </summary>
          <Markdown text={attempt.assessment} />
        </details>
      )}
      {attempt.tool_report && (
        <details open>
          <summary>
            <h3 className="inline-heading">Tool report</h3>
          </summary>
          <Markdown text={attempt.tool_report} />
        </details>
      )}
    </section>
  );
}
