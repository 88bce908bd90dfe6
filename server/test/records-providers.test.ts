// The records API on the jsonb and docstore providers, on real PostgreSQL: writes validated
// against the schema (jsonb refuses unknown fields, docstore keeps them), typed conditions
// over JSON fields, dotted document paths (text, numeric when compared with numbers), sort,
// get/patch/delete, upsert, aggregates, search, keys and unique fields enforced by indexes,
// injection attempts in paths refused.
import test from 'ava';
import type { TableSchema } from '../../shared/data/table-schema.ts';
import type { TestSite } from '../../shared/testing/sites.ts';
import { createTables, fixture, seedCrm, type Row } from './crm.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
const tok: Record<string, string> = {};
const accounts: TableSchema = {
  fields: [
    { name: 'code', type: 'string', constraints: { pattern: '^[A-Z]{3}$' } },
    { name: 'email', type: 'string', format: 'email', constraints: { unique: true } },
    { name: 'score', type: 'integer', constraints: { minimum: 0 } },
  ],
  primaryKey: 'code',
};

const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);
const on = (method: string, path: string, body?: unknown, who = 'adminA', site?: TestSite) => s.api(method, path, { host: (site ?? a).domain, token: tok[who], body });
const D = (table: string) => `/api/apps/crm/datatables/${table}/data/`;

test.before(async () => {
  s = await startTestServer();
  ({ a, b } = await twoSitesWithUsers(s, tok));
  await seedCrm(s, [a], ['jsonb', 'docstore']);
  await createTables(on, [['jsonb', 'events', fixture('events.jsonb.json')], ['jsonb', 'accounts', accounts], ['docstore', 'notes', fixture('notes.docstore.json')]]);
});
test.after.always(async () => {
  await s?.close();
});

const events = [
  { event_type: 'page_view', occurred_at: '2026-01-01T10:00:00Z', payload: { path: '/pricing', ms: 120 } },
  { event_type: 'click', occurred_at: '2026-01-02T10:00:00Z', payload: { path: '/signup', button: 'Start free trial' } },
  { event_type: 'signup', occurred_at: '2026-01-03T10:00:00Z', user_ref: '2b0c6f0e-8f5d-4a43-9d7e-3f1c2a4b5c6d' },
  { event_type: 'click', occurred_at: '2026-01-04T10:00:00Z', payload: { path: '/pricing' } },
];

test.serial('jsonb: create (generated id), typed conditions, sort, get, patch (merged, validated), delete', async (t) => {
  const created = await on('POST', D('events'), events);
  t.is(created.status, 201, created.text);
  const rows = created.body.data as Row[];
  t.is(rows.length, 4);
  t.regex(rows[0]!.id, /^[0-9a-f-]{36}$/);
  t.deepEqual({ ...rows[1], id: undefined }, { ...events[1], id: undefined });
  const clicks = await on('GET', `${D('events')}?event_type=click&occurred_at__gte=2026-01-03T00:00:00Z`);
  t.is(clicks.status, 200, clicks.text);
  t.deepEqual(clicks.body.data.map((r: Row) => r.id), [rows[3]!.id]);
  const newest = await on('GET', `${D('events')}?_sort=-occurred_at&page_size=2`);
  t.deepEqual(newest.body.data.map((r: Row) => r.event_type), ['click', 'signup']);
  t.is(newest.body.total, 4);
  t.is((await on('GET', `${D('events')}?user_ref__isnull=false`)).body.total, 1);
  t.is((await on('GET', `${D('events')}${rows[2]!.id}/`)).body.data.event_type, 'signup');
  const patched = await on('PATCH', `${D('events')}${rows[0]!.id}/`, { event_type: 'purchase' });
  t.is(patched.status, 200, patched.text);
  t.deepEqual(patched.body.data, { ...rows[0], event_type: 'purchase' });
  t.is((await on('PATCH', `${D('events')}${rows[0]!.id}/`, { event_type: 'teleport' })).status, 400);
  t.is((await on('DELETE', `${D('events')}${rows[3]!.id}/`)).status, 204);
  t.is((await on('GET', `${D('events')}${rows[3]!.id}/`)).status, 404);
  const agg = await on('GET', `${D('events')}?_aggregate=count,max(occurred_at)&_group_by=event_type`);
  t.is(agg.status, 200, agg.text);
  t.deepEqual(agg.body.data.map((g: Row) => [g.event_type, g.count]), [['click', 1], ['purchase', 1], ['signup', 1]]);
  const found = await on('GET', `${D('events')}?search=trial`);
  t.deepEqual(found.body.data.map((r: Row) => r.id), [rows[1]!.id]);
});

