// The function queue's claim (claimJobs) under a race: several processes claiming at once from
// one queue never claim a job twice. A claim that took its snapshot before another process's
// claim committed, and locks the row after, must see that row's new lease and leave it.
import test from 'ava';
import { createOrm, type Orm } from '../db/orm.ts';
import { platformDatabase } from '../testing/platform-db.ts';
import { claimJobs } from './runtime.ts';

const orm = platformDatabase(test);

test('four processes claiming from one queue at once claim each job once', async (t) => {
  const em = orm().em.fork();
  // Three sites' rows (the queue's site_schema refers to them); their schemas are not needed here.
  const [org] = await em.execute(`INSERT INTO public.organizations (uuid, name, slug) VALUES (gen_random_uuid(), 'Queue', 'queue') RETURNING uuid`);
  await em.execute(
    `INSERT INTO public.sites (uuid, slug, name, schema_name, environment, organization_uuid)
     SELECT gen_random_uuid(), 'q' || i, 'Q' || i, 'q' || i, 'production', ? FROM generate_series(1, 3) AS i`,
    [org!.uuid],
  );
  await em.execute(`INSERT INTO public.tenant_schemas (schema_name) SELECT 'q' || i FROM generate_series(1, 3) AS i`);
  // The races are rare per claim: a few thousand jobs, several rounds.
  const processes: Orm[] = [];
  try {
    for (let i = 0; i < 4; i++) processes.push(await createOrm(orm().config.get('clientUrl')!, { poolMax: 1 }));
    for (let round = 0; round < 3; round++) {
      await em.execute(`INSERT INTO public.function_jobs (site_schema, invocation_id) SELECT 'q' || (1 + i % 3), i FROM generate_series(1, 2000) AS i`);
      const claimed = await Promise.all(
        processes.map(async (p, i) => {
          let n = 0;
          for (;;) {
            const jobs = await claimJobs(p.em.fork(), `process ${i}`, [], 8, 8);
            if (!jobs.length) return n;
            n += jobs.length;
          }
        }),
      );
      const [row] = await em.execute(`SELECT count(*) FILTER (WHERE attempts > 1)::int AS twice, count(*) FILTER (WHERE attempts = 0)::int AS left FROM public.function_jobs`);
      t.is(row!.twice, 0, `round ${round + 1}: jobs claimed twice (claims per process ${claimed.join(', ')})`);
      t.is(row!.left, 0);
      t.is(claimed.reduce((a, b) => a + b, 0), 2000);
      await em.execute('DELETE FROM public.function_jobs');
    }
  } finally {
    await Promise.all(processes.map((p) => p.close(true)));
  }
});
