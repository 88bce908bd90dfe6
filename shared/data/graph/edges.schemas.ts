// The edge routes' bodies as OpenAPI documents them (the service checks requests itself, with
// field-keyed errors: `{index}.from_id` …).
import { Type, type Static } from '@sinclair/typebox';

/** Edges per create request (one statement), and ids per delete. */
export const MAX_EDGES_PER_REQUEST = 10_000;
export const MAX_EDGE_IDS = 1000;

export const EdgeIdParam = { edge_id: Type.String({ minLength: 1, maxLength: 100 }) };

export const EdgeView = Type.Object({
  id: Type.String({ format: 'uuid' }),
  from_id: Type.Unknown({ description: 'The key of the record the edge starts from ("A" in "A\'s T is B").' }),
  to_id: Type.Unknown({ description: 'The key of the record the edge points to.' }),
  type: Type.String({ maxLength: 50 }),
  metadata: Type.Unknown(),
  created_at: Type.String({ format: 'date-time' }),
});

export type EdgeView = Static<typeof EdgeView>;

export const EdgePage = Type.Object({ total: Type.Integer(), page: Type.Integer(), page_size: Type.Integer(), results: Type.Array(EdgeView) });
export type EdgePage = Static<typeof EdgePage>;
export const EdgesCreated = Type.Object({ total: Type.Integer(), results: Type.Array(EdgeView) });
export const EdgeData = Type.Object({ data: EdgeView });
export const EdgesDeleted = Type.Object({ deleted: Type.Integer(), message: Type.String() });

export const EdgeListQuery = Type.Object(
  {
    from_id: Type.Optional(Type.String({ description: 'Only the edges starting from this record (its key).' })),
    to_id: Type.Optional(Type.String({ description: 'Only the edges pointing to this record (its key).' })),
    types: Type.Optional(Type.String({ description: 'Comma list of edge types.' })),
    page: Type.Optional(Type.String({ description: 'Page number (default 1).' })),
    page_size: Type.Optional(Type.String({ description: 'Edges per page (default 20, at most 1000).' })),
  },
  { additionalProperties: true },
);
