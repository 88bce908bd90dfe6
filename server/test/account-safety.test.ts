// Account safety: a self-service e-mail change waits for the link mailed to the new address
// (and counts for nothing until then), e-mail uniqueness covers deleted users, a superuser
// restores a deleted user, and a password change through PUT needs the old password.
import test from 'ava';
import { startTestServer, type TestServer } from './helpers.ts';
import { makeUser, sql, startSmtpSink, type CapturedMail, type SmtpSink } from './invitation-helpers.ts';

let s: TestServer;
let smtp: SmtpSink;
let root: string;

test.before(async () => {
  smtp = await startSmtpSink();
  s = await startTestServer({ SMTP_URL: smtp.url });
  root = (await s.login()).access;
});
test.after.always(async () => {
  await s?.close();
  await smtp?.close();
});

const CONFIRM_LINK = /\/api\/profile\/confirm-email\/([0-9a-f-]{36})\//;
function confirmToken(mail: CapturedMail | undefined): string {
  const m = mail && CONFIRM_LINK.exec(mail.text);
  if (!m) throw new Error(`no confirmation link in:\n${mail?.text}`);
  return m[1];
}
const confirm = (token: string) => s.api('POST', `/api/profile/confirm-email/${token}/`);
const loginStatus = async (username: string, password = 'Invite-test-pw-1') =>
  (await s.api('POST', '/api/auth/jwt/token/', { body: { username, password } })).status;

test('a new e-mail of your own waits for its confirmation link; until then it counts for nothing', async (t) => {
  const u = await makeUser(s, root, 'mover');
  const next = `${u.username}-new@example.org`;
  const put = await s.api('PUT', '/api/profile/', { token: u.access, body: { email: next } });
  t.is(put.status, 200, put.text);
  t.like(put.body, { email: u.email, pending_email: next });
  const mails = smtp.to(next);
  t.is(mails.length, 1);
  t.is(smtp.to(u.email).length, 0);
  // Not usable to sign in, not reserved: another account may still take it first.
  t.is(await loginStatus(next), 401);
  const token = confirmToken(mails[0]);
  t.false(JSON.stringify(put.body).includes(token));
  const done = await confirm(token);
  t.is(done.status, 200, done.text);
  t.deepEqual(done.body.data, { username: u.username, email: next });
  t.like((await s.api('GET', '/api/profile/', { token: u.access })).body, { email: next, pending_email: '' });
  t.is(await loginStatus(next), 200);
  t.is((await confirm(token)).status, 404, 'single use');
  t.is((await confirm('not-a-uuid')).status, 400);
});

test('the same holds through PUT /api/cloud/users/{me}/; an operator sets another user\'s address at once', async (t) => {
  const u = await makeUser(s, root, 'self');
  const mine = await s.api('PUT', `/api/cloud/users/${u.username}/`, { token: u.access, body: { email: `${u.username}-x@example.org` } });
  t.like(mine.body, { email: u.email, pending_email: `${u.username}-x@example.org` });
  const byRoot = await s.api('PUT', `/api/cloud/users/${u.username}/`, { token: root, body: { email: `${u.username}-y@example.org` } });
  t.is(byRoot.status, 200, byRoot.text);
  t.is(byRoot.body.email, `${u.username}-y@example.org`);
  t.is(smtp.to(`${u.username}-y@example.org`).length, 0);
});

test('a link whose address another account took meanwhile, or an expired one, changes nothing', async (t) => {
  const a = await makeUser(s, root, 'slow');
  const wanted = `${a.username}-wanted@example.org`;
  await s.api('PUT', '/api/profile/', { token: a.access, body: { email: wanted } });
  const token = confirmToken(smtp.to(wanted).at(-1));
  t.is((await s.api('POST', '/api/cloud/users/', { token: root, body: { username: `${a.username}-fast`, email: wanted, password: 'Invite-test-pw-1' } })).status, 201);
  const taken = await confirm(token);
  t.is(taken.status, 400);
  t.is(taken.body.message, 'Another account uses this e-mail address now; the change was not made.');
  t.like((await s.api('GET', '/api/profile/', { token: a.access })).body, { email: a.email, pending_email: '' });

  const later = `${a.username}-later@example.org`;
  await s.api('PUT', '/api/profile/', { token: a.access, body: { email: later } });
  const old = confirmToken(smtp.to(later).at(-1));
  await sql(s, `UPDATE public.email_confirmations SET expires_at = now() - interval '1 minute' WHERE token = ?`, [old]);
  const expired = await confirm(old);
  t.is(expired.status, 400);
  t.regex(expired.body.message, /expired/);
  t.is((await s.api('GET', '/api/profile/', { token: a.access })).body.email, a.email);
});

