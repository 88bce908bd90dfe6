// The upload inspection on real streams: the type from the bytes (not the client's word), text
// types, the size limit enforced mid-stream with backpressure kept, and the MIME pattern rules.
import test from 'ava';
import { crc32 } from 'node:zlib';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { DomainError } from '../errors.ts';
import {
  checkDeclaredSize, fileTooLarge, inspect, isDocumentEditable, mimeMatches, typeNotAllowed, UploadRejected, validMimePattern, type InspectOptions,
} from './inspect.ts';

const opts = (o: Partial<InspectOptions> = {}): InspectOptions => ({ limit: 50 * 1024 * 1024, filename: 'upload', allowed: [], ...o });

/** `data` in chunks of `size` bytes. */
function chunks(data: Buffer, size = 16 * 1024): Readable {
  return Readable.from((function* () {
    for (let i = 0; i < data.length; i += size) yield data.subarray(i, i + size);
  })(), { objectMode: false });
}

async function drain(stream: Readable): Promise<Buffer> {
  const out: Buffer[] = [];
  for await (const c of stream) out.push(c as Buffer);
  return Buffer.concat(out);
}

const typeOf = async (data: Buffer, o: Partial<InspectOptions> = {}) => {
  const r = await inspect(chunks(data), opts(o));
  await drain(r.body);
  return r.mimetype;
};

// ---- fixtures -----------------------------------------------------------------------------------

const PNG = Buffer.concat([
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  Buffer.from([0, 0, 0, 13]), Buffer.from('IHDR'), Buffer.from([0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0]), Buffer.from([0x1f, 0x15, 0xc4, 0x89]),
  Buffer.from([0, 0, 0, 0]), Buffer.from('IEND'), Buffer.from([0xae, 0x42, 0x60, 0x82]),
]);
const PDF = Buffer.from('%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n');

/** A stored (uncompressed) ZIP archive of these entries. */
function zip(entries: [string, string][]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const [name, text] of entries) {
    const data = Buffer.from(text);
    const n = Buffer.from(name);
    const crc = crc32(data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(n.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(data.length, 20);
    central.writeUInt32LE(data.length, 24);
    central.writeUInt16LE(n.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, n, data);
    centrals.push(central, n);
    offset += 30 + n.length + data.length;
  }
  const cd = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(cd.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, cd, end]);
}

const DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';

// ---- the type -----------------------------------------------------------------------------------

test('binary types come from the bytes, whatever the client declares', async (t) => {
  t.is(await typeOf(PNG, { declaredType: 'application/pdf' }), 'image/png');
  t.is(await typeOf(PDF, { declaredType: 'text/plain' }), 'application/pdf');
  t.is(await typeOf(PDF, { declaredType: 'image/png', filename: 'a.png' }), 'application/pdf');
  t.is(await typeOf(zip([['hello.txt', 'hello']]), { declaredType: 'image/png' }), 'application/zip');
  t.is(await typeOf(zip([['mimetype', 'application/vnd.oasis.opendocument.text'], ['content.xml', '<x/>']]), { declaredType: 'image/png' }), 'application/vnd.oasis.opendocument.text');
  t.is(await typeOf(PNG), 'image/png');
});

test('a generic container takes the declared type of its family, and only that', async (t) => {
  const archive = zip([['[Content_Types].xml', '<Types/>'], ['other.bin', 'x']]);
  t.is(await typeOf(archive, { declaredType: `${DOCX}; charset=binary` }), DOCX);
  t.is(await typeOf(archive, { declaredType: 'application/epub+zip' }), 'application/epub+zip');
  t.is(await typeOf(archive, { declaredType: 'application/pdf' }), 'application/zip');
  const xml = Buffer.from('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"><rect/></svg>');
  t.is(await typeOf(xml, { declaredType: 'image/svg+xml' }), 'image/svg+xml');
  t.is(await typeOf(xml, { declaredType: 'application/pdf' }), 'application/xml');
});

