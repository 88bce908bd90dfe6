// Functions of an app (scope 'tenant'), in the spec's style for app resources (Part 2 names
// functions and defines no routes; docs/functions.md): /api/apps/{app_slug}/functions/ CRUD,
// `{slug}/invoke/` and `{slug}/invocations/`. Events (Part 1 §6): /api/cloud/events/… and
// /api/apps/{app_slug}/events/{event_name}/, in the flag envelope ({success, message, data}).
import { Type } from '@sinclair/typebox';
import * as events from '../../shared/functions/events.service.ts';
import * as functions from '../../shared/functions/function.service.ts';
import { AppEventView, FunctionCreate, FunctionListQuery, FunctionRef, FunctionUpdate, FunctionView, InvocationListQuery, InvocationView, InvokeBody, SubscribeBody, SubscriptionView } from '../../shared/functions/function.schemas.ts';
import type { FunctionRuntime } from '../../shared/functions/runtime.ts';
import { flagged, paginated, sendPage } from '../http/envelopes.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';
import type { AppContext } from '../http/types.ts';

const BASE = '/api/apps/:app_slug/functions/';
const ONE = `${BASE}:function_slug/`;
const ADMIN = "Site administrators (superusers and staff), and the app's policies on `function:{slug}`.";
const AppRef = Type.Object({ app_slug: Type.String({ description: 'The app slug.' }) });
const EventRef = Type.Object({ event_name: Type.String({ description: 'The event type (PRE_USER_CREATE, POST_USER_CREATE).' }) });

/** An events answer of §6: {success, message, data} (its errors in the flag form as well: `errorForm`). */
const flagAnswer = async (ctx: AppContext, message: string, load: () => Promise<unknown>) => {
  ctx.body = { success: true, message, data: await load() };
};

