-- Schedules changed at run time (durable.Queue.AddSchedule, PauseSchedule, ResumeSchedule,
-- RemoveSchedule, RunScheduleNow). Rows of switchboard_schedules are still never deleted: a
-- removed schedule keeps its row, and its run log keeps its runs. Times are microseconds since
-- the Unix epoch.
--   request:      the registered request name (durable.Register) a schedule added at run time
--                 sends; NULL for a schedule declared in code (durable.Schedule), whose request
--                 the code builds.
--   payload:      the request of a schedule added at run time, encoded by its registration's
--                 codec; NULL for one declared in code.
--   paused_at:    when the schedule was paused; NULL while it is not. Due runs of a paused
--                 schedule are passed over, not logged.
--   paused_until: when a timed pause ends by itself; NULL: until resumed.
--   paused_by:    the operator who paused it.
--   removed_at:   when a schedule added at run time was removed; NULL while it is live. No
--                 instance runs a removed schedule; adding one of the same name again revives
--                 the row.
--   removed_by:   the operator who removed it.
--   run_now_at:   when an operator asked for a run now (RunScheduleNow); NULL when none is
--                 pending. One instance claims it, under the run lease, as it claims a due run.
--   run_now_by:   the operator who asked for it.
ALTER TABLE switchboard_schedules ADD COLUMN request TEXT;
ALTER TABLE switchboard_schedules ADD COLUMN payload BLOB;
ALTER TABLE switchboard_schedules ADD COLUMN paused_at BIGINT;
ALTER TABLE switchboard_schedules ADD COLUMN paused_until BIGINT;
ALTER TABLE switchboard_schedules ADD COLUMN paused_by TEXT;
ALTER TABLE switchboard_schedules ADD COLUMN removed_at BIGINT;
ALTER TABLE switchboard_schedules ADD COLUMN removed_by TEXT;
ALTER TABLE switchboard_schedules ADD COLUMN run_now_at BIGINT;
ALTER TABLE switchboard_schedules ADD COLUMN run_now_by TEXT;
-- The run log's run_now_by: the operator whose run-now the run was; NULL for a run that was
-- due by the schedule's spec.
ALTER TABLE switchboard_schedule_runs ADD COLUMN run_now_by TEXT;
