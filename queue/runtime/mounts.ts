import { closeSync, existsSync, lstatSync, mkdirSync, realpathSync } from 'node:fs';
import { basename, dirname, isAbsolute, posix, relative, resolve, sep } from 'node:path';
import { GroupDirError, openGroupDirSync, type OpenedGroupDir } from '../../core/group-dir.js';
import { chownTreeAt } from './owner.js';
import type { ConfigMount, MountRequest, WorkTree } from './types.js';

/**
 * What may enter a container besides the group's own folder: only paths the operator allow-listed
 * (GATED_MOUNT_ALLOW), checked after every symlink is resolved, so a link inside an allowed root cannot
 * reach outside it. Anything doubtful is refused with a MountError naming the path and the reason.
 */

/** A mount that was asked for and is not allowed. */
export class MountError extends Error {
  override readonly name = 'MountError';
}

/** A validated bind mount. */
export interface ResolvedMount {
  /** Real host path (symlinks resolved). */
  source: string;
  /** Absolute, normalized path inside the container. */
  target: string;
  readOnly: boolean;
}

/** The container path of the group's folder (its working directory). */
export const WORKSPACE = '/workspace';

/** The group's configuration folders appear under this container path, read-only (docs/AGENTS.md). */
export const CONFIG_ROOT = '/gated/config';

/** Extra mounts live under this container path, so none can cover the agent's code, /tmp or the system. */
export const MOUNT_ROOT = '/mnt';

function hasDotDot(p: string): boolean {
  return p.split(/[\\/]+/).includes('..');
}

function inside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (!rel.startsWith('..' + sep) && rel !== '..' && !isAbsolute(rel));
}

function real(path: string, what: string): string {
  try {
    return realpathSync(path);
  } catch {
    throw new MountError(`${what} ${path} does not exist`);
  }
}

/**
 * Opens the group's folder for a container: it must be a direct child of the groups folder (every group's
 * folder is, core/group-dir.ts), with no link at its name. The groups folder is the operator's and no agent
 * can write into it, so the path handed to the engine, which resolves it again, names the folder opened
 * here. The caller closes `fd`.
 */
export function openWorkspace(groupsRoot: string, groupDir: string): OpenedGroupDir {
  // The groups folder is the operator's: made on a first run, its links followed.
  mkdirSync(groupsRoot, { recursive: true });
  const root = real(groupsRoot, 'groups folder');
  const parent = dirname(resolve(groupDir));
  if (!existsSync(parent) || realpathSync(parent) !== root)
    throw new MountError(`group folder ${groupDir} is not directly inside ${groupsRoot}`);
  try {
    return openGroupDirSync(groupDir);
  } catch (err) {
    if (err instanceof GroupDirError) throw new MountError(err.message);
    throw err;
  }
}

/**
 * The agent's uid:gid: configured, else the owner of the group's folder (opened at `dir`), which is handed
 * to 1000:1000 when root owns it and gated runs as root, through the folder's descriptor (owner.ts).
 */
export function pickUser(dir: OpenedGroupDir, configured: string | undefined): string {
  if (configured) return configured;
  if (dir.stat.uid !== 0) return `${dir.stat.uid}:${dir.stat.gid}`;
  // Root owns the folder (gated runs as root): hand it to the unprivileged agent user once, so the agent can
  // write its workspace without running as root.
  if (process.getuid?.() === 0) chownTreeAt(dir.fd, 1000, 1000);
  return '1000:1000';
}

/** Reads registered_groups.mounts: a JSON list of paths or {path, target?, rw?}. */
export function parseMountList(json: string | null | undefined): MountRequest[] {
  if (json === null || json === undefined || json.trim() === '') return [];
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw new MountError('registered_groups.mounts is not valid JSON');
  }
  if (!Array.isArray(value)) throw new MountError('registered_groups.mounts must be a JSON list');
  return value.map((v): MountRequest => {
    if (typeof v === 'string') return { path: v };
    if (typeof v === 'object' && v !== null && typeof (v as MountRequest).path === 'string') {
      const m = v as MountRequest;
      return {
        path: m.path,
        ...(typeof m.target === 'string' ? { target: m.target } : {}),
        rw: m.rw === true,
      };
    }
    throw new MountError('each mount must be a path or {"path", "target"?, "rw"?}');
  });
}

/**
 * Checks each requested mount against the allow-listed roots. A path must be absolute, contain no `..`, and
 * resolve (symlinks followed) inside one of the roots; its target must be absolute, free of `..`, and under
 * /mnt. Read-only unless `rw` is asked for.
 */
