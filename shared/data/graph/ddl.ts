// DDL of a hierarchy table's companions (spec Part 2 §2 "Graph edge"; docs/hierarchy.md):
// `{physical}_edges`, the source of truth, and `{physical}_edges_closure`, the index structure
// traversals read: every pair (ancestor, descendant) at most CLOSURE_DEPTH hops apart, with the
// length of a shortest path and the edge types at both ends of one, kept by a statement-level
// trigger on the edges (any write: the edge routes, a record's delete cascading to its edges, a
// migration's SQL) in the writing transaction. Identifiers through quoteIdent; nothing else is
// interpolated (the depth bound is a constant).
import { createHash } from 'node:crypto';
import { quoteIdent } from '../../db/sql.ts';
import { quotedSchema } from '../../tenancy/schema.ts';

/** The closure keeps pairs up to this many hops apart (deeper traversals read the edges). */
export const CLOSURE_DEPTH = 10;

/** Column types a key column can have (ddl.ts columnType): the only text that reaches the DDL besides quoted names. */
const KEY_TYPES = new Set(['uuid', 'text', 'bigint', 'integer', 'double precision', 'boolean', 'date', 'time', 'timestamptz', 'interval', 'jsonb']);

/** `{physical}_{suffix}` within PostgreSQL's 63 characters: a long name keeps a hash of the whole so that two stay distinct. */
function companion(physical: string, suffix: string): string {
  const name = `${physical}_${suffix}`;
  if (name.length <= 63) return name;
  const hash = createHash('sha256').update(physical).digest('hex').slice(0, 8);
  return `${physical.slice(0, 63 - suffix.length - 10)}_${hash}_${suffix}`;
}

export const edgesTableName = (physical: string): string => companion(physical, 'edges');
export const closureTableName = (physical: string): string => companion(physical, 'edges_closure');

/** The names the companions take in the site schema (tables, indexes, function): none may be taken at materialization. */
export function companionNames(physical: string): { tables: string[]; others: string[] } {
  return {
    tables: [edgesTableName(physical), closureTableName(physical)],
    others: ['edges_pkey', 'edges_from_type', 'edges_to_type', 'edges_type', 'edges_link', 'edges_closure_pkey', 'edges_closure_des', 'edges_sync'].map((s) => companion(physical, s)),
  };
}

/**
 * The statements creating the edges table of `physicalTable` (its key column of type
 * `keyColumnType`), its indexes, the closure and the trigger that keeps it; run them in the
 * transaction that creates the table or turns `hierarchy` on.
 */
