// The server prunes the token blacklists on its own, every BLACKLIST_PRUNE_INTERVAL_MS.
import test from 'ava';
import { createTestSite } from '../../shared/testing/sites.ts';
import { startTestServer } from './helpers.ts';

test('a running server deletes expired blacklist rows of the platform and of its sites', async (t) => {
  const s = await startTestServer({ BLACKLIST_PRUNE_INTERVAL_MS: '200' });
  try {
    const em = s.handle.db.orm.em.fork();
    const site = await createTestSite(em);
    await em.execute(`INSERT INTO ${site.schema}.users (uuid, username, password) VALUES (gen_random_uuid(), 'u', 'x')`);
    for (const schema of ['public', site.schema]) {
      // One expired and one live row, for a user of that schema (the pruner may take the expired
      // one at any moment from now on: what was inserted is counted by the INSERT itself).
      const inserted = await em.execute(
        `INSERT INTO ${schema}.token_blacklist (jti, user_uuid, expires_at)
         SELECT gen_random_uuid(), u.uuid, e FROM (SELECT uuid FROM ${schema}.users LIMIT 1) u, (VALUES (now() - interval '1 second'), (now() + interval '1 hour')) v(e)
         RETURNING expires_at > now() AS live`,
      );
      t.deepEqual(inserted.map((r) => r.live).sort(), [false, true], `${schema}: an expired and a live row`);
    }
    const live = async () =>
      (await em.execute(`SELECT expires_at > now() AS live FROM public.token_blacklist UNION ALL SELECT expires_at > now() FROM ${site.schema}.token_blacklist`)).map((r) => r.live);
    const until = Date.now() + 5_000;
    while ((await live()).length > 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
    t.deepEqual(await live(), [true, true]);
  } finally {
    await s.close();
  }
});
