// Timer jobs run once per interval across processes: three schedulers of one job on one database
// (as three server processes would) run it about once per interval between them, never two runs
// at once; a run whose process died is taken over once its lease runs out.
import test from 'ava';
import { createLogger } from '../common/logger.ts';
import { platformDatabase } from '../testing/platform-db.ts';
import { claimRun, scheduleClusterWide } from './scheduled-jobs.ts';

const orm = platformDatabase(test);
const log = createLogger('silent');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test.serial('three processes scheduling one job run it once per interval between them, one run at a time', async (t) => {
  const interval = 150;
  let runs = 0;
  let active = 0;
  let overlapped = false;
  const job = async () => {
    runs++;
    overlapped ||= ++active > 1;
    await sleep(40);
    active--;
    return undefined;
  };
  const started = Date.now();
  const jobs = ['a', 'b', 'c'].map((owner) => scheduleClusterWide({ em: () => orm().em.fork(), log, owner }, 'shared job', interval, job));
  await sleep(1600);
  await Promise.all(jobs.map((j) => j.stop()));
  const elapsed = Date.now() - started;
  // Each of the three looks every interval: run per process, that would be about 3 × elapsed / interval.
  t.true(runs >= 3, `ran ${runs} times`);
  t.true(runs <= Math.ceil(elapsed / interval) + 1, `ran ${runs} times in ${elapsed} ms at one run per ${interval} ms`);
  t.false(overlapped, 'two runs at once');
  const [row] = await orm().em.fork().execute(`SELECT runs, last_error, last_finished_at FROM public.scheduled_jobs WHERE name = 'shared job'`);
  t.is(Number(row!.runs), runs, 'every run was claimed in the table');
  t.is(row!.last_error, null);
});

test.serial('a run left unfinished by a dead process is taken over once its lease runs out, not before', async (t) => {
  const em = () => orm().em.fork();
  t.is(await claimRun(em(), 'orphaned job', 'dead process', 600), 1, 'the first claim inserts the row');
  let runs = 0;
  const job = scheduleClusterWide({ em, log, owner: 'survivor' }, 'orphaned job', 50, async () => void runs++);
  await sleep(300);
  t.is(runs, 0, 'the lease holds');
  await sleep(700);
  await job.stop();
  t.true(runs >= 1, 'taken over after the lease');
  const [row] = await em().execute(`SELECT last_owner FROM public.scheduled_jobs WHERE name = 'orphaned job'`);
  t.is(row!.last_owner, 'survivor');
});

test.serial('a failed run is recorded and the job runs again one interval later', async (t) => {
  let runs = 0;
  const job = scheduleClusterWide({ em: () => orm().em.fork(), log, owner: 'p' }, 'failing job', 100, async () => {
    runs++;
    throw new Error('the store is away');
  });
  await sleep(450);
  await job.stop();
  t.true(runs >= 2, `ran ${runs} times`);
  const [row] = await orm().em.fork().execute(`SELECT last_error FROM public.scheduled_jobs WHERE name = 'failing job'`);
  t.regex(String(row!.last_error), /the store is away/);
});
