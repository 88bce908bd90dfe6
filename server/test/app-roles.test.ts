// App roles, their assignments and site users' attributes (docs/app-roles.md): CRUD by name,
// the parent by name and no cycles, reserved names, GET-edit-PUT, assignments by UUID or
// username (idempotent), `roles/mine` as the policies see it, who may (admins; every user reads
// roles; nobody grants themselves anything), and isolation between sites and between apps.
import test from 'ava';
import { READ_ONLY_MESSAGE } from '../../shared/common/read-only.ts';
import { PERMISSION_DENIED_DETAIL } from '../../shared/errors.ts';
import { principalFor } from '../../shared/policies/principal.ts';
import type { TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
const tok: Record<string, string> = {};
const uuids: Record<string, string> = {};

/** A call on site A as `who` (default: its administrator). */
const onA = (method: string, path: string, body?: unknown, who = 'adminA') => s.api(method, path, { host: a.domain, token: tok[who], body });
const onB = (method: string, path: string, body?: unknown) => s.api(method, path, { host: b.domain, token: tok.adminB, body });
const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);
const R = (app: string, rest = '') => `/api/apps/${app}/roles/${rest}`;

async function ok(res: Promise<{ status: number; text: string; body: any }>, status = 201): Promise<any> {
  const r = await res;
  if (r.status !== status) throw new Error(`${r.status} ${r.text}`);
  return r.body;
}

test.before(async () => {
  s = await startTestServer();
  ({ a, b } = await twoSitesWithUsers(s, tok));
  for (const app of ['Crm', 'Shop', 'Crud', 'Names', 'Hier', 'Put', 'Assign', 'Mine', 'Gone', 'Who']) await ok(onA('POST', '/api/apps/', { name: app }));
  await ok(onB('POST', '/api/apps/', { name: 'Crm' }));
  for (const username of ['alice', 'bob']) {
    uuids[username] = (await ok(onA('POST', '/api/users/', { username, email: `${username}@example.com`, password: 'Long-enough-pass-1' }))).data.uuid;
  }
  uuids.pleb = (await ok(onA('GET', '/api/users/pleb/'), 200)).uuid;
  uuids.boss = (await ok(onA('GET', '/api/users/boss/'), 200)).uuid;
});
test.after.always(async () => {
  await s?.close();
});

test('CRUD by name: create 201, get, list (paginated), update, rename, delete', async (t) => {
  const created = await onA('POST', R('crud'), { name: 'sales', description: 'The sales team' });
  t.is(created.status, 201, created.text);
  t.like(created.body, { status: 'success', message: 'Role created.', data: { name: 'sales', description: 'The sales team', parent_name: null } });
  t.deepEqual(Object.keys(created.body.data).sort(), ['created_at', 'description', 'name', 'parent_name', 'updated_at']);
  const child = await onA('POST', R('crud'), { name: 'sales_Manager-2', parent_name: 'sales' });
  t.is(child.status, 201, child.text);
  t.is(child.body.data.parent_name, 'sales');
  t.like((await onA('GET', R('crud', 'sales/'))).body, { name: 'sales', description: 'The sales team', parent_name: null });
  const dup = await onA('POST', R('crud'), { name: 'sales' });
  t.is(dup.status, 400);
  t.deepEqual(dup.body.errors, { name: ['A role with this name already exists in this app.'] });
  const orphan = await onA('POST', R('crud'), { name: 'orphan', parent_name: 'nobody' });
  t.is(orphan.status, 400);
  t.deepEqual(orphan.body.errors, { parent_name: ['No role "nobody" in this app.'] });
  t.is((await onA('GET', R('crud', 'orphan/'))).status, 404, 'nothing was created');

  const list = await onA('GET', R('crud', '?page_size=1'));
  t.is(list.status, 200);
  t.is(list.body.count, 2);
  t.deepEqual(list.body.results.map((r: any) => r.name), ['sales']);
  t.regex(list.body.next, /page=2/);
  t.deepEqual((await onA('GET', R('crud', '?search=manager'))).body.results.map((r: any) => r.name), ['sales_Manager-2']);
  t.deepEqual((await onA('GET', R('crud', '?ordering=-name'))).body.results.map((r: any) => r.name), ['sales_Manager-2', 'sales']);

  const patched = await onA('PATCH', R('crud', 'sales/'), { description: 'Sellers' });
  t.is(patched.status, 200, patched.text);
  t.like(patched.body, { name: 'sales', description: 'Sellers', parent_name: null });
  t.true(patched.body.updated_at >= created.body.data.updated_at);
  // A rename keeps the children pointing at it.
  const renamed = await onA('PUT', R('crud', 'sales/'), { name: 'sellers' });
  t.is(renamed.status, 200, renamed.text);
  t.is((await onA('GET', R('crud', 'sales/'))).status, 404);
  t.is((await onA('GET', R('crud', 'sales_Manager-2/'))).body.parent_name, 'sellers');
  const deleted = await onA('DELETE', R('crud', 'sellers/'));
  t.deepEqual(deleted.body, { status: 'success', message: 'Role "sellers" deleted.' });
  t.is((await onA('GET', R('crud', 'sellers/'))).status, 404);
  t.like((await onA('GET', R('crud', 'sales_Manager-2/'))).body, { parent_name: null }, 'the child stays, without a parent');
  const missing = await onA('DELETE', R('crud', 'sellers/'));
  t.is(missing.status, 404);
  t.like(missing.body, { status: 'error', code: 'NOT_FOUND', message: 'Role "sellers" not found in app "crud".', detail: 'Not found.' });
  t.is((await onA('GET', R('no-such-app'))).status, 404);
});

