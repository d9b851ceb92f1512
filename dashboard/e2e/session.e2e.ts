// The sessions list and one session, as a person sees them in the browser,
// against a real `tarsy serve` with scripted answers.

import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, newPage, screenshotPath, seriousA11yViolations, startTarsy, type Tarsy } from './harness';

let tarsy: Tarsy;
let browser: Browser;

beforeAll(async () => {
  tarsy = await startTarsy();
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await tarsy?.stop();
});

describe('sessions list', () => {
  it('shows new sessions and their status changes live, without a reload', async () => {
    const { page, problems } = await newPage(browser);
    await page.goto(`${tarsy.url}/ui/`);
    await page.getByRole('heading', { name: 'Sessions' }).waitFor();
    await page.getByText('No sessions match.').waitFor();

    const id = await tarsy.submit('DashDemo');
    const row = page.locator(`tr[data-session-id="${id}"]`);
    await row.waitFor({ timeout: 10_000 });
    await expect.poll(() => row.textContent(), { timeout: 10_000 }).toContain('DashDemo');
    // It finishes while the page stays open.
    await expect.poll(() => row.locator('.badge').textContent(), { timeout: 30_000 }).toBe('completed');
    await expect.poll(() => row.locator('td').nth(6).textContent()).toBe('3/3');

    // Filters narrow the list (and live in the URL).
    await page.getByLabel('Alert type', { exact: true }).selectOption('DashSlow');
    await page.getByText('No sessions match.').waitFor();
    expect(page.url()).toContain('alert_type=DashSlow');
    await page.getByLabel('Alert type', { exact: true }).selectOption('');
    await row.waitFor();
    await page.getByRole('button', { name: 'Needs attention' }).click();
    await page.getByText('No sessions match.').waitFor();
    await page.getByRole('button', { name: 'All sessions' }).click();
    await row.waitFor();

    expect(await seriousA11yViolations(page)).toEqual([]);
    expect(problems).toEqual([]);
    await page.context().close();
  });
});

