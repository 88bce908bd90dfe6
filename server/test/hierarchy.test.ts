// Hierarchy tables over HTTP on real PostgreSQL (issue 12 items 4, 5): the edges companion as
// spec §2 makes it, the edge routes' envelopes and checks (records, types, duplicates,
// max_outgoing / max_incoming, also under concurrent writes), every hierarchy form on a known
// tree with a second edge type and on a DAG with cycles (exact answers), depth limits,
// relationship_type, cascades, read policies (a record the caller may not read is neither
// returned nor followed), another provider, and isolation between sites.
import { randomUUID } from 'node:crypto';
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { createTables, seedCrm, type Row } from './crm.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
const tok: Record<string, string> = {};
let appId = 0;
const MAX_DEPTH = 4;

const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);
const on = (method: string, path: string, body?: unknown, who = 'adminA') => s.api(method, path, { host: a.domain, token: tok[who], body });
const ORG = '/api/apps/crm/datatables/org/';
const PARTS = '/api/apps/crm/datasources/flat_table/datatables/parts/';

const ORG_SCHEMA = {
  fields: [{ name: 'id', type: 'integer' }, { name: 'name', type: 'string' }, { name: 'country', type: 'string' }],
  primaryKey: 'id',
  hierarchy: true,
  graph: {
    types: [
      { name: 'reports_to', inverse: 'direct_reports', constraints: { max_outgoing: 1 } },
      { name: 'mentored_by', inverse: 'mentees', constraints: { max_incoming: 2 } },
    ],
  },
};
const PEOPLE: Row[] = [
  { id: 1, name: 'Ada', country: 'US' },
  { id: 2, name: 'Bob', country: 'FR' },
  { id: 3, name: 'Cy', country: 'US' },
  { id: 4, name: 'Di', country: 'US' },
  { id: 5, name: 'Ed', country: 'US' },
  { id: 6, name: 'Fay', country: 'US' },
  { id: 7, name: 'Gus', country: 'US' },
  { id: 8, name: 'Hal', country: 'US' },
];
/** 1 ← 2, 3; 2 ← 4, 5; 5 ← 7; 3 ← 6 (reports_to); 4 mentored_by 3. 8 stands alone. */
const ORG_EDGES = [[2, 1], [3, 1], [4, 2], [5, 2], [7, 5], [6, 3]].map(([f, o]) => ({ from_id: f, to_id: o, type: 'reports_to' })).concat([{ from_id: 4, to_id: 3, type: 'mentored_by' }]);
/** No declared types. A diamond (4 → 2, 3 → 1) closed into a cycle by 1 → 5 → 4; 6 stands alone. */
const PART_EDGES = [[2, 1, 'part_of'], [3, 1, 'part_of'], [4, 2, 'part_of'], [4, 3, 'part_of'], [5, 4, 'part_of'], [1, 5, 'linked']].map(([f, o, type]) => ({ from_id: f, to_id: o, type }));

const person = (id: number) => ({ ...PEOPLE.find((p) => p.id === id)! });
const part = (id: number) => ({ id, name: `part ${id}` });
const item = (rec: Row, depth: number, type: string) => ({ ...rec, _depth: depth, _relationship_type: type });
type Tree = Row & { children: Tree[] };
const node = (rec: Row, depth: number, type: string | undefined, children: Tree[] = []): Tree => ({ ...rec, _depth: depth, ...(type ? { _relationship_type: type } : {}), children });
const R = 'reports_to';
const M = 'mentored_by';
const edgeIds = new Map<string, string>();
const edgeId = (f: number, o: number, type: string) => edgeIds.get(`${f}|${o}|${type}`)!;
const edge = (f: number, o: number, type: string) => ({ id: edgeId(f, o, type), from: f, to: o, type, metadata: null });
const edgeCount = async (table = 'org') => Number((await sql(`SELECT count(*) AS n FROM "${a.schema}"."a${appId}_${table}_edges"`))[0].n);

async function seed(path: string, records: Row[], edges: Row[]) {
  const r = await on('POST', `${path}data/`, records);
  if (r.status !== 201) throw new Error(r.text);
  const e = await on('POST', `${path}edges/`, edges);
  if (e.status !== 201) throw new Error(e.text);
  for (const x of e.body.results) edgeIds.set(`${x.from_id}|${x.to_id}|${x.type}`, x.id);
}

