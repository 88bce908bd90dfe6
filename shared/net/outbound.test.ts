// The outbound guard against stand-ins on loopback: refused destinations see no connection at
// all; the allow-list lets one through; redirects are checked hop by hop; the address checked is
// the one connected to (a second resolution could rebind the name); ports, the body cap, the
// deadline and the per-site bound.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import test from 'ava';
import { addressClass, OutboundError, OutboundGuard, type OutboundRules, type Resolve } from './outbound.ts';

const RULES: OutboundRules = { allowHosts: [], allowCidrs: [], allowPorts: [80, 443], timeoutMs: 5000, maxResponseBytes: 1024, maxPerSite: 8 };
const guard = (rules: Partial<OutboundRules> = {}, resolve?: Resolve) => new OutboundGuard({ ...RULES, ...rules }, resolve);

interface StandIn {
  url: string;
  port: number;
  connections: number;
  close(): Promise<void>;
}

/** An HTTP server on `host` that counts the connections it sees. */
async function standIn(handler: http.RequestListener = (_req, res) => res.end('hello'), host = '127.0.0.1', port = 0): Promise<StandIn> {
  const server = http.createServer(handler);
  const s = { connections: 0 } as StandIn;
  server.on('connection', () => s.connections++);
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, host, resolve));
  s.port = (server.address() as AddressInfo).port;
  s.url = `http://${host}:${s.port}`;
  s.close = async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  };
  return s;
}

const refusal = async (t: any, promise: Promise<unknown>, reason = 'refused') => {
  const err = await t.throwsAsync(promise, { instanceOf: OutboundError });
  t.is(err.reason, reason, err.message);
  return err as OutboundError;
};

test('addresses: only public unicast passes; internal ranges and their IPv4-mapped forms are refused', (t) => {
  const refused = {
    '127.0.0.1': 'loopback', '10.1.2.3': 'private', '172.16.0.1': 'private', '192.168.1.1': 'private', '169.254.169.254': 'linkLocal',
    '100.64.0.1': 'carrierGradeNat', '0.0.0.0': 'unspecified', '240.0.0.1': 'reserved', '224.0.0.1': 'multicast', '255.255.255.255': 'broadcast',
    '::1': 'loopback', '::': 'unspecified', 'fe80::1': 'linkLocal', 'fc00::1': 'uniqueLocal', 'fd00:ec2::254': 'uniqueLocal',
    '::ffff:127.0.0.1': 'loopback', '::ffff:169.254.169.254': 'linkLocal', '::ffff:10.0.0.1': 'private', '::7f00:1': 'ipv4Compatible', '64:ff9b::a9fe:a9fe': 'rfc6052',
  };
  for (const [address, kind] of Object.entries(refused)) t.is(addressClass(address), kind, address);
  for (const address of ['8.8.8.8', '93.184.215.14', '2606:4700:4700::1111', '::ffff:8.8.8.8']) t.is(addressClass(address), 'unicast', address);
});

test('issue 29 #7: a stand-in on 127.0.0.1 is never connected to, by address, by name or in mapped form; the allow-list lets it through', async (t) => {
  const target = await standIn();
  try {
    const g = guard({ allowPorts: [80, 443, target.port] });
    for (const url of [target.url, `http://localhost:${target.port}/`, `http://[::ffff:127.0.0.1]:${target.port}/`, `http://[::1]:${target.port}/`]) {
      const err = await refusal(t, g.fetch(url));
      t.regex(err.message, /not a public destination/);
    }
    await refusal(t, g.fetch(`ftp://127.0.0.1:${target.port}/`));
    t.is(target.connections, 0, 'nothing reached the stand-in');
    for (const rules of [{ allowCidrs: ['127.0.0.0/8'] }, { allowCidrs: ['127.0.0.1'] }, { allowHosts: ['localhost'] }]) {
      const url = rules.allowHosts ? `http://localhost:${target.port}/` : `${target.url}/`;
      const res = await guard(rules, rules.allowHosts ? async () => [{ address: '127.0.0.1', family: 4 }] : undefined).fetch(url);
      t.is(await res.text(), 'hello', JSON.stringify(rules));
    }
    t.is(target.connections, 3);
  } finally {
    await target.close();
  }
});

test('issue 29 #7: a redirect to an internal host is checked like the first request (the target sees nothing)', async (t) => {
  const inside = await standIn();
  const outside = await standIn((_req, res) => res.writeHead(302, { location: `${inside.url}/secret` }).end(), '127.0.0.2');
  try {
    const g = guard({ allowCidrs: ['127.0.0.2/32'] });
    await refusal(t, g.fetch(`${outside.url}/`));
    t.is(inside.connections, 0);
    t.is(outside.connections, 1);
    // Allowed both: followed, and the credentials stay with their origin.
    const seen: (string | undefined)[] = [];
    const other = await standIn((req, res) => res.end(String(seen.push(req.headers.authorization))), '127.0.0.3');
    const hop = await standIn((_req, res) => res.writeHead(302, { location: `${other.url}/` }).end(), '127.0.0.2');
    try {
      const followed = await guard({ allowCidrs: ['127.0.0.2/32', '127.0.0.3/32'] }).fetch(`${hop.url}/`, { headers: { authorization: 'Bearer tok' } });
      t.is(followed.status, 200);
      t.deepEqual(seen, [undefined]);
    } finally {
      await Promise.all([other.close(), hop.close()]);
    }
    const manual = await g.fetch(`${outside.url}/`, { redirect: 'manual' });
    t.is(manual.status, 302, 'manual: the redirect itself is the answer');
    t.is(inside.connections, 0);
  } finally {
    await Promise.all([inside.close(), outside.close()]);
  }
});

