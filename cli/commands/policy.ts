// `platform policy …`: the authorization policies of an app and decisions on them
// (/sites/<site>/api/apps/<app>/policies/, check/resources, plan/resources). A policy is read
// from a JSON file in Cerbos form, the portable form, or {policies: [...]} of either.
import { Args, Flags } from '@oclif/core';
import { DomainError } from '../../shared/errors.ts';
import { path } from '../api.ts';
import { operation } from '../base.ts';
import { parseJson, siteFlag } from '../flags.ts';
import { keyValues, listTable, table, type Column } from '../output.ts';
import { readJson } from '../tables.ts';

const appFlag = Flags.string({ summary: 'The app (slug) whose policies these are.', required: true });
const base = { site: siteFlag, app: appFlag };
const idArg = { id: Args.string({ name: 'id', description: 'The policy id (e.g. resource.ticket_support.vdefault/<schema>_<app>)', required: true }) };
const fileFlag = Flags.string({ summary: 'A JSON file: a policy in Cerbos form or the portable form, or {"policies": [...]}.', required: true });
const principalFlags = {
  username: Flags.string({ summary: 'Decide for this site user (administrators).' }),
  email: Flags.string({ summary: 'Decide for the site user with this e-mail (administrators).' }),
};

type Doc = Record<string, any>;
const KINDS: [key: string, kind: string, name: (p: Doc) => string][] = [
  ['resourcePolicy', 'resource', (p) => p.resource],
  ['derivedRoles', 'derived_role', (p) => p.name],
  ['rolePolicy', 'role', (p) => p.role],
  ['principalPolicy', 'principal', (p) => p.principal],
];
const kindOf = (d: Doc) => KINDS.find(([key]) => d[key]) ?? KINDS[0]!;

const POLICY_COLUMNS: Column<Doc>[] = [
  { header: 'Id', get: (d) => d.metadata?.storeIdentifier },
  { header: 'Kind', get: (d) => kindOf(d)[1] },
  { header: 'Name', get: (d) => kindOf(d)[2](d[kindOf(d)[0]]) },
  { header: 'Version', get: (d) => d[kindOf(d)[0]]?.version ?? (d.derivedRoles ? null : 'default') },
  { header: 'Disabled', get: (d) => d.disabled === true },
  { header: 'Modified', get: (d) => d.metadata?.annotations?.modified_date?.slice(0, 16).replace('T', ' ') },
];

/** A JSON object flag (`--attr`), or undefined. */
function object(text: string | undefined, flag: string): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  const v = parseJson(text, flag);
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new DomainError('VALIDATION_ERROR', `--${flag} must be a JSON object.`, { errors: { [flag]: ['Expected a JSON object.'] } });
  return v as Record<string, unknown>;
}

/** The body of a check or plan: the --file, or one built from the flags. */
function decisionBody(file: string | undefined, build: () => Record<string, unknown>): unknown {
  return file !== undefined ? readJson(file, 'file') : build();
}

