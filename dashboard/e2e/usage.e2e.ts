// What investigations cost, as a person sees it, against a real `tarsy
// serve` whose scripted model reports token usage and has a price
// (e2e/config: dash-scripted priced, dash-unpriced without a price): the
// cost of a session, its stages and its agents on the session page and in
// the list, and the Usage page over sessions submitted through the API.

import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Cost, SessionDetail, SessionPage, Usage } from '../src/api/types';
import { formatCost, formatCount, formatShare, formatTokens, pricedShare } from '../src/components/format';
import { launchBrowser, newPage, screenshotPath, seriousA11yViolations, startTarsy, type Tarsy } from './harness';

let tarsy: Tarsy;
let browser: Browser;
/** A DashCost session (two agents side by side, a second opinion without a price), a DashDemo and a DashMarkup one. */
let costId = '';
let demoId = '';
let markupId = '';

async function getJson<T>(path: string): Promise<T> {
  const response = await fetch(`${tarsy.url}${path}`);
  if (!response.ok) throw new Error(`GET ${path}: ${response.status} ${await response.text()}`);
  return (await response.json()) as T;
}

/** The `/api/v1/usage` requests a page makes, as URLs. */
function usageRequests(page: Page): URL[] {
  const seen: URL[] = [];
  page.on('request', (request) => {
    const url = new URL(request.url());
    if (url.pathname === '/api/v1/usage') seen.push(url);
  });
  return seen;
}

const DAY_MS = 86_400_000;

/** Midnight UTC of today plus `days`, as the page asks for it ("2026-03-09T00:00:00Z"). */
function utcMidnight(days: number): string {
  const now = new Date();
  const midnight = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()) + days * DAY_MS;
  return new Date(midnight).toISOString().replace('.000Z', 'Z');
}

/** The first of this month plus `months`, midnight UTC. */
function utcMonth(months: number): string {
  const now = new Date();
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + months, 1)).toISOString().replace('.000Z', 'Z');
}

/** The cost text of the first cost inside `scope` (without the hidden screen-reader note). */
function costText(scope: ReturnType<Page['locator']>): Promise<string | null> {
  return scope.locator('.cost-amount').first().textContent();
}

beforeAll(async () => {
  tarsy = await startTarsy();
  browser = await launchBrowser();
  costId = await tarsy.submit('DashCost');
  demoId = await tarsy.submit('DashDemo');
  markupId = await tarsy.submit('DashMarkup');
  for (const id of [costId, demoId, markupId]) await tarsy.waitForStatus(id, ['completed'], 45_000);
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await tarsy?.stop();
});

