import { useVirtualizer } from '@tanstack/react-virtual';
import { memo, useEffect, useLayoutEffect, useRef, type KeyboardEvent } from 'react';
import type { AgentExecution, Stage } from '../api/types';
import { executionLabel, isParallel, isSynthesis, stageTitle, type Row } from '../state/rows';
import { isFinal, type TimelineItem } from '../state/timeline';
import { CostSummary } from './Cost';
import { prettyJson } from './format';
import { Kubectl } from './Kubectl';
import { Markdown } from './Markdown';
import { StatusBadge } from './StatusBadge';

interface Props {
  rows: Row[];
  /** Execution ids that ended with a forced conclusion. */
  forced: ReadonlySet<string>;
  /** The event or stage a deep link points at. */
  target: string | null;
  onSelectExecution: (stageId: string, executionId: string) => void;
  /** Start at the bottom and follow new content (a running session). */
  live: boolean;
}

/**
 * The timeline, virtualized: only the rows in view (plus a margin) are in
 * the DOM, so a session of thousands of events opens and scrolls smoothly.
 * It follows new content while the reader is at the bottom.
 */
export function TimelineView({ rows, forced, target, onSelectExecution, live }: Props) {
  const scrollRef = useRef<HTMLDivElement>(null);
  const atBottom = useRef(live);
  // TanStack Virtual returns functions the React Compiler cannot memoize;
  // this component is not compiled, which is what the library expects.
  // eslint-disable-next-line react-hooks/incompatible-library
  const virtualizer = useVirtualizer({
    count: rows.length,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => 72,
    overscan: 6,
    getItemKey: (index) => rows[index]?.key ?? index,
  });

  // Deep link: bring the target into view once its row exists.
  const scrolledTo = useRef<string | null>(null);
  useEffect(() => {
    if (!target || scrolledTo.current === target) return;
    const index = rows.findIndex((r) => r.key === `item:${target}` || r.key === `stage:${target}`);
    if (index < 0) return;
    scrolledTo.current = target;
    atBottom.current = false;
    virtualizer.scrollToIndex(index, { align: 'start' });
  }, [rows, target, virtualizer]);

  // Follow the stream while the reader is at the bottom.
  useLayoutEffect(() => {
    if (atBottom.current && rows.length > 0 && !target) {
      virtualizer.scrollToIndex(rows.length - 1, { align: 'end' });
    }
  }, [rows, virtualizer, target]);

  return (
    <div
      ref={scrollRef}
      className="timeline-scroll"
      role="region"
      aria-label="Timeline"
      // A scrollable region must be reachable by keyboard (axe:
      // scrollable-region-focusable), so this region takes focus.
      // eslint-disable-next-line jsx-a11y/no-noninteractive-tabindex
      tabIndex={0}
      onScroll={(e) => {
        const el = e.currentTarget;
        atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
      }}
    >
      <div className="timeline-inner" style={{ height: virtualizer.getTotalSize() }}>
        {virtualizer.getVirtualItems().map((v) => {
          const row = rows[v.index];
          if (!row) return null;
          return (
            <div
              key={v.key}
              data-index={v.index}
              ref={virtualizer.measureElement}
              className="timeline-row"
              style={{ transform: `translateY(${v.start}px)` }}
            >
              <RowView row={row} forced={forced} target={target} onSelectExecution={onSelectExecution} />
            </div>
          );
        })}
      </div>
    </div>
  );
}

const RowView = memo(function RowView({
  row,
  forced,
  target,
  onSelectExecution,
}: {
  row: Row;
  forced: ReadonlySet<string>;
  target: string | null;
  onSelectExecution: (stageId: string, executionId: string) => void;
}) {
  switch (row.kind) {
    case 'stage':
      return (
        <StageHeader
          stage={row.stage}
          number={row.number}
          selected={row.selected}
          target={target}
          onSelect={onSelectExecution}
        />
      );
    case 'execution':
      return <ExecutionHeader stage={row.stage} execution={row.execution} forced={forced.has(row.execution.id)} />;
    case 'item':
      return (
        <Entry
          item={row.item}
          forced={row.execution ? forced.has(row.execution.id) : false}
          highlighted={target === row.item.id}
        />
      );
    case 'empty':
      return <p className="muted timeline-empty">{row.text}</p>;
    case 'session':
      return <h3 className="stage-title">Session</h3>;
  }
});

