// The session list's rows between a live `session.status` or
// `session.score` event and the refetch that brings the stored records.

import {
  SESSION_STATUSES,
  TERMINAL_STATUSES,
  type ScoreStatus,
  type SessionPage,
  type SessionStatus,
} from '../api/types';
import type { LiveEvent } from './timeline';

function isStatus(value: unknown): value is SessionStatus {
  return typeof value === 'string' && (SESSION_STATUSES as string[]).includes(value);
}

/**
 * The page with a `session.status` event applied to its row (unchanged when
 * the event is not one or the session is not on the page). Until the refetch,
 * the event's time stands in for the start or end time the row lacks, so a
 * session that just finished shows how long it ran at once.
 */
export function applySessionStatus(page: SessionPage, event: LiveEvent): SessionPage {
  if (event.type !== 'session.status') return page;
  const { session_id: id, status, timestamp } = event;
  if (typeof id !== 'string' || !isStatus(status) || !page.sessions.some((s) => s.id === id)) return page;
  const at = typeof timestamp === 'string' ? timestamp : null;
  return {
    ...page,
    sessions: page.sessions.map((s) =>
      s.id === id
        ? {
            ...s,
            status,
            started_at: s.started_at ?? (status === 'in_progress' ? at : null),
            completed_at: s.completed_at ?? (TERMINAL_STATUSES.has(status) ? at : null),
          }
        : s,
    ),
  };
}

const SCORE_STATUSES: readonly ScoreStatus[] = ['in_progress', 'completed', 'failed'];

function isScoreStatus(value: unknown): value is ScoreStatus {
  return typeof value === 'string' && (SCORE_STATUSES as string[]).includes(value);
}

/**
 * The page with a `session.score` event applied to its row: the attempt's
 * status, and a completed attempt's score and tags (a running or failed one
 * keeps the score the row had).
 */
export function applySessionScore(page: SessionPage, event: LiveEvent): SessionPage {
  if (event.type !== 'session.score') return page;
  const { session_id: id, status, score, failure_tags: tags } = event;
  if (typeof id !== 'string' || !isScoreStatus(status) || !page.sessions.some((s) => s.id === id)) return page;
  return {
    ...page,
    sessions: page.sessions.map((s) => {
      if (s.id !== id) return s;
      const completed = status === 'completed' && typeof score === 'number';
      return {
        ...s,
        score: {
          status,
          score: completed ? score : (s.score?.score ?? null),
          failure_tags: completed && Array.isArray(tags) ? tags.filter((t) => typeof t === 'string') : (s.score?.failure_tags ?? []),
        },
      };
    }),
  };
}
