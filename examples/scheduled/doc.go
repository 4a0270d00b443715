// Command scheduled runs scheduled requests on the embedded SQLite default: a schedule declared
// in code that refreshes exchange rates every second, and a nightly report added while the
// queue runs, as an operator adds one through the admin API. It prints each run from the run
// log as it is logged: a success, a failure (the cadence goes on), a run skipped because the one
// before it was still going, a run asked for while the schedule was paused (a run due during the
// pause is passed over, unlogged), the next run after the resume, and the nightly report run at
// once. It takes about six seconds: the shortest interval a schedule takes is one second.
package main
