// Plans agree with checks, always (issue 29 #10): for every plan of the differential corpus, rows
// with each attribute missing, null or present (values from the case's samples and the
// principal's attributes), drawn with a seeded PRNG: "the plan admits the row" (its condition
// read with CEL's semantics, differential/evaluate.ts) equals "a check on that row allows".
// Replay with PLAN_AGREEMENT_SEED=<seed>. The SQL a plan compiles to is held to the same
// contract by data/records/policy-sql.test.ts.
import test from 'ava';
import { compilePolicies } from './engine.ts';
import { loadCorpus } from './differential/corpus.ts';
import { planAdmits } from './differential/evaluate.ts';
import type { PolicyDocument, Principal } from './model.ts';

const SEED = Number(process.env.PLAN_AGREEMENT_SEED ?? 29) >>> 0;
const ROWS_PER_PLAN = 300;

/** mulberry32 */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    let t = (s = (s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Attr = Record<string, unknown>;

/** Disagreements between the plan of `action` and checks, on the given rows. */
function disagreements(docs: PolicyDocument[], principal: Principal, resource: { kind: string; scope?: string; attr?: Attr }, action: string, rows: Attr[]): string[] {
  const set = compilePolicies(docs);
  const plan = set.plan({ action, principal, resource, includeMeta: true });
  const out: string[] = [];
  for (const attr of rows) {
    const row = { ...resource.attr, ...attr };
    const checked = set.check({ principal, resources: [{ resource: { kind: resource.kind, id: 'row', scope: resource.scope, attr: row }, actions: [action] }] });
    const allowed = checked.results[0]!.actions[action] === 'EFFECT_ALLOW';
    const admitted = planAdmits(plan.filter, row);
    if (admitted !== allowed) out.push(`${JSON.stringify(row)}: plan ${admitted ? 'admits' : 'refuses'} (${plan.meta?.filterDebug}), check ${allowed ? 'allows' : 'denies'}`);
  }
  return out;
}

test('issue 29 #10: the plan for transfer (derived roles teammate, same_dept; priority > 1 && priority * 2 != 8) admits exactly what checks allow', (t) => {
  const docs: PolicyDocument[] = [
    {
      derivedRoles: {
        name: 'people',
        definitions: [
          { name: 'teammate', parentRoles: ['member'], condition: { match: { expr: 'R.attr.team == P.attr.team' } } },
          { name: 'same_dept', parentRoles: ['member'], condition: { match: { expr: 'R.attr.dept == P.attr.dept' } } },
        ],
      },
    },
    {
      resourcePolicy: {
        resource: 'ticket:support',
        version: 'default',
        importDerivedRoles: ['people'],
        rules: [
          { actions: ['*'], effect: 'EFFECT_DENY', roles: ['*'], condition: { match: { expr: 'R.attr.deleted == true' } } },
          { name: 'transfer', actions: ['transfer'], effect: 'EFFECT_ALLOW', derivedRoles: ['teammate', 'same_dept'], condition: { match: { expr: 'R.attr.priority > 1 && R.attr.priority * 2 != 8' } } },
        ],
      },
    },
  ];
  const alice = { id: 'alice', roles: ['member'], attr: { dept: 'sales', team: 'blue', level: 1, vip: true } };
  const rows = [
    { deleted: false, priority: 2 },
    { deleted: false, priority: 2, team: 'blue' },
    { deleted: false, priority: 3, dept: 'sales' },
    { priority: 2, team: 'blue' },
    { deleted: null, priority: 2, team: 'blue' },
    { deleted: true, priority: 2, team: 'blue' },
  ];
  t.deepEqual(disagreements(docs, alice, { kind: 'ticket:support' }, 'transfer', rows), []);
});

test('issue 29 #10: every corpus plan agrees with checks on rows with missing, null and present attributes', (t) => {
  const corpus = loadCorpus();
  const random = prng(SEED);
  let rowsChecked = 0;
  const problems: string[] = [];
  for (const p of corpus.plans) {
    const principal = corpus.principals[p.principal]!;
    const pool = new Map<string, unknown[]>();
    for (const sample of p.samples) for (const [k, v] of Object.entries(sample)) pool.set(k, [...(pool.get(k) ?? []), v]);
    for (const [k, v] of Object.entries(principal.attr ?? {})) if (pool.has(k)) pool.get(k)!.push(v);
    const rows: Attr[] = [];
    for (let i = 0; i < ROWS_PER_PLAN; i++) {
      const row: Attr = {};
      for (const [k, values] of pool) {
        const r = random();
        if (r < 0.2) continue; // missing
        row[k] = r < 0.35 ? null : values[Math.floor(random() * values.length)];
      }
      rows.push(row);
    }
    rowsChecked += rows.length;
    problems.push(...disagreements(corpus.docs, principal, p.resource, p.action, rows).slice(0, 3).map((d) => `${p.id}: ${d}`));
  }
  t.log(`${corpus.plans.length} plans, ${rowsChecked} rows (seed ${SEED})`);
  t.deepEqual(problems, []);
});
