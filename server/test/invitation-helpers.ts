// Invitation test fixtures: a real SMTP server in-process (smtp-server) that keeps every
// message, a log that keeps every line, and organizations/groups/sites made straight in the
// database (the organization, site and group APIs are not what these suites test).
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { EntityManager } from '@mikro-orm/postgresql';
import { SMTPServer } from 'smtp-server';
import { createTestSite } from '../../shared/testing/sites.ts';
import type { TestServer } from './helpers.ts';

export interface CapturedMail {
  from: string;
  to: string[];
  raw: string;
  /** The message with quoted-printable soft breaks and escapes undone (good enough to find links). */
  text: string;
}

/** `=\r\n` soft breaks and `=XX` escapes of quoted-printable, undone. */
export const decodeQp = (raw: string): string =>
  raw.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));

export interface SmtpSink {
  url: string;
  messages: CapturedMail[];
  /** The messages sent to `address` (case-insensitive). */
  to(address: string): CapturedMail[];
  close(): Promise<void>;
}

export async function startSmtpSink(): Promise<SmtpSink> {
  const messages: CapturedMail[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
        messages.push({ from, to: session.envelope.rcptTo.map((r) => r.address), raw, text: decodeQp(raw) });
        callback();
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.server.address() as AddressInfo;
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    to: (address) => messages.filter((m) => m.to.some((a) => a.toLowerCase() === address.toLowerCase())),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const TOKEN_IN_LINK = /\/api\/cloud\/invitations\/([0-9a-f-]{36})\/details\//;

/** The token of the last invitation e-mail to `address`. */
export function tokenFrom(mail: CapturedMail | undefined): string {
  const m = mail && TOKEN_IN_LINK.exec(mail.text);
  if (!m) throw new Error(`no invitation link in the message:\n${mail?.text}`);
  return m[1];
}

export const em = (s: TestServer): EntityManager => s.handle.db.orm.em.fork() as EntityManager;

export const sql = <T = Record<string, any>>(s: TestServer, text: string, params: unknown[] = []): Promise<T[]> =>
  em(s).execute(text, params) as Promise<T[]>;

let n = 0;
/** A platform user made through the API (as root), with a login. */
export async function makeUser(s: TestServer, root: string, prefix = 'user'): Promise<{ uuid: string; username: string; email: string; access: string }> {
  n++;
  const username = `${prefix}-${n}-${randomBytes(3).toString('hex')}`;
  const email = `${username}@example.com`;
  const res = await s.api('POST', '/api/cloud/users/', { token: root, body: { username, email, password: 'Invite-test-pw-1' } });
  if (res.status !== 201) throw new Error(`user create failed: ${res.text}`);
  const { access } = await s.login(username, 'Invite-test-pw-1');
  return { uuid: res.body.data.uuid, username, email, access };
}

/** An organization owned by `ownerUuid` with one site (migrated schema), plus a second site row. */
export async function makeOrg(s: TestServer, ownerUuid: string) {
  const site = await createTestSite(em(s), { ownerUuid });
  const [org] = await sql<{ slug: string; name: string }>(s, 'SELECT slug, name FROM public.organizations WHERE uuid = ?', [site.organizationUuid]);
  const second = `extra-${randomBytes(4).toString('hex')}`;
  await sql(s, `INSERT INTO public.sites (uuid, slug, name, schema_name, environment, organization_uuid) VALUES (?, ?, ?, ?, 'production', ?)`, [
    crypto.randomUUID(),
    second,
    `Extra ${second}`,
    second.replace(/-/g, '_'),
    site.organizationUuid,
  ]);
  return { uuid: site.organizationUuid, slug: org.slug, name: org.name, site: site.slug, siteUuid: site.uuid, secondSite: second };
}

/** A member (not admin) of the organization, optionally with organization permissions as object grants. */
export async function addMember(s: TestServer, orgUuid: string, userUuid: string, permissions: string[] = []): Promise<void> {
  await sql(s, 'INSERT INTO public.organization_members (uuid, organization_uuid, user_uuid) VALUES (?, ?, ?)', [crypto.randomUUID(), orgUuid, userUuid]);
  for (const p of permissions) {
    await sql(
      s,
      `INSERT INTO public.object_permissions (user_uuid, permission_id, object_type, object_uuid)
       SELECT ?::uuid, id, 'organization', ?::uuid FROM public.permissions WHERE codename = ?`,
      [userUuid, orgUuid, p],
    );
  }
}

/** A group, optionally carrying model-level permissions (group_permissions). */
export async function makeGroup(s: TestServer, name: string, permissions: string[] = []): Promise<number> {
  const [row] = await sql<{ id: number }>(s, 'INSERT INTO public.groups (name) VALUES (?) RETURNING id', [name]);
  for (const p of permissions) {
    await sql(s, 'INSERT INTO public.group_permissions (group_id, permission_id) SELECT ?, id FROM public.permissions WHERE codename = ?', [row.id, p]);
  }
  return row.id;
}

/** Invitations for these addresses (tests in a file run concurrently: never count them all). */
export async function invitationCount(s: TestServer, addresses: string[]): Promise<number> {
  const [row] = await sql<{ n: number }>(s, 'SELECT count(*)::int AS n FROM public.invitations WHERE lower(invitee_identifier) IN (?)', [
    addresses.map((a) => a.toLowerCase()),
  ]);
  return row.n;
}
