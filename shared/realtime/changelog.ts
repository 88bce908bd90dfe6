// The change log of a site's records (issue 35, docs/realtime.md): `record_changes` in the site's
// schema, written by statement-level triggers in the transaction of every change (tenant
// migration 16: record_changes_log). Each table numbers its changes with its own sequence, so a
// reader follows one table by position. Positions are taken before commit: a reader that sees
// position 7 committed while 6 is not may be looking at a transaction still in flight (it will
// commit 6) or at a rollback (6 never comes). Writers hold a shared advisory lock on their table
// until they end; at a gap the reader reads who holds it, *then* the log again, and waits only
// while one of those writers is still there (readChanges). Exactly once, in order, without
// serialising writers.
import type { EntityManager } from '@mikro-orm/postgresql';
import { preparedRows, quoteIdent, rows } from '../db/sql.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { RECORD_CHANGES_LOCK } from '../tenancy/migrations.ts';
import type { ProviderType } from '../data/ddl.ts';
import { primaryKeyOf, type TableSchema } from '../data/table-schema.ts';
import { plain } from '../data/records/read.ts';
import type { RecordRow, TableView } from '../data/records/target.ts';

/** The key columns of a materialized table's physical rows. */
export const physicalKey = (provider: ProviderType, schema: TableSchema): string[] => (provider === 'flat_table' ? primaryKeyOf(schema) : ['id']);

/** Starts logging the changes of a table just materialized (in its transaction). */
export async function attachChangeLog(tx: EntityManager, site: string, table: string, keys: string[]): Promise<void> {
  await tx.execute(`SELECT ${quotedSchema(site)}.record_changes_attach(?, ?, ARRAY(SELECT jsonb_array_elements_text(?::jsonb)))`, [site, table, JSON.stringify(keys)]);
}

/** Forgets a dropped table's changes and its trigger function (its sequence went with the table). */
export async function forgetChangeLog(tx: EntityManager, site: string, table: string): Promise<void> {
  await tx.execute(`SELECT ${quotedSchema(site)}.record_changes_detach(?, ?)`, [site, table]);
}

export type ChangeOp = 'create' | 'update' | 'delete';

/** One logged change, its rows as the records API shows them. */
export interface LoggedChange {
  pos: number;
  op: ChangeOp;
  record: RecordRow | null;
  old: RecordRow | null;
  actor: string | null;
  at: string;
}

/** Where a reader of one table stands: the last position read, and the gap it waits on, if any. */
export interface ReadState {
  pos: number;
  /** The writers (virtual transaction ids) that held the table's lock when a gap after `pos` was first seen. */
  gapHolders?: Set<string>;
}

/** The most changes read at once. */
export const READ_BATCH = 500;

/**
 * How the logged rows of a table are read back: the table (`"schema"."table"`), the SQL of a row
 * as a record over an alias (run by PostgreSQL on the logged row as a row of the table), and
 * what is done to it in process. For a data table, its records API view (recordsSource).
 */
export interface ChangeSource {
  table: string;
  recordSql(alias: string): string;
  plain(r: RecordRow): RecordRow;
}

/** A data table's rows as the records API shows them (written by PostgreSQL as the read path writes them). */
export const recordsSource = (view: TableView): ChangeSource => ({ table: view.table, recordSql: view.recordSql, plain: (r) => plain(view, r) });

/** A logged row (json of the physical row) as `source` reads it. */
const asRecord = (source: ChangeSource, column: string) =>
  `CASE WHEN c.${column} IS NULL THEN NULL ELSE (SELECT ${source.recordSql('t')} FROM json_populate_record(NULL::${source.table}, c.${column}) t) END`;

/**
 * The changes of the table of `source` (physical name `table`, oid `relid`) after `state.pos` that
 * are final, in order: up to the first gap a writer still in flight may fill. `state` moves on.
 * One statement when the positions follow each other; at a gap, the lock's holders, then the log
 * again (a writer that commits between the two is seen by the second; one still in flight, by the
 * first).
 */
