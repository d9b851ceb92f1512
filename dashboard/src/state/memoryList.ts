// The memory page's state as it lives in the URL (shareable, survives
// reloads), and the change an edit of a memory makes.

import type { MemoryQuery } from '../api/client';
import {
  MEMORY_CATEGORIES,
  MEMORY_VALENCES,
  type Memory,
  type MemoryCategory,
  type MemoryPatch,
  type MemoryValence,
} from '../api/types';

/** Memories per page. */
export const MEMORY_PAGE_SIZE = 50;

export interface MemoryListState {
  q: string;
  category: MemoryCategory | '';
  valence: MemoryValence | '';
  /** Deprecated memories are listed too (otherwise live ones only). */
  showDeprecated: boolean;
  /** From 1. */
  page: number;
  /** The memory a link opened, if any. */
  id: string;
}

const CATEGORIES = new Set<string>(MEMORY_CATEGORIES.map(([c]) => c));
const VALENCES = new Set<string>(MEMORY_VALENCES.map(([v]) => v));

/** Reads the page's state from its query string; unknown values are ignored. */
export function readMemoryParams(params: URLSearchParams): MemoryListState {
  const category = params.get('category') ?? '';
  const valence = params.get('valence') ?? '';
  const page = Math.floor(Number(params.get('page') ?? '1'));
  return {
    q: params.get('q') ?? '',
    category: CATEGORIES.has(category) ? (category as MemoryCategory) : '',
    valence: VALENCES.has(valence) ? (valence as MemoryValence) : '',
    showDeprecated: params.get('deprecated') === 'show',
    page: Number.isFinite(page) && page > 1 ? page : 1,
    id: params.get('id') ?? '',
  };
}

/** The API query of a page state. */
export function memoryApiQuery(state: MemoryListState): MemoryQuery {
  return {
    q: state.q.trim() || undefined,
    category: state.category || undefined,
    valence: state.valence || undefined,
    deprecated: state.showDeprecated ? undefined : false,
    limit: MEMORY_PAGE_SIZE,
    offset: (state.page - 1) * MEMORY_PAGE_SIZE,
  };
}

/** The fields of the edit form, as typed. */
export interface MemoryForm {
  content: string;
  category: MemoryCategory;
  valence: MemoryValence;
  /** 0–1, as typed. */
  confidence: string;
}

export function memoryForm(memory: Memory): MemoryForm {
  return {
    content: memory.content,
    category: memory.category,
    valence: memory.valence,
    confidence: String(memory.confidence),
  };
}

/**
 * The PATCH body of an edit: only the fields that changed (the content
 * trimmed, as the server stores it), or null when nothing did. A confidence
 * that is not a number cannot be sent: the answer is then an error message
 * to show. Everything else (an empty content, a confidence outside 0–1) is
 * the server's to judge, and its message is shown.
 */
export function memoryPatch(memory: Memory, form: MemoryForm): MemoryPatch | null | string {
  const patch: MemoryPatch = {};
  const content = form.content.trim();
  if (content !== memory.content) patch.content = content;
  if (form.category !== memory.category) patch.category = form.category;
  if (form.valence !== memory.valence) patch.valence = form.valence;
  const typed = form.confidence.trim();
  if (typed !== '') {
    const confidence = Number(typed);
    if (!Number.isFinite(confidence)) return 'The confidence must be a number from 0 to 1.';
    if (confidence !== memory.confidence) patch.confidence = confidence;
  }
  return Object.keys(patch).length > 0 ? patch : null;
}
