// Every command of `platform`, by id (oclif's explicit command discovery: one module, no
// directory scan). An API operation's command is one entry of its topic's module
// (`operation()` in base.ts); the others are classes of their own.
import { APP_COMMANDS } from './commands/app.ts';
import { BUCKET_COMMANDS } from './commands/bucket.ts';
import { CLUSTER_COMMANDS } from './commands/cluster.ts';
import { DATA_COMMANDS } from './commands/data.ts';
import { DATASOURCE_COMMANDS } from './commands/datasource.ts';
import DemoCommand from './commands/demo.ts';
import { DOMAIN_COMMANDS } from './commands/domain.ts';
import { EDGE_COMMANDS } from './commands/edges.ts';
import { EVENT_COMMANDS, FUNCTION_COMMANDS } from './commands/function.ts';
import { GROUP_COMMANDS } from './commands/group.ts';
import { INVITE_COMMANDS } from './commands/invite.ts';
import LoginCommand from './commands/login.ts';
import LogoutCommand from './commands/logout.ts';
import { MEMBER_COMMANDS } from './commands/member.ts';
import MigrateCommand from './commands/migrate.ts';
import { OBJECT_COMMANDS } from './commands/object.ts';
import { WORKER_COMMANDS } from './commands/worker.ts';
import { ORG_COMMANDS } from './commands/org.ts';
import { POLICY_COMMANDS } from './commands/policy.ts';
import PruneCommand from './commands/prune.ts';
import { ROLE_COMMANDS } from './commands/role.ts';
import { SECRET_COMMANDS } from './commands/secret.ts';
import SecretRotateCommand from './commands/secret-rotate.ts';
import { SECRET_TYPE_COMMANDS } from './commands/secret-type.ts';
import ServeCommand from './commands/serve.ts';
import { SITE_COMMANDS } from './commands/site.ts';
import { SiteBackupCommand, SiteRestoreCommand } from './commands/site-backup.ts';
import { SiteMoveCommand } from './commands/site-move.ts';
import { SOCIAL_APP_COMMANDS } from './commands/social-app.ts';
import { STORAGE_COMMANDS } from './commands/storage.ts';
import { TABLE_COMMANDS } from './commands/table.ts';
import { USER_COMMANDS } from './commands/user.ts';
import WhoamiCommand from './commands/whoami.ts';

export const COMMANDS = {
  serve: ServeCommand,
  migrate: MigrateCommand,
  prune: PruneCommand,
  login: LoginCommand,
  logout: LogoutCommand,
  whoami: WhoamiCommand,
  demo: DemoCommand,
  ...USER_COMMANDS,
  ...ORG_COMMANDS,
  ...MEMBER_COMMANDS,
  ...INVITE_COMMANDS,
  ...GROUP_COMMANDS,
  ...SITE_COMMANDS,
  'site:backup': SiteBackupCommand,
  'site:restore': SiteRestoreCommand,
  'site:move': SiteMoveCommand,
  ...CLUSTER_COMMANDS,
  ...DOMAIN_COMMANDS,
  ...SECRET_COMMANDS,
  'secret:rotate': SecretRotateCommand,
  ...SECRET_TYPE_COMMANDS,
  ...APP_COMMANDS,
  ...DATASOURCE_COMMANDS,
  ...ROLE_COMMANDS,
  ...TABLE_COMMANDS,
  ...DATA_COMMANDS,
  ...EDGE_COMMANDS,
  ...POLICY_COMMANDS,
  ...BUCKET_COMMANDS,
  ...OBJECT_COMMANDS,
  ...STORAGE_COMMANDS,
  ...FUNCTION_COMMANDS,
  ...EVENT_COMMANDS,
  ...SOCIAL_APP_COMMANDS,
  ...WORKER_COMMANDS,
};
