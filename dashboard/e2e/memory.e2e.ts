// Investigation memory as a person meets it in the browser, against a real
// `tarsy serve` with the example configuration (examples/config: memory on,
// a scripted reflector that learns one memory from each investigation of
// the example alert): the session page shows what an investigation learned
// and what it was given, the Memory page lists, searches, corrects,
// deprecates, restores and deletes.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  launchBrowser,
  newPage,
  repoDir,
  screenshotPath,
  seriousA11yViolations,
  startTarsy,
  type Tarsy,
} from './harness';

interface Memory {
  id: string;
  content: string;
  valence: string;
  confidence: number;
  seen_count: number;
  deprecated: boolean;
  source_session_id: string | null;
}

interface SessionMemories {
  injected: Memory[];
  learned: Memory[];
}

/** The example alert's type and data (examples/alerts/pod-crashloop.yaml, its `data: |` block). */
function exampleAlert(): { alertType: string; data: string } {
  const text = readFileSync(path.join(repoDir, 'examples', 'alerts', 'pod-crashloop.yaml'), 'utf8');
  const alertType = /^\s+alertType:\s*(\S+)\s*$/m.exec(text)?.[1];
  const lines = text.split('\n');
  const start = lines.findIndex((l) => /^\s+data:\s*\|\s*$/.test(l));
  if (!alertType || start < 0) throw new Error('cannot read examples/alerts/pod-crashloop.yaml');
  const block: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (line.trim() !== '' && !line.startsWith('    ')) break;
    block.push(line.slice(4));
  }
  return { alertType, data: `${block.join('\n').trimEnd()}\n` };
}

let tarsy: Tarsy;
let browser: Browser;
const alert = exampleAlert();
/** The sessions of the two investigations and the memory the first taught. */
let first = '';
let second = '';
let memoryId = '';
const learnedText = 'compare the new ReplicaSet';

async function get<T>(url: string): Promise<T> {
  return (await (await fetch(`${tarsy.url}${url}`)).json()) as T;
}

/** Waits until the session's reflector stage (kind `memory`) has ended and what it learned is stored. */
async function reflected(id: string, check: (m: SessionMemories) => boolean): Promise<SessionMemories> {
  await tarsy.waitForStatus(id, ['completed'], 60_000);
  let last: SessionMemories = { injected: [], learned: [] };
  await expect
    .poll(
      async () => {
        const detail = await get<{ stages: { kind: string; status: string }[] }>(`/api/v1/sessions/${id}`);
        last = await get<SessionMemories>(`/api/v1/sessions/${id}/memories`);
        return detail.stages.some((s) => s.kind === 'memory' && s.status === 'completed') && check(last);
      },
      { timeout: 45_000, interval: 250 },
    )
    .toBe(true);
  return last;
}

/** A memory's row on the Memory page. */
function row(page: Page, id = memoryId) {
  return page.locator(`tr[data-memory-id="${id}"]`);
}

/** Console errors apart from the failed requests a test causes on purpose (400, 404). */
function unexpected(problems: string[]): string[] {
  return problems.filter((p) => !/status of (400|404)/.test(p));
}

beforeAll(async () => {
  tarsy = await startTarsy(path.join(repoDir, 'examples', 'config'));
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await tarsy?.stop();
});

