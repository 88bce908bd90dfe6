// /api/schema/ (OpenAPI 3.1), /api/docs/ (Swagger UI), /api/redoc/ (Redoc); the pages'
// assets come from the swagger-ui-dist and redoc npm packages (no CDN: works offline).
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
      '<div id="swagger-ui"></div><script src="/api/docs/assets/swagger-ui-bundle.js"></script><script src="/api/docs/assets/swagger-ui-standalone-preset.js"></script><script src="/api/docs/init.js"></script>',
    );
  });
  router.get('/api/docs/init.js', (ctx: AppContext) => {
    ctx.type = 'application/javascript; charset=utf-8';
    ctx.body = `window.ui = SwaggerUIBundle({ url: '/api/schema/', dom_id: '#swagger-ui', deepLinking: true, persistAuthorization: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset], layout: 'BaseLayout' });`;
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
