import { statusLabel } from './format';

/** A status as text and colour (the text carries the meaning). */
export function StatusBadge({ status }: { status: string }) {
  return <span className={`badge status-${status}`}>{statusLabel(status)}</span>;
}
