// Fixtures of the site and domain suites: users with tokens (through the API), organizations,
// memberships and object grants (straight in the database, so these suites do not depend on
// the organization routes).
import { randomBytes, randomUUID } from 'node:crypto';
import type { DnsStandIn } from '../../shared/testing/dns.ts';
import type { TestServer } from './helpers.ts';

export interface TestUser {
  uuid: string;
  username: string;
  email: string;
  token: string;
}

export const FIXTURE_PASSWORD = 'site-fixture-pass-1';

export async function makeUser(s: TestServer, rootToken: string, username = `u-${randomBytes(4).toString('hex')}`): Promise<TestUser> {
  const email = `${username}@example.com`;
  const res = await s.api('POST', '/api/cloud/users/', { token: rootToken, body: { username, email, password: FIXTURE_PASSWORD, first_name: 'Fix', last_name: 'Ture' } });
  if (res.status !== 201) throw new Error(`user create failed: ${res.text}`);
  const token = (await s.login(username, FIXTURE_PASSWORD)).access;
  return { uuid: res.body.data.uuid, username, email, token };
}

export interface OrgMember {
  uuid: string;
  owner?: boolean;
  admin?: boolean;
}

export async function makeOrg(s: TestServer, slug = `org-${randomBytes(4).toString('hex')}`, members: OrgMember[] = []): Promise<{ uuid: string; slug: string }> {
  const em = s.handle.db.orm.em.fork();
  const uuid = randomUUID();
  await em.execute('INSERT INTO public.organizations (uuid, name, slug) VALUES (?, ?, ?)', [uuid, slug.toUpperCase(), slug]);
  for (const m of members) {
    await em.execute('INSERT INTO public.organization_members (uuid, organization_uuid, user_uuid, is_owner, is_admin) VALUES (?, ?, ?, ?, ?)', [
      randomUUID(),
      uuid,
      m.uuid,
      m.owner ?? false,
      m.admin ?? m.owner ?? false,
    ]);
  }
  return { uuid, slug };
}

/** Direct object grants of `permissions` on one site to one user. */
export async function grantSite(s: TestServer, userUuid: string, siteUuid: string, permissions: string[]): Promise<void> {
  const em = s.handle.db.orm.em.fork();
  await em.execute(
    `INSERT INTO public.object_permissions (user_uuid, permission_id, object_type, object_uuid)
     SELECT ?, id, 'site', ? FROM public.permissions WHERE codename IN (?)`,
    [userUuid, siteUuid, permissions],
  );
}

/** Rows of a query on the test database (state read back). */
export async function sql<T = Record<string, any>>(s: TestServer, text: string, params: unknown[] = []): Promise<T[]> {
  return (await s.handle.db.orm.em.fork().execute(text, params)) as T[];
}

export const schemaExists = async (s: TestServer, schema: string): Promise<boolean> =>
  (await sql(s, 'SELECT 1 FROM information_schema.schemata WHERE schema_name = ?', [schema])).length === 1;

/**
 * Proves a customer domain as its owner would (docs/domains.md): publishes the TXT record its
 * `verification` names at the DNS stand-in the server asks (DNS_SERVERS), then POSTs …/verify/.
 * The verified domain's view.
 */
export async function verifyDomain(s: TestServer, dns: DnsStandIn, token: string, site: string, host: string): Promise<Record<string, any>> {
  const path = `/api/cloud/sites/${site}/domains/${host}/`;
  const domain = await s.api('GET', path, { token });
  if (domain.status !== 200 || !domain.body.verification) throw new Error(`no verification record for ${host}: ${domain.text}`);
  dns.setTxt(domain.body.verification.name, [domain.body.verification.value]);
  const res = await s.api('POST', `${path}verify/`, { token });
  if (res.status !== 200 || !res.body.is_verified) throw new Error(`verification of ${host} failed: ${res.text}`);
  return res.body;
}
