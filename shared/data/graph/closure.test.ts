// The closure kept by the edges trigger (ddl.ts) against its definition, on real PostgreSQL:
// random DAGs and cyclic graphs of several edge types take random inserts (one and many per
// statement), deletes (one and many), updates of an edge's ends or type, record deletes that
// cascade to edges, and a truncate; after each, every stored pair must be the one a breadth-first
// search over the edges gives (shortest depth up to CLOSURE_DEPTH, smallest end types on a
// shortest path) and no other pair may be stored. And the traversals (traverse.ts) on the same
// graphs: the closure's answers and the recursive walk's (all types; a subset of types with
// records the caller may not read) equal a breadth-first search's, at several depths.
import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
import type { EntityManager } from '@mikro-orm/postgresql';
import { createOrm, type Orm } from '../../db/orm.ts';
import { createTestDatabase, type TestDatabase } from '../../testing/database.ts';
import { ALL_ROWS } from '../records/access.ts';
import type { Target } from '../records/target.ts';
import { CLOSURE_DEPTH, closureTableName, dropEdgesDdl, edgesTableDdl, edgesTableName } from './ddl.ts';
import { keyArray, type GraphTarget } from './target.ts';
import { reach, type Direction } from './traverse.ts';

let db: TestDatabase;
let client: pg.Client;
let orm: Orm;
const S = 'site_closure';
const MAIN = 'a1_nodes';
const E = `"${S}"."${edgesTableName(MAIN)}"`;
const C = `"${S}"."${closureTableName(MAIN)}"`;
const TYPES = ['a', 'b', 'c'];

test.before(async () => {
  db = await createTestDatabase('closure');
  client = new pg.Client({ connectionString: db.url });
  await client.connect();
  await client.query(`CREATE SCHEMA ${S}`);
  orm = await createOrm(db.url, { poolMax: 2 });
});
test.after.always(async () => {
  await orm?.close();
  await client?.end();
  await db?.drop();
});

/** A deterministic generator (mulberry32), so a failure can be replayed from its seed. */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Edge = { id: string; from: number; to: number; type: string };
type Pair = { anc: number; des: number; depth: number; first_type: string; last_type: string };

/** The closure by definition: breadth-first search from every node over the outgoing edges. */
function expected(edges: Edge[]): Pair[] {
  const out = new Map<number, Edge[]>();
  const into = new Map<number, Edge[]>();
  for (const e of edges) {
    out.set(e.from, [...(out.get(e.from) ?? []), e]);
    into.set(e.to, [...(into.get(e.to) ?? []), e]);
  }
  const dist = new Map<number, Map<number, number>>();
  const nodes = new Set(edges.flatMap((e) => [e.from, e.to]));
  for (const d of nodes) {
    const seen = new Map([[d, 0]]);
    let frontier = [d];
    for (let k = 1; frontier.length; k++) {
      const next: number[] = [];
      for (const n of frontier) for (const e of out.get(n) ?? []) if (!seen.has(e.to)) { seen.set(e.to, k); next.push(e.to); }
      frontier = next;
    }
    dist.set(d, seen);
  }
  const dd = (x: number, y: number) => (x === y ? 0 : dist.get(x)?.get(y));
  const pairs: Pair[] = [];
  for (const [des, seen] of dist) {
    for (const [anc, depth] of seen) {
      if (anc === des || depth > CLOSURE_DEPTH) continue;
      const first = (out.get(des) ?? []).filter((e) => dd(e.to, anc) === depth - 1).map((e) => e.type).sort()[0]!;
      const last = (into.get(anc) ?? []).filter((e) => dd(des, e.from) === depth - 1).map((e) => e.type).sort()[0]!;
      pairs.push({ anc, des, depth, first_type: first, last_type: last });
    }
  }
  return pairs.sort((x, y) => x.anc - y.anc || x.des - y.des);
}

