import { defineEntity, p } from '@mikro-orm/core';

export interface InvitationConfig {
  group?: (number | string)[];
  site?: { slug: string; permissions: string[] }[];
}

export const Invitation = defineEntity({
  name: 'Invitation',
  tableName: 'invitations',
  properties: {
    id: p.integer().primary().autoincrement(),
    uuid: p.uuid().onCreate(() => crypto.randomUUID()),
    token: p.uuid().onCreate(() => crypto.randomUUID()),
    organization_uuid: p.uuid(),
    invitee_identifier: p.string().length(254),
    permissions: p.json<string[]>().default('[]'),
    invitation_config: p.json<InvitationConfig>().default('{}'),
    invited_by_uuid: p.uuid().nullable(),
    created: p.datetime().onCreate(() => new Date()),
    modified: p.datetime().onCreate(() => new Date()).onUpdate(() => new Date()),
    expires_at: p.datetime(),
    sent_count: p.integer().default(0),
    last_sent_at: p.datetime().nullable(),
    accepted_at: p.datetime().nullable(),
    accepted_by_uuid: p.uuid().nullable(),
    cancelled_at: p.datetime().nullable(),
  },
});
export type InvitationEntity = InstanceType<typeof Invitation.class>;
