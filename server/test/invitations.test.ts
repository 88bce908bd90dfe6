// Invitations of an organization over HTTP: create (a real SMTP server receives the e-mail),
// list, detail, cancel, resend; validation; who may invite; tokens in no response and no log.
import test from 'ava';
import { capturingLog, startTestServer, type TestServer } from './helpers.ts';
import { addMember, invitationCount, makeGroup, makeOrg, makeUser, sql, startSmtpSink, tokenFrom, type SmtpSink } from './invitation-helpers.ts';

let s: TestServer;
let smtp: SmtpSink;
let root: string;
let owner: Awaited<ReturnType<typeof makeUser>>;
let org: Awaited<ReturnType<typeof makeOrg>>;
let other: Awaited<ReturnType<typeof makeOrg>>;
const logged = capturingLog();

test.before(async () => {
  smtp = await startSmtpSink();
  s = await startTestServer({ SMTP_URL: smtp.url }, { log: logged.log });
  root = (await s.login()).access;
  owner = await makeUser(s, root, 'owner');
  org = await makeOrg(s, owner.uuid);
  other = await makeOrg(s, owner.uuid);
});
test.after.always(async () => {
  await s?.close();
  await smtp?.close();
});

const base = () => `/api/cloud/organizations/${org.slug}/invitations/`;
const invite = (body: unknown, token = owner.access, path = base()) => s.api('POST', path, { token, body });

test('create: 201 envelope, the e-mail over SMTP with both links, no token in the response', async (t) => {
  const res = await invite({ invitee_identifier: 'new.person@example.com', permissions: ['view_organization'] });
  t.is(res.status, 201, res.text);
  t.is(res.body.status, 'success');
  t.is(res.body.message, 'Invitation created and sent.');
  const data = res.body.data;
  t.deepEqual(Object.keys(data).sort(), [
    'accepted_at', 'accepted_by', 'cancelled_at', 'created', 'expires_at', 'id', 'invitation_config', 'invited_by',
    'invitee_identifier', 'last_sent_at', 'organization', 'permissions', 'sent_count', 'state', 'uuid',
  ]);
  t.like(data, { invitee_identifier: 'new.person@example.com', permissions: ['view_organization'], invitation_config: {}, state: 'pending', organization: org.slug, invited_by: owner.username, sent_count: 1, accepted_at: null });
  const days = (Date.parse(data.expires_at) - Date.parse(data.created)) / 86_400_000;
  t.true(Math.abs(days - 7) < 0.01, `expires in ${days} days`);
  const [mail] = smtp.to('new.person@example.com');
  t.truthy(mail);
  t.regex(mail.raw, /^Subject: Invitation to join /m);
  t.regex(mail.from, /^no-reply@/);
  const token = tokenFrom(mail);
  t.true(mail.text.includes(`${s.url}/api/cloud/invitations/${token}/details/`));
  t.true(mail.text.includes(`${s.url}/api/cloud/invitations/${token}/accept/`));
  t.false(res.text.includes(token));
  // The stored token is the one mailed.
  const [row] = await sql(s, 'SELECT token FROM public.invitations WHERE uuid = ?', [data.uuid]);
  t.is(row.token, token);
});

test('list, detail by UUID and by id, the /api/ alias; tokens never listed', async (t) => {
  const created = (await invite({ invitee_identifier: 'listed@example.com' })).body.data;
  const token = tokenFrom(smtp.to('listed@example.com')[0]);
  const list = await s.api('GET', `${base()}?search=listed`, { token: owner.access });
  t.is(list.status, 200);
  t.deepEqual(Object.keys(list.body), ['count', 'next', 'previous', 'results']);
  t.is(list.body.count, 1);
  t.deepEqual(list.body.results[0], created);
  const byUuid = await s.api('GET', `${base()}${created.uuid}/`, { token: owner.access });
  const byId = await s.api('GET', `${base()}${created.id}/`, { token: owner.access });
  t.is(byUuid.status, 200);
  t.deepEqual(byUuid.body, created);
  t.deepEqual(byId.body, created);
  t.deepEqual((await s.api('GET', `/api/organizations/${org.uuid}/invitations/${created.uuid}/`, { token: owner.access })).body, created);
  const all = await s.api('GET', `${base()}?page_size=100`, { token: owner.access });
  for (const r of [list, byUuid, all]) t.false(r.text.includes(token));
  t.false('token' in created);
  t.is((await s.api('GET', `${base()}${crypto.randomUUID()}/`, { token: owner.access })).status, 404);
  t.is((await s.api('GET', `${base()}not-a-ref/`, { token: owner.access })).status, 404);
  t.is((await s.api('GET', `${base()}?state=accepted&search=listed`, { token: owner.access })).body.count, 0);
  t.is((await s.api('GET', `${base()}?state=pending&search=listed`, { token: owner.access })).body.count, 1);
});

