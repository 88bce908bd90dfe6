import test from 'ava';
import { compilePolicies, PolicyCompileError } from './engine.ts';
import type { PolicyDocument, Principal } from './model.ts';

const base: PolicyDocument = {
  resourcePolicy: {
    resource: 'ticket:support',
    version: 'default',
    importDerivedRoles: ['common'],
    variables: { local: { is_open: 'R.attr.status == "open"' } },
    constants: { local: { max: 3 } },
    rules: [
      { actions: ['read', 'list:*'], effect: 'EFFECT_ALLOW', roles: ['member'] },
      { actions: ['*'], effect: 'EFFECT_DENY', roles: ['*'], condition: { match: { expr: 'R.attr.deleted == true' } } },
      { actions: ['update'], effect: 'EFFECT_ALLOW', derivedRoles: ['owner'], condition: { match: { expr: 'V.is_open' } } },
      { actions: ['escalate'], effect: 'EFFECT_ALLOW', roles: ['member'], condition: { match: { expr: 'R.attr.n <= C.max' } } },
    ],
  },
};
const derived: PolicyDocument = {
  derivedRoles: { name: 'common', definitions: [{ name: 'owner', parentRoles: ['member'], condition: { match: { expr: 'R.attr.owner == P.id' } } }, { name: 'unused', parentRoles: ['member'] }] },
};
const alice: Principal = { id: 'alice', roles: ['member'] };

test('resource rules, derived roles, variables, constants and deny overriding allow', (t) => {
  const set = compilePolicies([base, derived]);
  const res = set.check({
    includeMeta: true,
    principal: alice,
    resources: [
      { resource: { kind: 'ticket:support', id: 'a', attr: { owner: 'alice', status: 'open', deleted: false, n: 2 } }, actions: ['read', 'update', 'list:all', 'list:a:b', 'escalate', 'delete'] },
      { resource: { kind: 'ticket:support', id: 'b', attr: { owner: 'bob', status: 'open', deleted: true, n: 2 } }, actions: ['read', 'update'] },
    ],
  });
  t.deepEqual(res.results[0].actions, { read: 'EFFECT_ALLOW', update: 'EFFECT_ALLOW', 'list:all': 'EFFECT_ALLOW', 'list:a:b': 'EFFECT_DENY', escalate: 'EFFECT_ALLOW', delete: 'EFFECT_DENY' });
  t.deepEqual(res.results[0].meta?.effectiveDerivedRoles, ['owner']);
  t.deepEqual(res.results[1].actions, { read: 'EFFECT_DENY', update: 'EFFECT_DENY' });
  t.is(res.results[1].meta?.effectiveDerivedRoles, undefined);
});

test('system policies: the app scope ALLOW over the default level DENY, and a plan that agrees', (t) => {
  const set = compilePolicies([
    { resourcePolicy: { resource: 'datatable:orders', version: 'default', rules: [{ actions: ['*'], effect: 'EFFECT_DENY', roles: ['*'] }] } },
    { resourcePolicy: { resource: 'datatable:orders', version: 'default', scope: 't1_crm', rules: [{ actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['*'] }] } },
  ]);
  const check = set.check({ principal: alice, resources: [{ resource: { kind: 'datatable:orders', id: '1', scope: 't1_crm' }, actions: ['read'] }] });
  t.is(check.results[0].actions.read, 'EFFECT_ALLOW');
  t.is(set.plan({ action: 'read', principal: alice, resource: { kind: 'datatable:orders', scope: 't1_crm' } }).filter.kind, 'KIND_ALWAYS_ALLOWED');
  // a scope with no policy at all matches nothing
  t.is(set.check({ principal: alice, resources: [{ resource: { kind: 'datatable:orders', id: '1', scope: 'other' }, actions: ['read'] }] }).results[0].actions.read, 'EFFECT_DENY');
});

test('a conditional plan keeps unknown attributes as variables and folds the principal in', (t) => {
  const set = compilePolicies([base, derived]);
  const plan = set.plan({ action: 'update', principal: alice, resource: { kind: 'ticket:support' } });
  t.is(plan.filter.kind, 'KIND_CONDITIONAL');
  const text = JSON.stringify(plan.filter.condition);
  t.true(text.includes('"request.resource.attr.owner"'));
  t.true(text.includes('"alice"'));
  t.true(text.includes('"request.resource.attr.deleted"'));
  t.is(set.plan({ action: 'update', principal: { id: 'x', roles: ['guest'] }, resource: { kind: 'ticket:support' } }).filter.kind, 'KIND_ALWAYS_DENIED');
});

test('an unknown field is refused with its path', (t) => {
  const err = t.throws(() => compilePolicies([{ resourcePolicy: { resource: 'doc:y', version: 'default', rules: [], bogus: 1 } } as unknown as PolicyDocument])) as PolicyCompileError;
  t.true(err instanceof PolicyCompileError);
  t.deepEqual(
    err.issues.map((i) => `${i.policy} ${i.path}: ${i.message}`),
    ['resource.doc_y.default resourcePolicy.bogus: Unknown field.'],
  );
});

