// Traversals of a hierarchy table (docs/hierarchy.md "Speed"): from a set of base records, the
// records reached in each direction within a depth, through edges of the followed types and
// records the caller may read — one statement, never a round trip per level. The closure
// (ddl.ts) answers it with one index range per base when nothing narrows the walk; a read plan
// that keeps rows out, a subset of the edge types or a depth beyond the closure walk the edges
// in a recursive CTE instead. Both give, per base and reached record, the length of a shortest
// path (`depth`) and the smallest type of the edge at the record's end of one (`type`).
import type { EntityManager } from '@mikro-orm/postgresql';
import { preparedRows } from '../../db/sql.ts';
import { ALL_ROWS } from '../records/access.ts';
import type { RecordRow } from '../records/target.ts';
import { plain } from '../records/read.ts';
import { CLOSURE_DEPTH } from './ddl.ts';
import { keyArray, keySet, type GraphTarget } from './target.ts';

export type Direction = 'descendants' | 'ancestors';

export interface Walk {
  dirs: Direction[];
  /** The followed edge types; null: every type. */
  types: string[] | null;
  depth: number;
}

/** A record reached from base number `bi` (1-based, in the order given). `r`: JSON text (flat tables) or the record. */
export interface Reached {
  bi: number;
  dir: Direction;
  depth: number;
  type: string;
  /** The record's key as text (how the edges name it). */
  k: string;
  r: RecordRow | string;
}

/** The ends of an edge in the walking direction: descendants follow incoming edges (from the child), ancestors outgoing ones. */
const ENDS = { descendants: { here: 'to_id', next: 'from_id' }, ancestors: { here: 'from_id', next: 'to_id' } } as const;

/**
 * Whether the closure answers this walk exactly: no record the caller may not read can be on a
 * path, the depth is within what it keeps, and it covers the edges the walk follows (every
 * edge present, when a subset of types is followed: the types present are checked first).
 */
async function closureServes(em: EntityManager, g: GraphTarget, walk: Walk): Promise<boolean> {
  if (g.t.readable !== ALL_ROWS || walk.depth > CLOSURE_DEPTH) return false;
  if (walk.types === null) return true;
  const present = await preparedRows<{ type: string }>(em, presentTypesSql(g));
  return present.every((p) => walk.types!.includes(p.type));
}

/** The distinct edge types present, read off the (type) index one probe per type. */
export const presentTypesSql = (g: GraphTarget): string =>
  `WITH RECURSIVE p(type) AS (SELECT min(type) FROM ${g.edges} UNION ALL SELECT (SELECT min(e.type) FROM ${g.edges} e WHERE e.type > p.type) FROM p WHERE p.type IS NOT NULL) SELECT type FROM p WHERE type IS NOT NULL`;

/** The reached set of one direction by the closure: (bi, node, depth, type). */
function closureSql(g: GraphTarget, dir: Direction): string {
  const [from, to, type] = dir === 'descendants' ? ['anc', 'des', 'first_type'] : ['des', 'anc', 'last_type'];
  return `SELECT b.bi, '${dir}' AS dir, c.${to} AS node, c.depth::int AS depth, c.${type}::text AS type FROM b JOIN ${g.closure} c ON c.${from} = b.base WHERE c.depth <= ?`;
}

/**
 * The reached set of one direction by a recursive walk over the edges: each step joins the
 * edges at the nodes reached (an index range each) and the records the caller may read; UNION
 * drops repeated (node, depth, type) rows, so cycles and diamonds end at the depth bound.
 */
function walkSql(g: GraphTarget, dir: Direction, walk: Walk, params: unknown[]): string {
  const { here, next } = ENDS[dir];
  const cte = dir === 'descendants' ? 'walk_d' : 'walk_a';
  const readable = g.t.readable;
  const conditions = (extra: string, p: unknown[]) => {
    const parts = [extra];
    if (walk.types) {
      parts.push(`e.type IN (${walk.types.map(() => '?').join(', ')})`);
      p.push(...walk.types);
    }
    if (readable !== ALL_ROWS) {
      parts.push(`(${readable.sql})`);
      p.push(...readable.params);
    }
    return parts.join(' AND ');
  };
  const join = readable === ALL_ROWS ? '' : ` JOIN ${g.t.table} t ON ${g.key.sql} = e.${next}`;
  const baseParams: unknown[] = [];
  const stepParams: unknown[] = [walk.depth];
  const base = `SELECT b.bi, b.base, e.${next} AS node, 1 AS depth, e.type COLLATE "C" AS type FROM b JOIN ${g.edges} e ON e.${here} = b.base${join} WHERE ${conditions('TRUE', baseParams)}`;
  const step = `SELECT w.bi, w.base, e.${next}, w.depth + 1, e.type COLLATE "C" FROM ${cte} w JOIN ${g.edges} e ON e.${here} = w.node${join} WHERE ${conditions(`w.depth < ? AND e.${next} <> w.base`, stepParams)}`;
  params.push(...baseParams, ...stepParams);
  return `${cte}(bi, base, node, depth, type) AS (${base} UNION ${step})`;
}

