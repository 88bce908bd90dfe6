// Secrets and secret types of a site (scope 'tenant': a site host or /sites/{schema}/…).
import type { SecretKeyring } from '../../shared/secrets/crypto.ts';
import { SECRET_MESSAGES } from '../../shared/secrets/secret.messages.ts';
import { SecretTypeCreate, SecretTypeListQuery, SecretTypeRef, SecretTypeUpdate, SecretTypeView } from '../../shared/secrets/secret-type.schemas.ts';
import * as types from '../../shared/secrets/secret-type.service.ts';
import {
  SecretAppQuery, SecretCreate, SecretHistoryItem, SecretHistoryQuery, SecretListItem, SecretListQuery, SecretRef, SecretUpdate, SecretView,
} from '../../shared/secrets/secret.schemas.ts';
import * as secrets from '../../shared/secrets/secret.service.ts';
import { MessageBody, created, paginated, sendCreated, sendMessage, sendPage } from '../http/envelopes.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';

const WHO = 'Site administrators (superusers and staff of the site) and holders of the site\'s `*_secret` permissions.';

export function secretRoutes(keyring: SecretKeyring, publicUrl: string | undefined): RouteDef[] {
  const base = { auth: 'user' as const, scope: 'tenant' as const };
  return [
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/secret-types/',
      operationId: 'secret_types_list',
      summary: 'List secret types',
      description: WHO,
      tags: ['secrets'],
      query: SecretTypeListQuery,
      responses: { 200: paginated(SecretTypeView) },
      async handler(ctx, { query }) {
        sendPage(ctx, await types.listSecretTypes(ctx.state.service(), query), publicUrl);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/api/secret-types/',
      operationId: 'secret_types_create',
      summary: 'Create a secret type',
      description: 'The slug is made from the name. `json_schema` must compile as a JSON Schema (Ajv).',
      tags: ['secrets'],
      body: SecretTypeCreate,
      responses: { 201: created(SecretTypeView) },
      async handler(ctx, { body }) {
        sendCreated(ctx, SECRET_MESSAGES.typeCreated, await types.createSecretType(ctx.state.service(), body));
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/secret-types/:slug/',
      operationId: 'secret_types_retrieve',
      summary: 'Get a secret type by slug or UUID',
      tags: ['secrets'],
      params: SecretTypeRef,
      responses: { 200: SecretTypeView },
      async handler(ctx, { params }) {
        ctx.body = await types.getSecretType(ctx.state.service(), params.slug);
      },
    }),
    defineRoute({
      ...base,
      method: 'put',
      path: '/api/secret-types/:slug/',
      operationId: 'secret_types_update',
      summary: 'Update a secret type',
      tags: ['secrets'],
      params: SecretTypeRef,
      body: SecretTypeUpdate,
      responses: { 200: SecretTypeView },
      async handler(ctx, { params, body }) {
        ctx.body = await types.updateSecretType(ctx.state.service(), params.slug, body);
      },
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/api/secret-types/:slug/',
      operationId: 'secret_types_destroy',
      summary: 'Delete a secret type',
      description: 'Refused (400) while secrets use it.',
      tags: ['secrets'],
      params: SecretTypeRef,
      responses: { 200: MessageBody },
      async handler(ctx, { params }) {
        await types.deleteSecretType(ctx.state.service(), params.slug);
        sendMessage(ctx, SECRET_MESSAGES.typeDeleted);
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/secrets/',
      operationId: 'secrets_list',
      summary: 'List secrets (values masked)',
      description: `Values are never decrypted in lists. ${WHO}`,
      tags: ['secrets'],
      query: SecretListQuery,
      responses: { 200: paginated(SecretListItem) },
      async handler(ctx, { query }) {
        sendPage(ctx, await secrets.listSecrets(ctx.state.service(), query), publicUrl);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/api/secrets/',
      operationId: 'secrets_create',
      summary: 'Create a secret',
      description: 'With `secret_type`, the value must satisfy the type\'s JSON Schema. With `app`, the secret belongs to that app and overrides the tenant-wide one of the same key. The response masks the value.',
      tags: ['secrets'],
      body: SecretCreate,
      responses: { 201: created(SecretListItem) },
      async handler(ctx, { body }) {
        sendCreated(ctx, SECRET_MESSAGES.created, await secrets.createSecret(ctx.state.service(), keyring, body));
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/secrets/:key/',
      operationId: 'secrets_retrieve',
      summary: 'Get a secret with its value',
      description: 'With `?app=`, the app\'s secret; when the app has none, the tenant-wide one with `inherited_from: "tenant"`.',
      tags: ['secrets'],
      params: SecretRef,
      query: SecretAppQuery,
      responses: { 200: SecretView },
      async handler(ctx, { params, query }) {
        ctx.body = await secrets.getSecret(ctx.state.service(), keyring, params.key, query);
      },
    }),
    defineRoute({
      ...base,
      method: 'put',
      path: '/api/secrets/:key/',
      operationId: 'secrets_update',
      summary: 'Update a secret',
      description: 'The secret of exactly this key and `?app=` (an inherited tenant-wide secret is not the app\'s: create an override with POST). The response masks the value.',
      tags: ['secrets'],
      params: SecretRef,
      query: SecretAppQuery,
      body: SecretUpdate,
      responses: { 200: SecretListItem },
      async handler(ctx, { params, query, body }) {
        ctx.body = await secrets.updateSecret(ctx.state.service(), keyring, params.key, query, body);
      },
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/api/secrets/:key/',
      operationId: 'secrets_destroy',
      summary: 'Delete a secret',
      tags: ['secrets'],
      params: SecretRef,
      query: SecretAppQuery,
      responses: { 200: MessageBody },
      async handler(ctx, { params, query }) {
        await secrets.deleteSecret(ctx.state.service(), params.key, query);
        sendMessage(ctx, SECRET_MESSAGES.deleted);
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/secrets/:key/history/',
      operationId: 'secrets_history',
      summary: 'Audit history of a secret',
      description: 'Every create, update and delete with the actor and the time, newest first; never values. Kept after deletion.',
      tags: ['secrets'],
      params: SecretRef,
      query: SecretHistoryQuery,
      responses: { 200: paginated(SecretHistoryItem) },
      async handler(ctx, { params, query }) {
        sendPage(ctx, await secrets.secretHistory(ctx.state.service(), params.key, query), publicUrl);
      },
    }),
  ];
}
