import { describe, expect, it } from 'vitest';
import type { Cost } from '../src/api/types';
import {
  costExplanation,
  formatCost,
  formatShare,
  formatTokens,
  formatUsd,
  pricedShare,
  tokenBreakdown,
} from '../src/components/format';

function cost(usd: number, extra: Partial<Cost> = {}): Cost {
  return {
    usd,
    partial: false,
    calls: 3,
    unpriced_calls: 0,
    tokens: { input_tokens: 2700, output_tokens: 160, total_tokens: 2860, thinking_tokens: 0, cached_input_tokens: 0 },
    ...extra,
  };
}

describe('formatUsd', () => {
  it('shows 4 decimals under a dollar, a cent or less included', () => {
    expect(formatUsd(0.0489)).toBe('$0.0489');
    expect(formatUsd(0.00668)).toBe('$0.0067');
    expect(formatUsd(0.0001)).toBe('$0.0001');
    expect(formatUsd(0.5)).toBe('$0.5000');
  });

  it('shows cents from a dollar on, with thousands separators', () => {
    expect(formatUsd(1)).toBe('$1.00');
    expect(formatUsd(12.345)).toBe('$12.35');
    expect(formatUsd(1234.5)).toBe('$1,234.50');
    // Rounds to a dollar: shown as one, not as "$1.0000".
    expect(formatUsd(0.99996)).toBe('$1.00');
  });

  it('names nothing and a sliver apart, and refuses what is not an amount', () => {
    expect(formatUsd(0)).toBe('$0.00');
    expect(formatUsd(0.00001)).toBe('< $0.0001');
    expect(formatUsd(Number.NaN)).toBe('—');
    expect(formatUsd(-1)).toBe('—');
  });
});

describe('formatCost', () => {
  it('is a dash before the first LLM call', () => {
    expect(formatCost(null)).toBe('—');
    expect(formatCost(undefined)).toBe('—');
  });

  it('is the estimate when every call has a price', () => {
    expect(formatCost(cost(0.0489))).toBe('$0.0489');
    expect(formatCost(cost(0))).toBe('$0.00');
  });

  it('marks a lower bound when some calls have no price', () => {
    const partial = cost(0.0489, { partial: true, unpriced_calls: 1 });
    expect(formatCost(partial)).toBe('≥ $0.0489');
    expect(formatCost(cost(0, { partial: true, unpriced_calls: 3 }))).toBe('≥ $0.00');
    expect(formatCost(cost(0.00001, { partial: true, unpriced_calls: 1 }))).toBe('> $0.00');
  });

  it('explains the estimate in its title, and why a partial one is a lower bound', () => {
    expect(costExplanation(null)).toBe('No LLM call yet.');
    expect(costExplanation(cost(0.0067))).toBe(
      'Estimated cost of 3 LLM calls: 2,860 tokens (2,700 input · 160 output).',
    );
    const partial = costExplanation(cost(0.0067, { partial: true, unpriced_calls: 1 }));
    expect(partial).toMatch(/^At least \$0\.0067: 1 call of 3 used tokens but has no price estimate/);
    expect(partial).toContain('the real cost is higher');
  });
});

describe('tokens', () => {
  it('are compact in lists', () => {
    expect(formatTokens(0)).toBe('0');
    expect(formatTokens(950)).toBe('950');
    expect(formatTokens(2860)).toBe('2.86K');
    expect(formatTokens(12_345)).toBe('12.3K');
    expect(formatTokens(123_456)).toBe('123K');
    expect(formatTokens(1_234_567)).toBe('1.23M');
    expect(formatTokens(null)).toBe('—');
  });

  it('are exact by kind in a breakdown, the kinds not used left out', () => {
    expect(tokenBreakdown(cost(0).tokens)).toBe('2,700 input · 160 output');
    expect(
      tokenBreakdown({
        input_tokens: 12_000,
        output_tokens: 300,
        total_tokens: 12_800,
        thinking_tokens: 500,
        cached_input_tokens: 8_000,
      }),
    ).toBe('12,000 input · 300 output · 500 thinking · 8,000 cached input');
  });
});

describe('completeness', () => {
  it('is the share of calls with a price, never rounded to all or none', () => {
    expect(pricedShare(cost(1, { calls: 4, unpriced_calls: 1 }))).toBe(0.75);
    expect(pricedShare(cost(0, { calls: 0 }))).toBe(1);
    expect(formatShare(0.75)).toBe('75%');
    expect(formatShare(1)).toBe('100%');
    expect(formatShare(0.999)).toBe('99%');
    expect(formatShare(0.001)).toBe('1%');
    expect(formatShare(0)).toBe('0%');
  });
});