test('issue 29 #7: DNS rebinding: the name is resolved once and the checked address is the one connected to', async (t) => {
  const good = await standIn((_req, res) => res.end('checked'), '127.0.0.2');
  let bad: StandIn | undefined;
  try {
    bad = await standIn((_req, res) => res.end('rebound'), '127.0.0.1', good.port);
  } catch {
    await good.close();
    return t.pass('port taken on 127.0.0.1: nothing to compare with');
  }
  let lookups = 0;
  const rebinding: Resolve = async () => [{ address: lookups++ === 0 ? '127.0.0.2' : '127.0.0.1', family: 4 }];
  try {
    const res = await guard({ allowCidrs: ['127.0.0.2/32'] }, rebinding).fetch(`http://rebind.example:${good.port}/`);
    t.is(await res.text(), 'checked');
    t.is(lookups, 1);
    t.is(bad.connections, 0);
  } finally {
    await Promise.all([good.close(), bad.close()]);
  }
});

test('ports: a public address on a port outside OUTBOUND_ALLOW_PORTS is refused; every address of a name is checked', async (t) => {
  const publicName: Resolve = async () => [{ address: '93.184.215.14', family: 4 }];
  await refusal(t, guard({}, publicName).destination(new URL('http://example.test:6379/')));
  t.deepEqual(await guard({}, publicName).destination(new URL('https://example.test/')), { address: '93.184.215.14', family: 4 });
  const mixed: Resolve = async () => [{ address: '93.184.215.14', family: 4 }, { address: '10.0.0.5', family: 4 }];
  await refusal(t, guard({}, mixed).destination(new URL('https://example.test/')));
  await refusal(t, guard({}, publicName).destination(new URL('https://user:pw@example.test/')));
});

test('the body is capped, the deadline holds, and one site cannot hold more than its share of requests', async (t) => {
  const waiting: http.ServerResponse[] = [];
  const target = await standIn((req, res) => {
    if (req.url === '/big') return res.end('x'.repeat(4096));
    waiting.push(res); // never answered until released
  });
  try {
    const g = guard({ allowCidrs: ['127.0.0.1/32'], timeoutMs: 1000, maxPerSite: 2 });
    await refusal(t, g.fetch(`${target.url}/big`), 'too_large');
    await refusal(t, g.fetch(`${target.url}/slow`), 'timeout');
    const held = [g.fetchFor('site_a')(`${target.url}/hold`), g.fetchFor('site_a')(`${target.url}/hold`)];
    await refusal(t, g.fetchFor('site_a')(`${target.url}/big`), 'busy');
    await refusal(t, g.fetchFor('site_b')(`${target.url}/big`), 'too_large'); // another site is not held up: it got its request out
    for (const p of held) await t.throwsAsync(p);
    await refusal(t, g.fetchFor('site_a')(`${target.url}/big`), 'too_large'); // the slots came back
  } finally {
    for (const res of waiting) res.destroy();
    await target.close();
  }
});

/** Modules that open connections themselves, and why their destination is not a tenant's. */
const OWN_CONNECTIONS: Record<string, string> = {
  'shared/net/outbound.ts': 'the guard itself',
  'shared/functions/sandbox/worker.ts': "the functions' SDK, to the platform's own API (FUNCTION_API_URL, the operator's)",
  'server/routes/docs.routes.ts': 'a script the docs page runs in the browser',
};

test('the guard is the one way out: no other module of shared/ or server/ calls fetch or opens an HTTP connection itself', (t) => {
  const root = path.resolve(import.meta.dirname, '../..');
  const offenders: string[] = [];
  for (const dir of ['shared', 'server']) {
    for (const file of fs.readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' })) {
      const rel = `${dir}/${file}`;
      if (!rel.endsWith('.ts') || rel.endsWith('.test.ts') || rel.includes('/test/') || rel.includes('/testing/') || OWN_CONNECTIONS[rel]) continue;
      const text = fs.readFileSync(path.join(root, rel), 'utf8');
      if (/\bfetch\(|\bhttps?\.(request|get)\(|\b(net|tls)\.connect\(|\bnew WebSocket\(/.test(text)) offenders.push(rel);
    }
  }
  t.deepEqual(offenders, [], 'fetch through OutboundGuard (shared/net/outbound.ts), or say here why the destination is not a tenant\'s');
});
