// The records API over HTTP on real PostgreSQL: the fixture CSVs loaded by bulk create, each
// filter operator (checked against the same rows filtered in JS), sort, pages, get/patch/
// delete, all-or-nothing bulk create, constraint violations naming the field, injection
// attempts in every parameter, permissions and isolation between sites.
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { adminsWrite, createTables, fixture, fixtureRows, seedCrm, type Row } from './crm.ts';
import { startTestServer, statementCounter, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
const tok: Record<string, string> = {};
let appId = 0;
const companies = fixtureRows('companies');
const contacts = fixtureRows('contacts');

const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);
const onA = (method: string, path: string, body?: unknown, who = 'adminA') => s.api(method, path, { host: a.domain, token: tok[who], body });
const C = '/api/apps/crm/datatables/companies/data/';
const P = '/api/apps/crm/datatables/contacts/data/';
const count = async (table: string) => Number((await sql(`SELECT count(*) AS n FROM "${a.schema}"."a${appId}_${table}"`))[0].n);
const ids = (res: { body: { data: Row[] } }) => res.body.data.map((r) => r.id);
const idsWhere = (rows: Row[], pred: (r: Row) => boolean) => rows.filter(pred).map((r) => r.id);

test.before(async () => {
  s = await startTestServer();
  ({ a, b } = await twoSitesWithUsers(s, tok));
  [appId] = await seedCrm(s, [a, b]);
  await createTables(onA, [['main', 'companies', fixture('companies.json')], ['main', 'contacts', fixture('contacts.json')]]);
});
test.after.always(async () => {
  await s?.close();
});

test.serial('bulk create loads the CSV fixtures (201 {data: [...]}) as plain rows', async (t) => {
  const c = await onA('POST', C, companies);
  t.is(c.status, 201, c.text);
  t.is(c.body.data.length, companies.length);
  t.like(c.body.data[0], { id: 1, name: 'Acme Robotics', employees: 2100, is_public: false, updated: '2026-02-27T09:15:00.000Z' });
  const p = await onA('POST', '/api/apps/crm/datasources/main/datatables/contacts/data/', contacts);
  t.is(p.status, 201, p.text);
  t.is(await count('contacts'), contacts.length);
  t.deepEqual(p.body.data[0].tags, ['vip', 'churn-risk']);
  t.deepEqual(p.body.data[0].preferences, { newsletter: true });
  t.is(p.body.data[0].birthday, '1984-03-21');
});

test.serial('list: default page, every operator matches the same filter in JS', async (t) => {
  const all = await onA('GET', C, undefined, 'pleb');
  t.is(all.status, 200, all.text);
  t.like(all.body, { total: companies.length, page: 1, page_size: 20 });
  t.deepEqual(ids(all), idsWhere(companies, () => true).slice(0, 20));
  const cases: [string, (r: Row) => boolean][] = [
    ['industry=software', (r) => r.industry === 'software'],
    ['industry__ne=software', (r) => r.industry !== 'software'],
    ['employees__gt=2100', (r) => r.employees > 2100],
    ['employees__gte=2100', (r) => r.employees >= 2100],
    ['employees__lt=500', (r) => r.employees < 500],
    ['employees__lte=500', (r) => r.employees <= 500],
    ['country__in=US,FR', (r) => ['US', 'FR'].includes(r.country)],
    ['country__nin=US,FR', (r) => !['US', 'FR'].includes(r.country)],
    ['name__contains=o', (r) => r.name.includes('o')],
    ['name__icontains=ACME', (r) => r.name.toLowerCase().includes('acme')],
    ['name__startswith=B', (r) => r.name.startsWith('B')],
    ['name__istartswith=b', (r) => r.name.toLowerCase().startsWith('b')],
    ['name__endswith=s', (r) => r.name.endsWith('s')],
    ['name__iendswith=S', (r) => r.name.toLowerCase().endsWith('s')],
    ['revenue__isnull=true', (r) => r.revenue === null],
    ['revenue__isnull=false', (r) => r.revenue !== null],
    ['founded__between=1950,1990', (r) => r.founded >= 1950 && r.founded <= 1990],
    ['is_public=true', (r) => r.is_public === true],
    ['updated__gte=2026-02-01T00:00:00Z', (r) => r.updated !== null && r.updated >= '2026-02-01T00:00:00Z'],
    ['industry=software&country=US', (r) => r.industry === 'software' && r.country === 'US'],
  ];
  for (const [q, pred] of cases) {
    const res = await onA('GET', `${C}?${q}&page_size=1000`, undefined, 'pleb');
    t.is(res.status, 200, `${q}: ${res.text}`);
    t.deepEqual(ids(res), idsWhere(companies, pred), q);
    t.is(res.body.total, idsWhere(companies, pred).length, q);
  }
  const ct = await onA('GET', `${P}?email__iendswith=.EXAMPLE&status=lead&page_size=1000`);
  t.deepEqual(ids(ct), idsWhere(contacts, (r) => r.status === 'lead'));
  const d = await onA('GET', `${P}?birthday__lt=1980-01-01&page_size=1000`);
  t.deepEqual(ids(d), idsWhere(contacts, (r) => r.birthday !== null && r.birthday < '1980-01-01'));
});

