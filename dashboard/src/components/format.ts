// Formatting helpers shared by the pages.

import type { Cost, SessionSummary, TokenUsage } from '../api/types';

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

/**
 * US dollars as an estimate reads best: 4 decimals under a dollar (LLM calls
 * cost fractions of a cent: "$0.0489", "$0.0007"), 2 from a dollar on
 * ("$12.35", "$1,234.50"); "< $0.0001" for a sliver, "$0.00" for nothing.
 */
export function formatUsd(usd: number): string {
  if (!Number.isFinite(usd) || usd < 0) return '—';
  if (usd === 0) return '$0.00';
  if (usd < 0.00005) return '< $0.0001';
  if (usd < 0.99995) return `$${usd.toFixed(4)}`;
  return `$${usd.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
}

const compact = new Intl.NumberFormat('en-US', { notation: 'compact', maximumSignificantDigits: 3 });
const grouped = new Intl.NumberFormat('en-US');

/** A token count in a few characters: "950", "2.86K", "123K", "1.23M". */
export function formatTokens(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '—';
  return compact.format(n);
}

/** A count with thousands separators ("12,345"). */
export function formatCount(n: number): string {
  return grouped.format(n);
}

/**
 * A cost as shown in lists and headers: "—" before the first LLM call, the
 * estimate otherwise, marked "≥" when it is a lower bound (some calls used
 * tokens but have no price).
 */
export function formatCost(cost: Cost | null | undefined): string {
  if (!cost) return '—';
  if (!cost.partial) return formatUsd(cost.usd);
  // A lower bound under the smallest amount shown is "more than nothing".
  return cost.usd > 0 && cost.usd < 0.00005 ? '> $0.00' : `≥ ${formatUsd(cost.usd)}`;
}

/** "2,700 input · 160 output · 40 thinking · 1,000 cached input" (kinds that are 0 left out, but input and output). */
export function tokenBreakdown(tokens: TokenUsage): string {
  const parts = [`${formatCount(tokens.input_tokens)} input`, `${formatCount(tokens.output_tokens)} output`];
  if (tokens.thinking_tokens) parts.push(`${formatCount(tokens.thinking_tokens)} thinking`);
  if (tokens.cached_input_tokens) parts.push(`${formatCount(tokens.cached_input_tokens)} cached input`);
  return parts.join(' · ');
}

/** How complete an estimate is, in words: why it is a lower bound, or what it covers. */
export function costExplanation(cost: Cost | null | undefined): string {
  if (!cost) return 'No LLM call yet.';
  const calls = cost.calls === 1 ? '1 LLM call' : `${formatCount(cost.calls)} LLM calls`;
  const tokens = `${formatCount(cost.tokens.total_tokens)} tokens (${tokenBreakdown(cost.tokens)})`;
  if (!cost.partial) return `Estimated cost of ${calls}: ${tokens}.`;
  const unpriced = cost.unpriced_calls === 1 ? '1 call' : `${formatCount(cost.unpriced_calls)} calls`;
  return (
    `At least ${formatUsd(cost.usd)}: ${unpriced} of ${cost.calls} used tokens but ha${cost.unpriced_calls === 1 ? 's' : 've'} ` +
    `no price estimate (a model without a price), so the real cost is higher. ${tokens}.`
  );
}

/** The share of a cost's calls that have a price estimate, from 0 to 1 (1 without calls). */
export function pricedShare(cost: Cost): number {
  if (cost.calls <= 0) return 1;
  return Math.max(0, cost.calls - cost.unpriced_calls) / cost.calls;
}

/** A 0–1 share as a whole percentage, never rounded up to 100 % nor down to 0 % ("99%", "1%"). */
export function formatShare(share: number): string {
  if (!Number.isFinite(share)) return '—';
  const percent = share * 100;
  const rounded = Math.round(percent);
  if (rounded === 100 && percent < 100) return '99%';
  if (rounded === 0 && percent > 0) return '1%';
  return `${rounded}%`;
}
