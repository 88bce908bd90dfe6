// The public side of invitations: details and accept without a bearer token; a new user or an
// existing one; what the invitation grants is applied; used, expired and cancelled tokens are
// refused; two concurrent accepts → exactly one succeeds.
import test from 'ava';
import { loadGrants } from '../../shared/permissions/grants.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { em, makeGroup, makeOrg, makeUser, sql, startSmtpSink, tokenFrom, type SmtpSink } from './invitation-helpers.ts';

let s: TestServer;
let smtp: SmtpSink;
let root: string;
let owner: Awaited<ReturnType<typeof makeUser>>;
let org: Awaited<ReturnType<typeof makeOrg>>;

test.before(async () => {
  smtp = await startSmtpSink();
  s = await startTestServer({ SMTP_URL: smtp.url, INVITATION_TTL_DAYS: '3' });
  root = (await s.login()).access;
  owner = await makeUser(s, root, 'owner');
  org = await makeOrg(s, owner.uuid);
});
test.after.always(async () => {
  await s?.close();
  await smtp?.close();
});

/** Creates an invitation as the owner; returns its body and the token from the e-mail. */
async function invited(email: string, extra: Record<string, unknown> = {}) {
  const res = await s.api('POST', `/api/cloud/organizations/${org.slug}/invitations/`, { token: owner.access, body: { invitee_identifier: email, ...extra } });
  if (res.status !== 201) throw new Error(`invite failed: ${res.text}`);
  return { invitation: res.body.data, token: tokenFrom(smtp.to(email).at(-1)) };
}
const details = (token: string) => s.api('GET', `/api/cloud/invitations/${token}/details/`);
const accept = (token: string) => s.api('POST', `/api/cloud/invitations/${token}/accept/`);

test('details: public, names only; INVITATION_TTL_DAYS sets the expiry', async (t) => {
  const groupId = await makeGroup(s, 'Readers');
  const { invitation, token } = await invited('curious@example.com', {
    permissions: ['view_organization'],
    invitation_config: { group: [groupId], site: [{ slug: org.site, permissions: ['view_site'] }] },
  });
  const res = await details(token);
  t.is(res.status, 200, res.text);
  t.deepEqual(res.body, {
    organization: { name: org.name, slug: org.slug },
    invitee_identifier: 'curious@example.com',
    state: 'pending',
    account_exists: false,
    invited_by: owner.username,
    created: invitation.created,
    expires_at: invitation.expires_at,
    permissions: ['view_organization'],
    groups: ['Readers'],
    sites: [{ slug: org.site, name: res.body.sites[0]?.name, permissions: ['view_site'] }],
  });
  t.regex(res.body.sites[0].name, /^Site /);
  t.is(Math.round((Date.parse(invitation.expires_at) - Date.parse(invitation.created)) / 86_400_000), 3);
  t.false(res.text.includes(token));
  const unknown = await details(crypto.randomUUID());
  t.is(unknown.status, 404);
  t.is(unknown.body.code, 'NOT_FOUND');
  const malformed = await details('not-a-token');
  t.is(malformed.status, 400);
  t.deepEqual(malformed.body.errors, { token: ['Must be a valid UUID.'] });
});

