//! Ids and names every mode gives the same records. Deterministic, so that
//! applying a step twice (a retry, a restarted process, a second operator
//! replica) finds the records the first attempt created.

/// Name of the stage record answering a follow-up chat question.
pub const CHAT_STAGE_NAME: &str = "Chat Response";

/// Id of stage record `stage_index` (1-based) of `session_id`.
pub fn stage_id(session_id: &str, stage_index: u32) -> String {
    format!("{session_id}-s{stage_index}")
}

/// Id of execution `agent_index` (1-based) of stage record `stage_index`.
pub fn execution_id(session_id: &str, stage_index: u32, agent_index: u32) -> String {
    format!("{}-e{agent_index}", stage_id(session_id, stage_index))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_nest_and_are_stable() {
        assert_eq!(stage_id("abc", 2), "abc-s2");
        assert_eq!(execution_id("abc", 2, 3), "abc-s2-e3");
    }
}
