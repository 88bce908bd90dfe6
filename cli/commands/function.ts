// `platform function …` and `platform event …`: the functions of an app
// (/api/apps/{app}/functions/) and the site's event subscriptions (/api/cloud/events/;
// docs/functions.md).
import { Args, Flags } from '@oclif/core';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import type { AppEventView, FunctionView, InvocationView, SubscriptionView } from '../../shared/functions/function.schemas.ts';
import { DomainError } from '../../shared/errors.ts';
import { defined, path as apiPath } from '../api.ts';
import { operation } from '../base.ts';
import { pageFlags, parseJson, siteFlag } from '../flags.ts';
import { keyValues, pageTable, when, type Column } from '../output.ts';
import { readText } from '../tables.ts';

const appFlag = Flags.string({ summary: 'The app (slug) the function belongs to.', required: true });
const fnArg = { function: Args.string({ description: 'The function (slug)', required: true }) };
const functionsPath = (app: string, rest = '') => apiPath`/api/apps/${app}/functions/` + rest;
const fnPath = (f: { app: string }, slug: string, rest = '') => functionsPath(f.app, apiPath`${slug}/`) + rest;

interface Flagged<T> {
  success: boolean;
  message: string;
  data: T;
}

const COLUMNS: Column<FunctionView>[] = [
  { header: 'Id', get: (f) => f.id },
  { header: 'Slug', get: (f) => f.slug },
  { header: 'Name', get: (f) => f.name },
  { header: 'Timeout', get: (f) => `${f.timeout} s` },
  { header: 'Active', get: (f) => f.is_active },
  { header: 'Updated', get: (f) => when(f.updated_at) },
];

const functionLines = (f: FunctionView) =>
  keyValues({
    id: f.id,
    slug: f.slug,
    name: f.name,
    description: f.description || '–',
    runtime: f.runtime,
    timeout: `${f.timeout} s`,
    environment: Object.entries(f.environment).map(([k, v]) => `${k}=secret:${v}`).join(', ') || '–',
    is_active: f.is_active,
    code: `${Buffer.byteLength(f.code)} bytes`,
    updated_at: when(f.updated_at),
  });

const logLines = (i: InvocationView) => i.logs.map((l) => `${l.at} ${l.level.padEnd(5)} ${l.message}`);

function invocationLines(i: InvocationView): string[] {
  const out = [
    keyValues({
      invocation: `${i.id} (${i.uuid})`,
      status: i.status,
      trigger: i.event ? `${i.trigger} (${i.event})` : i.trigger,
      duration: i.duration_ms === null ? '–' : `${i.duration_ms} ms (CPU ${i.cpu_ms} ms)`,
      ...(i.error ? { error: `${i.error.type}: ${i.error.message}` } : {}),
    }),
  ];
  if (i.logs.length) out.push('logs:', ...logLines(i).map((l) => `  ${l}`));
  if (i.status === 'succeeded') out.push('result:', JSON.stringify(i.result, null, 2));
  return out;
}

const fieldFlags = {
  name: Flags.string({ summary: 'The name.' }),
  description: Flags.string({ summary: 'What it does.' }),
  timeout: Flags.integer({ summary: 'Seconds (1–900; default 300).' }),
  env: Flags.string({ summary: 'Environment from secrets, a JSON object {"NAME": "secret key"}.' }),
  active: Flags.boolean({ summary: 'Whether it may run (--no-active to switch it off).', allowNo: true }),
};

type FieldFlags = { file?: string; name?: string; description?: string; timeout?: number; env?: string; active?: boolean };

const fields = (f: FieldFlags) =>
  defined({
    name: f.name,
    description: f.description,
    code: f.file === undefined ? undefined : readText(f.file, 'file'),
    timeout: f.timeout,
    environment: f.env === undefined ? undefined : parseJson(f.env, 'env'),
    is_active: f.active,
  });

const eventArg = { event: Args.string({ description: 'The event type (PRE_USER_CREATE, POST_USER_CREATE)', required: true }) };
const functionIdFlag = Flags.integer({ summary: 'The function (its integer id: `function get` shows it).', required: true });

