-- 0026: the statistics recall weighs its lexemes with, as a function (issue 27; ADR 0065).
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

-- Keep the search vector in the row. A sealed row's vector (24-character tokens, about
-- twice a plain one's bytes) was its widest column, so the toaster moved it out of line for
-- a quarter of the rows at 100k: each recall's recency scan, which tests @@ on every row it
-- passes, then read a TOAST chunk per row (5820 buffers for 6000 rows, 1176 on plain rows),
-- and the sealed p95 was 16 % over the plain one. MAIN compresses it or moves it out only
-- when nothing else is left to move (the sealed value goes first; it is read for the final
-- page only). Rows keep their storage until next written (the re-sealing worker rewrites
-- them).
ALTER TABLE memories ALTER COLUMN search SET STORAGE MAIN;
