import type { Cost, SessionDetail } from '../api/types';
import { executionLabel, numberedStages, stageTitle } from '../state/rows';
import { CostAmount, CostSummary } from './Cost';
import { formatCount } from './format';
import { StatusBadge } from './StatusBadge';

/** The figures of a cost as table cells: calls, tokens by kind, total tokens, cost. */
function CostCells({ cost }: { cost: Cost | null }) {
  const t = cost?.tokens;
  const n = (value: number | undefined) => (value === undefined ? '—' : formatCount(value));
  return (
    <>
      <td className="number">{n(cost?.calls)}</td>
      <td className="number">{n(t?.input_tokens)}</td>
      <td className="number">{n(t?.output_tokens)}</td>
      <td className="number">{n(t?.thinking_tokens)}</td>
      <td className="number">{n(t?.total_tokens)}</td>
      <td className="number">
        <CostAmount cost={cost} />
      </td>
    </>
  );
}

/**
 * What the session cost, stage by stage and agent by agent: the agents of a
 * parallel stage in rows one under the other, so their cost and tokens
 * compare at a glance. The total also counts what ran outside the stages (the executive
 * summary, scoring, memory).
 */
export function SessionCost({ detail }: { detail: SessionDetail }) {
  const stages = numberedStages(detail.stages).filter(({ stage }) => stage.executions.length > 0);
  return (
    <section className="card" aria-labelledby="cost-title">
      <h2 id="cost-title">Cost</h2>
      <p>
        <CostSummary cost={detail.cost} />
      </p>
      {detail.cost?.partial && (
        <p className="warning">
          A lower bound: {detail.cost.unpriced_calls} of {detail.cost.calls} LLM calls used tokens but have no price
          estimate (their model has no price).
        </p>
      )}
      {stages.length > 0 && (
        <table className="cost-table">
          <caption className="visually-hidden">Cost by stage and agent</caption>
          <thead>
            <tr>
              <th scope="col">Stage / agent</th>
              <th scope="col">Status</th>
              <th scope="col" className="number">LLM calls</th>
              <th scope="col" className="number">Input tokens</th>
              <th scope="col" className="number">Output tokens</th>
              <th scope="col" className="number">Thinking tokens</th>
              <th scope="col" className="number">Total tokens</th>
              <th scope="col" className="number">Cost</th>
            </tr>
          </thead>
          {stages.map(({ stage, number }) => (
            <tbody key={stage.id} data-stage-id={stage.id}>
              <tr className="cost-stage">
                <th scope="row">{stageTitle(stage, number)}</th>
                <td>
                  <StatusBadge status={stage.status} />
                </td>
                <CostCells cost={stage.cost} />
              </tr>
              {stage.executions.map((e) => (
                <tr key={e.id} className="cost-execution" data-execution-id={e.id}>
                  <th scope="row">{executionLabel(stage, e)}</th>
                  <td>
                    <StatusBadge status={e.status} />
                  </td>
                  <CostCells cost={e.cost} />
                </tr>
              ))}
            </tbody>
          ))}
          <tfoot>
            <tr>
              <th scope="row">Session total</th>
              <td className="muted small">with the executive summary, scoring and memory</td>
              <CostCells cost={detail.cost} />
            </tr>
          </tfoot>
        </table>
      )}
    </section>
  );
}
