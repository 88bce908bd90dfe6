// The contract of policy-sql.ts, as a property: for random tables, rows, policies, principals and
// actions, the rows the plan's SQL admits are EXACTLY the rows a per-row check allows (and so are
// their count and an aggregate), the check's resource `attr` being the record as the records API
// shows it (read back from the database the way records/read.ts does: `to_jsonb(t.*)`, then
// `fromStored`). Shapes the compiler refuses must throw PlanNotSupported, never answer wrongly.
//
// Replay a failure with POLICY_PROPERTY_SEED=<seed> (the seed is logged); a disagreement is shrunk
// to a minimal policy set and principal for the row before it is reported. POLICY_PROPERTY_DEBUG=1
// prints each refusal (PlanNotSupported) the generated cases meet.
import test from 'ava';
import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { rows } from '../../db/sql.ts';
import { createOrm, type Orm } from '../../db/orm.ts';
import { testServerUrl } from '../../testing/database.ts';
import { compilePolicies, PolicyCompileError } from '../../policies/engine.ts';
import type { Match, PolicyDocument, Principal, ResourceRule } from '../../policies/model.ts';
import { createTableDdl } from '../ddl.ts';
import { fromStored } from '../field-types.ts';
import { columnsOf } from '../query/filter.ts';
import { primaryKeyOf, type Field, type TableSchema } from '../table-schema.ts';
import { PlanNotSupported, planSql } from './policy-sql.ts';

// ---- Seeded randomness ----

const SEED = process.env.POLICY_PROPERTY_SEED ? Number(process.env.POLICY_PROPERTY_SEED) >>> 0 : randomBytes(4).readUInt32LE(0);

class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0;
  }
  /** mulberry32 */
  next(): number {
    let t = (this.s = (this.s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)];
  }
  /** A random subset (each kept with probability p), at least `min` long. */
  some<T>(xs: readonly T[], p = 0.5, min = 1): T[] {
    let out = xs.filter(() => this.chance(p));
    while (out.length < min) out = [...new Set([...out, this.pick(xs)])];
    return out;
  }
  hex(n: number): string {
    let s = '';
    for (let i = 0; i < n; i++) s += '0123456789abcdef'[this.int(16)];
    return s;
  }
  uuid(): string {
    return `${this.hex(8)}-${this.hex(4)}-4${this.hex(3)}-a${this.hex(3)}-${this.hex(12)}`;
  }
}

// ---- Tables and rows ----

type Kind = 'text' | 'uuid' | 'int' | 'num' | 'bool' | 'date' | 'arr' | 'obj';
const FIELD_DEF: Record<Kind, Pick<Field, 'type' | 'format'>> = {
  text: { type: 'string' },
  uuid: { type: 'string', format: 'uuid' },
  int: { type: 'integer' },
  num: { type: 'number' },
  bool: { type: 'boolean' },
  date: { type: 'date' },
  arr: { type: 'array' },
  obj: { type: 'object' },
};
/** Fields conditions may name; a table has some of them (`i` always: the aggregate), `missing` never. */
const FIELD_POOL: { name: string; kind: Kind }[] = [
  { name: 's', kind: 'text' },
  { name: 's2', kind: 'text' },
  { name: 'u', kind: 'uuid' },
  { name: 'i', kind: 'int' },
  { name: 'i2', kind: 'int' },
  { name: 'n', kind: 'num' },
  { name: 'b', kind: 'bool' },
  { name: 'd', kind: 'date' },
  { name: 'tags', kind: 'arr' },
  { name: 'o', kind: 'obj' },
];
const ATTR_NAMES = [...FIELD_POOL.map((f) => f.name), 'missing'];

