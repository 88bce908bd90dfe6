// `hierarchy` and `graph` in a Table Schema: every problem reported at once (as the rest of the
// schema), labels that would collide in a response, composite keys refused for hierarchies.
import test from 'ava';
import { validateTableSchema } from '../table-schema.ts';
import { edgeTypesOf, hasEdges } from './schema.ts';

const fields = [{ name: 'id', type: 'integer' }, { name: 'name', type: 'string' }, { name: 'team', type: 'string' }];
const ok = (extra: Record<string, unknown>, f: unknown[] = fields) => validateTableSchema({ fields: f, primaryKey: 'id', ...extra });

test('a valid graph: types with inverses, constraints (integers or null), descriptions', (t) => {
  const graph = {
    enabled: true,
    types: [
      { name: 'reports_to', inverse: 'direct_reports', constraints: { max_outgoing: 1, max_incoming: null }, description: 'Line management' },
      { name: 'mentored_by', inverse: 'mentees' },
    ],
  };
  t.deepEqual(ok({ hierarchy: true, graph }), []);
  t.true(hasEdges({ hierarchy: true, graph }));
  t.false(hasEdges({ hierarchy: true, graph: { ...graph, enabled: false } }));
  t.false(hasEdges({ hierarchy: false, graph }));
  t.true(hasEdges({ hierarchy: true }), 'graph.enabled defaults to true');
  t.deepEqual(edgeTypesOf({ graph }).map((x) => x.name), ['reports_to', 'mentored_by']);
});

test('every problem of graph at once: shapes, names, inverses, constraints, unknown keys', (t) => {
  const errors = ok({
    hierarchy: true,
    graph: {
      enabled: 'yes',
      colour: 1,
      types: [
        { name: 'x'.repeat(51), inverse: 'ok_inverse' },
        { inverse: 'lonely' },
        { name: 'reports_to', inverse: 'team', constraints: { max_outgoing: -1, max_incoming: 1.5, max_total: 3 }, extra: true },
        { name: 'bad name', inverse: 'data', description: 7 },
        { name: 'reports_to', inverse: 'reports_to2' },
        'nope',
      ],
    },
  });
  t.deepEqual(errors, [
    "graph: unknown property 'colour' (enabled, types).",
    'graph.enabled must be a boolean.',
    `graph type '${'x'.repeat(51)}': name "${'x'.repeat(51)}" must be 1 to 50 characters: a letter, then letters, digits or _.`,
    'graph.types[1]: name is required.',
    "graph type 'reports_to': unknown property 'extra'.",
    "graph type 'reports_to': inverse 'team' would be a key of the include form beside the field 'team'; choose another.",
    "graph type 'reports_to': constraint max_outgoing must be a non-negative integer or null.",
    "graph type 'reports_to': constraint max_incoming must be a non-negative integer or null.",
    "graph type 'reports_to': unknown constraint 'max_total' (max_outgoing, max_incoming).",
    `graph type 'bad name': name "bad name" must be 1 to 50 characters: a letter, then letters, digits or _.`,
    "graph type 'bad name': inverse 'data' would be a key of the include form beside the record's 'data'; choose another.",
    "graph type 'bad name': description must be a string.",
    'graph.types[5]: must be an object.',
    "graph.types: 'reports_to' is used more than once (names and inverses are keys of one response).",
  ]);
  t.deepEqual(ok({ hierarchy: true, graph: { types: {} } }), ['graph.types must be an array.']);
  t.deepEqual(ok({ hierarchy: true, graph: { types: [{ name: 'parent', inverse: 'parent' }] } }), ["graph.types: 'parent' is used more than once (names and inverses are keys of one response)."]);
});

test('hierarchy needs a single-field primary key: a composite key is refused, the generated id is fine', (t) => {
  const composite = validateTableSchema({ fields: [{ name: 'a', type: 'integer' }, { name: 'b', type: 'integer' }], primaryKey: ['a', 'b'], hierarchy: true });
  t.deepEqual(composite, ['hierarchy needs a single-field primary key (edges reference one key column); primaryKey has 2 fields (a, b).']);
  t.deepEqual(validateTableSchema({ fields: [{ name: 'a', type: 'integer' }, { name: 'b', type: 'integer' }], primaryKey: ['a', 'b'], hierarchy: true, graph: { enabled: false } }), [], 'no edges, no constraint');
  t.deepEqual(validateTableSchema({ fields: [{ name: 'name', type: 'string' }], hierarchy: true }), [], 'the generated id is a single key');
});

test('a hierarchy table refuses fields named like the keys its responses add', (t) => {
  const f = [{ name: 'id', type: 'integer' }, { name: 'children', type: 'array' }, { name: '_depth', type: 'integer' }, { name: 'descendants', type: 'integer' }];
  t.deepEqual(ok({ hierarchy: true }, f), [
    "Field 'children': the name is a key of hierarchy responses; rename the field.",
    "Field '_depth': the name is a key of hierarchy responses; rename the field.",
    "Field 'descendants': the name is a key of hierarchy responses when graph.types declares no type; rename the field.",
  ]);
  const typed = ok({ hierarchy: true, graph: { types: [{ name: 'part_of', inverse: 'parts' }] } }, f);
  t.false(typed.some((e) => e.includes('descendants')), 'declared types: their labels are the keys');
  t.deepEqual(ok({}, f), [], 'no hierarchy, no reserved names');
});
