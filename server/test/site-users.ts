// Site users for tenant-scoped suites: seeded straight in the site's schema, signed in on the
// site's host.
import { hashPassword } from '../../shared/auth/passwords.ts';
import type { TestSite } from '../../shared/testing/sites.ts';
import type { TestServer } from './helpers.ts';

export const SITE_PASSWORD = 'Site-pass-word-1';

/** `server` is read at call time (suites assign it in test.before). */
export function siteUsers(server: () => TestServer) {
  return {
    /** A site user with SITE_PASSWORD; `admin` makes it site staff. Returns its UUID. */
    async seedSiteUser(site: TestSite, username: string, admin: boolean): Promise<string> {
      const [row] = await server()
        .handle.db.orm.em.fork()
        .getConnection()
        .execute(`INSERT INTO "${site.schema}".users (uuid, username, password, is_staff) VALUES (gen_random_uuid(), ?, ?, ?) RETURNING uuid`, [
          username,
          await hashPassword(SITE_PASSWORD),
          admin,
        ]);
      return row.uuid as string;
    },
    /** An access token of that site user, issued on the site's host. */
    async siteToken(site: TestSite, username: string): Promise<string> {
      const res = await server().api('POST', '/api/auth/jwt/token/', { host: site.domain, body: { username, password: SITE_PASSWORD } });
      if (res.status !== 200) throw new Error(res.text);
      return res.body.access;
    },
  };
}