test('names: identifier-like, at most 100 characters; admin, user and mine are reserved (any case)', async (t) => {
  for (const name of ['1st', 'a b', 'é', '-x', 'x.y', 'x'.repeat(101), '']) {
    const res = await onA('POST', R('names'), { name });
    t.is(res.status, 400, name);
    t.truthy(res.body.errors.name, name);
  }
  t.is((await onA('POST', R('names'), { name: `Z${'x'.repeat(99)}` })).status, 201, '100 characters');
  for (const [name, why] of [['admin', /administrators/], ['user', /no other role/], ['Admin', /administrators/], ['USER', /no other role/], ['mine', /roles\/mine/]] as const) {
    const res = await onA('POST', R('names'), { name });
    t.is(res.status, 400, name);
    t.regex(res.body.errors.name[0], new RegExp(`^"${name.toLowerCase()}" is a reserved role name: `));
    t.regex(res.body.errors.name[0], why);
  }
  await ok(onA('POST', R('names'), { name: 'renameme' }));
  t.is((await onA('PATCH', R('names', 'renameme/'), { name: 'admin' })).status, 400, 'nor by renaming');
  t.is((await onA('GET', R('names', 'renameme/'))).status, 200);
});

test('the parent: by name in the same app; the role itself or a descendant refused (400), nothing changed', async (t) => {
  await ok(onA('POST', R('hier'), { name: 'top' }));
  await ok(onA('POST', R('hier'), { name: 'middle', parent_name: 'top' }));
  await ok(onA('POST', R('hier'), { name: 'bottom', parent_name: 'middle' }));
  await ok(onA('POST', R('shop'), { name: 'elsewhere' }));
  const self = await onA('PUT', R('hier', 'top/'), { parent_name: 'top' });
  t.is(self.status, 400);
  t.deepEqual(self.body.errors, { parent_name: ['A role cannot be its own parent.'] });
  for (const descendant of ['middle', 'bottom']) {
    const res = await onA('PATCH', R('hier', 'top/'), { parent_name: descendant });
    t.is(res.status, 400, descendant);
    t.deepEqual(res.body.errors, { parent_name: [`"${descendant}" inherits from "top": a role cannot have its own descendant as parent.`] });
  }
  const other = await onA('PATCH', R('hier', 'top/'), { parent_name: 'elsewhere' });
  t.deepEqual(other.body.errors, { parent_name: ['No role "elsewhere" in this app.'] }, 'a role of another app is no parent');
  t.is((await onA('GET', R('hier', 'top/'))).body.parent_name, null, 'nothing changed');
  // Moving a subtree is fine; null removes the parent.
  t.is((await onA('PATCH', R('hier', 'bottom/'), { parent_name: 'top' })).body.parent_name, 'top');
  t.is((await onA('PATCH', R('hier', 'middle/'), { parent_name: 'bottom' })).body.parent_name, 'bottom');
  t.is((await onA('PATCH', R('hier', 'middle/'), { parent_name: null })).body.parent_name, null);
});

