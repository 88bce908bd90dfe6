// Change streams of tables' records (issue 35, docs/realtime.md), in two forms over one
// implementation (changeStream below, on the process's RecordFeed: shared/realtime/feed.ts):
// - Server-Sent Events: GET …/datatables/{name}/data/changes/ (both path forms): one table, the
//   list's field conditions, `events`, `select`, `Last-Event-ID` (or `since`) to resume;
// - a WebSocket at GET /api/realtime/ that multiplexes subscriptions to several tables over one
//   connection (`subscribe` / `unsubscribe` messages), for browsers that need many.
// Every event passes the subscriber's read policy; credentials are checked again every second.
import { Type } from '@sinclair/typebox';
import type { Duplex } from 'node:stream';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import { DomainError, fieldError } from '../../shared/errors.ts';
import { actorUuid, readsOf, type ServiceContext } from '../../shared/context.ts';
import { openTarget } from '../../shared/data/records/target.ts';
import { recordResource } from '../../shared/data/records/access.ts';
import type { TableScope } from '../../shared/data/datatable.queries.ts';
import { decide, planFor } from '../../shared/policies/hook.ts';
import { siteSchemaFor } from '../../shared/tenancy/site-access.ts';
import { recordTest } from '../../shared/realtime/match.ts';
import { FeedFullError, type EndReason, type EventSink, type RecordFeed, type StreamEvent, type SubscriberSpec } from '../../shared/realtime/feed.ts';
import { recordsSource, type ChangeOp } from '../../shared/realtime/changelog.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';
import type { AppContext } from '../http/types.ts';
import { perTable, scopeOf } from './datatables.routes.ts';
import { BucketRef } from '../../shared/storage/bucket.schemas.ts';
import { objectsBucket, objectView } from '../../shared/storage/object.service.ts';
import { objectsAllowed, type ObjectRow } from '../../shared/storage/access.ts';
import { quotedSchema } from '../../shared/tenancy/schema.ts';
import type { RecordRow } from '../../shared/data/records/target.ts';

const OPS: readonly ChangeOp[] = ['create', 'update', 'delete'];
const POSITION = /^[0-9]{1,15}$/;

const ChangesQuery = Type.Object(
  {
    events: Type.Optional(Type.String({ description: 'Comma list of create, update, delete (default: all three; `enter` and `leave` come with update).' })),
    select: Type.Optional(Type.String({ description: 'Comma list of the fields sent with each record (the key always comes).' })),
    since: Type.Optional(Type.String({ pattern: POSITION.source, description: 'Resume after this event id (the `Last-Event-ID` header wins).' })),
  },
  { additionalProperties: true },
);

const listOf = (raw: unknown, name: string, allowed: ReadonlySet<string>, what: string): string[] | undefined => {
  if (raw === undefined || raw === '') return undefined;
  const items = typeof raw === 'string' ? raw.split(',').map((x) => x.trim()) : Array.isArray(raw) && raw.every((x) => typeof x === 'string') ? (raw as string[]) : undefined;
  if (!items) throw fieldError(name, `Expected a comma list of ${what}s.`);
  const unknown = [...new Set(items)].filter((x) => !allowed.has(x));
  if (unknown.length) throw fieldError(name, `Unknown ${what}: ${unknown.join(', ')} (allowed: ${[...allowed].join(', ')}).`);
  return [...new Set(items)];
};

/** The event kinds asked for (`events`: a comma list or an array; default all). */
const kindsOf = (raw: unknown): Set<ChangeOp> => new Set((listOf(raw, 'events', new Set(OPS), 'event') ?? OPS) as ChangeOp[]);

/** What every subscription asks: the event kinds, and where to resume. */
interface ResumeRequest {
  events?: unknown;
  /** An event id to resume after (a position), or nothing: from now. */
  since?: string;
  /** The name the resume position came under (`Last-Event-ID`, `since`), for its 400. */
  sinceName: string;
}

/** Where an SSE request resumes: `Last-Event-ID` (EventSource sends it on reconnecting), else `since`. */
const resumeOf = (ctx: AppContext, since: string | undefined): Pick<ResumeRequest, 'since' | 'sinceName'> => {
  const header = ctx.get('Last-Event-ID');
  return header ? { since: header, sinceName: 'Last-Event-ID' } : { since, sinceName: 'since' };
};

