/**
 * Why a session that ran its course ended early, or why a pending one
 * waits, next to its status.
 */
export function EndReason({ reason, hold }: { reason?: string | null; hold?: string | null }) {
  if (hold) {
    return (
      <span className="badge status-pending" title={hold}>
        held: budget spent
      </span>
    );
  }
  if (reason !== 'budget_exhausted') return null;
  return (
    <span
      className="badge status-timed_out"
      title="The session spent its chain's budget: its agents concluded without more tools and later stages did not start."
    >
      budget exhausted
    </span>
  );
}
