-- 0028: decisions a cortex makes once and keeps with its data (issue 27; docs/adr/0079).
--
-- The first: encryption at rest when its setting is left unset. A server with a master key
-- decides at its first start: on when the database holds no plain memory and no plain
-- transcript (a new cortex, or one whose every row is sealed: a restore of a sealed one),
-- off when it holds plain data from before. The row keeps the answer, so every later start
-- and every replica answer the same, whatever the database holds by then; it travels with
-- the database (a physical backup, a replica), never with a bundle, whose target decides on
-- its own.
CREATE TABLE cortex_decisions (
    name       text PRIMARY KEY,
    value      jsonb NOT NULL,
    decided_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
