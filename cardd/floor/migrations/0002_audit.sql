-- who did what on the floor's HTTP side: every log-in (accepted or refused, from where) and
-- every acknowledgement of a floor alarm, kept as long as the records
CREATE TABLE floor_audit (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at       timestamptz NOT NULL,
    action   text NOT NULL CHECK (action IN ('login', 'logout', 'acknowledge')),
    outcome  text NOT NULL CHECK (outcome IN ('ok', 'refused', 'limited')),
    who      text NOT NULL,
    address  text,
    alarm_id bigint,
    detail   text NOT NULL DEFAULT ''
);
CREATE INDEX floor_audit_at ON floor_audit (at);