/** What `reach` must give by definition: per base and direction, breadth-first over the followed edges and the readable nodes. */
function expectedReach(edges: Edge[], bases: number[], dirs: Direction[], depth: number, types: string[] | null, readable: (n: number) => boolean) {
  const follow = edges.filter((e) => (!types || types.includes(e.type)) && readable(e.from) && readable(e.to));
  const out: { bi: number; dir: Direction; depth: number; type: string; k: string }[] = [];
  bases.forEach((base, i) => {
    for (const dir of dirs) {
      const [here, next] = dir === 'descendants' ? (['to', 'from'] as const) : (['from', 'to'] as const);
      const dist = new Map([[base, 0]]);
      let frontier = [base];
      for (let k = 1; k <= depth && frontier.length; k++) {
        const found: number[] = [];
        for (const n of frontier) for (const e of follow) if (e[here] === n && !dist.has(e[next])) { dist.set(e[next], k); found.push(e[next]); }
        frontier = found;
      }
      const rowsOf = [...dist].filter(([n]) => n !== base).map(([n, d]) => ({
        bi: i + 1, dir, depth: d,
        type: follow.filter((e) => e[next] === n && dist.get(e[here]) === d - 1).map((e) => e.type).sort()[0]!,
        k: String(n),
      }));
      out.push(...rowsOf.sort((x, y) => x.depth - y.depth || Number(x.k) - Number(y.k)));
    }
  });
  return out;
}

/** A hierarchy table as traverse.ts needs it, over the test's tables; `readable` a condition over alias t. */
function graphOver(readable: { sql: string; params: unknown[] }): GraphTarget {
  const t = { readable, table: `"${S}"."${MAIN}"`, jsonSql: `json_build_object('id', t."id")::text` } as unknown as Target;
  return { t, edges: E, closure: C, key: { column: 'id', pgType: 'bigint', sql: 't."id"' }, keyType: 'bigint', types: new Map() };
}

/** reach() by the closure, by the walk over all types, and by the walk over a subset with unreadable records, against the definition. */
async function checkTraversals(t: ExecutionContext, nodes: number, label: string): Promise<boolean> {
  const em = orm.em.fork() as EntityManager;
  const edges = await edgesNow();
  const bases = Array.from({ length: nodes }, (_, i) => i + 1);
  const dirs: Direction[] = ['ancestors', 'descendants'];
  const strip = (list: Awaited<ReturnType<typeof reach>>) => list.map(({ bi, dir, depth, type, k }) => ({ bi, dir, depth, type, k }));
  const cases = [
    { name: 'closure', g: graphOver(ALL_ROWS), types: null, readable: () => true },
    { name: 'walk, every type', g: graphOver({ sql: 'TRUE', params: [] }), types: null, readable: () => true },
    { name: 'walk, types a and b, records not multiple of 5', g: graphOver({ sql: 't."id" % ? <> 0', params: [5] }), types: ['a', 'b'], readable: (n: number) => n % 5 !== 0 },
  ];
  for (const depth of [1, 3, CLOSURE_DEPTH]) {
    for (const c of cases) {
      const from = bases.filter(c.readable); // the API starts from records the caller may read
      const got = strip(await reach(em, c.g, from.map(String), { dirs, types: c.types, depth }));
      const want = expectedReach(edges, from, dirs, depth, c.types, c.readable);
      if (JSON.stringify(got) !== JSON.stringify(want)) {
        t.deepEqual(got, want, `${label}: ${c.name}, depth ${depth}`);
        return false;
      }
    }
  }
  return true;
}

async function stored(): Promise<Pair[]> {
  const r = await client.query(`SELECT anc::int, des::int, depth::int, first_type, last_type FROM ${C} ORDER BY anc, des`);
  return r.rows;
}
async function edgesNow(): Promise<Edge[]> {
  return (await client.query(`SELECT id, from_id::int AS from, to_id::int AS to, type FROM ${E}`)).rows;
}

async function freshTables(nodes: number): Promise<void> {
  for (const sql of dropEdgesDdl(S, MAIN)) await client.query(sql);
  await client.query(`DROP TABLE IF EXISTS "${S}"."${MAIN}"`);
  await client.query(`CREATE TABLE "${S}"."${MAIN}" (id bigint PRIMARY KEY)`);
  await client.query(`INSERT INTO "${S}"."${MAIN}" SELECT generate_series(1, $1::int)`, [nodes]);
  for (const sql of edgesTableDdl(S, MAIN, 'bigint')) await client.query(sql);
}

