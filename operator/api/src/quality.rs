//! The quality page's data over REST: how the judge scored the window's
//! investigations over time (by chain and alert type), which failure tags
//! it gave most, where people's ratings and the judge's scores disagree,
//! and a digest of the judge's tool reports — the missing tools asked for
//! most, the hard-to-use ones — the list of what to build next.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use serde::{Deserialize, Serialize};
use tarsy_store::{Disagreement, QualityFilter, RatingBand, ScoreDay, TagCount, ToolReportRow};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::handlers::parse_positive;

/// Tool reports read for the digest (the newest).
const REPORTS_READ: i64 = 2000;
/// Sessions named per digest entry.
const EXAMPLES: usize = 5;

/// Query of `GET /api/v1/quality`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct QualityQuery {
    /// Sessions finished in the last this many days (default 30, at most 365).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 365)]
    days: Option<String>,
    /// Exact chain.
    chain_id: Option<String>,
    /// Exact alert type.
    alert_type: Option<String>,
}

/// People's ratings against the judge's scores.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Ratings {
    /// Rated and scored sessions by rating and score band.
    matrix: Vec<RatingBand>,
    /// The newest sessions where they disagree (rated accurate but scored
    /// 0–34, or rated inaccurate but scored 60–100).
    disagreements: Vec<Disagreement>,
}

/// A tool the judge's reports name, with how often.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ToolMention {
    /// The tool, as the judge named it (the text before its first colon).
    tool: String,
    /// Sessions whose report names it.
    count: usize,
    /// What the reports say about it (the first few).
    notes: Vec<String>,
    /// Some of those sessions.
    sessions: Vec<String>,
}

/// Answer of `GET /api/v1/quality`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Quality {
    /// The window, in days.
    days: i64,
    /// Scores by day, chain and alert type.
    score_days: Vec<ScoreDay>,
    /// Failure tags, most given first.
    failure_tags: Vec<TagCount>,
    /// Ratings against scores.
    ratings: Ratings,
    /// Missing tools the judge asked for, most asked first.
    missing_tools: Vec<ToolMention>,
    /// Existing tools the judge found hard to use, most named first.
    hard_to_use: Vec<ToolMention>,
}

/// `GET /api/v1/quality`.
#[utoipa::path(
    get,
    path = "/api/v1/quality",
    tag = "review",
    summary = "How good the investigations were",
    description = "Over the sessions finished in the window: the judge's scores by day, chain \
        and alert type; failure tags by frequency; people's ratings against the scores, with \
        the sessions where they disagree; the tools the judge's reports ask for most.",
    params(QualityQuery),
    responses(
        (status = 200, description = "The aggregates.", body = Quality),
        (status = 400, description = "An unknown parameter or a window out of range.", body = ErrorBody),
        (status = 500, description = "Unexpected failure.", body = ErrorBody),
        (status = 503, description = "The database is unavailable (retry after `Retry-After` seconds).", body = ErrorBody),
        (status = 507, description = "The database's disk is full.", body = ErrorBody),
    )
)]
pub(crate) async fn quality(
    State(api): State<AppState>,
    query: Result<Query<QualityQuery>, QueryRejection>,
) -> ApiResult<Json<Quality>> {
    let Query(query) =
        query.map_err(|e| ApiError::bad_request(format!("invalid query: {}", e.body_text())))?;
    let days = parse_positive("days", query.days.as_deref(), 30, 365)?;
    let filter = QualityFilter {
        since: Some(chrono::Utc::now() - chrono::Duration::days(days)),
        chain_id: query.chain_id.filter(|c| !c.is_empty()),
        alert_type: query.alert_type.filter(|a| !a.is_empty()),
    };
    let store = &api.store;
    let (score_days, failure_tags, (matrix, disagreements), reports) = tokio::try_join!(
        store.score_days(&filter),
        store.failure_tag_counts(&filter),
        store.ratings_against_scores(&filter, 20),
        store.tool_reports(&filter, REPORTS_READ),
    )?;
    let (missing_tools, hard_to_use) = digest(&reports);
    Ok(Json(Quality {
        days,
        score_days,
        failure_tags,
        ratings: Ratings {
            matrix,
            disagreements,
        },
        missing_tools,
        hard_to_use,
    }))
}

/// The tools the reports name, grouped by name (case-insensitive), most
/// named first.
fn digest(reports: &[ToolReportRow]) -> (Vec<ToolMention>, Vec<ToolMention>) {
    let mut missing: BTreeMap<String, ToolMention> = BTreeMap::new();
    let mut hard: BTreeMap<String, ToolMention> = BTreeMap::new();
    for row in reports {
        let report = tarsy_scoring::parse_tool_report(&row.tool_report);
        for (items, into) in [
            (&report.missing, &mut missing),
            (&report.hard_to_use, &mut hard),
        ] {
            for item in items {
                let (tool, note) = match item.split_once(':') {
                    Some((tool, note)) => (tool.trim(), note.trim()),
                    None => (item.trim(), ""),
                };
                let tool = tool.trim_matches('`');
                let entry = into
                    .entry(tool.to_lowercase())
                    .or_insert_with(|| ToolMention {
                        tool: tool.to_string(),
                        count: 0,
                        notes: Vec::new(),
                        sessions: Vec::new(),
                    });
                if entry.sessions.last() == Some(&row.session_id) {
                    continue;
                }
                entry.count += 1;
                if entry.sessions.len() < EXAMPLES {
                    entry.sessions.push(row.session_id.clone());
                }
                if !note.is_empty()
                    && entry.notes.len() < EXAMPLES
                    && !entry.notes.iter().any(|n| n == note)
                {
                    entry.notes.push(note.to_string());
                }
            }
        }
    }
    let ranked = |map: BTreeMap<String, ToolMention>| {
        let mut list: Vec<ToolMention> = map.into_values().collect();
        list.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.tool.cmp(&b.tool)));
        list
    };
    (ranked(missing), ranked(hard))
}
