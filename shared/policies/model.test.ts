// Policy ids (spec Part 2 §2) and the older form they replace (Cerbos': `v` before the version, a role's version).
import test from 'ava';
import { currentPolicyId, policyId } from './model.ts';

test('policy ids have the spec\'s form; an unscoped policy has no "/{scope}"', (t) => {
  t.is(policyId({ resourcePolicy: { resource: 'datatable:orders', version: 'default', scope: 't1_crm', rules: [] } }), 'resource.datatable_orders.default/t1_crm');
  t.is(policyId({ resourcePolicy: { resource: 'doc:a.b/c', version: 'v2', scope: 't1_crm', rules: [] } }), 'resource.doc_a.b/c.v2/t1_crm');
  t.is(policyId({ resourcePolicy: { resource: 'datatable:orders', version: 'default', rules: [] } }), 'resource.datatable_orders.default');
  t.is(policyId({ rolePolicy: { role: 'editor', version: 'default', scope: 't1_crm', rules: [] } }), 'role.editor/t1_crm');
  t.is(policyId({ rolePolicy: { role: 'editor', rules: [] } }), 'role.editor');
  t.is(policyId({ principalPolicy: { principal: 'u9', version: 'default', scope: 't1_crm', rules: [] } }), 'principal.u9.default/t1_crm');
  t.is(policyId({ derivedRoles: { name: 't1_crm_common', definitions: [] } }), 'derived_roles.t1_crm_common');
});

test('currentPolicyId: the id an older one has now (as tenant migration 12 renamed them); other ids have none', (t) => {
  const cases: [string, string | undefined][] = [
    ['resource.datatable_orders.vdefault/t1_crm', 'resource.datatable_orders.default/t1_crm'],
    ['resource.datatable_orders.vdefault', 'resource.datatable_orders.default'],
    ['resource.doc_a.vb/c.d.vv2/t1_crm.eu', 'resource.doc_a.vb/c.d.v2/t1_crm.eu'],
    ['role.editor.vdefault/t1_crm', 'role.editor/t1_crm'],
    ['role.editor.vdefault', 'role.editor'],
    ['principal.u9.vdefault/t1_crm', 'principal.u9.default/t1_crm'],
    ['role.editor.vv2/t1_crm', undefined], // role ids carry no version: only a "default" one has a current id
    ['role.editor/t1_crm', undefined],
    ['resource.datatable_orders.default/t1_crm', undefined],
    ['derived_roles.t1_crm_common', undefined],
  ];
  for (const [id, now] of cases) t.is(currentPolicyId(id), now, id);
});
