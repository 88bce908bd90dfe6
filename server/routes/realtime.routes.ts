// Change streams of a table's records over Server-Sent Events (issue 35, docs/realtime.md):
// GET …/datatables/{name}/data/changes/ (both path forms). The list's field conditions, `events`,
// `select`, and `Last-Event-ID` (or `since`) to resume; each event passes the subscriber's read
// policy. The stream lives in the process's RecordFeed (shared/realtime/feed.ts).
import { Type } from '@sinclair/typebox';
import { DomainError, fieldError } from '../../shared/errors.ts';
import { readsOf } from '../../shared/context.ts';
import { openTarget } from '../../shared/data/records/target.ts';
import { recordResource } from '../../shared/data/records/access.ts';
import { decide, planFor } from '../../shared/policies/hook.ts';
import { siteSchemaFor } from '../../shared/tenancy/site-access.ts';
import { recordTest } from '../../shared/realtime/match.ts';
import { FeedFullError, type EndReason, type RecordFeed } from '../../shared/realtime/feed.ts';
import type { ChangeOp } from '../../shared/realtime/changelog.ts';
import type { RouteDef } from '../http/registry.ts';
import { perTable, scopeOf } from './datatables.routes.ts';

const OPS: readonly ChangeOp[] = ['create', 'update', 'delete'];

const ChangesQuery = Type.Object(
  {
    events: Type.Optional(Type.String({ description: 'Comma list of create, update, delete (default: all three; `enter` and `leave` come with update).' })),
    select: Type.Optional(Type.String({ description: 'Comma list of the fields sent with each record (the key always comes).' })),
    since: Type.Optional(Type.String({ pattern: '^[0-9]{1,15}$', description: 'Resume after this event id (the `Last-Event-ID` header wins).' })),
  },
  { additionalProperties: true },
);

const list = (raw: string | undefined, name: string, allowed: ReadonlySet<string>, what: string): string[] | undefined => {
  if (raw === undefined || raw === '') return undefined;
  const items = [...new Set(raw.split(',').map((x) => x.trim()))];
  const unknown = items.filter((x) => !allowed.has(x));
  if (unknown.length) throw fieldError(name, `Unknown ${what}: ${unknown.join(', ')} (allowed: ${[...allowed].join(', ')}).`);
  return items;
};

export function realtimeRoutes(feed: RecordFeed | undefined): RouteDef[] {
  return perTable({
    method: 'get',
    suffix: 'data/changes/',
    operationId: 'records_changes',
    summary: 'Follow the changes of the records (Server-Sent Events)',
    description:
      'A `text/event-stream` of the changes committed to the table from now on, or after `Last-Event-ID` (or `since`): events `create` and `update` (with `record`, and `changed` on update), `delete` (the key only), `enter` and `leave` (an update moved the record into or out of what you may read, or of your conditions: `leave` carries the key only), `reset` (the position you resumed from is no longer kept: reload), `end` (why the stream ends). Each event\'s `id` is its position in the table\'s change log. Conditions as the list\'s (`field=value`, `field__op=value`) on the table\'s own fields; `events`, `select`. Only records your read policy admits. Any user of the site.',
    query: ChangesQuery,
    produces: { 200: 'text/event-stream' },
    responses: { 200: null },
    async handler(ctx, { params, query }) {
      if (!feed) throw new DomainError('SERVICE_UNAVAILABLE', 'Change streams are served by the platform server only.');
      const service = ctx.state.service();
      const t = await openTarget(service, scopeOf(params), params.name!, 'read');
      const { events, select, since, ...conditions } = query as Record<string, unknown> & { events?: string; select?: string; since?: string };
      const test = recordTest(conditions, t.columns);
      const kinds = new Set((list(events, 'events', new Set(OPS), 'event') ?? OPS) as ChangeOp[]);
      const fields = list(select, 'select', new Set(t.columns.keys()), 'field');
      const last = ctx.get('Last-Event-ID') || since;
      if (last !== undefined && last !== '' && !/^[0-9]{1,15}$/.test(last)) throw fieldError('Last-Event-ID', 'Expected an event id (a position) of this stream.');
      const policy = { site: t.site, app: t.app, kind: t.kind, columns: t.columns, pk: t.pk };
      const req = ctx.req;
      const res = ctx.res;
      const recheck = ctx.state.recheck;
      let subscriber: { close(): void } | undefined;
      try {
        subscriber = await feed.subscribe({
          site: t.site,
          table: t.row.src_physical ?? t.row.physical_table_name,
          view: t,
          hash: t.hash,
          em: readsOf(service),
          since: last ? Number(last) : 'now',
          events: kinds,
          select: fields,
          test,
          async readable(records) {
            const formula = await planFor(service, t.site, t.app, t.kind, 'read');
            if (typeof formula === 'boolean') return records.map(() => formula);
            return decide(service, t.site, t.app, t.kind, 'read', records.map((r) => recordResource(policy, r)));
          },
          async recheck(): Promise<EndReason | undefined> {
            try {
              await recheck?.();
            } catch {
              return 'credentials';
            }
            try {
              await siteSchemaFor(service, 'read', 'Record');
            } catch {
              return 'access';
            }
            return (await planFor(service, t.site, t.app, t.kind, 'read')) === false ? 'access' : undefined;
          },
          write(text) {
            if (!res.headersSent) {
              res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no' });
            }
            if (!res.destroyed) res.write(text);
            return res.writableLength;
          },
          close() {
            res.end();
          },
        });
      } catch (err) {
        if (err instanceof FeedFullError) throw new DomainError('RATE_LIMIT_EXCEEDED', err.message, { extra: { retry_after: 5 } });
        throw err;
      }
      // The stream is this response: Koa writes nothing more. A client gone ends the subscription.
      ctx.respond = false;
      req.socket.setTimeout(0);
      req.socket.setNoDelay(true);
      req.on('close', () => subscriber?.close());
      res.on('close', () => subscriber?.close());
    },
  }, 'records');
}
