// Site users for tenant-scoped suites: two sites, with users seeded straight in the site's
// schema and signed in on the site's host.
import { hashPassword } from '../../shared/auth/passwords.ts';
import { siteEmOf } from '../../shared/db/clusters.ts';
import { createTestSite, type TestSite } from '../../shared/testing/sites.ts';
import type { TestServer } from './helpers.ts';

export const SITE_PASSWORD = 'Site-pass-word-1';

export interface SeedOptions {
  /** Site staff (administers the site). */
  staff?: boolean;
  /** Site superuser (also staff). */
  superuser?: boolean;
  email?: string;
  /** Whether the site trusts the e-mail (users.email_verified). */
  emailVerified?: boolean;
}

/** A site user with SITE_PASSWORD, seeded straight in the site's schema. Returns its UUID. */
export async function seedSiteUser(server: TestServer, site: TestSite, username: string, o: SeedOptions = {}): Promise<string> {
  // On the site's cluster (TEST_SITES_ON_CLUSTER puts sites on another: db/clusters.ts).
  const [row] = await (await siteEmOf(server.handle.db.orm.em.fork(), site.schema))
    .execute(`INSERT INTO "${site.schema}".users (uuid, username, password, is_staff, is_superuser, email, email_verified) VALUES (gen_random_uuid(), ?, ?, ?, ?, ?, ?) RETURNING uuid`, [
      username,
      await hashPassword(SITE_PASSWORD),
      (o.staff ?? false) || (o.superuser ?? false),
      o.superuser ?? false,
      o.email ?? '',
      o.emailVerified ?? false,
    ]);
  return row.uuid as string;
}

/** An access token of that site user, issued on the site's host. */
export async function siteToken(server: TestServer, site: TestSite, username: string): Promise<string> {
  const res = await server.api('POST', '/api/auth/jwt/token/', { host: site.domain, body: { username, password: SITE_PASSWORD } });
  if (res.status !== 200) throw new Error(res.text);
  return res.body.access;
}

export interface TwoSites {
  a: TestSite;
  b: TestSite;
  /** The UUID of `boss`, site A's administrator. */
  adminUuid: string;
}

/**
 * Sites A and B of one server, with `boss` (site administrator) and `pleb` on A and `boss` on
 * B, signed in: their tokens go into `tok` as adminA, pleb and adminB.
 */
export async function twoSitesWithUsers(server: TestServer, tok: Record<string, string>): Promise<TwoSites> {
  const em = server.handle.db.orm.em.fork();
  const a = await createTestSite(em);
  const b = await createTestSite(em);
  const adminUuid = await seedSiteUser(server, a, 'boss', { staff: true });
  await seedSiteUser(server, a, 'pleb');
  await seedSiteUser(server, b, 'boss', { staff: true });
  tok.adminA = await siteToken(server, a, 'boss');
  tok.pleb = await siteToken(server, a, 'pleb');
  tok.adminB = await siteToken(server, b, 'boss');
  return { a, b, adminUuid };
}