const UUIDS = ['3f2504e0-4f89-41d3-9a0c-0305e82c3301', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-4fff-bfff-ffffffffffff'];
const TEXTS = ['', ' ', 'a', 'ab', 'abc', 'b', 'A', 'a b', '3', '-1', '1.5', '03', 'true', 'null', 'é', 'e\u0301', '😀', '中文', 'INF', 'NaN', '2024-01-15', UUIDS[0], UUIDS[0].toUpperCase(), 'alice', 'sales', 'x%_'];
const INTS = [0, 1, -1, 2, 3, 5, -7, 42, 1000000, 4294967296, -9007199254740991];
const NUMS = [0, 1, -1, 1.5, -2.5, 3, 0.1, 0.30000000000000004, 1e-9, -1e300, 2.5e10, NaN, Infinity, -Infinity];
const DATES = ['2024-01-15', '2024-01-01', '2023-12-31', '2024-02-29', '1999-02-28', '1000-01-01', '9999-12-31'];
const ARRAYS: unknown[][] = [[], ['a'], ['a', 'b'], ['b', 'c', 'a'], [1, 2], [1.5], [3], ['3'], ['x', null], [null], [['x']], [{ a: 1 }], [true], ['é', '😀'], ['', 'alice']];
const OBJECTS: Record<string, unknown>[] = [{}, { a: 1 }, { x: 'y' }, { a: null, b: [1] }, { alice: true }, { '': 0 }, { '1': 2, true: 0 }, { null: 1, '1.5': 0, '3': 'a' }];

interface Table {
  name: string;
  schema: TableSchema;
  fields: Map<string, Kind>;
  /** The key field, and how R.id reads it. */
  pk: string;
  pkKind: 'uuid' | 'int' | 'text' | 'num';
  /** Records as the API shows them. */
  records: Record<string, unknown>[];
}

function genValue(rng: Rng, kind: Kind): unknown {
  if (rng.chance(0.15)) return null;
  switch (kind) {
    case 'text':
      return rng.chance(0.8) ? rng.pick(TEXTS) : Array.from({ length: rng.int(4) }, () => rng.pick(['a', 'b', 'c', 'é', '😀', '1', '-', '.', ' ', 'Z'])).join('');
    case 'uuid':
      return rng.chance(0.7) ? rng.pick(UUIDS) : rng.uuid();
    case 'int':
      return rng.chance(0.8) ? rng.pick(INTS) : rng.int(21) - 10;
    case 'num':
      return rng.chance(0.8) ? rng.pick(NUMS) : (rng.int(41) - 20) / 4;
    case 'bool':
      return rng.chance(0.5);
    case 'date':
      return rng.pick(DATES);
    case 'arr':
      return rng.pick(ARRAYS);
    case 'obj':
      return rng.pick(OBJECTS);
  }
}

/** Integers beyond 2^53 (a record shows them rounded to a double), only in `i2`: `i` is summed exactly. */
const HUGE_INTS = ['9007199254740993', '-9223372036854775808', '9223372036854775807', '18014398509481985'];

/** A value bound for `?::type` (jsonb as its text; NaN/±Infinity as PostgreSQL spells them). */
function bindable(kind: Kind, v: unknown): unknown {
  if (v === null) return null;
  if (typeof v === 'string' && (kind === 'int' || kind === 'num')) return v;
  if (kind === 'arr' || kind === 'obj') return JSON.stringify(v);
  if (kind === 'num' && !Number.isFinite(v as number)) return String(v);
  return v;
}

const PG: Record<Kind, string> = { text: 'text', uuid: 'uuid', int: 'bigint', num: 'double precision', bool: 'boolean', date: 'date', arr: 'jsonb', obj: 'jsonb' };

async function createTable(em: EntityManager, schemaName: string, rng: Rng, index: number, rowCount: number): Promise<Table> {
  const chosen = FIELD_POOL.filter((f) => f.name === 'i' || rng.chance(0.8));
  const keyKind = rng.chance(0.08) ? 'num' : rng.pick(['uuid', 'int', 'text'] as const);
  const fields: Field[] = chosen.map((f) => ({ name: f.name, ...FIELD_DEF[f.kind] }));
  const kinds = new Map<string, Kind>(chosen.map((f) => [f.name, f.kind]));
  let pk = 'id';
  if (keyKind === 'int') {
    pk = 'k';
    fields.unshift({ name: 'k', type: 'integer' });
    kinds.set('k', 'int');
  } else if (keyKind === 'num') {
    pk = 'x';
    fields.unshift({ name: 'x', type: 'number' });
    kinds.set('x', 'num');
  } else if (keyKind === 'text') {
    pk = 'code';
    fields.unshift({ name: 'code', type: 'string' });
    kinds.set('code', 'text');
  } else kinds.set('id', 'uuid');
  for (let i = fields.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [fields[i], fields[j]] = [fields[j], fields[i]];
  }
  const schema: TableSchema = { fields, ...(keyKind === 'uuid' ? {} : { primaryKey: [pk] }) } as TableSchema;
  const name = `t${index}`;
  for (const stmt of createTableDdl(schema, { schema: schemaName, table: name, provider: 'flat_table' })) await em.execute(stmt);

  const keys = new Set<string>();
  const keyValue = (): unknown => {
    for (;;) {
      const k =
        keyKind === 'uuid' ? (rng.chance(0.3) ? rng.pick(UUIDS) : rng.uuid())
        : keyKind === 'int' ? (rng.chance(0.3) ? rng.pick(INTS) : rng.int(61) - 20)
        : keyKind === 'num' ? rng.pick([...NUMS.filter(Number.isFinite), 1e21, 1e15, 123456789.125, -1e-7, rng.int(100) / 8])
        : rng.chance(0.5) ? rng.pick(TEXTS) : `r${rng.int(100)}`;
      if (!keys.has(String(k))) return keys.add(String(k)), k;
    }
  };
  const columns = [...kinds.keys()];
  const params: unknown[] = [];
  const tuples: string[] = [];
  for (let r = 0; r < rowCount; r++) {
    const cells = columns.map((c) => {
      const kind = kinds.get(c)!;
      const v = c === 'i2' && rng.chance(0.15) ? rng.pick(HUGE_INTS) : c === 'n' && rng.chance(0.05) ? '-0' : genValue(rng, kind);
      params.push(c === pk ? keyValue() : bindable(kind, v));
      return `?::${PG[kind]}`;
    });
    tuples.push(`(${cells.join(', ')})`);
  }
  await em.execute(`INSERT INTO "${schemaName}"."${name}" (${columns.map((c) => `"${c}"`).join(', ')}) VALUES ${tuples.join(', ')}`, params);
  // The records as the API shows them (records/read.ts `plain` on `to_jsonb(t.*)`).
  const stored = await rows<{ r: Record<string, unknown> }>(em, `SELECT to_jsonb(t.*) AS r FROM "${schemaName}"."${name}" t`);
  const byName = new Map(fields.map((f) => [f.name, f]));
  const records = stored.map(({ r }) => {
    const out: Record<string, unknown> = {};
    for (const c of columnsOf(schema).keys()) out[c] = fromStored(byName.get(c), r[c]);
    return out;
  });
  return { name, schema, fields: kinds, pk, pkKind: keyKind, records };
}

// ---- Policies ----

const KIND = 'datatable:t';
const SCOPE = 't1_app';
const ROLES = ['member', 'admin', 'viewer', 'editor'];
const ACTIONS = ['read', 'update', 'list:all', 'delete'];
const DERIVED = ['owner', 'teammate', 'boss'];

/** CEL literal text of a JSON value (numbers: `double` says whether to write an int as a CEL double). */
function lit(v: unknown, double = false): string {
  if (v === null) return 'null';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'boolean') return String(v);
  if (typeof v === 'number') {
    if (!Number.isInteger(v)) return String(v);
    if (double || Math.abs(v) > 2 ** 53) return Number.isSafeInteger(v) ? `${v}.0` : String(v).includes('e') ? String(v) : `${v}.0`;
    return String(v);
  }
  if (Array.isArray(v)) return `[${v.map((x) => lit(x, double)).join(', ')}]`;
  return `{${Object.entries(v as object).map(([k, x]) => `${JSON.stringify(k)}: ${lit(x, double)}`).join(', ')}}`;
}

