// Site users for tenant-scoped suites: two sites, with users seeded straight in the site's
// schema and signed in on the site's host.
import { hashPassword } from '../../shared/auth/passwords.ts';
import { createTestSite, type TestSite } from '../../shared/testing/sites.ts';
import type { TestServer } from './helpers.ts';

const SITE_PASSWORD = 'Site-pass-word-1';

/** A site user with SITE_PASSWORD; `admin` makes it site staff. Returns its UUID. */
async function seedSiteUser(server: TestServer, site: TestSite, username: string, admin: boolean): Promise<string> {
  const [row] = await server.handle.db.orm.em
    .fork()
    .getConnection()
    .execute(`INSERT INTO "${site.schema}".users (uuid, username, password, is_staff) VALUES (gen_random_uuid(), ?, ?, ?) RETURNING uuid`, [
      username,
      await hashPassword(SITE_PASSWORD),
      admin,
    ]);
  return row.uuid as string;
}

/** An access token of that site user, issued on the site's host. */
async function siteToken(server: TestServer, site: TestSite, username: string): Promise<string> {
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
  const adminUuid = await seedSiteUser(server, a, 'boss', true);
  await seedSiteUser(server, a, 'pleb', false);
  await seedSiteUser(server, b, 'boss', true);
  tok.adminA = await siteToken(server, a, 'boss');
  tok.pleb = await siteToken(server, a, 'pleb');
  tok.adminB = await siteToken(server, b, 'boss');
  return { a, b, adminUuid };
}
