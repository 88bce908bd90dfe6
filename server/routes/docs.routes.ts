// /api/schema/ (OpenAPI 3.1), /api/docs/ (Swagger UI), /api/redoc/ (Redoc); the pages'
// assets come from the swagger-ui-dist and redoc npm packages (no CDN: works offline).
// /api/docs/ has a sign-in form above Swagger UI: it opens a browser session (POST
// /api/auth/session/, spec Part 1 §5.6) whose cookie then authenticates "Try it out", and sends the
// session's CSRF token on unsafe methods. Scripts are files of their own (the CSP allows no inline script).
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import Router from '@koa/router';
import { ROUTER_OPTIONS } from '../http/registry.ts';
import type { AppContext } from '../http/types.ts';

const require = createRequire(import.meta.url);
const swaggerDir = path.dirname(require.resolve('swagger-ui-dist/package.json'));
const redocBundle = path.join(path.dirname(require.resolve('redoc/package.json')), 'bundles', 'redoc.standalone.js');

const SWAGGER_ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'application/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'application/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

const page = (title: string, head: string, body: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${title}</title>${head}</head>
<body>${body}</body></html>`;

const SESSION_BAR = `<header id="session" style="font-family:sans-serif;padding:10px 20px;border-bottom:1px solid #ddd;display:flex;gap:8px;align-items:center;flex-wrap:wrap">
<form id="session-signin" hidden style="display:flex;gap:8px;align-items:center;flex-wrap:wrap;margin:0">
<label for="session-username">Sign in to try the API:</label>
<input id="session-username" name="username" autocomplete="username" placeholder="Username or e-mail" required>
<input id="session-password" name="password" type="password" autocomplete="current-password" placeholder="Password" required>
<button id="session-submit" type="submit">Sign in</button>
</form>
<div id="session-user" hidden>Signed in as <strong id="session-name"></strong> <button id="session-signout" type="button">Sign out</button></div>
<span id="session-error" role="alert" style="color:#b00"></span>
</header>`;

// The page's script: the session bar (the state comes from GET /api/auth/session/, which also
// gives the CSRF token), then Swagger UI, whose requests carry the token on unsafe methods.
const INIT_JS = `(() => {
  let csrf = null;
  const el = (id) => document.getElementById(id);
  const show = (session) => {
    csrf = session ? session.csrf_token : null;
    el('session-signin').hidden = !!session;
    el('session-user').hidden = !session;
    el('session-name').textContent = session ? session.username : '';
  };
  const call = (method, body) => fetch('/api/auth/session/', {
    method,
    credentials: 'same-origin',
    headers: Object.assign({ Accept: 'application/json' }, body ? { 'Content-Type': 'application/json' } : {}, csrf && method !== 'GET' ? { 'X-CSRF-Token': csrf } : {}),
    body: body ? JSON.stringify(body) : undefined,
  });
  call('GET').then(async (r) => show(r.ok ? await r.json() : null), () => show(null));
  el('session-signin').addEventListener('submit', async (event) => {
    event.preventDefault();
    el('session-error').textContent = '';
    const r = await call('POST', { username: el('session-username').value, password: el('session-password').value });
    const body = await r.json().catch(() => ({}));
    if (!r.ok) {
      el('session-error').textContent = body.message || body.detail || 'Sign-in failed (' + r.status + ').';
      return;
    }
    el('session-password').value = '';
    show(body);
  });
  el('session-signout').addEventListener('click', async () => {
    const r = await call('DELETE');
    // 401: the session had already ended. Any other failure leaves the session (and the cookie) as it was.
    if (r.ok || r.status === 401) show(null);
    else el('session-signout').textContent = 'Sign out failed (' + r.status + '), try again';
  });
  window.ui = SwaggerUIBundle({
    url: '/api/schema/', dom_id: '#swagger-ui', deepLinking: true, persistAuthorization: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset], layout: 'BaseLayout',
    requestInterceptor: (req) => {
      if (csrf && !/^(GET|HEAD|OPTIONS)$/i.test(req.method || 'GET')) req.headers['X-CSRF-Token'] = csrf;
      return req;
    },
  });
})();
`;

export function docsRouter(openapi: () => Record<string, unknown>): Router {
  const router = new Router(ROUTER_OPTIONS);
  let cached: string | undefined;
  router.get('/api/schema/', (ctx: AppContext) => {
    cached ??= JSON.stringify(openapi());
    ctx.type = 'application/vnd.oai.openapi+json; charset=utf-8';
    if (ctx.query.format === 'json' || ctx.accepts('application/vnd.oai.openapi+json', 'application/json')) ctx.type = 'application/json; charset=utf-8';
    ctx.body = cached;
  });
  router.get('/api/docs/', (ctx: AppContext) => {
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = page(
      'Platform API — Swagger UI',
      '<link rel="stylesheet" href="/api/docs/assets/swagger-ui.css">',
      `${SESSION_BAR}<div id="swagger-ui"></div><script src="/api/docs/assets/swagger-ui-bundle.js"></script><script src="/api/docs/assets/swagger-ui-standalone-preset.js"></script><script src="/api/docs/init.js"></script>`,
    );
  });
  router.get('/api/docs/init.js', (ctx: AppContext) => {
    ctx.type = 'application/javascript; charset=utf-8';
    ctx.body = INIT_JS;
  });
  router.get('/api/docs/assets/:file', (ctx: AppContext) => {
    const type = SWAGGER_ASSETS[ctx.params.file];
    if (!type) return; // falls through to 404
    ctx.type = type;
    ctx.set('Cache-Control', 'public, max-age=86400');
    ctx.body = fs.createReadStream(path.join(swaggerDir, ctx.params.file));
  });
  router.get('/api/redoc/', (ctx: AppContext) => {
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = page('Platform API — Redoc', '', '<redoc spec-url="/api/schema/"></redoc><script src="/api/redoc/redoc.standalone.js"></script>');
  });
  router.get('/api/redoc/redoc.standalone.js', (ctx: AppContext) => {
    ctx.type = 'application/javascript; charset=utf-8';
    ctx.set('Cache-Control', 'public, max-age=86400');
    ctx.body = fs.createReadStream(redocBundle);
  });
  return router;
}
