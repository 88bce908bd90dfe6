// Change streams (issue 35): GET …/datatables/{name}/data/changes/ over Server-Sent Events. Every
// event of a series of writes exactly once and in order, across a reconnect (Last-Event-ID);
// the subscriber's read policy on every event (enter/leave when a write moves a record across
// it); the list's conditions; another site's user, an anonymous client and a revoked token get
// nothing; a bulk write of 10,000 rows arrives as 10,000 events; a pruned position answers reset.
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { pruneChangeLogs } from '../../shared/realtime/changelog.ts';
import { RECORD_CHANGES_CHUNK } from '../../shared/tenancy/migrations.ts';
import { createTables, fixture, seedCrm } from './crm.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { startServer } from '../main.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
let storageDir = '';
let adminUuid = '';
let physical = '';
const tok: Record<string, string> = {};

const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);
const on = (method: string, path: string, body?: unknown, who = 'adminA') => s.api(method, path, { host: a.domain, token: tok[who], body });
const C = '/api/apps/crm/datatables/companies/data/';
const CHANGES = `${C}changes/`;

interface Event {
  id?: string;
  event: string;
  data: any;
}

/** An SSE client: the events as they come, the status, and a way to stop. */
class Stream {
  readonly events: Event[] = [];
  status = 0;
  headers: http.IncomingHttpHeaders = {};
  ended = false;
  text = '';
  private req: http.ClientRequest;
  private waiters: (() => void)[] = [];

