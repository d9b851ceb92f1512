// The session page's timeline as a flat list of rows (stage headers,
// execution headers, events), the shape the virtualized list renders.

import type { AgentExecution, Stage } from '../api/types';
import { groupByExecution, type TimelineItem, type TimelineState } from './timeline';

export type Row =
  | { kind: 'stage'; key: string; stage: Stage; number: number; selected: string | null }
  | { kind: 'execution'; key: string; stage: Stage; execution: AgentExecution }
  | { kind: 'item'; key: string; item: TimelineItem; execution: AgentExecution | null }
  | { kind: 'empty'; key: string; text: string }
  | { kind: 'session'; key: string };

/** True for a follow-up chat stage. */
export function isChat(stage: Stage): boolean {
  return stage.kind === 'chat';
}

/** True for a synthesis stage (it combines a parallel stage's results). */
export function isSynthesis(stage: Stage): boolean {
  return stage.kind === 'synthesis';
}

/** True when a stage shows its executions as tabs (parallel agents, replicas). */
export function isParallel(stage: Stage): boolean {
  return stage.executions.length > 1;
}

/** An execution as the page names it: its agent, marked as a synthesis or a replica. */
export function executionLabel(stage: Stage, execution: AgentExecution): string {
  if (execution.kind === 'synthesis') return `${execution.agent_name} (synthesis)`;
  if (stage.parallel_type === 'replica') return `${execution.agent_name} (replica ${execution.agent_index})`;
  return execution.agent_name;
}

/** A stage as the page names it: "Stage 2: cross-check", or "Follow-up chat". */
export function stageTitle(stage: Stage, number: number): string {
  return isChat(stage) ? 'Follow-up chat' : `Stage ${number}: ${stage.stage_name}`;
}

/**
 * The stages in order with the number the reader sees: chat stages are
 * not counted (they are titled apart).
 */
export function numberedStages(stages: Stage[]): { stage: Stage; number: number }[] {
  let number = 0;
  return [...stages]
    .sort((a, b) => a.stage_index - b.stage_index)
    .map((stage) => {
      if (!isChat(stage)) number += 1;
      return { stage, number };
    });
}

/**
 * Rows for the stages in order. A parallel stage shows one execution at a
 * time: `selected` (stage id → execution id), else its first execution.
 * Session-level events (the executive summary) come last.
 */
export function buildRows(
  stages: Stage[],
  timeline: TimelineState,
  selected: ReadonlyMap<string, string>,
): Row[] {
  const groups = groupByExecution(timeline);
  const rows: Row[] = [];
  for (const { stage, number } of numberedStages(stages)) {
    const chosen = isParallel(stage)
      ? (stage.executions.find((e) => e.id === selected.get(stage.id)) ?? stage.executions[0] ?? null)
      : null;
    rows.push({ kind: 'stage', key: `stage:${stage.id}`, stage, number, selected: chosen?.id ?? null });
    const shown = chosen ? [chosen] : stage.executions;
    if (shown.length === 0) {
      rows.push({ kind: 'empty', key: `empty:${stage.id}`, text: 'Waiting for the stage to start…' });
    }
    for (const execution of shown) {
      rows.push({ kind: 'execution', key: `exec:${execution.id}`, stage, execution });
      const items = groups.get(execution.id) ?? [];
      if (items.length === 0 && !['completed', 'failed', 'cancelled', 'timed_out'].includes(execution.status)) {
        rows.push({ kind: 'empty', key: `empty:${execution.id}`, text: 'Waiting for the model…' });
      }
      for (const item of items) rows.push({ kind: 'item', key: `item:${item.id}`, item, execution });
    }
  }
  // Events of executions the detail does not list yet (just created).
  const listed = new Set(stages.flatMap((s) => s.executions.map((e) => e.id)));
  for (const [execution, items] of groups) {
    if (execution === '' || listed.has(execution)) continue;
    for (const item of items) rows.push({ kind: 'item', key: `item:${item.id}`, item, execution: null });
  }
  const sessionItems = groups.get('') ?? [];
  if (sessionItems.length > 0) {
    rows.push({ kind: 'session', key: 'session-level' });
    for (const item of sessionItems) rows.push({ kind: 'item', key: `item:${item.id}`, item, execution: null });
  }
  return rows;
}

/** Which stage and execution hold an event (for deep links into tabs). */
export function locateEvent(stages: Stage[], timeline: TimelineState, eventId: string): [string, string] | null {
  const item = timeline.items.get(eventId);
  if (!item?.executionId) return null;
  for (const stage of stages) {
    if (stage.executions.some((e) => e.id === item.executionId)) return [stage.id, item.executionId];
  }
  return null;
}