/** What a subscription to a table asks: the table, its conditions, the fields. */
interface StreamRequest extends ResumeRequest {
  scope: TableScope;
  table: string;
  /** The list's conditions (field=value, field__op=value). */
  conditions: Record<string, unknown>;
  select?: unknown;
}

/**
 * Opens one change stream for the request's actor: the table (404s and 403s as the records
 * API's), the conditions (400 as the list's), the read policy, the credentials check; the events
 * go to `sink`. Shared by the SSE route and the WebSocket's subscriptions.
 */
async function changeStream(feed: RecordFeed, ctx: AppContext, r: StreamRequest, sink: EventSink): Promise<{ close(): void }> {
  const service = ctx.state.service();
  const t = await openTarget(service, r.scope, r.table, 'read');
  const test = recordTest(r.conditions, t.columns);
  const kinds = kindsOf(r.events);
  const fields = listOf(r.select, 'select', new Set(t.columns.keys()), 'field');
  const select = fields && [...new Set([...t.pk, ...fields])];
  const since = positionOf(r.since, r.sinceName);
  const policy = { site: t.site, app: t.app, kind: t.kind, columns: t.columns, pk: t.pk };
  return subscribed(feed, {
    site: t.site,
    table: t.row.src_physical ?? t.row.physical_table_name,
    source: recordsSource(t),
    hash: t.hash,
    keyOf: (x) => (t.pk.length === 1 ? x[t.pk[0]!] : t.pk.map((k) => x[k])),
    em: readsOf(service),
    since,
    events: kinds,
    select,
    test,
    async readable(records) {
      const formula = await planFor(service, t.site, t.app, t.kind, 'read');
      if (typeof formula === 'boolean') return records.map(() => formula);
      return decide(service, t.site, t.app, t.kind, 'read', records.map((x) => recordResource(policy, x)));
    },
    principal: actorUuid(service) ?? 'system',
    recheck: recheckOf(ctx, async () => {
      await siteSchemaFor(service, 'read', 'Record');
      return (await planFor(service, t.site, t.app, t.kind, 'read')) !== false;
    }),
    ...credentialsOf(ctx, service),
    sink,
  });
}

/** A resume position (an event id), or from now; 400 naming where it came from. */
function positionOf(raw: string | undefined, name: string): number | 'now' {
  if (raw === undefined || raw === '') return 'now';
  if (!POSITION.test(raw)) throw fieldError(name, 'Expected an event id (a position) of this stream.');
  return Number(raw);
}

/** The feed's subscription; a full feed is a 429. */
async function subscribed(feed: RecordFeed, spec: SubscriberSpec): Promise<{ close(): void }> {
  try {
    return await feed.subscribe(spec);
  } catch (err) {
    if (err instanceof FeedFullError) throw new DomainError('RATE_LIMIT_EXCEEDED', err.message, { extra: { retry_after: 5 } });
    throw err;
  }
}

/** Why a stream must end now, if it must: the request's credentials (auth.ts recheck), then `allowed` (false or a throw: access). */
const recheckOf =
  (ctx: AppContext, allowed: () => Promise<boolean>) =>
  async (): Promise<EndReason | undefined> => {
    try {
      await ctx.state.recheck?.();
    } catch {
      return 'credentials';
    }
    return (await allowed().catch(() => false)) ? undefined : 'access';
  };

/** Who a stream's rechecks follow (their changes end it at once) and when its credentials expire. */
const credentialsOf = (ctx: AppContext, service: ServiceContext): { user?: string; expires?: number } => ({ user: actorUuid(service) ?? undefined, expires: ctx.state.expires });

/** Answers the request with a Server-Sent Events stream that `open` subscribes: Koa writes nothing more; a client gone ends the subscription. */
async function serveEvents(ctx: AppContext, open: (sink: EventSink) => Promise<{ close(): void }>): Promise<void> {
  const res = ctx.res;
  const sub = await open(sseSink(res));
  ctx.respond = false;
  ctx.req.socket.setTimeout(0);
  ctx.req.socket.setNoDelay(true);
  res.on('close', () => sub.close());
}

/** What a subscription to a bucket's objects asks. */
interface ObjectStreamRequest extends ResumeRequest {
  app: string;
  bucket: string;
  /** Objects whose key starts with this only. */
  prefix?: unknown;
}

/**
 * Opens one stream of a bucket's objects (their records: created, changed, deleted; the bytes
 * are not in it): the bucket (404s and 403s as the objects API's), each event through the
 * objects' read rules (visibility and the app's policies on `storage:{bucket}`), shown as the
 * objects API shows an object, keyed by the object's id (a move keeps it).
 */