  constructor(path: string, o: { host: string; token?: string; lastEventId?: string; paused?: boolean; base?: string }) {
    const headers: Record<string, string> = { Host: o.host, Accept: 'text/event-stream' };
    if (o.token) headers.Authorization = `Bearer ${o.token}`;
    if (o.lastEventId) headers['Last-Event-ID'] = o.lastEventId;
    this.req = http.request(new URL(path, o.base ?? s.url), { headers, agent: false }, (res) => {
      this.status = res.statusCode ?? 0;
      this.headers = res.headers;
      if (o.paused) {
        res.pause();
        this.notify();
        return;
      }
      let buffer = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        this.text += chunk;
        buffer += chunk;
        let cut;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const e: Partial<Event> = {};
          for (const line of block.split('\n')) {
            if (line.startsWith('id: ')) e.id = line.slice(4);
            else if (line.startsWith('event: ')) e.event = line.slice(7);
            else if (line.startsWith('data: ')) e.data = JSON.parse(line.slice(6));
          }
          if (e.event) this.events.push(e as Event);
        }
        this.notify();
      });
      res.on('end', () => {
        this.ended = true;
        this.notify();
      });
    });
    this.req.on('error', () => {
      this.ended = true;
      this.notify();
    });
    this.req.end();
  }

  private notify(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Waits until `done()` holds (or fails after `ms`). */
  async until(done: () => boolean, ms = 10_000, what = 'events'): Promise<void> {
    const deadline = Date.now() + ms;
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: status ${this.status}, ${this.events.length} events, ${this.text.slice(0, 500)}`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 100);
      });
    }
  }

  /** The stream is open (its first line came). */
  open(): Promise<void> {
    return this.until(() => this.status !== 0 && (this.text.includes('retry:') || this.ended || this.status !== 200), 10_000, 'the stream');
  }

  close(): void {
    this.req.destroy();
  }

  of(kind: string): Event[] {
    return this.events.filter((e) => e.event === kind);
  }
}

const company = (id: number, extra: Record<string, unknown> = {}) => ({ id, name: `Company ${id}`, employees: 10, country: 'US', ...extra });
const streams: Stream[] = [];
const stream = (path: string, o: ConstructorParameters<typeof Stream>[1]) => {
  const x = new Stream(path, o);
  streams.push(x);
  return x;
};

test.before(async () => {
  storageDir = await mkdtemp(path.join(os.tmpdir(), 'realtime-storage-'));
  s = await startTestServer({ REALTIME_MAX_BUFFERED_BYTES: String(256 * 1024), STORAGE_DIR: storageDir });
  ({ a, b, adminUuid } = await twoSitesWithUsers(s, tok));
  await seedCrm(s, [a, b]);
  await createTables(on, [['main', 'companies', fixture('companies.json')]]);
  [{ physical }] = await sql(`SELECT physical_table_name AS physical FROM "${a.schema}".data_tables WHERE name = 'companies'`);
  await createTables((m, p, body) => s.api(m, p, { host: b.domain, token: tok.adminB, body }), [['main', 'companies', fixture('companies.json')]]);
  await sql(`UPDATE "${a.schema}".users SET attributes = '{"country": "US"}' WHERE username = 'pleb'`);
});
test.after.always(async () => {
  for (const x of streams) x.close();
  await s?.close();
  if (storageDir) await rm(storageDir, { recursive: true, force: true });
});

test.serial('every write arrives once, in order, with its record; the list\'s conditions and `events` apply; a reconnect with Last-Event-ID resumes exactly after it', async (t) => {
  const all = stream(CHANGES, { host: a.domain, token: tok.adminA });
  const big = stream(`${CHANGES}?employees__gte=100&events=create,delete`, { host: a.domain, token: tok.adminA });
  await all.open();
  await big.open();
  t.is(all.status, 200);
  t.regex(String(all.headers['content-type']), /^text\/event-stream/);
  t.is((await on('POST', C, company(1))).status, 201);
  t.is((await on('POST', C, [company(2, { employees: 500 }), company(3)])).status, 201);
  t.is((await on('PATCH', `${C}1/`, { employees: 11 })).status, 200);
  t.is((await on('DELETE', `${C}2/`)).status, 204);
  await all.until(() => all.events.length >= 5);
  t.deepEqual(all.events.map((e) => [e.event, e.data.key]), [['create', 1], ['create', 2], ['create', 3], ['update', 1], ['delete', 2]]);
  const ids = all.events.map((e) => Number(e.id));
  t.deepEqual(ids, [...ids].sort((x, y) => x - y), 'positions increase');
  t.is(new Set(ids).size, ids.length);
  t.like(all.events[0]!.data.record, { id: 1, name: 'Company 1', employees: 10, country: 'US', is_public: false });
  t.deepEqual(all.events[3]!.data.changed, ['employees']);
  t.is(all.events[3]!.data.record.employees, 11);
  t.is(all.events[4]!.data.record, undefined, 'a delete carries the key only');
  // Each write names who made it: one statement (create one, patch one, delete one) or a transaction (several).
  t.deepEqual(all.events.map((e) => e.data.actor), Array(5).fill(adminUuid));
  await big.until(() => big.events.length >= 2);
  t.deepEqual(big.events.map((e) => [e.event, e.data.key]), [['create', 2], ['delete', 2]]);

  // A reconnect after the third event gets the fourth and fifth, then what follows: nothing twice.
  const resumed = stream(CHANGES, { host: a.domain, token: tok.adminA, lastEventId: all.events[2]!.id });
  await resumed.open();
  t.is((await on('POST', C, company(4))).status, 201);
  await resumed.until(() => resumed.events.length >= 3);
  await all.until(() => all.events.length >= 6);
  t.deepEqual(resumed.events.map((e) => e.id), [all.events[3]!.id, all.events[4]!.id, all.events[5]!.id]);
  t.deepEqual(resumed.events.map((e) => e.event), ['update', 'delete', 'create']);
  // `since` does the same as the header.
  const since = stream(`${CHANGES}?since=${all.events[3]!.id}`, { host: a.domain, token: tok.adminA });
  await since.until(() => since.events.length >= 2);
  t.deepEqual(since.events.map((e) => e.event), ['delete', 'create']);
  for (const x of [all, big, resumed, since]) x.close();
  // The setting is each transaction's own: writes after them on the same pool name no one.
  const last = Number(since.events.at(-1)!.id);
  for (let i = 0; i < 5; i++) await sql(`UPDATE "${a.schema}".${physical} SET employees = employees WHERE id = 1`);
  t.deepEqual(await sql(`SELECT DISTINCT actor FROM "${a.schema}".record_changes WHERE tbl = ? AND seq * ? > ?`, [physical, RECORD_CHANGES_CHUNK, last]), [{ actor: null }]);
});

test.serial('the read policy decides each event: enter and leave when a write moves a record across it, leave without its values', async (t) => {
  const put = await on('PUT', '/api/apps/crm/policies/', {
    resourcePolicy: {
      resource: 'datatable:companies',
      version: 'default',
      rules: [
        { actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['admin'] },
        { actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['user'], condition: { match: { expr: 'R.attr.country == P.attr.country' } } },
      ],
    },
  });
  t.true(put.status === 200 || put.status === 201, put.text);
  const pleb = stream(CHANGES, { host: a.domain, token: tok.pleb });
  await pleb.open();
  await on('POST', C, [company(10, { country: 'FR' }), company(11)]);
  await on('PATCH', `${C}11/`, { country: 'DE', name: 'Secret name' });
  await on('PATCH', `${C}10/`, { country: 'US' });
  await on('PATCH', `${C}10/`, { employees: 12 });
  await on('DELETE', `${C}10/`);
  await pleb.until(() => pleb.events.length >= 5);
  t.deepEqual(pleb.events.map((e) => [e.event, e.data.key]), [['create', 11], ['leave', 11], ['enter', 10], ['update', 10], ['delete', 10]]);
  t.is(pleb.events[1]!.data.record, undefined, 'leave: the key only');
  t.false(pleb.text.includes('Secret name'));
  t.false(pleb.text.includes('FR'), 'nothing of a record it may not read');
  t.is(pleb.events[2]!.data.record.country, 'US');
  pleb.close();
});

test.serial('another site\'s user, an anonymous client and another site\'s table get nothing; bad conditions are a 400 naming them', async (t) => {
  const foreign = stream(CHANGES, { host: a.domain, token: tok.adminB });
  const anonymous = stream(CHANGES, { host: a.domain });
  // B's own stream of its own table: it must not see A's writes.
  const other = stream(CHANGES, { host: b.domain, token: tok.adminB });
  for (const x of [foreign, anonymous, other]) await x.open();
  t.is(foreign.status, 401);
  t.is(anonymous.status, 401);
  t.is(other.status, 200);
  await on('POST', C, company(20));
  const mine = stream(`${CHANGES}?since=0`, { host: a.domain, token: tok.adminA });
  await mine.until(() => mine.events.some((e) => e.data.key === 20));
  await new Promise((r) => setTimeout(r, 300));
  t.deepEqual(other.events, []);
  const bad = await s.api('GET', `${CHANGES}?nope=1`, { host: a.domain, token: tok.adminA });
  t.is(bad.status, 400, bad.text);
  t.truthy(bad.body.errors.nope);
  const badEvents = await s.api('GET', `${CHANGES}?events=create,explode`, { host: a.domain, token: tok.adminA });
  t.is(badEvents.status, 400);
  t.regex(badEvents.body.errors.events[0], /explode/);
  for (const x of [other, mine]) x.close();
});

test.serial('a revoked token and a demotion end their streams within about a second, with the reason', async (t) => {
  const res = await s.api('POST', '/api/auth/jwt/token/', { host: a.domain, body: { username: 'pleb', password: 'Site-pass-word-1' } });
  const x = stream(CHANGES, { host: a.domain, token: res.body.access });
  await x.open();
  const revoked = Date.now();
  await sql(`UPDATE "${a.schema}".users SET token_generation = token_generation + 1 WHERE username = 'pleb'`);
  await x.until(() => x.ended, 5000, 'the end');
  t.true(Date.now() - revoked < 3000, `ended after ${Date.now() - revoked} ms`);
  t.is(x.of('end')[0]?.data.reason, 'credentials');
  tok.pleb = (await s.api('POST', '/api/auth/jwt/token/', { host: a.domain, body: { username: 'pleb', password: 'Site-pass-word-1' } })).body.access;
  // A demotion: the policies no longer let pleb read the table at all; its stream ends (access).
  const y = stream(CHANGES, { host: a.domain, token: tok.pleb });
  await y.open();
  const policy = (read: boolean) => ({
    resourcePolicy: {
      resource: 'datatable:companies',
      version: 'default',
      rules: [{ actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['admin'] }, ...(read ? [{ actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['user'], condition: { match: { expr: 'R.attr.country == P.attr.country' } } }] : [])],
    },
  });
  const demoted = Date.now();
  t.is((await on('PUT', '/api/apps/crm/policies/', policy(false))).status, 200);
  await y.until(() => y.ended, 5000, 'the end');
  t.true(Date.now() - demoted < 3000, `ended after ${Date.now() - demoted} ms`);
  t.is(y.of('end')[0]?.data.reason, 'access');
  t.is((await on('PUT', '/api/apps/crm/policies/', policy(true))).status, 200);
});

test.serial('a bulk write of 10,000 rows arrives as 10,000 events, in order', async (t) => {
  const x = stream(CHANGES, { host: a.domain, token: tok.adminA });
  await x.open();
  const rows = Array.from({ length: 10_000 }, (_, i) => company(100_000 + i));
  const res = await on('POST', C, rows);
  t.is(res.status, 201, res.text.slice(0, 300));
  await x.until(() => x.events.length >= 10_000, 60_000);
  t.is(x.events.length, 10_000);
  t.deepEqual(x.events.map((e) => e.data.key).sort((p, q) => p - q), rows.map((r) => r.id));
  const ids = x.events.map((e) => Number(e.id));
  t.true(ids.every((id, i) => i === 0 || id > ids[i - 1]!), 'in position order');
  t.is(new Set(ids.map((id) => Math.floor(id / RECORD_CHANGES_CHUNK))).size, Math.ceil(ids.length / RECORD_CHANGES_CHUNK), 'one entry of the log per 1,000 rows of the statement');
  x.close();
});

test.serial('a change made outside the API (SQL by hand) reaches the streams too, by the readers\' look every second', async (t) => {
  const x = stream(CHANGES, { host: a.domain, token: tok.adminA });
  await x.open();
  await sql(`INSERT INTO "${a.schema}".${physical} (id, name, employees, country) VALUES (25, 'By hand', 1, 'US')`);
  await x.until(() => x.events.length >= 1, 5000);
  t.deepEqual([x.events[0]!.event, x.events[0]!.data.key, x.events[0]!.data.actor], ['create', 25, null]);
  x.close();
});

test.serial('a site move\'s thaw ends the site\'s streams (moved): they reconnect to where the site now lives; another site\'s go on', async (t) => {
  const x = stream(CHANGES, { host: a.domain, token: tok.adminA });
  const other = stream(CHANGES, { host: b.domain, token: tok.adminB });
  for (const y of [x, other]) await y.open();
  await sql(`SELECT pg_notify('platform_changes', 'move:thaw ' || ?)`, [a.schema]);
  await x.until(() => x.ended, 5000, 'the end');
  t.is(x.of('end')[0]?.data.reason, 'moved');
  await new Promise((r) => setTimeout(r, 200));
  t.false(other.ended);
  other.close();
});

test.serial('a resume from a position no longer kept answers reset, then follows', async (t) => {
  const pruned = await pruneChangeLogs(await siteEm(), { retentionHours: 24, retentionRows: 0 });
  t.true(pruned > 0);
  const x = stream(`${CHANGES}?since=1`, { host: a.domain, token: tok.adminA });
  await x.until(() => x.events.length >= 1);
  t.is(x.events[0]!.event, 'reset');
  await on('POST', C, company(30));
  await x.until(() => x.events.length >= 2);
  t.deepEqual([x.events[1]!.event, x.events[1]!.data.key], ['create', 30]);
  x.close();
});

test.serial('a client that does not read is dropped; another stream of the site goes on', async (t) => {
  const reader = stream(CHANGES, { host: a.domain, token: tok.adminA });
  const stuck = stream(CHANGES, { host: a.domain, token: tok.adminA, paused: true });
  await reader.open();
  await stuck.until(() => stuck.status === 200, 10_000, 'the stuck stream');
  const before = s.handle.feed.size;
  // Large records until the stuck client's unread bytes pass the limit (256 KiB here, after the sockets' own buffers).
  for (let i = 0; i < 80 && s.handle.feed.size === before; i++) {
    const res = await on('POST', C, Array.from({ length: 500 }, (_, j) => company(200_000 + i * 500 + j, { name: `${'x'.repeat(180)}${j}` })));
    t.is(res.status, 201);
  }
  await reader.until(() => reader.events.length >= 500);
  t.is(s.handle.feed.size, before - 1, 'the stuck stream was dropped');
  t.false(reader.ended);
  reader.close();
  stuck.close();
});

test.serial('1,000 writes from concurrent clients on one process reach a subscriber on another exactly once, in order, across that server\'s restart', async (t) => {
  const start = () => startServer({ ...s.config, port: 0 }, { migrate: false, announce: () => undefined });
  let other = await start();
  const events: Event[] = [];
  let x = stream(CHANGES, { host: a.domain, token: tok.adminA, base: other.url });
  await x.open();
  const writes = (async () => {
    // Four writers at once: their commits interleave (positions taken in one order, committed in another).
    const batches = Array.from({ length: 200 }, (_, i) => Array.from({ length: 5 }, (_, j) => company(300_000 + i * 5 + j)));
    await Promise.all(
      [0, 1, 2, 3].map(async (w) => {
        for (let i = w; i < batches.length; i += 4) {
          const res = await on('POST', C, batches[i]);
          if (res.status !== 201) throw new Error(res.text);
        }
      }),
    );
  })();
  await x.until(() => x.events.length >= 300, 30_000);
  // A WebSocket on that server too: closed as it shuts down (1001), not left to hold it open.
  const ws = new WebSocket(`${other.url.replace('http', 'ws')}/api/realtime/`, { headers: { Host: a.domain, Authorization: `Bearer ${tok.adminA}` } });
  await new Promise((resolve) => ws.on('open', resolve));
  const wsClosed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
  // The server restarts: its stream ends (shutdown), the client resumes on the new one from its last id.
  const stopping = Date.now();
  await other.close();
  t.true(Date.now() - stopping < 5000, `the shutdown took ${Date.now() - stopping} ms`);
  t.is(await wsClosed, 1001);
  await x.until(() => x.ended);
  t.is(x.of('end')[0]?.data.reason, 'shutdown');
  const seen = x.events.filter((e) => e.event === 'create');
  events.push(...seen);
  other = await start();
  try {
    x = stream(CHANGES, { host: a.domain, token: tok.adminA, base: other.url, lastEventId: seen.at(-1)!.id });
    await writes;
    await x.until(() => events.length + x.events.length >= 1000, 30_000);
    await new Promise((r) => setTimeout(r, 200));
    events.push(...x.events);
    const keys = events.map((e) => e.data.key as number);
    t.is(keys.length, 1000, 'every write once');
    t.deepEqual([...keys].sort((p, q) => p - q), Array.from({ length: 1000 }, (_, i) => 300_000 + i));
    const ids = events.map((e) => Number(e.id));
    t.true(ids.every((id, i) => i === 0 || id > ids[i - 1]!), 'in position order');
  } finally {
    x.close();
    await other.close();
  }
});

/** A WebSocket to /api/realtime/ on site A's host: its messages as they come. */
function socket(o: { token?: string; headers?: Record<string, string> } = {}) {
  const messages: any[] = [];
  const ws = new WebSocket(`${s.url.replace('http', 'ws')}/api/realtime/`, { headers: { Host: a.domain, ...(o.token ? { Authorization: `Bearer ${o.token}` } : {}), ...o.headers } });
  ws.on('message', (d) => messages.push(JSON.parse(String(d))));
  const refused = new Promise<number>((resolve) => ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0)));
  const opened = new Promise<void>((resolve, reject) => {
    ws.on('open', () => resolve());
    ws.on('error', reject);
  });
  const until = async (done: () => boolean, what: string) => {
    const deadline = Date.now() + 10_000;
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(messages).slice(0, 800)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  return { ws, messages, refused, opened, until, send: (m: unknown) => ws.send(JSON.stringify(m)) };
}

test.serial('one WebSocket multiplexes subscriptions: each its own conditions and events, errors in the envelope, unsubscribe ends one', async (t) => {
  const x = socket({ token: tok.adminA });
  await x.opened;
  x.send({ type: 'subscribe', id: 'all', app: 'crm', table: 'companies' });
  x.send({ type: 'subscribe', id: 'big', app: 'crm', datasource: 'main', table: 'companies', filter: { employees__gte: 100 }, events: 'create' });
  x.send({ type: 'subscribe', id: 'bad', app: 'crm', table: 'companies', filter: { nope: 1 } });
  x.send({ type: 'subscribe', id: 'gone', app: 'crm', table: 'missing' });
  await x.until(() => x.messages.filter((m) => m.type === 'subscribed' || m.type === 'error').length >= 4, 'the answers');
  const answer = (id: string) => x.messages.find((m) => m.id === id && (m.type === 'subscribed' || m.type === 'error'));
  t.is(answer('all').type, 'subscribed');
  t.is(answer('big').type, 'subscribed');
  t.like(answer('bad'), { type: 'error', status: 400 });
  t.truthy(answer('bad').body.errors.nope);
  t.like(answer('gone'), { type: 'error', status: 404 });
  await on('POST', C, [company(40), company(41, { employees: 700 })]);
  const events = (id: string) => x.messages.filter((m) => m.type === 'events' && m.id === id).flatMap((m) => m.events);
  await x.until(() => events('all').length >= 2 && events('big').length >= 1, 'the events');
  t.deepEqual(events('all').map((e) => [e.event, e.data.key]), [['create', 40], ['create', 41]]);
  t.deepEqual(events('big').map((e) => [e.event, e.data.key]), [['create', 41]]);
  x.send({ type: 'unsubscribe', id: 'big' });
  await x.until(() => x.messages.some((m) => m.type === 'unsubscribed' && m.id === 'big'), 'unsubscribed');
  await on('POST', C, company(42, { employees: 900 }));
  await x.until(() => events('all').length >= 3, 'the third event');
  t.is(events('big').length, 1, 'nothing after unsubscribe');
  x.ws.close();
});

test.serial('the WebSocket: no credentials 401, another site\'s token 401, a session cookie from a foreign page 403, a plain request 426', async (t) => {
  t.is(await socket().refused, 401);
  t.is(await socket({ token: tok.adminB }).refused, 401);
  const plain = await s.api('GET', '/api/realtime/', { host: a.domain, token: tok.adminA });
  t.is(plain.status, 426, plain.text);
  const signedIn = await s.api('POST', '/api/auth/session/', { host: a.domain, body: { username: 'boss', password: 'Site-pass-word-1' } });
  t.is(signedIn.status, 200, signedIn.text);
  const cookie = signedIn.headers.get('set-cookie')!.split(';')[0]!;
  t.is(await socket({ headers: { Cookie: cookie, Origin: 'https://evil.example' } }).refused, 403);
  const own = socket({ headers: { Cookie: cookie, Origin: `http://${a.domain}` } });
  await own.opened;
  own.send({ type: 'subscribe', id: 'x', app: 'crm', table: 'companies' });
  await own.until(() => own.messages.some((m) => m.type === 'subscribed'), 'subscribed');
  own.ws.close();
});

