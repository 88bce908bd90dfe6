// `platform edges …` and the hierarchy flags of `platform data list/get`, in both modes (remote:
// the site's login; direct: the site schema as the system actor): the same output (ids and times
// aside), and the edges really changed (read back through the API).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { cliEnv, json, MODES, runCli, siteWithLogin, volatile, type Mode } from './helpers.ts';

let s: TestServer;
let site: TestSite;
let configDir: string;
let tmp: string;
let admin: string;
const SCHEMA = {
  fields: [{ name: 'id', type: 'integer' }, { name: 'name', type: 'string' }],
  primaryKey: 'id',
  hierarchy: true,
  graph: { types: [{ name: 'reports_to', inverse: 'direct_reports', constraints: { max_outgoing: 1 } }] },
};

const api = (method: string, p: string, body?: unknown) => s.api(method, `/sites/${site.schema}${p}`, { token: admin, body });
/** `platform …args --site <schema> --app hr-<mode> [--direct]`: each mode works on its own copy. */
const run = (mode: Mode, args: string[]) => runCli([...args, '--table', 'people', '--site', site.schema, '--app', `hr-${mode}`, ...(mode === 'direct' ? ['--direct'] : [])], cliEnv(s, configDir));
const edgesOf = async (mode: Mode) => (await api('GET', `/api/apps/hr-${mode}/datatables/people/edges/?page_size=1000`)).body;

