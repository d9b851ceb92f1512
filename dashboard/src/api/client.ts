// REST client: JSON in, JSON out; every non-2xx answer becomes an ApiError
// carrying the server's `{error, message}`.
import type {
  AlertRequest,
  AlertResponse,
  CancelResponse,
  ChatResponse,
  ErrorBody,
  Health,
  LlmInteractionDetail,
  McpInteractionDetail,
  BulkReviewRequest,
  BulkReviewResponse,
  Review,
  ReviewRequest,
  ScoreHistory,
  ScoreResponse,
  SessionDetail,
  SessionPage,
  SessionTrace,
  SystemConfiguration,
  TimelineEvent,
  Quality,
  Triage,
  Usage,
  Memory,
  MemoryCategory,
  MemoryList,
  MemoryPatch,
  MemoryValence,
  SessionMemories,
} from './types';

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;

  constructor(status: number, code: string, message: string) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

async function request<T>(path: string, init?: RequestInit): Promise<T> {
  const response = await fetch(path, {
    ...init,
    headers: { accept: 'application/json', ...(init?.body ? { 'content-type': 'application/json' } : {}) },
  });
  const text = await response.text();
  let body: unknown = null;
  if (text) {
    try {
      body = JSON.parse(text);
    } catch {
      body = null;
    }
  }
  if (!response.ok) {
    const err = body as Partial<ErrorBody> | null;
    throw new ApiError(
      response.status,
      err?.error ?? 'http_error',
      err?.message ?? `${response.status} ${response.statusText}`,
    );
  }
  return body as T;
}

export interface SessionQuery {
  status?: string[];
  alert_type?: string;
  chain_id?: string;
  author?: string;
  q?: string;
  page?: number;
  page_size?: number;
  needs_attention?: boolean;
  /** A failure tag of the judge's score. */
  failure_tag?: string;
  sort?: string;
  order?: 'asc' | 'desc';
}

export function sessionQueryString(query: SessionQuery): string {
  const params = new URLSearchParams();
  if (query.status?.length) params.set('status', query.status.join(','));
  for (const key of ['alert_type', 'chain_id', 'author', 'q', 'failure_tag', 'sort', 'order'] as const) {
    const value = query[key];
    if (value) params.set(key, value);
  }
  if (query.page && query.page > 1) params.set('page', String(query.page));
  if (query.page_size) params.set('page_size', String(query.page_size));
  if (query.needs_attention) params.set('needs_attention', 'true');
  return params.toString();
}

export interface MemoryQuery {
  /** Full text: memories with every word of it. */
  q?: string;
  category?: MemoryCategory;
  valence?: MemoryValence;
  /** Only deprecated (true) or only live (false) memories; both when absent. */
  deprecated?: boolean;
  limit?: number;
  offset?: number;
}

export function memoryQueryString(query: MemoryQuery): string {
  const params = new URLSearchParams();
  const q = query.q?.trim();
  if (q) params.set('q', q);
  if (query.category) params.set('category', query.category);
  if (query.valence) params.set('valence', query.valence);
  if (query.deprecated !== undefined) params.set('deprecated', String(query.deprecated));
  if (query.limit) params.set('limit', String(query.limit));
  if (query.offset) params.set('offset', String(query.offset));
  return params.toString();
}

const enc = encodeURIComponent;

export const api = {
  sessions: (query: SessionQuery) => request<SessionPage>(`/api/v1/sessions?${sessionQueryString(query)}`),
  session: (id: string) => request<SessionDetail>(`/api/v1/sessions/${enc(id)}`),
  timeline: (id: string) => request<TimelineEvent[]>(`/api/v1/sessions/${enc(id)}/timeline`),
  trace: (id: string) => request<SessionTrace>(`/api/v1/sessions/${enc(id)}/trace`),
  llmInteraction: (id: string, interaction: string) =>
    request<LlmInteractionDetail>(`/api/v1/sessions/${enc(id)}/trace/llm/${enc(interaction)}`),
  mcpInteraction: (id: string, interaction: string) =>
    request<McpInteractionDetail>(`/api/v1/sessions/${enc(id)}/trace/mcp/${enc(interaction)}`),
  cancel: (id: string) =>
    request<CancelResponse>(`/api/v1/sessions/${enc(id)}/cancel`, { method: 'POST' }),
  scores: (id: string) => request<ScoreHistory>(`/api/v1/sessions/${enc(id)}/scores`),
  rescore: (id: string) => request<ScoreResponse>(`/api/v1/sessions/${enc(id)}/score`, { method: 'POST' }),
  triage: () => request<Triage>('/api/v1/triage'),
  quality: (query: { days: number; chain_id?: string; alert_type?: string }) => {
    const params = new URLSearchParams({ days: String(query.days) });
    if (query.chain_id) params.set('chain_id', query.chain_id);
    if (query.alert_type) params.set('alert_type', query.alert_type);
    return request<Quality>(`/api/v1/quality?${params.toString()}`);
  },
  /** What the sessions created in [from, to) cost, with the top sessions by `rank`. */
  usage: (query: { from: string; to: string; rank: 'cost' | 'tokens' }) =>
    request<Usage>(`/api/v1/usage?${new URLSearchParams(query).toString()}`),
  review: (id: string, change: ReviewRequest) =>
    request<Review>(`/api/v1/sessions/${enc(id)}/review`, { method: 'POST', body: JSON.stringify(change) }),
  bulkReview: (change: BulkReviewRequest) =>
    request<BulkReviewResponse>('/api/v1/reviews', { method: 'POST', body: JSON.stringify(change) }),
  chat: (id: string, content: string) =>
    request<ChatResponse>(`/api/v1/sessions/${enc(id)}/chat/messages`, {
      method: 'POST',
      body: JSON.stringify({ content }),
    }),
  submitAlert: (alert: AlertRequest) =>
    request<AlertResponse>('/api/v1/alerts', {
      method: 'POST',
      body: JSON.stringify(alert),
    }),
  memories: (query: MemoryQuery) => request<MemoryList>(`/api/v1/memories?${memoryQueryString(query)}`),
  memory: (id: string) => request<Memory>(`/api/v1/memories/${enc(id)}`),
  updateMemory: (id: string, change: MemoryPatch) =>
    request<Memory>(`/api/v1/memories/${enc(id)}`, { method: 'PATCH', body: JSON.stringify(change) }),
  deprecateMemory: (id: string) => request<Memory>(`/api/v1/memories/${enc(id)}/deprecate`, { method: 'POST' }),
  deleteMemory: (id: string) => request<null>(`/api/v1/memories/${enc(id)}`, { method: 'DELETE' }),
  sessionMemories: (id: string) => request<SessionMemories>(`/api/v1/sessions/${enc(id)}/memories`),
  health: () => fetch('/health').then((r) => r.json() as Promise<Health>),
  configuration: () => request<SystemConfiguration>('/api/v1/system/configuration'),
};
