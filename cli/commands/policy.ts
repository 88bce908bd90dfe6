// `platform policy …`: the authorization policies of an app and decisions on them
// (/sites/<site>/api/apps/<app>/policies/, check/resources, plan/resources). A policy is read
// from a JSON file in Cerbos form, the portable form, or {policies: [...]} of either.
import { Flags } from '@oclif/core';
import { api } from '../base.ts';
import { columns, keyValues, listOf, listTable, table, when } from '../output.ts';
import { jsonObject, readJson } from '../tables.ts';

type Doc = Record<string, any>;
const filters = { name_regexp: 'name', scope_regexp: 'scope', version_regexp: 'version' };
const includeDisabled = { 'include-disabled': Flags.boolean({ summary: 'Also the deleted (disabled) policies.' }) };
const decisionFlags = (body: string) => ({
  kind: Flags.string({ summary: 'The resource kind ({entity_type}:{name}).', exactlyOne: ['kind', 'file'] }),
  file: Flags.string({ summary: `A JSON file with the ${body} body instead.` }),
});
/** The body of a check or plan: the --file, or the one built from the flags. */
const decision = (f: { file?: string }, build: () => Record<string, unknown>) => (f.file === undefined ? build() : (readJson(f.file, 'file') as Record<string, unknown>));

/** [the document's key, the policy kind, the key of its name] */
const KINDS = [['resourcePolicy', 'resource', 'resource'], ['derivedRoles', 'derived_role', 'name'], ['rolePolicy', 'role', 'role'], ['principalPolicy', 'principal', 'principal']] as const;
const kindOf = (d: Doc) => KINDS.find(([key]) => d[key]) ?? KINDS[0];

/** POST or PUT of a policy file (the route's body is the document). */
const store = (operationId: string, example: string) =>
  api(operationId, {
    examples: [`${example} --site shop_prod --app crm`],
    flags: { file: Flags.string({ summary: 'A JSON file: a policy in Cerbos form or the portable form, or {"policies": [...]}.', required: true }) },
    body: ({ flags: f }) => readJson(f.file, 'file'),
  });

const names = (key: string) => (r: Doc) => (r[key] ?? []).map((x: { name: string }) => x.name).join(', ') || null;

export const POLICY_COMMANDS = {
  'policy:list': api('policies_list', {
    summary: 'List the policies of an app.',
    examples: ['policy list --site shop_prod --app crm', 'policy list --site shop_prod --app crm --name "^ticket:" --include-disabled --json'],
    rename: { ...filters, id: false },
    flags: includeDisabled,
    render: listOf<Doc>(['policy', 'policies'], 'metadata.storeIdentifier:id kind name version disabled modified', {
      kind: (d) => kindOf(d)[1],
      name: (d) => d[kindOf(d)[0]]?.[kindOf(d)[2]],
      version: (d) => d[kindOf(d)[0]]?.version ?? (d.derivedRoles ? null : 'default'),
      disabled: (d) => d.disabled === true,
      modified: (d) => when(d.metadata?.annotations?.modified_date ?? null),
    }),
  }),
  'policy:get': api('policies_list', {
    summary: 'Show a policy of an app (its document in Cerbos form).',
    args: ['id'],
    help: { id: 'The policy id.' },
    rename: { name_regexp: false, scope_regexp: false, version_regexp: false, include_disabled: false },
    examples: ['policy get resource.ticket_support.default/shop_prod_crm --site shop_prod --app crm'],
    render: (body: { data: Doc[] }) => body.data.map((d) => JSON.stringify(d, null, 2)),
  }),
  'policy:create': store('policies_create', 'policy create --file ticket.json'),
  'policy:put': store('policies_put', 'policy put --file editor-role.json'),
  'policy:delete': api('policies_destroy', { args: ['id'], examples: ['policy delete resource.ticket_support.default/shop_prod_crm --site shop_prod --app crm'] }),
  'policy:check': api('check_resources', {
    summary: "Check actions on a resource against the app's policies.",
    description: 'For you, or (administrators) --username / --email; or give the whole CheckResources body with --file.',
    examples: ['policy check --kind ticket:support --resource-id 42 --action read --action update --attr \'{"owner":"ada"}\' --username ada --site shop_prod --app crm'],
    rename: { requestId: false, includeMeta: 'include-meta', resources: false },
    flags: {
      ...decisionFlags('CheckResources'),
      'resource-id': Flags.string({ summary: 'The resource id (default "1").' }),
      action: Flags.string({ summary: 'An action (repeatable).', multiple: true }),
      attr: Flags.string({ summary: 'The resource attributes as a JSON object.' }),
    },
    body: ({ flags: f }) => decision(f, () => ({ resources: [{ resource: { kind: f.kind, id: f['resource-id'] ?? '1', attr: f.attr === undefined ? {} : jsonObject(f.attr, 'attr') }, actions: f.action ?? [] }] })),
    render: (body: { results: { resource: { id: string; kind: string }; actions: Record<string, string>; meta: { effectiveDerivedRoles: string[] } }[] }) => {
      const rows = body.results.flatMap((r) => Object.entries(r.actions).map(([action, effect]) => ({ ...r.resource, action, effect: effect === 'EFFECT_ALLOW' ? 'allow' : 'deny', roles: r.meta.effectiveDerivedRoles.join(', ') || null })));
      return table(rows, columns('kind id action effect roles:derived_roles'));
    },
  }),
  'policy:plan': api('plan_resources', {
    summary: 'Plan which resources of a kind allow an action: always, never, or a condition on their attributes.',
    examples: ['policy plan --kind ticket:support --action update --username ada --site shop_prod --app crm'],
    rename: { requestId: false, resource: false, actions: false },
    flags: decisionFlags('PlanResources'),
    body: ({ flags: f }) => decision(f, () => ({ resource: { kind: f.kind } })),
    render: (body: { filter_kind: string; condition?: unknown; resource_kind: string; action?: string }) =>
      keyValues({ kind: body.resource_kind, action: body.action, filter: body.filter_kind, ...(body.condition ? { condition: body.condition } : {}) }),
  }),
  'policy:inspect': api('policies_inspect', {
    examples: ['policy inspect --site shop_prod --app crm', 'policy inspect --id resource.ticket_support.default/shop_prod_crm --site shop_prod --app crm --json'],
    rename: { ...filters, policy_id: 'id' },
    flags: { id: Flags.string({ summary: 'A policy id (repeatable).', multiple: true }), ...includeDisabled },
    render: (body: { data: { results: Record<string, Doc> } }) =>
      listTable(Object.values(body.data.results), columns<Doc>('policyId:policy actions derivedRoles:derived_roles variables constants attributes', {
        actions: (r) => (r.actions ?? []).join(', ') || null,
        derivedRoles: names('derivedRoles'),
        variables: names('variables'),
        constants: names('constants'),
        attributes: names('attributes'),
      }), ['policy', 'policies']),
  }),
};