const LITERALS: Record<string, unknown[]> = {
  text: [...TEXTS, 'a', 'b', 'é', 'a\u0000', 'ab\u0000c', '\u0000'],
  uuid: [...UUIDS, UUIDS[1].toUpperCase()],
  int: [0, 1, -1, 2, 3, 5, -7, 42, 1000000, 9007199254740991, -9007199254740991, 9007199254740992],
  num: [1.5, -2.5, 3, 0, 0.1, 0.30000000000000004, 1e-9, -1e300, 2.5e10],
  bool: [true, false],
  date: [...DATES, '2024-1-15', '2024-01-15T00:00:00Z', '2024-02-30', '2023-02-29', '0000-01-01', '2024-13-01'],
  arr: [...ARRAYS, ['a\u0000']],
  obj: OBJECTS,
  null: [null],
};

/** What a policy's expressions may use: its variables (by how they behave) and constants. */
interface Usable {
  variables: { open: string[]; closedNumber: string[]; broken: string[] };
  constants: Record<string, unknown>;
}

class Gen {
  /** Set when a shape the compiler may refuse was generated. */
  refusable = false;
  readonly rng: Rng;
  readonly table: Table;
  constructor(rng: Rng, table: Table) {
    this.rng = rng;
    this.table = table;
  }

  kindOf(name: string): Kind | undefined {
    return this.table.fields.get(name) ?? FIELD_POOL.find((f) => f.name === name)?.kind;
  }

  /** A literal of the attribute's own kind (mostly) or of another. */
  literal(kind: Kind | undefined): string {
    const r = this.rng;
    // CEL ints a double cannot hold exactly: a plan carries them rounded, so they may be refused
    if (kind === 'int' && r.chance(0.05)) {
      this.refusable = true;
      return r.pick(['9007199254740993', '-9007199254740993', '9223372036854775807', '18014398509481985']);
    }
    const k = kind && r.chance(0.75) ? kind : r.pick(Object.keys(LITERALS));
    const v = r.pick(LITERALS[k]);
    if (JSON.stringify(v)?.match(/\d{16}|e\+/)) this.refusable = true; // (the same for integral numbers beyond 2^53)
    return lit(v, typeof v === 'number' && r.chance(0.4));
  }

  /** A value known at plan time: a literal, a constant, a principal attribute, the principal id. */
  known(kind: Kind | undefined, scope: Usable): string {
    const r = this.rng;
    const consts = Object.keys(scope.constants);
    const x = r.int(10);
    if (x < 6 || (x < 7 && !consts.length)) return this.literal(kind);
    if (x < 7) return `C.${r.pick(consts)}`;
    if (x < 9) return r.pick(['P.attr.dept', 'P.attr.level', 'P.attr.uid', 'P.attr.prefix', 'P.attr.day', 'P.attr.nope']);
    if (scope.variables.closedNumber.length && r.chance(0.5)) return `V.${r.pick(scope.variables.closedNumber)}`;
    return 'P.id';
  }

  /** `R.id`: a number key has no exact SQL reading of JavaScript's String(number). */
  id(): string {
    if (this.table.pkKind === 'num') this.refusable = true;
    return 'R.id';
  }

  attr(): string {
    const r = this.rng;
    if (r.chance(0.08)) return this.id();
    const name = r.chance(0.85) ? r.pick([...this.table.fields.keys(), ...ATTR_NAMES]) : 'missing';
    return r.chance(0.1) ? `request.resource.attr.${name}` : `R.attr.${name}`;
  }

  private nameOf(attr: string): string | undefined {
    return attr === 'R.id' ? undefined : attr.slice(attr.lastIndexOf('.') + 1);
  }
  private isJsonb(attr: string): boolean {
    const k = attr === 'R.id' ? undefined : this.table.fields.get(this.nameOf(attr)!);
    return k === 'arr' || k === 'obj';
  }

  /** One boolean CEL expression over the row, the principal and the policy's locals. */
  expr(scope: Usable, depth = 0): string {
    const r = this.rng;
    const x = r.int(100);
    if (depth < 2 && x < 18) {
      const op = r.pick(['&&', '||', '&&', '||', '?:']);
      if (op === '?:') return `(${this.expr(scope, depth + 1)} ? ${this.expr(scope, depth + 1)} : ${this.expr(scope, depth + 1)})`;
      return `(${this.expr(scope, depth + 1)} ${op} ${this.expr(scope, depth + 1)})`;
    }
    if (depth < 3 && x < 24) return `!(${this.expr(scope, depth + 1)})`;
    return this.atom(scope);
  }