test('GET, change a field, PUT or PATCH the whole body back', async (t) => {
  await ok(onA('POST', R('put'), { name: 'base' }));
  await ok(onA('POST', R('put'), { name: 'editable', parent_name: 'base', description: 'before' }));
  for (const method of ['PUT', 'PATCH']) {
    const got = (await onA('GET', R('put', 'editable/'))).body;
    const sent = await onA(method, R('put', 'editable/'), { ...got, description: `via ${method}` });
    t.is(sent.status, 200, sent.text);
    t.like(sent.body, { name: 'editable', parent_name: 'base', description: `via ${method}` });
    const after = (await onA('GET', R('put', 'editable/'))).body;
    t.is(after.description, `via ${method}`);
    // A stale updated_at is ignored; a changed created_at is refused; unknown fields too.
    t.is((await onA(method, R('put', 'editable/'), { ...after, updated_at: '2001-01-01T00:00:00Z' })).status, 200);
    const ro = await onA(method, R('put', 'editable/'), { ...after, created_at: '2001-01-01T00:00:00Z' });
    t.is(ro.status, 400);
    t.deepEqual(ro.body.errors, { created_at: [READ_ONLY_MESSAGE] });
    const unknown = await onA(method, R('put', 'editable/'), { ...after, bogus: 1 });
    t.deepEqual(unknown.body.errors, { bogus: ['Unknown field.'] });
    t.is((await onB(method, R('put', 'editable/'), after)).status, 404, 'another site');
    t.deepEqual((await onA('GET', R('put', 'editable/'))).body.created_at, got.created_at);
  }
});

test('assignments: by UUID or username, idempotent, unknown user 404, listed with the user, removed one by one', async (t) => {
  await ok(onA('POST', R('assign'), { name: 'editor' }));
  const first = await onA('POST', R('assign', 'editor/assignments/'), { user: uuids.alice });
  t.is(first.status, 201, first.text);
  t.like(first.body, { status: 'success', message: 'Role assigned.', data: { uuid: uuids.alice, username: 'alice', email: 'alice@example.com' } });
  t.deepEqual(Object.keys(first.body.data).sort(), ['assigned_at', 'email', 'username', 'uuid']);
  const again = await onA('POST', R('assign', 'editor/assignments/'), { user: 'ALICE' });
  t.is(again.status, 200, again.text);
  t.like(again.body, { status: 'success', message: 'The user already holds this role.', data: { uuid: uuids.alice, assigned_at: first.body.data.assigned_at } });
  t.is((await onA('POST', R('assign', 'editor/assignments/'), { user: 'bob' })).status, 201);
  for (const user of ['nobody', '00000000-0000-4000-8000-000000000000']) {
    const res = await onA('POST', R('assign', 'editor/assignments/'), { user });
    t.is(res.status, 404, user);
    t.like(res.body, { code: 'NOT_FOUND', message: `User "${user}" not found.` });
  }
  t.is((await onA('POST', R('assign', 'ghost/assignments/'), { user: 'bob' })).status, 404, 'unknown role');
  t.is((await onA('POST', R('assign', 'editor/assignments/'), {})).status, 400);
  const list = await onA('GET', R('assign', 'editor/assignments/'));
  t.is(list.status, 200);
  t.is(list.body.count, 2);
  t.deepEqual(list.body.results.map((x: any) => x.username), ['alice', 'bob']);
  t.deepEqual((await onA('GET', R('assign', 'editor/assignments/?search=bob'))).body.results.map((x: any) => x.username), ['bob']);
  const removed = await onA('DELETE', R('assign', `editor/assignments/${uuids.alice}/`));
  t.deepEqual(removed.body, { status: 'success', message: 'Role unassigned.' });
  const gone = await onA('DELETE', R('assign', `editor/assignments/${uuids.alice}/`));
  t.is(gone.status, 404);
  t.is(gone.body.message, `User "${uuids.alice}" does not hold role "editor" in app "assign".`);
  t.is((await onA('DELETE', R('assign', 'editor/assignments/bob/'))).status, 200, 'a username works too');
  t.is((await onA('GET', R('assign', 'editor/assignments/'))).body.count, 0);
});

