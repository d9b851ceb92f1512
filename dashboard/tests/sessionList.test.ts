import { describe, expect, it } from 'vitest';
import type { SessionPage, SessionSummary } from '../src/api/types';
import { formatDuration, sessionDuration } from '../src/components/format';
import { applySessionScore, applySessionStatus } from '../src/state/sessionList';

function row(id: string, extra: Partial<SessionSummary> = {}): SessionSummary {
  return {
    id,
    alert_type: 'PodCrashLooping',
    chain_id: 'pod-crashloop',
    status: 'in_progress',
    author: 'api-client',
    executive_summary: null,
    error_message: null,
    current_stage_index: 1,
    pod_id: null,
    created_at: '2026-01-01T10:00:00Z',
    started_at: '2026-01-01T10:00:01Z',
    completed_at: null,
    deleted_at: null,
    ...extra,
  };
}

function page(...sessions: SessionSummary[]): SessionPage {
  return { sessions, pagination: { page: 1, page_size: 20, total_items: sessions.length, total_pages: 1 } };
}

/** The Duration cell of a row, as the session list renders it. */
function durationCell(session: SessionSummary, now: number): string {
  return formatDuration(sessionDuration(session, now));
}

const NOW = Date.parse('2026-01-01T11:00:00Z');

describe('session list duration', () => {
  it('shows how long a finished session ran, from its start and end times', () => {
    const finished = row('a', { status: 'completed', completed_at: '2026-01-01T10:01:06Z' });
    expect(durationCell(finished, NOW)).toBe('1 min 5 s');
    // The session page shows the same for the same record.
    expect(sessionDuration(finished, NOW)).toBe(65_000);
  });

  it('counts a running session to now, and shows none for one that never started', () => {
    expect(durationCell(row('a'), Date.parse('2026-01-01T10:00:31Z'))).toBe('30.0 s');
    expect(durationCell(row('b', { status: 'cancelled', started_at: null, completed_at: '2026-01-01T10:00:02Z' }), NOW)).toBe(
      '—',
    );
  });

  it('stops counting as soon as a live event says the session finished', () => {
    const before = page(row('a'), row('b'));
    const after = applySessionStatus(before, {
      type: 'session.status',
      session_id: 'a',
      status: 'completed',
      timestamp: '2026-01-01T10:00:11Z',
    });
    const [a, b] = after.sessions;
    expect(a?.status).toBe('completed');
    expect(durationCell(a!, NOW)).toBe('10.0 s');
    expect(b).toBe(before.sessions[1]);
    // The stored end time, once fetched, is kept over the event's.
    const refetched = page(row('a', { status: 'completed', completed_at: '2026-01-01T10:00:12Z' }));
    const replayed = applySessionStatus(refetched, {
      type: 'session.status',
      session_id: 'a',
      status: 'completed',
      timestamp: '2026-01-01T10:30:00Z',
    });
    expect(durationCell(replayed.sessions[0]!, NOW)).toBe('11.0 s');
  });

  it('ignores other events, unknown statuses and sessions not on the page', () => {
    const before = page(row('a'));
    expect(applySessionStatus(before, { type: 'stage.status', session_id: 'a', status: 'completed' })).toBe(before);
    expect(applySessionStatus(before, { type: 'session.status', session_id: 'a', status: 'exploded' })).toBe(before);
    expect(applySessionStatus(before, { type: 'session.status', session_id: 'z', status: 'failed' })).toBe(before);
  });
});

describe('session list score', () => {
  const event = (extra: Record<string, unknown>) => ({ type: 'session.score', session_id: 'a', attempt_id: 'x', ...extra });

  it('shows a judge at work, then its score and tags, on the row the event names', () => {
    let p = page(row('a', { status: 'completed' }), row('b', { status: 'completed' }));
    p = applySessionScore(p, event({ status: 'in_progress', score: null, failure_tags: [] }));
    expect(p.sessions[0]?.score).toEqual({ status: 'in_progress', score: null, failure_tags: [] });
    p = applySessionScore(p, event({ status: 'completed', score: 88, failure_tags: ['missed-available-tool'] }));
    expect(p.sessions[0]?.score).toEqual({ status: 'completed', score: 88, failure_tags: ['missed-available-tool'] });
    expect(p.sessions[1]?.score).toBeUndefined();
  });

  it('keeps the score while a re-score runs and after it fails', () => {
    let p = page(row('a', { status: 'completed', score: { status: 'completed', score: 70, failure_tags: ['premature-conclusion'] } }));
    p = applySessionScore(p, event({ status: 'in_progress', score: null, failure_tags: [] }));
    expect(p.sessions[0]?.score).toEqual({ status: 'in_progress', score: 70, failure_tags: ['premature-conclusion'] });
    p = applySessionScore(p, event({ status: 'failed', score: null, failure_tags: [] }));
    expect(p.sessions[0]?.score).toEqual({ status: 'failed', score: 70, failure_tags: ['premature-conclusion'] });
  });

  it('ignores other events and unknown statuses', () => {
    const p = page(row('a'));
    expect(applySessionScore(p, event({ status: 'bogus', score: 1 }))).toBe(p);
    expect(applySessionScore(p, { type: 'session.status', session_id: 'a', status: 'failed' })).toBe(p);
  });
});
