// What a command can ask of the platform. Two implementations: remote (our own HTTP API)
// and direct (the shared services in-process). Every method returns the JSON body the API
// returns for that operation, so output, --json and exit codes do not depend on the mode.
import type { CreatedBody, MessageBody } from '../../shared/common/envelopes.ts';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import type { UserCreate, UserListQuery, UserUpdate, UserView } from '../../shared/users/user.schemas.ts';

export type BackendMode = 'remote' | 'direct';

/** List filters as the query string carries them (strings; the service validates them). */
export type UserListParams = { [K in keyof UserListQuery]?: string };

/** `whoami` in direct mode: the explicit elevation the CLI acts with. */
export interface SystemActorView {
  actor: 'system';
  name: string;
  access: string;
}

export interface Backend {
  readonly mode: BackendMode;
  /** GET /api/profile/ (remote); the system actor (direct). */
  whoami(): Promise<UserView | SystemActorView>;
  /** GET /api/cloud/users/ */
  listUsers(query: UserListParams): Promise<PageEnvelope<UserView>>;
  /** POST /api/cloud/users/ */
  createUser(input: UserCreate): Promise<CreatedBody<UserView>>;
  /** GET /api/cloud/users/:user/ */
  getUser(ref: string): Promise<UserView>;
  /** PUT /api/cloud/users/:user/ */
  updateUser(ref: string, input: UserUpdate): Promise<UserView>;
  /** DELETE /api/cloud/users/:user/ */
  deleteUser(ref: string): Promise<MessageBody>;
  /** Releases connections (direct: the pool, and the embedded PostgreSQL if this process started it). */
  close(): Promise<void>;
}
