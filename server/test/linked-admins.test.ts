// Organization owners and admins administer the organization's sites as linked site users.
// A promotion, demotion or removal takes effect on every site at once: sign-in, the tokens
// issued before (they stay dead after a later promotion), and the admin rights.
import test from 'ava';
import { startTestServer, type TestServer } from './helpers.ts';
import { addMember, makeOrg, makeUser, PASSWORD, rows, type TestUser } from './org-helpers.ts';

let s: TestServer;
let root: string;
test.before(async () => {
  s = await startTestServer();
  root = (await s.login()).access;
});
test.after.always(async () => {
  await s?.close();
});

interface Site {
  schema_name: string;
  primary_domain: string;
}

async function orgWithSites(name: string, n: number): Promise<{ owner: TestUser; org: { slug: string; uuid: string }; sites: Site[] }> {
  const owner = await makeUser(s, root, 'owner');
  const org = await makeOrg(s, owner.access, name);
  const sites: Site[] = [];
  for (let i = 0; i < n; i++) {
    const res = await s.api('POST', `/api/cloud/organizations/${org.slug}/sites/`, { token: owner.access, body: { name: `${name} ${i}` } });
    if (res.status !== 201) throw new Error(res.text);
    sites.push(res.body.data);
  }
  return { owner, org, sites };
}

const siteLogin = (site: Site, username: string) => s.api('POST', '/api/auth/jwt/token/', { host: site.primary_domain, body: { username, password: PASSWORD } });
/** A site-admin-only call: the site's user list. */
const adminCall = (site: Site, token: string) => s.api('GET', '/api/users/', { host: site.primary_domain, token });

test('a promoted member administers every site of the organization; demoted, their site tokens and sign-in are refused everywhere at once', async (t) => {
  const { owner, org, sites } = await orgWithSites('Linked', 2);
  const m = await makeUser(s, root, 'adm');
  await addMember(s, root, org.slug, m.username);
  // A plain member is no site user.
  for (const site of sites) t.is((await siteLogin(site, m.username)).status, 401);
  t.is((await s.api('POST', `/api/cloud/organizations/${org.slug}/members/${m.username}/make_admin/`, { token: owner.access })).status, 200);
  const tokens: string[] = [];
  for (const site of sites) {
    const login = await siteLogin(site, m.username);
    t.is(login.status, 200, login.text);
    tokens.push(login.body.access);
    t.is((await adminCall(site, login.body.access)).status, 200);
  }
  t.is((await s.api('POST', `/api/cloud/organizations/${org.slug}/members/${m.username}/remove_admin/`, { token: owner.access })).status, 200);
  for (const [i, site] of sites.entries()) {
    t.is((await adminCall(site, tokens[i])).status, 401, 'the old site token is refused');
    t.is((await siteLogin(site, m.username)).status, 401, 'no sign-in');
  }
  // Promoted again: new sign-ins work, the tokens from before stay dead.
  t.is((await s.api('PUT', `/api/cloud/organizations/${org.slug}/members/${m.username}/`, { token: owner.access, body: { is_admin: true } })).status, 200);
  for (const [i, site] of sites.entries()) {
    t.is((await adminCall(site, tokens[i])).status, 401);
    const again = await siteLogin(site, m.username);
    t.is(again.status, 200);
    t.is((await adminCall(site, again.body.access)).status, 200);
  }
  const [row] = await rows<{ is_superuser: boolean }>(s, `SELECT is_superuser FROM "${sites[0].schema_name}".users WHERE username = ?`, [m.username]);
  t.true(row.is_superuser);
});

test('removal from the organization and a demotion through PUT reach every site; the owner keeps access', async (t) => {
  const { owner, org, sites } = await orgWithSites('Removal', 2);
  const a = await makeUser(s, root, 'ra');
  const b = await makeUser(s, root, 'rb');
  for (const u of [a, b]) {
    await addMember(s, root, org.slug, u.username);
    await s.api('POST', `/api/cloud/organizations/${org.slug}/members/${u.username}/make_admin/`, { token: owner.access });
  }
  const before = await Promise.all(sites.map(async (site) => [(await siteLogin(site, a.username)).body.access, (await siteLogin(site, b.username)).body.access]));
  t.is((await s.api('DELETE', `/api/cloud/organizations/${org.slug}/members/${a.username}/`, { token: owner.access })).status, 200);
  t.is((await s.api('PUT', `/api/cloud/organizations/${org.slug}/members/${b.username}/`, { token: owner.access, body: { is_admin: false } })).status, 200);
  for (const [i, site] of sites.entries()) {
    for (const token of before[i]) t.is((await adminCall(site, token)).status, 401);
    t.is((await siteLogin(site, a.username)).status, 401);
    t.is((await siteLogin(site, b.username)).status, 401);
    const own = await siteLogin(site, owner.username);
    t.is(own.status, 200);
    t.is((await adminCall(site, own.body.access)).status, 200);
  }
  // The rows say so too (site user lists are truthful).
  const [row] = await rows<{ is_superuser: boolean; is_staff: boolean }>(s, `SELECT is_superuser, is_staff FROM "${sites[1].schema_name}".users WHERE username = ?`, [b.username]);
  t.deepEqual({ ...row }, { is_superuser: false, is_staff: false });
});

