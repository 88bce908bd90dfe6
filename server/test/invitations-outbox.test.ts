// Mail without SMTP_URL: each message is an .eml file under <PLATFORM_DATA_DIR>/outbox/, and the
// log says where (never the token). With an unreachable SMTP server: 502, nothing saved.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { capturingLog, startTestServer, type TestServer } from './helpers.ts';
import { decodeQp, invitationCount, makeOrg, makeUser } from './invitation-helpers.ts';

let dataDir: string;
let outbox: TestServer;
let broken: TestServer;
const logged = capturingLog();

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

test.before(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-outbox-test-'));
  [outbox, broken] = await Promise.all([
    startTestServer({ PLATFORM_DATA_DIR: dataDir, PLATFORM_PUBLIC_URL: 'https://platform.example.com' }, { log: logged.log }),
    closedPort().then((port) => startTestServer({ SMTP_URL: `smtp://127.0.0.1:${port}` })),
  ]);
});
test.after.always(async () => {
  await outbox?.close();
  await broken?.close();
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
});

async function ownerAndOrg(s: TestServer) {
  const root = (await s.login()).access;
  const owner = await makeUser(s, root, 'owner');
  return { owner, org: await makeOrg(s, owner.uuid) };
}

test('without SMTP_URL the e-mail is an .eml file in the outbox; links use PLATFORM_PUBLIC_URL', async (t) => {
  const { owner, org } = await ownerAndOrg(outbox);
  const res = await outbox.api('POST', `/api/cloud/organizations/${org.slug}/invitations/`, { token: owner.access, body: { invitee_identifier: 'boxed@example.com' } });
  t.is(res.status, 201, res.text);
  const dir = path.join(dataDir, 'outbox');
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.eml'));
  t.is(files.length, 1);
  const file = path.join(dir, files[0]);
  t.is(fs.statSync(file).mode & 0o777, 0o600);
  const raw = fs.readFileSync(file, 'utf8');
  t.regex(raw, /^To: boxed@example\.com\r$/m);
  t.regex(raw, /^Subject: Invitation to join /m);
  t.regex(raw, /\r\n/); // RFC 822 line ends
  const m = /https:\/\/platform\.example\.com\/api\/cloud\/invitations\/([0-9a-f-]{36})\/details\//.exec(decodeQp(raw));
  t.truthy(m);
  const token = m![1];
  t.true(decodeQp(raw).includes(`https://platform.example.com/api/cloud/invitations/${token}/accept/`));
  // The log line names the recipient and the file, not the token.
  const line = logged.lines.find((l) => l.includes('mail written to outbox'));
  t.truthy(line);
  t.like(JSON.parse(line!), { to: 'boxed@example.com', file });
  t.false(logged.lines.join('').includes(token));
  // The token works.
  t.is((await outbox.api('POST', `/api/cloud/invitations/${token}/accept/`)).status, 200);
});

test('an unreachable SMTP server: 502 BAD_GATEWAY and no invitation saved', async (t) => {
  const { owner, org } = await ownerAndOrg(broken);
  const before = await invitationCount(broken, ['lost@example.com']);
  const res = await broken.api('POST', `/api/cloud/organizations/${org.slug}/invitations/`, { token: owner.access, body: { invitee_identifier: 'lost@example.com' } });
  t.is(res.status, 502, res.text);
  t.like(res.body, { status: 'error', code: 'BAD_GATEWAY' });
  t.regex(res.body.message, /could not be sent/);
  t.is(await invitationCount(broken, ['lost@example.com']), before);
});
