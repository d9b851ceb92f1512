// The shapes of the TARSy REST API under the names the dashboard uses. They
// are aliases of openapi.gen.ts, which `npm run gen:api` generates from
// openapi.json, which the server generates from its Rust types: never edit
// a shape here, regenerate (see operator/api/API.md).
import type { components } from './openapi.gen';

type Schemas = components['schemas'];

export type SessionStatus = Schemas['SessionStatus'];

// A Record over the union: a status added on the server fails the type check
// until it is listed here.
const STATUS_IS_TERMINAL: Record<SessionStatus, boolean> = {
  pending: false,
  in_progress: false,
  cancelling: false,
  completed: true,
  failed: true,
  cancelled: true,
  timed_out: true,
};

export const SESSION_STATUSES = Object.keys(STATUS_IS_TERMINAL) as SessionStatus[];

export const TERMINAL_STATUSES: ReadonlySet<string> = new Set(SESSION_STATUSES.filter((s) => STATUS_IS_TERMINAL[s]));

export type SessionSummary = Schemas['SessionSummary'];
export type SessionPage = Schemas['SessionList'];
/** Cluster mode only: the AgentExecution behind an execution. */
export type ExecutionObject = Schemas['ExecutionObject'];
/** Cluster mode only: the Alert behind a session. */
export type AlertObject = Schemas['AlertObject'];
/** An agent execution of a stage (with its `cluster` object in cluster mode). */
export type AgentExecution = Schemas['ExecutionDetail'];
/** A stage of a session, with its executions. */
export type Stage = Schemas['StageDetail'];
export type SessionDetail = Schemas['SessionDetail'];
/** An MCP server the agent could not use or a runbook it could not fetch, say: the answer may be incomplete. */
export type SessionWarning = Schemas['SessionWarning'];
export type TimelineEvent = Schemas['TimelineEvent'];
export type TokenUsage = Schemas['TokenUsage'];
/**
 * What a session, a stage or an execution cost: estimated US dollars and
 * tokens of its LLM calls (`partial`: some calls have no price, `usd` is a
 * lower bound). Null before the first call.
 */
export type Cost = Schemas['Cost'];
export type LlmInteractionSummary = Schemas['LlmInteractionSummary'];
export type McpInteractionSummary = Schemas['McpInteractionSummary'];
export type SessionTrace = Schemas['SessionTrace'];
export type ConversationMessage = Schemas['ConversationMessage'];
export type LlmInteractionDetail = Schemas['LlmDetail'];
export type McpInteractionDetail = Schemas['McpInteraction'];
export type Health = Schemas['Health'];
export type SystemConfiguration = Schemas['SystemConfiguration'];
export type McpSelection = Schemas['McpSelection'];
export type AlertRequest = Schemas['AlertRequest'];
export type AlertResponse = Schemas['AlertResponse'];
export type CancelResponse = Schemas['CancelResponse'];
export type ChatResponse = Schemas['ChatResponse'];
/** A session's score as lists show it: the latest attempt's status, the latest completed score and tags. */
export type ScoreBadge = Schemas['ScoreBadge'];
export type ScoreStatus = Schemas['ScoreStatus'];
/** One scoring attempt of the judge. */
export type SessionScore = Schemas['SessionScore'];
export type ScoreHistory = Schemas['ScoreHistory'];
export type ScoreResponse = Schemas['ScoreResponse'];
/** A person's review of a finished session. */
export type Review = Schemas['Review'];
export type ReviewBadge = Schemas['ReviewBadge'];
export type ReviewRating = Schemas['ReviewRating'];
export type ReviewRequest = Schemas['ReviewRequest'];
export type BulkReviewRequest = Schemas['BulkReviewRequest'];
export type BulkReviewResponse = Schemas['BulkReviewResponse'];
/** Sessions by where their review stands, with counts. */
export type Triage = Schemas['Triage'];
export type TriageGroup = Schemas['TriageGroup'];
/** The quality page's aggregates. */
export type Quality = Schemas['Quality'];
/** The usage page's aggregates over a window of sessions. */
export type Usage = Schemas['Usage'];
/** One value of a usage breakdown (a model, an alert type, a chain, a scope). */
export type UsageGroup = Schemas['UsageGroup'];
/** A session of the usage page's top list. */
export type UsageSession = Schemas['UsageSession'];
/** A short lesson learned from a scored investigation (its content is masked). */
export type Memory = Schemas['Memory'];
export type MemoryCategory = Schemas['MemoryCategory'];
export type MemoryValence = Schemas['MemoryValence'];
export type MemoryList = Schemas['MemoryList'];
export type MemoryPatch = Schemas['MemoryPatch'];
/** The memories put into a session's prompts and those learned from it. */
export type SessionMemories = Schemas['SessionMemories'];

// Records over the unions: a category or valence added on the server fails
// the type check until it is labelled here.
const CATEGORY_LABELS: Record<MemoryCategory, string> = {
  fact: 'Fact',
  experience: 'Experience',
  procedure: 'Procedure',
};
const VALENCE_LABELS: Record<MemoryValence, string> = {
  helped: 'Helped',
  misled: 'Misled',
  neutral: 'Neutral',
};
/** Memory categories in display order, with their labels. */
export const MEMORY_CATEGORIES = Object.entries(CATEGORY_LABELS) as [MemoryCategory, string][];
/** Memory valences in display order, with their labels. */
export const MEMORY_VALENCES = Object.entries(VALENCE_LABELS) as [MemoryValence, string][];

/** Ratings in the order a reviewer picks them, with their labels. */
export const RATINGS: readonly [ReviewRating, string][] = [
  ['accurate', 'Accurate'],
  ['partially_accurate', 'Partially accurate'],
  ['inaccurate', 'Inaccurate'],
];
/** The body of every error answer. */
export type ErrorBody = Schemas['ErrorBody'];