test('text: a declared text type is trusted, else the extension, else text/plain', async (t) => {
  const csv = Buffer.from('name,age\nÅsa,41\nZoë,37\n');
  t.is(await typeOf(csv, { declaredType: 'text/csv' }), 'text/csv');
  t.is(await typeOf(csv, { declaredType: 'Text/CSV; charset=UTF-8' }), 'text/csv');
  t.is(await typeOf(csv, { declaredType: 'application/json' }), 'application/json');
  t.is(await typeOf(csv, { declaredType: 'application/ld+json' }), 'application/ld+json');
  t.is(await typeOf(csv, { declaredType: 'application/octet-stream', filename: 'people.CSV' }), 'text/csv');
  t.is(await typeOf(csv, { declaredType: 'image/png', filename: 'data/people.csv' }), 'text/csv');
  t.is(await typeOf(csv, { filename: 'notes' }), 'text/plain');
  t.is(await typeOf(csv, { declaredType: 'not a type', filename: 'x.json' }), 'application/json');
  t.is(await typeOf(Buffer.from('{"a":1}'), { filename: 'x.md' }), 'text/markdown');
  // A legacy charset the client names keeps a text file text.
  t.is(await typeOf(Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]), { declaredType: 'text/csv; charset=iso-8859-1' }), 'text/csv');
  t.is(await typeOf(Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]), { declaredType: 'text/csv' }), 'application/octet-stream');
});

test('text: a multibyte character cut by the head boundary is still text; cut at the very end it is not', async (t) => {
  const e = Buffer.from('é'); // c3 a9
  const first = Buffer.concat([Buffer.alloc(4099, 'a'), e.subarray(0, 1)]);
  const rest = Buffer.concat([e.subarray(1), Buffer.from(' and more text\n')]);
  const r = await inspect(Readable.from([first, rest]), opts({ declaredType: 'text/plain' }));
  t.is(r.mimetype, 'text/plain');
  t.is((await drain(r.body)).toString(), `${'a'.repeat(4099)}é and more text\n`);
  // A whole file ending in a cut sequence is invalid UTF-8.
  t.is(await typeOf(Buffer.from([0x61, 0x61, 0x61, 0xc3]), { declaredType: 'text/plain' }), 'application/octet-stream');
});

test('other bytes: the declared type unless it is text or one the bytes would have shown', async (t) => {
  const blob = Buffer.from([0x00, 0x01, 0x02, 0xff, 0xfe, 0x00, 0x10, 0x80, 0x7f, 0x00]);
  t.is(await typeOf(blob, { declaredType: 'application/x-custom-thing' }), 'application/x-custom-thing');
  t.is(await typeOf(blob, { declaredType: 'application/vnd.example.data; version=2' }), 'application/vnd.example.data');
  t.is(await typeOf(blob, { declaredType: 'text/plain' }), 'application/octet-stream');
  t.is(await typeOf(blob, { declaredType: 'application/json' }), 'application/octet-stream');
  t.is(await typeOf(blob, { declaredType: 'image/png' }), 'application/octet-stream');
  t.is(await typeOf(blob), 'application/octet-stream');
});

test('allowed types are matched on the sniffed type; a refusal names it and the list', async (t) => {
  const err = await t.throwsAsync(inspect(chunks(PDF), opts({ declaredType: 'image/png', allowed: ['image/*', 'text/plain'] })), { instanceOf: UploadRejected });
  t.is(err?.reason, 'type_not_allowed');
  t.is(err?.message, 'File type "application/pdf" is not allowed. Allowed types: image/*, text/plain.');
  t.true(err instanceof DomainError);
  t.is(err?.code, 'BAD_REQUEST');
  t.is(err?.status, 400);
  t.is((await inspect(chunks(PNG), opts({ allowed: ['image/png'] }))).mimetype, 'image/png');
  t.is((await inspect(chunks(PNG), opts({ allowed: ['image/*'] }))).mimetype, 'image/png');
  t.is((await inspect(chunks(PNG), opts({ allowed: ['*/*'] }))).mimetype, 'image/png');
  await t.throwsAsync(inspect(chunks(Buffer.from('hello')), opts({ allowed: ['image/*'] })), { message: /"text\/plain" is not allowed/ });
});

