// Cloud-console pagination (spec Part 1 §8.1): `page` default 1, `page_size` default 20,
// at most 100 (larger values are clamped); body {count, next, previous, results}.
import { Type } from '@sinclair/typebox';
import { DomainError } from '../errors.ts';

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

/** The `page` and `page_size` parameters of a list's query schema (spread into it). */
export const PageParams = {
  page: Type.Optional(Type.String({ description: 'Page number (default 1)' })),
  page_size: Type.Optional(Type.String({ description: `Items per page (default ${DEFAULT_PAGE_SIZE}, at most ${MAX_PAGE_SIZE})` })),
};

export interface PageRequest {
  page: number;
  pageSize: number;
}

export interface Page<T> extends PageRequest {
  count: number;
  results: T[];
  /** Set when the request paged by `limit`/`offset`: the links then carry those. */
  offset?: number;
  /** Whether a next page exists, when the query knows it without the count (one row more than the page was read). */
  hasNext?: boolean;
}

export interface PageEnvelope<T> {
  count: number;
  next: string | null;
  previous: string | null;
  results: T[];
}

const invalidPage = () => new DomainError('NOT_FOUND', 'Invalid page.', { detail: 'Invalid page.' });

export function parsePageRequest(query: { page?: unknown; page_size?: unknown }): PageRequest {
  let page = 1;
  if (query.page !== undefined && query.page !== '') {
    const s = String(query.page);
    if (s === 'last') page = Number.MAX_SAFE_INTEGER;
    else if (/^\d+$/.test(s) && Number(s) >= 1) page = Number(s);
    else throw invalidPage();
  }
  let pageSize = DEFAULT_PAGE_SIZE;
  if (query.page_size !== undefined && query.page_size !== '') {
    const s = String(query.page_size);
    if (/^\d+$/.test(s) && Number(s) >= 1) pageSize = Math.min(Number(s), MAX_PAGE_SIZE);
  }
  return { page, pageSize };
}

export const pageOffset = (req: PageRequest): number => (req.page - 1) * req.pageSize;

/** A page past the end is a 404 (page 1 of an empty list is not). `page=last` resolves here. */
export function resolvePage(req: PageRequest, count: number): PageRequest {
  const lastPage = Math.max(1, Math.ceil(count / req.pageSize));
  if (req.page === Number.MAX_SAFE_INTEGER) return { ...req, page: lastPage };
  if (req.page > lastPage) throw invalidPage();
  return req;
}

/** Builds the body with absolute `next`/`previous` links derived from the request URL. */
export function pageEnvelope<T>(page: Page<T>, requestUrl: string): PageEnvelope<T> {
  const link = (n: number): string => {
    const url = new URL(requestUrl);
    if (n === 1) url.searchParams.delete('page');
    else url.searchParams.set('page', String(n));
    return url.toString();
  };
  if (page.offset !== undefined) {
    const at = (offset: number): string => {
      const url = new URL(requestUrl);
      url.searchParams.set('limit', String(page.pageSize));
      url.searchParams.set('offset', String(offset));
      return url.toString();
    };
    return {
      count: page.count,
      next: (page.hasNext ?? page.offset + page.pageSize < page.count) ? at(page.offset + page.pageSize) : null,
      previous: page.offset > 0 ? at(Math.max(0, page.offset - page.pageSize)) : null,
      results: page.results,
    };
  }
  const hasNext = page.hasNext ?? page.page * page.pageSize < page.count;
  return {
    count: page.count,
    next: hasNext ? link(page.page + 1) : null,
    previous: page.page > 1 ? link(page.page - 1) : null,
    results: page.results,
  };
}
