// Authorization policies of an app (spec Part 2 §4): create and put in Cerbos and portable form,
// the service's scope, prefixes, ancestors and metadata; bad policies refused with the compiler's
// messages and nothing stored; POST's strictness; soft delete; RE2 filters; derived roles and
// inspect; check, plan and AuthZEN with principal resolution and who may name whom; isolation
// between apps of a site and between sites; the system policies of tables.
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { within1s as within } from './processes.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
let adminUuid: string;
let plebUuid: string;
const tok: Record<string, string> = {};
const ids: Record<string, number> = {};

const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);
const onA = (method: string, p: string, body?: unknown, who = 'adminA') => s.api(method, p, { host: a.domain, token: tok[who], body });
const pol = (app = 'shop', q = '') => `/api/apps/${app}/policies/${q}`;
const scopeOf = (app: string, site = a) => `${site.schema}_${app}`;
const rid = (kind: string, app = 'shop', version = 'default') => `resource.${kind.replace(/:/g, '_')}.${version}/${scopeOf(app)}`;
const resource = (kind: string, rules: unknown[], extra: Record<string, unknown> = {}) => ({ resourcePolicy: { resource: kind, version: 'default', rules, ...extra } });
const allow = (actions: string[], roles: string[], extra: Record<string, unknown> = {}) => ({ actions, effect: 'EFFECT_ALLOW', roles, ...extra });
const row = async (id: string, site = a): Promise<any> => (await sql(`SELECT * FROM "${site.schema}".policies WHERE id = ?`, [id]))[0];
const count = async (site = a) => Number((await sql(`SELECT count(*) AS n FROM "${site.schema}".policies`))[0].n);

test.before(async () => {
  s = await startTestServer();
  ({ a, b, adminUuid } = await twoSitesWithUsers(s, tok));
  tok.platform = (await s.login()).access;
  for (const name of ['Shop', 'Blog']) if ((await onA('POST', '/api/apps/', { name })).status !== 201) throw new Error('app');
  if ((await s.api('POST', '/api/apps/', { host: b.domain, token: tok.adminB, body: { name: 'Shop' } })).status !== 201) throw new Error('app B');
  for (const r of await sql(`SELECT id, slug FROM "${a.schema}".apps`)) ids[r.slug] = r.id;
  plebUuid = (await sql(`UPDATE "${a.schema}".users SET email = 'pleb@a.example', attributes = '{"dept": "sales"}' WHERE username = 'pleb' RETURNING uuid`))[0].uuid;
  // pleb is a `member` of shop (an app role), nothing in blog.
  const [role] = await sql(`INSERT INTO "${a.schema}".app_roles (app_id, name) VALUES (?, 'member') RETURNING id`, [ids.shop]);
  await sql(`INSERT INTO "${a.schema}".app_role_assignments (role_id, user_uuid) VALUES (?, ?)`, [role.id, plebUuid]);
});
test.after.always(async () => {
  await s?.close();
});

