import type { Cost, TokenUsage } from '../api/types';
import { costExplanation, formatCost, formatCount, formatTokens, tokenBreakdown } from './format';

/**
 * An estimated cost: "$0.0489", "≥ $0.0489" when some calls have no price
 * (the title says why, and so does hidden text for screen readers), "—"
 * before the first LLM call.
 */
export function CostAmount({ cost }: { cost: Cost | null | undefined }) {
  return (
    <span className={cost?.partial ? 'cost cost-partial' : 'cost'} title={costExplanation(cost)}>
      <span className="cost-amount">{formatCost(cost)}</span>
      {cost?.partial && (
        <span className="visually-hidden">
          {' '}
          (at least: {cost.unpriced_calls} of {cost.calls} calls have no price)
        </span>
      )}
    </span>
  );
}

/** A token count, compact ("2.86K"), with the exact figures by kind in its title. */
export function TokenCount({ tokens }: { tokens: TokenUsage | null | undefined }) {
  if (!tokens) return <span className="tokens">—</span>;
  return (
    <span className="tokens" title={`${formatCount(tokens.total_tokens)} tokens: ${tokenBreakdown(tokens)}`}>
      {formatTokens(tokens.total_tokens)}
    </span>
  );
}

/** Cost, tokens and calls on one line: "$0.0067 · 2.86K tokens · 3 LLM calls". */
export function CostSummary({ cost }: { cost: Cost | null | undefined }) {
  if (!cost) return <span className="muted">no LLM call yet</span>;
  return (
    <span className="cost-summary">
      <CostAmount cost={cost} /> · <TokenCount tokens={cost.tokens} /> tokens ·{' '}
      {cost.calls === 1 ? '1 LLM call' : `${formatCount(cost.calls)} LLM calls`}
    </span>
  );
}
