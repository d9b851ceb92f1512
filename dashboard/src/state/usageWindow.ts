// The usage page's window as it lives in the URL (shareable, survives
// reloads) and the instants it asks the API for. Every window is whole UTC
// days, so the same choice asks the same question all day long (one request
// per window and rank, cached), and a session submitted today is in it.

/** The windows offered, in order, with their labels. */
export const USAGE_WINDOWS = [
  ['7d', 'Last 7 days'],
  ['30d', 'Last 30 days'],
  ['month', 'This month'],
  ['last-month', 'Last month'],
  ['custom', 'Custom dates'],
] as const;

export type UsageWindowKind = (typeof USAGE_WINDOWS)[number][0];
export type UsageRank = 'cost' | 'tokens';

export interface UsageParams {
  window: UsageWindowKind;
  /** Custom window: its first day (YYYY-MM-DD, UTC), as typed. */
  from: string;
  /** Custom window: its last day, included (YYYY-MM-DD, UTC), as typed. */
  to: string;
  rank: UsageRank;
}

/** Instants for the API: sessions created in [from, to), RFC 3339 in UTC. */
export interface UsageWindow {
  from: string;
  to: string;
}

const KINDS = new Set<string>(USAGE_WINDOWS.map(([k]) => k));
const DAY_MS = 86_400_000;

/** Reads the page's state from its query string; unknown values fall back to the defaults. */
export function readUsageParams(params: URLSearchParams): UsageParams {
  const window = params.get('window') ?? '';
  return {
    window: KINDS.has(window) ? (window as UsageWindowKind) : '7d',
    from: params.get('from') ?? '',
    to: params.get('to') ?? '',
    rank: params.get('rank') === 'tokens' ? 'tokens' : 'cost',
  };
}

/** Midnight UTC of `date`'s day, plus `days`. */
function utcDay(date: Date, days = 0): Date {
  return new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate() + days));
}

/** Midnight UTC of the first day of `date`'s month, plus `months`. */
function utcMonth(date: Date, months = 0): Date {
  return new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + months, 1));
}

/** An instant as RFC 3339 in UTC, without milliseconds ("2026-03-01T00:00:00Z"). */
export function rfc3339(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** A YYYY-MM-DD day as midnight UTC, or null when it is not a real day. */
export function parseDay(day: string): Date | null {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(day);
  if (!match) return null;
  const [y, m, d] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const date = new Date(Date.UTC(y, m - 1, d));
  // 2026-02-30 rolls over to March: not a day.
  if (date.getUTCFullYear() !== y || date.getUTCMonth() !== m - 1 || date.getUTCDate() !== d) return null;
  return date;
}

/** The YYYY-MM-DD of an instant, in UTC. */
export function formatDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}

/**
 * The window of a choice at `now`, or why there is none (a custom window
 * without both days, or backwards):
 * - last 7 / 30 days: today and the 6 / 29 days before it, whole UTC days;
 * - this month: from its first day to the first of the next month (UTC);
 * - last month: the whole previous calendar month (UTC);
 * - custom: from the first day's start to the end of the last day (UTC).
 */
export function usageWindow(params: UsageParams, now: Date): UsageWindow | { error: string } {
  switch (params.window) {
    case '7d':
    case '30d': {
      const days = params.window === '7d' ? 7 : 30;
      return { from: rfc3339(utcDay(now, 1 - days)), to: rfc3339(utcDay(now, 1)) };
    }
    case 'month':
      return { from: rfc3339(utcMonth(now)), to: rfc3339(utcMonth(now, 1)) };
    case 'last-month':
      return { from: rfc3339(utcMonth(now, -1)), to: rfc3339(utcMonth(now)) };
    case 'custom': {
      const from = parseDay(params.from);
      const to = parseDay(params.to);
      if (!from || !to) return { error: 'Choose the first and the last day of the window.' };
      if (from > to) return { error: 'The first day must not be after the last day.' };
      return { from: rfc3339(from), to: rfc3339(new Date(to.getTime() + DAY_MS)) };
    }
  }
}

/** A window's days as the custom fields show them: its first and its last day (included). */
export function windowDays(window: UsageWindow): { from: string; to: string } {
  return {
    from: formatDay(new Date(window.from)),
    to: formatDay(new Date(Date.parse(window.to) - DAY_MS)),
  };
}
