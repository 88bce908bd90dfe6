// `platform site move SITE --to CLUSTER` (docs/scale-out.md "Moving a site"), with PostgreSQL's
// logical replication. The steps, each recorded in `public.site_moves` before the next begins, so
// that `--resume` finishes an interrupted move and `--abort` undoes it:
//   started      the schema's definition copied to the target (pg_dump --schema-only);
//   schema       the site's tables published on the source, a slot made there, a subscription on
//                the target: the initial copy, then the stream, while the site keeps serving;
//   replicating  the initial copy done (every table `ready`);
//   synced       the write freeze: every server holds the site's new writes (sites/move-gate.ts)
//                and reports its running ones done, the tables are locked against anything else
//                (EXCLUSIVE: reads go on), the stream catches up to the source's WAL position,
//                sequences and the site's rows of the per-site tables are copied, every table's
//                row count and checksum compared; then the site's cluster is switched in the
//                registry (one commit on the primary, with the routing notification), the
//                source's tables refuse writes from then on (a trigger), and the held writes go on,
//                to the target. Past the freeze timeout the move aborts: the site stays where it was;
//   switched     replication torn down;
//   done         the old copy stays on the source until `--cleanup`.
// Without `wal_level = logical` on the source the move copies the whole schema inside the freeze
// (pg_dump of schema and rows), with a longer freeze; it says so before starting.
import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import pg from 'pg';
import { runScript } from '../backup/restore.ts';
import { connectionArgs, pgTools, runTool, queryRows as all } from '../backup/pg-tools.ts';
import { ChangeListener } from '../db/changes.ts';
import { PRIMARY_CLUSTER, prepareCluster } from '../db/clusters.ts';
import { DomainError, fieldError, siteNotFound } from '../errors.ts';
import { notifyRoutingChanged } from '../tenancy/host-resolver.ts';
import { TENANT_EXTENSIONS } from '../tenancy/migrations.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { quoteIdent } from '../db/sql.ts';
import { operatorSiteRef } from './lookup.ts';
import { notifyOn } from './move-gate.ts';

export const MOVE_STEPS = ['started', 'schema', 'replicating', 'synced', 'switched', 'done'] as const;
export type MoveStep = (typeof MOVE_STEPS)[number];

export interface MoveOptions {
  /** The platform database (the primary). */
  em: EntityManager;
  /** The primary's own address (no proxy): the freeze's notifications, and the primary cluster's sites. */
  directUrl: string;
  pgBinDir?: string;
  /** How long the write freeze may last before the move aborts (default 10 s). */
  freezeTimeoutMs?: number;
  onProgress?: (line: string) => void;
  /** Tests: the process kills itself (SIGKILL) once this step is recorded, or (`freeze`) once the tables are locked. */
  stopAfter?: string;
}

export interface MoveRow {
  site_uuid: string;
  schema_name: string;
  source: string;
  target: string;
  method: 'logical' | 'copy';
  step: MoveStep;
  freeze_ms: number | null;
  error: string | null;
}

export interface MoveResult extends MoveRow {
  slug: string;
  duration_ms: number;
  tables: number;
  rows: number;
}

/** The per-site tables whose rows go with the site (db/clusters.ts CLUSTER_TABLES), the columns copied (their own serial ids are not). */
const SITE_ROWS: Record<string, string> = {
  sessions: 'id, key_hash, site_schema, user_uuid, generation, user_agent, ip, created_at, expires_at',
  idempotency_keys: 'site_schema, principal, key, fingerprint, operation, lock_token, locked_until, status, headers, body, created_at, expires_at',
  function_jobs: 'site_schema, invocation_id, attempts, locked_by, locked_until, created_at',
};

/** The move's names on both clusters: publication, slot, subscription. */
const replicationName = (siteUuid: string) => `platform_move_${siteUuid.replace(/-/g, '')}`;
const conflict = (message: string) => new DomainError('CONFLICT', message);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Session settings under which a row's text is the same on both clusters (the checksums compare it). */
const SESSION = "SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; SET IntervalStyle = 'iso_8601'; SET extra_float_digits = 1; SET bytea_output = 'hex'";

