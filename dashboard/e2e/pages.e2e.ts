// Submitting alerts, the system page, model output that carries markup, and
// a dropped WebSocket: each as a person meets it in the browser.

import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  launchBrowser,
  newPage,
  screenshotPath,
  seriousA11yViolations,
  startProxy,
  startTarsy,
  type Tarsy,
} from './harness';

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

describe('submit alert', () => {
  it('validates before sending, shows the server 400 inline, and opens the new session', async () => {
    const { page, problems } = await newPage(browser);
    await page.goto(`${tarsy.url}/ui/submit`);
    await page.getByRole('heading', { name: 'Submit an alert' }).waitFor();
    // Nothing filled in: both required fields are flagged, nothing is sent.
    await page.getByRole('button', { name: 'Submit alert' }).click();
    await page.getByText('Choose an alert type.').waitFor();
    await page.getByText('Enter the alert data.').waitFor();
    expect(await page.getByLabel('Alert type', { exact: true }).getAttribute('aria-invalid')).toBe('true');

    // Invalid JSON and a non-http runbook are caught in the browser too.
    await page.getByLabel('Alert type', { exact: true }).selectOption('DashDemo');
    await page.getByLabel('JSON').check();
    await page.getByLabel('Alert data').fill('{"pod": ');
    await page.getByLabel('Runbook URL (optional)').fill('ftp://runbooks/pod');
    await page.getByRole('button', { name: 'Submit alert' }).click();
    await page.getByText(/Not valid JSON/).waitFor();
    await page.getByText('The runbook URL must be an http:// or https:// URL.').waitFor();
    const shot = screenshotPath('submit');
    if (shot) await page.screenshot({ path: shot, fullPage: true });

    // The server's own refusal (a chain that does not handle it) is shown as sent.
    await page.getByLabel('Alert data').fill('{"pod": "web-0"}');
    await page.getByLabel('Runbook URL (optional)').fill('');
    await page.getByLabel('Override the chain\'s MCP servers for this alert').check();
    await page.getByRole('button', { name: 'Submit alert' }).click();
    await page.getByText('Select at least one MCP server, or turn the override off.').waitFor();
    await page.getByLabel('time', { exact: true }).check();
    await page.getByLabel('Tools of time (comma-separated; empty: all)').fill('no_such_tool, ');
    // Every control of the form, the override's included, is labelled.
    expect(await seriousA11yViolations(page)).toEqual([]);
    await page.getByLabel('Override the chain\'s MCP servers for this alert').uncheck();
    await page.evaluate(() => {
      // A chain the server does not know (removed since the page loaded):
      // the select offers only known chains, so it is added the way a stale
      // page would still offer it.
      const select = document.getElementById('chain') as HTMLSelectElement;
      select.add(new Option('retired-chain', 'retired-chain'));
    });
    await page.getByLabel('Chain (optional: otherwise chosen by alert type)').selectOption('retired-chain');
    // Submitted from the keyboard.
    await page.getByRole('button', { name: 'Submit alert' }).focus();
    await page.keyboard.press('Enter');
    await page.getByText('The server refused the alert: unknown chain "retired-chain"').waitFor();

    // A valid alert goes through and opens its session.
    await page.getByLabel('Chain (optional: otherwise chosen by alert type)').selectOption('');
    await page.getByRole('button', { name: 'Submit alert' }).click();
    await page.waitForURL(/\/ui\/sessions\/[0-9a-f-]+$/);
    await page.getByRole('heading', { name: /DashDemo/ }).waitFor();
    expect(await seriousA11yViolations(page)).toEqual([]);
    expect(problems.filter((p) => !p.includes('400'))).toEqual([]);
    await page.context().close();
  });
});

describe('system page', () => {
  it('shows health, MCP servers and the configuration, and no secret', async () => {
    const { page, problems } = await newPage(browser);
    await page.goto(`${tarsy.url}/ui/system`);
    await page.getByRole('heading', { name: 'System', exact: true }).waitFor();
    await page.getByRole('cell', { name: 'dash-demo' }).waitFor();
    // An agent by its label, with the name chains use beside it.
    const investigator = page.getByRole('row', { name: /InvestigatorAgent/ }).first();
    await investigator.getByRole('cell', { name: 'investigator-agent' }).waitFor();
    await page.getByRole('cell', { name: 'scripted-dashboard' }).waitFor();
    await page.getByRole('cell', { name: 'time', exact: true }).first().waitFor();
    await page.getByText('sqlite: ok').waitFor();
    const text = (await page.textContent('body')) ?? '';
    expect(text).not.toContain('mcp-server-time --local-timezone');
    expect(text).not.toContain('GOOGLE_API_KEY');
    const shot = screenshotPath('system');
    if (shot) await page.screenshot({ path: shot, fullPage: true });
    expect(await seriousA11yViolations(page)).toEqual([]);
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it('can be reached and used from the keyboard alone', async () => {
    const { page } = await newPage(browser);
    await page.goto(`${tarsy.url}/ui/`);
    await page.getByRole('heading', { name: 'Sessions' }).waitFor();
    // Skip link first, then the main navigation.
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Sessions');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Triage');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Quality');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Usage');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Memory');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Submit alert');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('System');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'System', exact: true }).waitFor();
    await page.context().close();
  });
});

