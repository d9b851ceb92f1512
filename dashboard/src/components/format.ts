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

/**
 * How long ago `iso` was, in words ("just now", "5 min ago", "3 h ago",
 * "2 days ago", "4 months ago", "1 year ago"); a time slightly in the
 * future (clocks differ) is "just now". "—" for none.
 */
export function formatAge(iso: string | null | undefined, now: number = Date.now()): string {
  if (!iso) return '—';
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return iso;
  const seconds = Math.max(0, (now - then) / 1000);
  if (seconds < 60) return 'just now';
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return `${hours} h ago`;
  const days = Math.floor(hours / 24);
  if (days < 30) return days === 1 ? '1 day ago' : `${days} days ago`;
  if (days < 365) {
    const months = Math.floor(days / 30);
    return months === 1 ? '1 month ago' : `${months} months ago`;
  }
  const years = Math.floor(days / 365);
  return years === 1 ? '1 year ago' : `${years} years ago`;
}

/** A 0–1 confidence as the API gives it, with two decimals ("0.80"). */
export function formatConfidence(value: number): string {
  return Number.isFinite(value) ? value.toFixed(2) : '—';
}