test('POST stores a Cerbos-form policy at the app\'s scope, with metadata and the unscoped ancestor; PUT replaces it', async (t) => {
  const res = await onA('POST', pol(), resource('ticket:support', [allow(['read'], ['member'])]));
  t.is(res.status, 201, res.text);
  t.deepEqual(res.body, { status: 'success', message: `Policy "${rid('ticket:support')}" created.` });
  const stored = await row(rid('ticket:support'));
  t.like(stored, { app_id: ids.shop, kind: 'resource', name: 'ticket:support', scope: scopeOf('shop'), version: 'default', disabled: false, created_by: adminUuid });
  const ann = stored.document.metadata.annotations;
  t.is(ann.created_by, adminUuid);
  t.is(ann.modified_by, adminUuid);
  t.regex(ann.created_date, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  const ancestor = await row('resource.ticket_support.default');
  t.like(ancestor, { app_id: null, scope: '', is_system: true });
  t.deepEqual(ancestor.document.resourcePolicy.rules, []);
  const got = await onA('GET', pol('shop', `?id=${encodeURIComponent(rid('ticket:support'))}`));
  t.is(got.status, 200);
  t.like(got.body, { status: 'success', total: 1 });
  t.like(got.body.data[0], { resourcePolicy: { resource: 'ticket:support', version: 'default', scope: scopeOf('shop') }, metadata: { storeIdentifier: rid('ticket:support') } });
  // PUT: the same id replaced; created_* kept, modified_* renewed; same message form.
  await new Promise((r) => setTimeout(r, 5));
  const put = await onA('PUT', pol(), resource('ticket:support', [allow(['read', 'update'], ['member'])]));
  t.is(put.status, 200, put.text);
  t.is(put.body.message, `Policy "${rid('ticket:support')}" updated.`);
  const after = (await row(rid('ticket:support'))).document;
  t.is(after.metadata.annotations.created_date, ann.created_date);
  t.true(after.metadata.annotations.modified_date > ann.modified_date);
  t.deepEqual(after.resourcePolicy.rules[0].actions, ['read', 'update']);
  // GET, edit, PUT: the document as GET returns it goes back (reserved values unchanged, storeIdentifier dropped).
  const doc = (await onA('GET', pol('shop', `?id=${encodeURIComponent(rid('ticket:support'))}`))).body.data[0];
  doc.resourcePolicy.rules[0].actions = ['read'];
  t.is((await onA('PUT', pol(), doc)).status, 200);
  t.deepEqual((await row(rid('ticket:support'))).document.resourcePolicy.rules[0].actions, ['read']);
  t.false('storeIdentifier' in (await row(rid('ticket:support'))).document.metadata);
});

test('the portable form: derived-role sets prefixed, imports unprefixed, metadata as annotations', async (t) => {
  const set = { policy_type: 'derived_role', name: 'owners', definitions: [{ name: 'owner', parentRoles: ['member'], condition: { match: { expr: 'R.attr.owner == P.id' } } }] };
  const created = await onA('POST', pol(), set);
  t.is(created.status, 201, created.text);
  t.is(created.body.message, `Policy "derived_roles.${a.schema}_shop_owners" created.`);
  const portable = {
    policy_type: 'resource', entity_type: 'invoice', name: 'main', import_derived_roles: ['owners'],
    rules: [{ actions: ['update'], effect: 'EFFECT_ALLOW', derived_roles: ['owner'] }, { actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['member'] }],
    metadata: { description: 'Invoices', tags: ['billing', 'core'], team: 'finance' },
  };
  const res = await onA('POST', pol(), portable);
  t.is(res.status, 201, res.text);
  const doc = (await row(rid('invoice:main'))).document;
  t.deepEqual(doc.resourcePolicy.importDerivedRoles, [`${a.schema}_shop_owners`]);
  t.deepEqual(doc.resourcePolicy.rules[0], { actions: ['update'], effect: 'EFFECT_ALLOW', derivedRoles: ['owner'] });
  t.is(doc.description, 'Invoices');
  t.like(doc.metadata.annotations, { tags: '["billing","core"]', team: 'finance', created_by: adminUuid });
  // derived-roles/: unprefixed names match name_regexp.
  const sets = await onA('GET', pol('shop', 'derived-roles/?name_regexp=^owners$'));
  t.is(sets.status, 200);
  t.like(sets.body, { status: 'success', message: 'Derived roles retrieved.', total: 1 });
  t.is(sets.body.data[0].derivedRoles.name, `${a.schema}_shop_owners`);
  t.is((await onA('GET', pol('shop', 'derived-roles/?name_regexp=^nothing$'))).body.total, 0);
});

test.serial('bad policies are refused with the field at fault, and nothing is stored', async (t) => {
  const before = await count();
  const expectBad = async (body: unknown, field: string | RegExp, method = 'POST') => {
    const res = await onA(method, pol(), body);
    t.is(res.status, 400, res.text);
    t.is(res.body.code, 'VALIDATION_ERROR');
    const fields = Object.keys(res.body.errors ?? {});
    t.true(typeof field === 'string' ? fields.includes(field) : fields.some((f) => field.test(f)), `${JSON.stringify(res.body.errors)} should name ${field}`);
    return res;
  };
  const other = `${b.schema}_shop`;
  const scoped = await expectBad(resource('bad:scope', [allow(['read'], ['member'])], { scope: other }), 'resourcePolicy.scope');
  t.is(scoped.body.errors['resourcePolicy.scope'][0], `Policies of this app have the scope "${scopeOf('shop')}".`);
  await expectBad({ policy_type: 'resource', entity_type: 'bad', name: 'scope', scope: scopeOf('blog'), rules: [] }, 'scope');
  await expectBad(resource('bad:scope', [allow(['read'], ['member'])], { scope: '' }), 'resourcePolicy.scope');
  await expectBad({ resourcePolicy: { resource: 'x:y', version: 'default', rules: [] }, derivedRoles: { name: 'z', definitions: [] } }, 'policy');
  await expectBad({ exportVariables: { name: 'v', definitions: {} } }, 'exportVariables');
  await expectBad({ policy_type: 'role', name: 'r', import_derived_roles: ['x'] }, 'import_derived_roles', 'PUT');
  await expectBad({ policy_type: 'resourc', name: 'x' }, 'policy_type');
  // The compiler's findings: a condition that does not parse, an unknown field, an unknown import.
  await expectBad(resource('bad:cel', [allow(['read'], ['member'], { condition: { match: { expr: 'R.attr.owner == (' } } })]), /condition|expr|bad_cel/);
  await expectBad(resource('bad:field', [allow(['read'], ['member'], { rolez: ['x'] })]), /rolez|bad_field/);
  await expectBad(resource('bad:import', [allow(['read'], ['member'])], { importDerivedRoles: ['nowhere'] }), /import|bad_import/);
  // Several at once: all or nothing (the first is fine, the second does not compile).
  const many = await expectBad({ policies: [resource('good:one', [allow(['read'], ['member'])]), resource('bad:two', [allow(['read'], ['member'], { condition: { match: { expr: '(' } } })])] }, /bad_two|policies\.1/);
  t.regex(many.body.message, /does not compile/);
  await expectBad({ policies: [resource('dup:one', []), resource('dup:one', [])] }, 'policies.1.policy');
  t.is(await count(), before, 'nothing stored');
  t.is(await row(rid('good:one')), undefined);
});

test('reserved metadata is refused from callers (Cerbos and portable forms)', async (t) => {
  for (const key of ['created_by', 'created_date', 'modified_by', 'modified_date']) {
    const res = await onA('POST', pol(), { ...resource('meta:x', []), metadata: { annotations: { [key]: 'me' } } });
    t.is(res.status, 400);
    t.deepEqual(res.body.errors, { [`metadata.annotations.${key}`]: ['Reserved metadata, set by the service: it cannot be given.'] });
  }
  const portable = await onA('POST', pol(), { policy_type: 'resource', entity_type: 'meta', name: 'x', rules: [], metadata: { created_by: 'me' } });
  t.deepEqual(portable.body.errors, { 'metadata.created_by': ['Reserved metadata, set by the service: it cannot be given.'] });
  t.is(await row(rid('meta:x')), undefined);
  // Once stored, the stored values may be sent back, but not changed.
  t.is((await onA('POST', pol(), resource('meta:x', []))).status, 201);
  const stored = (await row(rid('meta:x'))).document;
  t.is((await onA('PUT', pol(), { ...resource('meta:x', []), metadata: stored.metadata })).status, 200);
  const changed = await onA('PUT', pol(), { ...resource('meta:x', []), metadata: { annotations: { ...stored.metadata.annotations, created_by: 'someone-else' } } });
  t.is(changed.status, 400);
  t.truthy(changed.body.errors['metadata.annotations.created_by']);
});

test('POST refuses role and principal policies and the system entity types; PUT accepts them', async (t) => {
  const role = { rolePolicy: { role: 'editor', parentRoles: ['member'], rules: [{ resource: 'doc:*', allowActions: ['read'] }] } };
  const refused = await onA('POST', pol(), role);
  t.is(refused.status, 400);
  t.deepEqual(refused.body.errors, { rolePolicy: ['Role policies cannot be created with POST: use PUT.'] });
  t.truthy((await onA('POST', pol(), { policy_type: 'role', name: 'editor', rules: [] })).body.errors.policy_type);
  t.truthy((await onA('POST', pol(), { principalPolicy: { principal: 'u1', version: 'default', rules: [] } })).body.errors.principalPolicy);
  for (const type of ['datatable', 'function', 'storage', 'query']) {
    const res = await onA('POST', pol(), resource(`${type}:orders`, []));
    t.is(res.status, 400);
    t.regex(res.body.errors['resourcePolicy.resource'][0], /system entity types/);
    t.truthy((await onA('POST', pol(), { policy_type: 'resource', entity_type: type, name: 'orders', rules: [] })).body.errors.entity_type);
  }
  t.is(await row(`role.editor/${scopeOf('shop')}`), undefined);
  // PUT: relaxed.
  const put = await onA('PUT', pol(), role);
  t.is(put.status, 200, put.text);
  t.is(put.body.message, `Policy "role.editor/${scopeOf('shop')}" created.`);
  t.deepEqual((await row('role.editor')).document.rolePolicy.rules, [{ resource: '*', allowActions: ['*'] }], 'unscoped role ancestor allows everything');
  const table = await onA('PUT', pol(), resource('datatable:orders', [allow(['read'], ['member'])]));
  t.is(table.status, 200, table.text);
  t.deepEqual((await row('resource.datatable_orders.default')).document.resourcePolicy.rules, [{ name: 'system-deny-all', actions: ['*'], effect: 'EFFECT_DENY', roles: ['*'] }]);
  t.is((await onA('PUT', pol(), { principalPolicy: { principal: 'u1', version: 'default', rules: [] } })).status, 200);
  t.is((await onA('PUT', pol(), { policy_type: 'role', name: 'viewer', rules: [{ resource: 'doc:*', allow_actions: ['read'] }] })).status, 200);
  t.deepEqual((await row(`role.viewer/${scopeOf('shop')}`)).document.rolePolicy.rules, [{ resource: 'doc:*', allowActions: ['read'] }]);
});

test('DELETE is a soft delete: kept, listed with include_disabled; the ancestor goes when nothing needs it', async (t) => {
  const id = rid('gone:soon');
  t.is((await onA('POST', pol(), resource('gone:soon', [allow(['read'], ['member'])]))).status, 201);
  t.truthy(await row('resource.gone_soon.default'));
  const del = await onA('DELETE', pol('shop', `?id=${encodeURIComponent(id)}`));
  t.is(del.status, 200, del.text);
  t.deepEqual(del.body, { status: 'success', message: `Policy "${id}" deleted.` });
  t.like(await row(id), { disabled: true });
  t.is(await row('resource.gone_soon.default'), undefined, 'no enabled scoped policy needs the ancestor');
  const listed = (q: string) => onA('GET', pol('shop', `?name_regexp=^gone:${q}`));
  t.is((await listed('')).body.total, 0);
  const all = await listed('&include_disabled=true');
  t.is(all.body.total, 1);
  t.true(all.body.data[0].disabled);
  t.true((await onA('GET', pol('shop', `?id=${encodeURIComponent(id)}`))).body.data[0].disabled);
  t.is((await onA('DELETE', pol('shop', '?id=resource.nothing.vdefault'))).status, 404);
  // PUT again enables it (and the ancestor is back).
  t.is((await onA('PUT', pol(), resource('gone:soon', [allow(['read'], ['member'])]))).body.message, `Policy "${id}" updated.`);
  t.like(await row(id), { disabled: false });
  t.truthy(await row('resource.gone_soon.default'));
  // A derived-role set still imported cannot go: the rest would not compile; nothing changes.
  await onA('POST', pol(), { policy_type: 'derived_role', name: 'keepers', definitions: [{ name: 'keeper', parentRoles: ['member'] }] });
  await onA('POST', pol(), { policy_type: 'resource', entity_type: 'kept', name: 'x', import_derived_roles: ['keepers'], rules: [{ actions: ['read'], effect: 'EFFECT_ALLOW', derived_roles: ['keeper'] }] });
  const setId = `derived_roles.${a.schema}_shop_keepers`;
  const blocked = await onA('DELETE', pol('shop', `?id=${setId}`));
  t.is(blocked.status, 400, blocked.text);
  t.like(await row(setId), { disabled: false });
});

test('ids have the spec\'s form: resource.{entity_type}_{name}.{version}/{scope}, role.{name}/{scope} (no version), principal.{name}.{version}/{scope}; unscoped ancestors without "/"', async (t) => {
  const scope = scopeOf('shop');
  const put = await onA('PUT', pol(), {
    policies: [
      resource('ids:doc', [allow(['read'], ['member'])]),
      resource('ids:doc', [allow(['read'], ['member'])], { version: 'v2' }),
      resource('ids:doc', [allow(['read'], ['member'])], { version: '2' }),
      { rolePolicy: { role: 'ids_role', parentRoles: ['member'], rules: [{ resource: 'ids:*', allowActions: ['read'] }] } },
      { principalPolicy: { principal: 'ids_user', version: 'default', rules: [] } },
    ],
  });
  t.is(put.status, 200, put.text);
  const ids = [`resource.ids_doc.default/${scope}`, `resource.ids_doc.v2/${scope}`, `resource.ids_doc.2/${scope}`, `role.ids_role/${scope}`, `principal.ids_user.default/${scope}`];
  t.is(put.body.message, `5 policies saved: ${ids.map((id) => `"${id}"`).join(', ')}.`);
  const listed = await onA('GET', pol('shop', '?name_regexp=ids'));
  t.deepEqual(listed.body.data.map((d: any) => d.metadata.storeIdentifier).sort(), [...ids].sort());
  for (const id of ['resource.ids_doc.default', 'resource.ids_doc.v2', 'resource.ids_doc.2', 'role.ids_role', 'principal.ids_user.default']) t.like(await row(id), { app_id: null }, id);
  // A role policy's id carries no version, so its version is "default": one id, one policy.
  const versioned = await onA('PUT', pol(), { rolePolicy: { role: 'ids_role', version: 'v2', rules: [] } });
  t.is(versioned.status, 400);
  t.deepEqual(versioned.body.errors, { 'rolePolicy.version': ['A role policy has the version "default" (its id role.{name}/{scope} carries none); got "v2".'] });
  t.truthy((await onA('PUT', pol(), { policy_type: 'role', name: 'ids_role', version: 'v2', rules: [] })).body.errors.version);
  t.like(await row(`role.ids_role/${scope}`), { version: 'default' });
});

test('an id of the older form (`v` before the version, a role\'s version) still reads, inspects and deletes its policy; the id as it is comes first', async (t) => {
  const scope = scopeOf('shop');
  t.is((await onA('PUT', pol(), {
    policies: [resource('old:doc', [allow(['read'], ['member'])]), resource('old:doc', [], { version: 'v2' }), resource('old:doc', [], { version: '2' }), { rolePolicy: { role: 'old_role', rules: [] } }],
  })).status, 200);
  const get = (id: string) => onA('GET', pol('shop', `?id=${encodeURIComponent(id)}`));
  const found = async (id: string) => (await get(id)).body.data?.map((d: any) => d.metadata.storeIdentifier);
  t.deepEqual(await found(`resource.old_doc.vdefault/${scope}`), [`resource.old_doc.default/${scope}`]);
  t.deepEqual(await found(`role.old_role.vdefault/${scope}`), [`role.old_role/${scope}`]);
  t.deepEqual(await found(`resource.old_doc.vv2/${scope}`), [`resource.old_doc.v2/${scope}`]);
  // `resource.old_doc.v2/…` is the id of version "v2" and the older form of version "2"'s: the id as it is wins.
  t.deepEqual(await found(`resource.old_doc.v2/${scope}`), [`resource.old_doc.v2/${scope}`]);
  t.deepEqual(await found(`resource.old_doc.2/${scope}`), [`resource.old_doc.2/${scope}`]);
  t.is((await get(`role.old_role.vv2/${scope}`)).status, 404);
  const inspected = await onA('GET', pol('shop', `inspect/?policy_id=${encodeURIComponent(`resource.old_doc.vdefault/${scope}`)}`));
  t.deepEqual(Object.keys(inspected.body.data.results), [`resource.old_doc.default/${scope}`]);
  const del = await onA('DELETE', pol('shop', `?id=${encodeURIComponent(`role.old_role.vdefault/${scope}`)}&id=${encodeURIComponent(`resource.old_doc.vdefault/${scope}`)}`));
  t.is(del.status, 200, del.text);
  t.is(del.body.message, '2 policies deleted.');
  t.like(await row(`role.old_role/${scope}`), { disabled: true });
  t.like(await row(`resource.old_doc.default/${scope}`), { disabled: true });
  t.like(await row(`resource.old_doc.v2/${scope}`), { disabled: false });
  const one = await onA('DELETE', pol('shop', `?id=${encodeURIComponent(`resource.old_doc.vv2/${scope}`)}`));
  t.is(one.body.message, `Policy "resource.old_doc.v2/${scope}" deleted.`);
});

test('no two policies share an id: kinds that differ only by ":" and "_" are refused (in the app, or at the unscoped level another app holds), nothing changes', async (t) => {
  t.is((await onA('POST', pol(), resource('clash_a:b', [allow(['read'], ['member'])]))).status, 201);
  const id = rid('clash_a:b');
  t.is(id, rid('clash:a_b'));
  const before = await row(id);
  const ancestor = await row('resource.clash_a_b.default');
  const clash = await onA('POST', pol(), resource('clash:a_b', []));
  t.is(clash.status, 400);
  t.deepEqual(clash.body.errors, { policy: [`The policy id "${id}" is that of another policy, the resource policy "clash_a:b" (version "default"): ids write a kind's ":" as "_"; choose another name.`] });
  t.deepEqual(await row(id), before);
  // Blog's own id is free, but the unscoped ancestor both kinds need is shop's.
  const other = await onA('POST', pol('blog'), resource('clash:a_b', []));
  t.is(other.status, 400);
  t.deepEqual(other.body.errors, { policy: ['The policy id "resource.clash_a_b.default" is that of another policy, the unscoped resource policy "clash_a:b" (version "default") of another app: ids write a kind\'s ":" as "_"; choose another name.'] });
  t.is(await row(rid('clash:a_b', 'blog')), undefined);
  t.deepEqual(await row('resource.clash_a_b.default'), ancestor);
});

test('list filters are RE2 regular expressions: name, scope, version; a bad one is a 400; none backtracks', async (t) => {
  await onA('POST', pol(), { policies: [resource('filter:alpha', []), { resourcePolicy: { resource: 'filter:alpha', version: 'v2', rules: [] } }, resource('filter:beta', [])] });
  const names = async (q: string) => (await onA('GET', pol('shop', q))).body.data.map((d: any) => `${d.resourcePolicy?.resource}@${d.resourcePolicy?.version}`).sort();
  t.deepEqual(await names('?name_regexp=^filter:'), ['filter:alpha@default', 'filter:alpha@v2', 'filter:beta@default']);
  t.deepEqual(await names('?name_regexp=alpha&version_regexp=^v2$'), ['filter:alpha@v2']);
  t.deepEqual(await names(`?name_regexp=^filter:beta&scope_regexp=^${scopeOf('shop')}$`), ['filter:beta@default']);
  t.deepEqual(await names('?name_regexp=^filter:&scope_regexp=^$'), []);
  for (const bad of ['(', '[a-', '(?=x)', 'a{2,1}']) {
    const res = await onA('GET', pol('shop', `?name_regexp=${encodeURIComponent(bad)}`));
    t.is(res.status, 400, bad);
    t.regex(res.body.errors.name_regexp[0], /^Invalid regular expression/);
  }
  t.is((await onA('GET', pol('shop', '?scope_regexp=%28'))).body.errors.scope_regexp.length, 1);
  // A pattern that backtracks exponentially in a backtracking engine, on a name made for it.
  const evil = 'a'.repeat(60);
  t.is((await onA('POST', pol(), resource(`${evil}:x`, []))).status, 201);
  const started = Date.now();
  const res = await onA('GET', pol('shop', `?name_regexp=${encodeURIComponent('^(a+)+$')}`));
  t.is(res.status, 200);
  t.true(Date.now() - started < 2000, 'answered quickly');
  t.is((await onA('GET', pol('shop', `?name_regexp=${encodeURIComponent('^(a|aa)+b$')}`))).body.total, 0);
});

test('inspect reports the app\'s compiled policies by id', async (t) => {
  await onA('POST', pol(), { policy_type: 'derived_role', name: 'inspected', definitions: [{ name: 'author', parentRoles: ['member'], condition: { match: { expr: 'R.attr.author == P.id' } } }] });
  const body = resource('report:weekly', [allow(['read', 'list:*'], ['member']), { actions: ['edit'], effect: 'EFFECT_ALLOW', derivedRoles: ['author'], condition: { match: { expr: 'V.fresh' } } }], {
    importDerivedRoles: ['inspected'],
    variables: { local: { fresh: 'R.attr.age < 7.0' } },
    constants: { local: { limit: 3 } },
  });
  t.is((await onA('POST', pol(), body)).status, 201);
  const res = await onA('GET', pol('shop', `inspect/?policy_id=${encodeURIComponent(rid('report:weekly'))}`));
  t.is(res.status, 200, res.text);
  t.like(res.body, { success: true, message: 'Policies inspected.', status_code: 200 });
  t.deepEqual(Object.keys(res.body.data.results), [rid('report:weekly')]);
  const r = res.body.data.results[rid('report:weekly')];
  t.is(r.policyId, rid('report:weekly'));
  t.deepEqual([...r.actions].sort(), ['edit', 'list:*', 'read']);
  t.like(r.derivedRoles?.[0], { name: 'author', source: `derived_roles.${a.schema}_shop_inspected` });
  t.like(r.variables?.find((v: any) => v.name === 'fresh'), { value: 'R.attr.age < 7.0' });
  t.like(r.constants?.find((c: any) => c.name === 'limit'), { value: 3 });
  t.true(r.attributes?.some((x: any) => x.name === 'age'));
  const named = await onA('GET', pol('shop', 'inspect/?name_regexp=^inspected$'));
  t.deepEqual(Object.keys(named.body.data.results), [`derived_roles.${a.schema}_shop_inspected`]);
  t.is((await onA('GET', pol('shop', 'inspect/?name_regexp=%28'))).status, 400);
});

// ---- Decisions ----

const DOC_POLICY = {
  policies: [
    { policy_type: 'derived_role', name: 'doc-owners', definitions: [{ name: 'owner', parentRoles: ['member'], condition: { match: { expr: 'R.attr.owner == P.id' } } }] },
    {
      policy_type: 'resource', entity_type: 'doc', name: 'report', import_derived_roles: ['doc-owners'],
      rules: [
        { actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['member'] },
        { actions: ['update'], effect: 'EFFECT_ALLOW', derived_roles: ['owner'] },
        { actions: ['delete'], effect: 'EFFECT_ALLOW', roles: ['admin'] },
      ],
    },
  ],
};
const checkBody = (attr: Record<string, unknown> = {}, principal?: unknown) => ({
  ...(principal ? { principal } : {}),
  resources: [{ resource: { kind: 'doc:report', id: 'r1', attr }, actions: ['read', 'update', 'delete'] }],
});
const check = (app: string, body: unknown, who = 'adminA', q = '') => onA('POST', `/api/apps/${app}/check/resources${q}`, body, who);
const plan = (app: string, body: unknown, who = 'adminA', q = '') => onA('POST', `/api/apps/${app}/plan/resources${q}`, body, who);

test.serial('check: the caller by default; administrators may name anyone (body, username, email); others only themselves', async (t) => {
  t.is((await onA('POST', pol(), DOC_POLICY)).status, 201);
  // The administrator as themselves: role `admin`.
  const own = await check('shop', checkBody());
  t.is(own.status, 200, own.text);
  t.truthy(own.body.requestId);
  t.deepEqual(own.body.results, [{
    resource: { id: 'r1', kind: 'doc:report', policyVersion: 'default', scope: scopeOf('shop') },
    actions: { read: 'EFFECT_DENY', update: 'EFFECT_DENY', delete: 'EFFECT_ALLOW' },
    meta: { effectiveDerivedRoles: [] },
  }]);
  // pleb (member of shop) for themselves; owner of the document → the derived role.
  const mine = await check('shop', checkBody({ owner: plebUuid }), 'pleb');
  t.deepEqual(mine.body.results[0].actions, { read: 'EFFECT_ALLOW', update: 'EFFECT_ALLOW', delete: 'EFFECT_DENY' });
  t.deepEqual(mine.body.results[0].meta.effectiveDerivedRoles, ['owner']);
  // pleb naming itself in the body with forged roles: the stored principal is used.
  const forged = await check('shop', checkBody({}, { id: plebUuid, roles: ['admin'] }), 'pleb');
  t.is(forged.status, 200);
  t.is(forged.body.results[0].actions.delete, 'EFFECT_DENY');
  // Anyone else: 403 with the standard text.
  for (const [body, q] of [[checkBody({}, { id: adminUuid, roles: ['admin'] }), ''], [checkBody(), '?username=boss'], [checkBody(), '?email=nobody@a.example']] as const) {
    const res = await check('shop', body, 'pleb', q);
    t.is(res.status, 403, q);
    t.like(res.body, { code: 'PERMISSION_DENIED', message: 'You do not have permission to perform this action.' });
  }
  t.is((await check('shop', checkBody(), 'pleb', '?username=PLEB')).status, 200, 'their own username');
  // Administrators: a principal in the body, as given.
  const given = await check('shop', checkBody({ owner: 'x1' }, { id: 'x1', roles: ['member'] }));
  t.deepEqual(given.body.results[0].actions, { read: 'EFFECT_ALLOW', update: 'EFFECT_ALLOW', delete: 'EFFECT_DENY' });
  // By username and e-mail: the stored principal of that user.
  for (const q of ['?username=pleb', '?email=PLEB@a.example']) {
    const res = await check('shop', checkBody({ owner: plebUuid }), 'adminA', q);
    t.is(res.status, 200, res.text);
    t.deepEqual(res.body.results[0].actions, { read: 'EFFECT_ALLOW', update: 'EFFECT_ALLOW', delete: 'EFFECT_DENY' }, q);
  }
  const missing = await check('shop', checkBody(), 'adminA', '?username=nobody');
  t.is(missing.status, 404);
  // Scope: the app's, or absent; another is refused.
  const scoped = await check('shop', { resources: [{ resource: { kind: 'doc:report', id: 'r1', scope: scopeOf('blog') }, actions: ['read'] }] });
  t.is(scoped.status, 400);
  t.truthy(scoped.body.errors['resources.0.resource.scope']);
  // includeMeta adds the matched policy per action.
  const meta = await check('shop', { ...checkBody({}, { id: 'x', roles: ['member'] }), includeMeta: true });
  t.truthy(meta.body.results[0].meta.actions.read);
});

test.serial('check: rule outputs (ruleActivated, conditionNotMet, a failing one without val); a bad output expression is refused', async (t) => {
  const withOutputs = resource('doc:outputs', [
    allow(['read'], ['member'], { name: 'readers', condition: { match: { expr: 'R.attr.open == true' } }, output: { when: { ruleActivated: '{"by": P.id, "n": 1}', conditionNotMet: '"closed"' } } }),
    allow(['update'], ['member'], { output: { when: { ruleActivated: 'R.attr.missing' } } }),
  ]);
  t.is((await onA('PUT', pol(), withOutputs)).status, 200);
  const body = (attr: Record<string, unknown>) => ({ resources: [{ resource: { kind: 'doc:outputs', id: 'o1', attr }, actions: ['read', 'update', 'delete'] }] });
  const open = await check('shop', body({ open: true }), 'pleb');
  t.is(open.status, 200, open.text);
  const src = (rule: string) => `${rid('doc:outputs')}#${rule}`;
  t.deepEqual(open.body.results[0].outputs, [
    { src: src('readers'), action: 'read', val: { by: plebUuid, n: 1 } },
    { src: src('rule-002'), action: 'update' },
  ]);
  const closed = await check('shop', body({ open: false }), 'pleb');
  t.deepEqual(closed.body.results[0].outputs[0], { src: src('readers'), action: 'read', val: 'closed' });
  const bad = await onA('PUT', pol(), resource('doc:outputs', [allow(['read'], ['member'], { output: { when: { conditionNotMet: 'P.attr.(' } } })]));
  t.is(bad.status, 400, bad.text);
  t.truthy(Object.keys(bad.body.errors ?? {}).some((k) => k.includes('output.when.conditionNotMet')), JSON.stringify(bad.body));
  t.deepEqual((await check('shop', body({ open: false }), 'pleb')).body.results[0].outputs[0].val, 'closed', 'nothing stored');
});

test.serial('plan: always allowed, always denied, or a condition; principal resolution as in check', async (t) => {
  await onA('PUT', pol(), DOC_POLICY);
  const as = (action: string, q = '?username=pleb') => plan('shop', { action, resource: { kind: 'doc:report', policy_version: 'default' } }, 'adminA', q);
  const read = await as('read');
  t.is(read.status, 200, read.text);
  t.like(read.body, { action: 'read', resource_kind: 'doc:report', policy_version: 'default', filter_kind: 'ALWAYS_ALLOWED' });
  t.false('condition' in read.body);
  t.is((await as('delete')).body.filter_kind, 'ALWAYS_DENIED');
  const update = await as('update');
  t.is(update.body.filter_kind, 'CONDITIONAL');
  t.deepEqual(update.body.condition, { expression: { operator: 'eq', operands: [{ variable: 'request.resource.attr.owner' }, { value: plebUuid }] } });
  t.is((await plan('shop', { action: 'read', resource: { kind: 'doc:report' } }, 'pleb')).body.filter_kind, 'ALWAYS_ALLOWED');
  t.is((await plan('shop', { action: 'read', resource: { kind: 'doc:report' } }, 'pleb', '?username=boss')).status, 403);
  t.is((await plan('shop', { resource: { kind: 'doc:report' } })).status, 400, 'action required');
});

test.serial('AuthZEN evaluation and evaluations (with semantics); non-administrators about themselves only', async (t) => {
  await onA('PUT', pol(), DOC_POLICY);
  const subject = { type: 'user', id: 'x9', properties: { 'cerbos.roles': ['member'] } };
  const one = await onA('POST', '/api/apps/shop/access/v1/evaluation', { subject, resource: { type: 'doc:report', id: 'r1', properties: { owner: 'x9' } }, action: { name: 'update' } });
  t.is(one.status, 200, one.text);
  t.is(one.body.decision, true);
  t.truthy(one.body.context.id);
  t.deepEqual(one.body.context.reason_admin, { effectiveDerivedRoles: ['owner'] });
  const batch = (semantic?: string) =>
    onA('POST', '/api/apps/shop/access/v1/evaluations', {
      subject,
      resource: { type: 'doc:report', id: 'r1' },
      evaluations: [{ action: { name: 'read' } }, { action: { name: 'delete' } }, { action: { name: 'read' } }],
      ...(semantic ? { options: { evaluations_semantic: semantic } } : {}),
    });
  t.deepEqual((await batch()).body.evaluations.map((e: any) => e.decision), [true, false, true]);
  t.deepEqual((await batch('deny_on_first_deny')).body.evaluations.map((e: any) => e.decision), [true, false]);
  t.deepEqual((await batch('permit_on_first_permit')).body.evaluations.map((e: any) => e.decision), [true]);
  t.is((await onA('POST', '/api/apps/shop/access/v1/evaluations', { evaluations: [{ action: { name: 'read' } }] })).status, 400, 'no subject anywhere');
  // pleb: their own id is evaluated with their stored principal; another id is 403.
  const self = await onA('POST', '/api/apps/shop/access/v1/evaluation', { subject: { type: 'user', id: plebUuid, properties: { 'cerbos.roles': ['admin'] } }, resource: { type: 'doc:report', id: 'r1' }, action: { name: 'delete' } }, 'pleb');
  t.is(self.status, 200);
  t.false(self.body.decision);
  t.is((await onA('POST', '/api/apps/shop/access/v1/evaluation', { subject, resource: { type: 'doc:report', id: 'r1' }, action: { name: 'read' } }, 'pleb')).status, 403);
});

test.serial('app B never sees nor evaluates app A\'s policies, whatever scope or regexp it names', async (t) => {
  await onA('PUT', pol(), DOC_POLICY);
  const shopId = rid('doc:report');
  const blogList = await onA('GET', pol('blog', '?scope_regexp=.*'));
  t.is(blogList.status, 200);
  t.is(blogList.body.total, 0);
  t.is((await onA('GET', pol('blog', `?scope_regexp=${scopeOf('shop')}&name_regexp=.*`))).body.total, 0);
  t.is((await onA('GET', pol('blog', `?id=${encodeURIComponent(shopId)}`))).status, 404);
  t.is((await onA('GET', pol('blog', 'derived-roles/'))).body.total, 0);
  t.deepEqual((await onA('GET', pol('blog', `inspect/?policy_id=${encodeURIComponent(shopId)}`))).body.data.results, {});
  t.is((await onA('DELETE', pol('blog', `?id=${encodeURIComponent(shopId)}`))).status, 404);
  t.like(await row(shopId), { disabled: false });
  // Checks in blog: shop's policy never applies (the member role of a given principal is denied everything).
  const denied = await check('blog', checkBody({}, { id: 'x', roles: ['member', 'admin'] }));
  t.deepEqual(denied.body.results[0].actions, { read: 'EFFECT_DENY', update: 'EFFECT_DENY', delete: 'EFFECT_DENY' });
  t.is((await check('blog', { resources: [{ resource: { kind: 'doc:report', id: 'r1', scope: scopeOf('shop') }, actions: ['read'] }] })).status, 400);
  t.is((await plan('blog', { action: 'read', resource: { kind: 'doc:report' }, principal: { id: 'x', roles: ['member'] } })).body.filter_kind, 'ALWAYS_DENIED');
  // blog cannot import shop's derived roles, by its name or by its stored (prefixed) name.
  for (const name of ['doc-owners', `${a.schema}_shop_doc-owners`]) {
    const res = await onA('POST', pol('blog'), { policy_type: 'resource', entity_type: 'doc', name: 'stolen', import_derived_roles: [name], rules: [] });
    t.is(res.status, 400, name);
  }
  // A policy written for blog with shop's scope is refused.
  t.is((await onA('POST', pol('blog'), resource('doc:report', [], { scope: scopeOf('shop') }))).status, 400);
});

test('tenant isolation: another site\'s token reaches nothing; /sites/{schema}/ must name the caller\'s site', async (t) => {
  await onA('PUT', pol(), resource('iso:a', [allow(['read'], ['member'])]));
  // Site B's administrator: on A's host its token is refused; on B's host, B's app shop has none of A's.
  t.is((await s.api('GET', pol(), { host: a.domain, token: tok.adminB })).status, 401);
  const onB = await s.api('GET', pol('shop', '?scope_regexp=.*'), { host: b.domain, token: tok.adminB });
  t.is(onB.status, 200);
  t.is(onB.body.total, 0);
  const isoIds = [rid('iso:a'), `resource.iso_a.vdefault/${scopeOf('shop')}`]; // its id, and the older form of it
  for (const id of isoIds) {
    t.is((await s.api('GET', pol('shop', `?id=${encodeURIComponent(id)}`), { host: b.domain, token: tok.adminB })).status, 404, id);
    t.is((await s.api('DELETE', pol('shop', `?id=${encodeURIComponent(id)}`), { host: b.domain, token: tok.adminB })).status, 404, id);
    t.is((await s.api('GET', pol('shop', `?id=${encodeURIComponent(id)}`), { host: a.domain, token: tok.adminB })).status, 401, id);
    t.is((await s.api('DELETE', pol('shop', `?id=${encodeURIComponent(id)}`), { host: a.domain, token: tok.adminB })).status, 401, id);
    t.is((await s.api('DELETE', `/sites/${a.schema}${pol('shop', `?id=${encodeURIComponent(id)}`)}`, { host: b.domain, token: tok.adminB })).status, 404, id);
  }
  t.like(await row(rid('iso:a')), { disabled: false });
  // Through /sites/{schema}/ on the platform host: the path's site must be the token's.
  t.is((await s.api('GET', `/sites/${a.schema}${pol()}`, { token: tok.adminA })).status, 200);
  t.is((await s.api('GET', `/sites/${b.schema}${pol()}`, { token: tok.adminA })).status, 401, 'a token of A is not valid on B');
  t.is((await s.api('POST', `/sites/${b.schema}/api/apps/shop/check/resources`, { token: tok.adminA, body: checkBody() })).status, 401);
  t.is((await s.api('GET', `/sites/site_nowhere${pol()}`, { token: tok.adminA })).status, 404);
  // The same form on a site's host: its own schema only; another site's is 404.
  t.is((await onA('GET', `/sites/${a.schema}${pol()}`)).status, 200);
  const other = await onA('GET', `/sites/${b.schema}${pol()}`);
  t.is(other.status, 404);
  t.is(other.body.message, `Site "${b.schema}" not found.`);
  t.is((await onA('POST', `/sites/${b.schema}/api/apps/shop/check/resources`, checkBody())).status, 404);
  t.is((await onA('PUT', `/sites/${b.schema}${pol()}`, resource('iso:b', []))).status, 404);
  t.is(await row(rid('iso:b')), undefined);
  // The platform's token is not a site's; site users who are not administrators manage nothing (403 before 404).
  t.is((await s.api('GET', pol(), { host: a.domain, token: tok.platform })).status, 401);
  for (const [method, p] of [['GET', pol()], ['POST', pol()], ['PUT', pol()], ['DELETE', pol('shop', '?id=x')], ['GET', pol('shop', 'derived-roles/')], ['GET', pol('shop', 'inspect/')], ['GET', pol('nope')]]) {
    const res = await onA(method, p, method === 'GET' || method === 'DELETE' ? undefined : resource('iso:c', []), 'pleb');
    t.is(res.status, 403, `${method} ${p}`);
    t.is(res.body.detail, 'You do not have permission to perform this action.');
  }
  t.is((await onA('GET', pol('nope'))).status, 404);
  t.is((await check('nope', checkBody())).status, 404);
  t.is((await onA('GET', pol())).status, 200);
  t.is((await s.api('GET', pol())).status, 404, 'not a route of the platform host');
});

test('system actions: the static map, for any user of the site', async (t) => {
  const res = await onA('GET', '/api/apps/shop/authorization/system-action/', undefined, 'pleb');
  t.is(res.status, 200);
  t.deepEqual(res.body, {
    success: true,
    data: {
      datatable: ['create', 'read', 'update', 'delete', 'materialize'],
      function: ['create', 'read', 'update', 'delete', 'execute'],
      storage: ['create', 'read', 'update', 'delete', 'upload', 'download'],
      query: ['create', 'read', 'update', 'delete', 'execute'],
    },
  });
  t.is((await onA('GET', '/api/apps/nope/authorization/system-action/')).status, 404);
});

test.serial('system policies of a table: unscoped DENY *, the app\'s ALLOW *; removed with the table, the shared level kept while needed', async (t) => {
  // Tables made and dropped in SQL: the trigger keeps the policies, whatever path changes the table.
  const table = async (app: string) => {
    const [ds] = await sql(`INSERT INTO "${a.schema}".data_sources (app_id, name, slug, provider_type) VALUES (?, 'lines', 'lines', 'flat_table') RETURNING id`, [ids[app]]);
    await sql(`INSERT INTO "${a.schema}".data_tables (app_id, data_source_id, name, json_schema, schema_hash, physical_table_name) VALUES (?, ?, 'lines', '{"fields": []}', 'x', ?)`, [ids[app], ds.id, `a${ids[app]}_lines`]);
  };
  const drop = (app: string) => sql(`DELETE FROM "${a.schema}".data_tables WHERE app_id = ? AND name = 'lines'`, [ids[app]]);
  await table('shop');
  await table('blog');
  t.like(await row(rid('datatable:lines')), { is_system: true, app_id: ids.shop });
  t.deepEqual((await row('resource.datatable_lines.default')).document.resourcePolicy.rules, [{ name: 'system-deny-all', actions: ['*'], effect: 'EFFECT_DENY', roles: ['*'] }]);
  const probe = (app: string) => () => check(app, { principal: { id: 'x', roles: ['user'] }, resources: [{ resource: { kind: 'datatable:lines', id: 'lines' }, actions: ['read', 'materialize'] }] });
  const effects = (res: { body: any }) => res.body.results[0].actions;
  const allowed = { read: 'EFFECT_ALLOW', materialize: 'EFFECT_ALLOW' };
  const denied = { read: 'EFFECT_DENY', materialize: 'EFFECT_DENY' };
  // A change made in SQL reaches the server's caches through its notification (within a second).
  t.deepEqual(effects(await within(probe('shop'), (r) => effects(r).read === 'EFFECT_ALLOW')), allowed);
  await drop('shop');
  t.is(await row(rid('datatable:lines')), undefined);
  t.truthy(await row('resource.datatable_lines.default'), 'blog still needs the unscoped level');
  t.deepEqual(effects(await within(probe('shop'), (r) => effects(r).read === 'EFFECT_DENY')), denied);
  t.deepEqual(effects(await probe('blog')()), allowed);
  await drop('blog');
  t.is(await row('resource.datatable_lines.default'), undefined);
});