async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  await client.connect();
  await client.query(SESSION);
  return client;
}

async function siteOf(em: EntityManager, ref: string): Promise<{ uuid: string; slug: string; schema_name: string; cluster: string }> {
  const [site] = (await em.execute(`SELECT uuid, slug, schema_name, cluster FROM public.sites WHERE ${operatorSiteRef('?')}`, [ref, ref, ref, ref])) as {
    uuid: string;
    slug: string;
    schema_name: string;
    cluster: string;
  }[];
  if (!site) throw siteNotFound(ref);
  return site;
}

async function moveOf(em: EntityManager, siteUuid: string): Promise<MoveRow | undefined> {
  const [row] = (await em.execute('SELECT site_uuid, schema_name, source, target, method, step, freeze_ms, error FROM public.site_moves WHERE site_uuid = ?', [siteUuid])) as MoveRow[];
  return row;
}

/** The site and its move (`missing`: the 404's words when there is none). */
async function recordedMove(ref: string, options: MoveOptions, missing: string): Promise<{ site: { uuid: string; slug: string }; row: MoveRow }> {
  const site = await siteOf(options.em, ref);
  const row = await moveOf(options.em, site.uuid);
  if (!row) throw new DomainError('NOT_FOUND', `No move of the site "${ref}" is ${missing}.`);
  return { site, row };
}

async function clusterUrl(em: EntityManager, name: string, primaryUrl: string): Promise<string> {
  if (name === PRIMARY_CLUSTER) return primaryUrl;
  const [row] = (await em.execute('SELECT coalesce(direct_url, url) AS url FROM public.clusters WHERE name = ?', [name])) as { url: string }[];
  if (!row) throw fieldError('to', `No cluster is named "${name}".`);
  return row.url;
}

/** The move's two clusters, each on a connection of its own, and the source's address (pg_dump, the subscription). */
interface Ends {
  source: pg.Client;
  target: pg.Client;
  sourceUrl: string;
}

/** Runs `work` with the move's two connections open, then closes them. */
async function withEnds<T>(row: MoveRow, options: MoveOptions, work: (ends: Ends) => Promise<T>): Promise<T> {
  const sourceUrl = await clusterUrl(options.em, row.source, options.directUrl);
  const source = await connect(sourceUrl);
  try {
    const target = await connect(await clusterUrl(options.em, row.target, options.directUrl));
    try {
      return await work({ source, target, sourceUrl });
    } finally {
      await target.end().catch(() => undefined);
    }
  } finally {
    await source.end().catch(() => undefined);
  }
}

/** Starts moving the site `ref` to the cluster `to`, and carries the move through. */
export async function moveSite(ref: string, to: string, options: MoveOptions): Promise<MoveResult> {
  const { em } = options;
  const site = await siteOf(em, ref);
  const existing = await moveOf(em, site.uuid);
  if (existing?.step === 'done') throw conflict(`The site was moved to ${existing.target}; its old copy is still on ${existing.source}: run \`platform site move ${site.slug} --cleanup\` first.`);
  if (existing) throw conflict(`A move of this site to ${existing.target} is under way (step ${existing.step}): \`platform site move ${site.slug} --resume\` finishes it, \`--abort\` undoes it.`);
  const [target] = (await em.execute('SELECT name, state FROM public.clusters WHERE name = ?', [to])) as { name: string; state: string }[];
  if (!target) throw fieldError('to', `No cluster is named "${to}".`);
  if (target.name === site.cluster) throw fieldError('to', `The site is on ${to} already.`);
  if (target.state !== 'active') throw fieldError('to', `The cluster "${to}" is ${target.state}: it takes no site.`);
  const source = await connect(await clusterUrl(em, site.cluster, options.directUrl));
  let walLevel: string;
  try {
    [{ wal_level: walLevel }] = await all<{ wal_level: string }>(source, 'SHOW wal_level');
  } finally {
    await source.end().catch(() => undefined);
  }
  const method: MoveRow['method'] = walLevel === 'logical' ? 'logical' : 'copy';
  if (method === 'copy') {
    options.onProgress?.(`The source cluster ${site.cluster} has wal_level = ${walLevel}, not logical: the site is copied whole during the write freeze (pg_dump), a longer freeze than with logical replication.`);
  }
  await em.execute('INSERT INTO public.site_moves (site_uuid, schema_name, source, target, method, step) VALUES (?, ?, ?, ?, ?, ?)', [
    site.uuid,
    site.schema_name,
    site.cluster,
    to,
    method,
    'started',
  ]);
  return carry(site, (await moveOf(em, site.uuid))!, options);
}

