import { describe, expect, it } from 'vitest';
import { acceptCursor } from '../src/api/live';
import type { TimelineEvent } from '../src/api/types';
import {
  applyLiveEvent,
  emptyTimeline,
  executionItems,
  groupByExecution,
  mergeSnapshot,
  type LiveEvent,
  type TimelineState,
} from '../src/state/timeline';

function rest(
  id: string,
  seq: number,
  status: TimelineEvent['status'] = 'completed',
  content = `text ${id}`,
  exec = 'x1',
): TimelineEvent {
  return {
    id,
    session_id: 's',
    stage_id: 'st1',
    execution_id: exec,
    sequence_number: seq,
    event_type: 'llm_response',
    status,
    content,
    metadata: {},
    created_at: `2026-01-01T00:00:0${seq}Z`,
    updated_at: `2026-01-01T00:00:0${seq}Z`,
  };
}

function created(id: string, seq: number, content = '', exec = 'x1', dbId?: number): LiveEvent {
  return {
    type: 'timeline_event.created',
    event_id: id,
    stage_id: 'st1',
    execution_id: exec,
    sequence_number: seq,
    event_type: 'llm_response',
    status: 'streaming',
    content,
    metadata: {},
    timestamp: `2026-01-01T00:00:0${seq}Z`,
    ...(dbId === undefined ? {} : { db_event_id: dbId }),
  };
}

function completed(id: string, content: string, exec = 'x1'): LiveEvent {
  return {
    type: 'timeline_event.completed',
    event_id: id,
    stage_id: 'st1',
    execution_id: exec,
    event_type: 'llm_response',
    status: 'completed',
    content,
    metadata: { is_error: false },
    timestamp: '2026-01-01T00:00:09Z',
  };
}

function chunk(id: string, delta: string, extra: Record<string, unknown> = {}): LiveEvent {
  return { type: 'stream.chunk', event_id: id, execution_id: 'x1', event_type: 'llm_response', delta, ...extra };
}

function apply(state: TimelineState, events: LiveEvent[]): TimelineState {
  return events.reduce(applyLiveEvent, state);
}

const texts = (state: TimelineState, exec = 'x1') => executionItems(state, exec).map((i) => i.content);

describe('timeline ordering', () => {
  it('orders an execution by sequence number whatever the arrival order', () => {
    const state = apply(emptyTimeline, [created('c', 3, 'third'), created('a', 1, 'first'), created('b', 2, 'second')]);
    expect(texts(state)).toEqual(['first', 'second', 'third']);
  });

  it('lines up a REST snapshot that arrives after live events', () => {
    let state = apply(emptyTimeline, [created('c', 3, 'live third')]);
    state = mergeSnapshot(state, [rest('a', 1), rest('b', 2)]);
    expect(executionItems(state, 'x1').map((i) => i.id)).toEqual(['a', 'b', 'c']);
  });

  it('groups by execution, session-level events apart', () => {
    const state = mergeSnapshot(emptyTimeline, [
      rest('a', 1, 'completed', 'one', 'x1'),
      rest('b', 1, 'completed', 'two', 'x2'),
      { ...rest('s', 1, 'completed', 'summary'), execution_id: null, stage_id: null },
    ]);
    const groups = groupByExecution(state);
    expect([...groups.keys()].sort()).toEqual(['', 'x1', 'x2']);
    expect(groups.get('')?.[0]?.content).toBe('summary');
  });
});

describe('dedup by event id', () => {
  it('keeps one item when an event is delivered twice', () => {
    const state = apply(emptyTimeline, [created('a', 1, 'hello'), created('a', 1, 'hello'), completed('a', 'hello!')]);
    expect(state.items.size).toBe(1);
    expect(texts(state)).toEqual(['hello!']);
  });

  it('drops stored events at or below the channel cursor', () => {
    const channel = { lastEventId: null as number | null };
    expect(acceptCursor(channel, created('a', 1, '', 'x1', 5))).toBe(true);
    expect(acceptCursor(channel, created('a', 1, '', 'x1', 5))).toBe(false);
    expect(acceptCursor(channel, created('b', 2, '', 'x1', 4))).toBe(false);
    expect(acceptCursor(channel, created('c', 3, '', 'x1', 6))).toBe(true);
    // Transient chunks carry no cursor and always pass.
    expect(acceptCursor(channel, chunk('c', 'x'))).toBe(true);
    expect(channel.lastEventId).toBe(6);
  });
});

