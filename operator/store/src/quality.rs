//! What the quality page aggregates over finished sessions: scores over
//! time by chain and alert type, failure tags by frequency, people's
//! ratings against the judge's scores, and the judge's tool reports (read
//! by the caller). Every query reads the session rows' score and review
//! columns, so it costs one indexed pass over the window's sessions.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::Store;
use crate::db::{BackendKind, Sql, normalize_time};
use crate::error::Result;

/// Which sessions the quality page looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QualityFilter {
    /// Sessions finished at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Exact chain.
    pub chain_id: Option<String>,
    /// Exact alert type.
    pub alert_type: Option<String>,
}

/// Scores of one day, chain and alert type.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ScoreDay {
    /// The day (UTC), `YYYY-MM-DD`.
    pub day: String,
    /// The chain.
    pub chain_id: String,
    /// The alert type.
    pub alert_type: String,
    /// Sessions scored.
    pub scored: i64,
    /// Their average score.
    pub average: f64,
    /// Scores 60–100 (correct and supported).
    pub good: i64,
    /// Scores 35–59 (partly correct or weakly supported).
    pub partial: i64,
    /// Scores 0–34 (wrong or unsupported).
    pub poor: i64,
}

/// How often a failure tag was given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TagCount {
    /// The tag.
    pub tag: String,
    /// Sessions whose score carries it.
    pub count: i64,
}

/// Rated and scored sessions of one rating and one score band.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RatingBand {
    /// The reviewer's rating.
    pub rating: String,
    /// The judge's band: `good` (60–100), `partial` (35–59), `poor` (0–34).
    pub band: String,
    /// Sessions.
    pub count: i64,
}

/// A session where the judge and the reviewer disagree: rated accurate but
/// scored poor, or rated inaccurate but scored good.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Disagreement {
    /// The session.
    pub session_id: String,
    /// Its alert type.
    pub alert_type: String,
    /// The judge's score.
    pub score: i64,
    /// The reviewer's rating.
    pub rating: String,
}

/// A judge's tool report of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolReportRow {
    /// The session.
    pub session_id: String,
    /// The report's text.
    pub tool_report: String,
}

/// The parameters of a quality query: the window's start (`$1`) then the
/// text filters.
#[derive(Default)]
struct Binds {
    since: Option<DateTime<Utc>>,
    text: Vec<String>,
}

impl Binds {
    fn apply(&self, mut sql: Sql) -> Sql {
        if let Some(since) = self.since {
            sql = sql.bind(since);
        }
        for t in &self.text {
            sql = sql.bind(t.clone());
        }
        sql
    }
}

/// A row of [`Store::score_days`]: day, chain, alert type, scored,
/// average, good, partial, poor.
type ScoreDayRow = (String, String, String, i64, f64, i64, i64, i64);

/// The band a score falls in, as SQL over the `score` column.
const BAND: &str =
    "CASE WHEN score >= 60 THEN 'good' WHEN score >= 35 THEN 'partial' ELSE 'poor' END";

impl Store {
    /// The WHERE clause of `filter` over the session columns (prefixed
    /// `prefix`: `""` or `"s."`): finished, not hidden, in the window;
    /// with the statement's binds.
    fn quality_where(filter: &QualityFilter, prefix: &str) -> (String, Binds) {
        let mut clauses = vec![
            format!("{prefix}deleted_at IS NULL"),
            format!("{prefix}completed_at IS NOT NULL"),
        ];
        let mut binds = Binds::default();
        if let Some(since) = filter.since {
            binds.since = Some(normalize_time(since));
            clauses.push(format!("{prefix}completed_at >= $1"));
        }
        for (column, value) in [
            ("chain_id", &filter.chain_id),
            ("alert_type", &filter.alert_type),
        ] {
            if let Some(v) = value {
                binds.text.push(v.clone());
                let n = binds.text.len() + usize::from(binds.since.is_some());
                clauses.push(format!("{prefix}{column} = ${n}"));
            }
        }
        (clauses.join(" AND "), binds)
    }

