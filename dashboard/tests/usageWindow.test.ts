import { describe, expect, it } from 'vitest';
import { parseDay, readUsageParams, usageWindow, windowDays, type UsageParams } from '../src/state/usageWindow';

function params(extra: Partial<UsageParams>): UsageParams {
  return { window: '7d', from: '', to: '', rank: 'cost', ...extra };
}

// Late on the evening of 15 March 2026 in UTC: already the 16th east of it.
const NOW = new Date('2026-03-15T23:30:00Z');

describe('usage window', () => {
  it('this month: from its first day to the first of the next, in UTC', () => {
    expect(usageWindow(params({ window: 'month' }), NOW)).toEqual({
      from: '2026-03-01T00:00:00Z',
      to: '2026-04-01T00:00:00Z',
    });
    // The last instant of a month is still in it; the next one is not.
    expect(usageWindow(params({ window: 'month' }), new Date('2026-03-31T23:59:59.999Z'))).toEqual({
      from: '2026-03-01T00:00:00Z',
      to: '2026-04-01T00:00:00Z',
    });
    expect(usageWindow(params({ window: 'month' }), new Date('2026-04-01T00:00:00Z'))).toEqual({
      from: '2026-04-01T00:00:00Z',
      to: '2026-05-01T00:00:00Z',
    });
  });

  it('last month: the whole previous calendar month, across a year and a leap February', () => {
    expect(usageWindow(params({ window: 'last-month' }), NOW)).toEqual({
      from: '2026-02-01T00:00:00Z',
      to: '2026-03-01T00:00:00Z',
    });
    expect(usageWindow(params({ window: 'last-month' }), new Date('2026-01-10T08:00:00Z'))).toEqual({
      from: '2025-12-01T00:00:00Z',
      to: '2026-01-01T00:00:00Z',
    });
    expect(usageWindow(params({ window: 'last-month' }), new Date('2028-03-01T00:00:00Z'))).toEqual({
      from: '2028-02-01T00:00:00Z',
      to: '2028-03-01T00:00:00Z',
    });
    expect(windowDays({ from: '2028-02-01T00:00:00Z', to: '2028-03-01T00:00:00Z' })).toEqual({
      from: '2028-02-01',
      to: '2028-02-29',
    });
  });

  it('last 7 and 30 days: today and the days before it, whole UTC days', () => {
    expect(usageWindow(params({ window: '7d' }), NOW)).toEqual({
      from: '2026-03-09T00:00:00Z',
      to: '2026-03-16T00:00:00Z',
    });
    expect(usageWindow(params({ window: '30d' }), NOW)).toEqual({
      from: '2026-02-14T00:00:00Z',
      to: '2026-03-16T00:00:00Z',
    });
    // The same question all day: one request per window.
    expect(usageWindow(params({ window: '7d' }), new Date('2026-03-15T00:00:01Z'))).toEqual(
      usageWindow(params({ window: '7d' }), NOW),
    );
  });

  it('custom: from the first day to the end of the last, both included', () => {
    expect(usageWindow(params({ window: 'custom', from: '2026-02-27', to: '2026-03-02' }), NOW)).toEqual({
      from: '2026-02-27T00:00:00Z',
      to: '2026-03-03T00:00:00Z',
    });
    expect(usageWindow(params({ window: 'custom', from: '2026-03-02', to: '2026-03-02' }), NOW)).toEqual({
      from: '2026-03-02T00:00:00Z',
      to: '2026-03-03T00:00:00Z',
    });
    expect(windowDays({ from: '2026-02-27T00:00:00Z', to: '2026-03-03T00:00:00Z' })).toEqual({
      from: '2026-02-27',
      to: '2026-03-02',
    });
  });

  it('custom: says what is missing or backwards instead of asking', () => {
    expect(usageWindow(params({ window: 'custom', from: '2026-03-02' }), NOW)).toEqual({
      error: 'Choose the first and the last day of the window.',
    });
    expect(usageWindow(params({ window: 'custom', from: '2026-02-30', to: '2026-03-02' }), NOW)).toHaveProperty('error');
    expect(usageWindow(params({ window: 'custom', from: '2026-03-03', to: '2026-03-02' }), NOW)).toEqual({
      error: 'The first day must not be after the last day.',
    });
    expect(parseDay('2026-02-29')).toBeNull();
    expect(parseDay('2028-02-29')?.toISOString()).toBe('2028-02-29T00:00:00.000Z');
  });

  it('reads its state from the URL, unknown values as the defaults', () => {
    expect(readUsageParams(new URLSearchParams(''))).toEqual(params({}));
    expect(readUsageParams(new URLSearchParams('window=yearly&rank=size'))).toEqual(params({}));
    expect(readUsageParams(new URLSearchParams('window=custom&from=2026-01-01&to=2026-01-31&rank=tokens'))).toEqual(
      params({ window: 'custom', from: '2026-01-01', to: '2026-01-31', rank: 'tokens' }),
    );
  });
});