describe('memories on the session page', () => {
  it('shows what the first investigation learned (live) and what the second was given, linked both ways', async () => {
    const { page, problems } = await newPage(browser);
    first = await tarsy.submit(alert.alertType, alert.data);
    // Opened while it investigates: the memory appears once the reflector
    // has run after the score, without a reload.
    await page.goto(`${tarsy.url}/ui/sessions/${first}`);
    await page.getByRole('heading', { name: /PodCrashLooping/ }).waitFor();
    const panel = page.getByRole('region', { name: 'Memories', exact: true });
    const learned = panel.locator('section[data-group="memories-learned"]');
    await learned.getByRole('link', { name: new RegExp(learnedText) }).waitFor({ timeout: 60_000 });
    const taught = await reflected(first, (m) => m.learned.length === 1);
    memoryId = taught.learned[0]?.id ?? '';
    expect(taught.injected).toEqual([]);
    expect(await learned.getByRole('heading').textContent()).toBe('Memories learned (1)');
    expect(await learned.locator(`li[data-memory-id="${memoryId}"]`).textContent()).toContain('Procedure');
    expect(await panel.locator('section[data-group="memories-used"]').textContent()).toBe('Memories used (0)None.');
    expect(await page.evaluate(() => performance.getEntriesByType('navigation').length)).toBe(1);

    // The second investigation of the same alert is given the memory in its prompt.
    second = await tarsy.submit(alert.alertType, alert.data);
    const given = await reflected(second, (m) => m.injected.length === 1);
    expect(given.injected[0]?.id).toBe(memoryId);
    expect(given.learned).toEqual([]);
    await page.goto(`${tarsy.url}/ui/sessions/${second}`);
    const used = panel.locator('section[data-group="memories-used"]');
    const link = used.getByRole('link', { name: new RegExp(learnedText) });
    await link.waitFor();
    expect(await used.getByRole('heading').textContent()).toBe('Memories used (1)');
    // Learned again: reinforced, its confidence raised.
    expect(await used.textContent()).toContain('confidence 0.90');
    expect(await panel.locator('section[data-group="memories-learned"]').textContent()).toContain('None.');
    expect(await seriousA11yViolations(page)).toEqual([]);
    await panel.scrollIntoViewIfNeeded();
    const shot = screenshotPath('session-memories');
    if (shot) await page.screenshot({ path: shot });

    // The memory opens on the Memory page, which links back to where it was learned.
    await link.click();
    await page.waitForURL(`${tarsy.url}/ui/memories?id=${memoryId}`);
    const card = page.getByRole('region', { name: 'Linked memory' });
    await card.getByText(new RegExp(learnedText)).waitFor();
    expect(await card.textContent()).toContain('2 times');
    await row(page).waitFor();
    expect(await row(page).getAttribute('aria-current')).toBe('true');
    expect(await page.getByRole('link', { name: 'Memory', exact: true }).getAttribute('aria-current')).toBe('page');
    await card.getByRole('link', { name: /PodCrashLooping/ }).click();
    await page.waitForURL(`${tarsy.url}/ui/sessions/${first}`);
    await page.getByRole('heading', { name: 'Memories learned (1)' }).waitFor();
    expect(problems).toEqual([]);
    await page.context().close();
  }, 150_000);
});

