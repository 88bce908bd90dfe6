// Stale-cache proofs across processes: three real server processes A, B and C (`platform serve`)
// on one database. Changes are made through A; "B" below is B and C in turn (round-robin: each
// request to "B" goes to the next of the two). For each change that must invalidate what a process
// may keep in memory on the request path (the token's user and its auth state, site/app/table
// definitions, grants and site permissions), B and C are first WARMED (the very request probed
// later answers the old way on each, twice: a cache would now hold the old state), the change is
// made through A's HTTP API, and both must answer the new way within one second (`expectOnB`: one
// after the other), while the unaffected case still works on them. Every probe after a change is cheap (no password hashing in the polling loops: logins happen
// before, probes carry tokens). Where a change is undone (reactivated, restored, granted again),
// B is warmed with the intermediate state first, so that a cached "refused" or "not found" (a
// negative entry) fails the test as well. Site deactivation and deletion go through the host
// routing cache that exists today (tenancy/host-resolver.ts, invalidated by NOTIFY).
//
// Policies, app roles, their assignments and a site user's attributes (10.) reach B's compiled
// policy sets, principals and plans through the `policies` and `auth` notifications; a function's
// changes (11.) reach B's kept functions through the `functions` and `tables` ones.
//
// Changes the API has no route for, so not covered here (no faking through SQL):
//   - a site user's site permissions through the site's groups or direct grants (`user_groups`,
//     `user_permissions`, e.g. `view_secret`): no route grants them (tenant-users.routes.ts has
//     none; tests seed them in SQL). The site-side grant covered is the `is_staff` flag (PUT
//     /api/users/{user}/ on the site), which is what decides secrets access through the API.
//   - renaming a data table: `name` is read-only in PATCH (400 when changed, asserted below); the
//     path segment that can be renamed is the data source's slug, covered instead.
//   - dematerializing a data table: no route (datatables.routes.ts has materialize only).
import { randomBytes } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import { createTestDatabase, type TestDatabase } from '../../shared/testing/database.ts';
import { ADMIN, request, type ApiResponse, type RequestOptions } from './helpers.ts';
import { serveMany, stopServed, within1s, type Served } from './processes.ts';

// ---------------------------------------------------------------------------------------------
// Servers

let db: TestDatabase;
let a: Served;
/** B and C: the processes that did not make the change. */
let others: Served[] = [];
let turn = 0;
/** "B": B and C in turn, one request each. */
const b = {
  get url(): string {
    return others[turn++ % others.length]!.url;
  },
};
let root: string;

test.before(async () => {
  db = await createTestDatabase();
  // Many sign-ins from one address: the limits are not what is tested here.
  [a, ...others] = await serveMany(db, 3, { RATE_LIMIT_ENABLED: 'false' });
  root = (await login(a, ADMIN.username, ADMIN.password)).access;
  world = await makeWorld();
});
test.after.always(async () => {
  await Promise.all([a, ...others].map(stopServed));
  await db?.drop();
});

// ---------------------------------------------------------------------------------------------
// Probing

const on = (s: { url: string }, method: string, p: string, options?: RequestOptions) => request(s.url, method, p, options);
type Probe = () => Promise<ApiResponse>;

const brief = (res: ApiResponse) => `${res.status} ${res.text.slice(0, 300)}`;

/** The request answers `status` four times in a row (warms B and C twice each, or checks a precondition). */
async function warm(t: ExecutionContext, what: string, probe: Probe, status: number): Promise<void> {
  for (let i = 0; i < 4; i++) {
    const res = await probe();
    t.is(res.status, status, `warm-up ${i + 1}: ${what}: ${brief(res)}`);
  }
}

/** B and C answer `status` within a second (polled, in turn: until both did, one after the other); the assertion fails with the last answer. */
async function expectOnB(t: ExecutionContext, what: string, probe: Probe, status: number): Promise<ApiResponse> {
  let streak = 0;
  const res = await within1s(probe, (r) => (streak = r.status === status ? streak + 1 : 0) >= others.length);
  t.true(streak >= others.length, `B and C within 1 s: ${what}: ${brief(res)}`);
  return res;
}