test.before(async () => {
  s = await startTestServer({ DATA_SERVICE_GRAPH_MAX_DEPTH: String(MAX_DEPTH) });
  ({ a, b } = await twoSitesWithUsers(s, tok));
  [appId] = await seedCrm(s, [a, b], ['flat_table', 'docstore']);
  await createTables(on, [
    ['flat_table', 'org', ORG_SCHEMA as never],
    ['flat_table', 'parts', { fields: [{ name: 'id', type: 'integer' }, { name: 'name', type: 'string' }], primaryKey: 'id', hierarchy: true } as never],
    ['flat_table', 'plain', { fields: [{ name: 'id', type: 'integer' }], primaryKey: 'id', hierarchy: true, graph: { enabled: false } } as never],
    ['docstore', 'folders', { fields: [{ name: 'title', type: 'string' }], hierarchy: true, graph: { types: [{ name: 'inside', inverse: 'contents' }] } } as never],
  ]);
  await seed(ORG, PEOPLE, ORG_EDGES);
  await seed(PARTS, [1, 2, 3, 4, 5, 6].map(part), PART_EDGES);
});
test.after.always(async () => {
  await s?.close();
});

test.serial('materialize creates {table}_edges as spec §2 (columns, cascading keys, indexes); a composite key is refused', async (t) => {
  const table = `a${appId}_org_edges`;
  const columns = await sql(
    `SELECT column_name, data_type, character_maximum_length AS len, is_nullable, column_default FROM information_schema.columns WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position`,
    [a.schema, table],
  );
  t.deepEqual(columns.map((c: Row) => [c.column_name, c.data_type, c.len, c.is_nullable, c.column_default]), [
    ['id', 'uuid', null, 'NO', 'gen_random_uuid()'],
    ['from_id', 'bigint', null, 'NO', null],
    ['to_id', 'bigint', null, 'NO', null],
    ['type', 'character varying', 50, 'NO', null],
    ['metadata', 'jsonb', null, 'YES', null],
    ['created_at', 'timestamp with time zone', null, 'NO', 'now()'],
  ]);
  const fks = await sql(
    `SELECT pg_get_constraintdef(c.oid) AS def FROM pg_constraint c JOIN pg_class r ON r.oid = c.conrelid JOIN pg_namespace n ON n.oid = r.relnamespace WHERE n.nspname = ? AND r.relname = ? AND c.contype = 'f' ORDER BY 1`,
    [a.schema, table],
  );
  t.deepEqual(fks.map((f: Row) => f.def), [`FOREIGN KEY (from_id) REFERENCES ${a.schema}.a${appId}_org(id) ON DELETE CASCADE`, `FOREIGN KEY (to_id) REFERENCES ${a.schema}.a${appId}_org(id) ON DELETE CASCADE`]);
  const indexes = (await sql('SELECT indexdef FROM pg_indexes WHERE schemaname = ? AND tablename = ?', [a.schema, table])).map((i: Row) => i.indexdef.replace(/^.* USING btree /, ''));
  for (const ix of ['(from_id, type) INCLUDE (to_id)', '(to_id, type) INCLUDE (from_id)', '(type)']) t.true(indexes.includes(ix), ix);

  const composite = await on('POST', '/api/apps/crm/datasources/flat_table/datatables/', {
    name: 'pairs', json_schema: { fields: [{ name: 'a', type: 'integer' }, { name: 'b', type: 'integer' }], primaryKey: ['a', 'b'], hierarchy: true },
  });
  t.is(composite.status, 400);
  t.deepEqual(composite.body.json_schema, ['hierarchy needs a single-field primary key (edges reference one key column); primaryKey has 2 fields (a, b).']);
});