test('a linked admin row left over from before is refused when the membership says otherwise (the request-time check)', async (t) => {
  const { org, sites } = await orgWithSites('Leftover', 1);
  const m = await makeUser(s, root, 'left');
  await addMember(s, root, org.slug, m.username);
  // A linked superuser row that no membership backs (as an older version could leave behind).
  await rows(s, `INSERT INTO "${sites[0].schema_name}".users (uuid, username, email, password, platform_user_uuid, is_staff, is_superuser) VALUES (gen_random_uuid(), ?, '', NULL, ?, true, true)`, [
    m.username,
    m.uuid,
  ]);
  t.is((await siteLogin(sites[0], m.username)).status, 401);
});

const exchange = (ref: string, token: string) => s.api('POST', `/api/cloud/sites/${ref}/token/`, { token });

test('token exchange: an admin gets their site token from the platform token (schema, slug or UUID); re-checked at each exchange', async (t) => {
  const { owner, org, sites } = await orgWithSites('Exchange', 1);
  const [site] = sites as (Site & { slug: string; uuid: string })[];
  for (const ref of [site.schema_name, site.slug, site.uuid]) {
    const res = await exchange(ref, owner.access);
    t.is(res.status, 200, res.text);
    t.deepEqual(Object.keys(res.body).sort(), ['access', 'refresh']);
    t.is((await adminCall(site, res.body.access)).status, 200, 'the exchanged token administers the site');
    t.is((await s.api('GET', '/api/profile/', { token: res.body.access })).status, 401, 'and is refused on the platform host');
  }
  // Through /sites/<schema>/api/… too, and its refresh token is the site's.
  const pair = (await exchange(site.schema_name, owner.access)).body;
  t.is((await s.api('GET', `/sites/${site.schema_name}/api/users/`, { token: pair.access })).status, 200);
  t.is((await s.api('POST', `/sites/${site.schema_name}/api/auth/jwt/token/refresh/`, { body: { refresh: pair.refresh } })).status, 200);

  // A plain member, a stranger, a site token, no token: nothing.
  const member = await makeUser(s, root, 'xm');
  await addMember(s, root, org.slug, member.username);
  t.is((await exchange(site.schema_name, member.access)).status, 404, 'a plain member cannot even view the site');
  const grant = await s.api('PUT', `/api/cloud/organizations/${org.slug}/members/${member.username}/`, { token: owner.access, body: { site: [{ uuid: site.uuid, permissions: ['view_site', 'access_site'] }] } });
  t.is(grant.status, 200, grant.text);
  t.is((await exchange(site.schema_name, member.access)).status, 403, 'viewing the site is not administering it');
  const stranger = await makeUser(s, root, 'xs');
  t.is((await exchange(site.schema_name, stranger.access)).status, 404, 'a site the caller may not view does not exist for them');
  t.is((await exchange(site.schema_name, pair.access)).status, 401);
  t.is((await s.api('POST', `/api/cloud/sites/${site.schema_name}/token/`)).status, 401);
  // Hostile names: refused by validation or not found, never a lookup by them elsewhere.
  t.is((await exchange('x'.repeat(101), owner.access)).status, 400);
  for (const ref of [encodeURIComponent("shop'; DROP TABLE users; --"), 'public', 'pg_catalog', encodeURIComponent('../sites')]) {
    t.is((await exchange(ref, owner.access)).status, 404, ref);
  }

  // Promoted: an exchange works; demoted: refused at once, and the tokens it gave are dead.
  await s.api('POST', `/api/cloud/organizations/${org.slug}/members/${member.username}/make_admin/`, { token: owner.access });
  const promoted = await exchange(site.schema_name, member.access);
  t.is(promoted.status, 200, promoted.text);
  await s.api('POST', `/api/cloud/organizations/${org.slug}/members/${member.username}/remove_admin/`, { token: owner.access });
  t.is((await exchange(site.schema_name, member.access)).status, 403);
  t.is((await adminCall(site, promoted.body.access)).status, 401);

  // A deactivated linked site user, an inactive site: refused.
  await rows(s, `UPDATE "${site.schema_name}".users SET is_active = false WHERE platform_user_uuid = ?`, [owner.uuid]);
  t.is((await exchange(site.schema_name, owner.access)).status, 403);
  await rows(s, `UPDATE "${site.schema_name}".users SET is_active = true WHERE platform_user_uuid = ?`, [owner.uuid]);
  t.is((await s.api('PATCH', `/api/cloud/sites/${site.slug}/`, { token: owner.access, body: { is_active: false } })).status, 200);
  t.is((await exchange(site.schema_name, owner.access)).status, 404);
});