/** Finishes an interrupted move from the step it reached. */
export async function resumeMove(ref: string, options: MoveOptions): Promise<MoveResult> {
  const { site, row } = await recordedMove(ref, options, 'under way');
  return carry(site, row, options);
}

async function carry(site: { uuid: string; slug: string }, row: MoveRow, options: MoveOptions): Promise<MoveResult> {
  const started = Date.now();
  return withEnds(row, options, (ends) => runSteps(site, row, options, ends, started));
}

async function runSteps(site: { uuid: string; slug: string }, row: MoveRow, options: MoveOptions, ends: Ends, started: number): Promise<MoveResult> {
  const { source, target } = ends;
  const say = options.onProgress ?? (() => undefined);
  const record = async (step: MoveStep, extra: { freeze_ms?: number } = {}) => {
    await options.em.execute('UPDATE public.site_moves SET step = ?, freeze_ms = coalesce(?, freeze_ms), error = NULL, updated_at = now() WHERE site_uuid = ?', [step, extra.freeze_ms ?? null, row.site_uuid]);
    row.step = step;
    if (options.stopAfter === step) process.kill(process.pid, 'SIGKILL');
  };
  let counted = { tables: 0, rows: 0 };
  try {
    while (row.step !== 'done') {
      if (row.step === 'started') {
        say(`Copying the definition of ${row.schema_name} to ${row.target}…`);
        if (row.method === 'logical') await copySchema(ends, row, options, false);
        await record(row.method === 'logical' ? 'schema' : 'synced');
      } else if (row.step === 'schema') {
        say('Publishing the site\'s tables and subscribing from the target (initial copy, then the stream)…');
        await replicate(ends, row);
        await record('replicating');
      } else if (row.step === 'replicating') {
        await waitSynced(target, row, say);
        await record('synced');
      } else if (row.step === 'synced') {
        say('Freezing writes, catching up, verifying and switching…');
        try {
          const frozen = await freezeAndSwitch(ends, row, options);
          counted = frozen.counted;
          row.step = 'switched';
          if (options.stopAfter === 'switched') process.kill(process.pid, 'SIGKILL');
          say(`Switched to ${row.target}: writes were held for ${frozen.freezeMs} ms (${frozen.phases}); ${frozen.counted.tables} tables, ${frozen.counted.rows} rows verified.`);
        } catch (err) {
          // Past the freeze timeout, or a difference found: the site stays where it was, and the move is undone
          // (never once the registry says it switched).
          if ((await moveOf(options.em, row.site_uuid))?.step !== 'synced') throw err;
          say(`The freeze failed (${(err as Error).message}): aborting; the site stays on ${row.source}.`);
          await undo(source, target, row, options);
          throw err;
        }
      } else if (row.step === 'switched') {
        say('Tearing replication down…');
        await teardown(source, target, row);
        await guard(source, row.schema_name);
        await record('done');
      }
    }
    say(`Moved. The old copy stays on ${row.source} until \`platform site move ${site.slug} --cleanup\`.`);
    return { ...row, slug: site.slug, duration_ms: Date.now() - started, ...counted };
  } catch (err) {
    await options.em.execute('UPDATE public.site_moves SET error = ?, updated_at = now() WHERE site_uuid = ?', [(err as Error).message.slice(0, 1000), row.site_uuid]).catch(() => undefined);
    throw err;
  }
}

