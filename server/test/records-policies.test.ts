// Records under an app's policies (spec Part 2 §7, issue 11 item 7): the read plan filters lists,
// their totals and aggregates in SQL; a record the caller may not read is missing to them (404,
// answered exactly like one that does not exist: issue 29 #9), one they read but may not change a
// 403; creates and bulk writes are all or nothing; a policy change is seen by the next request; a
// condition SQL cannot express is refused, never approximated.
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { createTables, fixture, fixtureRows, seedCrm, type Row } from './crm.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
const tok: Record<string, string> = {};
let appId = 0;
const companies = fixtureRows('companies');
const contacts = fixtureRows('contacts');

const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);
const on = (method: string, path: string, body?: unknown, who = 'adminA') => s.api(method, path, { host: a.domain, token: tok[who], body });
const C = '/api/apps/crm/datatables/companies/data/';
const POLICIES = '/api/apps/crm/policies/';
const count = async () => Number((await sql(`SELECT count(*) AS n FROM "${a.schema}"."a${appId}_companies"`))[0].n);
const ids = (rows: Row[]) => rows.map((r) => r.id).sort((x, y) => x - y);
const BIG = 50_000;

/** pleb (no app role: `user`) reads and edits their country's companies, creates small ones, deletes nothing; nobody reads the big ones. */
const companiesPolicy = (extra: unknown[] = []) => ({
  resourcePolicy: {
    resource: 'datatable:companies',
    version: 'default',
    rules: [
      { actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['admin'] },
      { actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['user'], condition: { match: { expr: 'R.attr.country == P.attr.country' } } },
      { actions: ['update'], effect: 'EFFECT_ALLOW', roles: ['user'], condition: { match: { all: { of: [{ expr: 'R.attr.country == P.attr.country' }, { expr: '!R.attr.is_public' }] } } } },
      { actions: ['create'], effect: 'EFFECT_ALLOW', roles: ['user'], condition: { match: { expr: 'R.attr.employees < 100' } } },
      { actions: ['read'], effect: 'EFFECT_DENY', roles: ['*'], condition: { match: { expr: `R.attr.employees > ${BIG}` } } },
      ...extra,
    ],
  },
});
const putPolicy = async (doc: unknown) => {
  const res = await on('PUT', POLICIES, doc);
  if (res.status !== 200 && res.status !== 201) throw new Error(`PUT policy: ${res.status} ${res.text}`);
};

test.before(async () => {
  s = await startTestServer();
  ({ a, b } = await twoSitesWithUsers(s, tok));
  [appId] = await seedCrm(s, [a, b]);
  await createTables(on, [['main', 'companies', fixture('companies.json')], ['main', 'contacts', fixture('contacts.json')]]);
  if ((await on('POST', C, companies)).status !== 201) throw new Error('companies');
  if ((await on('POST', '/api/apps/crm/datatables/contacts/data/', contacts)).status !== 201) throw new Error('contacts');
  await sql(`UPDATE "${a.schema}".users SET attributes = '{"country": "US"}' WHERE username = 'pleb'`);
});
test.after.always(async () => {
  await s?.close();
});

test.serial('the system policies: every site user reads and writes a new table', async (t) => {
  t.is((await sql(`SELECT count(*) AS n FROM "${a.schema}".policies WHERE name = 'datatable:companies' AND is_system`))[0].n, '2');
  const list = await on('GET', `${C}?page_size=1000`, undefined, 'pleb');
  t.is(list.body.total, companies.length);
  const created = await on('POST', C, { id: 9001, name: 'Tiny', employees: 3, country: 'US' }, 'pleb');
  t.is(created.status, 201, created.text);
  t.is((await on('DELETE', `${C}9001/`, undefined, 'pleb')).status, 204);
});

test.serial('the read plan filters a list, its total and its aggregates in SQL', async (t) => {
  await putPolicy(companiesPolicy());
  const mine = companies.filter((r) => r.country === 'US' && r.employees <= BIG);
  const list = await on('GET', `${C}?page_size=1000`, undefined, 'pleb');
  t.is(list.status, 200, list.text);
  t.deepEqual(ids(list.body.data), ids(mine));
  t.is(list.body.total, mine.length);
  const filtered = await on('GET', `${C}?page_size=1000&employees__gt=1000`, undefined, 'pleb');
  t.deepEqual(ids(filtered.body.data), ids(mine.filter((r) => r.employees > 1000)));
  const agg = await on('GET', `${C}?_aggregate=${encodeURIComponent('sum(employees)')}`, undefined, 'pleb');
  t.is(agg.status, 200, agg.text);
  t.is(Number(agg.body.data[0].sum_employees), mine.reduce((n, r) => n + r.employees, 0), JSON.stringify(agg.body.data[0]));
  // The DENY on big companies holds for administrators too; the rest they read.
  const admin = await on('GET', `${C}?page_size=1000`);
  t.deepEqual(ids(admin.body.data), ids(companies.filter((r) => r.employees <= BIG)));
});