export function functionRoutes(options: { runtime: FunctionRuntime; publicUrl?: string }): RouteDef[] {
  const base = { scope: 'tenant' as const, auth: 'user' as const, tags: ['functions'] };
  const eventBase = { scope: 'tenant' as const, auth: 'user' as const, tags: ['events'], errorForm: 'flag' as const };
  return [
    defineRoute({
      ...base,
      method: 'get',
      path: BASE,
      operationId: 'functions_list',
      summary: 'List the functions of an app',
      description: `Newest first; \`search\` (name or slug), \`is_active\`, \`page\`, \`page_size\`. ${ADMIN}`,
      params: AppRef,
      query: FunctionListQuery,
      responses: { 200: paginated(FunctionView) },
      async handler(ctx, { params, query }) {
        sendPage(ctx, await functions.listFunctions(ctx.state.service(), params.app_slug!, query), options.publicUrl);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: BASE,
      operationId: 'functions_create',
      summary: 'Create a function',
      description: `\`code\` is an ES module exporting the handler. The slug is made from the name unless given (-2 … on collision); it cannot change. \`environment\` names secrets that must exist. At most \`max_functions\` per app (app settings). ${ADMIN}`,
      params: AppRef,
      body: FunctionCreate,
      responses: { 201: FunctionView },
      async handler(ctx, { params, body }) {
        ctx.status = 201;
        ctx.body = await functions.createFunction(ctx.state.service(), params.app_slug!, body);
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: ONE,
      operationId: 'functions_retrieve',
      summary: 'Get a function, with its code',
      description: ADMIN,
      params: FunctionRef,
      responses: { 200: FunctionView },
      async handler(ctx, { params }) {
        ctx.body = await functions.getFunction(ctx.state.service(), params.app_slug!, params.function_slug!);
      },
    }),
    ...(['put', 'patch'] as const).map((method) =>
      defineRoute({
        ...base,
        method,
        path: ONE,
        operationId: method === 'put' ? 'functions_update' : 'functions_partial_update',
        summary: method === 'put' ? 'Update a function (a body from GET may be sent back whole)' : 'Update some fields of a function',
        description: `Writable: name, description, runtime, code, timeout, environment, is_active; omitted fields keep their values; read-only fields sent back unchanged are ignored. ${ADMIN}`,
        params: FunctionRef,
        body: FunctionUpdate,
        responses: { 200: FunctionView },
        async handler(ctx, { params, body }) {
          ctx.body = await functions.updateFunction(ctx.state.service(), params.app_slug!, params.function_slug!, body);
        },
      }),
    ),
    defineRoute({
      ...base,
      method: 'delete',
      path: ONE,
      operationId: 'functions_destroy',
      summary: 'Delete a function',
      description: `With its invocations, event subscriptions and system policies; its queued executions are dropped. ${ADMIN}`,
      params: FunctionRef,
      responses: { 204: Type.Null() },
      async handler(ctx, { params }) {
        await functions.deleteFunction(ctx.state.service(), params.app_slug!, params.function_slug!);
        ctx.status = 204;
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: `${ONE}invoke/`,
      operationId: 'functions_invoke',
      // An invocation writes its record and job row only, nothing the caches hold; what its code
      // changes through the SDK are requests of their own, each answered once cached.
      writes: 'data',
      summary: 'Invoke a function',
      description:
        "Runs the function as the caller (the SDK's requests carry the caller's rights) with `payload` as its event. 200 with the ended invocation (status `succeeded`, `failed` or `timed_out`: the function's own failure is not an HTTP error); 202 with the queued one when `async` is true or when it has not ended within its timeout. Any user of the site, and the app's policies on `function:{slug}`, action `execute`.",
      params: FunctionRef,
      body: InvokeBody,
      responses: { 200: InvocationView, 202: InvocationView },
      async handler(ctx, { params, body }) {
        const { invocation, done } = await functions.invokeFunction(ctx.state.service(), options.runtime, params.app_slug!, params.function_slug!, body);
        ctx.status = done ? 200 : 202;
        ctx.body = invocation;
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: `${ONE}invocations/`,
      operationId: 'functions_invocations_list',
      summary: 'List the invocations of a function (logs included)',
      description: 'Newest first; `status`, `trigger`, `page`, `page_size`. Administrators see every invocation; a user who may execute the function sees their own.',
      params: FunctionRef,
      query: InvocationListQuery,
      responses: { 200: paginated(InvocationView) },
      async handler(ctx, { params, query }) {
        sendPage(ctx, await functions.listInvocations(ctx.state.service(), params.app_slug!, params.function_slug!, query), options.publicUrl);
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: `${ONE}invocations/:invocation/`,
      operationId: 'functions_invocations_retrieve',
      summary: 'Get one invocation (by id or uuid)',
      description: 'As the list: administrators any, other users their own.',
      params: Type.Object({ app_slug: Type.String(), function_slug: Type.String(), invocation: Type.String() }),
      responses: { 200: InvocationView },
      async handler(ctx, { params }) {
        ctx.body = await functions.getInvocation(ctx.state.service(), params.app_slug!, params.function_slug!, params.invocation!);
      },
    }),
    // ---- events (spec Part 1 §6) ----
    defineRoute({
      ...eventBase,
      method: 'get',
      path: '/api/cloud/events/',
      operationId: 'events_list',
      summary: 'List the event types',
      description: 'Any signed-in user of the site.',
      responses: { 200: flagged(Type.Object({ events: Type.Array(Type.String()) })) },
      async handler(ctx) {
        await flagAnswer(ctx, 'Event types retrieved.', () => events.listEventTypes(ctx.state.service()));
      },
    }),
    defineRoute({
      ...eventBase,
      method: 'post',
      path: '/api/cloud/events/:event_name/subscribe/',
      operationId: 'events_subscribe',
      summary: 'Subscribe a function to an event',
      description: 'Body `{function_id}` (a function of any app of the site). 400: unknown event type (the message lists the valid ones), unknown function, already subscribed. Site administrators.',
      params: EventRef,
      body: SubscribeBody,
      responses: { 200: flagged(SubscriptionView) },
      async handler(ctx, { params, body }) {
        await flagAnswer(ctx, `Subscribed to ${params.event_name}.`, () => events.subscribe(ctx.state.service(), params.event_name!, body));
      },
    }),
    defineRoute({
      ...eventBase,
      method: 'post',
      path: '/api/cloud/events/:event_name/unsubscribe/',
      operationId: 'events_unsubscribe',
      summary: 'Unsubscribe a function from an event',
      description: 'Body `{function_id}`; 404 when no such subscription exists. Site administrators.',
      params: EventRef,
      body: SubscribeBody,
      responses: { 200: flagged(Type.Object({})) },
      async handler(ctx, { params, body }) {
        await flagAnswer(ctx, `Unsubscribed from ${params.event_name}.`, async () => (await events.unsubscribe(ctx.state.service(), params.event_name!, body), {}));
      },
    }),
    defineRoute({
      ...eventBase,
      method: 'get',
      path: '/api/apps/:app_slug/events/:event_name/',
      operationId: 'apps_events_retrieve',
      summary: "An event's subscribers among the app's functions",
      description: 'Any signed-in user of the site.',
      params: Type.Object({ app_slug: Type.String(), event_name: Type.String() }),
      responses: { 200: flagged(AppEventView) },
      async handler(ctx, { params }) {
        await flagAnswer(ctx, 'Event subscribers retrieved.', () => events.appEventSubscribers(ctx.state.service(), params.app_slug!, params.event_name!));
      },
    }),
  ];
}