/** The site's schema on the target: its definition only (`withRows` false), or all of it (the copy method, in the freeze: `snapshot` of the locked source). */
async function copySchema({ source, target, sourceUrl }: Ends, row: MoveRow, options: MoveOptions, withRows: boolean, snapshot?: string): Promise<void> {
  const [{ server_version_num }] = await all<{ server_version_num: string }>(source, 'SHOW server_version_num');
  const tools = pgTools(Number(server_version_num), options.pgBinDir);
  const { dbname, env } = connectionArgs(sourceUrl);
  const args = ['--dbname', dbname, `--schema=${row.schema_name}`, '--no-owner', '--no-privileges', ...(withRows ? [] : ['--schema-only']), ...(snapshot ? [`--snapshot=${snapshot}`] : [])];
  await target.query('BEGIN');
  try {
    // A copy an interrupted attempt left there is this move's (schema names are the registry's, one site each).
    await target.query(`DROP SCHEMA IF EXISTS ${quotedSchema(row.schema_name)} CASCADE`);
    for (const sql of TENANT_EXTENSIONS) await target.query(sql);
    const run = runTool(tools.dump, args, env, 'pg_dump');
    try {
      await Promise.all([runScript(target, run.stdout), run.done]);
    } finally {
      run.stop();
    }
    await target.query('RESET ALL');
    await target.query(SESSION);
    await target.query('COMMIT');
  } catch (err) {
    await target.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/** Tables of the schema, quoted (ordinary and partitioned). */
async function tablesOf(client: pg.Client, schema: string): Promise<{ name: string; quoted: string; keyed: boolean }[]> {
  const rows = await all<{ name: string; keyed: boolean }>(
    client,
    `SELECT c.relname AS name, c.relreplident <> 'd' OR EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary) AS keyed
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') ORDER BY c.relname`,
    [schema],
  );
  return rows.map((r) => ({ ...r, quoted: `${quotedSchema(schema)}.${quoteIdent(r.name)}` }));
}

async function replicate({ source, target, sourceUrl }: Ends, row: MoveRow): Promise<void> {
  const name = replicationName(row.site_uuid);
  // A table without a key replicates its updates and deletes only with its whole row as identity.
  for (const t of await tablesOf(source, row.schema_name)) if (!t.keyed) await source.query(`ALTER TABLE ${t.quoted} REPLICA IDENTITY FULL`);
  await teardown(source, target, row); // what an interrupted attempt made
  await source.query(`CREATE PUBLICATION ${quoteIdent(name)} FOR TABLES IN SCHEMA ${quotedSchema(row.schema_name)}`);
  // The slot made here, not by CREATE SUBSCRIPTION: that would wait forever when both are databases of one server.
  await source.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [name]);
  await target.query(
    `CREATE SUBSCRIPTION ${quoteIdent(name)} CONNECTION ${target.escapeLiteral(sourceUrl)} PUBLICATION ${quoteIdent(name)} WITH (create_slot = false, slot_name = ${target.escapeLiteral(name)}, copy_data = true)`,
  );
}

async function waitSynced(target: pg.Client, row: MoveRow, say: (line: string) => void): Promise<void> {
  const name = replicationName(row.site_uuid);
  let last = '';
  for (;;) {
    const [s] = await all<{ total: number; ready: number }>(
      target,
      `SELECT count(*)::int AS total, count(*) FILTER (WHERE r.srsubstate = 'r')::int AS ready
         FROM pg_subscription_rel r JOIN pg_subscription s ON s.oid = r.srsubid WHERE s.subname = $1`,
      [name],
    );
    const line = `  initial copy: ${s!.ready}/${s!.total} tables`;
    if (line !== last) say((last = line));
    if (s!.total > 0 && s!.ready === s!.total) return;
    await sleep(200);
  }
}

/** Drops the move's subscription (target), slot and publication (source), whichever exist. */
async function teardown(source: pg.Client, target: pg.Client, row: MoveRow): Promise<void> {
  const name = replicationName(row.site_uuid);
  if ((await all(target, 'SELECT 1 FROM pg_subscription WHERE subname = $1', [name])).length) {
    await target.query(`ALTER SUBSCRIPTION ${quoteIdent(name)} DISABLE`);
    await target.query(`ALTER SUBSCRIPTION ${quoteIdent(name)} SET (slot_name = NONE)`);
    await target.query(`DROP SUBSCRIPTION ${quoteIdent(name)}`);
  }
  // The slot goes once its walsender has noticed the subscription disabled (a moment).
  for (let i = 0; ; i++) {
    const [slot] = await all<{ active: boolean }>(source, 'SELECT active FROM pg_replication_slots WHERE slot_name = $1', [name]);
    if (!slot) break;
    if (!slot.active) {
      await source.query('SELECT pg_drop_replication_slot($1)', [name]);
      break;
    }
    if (i > 100) throw new Error(`The replication slot ${name} is still in use on the source.`);
    await sleep(100);
  }
  await source.query(`DROP PUBLICATION IF EXISTS ${quoteIdent(name)}`);
}

/** The source's copy refuses writes (the site is served from its target now): statements that waited on the freeze's locks fail, never land there. */
async function guard(client: pg.Client, schema: string): Promise<void> {
  await client.query(`CREATE OR REPLACE FUNCTION public.platform_site_moved() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN RAISE EXCEPTION 'This site was moved to another cluster: retry the request.' USING ERRCODE = 'PM001'; END $fn$`);
  for (const t of await tablesOf(client, schema)) {
    await client.query(`DROP TRIGGER IF EXISTS platform_site_moved ON ${t.quoted}`);
    await client.query(`CREATE TRIGGER platform_site_moved BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON ${t.quoted} FOR EACH STATEMENT EXECUTE FUNCTION public.platform_site_moved()`);
  }
}

/**
 * Every table's row count and checksum, on `client` (the source inside the freeze, or the target):
 * the sum of its rows' hashes (hash_record_extended: each column by its type's hash function, twice
 * as fast as hashing the rows' text; a table with a column type that has none is hashed by its
 * rows' text, under the same session settings on both sides). `inTransaction`: a savepoint keeps
 * such a failure from ending the transaction.
 */
async function fingerprint(client: pg.Client, schema: string, inTransaction: boolean): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const sum = async (t: { quoted: string }, hash: string) => (await all<{ n: string; h: string }>(client, `SELECT count(*)::text AS n, coalesce(sum(${hash}), 0)::text AS h FROM ${t.quoted} t`))[0]!;
  for (const t of await tablesOf(client, schema)) {
    let r: { n: string; h: string };
    try {
      if (inTransaction) await client.query('SAVEPOINT fingerprint');
      r = await sum(t, 'hash_record_extended(t, 0)');
      if (inTransaction) await client.query('RELEASE SAVEPOINT fingerprint');
    } catch {
      if (inTransaction) await client.query('ROLLBACK TO SAVEPOINT fingerprint');
      const text = await sum(t, 'hashtextextended(t::text, 0)');
      r = { n: text.n, h: `text:${text.h}` };
    }
    out.set(t.name, `${r.n}/${r.h}`);
  }
  return out;
}

