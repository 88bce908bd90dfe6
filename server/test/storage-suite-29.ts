// Issue 29's attacks on storage, part of the storage suite (run on both stores): copy and move
// are writes (#5: the destination's rules, concurrent moves, the batch total), and what the
// caller may not read answers as missing (#9). Each test names its reproduction.
import http from 'node:http';
import type { TestFn } from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import type { ApiResponse, TestServer } from './helpers.ts';

const B = '/api/apps/crm/storage/buckets/';
const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5d1c3d20000000049454e44ae426082', 'hex');
const MiB = 1024 * 1024;

type On = (method: string, path: string, options?: { body?: unknown; raw?: Buffer | string; headers?: Record<string, string>; who?: string | null; site?: TestSite }) => Promise<ApiResponse>;

export interface StorageHarness {
  server: () => TestServer;
  site: () => TestSite;
  tokens: Record<string, string>;
  on: On;
  put: (bucket: string, key: string, data: Buffer | string, headers?: Record<string, string>, who?: string | null) => Promise<ApiResponse>;
  multipart: (method: string, path: string, parts: [string, string | Blob, string?][], who?: string) => Promise<ApiResponse>;
  blobs: () => Promise<string[]>;
  objectRows: (bucket: string) => Promise<number>;
  journal: () => Promise<number>;
  bucket: (body: Record<string, unknown>) => Promise<any>;
}

/** A body the caller must not tell from a missing resource's: `missing`'s with its name swapped for `name`. */
const asMissing = (missing: ApiResponse, missingName: string, name: string) => ({ ...missing.body, message: missing.body.message.replace(missingName, name) });

