-- What a stage record is for (investigation, synthesis, chat), stored with
-- the stage so that no reader guesses it from the stage's name. Rows written
-- before this column existed are classified once, here.
ALTER TABLE stages ADD COLUMN stage_kind TEXT NOT NULL DEFAULT 'investigation';
UPDATE stages SET stage_kind = 'chat' WHERE chat_id IS NOT NULL;
UPDATE stages SET stage_kind = 'synthesis'
    WHERE chat_id IS NULL AND stage_name LIKE '% - Synthesis';
