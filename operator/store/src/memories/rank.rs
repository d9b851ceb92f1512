//! How recall ranks its candidates, in Rust and identical on both backends:
//! the words of a text, the lexical overlap of a memory with a query, the
//! cosine of two embeddings, and the fusion of both into one score weighted
//! by the memory's confidence and age. The database only finds candidates.

use std::collections::HashSet;

/// The most words of a query that are searched for.
pub(crate) const MAX_QUERY_WORDS: usize = 32;

/// Words shorter than this (in characters) are not searched for.
const MIN_WORD_CHARS: usize = 2;

/// Words longer than this (in characters) are not searched for: hashes and
/// ids, and Postgres indexes no word over 2,047 bytes.
const MAX_WORD_CHARS: usize = 64;

/// The constant of reciprocal-rank fusion: a candidate's relevance is the
/// sum of 1 / (K + rank) over the rankings it is in.
const RRF_K: f64 = 60.0;

/// A memory's weight halves every this many days since it was last
/// reinforced.
const HALF_LIFE_DAYS: f64 = 90.0;

/// The weight of a memory learned from the same alert type as the query's:
/// about three places in the lexical ranking near its top.
pub(crate) const ALERT_TYPE_BOOST: f64 = 1.05;

/// English words too common to say what a text is about (sorted, for
/// binary search).
const STOP_WORDS: &[&str] = &[
    "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "because", "been", "before", "being", "both", "but", "by", "can", "could", "did", "do", "does",
    "doing", "during", "each", "for", "from", "had", "has", "have", "having", "he", "her", "here",
    "him", "his", "how", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more",
    "most", "my", "no", "nor", "not", "of", "off", "on", "once", "only", "or", "other", "our",
    "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the",
    "their", "them", "then", "there", "these", "they", "this", "those", "through", "to", "too",
    "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while",
    "who", "whom", "why", "will", "with", "would", "you", "your",
];

fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// The distinct words of `text`, in the order they first appear: split on
/// every character that is not a letter or a digit, lowercased, without
/// words shorter than two or longer than 64 characters and without common
/// English words. The full-text indexes split and lowercase the same way
/// (Postgres `simple` over the text with its non-alphanumerics replaced,
/// SQLite `unicode61`), so a word of the query finds the memories that have
/// it.
pub(crate) fn words(text: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for raw in text.split(|c: char| !c.is_alphanumeric()) {
        if raw.is_empty() {
            continue;
        }
        let word = raw.to_lowercase();
        let chars = word.chars().count();
        if !(MIN_WORD_CHARS..=MAX_WORD_CHARS).contains(&chars) || is_stop_word(&word) {
            continue;
        }
        if seen.insert(word.clone()) {
            out.push(word);
        }
    }
    out
}

/// Whether `text` has any of `wanted` (lowercase words of [`words`]):
/// [`words`] without building them all.
pub(crate) fn has_any(text: &str, wanted: &HashSet<&str>) -> bool {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|raw| raw.len() >= MIN_WORD_CHARS)
        .any(|raw| {
            if raw.chars().any(char::is_uppercase) {
                wanted.contains(raw.to_lowercase().as_str())
            } else {
                wanted.contains(raw)
            }
        })
}

/// The words a query searches for: the first [`MAX_QUERY_WORDS`] of
/// [`words`].
pub(crate) fn query_words(text: &str) -> Vec<String> {
    let mut words = words(text);
    words.truncate(MAX_QUERY_WORDS);
    words
}

/// The share of a memory's distinct words that the query has (0 for a
/// memory without words).
pub(crate) fn lexical(memory_words: &[String], query: &HashSet<&str>) -> f64 {
    if memory_words.is_empty() {
        return 0.0;
    }
    let shared = memory_words
        .iter()
        .filter(|w| query.contains(w.as_str()))
        .count();
    shared as f64 / memory_words.len() as f64
}