test('accept for a new address: a user is created, can log in, and holds what was granted', async (t) => {
  const editors = await makeGroup(s, 'Editors', ['manage_organization']);
  const reviewers = await makeGroup(s, 'Reviewers');
  const { invitation, token } = await invited('Fresh.Face@Example.com', {
    permissions: ['view_organization', 'invite_members'],
    invitation_config: { group: [editors, 'reviewers'], site: [{ slug: org.site, permissions: ['view_site', 'access_site'] }, { slug: org.secondSite, permissions: ['manage_site'] }] },
  });
  t.deepEqual(invitation.invitation_config.group, [editors, reviewers]);
  const res = await accept(token);
  t.is(res.status, 200, res.text);
  t.is(res.body.status, 'success');
  t.is(res.body.message, 'Invitation accepted.');
  t.deepEqual(Object.keys(res.body.data).sort(), ['created', 'organization', 'password', 'username']);
  t.like(res.body.data, { organization: org.slug, username: 'fresh-face', created: true });
  // The returned password works.
  const login = await s.api('POST', '/api/auth/jwt/token/', { body: { username: 'fresh-face', password: res.body.data.password } });
  t.is(login.status, 200);
  const [user] = await sql(s, 'SELECT uuid, email, is_staff, is_superuser FROM public.users WHERE username = ?', ['fresh-face']);
  t.like(user, { email: 'Fresh.Face@Example.com', is_staff: false, is_superuser: false });
  const [member] = await sql(s, 'SELECT uuid, is_admin, is_owner FROM public.organization_members WHERE organization_uuid = ? AND user_uuid = ?', [org.uuid, user.uuid]);
  t.like(member, { is_admin: false, is_owner: false });
  const groups = await sql(s, 'SELECT group_id FROM public.member_groups WHERE member_uuid = ? ORDER BY group_id', [member.uuid]);
  t.deepEqual(groups.map((g) => g.group_id), [editors, reviewers].sort((a, b) => a - b));
  const grants = await loadGrants(em(s), user.uuid);
  t.deepEqual([...(grants.organization.get(org.uuid) ?? [])].sort(), ['invite_members', 'manage_organization', 'view_organization']);
  t.deepEqual([...(grants.site.get(org.siteUuid) ?? [])].sort(), ['access_site', 'view_site']);
  const [second] = await sql(s, 'SELECT uuid FROM public.sites WHERE slug = ?', [org.secondSite]);
  t.deepEqual([...(grants.site.get(second.uuid) ?? [])], ['manage_site']);
  const after = (await s.api('GET', `/api/cloud/organizations/${org.slug}/invitations/${invitation.uuid}/`, { token: owner.access })).body;
  t.like(after, { state: 'accepted', accepted_by: 'fresh-face' });
  t.truthy(after.accepted_at);
  t.is((await details(token)).body.state, 'accepted');
  // Single use.
  const reuse = await accept(token);
  t.is(reuse.status, 400);
  t.like(reuse.body, { status: 'error', code: 'BAD_REQUEST', message: 'This invitation has already been accepted.' });
  t.is((await s.api('DELETE', `/api/cloud/organizations/${org.slug}/invitations/${invitation.uuid}/`, { token: owner.access })).status, 400);
});

test('an existing account joins only with its own authentication: none → 401, another account → 403, nothing changes', async (t) => {
  const known = await makeUser(s, root, 'known');
  const stranger = await makeUser(s, root, 'stranger');
  const { invitation, token } = await invited(known.email.toUpperCase(), { permissions: ['view_organization'] });
  t.true((await details(token)).body.account_exists);
  const joined = async () => (await sql(s, 'SELECT 1 FROM public.organization_members WHERE organization_uuid = ? AND user_uuid = ?', [org.uuid, known.uuid])).length;
  const anonymous = await accept(token);
  t.is(anonymous.status, 401);
  t.like(anonymous.body, { code: 'AUTHENTICATION_FAILED', message: 'An account with the invited e-mail exists: accept as that account, with its bearer token or its password in the body.' });
  const wrong = await s.api('POST', `/api/cloud/invitations/${token}/accept/`, { body: { password: 'not-their-password' } });
  t.is(wrong.status, 401);
  t.is(wrong.body.message, 'The password does not match the account with the invited e-mail.');
  const other = await s.api('POST', `/api/cloud/invitations/${token}/accept/`, { token: stranger.access });
  t.is(other.status, 403);
  const fields = await s.api('POST', `/api/cloud/invitations/${token}/accept/`, { token: known.access, body: { username: 'new-name', first_name: 'X' } });
  t.is(fields.status, 400);
  t.deepEqual(Object.keys(fields.body.errors).sort(), ['first_name', 'username']);
  t.is(await joined(), 0);
  t.is((await details(token)).body.state, 'pending');
  t.is((await sql(s, 'SELECT 1 FROM public.organization_members WHERE organization_uuid = ? AND user_uuid = ?', [org.uuid, stranger.uuid])).length, 0);
  t.is((await s.api('GET', `/api/cloud/organizations/${org.slug}/invitations/${invitation.uuid}/`, { token: owner.access })).body.state, 'pending');
});