test.serial("populate shows a related record only when the related table's own policies let the caller read it", async (t) => {
  const byId = new Map(companies.map((r) => [r.id, r]));
  const res = await on('GET', `/api/apps/crm/datatables/contacts/data/?populate=company_id&page_size=1000`, undefined, 'pleb');
  t.is(res.status, 200, res.text);
  let shown = 0;
  for (const c of res.body.data) {
    const company = byId.get(contacts.find((x) => x.id === c.id)!.company_id);
    const readable = company && company.country === 'US' && company.employees <= BIG;
    t.is(c.company_id === null ? null : c.company_id.id, readable ? company.id : null, `contact ${c.id}`);
    if (readable) shown++;
  }
  t.true(shown > 0 && shown < res.body.data.length, 'some related companies shown, some hidden');
});

test.serial("conditions and sorts that follow a relation see only the related records the caller may read", async (t) => {
  const byId = new Map(companies.map((r) => [r.id, r]));
  const contactsAt = (keep: (c: Row) => boolean) => ids(contacts.filter((x) => x.company_id !== null && byId.has(x.company_id) && keep(byId.get(x.company_id)!)));
  const list = async (query: string, who: string) => {
    const res = await on('GET', `/api/apps/crm/datatables/contacts/data/?page_size=1000&${query}`, undefined, who);
    t.is(res.status, 200, res.text);
    return ids(res.body.data);
  };
  // The administrator's answers show what each condition matches without policies in the way.
  const us = contactsAt((c) => c.country === 'US');
  const foreign = contactsAt((c) => c.country !== 'US');
  t.true(foreign.length > 0 && us.length > 0, 'the fixture has contacts at US companies and at others');
  t.deepEqual(await list('company_id.country=US', 'adminA'), us);
  t.deepEqual(await list('company_id.country__ne=US', 'adminA'), foreign);
  // pleb reads every contact but only the US companies (up to BIG employees): a condition on a
  // hidden company matches nothing, so its values cannot be probed.
  t.deepEqual(await list('company_id.country=US', 'pleb'), contactsAt((c) => c.country === 'US' && c.employees <= BIG));
  t.deepEqual(await list('company_id.country__ne=US', 'pleb'), []);
  // Sorting by a related field would order by hidden values: refused while the related table's
  // read plan is conditional (records-relations.test.ts sorts by it under the system policies).
  const sorted = await on('GET', '/api/apps/crm/datatables/contacts/data/?_sort=company_id.name', undefined, 'pleb');
  t.is(sorted.status, 400, sorted.text);
  t.regex(sorted.body.errors._sort[0], /policies of table "companies"/);
});

test.serial('issue 29 #9: get answers 200 for a record the plan admits, and for one it hides exactly what it answers for none (404)', async (t) => {
  const us = companies.find((r) => r.country === 'US' && r.employees <= BIG)!;
  const other = companies.find((r) => r.country !== 'US')!;
  t.is((await on('GET', `${C}${us.id}/`, undefined, 'pleb')).status, 200);
  const missing = await on('GET', `${C}987654/`, undefined, 'pleb');
  t.is(missing.status, 404);
  for (const query of ['', '?populate=*']) {
    const hidden = await on('GET', `${C}${other.id}/${query}`, undefined, 'pleb');
    t.is(hidden.status, 404, `hidden${query}`);
    t.deepEqual(hidden.body, missing.body);
  }
  const big = companies.find((r) => r.employees > BIG);
  if (big) t.is((await on('GET', `${C}${big.id}/`)).status, 404, 'the DENY reaches the administrator');
});

test.serial('create: checked per record; one refused record refuses the whole batch', async (t) => {
  const before = await count();
  t.is((await on('POST', C, { id: 9101, name: 'Small', employees: 5, country: 'FR' }, 'pleb')).status, 201);
  const batch = await on('POST', C, [{ id: 9102, name: 'S2', employees: 7 }, { id: 9103, name: 'Large', employees: 700 }], 'pleb');
  t.is(batch.status, 403);
  t.is(await count(), before + 1, 'nothing of the refused batch was stored');
});

test.serial('patch: by the update plan on the stored record (a hidden one is missing: 404; a readable one not to be changed: 403); a bulk patch with one refused record changes nothing', async (t) => {
  const mine = companies.find((r) => r.country === 'US' && !r.is_public && r.employees <= BIG)!;
  const publicOne = { id: 9401, name: 'Open US', employees: 50, country: 'US', is_public: true }; // pleb reads it, may not update it
  t.is((await on('POST', C, publicOne)).status, 201);
  const foreign = companies.find((r) => r.country !== 'US')!;
  t.is((await on('PATCH', `${C}${mine.id}/`, { website: 'https://changed.example' }, 'pleb')).status, 200);
  const hidden = await on('PATCH', `${C}${foreign.id}/`, { website: 'https://x.example' }, 'pleb');
  t.is(hidden.status, 404);
  t.deepEqual(hidden.body, (await on('PATCH', `${C}987654/`, { website: 'https://x.example' }, 'pleb')).body);
  t.is((await on('PATCH', `${C}${publicOne.id}/`, { website: 'https://x.example' }, 'pleb')).status, 403);
  const bulk = await on('PATCH', C, [{ id: mine.id, website: 'https://twice.example' }, { id: publicOne.id, website: 'https://x.example' }], 'pleb');
  t.is(bulk.status, 403);
  const bulkHidden = await on('PATCH', C, [{ id: mine.id, website: 'https://twice.example' }, { id: foreign.id, website: 'https://x.example' }], 'pleb');
  t.is(bulkHidden.status, 400, 'a hidden record in a bulk patch is a missing one');
  t.deepEqual(bulkHidden.body.errors, { '1.id': ['Record not found.'] });
  t.is((await on('GET', `${C}${mine.id}/`)).body.data.website, 'https://changed.example', 'the first item was rolled back');
  t.is((await on('GET', `${C}${foreign.id}/`)).body.data.website, foreign.website, 'the hidden record is unchanged');
});

