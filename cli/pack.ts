// Packs a built site's folder into a .tar.gz for a frontend worker's upload (node-tar's `tar.c`).
// Decisions: the folder is walked first (lstat, nothing followed) and refused when it is missing,
// holds no file, or holds a symbolic link or anything else that is not a file or folder (the first
// in path order is named) — the server would refuse those anyway. Only the files are archived, by
// path relative to the folder in sorted order (reproducible; folders are implied by the paths), with
// `portable: true` (no owner or host details). An archive written inside the folder is refused, and
// the output is removed when packing fails.
import { lstat, readdir, rm } from 'node:fs/promises';
import path from 'node:path';

/** The files of a built site's folder, relative and `/`-separated, in sorted order; refused as described above. */
export async function siteFiles(dir: string): Promise<string[]> {
  const root = path.resolve(dir);
  const stats = await lstat(root).catch(() => null);
  if (!stats?.isDirectory()) throw new Error(`${dir} is not a folder: give the folder of the built site.`);
  const entries = (await readdir(root, { recursive: true, withFileTypes: true }))
    .map((entry) => ({ entry, name: path.relative(root, path.join(entry.parentPath, entry.name)).split(path.sep).join('/') }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const files: string[] = [];
  for (const { entry, name } of entries) {
    if (entry.isSymbolicLink()) throw new Error(`${dir} contains a symbolic link, ${name}: replace it with the file or folder it points to.`);
    if (entry.isFile()) files.push(name);
    else if (!entry.isDirectory()) throw new Error(`${dir} contains ${name}, which is not a file or folder: remove it.`);
  }
  if (!files.length) throw new Error(`${dir} is empty: build the site first, or give the folder that holds its files.`);
  return files;
}

/** Packs the folder's files (`only`: those of them) into `out`, a .tar.gz. */
export async function packDirectory(dir: string, out: string, onProgress?: (files: number, bytes: number) => void, only?: ReadonlySet<string>): Promise<{ files: number; bytes: number }> {
  const root = path.resolve(dir);
  const target = path.resolve(out);
  if (target.startsWith(`${root}${path.sep}`)) throw new Error(`The archive ${out} would be inside the folder it packs: write it elsewhere.`);
  const files = (await siteFiles(dir)).filter((name) => !only || only.has(name));
  const sizes = new Map<string, number>();
  for (const name of files) sizes.set(name, (await lstat(path.join(root, name))).size);

  let count = 0;
  let bytes = 0;
  const { create } = await import('tar'); // loaded by `worker deploy` only, not with every command
  try {
    await create(
      {
        gzip: true,
        file: target,
        cwd: root,
        portable: true,
        noDirRecurse: true,
        onWriteEntry: (entry) => {
          count += 1;
          bytes += sizes.get(entry.path) ?? 0;
          onProgress?.(count, bytes);
        },
      },
      files,
    );
  } catch (error) {
    await rm(target, { force: true });
    throw error;
  }
  return { files: count, bytes };
}

