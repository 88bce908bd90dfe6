// `platform invite list|create|get|cancel|resend` in both modes: identical output (ids, times and
// the inviter aside: direct mode acts as the system actor), the e-mail received by a real SMTP
// server in both modes, and the outbox in direct mode without SMTP_URL.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { decodeQp, makeGroup, makeOrg, makeUser, startSmtpSink, tokenFrom, type SmtpSink } from '../../server/test/invitation-helpers.ts';
import { bothModesMacro, cliEnv, json, runCli, storeLogin, tempConfigDir, volatile, type Mode } from './helpers.ts';

let s: TestServer;
let smtp: SmtpSink;
let configDir: string;
let root: string;
let org: Awaited<ReturnType<typeof makeOrg>>;
let groupId: number;
const seeded = {} as Record<Mode, { id: number; uuid: string; token: string }[]>;
const both = bothModesMacro(() => cliEnv(s, configDir, { SMTP_URL: smtp.url }));

// What may differ between the modes: ids, times, the mode in names, and the inviter (root vs the system actor).
const normalize = (text: string) =>
  volatile(text)
    .replace(/("invited_by": )("root"|null)/g, '$1<inviter>')
    .replace(/^(invited_by:\s+)(root|-)$/gm, '$1<inviter>')
    .replace(/("id": )\d+/g, '$1<id>')
    .replace(/^(id:\s+)\d+$/gm, '$1<id>');

const api = (method: string, p: string) => s.api(method, p, { token: root });
const base = () => `/api/cloud/organizations/${org.slug}/invitations/`;

test.before(async () => {
  smtp = await startSmtpSink();
  s = await startTestServer({ SMTP_URL: smtp.url });
  configDir = tempConfigDir();
  await storeLogin(s, configDir);
  root = (await s.login()).access;
  const owner = await makeUser(s, root, 'owner');
  org = await makeOrg(s, owner.uuid);
  groupId = await makeGroup(s, 'CLI group');
  for (const mode of ['remote', 'direct'] as Mode[]) {
    seeded[mode] = [];
    for (const what of ['get', 'cancel', 'resend']) {
      const email = `${what}-${mode}@example.com`;
      const res = await s.api('POST', base(), { token: root, body: { invitee_identifier: email } });
      if (res.status !== 201) throw new Error(`seed failed: ${res.text}`);
      seeded[mode].push({ id: res.body.data.id, uuid: res.body.data.uuid, token: tokenFrom(smtp.to(email)[0]) });
    }
  }
});
test.after.always(async () => {
  await s?.close();
  await smtp?.close();
  if (configDir) fs.rmSync(configDir, { recursive: true, force: true });
});

test('invite create --json: the API body; the e-mail reaches the SMTP server in both modes', both, {
  args: (mode) => [
    'invite', 'create', '--org', org.slug, '--email', `new-${mode}@example.com`, '--permission', 'view_organization',
    '--site', `${org.site}:view_site,access_site`, '--json',
  ],
  normalize,
  async check(t, r, mode) {
    t.is(r.code, 0, r.stderr);
    t.is(r.stderr, '');
    const body = json(r);
    t.is(body.message, 'Invitation created and sent.');
    t.like(body.data, { invitee_identifier: `new-${mode}@example.com`, state: 'pending', permissions: ['view_organization'], invited_by: mode === 'remote' ? 'root' : null });
    t.deepEqual(body.data.invitation_config, { site: [{ slug: org.site, permissions: ['view_site', 'access_site'] }] });
    t.deepEqual((await api('GET', `${base()}${body.data.uuid}/`)).body, body.data);
    const [mail] = smtp.to(`new-${mode}@example.com`);
    const token = tokenFrom(mail);
    t.true(mail.text.includes(`${s.url}/api/cloud/invitations/${token}/accept/`));
    t.false(r.stdout.includes(token));
  },
});

test('invite create: readable output; groups by name', both, {
  args: (mode) => ['invite', 'create', '--org', org.slug, '--email', `text-${mode}@example.com`, '--group', 'CLI group'],
  normalize,
  check(t, r) {
    t.is(r.code, 0, r.stderr);
    const lines = r.stdout.split('\n');
    t.is(lines[0], 'Invitation created and sent.');
    t.true(lines.includes(`invitation_config:  {"group":[${groupId}]}`), r.stdout);
    t.regex(r.stdout, /^state:\s+pending$/m);
    t.regex(r.stdout, /^sent_count:\s+1$/m);
  },
});

