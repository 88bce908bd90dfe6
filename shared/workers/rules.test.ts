// `_redirects` and `_headers`: parsing, refusals (with line numbers), matching (splats,
// placeholders, trailing slashes), targets (encoding, no open redirect) and linear-time matching.
import test from 'ava';
import { DomainError } from '../errors.ts';
import { MAX_HEADER_RULES, MAX_REDIRECT_RULES, matchHeaders, matchRedirect, parseHeaders, parseRedirects } from './rules.ts';

const fileErrors = (fn: () => unknown): string[] => {
  const err = (() => {
    try {
      fn();
    } catch (e) {
      return e;
    }
    throw new Error('expected a refusal');
  })();
  if (!(err instanceof DomainError) || err.status !== 400) throw err;
  return err.errors!.file!;
};

test('parseRedirects: from to [status][!], default 301, comments and blank lines', (t) => {
  const rules = parseRedirects('# comment\n\n/old /new\n  /a   /b 302  # trailing comment\r\n/c /d 200!\n/gone /x 410\n');
  t.deepEqual(
    rules.map(({ from, to, status, force }) => ({ from, to, status, force })),
    [
      { from: '/old', to: '/new', status: 301, force: false },
      { from: '/a', to: '/b', status: 302, force: false },
      { from: '/c', to: '/d', status: 200, force: true },
      { from: '/gone', to: '/x', status: 410, force: false },
    ],
  );
  t.deepEqual(parseRedirects(''), []);
  // The compiled rules are data: they survive the manifest's JSON round trip.
  const back = JSON.parse(JSON.stringify(parseRedirects('/blog/:year/* /news/:year/:splat 302'))) as ReturnType<typeof parseRedirects>;
  t.is(matchRedirect(back, '/blog/2024/a/b')?.target, '/news/2024/a/b');
});

test('parseRedirects refuses, naming each bad line: proxies, bad statuses, extra tokens, query conditions', (t) => {
  const errors = fileErrors(() =>
    parseRedirects(
      [
        '/ok /fine',
        '/api/* https://internal.example/:splat 200',
        '/a /b 201',
        '/a /b 301 Country=us',
        '/store id=:id /blog/:id 301',
        '/only-from',
        '/x ftp://host/file 301',
        '/x //evil.example 301',
        '/e https://example.com/x 404',
        '/q?x=1 /y',
        '/a/* /b/:splat 30x',
        '/:a/:a /b',
        '/x/:id.html /y',
        '/*/:id /y',
        '/a/*/b/* /c',
        'https://old.example/* /new',
        '/x /y/:splat',
      ].join('\n'),
    ),
  );
  t.is(errors.length, 16);
  t.regex(errors[0]!, /^_redirects line 2: .*absolute URL with status 200.*proxying is not supported/);
  t.regex(errors[1]!, /^_redirects line 3: "201" is not a supported status/);
  t.regex(errors[2]!, /^_redirects line 4: "Country=us" after the status: query-parameter matching and conditions/);
  t.regex(errors[3]!, /^_redirects line 5: .*query-parameter condition/);
  t.regex(errors[4]!, /^_redirects line 6: .*target is missing/);
  t.regex(errors[5]!, /^_redirects line 7: .*must be a path starting with a single "\/" or an absolute http\(s\) URL/);
  t.regex(errors[6]!, /^_redirects line 8: /);
  t.regex(errors[7]!, /^_redirects line 9: .*only redirects/);
  t.regex(errors[8]!, /^_redirects line 10: .*query string/);
  t.regex(errors[9]!, /^_redirects line 11: "30x"/);
  t.regex(errors[10]!, /^_redirects line 12: ":a" appears twice/);
  t.regex(errors[11]!, /^_redirects line 13: .*whole path segment/);
  t.regex(errors[12]!, /^_redirects line 14: .*placeholders must come before the splat/);
  t.regex(errors[13]!, /^_redirects line 15: .*more than one "\*"/);
  t.regex(errors[14]!, /^_redirects line 16: .*must be a path starting with "\/"/);
  t.regex(errors[15]!, /^_redirects line 17: .*":splat" but "from" has no "\*"/);
  // Redirects (not rewrites) to absolute URLs are fine.
  t.is(parseRedirects('/x https://example.com/ 308\n/x/* https://example.com/:splat 302')[1]!.status, 302);
});