test('an empty file is refused with its own reason', async (t) => {
  const err = await t.throwsAsync(inspect(Readable.from([]), opts()), { instanceOf: UploadRejected });
  t.is(err?.reason, 'empty');
  t.is(err?.message, 'The submitted file is empty.');
  t.is(err?.status, 400);
  await t.throwsAsync(inspect(Readable.from([Buffer.alloc(0)]), opts()), { message: 'The submitted file is empty.' });
});

// ---- the size -----------------------------------------------------------------------------------

/** A source of `total` bytes in `chunk`-byte pieces that counts what was pulled from it. */
function counted(total: number, chunk: number, fill = 0x41): { source: Readable; pulled: () => number } {
  let sent = 0;
  const source = new Readable({
    highWaterMark: chunk,
    read() {
      if (sent >= total) return void this.push(null);
      const n = Math.min(chunk, total - sent);
      sent += n;
      this.push(Buffer.alloc(n, fill));
    },
  });
  return { source, pulled: () => sent };
}

test('past the limit the body fails mid-stream: the consumer never gets more than the limit', async (t) => {
  const limit = 100_000;
  const chunk = 16 * 1024;
  const { source, pulled } = counted(5 * 1024 * 1024, chunk);
  const r = await inspect(source, opts({ limit }));
  let received = 0;
  const sink = new Writable({
    write(c: Buffer, _e, cb) {
      received += c.length;
      setImmediate(cb);
    },
  });
  const err = await t.throwsAsync(pipeline(r.body, sink), { instanceOf: UploadRejected });
  t.is(err?.reason, 'too_large');
  t.regex(err!.message, /^File size exceeds the limit of 100000 bytes \(more than \d+ bytes received\)\.$/);
  t.true(received <= limit, `${received} bytes reached the consumer`);
  t.true(r.size() > limit && r.size() <= limit + chunk);
  t.true(pulled() < 5 * 1024 * 1024 / 4, `only ${pulled()} bytes were read from the source`);
  // The source is left to its owner: paused, not destroyed.
  t.false(source.destroyed);
  t.true(source.isPaused());
});

test('exactly at the limit passes; a head over it, or a declared size over it, fails before the body', async (t) => {
  const ok = await inspect(counted(10_000, 1000).source, opts({ limit: 10_000 }));
  t.is((await drain(ok.body)).length, 10_000);
  t.is(ok.size(), 10_000);
  const head = await t.throwsAsync(inspect(Readable.from([Buffer.alloc(200, 1)]), opts({ limit: 100 })), { instanceOf: UploadRejected });
  t.is(head?.message, 'File size 200 bytes exceeds the limit of 100 bytes.');
  const declared = counted(1000, 100);
  await t.throwsAsync(inspect(declared.source, opts({ limit: 100, declaredSize: 1000 })), { message: 'File size 1000 bytes exceeds the limit of 100 bytes.' });
  t.is(declared.pulled(), 0);
});

test('checkDeclaredSize and the error constructors', (t) => {
  t.is(checkDeclaredSize('50', 100), 50);
  t.is(checkDeclaredSize(100, 100), 100);
  t.is(checkDeclaredSize(undefined, 100), undefined);
  t.is(checkDeclaredSize('abc', 100), undefined);
  t.is(checkDeclaredSize('-5', 100), undefined);
  t.throws(() => checkDeclaredSize('101', 100), { message: 'File size 101 bytes exceeds the limit of 100 bytes.' });
  t.is(fileTooLarge(null, 52428800).message, 'File size exceeds the limit of 52428800 bytes.');
  t.like(fileTooLarge(60000000, 52428800), { reason: 'too_large', status: 400, details: { size: 60000000, limit: 52428800 } });
  t.like(typeNotAllowed('application/zip', ['image/*']), { reason: 'type_not_allowed', details: { mimetype: 'application/zip', allowed: ['image/*'] } });
});

test('a source that fails after the head fails the body with its error', async (t) => {
  let n = 0;
  const source = new Readable({
    read() {
      if (n++ < 3) this.push(Buffer.alloc(4096, 0x61));
      else this.destroy(new Error('connection reset'));
    },
  });
  const r = await inspect(source, opts());
  await t.throwsAsync(drain(r.body), { message: 'connection reset' });
  const gone = new Readable({ read() {} });
  gone.push(Buffer.alloc(5000, 0x61));
  const r2 = await inspect(gone, opts());
  gone.destroy();
  await t.throwsAsync(drain(r2.body), { message: /ended before it was complete/ });
});