test('invite list --json equals the API body; the table lists them', async (t) => {
  for (const mode of ['remote', 'direct'] as Mode[]) {
    const extra = mode === 'direct' ? ['--direct'] : [];
    const env = cliEnv(s, configDir, { SMTP_URL: smtp.url });
    const r = await runCli(['invite', 'list', '--org', org.slug, '--search', 'get-', '--json', ...extra], env);
    t.is(r.code, 0, r.stderr);
    t.deepEqual(json(r), (await api('GET', `${base()}?search=get-`)).body);
    t.is(json(r).count, 2);
    const table = await runCli(['invite', 'list', '--org', org.slug, '--search', 'get-', ...extra], env);
    t.regex(table.stdout, /^ID\s+E-MAIL\s+STATE\s+INVITED BY\s+SENT\s+EXPIRES\s+UUID$/m);
    t.regex(table.stdout, /get-direct@example\.com\s+pending\s+root\s+1/);
    t.regex(table.stdout, /\n\n2 invitations$/m);
  }
});

test('invite get by UUID', both, {
  args: (mode) => ['invite', 'get', seeded[mode][0].uuid, '--org', org.slug],
  normalize,
  check(t, r) {
    t.is(r.code, 0, r.stderr);
    t.regex(r.stdout, /^invitee_identifier:\s+get-(remote|direct)@example\.com$/m);
  },
});

test('invite cancel: message; the token is refused afterwards', both, {
  args: (mode) => ['invite', 'cancel', seeded[mode][1].uuid, '--org', org.slug],
  async check(t, r, mode) {
    t.is(r.code, 0, r.stderr);
    t.is(r.stdout, 'Invitation cancelled.\n');
    const accept = await s.api('POST', `/api/cloud/invitations/${seeded[mode][1].token}/accept/`);
    t.is(accept.status, 400);
  },
});

test('invite resend by integer id: same token, sent twice', both, {
  args: (mode) => ['invite', 'resend', String(seeded[mode][2].id), '--org', org.slug, '--json'],
  normalize,
  check(t, r, mode) {
    t.is(r.code, 0, r.stderr);
    t.like(json(r), { status: 'success', message: 'Invitation sent again.', data: { sent_count: 2 } });
    const mails = smtp.to(`resend-${mode}@example.com`);
    t.is(mails.length, 2);
    t.is(tokenFrom(mails[1]), seeded[mode][2].token);
  },
});

test('bad input: one-line errors naming the field, exit 1, identical in both modes', both, {
  args: () => ['invite', 'create', '--org', org.slug, '--email', 'x@example.com', '--site', 'no-such-site:view_site'],
  check(t, r) {
    t.is(r.code, 1);
    t.is(r.stdout, '');
    t.is(r.stderr, `Error: Invalid input.\n  invitation_config.site.0.slug: Site "no-such-site" is not a site of organization "${org.slug}".\n`);
  },
});

test('a malformed --site is refused before any request', both, {
  args: ['invite', 'create', '--org', 'any', '--email', 'x@example.com', '--site', 'no-colon'],
  check(t, r) {
    t.is(r.code, 1);
    t.is(r.stderr, 'Error: Invalid --site "no-colon": expected slug:permission[,permission…].\n');
  },
});

test('unknown organization: 404 message in both modes', both, {
  args: ['invite', 'list', '--org', 'no-such-org'],
  check(t, r) {
    t.is(r.code, 1);
    t.is(r.stderr, 'Error: Organization not found.\n');
  },
});

test('direct mode without SMTP_URL writes the e-mail to <PLATFORM_DATA_DIR>/outbox', async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-cli-outbox-'));
  try {
    const env = cliEnv(s, configDir, { PLATFORM_DATA_DIR: dataDir });
    const r = await runCli(['invite', 'create', '--org', org.slug, '--email', 'boxed@example.com', '--json', '--direct'], env);
    t.is(r.code, 0, r.stderr);
    t.is(r.stderr, '');
    const files = fs.readdirSync(path.join(dataDir, 'outbox'));
    t.is(files.length, 1);
    const raw = decodeQp(fs.readFileSync(path.join(dataDir, 'outbox', files[0]), 'utf8'));
    t.regex(raw, /^To: boxed@example\.com\r$/m);
    const token = tokenFrom({ from: '', to: [], raw, text: raw });
    t.true(raw.includes(`${s.url}/api/cloud/invitations/${token}/details/`));
    t.is((await s.api('GET', `/api/cloud/invitations/${token}/details/`)).body.invitee_identifier, 'boxed@example.com');
    // With logging on, the line on stderr names the file, not the token.
    const logged = await runCli(['invite', 'create', '--org', org.slug, '--email', 'boxed2@example.com', '--direct'], { ...env, LOG_LEVEL: 'info' });
    t.is(logged.code, 0, logged.stderr);
    t.regex(logged.stderr, /"msg":"mail written to outbox"/);
    t.regex(logged.stderr, /"to":"boxed2@example\.com"/);
    t.notRegex(logged.stderr, /\/invitations\/[0-9a-f-]{36}\//);
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});