test('deleting a role removes its assignments (all or nothing) and keeps its children', async (t) => {
  await ok(onA('POST', R('gone'), { name: 'doomed' }));
  await ok(onA('POST', R('gone'), { name: 'heir', parent_name: 'doomed' }));
  for (const user of ['alice', 'bob']) await ok(onA('POST', R('gone', 'doomed/assignments/'), { user }));
  await ok(onA('POST', R('gone', 'heir/assignments/'), { user: 'alice' }));
  const [{ id }] = await sql(`SELECT id FROM "${a.schema}".app_roles WHERE name = 'doomed'`);
  t.is((await onA('DELETE', R('gone', 'doomed/'))).status, 200);
  t.is(Number((await sql(`SELECT count(*) AS n FROM "${a.schema}".app_role_assignments WHERE role_id = ?`, [id]))[0].n), 0);
  t.like((await onA('GET', R('gone', 'heir/'))).body, { parent_name: null });
  t.is((await onA('GET', R('gone', 'heir/assignments/'))).body.count, 1, 'the child keeps its own');
});

test('roles/mine: what the policies see — inherited roles, admin for administrators, user by default', async (t) => {
  await ok(onA('POST', R('mine'), { name: 'staff' }));
  await ok(onA('POST', R('mine'), { name: 'lead', parent_name: 'staff' }));
  await ok(onA('POST', R('mine'), { name: 'head', parent_name: 'lead' }));
  await ok(onA('POST', R('shop'), { name: 'shopper' }));
  const mine = (who: string, app = 'mine') => onA('GET', R(app, 'mine/'), undefined, who);
  const before = await mine('pleb');
  t.is(before.status, 200, before.text);
  t.deepEqual(before.body, { data: ['user'] });
  await ok(onA('POST', R('mine', 'head/assignments/'), { user: 'pleb' }));
  await ok(onA('POST', R('shop', 'shopper/assignments/'), { user: 'pleb' }));
  t.deepEqual((await mine('pleb')).body, { data: ['head', 'lead', 'staff'] });
  t.deepEqual((await mine('pleb', 'shop')).body, { data: ['shopper'] }, 'another app\'s roles are not held here');
  t.deepEqual((await mine('pleb', 'names')).body, { data: ['user'] });
  t.deepEqual((await mine('adminA')).body, { data: ['admin'] });
  await ok(onA('POST', R('mine', 'staff/assignments/'), { user: 'boss' }));
  t.deepEqual((await mine('adminA')).body, { data: ['admin', 'staff'] });
  t.is((await mine('pleb', 'no-such-app')).status, 404);
  await ok(onA('DELETE', R('mine', `head/assignments/${uuids.pleb}/`)), 200);
  t.deepEqual((await mine('pleb')).body, { data: ['user'] });
});

