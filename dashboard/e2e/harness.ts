// What the browser tests and the benchmark share: a real `tarsy serve` on a
// free port with the scripted configuration of e2e/config, Debian's chromium
// driven by playwright-core, a TCP proxy that can cut connections, and axe.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
export const dashboardDir = path.resolve(here, '..');
export const repoDir = path.resolve(dashboardDir, '..');

/** The tarsy binary: $TARSY_BIN, else the debug build in the cargo target dir. */
export function tarsyBinary(): string {
  const target = process.env.CARGO_TARGET_DIR ?? path.join(homedir(), '.cache/tarsy/target');
  const bin = process.env.TARSY_BIN ?? path.join(target, 'debug', 'tarsy');
  if (!existsSync(bin)) {
    throw new Error(`no tarsy binary at ${bin}: run \`cargo build -p tarsy\` (after \`npm run build\`) or set TARSY_BIN`);
  }
  return bin;
}

export interface Tarsy {
  /** http://127.0.0.1:PORT */
  url: string;
  port: number;
  stop: () => Promise<void>;
  /** Submits an alert over REST; returns the session id. */
  submit: (alertType: string, data?: unknown) => Promise<string>;
  /** Polls the session until it is in one of `statuses`. */
  waitForStatus: (id: string, statuses: string[], timeoutMs?: number) => Promise<string>;
}

/** Starts `tarsy serve` with a fresh SQLite database on a free port. */
export async function startTarsy(configDir = path.join(here, 'config')): Promise<Tarsy> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'tarsy-dash-'));
  const child = spawn(
    tarsyBinary(),
    ['serve', '--config', configDir, '--listen', '127.0.0.1', '--port', '0', '--database-url', `sqlite:${dataDir}/tarsy.db`],
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? 'warn' } },
  );
  let log = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`tarsy serve did not start within 20 s:\n${log}`)), 20_000);
    child.stderr?.on('data', (data: Buffer) => {
      log += data.toString();
      const match = /TARSy API on (http:\/\/[\d.]+:\d+)/.exec(log);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`tarsy serve exited (${code}):\n${log}`));
    });
  });
  const port = Number(new URL(url).port);
  return {
    url,
    port,
    stop: () => stopChild(child).finally(() => rmSync(dataDir, { recursive: true, force: true })),
    submit: async (alertType, data = 'pod: web-0\nnamespace: shop') => {
      const response = await fetch(`${url}/api/v1/alerts`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ alert_type: alertType, data }),
      });
      const body = (await response.json()) as { session_id?: string; message?: string };
      if (response.status !== 202 || !body.session_id) throw new Error(`submit failed: ${JSON.stringify(body)}`);
      return body.session_id;
    },
    waitForStatus: async (id, statuses, timeoutMs = 30_000) => {
      const deadline = Date.now() + timeoutMs;
      let last = '';
      while (Date.now() < deadline) {
        const session = (await (await fetch(`${url}/api/v1/sessions/${id}`)).json()) as { status: string };
        last = session.status;
        if (statuses.includes(last)) return last;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error(`session ${id} is still ${last} after ${timeoutMs} ms`);
    },
  };
}

function stopChild(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.on('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** Debian's chromium, headless, with nothing reaching out to the network. */
export async function launchBrowser(): Promise<Browser> {
  // Playwright gives every launch a fresh temporary profile (--user-data-dir).
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** A page that fails the test on any console error or CSP violation. */
export async function newPage(browser: Browser): Promise<{ page: Page; problems: string[] }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  // The clipboard is asked for by "copy report"; grant it like a user would.
  await context.grantPermissions(['clipboard-read', 'clipboard-write']);
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(message.text());
  });
  page.on('pageerror', (error) => problems.push(error.message));
  return { page, problems };
}

const require = createRequire(import.meta.url);
const axeSource = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/** Runs axe-core in the page; returns the serious and critical violations. */
export async function seriousA11yViolations(page: Page): Promise<AxeViolation[]> {
  // Evaluated through the DevTools protocol, which the page's CSP does not govern.
  await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (ctx: Document, opts: object) => Promise<{ violations: AxeViolation[] }> } }).axe;
    const result = await axe.run(document, { resultTypes: ['violations'] });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target })) }));
  });
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

/**
 * A TCP proxy in front of tarsy: the browser talks to it, and `cut()` drops
 * every open connection and refuses new ones until `restore()`, the way a
 * network outage looks to a browser.
 */
export async function startProxy(targetPort: number): Promise<{
  url: string;
  cut: () => void;
  restore: () => void;
  close: () => Promise<void>;
}> {
  const sockets = new Set<net.Socket>();
  let refusing = false;
  const server = net.createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    const upstream = net.connect(targetPort, '127.0.0.1');
    sockets.add(client);
    sockets.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop);
    upstream.on('error', drop);
    client.on('close', drop);
    upstream.on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    cut: () => {
      refusing = true;
      for (const socket of sockets) socket.destroy();
      sockets.clear();
    },
    restore: () => {
      refusing = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Where screenshots for the README go, when asked for (TARSY_SCREENSHOTS=1). */
export function screenshotPath(name: string): string | null {
  if (process.env.TARSY_SCREENSHOTS !== '1') return null;
  return path.join(repoDir, 'docs', 'screenshots', `${name}.png`);
}
