// `platform domain …`: the host names of a site (/api/cloud/sites/{site}/domains/).
import type { DomainView } from '../../shared/sites/domain.schemas.ts';
import { api } from '../base.ts';
import { pageOf } from '../output.ts';

export const DOMAIN_COMMANDS = {
  'domain:list': api('site_domains_list', {
    examples: ['domain list --site shop', 'domain list --site shop --is-active all --json'],
    render: pageOf<DomainView>(['domain', 'domains'], 'domain slug is_primary:primary is_active:active is_verified:verified created_at:created'),
  }),
  'domain:add': api('site_domains_create', { args: ['domain'], examples: ['domain add shop.example.com --site shop', 'domain add shop.localhost --site shop --primary'] }),
  'domain:verify': api('site_domains_verify', { args: ['domain'], examples: ['domain verify shop.example.com --site shop'] }),
  'domain:get': api('site_domains_retrieve', { args: ['domain'], examples: ['domain get shop.example.com --site shop'] }),
  'domain:update': api('site_domains_partial_update', {
    args: ['domain'],
    rename: { domain: 'host' }, // the new host name: the body's `domain`
    examples: ['domain update www.example.com --site shop --primary', 'domain update old.example.com --site shop --host new.example.com --no-active'],
  }),
  'domain:delete': api('site_domains_destroy', { args: ['domain'], examples: ['domain delete old.example.com --site shop'] }),
};