test('who may: every site user reads roles; only administrators write them or see and change who holds them', async (t) => {
  await ok(onA('POST', R('who'), { name: 'vip' }));
  t.is((await onA('GET', R('who'), undefined, 'pleb')).status, 200);
  t.is((await onA('GET', R('who', 'vip/'), undefined, 'pleb')).body.name, 'vip');
  for (const [method, path, body] of [
    ['POST', R('who'), { name: 'mine2' }],
    ['PUT', R('who', 'vip/'), { description: 'x' }],
    ['PATCH', R('who', 'vip/'), { description: 'x' }],
    ['DELETE', R('who', 'vip/')],
    ['GET', R('who', 'vip/assignments/')],
    ['POST', R('who', 'vip/assignments/'), { user: 'pleb' }],
    ['POST', R('who', 'vip/assignments/'), { user: uuids.pleb }],
    ['DELETE', R('who', `vip/assignments/${uuids.pleb}/`)],
    // 403 before 404: a non-administrator learns nothing of what exists.
    ['PATCH', R('who', 'ghost/'), { description: 'x' }],
    ['POST', R('ghost-app', 'vip/assignments/'), { user: 'pleb' }],
  ] as [string, string, unknown?][]) {
    const res = await onA(method, path, body, 'pleb');
    t.is(res.status, 403, `${method} ${path}`);
    t.like(res.body, { status: 'error', code: 'PERMISSION_DENIED', message: PERMISSION_DENIED_DETAIL, detail: PERMISSION_DENIED_DETAIL });
  }
  t.deepEqual((await onA('GET', R('who', 'mine/'), undefined, 'pleb')).body, { data: ['user'] }, 'pleb did not assign itself');
  t.is((await onA('GET', R('who', 'vip/'))).body.description, '', 'nothing changed');
  // No token: 401; on the platform host the routes do not exist.
  t.is((await s.api('GET', R('who'), { host: a.domain })).status, 401);
  t.is((await s.api('GET', R('who'), { token: (await s.login()).access })).status, 404);
  t.is((await s.api('GET', R('who'), { host: a.domain, token: (await s.login()).access })).status, 401, 'a platform token is no site token');
});

test('attributes: admins set them (replacing the set), validated; users neither set their own nor lose them by sending them back', async (t) => {
  const attrs = { department: 'sales', level: 3, manager: true, regions: ['eu', 'us'], note: null, _x: 1.5 };
  const set = await onA('PUT', '/api/users/alice/', { attributes: attrs });
  t.is(set.status, 200, set.text);
  t.deepEqual(set.body.attributes, attrs);
  t.deepEqual((await onA('GET', '/api/users/alice/')).body.attributes, attrs);
  t.deepEqual((await onA('GET', '/api/users/bob/')).body.attributes, {}, 'none by default');
  const listed = (await onA('GET', '/api/users/?search=alice')).body.results[0];
  t.deepEqual(listed.attributes, attrs);
  // They are the principal's attributes, beside the platform's own.
  const principal = await principalFor(s.handle.db.orm.em.fork(), a.schema, { id: 0, slug: 'crm' }, { uuid: uuids.alice, is_superuser: false, is_staff: false });
  t.deepEqual(principal.attr, { ...attrs, tenant_id: a.schema, app_slug: 'crm' });

  const many = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, i]));
  for (const [bad, message] of [
    [{ tenant_id: 'x' }, '"tenant_id" is reserved: the platform sets it.'],
    [{ app_slug: 'x' }, '"app_slug" is reserved: the platform sets it.'],
    [{ '1x': 1 }, '"1x" is not a valid attribute name: a letter or _, then letters, digits or _ (at most 64 characters).'],
    [{ 'a-b': 1 }, '"a-b" is not a valid attribute name: a letter or _, then letters, digits or _ (at most 64 characters).'],
    [{ [`a${'b'.repeat(64)}`]: 1 }, `"a${'b'.repeat(64)}" is not a valid attribute name: a letter or _, then letters, digits or _ (at most 64 characters).`],
    [{ nested: { a: 1 } }, 'The value of "nested" must be a string, number, boolean, null, or an array of those.'],
    [{ deep: [[1]] }, 'The value of "deep" must be a string, number, boolean, null, or an array of those.'],
    [many, 'Ensure there are no more than 64 attributes.'],
  ] as [Record<string, unknown>, string][]) {
    const res = await onA('PUT', '/api/users/alice/', { attributes: bad });
    t.is(res.status, 400, JSON.stringify(bad).slice(0, 40));
    t.true(res.body.errors.attributes.includes(message), `${res.text.slice(0, 300)}`);
  }
  t.is((await onA('PUT', '/api/users/alice/', { attributes: ['a'] })).status, 400, 'an object');
  t.is((await onA('PUT', '/api/users/alice/', { attributes: Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`k${i}`, i])) })).status, 200, '64 is fine');
  t.is((await onA('PUT', '/api/users/alice/', { attributes: attrs })).status, 200);
  t.deepEqual((await onA('GET', '/api/users/alice/')).body.attributes, attrs, 'the refused bodies changed nothing');

  // A user cannot set their own, by either route; sent back unchanged they are ignored.
  await ok(onA('PUT', '/api/users/pleb/', { attributes: { clearance: 'low' } }), 200);
  const viaUsers = await onA('PUT', '/api/users/pleb/', { attributes: { clearance: 'top' } }, 'pleb');
  t.is(viaUsers.status, 403);
  t.is(viaUsers.body.message, PERMISSION_DENIED_DETAIL);
  const profile = (await onA('GET', '/api/profile/', undefined, 'pleb')).body;
  t.deepEqual(profile.attributes, { clearance: 'low' });
  const viaProfile = await onA('PUT', '/api/profile/', { ...profile, attributes: { clearance: 'top' } }, 'pleb');
  t.is(viaProfile.status, 403);
  t.is(viaProfile.body.code, 'PERMISSION_DENIED');
  const back = await onA('PUT', '/api/profile/', { ...profile, first_name: 'Plebby' }, 'pleb');
  t.is(back.status, 200, back.text);
  t.like(back.body, { first_name: 'Plebby', attributes: { clearance: 'low' } });
  // The admin's own GET-edit-PUT of a site user carries them back unchanged.
  const got = (await onA('GET', '/api/users/pleb/')).body;
  t.deepEqual((await onA('PUT', '/api/users/pleb/', { ...got, last_name: 'Back' })).body.attributes, { clearance: 'low' });
});