describe('cost on the session page', () => {
  it('shows what the API says the session, each stage and each agent cost, parallel agents side by side', async () => {
    const { page, problems } = await newPage(browser);
    const detail = await getJson<SessionDetail>(`/api/v1/sessions/${costId}`);
    // The scripts' tokens at the configured prices: ThriftyAgent $0.00208,
    // LavishAgent $0.0212 (thinking and cached prompt tokens priced apart),
    // the synthesis $0.00264, the executive summary $0.00204; the second
    // opinion ran on a model without a price, so the total is a lower bound.
    expect(detail.cost).toMatchObject({ partial: true, unpriced_calls: 1 });
    expect(detail.cost?.usd).toBeCloseTo(0.02796, 8);
    expect(formatCost(detail.cost)).toBe('≥ $0.0280');

    await page.goto(`${tarsy.url}/ui/sessions/${costId}`);
    await page.getByRole('heading', { name: /DashCost/ }).waitFor();
    // The header: the session's total, marked as a lower bound and saying why.
    const header = page.locator('.session-cost');
    expect(await costText(header)).toBe('≥ $0.0280');
    expect(await header.locator('.cost').first().getAttribute('title')).toMatch(
      /^At least \$0\.0280: 1 call of 5 used tokens but has no price estimate/,
    );
    expect(await header.textContent()).toContain(`${formatTokens(detail.cost?.tokens.total_tokens)} tokens`);

    // The cost card: each stage, each of its agents, and the total, as the API says.
    const card = page.getByRole('region', { name: 'Cost' });
    await card.getByText(/A lower bound: 1 of 5 LLM calls/).waitFor();
    const stages = detail.stages.filter((s) => s.executions.length > 0);
    expect(stages.map((s) => s.stage_name)).toEqual(['compare', 'compare - Synthesis', 'second-opinion']);
    for (const stage of stages) {
      const group = card.locator(`tbody[data-stage-id="${stage.id}"]`);
      expect(await costText(group.locator('tr.cost-stage'))).toBe(formatCost(stage.cost));
      for (const execution of stage.executions) {
        const row = group.locator(`tr[data-execution-id="${execution.id}"]`);
        const cells = row.locator('td');
        expect(await costText(row)).toBe(formatCost(execution.cost));
        // LLM calls, input, output, thinking, total tokens: exact figures.
        const tokens = execution.cost?.tokens;
        expect(await cells.nth(1).textContent()).toBe(formatCount(execution.cost?.calls ?? -1));
        expect(await cells.nth(2).textContent()).toBe(formatCount(tokens?.input_tokens ?? -1));
        expect(await cells.nth(3).textContent()).toBe(formatCount(tokens?.output_tokens ?? -1));
        expect(await cells.nth(4).textContent()).toBe(formatCount(tokens?.thinking_tokens ?? -1));
        expect(await cells.nth(5).textContent()).toBe(formatCount(tokens?.total_tokens ?? -1));
      }
    }
    // The two agents of the parallel stage, one under the other.
    const compare = card.locator(`tbody[data-stage-id="${stages[0]?.id}"] tr.cost-execution`);
    expect(await compare.locator('th').allTextContents()).toEqual(['ThriftyAgent', 'LavishAgent']);
    expect(await compare.locator('.cost-amount').allTextContents()).toEqual(['$0.0021', '$0.0212']);
    expect(await costText(card.locator('tfoot'))).toBe('≥ $0.0280');

    // The timeline: the stage's cost under its header, each agent's beside it.
    const timeline = page.getByRole('region', { name: 'Timeline' });
    const stageCost = timeline.locator('.stage-cost').first();
    expect(await costText(stageCost)).toBe(formatCost(stages[0]?.cost));
    expect(await costText(timeline.locator('.execution-header').first())).toBe('$0.0021');
    await timeline.getByRole('tab', { name: /LavishAgent/ }).click();
    await expect.poll(() => costText(timeline.locator('.execution-header').first())).toBe('$0.0212');

    const shot = screenshotPath('session-cost');
    if (shot) await page.screenshot({ path: shot, fullPage: true });
    expect(await seriousA11yViolations(page)).toEqual([]);
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it('shows each session\'s cost in the sessions list', async () => {
    const { page, problems } = await newPage(browser);
    const list = await getJson<SessionPage>('/api/v1/sessions');
    await page.goto(`${tarsy.url}/ui/`);
    for (const id of [costId, demoId, markupId]) {
      const session = list.sessions.find((s) => s.id === id);
      const row = page.locator(`tr[data-session-id="${id}"]`);
      await row.waitFor();
      expect(await costText(row)).toBe(formatCost(session?.cost));
    }
    expect(await costText(page.locator(`tr[data-session-id="${costId}"]`))).toBe('≥ $0.0280');
    expect(await costText(page.locator(`tr[data-session-id="${demoId}"]`))).toBe('$0.0155');
    expect(await seriousA11yViolations(page)).toEqual([]);
    expect(problems).toEqual([]);
    await page.context().close();
  });
});

describe('usage page', () => {
  it('shows the totals, breakdowns and top sessions the API gives, and opens a session', async () => {
    const { page, problems } = await newPage(browser);
    const requests = usageRequests(page);
    await page.goto(`${tarsy.url}/ui/`);
    await page.getByRole('link', { name: 'Usage', exact: true }).click();
    await page.getByRole('heading', { name: 'Usage', level: 1 }).waitFor();
    const totals = page.getByRole('region', { name: 'Totals' });
    await totals.waitFor();

    // One request: the last 7 days (today and the 6 before, whole UTC days), by cost.
    expect(requests).toHaveLength(1);
    const asked = requests[0] as URL;
    expect(asked.searchParams.get('from')).toBe(utcMidnight(-6));
    expect(asked.searchParams.get('to')).toBe(utcMidnight(1));
    expect(asked.searchParams.get('rank')).toBe('cost');
    const usage = await getJson<Usage>(`/api/v1/usage?${asked.searchParams.toString()}`);
    expect(usage.sessions).toBe(3);

    // Totals: sessions, tokens, cost, completeness with the unpriced call named.
    const stat = (name: string) => totals.locator(`[data-stat="${name}"] dd`);
    expect(await stat('sessions').textContent()).toBe('3');
    expect(await stat('tokens').locator('.tokens').textContent()).toBe(formatTokens(usage.cost.tokens.total_tokens));
    expect(await costText(stat('cost'))).toBe(formatCost(usage.cost));
    expect(usage.cost).toMatchObject({ partial: true, unpriced_calls: 1 });
    expect(await stat('completeness').textContent()).toContain(formatShare(pricedShare(usage.cost)));
    const note = totals.locator('.usage-unpriced');
    expect(await note.textContent()).toContain(`1 LLM call of ${usage.cost.calls} used tokens but has no price`);
    expect(await note.textContent()).toContain('scripted-unpriced');

    // Each breakdown: its values in the API's order, with their figures.
    const breakdowns: [string, { key: string; sessions: number; cost: Cost; provider?: string | null }[]][] = [
      ['By model', usage.by_model],
      ['By alert type', usage.by_alert_type],
      ['By chain', usage.by_chain],
      ['By scope', usage.by_scope],
    ];
    for (const [title, groups] of breakdowns) {
      const rows = page.getByRole('region', { name: title }).locator('tbody tr');
      expect(await rows.evaluateAll((els) => els.map((e) => e.getAttribute('data-key')))).toEqual(groups.map((g) => g.key));
      for (const [i, group] of groups.entries()) {
        const row = rows.nth(i);
        expect(await costText(row)).toBe(formatCost(group.cost));
        expect(await row.locator('.tokens').textContent()).toBe(formatTokens(group.cost.tokens.total_tokens));
        expect(await row.textContent()).toContain(formatCount(group.sessions));
        if (group.provider) expect(await row.textContent()).toContain(group.provider);
      }
    }
    expect(usage.by_model.map((m) => m.key).sort()).toEqual(['scripted-dashboard', 'scripted-unpriced']);
    expect(usage.by_alert_type.map((g) => g.key)).toEqual(['DashCost', 'DashDemo', 'DashMarkup']);
    // A chain opens the session list filtered by it.
    await page.getByRole('region', { name: 'By chain' }).getByRole('link', { name: 'dash-demo' }).waitFor();

    // The top sessions, costliest first.
    const top = page.getByRole('region', { name: 'Top sessions' });
    const topIds = () => top.locator('tbody tr').evaluateAll((els) => els.map((e) => e.getAttribute('data-session-id')));
    expect(await topIds()).toEqual(usage.top_sessions.map((s) => s.session_id));
    expect(await topIds()).toEqual([costId, demoId, markupId]);
    for (const [i, session] of usage.top_sessions.entries()) {
      expect(await costText(top.locator('tbody tr').nth(i))).toBe(formatCost(session.cost));
    }
    const shot = screenshotPath('usage');
    if (shot) await page.screenshot({ path: shot, fullPage: true });
    expect(await seriousA11yViolations(page)).toEqual([]);

    // Ranked by tokens: one more request, the order the API gives, in the URL.
    await top.getByRole('button', { name: 'Tokens' }).click();
    await expect.poll(() => requests.length).toBe(2);
    expect(requests[1]?.searchParams.get('rank')).toBe('tokens');
    expect(requests[1]?.searchParams.get('from')).toBe(asked.searchParams.get('from'));
    expect(page.url()).toContain('rank=tokens');
    const byTokens = await getJson<Usage>(`/api/v1/usage?${requests[1]?.searchParams.toString()}`);
    await expect.poll(topIds).toEqual(byTokens.top_sessions.map((s) => s.session_id));
    expect(await top.getByRole('button', { name: 'Tokens' }).getAttribute('aria-pressed')).toBe('true');
    await top.getByRole('button', { name: 'Cost' }).click();
    await expect.poll(topIds).toEqual([costId, demoId, markupId]);
    expect(page.url()).not.toContain('rank=');

    // A top session opens its page.
    await top.getByRole('link', { name: new RegExp(`session ${costId}`) }).click();
    await page.waitForURL(`**/ui/sessions/${costId}`);
    await page.getByRole('heading', { name: /DashCost/ }).waitFor();
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it('asks for the window picked, keeps it in the URL, and shows the API\'s refusal', async () => {
    const { page, problems } = await newPage(browser);
    const requests = usageRequests(page);
    await page.goto(`${tarsy.url}/ui/usage`);
    const totals = page.getByRole('region', { name: 'Totals' });
    const sessions = totals.locator('[data-stat="sessions"] dd');
    await expect.poll(() => sessions.textContent()).toBe('3');
    const windowSelect = page.getByLabel('Window', { exact: true });
    const last = () => requests[requests.length - 1];

    await windowSelect.selectOption('30d');
    await expect.poll(() => requests.length).toBe(2);
    expect(last()?.searchParams.get('from')).toBe(utcMidnight(-29));
    expect(last()?.searchParams.get('to')).toBe(utcMidnight(1));

    await windowSelect.selectOption('month');
    await expect.poll(() => requests.length).toBe(3);
    expect(last()?.searchParams.get('from')).toBe(utcMonth(0));
    expect(last()?.searchParams.get('to')).toBe(utcMonth(1));
    expect(page.url()).toContain('window=month');
    await expect.poll(() => sessions.textContent()).toBe('3');

    // Last month: before these sessions were submitted.
    await windowSelect.selectOption('last-month');
    await expect.poll(() => requests.length).toBe(4);
    expect(last()?.searchParams.get('from')).toBe(utcMonth(-1));
    expect(last()?.searchParams.get('to')).toBe(utcMonth(0));
    await expect.poll(() => sessions.textContent()).toBe('0');
    await page.getByRole('region', { name: 'Top sessions' }).getByText('No session in this window.').waitFor();

    // Custom dates start from the window shown, then ask for today alone.
    await windowSelect.selectOption('custom');
    const from = page.getByLabel('First day (UTC)');
    const to = page.getByLabel('Last day (UTC)');
    expect(await from.inputValue()).toBe(utcMonth(-1).slice(0, 10));
    expect(await to.inputValue()).toBe(new Date(Date.parse(utcMonth(0)) - DAY_MS).toISOString().slice(0, 10));
    const today = utcMidnight(0).slice(0, 10);
    await to.fill(today);
    await from.fill(today);
    await expect.poll(() => last()?.searchParams.get('from')).toBe(utcMidnight(0));
    expect(last()?.searchParams.get('to')).toBe(utcMidnight(1));
    await expect.poll(() => sessions.textContent()).toBe('3');
    expect(page.url()).toContain(`window=custom&from=${today}&to=${today}`);

    // Backwards: said at once, nothing asked.
    const before = requests.length;
    await to.fill('2020-01-01');
    await page.getByRole('alert').getByText('The first day must not be after the last day.').waitFor();
    expect(requests.length).toBe(before);

    // Longer than the API allows: its refusal, shown as the other pages show errors (asked once).
    await to.fill(today);
    await expect.poll(() => sessions.textContent()).toBe('3');
    await from.fill('2019-01-01');
    await page.getByRole('alert').getByText(/^Cannot load the usage: .*366 days/).waitFor();
    const refused = requests.filter((u) => u.searchParams.get('from') === '2019-01-01T00:00:00Z');
    expect(refused).toHaveLength(1);
    expect(await seriousA11yViolations(page)).toEqual([]);

    // The window survives a reload (it lives in the URL).
    await from.fill(today);
    await expect.poll(() => sessions.textContent()).toBe('3');
    await page.reload();
    expect(await page.getByLabel('Window', { exact: true }).inputValue()).toBe('custom');
    expect(await page.getByLabel('First day (UTC)').inputValue()).toBe(today);
    await expect.poll(() => page.locator('[data-stat="sessions"] dd').textContent()).toBe('3');
    expect(problems.filter((p) => !p.includes('400'))).toEqual([]);
    await page.context().close();
  });
});