export function edgesTableDdl(schema: string, physicalTable: string, keyColumnType: string): string[] {
  if (!KEY_TYPES.has(keyColumnType)) throw new Error(`Unsupported key column type ${JSON.stringify(keyColumnType)}.`);
  const q = quotedSchema(schema);
  const kt = keyColumnType;
  const main = `${q}.${quoteIdent(physicalTable)}`;
  const e = `${q}.${quoteIdent(edgesTableName(physicalTable))}`;
  const c = `${q}.${quoteIdent(closureTableName(physicalTable))}`;
  const n = (suffix: string) => quoteIdent(companion(physicalTable, suffix));
  const fn = `${q}.${n('edges_sync')}`;
  return [
    `CREATE TABLE ${e} (
  id uuid NOT NULL DEFAULT gen_random_uuid(),
  from_id ${kt} NOT NULL REFERENCES ${main} ON DELETE CASCADE,
  to_id ${kt} NOT NULL REFERENCES ${main} ON DELETE CASCADE,
  type varchar(50) NOT NULL,
  metadata jsonb NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT ${n('edges_pkey')} PRIMARY KEY (id),
  CONSTRAINT ${n('edges_link')} UNIQUE (from_id, to_id, type),
  CHECK (from_id <> to_id)
)`,
    // The spec's three indexes; the two of (node, type) carry the other end so that a recursive
    // traversal of the edges reads the index alone.
    `CREATE INDEX ${n('edges_from_type')} ON ${e} (from_id, type) INCLUDE (to_id)`,
    `CREATE INDEX ${n('edges_to_type')} ON ${e} (to_id, type) INCLUDE (from_id)`,
    `CREATE INDEX ${n('edges_type')} ON ${e} (type)`,
    // anc is reached from des by `depth` outgoing edges (des → … → anc), the shortest way there;
    // first_type / last_type: the types of the edge leaving des and of the edge reaching anc
    // on such a path (the smallest when several shortest paths differ).
    `CREATE TABLE ${c} (
  anc ${kt} NOT NULL,
  des ${kt} NOT NULL,
  depth smallint NOT NULL,
  first_type varchar(50) COLLATE "C" NOT NULL,
  last_type varchar(50) COLLATE "C" NOT NULL,
  CONSTRAINT ${n('edges_closure_pkey')} PRIMARY KEY (anc, des) INCLUDE (depth, first_type)
)`,
    `CREATE INDEX ${n('edges_closure_des')} ON ${c} (des)`,
    // Memory for the sorts and hashes of a large statement (a whole tree inserted at once).
    `CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql SET work_mem = '64MB' AS $fn$
BEGIN
  -- One writer of a table's edges at a time (the closure of two concurrent writes would miss the
  -- paths through both); each statement below then sees every committed edge and pair.
  LOCK TABLE ${c} IN SHARE ROW EXCLUSIVE MODE;
  IF TG_OP = 'TRUNCATE' THEN
    DELETE FROM ${c};
    RETURN NULL;
  END IF;
  IF TG_OP = 'UPDATE' THEN
    IF NOT EXISTS (SELECT 1 FROM old_rows o JOIN new_rows w ON w.id = o.id WHERE (o.from_id, o.to_id, o.type) IS DISTINCT FROM (w.from_id, w.to_id, w.type)) THEN
      RETURN NULL; -- metadata only
    END IF;
  END IF;
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
${indent(closureDeleteSql(e, c), 4)};
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
${indent(closureInsertSql(c), 4)};
  END IF;
  RETURN NULL;
END
$fn$`,
    `CREATE TRIGGER closure_insert AFTER INSERT ON ${e} REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`,
    `CREATE TRIGGER closure_delete AFTER DELETE ON ${e} REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`,
    `CREATE TRIGGER closure_update AFTER UPDATE ON ${e} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`,
    `CREATE TRIGGER closure_truncate AFTER TRUNCATE ON ${e} FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`,
  ];
}

/** The statements dropping the companions (the edges first: their trigger needs the function). */
export function dropEdgesDdl(schema: string, physicalTable: string): string[] {
  const q = quotedSchema(schema);
  return [
    `DROP TABLE IF EXISTS ${q}.${quoteIdent(edgesTableName(physicalTable))}`,
    `DROP TABLE IF EXISTS ${q}.${quoteIdent(closureTableName(physicalTable))}`,
    `DROP FUNCTION IF EXISTS ${q}.${quoteIdent(companion(physicalTable, 'edges_sync'))}()`,
  ];
}

const indent = (sql: string, n: number) => sql.replace(/^/gm, ' '.repeat(n));
const K = CLOSURE_DEPTH;

/**
 * Per pair, the shortest of the candidate paths `cand(des, anc, depth, ft, lt)` and, among the
 * shortest, the smallest end types: the rows the closure keeps. One grouping: the depth (at most
 * three digits) prefixed to a type orders by depth, then type.
 */
const SHORTEST = `ranked AS (
    SELECT des, anc, min(depth) AS depth, min(to_char(depth, 'FM000') || ft) AS ft, min(to_char(depth, 'FM000') || lt) AS lt FROM cand GROUP BY des, anc
  ),
  fin AS (SELECT des, anc, depth, substr(ft, 4)::varchar(50) AS ft, substr(lt, 4)::varchar(50) AS lt FROM ranked)`;

/**
 * Edges added (`new_rows`): every path that uses them is old-closure segments joined by new
 * edges. `walk(d, v, …)`: from d to v, the last edge a new one (d itself, or a descendant of its
 * start; then any number of times: an old segment up from v, another new edge). Each walk ends
 * at v or goes on up an old segment; the shorter way wins over the stored pair.
 */
