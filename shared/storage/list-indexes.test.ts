// The object list's substring filters and its ordering are index-backed (docs/storage.md
// "Limits"): each condition, as object.list.ts writes it, can be served by an index of the site
// schema (sequential scans off, so the planner shows whether an index serves it at all). The
// prefix's (bucket, path) index shows in the benchmark's plans (docs/benchmarks.md), on a table
// with statistics; on an empty one the planner may take either bucket index.
import test from 'ava';
import { platformDatabase } from '../testing/platform-db.ts';
import { createTestSite } from '../testing/sites.ts';

const orm = platformDatabase(test);

test('the substring filters and the ordering of the object list use indexes', async (t) => {
  const site = await createTestSite(orm().em.fork());
  // The substring conditions alone (beside the bucket's condition the empty table's planner would take the bucket index).
  const plan = async (where: string, params: unknown[], order?: string) =>
    orm().em.fork().transactional(async (tx) => {
      await tx.execute('SET LOCAL enable_seqscan = off');
      const rows = (await tx.execute(`EXPLAIN SELECT o.* FROM "${site.schema}".storage_objects o WHERE ${where}${order ? ` ORDER BY ${order} LIMIT 10` : ''}`, params)) as { 'QUERY PLAN': string }[];
      return rows.map((r) => r['QUERY PLAN']).join('\n');
    });
  const like = "ILIKE ? ESCAPE '\\'";
  t.regex(await plan(`(o.filename ${like} OR o.path ${like})`, ['%report%', '%report%']), /storage_objects_filename_trgm[\s\S]*storage_objects_path_trgm|storage_objects_path_trgm[\s\S]*storage_objects_filename_trgm/);
  t.regex(await plan(`o.metadata::text ${like}`, ['%Ada Lovelace%']), /storage_objects_metadata_trgm/);
  t.regex(await plan(`o.path ${like}`, ['%q1%']), /storage_objects_path_trgm/);
  t.regex(await plan('o.bucket_id = 1', [], 'o.created_at DESC, o.id DESC'), /storage_objects_created_idx/);
});