test('cancel: 200 {status, message}, state cancelled, again is fine; resend then refused', async (t) => {
  const { uuid, id } = (await invite({ invitee_identifier: 'cancel.me@example.com' })).body.data;
  const res = await s.api('DELETE', `${base()}${uuid}/`, { token: owner.access });
  t.is(res.status, 200);
  t.deepEqual(res.body, { status: 'success', message: 'Invitation cancelled.' });
  const after = (await s.api('GET', `${base()}${uuid}/`, { token: owner.access })).body;
  t.is(after.state, 'cancelled');
  t.truthy(after.cancelled_at);
  t.is((await s.api('DELETE', `${base()}${uuid}/`, { token: owner.access })).status, 200);
  const resend = await s.api('POST', `${base()}${id}/resend/`, { token: owner.access });
  t.is(resend.status, 400);
  t.is(resend.body.message, 'This invitation has been cancelled and cannot be resent.');
  t.is(smtp.to('cancel.me@example.com').length, 1);
});

test('resend by integer id (and UUID): same token, sent_count + 1, expiry renewed', async (t) => {
  const first = (await invite({ invitee_identifier: 'resend.me@example.com' })).body.data;
  await sql(s, `UPDATE public.invitations SET expires_at = now() - interval '1 hour' WHERE uuid = ?`, [first.uuid]);
  t.is((await s.api('GET', `${base()}${first.uuid}/`, { token: owner.access })).body.state, 'expired');
  const res = await s.api('POST', `${base()}${first.id}/resend/`, { token: owner.access });
  t.is(res.status, 200, res.text);
  t.is(res.body.message, 'Invitation sent again.');
  t.like(res.body.data, { uuid: first.uuid, sent_count: 2, state: 'pending' });
  t.true(Date.parse(res.body.data.expires_at) > Date.now() + 6 * 86_400_000);
  const again = await s.api('POST', `${base()}${first.uuid}/resend/`, { token: owner.access });
  t.is(again.body.data.sent_count, 3);
  const mails = smtp.to('resend.me@example.com');
  t.is(mails.length, 3);
  t.is(new Set(mails.map(tokenFrom)).size, 1);
});

test('bad input: 400 with field messages, nothing saved, nothing sent', async (t) => {
  await makeGroup(s, 'Known group');
  const addresses = ['not-an-email', 'a@example.com', owner.email];
  const mailsTo = () => addresses.reduce((n, a) => n + smtp.to(a).length, 0);
  const before = await invitationCount(s, addresses);
  const mailsBefore = mailsTo();
  const cases: [unknown, string, RegExp?][] = [
    [{ invitee_identifier: 'not-an-email' }, 'invitee_identifier', /valid email/],
    [{}, 'invitee_identifier', /required/],
    [{ invitee_identifier: 'a@example.com', permissions: ['fly'] }, 'permissions.0', /Must be one of/],
    [{ invitee_identifier: 'a@example.com', permissions: ['view_site'] }, 'permissions.0', /Must be one of/],
    [{ invitee_identifier: 'a@example.com', invitation_config: { site: [{ slug: 'no-such-site', permissions: ['view_site'] }] } }, 'invitation_config.site.0.slug', /not a site of organization/],
    [{ invitee_identifier: 'a@example.com', invitation_config: { site: [{ slug: other.site, permissions: ['view_site'] }] } }, 'invitation_config.site.0.slug', /not a site of organization/],
    [{ invitee_identifier: 'a@example.com', invitation_config: { site: [{ slug: org.site, permissions: ['invite_members'] }] } }, 'invitation_config.site.0.permissions.0', /Must be one of: view_site/],
    [{ invitee_identifier: 'a@example.com', invitation_config: { group: ['Known group', 'Nope'] } }, 'invitation_config.group.1', /Group "Nope" does not exist/],
    [{ invitee_identifier: 'a@example.com', invitation_config: { group: [999999] } }, 'invitation_config.group.0', /Group 999999 does not exist/],
    [{ invitee_identifier: 'a@example.com', invitation_config: { roles: [] } }, 'invitation_config.roles', /Unknown field/],
    [{ invitee_identifier: 'a@example.com', token: crypto.randomUUID() }, 'token', /Unknown field/],
    [{ invitee_identifier: owner.email }, 'invitee_identifier', /already a member/],
  ];
  for (const [body, field, text] of cases) {
    const res = await invite(body);
    t.is(res.status, 400, JSON.stringify(body));
    t.is(res.body.code, 'VALIDATION_ERROR');
    t.truthy(res.body.errors?.[field], `${JSON.stringify(body)} → ${res.text}`);
    if (text) t.regex(res.body.errors[field].join(' '), text);
  }
  t.is(await invitationCount(s, addresses), before);
  t.is(mailsTo(), mailsBefore);
  // A second pending invitation for the same address is refused.
  t.is((await invite({ invitee_identifier: 'twice@example.com' })).status, 201);
  const dup = await invite({ invitee_identifier: 'TWICE@example.com' });
  t.is(dup.status, 400);
  t.regex(dup.body.errors.invitee_identifier[0], /pending invitation/);
});