export function issue29StorageSuite(test: TestFn, h: StorageHarness): void {
  const { on, put, bucket, blobs, objectRows, journal } = h;

  test.serial('issue 29 #5: an HTML file copied into a public png-only bucket is refused (400 naming the type), as is a copy over its file_size_limit; move re-checks the bucket\'s rules; nothing stored', async (t) => {
    await bucket({ name: 'site', visibility: 'public' });
    await bucket({ name: 'pngs', visibility: 'public', allowed_mime_types: ['image/png'], file_size_limit: 100 });
    t.is((await put('site', 'index.html', '<html><script>alert(1)</script></html>', { 'Content-Type': 'text/html' })).status, 201);
    t.is((await put('site', 'logo.png', Buffer.concat([PNG, Buffer.alloc(200)]), { 'Content-Type': 'image/png' })).status, 201);
    const blobsBefore = await blobs();

    const html = await on('POST', `${B}site/objects/copy/`, { body: { source_path: 'index.html', destination_bucket: 'pngs', destination_path: 'index.png' } });
    t.is(html.status, 400, html.text);
    t.like(html.body, { success: false, status_code: 400, message: 'File type "text/html" is not allowed. Allowed types: image/png.' });
    const big = await on('POST', `${B}site/objects/copy/`, { body: { source_path: 'logo.png', destination_bucket: 'pngs', destination_path: 'logo.png' } });
    t.is(big.status, 400, big.text);
    t.is(big.body.message, `File size ${PNG.length + 200} bytes exceeds the limit of 100 bytes.`);
    t.is(await objectRows('pngs'), 0);
    t.is((await on('GET', `${B}pngs/objects/index.png`, { who: null })).status, 404);

    // The rules as they are at the write: tightened after the upload, they hold for a copy or a move inside the bucket too.
    t.is((await on('PATCH', `${B}site/`, { body: { allowed_mime_types: ['image/*'] } })).status, 200);
    const inside = await on('POST', `${B}site/objects/copy/`, { body: { source_path: 'index.html', destination_path: 'again.html' } });
    t.is(inside.status, 400, inside.text);
    const moved = await on('POST', `${B}site/objects/move/`, { body: { source_path: 'index.html', destination_path: 'moved.html' } });
    t.is(moved.status, 400, moved.text);
    t.true(moved.body.message.includes('text/html'));
    t.is((await on('GET', `${B}site/objects/index.html`)).status, 200, 'the refused move left the object where it was');
    t.is((await on('GET', `${B}site/objects/moved.html`)).status, 404);
    t.is(await objectRows('site'), 2);
    t.deepEqual((await blobs()).sort(), blobsBefore.sort());
    t.is(await journal(), 0);

    // What the rules admit still copies and moves.
    t.is((await on('POST', `${B}site/objects/copy/`, { body: { source_path: 'logo.png', destination_path: 'logo2.png' } })).status, 201);
    t.is((await on('POST', `${B}site/objects/move/`, { body: { source_path: 'logo2.png', destination_path: 'img/logo2.png' } })).status, 200);
  });

  test.serial('issue 29 #5: two concurrent moves of one object: exactly one wins, the other answers 404; nothing lost or duplicated (raced 30 times; and a delete racing a move, 15 times)', async (t) => {
    await bucket({ name: 'race' });
    const blobsBefore = (await blobs()).length;
    const rounds = 30;
    for (let i = 0; i < rounds; i++) {
      t.is((await put('race', `src${i}.txt`, `payload ${i}`, { 'Content-Type': 'text/plain' })).status, 201);
      const move = (to: string) => on('POST', `${B}race/objects/move/`, { body: { source_path: `src${i}.txt`, destination_path: to } });
      const answers = await Promise.all([move(`x${i}.txt`), move(`y${i}.txt`)]);
      t.deepEqual(answers.map((r) => r.status).sort(), [200, 404], `round ${i}: ${answers.map((r) => r.text).join(' / ')}`);
      const loser = answers.find((r) => r.status === 404)!;
      t.is(loser.body.message, `Object "src${i}.txt" not found.`);
      const winner = answers.find((r) => r.status === 200)!.body.data.file_path;
      const there = await Promise.all([`src${i}.txt`, `x${i}.txt`, `y${i}.txt`].map(async (k) => [k, (await on('GET', `${B}race/objects/${k}`)).status] as const));
      t.deepEqual(there.filter(([, status]) => status === 200).map(([k]) => k), [winner], `round ${i}`);
      t.is((await on('GET', `${B}race/objects/${winner}`)).text, `payload ${i}`);
    }
    t.is(await objectRows('race'), rounds);
    t.is((await blobs()).length, blobsBefore + rounds);
    t.is(await journal(), 0);

    // A delete racing a move deletes the object only where it named it: never the moved one at its new path.
    for (let i = 0; i < 15; i++) {
      t.is((await put('race', `del${i}.txt`, `gone ${i}`, { 'Content-Type': 'text/plain' })).status, 201);
      const [moved, deleted] = await Promise.all([
        on('POST', `${B}race/objects/move/`, { body: { source_path: `del${i}.txt`, destination_path: `kept${i}.txt` } }),
        on('DELETE', `${B}race/objects/del${i}.txt`),
      ]);
      t.deepEqual([moved.status, deleted.status].sort(), [200, 404], `round ${i}: ${moved.text} / ${deleted.text}`);
      const kept = (await on('GET', `${B}race/objects/kept${i}.txt`)).status;
      t.is(kept, moved.status === 200 ? 200 : 404, `round ${i}`);
    }
    t.is(await journal(), 0);
  });

  test.serial('issue 29 #5: a batch upload past 100 MB in all (a 51 MiB file, then more) is answered 413 naming the limit before its body ends; no row, no blob left', async (t) => {
    t.timeout(90_000);
    await bucket({ name: 'batch-cap', file_size_limit: 60 * MiB });
    const blobsBefore = await blobs();
    const boundary = '----issue29boundary';
    const head = (name: string) => Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="files"; filename="${name}"\r\nContent-Type: application/octet-stream\r\n\r\n`);
    const planned = 2 * 60 * MiB;
    const url = new URL(h.server().url);
    const { status, body, sent } = await new Promise<{ status: number; body: any; sent: number }>((resolve, reject) => {
      let sent = 0;
      let answered = false;
      const req = http.request({
        host: url.hostname, port: url.port, method: 'POST', path: `${B}batch-cap/objects/batch-upload/`,
        headers: { Host: h.site().domain, Authorization: `Bearer ${h.tokens.adminA}`, 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Content-Length': String(planned) },
      }, (res) => {
        answered = true;
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text), sent }));
        res.on('error', reject);
      });
      req.on('error', (err) => (answered ? undefined : reject(err)));
      const chunk = Buffer.alloc(MiB, 7);
      const write = (buf: Buffer) => new Promise<void>((done) => (req.write(buf) ? done() : req.once('drain', done)));
      void (async () => {
        await write(head('first.bin'));
        for (let i = 0; i < 51 && !answered; i++, sent += MiB) await write(chunk);
        await write(Buffer.from('\r\n'));
        await write(head('second.bin'));
        // More than the rest of the limit, but never the whole planned body: an answer must come before the end.
        for (let i = 0; i < 60 && !answered; i++, sent += MiB) await write(chunk);
        if (!answered) setTimeout(() => answered || reject(new Error('no answer although the limit was passed')), 30_000).unref();
      })().catch(() => undefined);
    });
    t.is(status, 413);
    t.like(body, { success: false, status_code: 413, code: 'PAYLOAD_TOO_LARGE' });
    t.true(body.message.includes('104857600'), body.message);
    t.true(sent < planned, 'answered before the body ended');
    t.is(await objectRows('batch-cap'), 0);
    t.deepEqual((await blobs()).sort(), blobsBefore.sort());
    t.is(await journal(), 0);
  });

  test.serial('issue 29 #9: an object the policies hide answers exactly as a missing one (404, same body) on download, HEAD, metadata, copy, move and delete; one the caller may read but not act on is 403', async (t) => {
    await bucket({ name: 'hid', visibility: 'public' });
    for (const [key, size] of [['small.txt', 5], ['mid.txt', 15], ['big.txt', 50]] as const) await put('hid', key, 'x'.repeat(size), { 'Content-Type': 'text/plain' });
    const policy = await on('PUT', '/api/apps/crm/policies/', {
      body: {
        resourcePolicy: {
          resource: 'storage:hid',
          version: 'default',
          rules: [
            { actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['admin'] },
            { actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['user'], condition: { match: { expr: 'R.attr.size < 20' } } },
            { actions: ['download'], effect: 'EFFECT_ALLOW', roles: ['user'], condition: { match: { expr: 'R.attr.size < 10' } } },
          ],
        },
      },
    });
    t.true([200, 201].includes(policy.status), policy.text);
    const pleb = (method: string, path: string, body?: unknown) => on(method, path, { who: 'pleb', body });
    const same = async (hiddenReq: () => Promise<ApiResponse>, missingReq: () => Promise<ApiResponse>, what: string) => {
      const hidden = await hiddenReq();
      const missing = await missingReq();
      t.is(hidden.status, 404, `${what}: ${hidden.text}`);
      t.is(missing.status, 404, what);
      t.deepEqual(hidden.body, asMissing(missing, 'gone.txt', 'big.txt'), what);
    };
    // Hidden (big: the read policy denies it) answers as missing.
    await same(() => pleb('GET', `${B}hid/objects/big.txt`), () => pleb('GET', `${B}hid/objects/gone.txt`), 'download');
    await same(() => pleb('GET', `${B}hid/objects/big.txt?metadata=true`), () => pleb('GET', `${B}hid/objects/gone.txt?metadata=true`), 'metadata');
    t.is((await pleb('HEAD', `${B}hid/objects/big.txt`)).status, 404);
    await same(() => pleb('DELETE', `${B}hid/objects/big.txt`), () => pleb('DELETE', `${B}hid/objects/gone.txt`), 'delete');
    await same(() => pleb('POST', `${B}hid/objects/copy/`, { source_path: 'big.txt', destination_path: 'c.txt' }), () => pleb('POST', `${B}hid/objects/copy/`, { source_path: 'gone.txt', destination_path: 'c.txt' }), 'copy source');
    await same(() => pleb('POST', `${B}hid/objects/move/`, { source_path: 'big.txt', destination_path: 'm.txt' }), () => pleb('POST', `${B}hid/objects/move/`, { source_path: 'gone.txt', destination_path: 'm.txt' }), 'move source');
    const batch = await pleb('POST', `${B}hid/objects/batch-delete/`, { paths: ['big.txt', 'small.txt', 'gone.txt'] });
    t.deepEqual(batch.body.data.failed, [{ path: 'big.txt', error: 'Object not found.' }, { path: 'small.txt', error: 'Permission denied.' }, { path: 'gone.txt', error: 'Object not found.' }]);

    // Readable (mid: read allowed, download denied; small: not the caller's) stays 403 for what it may not do.
    t.is((await pleb('GET', `${B}hid/objects/mid.txt?metadata=true`)).status, 200);
    const denied = await pleb('GET', `${B}hid/objects/mid.txt`);
    t.is(denied.status, 403);
    t.is(denied.body.code, 'PERMISSION_DENIED');
    t.is((await pleb('HEAD', `${B}hid/objects/mid.txt`)).status, 403);
    t.is((await pleb('POST', `${B}hid/objects/copy/`, { source_path: 'mid.txt', destination_path: 'c.txt' })).status, 403);
    t.is((await pleb('GET', `${B}hid/objects/small.txt`)).text, 'xxxxx');
    t.is((await pleb('DELETE', `${B}hid/objects/small.txt`)).status, 403);
    t.is((await pleb('POST', `${B}hid/objects/move/`, { source_path: 'small.txt', destination_path: 'm.txt' })).status, 403);
    // Nothing changed.
    t.is(await objectRows('hid'), 3);
    for (const key of ['small.txt', 'mid.txt', 'big.txt']) t.is((await on('GET', `${B}hid/objects/${key}`)).status, 200, key);

    // The bucket itself: this policy gives users no `read` of it, so it answers as a missing bucket.
    const hiddenBucket = await pleb('GET', `${B}hid/`);
    const missingBucket = await pleb('GET', `${B}gone/`);
    t.is(hiddenBucket.status, 404);
    t.deepEqual(hiddenBucket.body, { ...missingBucket.body, message: missingBucket.body.message.replace('gone', 'hid') });
    t.is((await pleb('GET', `${B}hid/usage/`)).status, 404);
    const listed = async (who: string) => (await on('GET', `${B}?page_size=100`, { who })).body.results.map((r: { slug: string }) => r.slug);
    t.false((await listed('pleb')).includes('hid'), 'nor is it listed');
    t.true((await listed('pleb')).includes('site'));
    t.true((await listed('adminA')).includes('hid'));
    t.is((await on('GET', `${B}hid/`)).status, 200, 'the admin role reads it');
  });
}