export function validateMounts(
  requests: readonly MountRequest[],
  allowRoots: readonly string[],
): ResolvedMount[] {
  if (requests.length === 0) return [];
  const roots = allowRoots
    .filter((r) => r !== '')
    .flatMap((r) => {
      try {
        return [realpathSync(r)];
      } catch {
        return [];
      }
    });
  const seen = new Set<string>();
  return requests.map((req) => {
    if (!isAbsolute(req.path)) throw new MountError(`mount ${req.path} is not an absolute path`);
    if (hasDotDot(req.path)) throw new MountError(`mount ${req.path} contains '..'`);
    const source = real(req.path, 'mount');
    if (!roots.some((root) => inside(root, source))) {
      throw new MountError(`mount ${req.path} is not inside an allowed root (GATED_MOUNT_ALLOW)`);
    }
    const target = req.target ?? posix.join(MOUNT_ROOT, basename(source));
    if (!posix.isAbsolute(target) || hasDotDot(target)) {
      throw new MountError(`mount target ${target} must be an absolute path without '..'`);
    }
    const norm = posix.normalize(target).replace(/\/+$/, '');
    if (!norm.startsWith(MOUNT_ROOT + '/'))
      throw new MountError(`mount target ${norm} must be under ${MOUNT_ROOT}/`);
    if (seen.has(norm)) throw new MountError(`mount target ${norm} is used twice`);
    seen.add(norm);
    return { source, target: norm, readOnly: req.rw !== true };
  });
}

/**
 * The group's configuration folders as read-only mounts. A folder that became a link since it was read is
 * refused (the operator's folder, not the agent's: a link there is a mistake or an attack either way).
 */
export function configMounts(config: readonly ConfigMount[]): ResolvedMount[] {
  return config.map((c) => {
    if (lstatSync(c.source, { throwIfNoEntry: false })?.isDirectory() !== true)
      throw new MountError(`configuration folder ${c.source} is not a folder (or is a link)`);
    const target = posix.normalize(c.target);
    if (!target.startsWith(CONFIG_ROOT + '/') || hasDotDot(c.target))
      throw new MountError(`configuration target ${c.target} must be under ${CONFIG_ROOT}/`);
    return { source: c.source, target, readOnly: true };
  });
}

/** Where a container's run works: its folder, its user, and every other mount. */
export interface Workspace {
  /** The group's folder (a real folder, directly inside the groups folder): mounted at /workspace. */
  groupDir: string;
  /** The agent's uid:gid. */
  user: string;
  mounts: ResolvedMount[];
  /** Extra environment of the container (a worktree's git variables); nothing secret. */
  env?: string[];
}

/** The workspace with a worktree's git folders mounted beside it and its git variables set. */
export function withGit(w: Workspace, git: { mounts: ResolvedMount[]; env: string[] }): Workspace {
  return { ...w, mounts: [...w.mounts, ...git.mounts], env: [...(w.env ?? []), ...git.env] };
}

/**
 * What a container runtime needs before it creates anything for a run: the group's folder (made when
 * missing, opened without following a link, its owner read and, under root, handed to the agent user),
 * the group's extra mounts, checked against the allow-list, and its configuration folders, read-only.
 */
export function prepareWorkspace(
  spec: {
    groupDir: string;
    work?: WorkTree | undefined;
    mounts?: readonly MountRequest[] | undefined;
    config?: readonly ConfigMount[] | undefined;
  },
  groupsRoot: string,
  allowRoots: readonly string[],
  user: string | undefined,
): Workspace {
  const mounts = [...validateMounts(spec.mounts ?? [], allowRoots), ...configMounts(spec.config ?? [])];
  // A topic's worktree (docs/WORKTREES.md) is the workspace instead, a direct child of the operator's
  // folder of the group's worktrees, as the group's folder is of the groups folder.
  const dir = spec.work
    ? openWorkspace(spec.work.root, spec.work.dir)
    : openWorkspace(groupsRoot, spec.groupDir);
  try {
    return { groupDir: dir.path, user: pickUser(dir, user), mounts };
  } finally {
    closeSync(dir.fd);
  }
}

/** Runs `fn` once; a failure (engine down) is forgotten, so the next call tries again. */
export function onceUntilDone<T>(fn: () => Promise<T>): () => Promise<T> {
  let done: Promise<T> | undefined;
  return () =>
    (done ??= fn().catch((err: unknown) => {
      done = undefined;
      throw err;
    }));
}
