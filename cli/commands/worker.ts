// `platform worker …`: frontend workers of a site (/api/frontend_workers/; docs/frontend-workers.md).
// `worker deploy DIR` packs a folder of built files itself (a .tar.gz: cli/pack.ts) or takes an
// archive as it is, then creates the worker with it or uploads a new build of an existing one
// (a folder by manifest: only the files whose content the site lacks), streaming the upload with
// progress on stderr.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Args, Flags } from '@oclif/core';
import { DomainError, fieldError } from '../../shared/errors.ts';
import { subdomainFromName } from '../../shared/workers/names.ts';
import type { BuildView, WorkerListItem, WorkerView } from '../../shared/workers/worker.schemas.ts';
import { path as apiPath } from '../api.ts';
import { multipartUpload } from '../multipart.ts';
import { api, ApiCommand } from '../base.ts';
import { siteFlag } from '../flags.ts';
import { columns, keyValues, table, when } from '../output.ts';
import { packDirectory, siteFiles } from '../pack.ts';
import { bytes, plural, progress, sentLine } from '../tables.ts';

interface Answer<T> {
  message: string;
  data: T;
}
interface ListAnswer<T> extends Answer<T[]> {
  total: number;
  page: number;
  total_pages: number;
}

const ARCHIVE = /\.(zip|tar|tar\.gz|tgz)$/i;

const workerLines = (w: WorkerView) =>
  keyValues({ id: w.id, slug: w.slug, name: w.name, address: w.web_url, active_build: w.active_build_uuid ?? '–', app: w.app_name ?? '–', spa_fallback: w.spa_fallback, updated_at: when(w.updated_at) });

const buildLines = (b: BuildView) =>
  keyValues({ build: b.uuid, title: b.title, status: b.status, active: b.is_active, files: `${b.file_count} (${b.stored_files} new)`, size: bytes(b.size), preview: b.preview_url ?? '–', ...(b.error ? { error: b.error } : {}) });

const listed = <T>(what: [string, string], spec: string) => (body: ListAnswer<T>) =>
  body.data.length ? [table(body.data, columns<T>(spec)), `${plural(body.total, what[0], what[1])} (page ${body.page} of ${body.total_pages}).`] : `No ${what[1]}.`;

class WorkerDeployCommand extends ApiCommand<typeof WorkerDeployCommand> {
  static override summary = 'Deploy a folder of built files (or an archive) as a build of a frontend worker.';
  static override description =
    'A folder is packed into a .tar.gz here (symbolic links refused); an archive (.zip, .tar, .tar.gz, .tgz) is sent as it is. The worker is --subdomain (its slug), else made from --name: when it exists, a new build is uploaded; otherwise the worker is created with it (--name required). A folder for an existing worker goes by manifest: every file is hashed here, the site says which contents it lacks (POST …/builds/missing/), and only those files are sent. --activate makes the build the active one once ready; without it the build is reachable at its preview address. Progress on stderr. --json prints {worker, build}.';
  static override examples = [
    '<%= config.bin %> worker deploy ./dist --name shop --subdomain shop --activate --site shop_prod',
    '<%= config.bin %> worker deploy build.zip --subdomain shop --title "Release 42" --site shop_prod --json',
  ];
  static override args = { source: Args.string({ description: 'A folder of built files, or a .zip/.tar/.tar.gz/.tgz archive', required: true }) };
  static override flags = {
    site: siteFlag,
    name: Flags.string({ summary: 'The worker\'s name (required to create it).' }),
    subdomain: Flags.string({ summary: 'The worker\'s subdomain (unprefixed), which is its slug; default: made from --name.' }),
    title: Flags.string({ summary: 'The build\'s title (default: the archive\'s or folder\'s name).' }),
    activate: Flags.boolean({ summary: 'Make the build the active one once it is ready.' }),
    app: Flags.string({ summary: 'The app id (on creation).' }),
  };