  atom(scope: Usable): string {
    const r = this.rng;
    const x = r.int(100);
    if (x < 34) {
      // comparison attribute ⋈ known value, either side
      const a = this.attr();
      let op = r.pick(['==', '!=', '<', '<=', '>', '>=', '==', '!=']);
      const v = this.known(a === 'R.id' ? 'text' : this.kindOf(this.nameOf(a)!), scope);
      // CEL's type checker refuses ordering a null, list or map literal
      if (/^(null|\[|\{)/.test(v)) op = r.pick(['==', '!=']);
      if (['<', '<=', '>', '>='].includes(op) && this.isJsonb(a)) this.refusable = true;
      return r.chance(0.7) ? `${a} ${op} ${v}` : `${v} ${op} ${a}`;
    }
    if (x < 44) {
      const a = this.attr();
      const kind = a === 'R.id' ? 'text' : this.kindOf(this.nameOf(a)!);
      if (r.chance(0.15)) {
        const consts = Object.entries(scope.constants).filter(([, v]) => Array.isArray(v));
        if (consts.length) return `${a} in C.${r.pick(consts)[0]}`;
      }
      return `${a} in [${Array.from({ length: r.int(4) }, () => this.literal(kind)).join(', ')}]`;
    }
    if (x < 52) {
      // value in a list (or map) field
      const f = r.chance(0.75) ? r.pick(['tags', 'tags', 'o']) : r.pick(ATTR_NAMES);
      const v = r.chance(0.8) ? lit(r.pick([...TEXTS.slice(0, 12), 'x', 'alice', 1, 1.5, 3, true, null, '', '1', 'null', 'a\u0000']), r.chance(0.3)) : this.known('text', scope);
      if (v.startsWith('[') || v.startsWith('{') || v.startsWith('C.') || v.startsWith('V.') || v.startsWith('P.')) this.refusable = true;
      return `${v} in R.attr.${f}`;
    }
    if (x < 62) {
      const a = r.chance(0.7) ? `R.attr.${r.pick(['s', 's2', 's', 'u', 'd'])}` : this.attr();
      if (this.isJsonb(a)) this.refusable = true;
      const arg = r.chance(0.8) ? lit(r.pick(['', 'a', 'b', 'ab', 'é', '😀', '1', '3', 'INF', 'N', '-', '2024', 'A', 'abc', 'a\u0000'])) : r.pick(['P.attr.prefix', 'P.id', 'P.attr.dept']);
      return `${a}.${r.pick(['startsWith', 'endsWith', 'contains'])}(${arg})`;
    }
    if (x < 67) return `has(R.attr.${r.pick(ATTR_NAMES)})`;
    if (x < 72) return `${r.chance(0.3) ? '!' : ''}${r.chance(0.6) ? 'R.attr.b' : `R.attr.${r.pick(ATTR_NAMES)}`}`; // a bare attribute: only a boolean is a condition
    if (x < 78) {
      // the principal alone (folded)
      return r.pick(['P.id == "alice"', 'P.attr.level > 2', '"admin" in P.roles', 'P.attr.dept == "sales"', 'has(P.attr.dept)', 'P.attr.nope == 1']);
    }
    if (x < 86 && scope.variables.open.length) return `V.${r.pick(scope.variables.open)}`;
    if (x < 90 && scope.variables.broken.length) return `R.attr.i < V.${r.pick(scope.variables.broken)}`;
    if (x < 92) return `${this.id()} == ${lit(String(r.pick(this.table.records)[this.table.pk]))}`;
    if (x < 94) {
      // shapes with no exact SQL reading: must be refused (or folded away)
      this.refusable = true;
      return r.pick([
        'size(R.attr.tags) > 1',
        'R.attr.tags.size() == 0',
        'R.attr.i == R.attr.i2',
        'R.attr.s < R.attr.s2',
        'R.attr.i + 1.0 > 2', // (`R.attr.i + 1` is an error on every row: an attribute is a double, 1 an int)
        'R.attr.tags.exists(t, t == "a")',
        'R.attr.s.matches("^a")',
        'R.attr.o.a == 1',
        'int(R.attr.i) == 3',
        '"owner" in runtime.effectiveDerivedRoles',
      ]);
    }
    return this.atom(scope);
  }

  match(scope: Usable, depth = 0): Match {
    const r = this.rng;
    if (depth < 2 && r.chance(0.25)) {
      const of = Array.from({ length: 1 + r.int(3) }, () => this.match(scope, depth + 1));
      return { [r.pick(['all', 'any', 'none'])]: { of } } as Match;
    }
    return { expr: this.expr(scope) };
  }

  condition(scope: Usable, p = 0.7): { condition?: { match: Match } } {
    return this.rng.chance(p) ? { condition: { match: this.match(scope) } } : {};
  }

  /** Local variables and constants of a policy, and what its expressions may use. */
  locals(): { variables?: { local: Record<string, string>; import?: string[] }; constants?: { local: Record<string, unknown>; import?: string[] }; scope: Usable } {
    const r = this.rng;
    const scope: Usable = { variables: { open: [], closedNumber: [], broken: [] }, constants: {} };
    const local: Record<string, string> = {};
    const constants: Record<string, unknown> = {};
    if (r.chance(0.5)) {
      constants.max = r.pick([3, 2.5, -1, '3', null]);
      constants.names = r.pick([['a', 'b'], ['alice', 3], [], [UUIDS[0]]]);
      constants.day = r.pick(DATES);
      Object.assign(scope.constants, constants);
    }
    if (r.chance(0.6)) {
      const inner = new Gen(r, this.table);
      local.is_x = inner.expr(scope, 1);
      local.lim = r.pick(['P.attr.level + 1.0', '2', '3.5', 'P.attr.level']);
      scope.variables.closedNumber.push('lim');
      local.both = r.chance(0.5) ? `V.is_x && ${inner.atom(scope)}` : `V.is_x || R.attr.i >= V.lim`;
      scope.variables.open.push('is_x', 'both');
      local.bad = r.pick(['P.attr.level * 2', 'R.attr.i * 2', 'P.attr.nope']);
      if (local.bad.startsWith('R.')) this.refusable = true; // arithmetic on the row
      scope.variables.broken.push('bad');
      if (inner.refusable) this.refusable = true;
    }
    return {
      ...(Object.keys(local).length ? { variables: { local } } : {}),
      ...(Object.keys(constants).length ? { constants: { local: constants } } : {}),
      scope,
    };
  }

  resourceRule(scope: Usable, derived: string[]): ResourceRule {
    const r = this.rng;
    const byDerived = derived.length > 0 && r.chance(0.3);
    const effect = r.chance(0.72) ? 'EFFECT_ALLOW' : 'EFFECT_DENY';
    return {
      actions: r.some(['read', 'update', 'list:*', '*', 'delete', 'read', '*'], 0.3),
      effect,
      ...(byDerived ? { derivedRoles: r.some(derived, 0.5) } : { roles: r.chance(0.3) ? ['*'] : r.some(['member', 'admin', 'viewer', 'editor', 'member'], 0.35) }),
      ...this.condition(scope, effect === 'EFFECT_DENY' ? 0.85 : 0.7),
    };
  }

  policies(): PolicyDocument[] {
    const r = this.rng;
    const docs: PolicyDocument[] = [];
    let derived: string[] = [];
    if (r.chance(0.6)) {
      const { scope, ...locals } = this.locals();
      derived = r.some(DERIVED, 0.5);
      docs.push({
        derivedRoles: {
          name: 'common',
          ...locals,
          definitions: derived.map((name) => ({ name, parentRoles: r.chance(0.2) ? ['*'] : r.some(ROLES, 0.4), ...this.condition(scope, 0.85) })),
        },
      });
    }
    const exported = r.chance(0.2);
    if (exported) {
      docs.push({ exportConstants: { name: 'shared', definitions: { lo: r.pick([0, -1, 'a']), list: ['a', 3, null] } } });
      docs.push({ exportVariables: { name: 'vars', definitions: { is_a: r.pick(['R.attr.s == "a"', 'R.attr.i > C.lo', 'R.attr.tags == []']) } } });
    }
    const resource = (scoped: boolean): PolicyDocument => {
      const { scope, variables, constants } = this.locals();
      let vars = variables;
      let consts = constants;
      if (exported && r.chance(0.7)) {
        vars = { local: vars?.local ?? {}, import: ['vars'] };
        consts = { local: consts?.local ?? {}, import: ['shared'] };
        scope.variables.open.push('is_a');
        Object.assign(scope.constants, { lo: 0, list: [] });
      }
      const rules = Array.from({ length: (scoped ? 0 : 1) + r.int(5) }, () => this.resourceRule(scope, derived));
      return {
        resourcePolicy: {
          resource: KIND,
          version: 'default',
          ...(scoped ? { scope: SCOPE } : {}),
          ...(scoped && r.chance(0.7) ? { scopePermissions: r.pick(['SCOPE_PERMISSIONS_OVERRIDE_PARENT', 'SCOPE_PERMISSIONS_REQUIRE_PARENTAL_CONSENT_FOR_ALLOWS'] as const) } : {}),
          ...(derived.length ? { importDerivedRoles: ['common'] } : {}),
          ...(vars ? { variables: vars } : {}),
          ...(consts ? { constants: consts } : {}),
          rules,
        },
      };
    };
    docs.push(resource(false));
    if (r.chance(0.85)) docs.push(resource(true));
    if (r.chance(0.3)) {
      for (const role of r.some(['editor', 'viewer'], 0.5)) {
        const { scope, ...locals } = this.locals();
        docs.push({
          rolePolicy: {
            role,
            ...(r.chance(0.5) ? { scope: SCOPE } : {}),
            ...(r.chance(0.6) ? { parentRoles: r.some(['member', 'admin'], 0.4) } : {}),
            ...locals,
            rules: Array.from({ length: r.int(3) + 1 }, () => ({
              resource: r.pick([KIND, 'datatable:*', 'other:kind', KIND]),
              allowActions: r.some(['read', 'update', 'list:*', '*', 'delete'], 0.35),
              ...this.condition(scope, 0.5),
            })),
          },
        });
      }
    }
    if (r.chance(0.3)) {
      for (const scoped of r.chance(0.5) ? [false, true] : [false]) {
        const { scope, ...locals } = this.locals();
        docs.push({
          principalPolicy: {
            principal: 'alice',
            version: 'default',
            ...(scoped ? { scope: SCOPE } : {}),
            ...(scoped && r.chance(0.6) ? { scopePermissions: r.pick(['SCOPE_PERMISSIONS_OVERRIDE_PARENT', 'SCOPE_PERMISSIONS_REQUIRE_PARENTAL_CONSENT_FOR_ALLOWS'] as const) } : {}),
            ...locals,
            rules: [
              {
                resource: r.pick([KIND, 'datatable:*', KIND]),
                actions: Array.from({ length: 1 + r.int(2) }, () => ({
                  action: r.pick(['read', 'update', '*', 'list:*', 'delete']),
                  effect: r.chance(0.5) ? ('EFFECT_ALLOW' as const) : ('EFFECT_DENY' as const),
                  ...this.condition(scope, 0.7),
                })),
              },
            ],
          },
        });
      }
    }
    return docs;
  }

  principal(): Principal {
    const r = this.rng;
    const attr: Record<string, unknown> = {};
    if (r.chance(0.85)) attr.dept = r.pick(['sales', 'a', '3', 3, null, '', 'é', 'a\u0000']);
    if (r.chance(0.85)) attr.level = r.pick([1, 2.5, 3, -1, 0, '3', null]);
    if (r.chance(0.7)) attr.uid = r.pick([...UUIDS, UUIDS[0].toUpperCase()]);
    if (r.chance(0.7)) attr.prefix = r.pick(['a', '', 'é', '1', 'A']);
    if (r.chance(0.5)) attr.day = r.pick(DATES);
    return {
      id: r.pick(['alice', 'bob', 'alice', '3']),
      roles: [...new Set([...(r.chance(0.7) ? ['member'] : []), ...r.some(ROLES, 0.3)])],
      attr,
      ...(r.chance(0.4) ? { scope: SCOPE } : {}),
    };
  }
}

// ---- Checking one case ----

interface Case {
  table: Table;
  docs: PolicyDocument[];
  principal: Principal;
  action: string;
  scope: string;
}

const idOf = (t: Table, rec: Record<string, unknown>): string => String(rec[t.pk]);
/** The rows' ids as the records show them (to_jsonb, then as R.id writes a key: String). */
const idSql = (t: Table): string => `to_jsonb(t."${t.pk}") AS id`;
const idOfStored = (t: Table, v: unknown): string => String(fromStored(t.schema.fields.find((f) => f.name === t.pk) ?? { name: t.pk, type: 'string' }, v));
const byId = (t: Table): string => `t."${t.pk}" = ?::${PG[t.fields.get(t.pk)!]}`;

/** The ids a per-row check allows. */
function allowedIds(c: Case, records = c.table.records): Set<string> {
  const set = compilePolicies(c.docs);
  const res = set.check({
    principal: c.principal,
    resources: records.map((attr) => ({ resource: { kind: KIND, id: idOf(c.table, attr), attr, scope: c.scope }, actions: [c.action] })),
  });
  return new Set(res.results.filter((x) => x.actions[c.action] === 'EFFECT_ALLOW').map((x) => x.resource.id));
}

function fragmentOf(c: Case): { sql: string; params: unknown[] } {
  const set = compilePolicies(c.docs);
  const formula = set.formula(c.principal, { kind: KIND, scope: c.scope }, c.action);
  return planSql(formula, { columns: columnsOf(c.table.schema, 't'), pk: primaryKeyOf(c.table.schema) });
}

let orm: Orm;
let schemaName: string;
const from = (t: Table): string => `"${schemaName}"."${t.name}" t`;

/** For one row: does the check allow it, does the SQL admit it (undefined: refused or not compiled). */
async function rowVerdict(em: EntityManager, c: Case, rec: Record<string, unknown>): Promise<{ check: boolean; sql: boolean } | undefined> {
  let frag;
  try {
    frag = fragmentOf(c);
  } catch (err) {
    if (err instanceof PlanNotSupported || err instanceof PolicyCompileError) return undefined;
    throw err;
  }
  const check = allowedIds(c, [rec]).size === 1;
  const [row] = await rows<{ ok: boolean }>(em, `SELECT (${frag.sql}) AS ok FROM ${from(c.table)} WHERE ${byId(c.table)}`, [...frag.params, rec[c.table.pk]]);
  return { check, sql: row.ok === true };
}

/** Candidate simplifications of a JSON value (drop an element or key, hoist a match child). */
function* shrinkJson(v: unknown): Generator<unknown> {
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) yield [...v.slice(0, i), ...v.slice(i + 1)];
    for (let i = 0; i < v.length; i++) for (const s of shrinkJson(v[i])) yield [...v.slice(0, i), s, ...v.slice(i + 1)];
    return;
  }
  if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    for (const k of ['all', 'any', 'none']) {
      const of = (o[k] as { of?: unknown[] } | undefined)?.of;
      if (of && Object.keys(o).length === 1) for (const child of of) yield child;
    }
    for (const k of Object.keys(o)) {
      const { [k]: _, ...rest } = o;
      yield rest;
    }
    for (const k of Object.keys(o)) for (const s of shrinkJson(o[k])) yield { ...o, [k]: s };
    return;
  }
  if (typeof v === 'string') {
    // split a CEL expression at a top-level && / || (cheap, often enough)
    for (const sep of [' && ', ' || ']) {
      let depth = 0;
      for (let i = 0; i < v.length; i++) {
        const ch = v[i];
        if (ch === '(' || ch === '[') depth++;
        else if (ch === ')' || ch === ']') depth--;
        else if (depth === 1 && v.startsWith(sep, i) && v[0] === '(' && v.endsWith(')')) {
          yield v.slice(1, i);
          yield v.slice(i + sep.length, -1);
        }
      }
    }
    if (v.startsWith('!(') && v.endsWith(')')) yield v.slice(2, -1);
  }
}