    /// Scores by day, chain and alert type, oldest day first.
    pub async fn score_days(&self, filter: &QualityFilter) -> Result<Vec<ScoreDay>> {
        let (clause, binds) = Self::quality_where(filter, "");
        let kind = self.db.kind();
        let day = match kind {
            BackendKind::Postgres => "to_char(completed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
            BackendKind::Sqlite => "substr(completed_at, 1, 10)",
        };
        let sql = Sql::dynamic(format!(
            "SELECT {day} AS day, chain_id, alert_type, COUNT(*) AS scored, \
             AVG(CAST(score AS DOUBLE PRECISION)) AS average, \
             SUM(CASE WHEN score >= 60 THEN 1 ELSE 0 END) AS good, \
             SUM(CASE WHEN score >= 35 AND score < 60 THEN 1 ELSE 0 END) AS partial, \
             SUM(CASE WHEN score < 35 THEN 1 ELSE 0 END) AS poor \
             FROM alert_sessions WHERE {clause} AND score IS NOT NULL \
             GROUP BY 1, chain_id, alert_type ORDER BY 1, chain_id, alert_type"
        ));
        let rows: Vec<ScoreDayRow> = self.db.fetch_all(binds.apply(sql)).await?;
        Ok(rows
            .into_iter()
            .map(
                |(day, chain_id, alert_type, scored, average, good, partial, poor)| ScoreDay {
                    day,
                    chain_id,
                    alert_type,
                    scored,
                    average: (average * 10.0).round() / 10.0,
                    good,
                    partial,
                    poor,
                },
            )
            .collect())
    }

    /// Failure tags by how many sessions' scores carry them, most first.
    pub async fn failure_tag_counts(&self, filter: &QualityFilter) -> Result<Vec<TagCount>> {
        let (clause, binds) = Self::quality_where(filter, "");
        let kind = self.db.kind();
        let tags = match kind {
            BackendKind::Postgres => {
                "SELECT t.tag, COUNT(*) FROM alert_sessions, \
                 jsonb_array_elements_text(score_failure_tags) AS t(tag)"
            }
            BackendKind::Sqlite => {
                "SELECT j.value AS tag, COUNT(*) FROM alert_sessions, json_each(score_failure_tags) AS j"
            }
        };
        let sql = Sql::dynamic(format!(
            "{tags} WHERE {clause} AND score_failure_tags IS NOT NULL \
             GROUP BY 1 ORDER BY 2 DESC, 1"
        ));
        let rows: Vec<(String, i64)> = self.db.fetch_all(binds.apply(sql)).await?;
        Ok(rows
            .into_iter()
            .map(|(tag, count)| TagCount { tag, count })
            .collect())
    }

    /// Rated and scored sessions by rating and score band, and the newest
    /// sessions (at most `limit`) where the two disagree.
    pub async fn ratings_against_scores(
        &self,
        filter: &QualityFilter,
        limit: i64,
    ) -> Result<(Vec<RatingBand>, Vec<Disagreement>)> {
        let (clause, binds) = Self::quality_where(filter, "");
        let matrix: Vec<(String, String, i64)> = self
            .db
            .fetch_all(binds.apply(Sql::dynamic(format!(
                "SELECT review_rating, {BAND}, COUNT(*) FROM alert_sessions \
                 WHERE {clause} AND score IS NOT NULL AND review_rating IS NOT NULL \
                 GROUP BY 1, 2 ORDER BY 1, 2"
            ))))
            .await?;
        let disagreements: Vec<(String, String, i64, String)> = self
            .db
            .fetch_all(binds.apply(Sql::dynamic(format!(
                "SELECT id, alert_type, score, review_rating FROM alert_sessions \
                 WHERE {clause} AND ((review_rating = 'accurate' AND score < 35) \
                 OR (review_rating = 'inaccurate' AND score >= 60)) \
                 ORDER BY completed_at DESC, id LIMIT {limit}"
            ))))
            .await?;
        Ok((
            matrix
                .into_iter()
                .map(|(rating, band, count)| RatingBand {
                    rating,
                    band,
                    count,
                })
                .collect(),
            disagreements
                .into_iter()
                .map(|(session_id, alert_type, score, rating)| Disagreement {
                    session_id,
                    alert_type,
                    score,
                    rating,
                })
                .collect(),
        ))
    }

    /// The judge's tool reports of the newest scored sessions (at most
    /// `limit`): each session's latest completed attempt that has one.
    pub async fn tool_reports(
        &self,
        filter: &QualityFilter,
        limit: i64,
    ) -> Result<Vec<ToolReportRow>> {
        let (clause, binds) = Self::quality_where(filter, "s.");
        let rows: Vec<(String, String)> = self
            .db
            .fetch_all(binds.apply(Sql::dynamic(format!(
                "SELECT s.id, sc.tool_report FROM alert_sessions s \
                     JOIN session_scores sc ON sc.session_id = s.id \
                     WHERE {clause} AND s.score IS NOT NULL AND sc.status = 'completed' \
                     AND sc.tool_report IS NOT NULL \
                     AND sc.attempt = (SELECT MAX(attempt) FROM session_scores x \
                                       WHERE x.session_id = s.id AND x.status = 'completed') \
                     ORDER BY s.completed_at DESC, s.id LIMIT {limit}"
            ))))
            .await?;
        Ok(rows
            .into_iter()
            .map(|(session_id, tool_report)| ToolReportRow {
                session_id,
                tool_report,
            })
            .collect())
    }
}