async function objectStream(feed: RecordFeed, ctx: AppContext, r: ObjectStreamRequest, sink: EventSink): Promise<{ close(): void }> {
  const service = ctx.state.service();
  const b = await objectsBucket(service, r.app, r.bucket, 'read');
  if (r.prefix !== undefined && typeof r.prefix !== 'string') throw fieldError('prefix', 'Expected the beginning of a key.');
  const prefix = r.prefix || undefined;
  const kinds = kindsOf(r.events);
  const bucketId = Number(b.bucket.id);
  return subscribed(feed, {
    site: b.schema,
    table: 'storage_objects',
    // The blob's key stays inside: it is no one's business.
    source: { table: `${quotedSchema(b.schema)}.storage_objects`, recordSql: (alias) => `(to_jsonb(${alias}.*) - 'blob_key')`, plain: (x) => x },
    since: positionOf(r.since, r.sinceName),
    events: kinds,
    test: (o) => Number(o.bucket_id) === bucketId && (prefix === undefined || String(o.path).startsWith(prefix)),
    readable: (rows) => objectsAllowed(service, b, 'read', rows as unknown as ObjectRow[]),
    present: (o) => objectView(b, o as unknown as ObjectRow) as unknown as RecordRow,
    keyOf: (o) => Number(o.id),
    // The objects' rules depend on the bucket too (its visibility, its policies).
    principal: `${actorUuid(service) ?? 'system'}|${bucketId}`,
    recheck: recheckOf(ctx, async () => Boolean(await siteSchemaFor(service, 'read', 'StorageObject'))),
    ...credentialsOf(ctx, service),
    em: readsOf(service),
    sink,
  });
}

/** A Server-Sent Events response as an event sink. */
function sseSink(res: ServerResponse): EventSink {
  const write = (text: string): number => {
    if (!res.headersSent) res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no' });
    if (!res.destroyed) res.write(text);
    return res.writableLength;
  };
  const event = (e: StreamEvent) => `id: ${e.id}\nevent: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`;
  return {
    opened: () => write('retry: 2000\n\n'),
    events: (batch) => write(batch.map(event).join('')),
    // A bare `id:` line moves EventSource's Last-Event-ID without dispatching anything.
    idle: (id) => write(id === undefined ? ': ping\n\n' : `: ping\nid: ${id}\n\n`),
    reset: (id, message) => write(event({ id, event: 'reset', data: { message } })),
    ended: (reason, message) => void write(`event: end\ndata: ${JSON.stringify({ reason, message })}\n\n`),
    close: () => void res.end(),
  };
}

/** The upgrade of a WebSocket request, kept on the request while it goes through the API's pipeline (server/main.ts). */
export const UPGRADE = Symbol('platform.websocket-upgrade');
export type UpgradeRequest = IncomingMessage & { [UPGRADE]?: { socket: Duplex; head: Buffer } };

/** Subscriptions one WebSocket may hold at once. */
const MAX_PER_SOCKET = 100;
/** The largest message a client may send. */
const MAX_MESSAGE = 64 * 1024;

type ClientMessage =
  | { type: 'subscribe'; id: string; app: string; table?: string; bucket?: string; datasource?: string; filter?: Record<string, unknown>; prefix?: unknown; events?: unknown; select?: unknown; since?: string }
  | { type: 'unsubscribe'; id: string };

