// Platform events (spec Part 1 §6): the fixed event types, subscriptions of a site's functions to
// them, and their publication — only by the platform, only at the creation of a user of the site
// that owns the subscriptions (every such path goes through tenancy/tenant-users.service.ts
// insertSiteUser). PRE_USER_CREATE: the subscribers run at once, in parallel, before the user is
// saved; any failure aborts the creation (422 with the task records). POST_USER_CREATE: the
// subscribers' executions are queued in the transaction that saves the user (they run only if it
// commits), and their failures are logged. docs/functions.md "Events".
import { siteEmOf } from '../db/clusters.ts';
import type { EntityManager } from '@mikro-orm/postgresql';
import { validate } from '../common/validation.ts';
import { readsOf, type ServiceContext } from '../context.ts';
import { firstRow, iso, rows } from '../db/sql.ts';
import { DomainError, notFound } from '../errors.ts';
import { activeApp } from '../apps/lookup.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { authorizeSiteSubject, siteSchemaFor } from '../tenancy/site-access.ts';
import { EVENT_TYPES, SubscribeBody, type AppEventView, type EventType, type SubscriptionView } from './function.schemas.ts';
import { visibleFunctionIds } from './function.service.ts';
import { LEASE_SECONDS, MAX_ATTEMPTS, type FunctionRuntime } from './runtime.ts';
import { failedOutcome } from './sandbox/engine.ts';

const badRequest = (message: string) => new DomainError('BAD_REQUEST', message);

function eventType(name: string): EventType {
  if (!(EVENT_TYPES as readonly string[]).includes(name)) throw badRequest(`Unknown event type "${name}". Valid types: ${EVENT_TYPES.join(', ')}.`);
  return name as EventType;
}

export async function listEventTypes(ctx: ServiceContext): Promise<{ events: string[] }> {
  await siteSchemaFor(ctx, 'read', 'EventSubscription');
  return { events: [...EVENT_TYPES] };
}

interface SubscriptionRow {
  id: number;
  event: string;
  function_id: number;
  function_name: string;
  function_slug: string;
  app_id: number;
  app_name: string;
  app_slug: string;
  created_at: Date | string;
  updated_at: Date | string;
}

const subscriptionSelect = (q: string) => `
  SELECT s.id, s.event, s.function_id, f.name AS function_name, f.slug AS function_slug, a.id AS app_id, a.name AS app_name, a.slug AS app_slug, s.created_at, s.updated_at
    FROM ${q}.event_subscriptions s JOIN ${q}.functions f ON f.id = s.function_id JOIN ${q}.apps a ON a.id = f.app_id`;

const subscriptionView = (r: SubscriptionRow): SubscriptionView => ({
  id: Number(r.id),
  event: r.event,
  function: Number(r.function_id),
  function_name: r.function_name,
  function_slug: r.function_slug,
  app_name: r.app_name,
  app_slug: r.app_slug,
  created_at: iso(r.created_at),
  updated_at: iso(r.updated_at),
});

/** The function a subscription names, in the caller's site: 400 when it does not exist (§6). */
async function subscribable(ctx: ServiceContext, action: 'create' | 'delete', raw: unknown): Promise<{ schema: string; functionId: number }> {
  const schema = await siteSchemaFor(ctx, action, 'EventSubscription');
  const { function_id: functionId } = validate(SubscribeBody, raw);
  return { schema, functionId };
}

export async function subscribe(ctx: ServiceContext, event: string, raw: unknown): Promise<SubscriptionView> {
  const { schema, functionId } = await subscribable(ctx, 'create', raw);
  const type = eventType(event);
  const q = quotedSchema(schema);
  // A function the caller may neither read nor execute is missing to them.
  if (!(await visibleFunctionIds(ctx, schema, [functionId])).has(functionId)) throw badRequest(`Function with id ${functionId} does not exist.`);
  const created = await firstRow<{ id: number }>(ctx.em, `INSERT INTO ${q}.event_subscriptions (event, function_id) VALUES (?, ?) ON CONFLICT (event, function_id) DO NOTHING RETURNING id`, [type, functionId]);
  if (!created) throw badRequest(`Function ${functionId} is already subscribed to ${type}.`);
  return subscriptionView((await firstRow<SubscriptionRow>(ctx.em, `${subscriptionSelect(q)} WHERE s.id = ?`, [created.id]))!);
}