test.serial('list: sort, pages, limit/offset and their edges', async (t) => {
  const byEmp = [...companies].sort((x, y) => y.employees - x.employees || y.id - x.id).map((r) => r.id);
  const sorted = await onA('GET', `${C}?_sort=-employees&page_size=1000`);
  t.is(sorted.status, 200, sorted.text);
  t.deepEqual(ids(sorted), byEmp);
  const byCountry = [...companies].sort((x, y) => (x.country < y.country ? -1 : x.country > y.country ? 1 : y.name < x.name ? -1 : y.name > x.name ? 1 : 0)).map((r) => r.id);
  t.deepEqual(ids(await onA('GET', `${C}?_sort=country,-name&page_size=1000`)), byCountry);
  const p2 = await onA('GET', `${C}?page=2&page_size=10`);
  t.like(p2.body, { total: companies.length, page: 2, page_size: 10 });
  t.deepEqual(ids(p2), companies.slice(10, 20).map((r) => r.id));
  const beyond = await onA('GET', `${C}?page=99`);
  t.is(beyond.status, 200);
  t.deepEqual(beyond.body.data, []);
  const lo = await onA('GET', `${C}?limit=5&offset=5`);
  t.like(lo.body, { page: 2, page_size: 5 });
  t.deepEqual(ids(lo), [6, 7, 8, 9, 10]);
  t.is((await onA('GET', `${C}?page_size=5000`)).body.page_size, 1000);
  for (const q of ['page=0', 'page=-1', 'page_size=0', 'page=abc', 'limit=0', 'offset=-3', '_sort=nope', '_sort=-', 'populate=nope', 'search=%20', 'format=xml', '_group_by=country']) {
    t.is((await onA('GET', `${C}?${q}`)).status, 400, q);
  }
});

test.serial('count modes: _count=exact|planned|none or Prefer: count=…; the same page either way', async (t) => {
  const q = `${C}?industry=software&_sort=-employees&page_size=5`;
  const matching = companies.filter((r) => r.industry === 'software').length;
  const exact = await onA('GET', q);
  t.like(exact.body, { total: matching, page: 1, page_size: 5 });
  t.is(exact.headers.get('preference-applied'), null);
  const none = await onA('GET', `${q}&_count=none`);
  t.is(none.status, 200, none.text);
  t.is(none.body.total, null);
  t.deepEqual(none.body.data, exact.body.data);
  const planned = await onA('GET', `${q}&_count=planned`);
  t.is(planned.status, 200, planned.text);
  t.true(Number.isInteger(planned.body.total) && planned.body.total >= 0, `an estimate: ${planned.body.total}`);
  t.deepEqual(planned.body.data, exact.body.data);
  // The header (RFC 7240); the parameter wins over it; unknown preferences are ignored.
  const viaHeader = await s.api('GET', q, { host: a.domain, token: tok.adminA, headers: { Prefer: 'return=minimal, count=none' } });
  t.is(viaHeader.body.total, null);
  t.is(viaHeader.headers.get('preference-applied'), 'count=none');
  const both = await s.api('GET', `${q}&_count=exact`, { host: a.domain, token: tok.adminA, headers: { Prefer: 'count=none' } });
  t.is(both.body.total, matching);
  t.is((await s.api('GET', q, { host: a.domain, token: tok.adminA, headers: { Prefer: 'count=maybe' } })).body.total, matching);
  // An empty page still counts.
  t.like((await onA('GET', `${q}&page=99`)).body, { data: [], total: matching });
  const bad = await onA('GET', `${q}&_count=some`);
  t.is(bad.status, 400);
  t.truthy(bad.body.errors._count);
});