test('isolation: another site\'s administrator reaches nothing of A; app B\'s roles are invisible from app A', async (t) => {
  await ok(onA('POST', R('crm'), { name: 'a-only' }));
  await ok(onA('POST', R('crm', 'a-only/assignments/'), { user: 'pleb' }));
  await ok(onA('POST', R('shop'), { name: 'shop-only' }));
  // B has an app `crm` too: none of A's roles are in it.
  t.is((await onB('GET', R('crm', 'a-only/'))).status, 404);
  t.is((await onB('GET', R('crm'))).body.count, 0);
  t.is((await onB('GET', R('crm', 'a-only/assignments/'))).status, 404);
  t.is((await onB('POST', R('crm', 'a-only/assignments/'), { user: 'boss' })).status, 404);
  t.is((await onB('DELETE', R('crm', 'a-only/'))).status, 404);
  t.is((await onB('GET', R('shop'))).status, 404, 'no app shop on B');
  t.is((await s.api('GET', `/sites/${b.schema}${R('crm', 'a-only/')}`, { token: tok.adminB })).status, 404);
  // B's token on A, by host or path: refused.
  t.is((await s.api('GET', R('crm'), { host: a.domain, token: tok.adminB })).status, 401);
  t.is((await s.api('DELETE', `/sites/${a.schema}${R('crm', 'a-only/')}`, { token: tok.adminB })).status, 401);
  t.is((await onA('GET', R('crm', 'a-only/'))).status, 200, 'still there');
  // Between apps of one site.
  t.is((await onA('GET', R('crm', 'shop-only/'))).status, 404);
  t.false((await onA('GET', R('crm', '?page_size=100'))).body.results.some((r: any) => r.name === 'shop-only'));
  t.is((await onA('POST', R('crm', 'shop-only/assignments/'), { user: 'pleb' })).status, 404);
  t.is((await onA('POST', R('crm'), { name: 'x-child', parent_name: 'shop-only' })).status, 400);
  t.is((await onA('POST', R('shop'), { name: 'a-only' })).status, 201, 'one name, two apps: two roles');
});