function StageHeader({
  stage,
  number,
  selected,
  target,
  onSelect,
}: {
  stage: Stage;
  number: number;
  selected: string | null;
  target: string | null;
  onSelect: (stageId: string, executionId: string) => void;
}) {
  const synthesis = isSynthesis(stage);
  const parallel = isParallel(stage);
  const onKey = (e: KeyboardEvent<HTMLButtonElement>, index: number) => {
    const step = e.key === 'ArrowRight' ? 1 : e.key === 'ArrowLeft' ? -1 : 0;
    if (!step) return;
    e.preventDefault();
    const n = stage.executions.length;
    const next = stage.executions[(index + step + n) % n];
    if (next) {
      onSelect(stage.id, next.id);
      document.getElementById(`tab-${next.id}`)?.focus();
    }
  };
  return (
    <div className={`stage-header${target === stage.id ? ' highlighted' : ''}`} id={`stage-${stage.id}`}>
      <h3 className="stage-title">
        {stageTitle(stage, number)}{' '}
        <StatusBadge status={stage.status} />
        {synthesis && <span className="badge badge-info">synthesis</span>}
        {parallel && (
          <span className="badge badge-info">
            {stage.parallel_type === 'replica' ? `${stage.executions.length} replicas` : 'parallel agents'}
            {stage.success_policy ? `, success policy: ${stage.success_policy}` : ''}
          </span>
        )}{' '}
        <a className="anchor" href={`?stage=${encodeURIComponent(stage.id)}`} aria-label={`Link to stage ${stage.stage_name}`}>
          #
        </a>
      </h3>
      {stage.cost && (
        <p className="muted small stage-cost">
          Stage cost: <CostSummary cost={stage.cost} />
        </p>
      )}
      {stage.error_message && <p className="error">{stage.error_message}</p>}
      {parallel && (
        <div role="tablist" aria-label={`Agents of stage ${stage.stage_name}`} className="tablist">
          {stage.executions.map((e, i) => (
            <button
              key={e.id}
              id={`tab-${e.id}`}
              role="tab"
              type="button"
              aria-selected={e.id === selected}
              tabIndex={e.id === selected ? 0 : -1}
              onClick={() => onSelect(stage.id, e.id)}
              onKeyDown={(ev) => onKey(ev, i)}
            >
              {executionLabel(stage, e)} <StatusBadge status={e.status} />
            </button>
          ))}
        </div>
      )}
    </div>
  );
}

function ExecutionHeader({ stage, execution, forced }: { stage: Stage; execution: AgentExecution; forced: boolean }) {
  const cluster = execution.cluster;
  return (
    <div className="execution-header">
      <h4>
        {executionLabel(stage, execution)} <StatusBadge status={execution.status} />
        {forced && <span className="badge badge-warning">forced conclusion</span>}
      </h4>
      <p className="muted small">
        {execution.iteration_strategy}
        {execution.llm_provider ? ` · ${execution.llm_provider}` : ''}
        {execution.cost && (
          <>
            {' · '}
            <CostSummary cost={execution.cost} />
          </>
        )}
      </p>
      {execution.error_message && <p className="error">{execution.error_message}</p>}
      {cluster && (
        <div className="cluster small">
          <p>
            AgentExecution <code>{cluster.name}</code>
            {cluster.phase ? ` (${cluster.phase})` : ''}
            {cluster.pod_name ? (
              <>
                {' '}
                · pod <code>{cluster.pod_name}</code>
              </>
            ) : null}
          </p>
          <Kubectl command={`kubectl -n ${cluster.namespace} describe agentexecution ${cluster.name}`} />
          {cluster.pod_name && <Kubectl command={`kubectl -n ${cluster.namespace} logs ${cluster.pod_name} -c runner`} />}
        </div>
      )}
    </div>
  );
}

