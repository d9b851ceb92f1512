// The review queue as reviewers use it, against a real `tarsy serve`: two
// browsers see each other's changes live, a review is given from the
// keyboard alone, several sessions are reviewed at once.

import type { Browser, Page } from 'playwright-core';
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

/** The count a group's heading shows. */
async function count(page: Page, group: string): Promise<string | null> {
  return page.locator(`section[data-group="${group}"] .count`).textContent();
}

describe('triage', () => {
  it('updates live for every reviewer, reviews from the keyboard, and reviews in bulk', async () => {
    const ids = [await tarsy.submit('DashScored'), await tarsy.submit('DashDegraded'), await tarsy.submit('DashForced')];
    for (const id of ids) await tarsy.waitForStatus(id, ['completed']);
    const [scored, degraded, forced] = ids as [string, string, string];

    const a = await newPage(browser);
    const b = await newPage(browser);
    for (const { page } of [a, b]) {
      await page.goto(`${tarsy.url}/ui/triage`);
      await page.getByRole('heading', { name: 'Triage' }).waitFor();
      await expect.poll(() => count(page, 'needs_review'), { timeout: 10_000 }).toBe('(3)');
    }

    // B claims; A sees it move without a reload.
    await b.page.locator(`section[data-group="needs_review"] li[data-session-id="${scored}"]`).getByRole('button', { name: /^Claim/ }).click();
    await expect.poll(() => count(a.page, 'in_progress'), { timeout: 10_000 }).toBe('(1)');
    const claimed = a.page.locator(`section[data-group="in_progress"] li[data-session-id="${scored}"]`);
    expect(await claimed.textContent()).toContain('with api-client');

    // A reviews it from the keyboard alone.
    await claimed.getByRole('button', { name: /^Review/ }).focus();
    await a.page.keyboard.press('Enter');
    const dialog = a.page.getByRole('dialog', { name: /Review DashScored/ });
    await dialog.waitFor();
    expect(await a.page.evaluate(() => (document.activeElement as HTMLInputElement | null)?.value)).toBe('accurate');
    await a.page.keyboard.press('ArrowDown');
    await a.page.keyboard.press('Tab');
    await a.page.keyboard.type('rolled back to 2.14.3');
    await a.page.keyboard.press('Tab');
    await a.page.keyboard.type('found it fast');
    expect(await seriousA11yViolations(a.page)).toEqual([]);
    const shot = screenshotPath('review-dialog');
    if (shot) await a.page.screenshot({ path: shot });
    await a.page.keyboard.press('Tab');
    await a.page.keyboard.press('Enter');
    await dialog.waitFor({ state: 'detached' });
    const reviewed = b.page.locator(`section[data-group="reviewed"] li[data-session-id="${scored}"]`);
    await reviewed.waitFor({ timeout: 10_000 });
    expect(await reviewed.textContent()).toContain('reviewed by api-client · Partially accurate');
    const detail = (await (await fetch(`${tarsy.url}/api/v1/sessions/${scored}/review`)).json()) as {
      review: { rating: string; action_taken: string; feedback: string };
    };
    expect(detail.review).toMatchObject({
      rating: 'partially_accurate',
      action_taken: 'rolled back to 2.14.3',
      feedback: 'found it fast',
    });

    // B acknowledges the other two at once.
    for (const id of [degraded, forced]) {
      await b.page.locator(`li[data-session-id="${id}"] input[type="checkbox"]`).check();
    }
    await b.page.getByRole('button', { name: 'Review selected (2)' }).click();
    const bulk = b.page.getByRole('dialog', { name: /Review 2 sessions/ });
    await bulk.getByLabel('Acknowledge without a rating').check();
    await bulk.getByRole('button', { name: 'Submit review' }).click();
    await b.page.getByText('2 sessions reviewed.').waitFor();
    await expect.poll(() => count(a.page, 'reviewed'), { timeout: 10_000 }).toBe('(3)');
    expect(await count(a.page, 'needs_review')).toBe('(0)');
    const list = screenshotPath('triage');
    if (list) await a.page.screenshot({ path: list });
    expect(await seriousA11yViolations(a.page)).toEqual([]);
    expect(a.problems).toEqual([]);
    expect(b.problems).toEqual([]);
    await a.page.context().close();
    await b.page.context().close();
  });

  it('shows the quality page: what to build next, tags, and where people and the judge disagree', async () => {
    const id = await tarsy.submit('DashScored');
    await tarsy.waitForStatus(id, ['completed']);
    // Wait for the judge, then rate the investigation inaccurate although it scored 72.
    await expect
      .poll(async () => ((await (await fetch(`${tarsy.url}/api/v1/sessions/${id}`)).json()) as { score?: { status: string } }).score?.status, {
        timeout: 30_000,
      })
      .toBe('completed');
    const rated = await fetch(`${tarsy.url}/api/v1/sessions/${id}/review`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ action: 'complete', rating: 'inaccurate', feedback: 'wrong pod' }),
    });
    expect(rated.status).toBe(200);

    const { page, problems } = await newPage(browser);
    await page.goto(`${tarsy.url}/ui/quality`);
    await page.getByRole('heading', { name: 'Quality', level: 1 }).waitFor();
    // Both scored sessions' reports ask for the same tool.
    const tool = page.locator('tr[data-tool="memory history"]');
    await tool.waitFor();
    expect(await tool.locator('td').first().textContent()).toContain('2');
    expect(await page.locator('tr[data-tag="incomplete-evidence"] td').textContent()).toContain('2');
    const disagreement = page.locator(`li[data-session-id="${id}"]`);
    expect(await disagreement.textContent()).toBe('DashScored: scored 72, rated Inaccurate');
    expect(await seriousA11yViolations(page)).toEqual([]);
    const shot = screenshotPath('quality');
    if (shot) await page.screenshot({ path: shot, fullPage: true });
    // A failure tag opens the session list filtered by it.
    await page.getByRole('link', { name: 'incomplete-evidence' }).click();
    await page.getByText('Only sessions whose score is tagged').waitFor();
    await expect.poll(() => page.locator('tr[data-session-id]').count(), { timeout: 10_000 }).toBe(2);
    expect(problems).toEqual([]);
    await page.context().close();
  });
});