test.before(async () => {
  s = await startTestServer();
  ({ site, admin, configDir } = await siteWithLogin(s));
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-edges-test-'));
  for (const mode of MODES) {
    const app = `/api/apps/hr-${mode}`;
    for (const [method, p, body] of [
      ['POST', '/api/apps/', { name: `HR ${mode}` }],
      ['POST', `${app}/datasources/`, { name: 'Main', slug: 'main', provider_type: 'flat_table' }],
      ['POST', `${app}/datasources/main/datatables/`, { name: 'people', json_schema: SCHEMA }],
      ['POST', `${app}/datatables/people/materialize/`, undefined],
      ['POST', `${app}/datatables/people/data/`, Array.from({ length: 30 }, (_, i) => ({ id: i + 1, name: `P${i + 1}` }))],
    ] as [string, string, unknown][]) {
      const r = await api(method, p, body);
      if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${r.text}`);
    }
  }
});
test.after.always(async () => {
  await s?.close();
  fs.rmSync(configDir, { recursive: true, force: true });
  fs.rmSync(tmp, { recursive: true, force: true });
});

test.serial('edges create (flags, file, batches), list, update, delete: the same output in both modes', async (t) => {
  const out: Record<Mode, string[]> = { remote: [], direct: [] };
  const file = path.join(tmp, 'edges.json');
  fs.writeFileSync(file, JSON.stringify([{ from_id: 3, to_id: 1, type: 'reports_to' }, { from_id: 4, to_id: 2, type: 'reports_to', metadata: { since: 2024 } }]));
  const chain = path.join(tmp, 'chain.json');
  fs.writeFileSync(chain, JSON.stringify(Array.from({ length: 25 }, (_, i) => ({ from_id: i + 6, to_id: i + 5, type: 'reports_to' }))));
  const tooMany = path.join(tmp, 'too-many.json');
  fs.writeFileSync(tooMany, JSON.stringify(Array.from({ length: 10_001 }, () => ({ from_id: 1, to_id: 2, type: 'reports_to' }))));
  for (const mode of MODES) {
    const one = await run(mode, ['edges', 'create', '--from-id', '2', '--to-id', '1', '--type', 'reports_to']);
    t.is(one.code, 0, one.stderr);
    t.regex(one.stdout, /^Created 1 edge\.\nID +FROM +TYPE +TO +METADATA +CREATED\n[0-9a-f-]{36} +2 +reports_to +1 +- +\d{4}-/);
    out[mode].push(one.stdout);
    const fromFile = await run(mode, ['edges', 'create', '--file', file, '--json']);
    t.is(fromFile.code, 0, fromFile.stderr);
    t.like(json(fromFile), { total: 2, results: [{ from_id: 3, to_id: 1 }, { from_id: 4, to_id: 2, metadata: { since: 2024 } }] });
    const batched = await run(mode, ['edges', 'create', '--file', chain, '--batch-size', '10', '--json']);
    t.is(batched.code, 0, batched.stderr);
    t.is(json(batched).total, 25);
    t.is((await edgesOf(mode)).total, 28);
    const refused = await run(mode, ['edges', 'create', '--file', tooMany]);
    t.is(refused.code, 1);
    t.is(refused.stderr, 'Error: Invalid input.\n  batch-size: 10001 edges are more than one request holds (10000): give --batch-size to send them in batches, each all or nothing.\n');
    const badType = await run(mode, ['edges', 'create', '--from-id', '5', '--to-id', '1', '--type', 'manages']);
    t.is(badType.code, 1);
    t.is(badType.stderr, 'Error: Invalid edges: nothing was stored.\n  0.type: Unknown type "manages"; the types of this table are reports_to.\n');
    const overLimit = await run(mode, ['edges', 'create', '--from-id', '3', '--to-id', '2', '--type', 'reports_to', '--json']);
    t.is(overLimit.code, 1);
    t.is(json(overLimit).message, 'Constraint max_outgoing of type "reports_to" is 1: record 3 would have 2 outgoing "reports_to" edges.');

    const list = await run(mode, ['edges', 'list', '--to-id', '1']);
    t.is(list.code, 0, list.stderr);
    t.regex(list.stdout, /^ID +FROM +TYPE +TO +METADATA +CREATED\n/);
    t.true(list.stdout.endsWith('\n\n2 edges\n'), list.stdout);
    out[mode].push(volatile(list.stdout).split('\n').slice(1).sort().join('\n'));
    const page = await run(mode, ['edges', 'list', '--types', 'reports_to', '--page-size', '5', '--page', '2', '--json']);
    t.like(json(page), { total: 28, page: 2, page_size: 5 });

    const id = (await edgesOf(mode)).results.find((e: { from_id: number }) => e.from_id === 4).id;
    const upd = await run(mode, ['edges', 'update', id, '--to-id', '1', '--metadata', '{"since":2025}']);
    t.is(upd.code, 0, upd.stderr);
    t.regex(upd.stdout, /^id: +[0-9a-f-]{36}\nfrom_id: +4\nto_id: +1\ntype: +reports_to\nmetadata: +\{"since":2025\}\n/);
    out[mode].push(upd.stdout);
    const nothing = await run(mode, ['edges', 'update', id]);
    t.is(nothing.stderr, 'Error: Nothing to change: give --from-id, --to-id, --type or --metadata.\n');
    const del = await run(mode, ['edges', 'delete', '--ids', `${id},00000000-0000-0000-0000-000000000000`]);
    t.is(del.stdout, '1 edge deleted.\n');
    t.is((await edgesOf(mode)).total, 27);
  }
  t.deepEqual(out.direct.map(volatile), out.remote.map(volatile));
});

test.serial('data get / list with the hierarchy flags: include, tree and graph forms, as text and JSON', async (t) => {
  const out: Record<Mode, string[]> = { remote: [], direct: [] };
  for (const mode of MODES) {
    const include = await run(mode, ['data', 'get', '1', '--include', 'descendants', '--depth', '1']);
    t.is(include.code, 0, include.stderr);
    t.is(include.stdout, 'id:   1\nname: P1\n\ndirect_reports: 2 records\nID  NAME  _DEPTH  _RELATIONSHIP_TYPE\n2   P2    1       reports_to\n3   P3    1       reports_to\n');
    out[mode].push(include.stdout);
    const tree = await run(mode, ['data', 'get', '5', '--format', 'tree', '--include', 'descendants', '--depth', '2']);
    t.is(tree.stdout, 'id=5 name=P5\n  └ (reports_to) id=6 name=P6\n    └ (reports_to) id=7 name=P7\n\n3 records\n');
    out[mode].push(tree.stdout);
    const graph = await run(mode, ['data', 'get', '2', '--format', 'graph', '--relationship-type', 'reports_to', '--json']);
    t.deepEqual(json(graph).data.nodes.map((n: { id: number }) => n.id), [2, 1], 'its manager; no one reports to 2 any more');
    t.deepEqual(json(graph).data.edges.map((e: { from: number; to: number }) => [e.from, e.to]), [[2, 1]]);
    const roots = await run(mode, ['data', 'list', '--format', 'tree', '--depth', '1', '--filter', 'id__lte=5', '--json']);
    t.deepEqual(json(roots).data.map((r: { id: number; children: unknown[] }) => [r.id, r.children.length]), [[1, 2], [4, 0], [5, 1]], 'the roots: records without a manager');
    const bad = await run(mode, ['data', 'get', '1', '--include', 'everything']);
    t.is(bad.code, 1);
    t.is(bad.stderr, 'Error: include must be descendants, ancestors or both; got "everything".\n  include: include must be descendants, ancestors or both; got "everything".\n');
  }
  t.deepEqual(out.direct, out.remote);
});