test('who may invite: invite_members needed (403), non-members get 404, nobody grants what they lack', async (t) => {
  const plain = await makeUser(s, root, 'plain');
  const inviter = await makeUser(s, root, 'inviter');
  const stranger = await makeUser(s, root, 'stranger');
  await addMember(s, org.uuid, plain.uuid);
  await addMember(s, org.uuid, inviter.uuid, ['invite_members']);
  const body = { invitee_identifier: 'via.member@example.com' };
  for (const [method, path] of [['POST', base()], ['GET', base()]] as const) {
    const denied = await s.api(method, path, { token: plain.access, body: method === 'POST' ? body : undefined });
    t.is(denied.status, 403);
    t.is(denied.body.code, 'PERMISSION_DENIED');
    const hidden = await s.api(method, path, { token: stranger.access, body: method === 'POST' ? body : undefined });
    t.is(hidden.status, 404);
  }
  t.is((await s.api('POST', base(), { body })).status, 401);
  const tooMuch = await invite({ ...body, permissions: ['change_organization'] }, inviter.access);
  t.is(tooMuch.status, 403);
  t.regex(tooMuch.body.message, /do not hold: change_organization/);
  const site = await invite({ ...body, invitation_config: { site: [{ slug: org.site, permissions: ['view_site'] }] } }, inviter.access);
  t.is(site.status, 403);
  t.regex(site.body.message, new RegExp(`view_site on site ${org.site}`));
  const groupId = await makeGroup(s, 'Site changers', ['change_site']);
  const viaGroup = await invite({ ...body, invitation_config: { group: [groupId] } }, inviter.access);
  t.is(viaGroup.status, 403);
  t.regex(viaGroup.body.message, /change_site \(group "Site changers"\)/);
  const ok = await invite({ ...body, permissions: ['invite_members'] }, inviter.access);
  t.is(ok.status, 201, ok.text);
  t.is(ok.body.data.invited_by, inviter.username);
  t.is((await s.api('GET', base(), { token: inviter.access })).status, 200);
});

test('tokens never appear in the log; the public paths are logged redacted', async (t) => {
  await invite({ invitee_identifier: 'logged@example.com' });
  const token = tokenFrom(smtp.to('logged@example.com')[0]);
  t.is((await s.api('GET', `/api/cloud/invitations/${token}/details/`)).status, 200);
  t.is((await s.api('POST', `/api/cloud/invitations/${token}/accept/`)).status, 200);
  t.is((await s.api('POST', `/api/cloud/invitations/${token}/accept/`)).status, 400);
  const all = logged.lines.join('');
  t.true(all.includes('/api/cloud/invitations/[token]/accept/'));
  t.true(all.includes('"to":"logged@example.com"'));
  for (const mail of smtp.messages) t.false(all.includes(tokenFrom(mail)));
});
