//! What a person's review of a session does to the memories learned from
//! it: the reviewer is right.

use tarsy_core::ReviewRating;

/// How much a rating moves the confidence of a session's memories.
pub const REVIEW_CONFIDENCE_STEP: f64 = 0.2;

/// The change a review makes to the memories of the reviewed session.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReviewEffect {
    /// Their confidence moves by this much (clamped to 0–1 by the store).
    Confidence(f64),
    /// They are deprecated: never injected or recalled again.
    Deprecate,
}

/// Accurate: the memories gain confidence; partially accurate: they lose
/// some; inaccurate: they are deprecated.
pub fn review_effect(rating: ReviewRating) -> ReviewEffect {
    match rating {
        ReviewRating::Accurate => ReviewEffect::Confidence(REVIEW_CONFIDENCE_STEP),
        ReviewRating::PartiallyAccurate => ReviewEffect::Confidence(-REVIEW_CONFIDENCE_STEP),
        ReviewRating::Inaccurate => ReviewEffect::Deprecate,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rating_decides() {
        assert_eq!(
            review_effect(ReviewRating::Accurate),
            ReviewEffect::Confidence(REVIEW_CONFIDENCE_STEP)
        );
        assert_eq!(
            review_effect(ReviewRating::PartiallyAccurate),
            ReviewEffect::Confidence(-REVIEW_CONFIDENCE_STEP)
        );
        assert_eq!(
            review_effect(ReviewRating::Inaccurate),
            ReviewEffect::Deprecate
        );
    }
}
