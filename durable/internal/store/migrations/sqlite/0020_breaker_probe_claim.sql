-- The claim of a shared breaker's probes, by its token.
--   probe_claim: while half-open, the token of the claim holding the probes (the registry's
--                breaker.Transition.Claim); NULL otherwise. A registry knows its own claim by
--                it, also one that committed after the registry stopped waiting for it, and
--                never takes a claim of another process that goes by the same instance name
--                (probe_owner) for its own.
-- A breaker half-open before the column has no token: every registry takes its claim for
-- another's, and its probes are claimed again once probe_until has passed.
ALTER TABLE switchboard_breakers ADD COLUMN probe_claim TEXT;