/** Random operations on a graph of `nodes` nodes; `dag` keeps every edge from a higher to a lower number. */
async function run(t: ExecutionContext, seed: number, nodes: number, dag: boolean, steps: number): Promise<void> {
  const r = rng(seed);
  const pick = (n: number) => 1 + Math.floor(r() * n);
  await freshTables(nodes);
  const randomEdge = () => {
    let from = pick(nodes);
    let to = pick(nodes);
    if (dag && from < to) [from, to] = [to, from];
    return { from, to, type: TYPES[Math.floor(r() * TYPES.length)]! };
  };
  const insert = async (list: { from: number; to: number; type: string }[]) => {
    const ok = list.filter((e) => e.from !== e.to);
    if (!ok.length) return;
    await client.query(
      `INSERT INTO ${E} (from_id, to_id, type) SELECT f, t, y FROM unnest($1::bigint[], $2::bigint[], $3::text[]) AS x(f, t, y) ON CONFLICT DO NOTHING`,
      [ok.map((e) => e.from), ok.map((e) => e.to), ok.map((e) => e.type)],
    );
  };
  // A long chain first (deeper than the closure keeps).
  await insert(Array.from({ length: Math.min(nodes - 1, CLOSURE_DEPTH + 3) }, (_, i) => ({ from: i + 2, to: i + 1, type: 'a' })));
  for (let step = 0; step < steps; step++) {
    const edges = await edgesNow();
    const op = r();
    let what: string;
    if (op < 0.35 || edges.length < 3) {
      const n = r() < 0.5 ? 1 : 2 + Math.floor(r() * 6);
      await insert(Array.from({ length: n }, randomEdge));
      what = `insert ${n}`;
    } else if (op < 0.6) {
      const ids = edges.filter(() => r() < 0.15).map((e) => e.id).slice(0, 6);
      if (!ids.length) ids.push(edges[0]!.id);
      await client.query(`DELETE FROM ${E} WHERE id = ANY($1::uuid[])`, [ids]);
      what = `delete ${ids.length}`;
    } else if (op < 0.8) {
      const e = edges[Math.floor(r() * edges.length)]!;
      const next = randomEdge();
      await client.query(`UPDATE ${E} SET to_id = $2, type = $3 WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM ${E} WHERE from_id = $4 AND to_id = $2 AND type = $3)`, [e.id, next.to === e.from ? e.to : next.to, next.type, e.from]);
      what = 'update';
    } else if (op < 0.95) {
      const id = pick(nodes);
      await client.query(`DELETE FROM "${S}"."${MAIN}" WHERE id = $1`, [id]);
      await client.query(`INSERT INTO "${S}"."${MAIN}" VALUES ($1)`, [id]);
      what = `delete record ${id}`;
    } else {
      await client.query(`UPDATE ${E} SET metadata = '{"x": 1}'`);
      what = 'metadata only';
    }
    const want = expected(await edgesNow());
    const got = await stored();
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      t.deepEqual(got, want, `seed ${seed}, step ${step} (${what})`);
      return;
    }
    if (step % 5 === 4 && !(await checkTraversals(t, nodes, `seed ${seed}, step ${step}`))) return;
  }
  await client.query(`TRUNCATE ${E}`);
  t.deepEqual(await stored(), [], 'truncate empties the closure');
  t.pass();
}

for (const seed of [1, 2, 3]) {
  test.serial(`random DAG edits keep the closure exact (seed ${seed})`, (t) => run(t, seed, 24, true, 60));
  test.serial(`random cyclic edits keep the closure exact (seed ${seed})`, (t) => run(t, 100 + seed, 18, false, 60));
}

test.serial('one statement inserting a whole tree builds its closure; detaching a subtree removes exactly its pairs', async (t) => {
  await freshTables(1111);
  // A complete 10-ary tree of 1,111 nodes: node n's parent is (n - 2) / 10 + 1.
  await client.query(`INSERT INTO ${E} (from_id, to_id, type) SELECT g, (g - 2) / 10 + 1, 'a' FROM generate_series(2, 1111) g`);
  t.deepEqual(await stored(), expected(await edgesNow()));
  t.is((await client.query(`SELECT count(*)::int AS n FROM ${C}`)).rows[0].n, 10 * 1 + 100 * 2 + 1000 * 3);
  await client.query(`DELETE FROM ${E} WHERE from_id = 2`);
  t.deepEqual(await stored(), expected(await edgesNow()));
});

test.serial('key texts travel as one array literal: quotes, backslashes, commas and braces survive', async (t) => {
  const keys = ['plain', 'with,comma', 'quote"d', 'back\\slash', '{brace}', ' spaced ', 'NULL', ''];
  const { rows } = await client.query('SELECT unnest($1::text[]) AS k', [keyArray(keys)]);
  t.deepEqual(rows.map((r) => r.k), keys);
});