describe('security', () => {
  it('renders markup in model output as inert text, under a strict CSP', async () => {
    const { page, problems } = await newPage(browser);
    const id = await tarsy.submit('DashMarkup');
    await tarsy.waitForStatus(id, ['completed']);
    const response = await page.goto(`${tarsy.url}/ui/sessions/${id}`);
    const csp = response?.headers()['content-security-policy'] ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe');
    const timeline = page.getByRole('region', { name: 'Timeline' });
    await timeline.getByText('End of markup test.').first().waitFor();
    // Click the link the model wrote: its javascript: URL was removed.
    const link = timeline.getByRole('link', { name: 'click me' }).first();
    if ((await link.count()) > 0) {
      expect(await link.getAttribute('href')).not.toMatch(/^javascript:/i);
      await link.click({ modifiers: ['Control'] }).catch(() => undefined);
    }
    await page.waitForTimeout(500);
    expect(await page.evaluate(() => (window as unknown as { __tarsyXss?: string }).__tarsyXss)).toBeUndefined();
    // No element from the model's HTML made it into the page.
    expect(await timeline.locator('script').count()).toBe(0);
    expect(await page.locator('img[onerror], [onerror]').count()).toBe(0);
    expect(await page.locator('.markdown img').count()).toBe(0);
    expect(problems.filter((p) => !p.includes('favicon'))).toEqual([]);
    await page.context().close();
  });

  it('ships no secret and no inline script in the served app', async () => {
    const html = await (await fetch(`${tarsy.url}/ui/`)).text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    const scripts = [...html.matchAll(/src="([^"]+\.js)"/g)].map((m) => m[1]);
    expect(scripts.length).toBeGreaterThan(0);
    for (const src of scripts) {
      const js = await (await fetch(`${tarsy.url}${src}`)).text();
      expect(js).not.toMatch(/api[_-]?key\s*[:=]\s*["'][A-Za-z0-9_-]{16,}/i);
      expect(js).not.toMatch(/AIza[0-9A-Za-z_-]{35}|sk-[A-Za-z0-9]{20,}|ghp_[A-Za-z0-9]{36}/);
    }
  });
});

describe('a dropped WebSocket', () => {
  it('shows a banner, recovers, and catches up without duplicating events', async () => {
    const proxy = await startProxy(tarsy.port);
    const { page } = await newPage(browser);
    try {
      const id = await tarsy.submit('DashSlow');
      await page.goto(`${proxy.url}/ui/sessions/${id}`);
      const timeline = page.getByRole('region', { name: 'Timeline' });
      await timeline.getByText(/word0[2-9]/).first().waitFor({ timeout: 15_000 });

      // The network goes away until the investigation has finished on the
      // server: its last events (the final analysis, the executive summary,
      // the status changes) happen while the page cannot hear them.
      proxy.cut();
      const banner = page.getByRole('status').filter({ hasText: 'Live updates interrupted' });
      await banner.waitFor({ timeout: 5_000 });
      const shot = screenshotPath('reconnecting');
      if (shot) await page.screenshot({ path: shot });
      await tarsy.waitForStatus(id, ['completed'], 30_000);
      expect(await timeline.locator('.entry-final_analysis').count()).toBe(0);
      proxy.restore();

      // Back: the banner goes, and what happened meanwhile is caught up
      // over the WebSocket (last_event_id), without a reload.
      await expect.poll(() => banner.count(), { timeout: 15_000 }).toBe(0);
      await timeline.locator('.entry-final_analysis').first().waitFor({ timeout: 15_000 });
      await timeline.locator('.entry-executive_summary').first().waitFor({ timeout: 15_000 });
      await timeline.getByText(/word40/).first().waitFor({ timeout: 15_000 });
      await page.getByRole('heading', { name: /DashSlow/ }).getByText('completed').waitFor({ timeout: 15_000 });
      expect(await page.evaluate(() => performance.getEntriesByType('navigation').length)).toBe(1);

      // Exactly the stored events, each once.
      const stored = (await (await fetch(`${tarsy.url}/api/v1/sessions/${id}/timeline`)).json()) as { id: string }[];
      const shown = await timeline.locator('article.entry').evaluateAll((els) => els.map((e) => e.id));
      expect(new Set(shown).size).toBe(shown.length);
      expect(shown.sort()).toEqual(stored.map((e) => `event-${e.id}`).sort());
      const text = (await timeline.locator('.entry-llm_response').first().textContent()) ?? '';
      expect(text.match(/word01/g)?.length).toBe(1);
      expect(text.match(/word40/g)?.length).toBe(1);
    } finally {
      await page.context().close();
      await proxy.close();
    }
  });
});
