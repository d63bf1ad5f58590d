-- The trace each transition was made in (when one was recorded): the operator's support file
-- shows it, so a buyer's complaint leads to the trace of each step.
ALTER TABLE attempt_transitions ADD COLUMN trace_id TEXT;
