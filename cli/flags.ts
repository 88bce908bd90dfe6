// Flags shared by several commands.
import { Flags } from '@oclif/core';

export const pageFlags = {
  page: Flags.string({ summary: 'Page number, or "last" (default 1).' }),
  'page-size': Flags.string({ summary: 'Items per page (default 20, at most 100).' }),
};