/// The cosine of two vectors of the same, non-zero length; `None` when the
/// lengths differ or either vector is zero.
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> Option<f64> {
    if a.is_empty() || a.len() != b.len() {
        return None;
    }
    let (mut dot, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    let norm = aa.sqrt() * bb.sqrt();
    (norm > 0.0 && norm.is_finite()).then(|| (dot / norm).clamp(-1.0, 1.0))
}

/// How much a memory reinforced `age_days` ago still weighs: 1 when fresh,
/// halved every [`HALF_LIFE_DAYS`].
pub(crate) fn decay(age_days: f64) -> f64 {
    0.5f64.powf(age_days.max(0.0) / HALF_LIFE_DAYS)
}

/// What ranking needs of one candidate.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Candidate<'a> {
    /// Its id (the last tie-break).
    pub id: &'a str,
    /// [`lexical`] overlap with the query.
    pub lexical: f64,
    /// [`cosine`] with the query's vector, when both have one.
    pub cosine: Option<f64>,
    /// The memory's confidence, 0–1.
    pub confidence: f64,
    /// Days since it was last reinforced.
    pub age_days: f64,
    /// Whether it was learned from the query's alert type.
    pub same_alert_type: bool,
}

/// The floors a candidate must clear on at least one signal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Floors {
    /// Least lexical overlap.
    pub lexical: f64,
    /// Least cosine.
    pub similarity: f64,
}

/// The 1-based competition rank ("1224") of each value among `values`,
/// highest first: equal values share a rank.
fn competition_ranks(values: &[(usize, f64)]) -> Vec<(usize, usize)> {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut out = Vec::with_capacity(sorted.len());
    let mut rank = 0;
    for (i, &(index, value)) in sorted.iter().enumerate() {
        if i == 0 || value.total_cmp(&sorted[i - 1].1).is_ne() {
            rank = i + 1;
        }
        out.push((index, rank));
    }
    out
}