describe('session page', () => {
  it('streams the running answer before the execution ends', async () => {
    const { page, problems } = await newPage(browser);
    const id = await tarsy.submit('DashSlow');
    await page.goto(`${tarsy.url}/ui/sessions/${id}`);
    const timeline = page.getByRole('region', { name: 'Timeline' });
    // Part of the answer is on screen while the stream is still running...
    await timeline.getByText(/word0[3-9]/).waitFor({ timeout: 15_000 });
    await expect(timeline.locator('.badge-live').first().isVisible()).resolves.toBe(true);
    const partial = await timeline.locator('.entry-llm_response').first().textContent();
    expect(partial).not.toContain('word40');
    const { status } = (await (await fetch(`${tarsy.url}/api/v1/sessions/${id}`)).json()) as { status: string };
    expect(status).toBe('in_progress');
    // ...and the whole of it once it has ended.
    await timeline.getByText(/word40/).first().waitFor({ timeout: 20_000 });
    await page.getByRole('heading', { name: /DashSlow/ }).getByText('completed').waitFor({ timeout: 15_000 });
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it('shows stages, parallel replicas with synthesis, tool calls and the report', async () => {
    const { page, problems } = await newPage(browser);
    const id = await tarsy.submit('DashDemo');
    await tarsy.waitForStatus(id, ['completed']);
    await page.goto(`${tarsy.url}/ui/sessions/${id}`);
    await page.getByRole('heading', { name: 'Executive summary' }).waitFor();
    await page.getByText('Executive summary: the investigated workload runs out of memory').first().waitFor();
    const timeline = page.getByRole('region', { name: 'Timeline' });
    await timeline.getByText('Stage 1: investigate').waitFor();
    // The tool call with its arguments and the real time server's result.
    const call = timeline.locator('.entry-llm_tool_call').first();
    await call.getByText('time.get_current_time').waitFor();
    await call.getByText('Arguments').click();
    await call.getByText('"timezone": "UTC"').first().waitFor();
    await call.getByText('Result').click();
    await expect.poll(() => call.locator('pre').nth(1).textContent()).toMatch(/datetime|UTC/);
    // The final answer is rendered markdown: a table, bold text.
    await timeline.locator('table').first().waitFor();
    await timeline.locator('strong', { hasText: 'OOMKilled' }).first().waitFor();

    // Parallel replicas as tabs, keyboard-operable; the synthesis is marked.
    await timeline.evaluate((el) => el.scrollTo(0, el.scrollHeight));
    const tabs = timeline.getByRole('tab');
    await expect.poll(() => tabs.count()).toBe(2);
    // Each tab shows one replica's answer (which replica got which canned
    // answer depends on who asked first).
    const replicaText = () => timeline.getByText(/Replica view [AB]/).first().textContent();
    await tabs.first().click();
    await expect.poll(replicaText).toMatch(/Replica view [AB]/);
    const first = await replicaText();
    await page.keyboard.press('ArrowRight');
    await expect.poll(() => tabs.nth(1).getAttribute('aria-selected')).toBe('true');
    await expect.poll(replicaText).toMatch(/Replica view [AB]/);
    expect(await replicaText()).not.toBe(first);
    await timeline.evaluate((el) => el.scrollTo(0, el.scrollHeight));
    await timeline.getByText('synthesis', { exact: true }).first().waitFor();
    // The synthesis's answer: its response and its final analysis.
    await timeline.getByText('Both replicas agree').first().waitFor();

    // Copy the report as markdown.
    await page.getByRole('button', { name: 'Copy report as markdown' }).click();
    await page.getByRole('button', { name: 'Copied' }).waitFor();
    const report = await page.evaluate(() => navigator.clipboard.readText());
    expect(report).toContain('# DashDemo: completed');
    expect(report).toContain('## Executive summary');
    expect(report).toContain('### 1. investigate (completed)');

    await timeline.evaluate((el) => el.scrollTo(0, 0));
    const shot = screenshotPath('session');
    if (shot) await page.screenshot({ path: shot, fullPage: true });
    expect(await seriousA11yViolations(page)).toEqual([]);
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it('deep-links to an event', async () => {
    const { page } = await newPage(browser);
    const id = await tarsy.submit('DashDemo');
    await tarsy.waitForStatus(id, ['completed']);
    const events = (await (await fetch(`${tarsy.url}/api/v1/sessions/${id}/timeline`)).json()) as {
      id: string;
      content: string;
    }[];
    const target = events.find((e) => e.content.includes('Replica view B'));
    expect(target).toBeDefined();
    await page.goto(`${tarsy.url}/ui/sessions/${id}?event=${target?.id}`);
    // The second replica's tab opens and the event is highlighted in view.
    const entry = page.locator(`#event-${target?.id}`);
    await entry.waitFor();
    await expect.poll(() => entry.getAttribute('class')).toContain('highlighted');
    await expect.poll(() => entry.isVisible()).toBe(true);
    await page.context().close();
  });

  it('answers a follow-up question, streamed', async () => {
    const { page, problems } = await newPage(browser);
    const id = await tarsy.submit('DashSlow');
    await tarsy.waitForStatus(id, ['completed']);
    await page.goto(`${tarsy.url}/ui/sessions/${id}`);
    const input = page.getByLabel('Ask a follow-up question about this investigation');
    await input.fill('Should we raise the memory limit?');
    await page.getByRole('button', { name: 'Send' }).click();
    const timeline = page.getByRole('region', { name: 'Timeline' });
    await timeline.getByText('Follow-up chat').waitFor({ timeout: 10_000 });
    await timeline.getByText('Should we raise the memory limit?').waitFor();
    await timeline.getByText(/raise the limit to 512Mi/).first().waitFor({ timeout: 10_000 });
    await timeline.getByText(/watch the working set/).first().waitFor({ timeout: 10_000 });
    // Ready for the next question once the answer is done.
    await expect.poll(async () => {
      await input.fill('and then?');
      return page.getByRole('button', { name: 'Send' }).isEnabled();
    }, { timeout: 10_000 }).toBe(true);
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it('cancels a running investigation', async () => {
    const { page, problems } = await newPage(browser);
    const id = await tarsy.submit('DashHang');
    await page.goto(`${tarsy.url}/ui/sessions/${id}`);
    const timeline = page.getByRole('region', { name: 'Timeline' });
    await timeline.getByText(/step \d+\./).waitFor({ timeout: 10_000 });
    await page.getByRole('button', { name: 'Cancel investigation' }).click();
    await page.getByText('cancellation requested').waitFor();
    await page.getByRole('heading', { name: /DashHang/ }).getByText('cancelled').waitFor({ timeout: 15_000 });
    await expect.poll(() => page.getByRole('button', { name: 'Cancel investigation' }).count()).toBe(0);
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it('opens the trace with LLM and MCP interactions', async () => {
    const { page, problems } = await newPage(browser);
    const id = await tarsy.submit('DashDemo');
    await tarsy.waitForStatus(id, ['completed']);
    await page.goto(`${tarsy.url}/ui/sessions/${id}`);
    await page.getByRole('link', { name: 'Trace' }).click();
    await page.getByRole('heading', { name: 'Trace' }).waitFor();
    await page.getByRole('heading', { name: 'Stage 1: investigate' }).waitFor();
    const llm = page.locator('details', { hasText: 'scripted-dashboard' }).first();
    await llm.locator('summary').click();
    await llm.getByText('system', { exact: true }).first().waitFor();
    const mcp = page.locator('details', { hasText: 'time.get_current_time' }).first();
    await mcp.locator('summary').click();
    await mcp.getByText('"timezone": "UTC"').first().waitFor();
    const shot = screenshotPath('trace');
    if (shot) await page.screenshot({ path: shot });
    expect(await seriousA11yViolations(page)).toEqual([]);
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it('marks a conclusion forced by the iteration limit', async () => {
    const { page, problems } = await newPage(browser);
    const id = await tarsy.submit('DashForced');
    await tarsy.waitForStatus(id, ['completed', 'failed']);
    await page.goto(`${tarsy.url}/ui/sessions/${id}`);
    const timeline = page.getByRole('region', { name: 'Timeline' });
    await timeline.getByText('Forced conclusion: the pod is still crash-looping').first().waitFor();
    await timeline.locator('.execution-header .badge', { hasText: 'forced conclusion' }).waitFor();
    await timeline.locator('.entry-final_analysis .badge', { hasText: 'forced conclusion' }).first().waitFor();
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it('warns that an investigation ran without one of its MCP servers', async () => {
    const { page, problems } = await newPage(browser);
    const id = await tarsy.submit('DashDegraded');
    await tarsy.waitForStatus(id, ['completed', 'failed']);
    await page.goto(`${tarsy.url}/ui/sessions/${id}`);
    const warnings = page.getByRole('region', { name: 'Warnings' });
    await warnings.getByText('its answer may be incomplete').waitFor();
    await warnings.getByText(/^MCP server broken unavailable/).waitFor();
    await page.getByRole('region', { name: 'Timeline' }).getByText('Answered with the time server alone.').first().waitFor();
    expect(await seriousA11yViolations(page)).toEqual([]);
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it('shows a not-found page for an unknown session', async () => {
    const { page } = await newPage(browser);
    await page.goto(`${tarsy.url}/ui/sessions/no-such-session`);
    await page.getByRole('heading', { name: 'Not found' }).waitFor();
    await page.getByText('There is no session no-such-session.').waitFor();
    await page.goto(`${tarsy.url}/ui/no/such/page`);
    await page.getByRole('heading', { name: 'Not found' }).waitFor();
    await page.context().close();
  });
});

describe('scoring', () => {
  it('shows the judge\'s score live in the list, on the session and on its scoring page, and re-scores', async () => {
    const { page, problems } = await newPage(browser);
    await page.goto(`${tarsy.url}/ui/`);
    await page.getByRole('heading', { name: 'Sessions' }).waitFor();
    const id = await tarsy.submit('DashScored');
    const row = page.locator(`tr[data-session-id="${id}"]`);
    await row.waitFor({ timeout: 10_000 });
    // The score arrives after the session completed, without a reload.
    await expect.poll(() => row.locator('.score-badge').textContent(), { timeout: 30_000 }).toBe('72/100');
    expect(await row.locator('.failure-tag').allTextContents()).toEqual(['incomplete-evidence']);
    expect(await row.locator('.badge').textContent()).toBe('completed');
    const list = screenshotPath('sessions');
    if (list) await page.screenshot({ path: list });

    await row.getByRole('link', { name: 'DashScored' }).click();
    const card = page.getByRole('region', { name: 'Score' });
    await card.waitFor();
    expect(await card.locator('.score-badge').textContent()).toBe('72/100');
    await page.getByRole('link', { name: 'Scoring', exact: true }).click();
    await page.getByRole('heading', { name: 'Scoring', level: 1 }).waitFor();
    const first = page.getByRole('region', { name: /Attempt 1/ });
    await first.getByText('memory history: how the working set grew before each kill').waitFor();
    expect(await first.textContent()).toContain('verdict: correct');
    const shot = screenshotPath('scoring');
    if (shot) await page.screenshot({ path: shot, fullPage: true });
    expect(await seriousA11yViolations(page)).toEqual([]);

    // A re-score: the judge's answer has no score, so the attempt fails and
    // says why; the session keeps its score.
    await page.getByRole('button', { name: 'Score again' }).click();
    const second = page.getByRole('region', { name: /Attempt 2/ });
    await second.getByText(/No score: the judge gave no score/).waitFor({ timeout: 30_000 });
    const detail = (await (await fetch(`${tarsy.url}/api/v1/sessions/${id}`)).json()) as { score: unknown };
    expect(detail.score).toEqual({ status: 'failed', score: 72, failure_tags: ['incomplete-evidence'] });
    expect(problems).toEqual([]);
    await page.context().close();
  });
});
