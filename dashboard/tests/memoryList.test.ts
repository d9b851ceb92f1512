import { describe, expect, it } from 'vitest';
import { memoryQueryString } from '../src/api/client';
import type { Memory } from '../src/api/types';
import { formatAge, formatConfidence } from '../src/components/format';
import { memoryApiQuery, memoryForm, memoryPatch, readMemoryParams } from '../src/state/memoryList';

const memory: Memory = {
  id: 'm1',
  scope: 'shop',
  content: 'Compare the new ReplicaSet env with the previous revision',
  category: 'procedure',
  valence: 'helped',
  confidence: 0.8,
  seen_count: 1,
  alert_type: 'PodCrashLooping',
  chain_id: 'pod-crashloop',
  source_session_id: 's1',
  deprecated: false,
  created_at: '2026-01-01T10:00:00Z',
  updated_at: '2026-01-01T10:00:00Z',
  last_reinforced_at: '2026-01-01T10:00:00Z',
};

describe('the memory page URL', () => {
  it('reads filters, ignoring unknown values', () => {
    expect(readMemoryParams(new URLSearchParams('q=oom&category=fact&valence=misled&deprecated=show&page=3&id=m1'))).toEqual({
      q: 'oom',
      category: 'fact',
      valence: 'misled',
      showDeprecated: true,
      page: 3,
      id: 'm1',
    });
    expect(readMemoryParams(new URLSearchParams('category=rumour&valence=maybe&page=-2&deprecated=yes'))).toEqual({
      q: '',
      category: '',
      valence: '',
      showDeprecated: false,
      page: 1,
      id: '',
    });
  });

  it('asks for live memories only unless deprecated ones are shown, one page at a time', () => {
    const live = memoryApiQuery(readMemoryParams(new URLSearchParams('q=%20oom%20&page=2')));
    expect(memoryQueryString(live)).toBe('q=oom&deprecated=false&limit=50&offset=50');
    const all = memoryApiQuery(readMemoryParams(new URLSearchParams('deprecated=show&valence=misled')));
    expect(memoryQueryString(all)).toBe('valence=misled&limit=50');
  });
});

describe('an edit of a memory', () => {
  it('sends only what changed, the content trimmed', () => {
    expect(memoryPatch(memory, memoryForm(memory))).toBeNull();
    expect(memoryPatch(memory, { ...memoryForm(memory), content: `  ${memory.content}\n` })).toBeNull();
    expect(
      memoryPatch(memory, { content: ' new text ', category: 'fact', valence: 'misled', confidence: '0.25' }),
    ).toEqual({ content: 'new text', category: 'fact', valence: 'misled', confidence: 0.25 });
  });

  it('leaves an empty content and an out-of-range confidence to the server, refuses a non-number', () => {
    expect(memoryPatch(memory, { ...memoryForm(memory), content: '   ' })).toEqual({ content: '' });
    expect(memoryPatch(memory, { ...memoryForm(memory), confidence: '1.5' })).toEqual({ confidence: 1.5 });
    expect(memoryPatch(memory, { ...memoryForm(memory), confidence: '' })).toBeNull();
    expect(memoryPatch(memory, { ...memoryForm(memory), confidence: 'high' })).toMatch(/number from 0 to 1/);
  });
});

describe('ages', () => {
  const now = Date.parse('2026-03-01T12:00:00Z');
  it('says how long ago in words', () => {
    expect(formatAge('2026-03-01T11:59:30Z', now)).toBe('just now');
    expect(formatAge('2026-03-01T12:00:05Z', now)).toBe('just now');
    expect(formatAge('2026-03-01T11:55:00Z', now)).toBe('5 min ago');
    expect(formatAge('2026-03-01T09:00:00Z', now)).toBe('3 h ago');
    expect(formatAge('2026-02-28T12:00:00Z', now)).toBe('1 day ago');
    expect(formatAge('2026-02-20T12:00:00Z', now)).toBe('9 days ago');
    expect(formatAge('2025-12-01T12:00:00Z', now)).toBe('3 months ago');
    expect(formatAge('2024-01-01T12:00:00Z', now)).toBe('2 years ago');
    expect(formatAge(null, now)).toBe('—');
    expect(formatConfidence(0.8)).toBe('0.80');
  });
});