function closureInsertSql(c: string): string {
  return `WITH RECURSIVE
  added AS (SELECT DISTINCT from_id AS u, to_id AS v, type::varchar(50) COLLATE "C" AS type FROM new_rows),
  walk(d, v, depth, ft, lt) AS (
    SELECT a.u, a.v, 1, a.type, a.type FROM added a
    UNION
    SELECT s.des, a.v, s.depth + 1, s.first_type, a.type FROM added a JOIN ${c} s ON s.anc = a.u WHERE s.depth < ${K} AND s.des <> a.v
    UNION
    SELECT w.d, a.v, w.depth + h.depth + 1, w.ft, a.type
      FROM walk w
      CROSS JOIN LATERAL (SELECT w.v AS m, 0 AS depth UNION ALL SELECT s.anc, s.depth FROM ${c} s WHERE s.des = w.v) h
      JOIN added a ON a.u = h.m
     WHERE w.depth + h.depth < ${K} AND a.v <> w.d
  ),
  cand AS (
    SELECT d AS des, v AS anc, depth, ft, lt FROM walk
    UNION ALL
    SELECT w.d, s.anc, w.depth + s.depth, w.ft, s.last_type FROM walk w JOIN ${c} s ON s.des = w.v WHERE w.depth + s.depth <= ${K} AND s.anc <> w.d
  ),
  ${SHORTEST}
INSERT INTO ${c} AS p (anc, des, depth, first_type, last_type)
SELECT anc, des, depth, ft, lt FROM fin ORDER BY anc, des -- in index order: far fewer pages touched than at random
ON CONFLICT (anc, des) DO UPDATE SET
  depth = LEAST(p.depth, EXCLUDED.depth),
  first_type = CASE WHEN EXCLUDED.depth < p.depth THEN EXCLUDED.first_type ELSE LEAST(p.first_type, EXCLUDED.first_type) END,
  last_type = CASE WHEN EXCLUDED.depth < p.depth THEN EXCLUDED.last_type ELSE LEAST(p.last_type, EXCLUDED.last_type) END
WHERE EXCLUDED.depth < p.depth OR (EXCLUDED.depth = p.depth AND (EXCLUDED.first_type < p.first_type OR EXCLUDED.last_type < p.last_type))`;
}

/**
 * Edges removed (`old_rows`; `e` holds what is left): a pair may have lost a path only if its
 * descendant reaches a removed edge's start and its ancestor is reached from that edge's end
 * (`hit`, a superset: the starts' descendants × the ends' ancestors). Every other pair is intact.
 * A hit pair is recomputed from what is left: its descendant's edges to the ancestor itself, or to
 * a node whose pair with the ancestor is intact, then back down through hit pairs (`redo`).
 * Recomputed pairs are updated, the others deleted (two disjoint sets of rows).
 */
function closureDeleteSql(e: string, c: string): string {
  return `WITH RECURSIVE
  gone AS (SELECT DISTINCT from_id AS u, to_id AS v FROM old_rows),
  below AS (SELECT u AS n FROM gone UNION SELECT s.des FROM gone g JOIN ${c} s ON s.anc = g.u),
  above AS (SELECT v AS n FROM gone UNION SELECT s.anc FROM gone g JOIN ${c} s ON s.des = g.v),
  hit AS MATERIALIZED (SELECT s.des, s.anc FROM ${c} s WHERE s.des IN (SELECT n FROM below) AND s.anc IN (SELECT n FROM above)),
  redo(des, anc, depth, ft, lt) AS (
    SELECT h.des, h.anc, 1, x.type::varchar(50) COLLATE "C", x.type::varchar(50) COLLATE "C" FROM hit h JOIN ${e} x ON x.from_id = h.des AND x.to_id = h.anc
    UNION
    SELECT h.des, h.anc, s.depth + 1, x.type COLLATE "C", s.last_type
      FROM hit h JOIN ${e} x ON x.from_id = h.des JOIN ${c} s ON s.des = x.to_id AND s.anc = h.anc
     WHERE s.depth < ${K} AND NOT EXISTS (SELECT 1 FROM hit o WHERE o.des = s.des AND o.anc = s.anc)
    UNION
    SELECT h.des, h.anc, r.depth + 1, x.type COLLATE "C", r.lt
      FROM redo r JOIN ${e} x ON x.to_id = r.des JOIN hit h ON h.des = x.from_id AND h.anc = r.anc
     WHERE r.depth < ${K}
  ),
  cand AS (SELECT * FROM redo),
  ${SHORTEST},
  kept AS (
    UPDATE ${c} p SET depth = f.depth, first_type = f.ft, last_type = f.lt FROM fin f WHERE p.des = f.des AND p.anc = f.anc RETURNING 1
  )
DELETE FROM ${c} p USING hit h
 WHERE p.des = h.des AND p.anc = h.anc AND NOT EXISTS (SELECT 1 FROM fin f WHERE f.des = h.des AND f.anc = h.anc)`;
}
