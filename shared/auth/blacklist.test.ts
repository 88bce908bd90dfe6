// Pruning the token blacklists: the platform's and every site schema's lose their expired rows.
import test from 'ava';
import { platformDatabase } from '../testing/platform-db.ts';
import { createTestSite } from '../testing/sites.ts';
import { pruneBlacklist } from './auth.service.ts';

const orm = platformDatabase(test);

/** A user of `schema` with one expired and one live blacklist row; the live row's jti. */
async function seed(schema: string): Promise<string> {
  const em = orm().em.fork();
  const [user] = await em.execute(`INSERT INTO ${schema}.users (uuid, username, password) VALUES (gen_random_uuid(), 'u', 'x') RETURNING uuid`);
  await em.execute(
    `INSERT INTO ${schema}.token_blacklist (jti, user_uuid, expires_at)
     VALUES (gen_random_uuid(), ?, now() - interval '1 minute'), (gen_random_uuid(), ?, now() + interval '1 hour')`,
    [user.uuid, user.uuid],
  );
  const [live] = await em.execute(`SELECT jti::text AS jti FROM ${schema}.token_blacklist WHERE expires_at > now()`);
  return live.jti;
}

const jtis = async (schema: string) => (await orm().em.fork().execute(`SELECT jti::text AS jti FROM ${schema}.token_blacklist`)).map((r) => r.jti);

test('expired rows go from the platform and from every site schema; live ones stay', async (t) => {
  const a = await createTestSite(orm().em.fork());
  const b = await createTestSite(orm().em.fork());
  const seeded = { public: await seed('public'), [a.schema]: await seed(a.schema), [b.schema]: await seed(b.schema) };
  t.is(await pruneBlacklist(orm().em.fork()), 3);
  for (const [schema, live] of Object.entries(seeded)) t.deepEqual(await jtis(schema), [live], schema);
  t.is(await pruneBlacklist(orm().em.fork()), 0);
});
