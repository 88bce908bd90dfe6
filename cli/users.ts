// What the user commands share: the field flags of create/update, the input they build, and
// how users are shown to a person.
import { Args, Flags } from '@oclif/core';
import type { PageEnvelope } from '../shared/common/pagination.ts';
import type { UserUpdate, UserView } from '../shared/users/user.schemas.ts';
import { type Column, table, when } from './output.ts';

export const userRefArg = Args.string({ name: 'user', description: 'Username or UUID', required: true });

export const userFieldFlags = {
  username: Flags.string({ summary: 'Username (letters, digits and . @ + - _).' }),
  email: Flags.string({ summary: 'E-mail address.' }),
  password: Flags.string({ summary: 'Password (prompted for, hidden, when omitted on a terminal).' }),
  'first-name': Flags.string({ summary: 'First name.' }),
  'last-name': Flags.string({ summary: 'Last name.' }),
  active: Flags.boolean({ summary: 'Whether the user can log in.', allowNo: true }),
  staff: Flags.boolean({ summary: 'Staff: administers ordinary users.', allowNo: true }),
  superuser: Flags.boolean({ summary: 'Superuser: every permission.', allowNo: true }),
};

type FieldFlags = {
  username?: string;
  email?: string;
  password?: string;
  'first-name'?: string;
  'last-name'?: string;
  active?: boolean;
  staff?: boolean;
  superuser?: boolean;
};

/** The request body: only the fields given on the command line. */
export function userInput(flags: FieldFlags): UserUpdate {
  const input: Record<string, unknown> = {
    username: flags.username,
    email: flags.email,
    password: flags.password,
    first_name: flags['first-name'],
    last_name: flags['last-name'],
    is_active: flags.active,
    is_staff: flags.staff,
    is_superuser: flags.superuser,
  };
  for (const key of Object.keys(input)) if (input[key] === undefined) delete input[key];
  return input as UserUpdate;
}

const COLUMNS: Column<UserView>[] = [
  { header: 'Username', get: (u) => u.username },
  { header: 'E-mail', get: (u) => u.email },
  { header: 'Name', get: (u) => [u.first_name, u.last_name].filter(Boolean).join(' ') },
  { header: 'Active', get: (u) => u.is_active },
  { header: 'Staff', get: (u) => u.is_staff },
  { header: 'Superuser', get: (u) => u.is_superuser },
  { header: 'Deleted', get: (u) => u.is_deleted },
  { header: 'Joined', get: (u) => when(u.date_joined) },
  { header: 'Last login', get: (u) => when(u.last_login) },
];

/** The page as a table, with a footer saying how many there are and how to see more. */
export function usersTable(page: PageEnvelope<UserView>): string {
  const pageOf = (link: string | null) => (link ? (new URL(link).searchParams.get('page') ?? '1') : undefined);
  const next = pageOf(page.next);
  let footer = `${page.count} user${page.count === 1 ? '' : 's'}`;
  if (page.results.length < page.count) footer += `, ${page.results.length} shown`;
  if (next) footer += ` (next: --page ${next})`;
  return page.results.length ? `${table(page.results, COLUMNS)}\n\n${footer}` : footer;
}