/** A disagreement shrunk: fewer documents, rules, conditions, roles and attributes, the same row. */
async function shrink(em: EntityManager, c: Case, rec: Record<string, unknown>): Promise<{ c: Case; verdict: { check: boolean; sql: boolean } }> {
  const disagrees = async (x: Case) => {
    const v = await rowVerdict(em, x, rec);
    return v && v.check !== v.sql ? v : undefined;
  };
  let best = c;
  let verdict = (await disagrees(c))!;
  for (let progress = true, rounds = 0; progress && rounds < 200; rounds++) {
    progress = false;
    const candidates: Case[] = [];
    for (const docs of shrinkJson(best.docs)) candidates.push({ ...best, docs: docs as PolicyDocument[] });
    for (const principal of shrinkJson(best.principal)) if ((principal as Principal).id !== undefined && (principal as Principal).roles?.length) candidates.push({ ...best, principal: principal as Principal });
    for (const cand of candidates) {
      let v;
      try {
        v = await disagrees(cand);
      } catch {
        continue;
      }
      if (v) {
        best = cand;
        verdict = v;
        progress = true;
        break;
      }
    }
  }
  return { c: best, verdict };
}

// ---- The tests ----

const TABLES = 10;
const ROWS = 30;
const POLICY_SETS_PER_TABLE = 10;
const PRINCIPALS_PER_SET = 3;
const ACTIONS_PER_PRINCIPAL = 2;

