// Formatting helpers shared by the pages.

import type { SessionSummary } from '../api/types';

export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return date.toLocaleString(undefined, {
    year: 'numeric',
    month: 'short',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });
}

export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms) || ms < 0) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  const rest = Math.round(s % 60);
  if (m < 60) return `${m} min ${rest} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** What a session's duration is computed from: a list row or the whole session. */
type SessionTimes = Pick<SessionSummary, 'started_at' | 'completed_at'>;

/**
 * How long a session ran, in milliseconds: from its start to its end, or to
 * `now` while it has no end time (it runs). Null when it never started.
 * The session list and the session page both show this.
 */
export function sessionDuration(session: SessionTimes, now: number = Date.now()): number | null {
  if (!session.started_at) return null;
  const start = Date.parse(session.started_at);
  const end = session.completed_at ? Date.parse(session.completed_at) : now;
  if (Number.isNaN(start) || Number.isNaN(end)) return null;
  return end - start;
}

export function statusLabel(status: string): string {
  return status.replace(/_/g, ' ');
}

export function prettyJson(value: unknown): string {
  if (typeof value === 'string') {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  return JSON.stringify(value, null, 2) ?? '';
}