test.serial('delete: an action the policies allow on no row is a 403 before any work; by ids all or nothing; by filter only the allowed rows; hidden records are missing', async (t) => {
  const foreign = companies.find((r) => r.country !== 'US')!;
  const usLarge = companies.find((r) => r.country === 'US' && r.employees >= 100 && r.employees <= BIG)!;
  const usSmall = { id: 9401 }; // created by the patch test: US, 50 employees
  // readable and small (pleb's own 9101 is in FR)
  const deletable = Number((await sql(`SELECT count(*) AS n FROM "${a.schema}"."a${appId}_companies" WHERE country = 'US' AND employees < 100`))[0].n);
  t.true(deletable > 0);
  t.is((await on('DELETE', `${C}9101/`, undefined, 'pleb')).status, 403);
  t.is((await on('DELETE', `${C}?filter=${encodeURIComponent(JSON.stringify({ name: 'Small' }))}`, undefined, 'pleb')).status, 403);
  // pleb may now delete the small companies: the change is seen by the very next request.
  await putPolicy(companiesPolicy([{ actions: ['delete'], effect: 'EFFECT_ALLOW', roles: ['user'], condition: { match: { expr: 'R.attr.employees < 100' } } }]));
  const before = await count();
  t.is((await on('DELETE', `${C}?ids=${usSmall.id},${usLarge.id}`, undefined, 'pleb')).status, 403, 'one refused id refuses all');
  t.is(await count(), before);
  // issue 29 #9: records pleb may not read are missing: not deleted, not counted, as unknown ids.
  const hiddenIds = await on('DELETE', `${C}?ids=9101,${foreign.id}`, undefined, 'pleb');
  t.deepEqual([hiddenIds.status, hiddenIds.body], [200, (await on('DELETE', `${C}?ids=987654,987655`, undefined, 'pleb')).body]);
  const hidden = await on('DELETE', `${C}${foreign.id}/`, undefined, 'pleb');
  t.is(hidden.status, 404);
  t.deepEqual(hidden.body, (await on('DELETE', `${C}987654/`, undefined, 'pleb')).body);
  t.is(await count(), before);
  const byFilter = await on('DELETE', `${C}?filter=${encodeURIComponent(JSON.stringify({ employees__lt: 1000000 }))}`, undefined, 'pleb');
  t.is(byFilter.status, 200, byFilter.text);
  t.is(byFilter.body.deleted, deletable, 'only the small companies pleb reads');
  t.is(await count(), before - deletable);
  t.is((await on('DELETE', `${C}${usLarge.id}/`, undefined, 'pleb')).status, 403, 'readable, not deletable');
});

test.serial('a condition SQL cannot express is refused with 422, never approximated', async (t) => {
  await putPolicy(companiesPolicy([{ actions: ['read'], effect: 'EFFECT_DENY', roles: ['user'], condition: { match: { expr: 'size(R.attr.name) > 30' } } }]));
  const res = await on('GET', C, undefined, 'pleb');
  t.is(res.status, 422);
  t.regex(res.body.message, /cannot be applied/);
  await putPolicy(companiesPolicy());
  t.is((await on('GET', C, undefined, 'pleb')).status, 200);
});

test.serial('a disabled app-level policy leaves the default level: nothing is allowed (empty lists, 403s); another site is untouched', async (t) => {
  const id = `resource.datatable_companies.default/${a.schema}_crm`;
  t.is((await on('DELETE', `${POLICIES}?id=${encodeURIComponent(id)}`)).status, 200);
  for (const who of ['pleb', 'adminA']) {
    const list = await on('GET', C, undefined, who);
    t.is(list.status, 200, 'a list the policies admit no row of is empty');
    t.is(list.body.total, 0);
    t.is((await on('GET', `${C}${companies[0].id}/`, undefined, who)).status, 404);
    t.is((await on('POST', C, { id: 9301, name: 'No', employees: 1 }, who)).status, 403);
  }
  const onB = await s.api('GET', C, { host: b.domain, token: tok.adminB });
  t.not(onB.status, 403, "B's own table is governed by B's policies only");
  await putPolicy(companiesPolicy());
  t.is((await on('GET', C, undefined, 'pleb')).status, 200);
});
