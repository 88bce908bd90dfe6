// The filter tree: compilation to bound SQL (identifiers quoted from the schema only, LIKE
// escaped, values coerced per type), query-string parsing, and injection attempts refused.
import test from 'ava';
import { DomainError } from '../../errors.ts';
import type { TableSchema } from '../table-schema.ts';
import { likeEscape } from '../../common/filters.ts';
import { columnsOf, compileFilter, parseQueryFilters, type Filter } from './filter.ts';

const schema: TableSchema = {
  fields: [
    { name: 'name', type: 'string' },
    { name: 'age', type: 'integer' },
    { name: 'score', type: 'number' },
    { name: 'active', type: 'boolean' },
    { name: 'born', type: 'date' },
    { name: 'seen', type: 'datetime' },
    { name: 'tags', type: 'array' },
    { name: 'first__name', type: 'string' },
  ],
};
const cols = columnsOf(schema);
const errorsOf = (fn: () => unknown): Record<string, string[]> => {
  try {
    fn();
  } catch (err) {
    if (err instanceof DomainError && err.status === 400) return err.errors!;
    throw err;
  }
  throw new Error('expected a 400');
};

test('columnsOf: schema fields with their PostgreSQL types, plus the generated id without a declared key', (t) => {
  t.deepEqual(cols.get('id'), { column: 'id', pgType: 'uuid' });
  t.deepEqual(cols.get('age'), { column: 'age', pgType: 'bigint' });
  t.false(columnsOf({ ...schema, primaryKey: 'name' }).has('id'));
});

test('compileFilter: every operator, values bound and cast', (t) => {
  const tree: Filter = {
    op: 'and',
    args: [
      { op: 'eq', field: 'name', value: 'Ada' },
      { op: 'ne', field: 'age', value: '3' },
      { op: 'or', args: [{ op: 'lt', field: 'age', value: 10 }, { op: 'ge', field: 'score', value: '1.5' }] },
      { op: 'not', arg: { op: 'in', field: 'age', values: ['1', 2] } },
      { op: 'nin', field: 'name', values: ['x'] },
      { op: 'isnull', field: 'born', value: true },
      { op: 'isnull', field: 'seen', value: false },
      { op: 'between', field: 'born', low: '2000-01-01', high: '2000-12-31' },
      { op: 'icontains', field: 'name', value: '50%_off\\' },
      { op: 'startswith', field: 'name', value: 'A' },
      { op: 'iendswith', field: 'name', value: 'z' },
      { op: 'eq', field: 'active', value: 'true' },
    ],
  };
  const { sql, params } = compileFilter(tree, cols);
  t.is(
    sql,
    '("name" = ?::text AND "age" IS DISTINCT FROM ?::bigint AND ("age" < ?::bigint OR "score" >= ?::double precision) AND (NOT "age" IN (?::bigint, ?::bigint))'
      + ' AND ("name" IS NULL OR "name" NOT IN (?::text)) AND "born" IS NULL AND "seen" IS NOT NULL AND "born" BETWEEN ?::date AND ?::date'
      + ` AND "name" ILIKE ? ESCAPE '\\' AND "name" LIKE ? ESCAPE '\\' AND "name" ILIKE ? ESCAPE '\\' AND "active" = ?::boolean)`,
  );
  t.deepEqual(params, ['Ada', 3, 10, 1.5, 1, 2, 'x', '2000-01-01', '2000-12-31', '%50\\%\\_off\\\\%', 'A%', '%z', true]);
  t.is(compileFilter({ op: 'and', args: [] }, cols).sql, 'TRUE');
  t.is(compileFilter({ op: 'or', args: [] }, cols).sql, 'FALSE');
  t.is(likeEscape('a%b_c\\'), 'a\\%b\\_c\\\\');
});

