// The live timeline of one session: events from the REST snapshot, the
// WebSocket's stored events (live and replayed on catch-up) and its
// transient stream chunks, merged into one record per timeline event id.
//
// Pure functions over an immutable state, so the merge rules are unit-tested
// without a browser:
// - an event is kept once, whatever path delivered it, as often as it came;
// - a final version (completed, failed, ...) wins over a streaming one, and a
//   streaming version never replaces a final one (a late replay);
// - between two streaming versions, the stored text (REST, replay) and the
//   text built from live chunks are joined: chunks arrive before the server
//   stores them (a replay then carries a shorter prefix), and a snapshot can
//   be longer yet older than the last chunks received (see `joinText`);
// - order within an execution is the server's sequence number, so events can
//   arrive in any order (a REST snapshot after live events, a catch-up after
//   a reconnect) and still line up.

import type { TimelineEvent } from '../api/types';

/** One timeline event as the page shows it. */
export interface TimelineItem {
  id: string;
  stageId: string | null;
  executionId: string | null;
  /** Order within the execution; unknown (a chunk came first) sorts last. */
  sequence: number;
  eventType: string;
  status: string;
  content: string;
  metadata: Record<string, unknown>;
  createdAt: string;
  /** A chunk's text was too large to be sent: the final text comes with completion. */
  contentPending: boolean;
}

export interface TimelineState {
  items: ReadonlyMap<string, TimelineItem>;
  /** The server could not replay everything: reload the snapshot over REST. */
  needsReload: boolean;
}

export const emptyTimeline: TimelineState = { items: new Map(), needsReload: false };

/** A frame received on a session's WebSocket channel. */
export interface LiveEvent {
  type: string;
  [key: string]: unknown;
}

const FINAL = new Set(['completed', 'failed', 'cancelled', 'timed_out']);

export function isFinal(status: string): boolean {
  return FINAL.has(status);
}

