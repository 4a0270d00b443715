-- Why a dead letter's item died.
--   cause: the rule that ended the item (record.DeadCause): 'attempts_spent', 'deadline',
--          'permanent', 'undecodable' or 'over_budget'; NULL when not known: a letter
--          captured before the column, or a failed item of a batch run.
ALTER TABLE switchboard_dead_letters ADD COLUMN cause TEXT;