/** One WebSocket: its subscriptions by the client's ids, each an event sink of its own over the socket. */
function serveSocket(feed: RecordFeed, ctx: AppContext, ws: WebSocket): void {
  const subscriptions = new Map<string, { close(): void } | null>();
  const send = (message: Record<string, unknown>): number => {
    if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(message));
    return ws.bufferedAmount;
  };
  const sinkOf = (id: string): EventSink => ({
    opened: (position) => send({ type: 'subscribed', id, position: String(position) }),
    events: (batch) => send({ type: 'events', id, events: batch.map((e) => ({ id: String(e.id), event: e.event, data: e.data })) }),
    idle: (position) => (position === undefined ? ws.bufferedAmount : send({ type: 'position', id, position: String(position) })),
    reset: (position, message) => send({ type: 'events', id, events: [{ id: String(position), event: 'reset', data: { message } }] }),
    ended: (reason, message) => void send({ type: 'end', id, reason, message }),
    close: () => void subscriptions.delete(id),
  });
  const refuse = (id: unknown, err: unknown) => {
    const domain = err instanceof DomainError ? err : new DomainError('INTERNAL_ERROR', 'The subscription failed.');
    send({ type: 'error', id: typeof id === 'string' ? id : null, status: domain.status, body: domain.toBody() });
  };
  const onMessage = async (raw: string) => {
    let m: ClientMessage;
    try {
      m = JSON.parse(raw) as ClientMessage;
    } catch {
      return refuse(null, new DomainError('BAD_REQUEST', 'Each message is a JSON object: {"type": "subscribe" | "unsubscribe", "id": …}.'));
    }
    if (typeof m !== 'object' || m === null || typeof m.id !== 'string' || m.id === '' || m.id.length > 100) return refuse(null, fieldError('id', 'Every message names its subscription: a non-empty "id" string of at most 100 characters.'));
    if (m.type === 'unsubscribe') {
      subscriptions.get(m.id)?.close();
      subscriptions.delete(m.id);
      return send({ type: 'unsubscribed', id: m.id });
    }
    if (m.type !== 'subscribe') return refuse((m as { id: string }).id, fieldError('type', 'Expected "subscribe" or "unsubscribe".'));
    if (subscriptions.has(m.id)) return refuse(m.id, fieldError('id', `Subscription "${m.id}" exists: unsubscribe it first.`));
    if (subscriptions.size >= MAX_PER_SOCKET) return refuse(m.id, new DomainError('RATE_LIMIT_EXCEEDED', `A WebSocket holds at most ${MAX_PER_SOCKET} subscriptions.`));
    if (typeof m.app !== 'string' || (typeof m.table === 'string') === (typeof m.bucket === 'string')) return refuse(m.id, fieldError('table', 'Name the app, and a table or a bucket: {"app": …, "table": …} or {"app": …, "bucket": …}.'));
    if (m.filter !== undefined && (typeof m.filter !== 'object' || m.filter === null || Array.isArray(m.filter))) return refuse(m.id, fieldError('filter', 'Expected an object of conditions (field or field__op → value).'));
    subscriptions.set(m.id, null); // taken while it opens
    try {
      const scope = { app_slug: m.app, ...(typeof m.datasource === 'string' ? { ds: m.datasource } : {}) } as TableScope;
      const sub = m.bucket !== undefined
        ? await objectStream(feed, ctx, { app: m.app, bucket: m.bucket, prefix: m.prefix, events: m.events, since: m.since, sinceName: 'since' }, sinkOf(m.id))
        : await changeStream(feed, ctx, { scope, table: m.table!, conditions: m.filter ?? {}, events: m.events, select: m.select, since: m.since, sinceName: 'since' }, sinkOf(m.id));
      if (subscriptions.has(m.id) && ws.readyState === ws.OPEN) subscriptions.set(m.id, sub);
      else sub.close(); // unsubscribed, or the socket closed, while it opened
    } catch (err) {
      subscriptions.delete(m.id);
      refuse(m.id, err);
    }
  };
  ws.on('message', (data, binary) => {
    if (binary) return refuse(null, new DomainError('BAD_REQUEST', 'Messages are JSON text.'));
    void onMessage(String(data));
  });
  // The server shuts down: the socket closes (1001 Going Away), its client reconnects elsewhere.
  const unregister = feed.onClose(() => ws.close(1001, 'The server is shutting down.'));
  ws.on('close', () => {
    unregister();
    for (const sub of subscriptions.values()) sub?.close();
    subscriptions.clear();
  });
}