const TITLES: Record<string, string> = {
  llm_thinking: 'Thinking',
  llm_response: 'Response',
  llm_tool_call: 'Tool call',
  mcp_tool_summary: 'Tool result summary',
  error: 'Error',
  user_question: 'Question',
  executive_summary: 'Executive summary',
  final_analysis: 'Final analysis',
  code_execution: 'Code execution',
  google_search_result: 'Google Search',
  url_context_result: 'URL context',
  provider_fallback: 'Provider fallback',
};

function str(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

const Entry = memo(function Entry({
  item,
  forced,
  highlighted,
}: {
  item: TimelineItem;
  forced: boolean;
  highlighted: boolean;
}) {
  const streaming = !isFinal(item.status);
  const failed = item.status === 'failed' || item.status === 'timed_out' || item.metadata.is_error === true;
  const tool = [str(item.metadata.server_name), str(item.metadata.tool_name)].filter(Boolean).join('.');
  const truncated = item.content.includes('[TRUNCATED:');
  const classes = ['entry', `entry-${item.eventType}`];
  if (failed || item.eventType === 'error') classes.push('entry-failed');
  if (highlighted) classes.push('highlighted');
  return (
    <article className={classes.join(' ')} id={`event-${item.id}`} aria-label={TITLES[item.eventType] ?? item.eventType}>
      <header className="entry-header">
        <span className="entry-title">
          {TITLES[item.eventType] ?? item.eventType}
          {tool && (
            <>
              {' '}
              <code>{tool}</code>
            </>
          )}
        </span>
        {streaming && <span className="badge badge-live">streaming</span>}
        {item.status !== 'completed' && !streaming && <StatusBadge status={item.status} />}
        {item.eventType === 'mcp_tool_summary' && <span className="badge badge-info">summarized</span>}
        {item.eventType === 'llm_tool_call' && (item.metadata.retried === true || typeof item.metadata.recovered === 'string') && (
          <span className="badge badge-warning" title={str(item.metadata.recovered) || 'made again after an interruption'}>
            retried
          </span>
        )}
        {truncated && <span className="badge badge-warning">truncated</span>}
        {item.eventType === 'final_analysis' && forced && <span className="badge badge-warning">forced conclusion</span>}
        {typeof item.metadata.kind === 'string' && item.eventType === 'error' && (
          <span className="badge badge-error">{item.metadata.kind}</span>
        )}
        <a className="anchor" href={`?event=${encodeURIComponent(item.id)}`} aria-label="Link to this event">
          #
        </a>
      </header>
      <EntryBody item={item} streaming={streaming} />
    </article>
  );
});

function EntryBody({ item, streaming }: { item: TimelineItem; streaming: boolean }) {
  if (item.eventType === 'llm_tool_call') {
    return (
      <div className="tool-call">
        <details>
          <summary>Arguments</summary>
          <pre>{prettyJson(item.metadata.arguments ?? '')}</pre>
        </details>
        {isFinal(item.status) ? (
          <details>
            <summary>Result</summary>
            <pre>{item.content}</pre>
          </details>
        ) : (
          <p className="muted small">Running…</p>
        )}
      </div>
    );
  }
  if (item.contentPending && streaming) {
    return <p className="muted small">Receiving a large chunk; the full text follows when it completes.</p>;
  }
  // Markdown once the text is final; plain text while it streams (cheap,
  // and no half-parsed markup flickering).
  const markdown = ['llm_response', 'final_analysis', 'executive_summary', 'mcp_tool_summary'].includes(item.eventType);
  if (markdown && !streaming) return <Markdown text={item.content} />;
  return <p className={`entry-text${item.eventType === 'llm_thinking' ? ' thinking' : ''}`}>{item.content}</p>;
}
