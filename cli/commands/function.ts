// `platform function …` and `platform event …`: the functions of an app
// (/api/apps/{app}/functions/) and the site's event subscriptions (/api/cloud/events/;
// docs/functions.md).
import { Args, Flags } from '@oclif/core';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import type { AppEventView, FunctionView, InvocationView, SubscriptionView } from '../../shared/functions/function.schemas.ts';
import { DomainError } from '../../shared/errors.ts';
import { path } from '../api.ts';
import { api, operation } from '../base.ts';
import { siteFlag } from '../flags.ts';
import { keyValues, pageOf, when } from '../output.ts';
import { plural, readText } from '../tables.ts';

interface Flagged<T> {
  message: string;
  data: T;
}

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
  if (i.logs.length) out.push('logs:', ...i.logs.map((l) => `  ${l.at} ${l.level.padEnd(5)} ${l.message}`));
  if (i.status === 'succeeded') out.push('result:', JSON.stringify(i.result, null, 2));
  return out;
}

const one = { args: ['function_slug'] };

/** The code from a file (`--file`), the environment as `--env`. */
const editing = (required: boolean) => ({
  rename: { code: 'file', environment: 'env' },
  flags: { file: Flags.string({ summary: 'The code: a JavaScript file (an ES module exporting the handler).', required }) },
  body: ({ flags: f }: { flags: { file?: string } }) => ({ code: f.file === undefined ? undefined : readText(f.file, 'file') }),
});

export const FUNCTION_COMMANDS = {
  'function:list': api('functions_list', {
    examples: ['function list --app crm --site shop_prod', 'function list --app crm --search mail --site shop_prod --json'],
    render: pageOf<FunctionView>(['function', 'functions'], 'id slug name timeout is_active:active updated_at:updated', { timeout: (f) => `${f.timeout} s` }),
  }),
  'function:create': api('functions_create', {
    ...editing(true),
    examples: ['function create --app crm --name "Welcome mail" --file handler.js --site shop_prod', `function create --app crm --name sync --file sync.js --env '{"API_TOKEN":"crm-token"}' --timeout 60 --site shop_prod --json`],
    render: (fn: FunctionView) => ['Function created.', functionLines(fn)],
  }),
  'function:get': api('functions_retrieve', {
    ...one,
    examples: ['function get welcome-mail --app crm --site shop_prod', 'function get welcome-mail --app crm --code --site shop_prod > handler.js'],
    flags: { code: Flags.boolean({ summary: 'Print the code only.' }) },
    render: (fn: FunctionView, { flags }) => (flags.code ? fn.code : functionLines(fn)),
  }),
  'function:update': api('functions_partial_update', {
    ...editing(false),
    args: one.args,
    examples: ['function update welcome-mail --app crm --file handler.js --site shop_prod', 'function update welcome-mail --app crm --no-active --site shop_prod'],
    render: (fn: FunctionView) => ['Function updated.', functionLines(fn)],
  }),
  'function:delete': api('functions_destroy', { ...one, examples: ['function delete welcome-mail --app crm --site shop_prod'], render: () => 'Function deleted.' }),
  'function:invoke': api('functions_invoke', {
    ...one,
    examples: [`function invoke welcome-mail --app crm --payload '{"to":"ada@example.com"}' --site shop_prod`, 'function invoke nightly --app crm --async --site shop_prod --json'],
    progress: ({ flags, args }) => (flags.async ? '' : `Running ${args.function_slug}…`),
    render: invocationLines,
  }),
  'function:logs': api('functions_invocations_list', {
    ...one,
    examples: ['function logs welcome-mail --app crm --status failed --page-size 5 --site shop_prod'],
    flags: { 'page-size': Flags.string({ summary: 'Invocations per page (default 10, at most 100).', default: '10' }) },
    render: (page: PageEnvelope<InvocationView>) =>
      page.results.length ? [...page.results.flatMap((i) => [...invocationLines(i), '']), `${plural(page.count, 'invocation')}.`] : 'No invocations.',
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
      return { method: 'GET', site: f.site, path: f.app ? path`/api/apps/${f.app}/events/${args.event!}/` : '/api/cloud/events/' };
    },
    render: ({ data }: Flagged<{ events: string[] } | AppEventView>) => {
      if ('events' in data) return data.events;
      if (!data.subscribers.length) return `No function of ${data.app.slug} is subscribed to ${data.event}.`;
      return [...data.subscribers.map((x) => `${x.function_id}\t${x.function_slug}\t${x.function_name}\tsince ${when(x.created_at)}`), `${plural(data.total_subscribers, 'subscriber')}.`];
    },
  }),
  'event:subscribe': api('events_subscribe', {
    args: ['event_name'],
    examples: ['event subscribe PRE_USER_CREATE --function-id 7 --site shop_prod'],
    render: ({ message, data: s }: Flagged<SubscriptionView>) => [message, keyValues({ subscription: s.id, event: s.event, function: `${s.function} (${s.app_slug}/${s.function_slug})` })],
  }),
  'event:unsubscribe': api('events_unsubscribe', { args: ['event_name'], examples: ['event unsubscribe PRE_USER_CREATE --function-id 7 --site shop_prod'], render: (body: Flagged<unknown>) => body.message }),
};