test('a taken address is refused at once, also when it belongs to a deleted user; a superuser restores the deleted user', async (t) => {
  const gone = await makeUser(s, root, 'gone');
  t.is((await s.api('DELETE', `/api/cloud/users/${gone.username}/`, { token: root })).status, 200);
  const reuse = await s.api('POST', '/api/cloud/users/', { token: root, body: { username: `${gone.username}-2`, email: gone.email, password: 'Invite-test-pw-1' } });
  t.is(reuse.status, 400);
  t.deepEqual(reuse.body.errors, { email: ['A user with that e-mail already exists.'] });
  const u = await makeUser(s, root, 'claimer');
  const claim = await s.api('PUT', '/api/profile/', { token: u.access, body: { email: gone.email.toUpperCase() } });
  t.is(claim.status, 400);
  t.deepEqual(claim.body.errors, { email: ['A user with that e-mail already exists.'] });
  t.is(await loginStatus(gone.username), 401);
  // Restore: superusers only; the account signs in again.
  const staff = await makeUser(s, root, 'staff');
  await s.api('PUT', `/api/cloud/users/${staff.username}/`, { token: root, body: { is_staff: true } });
  const staffToken = (await s.login(staff.username, 'Invite-test-pw-1')).access;
  t.is((await s.api('PUT', `/api/cloud/users/${gone.username}/`, { token: staffToken, body: { is_deleted: false } })).status, 403);
  const restored = await s.api('PUT', `/api/cloud/users/${gone.username}/`, { token: root, body: { is_deleted: false } });
  t.is(restored.status, 200, restored.text);
  t.like(restored.body, { is_deleted: false, is_active: true, email: gone.email });
  t.is(await loginStatus(gone.username), 200);
  const del = await s.api('PUT', `/api/cloud/users/${u.username}/`, { token: root, body: { is_deleted: true } });
  t.is(del.status, 400);
  t.deepEqual(del.body.errors, { is_deleted: ['Delete a user with DELETE.'] });
});

test('a password change through PUT needs the old password, except a superuser resetting someone else\'s', async (t) => {
  const u = await makeUser(s, root, 'pw');
  const me = `/api/cloud/users/${u.username}/`;
  const none = await s.api('PUT', me, { token: u.access, body: { password: 'Brand-new-pass-1' } });
  t.is(none.status, 400);
  t.deepEqual(none.body.errors, { old_password: ['Your current password is required to set a new one.'] });
  const wrong = await s.api('PUT', me, { token: u.access, body: { password: 'Brand-new-pass-1', old_password: 'nope-nope-1' } });
  t.is(wrong.status, 400);
  t.deepEqual(wrong.body.errors, { old_password: ['Your old password was entered incorrectly.'] });
  const alone = await s.api('PUT', me, { token: u.access, body: { old_password: 'Invite-test-pw-1' } });
  t.is(alone.status, 400);
  t.is(await loginStatus(u.username), 200, 'nothing changed');
  const ok = await s.api('PUT', me, { token: u.access, body: { password: 'Brand-new-pass-1', old_password: 'Invite-test-pw-1' } });
  t.is(ok.status, 200, ok.text);
  t.is((await s.api('GET', '/api/profile/', { token: u.access })).status, 401, 'earlier tokens revoked');
  t.is(await loginStatus(u.username, 'Brand-new-pass-1'), 200);
  // Staff administer users but do not set their passwords blind; superusers do.
  const staff = await makeUser(s, root, 'pwstaff');
  await s.api('PUT', `/api/cloud/users/${staff.username}/`, { token: root, body: { is_staff: true } });
  const staffToken = (await s.login(staff.username, 'Invite-test-pw-1')).access;
  t.is((await s.api('PUT', me, { token: staffToken, body: { password: 'Staff-set-pass-1' } })).status, 400);
  t.is((await s.api('PUT', me, { token: root, body: { password: 'Root-set-pass-1' } })).status, 200);
  t.is(await loginStatus(u.username, 'Root-set-pass-1'), 200);
});

test('GET, change one field, PUT back: users (as the user and as a superuser) and the profile', async (t) => {
  const u = await makeUser(s, root, 'roundtrip');
  for (const [path, token] of [[`/api/cloud/users/${u.username}/`, u.access], [`/api/cloud/users/${u.username}/`, root], ['/api/profile/', u.access]] as const) {
    const got = (await s.api('GET', path, { token })).body;
    const put = await s.api('PUT', path, { token, body: { ...got, first_name: `${got.first_name}x` } });
    t.is(put.status, 200, `${path}: ${put.text}`);
    t.is(put.body.first_name, `${got.first_name}x`);
    const changed = await s.api('PUT', path, { token, body: { ...put.body, date_joined: '2001-01-01T00:00:00Z' } });
    t.is(changed.status, 400);
    t.deepEqual(changed.body.errors, { date_joined: ['This field is read-only and cannot be changed.'] });
  }
});

test('when the confirmation mail cannot be sent, the whole update changes nothing', async (t) => {
  const down = await startTestServer({ SMTP_URL: 'smtp://127.0.0.1:9' });
  t.teardown(() => down.close());
  const token = (await down.login()).access;
  const res = await down.api('PUT', '/api/profile/', { token, body: { first_name: 'Changed', email: 'unreachable@example.org' } });
  t.is(res.status, 502, res.text);
  t.like((await down.api('GET', '/api/profile/', { token })).body, { first_name: '', pending_email: '' });
  t.is((await down.handle.db.orm.em.fork().execute('SELECT 1 FROM public.email_confirmations')).length, 0);
});
