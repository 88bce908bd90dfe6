// The edges of hierarchy tables (scope 'tenant'), spec Part 2 §4 "Edge routes": served under
// /api/apps/{app_slug}/datatables/{name}/edges/ and with the data source segment.
// docs/hierarchy.md.
import { Type } from '@sinclair/typebox';
import * as edges from '../../shared/data/graph/edges.ts';
import { EdgeData, EdgeIdParam, EdgeListQuery, EdgePage, EdgesCreated, EdgesDeleted, MAX_EDGE_IDS, MAX_EDGES_PER_REQUEST } from '../../shared/data/graph/edges.schemas.ts';
import type { RouteDef } from '../http/registry.ts';
import { perTable, scopeOf } from './datatables.routes.ts';

const READ = 'Needs the `read` action on the table; an edge is listed only when the caller may read both its records.';
const WRITE = 'Needs the `update` action on the table, on the record each edge starts from, and `read` on the record it points to; a record that does not exist is a 400 naming it. Writes hold the table\'s edge lock, so max_outgoing / max_incoming (400 naming the constraint, the record and the type) cannot be exceeded by concurrent writes.';

export function edgeRoutes(): RouteDef[] {
  return [
    ...perTable({
      method: 'get',
      suffix: 'edges/',
      operationId: 'edges_list',
      summary: 'List the edges of a hierarchy table',
      description: `Filters \`from_id\`, \`to_id\`, \`types\` (comma list); pages \`page\`/\`page_size\` (default 20, at most 1000) or \`limit\`/\`offset\`; oldest first. ${READ}`,
      query: EdgeListQuery,
      responses: { 200: EdgePage },
      async handler(ctx, { params, query }) {
        ctx.body = await edges.listEdges(ctx.state.service(), scopeOf(params), params.name!, query);
      },
    }, 'edges'),
    ...perTable({
      method: 'post',
      suffix: 'edges/',
      bodyLimit: 'data',
      operationId: 'edges_create',
      summary: 'Create edges (all or nothing)',
      description: `An array (at most ${MAX_EDGES_PER_REQUEST}) of {from_id, to_id, type, metadata?} → 201 {total, results}. The edge from A to B of type T reads "A's T is B". type must be one of graph.types when the table declares some; the same edge twice is a 409. ${WRITE}`,
      body: Type.Unknown(),
      responses: { 201: EdgesCreated },
      async handler(ctx, { params, body }) {
        ctx.status = 201;
        ctx.body = await edges.createEdges(ctx.state.service(), scopeOf(params), params.name!, body);
      },
    }, 'edges'),
    ...perTable({
      method: 'delete',
      suffix: 'edges/',
      operationId: 'edges_destroy_many',
      summary: 'Delete edges by id',
      description: `Body {edge_ids: [...]} (at most ${MAX_EDGE_IDS}) → {deleted, message}; ids that do not exist are not counted. ${WRITE}`,
      body: Type.Unknown(),
      responses: { 200: EdgesDeleted },
      async handler(ctx, { params, body }) {
        ctx.body = await edges.deleteEdges(ctx.state.service(), scopeOf(params), params.name!, body);
      },
    }, 'edges'),
    ...perTable({
      method: 'patch',
      suffix: 'edges/:edge_id/',
      extraParams: EdgeIdParam,
      operationId: 'edges_update',
      summary: 'Update an edge',
      description: `Body {from_id?, to_id?, type?, metadata?}: the given fields replace the edge's and the whole edge is checked again (records, type, duplicates, constraints) → {data}. ${WRITE}`,
      body: Type.Unknown(),
      responses: { 200: EdgeData },
      async handler(ctx, { params, body }) {
        ctx.body = await edges.updateEdge(ctx.state.service(), scopeOf(params), params.name!, params.edge_id!, body);
      },
    }, 'edges'),
  ];
}
