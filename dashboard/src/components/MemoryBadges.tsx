import { MEMORY_CATEGORIES, MEMORY_VALENCES, type MemoryCategory, type MemoryValence } from '../api/types';

const CATEGORY_LABEL = new Map<string, string>(MEMORY_CATEGORIES);
const VALENCE_LABEL = new Map<string, string>(MEMORY_VALENCES);

export function categoryLabel(category: MemoryCategory): string {
  return CATEGORY_LABEL.get(category) ?? category;
}

export function valenceLabel(valence: MemoryValence): string {
  return VALENCE_LABEL.get(valence) ?? valence;
}

/** A memory's category as a quiet label. */
export function CategoryBadge({ category }: { category: MemoryCategory }) {
  return <span className="badge memory-category">{categoryLabel(category)}</span>;
}

/**
 * Whether following a memory helped or misled (the text carries the
 * meaning; a misleading one is styled as a warning for the next readers).
 */
export function ValenceBadge({ valence }: { valence: MemoryValence }) {
  return (
    <span
      className={`badge valence-${valence}`}
      title={valence === 'misled' ? 'A warning: following this misled an investigation' : undefined}
    >
      {valence === 'misled' && <span aria-hidden="true">⚠ </span>}
      {valenceLabel(valence)}
    </span>
  );
}

/** Kept, but never recalled. */
export function DeprecatedBadge() {
  return (
    <span className="badge badge-deprecated" title="Kept, but never recalled">
      deprecated
    </span>
  );
}