/**
 * The records reached from `bases` (key texts), in every direction of `walk`: one statement,
 * ordered by base, direction, depth and key.
 */
export async function reach(em: EntityManager, g: GraphTarget, bases: string[], walk: Walk): Promise<Reached[]> {
  if (!bases.length || !walk.dirs.length || walk.depth === 0) return [];
  const { sql, params } = reachStatement(g, bases, walk, await closureServes(em, g, walk));
  const found = await preparedRows<Reached>(em, sql, params);
  if (!g.t.jsonSql) for (const x of found) x.r = plain(g.t, x.r as RecordRow);
  return found;
}

/** The statement of `reach`, by the closure or by the walk over the edges. */
export function reachStatement(g: GraphTarget, bases: string[], walk: Walk, closure: boolean): { sql: string; params: unknown[] } {
  const t = g.t;
  // The bases as VALUES: the planner knows how many there are (one, or a page), so it reads the
  // closure or the edges by index for each rather than scanning them.
  const params: unknown[] = bases.flatMap((k, i) => [k, i + 1]);
  const ctes = [`b(base, bi) AS (VALUES ${bases.map(() => `(?::${g.keyType}, ?::int)`).join(', ')})`];
  const parts: string[] = [];
  const partParams: unknown[] = [];
  for (const dir of walk.dirs) {
    if (closure) {
      parts.push(`(${closureSql(g, dir)})`);
      partParams.push(walk.depth);
    } else {
      const cte = dir === 'descendants' ? 'walk_d' : 'walk_a';
      ctes.push(walkSql(g, dir, walk, params));
      parts.push(`(SELECT DISTINCT ON (bi, node) bi, '${dir}' AS dir, node, depth, type::text FROM ${cte} ORDER BY bi, node, depth, type)`);
    }
  }
  const record = t.jsonSql ?? t.recordSql('t');
  const sql = `WITH RECURSIVE ${ctes.join(', ')}
SELECT x.bi, x.dir, x.depth, x.type, ${g.key.sql}::text AS k, ${record} AS r
  FROM (${parts.join(' UNION ALL ')}) x JOIN ${t.table} t ON ${g.key.sql} = x.node
 ORDER BY x.bi, x.dir, x.depth, ${g.key.sql}`;
  return { sql, params: [...params, ...partParams] };
}

/** An edge among reached records, as the graph form shows it (and the tree form links them). */
export interface EdgeRow {
  id: string;
  /** The ends' keys as text, and as JSON values. */
  f: string;
  o: string;
  from: unknown;
  to: unknown;
  type: string;
  metadata: unknown;
}

/** The edges of the followed types whose two ends are among `keys` (key texts), by ends and type. */
export async function edgesAmong(em: EntityManager, g: GraphTarget, keys: string[], types: string[] | null): Promise<EdgeRow[]> {
  if (!keys.length) return [];
  const { sql, params } = edgesAmongStatement(g, keys, types);
  return preparedRows<EdgeRow>(em, sql, params);
}

/** The statement of `edgesAmong`. */
export function edgesAmongStatement(g: GraphTarget, keys: string[], types: string[] | null): { sql: string; params: unknown[] } {
  const typeCond = types ? ` AND e.type IN (${types.map(() => '?').join(', ')})` : '';
  return {
    sql: `WITH n AS MATERIALIZED ${keySet(g)}
SELECT e.id, e.from_id::text AS f, e.to_id::text AS o, to_jsonb(e.from_id) AS "from", to_jsonb(e.to_id) AS "to", e.type, e.metadata
  FROM ${g.edges} e
 WHERE e.from_id IN (SELECT value FROM n) AND e.to_id IN (SELECT value FROM n)${typeCond}
 ORDER BY e.from_id, e.to_id, e.type`,
    params: [keyArray(keys), ...(types ?? [])],
  };
}