test(`parseRedirects: at most ${MAX_REDIRECT_RULES} rules`, (t) => {
  const lines = (n: number) => Array.from({ length: n }, (_, i) => `/r${i} /t${i}`).join('\n');
  t.is(parseRedirects(lines(MAX_REDIRECT_RULES)).length, MAX_REDIRECT_RULES);
  t.regex(fileErrors(() => parseRedirects(lines(MAX_REDIRECT_RULES + 1)))[0]!, /line 1001: more than 1000 rules/);
});

test('matchRedirect: literal, splat, placeholders, trailing slash, /dir/* matches /dir, first match wins', (t) => {
  const rules = parseRedirects(
    ['/exact /e', '/blog/* /news/:splat', '/u/:user/posts/:id /p/:id?by=:user 302', '/files/*.pdf /docs/:splat.pdf', '/* /fallback 200'].join('\n'),
  );
  const target = (path: string) => matchRedirect(rules, path)?.target;
  t.is(target('/exact'), '/e');
  t.is(target('/exact/'), '/e');
  t.is(target('/blog/a/b/c'), '/news/a/b/c');
  t.is(target('/blog/a/'), '/news/a');
  t.is(target('/blog'), '/news/');
  t.is(target('/blogger'), '/fallback');
  t.is(target('/u/ann/posts/7'), '/p/7?by=ann');
  t.is(target('/u/ann/posts/'), '/fallback', 'a placeholder needs a non-empty segment');
  t.is(target('/u/ann/x/posts/7'), '/fallback', 'a placeholder is one segment');
  t.is(target('/files/a/b.pdf'), '/docs/a/b.pdf');
  t.is(target('/files/a/b.pdfx'), '/fallback');
  t.is(matchRedirect(rules, '/exactly')?.rule.status, 200);
  t.is(matchRedirect(parseRedirects('/a /b'), '/c'), null);
});

test('matchRedirect: captures are percent-encoded; a path target never becomes protocol-relative', (t) => {
  const rules = parseRedirects('/go/* /:splat 302\n/s/:q https://search.example/?q=:q 302\n/café /thé');
  t.is(matchRedirect(rules, '/go/a b/ü?#')?.target, '/a%20b/%C3%BC%3F%23');
  t.is(matchRedirect(rules, '/go//evil.example/x')?.target, '/evil.example/x');
  t.is(matchRedirect(rules, '/s/a&b=c')?.target, 'https://search.example/?q=a%26b%3Dc');
  // Patterns match the decoded path, written decoded or encoded; non-ASCII targets are encoded.
  t.is(matchRedirect(rules, '/café')?.target, '/th%C3%A9');
  t.is(matchRedirect(parseRedirects('/caf%C3%A9 /x'), '/café')?.target, '/x');
  // A colon that is no placeholder of `from` stays literal (a port, a colon in a path).
  t.is(matchRedirect(parseRedirects('/a/:id https://h.example:8443/x:y/:id 301'), '/a/1')?.target, 'https://h.example:8443/x:y/1');
});