test.serial('jsonb: unknown fields and schema violations refused per row; nothing written', async (t) => {
  const before = (await on('GET', D('events'))).body.total;
  const bad = await on('POST', D('events'), [{ event_type: 'click', occurred_at: '2026-01-05T00:00:00Z' }, { event_type: 'click', when: 'now' }, { event_type: 'nope', occurred_at: 'yesterday' }]);
  t.is(bad.status, 400);
  t.truthy(bad.body.errors['1.when']);
  t.truthy(bad.body.errors['1.occurred_at']);
  t.truthy(bad.body.errors['2.event_type']);
  t.truthy(bad.body.errors['2.occurred_at']);
  t.is((await on('GET', D('events'))).body.total, before);
});

test.serial('jsonb with a declared key: the key is the id; key and unique fields enforced, named on conflict; upsert', async (t) => {
  const ok = await on('POST', D('accounts'), [{ code: 'ABC', email: 'abc@example.com', score: 3 }, { code: 'XYZ', email: 'xyz@example.com', score: 10 }]);
  t.is(ok.status, 201, ok.text);
  t.deepEqual(ok.body.data[0], { code: 'ABC', email: 'abc@example.com', score: 3 });
  t.is((await on('GET', `${D('accounts')}XYZ/`)).body.data.score, 10);
  const dupKey = await on('POST', D('accounts'), { code: 'ABC', email: 'other@example.com' });
  t.is(dupKey.status, 409, dupKey.text);
  t.truthy(dupKey.body.errors.code);
  const dupEmail = await on('POST', D('accounts'), { code: 'DEF', email: 'abc@example.com' });
  t.is(dupEmail.status, 409, dupEmail.text);
  t.truthy(dupEmail.body.errors.email);
  t.truthy((await on('POST', D('accounts'), { email: 'nokey@example.com' })).body.errors.code);
  t.is((await on('GET', `${D('accounts')}?score__gt=5`)).body.data[0].code, 'XYZ');
  const up = await on('POST', `${D('accounts')}upsert/?unique_fields=email`, { code: 'XYZ', email: 'xyz@example.com', score: 11 });
  t.is(up.status, 200, up.text);
  t.false(up.body.created);
  t.is(up.body.data.score, 11);
  const renamed = await on('PATCH', `${D('accounts')}XYZ/`, { code: 'QRS' });
  t.is(renamed.status, 200, renamed.text);
  t.is((await on('GET', `${D('accounts')}QRS/`)).body.data.email, 'xyz@example.com');
  t.is((await on('GET', `${D('accounts')}XYZ/`)).status, 404);
});

