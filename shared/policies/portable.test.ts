// The portable form ⇄ Cerbos-form documents: scope and prefixes added and taken off, field names
// renamed, metadata as annotations, lossless round trips, and the portable form's own errors.
import test from 'ava';
import { DomainError } from '../errors.ts';
import { compilePolicies } from './engine.ts';
import { fromPortable, toPortable } from './portable.ts';

const place = { schema: 'site_ab12', appSlug: 'crm' };

test('a resource policy: kind from entity_type and name, the app\'s scope, imports prefixed, rules renamed', (t) => {
  const doc = fromPortable(
    {
      policy_type: 'resource', entity_type: 'ticket', name: 'support', import_derived_roles: ['owners'],
      rules: [{ actions: ['update'], effect: 'EFFECT_ALLOW', derived_roles: ['owner'], condition: { match: { expr: 'R.attr.open == true' } } }],
      variables: { is_open: 'R.attr.status == "open"' },
      metadata: { description: 'Tickets', tags: ['support'], owner_team: 'care' },
    },
    place,
  );
  t.deepEqual(doc, {
    apiVersion: 'api.cerbos.dev/v1',
    description: 'Tickets',
    metadata: { annotations: { tags: '["support"]', owner_team: 'care' } },
    resourcePolicy: {
      resource: 'ticket:support', version: 'default', scope: 'site_ab12_crm', importDerivedRoles: ['site_ab12_crm_owners'],
      variables: { local: { is_open: 'R.attr.status == "open"' } },
      rules: [{ actions: ['update'], effect: 'EFFECT_ALLOW', derivedRoles: ['owner'], condition: { match: { expr: 'R.attr.open == true' } } }],
    },
  });
});

test('round trips: portable → document → portable is the same policy, for every policy type', (t) => {
  const policies = [
    { policy_type: 'resource', name: 'orders', entity_type: 'datatable', version: 'v2', rules: [{ actions: ['*'], effect: 'EFFECT_DENY', roles: ['*'] }], scope_permissions: 'SCOPE_PERMISSIONS_REQUIRE_PARENTAL_CONSENT_FOR_ALLOWS' },
    { policy_type: 'role', name: 'editor', parent_roles: ['member'], rules: [{ resource: 'doc:*', allow_actions: ['read', 'edit'] }], constants: { local: { max: 3 } } },
    { policy_type: 'derived_role', name: 'owners', definitions: [{ name: 'owner', parentRoles: ['member'], condition: { match: { expr: 'R.attr.owner == P.id' } } }], metadata: { description: 'who owns' } },
    { policy_type: 'resource', name: 'plain', entity_type: 'note', rules: [], disabled: true },
  ];
  for (const p of policies) t.deepEqual(toPortable(fromPortable(structuredClone(p), place), place), p, p.name);
  // A derived-role set compiles alone (scoped policies need their unscoped ancestors, which the store adds).
  t.notThrows(() => compilePolicies([fromPortable(policies[2], place)]));
});

test('reserved metadata is exported unless asked not to; derived-role names lose the app prefix', (t) => {
  const doc = {
    metadata: { annotations: { created_by: 'u1', created_date: '2026-01-01T00:00:00.000Z', modified_by: 'u1', modified_date: '2026-01-01T00:00:00.000Z', team: 'x' } },
    derivedRoles: { name: 'site_ab12_crm_owners', definitions: [{ name: 'owner', parentRoles: ['member'] }] },
  };
  t.like(toPortable(doc, place), { name: 'owners', metadata: { created_by: 'u1', team: 'x' } });
  t.deepEqual(toPortable(doc, place, { reserved: false })!.metadata, { team: 'x' });
  t.is(toPortable({ principalPolicy: { principal: 'u1', version: 'default', rules: [] } }, place), undefined, 'principal policies have no portable form');
});

test('the portable form\'s own errors name its fields', (t) => {
  const errors = (body: unknown) => {
    const err = t.throws(() => fromPortable(body, place), { instanceOf: DomainError });
    return err!.errors;
  };
  t.deepEqual(errors({ policy_type: 'role', name: 'r', entity_type: 'x', definitions: [] }), {
    entity_type: ['Not a field of role policies.'],
    definitions: ['Not a field of role policies.'],
  });
  t.deepEqual(errors({ policy_type: 'resource', name: 'x', entity_type: 'k', scope: 'site_ab12_other' }), { scope: ['Policies of this app have the scope "site_ab12_crm".'] });
  t.deepEqual(errors({ policy_type: 'resource', name: 'x', entity_type: 'k', metadata: { tags: [1], n: 2 } }), {
    'metadata.tags': ['Tags are an array of strings.'],
    'metadata.n': ['Metadata values are strings (tags: an array of strings).'],
  });
  t.truthy(errors({ policy_type: 'resource', name: 'x', rulez: [] })?.rulez);
  t.truthy(errors({ name: 'x' })?.policy_type);
});

test('issue 29 #12: portable names follow Cerbos\' identifier rules; a resource policy needs entity_type; constants take a plain map', (t) => {
  const errors = (body: unknown) => t.throws(() => fromPortable(body, place), { instanceOf: DomainError })!.errors ?? {};
  t.deepEqual(Object.keys(errors({ policy_type: 'resource', name: 'support', rules: [] })), ['entity_type']);
  t.regex(errors({ policy_type: 'resource', name: 'support', rules: [] }).entity_type![0]!, /required/);
  t.deepEqual(Object.keys(errors({ policy_type: 'resource', entity_type: 'ticket', name: '../../etc/x', rules: [] })), ['name']);
  t.deepEqual(Object.keys(errors({ policy_type: 'resource', entity_type: '..', name: 'x', rules: [] })), ['entity_type']);
  t.deepEqual(Object.keys(errors({ policy_type: 'role', name: 'a/b', rules: [] })), ['name']);
  t.deepEqual(Object.keys(errors({ policy_type: 'derived_role', name: 'x y', definitions: [] })), ['name']);
  t.deepEqual(Object.keys(errors({ policy_type: 'resource', entity_type: 'ticket', name: 'x', version: '1.0', rules: [] })), ['version']);
  const plain = fromPortable({ policy_type: 'resource', entity_type: 'ticket', name: 'x', constants: { max: 3 }, rules: [] }, place);
  const wrapped = fromPortable({ policy_type: 'resource', entity_type: 'ticket', name: 'x', constants: { local: { max: 3 } }, rules: [] }, place);
  t.deepEqual(plain.resourcePolicy!.constants, { local: { max: 3 } });
  t.deepEqual(plain, wrapped);
});