test('an existing account accepts with its bearer token or with its password: attached, no user created, no password returned', async (t) => {
  for (const how of ['token', 'password'] as const) {
    const known = await makeUser(s, root, `known-${how}`);
    const { token } = await invited(known.email, { permissions: ['view_organization'] });
    const res = await s.api('POST', `/api/cloud/invitations/${token}/accept/`, how === 'token' ? { token: known.access } : { body: { password: 'Invite-test-pw-1' } });
    t.is(res.status, 200, res.text);
    t.deepEqual(res.body.data, { organization: org.slug, username: known.username, created: false });
    t.is((await sql(s, 'SELECT 1 FROM public.users WHERE lower(email) = lower(?)', [known.email])).length, 1);
    t.true((await loadGrants(em(s), known.uuid)).organization.get(org.uuid)?.has('view_organization'));
    t.truthy(await s.login(known.username, 'Invite-test-pw-1'));
  }
});

test('the hijack is closed: an address put on a profile without confirmation grants nothing', async (t) => {
  const attacker = await makeUser(s, root, 'attacker');
  const victim = 'victim.person@example.com';
  const put = await s.api('PUT', '/api/profile/', { token: attacker.access, body: { email: victim } });
  t.is(put.status, 200, put.text);
  t.like(put.body, { email: attacker.email, pending_email: victim });
  const { token } = await invited(victim, { permissions: ['view_organization'] });
  t.false((await details(token)).body.account_exists);
  // Signed in, the attacker cannot take it; signed out, accepting makes an account for the address.
  t.is((await s.api('POST', `/api/cloud/invitations/${token}/accept/`, { token: attacker.access })).status, 403);
  const res = await accept(token);
  t.is(res.status, 200, res.text);
  t.like(res.body.data, { created: true, username: 'victim-person' });
  t.is((await sql(s, 'SELECT 1 FROM public.organization_members WHERE organization_uuid = ? AND user_uuid = ?', [org.uuid, attacker.uuid])).length, 0);
  const [attackerRow] = await sql(s, 'SELECT email FROM public.users WHERE uuid = ?', [attacker.uuid]);
  t.is(attackerRow.email, attacker.email);
});

test('accept creates the account the invitee asks for: username, password, names; validated like user creation', async (t) => {
  const { token } = await invited('asks@example.com');
  const bad = [
    [{ username: 'has space' }, 'username'],
    [{ password: 'short' }, 'password'],
    [{ password: '12345678901' }, 'password'],
    [{ username: 'x', extra: 1 }, 'extra'],
  ] as const;
  for (const [body, field] of bad) {
    const res = await s.api('POST', `/api/cloud/invitations/${token}/accept/`, { body });
    t.is(res.status, 400, JSON.stringify(body));
    t.truthy(res.body.errors[field], res.text);
  }
  const taken = await s.api('POST', `/api/cloud/invitations/${token}/accept/`, { body: { username: owner.username } });
  t.is(taken.status, 400);
  t.deepEqual(taken.body.errors, { username: ['A user with that username already exists.'] });
  t.is((await sql(s, `SELECT 1 FROM public.users WHERE email = 'asks@example.com'`)).length, 0);
  t.is((await details(token)).body.state, 'pending');
  const res = await s.api('POST', `/api/cloud/invitations/${token}/accept/`, { body: { username: 'chosen-name', password: 'Chosen-pass-1', first_name: 'Ada', last_name: 'Lovelace' } });
  t.is(res.status, 200, res.text);
  t.deepEqual(res.body.data, { organization: org.slug, username: 'chosen-name', created: true });
  const login = await s.login('chosen-name', 'Chosen-pass-1');
  const me = await s.api('GET', '/api/profile/', { token: login.access });
  t.like(me.body, { username: 'chosen-name', email: 'asks@example.com', first_name: 'Ada', last_name: 'Lovelace', pending_email: '' });
});

