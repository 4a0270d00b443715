-- Scheduled requests.
--   switchboard_schedules: one row per schedule name. next_at is the due time of its next run;
--   run_owner, run_until and run_started_at are the lease of the run in progress (NULL when none);
--   the last_* columns describe the last run that ended.
CREATE TABLE switchboard_schedules (
    name            TEXT   PRIMARY KEY,
    spec            TEXT   NOT NULL,
    location        TEXT   NOT NULL,
    next_at         BIGINT NOT NULL,
    run_owner       TEXT,
    run_until       BIGINT,
    run_started_at  BIGINT,
    last_started_at BIGINT,
    last_ended_at   BIGINT,
    last_outcome    TEXT,
    last_error      TEXT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);
-- The run log: one row per run that ended or was skipped, newest first by id.
CREATE TABLE switchboard_schedule_runs (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       TEXT   NOT NULL,
    instance   TEXT   NOT NULL,
    due_at     BIGINT NOT NULL,
    started_at BIGINT NOT NULL,
    ended_at   BIGINT NOT NULL,
    outcome    TEXT   NOT NULL,
    error      TEXT
);
CREATE INDEX switchboard_schedule_runs_name ON switchboard_schedule_runs (name, id);
