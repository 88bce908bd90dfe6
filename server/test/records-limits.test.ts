// Query safety of the records API: populate caps reverse and many-to-many relations at
// POPULATE_LIMIT records per parent (in SQL), and prototype keys (constructor, __proto__,
// toString, hasOwnProperty) in every query parameter are a clean 400, never a 500; fields
// cannot be named after them.
import test from 'ava';
import { POPULATE_LIMIT } from '../../shared/data/records/read.ts';
import type { TestSite } from '../../shared/testing/sites.ts';
import { createTables, seedCrm } from './crm.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
const tok: Record<string, string> = {};
const P = '/api/apps/crm/datatables/parents/data/';
const onA = (method: string, path: string, body?: unknown) => s.api(method, path, { host: a.domain, token: tok.adminA, body });

test.before(async () => {
  s = await startTestServer();
  ({ a } = await twoSitesWithUsers(s, tok));
  await seedCrm(s, [a]);
  const fk = (field: string, resource: string) => ({ fields: [field], reference: { resource, fields: ['id'] } });
  await createTables(onA, [
    ['main', 'parents', { fields: [{ name: 'id', type: 'integer' }, { name: 'name', type: 'string' }], primaryKey: 'id' }],
    ['main', 'tags', { fields: [{ name: 'id', type: 'integer' }, { name: 'label', type: 'string' }], primaryKey: 'id' }],
    ['main', 'children', { fields: [{ name: 'id', type: 'integer' }, { name: 'parent_id', type: 'integer' }], primaryKey: 'id', foreignKeys: [fk('parent_id', 'parents')] }],
    ['main', 'parent_tags', { fields: [{ name: 'id', type: 'integer' }, { name: 'parent_id', type: 'integer' }, { name: 'tag_id', type: 'integer' }], primaryKey: 'id', foreignKeys: [fk('parent_id', 'parents'), fk('tag_id', 'tags')] }],
  ]);
  const n = POPULATE_LIMIT + 50;
  const ids = Array.from({ length: n }, (_, i) => i + 1);
  await onA('POST', P, [{ id: 1, name: 'many' }, { id: 2, name: 'few' }]);
  await onA('POST', '/api/apps/crm/datatables/tags/data/', ids.map((id) => ({ id, label: `t${id}` })));
  await onA('POST', '/api/apps/crm/datatables/children/data/', [...ids.map((id) => ({ id, parent_id: 1 })), { id: n + 1, parent_id: 2 }]);
  await onA('POST', '/api/apps/crm/datatables/parent_tags/data/', [...ids.map((id) => ({ id, parent_id: 1, tag_id: id })), { id: n + 1, parent_id: 2, tag_id: 1 }]);
});
test.after.always(async () => {
  await s?.close();
});

test('populate=* caps reverse and many-to-many relations per parent (the first by key)', async (t) => {
  for (const path of [`${P}?populate=*&_sort=id`, `${P}1/?populate=children,tags`]) {
    const res = await onA('GET', path);
    t.is(res.status, 200, res.text);
    const many = Array.isArray(res.body.data) ? res.body.data[0] : res.body.data;
    t.is(many.children.length, POPULATE_LIMIT);
    t.deepEqual(many.children.slice(0, 3).map((c: { id: number }) => c.id), [1, 2, 3]);
    t.is(many.children.at(-1).id, POPULATE_LIMIT);
    t.is(many.tags.length, POPULATE_LIMIT);
    if (Array.isArray(res.body.data)) {
      t.deepEqual(res.body.data[1].children.map((c: { id: number }) => c.id), [POPULATE_LIMIT + 51]);
      t.deepEqual(res.body.data[1].tags.map((c: { id: number }) => c.id), [1]);
    }
  }
});

test('prototype keys in every query parameter are a 400 naming the parameter, never a 500', async (t) => {
  const keys = ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf'];
  for (const k of keys) {
    for (const [query, field] of [
      [`_sort=${k}`, '_sort'], [`_sort=-${k}`, '_sort'], [`${k}=x`, k], [`${k}__eq=x`, `${k}__eq`], [`name__${k}=x`, `name__${k}`],
      [`populate=${k}`, 'populate'], [`_aggregate=count&_group_by=${k}`, '_group_by'], [`_aggregate=sum(${k})`, '_aggregate'],
      [`_aggregate=count&_sort=${k}`, '_sort'], [`${k}.name=x`, `${k}.name`], [`children.${k}=1`, `children.${k}`], [`_sort=children.${k}`, '_sort'],
    ]) {
      const res = await onA('GET', `${P}?${query}`);
      t.is(res.status, 400, `${query}: ${res.text}`);
      t.truthy(res.body.errors?.[field!], `${query}: ${res.text}`);
    }
    const del = await onA('DELETE', `${P}?filter=${encodeURIComponent(JSON.stringify({ [k]: 1 }))}`);
    t.is(del.status, 400, `filter ${k}: ${del.text}`);
    const up = await onA('POST', `${P}upsert/?unique_fields=${k}`, { id: 9, name: 'x' });
    t.is(up.status, 400, `unique_fields ${k}: ${up.text}`);
    const body = await onA('POST', P, JSON.parse(`{"id": 10, "${k}": 1}`));
    t.is(body.status, 400, `body ${k}: ${body.text}`);
    const csv = await s.api('POST', `${P}import/?mapping=${encodeURIComponent(JSON.stringify({ id: k }))}`, { host: a.domain, token: tok.adminA, raw: `id,${k}\n11,x\n`, headers: { 'Content-Type': 'text/csv' } });
    t.is(csv.status, 400, `csv ${k}: ${csv.text}`);
  }
});

test('fields cannot be named after JavaScript object members', async (t) => {
  for (const name of ['__proto__', 'constructor', 'hasownproperty', 'valueof', 'tostring']) {
    const res = await onA('POST', '/api/apps/crm/datasources/main/datatables/', { name: 'proto', json_schema: { fields: [{ name, type: 'string' }] } });
    const reserved = name === '__proto__' || name === 'constructor';
    t.is(res.status, reserved ? 400 : 201, `${name}: ${res.text}`);
    if (reserved) t.regex(res.body.errors.json_schema[0], /reserved/);
    else t.is((await onA('DELETE', '/api/apps/crm/datatables/proto/')).status, 200);
  }
});
