import type { ReactNode } from 'react';

/** One labelled control of a page's filter bar. */
export function Filter({ id, label, children }: { id: string; label: string; children: ReactNode }) {
  return (
    <div className="filter">
      <label htmlFor={id}>{label}</label>
      {children}
    </div>
  );
}