describe('streaming', () => {
  it('appends chunks, then takes the final text on completion', () => {
    const state = apply(emptyTimeline, [
      created('a', 1),
      chunk('a', 'The pod '),
      chunk('a', 'is OOMKilled'),
    ]);
    expect(texts(state)).toEqual(['The pod is OOMKilled']);
    const done = applyLiveEvent(state, completed('a', 'The pod is OOMKilled.'));
    expect(texts(done)).toEqual(['The pod is OOMKilled.']);
    expect(executionItems(done, 'x1')[0]?.status).toBe('completed');
  });

  it('ignores a chunk that arrives after completion', () => {
    const state = apply(emptyTimeline, [created('a', 1), completed('a', 'final'), chunk('a', ' late')]);
    expect(texts(state)).toEqual(['final']);
  });

  it('keeps a chunk that beats its creation, and the creation fills in the rest', () => {
    const state = apply(emptyTimeline, [chunk('a', 'early '), created('a', 4, '')]);
    const [item] = executionItems(state, 'x1');
    expect(item?.content).toBe('early ');
    expect(item?.sequence).toBe(4);
    expect(item?.stageId).toBe('st1');
  });

  it('marks a truncated chunk as pending until the final text arrives', () => {
    let state = apply(emptyTimeline, [created('a', 1), chunk('a', '', { truncated: true })]);
    expect(executionItems(state, 'x1')[0]?.contentPending).toBe(true);
    state = applyLiveEvent(state, completed('a', 'the whole text'));
    expect(executionItems(state, 'x1')[0]).toMatchObject({ contentPending: false, content: 'the whole text' });
  });
});

describe('catch-up merge', () => {
  it('keeps the longer live text when a replay carries only what was stored', () => {
    let state = apply(emptyTimeline, [created('a', 1), chunk('a', 'abc'), chunk('a', 'def')]);
    // Reconnect: the replay of the creation has the stored (shorter) content.
    state = applyLiveEvent(state, created('a', 1, 'abc'));
    expect(texts(state)).toEqual(['abcdef']);
    // A REST snapshot with a longer stored text wins over the shorter one.
    state = mergeSnapshot(state, [rest('a', 1, 'streaming', 'abcdefghi')]);
    expect(texts(state)).toEqual(['abcdefghi']);
  });

  it('keeps live chunks newer than a longer snapshot (subscribed mid-stream)', () => {
    // The page subscribed mid-stream: chunks 50–51 came live, the snapshot
    // (fetched earlier) holds what was stored up to 45.
    let state = apply(emptyTimeline, [chunk('a', 't50 '), chunk('a', 't51 ')]);
    state = mergeSnapshot(state, [rest('a', 1, 'streaming', 't01 t02 t45 ')]);
    expect(texts(state)).toEqual(['t01 t02 t45 t50 t51 ']);
    // A snapshot that overlaps the live text continues it without repeating it.
    let overlap = apply(emptyTimeline, [chunk('b', 'three four ')]);
    overlap = mergeSnapshot(overlap, [rest('b', 2, 'streaming', 'one two three ')]);
    expect(executionItems(overlap, 'x1')[0]?.content).toBe('one two three four ');
    // Later chunks keep appending, and the completion has the last word.
    overlap = applyLiveEvent(overlap, chunk('b', 'five'));
    expect(executionItems(overlap, 'x1')[0]?.content).toBe('one two three four five');
  });

  it('never lets a stale streaming replay undo a completed event', () => {
    let state = apply(emptyTimeline, [created('a', 1), completed('a', 'done')]);
    state = applyLiveEvent(state, created('a', 1, ''));
    state = mergeSnapshot(state, [rest('a', 1, 'streaming', 'do')]);
    expect(executionItems(state, 'x1')[0]).toMatchObject({ status: 'completed', content: 'done' });
  });

  it('merges events missed while disconnected without duplicating the ones seen', () => {
    let state = apply(emptyTimeline, [created('a', 1, 'one'), completed('a', 'one')]);
    // Replayed after the reconnect: a (seen) and b, c (missed).
    state = apply(state, [created('a', 1, 'one'), completed('a', 'one'), created('b', 2, 'two'), created('c', 3, 'three')]);
    expect(state.items.size).toBe(3);
    expect(texts(state)).toEqual(['one', 'two', 'three']);
  });
});

describe('overflow', () => {
  it('asks for a reload and clears the flag once the snapshot is merged', () => {
    let state = applyLiveEvent(emptyTimeline, { type: 'catchup.overflow', channel: 'session:s', limit: 200 });
    expect(state.needsReload).toBe(true);
    state = applyLiveEvent(state, created('z', 9, 'live during reload'));
    const snapshot = Array.from({ length: 250 }, (_, i) => rest(`e${i}`, i));
    state = mergeSnapshot(state, snapshot);
    expect(state.needsReload).toBe(false);
    expect(state.items.size).toBe(251);
    const ids = executionItems(state, 'x1').map((i) => i.id);
    expect(ids[0]).toBe('e0');
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('ignores frames it does not know', () => {
    const state = applyLiveEvent(emptyTimeline, { type: 'pong' });
    expect(state).toBe(emptyTimeline);
  });
});