test.serial('docstore: nested documents kept whole, dotted paths (text and numeric), sort, patch merges top level', async (t) => {
  const docs = [
    { title: 'Kickoff', body: 'Agenda for the kickoff', tags: ['meeting'], address: { city: 'Paris', zip: '75001' }, stats: { visits: 9 } },
    { title: 'Retro', address: { city: 'Berlin' }, stats: { visits: 100 }, extra: { deep: { er: true } } },
    { title: 'Plan', address: { city: 'Paris' }, stats: { visits: 10.5 } },
  ];
  const created = await on('POST', D('notes'), docs);
  t.is(created.status, 201, created.text);
  const rows = created.body.data as Row[];
  t.deepEqual({ ...rows[1] }, { ...docs[1], id: rows[1]!.id });
  const paris = await on('GET', `${D('notes')}?address.city=Paris&_sort=-title`);
  t.is(paris.status, 200, paris.text);
  t.deepEqual(paris.body.data.map((r: Row) => r.title), ['Plan', 'Kickoff']);
  const busy = await on('GET', `${D('notes')}?stats.visits__gt=10&_sort=stats.visits`);
  t.deepEqual(busy.body.data.map((r: Row) => r.title), ['Plan', 'Retro'], 'numbers compare as numbers (text would put 100 before 9)');
  t.deepEqual((await on('GET', `${D('notes')}?extra.deep.er=true`)).body.data.map((r: Row) => r.title), ['Retro']);
  t.deepEqual((await on('GET', `${D('notes')}?address.city__istartswith=ber`)).body.data.map((r: Row) => r.title), ['Retro']);
  const patched = await on('PATCH', `${D('notes')}${rows[0]!.id}/`, { pinned: true, address: { city: 'Lyon' } });
  t.is(patched.status, 200, patched.text);
  t.like(patched.body.data, { title: 'Kickoff', pinned: true, address: { city: 'Lyon' }, stats: { visits: 9 }, id: rows[0]!.id });
  t.is((await on('PATCH', `${D('notes')}${rows[0]!.id}/`, { title: 42 })).status, 400, 'schema fields keep their types');
  const agg = await on('GET', `${D('notes')}?_aggregate=count,sum(stats.visits)&_group_by=address.city`);
  t.is(agg.status, 200, agg.text);
  t.deepEqual(agg.body.data, [{ 'address.city': 'Berlin', count: 1, 'sum_stats_visits': 100 }, { 'address.city': 'Lyon', count: 1, 'sum_stats_visits': 9 }, { 'address.city': 'Paris', count: 1, 'sum_stats_visits': 10.5 }]);
  t.deepEqual((await on('GET', `${D('notes')}?search=agenda`)).body.data.map((r: Row) => r.title), ['Kickoff']);
  const own = await on('POST', D('notes'), { id: '6f1c2a4b-5c6d-4a43-9d7e-2b0c6f0e8f5d', title: 'Mine' });
  t.is(own.body.data.id, '6f1c2a4b-5c6d-4a43-9d7e-2b0c6f0e8f5d');
  t.is((await on('POST', D('notes'), { id: 'not-a-uuid', title: 'x' })).status, 400);
  t.is((await on('POST', D('notes'), { body: 'no title' })).status, 400);
});

test('docstore and jsonb: injection attempts in paths, values and sort are refused or bound; tables intact', async (t) => {
  for (const q of [
    `address.city')%20IS%20NULL%20OR%20('1=1`, `address.city%22%3B%20DROP%20TABLE%20x%3B--=1`, `a.b.c.d.e.f.g.h.i=1`, `_sort=address.city%20DESC%3B%20DROP`,
    `_aggregate=sum(stats.visits))%3B--`, `_group_by=doc`,
  ]) {
    const res = await on('GET', `${D('notes')}?${q}`);
    t.is(res.status, 400, q);
  }
  const bound = await on('GET', `${D('notes')}?address.city=${encodeURIComponent("Paris' OR '1'='1")}`);
  t.is(bound.status, 200);
  t.deepEqual(bound.body.data, []);
  t.is((await on('GET', `${D('events')}?payload.path=x`)).status, 400, 'jsonb tables have no free paths');
  const [n] = await sql(`SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = ?`, [a.schema]);
  t.true(Number(n.n) > 3);
});

test('another site reaches none of it', async (t) => {
  t.is((await on('GET', D('notes'), undefined, 'adminB', b)).status, 404);
  t.is((await on('GET', D('notes'), undefined, 'adminB')).status, 401);
  t.is((await on('POST', D('events'), events[0], 'adminB')).status, 401);
});