export async function unsubscribe(ctx: ServiceContext, event: string, raw: unknown): Promise<void> {
  const { schema, functionId } = await subscribable(ctx, 'delete', raw);
  const type = eventType(event);
  const missing = () => notFound({ message: `Function ${functionId} is not subscribed to ${type}.` });
  if (!(await visibleFunctionIds(ctx, schema, [functionId])).has(functionId)) throw missing();
  const gone = await firstRow(ctx.em, `DELETE FROM ${quotedSchema(schema)}.event_subscriptions WHERE event = ? AND function_id = ? RETURNING id`, [type, functionId]);
  if (!gone) throw missing();
}

/** The subscribers of one event among the app's functions (§6 `GET /api/apps/{app_slug}/events/{event_name}/`). */
export async function appEventSubscribers(ctx: ServiceContext, appSlug: string, event: string): Promise<AppEventView> {
  const schema = await siteSchemaFor(ctx, 'read', 'EventSubscription');
  const type = eventType(event);
  const app = await activeApp(readsOf(ctx), schema, appSlug);
  await authorizeSiteSubject(ctx, 'read', 'App', { schema, slug: app.slug });
  const all = await rows<SubscriptionRow>(readsOf(ctx), `${subscriptionSelect(quotedSchema(schema))} WHERE s.event = ? AND a.id = ? ORDER BY s.created_at, s.id`, [type, app.id]);
  // Only the functions the caller may read or execute: the others are missing to them.
  const visible = await visibleFunctionIds(ctx, schema, all.map((r) => Number(r.function_id)));
  const found = all.filter((r) => visible.has(Number(r.function_id)));
  return {
    event: type,
    app: { id: Number(app.id), name: app.name, slug: app.slug },
    total_subscribers: found.length,
    subscribers: found.map((r) => ({
      subscriber_id: Number(r.id),
      event: r.event,
      function_id: Number(r.function_id),
      function_name: r.function_name,
      function_slug: r.function_slug,
      app_id: Number(r.app_id),
      app_name: r.app_name,
      app_slug: r.app_slug,
      created_at: iso(r.created_at),
    })),
  };
}

// ---- publication ------------------------------------------------------------------------------

/** One subscriber's task (§6 rule 5); a dispatch that failed has `code: EXECUTION_ERROR` and its message. */
export interface EventTask {
  function_id: number;
  function_name: string;
  task_id: string;
  invocation_id: number;
  code?: 'EXECUTION_ERROR';
  message?: string;
}

export interface PublishResult {
  event: EventType;
  total_subscribers: number;
  tasks: EventTask[];
}

/** The user fields an event carries (§6: the id, username and e-mail; the names and flags too). */
export interface EventUser {
  id?: string;
  username: string;
  email: string;
  first_name: string;
  last_name: string;
  is_active: boolean;
  is_staff: boolean;
  is_superuser: boolean;
}

/** Publication of the user-creation events of a site; `invokedBy`: the site user whose action creates the user (null: none). */
export class UserEvents {
  private readonly runtime: FunctionRuntime;

  constructor(runtime: FunctionRuntime) {
    this.runtime = runtime;
  }

