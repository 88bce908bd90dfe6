// `platform edges …`: the edges of a hierarchy table (/api/apps/{app}/datatables/{table}/edges/).
import { Args, Flags } from '@oclif/core';
import { MAX_EDGES_PER_REQUEST, type EdgePage, type EdgeView } from '../../shared/data/graph/edges.schemas.ts';
import { DomainError, fieldError } from '../../shared/errors.ts';
import { defined, path } from '../api.ts';
import { api, ApiCommand, operation } from '../base.ts';
import { parseJson } from '../flags.ts';
import { columns, keyValues, table } from '../output.ts';
import { appFlag, jsonInput, pageLines, plural, progress, show, siteFlag, tableFlag } from '../tables.ts';

const tableFlags = { site: siteFlag, app: appFlag, table: tableFlag };
const edgesPath = (f: { app: string; table: string }, rest = '') => path`/api/apps/${f.app}/datatables/${f.table}/edges/` + rest;
const COLUMNS = columns<EdgeView>('id from_id:from type to_id:to metadata created_at:created', {
  from_id: (e) => show(e.from_id),
  to_id: (e) => show(e.to_id),
  metadata: (e) => (e.metadata === null ? null : JSON.stringify(e.metadata)), // a string too, quoted
  created_at: (e) => e.created_at,
});

type EdgeFlags = { 'from-id'?: string; 'to-id'?: string; type?: string; metadata?: string };
const endFlags = {
  'from-id': Flags.string({ summary: 'The key of the record the edge starts from ("A" in "A\'s type is B").' }),
  'to-id': Flags.string({ summary: 'The key of the record the edge points to.' }),
  type: Flags.string({ summary: 'The edge type (one of graph.types when the table declares some).' }),
  metadata: Flags.string({ summary: "The edge's metadata, as JSON." }),
};
const edgeOf = (f: EdgeFlags) => defined({ from_id: f['from-id'], to_id: f['to-id'], type: f.type, metadata: f.metadata === undefined ? undefined : parseJson(f.metadata, 'metadata') });

type Created = { total: number; results: EdgeView[] };

class EdgesCreateCommand extends ApiCommand<typeof EdgesCreateCommand> {
  static override summary = 'Create edges: one from the flags, or an array from a JSON file, stdin or --data (all or nothing).';
  static override description = `One request holds at most ${MAX_EDGES_PER_REQUEST} edges and stores all of them or none. A larger file needs --batch-size: batches of that size, each all or nothing, with progress on stderr; a batch that fails stops the command (the batches before it stay stored: the message says how many). --json prints {total, results}.`;
  static override examples = [
    '<%= config.bin %> edges create --from-id 7 --to-id 3 --type reports_to --table employees --site shop_prod --app hr',
    'cat edges.json | <%= config.bin %> edges create --file - --batch-size 5000 --table employees --site shop_prod --app hr',
  ];
  static override flags = {
    ...tableFlags,
    file: Flags.string({ summary: 'A JSON file holding an array of {from_id, to_id, type, metadata?} (- reads stdin).' }),
    data: Flags.string({ summary: 'The edges as JSON (an array, or one edge).' }),
    ...endFlags,
    'batch-size': Flags.integer({ summary: `Send the edges in batches of this many (1 to ${MAX_EDGES_PER_REQUEST}); each batch is all or nothing.`, min: 1, max: MAX_EDGES_PER_REQUEST }),
  };

  async run(): Promise<Created> {
    const f = this.flags;
    const single = f['from-id'] !== undefined || f['to-id'] !== undefined || f.type !== undefined;
    if ([f.file !== undefined, f.data !== undefined, single].filter(Boolean).length !== 1) throw new DomainError('BAD_REQUEST', 'Give the edges one way: --file F.json (or - for stdin), --data JSON, or --from-id/--to-id/--type.');
    const given = single ? edgeOf(f) : jsonInput(f.data, f.file);
    const edges = Array.isArray(given) ? given : [given];
    const size = f['batch-size'] ?? MAX_EDGES_PER_REQUEST;
    if (f['batch-size'] === undefined && edges.length > size) throw fieldError('batch-size', `${edges.length} edges are more than one request holds (${size}): give --batch-size to send them in batches, each all or nothing.`);
    const out: Created = { total: 0, results: [] };
    const tick = progress((line) => this.info(line));
    for (let from = 0; from < edges.length; from += size) {
      const batch = edges.slice(from, from + size);
      const body = await this.call<Created>({ method: 'POST', site: f.site, path: edgesPath(f), body: batch }).catch((err: unknown) => {
        if (from === 0 || !(err instanceof DomainError)) throw err;
        throw new DomainError(err.code, `${err.message} (batch of edges ${from + 1}–${from + batch.length}; the ${out.total} edges before it are stored)`, { errors: err.errors, detail: err.detail });
      });
      out.total += body.total;
      out.results.push(...body.results);
      if (edges.length > size) tick(() => `  ${out.total} of ${edges.length} edges stored…`);
    }
    this.log(`Created ${plural(out.total, 'edge')}.`);
    if (out.results.length <= 20) this.log(table(out.results, COLUMNS));
    return out;
  }
}

export const EDGE_COMMANDS = {
  'edges:list': api('edges_list_by_app', {
    rename: { name: 'table' },
    examples: ['edges list --from-id 7 --types reports_to,mentored_by --table employees --site shop_prod --app hr'],
    render: (body: EdgePage) => pageLines(table(body.results, COLUMNS), body.results.length, body, 'edge'),
  }),
  'edges:create': EdgesCreateCommand,
  'edges:update': operation({
    summary: 'Change an edge: the given fields replace its own, and the whole edge is checked again.',
    examples: [`edges update 3f0c…-… --metadata '{"since":2024}' --table employees --site shop_prod --app hr`],
    args: { id: Args.string({ description: 'The edge id', required: true }) },
    flags: { ...tableFlags, ...endFlags },
    request: ({ flags: f, args }) => {
      const body = edgeOf(f);
      if (!Object.keys(body).length) throw new DomainError('BAD_REQUEST', 'Nothing to change: give --from-id, --to-id, --type or --metadata.');
      return { method: 'PATCH', site: f.site, path: edgesPath(f, path`${args.id}/`), body };
    },
    render: (body: { data: EdgeView }) => keyValues(body.data),
  }),
  'edges:delete': operation({
    summary: 'Delete edges by id.',
    description: 'Ids that do not exist are not counted. Prints {deleted, message} with --json.',
    examples: ['edges delete --ids 3f0c…,9a1b… --table employees --site shop_prod --app hr'],
    flags: { ...tableFlags, ids: Flags.string({ summary: 'The edge ids: a,b,c.', required: true }) },
    request: ({ flags: f }) => ({ method: 'DELETE', site: f.site, path: edgesPath(f), body: { edge_ids: f.ids.split(',').map((x) => x.trim()).filter(Boolean) } }),
    render: (body: { message: string }) => body.message,
  }),
};