test.serial('a bucket\'s objects: created, changed, moved and deleted, as the objects API shows them; private objects of others stay out; prefix', async (t) => {
  const O = '/api/apps/crm/storage/buckets/docs/objects/';
  const made = await on('POST', '/api/apps/crm/storage/buckets/', { name: 'docs', app_category: 'attachments', visibility: 'public' });
  t.is(made.status, 201, made.text);
  const put = (key: string, data: string, who = 'adminA', headers: Record<string, string> = {}) =>
    s.api('PUT', `${O}${key}`, { host: a.domain, token: tok[who], raw: data, headers: { 'Content-Type': 'application/octet-stream', ...headers } });
  const all = stream(`${O}changes/`, { host: a.domain, token: tok.adminA });
  const reports = stream(`${O}changes/?prefix=reports/`, { host: a.domain, token: tok.adminA });
  const pleb = stream(`${O}changes/`, { host: a.domain, token: tok.pleb });
  for (const x of [all, reports, pleb]) await x.open();
  t.is(all.status, 200, all.text);
  t.is((await put('reports/q1.txt', 'one')).status, 201);
  t.is((await put('notes/n.txt?visibility=private', 'two')).status, 201);
  t.is((await put('reports/q1.txt', 'one, again')).status, 200);
  const moved = await on('POST', `${O}move/`, { source_path: 'reports/q1.txt', destination_path: 'reports/q1-final.txt' });
  t.is(moved.status, 200, moved.text);
  t.is((await on('DELETE', `${O}reports/q1-final.txt`)).status, 200);
  await all.until(() => all.events.length >= 5);
  t.deepEqual(all.events.map((e) => e.event), ['create', 'create', 'update', 'update', 'delete']);
  const first = all.events[0]!.data;
  t.like(first.record, { file_path: 'reports/q1.txt', filename: 'q1.txt', size: 3, bucket_slug: 'docs', file_url: `${O}reports/q1.txt` });
  t.false(JSON.stringify(all.events).includes('blob_key'), 'the blob key stays inside');
  t.deepEqual(all.events.map((e) => e.data.actor), Array(5).fill(adminUuid), 'upload, replace, move and delete name who made them');
  t.true(all.events[2]!.data.changed.includes('size'));
  t.is(all.events[3]!.data.key, first.key, 'a move keeps the key');
  t.is(all.events[3]!.data.record.file_path, 'reports/q1-final.txt');
  await reports.until(() => reports.events.length >= 4);
  t.deepEqual(reports.events.map((e) => e.event), ['create', 'update', 'update', 'delete']);
  // pleb (not the owner, not staff) reads the bucket's public objects, not adminA's private one.
  await pleb.until(() => pleb.events.length >= 4);
  await new Promise((r) => setTimeout(r, 300));
  t.deepEqual(pleb.events.map((e) => e.event), ['create', 'update', 'update', 'delete']);
  t.false(pleb.text.includes('notes/n.txt'));
  t.is((await s.api('GET', `${O}notes/n.txt/`, { host: a.domain, token: tok.pleb })).status, 404, 'the objects API agrees');
  const foreign = stream(`${O}changes/`, { host: a.domain, token: tok.adminB });
  await foreign.open();
  t.is(foreign.status, 401);
  for (const x of [all, reports, pleb]) x.close();
});

async function siteEm() {
  const { siteEmOf } = await import('../../shared/db/clusters.ts');
  return siteEmOf(s.handle.db.orm.em.fork(), a.schema);
}
