import type { ScoreBadge as Badge } from '../api/types';

/** The band a score falls in: the judge's verdict ranges (correct 60–100, partial 35–59, wrong 0–34). */
export function scoreBand(score: number): 'good' | 'partial' | 'poor' {
  if (score >= 60) return 'good';
  if (score >= 35) return 'partial';
  return 'poor';
}

/**
 * A session's score as text and colour (the text carries the meaning), with
 * its failure tags: "88/100", "scoring…" while the judge works, "scoring
 * failed" when its only attempt did. Nothing for a session never scored.
 */
export function ScoreBadge({ score, tags = true }: { score: Badge | null | undefined; tags?: boolean }) {
  if (!score) return null;
  const value = score.score;
  const label =
    value != null
      ? `${value}/100`
      : score.status === 'in_progress'
        ? 'scoring…'
        : 'scoring failed';
  const band = value != null ? `score-${scoreBand(value)}` : score.status === 'failed' ? 'score-poor' : 'score-pending';
  const note =
    score.status === 'in_progress' && value != null
      ? ' (re-scoring…)'
      : score.status === 'failed' && value != null
        ? ' (latest re-score failed)'
        : '';
  return (
    <span className="score">
      <span className={`score-badge ${band}`} title={`Judge's score${note}`}>
        {label}
      </span>
      {note && <span className="muted small">{note}</span>}
      {tags && score.failure_tags.length > 0 && (
        <span className="failure-tags" aria-label="Failure tags">
          {score.failure_tags.map((t) => (
            <span key={t} className="failure-tag">
              {t}
            </span>
          ))}
        </span>
      )}
    </span>
  );
}
