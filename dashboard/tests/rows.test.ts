import { describe, expect, it } from 'vitest';
import type { AgentExecution, SessionDetail, Stage, TimelineEvent } from '../src/api/types';
import { reportMarkdown } from '../src/state/report';
import { buildRows, locateEvent } from '../src/state/rows';
import { emptyTimeline, mergeSnapshot } from '../src/state/timeline';

function execution(
  id: string,
  stage: string,
  name: string,
  index: number,
  kind: AgentExecution['kind'] = 'investigation',
): AgentExecution {
  return {
    id,
    stage_id: stage,
    session_id: 's',
    agent_name: name,
    agent_index: index,
    kind,
    iteration_strategy: 'native-thinking',
    llm_provider: null,
    status: 'completed',
    error_message: null,
    created_at: '',
    started_at: null,
    completed_at: null,
    cost: null,
  };
}

function stage(id: string, index: number, name: string, executions: AgentExecution[], extra: Partial<Stage> = {}): Stage {
  return {
    id,
    session_id: 's',
    stage_name: name,
    kind: 'investigation',
    stage_index: index,
    expected_agent_count: executions.length,
    parallel_type: executions.length > 1 ? 'replica' : null,
    success_policy: null,
    chat_id: null,
    chat_user_message_id: null,
    status: 'completed',
    error_message: null,
    created_at: '',
    started_at: null,
    completed_at: null,
    executions,
    cost: null,
    ...extra,
  };
}

function event(
  id: string,
  exec: string | null,
  seq: number,
  type: TimelineEvent['event_type'] = 'llm_response',
  content = id,
): TimelineEvent {
  return {
    id,
    session_id: 's',
    stage_id: null,
    execution_id: exec,
    sequence_number: seq,
    event_type: type,
    status: 'completed',
    content,
    metadata: {},
    created_at: '2026-01-01T00:00:00Z',
    updated_at: '2026-01-01T00:00:00Z',
  };
}

const stages = [
  stage('st2', 2, 'cross-check', [execution('r1', 'st2', 'R-1', 1), execution('r2', 'st2', 'R-2', 2)]),
  stage('st1', 1, 'investigate', [execution('a', 'st1', 'A', 1)]),
  stage('st3', 3, 'cross-check - Synthesis', [execution('y', 'st3', 'SynthesisAgent', 1, 'synthesis')], {
    kind: 'synthesis',
  }),
  stage('st4', 4, 'chat', [execution('c', 'st4', 'ChatAgent', 1, 'chat')], { kind: 'chat', chat_id: 'chat-1' }),
];
const timeline = mergeSnapshot(emptyTimeline, [
  event('e1', 'a', 1),
  event('e2', 'r1', 1, 'llm_response', 'view A'),
  event('e3', 'r2', 1, 'llm_response', 'view B'),
  event('e4', 'y', 1, 'final_analysis', 'combined'),
  event('e5', null, 1, 'executive_summary', 'summary'),
]);

describe('timeline rows', () => {
  it('orders stages, numbers them without chat, shows one replica at a time', () => {
    const rows = buildRows(stages, timeline, new Map());
    const summary = rows.map((r) =>
      r.kind === 'stage' ? `stage ${r.number} ${r.stage.stage_name}` : r.kind === 'item' ? `item ${r.item.id}` : r.kind,
    );
    expect(summary).toEqual([
      'stage 1 investigate',
      'execution',
      'item e1',
      'stage 2 cross-check',
      'execution',
      'item e2',
      'stage 3 cross-check - Synthesis',
      'execution',
      'item e4',
      'stage 3 chat',
      'execution',
      'session',
      'item e5',
    ]);
    // Choosing the second replica's tab shows its events instead.
    const chosen = buildRows(stages, timeline, new Map([['st2', 'r2']]));
    expect(chosen.some((r) => r.kind === 'item' && r.item.id === 'e3')).toBe(true);
    expect(chosen.some((r) => r.kind === 'item' && r.item.id === 'e2')).toBe(false);
  });

  it('finds the stage and tab of a deep-linked event', () => {
    expect(locateEvent(stages, timeline, 'e3')).toEqual(['st2', 'r2']);
    expect(locateEvent(stages, timeline, 'e5')).toBeNull();
    expect(locateEvent(stages, timeline, 'nope')).toBeNull();
  });
});

describe('markdown report', () => {
  it('has the summary, the analysis, each stage with its agents, and the alert', () => {
    const session = {
      id: 's',
      alert_type: 'PodCrashLooping',
      status: 'completed',
      chain_id: 'k8s',
      author: 'alice',
      created_at: '2026-01-01T00:00:00Z',
      completed_at: '2026-01-01T00:01:00Z',
      runbook_url: null,
      executive_summary: 'short',
      final_analysis: 'long',
      error_message: null,
      alert_data: 'pod: web-0',
      stages,
    } as unknown as SessionDetail;
    const report = reportMarkdown(session, timeline);
    expect(report).toContain('# PodCrashLooping: completed');
    expect(report).toContain('## Executive summary\n\nshort');
    expect(report).toContain('### 3. cross-check - Synthesis (completed)');
    expect(report).toContain('#### SynthesisAgent (completed)\n\ncombined');
    expect(report).not.toContain('ChatAgent');
    expect(report).toContain('```\npod: web-0\n```');
  });
});