test.serial('edges: create answers {total, results} in the order given; list {total, page, page_size, results} with filters, on both path forms', async (t) => {
  const first = (await on('GET', `${ORG}edges/?from_id=2`)).body;
  t.deepEqual(Object.keys(first), ['total', 'page', 'page_size', 'results']);
  t.like(first, { total: 1, page: 1, page_size: 20 });
  t.deepEqual(Object.keys(first.results[0]), ['id', 'from_id', 'to_id', 'type', 'metadata', 'created_at']);
  t.like(first.results[0], { id: edgeId(2, 1, R), from_id: 2, to_id: 1, type: R, metadata: null });
  t.regex(first.results[0].created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  const toOne = await on('GET', '/api/apps/crm/datasources/flat_table/datatables/org/edges/?to_id=1&types=reports_to');
  t.deepEqual(toOne.body.results.map((e: Row) => e.from_id).sort(), [2, 3]);
  t.deepEqual((await on('GET', `${ORG}edges/?types=mentored_by`)).body.results.map((e: Row) => [e.from_id, e.to_id]), [[4, 3]]);
  const paged = await on('GET', `${ORG}edges/?page_size=3&page=3`);
  t.like(paged.body, { total: 7, page: 3, page_size: 3 });
  t.is(paged.body.results.length, 1);
  const bad = await on('GET', `${ORG}edges/?from_id=abc&types=nope`);
  t.is(bad.status, 400);
  t.deepEqual(bad.body.errors, { from_id: ['Invalid value "abc": expected an integer.'], types: ['Unknown type "nope"; the types of this table are reports_to, mentored_by.'] });
});

test.serial('edges: bad input is a 400 (409 for a duplicate) naming what is wrong, and nothing is stored', async (t) => {
  const before = await edgeCount();
  const cases: [unknown, number, Record<string, string[]>][] = [
    [[{ from_id: 99, to_id: 1, type: R }], 400, { '0.from_id': ['Record 99 does not exist.'] }],
    [[{ from_id: 8, to_id: 1, type: R }, { from_id: 8, to_id: 98, type: M }], 400, { '1.to_id': ['Record 98 does not exist.'] }],
    [[{ from_id: 8, to_id: 1, type: 'manages' }], 400, { '0.type': ['Unknown type "manages"; the types of this table are reports_to, mentored_by.'] }],
    [[{ from_id: 8, to_id: 8, type: R }], 400, { '0.to_id': ['An edge links two different records (from_id equals to_id).'] }],
    [[{ from_id: 8, type: R, colour: 'red' }], 400, { '0.colour': ['Unknown field "colour" (from_id, to_id, type, metadata).'], '0.to_id': ['This field is required.'] }],
    [[{ from_id: 8, to_id: 1, type: M }, { from_id: 2, to_id: 1, type: R }], 409, { 1: ['This edge exists already (same from_id, to_id and type).'] }],
    [[{ from_id: 8, to_id: 6, type: M }, { from_id: 8, to_id: 6, type: M }], 409, { 1: ['The same edge is given twice (also at 0).'] }],
    [{ from_id: 8, to_id: 1, type: R }, 400, { non_field_errors: ['Expected an array of edges [{from_id, to_id, type, metadata?}].'] }],
  ];
  for (const [body, status, errors] of cases) {
    const res = await on('POST', `${ORG}edges/`, body);
    t.is(res.status, status, JSON.stringify(body));
    t.deepEqual(res.body.errors, errors, JSON.stringify(body));
  }
  t.is(await edgeCount(), before, 'nothing stored');
  const ids = await on('DELETE', `${ORG}edges/`, { edge_ids: ['nope'] });
  t.is(ids.status, 400);
  t.deepEqual(ids.body.errors, { edge_ids: ['Not edge ids (UUIDs): "nope".'] });
  t.is((await on('DELETE', `${ORG}edges/`, { edge_ids: [] })).status, 400);
  t.is((await on('PATCH', `${ORG}edges/${randomUUID()}/`, { metadata: {} })).status, 404);
  t.is((await on('PATCH', `${ORG}edges/not-a-uuid/`, { metadata: {} })).status, 404);
  const missing = await on('PATCH', `${ORG}edges/${edgeId(6, 3, R)}/`, { to_id: 97 });
  t.is(missing.status, 400);
  t.deepEqual(missing.body.errors, { to_id: ['Record 97 does not exist.'] });
});

test.serial('max_outgoing and max_incoming hold on every write: 400 naming the constraint, the record and the type; nothing stored', async (t) => {
  const before = await edgeCount();
  const out = await on('POST', `${ORG}edges/`, [{ from_id: 8, to_id: 3, type: M }, { from_id: 4, to_id: 1, type: R }]);
  t.is(out.status, 400);
  t.is(out.body.message, 'Constraint max_outgoing of type "reports_to" is 1: record 4 would have 2 outgoing "reports_to" edges. Nothing was stored.');
  t.deepEqual(out.body.errors, { '1.from_id': ['Constraint max_outgoing of type "reports_to" is 1: record 4 would have 2 outgoing "reports_to" edges.'] });
  const incoming = await on('POST', `${ORG}edges/`, [{ from_id: 8, to_id: 3, type: M }, { from_id: 6, to_id: 3, type: M }]);
  t.is(incoming.status, 400);
  t.deepEqual(incoming.body.errors, { '1.to_id': ['Constraint max_incoming of type "mentored_by" is 2: record 3 would have 3 incoming "mentored_by" edges.'] });
  const patched = await on('PATCH', `${ORG}edges/${edgeId(4, 3, M)}/`, { type: R });
  t.is(patched.status, 400);
  t.is(patched.body.message, 'Constraint max_outgoing of type "reports_to" is 1: record 4 would have 2 outgoing "reports_to" edges.');
  t.is(await edgeCount(), before);
  t.is((await on('GET', `${ORG}edges/?from_id=4&types=mentored_by`)).body.total, 1, 'the patched edge is unchanged');
});

test.serial('concurrent writes cannot exceed max_outgoing (of eight parallel requests giving 8 a manager, one succeeds) nor store an edge twice', async (t) => {
  const results = await Promise.all([1, 2, 3, 4, 5, 6, 7, 1].map((to, i) => on('POST', `${ORG}edges/`, [{ from_id: 8, to_id: to, type: R, metadata: { attempt: i } }])));
  t.is(results.filter((r) => r.status === 201).length, 1);
  for (const r of results.filter((x) => x.status !== 201)) {
    t.true(r.status === 400 || r.status === 409, r.text); // 409: the same edge as the one that won
    if (r.status === 400) t.regex(r.body.message, /^Constraint max_outgoing of type "reports_to" is 1: record 8 would have 2 outgoing/);
  }
  // The same edge eight times at once: one is stored, the others are told it exists (never a database error).
  const same = await Promise.all(Array.from({ length: 8 }, () => on('POST', `${ORG}edges/`, [{ from_id: 8, to_id: 6, type: M }])));
  t.deepEqual(same.map((r) => r.status).sort(), [201, 409, 409, 409, 409, 409, 409, 409]);
  const mine = await on('GET', `${ORG}edges/?from_id=8`);
  t.is(mine.body.total, 2);
  t.is((await on('DELETE', `${ORG}edges/`, { edge_ids: mine.body.results.map((e: Row) => e.id) })).body.deleted, 2);
});

test.serial('include form on the tree: inverse labels for descendants, type names for ancestors, _depth and _relationship_type', async (t) => {
  const down = await on('GET', `${ORG}data/1/?include=descendants`);
  t.is(down.status, 200, down.text);
  t.deepEqual(down.body, {
    data: person(1),
    direct_reports: [item(person(2), 1, R), item(person(3), 1, R), item(person(5), 2, R), item(person(6), 2, R), item(person(7), 3, R)],
    mentees: [item(person(4), 2, M)], // reached at depth 2 through both types: once, with the smaller type name
  });
  t.deepEqual(Object.keys(down.body), ['data', 'direct_reports', 'mentees']);
  t.deepEqual((await on('GET', `${ORG}data/7/?include=ancestors`)).body, {
    data: person(7),
    reports_to: [item(person(5), 1, R), item(person(2), 2, R), item(person(1), 3, R)],
    mentored_by: [],
  });
  t.deepEqual((await on('GET', `${ORG}data/4/?include=both&depth=1`)).body, {
    data: person(4),
    reports_to: [item(person(2), 1, R)],
    mentored_by: [item(person(3), 1, M)],
    direct_reports: [],
    mentees: [],
  });
  t.deepEqual((await on('GET', `${ORG}data/1/?include=both&depth=0`)).body, { data: person(1) }, 'depth=0: only the base record');
  t.deepEqual((await on('GET', `${ORG}data/1/?include=descendants&depth=2`)).body.direct_reports.map((x: Row) => x.id), [2, 3, 5, 6], 'depth 2 stops before 7');
  t.deepEqual((await on('GET', `${ORG}data/1/`)).body, { data: person(1) }, 'no hierarchy parameter: the plain record');
});

test.serial('relationship_type (repeatable) and the deprecated graph_types choose the edges followed', async (t) => {
  t.deepEqual((await on('GET', `${ORG}data/1/?include=descendants&relationship_type=${R}`)).body, {
    data: person(1),
    direct_reports: [2, 3].map((id) => item(person(id), 1, R)).concat([4, 5, 6].map((id) => item(person(id), 2, R)), [item(person(7), 3, R)]),
  });
  t.deepEqual((await on('GET', `${ORG}data/3/?include=descendants&graph_types=${M}`)).body, { data: person(3), mentees: [item(person(4), 1, M)] });
  const both = await on('GET', `${ORG}data/1/?include=descendants&relationship_type=${R}&relationship_type=${M}`);
  t.deepEqual(both.body, (await on('GET', `${ORG}data/1/?include=descendants`)).body);
  const unknown = await on('GET', `${ORG}data/1/?include=descendants&relationship_type=manages`);
  t.is(unknown.status, 400);
  t.like(unknown.body, { error: 'Invalid relationship_type.', detail: 'Unknown relationship_type "manages"; the types of this table are reports_to, mentored_by.' });
});

test.serial('bad include, format or depth: 400 {error, detail} naming the value; a missing record 404', async (t) => {
  const cases: [string, string, string][] = [
    ['include=children', 'Invalid include.', 'include must be descendants, ancestors or both; got "children".'],
    ['include=both&depth=5', 'Invalid depth.', `depth 5 is above the maximum ${MAX_DEPTH} (DATA_SERVICE_GRAPH_MAX_DEPTH).`],
    ['include=both&depth=-1', 'Invalid depth.', `depth must be an integer from 0 to ${MAX_DEPTH}; got "-1".`],
    ['include=both&depth=two', 'Invalid depth.', `depth must be an integer from 0 to ${MAX_DEPTH}; got "two".`],
    ['format=forest', 'Invalid format.', 'format must be include (the default), tree or graph on a hierarchy table; got "forest".'],
  ];
  for (const [q, error, detail] of cases) {
    for (const path of [`${ORG}data/1/?${q}`, `${ORG}data/?${q}`]) {
      const res = await on('GET', path);
      t.is(res.status, 400, path);
      t.like(res.body, { code: 'VALIDATION_ERROR', error, detail }, path);
    }
  }
  for (const q of ['format=tree', 'format=graph', 'include=both']) t.is((await on('GET', `${ORG}data/99/?${q}`)).status, 404, q);
  // graph.enabled false: no edges, and the parameters are what they are on any table.
  // (The change log's sequence is the table's own: docs/realtime.md.)
  t.deepEqual(await sql(`SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = ? AND relname LIKE ? ORDER BY relname`, [a.schema, `a${appId}_plain%`]), [{ relname: `a${appId}_plain` }, { relname: `a${appId}_plain_changes` }, { relname: `a${appId}_plain_pkey` }]);
  const plain = await on('GET', '/api/apps/crm/datatables/plain/data/?format=tree');
  t.is(plain.status, 400);
  t.deepEqual(plain.body.errors, { format: ['format=tree applies to tables with hierarchy: true (and graph.enabled) only.'] });
  t.deepEqual((await on('GET', '/api/apps/crm/datatables/plain/data/?include=descendants')).body.errors, { include: ['Unknown field "include".'] });
  t.is((await on('GET', '/api/apps/crm/datatables/plain/edges/')).status, 400);
});

test.serial('tree form: a child record gives the whole tree from its natural root; include=descendants roots it at the record', async (t) => {
  const full = [node(person(1), 0, undefined, [
    node(person(2), 1, R, [node(person(4), 2, R), node(person(5), 2, R, [node(person(7), 3, R)])]),
    node(person(3), 1, R, [node(person(4), 2, M), node(person(6), 2, R)]),
  ])];
  t.deepEqual((await on('GET', `${ORG}data/4/?format=tree`)).body, { data: full, total: 7 });
  t.deepEqual((await on('GET', `${ORG}data/1/?format=tree`)).body, { data: full, total: 7 });
  t.deepEqual((await on('GET', `${ORG}data/2/?format=tree&include=descendants&depth=1`)).body, {
    data: [node(person(2), 0, undefined, [node(person(4), 1, R), node(person(5), 1, R)])],
    total: 3,
  });
  t.deepEqual((await on('GET', `${ORG}data/4/?format=tree&depth=0`)).body, { data: [node(person(4), 0, undefined)], total: 1 });
  t.deepEqual((await on('GET', `${ORG}data/?format=tree`)).body, { data: [...full, node(person(8), 0, undefined)], total: 8, page: 1, page_size: 20 }, 'a list: the records without a parent are the roots');
  t.deepEqual((await on('GET', `${ORG}data/?format=tree&relationship_type=${M}&id__lte=4`)).body.data.map((r: Row) => r.id), [1, 2, 3], 'roots under the followed type');
});

test.serial('graph form: records de-duplicated without _depth, edges {id, from, to, type, metadata}, total', async (t) => {
  t.deepEqual((await on('GET', `${ORG}data/4/?format=graph`)).body, {
    data: { nodes: [4, 2, 3, 1].map(person), edges: [edge(2, 1, R), edge(3, 1, R), edge(4, 2, R), edge(4, 3, M)] },
    total: 4,
  });
  t.deepEqual((await on('GET', `${ORG}data/?format=graph&include=descendants&id=2`)).body, {
    data: { nodes: [2, 4, 5, 7].map(person), edges: [edge(4, 2, R), edge(5, 2, R), edge(7, 5, R)] },
    total: 4, page: 1, page_size: 20,
  });
  t.deepEqual((await on('GET', `${ORG}data/4/?format=graph&depth=0`)).body, { data: { nodes: [person(4)], edges: [] }, total: 1 });
});

test.serial('a list with include: each record carries its arrays', async (t) => {
  const res = await on('GET', `${ORG}data/?include=descendants&depth=1&id__in=1,2&_sort=-id`);
  t.deepEqual(res.body, {
    data: [
      { ...person(2), direct_reports: [item(person(4), 1, R), item(person(5), 1, R)], mentees: [] },
      { ...person(1), direct_reports: [item(person(2), 1, R), item(person(3), 1, R)], mentees: [] },
    ],
    total: 2, page: 1, page_size: 20,
  });
});

test.serial('a DAG with cycles, no declared types: every form ends, with shortest depths', async (t) => {
  t.deepEqual((await on('GET', `${PARTS}data/4/?include=both`)).body, {
    data: part(4),
    ancestors: [item(part(2), 1, 'part_of'), item(part(3), 1, 'part_of'), item(part(1), 2, 'part_of'), item(part(5), 3, 'linked')],
    descendants: [item(part(5), 1, 'part_of'), item(part(1), 2, 'linked'), item(part(2), 3, 'part_of'), item(part(3), 3, 'part_of')],
  });
  // Every record of the cycle has a parent: the tree hangs from the farthest ancestor, and a record already on the path is not repeated.
  t.deepEqual((await on('GET', `${PARTS}data/4/?format=tree`)).body, {
    data: [node(part(5), 0, undefined, [node(part(1), 1, 'linked', [node(part(2), 2, 'part_of', [node(part(4), 3, 'part_of')]), node(part(3), 2, 'part_of', [node(part(4), 3, 'part_of')])])])],
    total: 5,
  });
  const pe = (f: number, o: number, type: string) => ({ id: edgeId(f, o, type), from: f, to: o, type, metadata: null });
  t.deepEqual((await on('GET', `${PARTS}data/1/?format=graph`)).body, {
    data: { nodes: [1, 5, 4, 2, 3].map(part), edges: [pe(1, 5, 'linked'), pe(2, 1, 'part_of'), pe(3, 1, 'part_of'), pe(4, 2, 'part_of'), pe(4, 3, 'part_of'), pe(5, 4, 'part_of')] },
    total: 5,
  });
  t.deepEqual((await on('GET', `${PARTS}data/?format=tree`)).body, { data: [node(part(6), 0, undefined)], total: 1, page: 1, page_size: 20 });
  t.deepEqual((await on('GET', `${PARTS}data/4/?include=descendants&relationship_type=part_of`)).body, { data: part(4), descendants: [item(part(5), 1, 'part_of')] });
  const bad = await on('GET', `${PARTS}data/4/?include=descendants&relationship_type=${encodeURIComponent('has space')}`);
  t.like(bad.body, { error: 'Invalid relationship_type.', detail: 'Unknown relationship_type "has space": a type name is a letter, then letters, digits or _, at most 50.' });
});

test.serial('a docstore table has edges too (keys: the documents\' ids)', async (t) => {
  const F = '/api/apps/crm/datatables/folders/';
  const docs = (await on('POST', `${F}data/`, [{ title: 'root' }, { title: 'sub' }, { title: 'file' }])).body.data;
  const [root, sub, file] = docs.map((d: Row) => d.id);
  const created = await on('POST', `${F}edges/`, [{ from_id: sub, to_id: root, type: 'inside' }, { from_id: file, to_id: sub, type: 'inside', metadata: { pinned: true } }]);
  t.is(created.status, 201, created.text);
  t.deepEqual(created.body.results[1].metadata, { pinned: true });
  t.deepEqual((await on('GET', `${F}data/${root}/?include=descendants`)).body, { data: docs[0], contents: [item(docs[1], 1, 'inside'), item(docs[2], 2, 'inside')] });
  t.is((await on('POST', `${F}edges/`, [{ from_id: 'x', to_id: root, type: 'inside' }])).body.errors['0.from_id'][0], 'Invalid value "x": expected a UUID.');
});

test.serial('edge update (full, checked again) and delete; deleting a record deletes its edges and it leaves every traversal', async (t) => {
  const moved = await on('PATCH', `${ORG}edges/${edgeId(7, 5, R)}/`, { to_id: 6, metadata: { since: 2026 } });
  t.is(moved.status, 200, moved.text);
  t.deepEqual(moved.body, { data: { ...moved.body.data, id: edgeId(7, 5, R), from_id: 7, to_id: 6, type: R, metadata: { since: 2026 } } });
  t.deepEqual((await on('GET', `${ORG}data/7/?include=ancestors&relationship_type=${R}`)).body.reports_to.map((x: Row) => x.id), [6, 3, 1]);
  const dup = await on('PATCH', `${ORG}edges/${edgeId(7, 5, R)}/`, { from_id: 6, to_id: 3 });
  t.is(dup.status, 409);
  const gone = await on('DELETE', `${ORG}edges/`, { edge_ids: [edgeId(7, 5, R), randomUUID()] });
  t.deepEqual(gone.body, { deleted: 1, message: '1 edge deleted.' });
  t.deepEqual((await on('GET', `${ORG}data/7/?include=ancestors`)).body, { data: person(7), reports_to: [], mentored_by: [] });

  t.is((await on('DELETE', `${ORG}data/3/`)).status, 204);
  t.deepEqual((await on('GET', `${ORG}edges/?page_size=100`)).body.results.map((e: Row) => `${e.from_id}>${e.to_id}`).sort(), ['2>1', '4>2', '5>2']);
  t.deepEqual((await on('GET', `${ORG}data/1/?include=descendants`)).body, {
    data: person(1),
    direct_reports: [item(person(2), 1, R), item(person(4), 2, R), item(person(5), 2, R)],
    mentees: [],
  });
  t.is((await on('POST', `${ORG}data/`, person(3))).status, 201);
  const back = await on('POST', `${ORG}edges/`, [{ from_id: 3, to_id: 1, type: R }, { from_id: 6, to_id: 3, type: R }, { from_id: 4, to_id: 3, type: M }, { from_id: 7, to_id: 5, type: R }]);
  t.is(back.status, 201, back.text);
});

/** The org table's policy: administrators do everything, users `actions` on the people of their country. */
const sameCountry = (actions: string[]) =>
  on('PUT', '/api/apps/crm/policies/', {
    resourcePolicy: {
      resource: 'datatable:org',
      version: 'default',
      rules: [
        { actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['admin'] },
        { actions, effect: 'EFFECT_ALLOW', roles: ['user'], condition: { match: { expr: 'R.attr.country == P.attr.country' } } },
      ],
    },
  });

test.serial('read policies: a record the caller may not read is neither returned nor followed; edges touching it are not listed; writes need update', async (t) => {
  await sql(`UPDATE "${a.schema}".users SET attributes = '{"country": "US"}' WHERE username = 'pleb'`);
  const policy = await sameCountry(['read']);
  t.true(policy.status === 200 || policy.status === 201, policy.text);
  // Bob (2, FR) is hidden from pleb: 5 and 7 are reached only through him.
  t.deepEqual((await on('GET', `${ORG}data/1/?include=descendants`, undefined, 'pleb')).body, {
    data: person(1),
    direct_reports: [item(person(3), 1, R), item(person(6), 2, R)],
    mentees: [item(person(4), 2, M)],
  });
  t.deepEqual((await on('GET', `${ORG}data/7/?format=tree`, undefined, 'pleb')).body, { data: [node(person(5), 0, undefined, [node(person(7), 1, R)])], total: 2 }, 'the natural root is below the hidden record');
  t.deepEqual((await on('GET', `${ORG}data/1/?format=graph&include=descendants`, undefined, 'pleb')).body.data.nodes.map((n: Row) => n.id), [1, 3, 4, 6]);
  // issue 29 #9: the hidden record is missing to pleb, answered exactly as one that does not exist.
  const hidden = await on('GET', `${ORG}data/2/?include=both`, undefined, 'pleb');
  const missing = await on('GET', `${ORG}data/987654/?include=both`, undefined, 'pleb');
  t.is(hidden.status, 404);
  t.deepEqual(hidden.body, missing.body);
  const edges = await on('GET', `${ORG}edges/?page_size=100`, undefined, 'pleb');
  t.deepEqual(edges.body.results.map((e: Row) => `${e.from_id}>${e.to_id}`).sort(), ['3>1', '4>3', '6>3', '7>5']);
  t.is((await on('POST', `${ORG}edges/`, [{ from_id: 8, to_id: 1, type: M }], 'pleb')).status, 403);
  t.is((await on('DELETE', `${ORG}edges/`, { edge_ids: [edgeId(2, 1, R)] }, 'pleb')).status, 403);
  t.deepEqual((await on('GET', `${ORG}data/1/?include=descendants`)).body.direct_reports.map((x: Row) => x.id), [2, 3, 5, 6, 7], 'the administrator still sees everything');
});

test.serial('issue 29 #9: with update rights, a hidden record and the edges touching it are missing to the caller', async (t) => {
  const policy = await sameCountry(['read', 'update']);
  t.true(policy.status === 200 || policy.status === 201, policy.text);
  const edgesBefore = (await on('GET', `${ORG}edges/?page_size=100`)).body.total;
  // An edge to Bob (2, FR, hidden) is refused as one to a record that does not exist.
  const toHidden = await on('POST', `${ORG}edges/`, [{ from_id: 1, to_id: 2, type: M }], 'pleb');
  const toMissing = await on('POST', `${ORG}edges/`, [{ from_id: 1, to_id: 987654, type: M }], 'pleb');
  t.is(toHidden.status, 400);
  t.deepEqual(toHidden.body.errors, { '0.to_id': ['Record 2 does not exist.'] });
  t.deepEqual(toMissing.body.errors, { '0.to_id': ['Record 987654 does not exist.'] });
  // The edge 2>1 touches Bob: missing to pleb on update and delete, and left alone.
  const patched = await on('PATCH', `${ORG}edges/${edgeId(2, 1, R)}/`, { metadata: { x: 1 } }, 'pleb');
  t.is(patched.status, 404);
  t.deepEqual(patched.body, (await on('PATCH', `${ORG}edges/${randomUUID()}/`, { metadata: { x: 1 } }, 'pleb')).body);
  const deleted = await on('DELETE', `${ORG}edges/`, { edge_ids: [edgeId(2, 1, R)] }, 'pleb');
  t.deepEqual([deleted.status, deleted.body], [200, { deleted: 0, message: '0 edges deleted.' }]);
  t.is((await on('GET', `${ORG}edges/?page_size=100`)).body.total, edgesBefore, 'nothing was written');
});

test.serial("another site's user reaches none of the edge or hierarchy routes", async (t) => {
  const asB = (method: string, path: string, body?: unknown) => s.api(method, path, { host: a.domain, token: tok.adminB, body });
  for (const [method, path, body] of [
    ['GET', `${ORG}edges/`],
    ['POST', `${ORG}edges/`, [{ from_id: 8, to_id: 1, type: M }]],
    ['PATCH', `${ORG}edges/${edgeId(2, 1, R)}/`, { metadata: { x: 1 } }],
    ['DELETE', `${ORG}edges/`, { edge_ids: [edgeId(2, 1, R)] }],
    ['GET', `${ORG}data/1/?include=descendants`],
    ['GET', `${ORG}data/?format=tree`],
  ] as [string, string, unknown?][]) {
    const res = await asB(method, path, body);
    t.true(res.status === 401 || res.status === 403, `${method} ${path}: ${res.status}`);
  }
  t.is((await s.api('GET', `${ORG}edges/`, { host: b.domain, token: tok.adminB })).status, 404, "B's app has no such table");
  t.is((await on('GET', `${ORG}edges/?from_id=8`)).body.total, 0, 'nothing was written');
});

test.serial('deleting the table drops its edges and closure', async (t) => {
  t.is((await on('DELETE', '/api/apps/crm/datatables/folders/')).status, 200);
  const left = await sql(`SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = ? AND relname LIKE ?`, [a.schema, `a${appId}_folders%`]);
  t.deepEqual(left, []);
});