test.before(async () => {
  orm = await createOrm(testServerUrl(), { poolMax: 2 });
  schemaName = `policy_prop_${randomBytes(4).toString('hex')}`;
  await orm.em.fork().execute(`CREATE SCHEMA "${schemaName}"`);
});
test.after.always(async () => {
  if (orm && schemaName) await orm.em.fork().execute(`DROP SCHEMA IF EXISTS "${schemaName}" CASCADE`);
  await orm?.close(true);
});

test('the rows a plan admits are exactly the rows checks allow (ids, count, sum)', async (t) => {
  t.log(`seed ${SEED} (replay: POLICY_PROPERTY_SEED=${SEED})`);
  const rng = new Rng(SEED);
  const em = orm.em.fork();
  const stats = { cases: 0, compared: 0, refused: 0, alwaysTrue: 0, alwaysFalse: 0, conditional: 0, someAllowed: 0, someDenied: 0, mixed: 0, rowsChecked: 0 };
  let failed = false;
  for (let ti = 0; ti < TABLES && !failed; ti++) {
    const table = await createTable(em, schemaName, rng, ti, ROWS);
    // the session's DateStyle must not matter (a record's dates are ISO whatever it is)
    const dateStyle = rng.pick(['ISO, MDY', 'SQL, DMY', 'German', 'Postgres, MDY']);
    failed = await orm.em.fork().transactional(async (em) => {
      await em.execute(`SET LOCAL datestyle = '${dateStyle}'`);
      for (let pi = 0; pi < POLICY_SETS_PER_TABLE; pi++) {
        const gen = new Gen(rng, table);
        const docs = gen.policies();
        try {
          compilePolicies(docs);
        } catch (err) {
          t.fail(`seed ${SEED}: generated policies do not compile: ${String(err)}\n${JSON.stringify(docs, null, 1)}`);
          return true;
        }
        for (let qi = 0; qi < PRINCIPALS_PER_SET; qi++) {
          const principal = gen.principal();
          for (const action of rng.some(ACTIONS, 0.3, ACTIONS_PER_PRINCIPAL).slice(0, ACTIONS_PER_PRINCIPAL)) {
            const c: Case = { table, docs, principal, action, scope: rng.chance(0.8) ? SCOPE : '' };
            stats.cases++;
            const set = compilePolicies(docs);
            const formula = set.formula(principal, { kind: KIND, scope: c.scope }, action);
            let frag;
            try {
              frag = planSql(formula, { columns: columnsOf(table.schema, 't'), pk: primaryKeyOf(table.schema) });
            } catch (err) {
              if (!(err instanceof PlanNotSupported)) throw err;
              if (!gen.refusable) {
                t.fail(`seed ${SEED}: PlanNotSupported for shapes that are supported: ${err.message}\nformula ${JSON.stringify(formula)}\n${JSON.stringify({ docs, principal, action, scope: c.scope }, null, 1)}`);
                return true;
              }
              stats.refused++;
              if (process.env.POLICY_PROPERTY_DEBUG) console.log('REFUSED', err.message);
              continue;
            }
            stats.compared++;
            if (formula === true) stats.alwaysTrue++;
            else if (formula === false) stats.alwaysFalse++;
            else stats.conditional++;
            const expected = allowedIds(c);
            stats.rowsChecked += table.records.length;
            const admitted = await rows<{ id: unknown }>(em, `SELECT ${idSql(table)} FROM ${from(table)} WHERE ${frag.sql}`, frag.params);
            const got = new Set(admitted.map((x) => idOfStored(table, x.id)));
            if (expected.size) stats.someAllowed++;
            if (expected.size < table.records.length) stats.someDenied++;
            if (expected.size && expected.size < table.records.length) stats.mixed++;
            const wrong = table.records.filter((rec) => expected.has(idOf(table, rec)) !== got.has(idOf(table, rec)));
            if (wrong.length || got.size !== admitted.length) {
              const small = await shrink(em, c, wrong[0]);
              t.fail(
                [
                  `seed ${SEED} (replay: POLICY_PROPERTY_SEED=${SEED}): ${wrong.length} of ${table.records.length} rows disagree (table ${table.name}, case ${stats.cases}).`,
                  `Shrunk case: check ${small.verdict.check ? 'ALLOW' : 'DENY'}, SQL ${small.verdict.sql ? 'admits' : 'excludes'}`,
                  `row: ${JSON.stringify(wrong[0])}`,
                  `action: ${action}, resource scope: ${JSON.stringify(c.scope)}, DateStyle: ${dateStyle}`,
                  `principal: ${JSON.stringify(small.c.principal)}`,
                  `policies: ${JSON.stringify(small.c.docs, null, 1)}`,
                  `formula: ${JSON.stringify(compilePolicies(small.c.docs).formula(small.c.principal, { kind: KIND, scope: c.scope }, action))}`,
                  `sql: ${fragmentOf(small.c).sql}  params: ${JSON.stringify(fragmentOf(small.c).params)}`,
                  `schema: ${JSON.stringify(table.schema.fields.map((f) => `${f.name}:${f.type}${f.format ? `/${f.format}` : ''}`))}`,
                ].join('\n'),
              );
              return true;
            }
            // the count and an aggregate, as the list's total and `_aggregate` would compute them
            const [agg] = await rows<{ n: number; s: string | null }>(em, `SELECT count(*)::int AS n, sum(t."i")::text AS s FROM ${from(table)} WHERE ${frag.sql}`, frag.params);
            const allowedRecords = table.records.filter((rec) => expected.has(idOf(table, rec)));
            const ints = allowedRecords.map((rec) => rec.i).filter((v): v is number => typeof v === 'number');
            t.is(agg.n, expected.size, `seed ${SEED}: count, case ${stats.cases}`);
            t.is(agg.s, ints.length ? String(ints.reduce((a, b) => a + BigInt(b), 0n)) : null, `seed ${SEED}: sum of i, case ${stats.cases}`);
          }
        }
      }
      return false;
    });
  }
  if (failed) return;
  t.log(JSON.stringify(stats));
  // the cases are meaningful: most are compared, many conditional, with rows on both sides
  t.true(stats.compared >= stats.cases * 0.75, JSON.stringify(stats));
  t.true(stats.conditional >= stats.cases * 0.2, JSON.stringify(stats));
  t.true(stats.mixed >= stats.cases * 0.06, JSON.stringify(stats));
});