test('an invitation for the address of a deleted account is refused until a superuser restores it', async (t) => {
  const gone = await makeUser(s, root, 'gone');
  const { token } = await invited(gone.email);
  t.is((await s.api('DELETE', `/api/cloud/users/${gone.username}/`, { token: root })).status, 200);
  const res = await s.api('POST', `/api/cloud/invitations/${token}/accept/`, { body: { password: 'Invite-test-pw-1' } });
  t.is(res.status, 400);
  t.is(res.body.message, 'The account with the invited e-mail is deactivated or deleted: ask a platform administrator to restore it.');
  t.is((await sql(s, 'SELECT 1 FROM public.users WHERE lower(email) = lower(?)', [gone.email])).length, 1, 'no second account');
  t.is((await s.api('PUT', `/api/cloud/users/${gone.username}/`, { token: root, body: { is_deleted: false } })).status, 200);
  const ok = await s.api('POST', `/api/cloud/invitations/${token}/accept/`, { body: { password: 'Invite-test-pw-1' } });
  t.is(ok.status, 200, ok.text);
  t.like(ok.body.data, { username: gone.username, created: false });
});

test('a taken username gets -2 like createUser', async (t) => {
  await makeUser(s, root, 'x'); // noise
  await s.api('POST', '/api/cloud/users/', { token: root, body: { username: 'dup', email: 'dup@elsewhere.example', password: 'Invite-test-pw-1' } });
  const { token } = await invited('dup@example.com');
  const res = await accept(token);
  t.is(res.status, 200, res.text);
  t.like(res.body.data, { username: 'dup-2', created: true });
});

test('expired and cancelled tokens are refused with 400 naming the state; unknown 404', async (t) => {
  const expired = await invited('late@example.com');
  await sql(s, `UPDATE public.invitations SET expires_at = now() - interval '1 minute' WHERE uuid = ?`, [expired.invitation.uuid]);
  t.is((await details(expired.token)).body.state, 'expired');
  const late = await accept(expired.token);
  t.is(late.status, 400);
  t.like(late.body, { code: 'BAD_REQUEST', message: 'This invitation has expired.', data: { state: 'expired' } });
  const cancelled = await invited('changed.mind@example.com');
  await s.api('DELETE', `/api/cloud/organizations/${org.slug}/invitations/${cancelled.invitation.uuid}/`, { token: owner.access });
  const refused = await accept(cancelled.token);
  t.is(refused.status, 400);
  t.is(refused.body.message, 'This invitation has been cancelled.');
  const unknown = await accept(crypto.randomUUID());
  t.is(unknown.status, 404);
  t.is((await accept('1234')).status, 400);
  const nobody = await sql(s, `SELECT 1 FROM public.users WHERE email IN ('late@example.com', 'changed.mind@example.com')`);
  t.is(nobody.length, 0);
});

test('two concurrent accepts: exactly one 200 and one 400; one user, one membership', async (t) => {
  for (let round = 0; round < 3; round++) {
    const email = `race${round}@example.com`;
    const { token } = await invited(email, { permissions: ['view_organization'] });
    const results = await Promise.all([accept(token), accept(token), accept(token)]);
    t.deepEqual(results.map((r) => r.status).sort(), [200, 400, 400], results.map((r) => r.text).join('\n'));
    for (const r of results.filter((x) => x.status === 400)) t.is(r.body.message, 'This invitation has already been accepted.');
    const users = await sql(s, 'SELECT uuid FROM public.users WHERE email = ?', [email]);
    t.is(users.length, 1);
    const members = await sql(s, 'SELECT 1 FROM public.organization_members WHERE user_uuid = ?', [users[0].uuid]);
    t.is(members.length, 1);
  }
});
