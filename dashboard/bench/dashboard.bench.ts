// The dashboard's performance figures, printed (never asserted):
//   - initial JavaScript of the first page, gzipped;
//   - a session of 5,000+ timeline events: time until its timeline is on
//     screen, DOM rows kept (virtualization), frame times while scrolling
//     through all of it;
//   - stream chunk received by the browser → rendered in a frame, p50/p99.
// Against the real `tarsy serve` with a generated scripted configuration and
// the real time MCP server. Run: npm run bench (after npm run build and
// cargo build -p tarsy).

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { expect, it } from 'vitest';
import { dashboardDir, launchBrowser, newPage, startTarsy } from '../e2e/harness';

const TOOL_CALLS_PER_ANSWER = 1250;
const ANSWERS = 4; // 5,000 tool calls, each one timeline event
const STREAM_CHUNKS = 400;

function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

const ms = (v: number) => `${v.toFixed(1)} ms`;

/** A configuration with a chatty agent (many tool calls) and a fast streamer. */
function benchConfig(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'tarsy-dash-bench-'));
  const e2eConfig = path.join(dashboardDir, 'e2e', 'config');
  writeFileSync(path.join(dir, 'mcp-servers.yaml'), readFileSync(path.join(e2eConfig, 'mcp-servers.yaml')));
  writeFileSync(
    path.join(dir, 'bench.yaml'),
    `apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: bench-scripted}
spec: {type: scripted, model: scripted-bench, script: script.json}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: chatty-agent}
spec: {displayName: ChattyAgent, mcpServers: [time], maxIterations: ${ANSWERS + 2}}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: streamer-agent}
spec: {displayName: StreamerAgent, maxIterations: 2}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: bench-big}
spec:
  alertTypes: [BenchBig]
  llmProvider: bench-scripted
  iterationStrategy: native-thinking
  sessionTimeout: 10m
  stages: [{name: many-tools, agent: chatty-agent}]
  chat: {enabled: false}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: bench-stream}
spec:
  alertTypes: [BenchStream]
  llmProvider: bench-scripted
  iterationStrategy: native-thinking
  sessionTimeout: 10m
  stages: [{name: stream, agent: streamer-agent}]
  chat: {enabled: false}
`,
  );
  const toolAnswer = (n: number) => ({
    chunks: Array.from({ length: TOOL_CALLS_PER_ANSWER }, (_, i) => ({
      kind: 'tool_call',
      id: `call-${n}-${i}`,
      name: 'time__get_current_time',
      arguments: '{"timezone": "UTC"}',
    })),
  });
  const script = {
    routes: {
      ChattyAgent: [
        ...Array.from({ length: ANSWERS }, (_, n) => toolAnswer(n)),
        { chunks: [{ kind: 'text', content: 'Done: 5,000 tool calls.' }] },
      ],
      StreamerAgent: [
        {
          chunk_delay_ms: 15,
          chunks: Array.from({ length: STREAM_CHUNKS }, (_, i) => ({
            kind: 'text',
            content: `tok${String(i).padStart(4, '0')} `,
          })),
        },
      ],
    },
    sequential: [{ chunks: [{ kind: 'text', content: 'Summary.' }] }],
  };
  writeFileSync(path.join(dir, 'script.json'), JSON.stringify(script));
  return dir;
}