test('semantic errors: unknown import, duplicate rule name, CEL position, missing ancestor', (t) => {
  const err = t.throws(() =>
    compilePolicies([
      {
        resourcePolicy: {
          resource: 'doc:x',
          version: 'default',
          scope: 't1_crm',
          importDerivedRoles: ['nope'],
          rules: [
            { name: 'r', actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['a'], condition: { match: { expr: 'R.attr.x ==' } } },
            { name: 'r', actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['a'], condition: { match: { expr: 'nosuchfn(1)' } } },
          ],
        },
      },
    ]),
  ) as PolicyCompileError;
  const text = err.issues.map((i) => `${i.path}: ${i.message}`).join('\n');
  t.regex(text, /importDerivedRoles\.0: Unknown derived roles "nope"/);
  t.regex(text, /rules\.1\.name: Rule name "r" is used more than once/);
  t.regex(text, /rules\.0\.condition\.match\.expr: .*column 12/);
  t.regex(text, /rules\.1\.condition\.match\.expr: .*nosuchfn/);
  t.regex(text, /scope: Missing ancestor policy/);
});

test('CEL that could loop or explode is bounded: size limits and no nested comprehensions; a big list is linear', (t) => {
  const refuse = (expr: string) => {
    const err = t.throws(() => compilePolicies([{ resourcePolicy: { resource: 'doc:x', version: 'default', rules: [{ actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['a'], condition: { match: { expr } } }] } }])) as PolicyCompileError;
    return err.issues[0].message;
  };
  t.regex(refuse(`R.attr.x == "${'a'.repeat(5000)}"`), /longer than 4096/);
  t.regex(refuse(Array.from({ length: 260 }, () => 'P.id==1').join('||')), /AST nodes|nodes/i);
  t.regex(refuse('R.attr.tags.exists(a, R.attr.tags.exists(b, a == b))'), /may not be nested.*column 23/);
  const set = compilePolicies([
    { resourcePolicy: { resource: 'doc:x', version: 'default', rules: [{ actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['a'], condition: { match: { expr: 'R.attr.tags.exists(t, t == "needle")' } } }] } },
  ]);
  const tags = Array.from({ length: 200_000 }, (_, i) => `t${i}`);
  const started = process.hrtime.bigint();
  const res = set.check({ principal: { id: 'p', roles: ['a'] }, resources: [{ resource: { kind: 'doc:x', id: '1', attr: { tags } }, actions: ['read'] }] });
  t.is(res.results[0].actions.read, 'EFFECT_DENY');
  t.log(`200,000-element list: ${Number(process.hrtime.bigint() - started) / 1e6} ms`);
});

test("an action's decision does not depend on the other actions asked: a rule action without '*' is literal (Cerbos' rule index), with one a glob", (t) => {
  const doc: PolicyDocument = {
    resourcePolicy: { resource: 'doc', version: 'default', rules: [{ actions: ['x?', '[a]', '{edit,delete}:own', 'view:*', 'p?*'], effect: 'EFFECT_ALLOW', roles: ['member'] }] },
  };
  const set = compilePolicies([doc]);
  const ask = (actions: string[]) => set.check({ principal: alice, resources: [{ resource: { kind: 'doc', id: '1', attr: {} }, actions }] }).results[0].actions;
  const all = ['x?', 'xy', '[a]', 'a', '{edit,delete}:own', 'edit:own', 'view:all', 'view:a:b', 'p?', 'pq', 'pqr', 'p'];
  const together = ask(all);
  for (const action of all) t.is(ask([action])[action], together[action], action);
  t.like(together, { 'x?': 'EFFECT_ALLOW', xy: 'EFFECT_DENY', '[a]': 'EFFECT_ALLOW', a: 'EFFECT_DENY', '{edit,delete}:own': 'EFFECT_ALLOW', 'edit:own': 'EFFECT_DENY' });
  t.like(together, { 'view:all': 'EFFECT_ALLOW', 'view:a:b': 'EFFECT_DENY', 'p?': 'EFFECT_ALLOW', pq: 'EFFECT_ALLOW', pqr: 'EFFECT_ALLOW', p: 'EFFECT_DENY' });
});

test('only the variables a policy reads are evaluated: an unread one costs nothing (here one over the value budget)', (t) => {
  const doc: PolicyDocument = {
    resourcePolicy: {
      resource: 'doc',
      version: 'default',
      variables: { local: { open: 'R.attr.status == "open"', ok: 'V.open && R.attr.n > 0', unread: 'R.attr.s + R.attr.s + R.attr.s + R.attr.s' } },
      rules: [{ actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['member'], condition: { match: { expr: 'V.ok' } } }],
    },
  };
  const set = compilePolicies([doc]);
  const ask = (attr: Record<string, unknown>) => set.check({ principal: alice, resources: [{ resource: { kind: 'doc', id: '1', attr }, actions: ['read'] }] }).results[0].actions.read;
  t.is(ask({ status: 'open', n: 1 }), 'EFFECT_ALLOW', 'ok reads open: both evaluated');
  t.is(ask({ status: 'closed', n: 1 }), 'EFFECT_DENY');
  t.is(ask({ status: 'open' }), 'EFFECT_DENY', 'a failing variable is absent');
  t.is(ask({ status: 'open', n: 1, s: 'x'.repeat(300_000) }), 'EFFECT_ALLOW', 'unread: never built (1.2 M characters would exceed maxValueSize)');
  const reads: PolicyDocument = { resourcePolicy: { ...doc.resourcePolicy!, rules: [{ actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['member'], condition: { match: { expr: 'V.ok && size(V.unread) > 0' } } }] } };
  t.throws(() => compilePolicies([reads]).check({ principal: alice, resources: [{ resource: { kind: 'doc', id: '1', attr: { status: 'open', n: 1, s: 'x'.repeat(300_000) } }, actions: ['read'] }] }), { message: /maxValueSize|at most/ }, 'read: over the budget');
});
