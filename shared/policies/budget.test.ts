// The evaluation budget (issue 29 #2) on the engine: forged inputs that would have been slow, big
// or absorbed by CEL's error rules fail the whole call closed; what is known statically is
// refused when compiled; matches() runs on RE2.
import test from 'ava';
import { POLICY_LIMITS, PolicyBudgetError } from './budget.ts';
import { compilePolicies, PolicyCompileError } from './engine.ts';
import type { PolicyDocument, ResourceRule } from './model.ts';

const rule = (effect: 'EFFECT_ALLOW' | 'EFFECT_DENY', expr?: string): ResourceRule => ({ actions: ['read'], effect, roles: ['member'], ...(expr ? { condition: { match: { expr } } } : {}) });
const policy = (rules: ResourceRule[], variables: Record<string, string> = {}): PolicyDocument => ({ resourcePolicy: { resource: 'doc:x', version: 'default', variables: { local: variables }, rules } });
const member = { id: 'p', roles: ['member'] };
const check = (doc: PolicyDocument, attr: Record<string, unknown>) =>
  compilePolicies([doc]).check({ principal: member, resources: [{ resource: { kind: 'doc:x', id: '1', attr }, actions: ['read'] }] }).results[0]!.actions.read;

test('a DENY condition over budget never turns into an ALLOW, even where CEL would absorb the error', (t) => {
  const s = 'x'.repeat(600_000);
  for (const expr of ['size(R.attr.s + R.attr.s) > 0', '(R.attr.s + R.attr.s).size() > 0 || true', 'R.attr.l.exists(x, size(R.attr.s + x) > 0) || true']) {
    const doc = policy([rule('EFFECT_ALLOW'), rule('EFFECT_DENY', expr)]);
    const err = t.throws(() => check(doc, { s, l: [s, 'y'] }), { instanceOf: PolicyBudgetError }, expr);
    t.is(err!.limit, 'maxValueSize');
    t.is(err!.status, 422);
    t.regex(err!.message, /resourcePolicy\.rules\.1\.condition\.match\.expr: a value would hold 1,200,000 characters/);
    t.is(check(doc, { s: 'short', l: ['y'] }), 'EFFECT_DENY', 'small inputs decide as before');
  }
});

test('quadratic work is stopped by the units budget, plans and formulas too', (t) => {
  const l = Array.from({ length: 20_000 }, (_, i) => i);
  const doc = policy([rule('EFFECT_ALLOW', 'R.attr.l.all(x, x in R.attr.l)')]);
  const err = t.throws(() => check(doc, { l }), { instanceOf: PolicyBudgetError });
  t.is(err!.limit, 'maxUnitsPerResource');
  t.is(check(doc, { l: [1, 2, 3] }), 'EFFECT_ALLOW');
  const set = compilePolicies([doc]);
  t.throws(() => set.plan({ action: 'read', principal: member, resource: { kind: 'doc:x', attr: { l } } }), { instanceOf: PolicyBudgetError });
  t.throws(() => set.formula(member, { kind: 'doc:x', attr: { l } }, 'read'), { instanceOf: PolicyBudgetError });
  // Several resources: each has its own share, which one resource cannot exceed by spending the others'.
  const resources = (l: number[]) => Array.from({ length: 50 }, (_, i) => ({ resource: { kind: 'doc:x', id: String(i), attr: { l: i === 49 ? l : [i] } }, actions: ['read'] }));
  t.is(set.check({ principal: member, resources: resources([1]) }).results.length, 50);
  const l1k = Array.from({ length: 1000 }, (_, i) => i); // ≈ 1,000,000 units each: 50 of them are over one share, within 50
  const many = set.check({ principal: member, resources: Array.from({ length: 50 }, (_, i) => ({ resource: { kind: 'doc:x', id: String(i), attr: { l: l1k } }, actions: ['read'] })) });
  t.true(many.results.every((r) => r.actions.read === 'EFFECT_ALLOW'));
  const l3k = Array.from({ length: 3000 }, (_, i) => i); // ≈ 9,000,000 units: within 50 shares, over one
  t.throws(() => set.check({ principal: member, resources: resources(l3k) }), { instanceOf: PolicyBudgetError });
});

test('a join whose separator repeats too often is refused before it is built', (t) => {
  const doc = policy([rule('EFFECT_ALLOW', 'size(R.attr.l.join(R.attr.sep)) > 0')]);
  const err = t.throws(() => check(doc, { l: Array.from({ length: 2000 }, () => 'a'), sep: 'x'.repeat(1000) }), { instanceOf: PolicyBudgetError });
  t.is(err!.limit, 'maxValueSize');
  t.is(check(doc, { l: ['a', 'b'], sep: ',' }), 'EFFECT_ALLOW');
});

test('compile: a chain of doubling variables (or lists of them) is refused from the first over maxGrowth, naming it', (t) => {
  const chain = (n: number, step: (prev: string) => string) => Object.fromEntries([['a0', 'R.attr.l'], ...Array.from({ length: n }, (_, i) => [`a${i + 1}`, step(`V.a${i}`)])]);
  for (const step of [(v: string) => `${v} + ${v}`, (v: string) => `[${v}, ${v}]`, (v: string) => `${v}.map(x, x + x)`]) {
    const err = t.throws(() => compilePolicies([policy([rule('EFFECT_ALLOW', 'size(V.a6) > 0')], chain(6, step))]), { instanceOf: PolicyCompileError });
    t.is(err!.issues[0]!.path, step('x').includes('map') ? 'resourcePolicy.variables.local.a3' : 'resourcePolicy.variables.local.a5');
    t.true(err!.issues[0]!.message.includes(`times the size of the request's attributes (at most ${POLICY_LIMITS.maxGrowth})`), err!.issues[0]!.message);
  }
  t.notThrows(() => compilePolicies([policy([rule('EFFECT_ALLOW', 'size(V.a4) > 0 && R.attr.a + R.attr.b + R.attr.c != ""')], chain(4, (v) => `${v} + ${v}`))]));
});

test('matches() on RE2: catastrophic patterns are linear, refused ones are errors (false) at run time and refused on write', (t) => {
  const doc = policy([rule('EFFECT_ALLOW', 'R.attr.s.matches(R.attr.p) || matches(R.attr.s, R.attr.q)')]);
  t.is(check(doc, { s: `${'a'.repeat(5000)}!`, p: '^(a+)+$', q: '^(a|aa)+$' }), 'EFFECT_DENY');
  t.is(check(doc, { s: 'aaa', p: '^(a+)+$', q: 'x' }), 'EFFECT_ALLOW');
  t.is(check(doc, { s: 'ab', p: 'a(?=b)', q: '(a)\\1' }), 'EFFECT_DENY');
  t.is(check(doc, { s: 'ab', p: 'a(?=b)', q: '^a' }), 'EFFECT_ALLOW', 'a refused pattern is an error, which || absorbs');
  t.is(check(doc, { s: 'a', p: 'a'.repeat(1001), q: 'x' }), 'EFFECT_DENY', 'a pattern over 1,000 characters is an error');
  const refused = t.throws(() => compilePolicies([policy([rule('EFFECT_ALLOW', 'R.attr.s.matches("a(?=b)")')])]), { instanceOf: PolicyCompileError });
  t.regex(refused!.issues[0]!.message, /^matches\(\): the pattern "a\(\?=b\)" uses lookahead, lookbehind or a backreference, which are not supported \(patterns run on RE2, a linear-time engine\) \(at column 18\)$/);
});