/// Ranks `candidates`: those whose lexical overlap (above 0) reaches the
/// lexical floor or whose cosine (above 0) reaches the similarity floor are
/// eligible. Each signal ranks the eligible candidates that clear its own
/// floor (equal values share a rank); a candidate's relevance is the
/// reciprocal-rank fusion of the rankings it is in (1 / (60 + rank) each),
/// its score relevance × confidence × decay (× [`ALERT_TYPE_BOOST`] for the
/// same alert type). Candidates scoring 0 (confidence 0) are left out.
/// Returns (index into `candidates`, score), best first, ties by id; at
/// most `limit`.
pub(crate) fn rank(
    candidates: &[Candidate<'_>],
    floors: Floors,
    limit: usize,
) -> Vec<(usize, f64)> {
    let lexical_ok = |c: &Candidate<'_>| c.lexical > 0.0 && c.lexical >= floors.lexical;
    let cosine_ok = |c: &Candidate<'_>| c.cosine.is_some_and(|s| s > 0.0 && s >= floors.similarity);
    let lexical: Vec<(usize, f64)> = candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| lexical_ok(c))
        .map(|(i, c)| (i, c.lexical))
        .collect();
    let semantic: Vec<(usize, f64)> = candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| cosine_ok(c))
        .map(|(i, c)| (i, c.cosine.unwrap_or_default()))
        .collect();
    let mut relevance = vec![0.0f64; candidates.len()];
    for ranking in [&lexical, &semantic] {
        for (index, rank) in competition_ranks(ranking) {
            relevance[index] += 1.0 / (RRF_K + rank as f64);
        }
    }
    let mut scored: Vec<(usize, f64)> = candidates
        .iter()
        .enumerate()
        .filter(|(i, _)| relevance[*i] > 0.0)
        .map(|(i, c)| {
            let boost = if c.same_alert_type {
                ALERT_TYPE_BOOST
            } else {
                1.0
            };
            let score = relevance[i] * c.confidence.clamp(0.0, 1.0) * decay(c.age_days) * boost;
            (i, score)
        })
        .filter(|(_, score)| *score > 0.0)
        .collect();
    scored.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then_with(|| candidates[a.0].id.cmp(candidates[b.0].id))
    });
    scored.truncate(limit);
    scored
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(id: &str, lexical: f64, cosine: Option<f64>, confidence: f64) -> Candidate<'_> {
        Candidate {
            id,
            lexical,
            cosine,
            confidence,
            age_days: 0.0,
            same_alert_type: false,
        }
    }

    const FLOORS: Floors = Floors {
        lexical: 0.2,
        similarity: 0.75,
    };

    fn ids<'a>(candidates: &[Candidate<'a>], ranked: &[(usize, f64)]) -> Vec<&'a str> {
        ranked.iter().map(|(i, _)| candidates[*i].id).collect()
    }

    #[test]
    fn stop_words_are_sorted_and_lowercase() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
        assert!(STOP_WORDS.iter().all(|w| w.to_lowercase() == *w));
    }

    #[test]
    fn words_split_lowercase_dedupe_and_drop_noise() {
        assert_eq!(
            words("The payments-api pod in ns.prod was OOMKilled; the pod restarted (exit 137) x"),
            [
                "payments",
                "api",
                "pod",
                "ns",
                "prod",
                "oomkilled",
                "restarted",
                "exit",
                "137"
            ]
        );
        assert_eq!(
            words("connection_pool CAFÉ café"),
            ["connection", "pool", "café"]
        );
        assert!(words("a I of the ... !!").is_empty());
        let long = "x".repeat(65);
        assert_eq!(words(&format!("{long} ok")), ["ok"]);
    }

    #[test]
    fn has_any_agrees_with_words() {
        let wanted: HashSet<&str> = ["oomkilled", "café", "api"].into_iter().collect();
        for (text, expected) in [
            ("Pod was OOMKilled", true),
            ("CAFÉ au lait", true),
            ("payments-api.prod", true),
            ("apis and rapid", false),
            ("", false),
            ("the of a", false),
        ] {
            assert_eq!(has_any(text, &wanted), expected, "{text:?}");
            assert_eq!(
                words(text).iter().any(|w| wanted.contains(w.as_str())),
                expected,
                "{text:?}"
            );
        }
    }

    #[test]
    fn a_query_keeps_its_first_words() {
        let text: Vec<String> = (0..50).map(|i| format!("w{i}")).collect();
        let words = query_words(&text.join(" "));
        assert_eq!(words.len(), MAX_QUERY_WORDS);
        assert_eq!(words[0], "w0");
        assert_eq!(words[31], "w31");
    }

    #[test]
    fn lexical_is_the_share_of_the_memory_words_in_the_query() {
        let memory = words("check the connection pool of payments first");
        let query: HashSet<&str> = ["payments", "pool", "latency"].into_iter().collect();
        // connection, pool, payments, first, check: 2 of 5.
        assert!((lexical(&memory, &query) - 0.4).abs() < 1e-9);
        assert_eq!(lexical(&[], &query), 0.0);
    }

    #[test]
    fn cosine_needs_equal_non_zero_vectors() {
        assert!((cosine(&[1.0, 0.0], &[1.0, 0.0]).unwrap() - 1.0).abs() < 1e-9);
        assert!(cosine(&[1.0, 0.0], &[0.0, 1.0]).unwrap().abs() < 1e-9);
        assert!((cosine(&[1.0, 1.0], &[-1.0, -1.0]).unwrap() + 1.0).abs() < 1e-9);
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), None);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), None);
        assert_eq!(cosine(&[], &[]), None);
    }

    #[test]
    fn decay_halves_every_ninety_days() {
        assert_eq!(decay(0.0), 1.0);
        assert!((decay(90.0) - 0.5).abs() < 1e-12);
        assert!((decay(180.0) - 0.25).abs() < 1e-12);
        assert_eq!(
            decay(-3.0),
            1.0,
            "a clock ahead of the database is no bonus"
        );
    }

    #[test]
    fn competition_ranks_share_ties() {
        let ranks = competition_ranks(&[(0, 0.5), (1, 0.9), (2, 0.5), (3, 0.1)]);
        assert_eq!(ranks, [(1, 1), (0, 2), (2, 2), (3, 4)]);
    }

    #[test]
    fn below_both_floors_is_never_recalled() {
        let c = [
            candidate("a", 0.19, Some(0.74), 1.0),
            candidate("b", 0.0, None, 1.0),
            candidate("c", 0.0, Some(-0.9), 1.0),
        ];
        assert!(rank(&c, FLOORS, 10).is_empty());
        let zero = Floors {
            lexical: 0.0,
            similarity: -1.0,
        };
        assert!(
            rank(&c[1..], zero, 10).is_empty(),
            "nothing in common is no match"
        );
    }

    #[test]
    fn more_overlap_ranks_first_then_confidence_then_id() {
        let c = [
            candidate("low", 0.3, None, 0.8),
            candidate("high", 0.6, None, 0.8),
            candidate("tie-b", 0.3, None, 0.8),
            candidate("confident", 0.3, None, 0.81),
        ];
        assert_eq!(
            ids(&c, &rank(&c, FLOORS, 10)),
            ["high", "confident", "low", "tie-b"]
        );
    }

    #[test]
    fn a_rank_step_weighs_less_than_a_tenth_of_confidence() {
        // Fusion with K = 60 flattens relevance: the first and second
        // lexical places differ by 1/61 against 1/62 (1.6%).
        let c = [
            candidate("overlap", 0.6, None, 0.8),
            candidate("confident", 0.3, None, 0.9),
        ];
        assert_eq!(ids(&c, &rank(&c, FLOORS, 10)), ["confident", "overlap"]);
    }

    #[test]
    fn both_signals_beat_one() {
        let c = [
            candidate("words", 0.9, Some(0.5), 0.8),
            candidate("both", 0.5, Some(0.9), 0.8),
            candidate("meaning", 0.0, Some(0.95), 0.8),
        ];
        let ranked = rank(&c, FLOORS, 10);
        assert_eq!(ids(&c, &ranked), ["both", "meaning", "words"]);
        // both: 1/62 + 1/62; meaning: 1/61; words: 1/61.
        assert!((ranked[0].1 - 0.8 * 2.0 / 62.0).abs() < 1e-12);
    }

    #[test]
    fn age_and_alert_type_weigh_in() {
        let mut old = candidate("old", 0.5, None, 0.9);
        old.age_days = 180.0;
        let fresh = candidate("fresh", 0.5, None, 0.5);
        assert_eq!(
            ids(
                &[old.clone(), fresh.clone()],
                &rank(&[old, fresh], FLOORS, 10)
            ),
            ["fresh", "old"]
        );

        let mut typed = candidate("typed", 0.5, None, 0.8);
        typed.same_alert_type = true;
        let other = candidate("a-other", 0.5, None, 0.8);
        let c = [other, typed];
        let ranked = rank(&c, FLOORS, 10);
        assert_eq!(ids(&c, &ranked), ["typed", "a-other"]);
        assert!((ranked[0].1 / ranked[1].1 - ALERT_TYPE_BOOST).abs() < 1e-12);
    }

    #[test]
    fn confidence_zero_is_left_out_and_limit_applies() {
        let c = [
            candidate("a", 0.5, None, 0.0),
            candidate("b", 0.5, None, 0.5),
            candidate("c", 0.4, None, 0.5),
        ];
        assert_eq!(ids(&c, &rank(&c, FLOORS, 1)), ["b"]);
        assert_eq!(rank(&c, FLOORS, 10).len(), 2);
    }
}
