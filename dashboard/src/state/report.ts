// The investigation as a markdown report (the "copy report" button).

import type { SessionDetail } from '../api/types';
import { isChat } from './rows';
import { executionItems, type TimelineState } from './timeline';

export function reportMarkdown(session: SessionDetail, timeline: TimelineState): string {
  const lines: string[] = [];
  lines.push(`# ${session.alert_type}: ${session.status.replace(/_/g, ' ')}`, '');
  lines.push(`- Session: \`${session.id}\``);
  lines.push(`- Chain: ${session.chain_id}`);
  if (session.author) lines.push(`- Author: ${session.author}`);
  lines.push(`- Submitted: ${session.created_at}`);
  if (session.completed_at) lines.push(`- Finished: ${session.completed_at}`);
  if (session.runbook_url) lines.push(`- Runbook: ${session.runbook_url}`);
  lines.push('');
  if (session.executive_summary) lines.push('## Executive summary', '', session.executive_summary, '');
  if (session.final_analysis) lines.push('## Final analysis', '', session.final_analysis, '');
  if (session.error_message) lines.push('## Error', '', session.error_message, '');
  const stages = [...session.stages].sort((a, b) => a.stage_index - b.stage_index).filter((s) => !isChat(s));
  if (stages.length > 0) lines.push('## Stages', '');
  for (const [index, stage] of stages.entries()) {
    lines.push(`### ${index + 1}. ${stage.stage_name} (${stage.status})`, '');
    for (const execution of stage.executions) {
      const final = executionItems(timeline, execution.id).filter((i) => i.eventType === 'final_analysis').pop();
      lines.push(`#### ${execution.agent_name} (${execution.status})`, '');
      if (final) lines.push(final.content, '');
      if (execution.error_message) lines.push(`Error: ${execution.error_message}`, '');
    }
  }
  lines.push('## Alert data', '', '```', session.alert_data, '```', '');
  return lines.join('\n');
}