export const FUNCTION_COMMANDS = {
  'function:list': operation({
    summary: 'List the functions of an app.',
    examples: ['function list --app crm --site shop_prod', 'function list --app crm --search mail --site shop_prod --json'],
    flags: { site: siteFlag, app: appFlag, search: Flags.string({ summary: 'Part of the name or slug.' }), ...pageFlags },
    request: ({ flags: f }) => ({ method: 'GET', site: f.site, path: functionsPath(f.app), query: { search: f.search, page: f.page, page_size: f['page-size'] } }),
    render: (page: PageEnvelope<FunctionView>) => pageTable(page, COLUMNS, ['function', 'functions']),
  }),

  'function:create': operation({
    summary: 'Create a function from a JavaScript file.',
    description: 'The file is an ES module exporting the handler: `export default async function (event, context) { … }`. `context.env` holds the --env secrets; `platform.get/post/put/patch/delete(path, body)` call the API as the invoking user.',
    examples: ['function create --app crm --name "Welcome mail" --file handler.js --site shop_prod', `function create --app crm --name sync --file sync.js --env '{"API_TOKEN":"crm-token"}' --timeout 60 --site shop_prod --json`],
    flags: { site: siteFlag, app: appFlag, file: Flags.string({ summary: 'The code (a .js file).', required: true }), slug: Flags.string({ summary: 'The slug (default: made from the name).' }), ...fieldFlags, name: Flags.string({ summary: 'The name.', required: true }) },
    request: ({ flags: f }) => ({ method: 'POST', site: f.site, path: functionsPath(f.app), body: { ...fields(f), slug: f.slug } }),
    render: (fn: FunctionView) => ['Function created.', functionLines(fn)],
  }),

  'function:get': operation({
    summary: 'Show a function (--code prints its code).',
    examples: ['function get welcome-mail --app crm --site shop_prod', 'function get welcome-mail --app crm --code --site shop_prod > handler.js'],
    args: fnArg,
    flags: { site: siteFlag, app: appFlag, code: Flags.boolean({ summary: 'Print the code only.' }) },
    request: ({ flags: f, args }) => ({ method: 'GET', site: f.site, path: fnPath(f, args.function) }),
    render: (fn: FunctionView, { flags }) => (flags.code ? fn.code : functionLines(fn)),
  }),

  'function:update': operation({
    summary: 'Change a function (only the flags given; --file replaces the code).',
    examples: ['function update welcome-mail --app crm --file handler.js --site shop_prod', 'function update welcome-mail --app crm --no-active --site shop_prod'],
    args: fnArg,
    flags: { site: siteFlag, app: appFlag, file: Flags.string({ summary: 'New code (a .js file).' }), ...fieldFlags },
    request: ({ flags: f, args }) => {
      const body = fields(f);
      if (!Object.keys(body).length) throw new DomainError('BAD_REQUEST', 'Nothing to change: give --file, --name, --description, --timeout, --env or --active/--no-active.');
      return { method: 'PATCH', site: f.site, path: fnPath(f, args.function), body };
    },
    render: (fn: FunctionView) => ['Function updated.', functionLines(fn)],
  }),

  'function:delete': operation({
    summary: 'Delete a function (its invocations and subscriptions go with it).',
    examples: ['function delete welcome-mail --app crm --site shop_prod'],
    args: fnArg,
    flags: { site: siteFlag, app: appFlag },
    request: ({ flags: f, args }) => ({ method: 'DELETE', site: f.site, path: fnPath(f, args.function) }),
    render: () => 'Function deleted.',
  }),

  'function:invoke': operation({
    summary: 'Run a function and show its result and logs.',
    description: 'Waits for the end (up to the function timeout) unless --async. The function runs as you: its SDK calls carry your rights. Exit status 0 whatever the function did: read `status` (succeeded, failed, timed_out).',
    examples: [`function invoke welcome-mail --app crm --payload '{"to":"ada@example.com"}' --site shop_prod`, 'function invoke nightly --app crm --async --site shop_prod --json'],
    args: fnArg,
    flags: {
      site: siteFlag,
      app: appFlag,
      payload: Flags.string({ summary: "The handler's event (JSON)." }),
      async: Flags.boolean({ summary: 'Queue it and return at once (follow it with `function logs`).' }),
    },
    request: ({ flags: f, args, info }) => {
      if (!f.async) info(`Running ${args.function}…`);
      return { method: 'POST', site: f.site, path: fnPath(f, args.function, 'invoke/'), body: defined({ payload: f.payload === undefined ? undefined : parseJson(f.payload, 'payload'), async: f.async || undefined }) };
    },
    render: (i: InvocationView) => invocationLines(i),
  }),

  'function:logs': operation({
    summary: 'Show the latest invocations of a function with their logs (yours only unless you administer the site).',
    examples: ['function logs welcome-mail --app crm --site shop_prod', 'function logs welcome-mail --app crm --status failed --page-size 5 --site shop_prod --json'],
    args: fnArg,
    flags: {
      site: siteFlag,
      app: appFlag,
      status: Flags.string({ summary: 'Only these: queued, running, succeeded, failed, timed_out.' }),
      ...pageFlags,
    },
    request: ({ flags: f, args }) => ({ method: 'GET', site: f.site, path: fnPath(f, args.function, 'invocations/'), query: { status: f.status, page: f.page, page_size: f['page-size'] ?? '10' } }),
    render: (page: PageEnvelope<InvocationView>) =>
      page.results.length ? [...page.results.flatMap((i) => [...invocationLines(i), '']), `${page.count} invocation${page.count === 1 ? '' : 's'}.`] : 'No invocations.',
  }),
};

