// One WebSocket to /api/v1/ws for the whole app, shared by every page.
//
// Each channel remembers the cursor of the last stored event it delivered
// (`db_event_id`). When the socket drops, the app reconnects with backoff and
// subscribes again with `last_event_id`, so the server replays exactly what
// was missed; an event at or below the cursor (delivered twice across a
// reconnect) is dropped here, before any page sees it.

import { useEffect, useSyncExternalStore } from 'react';
import type { LiveEvent } from '../state/timeline';

export type ConnectionState = 'connecting' | 'open' | 'reconnecting';

type Listener = (event: LiveEvent) => void;

interface Channel {
  listeners: Set<Listener>;
  lastEventId: number | null;
}

const PING_MS = 25_000;
const MAX_BACKOFF_MS = 5_000;

export class LiveConnection {
  private ws: WebSocket | null = null;
  private readonly channels = new Map<string, Channel>();
  private state: ConnectionState = 'connecting';
  private everOpened = false;
  private readonly stateListeners = new Set<() => void>();
  private attempt = 0;
  private reconnectTimer: ReturnType<typeof setTimeout> | null = null;
  private pingTimer: ReturnType<typeof setInterval> | null = null;
  private readonly url: string;

  constructor(url: string) {
    this.url = url;
  }

  /** Opens the socket (idempotent). */
  start(): void {
    if (this.ws || this.reconnectTimer) return;
    this.open();
  }

  getState = (): ConnectionState => this.state;

  /** True once the socket has been open at least once (drops are then news). */
  hasOpened(): boolean {
    return this.everOpened;
  }

  onStateChange = (listener: () => void): (() => void) => {
    this.stateListeners.add(listener);
    return () => this.stateListeners.delete(listener);
  };

  /** Listens to a channel; the returned function stops listening. */
  subscribe(channel: string, listener: Listener): () => void {
    let entry = this.channels.get(channel);
    if (!entry) {
      entry = { listeners: new Set(), lastEventId: null };
      this.channels.set(channel, entry);
    }
    entry.listeners.add(listener);
    if (entry.listeners.size === 1) this.sendSubscribe(channel, entry);
    this.start();
    return () => {
      const current = this.channels.get(channel);
      if (!current) return;
      current.listeners.delete(listener);
      if (current.listeners.size === 0) {
        this.channels.delete(channel);
        this.send({ action: 'unsubscribe', channel });
      }
    };
  }

  private setState(state: ConnectionState): void {
    if (this.state === state) return;
    this.state = state;
    for (const listener of this.stateListeners) listener();
  }

  private open(): void {
    this.reconnectTimer = null;
    const ws = new WebSocket(this.url);
    this.ws = ws;
    ws.addEventListener('open', () => {
      this.attempt = 0;
      this.everOpened = true;
      this.setState('open');
      for (const [channel, entry] of this.channels) this.sendSubscribe(channel, entry);
      this.pingTimer = setInterval(() => this.send({ action: 'ping' }), PING_MS);
    });
    ws.addEventListener('message', (message) => this.receive(message.data));
    ws.addEventListener('close', () => this.closed(ws));
    ws.addEventListener('error', () => ws.close());
  }

  private closed(ws: WebSocket): void {
    if (this.ws !== ws) return;
    this.ws = null;
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.pingTimer = null;
    this.setState(this.everOpened ? 'reconnecting' : 'connecting');
    // Backoff with jitter: 0.5 s, 1 s, 2 s, ... up to 5 s.
    const delay = Math.min(MAX_BACKOFF_MS, 500 * 2 ** this.attempt) * (0.75 + Math.random() * 0.5);
    this.attempt += 1;
    this.reconnectTimer = setTimeout(() => this.open(), delay);
  }

  private send(message: Record<string, unknown>): void {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(message));
  }

  private sendSubscribe(channel: string, entry: Channel): void {
    const message: Record<string, unknown> = { action: 'subscribe', channel };
    if (entry.lastEventId !== null) message.last_event_id = entry.lastEventId;
    this.send(message);
  }

  private receive(data: unknown): void {
    if (typeof data !== 'string') return;
    let event: LiveEvent;
    try {
      event = JSON.parse(data) as LiveEvent;
    } catch {
      return;
    }
    const channel = typeof event.channel === 'string' ? event.channel : null;
    if (!channel) return;
    const entry = this.channels.get(channel);
    if (!entry) return;
    if (!acceptCursor(entry, event)) return;
    for (const listener of [...entry.listeners]) listener(event);
  }
}

/**
 * Advances a channel's cursor; false when the event was delivered already.
 * Exported for the unit tests.
 */
export function acceptCursor(entry: { lastEventId: number | null }, event: LiveEvent): boolean {
  const id = event.db_event_id;
  if (typeof id !== 'number') return true; // transient (stream.chunk) or control frames
  if (entry.lastEventId !== null && id <= entry.lastEventId) return false;
  entry.lastEventId = id;
  return true;
}

function socketUrl(): string {
  const scheme = window.location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${window.location.host}/api/v1/ws`;
}

let shared: LiveConnection | null = null;

/** The app's connection, created on first use. */
export function liveConnection(): LiveConnection {
  if (!shared) shared = new LiveConnection(socketUrl());
  return shared;
}

/** The connection state, for the banner. */
export function useConnectionState(): { state: ConnectionState; dropped: boolean } {
  const connection = liveConnection();
  const state = useSyncExternalStore(connection.onStateChange, connection.getState);
  useEffect(() => connection.start(), [connection]);
  return { state, dropped: state === 'reconnecting' };
}

/** Calls `listener` for every event of `channel` while mounted. */
export function useChannel(channel: string | null, listener: Listener): void {
  useEffect(() => {
    if (!channel) return;
    return liveConnection().subscribe(channel, listener);
  }, [channel, listener]);
}
