-- cardfloor's archive (docs/floor-service.md, "The archive"). Applied once, in one transaction,
-- by Archive.open; schema_version records it.

-- every table known: its latest status and state, and where its stored chain stands
CREATE TABLE floor_tables (
    id             integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    site           text NOT NULL,
    table_name     text NOT NULL,
    online         boolean,
    session        bigint,
    status         jsonb,
    state          jsonb,
    last_seen      timestamptz,
    clock_offset_s double precision,          -- the table's clock minus the floor's, at its last state
    head_seq       bigint NOT NULL DEFAULT 0, -- the highest seq stored (0: none)
    low_seq        bigint,                    -- the lowest seq stored: the chain is trusted from there
    UNIQUE (site, table_name)
);

-- one row per stored record, across every day: its primary key is what makes "(site, table, seq)
-- stored once" hold whatever day the record's time falls on (records' own key must include
-- the partition key, so it cannot), and its hash and prev are what the chain checks read
CREATE TABLE chain (
    tid  integer NOT NULL REFERENCES floor_tables (id),
    seq  bigint NOT NULL,
    hash bytea NOT NULL,
    prev bytea NOT NULL,
    day  date NOT NULL,                       -- the record's partition, for retention
    PRIMARY KEY (tid, seq)
);
-- rows arrive in about day order: a BRIN index finds a day's rows at a fraction of a B-tree's cost
CREATE INDEX chain_day ON chain USING brin (day);

-- the records, one partition per UTC day of the record's own time (records_YYYYMMDD, created
-- ahead and as records need them; retention drops whole partitions)
CREATE TABLE records (
    tid         integer NOT NULL,
    seq         bigint NOT NULL,
    time        timestamptz NOT NULL,
    received_at timestamptz NOT NULL,
    kind        text NOT NULL,
    source      text NOT NULL,
    reason      text NOT NULL,
    severity    text NOT NULL,
    who         text,
    round       text,
    message     text NOT NULL,
    data        jsonb NOT NULL,
    replay      boolean NOT NULL,
    PRIMARY KEY (tid, seq, time)
) PARTITION BY RANGE (time);
CREATE INDEX records_time ON records (tid, time);

-- records the chain checks refused (a break, a rewrite, a hash that does not recompute), as
-- they came, for the investigation: never part of the archive
CREATE TABLE refused_records (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    site        text NOT NULL,
    table_name  text NOT NULL,
    seq         bigint NOT NULL,
    hash        text NOT NULL,
    reason      text NOT NULL,
    detail      text NOT NULL,
    record      json NOT NULL,
    received_at timestamptz NOT NULL,
    UNIQUE (site, table_name, seq, hash, reason)
);

-- every anchor received; "pending" until the record it names is stored
CREATE TABLE anchors (
    tid         integer NOT NULL REFERENCES floor_tables (id),
    seq         bigint NOT NULL,
    export_hash text NOT NULL,
    hash        text NOT NULL,                -- the journal's own chain hash (cardctl verify-journal --anchors)
    time        timestamptz NOT NULL,
    received_at timestamptz NOT NULL,
    verdict     text NOT NULL CHECK (verdict IN ('pending', 'matched', 'mismatch')),
    PRIMARY KEY (tid, seq, export_hash)
);
CREATE INDEX anchors_pending ON anchors (tid, seq) WHERE verdict = 'pending';

-- the missing seq ranges between stored records, since when each is known
CREATE TABLE gaps (
    tid       integer NOT NULL REFERENCES floor_tables (id),
    first_seq bigint NOT NULL,
    last_seq  bigint NOT NULL,
    since     timestamptz NOT NULL,
    PRIMARY KEY (tid, first_seq),
    CHECK (first_seq <= last_seq)
);

-- online/offline intervals (a new one at each change of online or session), for the minutes
-- offline in the reports; until is null for the current one
CREATE TABLE status_history (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tid     integer NOT NULL REFERENCES floor_tables (id),
    online  boolean NOT NULL,
    session bigint NOT NULL,
    since   timestamptz NOT NULL,
    until   timestamptz
);
CREATE INDEX status_history_table ON status_history (tid, since);

-- the floor's alarms, with their raising, clearing and acknowledgement
CREATE TABLE floor_alarms (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    site       text NOT NULL,
    table_name text NOT NULL,
    kind       text NOT NULL,
    key        text NOT NULL,
    detail     text NOT NULL,
    raised_at  timestamptz NOT NULL,
    cleared_at timestamptz,
    acked_by   text,
    acked_at   timestamptz,
    note       text
);
-- at most one uncleared alarm per (site, table, kind, key): raising it again is a no-op
CREATE UNIQUE INDEX floor_alarms_open ON floor_alarms (site, table_name, kind, key) WHERE cleared_at IS NULL;
CREATE INDEX floor_alarms_raised ON floor_alarms (raised_at);