test.serial('one round trip: a warm get or list (exact total) sends one statement; a change to the table reloads it once', async (t) => {
  const counter = statementCounter(s);
  const get = async (path: string) => {
    const res = await onA('GET', path, undefined, 'pleb');
    t.is(res.status, 200, res.text);
  };
  // Warm: the fewest of three runs (a background job's statement may fall in one run's window).
  const sent = async (path: string) => (await counter.fewest(() => get(path))).statements;
  try {
    const list = `${C}?industry=software&_sort=-employees&page_size=5`;
    await get(`${C}1/`); // warms the user and the table
    t.is(await sent(`${C}1/`), 1, 'get');
    t.is(await sent(list), 1, 'list with its exact total');
    t.is(await sent(`${list}&_count=none`), 1, 'list without a count');
    // A change to the site's tables (here: a description) drops the cached definition in every process.
    t.is((await onA('PATCH', '/api/apps/crm/datatables/companies/', { description: 'changed' })).status, 200);
    let cold = 0;
    for (let i = 0; i < 40 && (cold = (await counter.counted(() => get(`${C}1/`))).statements) === 1; i++) await new Promise((r) => setTimeout(r, 25));
    t.true(cold > 1, 'the definition was read again after the change');
    t.is(await sent(`${C}1/`), 1, 'and is cached again');
  } finally {
    counter.restore();
  }
});

test.serial('issue 33: a warm single-record create, update and delete by id each send one statement, outside any transaction', async (t) => {
  const counter = statementCounter(s);
  try {
    const sent = async (method: string, path: string, body?: unknown, status = 200) => {
      const res = await onA(method, path, body);
      t.is(res.status, status, res.text);
      return res.body;
    };
    await sent('POST', C, { id: 9001, name: 'Warm-up' }, 201); // warms the user and the table
    const created = await counter.fewest((i) => sent('POST', C, { id: 9010 + i, name: 'One trip' }, 201));
    t.like(created, { statements: 1, transactions: 0 });
    t.like(created.result.data, { name: 'One trip' });
    const patched = await counter.fewest((i) => sent('PATCH', `${C}${9010 + i}/`, { employees: 7 }));
    t.like(patched, { statements: 1, transactions: 0 });
    t.like(patched.result.data, { name: 'One trip', employees: 7 });
    t.like(await counter.fewest((i) => sent('DELETE', `${C}${9010 + i}/`, undefined, 204)), { statements: 1, transactions: 0 });
    t.is((await onA('DELETE', `${C}9001/`)).status, 204);
    // Several records are one transaction (all or nothing).
    t.like(await counter.counted(() => sent('POST', C, [{ id: 9003, name: 'A' }, { id: 9004, name: 'B', employees: 3 }], 201)), { transactions: 1 });
    t.is((await onA('DELETE', `${C}?ids=9003,9004`)).status, 200);
  } finally {
    counter.restore();
  }
});

test.serial('filters: unknown field, unknown operator or bad value → 400 naming it', async (t) => {
  const unknown = await onA('GET', `${C}?nope=1`);
  t.is(unknown.status, 400);
  t.truthy(unknown.body.errors.nope);
  const op = await onA('GET', `${C}?employees__like=1`);
  t.is(op.status, 400);
  t.regex(op.body.errors.employees__like[0], /Unknown operator "like"/);
  const bad = await onA('GET', `${C}?employees__gt=many`);
  t.is(bad.status, 400);
  t.truthy(bad.body.errors.employees);
  t.is((await onA('GET', `${C}?updated__gt=yesterday`)).status, 400);
  t.is((await onA('GET', `${C}?employees__contains=1`)).status, 400);
});