test('parseHeaders: patterns and indented lines; repeated names joined; later rules override', (t) => {
  const rules = parseHeaders(
    [
      '# security',
      '/*',
      '  X-Frame-Options: DENY',
      '  Link: </a.css>; rel=preload',
      '  Link: </b.js>; rel=preload',
      '',
      '/assets/*',
      '\tCache-Control: public, max-age=60',
      '  x-frame-options: SAMEORIGIN',
      '/*.json',
      '  Content-Type: application/json',
    ].join('\n'),
  );
  t.is(rules.length, 3);
  t.deepEqual(rules[0]!.headers, [
    ['X-Frame-Options', 'DENY'],
    ['Link', '</a.css>; rel=preload, </b.js>; rel=preload'],
  ]);
  t.deepEqual(matchHeaders(rules, '/index.html'), rules[0]!.headers);
  t.deepEqual(matchHeaders(rules, '/assets/app.js'), [
    ['x-frame-options', 'SAMEORIGIN'],
    ['Link', '</a.css>; rel=preload, </b.js>; rel=preload'],
    ['Cache-Control', 'public, max-age=60'],
  ]);
  t.deepEqual(matchHeaders(rules, '/assets/data.json').at(-1), ['Content-Type', 'application/json']);
  t.deepEqual(matchHeaders(parseHeaders('/only\n  A: 1'), '/other'), []);
  t.is(parseHeaders('\uFEFF/*\n  A: 1').length, 1, 'a byte-order mark is not indentation');
});

test('parseHeaders refuses Set-Cookie, framing headers, bad names and values, orphans and empty rules', (t) => {
  const errors = fileErrors(() =>
    parseHeaders(
      [
        '  X-Orphan: 1',
        '/*',
        '  Set-Cookie: a=b',
        '  Content-Length: 10',
        '  Transfer-Encoding: chunked',
        '  Bad Name: x',
        '  X-Ctl: a\u0001b',
        '  X-Empty:',
        '  no colon here',
        '  Content-Encoding: br',
        '  ETag: "x"',
        '  ! X-Detach',
        'https://example.com/*',
        '  A: b',
      ].join('\n'),
    ),
  );
  t.regex(errors[0]!, /^_headers line 1: a header line comes before any path pattern/);
  t.regex(errors[1]!, /^_headers line 3: Set-Cookie cannot be set: cookies are never set by static hosting/);
  t.regex(errors[2]!, /^_headers line 4: Content-Length cannot be set/);
  t.regex(errors[3]!, /^_headers line 5: Transfer-Encoding cannot be set/);
  t.regex(errors[4]!, /^_headers line 6: "Bad Name" is not a valid header name/);
  t.regex(errors[5]!, /^_headers line 7: .*control or non-ASCII/);
  t.regex(errors[6]!, /^_headers line 8: X-Empty has no value/);
  t.regex(errors[7]!, /^_headers line 9: .*not a "Name: value" header line/);
  t.regex(errors[8]!, /^_headers line 10: Content-Encoding cannot be set/);
  t.regex(errors[9]!, /^_headers line 11: ETag cannot be set/);
  t.regex(errors[10]!, /^_headers line 12: detaching headers/);
  t.regex(errors[11]!, /^_headers line 13: .*must be a path starting with "\/"/);
  t.is(errors.length, 12);
  t.deepEqual(fileErrors(() => parseHeaders('/a\n/b\n  X: 1')), ['_headers line 1: "/a" has no header lines under it (indent its "Name: value" lines).']);
  const many = Array.from({ length: MAX_HEADER_RULES + 1 }, (_, i) => `/p${i}\n  X: ${i}`).join('\n');
  t.regex(fileErrors(() => parseHeaders(many))[0]!, /more than 100 rules/);
});

test('matching is linear: many stars, many placeholders, long paths', (t) => {
  // A backtracking glob takes exponential time on `*a*a*…*b` against `aaaa…`.
  const stars = parseHeaders(`/${'*a'.repeat(200)}*b\n  X: 1`);
  const longA = `/${'a'.repeat(100_000)}`;
  const redirects = parseRedirects(`/${Array.from({ length: 300 }, (_, i) => `:p${i}`).join('/')}/* /x`);
  const segments = `/${'a/'.repeat(50_000)}`;
  const started = performance.now();
  for (let i = 0; i < 20; i++) {
    t.deepEqual(matchHeaders(stars, longA), []);
    t.deepEqual(matchHeaders(stars, `${longA}b`), [['X', '1']]);
    t.is(matchRedirect(redirects, segments)?.target, '/x');
    t.is(matchRedirect(redirects, `/${'a/'.repeat(299)}`), null);
  }
  t.true(performance.now() - started < 1000, `took ${performance.now() - started} ms`);
});