export const EVENT_COMMANDS = {
  'event:list': operation({
    summary: 'List the event types, or (with --app and an event) the functions of an app subscribed to it.',
    examples: ['event list --site shop_prod', 'event list PRE_USER_CREATE --app crm --site shop_prod --json'],
    args: { event: Args.string({ description: 'An event type (with --app)' }) },
    flags: { site: siteFlag, app: Flags.string({ summary: 'The app whose subscribers to list.' }) },
    request: ({ flags: f, args }) => {
      if (Boolean(f.app) !== Boolean(args.event)) throw new DomainError('BAD_REQUEST', 'Give both an event type and --app to list subscribers, or neither to list the event types.');
      return { method: 'GET', site: f.site, path: f.app ? apiPath`/api/apps/${f.app}/events/${args.event!}/` : '/api/cloud/events/' };
    },
    render: (body: Flagged<{ events: string[] } | AppEventView>) => {
      const data = body.data;
      if ('events' in data) return data.events;
      if (!data.subscribers.length) return `No function of ${data.app.slug} is subscribed to ${data.event}.`;
      return [...data.subscribers.map((x) => `${x.function_id}\t${x.function_slug}\t${x.function_name}\tsince ${when(x.created_at)}`), `${data.total_subscribers} subscriber${data.total_subscribers === 1 ? '' : 's'}.`];
    },
  }),

  'event:subscribe': operation({
    summary: 'Subscribe a function to an event type.',
    examples: ['event subscribe PRE_USER_CREATE --function-id 7 --site shop_prod'],
    args: eventArg,
    flags: { site: siteFlag, 'function-id': functionIdFlag },
    request: ({ flags: f, args }) => ({ method: 'POST', site: f.site, path: apiPath`/api/cloud/events/${args.event}/subscribe/`, body: { function_id: f['function-id'] } }),
    render: (body: Flagged<SubscriptionView>) => [body.message, keyValues({ subscription: body.data.id, event: body.data.event, function: `${body.data.function} (${body.data.app_slug}/${body.data.function_slug})` })],
  }),

  'event:unsubscribe': operation({
    summary: 'Unsubscribe a function from an event type.',
    examples: ['event unsubscribe PRE_USER_CREATE --function-id 7 --site shop_prod'],
    args: eventArg,
    flags: { site: siteFlag, 'function-id': functionIdFlag },
    request: ({ flags: f, args }) => ({ method: 'POST', site: f.site, path: apiPath`/api/cloud/events/${args.event}/unsubscribe/`, body: { function_id: f['function-id'] } }),
    render: (body: Flagged<unknown>) => body.message,
  }),
};