export function realtimeRoutes(feed: RecordFeed | undefined): RouteDef[] {
  const available = (): RecordFeed => {
    if (!feed) throw new DomainError('SERVICE_UNAVAILABLE', 'Change streams are served by the platform server only.');
    return feed;
  };
  const sockets = new WebSocketServer({ noServer: true, maxPayload: MAX_MESSAGE });
  return [
    ...perTable({
      method: 'get',
      suffix: 'data/changes/',
      operationId: 'records_changes',
      summary: 'Follow the changes of the records (Server-Sent Events)',
      description:
        "A `text/event-stream` of the changes committed to the table from now on, or after `Last-Event-ID` (or `since`): events `create` and `update` (with `record`, and `changed` on update), `delete` (the key only), `enter` and `leave` (an update moved the record into or out of what you may read, or of your conditions: `leave` carries the key only), `reset` (the position you resumed from is no longer kept: reload), `end` (why the stream ends). Each event's `id` is its position in the table's change log. Conditions as the list's (`field=value`, `field__op=value`) on the table's own fields; `events`, `select`. Only records your read policy admits. Any user of the site. docs/realtime.md.",
      query: ChangesQuery,
      produces: { 200: 'text/event-stream' },
      responses: { 200: null },
      async handler(ctx, { params, query }) {
        const { events, select, since, ...conditions } = query as Record<string, unknown> & { since?: string };
        await serveEvents(ctx, (sink) => changeStream(available(), ctx, { scope: scopeOf(params), table: params.name!, conditions, events, select, ...resumeOf(ctx, since) }, sink));
      },
    }, 'records'),
    defineRoute({
      method: 'get',
      path: '/api/apps/:app_slug/storage/buckets/:bucket/objects/changes/',
      operationId: 'storage_objects_changes',
      summary: "Follow the changes of a bucket's objects (Server-Sent Events)",
      description:
        "A `text/event-stream` of the bucket's objects as they are created (`create`), changed (`update`: new bytes, metadata, visibility, a move; with `changed`) and deleted (`delete`), from now on or after `Last-Event-ID` (or `since`); `enter`/`leave` when a change makes an object readable to you or not. `record` is the object as the objects API shows it; `key` is its id (a move keeps it). `prefix` keeps the objects whose key starts with it; `events` as on records. Only the objects you may read. docs/realtime.md.",
      auth: 'user',
      scope: 'tenant',
      tags: ['storage'],
      params: BucketRef,
      query: Type.Object({ prefix: Type.Optional(Type.String({ description: 'Objects whose key starts with this only.' })), events: ChangesQuery.properties.events, since: ChangesQuery.properties.since }, { additionalProperties: false }),
      produces: { 200: 'text/event-stream' },
      responses: { 200: null },
      async handler(ctx, { params, query }) {
        const q = query as { prefix?: string; events?: string; since?: string };
        await serveEvents(ctx, (sink) => objectStream(available(), ctx, { app: params.app_slug!, bucket: params.bucket!, prefix: q.prefix, events: q.events, ...resumeOf(ctx, q.since) }, sink));
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/realtime/',
      operationId: 'realtime_socket',
      summary: 'Change streams of several tables over one WebSocket',
      description:
        'Upgrade to a WebSocket (`Connection: Upgrade`, `Upgrade: websocket`), authenticated like any request (a bearer token, or the browser session: then the `Origin` must be the site\'s own). Send `{"type": "subscribe", "id": "s1", "app": "crm", "table": "contacts", "datasource"?: …, "filter"?: {"status": "active", "age__gte": 30}, "events"?: "create,update", "select"?: "a,b", "since"?: "4711"}`; receive `{"type": "subscribed", "id", "position"}`, then `{"type": "events", "id", "events": [{"id", "event", "data"}]}` as on the SSE route, `{"type": "position", "id", "position"}` when your position moved past changes you were not sent, `{"type": "end", "id", "reason", "message"}`, or `{"type": "error", "id", "status", "body"}` (the error envelope). `{"type": "unsubscribe", "id"}` ends one. At most 100 subscriptions per socket. Without an upgrade: 426. docs/realtime.md.',
      auth: 'user',
      scope: 'tenant',
      tags: ['records'],
      responses: { 101: null },
      handler(ctx) {
        const upgrade = (ctx.req as UpgradeRequest)[UPGRADE];
        if (!upgrade) throw new DomainError('UPGRADE_REQUIRED', 'This address takes WebSocket connections only (Upgrade: websocket).');
        const f = available();
        // A cookie is sent by the browser whatever page opened the socket: the page must be the site's own.
        if (ctx.state.session && !sameOrigin(ctx)) throw new DomainError('PERMISSION_DENIED', 'A WebSocket signed in by the session cookie must come from a page of this site (Origin).');
        ctx.respond = false;
        (ctx.res as ServerResponse).detachSocket(upgrade.socket as never);
        sockets.handleUpgrade(ctx.req, upgrade.socket, upgrade.head, (ws) => serveSocket(f, ctx, ws));
      },
    }),
  ];
}

/** The request's Origin is the host it was sent to. */
function sameOrigin(ctx: AppContext): boolean {
  const origin = ctx.get('Origin');
  if (!origin) return false;
  try {
    return new URL(origin).host === ctx.host;
  } catch {
    return false;
  }
}