test('shapes without an exact SQL reading are refused', (t) => {
  const schema: TableSchema = {
    fields: [
      { name: 's', type: 'string' },
      { name: 's2', type: 'string' },
      { name: 'i', type: 'integer' },
      { name: 'i2', type: 'integer' },
      { name: 'tags', type: 'array' },
    ],
  } as TableSchema;
  const columns = columnsOf(schema, 't');
  for (const expr of [
    'size(R.attr.tags) > 1',
    'R.attr.tags.size() == 0',
    'R.attr.i == R.attr.i2',
    'R.attr.s < R.attr.s2',
    'R.attr.i + 1.0 > 2', // (`R.attr.i + 1` is an error on every row: an attribute is a double, 1 an int)
    'R.attr.tags.exists(t, t == "a")',
    'R.attr.s.matches("^a")',
    'R.attr.tags < 1',
    'R.attr.tags.startsWith("a")',
    '["a"] in R.attr.tags',
    'R.attr.o.a == 1',
    'R.attr.i == 9223372036854775807',
    'R.attr.i <= 9007199254740993',
    'R.attr.tags == [18014398509481985]',
  ]) {
    const set = compilePolicies([{ resourcePolicy: { resource: KIND, version: 'default', rules: [{ actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['member'], condition: { match: { expr } } }] } }]);
    const formula = set.formula({ id: 'alice', roles: ['member'] }, { kind: KIND }, 'read');
    t.throws(() => planSql(formula, { columns, pk: primaryKeyOf(schema) }), { instanceOf: PlanNotSupported }, expr);
  }
});