it('prints the dashboard figures', async () => {
  // 1. Initial JavaScript: the entry script and what index.html preloads.
  const dist = path.join(dashboardDir, 'dist');
  const html = readFileSync(path.join(dist, 'index.html'), 'utf8');
  const initial = [...html.matchAll(/(?:src|href)="\/ui\/(assets\/[^"]+\.js)"/g)].map((m) => m[1] ?? '');
  let gzipped = 0;
  let raw = 0;
  for (const file of initial) {
    const bytes = readFileSync(path.join(dist, file));
    raw += bytes.length;
    gzipped += gzipSync(bytes, { level: 9 }).length;
  }
  console.log(`initial JavaScript: ${initial.length} files, ${(raw / 1024).toFixed(1)} KB, ${(gzipped / 1024).toFixed(1)} KB gzipped`);

  const config = benchConfig();
  const tarsy = await startTarsy(config);
  const browser = await launchBrowser();
  try {
    // 2. A 5,000-event session.
    const started = Date.now();
    const big = await tarsy.submit('BenchBig');
    await tarsy.waitForStatus(big, ['completed', 'failed'], 600_000);
    const events = (await (await fetch(`${tarsy.url}/api/v1/sessions/${big}/timeline`)).json()) as unknown[];
    console.log(`big session: ${events.length} timeline events, recorded in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    expect(events.length).toBeGreaterThanOrEqual(5000);

    const { page } = await newPage(browser);
    await page.goto(`${tarsy.url}/ui/sessions/${big}`);
    await page.locator('article.entry').first().waitFor({ timeout: 60_000 });
    // Main thread free again: a task scheduled now runs promptly.
    const idleDelay = await page.evaluate(
      () => new Promise<number>((resolve) => {
        const t0 = performance.now();
        setTimeout(() => resolve(performance.now() - t0), 0);
      }),
    );
    const tti = await page.evaluate(() => performance.now());
    const domRows = await page.locator('.timeline-row').count();
    console.log(`big session opens: timeline interactive ${ms(tti)} after navigation start (next task ran ${ms(idleDelay)} later); ${domRows} rows in the DOM for ${events.length} events`);

    // Scroll through all of it and record frame times.
    const frames = await page.evaluate(async () => {
      const el = document.querySelector('.timeline-scroll');
      if (!el) return [];
      const deltas: number[] = [];
      let last = performance.now();
      while (el.scrollTop + el.clientHeight < el.scrollHeight - 2) {
        el.scrollBy(0, 600);
        await new Promise(requestAnimationFrame);
        const now = performance.now();
        deltas.push(now - last);
        last = now;
        if (deltas.length > 20_000) break;
      }
      return deltas;
    });
    console.log(
      `scrolling through it: ${frames.length} frames, frame time p50 ${ms(percentile(frames, 50))}, p95 ${ms(percentile(frames, 95))}, p99 ${ms(percentile(frames, 99))}, max ${ms(Math.max(...frames))}; ${frames.filter((f) => f > 50).length} frames over 50 ms`,
    );
    await page.context().close();

    // 3. Stream chunk → rendered.
    const { page: live } = await newPage(browser);
    await live.addInitScript(() => {
      const pending = new Map<string, number>();
      const latencies: number[] = [];
      (window as unknown as { __latencies: number[] }).__latencies = latencies;
      const Original = window.WebSocket;
      // Records when each chunk reaches the page, before the app sees it.
      window.WebSocket = class extends Original {
        constructor(url: string | URL, protocols?: string | string[]) {
          super(url, protocols);
          this.addEventListener('message', (event: MessageEvent) => {
            try {
              const m = JSON.parse(String(event.data)) as { type?: string; delta?: string };
              if (m.type === 'stream.chunk' && m.delta?.trim()) pending.set(m.delta.trim(), performance.now());
            } catch {
              // not JSON: not ours
            }
          });
        }
      };
      const frame = () => {
        if (pending.size) {
          const text = document.querySelector('.timeline-scroll')?.textContent ?? '';
          for (const [token, t0] of pending) {
            if (text.includes(token)) {
              latencies.push(performance.now() - t0);
              pending.delete(token);
            }
          }
        }
        requestAnimationFrame(frame);
      };
      requestAnimationFrame(frame);
    });
    const streamId = await tarsy.submit('BenchStream');
    await live.goto(`${tarsy.url}/ui/sessions/${streamId}`);
    await tarsy.waitForStatus(streamId, ['completed', 'failed'], 120_000);
    await live.waitForTimeout(500);
    const latencies = await live.evaluate(() => (window as unknown as { __latencies: number[] }).__latencies);
    console.log(
      `stream chunk → rendered in a frame: ${latencies.length} chunks, p50 ${ms(percentile(latencies, 50))}, p99 ${ms(percentile(latencies, 99))}, max ${ms(Math.max(...latencies))}; ${latencies.filter((l) => l > 50).length} over 50 ms`,
    );
    await live.context().close();
  } finally {
    await browser.close();
    await tarsy.stop();
    rmSync(config, { recursive: true, force: true });
  }
});
