-- 0032: spoke-memory rows the deep audit and the storage quota missed (issue 37 items 13, 16).
--
-- The record rows written before the deep audit covered them (issue 37
-- item 13, docs/adr/0087).
--
-- From this release every op that writes a memory_records row names it in its op record
-- (kind "record": space, subject, placement, provenance, kind, structured digest), and the
-- deep audit compares each row with its latest record: a placement changed behind the
-- server (context_id set to NULL moves a private record to shared) is named. Rows written
-- before have no such record. This list names them; the first server that starts after
-- the upgrade covers each (one spoke.memory.records.adopt record per space, in the chain,
-- MAC'd under the master key when there is one) and empties the list in the same
-- transaction. A row the chain already covers is never adopted (a row listed here later,
-- by hand, cannot have a changed placement adopted into the chain).
CREATE TABLE spoke_records_to_adopt (
    memory_id uuid PRIMARY KEY
);
INSERT INTO spoke_records_to_adopt (memory_id) SELECT memory_id FROM memory_records;

-- Spoke-memory bytes in the storage quota (issue 37 item 16, docs/adr/0087 "Spoke bytes").
--
-- agent_usage.spoke counts what the spoke-memory tables hold beside the memories (whose
-- text already counts as memories): a profile's text (its last writer), a candidate's
-- proposed content (who captured it), a reflection's text and basis (who generated it), a
-- record's structured fields and cognition (who captured it), and every staged import
-- chunk and export chunk (who created the import or export). Kept by statement triggers
-- like migration 0009's (one counter update per agent per statement, agents in order), and
-- defined once: cortex_spoke_counted(table, rows) is the per-row (agent, bytes) query of a
-- table over any relation of its rows, used by the trigger (over its transition tables),
-- the backfill below and the deep audit's recount (cortex_spoke_usage()).
ALTER TABLE agent_usage ADD COLUMN spoke bigint NOT NULL DEFAULT 0;

CREATE FUNCTION cortex_spoke_counted(tab text, relation text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT format(CASE tab
        WHEN 'memory_profiles' THEN
            'SELECT updated_by, octet_length(text)::bigint FROM %I'
        WHEN 'memory_candidates' THEN
            'SELECT captured_by, coalesce(octet_length(proposed::text), 0)::bigint FROM %I'
        WHEN 'memory_reflections' THEN
            'SELECT created_by, (octet_length(text) + octet_length(basis::text))::bigint FROM %I'
        WHEN 'memory_records' THEN
            'SELECT captured_by, (coalesce(octet_length(structured::text), 0)'
            ' + coalesce(octet_length(cognition::text), 0))::bigint FROM %I'
        WHEN 'memory_import_chunks' THEN
            'SELECT i.created_by, octet_length(c.data)::bigint FROM %I c'
            ' JOIN memory_imports i ON i.import_id = c.import_id'
        WHEN 'memory_export_chunks' THEN
            'SELECT e.created_by, octet_length(c.data)::bigint FROM %I c'
            ' JOIN memory_exports e ON e.export_id = c.export_id'
    END, relation)
$$;

CREATE FUNCTION agent_usage_spoke() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    delta text;
BEGIN
    delta := CASE TG_OP
        WHEN 'INSERT' THEN cortex_spoke_counted(TG_TABLE_NAME, 'new_rows')
        WHEN 'DELETE' THEN 'SELECT a, -b FROM ('
            || cortex_spoke_counted(TG_TABLE_NAME, 'old_rows') || ') o(a, b)'
        ELSE cortex_spoke_counted(TG_TABLE_NAME, 'new_rows') || ' UNION ALL SELECT a, -b FROM ('
            || cortex_spoke_counted(TG_TABLE_NAME, 'old_rows') || ') o(a, b)'
    END;
    EXECUTE 'INSERT INTO agent_usage AS u (agent, spoke) SELECT agent, sum(bytes) FROM ('
        || delta || ') AS d(agent, bytes) GROUP BY agent HAVING sum(bytes) <> 0 ORDER BY agent'
        || ' ON CONFLICT (agent) DO UPDATE SET spoke = u.spoke + EXCLUDED.spoke';
    RETURN NULL;
END
$$;

DO $$
DECLARE
    tab text;
BEGIN
    FOREACH tab IN ARRAY ARRAY['memory_profiles', 'memory_candidates', 'memory_reflections',
                               'memory_records', 'memory_import_chunks',
                               'memory_export_chunks'] LOOP
        EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS new_rows'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION agent_usage_spoke()',
                       'agent_usage_' || tab || '_insert', tab);
        EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %I REFERENCING OLD TABLE AS old_rows'
                       ' NEW TABLE AS new_rows FOR EACH STATEMENT'
                       ' EXECUTE FUNCTION agent_usage_spoke()', 'agent_usage_' || tab || '_update',
                       tab);
        EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS old_rows'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION agent_usage_spoke()',
                       'agent_usage_' || tab || '_delete', tab);
    END LOOP;
END
$$;

-- Every agent's spoke bytes summed over the tables themselves (the backfill, the recount).
CREATE FUNCTION cortex_spoke_usage() RETURNS TABLE (agent text, bytes bigint)
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    counted text;
BEGIN
    SELECT string_agg(cortex_spoke_counted(t, t), ' UNION ALL ') INTO counted
    FROM unnest(ARRAY['memory_profiles', 'memory_candidates', 'memory_reflections',
                      'memory_records', 'memory_import_chunks', 'memory_export_chunks']) t;
    RETURN QUERY EXECUTE 'SELECT a, sum(b)::bigint FROM (' || counted || ') s(a, b) GROUP BY a';
END
$$;

INSERT INTO agent_usage AS u (agent, spoke)
    SELECT agent, bytes FROM cortex_spoke_usage() WHERE bytes <> 0 ORDER BY agent
    ON CONFLICT (agent) DO UPDATE SET spoke = EXCLUDED.spoke;