test.serial('get, patch, delete one record', async (t) => {
  const one = await onA('GET', `${C}3/`, undefined, 'pleb');
  t.is(one.status, 200);
  t.like(one.body.data, { id: 3, name: companies[2]!.name });
  t.is((await onA('GET', `${C}999/`)).status, 404);
  t.is((await onA('GET', `${C}abc/`)).status, 404);
  const patched = await onA('PATCH', `${C}3/`, { employees: 42, updated: '2026-03-01T10:00:00+02:00' });
  t.is(patched.status, 200, patched.text);
  t.like(patched.body.data, { id: 3, employees: 42, name: companies[2]!.name, updated: '2026-03-01T08:00:00.000Z' });
  const invalid = await onA('PATCH', `${C}3/`, { employees: -1, email: 'not-an-email', nope: 1 });
  t.is(invalid.status, 400);
  t.truthy(invalid.body.errors.nope);
  const invalid2 = await onA('PATCH', `${C}3/`, { employees: -1, email: 'not-an-email' });
  t.is(invalid2.status, 400);
  t.truthy(invalid2.body.errors.employees);
  t.truthy(invalid2.body.errors.email);
  t.is((await onA('PATCH', `${C}3/`, { name: null })).status, 400, 'required');
  t.is((await onA('PATCH', `${C}999/`, { employees: 1 })).status, 404);
  t.is((await onA('GET', `${C}3/`)).body.data.employees, 42);
  const del = await onA('DELETE', `${P}40/`);
  t.is(del.status, 204);
  t.is((await onA('DELETE', `${P}40/`)).status, 404);
  t.is(await count('contacts'), contacts.length - 1);
});

test.serial('bulk create is all or nothing: one bad row → 400 keyed by row and field, nothing written', async (t) => {
  const before = await count('companies');
  const rows = [{ id: 101, name: 'Good One' }, { id: 102, name: 'Bad', email: 'nope', industry: 'piracy' }, { id: 103, name: 'Good Two' }];
  const res = await onA('POST', C, rows);
  t.is(res.status, 400, res.text);
  t.truthy(res.body.errors['1.email']);
  t.truthy(res.body.errors['1.industry']);
  t.falsy(res.body.errors['0.name']);
  t.is(await count('companies'), before);
  // A database-level failure in the last row rolls back the first ones too.
  const dup = await onA('POST', C, [{ id: 104, name: 'Fine' }, { id: 1, name: 'Duplicate key' }]);
  t.is(dup.status, 409, dup.text);
  t.truthy(dup.body.errors['1.id']);
  t.is(await count('companies'), before);
  t.is((await onA('POST', C, [])).status, 400);
  t.is((await onA('POST', C, 'text')).status, 400);
});

test.serial('constraint violations: unique → 409 naming the field, foreign key → 400; never a raw database error', async (t) => {
  const email = contacts[0]!.email;
  const dup = await onA('POST', P, { id: 500, first_name: 'A', last_name: 'B', email });
  t.is(dup.status, 409, dup.text);
  t.like(dup.body, { code: 'DUPLICATE_ENTRY' });
  t.truthy(dup.body.errors.email);
  t.false(dup.text.includes('violates'));
  const upper = await onA('POST', P, { id: 501, first_name: 'A', last_name: 'B', email: email.toUpperCase() });
  t.is(upper.status, 409, 'the lower(email) unique index');
  t.truthy(upper.body.errors.email);
  const fk = await onA('POST', P, { id: 502, first_name: 'A', last_name: 'B', email: 'x@y.example', company_id: 9999 });
  t.is(fk.status, 400, fk.text);
  t.truthy(fk.body.errors.company_id);
  const dom = await onA('PATCH', `${C}2/`, { domain: companies[0]!.domain });
  t.is(dom.status, 409, dom.text);
  t.truthy(dom.body.errors.domain);
  const created = await onA('POST', P, { id: 503, first_name: 'A', last_name: 'B', email: 'new@y.example', company_id: 1 });
  t.is(created.status, 201, created.text);
  t.like(created.body.data, { id: 503, status: 'active', tags: null });
});

