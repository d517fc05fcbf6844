-- 0033: what BM25 recall needs of the statistics (issue 39; docs/adr/0093).
--
-- Recall scores full-text candidates by BM25 and reads every memory that holds one of the
-- query's rarer lexemes (store/recall.py). Both need two more figures, from ANALYZE like the
-- lexemes' rarity (nothing is kept per write):
-- * nrows, the table's row count: a lexeme's frequency times it estimates the rows it
--   matches, so the statement knows which lexemes it can read from the index within its
--   budget. NULL before the table was ever analysed (reltuples -1): recall then reads no
--   lexeme on its own.
-- * avgdl, the average length of a memory's search vector (its lexemes: length(search)), for
--   BM25's length normalisation, estimated from the statistics ANALYZE keeps on that
--   expression (most common values, then the histogram's buckets). The number of lexemes,
--   not bytes: a sealed row's keyed vector has as many tokens as its plain one has lexemes
--   (ADR 0078), so sealed and plain rows score alike.
-- The output columns grow, so the function is made anew; callers read it by column name.
CREATE STATISTICS memories_search_length ON (length(search)) FROM memories;

DROP FUNCTION cortex_search_stats();
CREATE FUNCTION cortex_search_stats(OUT elems text[], OUT freqs real[], OUT nrows float8)
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs INTO elems, freqs
    FROM pg_stats s
    WHERE s.schemaname = current_schema() AND s.tablename = 'memories'
      AND s.attname = 'search'
    LIMIT 1;
    SELECT nullif(greatest(c.reltuples, -1), -1) INTO nrows
    FROM pg_class c WHERE c.oid = 'memories'::regclass;
END
$$;

-- The average number of lexemes of a search vector, NULL without statistics. Reading the
-- expression statistics' view costs milliseconds (it deparses the statistics object), so
-- the server asks once a minute per connection and sends the figure with each recall.
CREATE FUNCTION cortex_search_avgdl() RETURNS float8
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    mcv float8[];
    mcf real[];
    hb float8[];
    common float8;
    share float8;
    avgdl float8;
BEGIN
    SELECT e.most_common_vals::text::float8[], e.most_common_freqs,
           e.histogram_bounds::text::float8[] INTO mcv, mcf, hb
    FROM pg_stats_ext_exprs e
    WHERE e.statistics_schemaname = current_schema()
      AND e.statistics_name = 'memories_search_length'
    LIMIT 1;
    SELECT sum(v * f), sum(f) INTO common, share FROM unnest(mcv, mcf) AS u(v, f);
    IF cardinality(hb) > 1 THEN
        avgdl := coalesce(common, 0) + (1 - coalesce(share, 0))
            * (SELECT avg((hb[i] + hb[i + 1]) / 2) FROM generate_series(1, cardinality(hb) - 1) i);
    ELSIF share > 0 THEN
        avgdl := common / share;
    END IF;
    -- In steps of a quarter octave (19 %): the estimate moves with every analysis (which
    -- lengths ANALYZE lists as most common, a few memories written since), and its last
    -- digits reordered memories of near-equal scores that no write had touched (a query
    -- set answered otherwise after nine short notes elsewhere: tests/server/
    -- test_legacy_tokens.py). A step changes a memory's length ratio by at most 9 %.
    IF avgdl > 0 THEN
        RETURN 2 ^ (round(log(2, avgdl::numeric) * 4) / 4);
    END IF;
    RETURN NULL;
END
$$;