/** A single call answers `status` (used for what is unaffected, and for changes through A). */
async function expectNow(t: ExecutionContext, what: string, res: ApiResponse | Promise<ApiResponse>, status: number): Promise<ApiResponse> {
  const r = await res;
  t.is(r.status, status, `${what}: ${brief(r)}`);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Fixtures (all through A's HTTP API)

const PASSWORD = 'Cache-pass-word-1';
let n = 0;
const unique = (prefix: string) => `${prefix}${++n}${randomBytes(2).toString('hex')}`;

interface Tokens {
  access: string;
  refresh: string;
}
interface Account extends Tokens {
  uuid: string;
  username: string;
  password: string;
}
interface Site {
  uuid: string;
  slug: string;
  schema_name: string;
  primary_domain: string;
}
interface Org {
  uuid: string;
  slug: string;
}

/** `/sites/{schema}/api…`: a site's API on the platform host. */
const siteApi = (site: Site, p: string) => `/sites/${site.schema_name}/api${p}`;

async function ok(res: Promise<ApiResponse>, status: number, what: string): Promise<ApiResponse> {
  const r = await res;
  if (r.status !== status) throw new Error(`${what}: ${r.status} ${r.text}`);
  return r;
}

/** Sign-in on the platform (no `site`) or on a site, on process `s`. */
async function login(s: { url: string }, username: string, password: string, site?: Site): Promise<Tokens> {
  const r = await ok(on(s, 'POST', site ? siteApi(site, '/auth/jwt/token/') : '/api/auth/jwt/token/', { body: { username, password } }), 200, `login ${username}`);
  return { access: r.body.access, refresh: r.body.refresh };
}

/** A platform user created by the superuser, signed in on A. */
async function platformUser(prefix: string): Promise<Account> {
  const username = unique(prefix);
  const r = await ok(on(a, 'POST', '/api/cloud/users/', { token: root, body: { username, email: `${username}@example.com`, password: PASSWORD } }), 201, 'user create');
  return { uuid: r.body.data.uuid, username, password: PASSWORD, ...(await login(a, username, PASSWORD)) };
}

async function makeOrg(ownerToken: string, name: string): Promise<Org> {
  return (await ok(on(a, 'POST', '/api/cloud/organizations/', { token: ownerToken, body: { name: unique(name) } }), 201, 'org create')).body.data;
}

async function makeSite(ownerToken: string, org: Org, name: string): Promise<Site> {
  return (await ok(on(a, 'POST', `/api/cloud/organizations/${org.slug}/sites/`, { token: ownerToken, body: { name: unique(name) } }), 201, 'site create')).body.data;
}

/** The platform user's site tokens (organization owners and admins: their linked site user). */
async function exchange(site: Site, platformToken: string): Promise<Tokens> {
  return (await ok(on(a, 'POST', `/api/cloud/sites/${site.schema_name}/token/`, { token: platformToken }), 200, 'token exchange')).body;
}

/** A member of `org` made an admin by its owner: a linked administrator of every site of the org. */
async function orgAdmin(org: Org, ownerToken: string, prefix: string): Promise<Account> {
  const u = await platformUser(prefix);
  await ok(on(a, 'POST', `/api/cloud/organizations/${org.slug}/members/`, { token: root, body: { user_slug: u.username } }), 201, 'member add');
  await ok(on(a, 'POST', `/api/cloud/organizations/${org.slug}/members/${u.username}/make_admin/`, { token: ownerToken }), 200, 'make_admin');
  return u;
}

/** A site's own user (not staff), created by a site administrator, signed in on A. */
async function siteUser(site: Site, adminToken: string, prefix: string): Promise<Account> {
  const username = unique(prefix);
  const r = await ok(on(a, 'POST', siteApi(site, '/users/'), { token: adminToken, body: { username, password: PASSWORD } }), 201, 'site user create');
  return { uuid: r.body.data.uuid, username, password: PASSWORD, ...(await login(a, username, PASSWORD, site)) };
}

const THINGS = { fields: [{ name: 'id', type: 'integer' }, { name: 'n', type: 'string' }], primaryKey: ['id'] };

interface Records {
  app: string;
  /** `…/datatables/{table}/` (the table definition). */
  table: string;
  /** `…/datatables/{table}/data/` (the records list). */
  list: string;
  /** `…/datatables/{table}/data/1/` (one record). */
  one: string;
}

const tablePaths = (site: Site, app: string, table: string, ds?: string): Omit<Records, 'app'> => {
  const t = siteApi(site, `/apps/${app}/${ds ? `datasources/${ds}/` : ''}datatables/${table}/`);
  return { table: t, list: `${t}data/`, one: `${t}data/1/` };
};

/** A new app with data source `main` and table `things` (materialized, record 1), through A. */
async function recordsApp(site: Site, adminToken: string, name: string): Promise<Records> {
  const call = (method: string, p: string, body: unknown, status: number) => ok(on(a, method, siteApi(site, p), { token: adminToken, body }), status, `${method} ${p}`);
  const app = (await call('POST', '/apps/', { name: unique(name) }, 201)).body.data.slug as string;
  await call('POST', `/apps/${app}/datasources/`, { name: 'main', provider_type: 'flat_table' }, 201);
  await call('POST', `/apps/${app}/datasources/main/datatables/`, { name: 'things', json_schema: THINGS }, 201);
  await call('POST', `/apps/${app}/datatables/things/materialize/`, undefined, 200);
  await call('POST', `/apps/${app}/datatables/things/data/`, { id: 1, n: 'one' }, 201);
  return { app, ...tablePaths(site, app, 'things') };
}

/**
 * Shared by the user and permission tests (each adds fresh users of its own): `owner` owns `org`,
 * whose site `site` has app `records` (a materialized table with one record); `ownerSite` is the
 * owner's site token there.
 */
interface World {
  owner: Account;
  org: Org;
  site: Site;
  ownerSite: Tokens;
  records: Records;
}
let world: World;

async function makeWorld(): Promise<World> {
  const owner = await platformUser('owner');
  const org = await makeOrg(owner.access, 'shared');
  const site = await makeSite(owner.access, org, 'Shared');
  const ownerSite = await exchange(site, owner.access);
  return { owner, org, site, ownerSite, records: await recordsApp(site, ownerSite.access, 'crm') };
}

// Probe builders: `get(path, token)` on B.
const onB = (method: string, p: string, token?: string, body?: unknown): Probe => () => on(b, method, p, { token, body });
const getB = (p: string, token?: string): Probe => onB('GET', p, token);
/** The platform refresh (or, with `site`, the site's refresh): a cheap check of the account's state. */
const refreshB = (refresh: string, site?: Site): Probe => onB('POST', site ? siteApi(site, '/auth/jwt/token/refresh/') : '/api/auth/jwt/token/refresh/', undefined, { refresh });

/** The records hot path of `world` for a site token: the list and one record. */
const recordProbes = (token: string, r: Records = world.records): [string, Probe][] => [
  [`records list ${r.list}`, getB(r.list, token)],
  [`one record ${r.one}`, getB(r.one, token)],
];

async function warmAll(t: ExecutionContext, probes: [string, Probe][], status: number): Promise<void> {
  for (const [what, probe] of probes) await warm(t, what, probe, status);
}
async function expectAllOnB(t: ExecutionContext, probes: [string, Probe][], status: number): Promise<void> {
  for (const [what, probe] of probes) await expectOnB(t, what, probe, status);
}

/** The probes that must refuse a platform user's tokens once its account changed. */
const platformTokenProbes = (u: Account, linkedSite: Tokens): [string, Probe][] => [
  ['platform profile', getB('/api/profile/', u.access)],
  ['platform organizations list', getB('/api/cloud/organizations/', u.access)],
  ['linked site token: site users (admin only)', getB(siteApi(world.site, '/users/'), linkedSite.access)],
  ...recordProbes(linkedSite.access).map(([w, p]): [string, Probe] => [`linked site token: ${w}`, p]),
];

/** The owner's tokens still work on B (the unaffected case). */
async function ownerStillServed(t: ExecutionContext): Promise<void> {
  await expectNow(t, 'owner: platform profile on B', on(b, 'GET', '/api/profile/', { token: world.owner.access }), 200);
  for (const [what, probe] of recordProbes(world.ownerSite.access)) await expectNow(t, `owner: ${what} on B`, probe(), 200);
}

// ---------------------------------------------------------------------------------------------
// 1. Platform user deactivated

test.serial('1. platform user deactivated through A: B refuses its platform and linked site tokens within 1 s; reactivated, a new login is served', async (t) => {
  const u = await orgAdmin(world.org, world.owner.access, 'deact');
  const linked = await exchange(world.site, u.access);
  const probes = platformTokenProbes(u, linked);
  await warmAll(t, probes, 200);
  await warm(t, 'platform refresh', refreshB(u.refresh), 200);

  await expectNow(t, 'A: is_active false', on(a, 'PUT', `/api/cloud/users/${u.username}/`, { token: root, body: { is_active: false } }), 200);
  await expectAllOnB(t, probes, 401);
  await expectOnB(t, 'platform refresh', refreshB(u.refresh), 401);
  await ownerStillServed(t);

  // Reactivated: a new sign-in (on A) is served on B (a cached "inactive" must not outlive it).
  await expectNow(t, 'A: is_active true', on(a, 'PUT', `/api/cloud/users/${u.username}/`, { token: root, body: { is_active: true } }), 200);
  const again = await login(a, u.username, u.password);
  await expectOnB(t, 'new platform token after reactivation', getB('/api/profile/', again.access), 200);
  await expectNow(t, 'the token from before stays refused', on(b, 'GET', '/api/profile/', { token: u.access }), 401);
});

// ---------------------------------------------------------------------------------------------
// 2. Platform user deleted

test.serial('2. platform user deleted through A: B refuses its platform and linked site tokens within 1 s; restored, a new login is served', async (t) => {
  const u = await orgAdmin(world.org, world.owner.access, 'del');
  const linked = await exchange(world.site, u.access);
  const probes = platformTokenProbes(u, linked);
  await warmAll(t, probes, 200);
  await warm(t, 'platform refresh', refreshB(u.refresh), 200);

  await expectNow(t, 'A: DELETE user', on(a, 'DELETE', `/api/cloud/users/${u.username}/`, { token: root }), 200);
  await expectAllOnB(t, probes, 401);
  await expectOnB(t, 'platform refresh', refreshB(u.refresh), 401);
  await ownerStillServed(t);

  await expectNow(t, 'A: restore (is_deleted false)', on(a, 'PUT', `/api/cloud/users/${u.username}/`, { token: root, body: { is_deleted: false } }), 200);
  const again = await login(a, u.username, u.password);
  await expectOnB(t, 'new platform token after restore', getB('/api/profile/', again.access), 200);
});

// ---------------------------------------------------------------------------------------------
// 3. Platform user's password changed (by themselves, by a superuser)

test.serial('3. platform password changed through A (own change-password, then a superuser reset): B refuses the tokens issued before; new logins work on B', async (t) => {
  const u = await orgAdmin(world.org, world.owner.access, 'pw');
  let linked = await exchange(world.site, u.access);
  let probes = platformTokenProbes(u, linked);
  await warmAll(t, probes, 200);
  await warm(t, 'platform refresh', refreshB(u.refresh), 200);

  // By themselves.
  const second = 'Cache-pass-word-2';
  await expectNow(t, 'A: own change-password', on(a, 'POST', '/api/profile/change-password/', { token: u.access, body: { old_password: u.password, new_password: second } }), 200);
  await expectAllOnB(t, probes, 401);
  await expectOnB(t, 'platform refresh', refreshB(u.refresh), 401);
  await ownerStillServed(t);
  // B has seen the change: its sign-in takes the new password, not the old one.
  await expectNow(t, 'B: sign-in with the old password', on(b, 'POST', '/api/auth/jwt/token/', { body: { username: u.username, password: u.password } }), 401);
  const fresh = await login(b, u.username, second);
  Object.assign(u, fresh, { password: second });
  linked = await exchange(world.site, u.access);
  probes = platformTokenProbes(u, linked);
  await warmAll(t, probes, 200);
  await warm(t, 'platform refresh (new sign-in)', refreshB(u.refresh), 200);

  // By a superuser (PUT /api/cloud/users/{user}/ with `password`, no old one).
  const third = 'Cache-pass-word-3';
  await expectNow(t, 'A: superuser sets the password', on(a, 'PUT', `/api/cloud/users/${u.username}/`, { token: root, body: { password: third } }), 200);
  await expectAllOnB(t, probes, 401);
  await expectOnB(t, 'platform refresh', refreshB(u.refresh), 401);
  await expectNow(t, 'B: sign-in with the replaced password', on(b, 'POST', '/api/auth/jwt/token/', { body: { username: u.username, password: second } }), 401);
  const last = await login(b, u.username, third);
  await expectNow(t, 'B: the new token', on(b, 'GET', '/api/profile/', { token: last.access }), 200);
  await ownerStillServed(t);
});

// ---------------------------------------------------------------------------------------------
// 4. Site user deactivated, deleted, password changed (the site's own users)

test.serial('4. site user deactivated, deleted, password changed through A: B refuses its site tokens on the records routes within 1 s; another site user is still served', async (t) => {
  const { site, ownerSite } = world;
  const admin = ownerSite.access;
  const other = await siteUser(site, admin, 'other');
  const otherProbes = recordProbes(other.access);
  const siteProbes = (u: Account): [string, Probe][] => [...recordProbes(u.access), ['site profile', getB(siteApi(site, '/profile/'), u.access)]];
  const stillServed = async () => {
    for (const [what, probe] of otherProbes) await expectNow(t, `another site user: ${what} on B`, probe(), 200);
  };
  await warmAll(t, otherProbes, 200);

  // a. Deactivated by a site administrator (PUT /api/users/{user}/ is_active false); then reactivated.
  const d = await siteUser(site, admin, 'sdeact');
  await warmAll(t, siteProbes(d), 200);
  await warm(t, 'site refresh', refreshB(d.refresh, site), 200);
  await expectNow(t, 'A: site user is_active false', on(a, 'PUT', siteApi(site, `/users/${d.username}/`), { token: admin, body: { is_active: false } }), 200);
  await expectAllOnB(t, siteProbes(d), 401);
  await expectOnB(t, 'site refresh', refreshB(d.refresh, site), 401);
  await stillServed();
  await expectNow(t, 'A: site user is_active true', on(a, 'PUT', siteApi(site, `/users/${d.username}/`), { token: admin, body: { is_active: true } }), 200);
  const back = await login(a, d.username, d.password, site);
  await expectOnB(t, 'reactivated: a new site token', getB(world.records.list, back.access), 200);

  // b. Deleted (soft) by a site administrator.
  const x = await siteUser(site, admin, 'sdel');
  await warmAll(t, siteProbes(x), 200);
  await warm(t, 'site refresh', refreshB(x.refresh, site), 200);
  await expectNow(t, 'A: DELETE site user', on(a, 'DELETE', siteApi(site, `/users/${x.username}/`), { token: admin }), 200);
  await expectAllOnB(t, siteProbes(x), 401);
  await expectOnB(t, 'site refresh', refreshB(x.refresh, site), 401);
  await stillServed();

  // c. Password changed by the user (site change-password), then reset by a site administrator.
  const p = await siteUser(site, admin, 'spw');
  await warmAll(t, siteProbes(p), 200);
  await warm(t, 'site refresh', refreshB(p.refresh, site), 200);
  const second = 'Cache-pass-word-2';
  await expectNow(t, 'A: site change-password', on(a, 'POST', siteApi(site, '/profile/change-password/'), { token: p.access, body: { old_password: p.password, new_password: second } }), 200);
  await expectAllOnB(t, siteProbes(p), 401);
  await expectOnB(t, 'site refresh', refreshB(p.refresh, site), 401);
  await expectNow(t, 'B: site sign-in with the old password', on(b, 'POST', siteApi(site, '/auth/jwt/token/'), { body: { username: p.username, password: p.password } }), 401);
  Object.assign(p, await login(b, p.username, second, site), { password: second });
  await warmAll(t, siteProbes(p), 200);
  const third = 'Cache-pass-word-3';
  await expectNow(t, 'A: site admin sets the password', on(a, 'PUT', siteApi(site, `/users/${p.username}/`), { token: admin, body: { password: third } }), 200);
  await expectAllOnB(t, siteProbes(p), 401);
  await expectNow(t, 'B: site sign-in with the replaced password', on(b, 'POST', siteApi(site, '/auth/jwt/token/'), { body: { username: p.username, password: second } }), 401);
  const last = await login(b, p.username, third, site);
  await expectNow(t, 'B: the new site token reads records', on(b, 'GET', world.records.list, { token: last.access }), 200);
  await stillServed();
});

// ---------------------------------------------------------------------------------------------
// 5. Organization member removed, or demoted (a linked site administrator no more)

test.serial('5. organization admin removed, demoted (remove_admin) and demoted (PUT is_admin false) through A: B refuses their site tokens and their site rights within 1 s', async (t) => {
  const { org, site, owner } = world;
  const siteRef = `/api/cloud/sites/${site.slug}/`;
  const orgRef = `/api/cloud/organizations/${org.slug}/`;
  /** Site token: admin-only listing and the records; platform token: the site and org as an admin sees them. */
  const adminProbes = (u: Account, linked: Tokens): [string, Probe][] => [
    ['site users (site admins only)', getB(siteApi(site, '/users/'), linked.access)],
    ...recordProbes(linked.access),
  ];
  const changes: [string, (u: Account) => Promise<ApiResponse>][] = [
    ['removed (DELETE member)', (u) => on(a, 'DELETE', `${orgRef}members/${u.username}/`, { token: owner.access })],
    ['demoted (remove_admin)', (u) => on(a, 'POST', `${orgRef}members/${u.username}/remove_admin/`, { token: owner.access })],
    ['demoted (PUT is_admin false)', (u) => on(a, 'PUT', `${orgRef}members/${u.username}/`, { token: owner.access, body: { is_admin: false } })],
  ];
  for (const [label, change] of changes) {
    const u = await orgAdmin(org, owner.access, 'adm');
    const linked = await exchange(site, u.access);
    await warmAll(t, adminProbes(u, linked), 200);
    await warm(t, `${label}: site refresh`, refreshB(linked.refresh, site), 200);
    await warm(t, `${label}: platform GET organization`, getB(orgRef, u.access), 200);
    await warm(t, `${label}: platform GET site (view_site as admin)`, getB(siteRef, u.access), 200);
    await warm(t, `${label}: platform PUT organization (change_organization as admin)`, onB('PUT', orgRef, u.access, {}), 200);

    await expectNow(t, `A: ${label}`, change(u), 200);
    await expectAllOnB(t, adminProbes(u, linked).map(([w, p]): [string, Probe] => [`${label}: ${w}`, p]), 401);
    await expectOnB(t, `${label}: site refresh`, refreshB(linked.refresh, site), 401);
    await expectOnB(t, `${label}: platform GET site`, getB(siteRef, u.access), 404);
    if (label.startsWith('removed')) {
      await expectOnB(t, `${label}: platform GET organization`, getB(orgRef, u.access), 404);
    } else {
      // Still a member: the organization is visible, but no longer changeable.
      await expectOnB(t, `${label}: platform PUT organization`, onB('PUT', orgRef, u.access, {}), 403);
      await expectNow(t, `${label}: platform GET organization on B (still a member)`, on(b, 'GET', orgRef, { token: u.access }), 200);
    }
    await expectNow(t, `${label}: the platform token itself still works on B`, on(b, 'GET', '/api/profile/', { token: u.access }), 200);
  }
  await ownerStillServed(t);
  await expectNow(t, 'owner: site users on B', on(b, 'GET', siteApi(site, '/users/'), { token: world.ownerSite.access }), 200);
});

// ---------------------------------------------------------------------------------------------
// 6a. Platform grants: direct site grants, groups (assigned, changed, deleted), account flags

test.serial('6a. platform grants changed through A (direct site grant, group assignment, group permissions, group deletion, org permission by group): B decides with the new grants within 1 s', async (t) => {
  const { org, site, owner } = world;
  const siteRef = `/api/cloud/sites/${site.slug}/`;
  const orgRef = `/api/cloud/organizations/${org.slug}/`;
  const m = await platformUser('member');
  await ok(on(a, 'POST', `${orgRef}members/`, { token: root, body: { user_slug: m.username } }), 201, 'member add');
  const setMember = (body: unknown) => on(a, 'PUT', `${orgRef}members/${m.username}/`, { token: owner.access, body });
  const view = getB(siteRef, m.access); // needs view_site (404 without)
  const change = onB('PATCH', siteRef, m.access, { description: 'changed by a member' }); // needs change_site (403 with view_site only)
  const changeOrg = onB('PUT', orgRef, m.access, {}); // needs change_organization (403 for a plain member)

  // Direct site grant: given, then taken.
  await warm(t, 'plain member: GET site', view, 404);
  await expectNow(t, 'A: grant view_site on the site', setMember({ site: [{ uuid: site.uuid, permissions: ['view_site'] }] }), 200);
  await expectOnB(t, 'granted view_site: GET site', view, 200);
  await warm(t, 'view_site: GET site', view, 200);
  await warm(t, 'view_site only: PATCH site', change, 403);
  await expectNow(t, 'A: revoke the direct grants', setMember({ site: [] }), 200);
  await expectOnB(t, 'revoked: GET site', view, 404);

  // A group carrying view_site and change_site, assigned to the member.
  const group = (await ok(on(a, 'POST', '/api/cloud/groups/', { token: root, body: { name: unique('Site Editors '), permissions: ['view_site', 'change_site'] } }), 201, 'group create')).body.data;
  await warm(t, 'no group: GET site', view, 404);
  await expectNow(t, 'A: assign the group', setMember({ groups: [group.id] }), 200);
  await expectOnB(t, 'group assigned: PATCH site', change, 200);
  await warm(t, 'group assigned: PATCH site', change, 200);
  await warm(t, 'group assigned: GET site', view, 200);
  // The group's permissions narrowed (PUT /api/cloud/groups/{id}/): change_site goes, view_site stays.
  await expectNow(t, 'A: group keeps view_site only', on(a, 'PUT', `/api/cloud/groups/${group.id}/`, { token: root, body: { permissions: ['view_site'] } }), 200);
  await expectOnB(t, 'group narrowed: PATCH site', change, 403);
  await expectNow(t, 'group narrowed: GET site still served on B', view(), 200);
  // Widened again, then unassigned.
  await expectNow(t, 'A: group widened again', on(a, 'PUT', `/api/cloud/groups/${group.id}/`, { token: root, body: { permissions: ['view_site', 'change_site'] } }), 200);
  await expectOnB(t, 'group widened: PATCH site', change, 200);
  await warm(t, 'group widened: PATCH site', change, 200);
  await expectNow(t, 'A: unassign the group', setMember({ groups: [] }), 200);
  await expectOnB(t, 'group unassigned: GET site', view, 404);
  // Assigned again, then the group deleted.
  await expectNow(t, 'A: assign the group again', setMember({ groups: [group.id] }), 200);
  await expectOnB(t, 'group assigned again: GET site', view, 200);
  await warm(t, 'group assigned again: GET site', view, 200);
  await expectNow(t, 'A: DELETE the group', on(a, 'DELETE', `/api/cloud/groups/${group.id}/`, { token: root }), 200);
  await expectOnB(t, 'group deleted: GET site', view, 404);

  // An organization permission through a group (change_organization).
  const orgGroup = (await ok(on(a, 'POST', '/api/cloud/groups/', { token: root, body: { name: unique('Org Editors '), permissions: ['change_organization'] } }), 201, 'group create')).body.data;
  await warm(t, 'plain member: PUT organization', changeOrg, 403);
  await expectNow(t, 'A: assign the org group', setMember({ groups: [orgGroup.id] }), 200);
  await expectOnB(t, 'org group assigned: PUT organization', changeOrg, 200);
  await warm(t, 'org group assigned: PUT organization', changeOrg, 200);
  await expectNow(t, 'A: org group emptied', on(a, 'PUT', `/api/cloud/groups/${orgGroup.id}/`, { token: root, body: { permissions: [] } }), 200);
  await expectOnB(t, 'org group emptied: PUT organization', changeOrg, 403);
  await expectNow(t, 'still a member: GET organization on B', on(b, 'GET', orgRef, { token: m.access }), 200);
  await ownerStillServed(t);
});

test.serial('6a. platform account flags changed through A (is_staff, is_superuser; no token revoked): B decides with the new flags within 1 s', async (t) => {
  const u = await platformUser('flags');
  const other = await platformUser('seen');
  const otherUser = getB(`/api/cloud/users/${other.username}/`, u.access); // staff read every user; others see themselves only (404)
  const anySite = getB(`/api/cloud/sites/${world.site.slug}/`, u.access); // superusers see every site; strangers 404
  const setFlags = (body: unknown) => on(a, 'PUT', `/api/cloud/users/${u.username}/`, { token: root, body });

  await warm(t, 'plain user: another user', otherUser, 404);
  await expectNow(t, 'A: is_staff true', setFlags({ is_staff: true }), 200);
  await expectOnB(t, 'staff: another user', otherUser, 200);
  await warm(t, 'staff: another user', otherUser, 200);
  await expectNow(t, 'A: is_staff false', setFlags({ is_staff: false }), 200);
  await expectOnB(t, 'staff no more: another user', otherUser, 404);
  await expectNow(t, 'the token itself still works on B', on(b, 'GET', '/api/profile/', { token: u.access }), 200);

  await warm(t, 'not a superuser: a site of another organization', anySite, 404);
  await expectNow(t, 'A: is_superuser true', setFlags({ is_superuser: true }), 200);
  await expectOnB(t, 'superuser: a site of another organization', anySite, 200);
  await warm(t, 'superuser: a site of another organization', anySite, 200);
  await expectNow(t, 'A: is_superuser false', setFlags({ is_superuser: false }), 200);
  await expectOnB(t, 'superuser no more: a site of another organization', anySite, 404);
});

// ---------------------------------------------------------------------------------------------
// 6b. Site side: a site user's rights in the site (is_staff through the site's users API)

test.serial('6b. site user made staff, then not, through A: B allows, then forbids (403) the secrets routes within 1 s; reading records is unaffected', async (t) => {
  const { site, ownerSite } = world;
  const u = await siteUser(site, ownerSite.access, 'sstaff');
  const secrets = getB(siteApi(site, '/secrets/'), u.access); // site admins and holders of view_secret
  const siteUsers = getB(siteApi(site, '/users/'), u.access); // site admins only
  const setUser = (body: unknown) => on(a, 'PUT', siteApi(site, `/users/${u.username}/`), { token: ownerSite.access, body });

  await warm(t, 'plain site user: secrets', secrets, 403);
  await warm(t, 'plain site user: site users', siteUsers, 403);
  await warmAll(t, recordProbes(u.access), 200);
  await expectNow(t, 'A: site is_staff true', setUser({ is_staff: true }), 200);
  await expectOnB(t, 'site staff: secrets', secrets, 200);
  await expectOnB(t, 'site staff: site users', siteUsers, 200);
  await warm(t, 'site staff: secrets', secrets, 200);
  await warm(t, 'site staff: site users', siteUsers, 200);
  await expectNow(t, 'A: site is_staff false', setUser({ is_staff: false }), 200);
  await expectOnB(t, 'site staff no more: secrets', secrets, 403);
  await expectOnB(t, 'site staff no more: site users', siteUsers, 403);
  for (const [what, probe] of recordProbes(u.access)) await expectNow(t, `still a site user: ${what} on B`, probe(), 200);
});

// ---------------------------------------------------------------------------------------------
// 7. Site deactivated, deleted; organization deleted

test.serial('7. site deactivated, reactivated and deleted, organization deleted through A: B answers 404 on the site routes within 1 s (and serves again once reactivated)', async (t) => {
  const owner = world.owner;
  const org = await makeOrg(owner.access, 'sites');

  // a. Deactivated (PATCH is_active false), then reactivated.
  const s1 = await makeSite(owner.access, org, 'Dimmed');
  const t1 = (await exchange(s1, owner.access)).access;
  const r1 = await recordsApp(s1, t1, 'app');
  const s1Probes: [string, Probe][] = [
    ...recordProbes(t1, r1),
    ['apps list', getB(siteApi(s1, '/apps/'), t1)],
    ['apps list through the site domain', () => on(b, 'GET', '/api/apps/', { host: s1.primary_domain, token: t1 })],
  ];
  await warmAll(t, s1Probes, 200);
  await expectNow(t, 'A: site is_active false', on(a, 'PATCH', `/api/cloud/sites/${s1.slug}/`, { token: owner.access, body: { is_active: false } }), 200);
  await expectAllOnB(t, s1Probes, 404);
  await ownerStillServed(t); // another site of the same owner
  await warmAll(t, s1Probes, 404);
  await expectNow(t, 'A: site is_active true', on(a, 'PATCH', `/api/cloud/sites/${s1.slug}/`, { token: owner.access, body: { is_active: true } }), 200);
  await expectAllOnB(t, s1Probes, 200);

  // b. Deleted (hard: schema dropped).
  const s2 = await makeSite(owner.access, org, 'Gone');
  const t2 = (await exchange(s2, owner.access)).access;
  const r2 = await recordsApp(s2, t2, 'app');
  const s2Probes: [string, Probe][] = [
    ...recordProbes(t2, r2),
    ['apps list through the site domain', () => on(b, 'GET', '/api/apps/', { host: s2.primary_domain, token: t2 })],
    ['platform GET site', getB(`/api/cloud/sites/${s2.slug}/`, owner.access)],
  ];
  await warmAll(t, s2Probes, 200);
  await expectNow(t, 'A: DELETE site', on(a, 'DELETE', `/api/cloud/sites/${s2.slug}/`, { token: owner.access }), 200);
  await expectAllOnB(t, s2Probes, 404);
  for (const [what, probe] of recordProbes(t1, r1)) await expectNow(t, `the organization's other site: ${what} on B`, probe(), 200);

  // c. The organization deleted (cascade): its sites go, and a member of no other organization is soft-deleted in the same statement.
  const doomed = await makeOrg(owner.access, 'doomed');
  const s3 = await makeSite(owner.access, doomed, 'Cascade');
  const t3 = (await exchange(s3, owner.access)).access;
  const member = await platformUser('lonely');
  await ok(on(a, 'POST', `/api/cloud/organizations/${doomed.slug}/members/`, { token: root, body: { user_slug: member.username } }), 201, 'member add');
  const s3Probes: [string, Probe][] = [
    ['apps list', getB(siteApi(s3, '/apps/'), t3)],
    ['platform GET organization', getB(`/api/cloud/organizations/${doomed.slug}/`, owner.access)],
  ];
  await warmAll(t, s3Probes, 200);
  await warm(t, "the lonely member's platform profile", getB('/api/profile/', member.access), 200);
  await expectNow(t, 'A: DELETE organization', on(a, 'DELETE', `/api/cloud/organizations/${doomed.slug}/`, { token: owner.access }), 200);
  await expectAllOnB(t, s3Probes, 404);
  await expectOnB(t, "the lonely member (soft-deleted with the organization): platform profile", getB('/api/profile/', member.access), 401);
  await ownerStillServed(t);
});

// ---------------------------------------------------------------------------------------------
// 8. App deleted (soft) and restored

test.serial('8. app deleted (soft) through A: B answers 404 on its records and table routes within 1 s; restored, B serves them again', async (t) => {
  const { site, ownerSite } = world;
  const reader = await siteUser(site, ownerSite.access, 'reader');
  const r = await recordsApp(site, ownerSite.access, 'doomed');
  const probes: [string, Probe][] = [
    ...recordProbes(reader.access, r),
    ['table definition', getB(r.table, reader.access)],
    ['table schema', getB(`${r.table}schema/`, reader.access)],
    ['records through the data source path', getB(tablePaths(site, r.app, 'things', 'main').list, reader.access)],
    ['the app', getB(siteApi(site, `/apps/${r.app}/`), reader.access)],
  ];
  await warmAll(t, probes, 200);
  await expectNow(t, 'A: DELETE app', on(a, 'DELETE', siteApi(site, `/apps/${r.app}/`), { token: ownerSite.access }), 200);
  await expectAllOnB(t, probes, 404);
  for (const [what, probe] of recordProbes(reader.access)) await expectNow(t, `another app: ${what} on B`, probe(), 200);
  await warmAll(t, probes, 404);
  await expectNow(t, 'A: restore app', on(a, 'POST', siteApi(site, `/apps/${r.app}/restore/`), { token: ownerSite.access }), 200);
  await expectAllOnB(t, probes, 200);
});

// ---------------------------------------------------------------------------------------------
// 9. Data tables: schema changed, materialized, data source renamed, table deleted (and made again)

test.serial('9. data table changes through A: a migration, a changed schema and a materialization are used by B, a renamed data source and a deleted table answer 404 on B, a table made again under the same name is served with its new definition', async (t) => {
  const { site, ownerSite } = world;
  const admin = ownerSite.access;
  const reader = await siteUser(site, admin, 'tables');
  const r = await recordsApp(site, admin, 'tables');
  const onA = (method: string, p: string, body?: unknown) => on(a, method, p, { token: admin, body });

  // a. A materialized table migrated (a column added): B serves its records with the new column
  // within 1 s; its name is read-only (400).
  await warmAll(t, recordProbes(reader.access, r), 200);
  const changed = { fields: [...THINGS.fields, { name: 'extra', type: 'string' }], primaryKey: ['id'] };
  await expectNow(t, 'A: PATCH json_schema of a materialized table (a migration)', onA('PATCH', r.table, { json_schema: changed }), 200);
  const migrated = await within1s(getB(r.one, reader.access), (res) => res.status === 200 && Object.hasOwn(res.body?.data ?? {}, 'extra'));
  t.true(Object.hasOwn(migrated.body?.data ?? {}, 'extra'), `B within 1 s: the record has the new column: ${brief(migrated)}`);
  await expectNow(t, 'A: PATCH name (read-only)', onA('PATCH', r.table, { name: 'renamed' }), 400);
  await expectNow(t, 'B: the table is still served under its name', on(b, 'GET', r.one, { token: reader.access }), 200);

  // b. A table not materialized yet: its schema changed (and description), then materialized.
  const draftPaths = tablePaths(site, r.app, 'draft');
  await expectNow(t, 'A: create table draft', onA('POST', siteApi(site, `/apps/${r.app}/datasources/main/datatables/`), { name: 'draft', json_schema: THINGS }), 201);
  const schemaProbe = getB(`${draftPaths.table}schema/`, reader.access);
  const before = await expectNow(t, 'B: draft schema', schemaProbe(), 200);
  await warm(t, 'draft schema', schemaProbe, 200);
  await warm(t, 'draft table definition', getB(draftPaths.table, reader.access), 200);
  await warm(t, 'draft records (not materialized: 400)', getB(draftPaths.list, reader.access), 400);
  // `n` becomes an integer (and a field is added): B must validate with the new schema.
  const validate = onB('POST', `${draftPaths.table}validate_data/`, reader.access, { data: [{ id: 1, n: 'abc' }] });
  await warm(t, 'draft validate_data', validate, 200);
  t.true((await validate()).body.is_valid, 'a string n passes before the change');
  const strict = { fields: [{ name: 'id', type: 'integer' }, { name: 'n', type: 'integer' }, { name: 'extra', type: 'string' }], primaryKey: ['id'] };
  const patched = await expectNow(t, 'A: PATCH json_schema and description of draft', onA('PATCH', draftPaths.table, { json_schema: strict, description: 'with extra' }), 200);
  t.not(patched.body.schema_hash, before.body.schema_hash);
  const seen = await within1s(schemaProbe, (res) => res.body?.schema_hash === patched.body.schema_hash);
  t.is(seen.body?.schema_hash, patched.body.schema_hash, `B within 1 s: the new schema hash: ${brief(seen)}`);
  t.deepEqual(seen.body?.schema?.fields?.map((f: { name: string }) => f.name), ['id', 'n', 'extra']);
  const described = await within1s(getB(draftPaths.table, reader.access), (res) => res.body?.description === 'with extra');
  t.is(described.body?.description, 'with extra', `B within 1 s: the new description: ${brief(described)}`);
  const invalid = await within1s(validate, (res) => res.body?.is_valid === false);
  t.false(invalid.body?.is_valid, `B within 1 s: validates with the new schema (n must be an integer): ${brief(invalid)}`);
  await expectNow(t, 'A: materialize draft', onA('POST', `${draftPaths.table}materialize/`), 200);
  await expectOnB(t, 'draft materialized: records list', getB(draftPaths.list, reader.access), 200);
  await warm(t, 'draft: no record 1 yet', getB(draftPaths.one, reader.access), 404);
  await expectNow(t, 'A: a record with the new field', onA('POST', draftPaths.list, { id: 1, n: 2, extra: 'more' }), 201);
  const rec = await expectOnB(t, 'draft: the new record', getB(draftPaths.one, reader.access), 200);
  t.like(rec.body.data, { id: 1, n: 2, extra: 'more' });

  // c. The data source renamed (its slug is a path segment): the old path 404, the new one serves.
  const oldDs = tablePaths(site, r.app, 'things', 'main');
  const newDs = tablePaths(site, r.app, 'things', 'primary');
  await warm(t, 'records through data source main', getB(oldDs.one, reader.access), 200);
  await warm(t, 'records through data source primary (none yet)', getB(newDs.one, reader.access), 404);
  await expectNow(t, 'A: PATCH data source slug', onA('PATCH', siteApi(site, `/apps/${r.app}/datasources/main/`), { slug: 'primary' }), 200);
  await expectOnB(t, 'data source renamed: the old path', getB(oldDs.one, reader.access), 404);
  await expectOnB(t, 'data source renamed: the new path', getB(newDs.one, reader.access), 200);
  await expectNow(t, 'data source renamed: the path without it on B', on(b, 'GET', r.one, { token: reader.access }), 200);

  // d. Deleted: 404 on B; made again under the same name with another schema: B serves the new table.
  const probes: [string, Probe][] = [...recordProbes(reader.access, r), ['table definition', getB(r.table, reader.access)]];
  await warmAll(t, probes, 200);
  await expectNow(t, 'A: DELETE table', onA('DELETE', r.table), 200);
  await expectAllOnB(t, probes, 404);
  for (const [what, probe] of recordProbes(reader.access)) await expectNow(t, `another app's table: ${what} on B`, probe(), 200);
  await warmAll(t, probes, 404);
  const relabelled = { fields: [{ name: 'id', type: 'integer' }, { name: 'label', type: 'string' }], primaryKey: ['id'] };
  await expectNow(t, 'A: the table made again', onA('POST', siteApi(site, `/apps/${r.app}/datasources/primary/datatables/`), { name: 'things', json_schema: relabelled }), 201);
  await expectNow(t, 'A: materialized again', onA('POST', `${r.table}materialize/`), 200);
  await expectNow(t, 'A: a record of the new table', onA('POST', r.list, { id: 1, label: 'new' }), 201);
  const again = await expectOnB(t, 'the table made again: one record', getB(r.one, reader.access), 200);
  t.deepEqual(again.body.data, { id: 1, label: 'new' }, 'B reads the new table with its new fields');
  const list = await expectOnB(t, 'the table made again: records list', getB(r.list, reader.access), 200);
  t.deepEqual(list.body.data, [{ id: 1, label: 'new' }]);
});

// ---------------------------------------------------------------------------------------------
// 10. Policies, app roles, assignments and a user's attributes

test.serial("10. a policy, a role assignment and a user's attributes changed through A: B decides records with them within 1 s", async (t) => {
  const { site, ownerSite, records } = world;
  const u = await siteUser(site, ownerSite.access, 'polu');
  const onA = (method: string, p: string, body?: unknown) => on(a, method, siteApi(site, p), { token: ownerSite.access, body });
  const putPolicy = (rules: unknown[]) =>
    ok(onA('PUT', `/apps/${records.app}/policies/`, { resourcePolicy: { resource: 'datatable:things', version: 'default', rules } }), 200, 'PUT policy');
  const admins = { actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['admin'] };
  // A record the policies do not let the user read is missing to them (404, issue 29 #9).
  const one = getB(records.one, u.access);

  await warm(t, 'system policies: a site user reads', one, 200);
  await putPolicy([admins, { actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['editor'] }]);
  await expectOnB(t, 'policy: editors only', one, 404);
  await ok(onA('POST', `/apps/${records.app}/roles/`, { name: 'editor' }), 201, 'role');
  await warm(t, 'not an editor yet', one, 404);
  await ok(onA('POST', `/apps/${records.app}/roles/editor/assignments/`, { user: u.username }), 201, 'assign');
  await expectOnB(t, 'assigned editor', one, 200);
  await warm(t, 'editor', one, 200);
  await ok(onA('DELETE', `/apps/${records.app}/roles/editor/assignments/${u.username}/`), 200, 'unassign');
  await expectOnB(t, 'editor no more', one, 404);

  await putPolicy([admins, { actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['*'], condition: { match: { expr: 'P.attr.team == "blue"' } } }]);
  await warm(t, 'no team', one, 404);
  await ok(onA('PUT', `/users/${u.username}/`, { attributes: { team: 'blue' } }), 200, 'attributes');
  await expectOnB(t, 'team blue', one, 200);
  await warm(t, 'team blue', one, 200);
  await ok(onA('PUT', `/users/${u.username}/`, { attributes: { team: 'red' } }), 200, 'attributes');
  await expectOnB(t, 'team red', one, 404);

  await putPolicy([{ actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['*'] }]);
  await expectOnB(t, 'every site user again', one, 200);
});

// ---------------------------------------------------------------------------------------------
// 11. Functions: what an invocation is decided on (issue 33: B keeps the function, not its code)

test.serial('11. a function deactivated, reactivated, changed, deleted and made again, its app deleted and restored through A: B invokes it the new way within 1 s', async (t) => {
  const { site, ownerSite, records } = world;
  const u = await siteUser(site, ownerSite.access, 'fnu');
  const fns = `/apps/${records.app}/functions/`;
  const onA = (method: string, p: string, body?: unknown) => on(a, method, siteApi(site, p), { token: ownerSite.access, body });
  const create = (code: string) => ok(onA('POST', fns, { name: 'Greet', slug: 'greet', code }), 201, 'function create');
  const invoke = onB('POST', siteApi(site, `${fns}greet/invoke/`), u.access, { payload: 1 });
  const answers = async (result: number) => {
    const res = await within1s(invoke, (r) => r.status === 200 && r.body.result === result);
    t.like(res.body, { status: 'succeeded', result }, `B within 1 s: ${brief(res)}`);
  };

  await create('export default (n) => n + 1');
  await warm(t, 'invoke', invoke, 200);
  await ok(onA('PATCH', `${fns}greet/`, { is_active: false }), 200, 'deactivate');
  await expectOnB(t, 'inactive', invoke, 400);
  await warm(t, 'inactive', invoke, 400);
  await ok(onA('PATCH', `${fns}greet/`, { is_active: true, code: 'export default (n) => n + 2' }), 200, 'reactivate, new code');
  await answers(3);
  await ok(onA('DELETE', `${fns}greet/`), 204, 'delete');
  await expectOnB(t, 'deleted', invoke, 404);
  await warm(t, 'deleted', invoke, 404);
  await create('export default (n) => n + 3');
  await answers(4);
  await ok(onA('DELETE', `/apps/${records.app}/`), 200, 'app delete');
  await expectOnB(t, 'app deleted', invoke, 404);
  await warm(t, 'app deleted', invoke, 404);
  await ok(onA('POST', `/apps/${records.app}/restore/`), 200, 'app restore');
  await answers(4);
});

test.serial('the processes learn of each other: without REDIS_URL each warns that its rate limits are its own', (t) => {
  for (const s of [a, ...others]) t.regex(s.output().stdout, /another server process shares this database but REDIS_URL is unset/);
});