/** The freeze, the last copy, the checks and the switch (see the file comment); the freeze's length. */
async function freezeAndSwitch(ends: Ends, row: MoveRow, options: MoveOptions): Promise<{ freezeMs: number; phases: string; counted: { tables: number; rows: number } }> {
  const { source, target } = ends;
  const timeout = options.freezeTimeoutMs ?? 10_000;
  const schema = row.schema_name;
  const move = randomUUID();
  const notify = notifyOn(options.em.fork());
  // The servers on the channel: they answer this listener's hello (a moment).
  const listener = new ChangeListener();
  const acks = new Set<string>();
  let acked: () => void = () => undefined;
  listener.on('move', (key) => {
    const [kind, id, peer] = key?.split(' ') ?? [];
    if (kind === 'frozen' && id === move && peer) {
      acks.add(peer);
      acked();
    }
    // Another move's freeze (`freeze <schema> <move> <deadline>`): this process holds no writes.
    if (kind === 'freeze' && peer && peer !== move) void notify(`move:frozen ${peer} ${listener.id}`).catch(() => undefined);
  });
  await listener.listen(options.directUrl);
  await sleep(300);
  const frozeAt = Date.now();
  const deadline = frozeAt + timeout;
  const left = () => deadline - Date.now();
  // Where the freeze's time goes (the progress line says it).
  const phases: string[] = [];
  let lap = frozeAt;
  const phase = (name: string) => {
    const now = Date.now();
    phases.push(`${name} ${now - lap} ms`);
    lap = now;
  };
  let locked = false;
  try {
    const peers = listener.peerIds();
    // The servers hold the site's writes until the thaw, or a little past this move's own deadline should it die.
    await notify(`move:freeze ${schema} ${move} ${deadline + 2000}`);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${peers.length - [...acks].filter((p) => peers.includes(p)).length} server process(es) did not report their writes done within ${timeout} ms`)), Math.max(left(), 0));
      acked = () => {
        if (peers.every((p) => acks.has(p))) {
          clearTimeout(timer);
          resolve();
        }
      };
      acked();
    });
    phase(`${peers.length} server(s) holding writes`);
    // Anything else that writes (not through a server) waits on the tables' locks; reads go on.
    await source.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    locked = true;
    await source.query(`SET LOCAL lock_timeout = ${Math.max(Math.floor(left()), 1)}`);
    const tables = await tablesOf(source, schema);
    if (tables.length) await source.query(`LOCK TABLE ${tables.map((t) => t.quoted).join(', ')} IN EXCLUSIVE MODE`);
    phase('tables locked');
    if (options.stopAfter === 'freeze') process.kill(process.pid, 'SIGKILL');
    if (row.method === 'logical') {
      // The stream has everything once the slot's subscriber confirmed the source's WAL position now.
      const [{ lsn }] = await all<{ lsn: string }>(source, 'SELECT pg_current_wal_lsn()::text AS lsn');
      for (;;) {
        const [slot] = await all<{ caught: boolean }>(source, 'SELECT confirmed_flush_lsn >= $1::pg_lsn AS caught FROM pg_replication_slots WHERE slot_name = $2', [lsn, replicationName(row.site_uuid)]);
        if (slot?.caught) break;
        if (left() <= 0) throw new Error(`the target did not catch up within ${timeout} ms`);
        await sleep(10);
      }
    } else {
      const [{ snapshot }] = await all<{ snapshot: string }>(source, 'SELECT pg_export_snapshot() AS snapshot');
      await copySchema(ends, row, options, true, snapshot);
    }
    phase(row.method === 'logical' ? 'caught up' : 'copied');
    // Sequences (logical replication carries rows, not sequences).
    for (const s of await all<{ name: string; last_value: string | null }>(source, 'SELECT sequencename AS name, last_value::text FROM pg_sequences WHERE schemaname = $1', [schema])) {
      if (s.last_value !== null) await target.query('SELECT setval($1::regclass, $2::bigint, true)', [`${quotedSchema(schema)}.${quoteIdent(s.name)}`, s.last_value]);
    }
    // The site's rows of the per-site tables, and its schema version.
    await target.query('BEGIN');
    try {
      const [version] = await all<{ version: number }>(source, 'SELECT version FROM public.tenant_schemas WHERE schema_name = $1', [schema]);
      await target.query('INSERT INTO public.tenant_schemas (schema_name, version, migrated_at) VALUES ($1, $2, now()) ON CONFLICT (schema_name) DO UPDATE SET version = EXCLUDED.version', [schema, version?.version ?? 0]);
      for (const [table, columns] of Object.entries(SITE_ROWS)) {
        await target.query(`DELETE FROM public.${table} WHERE site_schema = $1`, [schema]);
        const [{ rows }] = await all<{ rows: unknown }>(source, `SELECT coalesce(jsonb_agg(to_jsonb(t)), '[]') AS rows FROM public.${table} t WHERE site_schema = $1`, [schema]);
        await target.query(`INSERT INTO public.${table} (${columns}) SELECT ${columns} FROM jsonb_populate_recordset(NULL::public.${table}, $1::jsonb)`, [JSON.stringify(rows)]);
      }
      await target.query('COMMIT');
    } catch (err) {
      await target.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
    phase('sequences and per-site rows');
    // Verified: the same tables, each with the same rows.
    const [here, there] = await Promise.all([fingerprint(source, schema, true), fingerprint(target, schema, false)]); // two clusters: at once
    const differ = [...new Set([...here.keys(), ...there.keys()])].filter((t) => here.get(t) !== there.get(t));
    if (differ.length) throw new Error(`the copy differs from the source in ${differ.join(', ')}`);
    phase('verified');
    if (left() <= 0) throw new Error(`the freeze took longer than ${timeout} ms`);
    await guard(source, schema);
    // The switch: one commit on the primary; the routing notification drops every server's caches of the site's place.
    phase('source guarded');
    const freezeMs = Date.now() - frozeAt;
    await options.em.transactional(async (tx) => {
      const moved = (await tx.execute('UPDATE public.sites SET cluster = ? WHERE uuid = ? AND cluster = ?', [row.target, row.site_uuid, row.source], 'run')) as unknown as { affectedRows: number };
      if (!moved.affectedRows) throw new Error('the site is not on the source cluster any more');
      await tx.execute("UPDATE public.site_moves SET step = 'switched', freeze_ms = ?, error = NULL, updated_at = now() WHERE site_uuid = ?", [freezeMs, row.site_uuid]);
      await notifyRoutingChanged(tx as EntityManager);
    });
    row.freeze_ms = freezeMs;
    locked = false;
    // The guard in place, the locks released: what waited on them fails. Should this commit fail,
    // the locks go with the connection, and the next step puts the guard in place again.
    await source.query('COMMIT').catch(() => undefined);
    const rowsCounted = [...here.values()].reduce((sum, v) => sum + Number(v.split('/')[0]), 0);
    return { freezeMs, phases: phases.join(', '), counted: { tables: here.size, rows: rowsCounted } };
  } finally {
    if (locked) await source.query('ROLLBACK').catch(() => undefined);
    await notify(`move:thaw ${schema}`).catch(() => undefined);
    await listener.close();
  }
}

/** Undoes a move that has not switched: replication, the target's copy and rows, the move's row. */
async function undo(source: pg.Client, target: pg.Client, row: MoveRow, options: MoveOptions): Promise<void> {
  await teardown(source, target, row);
  await target.query(`DROP SCHEMA IF EXISTS ${quotedSchema(row.schema_name)} CASCADE`);
  for (const table of ['tenant_schemas', ...Object.keys(SITE_ROWS)]) {
    await target.query(`DELETE FROM public.${table} WHERE ${table === 'tenant_schemas' ? 'schema_name' : 'site_schema'} = $1`, [row.schema_name]);
  }
  await options.em.execute('DELETE FROM public.site_moves WHERE site_uuid = ?', [row.site_uuid]);
}

/** `--abort`: undoes a move that has not switched (the site stays where it is). */
export async function abortMove(ref: string, options: MoveOptions): Promise<MoveRow> {
  const { row } = await recordedMove(ref, options, 'under way');
  if (row.step === 'switched' || row.step === 'done') throw conflict(`The move has switched the site to ${row.target} already: \`--resume\` finishes it (and \`--cleanup\` then drops the old copy).`);
  await withEnds(row, options, ({ source, target }) => undo(source, target, row, options));
  await notifyOn(options.em)(`move:thaw ${row.schema_name}`);
  return row;
}