export async function readChanges(em: EntityManager, site: string, table: string, relid: number, source: ChangeSource, state: ReadState): Promise<{ changes: LoggedChange[]; waiting: boolean }> {
  const read = () =>
    preparedRows<{ pos: string; op: ChangeOp; r: RecordRow | null; o: RecordRow | null; actor: string | null; at: string }>(
      em,
      `SELECT c.pos, c.op, ${asRecord(source, 'record')} AS r, ${asRecord(source, 'old')} AS o, c.actor,
              to_char(c.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at
         FROM ${quotedSchema(site)}.record_changes c WHERE c.tbl = ? AND c.pos > ? ORDER BY c.pos LIMIT ${READ_BATCH}`,
      [table, state.pos],
    );
  let found = await read();
  let inFlight: Set<string> | undefined;
  if (state.gapHolders || found.some((c, i) => Number(c.pos) !== state.pos + 1 + i)) {
    const holders = await preparedRows<{ v: string }>(
      em,
      `SELECT virtualtransaction AS v FROM pg_locks WHERE locktype = 'advisory' AND classid = ? AND objid = ? AND objsubid = 1 AND granted`,
      [RECORD_CHANGES_LOCK, relid],
    );
    inFlight = new Set(holders.map((h) => h.v));
    found = await read();
  }
  const changes: LoggedChange[] = [];
  for (const c of found) {
    const pos = Number(c.pos);
    if (pos !== state.pos + 1 && inFlight) {
      // A gap: final once none of the writers that held the lock when it was first seen is left.
      const still = [...(state.gapHolders ?? inFlight)].filter((v) => inFlight.has(v));
      if (still.length) {
        state.gapHolders = new Set(still);
        return { changes, waiting: true };
      }
    }
    state.gapHolders = undefined;
    state.pos = pos;
    changes.push({ pos, op: c.op, record: c.r && source.plain(c.r), old: c.o && source.plain(c.o), actor: c.actor, at: c.at });
  }
  return { changes, waiting: false };
}

/** The name of a table's position sequence (record_changes_attach). */
const sequenceOf = (table: string): string => `${table}_changes`.slice(0, 63);

/**
 * Where a table's log stands: `first`, its oldest position still kept (null: none kept); `last`,
 * its newest (the sequence's value when nothing is kept: every change was pruned).
 */
export async function logBounds(em: EntityManager, site: string, table: string): Promise<{ first: number | null; last: number }> {
  const q = quotedSchema(site);
  const [row] = await rows<{ first: string | null; last: string | null; taken: string | null }>(
    em,
    `SELECT min(pos) AS first, max(pos) AS last, (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM ${q}.${quoteIdent(sequenceOf(table))}) AS taken FROM ${q}.record_changes WHERE tbl = ?`,
    [table],
  );
  const first = row?.first ?? null;
  return { first: first === null ? null : Number(first), last: Number(row?.last ?? row?.taken ?? 0) };
}

/** How long and how much of each table's change log is kept (config.realtime). */
export interface Retention {
  retentionHours: number;
  retentionRows: number;
}

/**
 * The changes past their retention go, in every site schema of `em`'s cluster: older than
 * `retentionHours`, or beyond the newest `retentionRows` of each table. A subscriber that resumes
 * from a position pruned since gets a `reset` (feed.ts). The log has no index on time (it would
 * cost every write): each site's log is read once per run. Returns how many rows went.
 */
export async function pruneChangeLogs(em: EntityManager, retention: Retention): Promise<number> {
  const sites = await rows<{ schema_name: string }>(em, `SELECT schema_name FROM public.tenant_schemas WHERE to_regclass(format('%I.record_changes', schema_name)) IS NOT NULL ORDER BY schema_name`);
  let deleted = 0;
  for (const { schema_name: site } of sites) {
    const q = quotedSchema(site);
    const [row] = await rows<{ n: string }>(
      em,
      `WITH tops AS (SELECT tbl, max(pos) AS top FROM ${q}.record_changes GROUP BY tbl),
            gone AS (DELETE FROM ${q}.record_changes c USING tops t
                      WHERE c.tbl = t.tbl AND (c.at < now() - make_interval(hours => ?) OR c.pos <= t.top - ?) RETURNING 1)
       SELECT count(*) AS n FROM gone`,
      [retention.retentionHours, retention.retentionRows],
    );
    deleted += Number(row?.n ?? 0);
  }
  return deleted;
}