function str(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function obj(value: unknown): Record<string, unknown> {
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

/** Merges two versions of the same event (see the rules above). */
export function mergeItem(existing: TimelineItem | undefined, incoming: TimelineItem): TimelineItem {
  if (!existing) return incoming;
  const sequence = Number.isFinite(existing.sequence) ? existing.sequence : incoming.sequence;
  const base = {
    ...existing,
    sequence,
    stageId: existing.stageId ?? incoming.stageId,
    executionId: existing.executionId ?? incoming.executionId,
    createdAt: existing.createdAt || incoming.createdAt,
    metadata: { ...existing.metadata, ...incoming.metadata },
  };
  if (isFinal(existing.status) && !isFinal(incoming.status)) {
    return { ...base, metadata: { ...incoming.metadata, ...existing.metadata } };
  }
  if (isFinal(incoming.status)) {
    return { ...base, status: incoming.status, content: incoming.content, contentPending: false };
  }
  const content = joinText(incoming.content, existing.content);
  return { ...base, content, contentPending: existing.contentPending && content === existing.content };
}

/** How far back a live text is looked for at the end of a stored one. */
const MAX_OVERLAP = 4096;

/**
 * Joins a stored text (a prefix of the event's text as the server had
 * flushed it) and a live one (what the chunks received so far built, which
 * may start anywhere: the page may have subscribed mid-stream). Chunks carry
 * no offsets, so the join aligns the texts: the live text that extends the
 * stored one wins; a live text the stored one already holds adds nothing; a
 * live text that starts inside the stored one's tail continues it; anything
 * else is appended (the gap between them arrives with the completion).
 * Received text is never dropped.
 */
export function joinText(stored: string, live: string): string {
  if (live.startsWith(stored)) return live;
  if (stored.startsWith(live) || stored.includes(live)) return stored;
  for (let k = Math.min(stored.length, live.length, MAX_OVERLAP); k > 0; k--) {
    if (stored.endsWith(live.slice(0, k))) return stored + live.slice(k);
  }
  return stored + live;
}

/** A REST timeline event as an item. */
export function itemFromRest(event: TimelineEvent): TimelineItem {
  return {
    id: event.id,
    // Null for session-level events (the executive summary).
    stageId: event.stage_id ?? null,
    executionId: event.execution_id ?? null,
    sequence: event.sequence_number,
    eventType: event.event_type,
    status: event.status,
    content: event.content,
    metadata: obj(event.metadata),
    createdAt: event.created_at,
    contentPending: false,
  };
}

/** Merges a REST snapshot (first load, or a reload after an overflow). */
export function mergeSnapshot(state: TimelineState, events: TimelineEvent[]): TimelineState {
  const items = new Map(state.items);
  for (const event of events) {
    const item = itemFromRest(event);
    items.set(item.id, mergeItem(items.get(item.id), item));
  }
  return { items, needsReload: false };
}

/** Applies one WebSocket frame of the session's channel. */
export function applyLiveEvent(state: TimelineState, event: LiveEvent): TimelineState {
  switch (event.type) {
    case 'timeline_event.created':
    case 'timeline_event.completed': {
      const id = str(event.event_id);
      if (!id) return state;
      const created = event.type === 'timeline_event.created';
      const incoming: TimelineItem = {
        id,
        stageId: str(event.stage_id),
        executionId: str(event.execution_id),
        sequence: num(event.sequence_number) ?? Number.POSITIVE_INFINITY,
        eventType: str(event.event_type) ?? 'unknown',
        status: str(event.status) ?? (created ? 'streaming' : 'completed'),
        content: str(event.content) ?? '',
        metadata: obj(event.metadata),
        createdAt: str(event.timestamp) ?? '',
        contentPending: false,
      };
      const items = new Map(state.items);
      items.set(id, mergeItem(items.get(id), incoming));
      return { ...state, items };
    }
    case 'stream.chunk': {
      const id = str(event.event_id);
      if (!id) return state;
      const existing = state.items.get(id);
      if (existing && isFinal(existing.status)) return state; // a late chunk
      const truncated = event.truncated === true;
      const delta = truncated ? '' : (str(event.delta) ?? '');
      const items = new Map(state.items);
      if (existing) {
        items.set(id, {
          ...existing,
          content: existing.content + delta,
          contentPending: existing.contentPending || truncated,
        });
      } else {
        // The chunk beat its event's creation (a reconnect in between):
        // keep the text; the creation fills in the rest.
        items.set(id, {
          id,
          stageId: null,
          executionId: str(event.execution_id),
          sequence: Number.POSITIVE_INFINITY,
          eventType: str(event.event_type) ?? 'llm_response',
          status: 'streaming',
          content: delta,
          metadata: {},
          createdAt: str(event.timestamp) ?? '',
          contentPending: truncated,
        });
      }
      return { ...state, items };
    }
    case 'catchup.overflow':
      return { ...state, needsReload: true };
    default:
      return state;
  }
}

/** Items of one execution (or of the session itself with `null`) in order. */
export function executionItems(state: TimelineState, executionId: string | null): TimelineItem[] {
  const list: TimelineItem[] = [];
  for (const item of state.items.values()) {
    if (item.executionId === executionId) list.push(item);
  }
  return list.sort(compareItems);
}

/** Server order: sequence number, then creation time, then id. */
export function compareItems(a: TimelineItem, b: TimelineItem): number {
  if (a.sequence !== b.sequence) return a.sequence < b.sequence ? -1 : 1;
  if (a.createdAt !== b.createdAt) return a.createdAt < b.createdAt ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/** Every item grouped by execution id (session-level items under ''). */
export function groupByExecution(state: TimelineState): Map<string, TimelineItem[]> {
  const groups = new Map<string, TimelineItem[]>();
  for (const item of state.items.values()) {
    const key = item.executionId ?? '';
    let group = groups.get(key);
    if (!group) {
      group = [];
      groups.set(key, group);
    }
    group.push(item);
  }
  for (const group of groups.values()) group.sort(compareItems);
  return groups;
}