export const POLICY_COMMANDS = {
  'policy:list': operation({
    summary: 'List the policies of an app.',
    description: 'Filters are regular expressions (RE2) on the name (resource kind, role, derived-role set), the scope and the version. Prints the API body with --json.',
    examples: ['policy list --site shop_prod --app crm', 'policy list --site shop_prod --app crm --name "^ticket:" --include-disabled --json'],
    flags: {
      ...base,
      name: Flags.string({ summary: 'name_regexp: matches the name.' }),
      scope: Flags.string({ summary: 'scope_regexp: matches the scope.' }),
      version: Flags.string({ summary: 'version_regexp: matches the version.' }),
      'include-disabled': Flags.boolean({ summary: 'Also the deleted (disabled) policies.' }),
    },
    request: ({ flags: f }) => ({
      method: 'GET',
      site: f.site,
      path: path`/api/apps/${f.app}/policies/`,
      query: { name_regexp: f.name, scope_regexp: f.scope, version_regexp: f.version, include_disabled: f['include-disabled'] ? 'true' : undefined },
    }),
    render: (body: { data: Doc[] }) => listTable(body.data, POLICY_COLUMNS, ['policy', 'policies']),
  }),

  'policy:get': operation({
    summary: 'Show a policy of an app (its document in Cerbos form).',
    examples: ['policy get resource.ticket_support.vdefault/shop_prod_crm --site shop_prod --app crm'],
    args: idArg,
    flags: base,
    request: ({ flags: f, args }) => ({ method: 'GET', site: f.site, path: path`/api/apps/${f.app}/policies/`, query: { id: args.id } }),
    render: (body: { data: Doc[] }) => body.data.map((d) => JSON.stringify(d, null, 2)),
  }),

  'policy:create': operation({
    summary: 'Create a resource or derived-role policy from a file (POST: role policies and system entity types are refused).',
    examples: ['policy create --file ticket.json --site shop_prod --app crm'],
    flags: { ...base, file: fileFlag },
    request: ({ flags: f }) => ({ method: 'POST', site: f.site, path: path`/api/apps/${f.app}/policies/`, body: readJson(f.file, 'file') }),
  }),

  'policy:put': operation({
    summary: 'Create or replace any policy of an app from a file (PUT: also role policies and system entity types).',
    examples: ['policy put --file editor-role.json --site shop_prod --app crm'],
    flags: { ...base, file: fileFlag },
    request: ({ flags: f }) => ({ method: 'PUT', site: f.site, path: path`/api/apps/${f.app}/policies/`, body: readJson(f.file, 'file') }),
  }),

  'policy:delete': operation({
    summary: 'Delete a policy of an app (soft delete: kept as disabled).',
    examples: ['policy delete resource.ticket_support.vdefault/shop_prod_crm --site shop_prod --app crm'],
    args: idArg,
    flags: base,
    request: ({ flags: f, args }) => ({ method: 'DELETE', site: f.site, path: path`/api/apps/${f.app}/policies/`, query: { id: args.id } }),
  }),

  'policy:check': operation({
    summary: 'Check actions on a resource against the app\'s policies.',
    description: 'For you, or (administrators) --username / --email; or give the whole CheckResources body with --file.',
    examples: ['policy check --kind ticket:support --resource-id 42 --action read --action update --attr \'{"owner":"ada"}\' --username ada --site shop_prod --app crm'],
    flags: {
      ...base,
      ...principalFlags,
      kind: Flags.string({ summary: 'The resource kind ({entity_type}:{name}).', exactlyOne: ['kind', 'file'] }),
      'resource-id': Flags.string({ summary: 'The resource id (default "1").' }),
      action: Flags.string({ summary: 'An action (repeatable).', multiple: true }),
      attr: Flags.string({ summary: 'The resource attributes as a JSON object.' }),
      file: Flags.string({ summary: 'A JSON file with the CheckResources body instead.' }),
    },
    request: ({ flags: f }) => ({
      method: 'POST',
      site: f.site,
      path: path`/api/apps/${f.app}/check/resources`,
      query: { username: f.username, email: f.email },
      body: decisionBody(f.file, () => ({ resources: [{ resource: { kind: f.kind, id: f['resource-id'] ?? '1', attr: object(f.attr, 'attr') ?? {} }, actions: f.action ?? [] }] })),
    }),
    render: (body: { results: { resource: { id: string; kind: string }; actions: Record<string, string>; meta: { effectiveDerivedRoles: string[] } }[] }) => {
      const rows = body.results.flatMap((r) => Object.entries(r.actions).map(([action, effect]) => ({ r, action, effect })));
      return table(rows, [
        { header: 'Kind', get: (x) => x.r.resource.kind },
        { header: 'Id', get: (x) => x.r.resource.id },
        { header: 'Action', get: (x) => x.action },
        { header: 'Effect', get: (x) => (x.effect === 'EFFECT_ALLOW' ? 'allow' : 'deny') },
        { header: 'Derived roles', get: (x) => x.r.meta.effectiveDerivedRoles.join(', ') || null },
      ]);
    },
  }),

  'policy:plan': operation({
    summary: 'Plan which resources of a kind allow an action: always, never, or a condition on their attributes.',
    examples: ['policy plan --kind ticket:support --action update --username ada --site shop_prod --app crm'],
    flags: {
      ...base,
      ...principalFlags,
      kind: Flags.string({ summary: 'The resource kind ({entity_type}:{name}).', exactlyOne: ['kind', 'file'] }),
      action: Flags.string({ summary: 'The action.' }),
      'policy-version': Flags.string({ summary: 'The policy version (default "default").' }),
      file: Flags.string({ summary: 'A JSON file with the plan body instead.' }),
    },
    request: ({ flags: f }) => ({
      method: 'POST',
      site: f.site,
      path: path`/api/apps/${f.app}/plan/resources`,
      query: { username: f.username, email: f.email },
      body: decisionBody(f.file, () => ({ action: f.action, resource: { kind: f.kind, ...(f['policy-version'] ? { policy_version: f['policy-version'] } : {}) } })),
    }),
    render: (body: { filter_kind: string; condition?: unknown; resource_kind: string; action?: string }) =>
      keyValues({ kind: body.resource_kind, action: body.action, filter: body.filter_kind, ...(body.condition ? { condition: body.condition } : {}) }),
  }),

  'policy:inspect': operation({
    summary: 'Inspect the compiled policies of an app: actions, derived roles, variables, constants, attributes.',
    examples: ['policy inspect --site shop_prod --app crm', 'policy inspect --id resource.ticket_support.vdefault/shop_prod_crm --site shop_prod --app crm --json'],
    flags: {
      ...base,
      id: Flags.string({ summary: 'A policy id (repeatable).', multiple: true }),
      name: Flags.string({ summary: 'name_regexp: matches the name.' }),
      'include-disabled': Flags.boolean({ summary: 'Also the deleted (disabled) policies.' }),
    },
    request: ({ flags: f }) => ({
      method: 'GET',
      site: f.site,
      path: path`/api/apps/${f.app}/policies/inspect/`,
      query: { policy_id: f.id, name_regexp: f.name, include_disabled: f['include-disabled'] ? 'true' : undefined },
    }),
    render: (body: { data: { results: Record<string, Doc> } }) => {
      const rows = Object.values(body.data.results);
      const names = (list: { name: string }[] | undefined) => (list ?? []).map((x) => x.name).join(', ') || null;
      return listTable(rows, [
        { header: 'Policy', get: (r) => r.policyId },
        { header: 'Actions', get: (r) => (r.actions ?? []).join(', ') || null },
        { header: 'Derived roles', get: (r) => names(r.derivedRoles) },
        { header: 'Variables', get: (r) => names(r.variables) },
        { header: 'Constants', get: (r) => names(r.constants) },
        { header: 'Attributes', get: (r) => names(r.attributes) },
      ], ['policy', 'policies']);
    },
  }),
};
