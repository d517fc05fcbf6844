-- 0025: the statistics recall weighs its lexemes with, as a function (issue 27; ADR 0065).
--
-- Recall weights each query lexeme by ln(1/frequency), frequencies from the planner's
-- statistics of memories.search (store/recall.py). Keyed recall (memories sealed at rest)
-- keys its lexemes in the server, so it cannot look them up in the statement that parses the
-- query: a round trip of its own was the whole of sealed recall's extra cost at 10k, and the
-- pg_stats view inlined into the candidate statement (which is never prepared) was planned
-- anew with each recall (five catalogs, +1 ms). A PL/pgSQL function keeps its statement's
-- plan for the session and, read in FROM, runs once per recall.
CREATE FUNCTION cortex_search_stats(OUT elems text[], OUT freqs real[])
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs INTO elems, freqs
    FROM pg_stats s
    WHERE s.schemaname = current_schema() AND s.tablename = 'memories'
      AND s.attname = 'search'
    LIMIT 1;
END
$$;