test.serial('delete many: by ids, by filter JSON; empty or missing filter refused', async (t) => {
  const byIds = await onA('DELETE', `${P}?ids=501,503,9999`);
  t.is(byIds.status, 200, byIds.text);
  t.deepEqual(byIds.body, { deleted: 1, ids: [503] });
  t.is((await onA('DELETE', `${P}?filter={}`)).status, 400);
  t.is((await onA('DELETE', P)).status, 400);
  t.is((await onA('DELETE', `${P}?filter=not-json`)).status, 400);
  t.is((await onA('DELETE', `${P}?filter=${encodeURIComponent('{"nope__gte":1}')}`)).status, 400);
  const expected = idsWhere(contacts, (r) => r.status === 'inactive' && r.id !== 40).length;
  const byFilter = await onA('DELETE', `${P}?filter=${encodeURIComponent(JSON.stringify({ status: 'inactive', id__lte: 39 }))}`);
  t.is(byFilter.status, 200, byFilter.text);
  t.deepEqual(byFilter.body, { deleted: expected });
  t.is((await onA('GET', `${P}?status=inactive`)).body.total, 0);
});

test.serial('injection attempts in field names, values, _sort, ids and filter JSON: refused or bound; tables intact', async (t) => {
  const before = await count('companies');
  const evil = encodeURIComponent(`x'; DROP TABLE "${a.schema}"."a${appId}_companies"; --`);
  const attempts: [string, string, number][] = [
    ['GET', `${C}?${encodeURIComponent('name"; DROP TABLE x; --')}=1`, 400],
    ['GET', `${C}?name__${encodeURIComponent('eq; DROP')}=1`, 400],
    ['GET', `${C}?name=${evil}`, 200],
    ['GET', `${C}?name__icontains=${evil}`, 200],
    ['GET', `${C}?name__in=${evil},b`, 200],
    ['GET', `${C}?employees=${evil}`, 400],
    ['GET', `${C}?_sort=${encodeURIComponent('name; DROP TABLE x')}`, 400],
    ['GET', `${C}?_sort=${encodeURIComponent('(select 1)')}`, 400],
    ['GET', `${C}?page_size=${encodeURIComponent('1; DROP TABLE x')}`, 400],
    ['GET', `${C}${evil}/`, 404],
    ['DELETE', `${C}?ids=${evil}`, 400],
    ['DELETE', `${C}?filter=${encodeURIComponent(JSON.stringify({ 'name"; DROP TABLE x; --': 1 }))}`, 400],
    ['DELETE', `${C}?filter=${encodeURIComponent(JSON.stringify({ name: "' OR 1=1 --" }))}`, 200],
  ];
  for (const [method, path, status] of attempts) t.is((await onA(method, path)).status, status, path);
  t.is((await onA('GET', `${C}?name__contains=${encodeURIComponent('%')}`)).body.total, 0, 'LIKE wildcards are literal');
  const col = await onA('POST', C, { id: 300, name: 'X', 'name) VALUES (1); DROP TABLE x; --': 1 });
  t.is(col.status, 400);
  t.is(await count('companies'), before);
  t.truthy((await sql('SELECT to_regclass(?) AS r', [`"${a.schema}".apps`]))[0].r);
});

test.serial('permissions: with a policy letting site users read and administrators write; another site cannot reach the records', async (t) => {
  await adminsWrite(onA, 'companies');
  t.is((await onA('GET', C, undefined, 'pleb')).status, 200);
  t.is((await onA('POST', C, { id: 400, name: 'N' }, 'pleb')).status, 403);
  t.is((await onA('PATCH', `${C}1/`, { name: 'N' }, 'pleb')).status, 403);
  t.is((await onA('DELETE', `${C}1/`, undefined, 'pleb')).status, 403);
  t.is((await onA('DELETE', `${C}?ids=1`, undefined, 'pleb')).status, 403);
  t.is((await s.api('GET', C, { host: a.domain })).status, 401);
  t.not((await s.api('GET', C, { host: a.domain, token: tok.adminB })).status, 200, 'a B token on A');
  t.is((await s.api('GET', C, { host: b.domain, token: tok.adminB })).status, 404, "B's app has no such table");
  t.is((await onA('GET', '/api/apps/crm/datatables/nope/data/')).status, 404);
});