test('200 MB stream through with bounded memory (backpressure kept)', async (t) => {
  const total = 200 * 1024 * 1024;
  const chunk = 64 * 1024;
  let sent = 0;
  let received = 0;
  let peakHeap = 0;
  let peakInFlight = 0;
  const baseline = process.memoryUsage().heapUsed;
  const source = new Readable({
    highWaterMark: chunk,
    read() {
      if (sent >= total) return void this.push(null);
      sent += chunk;
      // Bytes pulled from the source but not yet consumed: what the pipeline holds.
      peakInFlight = Math.max(peakInFlight, sent - received);
      if (sent % (64 * chunk) === 0) peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed - baseline);
      this.push(Buffer.allocUnsafe(chunk).fill(sent & 0xff));
    },
  });
  const r = await inspect(source, opts({ limit: total }));
  // A consumer slower than the producer: without backpressure everything would pile up.
  const sink = new Writable({
    highWaterMark: chunk,
    write(c: Buffer, _e, cb) {
      received += c.length;
      setImmediate(cb);
    },
  });
  await pipeline(r.body, sink);
  t.is(received, total);
  t.is(r.size(), total);
  t.true(peakInFlight <= 8 * chunk, `${peakInFlight} bytes were held between source and consumer`);
  t.true(peakHeap < 50 * 1024 * 1024, `the heap grew by ${Math.round(peakHeap / 1024 / 1024)} MB`);
});

// ---- MIME patterns ------------------------------------------------------------------------------

test('validMimePattern: the spec\'s rule, its rejected examples and valid forms', (t) => {
  for (const p of ['image/', 'image', '*/png', '', '/png', 'image/*pdf']) t.false(validMimePattern(p), `spec: ${JSON.stringify(p)}`);
  for (const p of ['image/png/x', ' image/png', 'image/png ', 'ima ge/png', '-image/png', 'image/-png', 'image/.png', '*', '*/', '/*', '**/*', 'image/**', 'image/p*', 'x_y/z', 'image\\png', '.*/.*'])
    t.false(validMimePattern(p), JSON.stringify(p));
  for (const p of ['image/png', 'image/*', '*/*', 'application/vnd.ms-excel', 'application/atom+xml', 'Image/PNG', 'video/3gpp', 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet', 'a/b'])
    t.true(validMimePattern(p), p);
  t.false(validMimePattern(`image/${'a'.repeat(200)}`));
});

test('mimeMatches: exact, type/* and */* patterns as plain strings', (t) => {
  t.true(mimeMatches('image/png', []));
  t.true(mimeMatches('image/png', ['image/png']));
  t.true(mimeMatches('image/png', ['IMAGE/PNG']));
  t.true(mimeMatches('image/png; charset=binary', ['image/png']));
  t.true(mimeMatches('image/png', ['text/plain', 'image/*']));
  t.true(mimeMatches('image/png', ['*/*']));
  t.false(mimeMatches('text/plain', ['image/*']));
  t.false(mimeMatches('imagex/png', ['image/*']));
  t.false(mimeMatches('image/png', ['image/pn']));
  t.false(mimeMatches('image/png', ['.*/.*', 'image/.*', 'image']));
});

test('isDocumentEditable: word processing, spreadsheets and presentations only', (t) => {
  for (const m of [DOCX, 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet', 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
    'application/vnd.oasis.opendocument.text', 'application/vnd.oasis.opendocument.spreadsheet', 'application/vnd.oasis.opendocument.presentation',
    'application/msword', 'application/vnd.ms-excel', 'application/vnd.ms-powerpoint', 'Application/MSWord; charset=binary', 'application/vnd.ms-excel.sheet.macroEnabled.12'])
    t.true(isDocumentEditable(m), m);
  for (const m of ['application/pdf', 'text/plain', 'image/png', 'application/zip', 'text/csv', 'application/vnd.oasis.opendocument.graphics', '', null, undefined]) t.false(isDocumentEditable(m), String(m));
});