describe('the Memory page', () => {
  it('lists the memory, and searches and filters it in the URL', async () => {
    const { page, problems } = await newPage(browser);
    await page.goto(`${tarsy.url}/ui/memories`);
    await page.getByRole('heading', { name: 'Memory', level: 1 }).waitFor();
    const cells = row(page).locator('td');
    await row(page).waitFor();
    expect(await cells.nth(0).textContent()).toContain(learnedText);
    expect(await cells.nth(1).textContent()).toBe('Procedure');
    expect(await cells.nth(2).textContent()).toBe('Helped');
    expect(await cells.nth(3).textContent()).toBe('0.90');
    expect(await cells.nth(4).textContent()).toBe('2');
    expect(await cells.nth(5).getByRole('link').getAttribute('href')).toBe(`/ui/sessions/${first}`);
    expect(await cells.nth(6).textContent()).toMatch(/just now|min ago/);
    await page.getByText('Page 1 of 1 (1 memory)').waitFor();
    expect(await seriousA11yViolations(page)).toEqual([]);
    const shot = screenshotPath('memory');
    if (shot) await page.screenshot({ path: shot, fullPage: true });

    // Full-text search: its words find it, others find nothing.
    const search = page.getByLabel('Search');
    await search.fill('CATALOG_PRELOAD sizing');
    await expect.poll(() => page.url()).toContain('q=CATALOG_PRELOAD+sizing');
    await row(page).waitFor();
    await search.fill('zebra unicorn');
    await page.getByText('No memories match.').waitFor();
    expect(await row(page).count()).toBe(0);
    await search.fill('');
    await row(page).waitFor();
    expect(page.url()).not.toContain('q=');

    // Filters live in the URL: a reload keeps them.
    await page.getByLabel('Category').selectOption('fact');
    await page.getByText('No memories match.').waitFor();
    expect(page.url()).toContain('category=fact');
    await page.reload();
    await page.getByText('No memories match.').waitFor();
    expect(await page.getByLabel('Category').inputValue()).toBe('fact');
    await page.getByLabel('Category').selectOption('procedure');
    await row(page).waitFor();
    await page.getByLabel('Valence').selectOption('misled');
    await page.getByText('No memories match.').waitFor();
    await page.getByLabel('Valence').selectOption('');
    await row(page).waitFor();
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it('edits a memory from the keyboard: the server refuses an empty text and masks a secret', async () => {
    const { page, problems } = await newPage(browser);
    await page.goto(`${tarsy.url}/ui/memories`);
    await row(page).getByRole('button', { name: /^Edit/ }).focus();
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog', { name: 'Edit the memory' });
    await dialog.waitFor();
    // Focus starts on the text.
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('memory-content');

    // An empty text: the server's own message, in the dialog.
    await page.keyboard.press('ControlOrMeta+A');
    await page.keyboard.type('   ');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await dialog.getByRole('alert').getByText('content cannot be empty').waitFor();

    await dialog.getByLabel('Content').fill('Roll back checkout-api before resizing it; the console login is password=hunter2secret');
    await dialog.getByLabel('Valence').selectOption('misled');
    await dialog.getByLabel('Confidence (0–1)').fill('0.5');
    expect(await seriousA11yViolations(page)).toEqual([]);
    await dialog.getByLabel('Content').focus();
    await page.keyboard.press('Control+Enter');
    await dialog.waitFor({ state: 'detached' });
    await page.getByRole('status').getByText('Part of its text was masked').waitFor();
    const cells = row(page).locator('td');
    await expect.poll(() => cells.nth(0).textContent()).toContain('password=[MASKED_');
    expect(await cells.nth(0).textContent()).not.toContain('hunter2');
    expect(await cells.nth(2).locator('.valence-misled').textContent()).toContain('Misled');
    expect(await cells.nth(3).textContent()).toBe('0.50');
    const stored = await get<Memory>(`/api/v1/memories/${memoryId}`);
    expect(stored).toMatchObject({ valence: 'misled', confidence: 0.5 });
    expect(stored.content).toMatch(/^Roll back checkout-api before resizing it; the console login is password=\[MASKED_\w+\]$/);

    // Nothing changed: Save just closes.
    await row(page).getByRole('button', { name: /^Edit/ }).click();
    await dialog.waitFor();
    await dialog.getByRole('button', { name: 'Save' }).click();
    await dialog.waitFor({ state: 'detached' });
    expect(unexpected(problems)).toEqual([]);
    await page.context().close();
  });

  it('deprecates and restores a memory', async () => {
    const { page, problems } = await newPage(browser);
    await page.goto(`${tarsy.url}/ui/memories`);
    await row(page).getByRole('button', { name: /^Deprecate/ }).click();
    await page.getByRole('status').getByText('Memory deprecated').waitFor();
    // Live memories only by default: it leaves the list.
    await page.getByText('No live memories').waitFor();
    expect((await get<Memory>(`/api/v1/memories/${memoryId}`)).deprecated).toBe(true);

    // A click, then the state it leads to: the box follows the URL, which
    // a re-render of the list may apply a moment after the click.
    const showDeprecated = page.getByLabel('Show deprecated');
    await showDeprecated.click();
    await expect.poll(() => showDeprecated.isChecked()).toBe(true);
    expect(page.url()).toContain('deprecated=show');
    await row(page).getByText('deprecated', { exact: true }).waitFor();
    await row(page).getByRole('button', { name: /^Restore/ }).click();
    await page.getByRole('status').getByText('Memory restored').waitFor();
    await expect.poll(() => row(page).getByText('deprecated', { exact: true }).count()).toBe(0);
    expect((await get<Memory>(`/api/v1/memories/${memoryId}`)).deprecated).toBe(false);
    await showDeprecated.click();
    await expect.poll(() => showDeprecated.isChecked()).toBe(false);
    expect(page.url()).not.toContain('deprecated=show');
    await row(page).waitFor();
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it('deletes a memory only once confirmed', async () => {
    const { page, problems } = await newPage(browser);
    await page.goto(`${tarsy.url}/ui/memories?id=${memoryId}`);
    await page.getByRole('region', { name: 'Linked memory' }).waitFor();
    await row(page).getByRole('button', { name: /^Delete/ }).click();
    const confirm = page.getByRole('dialog', { name: 'Delete this memory?' });
    await confirm.waitFor();
    // Focus starts on Cancel; Escape keeps the memory.
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Cancel');
    expect(await seriousA11yViolations(page)).toEqual([]);
    await page.keyboard.press('Escape');
    await confirm.waitFor({ state: 'detached' });
    expect((await fetch(`${tarsy.url}/api/v1/memories/${memoryId}`)).status).toBe(200);

    await row(page).getByRole('button', { name: /^Delete/ }).click();
    await confirm.getByRole('button', { name: 'Delete' }).click();
    await confirm.waitFor({ state: 'detached' });
    await page.getByRole('status').getByText('Memory deleted.').waitFor();
    await page.getByText('No live memories').waitFor();
    // The link to it is closed with it.
    await expect.poll(() => page.url()).not.toContain('id=');
    expect((await fetch(`${tarsy.url}/api/v1/memories/${memoryId}`)).status).toBe(404);

    // A link to a deleted memory says so; the sessions no longer list it.
    await page.goto(`${tarsy.url}/ui/memories?id=${memoryId}`);
    await page.getByText(`There is no memory ${memoryId}: it may have been deleted.`).waitFor();
    const answered = page.waitForResponse((r) => r.url().endsWith(`/api/v1/sessions/${first}/memories`));
    await page.goto(`${tarsy.url}/ui/sessions/${first}`);
    await page.getByRole('heading', { name: 'Executive summary' }).waitFor();
    expect((await answered).status()).toBe(200);
    expect(await page.getByRole('region', { name: 'Memories', exact: true }).count()).toBe(0);
    expect(unexpected(problems)).toEqual([]);
    await page.context().close();
  });
});