test('compileFilter: bad values and operators → 400 naming the field', (t) => {
  t.truthy(errorsOf(() => compileFilter({ op: 'eq', field: 'age', value: 'ten' }, cols)).age);
  t.truthy(errorsOf(() => compileFilter({ op: 'eq', field: 'age', value: '1; DROP TABLE x' }, cols)).age);
  t.truthy(errorsOf(() => compileFilter({ op: 'eq', field: 'born', value: 'yesterday' }, cols)).born);
  t.truthy(errorsOf(() => compileFilter({ op: 'eq', field: 'active', value: 'maybe' }, cols)).active);
  t.truthy(errorsOf(() => compileFilter({ op: 'eq', field: 'seen', value: "2020-01-01'; --" }, cols)).seen);
  t.truthy(errorsOf(() => compileFilter({ op: 'contains', field: 'age', value: '1' }, cols)).age);
  t.truthy(errorsOf(() => compileFilter({ op: 'lt', field: 'tags', value: '[]' }, cols)).tags);
  t.truthy(errorsOf(() => compileFilter({ op: 'in', field: 'age', values: [] }, cols)).age);
  t.truthy(errorsOf(() => compileFilter({ op: 'eq', field: 'name', value: null }, cols)).name);
  t.truthy(errorsOf(() => compileFilter({ op: 'eq', field: 'name', value: 'a\0b' }, cols)).name);
  t.truthy(errorsOf(() => compileFilter({ op: 'drop' as 'eq', field: 'name', value: 'a' }, cols)).name);
  t.truthy(errorsOf(() => compileFilter({ op: 'eq', field: 'name"; DROP TABLE x; --', value: 'a' }, cols))['name"; DROP TABLE x; --']);
  let deep: Filter = { op: 'eq', field: 'name', value: 'a' };
  for (let i = 0; i < 40; i++) deep = { op: 'not', arg: deep };
  t.truthy(errorsOf(() => compileFilter(deep, cols)).filter);
});

test('compileFilter: injection in values stays a bound parameter', (t) => {
  const evil = "x' OR '1'='1'; DROP TABLE apps; --";
  const { sql, params } = compileFilter({ op: 'eq', field: 'name', value: evil }, cols);
  t.is(sql, '"name" = ?::text');
  t.deepEqual(params, [evil]);
  const like = compileFilter({ op: 'contains', field: 'name', value: evil }, cols);
  t.false(like.sql.includes('DROP'));
  t.deepEqual(like.params, [`%${evil}%`]);
});

test('parseQueryFilters: field=value and field__op=value, reserved params skipped', (t) => {
  const tree = parseQueryFilters(
    { name: 'Ada', age__gte: '30', age__lte: '40', score__in: '1,2', name__nin: 'a,b', born__isnull: 'false', seen__between: '2020-01-01,2021-01-01', page: '2', _sort: '-age', first__name__icontains: 'x', first__name: 'y' },
    schema,
  );
  t.deepEqual(tree, {
    op: 'and',
    args: [
      { op: 'eq', field: 'name', value: 'Ada' },
      { op: 'ge', field: 'age', value: '30' },
      { op: 'le', field: 'age', value: '40' },
      { op: 'in', field: 'score', values: ['1', '2'] },
      { op: 'nin', field: 'name', values: ['a', 'b'] },
      { op: 'isnull', field: 'born', value: false },
      { op: 'between', field: 'seen', low: '2020-01-01', high: '2021-01-01' },
      { op: 'icontains', field: 'first__name', value: 'x' },
      { op: 'eq', field: 'first__name', value: 'y' },
    ],
  });
  t.deepEqual(parseQueryFilters({ age: ['1', '2'] }, schema), { op: 'and', args: [{ op: 'eq', field: 'age', value: '1' }, { op: 'eq', field: 'age', value: '2' }] });
  t.deepEqual((parseQueryFilters({ age__in: [1, 2], active__isnull: true }, schema, false) as { args: Filter[] }).args, [{ op: 'in', field: 'age', values: [1, 2] }, { op: 'isnull', field: 'active', value: true }]);
});

test('parseQueryFilters: unknown fields and operators → 400 naming them', (t) => {
  t.regex(errorsOf(() => parseQueryFilters({ nope: '1' }, schema)).nope![0]!, /Unknown field "nope"/);
  t.regex(errorsOf(() => parseQueryFilters({ age__like: '1' }, schema)).age__like![0]!, /Unknown operator "like"/);
  t.truthy(errorsOf(() => parseQueryFilters({ 'age"; DROP TABLE x; --': '1' }, schema))['age"; DROP TABLE x; --']);
  t.truthy(errorsOf(() => parseQueryFilters({ age__between: '1' }, schema)).age__between);
  t.truthy(errorsOf(() => parseQueryFilters({ age__isnull: 'yes' }, schema)).age__isnull);
  t.truthy(errorsOf(() => parseQueryFilters({ page: '1' }, schema, false)).page, 'reserved names are fields only in the query string');
});