  /**
   * The invocation records of the event's active subscribers in `schema` and their job rows (one
   * statement; none subscribed: an empty list): their tasks. `claimedBy`: the jobs are this
   * runtime's already, to run now, with no retry left (a PRE event's, whose request cannot wait
   * for one: if this process dies, the next one to claim them records them failed); else queued.
   */
  private async record(em: EntityManager, schema: string, event: EventType, user: EventUser, invokedBy: string | null, claimedBy?: string): Promise<{ task: EventTask; jobId: number }[]> {
    const q = quotedSchema(schema);
    const claim = claimedBy ? [claimedBy, LEASE_SECONDS, MAX_ATTEMPTS] : [null, null, 0];
    const queued = await rows<{ id: string; uuid: string; function_id: number; function_name: string; job_id: string }>(
      await siteEmOf(em, schema), // the site's cluster holds its functions and its queue rows (db/clusters.ts)
      `WITH subs AS (SELECT f.id, f.name FROM ${q}.event_subscriptions s JOIN ${q}.functions f ON f.id = s.function_id JOIN ${q}.apps a ON a.id = f.app_id
                      WHERE s.event = ? AND f.is_active AND a.is_active),
            inv AS (INSERT INTO ${q}.function_invocations (function_id, trigger, event, payload, invoked_by)
                    SELECT id, 'event', ?, ?::jsonb, ? FROM subs RETURNING id, uuid, function_id),
            job AS (INSERT INTO public.function_jobs (site_schema, invocation_id, locked_by, locked_until, attempts)
                    SELECT ?, id, ?::text, now() + make_interval(secs => ?::int), ?::int FROM inv RETURNING id, invocation_id)
       SELECT inv.id, inv.uuid, inv.function_id, subs.name AS function_name, job.id AS job_id
         FROM inv JOIN subs ON subs.id = inv.function_id JOIN job ON job.invocation_id = inv.id`,
      [event, event, JSON.stringify({ event, site: schema, user }), invokedBy, schema, ...claim],
    );
    return queued.map((inv) => ({
      task: { function_id: Number(inv.function_id), function_name: inv.function_name, task_id: inv.uuid, invocation_id: Number(inv.id) },
      jobId: Number(inv.job_id),
    }));
  }

  /**
   * PRE_USER_CREATE: each active subscriber's invocation recorded and run now, all in parallel;
   * resolves when all succeeded, else throws 422 BUSINESS_LOGIC_ERROR naming the failures, with
   * the task records in `data` (nothing of the user exists yet). One query when none subscribes.
   * The records are written outside any transaction of the caller's: they stay, with their logs,
   * when the creation is aborted.
   */
  async beforeCreate(schema: string, user: EventUser, invokedBy: string | null): Promise<PublishResult> {
    const claimed = await this.record(this.runtime.freshEm(), schema, 'PRE_USER_CREATE', user, invokedBy, this.runtime.owner);
    const tasks = claimed.map((c) => c.task);
    await Promise.all(
      claimed.map(async ({ task, jobId }) => {
        const outcome = await this.runtime.runClaimed(schema, task.invocation_id, jobId).catch((err: Error) => failedOutcome('SandboxError', err.message));
        if (outcome?.status !== 'succeeded') {
          task.code = 'EXECUTION_ERROR';
          task.message = outcome?.error?.message ?? 'The execution did not run.';
        }
      }),
    );
    const result: PublishResult = { event: 'PRE_USER_CREATE', total_subscribers: tasks.length, tasks };
    const failed = tasks.filter((t) => t.code);
    if (failed.length) {
      throw new DomainError('BUSINESS_LOGIC_ERROR', `User creation was stopped by PRE_USER_CREATE: ${failed.map((t) => `function "${t.function_name}": ${t.message}`).join('; ')}`, {
        data: { ...result },
      });
    }
    return result;
  }

  /**
   * POST_USER_CREATE: the active subscribers' executions queued in `em`'s transaction (the one
   * saving the user; the job rows' notification wakes the queue at its commit); they run as
   * `invokedBy`, else as the new user.
   */
  async afterCreate(em: EntityManager, schema: string, user: EventUser & { id: string }, invokedBy: string | null): Promise<PublishResult> {
    const tasks = (await this.record(em, schema, 'POST_USER_CREATE', user, invokedBy ?? user.id)).map((c) => c.task);
    return { event: 'POST_USER_CREATE', total_subscribers: tasks.length, tasks };
  }
}
