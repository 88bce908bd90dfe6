import type { Config } from '../../shared/config.ts';
import { acceptInvitation, invitationDetails } from '../../shared/invitations/invitation.accept.ts';
import { INVITATION_MESSAGES, type InvitationDeps } from '../../shared/invitations/invitation.mail.ts';
import * as invitations from '../../shared/invitations/invitation.service.ts';
import {
  AcceptBody,
  AcceptInput,
  InvitationCreate,
  InvitationDetails,
  InvitationListQuery,
  InvitationRef,
  InvitationResent,
  InvitationToken,
  InvitationView,
  OrgRef,
} from '../../shared/invitations/invitation.schemas.ts';
import type { Mailer } from '../../shared/mail/mailer.ts';
import { MessageBody, created, paginated, sendCreated, sendMessage, sendPage } from '../http/envelopes.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';
import { mailLinks } from '../http/mail-links.ts';
import type { AppContext } from '../http/types.ts';

const LIST = '/api/cloud/organizations/:org/invitations/';
const ONE = '/api/cloud/organizations/:org/invitations/:invitation/';
const alias = (path: string) => [path.replace('/api/cloud/', '/api/')];

export function invitationRoutes(config: Config, mailer: Mailer): RouteDef[] {
  const links = mailLinks(config, mailer);
  const deps = (ctx: AppContext): InvitationDeps => ({ ...links(ctx), ttlDays: config.invitationTtlDays });
  return [
    defineRoute({
      method: 'get',
      path: LIST,
      aliases: alias(LIST),
      operationId: 'invitations_list',
      summary: 'List the invitations of an organization',
      description: 'Needs `invite_members` on the organization. Newest first; `state` is derived (pending, accepted, cancelled, expired). Tokens are never listed.',
      tags: ['invitations'],
      auth: 'user',
      params: OrgRef,
      query: InvitationListQuery,
      responses: { 200: paginated(InvitationView) },
      async handler(ctx, { params, query }) {
        sendPage(ctx, await invitations.listInvitations(ctx.state.service(), params.org, query), config.publicUrl);
      },
    }),
    defineRoute({
      method: 'post',
      path: LIST,
      aliases: alias(LIST),
      operationId: 'invitations_create',
      summary: 'Invite someone to the organization (sends an e-mail)',
      description:
        'Needs `invite_members`; you can only grant permissions you hold. Groups by id or name; sites must belong to the organization. The e-mail carries the public details and accept links; it is sent before the invitation is saved for good (a mail failure saves nothing).',
      tags: ['invitations'],
      auth: 'user',
      params: OrgRef,
      body: InvitationCreate,
      responses: { 201: created(InvitationView) },
      async handler(ctx, { params, body }) {
        sendCreated(ctx, INVITATION_MESSAGES.created, await invitations.createInvitation(ctx.state.service(), params.org, body, deps(ctx)));
      },
    }),
    defineRoute({
      method: 'get',
      path: ONE,
      aliases: alias(ONE),
      operationId: 'invitations_retrieve',
      summary: 'Get an invitation by UUID (or integer id)',
      tags: ['invitations'],
      auth: 'user',
      params: InvitationRef,
      responses: { 200: InvitationView },
      async handler(ctx, { params }) {
        ctx.body = await invitations.getInvitation(ctx.state.service(), params.org, params.invitation);
      },
    }),
    defineRoute({
      method: 'delete',
      path: ONE,
      aliases: alias(ONE),
      operationId: 'invitations_destroy',
      summary: 'Cancel an invitation',
      description: 'Sets `cancelled_at`; its token can no longer be accepted. An accepted invitation cannot be cancelled (400).',
      tags: ['invitations'],
      auth: 'user',
      params: InvitationRef,
      responses: { 200: MessageBody },
      async handler(ctx, { params }) {
        await invitations.cancelInvitation(ctx.state.service(), params.org, params.invitation);
        sendMessage(ctx, INVITATION_MESSAGES.cancelled);
      },
    }),
    defineRoute({
      method: 'post',
      path: `${ONE}resend/`,
      aliases: alias(`${ONE}resend/`),
      operationId: 'invitations_resend',
      summary: 'Send the invitation e-mail again',
      description: 'The path takes the integer id (or the UUID). Same token; the expiry starts again. Refused (400) for accepted and cancelled invitations.',
      tags: ['invitations'],
      auth: 'user',
      params: InvitationRef,
      responses: { 200: InvitationResent },
      async handler(ctx, { params }) {
        const data = await invitations.resendInvitation(ctx.state.service(), params.org, params.invitation, deps(ctx));
        ctx.body = { status: 'success', message: INVITATION_MESSAGES.resent, data };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/cloud/invitations/:token/details/',
      operationId: 'invitations_public_details',
      summary: 'What an invitation offers (public: the token is the credential)',
      description: 'Organization, invitee, state, expiry, inviter, and the names of the permissions, groups and sites it grants.',
      tags: ['invitations'],
      auth: 'public',
      params: InvitationToken,
      responses: { 200: InvitationDetails },
      async handler(ctx, { params }) {
        ctx.body = await invitationDetails(ctx.state.em, params.token);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/cloud/invitations/:token/accept/',
      operationId: 'invitations_public_accept',
      summary: 'Accept an invitation (public: the token is the credential)',
      description:
        'Once only; 400 naming the state when it is accepted, cancelled or expired, 404 for an unknown token. When an account with the invited e-mail exists (`account_exists` in the details), it is that account that joins, and only with its own authentication: its bearer token, or its `password` in the body (401 otherwise). Else an account is created for the e-mail with the `username`, `password`, `first_name`, `last_name` given (validated like user creation); a generated password is returned once only when none is given. Counts against the sign-in rate limit.',
      tags: ['invitations'],
      auth: 'public',
      rateLimit: 'auth',
      params: InvitationToken,
      body: AcceptInput,
      responses: { 200: AcceptBody },
      async handler(ctx, { params, body }) {
        const data = await acceptInvitation({ em: ctx.state.em, actor: ctx.state.actor, input: body }, params.token);
        ctx.body = { status: 'success', message: INVITATION_MESSAGES.accepted, data };
      },
    }),
  ];
}