/** `--cleanup`: drops the old copy of a moved site on its source, and the move's record. */
export async function cleanupMove(ref: string, options: MoveOptions): Promise<MoveRow> {
  const { row } = await recordedMove(ref, options, 'recorded');
  if (row.step !== 'done') throw conflict(`The move is at step ${row.step}: \`--resume\` finishes it first (or \`--abort\` undoes it).`);
  const sourceUrl = await clusterUrl(options.em, row.source, options.directUrl);
  if (row.source !== PRIMARY_CLUSTER) await prepareCluster(sourceUrl);
  const source = await connect(sourceUrl);
  try {
    await source.query('BEGIN');
    await source.query(`DROP SCHEMA IF EXISTS ${quotedSchema(row.schema_name)} CASCADE`);
    for (const table of Object.keys(SITE_ROWS)) await source.query(`DELETE FROM public.${table} WHERE site_schema = $1`, [row.schema_name]);
    await source.query('DELETE FROM public.tenant_schemas WHERE schema_name = $1', [row.schema_name]);
    await source.query('COMMIT');
  } catch (err) {
    await source.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    await source.end().catch(() => undefined);
  }
  await options.em.execute('DELETE FROM public.site_moves WHERE site_uuid = ?', [row.site_uuid]);
  return row;
}