  async run(): Promise<{ worker: WorkerView; build: BuildView | null }> {
    const f = this.flags;
    const source = this.args.source;
    const st = fs.statSync(source, { throwIfNoEntry: false });
    if (!st) throw fieldError('source', `Cannot read ${source}: no such file or folder.`);
    if (!st.isDirectory() && !ARCHIVE.test(source)) throw fieldError('source', `${source} is neither a folder nor a .zip, .tar, .tar.gz or .tgz archive.`);
    const slug = f.subdomain ?? (f.name ? subdomainFromName(f.name) : undefined);
    if (!slug) throw fieldError('subdomain', 'Give --subdomain (or --name) to name the worker.');
    const api = await this.api();

    let existing = true;
    try {
      await api.call({ method: 'GET', site: f.site, path: apiPath`/api/frontend_workers/${slug}/` });
    } catch (err) {
      if (!(err instanceof DomainError) || err.status !== 404) throw err;
      existing = false;
    }
    if (!existing && !f.name) throw fieldError('name', `There is no worker "${slug}": give --name to create it.`);

    // A folder for an existing worker: its manifest first, then only the contents the site lacks (Netlify-style).
    let manifest: Record<string, string> | undefined;
    let only: Set<string> | undefined;
    if (st.isDirectory() && existing) {
      const files = await siteFiles(source);
      manifest = {};
      for (const name of files) manifest[name] = createHash('sha256').update(fs.readFileSync(path.join(source, name))).digest('hex');
      const { missing } = (await api.call<Answer<{ missing: string[] }>>({ method: 'POST', site: f.site, path: apiPath`/api/frontend_workers/${slug}/builds/missing/`, body: { hashes: [...new Set(Object.values(manifest))] } })).data;
      const lacking = new Set(missing);
      only = new Set(files.filter((name) => lacking.has(manifest![name]!) || name === '_redirects' || name === '_headers'));
      this.info(`${plural(files.length, 'file')}: ${only.size} to send, the site holds the others.`);
    }

    let archive: { path: string; name: string; size: number } | undefined = { path: source, name: path.basename(source), size: st.size };
    let scratch: string | undefined;
    if (st.isDirectory()) {
      archive = undefined;
      if (!only || only.size) {
        scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-deploy-'));
        const out = path.join(scratch, `${path.basename(path.resolve(source)) || 'site'}.tar.gz`);
        const tick = progress((line) => this.info(line));
        const packed = await packDirectory(source, out, (files, n) => tick(() => `  packing: ${plural(files, 'file')}, ${bytes(n)}…`), only);
        this.info(`Packed ${plural(packed.files, 'file')} (${bytes(packed.bytes)}) from ${source}.`);
        archive = { path: out, name: path.basename(out), size: fs.statSync(out).size };
      }
    }
    try {
      this.info(`Uploading ${archive ? `${archive.name} (${bytes(archive.size)})` : 'the manifest'} to ${existing ? `worker ${slug}` : `a new worker ${slug}`}…`);
      const tick = progress((line) => this.info(line));
      const upload = multipartUpload(
        {
          ...(existing ? {} : { name: f.name, subdomain_input: slug, app: f.app }),
          build_title: f.title ?? (st.isDirectory() ? path.basename(path.resolve(source)) : undefined),
          set_active: f.activate ? 'true' : undefined,
          manifest: manifest && JSON.stringify(manifest),
        },
        archive,
        (n) => tick(() => sentLine(n, archive!.size)),
      );
      let worker: WorkerView;
      let build: BuildView | null;
      if (existing) {
        build = (await api.call<Answer<BuildView>>({ method: 'POST', site: f.site, path: apiPath`/api/frontend_workers/${slug}/builds/`, upload })).data;
        worker = (await api.call<Answer<WorkerView>>({ method: 'GET', site: f.site, path: apiPath`/api/frontend_workers/${slug}/` })).data;
      } else {
        const made = (await api.call<Answer<WorkerView & { build: BuildView | null }>>({ method: 'POST', site: f.site, path: '/api/frontend_workers/', upload })).data;
        ({ build, ...worker } = made);
      }
      this.log(existing ? `Build uploaded to ${worker.slug}.` : `Worker ${worker.slug} created.`);
      if (build) this.log(buildLines(build));
      this.log(build?.is_active ? `Live at ${worker.web_url}` : `Not active: check it at its preview address, then \`platform worker activate ${build?.uuid} --worker ${worker.slug} --site ${f.site}\`.`);
      return { worker, build };
    } finally {
      if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
    }
  }
}

const onWorker = { rename: { slug: 'worker' } };

export const WORKER_COMMANDS = {
  'worker:deploy': WorkerDeployCommand,
  'worker:list': api('frontend_workers_list', {
    examples: ['worker list --site shop_prod', 'worker list --search shop --ordering -updated_at --site shop_prod --json'],
    render: listed<WorkerListItem>(['worker', 'workers'], 'slug name web_url:address active_build_uuid:active_build app_name:app'),
  }),
  'worker:get': api('frontend_workers_retrieve', { args: ['slug'], examples: ['worker get shop --site shop_prod'], render: (b: Answer<WorkerView>) => workerLines(b.data) }),
  'worker:check': api('frontend_workers_check_subdomain', {
    args: ['subdomain'],
    examples: ['worker check shop --site shop_prod', 'worker check shop --is-internal false --domain example.com --site shop_prod --json'],
    render: (b: Answer<{ full_domain: string; available: boolean; message: string; suggestions?: { subdomain: string; full_domain: string; reason: string }[] }>) => [
      b.data.message,
      ...(b.data.suggestions?.length ? ['Suggestions:', table(b.data.suggestions, columns('subdomain full_domain:address reason'))] : []),
    ],
  }),
  'worker:update': api('frontend_workers_partial_update', {
    args: ['slug'],
    examples: ['worker update shop --subdomain-input store --site shop_prod', 'worker update shop --no-spa-fallback --site shop_prod'],
    render: (b: Answer<WorkerView>) => ['Worker updated.', workerLines(b.data)],
  }),
  'worker:delete': api('frontend_workers_destroy', { args: ['slug'], examples: ['worker delete shop --site shop_prod'], render: () => 'Worker deleted.' }),
  'worker:builds': api('frontend_workers_builds_list', {
    args: ['slug'],
    examples: ['worker builds shop --site shop_prod'],
    render: listed<BuildView>(['build', 'builds'], 'uuid title status is_active:active file_count:files stored_files:new created_at:created'),
  }),
  'worker:activate': api('frontend_workers_builds_activate', {
    ...onWorker,
    args: ['build'],
    summary: 'Make a build the active one (deploy it, or roll back to an older one).',
    examples: ['worker activate 0b6f…-uuid --worker shop --site shop_prod'],
    render: (b: Answer<WorkerView>) => [`Build ${b.data.active_build_uuid} is active.`, workerLines(b.data)],
  }),
  'worker:delete-build': api('frontend_workers_builds_destroy', { ...onWorker, args: ['build'], examples: ['worker delete-build 0b6f…-uuid --worker shop --site shop_prod'], render: () => 'Build deleted.' }),
};
