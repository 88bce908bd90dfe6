// The change log of a site's records (issue 35, docs/realtime.md): `record_changes` in the site's
// schema, written by statement-level triggers in the transaction of every change (tenant
// migrations 16 and 17). Each statement that changes a table writes one entry (one per
// RECORD_CHANGES_CHUNK rows), numbered by the table's own sequence; the change at index i of entry
// `seq` is at position `seq * RECORD_CHANGES_CHUNK + i`, so a reader follows one table by
// position. Entry numbers are taken before commit: a reader that sees entry 7 committed while 6
// is not may be looking at a transaction still in flight (it will commit 6) or at a rollback (6
// never comes). Writers hold a shared advisory lock on their table until they end; at a gap the
// reader reads who holds it, *then* the log again, and waits only while one of those writers is
// still there (readChanges). Exactly once, in order, without serialising writers.
import type { EntityManager } from '@mikro-orm/postgresql';
import { preparedRows, rows } from '../db/sql.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { RECORD_CHANGES_CHUNK, RECORD_CHANGES_LOCK } from '../tenancy/migrations.ts';
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

/** A logged row (json of the physical row, or json null: none) as `source` reads it. */
const asRecord = (source: ChangeSource, row: string) =>
  `CASE WHEN json_typeof(${row}) IS DISTINCT FROM 'object' THEN NULL ELSE (SELECT ${source.recordSql('t')} FROM json_populate_record(NULL::${source.table}, ${row}) t) END`;

/** The entry of a position. */
const entryOf = (pos: number) => Math.floor(pos / RECORD_CHANGES_CHUNK);

/** `pos` comes right after `prev`: in its entry or the next one (a gap is an entry missing between them). */
const follows = (prev: number, pos: number) => entryOf(pos) <= entryOf(prev) + 1;

/** The position of the last change of an entry (a row of the log). */
const LAST_OF_ENTRY = `seq * ${RECORD_CHANGES_CHUNK} + n - 1`;

/**
 * The changes of the table of `source` (physical name `table`, oid `relid`) after `state.pos` that
 * are final, in order: up to the first gap between entries that a writer still in flight may
 * fill. `state` moves on. One statement when the entries follow each other; at a gap, the lock's
 * holders, then the log again (a writer that commits between the two is seen by the second; one
 * still in flight, by the first).
 */
export async function readChanges(em: EntityManager, site: string, table: string, relid: number, source: ChangeSource, state: ReadState): Promise<{ changes: LoggedChange[]; waiting: boolean }> {
  const read = () =>
    preparedRows<{ pos: string; r: RecordRow | null; o: RecordRow | null; actor: string | null; at: string }>(
      em,
      `SELECT c.seq * ${RECORD_CHANGES_CHUNK} + e.i - 1 AS pos, ${asRecord(source, 'e.n')} AS r, ${asRecord(source, 'e.o')} AS o, c.actor,
              to_char(c.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at
         FROM ${quotedSchema(site)}.record_changes c, ROWS FROM (json_array_elements(c.record), json_array_elements(c.old)) WITH ORDINALITY AS e(n, o, i)
        WHERE c.tbl = ? AND c.seq >= ? AND c.seq * ${RECORD_CHANGES_CHUNK} + e.i - 1 > ? ORDER BY c.seq, e.i LIMIT ${READ_BATCH}`,
      [table, entryOf(state.pos), state.pos],
    );
  let found = await read();
  let inFlight: Set<string> | undefined;
  if (state.gapHolders || found.some((c, i) => !follows(i ? Number(found[i - 1]!.pos) : state.pos, Number(c.pos)))) {
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
    if (!follows(state.pos, pos) && inFlight) {
      // A gap: final once none of the writers that held the lock when it was first seen is left.
      const still = [...(state.gapHolders ?? inFlight)].filter((v) => inFlight.has(v));
      if (still.length) {
        state.gapHolders = new Set(still);
        return { changes, waiting: true };
      }
    }
    state.gapHolders = undefined;
    state.pos = pos;
    const [record, old] = [c.r && source.plain(c.r), c.o && source.plain(c.o)];
    changes.push({ pos, op: !old ? 'create' : !record ? 'delete' : 'update', record, old, actor: c.actor, at: c.at });
  }
  return { changes, waiting: false };
}

/**
 * Where a table's log stands: `pruned`, the last position pruned (a subscriber that saw it
 * missed nothing; 0: none); `last`, its newest position (`pruned` when nothing is kept).
 */
export async function logBounds(em: EntityManager, site: string, table: string): Promise<{ pruned: number; last: number }> {
  const q = quotedSchema(site);
  const [row] = await rows<{ pruned: string | null; last: string | null }>(
    em,
    `SELECT (SELECT pruned_to FROM ${q}.record_changes_tables WHERE tbl = ?) AS pruned,
            (SELECT ${LAST_OF_ENTRY} FROM ${q}.record_changes WHERE tbl = ? ORDER BY seq DESC LIMIT 1) AS last`,
    [table, table],
  );
  const pruned = Number(row?.pruned ?? 0);
  return { pruned, last: row?.last == null ? pruned : Number(row.last) };
}

/** How long and how much of each table's change log is kept (config.realtime). */
export interface Retention {
  retentionHours: number;
  retentionRows: number;
}

/**
 * The changes past their retention go, in every site schema of `em`'s cluster, a whole entry at a
 * time: older than `retentionHours`, or once the entries after it in its table hold
 * `retentionRows` changes; each table keeps the last position pruned (`pruned_to`). A subscriber
 * that resumes from before it gets a `reset` (feed.ts). The log has no index on time (it would
 * cost every write): each site's log is read once per run. Returns how many changes went.
 */
export async function pruneChangeLogs(em: EntityManager, retention: Retention): Promise<number> {
  const sites = await rows<{ schema_name: string }>(em, `SELECT schema_name FROM public.tenant_schemas WHERE to_regclass(format('%I.record_changes', schema_name)) IS NOT NULL ORDER BY schema_name`);
  let deleted = 0;
  for (const { schema_name: site } of sites) {
    const q = quotedSchema(site);
    const [row] = await rows<{ n: string }>(
      em,
      `WITH later AS (SELECT tbl, seq, sum(n) OVER (PARTITION BY tbl ORDER BY seq DESC) - n AS changes FROM ${q}.record_changes),
            gone AS (DELETE FROM ${q}.record_changes c USING later l
                      WHERE c.tbl = l.tbl AND c.seq = l.seq AND (c.at < now() - make_interval(hours => ?) OR l.changes >= ?) RETURNING c.tbl, c.seq, c.n),
            marked AS (UPDATE ${q}.record_changes_tables t SET pruned_to = greatest(t.pruned_to, g.top)
                         FROM (SELECT tbl, max(${LAST_OF_ENTRY}) AS top FROM gone GROUP BY tbl) g WHERE t.tbl = g.tbl)
       SELECT coalesce(sum(n), 0) AS n FROM gone`,
      [retention.retentionHours, retention.retentionRows],
    );
    deleted += Number(row?.n ?? 0);
  }
  return deleted;
}
