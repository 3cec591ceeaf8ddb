-- the pit page's sessions logged out before their end: their cookies are refused until they
-- would have ended, across restarts of cardfloor. Kept by the SHA-256 of the session's own
-- random token (never the token itself); a row is deleted once its session would have ended.
CREATE TABLE ended_sessions (
    session bytea PRIMARY KEY,
    until   timestamptz NOT NULL
);
CREATE INDEX ended_sessions_until ON ended_sessions (until);