// Known disagreement, in the engine (not in policy-sql.ts): cel-js orders strings by UTF-16 code
// units (JavaScript's `<`), CEL and Cerbos by code points, as PostgreSQL's "C" collation does. They
// differ between a character above U+FFFF and one in U+E000–U+FFFF, which the property's strings
// therefore leave out. When the engine orders by code points this test passes: drop `.failing` then.
test.failing('strings order by code points, as CEL and Cerbos do (engine: cel-js orders by UTF-16 units)', async (t) => {
  const em = orm.em.fork();
  const schema: TableSchema = { fields: [{ name: 'code', type: 'string' }, { name: 's', type: 'string' }], primaryKey: ['code'] } as TableSchema;
  for (const stmt of createTableDdl(schema, { schema: schemaName, table: 'utf16', provider: 'flat_table' })) await em.execute(stmt);
  await em.execute(`INSERT INTO "${schemaName}"."utf16" (code, s) VALUES ('emoji', ?), ('replacement', ?)`, ['😀', '\uFFFD']);
  const docs: PolicyDocument[] = [{ resourcePolicy: { resource: KIND, version: 'default', rules: [{ actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['member'], condition: { match: { expr: 'R.attr.s > "\\uFFFD"' } } }] } }];
  const principal: Principal = { id: 'alice', roles: ['member'] };
  const frag = planSql(compilePolicies(docs).formula(principal, { kind: KIND }, 'read'), { columns: columnsOf(schema, 't'), pk: ['code'] });
  const admitted = (await rows<{ code: string }>(em, `SELECT t.code FROM "${schemaName}"."utf16" t WHERE ${frag.sql}`, frag.params)).map((r) => r.code);
  const checks = compilePolicies(docs).check({ principal, resources: [{ resource: { kind: KIND, id: 'emoji', attr: { code: 'emoji', s: '😀' } }, actions: ['read'] }] });
  t.deepEqual(admitted, ['emoji']); // U+1F600 > U+FFFD
  t.is(checks.results[0].actions.read, 'EFFECT_ALLOW'); // fails today: cel-js compares "\uD83D\uDE00" < "\uFFFD"
});
