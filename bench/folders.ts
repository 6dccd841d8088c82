/**
 * The nested-folder campaign (docs/SECURITY.md, "Folders"; the full one is `npm run bench -- --only=folders`,
 * a small one runs in the suite, test/bench/folders.test.ts): a whole gated with the groups `pub`, its child
 * `pub/c` and the members-only `secret`, on the runtime its settings name. The parent's agent
 * (test/agents/folder-agent.mjs) attacks where its child's folder lay in the old layout, `c` inside its own
 * folder: first `mv c c.real; ln -s ../secret c`, then `ln -s .. c`, then it flips `c` between a folder and
 * links to `../secret`, `..` and a decoy tree outside every folder, for at least `flipMs`. Meanwhile
 * messages and uploads reach the child, each in a run of its own; the child's agent answers with the inode
 * and the kernel's path of the folder it works in (its /workspace mount's root in a container, its
 * working directory as a process) and writes a mark file there. Counted: runs in a folder not the child's,
 * files written outside their folder, uploads saved elsewhere, and any change to the decoy tree or the
 * `secret` group's folder (bytes, modes, owners) or to the groups folder's owner.
 */
import { createHash } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { loadConfig } from '../core/config.js';
import { groupDirOf } from '../core/group-dir.js';
import { silentLogger } from '../core/log.js';
import { packageFile } from '../core/paths.js';
import { startGated, type Gated } from '../gated/app.js';
import { openDatabase } from '../store/db.js';
import { addGroup } from '../store/groups.js';
import { startDockerd } from '../test/infra/dockerd.js';

/** Size and pace of a campaign. */
export interface FolderCampaignOptions {
  /** The runtime's settings (GATED_RUNTIME and what it needs: the agent command, or engine and image). */
  env: Record<string, string>;
  /** The parent's agent flips for at least this long (ms)… */
  flipMs: number;
  /** …and until at least this many messages reached the child meanwhile. */
  flipMessages: number;
  /** Messages to the child under each plain link (`../secret`, then `..`). */
  linkMessages: number;
  /** Every `uploadEvery`-th message to the child is an upload with a file. */
  uploadEvery: number;
  /** How long one message may take to be answered and its run to end (ms). */
  messageMs?: number;
}

/** What a campaign found. */
export interface FolderCampaignReport {
  /** Runs of the child (each message had its own). */
  childRuns: number;
  answers: number;
  /** Runs whose folder was not the child's (another group's, the groups folder, the decoy). */
  foreignRuns: number;
  foreign: string[];
  /** Flips done by the parent's agent in all, and while the child's messages were being answered. */
  flips: number;
  flipsDuringChildRuns: number;
  flipElapsedMs: number;
  flipMessages: number;
  uploads: number;
  /** Uploads saved into the child's own folder, with their bytes. */
  uploadsInChild: number;
  /** Files of the child's runs or uploads found anywhere but in the child's folder. */
  writtenOutside: string[];
  decoyChanged: boolean;
  secretChanged: boolean;
  /** Entries of the decoy, of `secret`'s folder or the groups folder whose owner changed. */
  chownedOutside: string[];
  totalMs: number;
}

/** Every entry under `dir` (not following links): kind, mode, owner, bytes or link target, as one hash. */
function treeHash(dir: string): string {
  const h = createHash('sha256');
  for (const [rel, st] of walk(dir)) {
    h.update(`${rel}\0${st.mode}\0${st.uid}:${st.gid}\0`);
    if (st.isFile()) h.update(readFileSync(join(dir, rel)));
    else if (st.isSymbolicLink()) h.update(readlinkSync(join(dir, rel)));
  }
  return h.digest('hex');
}

/** `[relative path, lstat]` of every entry under `dir`, the folder itself first (`''`); links not followed. */
function walk(dir: string): Array<[string, ReturnType<typeof lstatSync> & object]> {
  const out: Array<[string, ReturnType<typeof lstatSync> & object]> = [['', lstatSync(dir)]];
  const go = (rel: string) => {
    for (const name of readdirSync(join(dir, rel)).sort()) {
      const r = join(rel, name);
      const st = lstatSync(join(dir, r));
      out.push([r, st]);
      if (st.isDirectory()) go(r);
    }
  };
  go('');
  return out;
}

function owners(dir: string): Map<string, string> {
  return new Map(walk(dir).map(([rel, st]) => [join(dir, rel), `${st.uid}:${st.gid}`]));
}

/** The campaign's folders: the groups, a decoy tree outside them, the `secret` group's members-only files. */
function layout(): { dir: string; decoy: string } {
  const dir = mkdtempSync(join(tmpdir(), 'gated-folders-'));
  const decoy = join(dir, 'decoy');
  mkdirSync(join(decoy, 'sub'), { recursive: true });
  writeFileSync(join(decoy, 'secret.txt'), 'the decoy, never to be read, written or chowned\n');
  writeFileSync(join(decoy, 'sub', 'private.key'), 'mode 600\n', { mode: 0o600 });
  return { dir, decoy };
}

/** Runs one campaign and returns its report. */
export async function folderCampaign(opts: FolderCampaignOptions): Promise<FolderCampaignReport> {
  const t0 = Date.now();
  const { dir, decoy } = layout();
  const config = loadConfig({
    GATED_DB: join(dir, 'gated.db'),
    GATED_GROUPS_DIR: join(dir, 'groups'),
    GATED_HTTP_PORT: '0',
    GATED_POLL_MS: '20',
    GATED_IDLE_TIMEOUT_MS: '100',
    // The parent's run flips for the whole campaign.
    GATED_RUN_TIMEOUT_MS: String(opts.flipMs + 600_000),
    ...opts.env,
  });
  const groups = config.groupsDir;
  const seed = openDatabase(config.db);
  for (const g of ['pub', 'pub/c', 'secret']) addGroup(seed, groups, g);
  seed.close();
  const secret = groupDirOf(groups, 'secret');
  writeFileSync(join(secret, 'members-only.txt'), 'for the members of secret only\n', { mode: 0o600 });
  const child = groupDirOf(groups, 'pub/c');
  const parent = groupDirOf(groups, 'pub');
  const before = { decoy: treeHash(decoy), secret: treeHash(secret) };
  const ownersBefore = new Map([...owners(decoy), ...owners(secret), [groups, ownerOf(groups)]]);
  const g = await startGated({ config, log: silentLogger(), channels: [] });
  try {
    const talk = new Talk(g, opts.messageMs ?? 60_000, statSync(child).ino, basename(child));
    let n = 0;
    for (const target of ['../secret', '..']) {
      await talk.parent(`link c ${target}`, 'linked c');
      for (let i = 0; i < opts.linkMessages; i++) await talk.child(n++, opts.uploadEvery);
    }
    await talk.parent(`flip c ../secret,..,${decoy}`, 'flipping c');
    const flipsAt = () =>
      Number(existsSync(join(parent, 'flips.txt')) ? readFileSync(join(parent, 'flips.txt'), 'utf8') : 0);
    const f0 = Date.now();
    const flipsBefore = flipsAt();
    let flipMessages = 0;
    while (Date.now() - f0 < opts.flipMs || flipMessages < opts.flipMessages) {
      await talk.child(n++, opts.uploadEvery);
      flipMessages++;
    }
    const flipsDuring = flipsAt() - flipsBefore;
    const flipElapsedMs = Date.now() - f0;
    writeFileSync(join(parent, 'flip.stop'), '');
    await talk.parentDone();
    const flips = flipsAt();
    return {
      ...talk.report(),
      flips,
      flipsDuringChildRuns: flipsDuring,
      flipElapsedMs,
      flipMessages,
      writtenOutside: writtenOutside(groups, child, decoy),
      decoyChanged: treeHash(decoy) !== before.decoy,
      secretChanged: treeHash(secret) !== before.secret,
      chownedOutside: [...ownersBefore]
        .filter(([p, o]) => ownerOf(p) !== o)
        .map(([p, o]) => `${p}: ${o} → ${ownerOf(p)}`),
      totalMs: Date.now() - t0,
    };
  } finally {
    await g.close(2000);
    rmSync(dir, { recursive: true, force: true });
  }
}

function ownerOf(path: string): string {
  const st = lstatSync(path, { throwIfNoEntry: false });
  return st ? `${st.uid}:${st.gid}` : 'gone';
}

/** Marks and uploads of the child's runs found anywhere but in the child's folder (links not followed). */
function writtenOutside(groups: string, child: string, decoy: string): string[] {
  const found: string[] = [];
  for (const root of [groups, decoy]) {
    for (const [rel, st] of walk(root)) {
      const path = join(root, rel);
      if (!st.isFile() || path.startsWith(`${child}/`)) continue;
      const name = basename(path);
      if (/^mark-\d+\.txt$/.test(name) || /-up-\d+\.txt$/.test(name)) found.push(path);
    }
  }
  return found;
}

/** The campaign's side of the web chat: what it posts to the parent and the child, and what came back. */
class Talk {
  private readonly url: string;
  private readonly answerStmt;
  private readonly runEndStmt;
  private readonly attachmentStmt;
  private parentMsg = 0;
  private answers = 0;
  private uploads = 0;
  private uploadsInChild = 0;
  private readonly foreign: string[] = [];

  constructor(
    private readonly g: Gated,
    private readonly ms: number,
    private readonly childIno: number,
    private readonly childName: string,
  ) {
    this.url = g.url!.replace(/\/$/, '');
    this.answerStmt = g.db
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND chat_jid = ? AND content LIKE ?`)
      .pluck();
    this.runEndStmt = g.db
      .prepare(`SELECT l.result FROM messages m JOIN session_log l ON l.id = m.run_id WHERE m.id = ?`)
      .pluck();
    this.attachmentStmt = g.db.prepare(`SELECT state, path FROM attachments WHERE message_id = ?`);
  }

  private async post(group: string, content: string, file?: { name: string; text: string }): Promise<number> {
    let res: Response;
    if (file) {
      const form = new FormData();
      form.set('group', group);
      form.set('content', content);
      form.set('file', new Blob([file.text], { type: 'text/plain' }), file.name);
      res = await fetch(`${this.url}/api/chat/upload`, { method: 'POST', body: form });
    } else {
      res = await fetch(`${this.url}/api/chat/send`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ group, content }),
      });
    }
    const body = (await res.json()) as { id?: number; error?: string };
    if (res.status !== 201 || typeof body.id !== 'number')
      throw new Error(`post to ${group} answered ${res.status}: ${body.error ?? ''}`);
    return body.id;
  }

  private async wait<T>(fn: () => T | undefined | null, what: string): Promise<T> {
    const end = Date.now() + this.ms;
    for (;;) {
      const v = fn();
      if (v !== undefined && v !== null) return v;
      if (Date.now() > end) throw new Error(`timed out after ${this.ms} ms waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** Asks the parent's agent, and waits for its answer `expect`. */
  async parent(content: string, expect: string): Promise<void> {
    this.parentMsg = await this.post('pub', content);
    await this.wait(() => this.answerStmt.get('web:pub', expect) as string | undefined, `pub: ${expect}`);
  }

  /** Waits for the parent's run (the flipping one) to end. */
  async parentDone(): Promise<void> {
    await this.wait(
      () => this.runEndStmt.get(this.parentMsg) as string | undefined,
      "the parent's run to end",
    );
  }

  /** Message `n` to the child (an upload every `uploadEvery`), answered by a run that then ends. */
  async child(n: number, uploadEvery: number): Promise<void> {
    const upload = n % uploadEvery === 0;
    const text = `upload ${n}, for the child only\n`;
    const id = await this.post('pub/c', `where ${n}`, upload ? { name: `up-${n}.txt`, text } : undefined);
    const answer = await this.wait(
      () => this.answerStmt.get('web:pub/c', `where ${n} %`) as string | undefined,
      `the child's answer to message ${n}`,
    );
    await this.wait(() => this.runEndStmt.get(id) as string | undefined, `the run of message ${n} to end`);
    this.answers++;
    const [, , ino, root] = answer.split(' ');
    if (Number(ino) !== this.childIno || !root?.endsWith(`/${this.childName}`)) this.foreign.push(answer);
    if (!upload) return;
    this.uploads++;
    const a = this.attachmentStmt.get(id) as { state: string; path: string | null } | undefined;
    const saved = a?.state === 'saved' && a.path !== null;
    const at = saved ? join(groupDirOf(this.g.config.groupsDir, 'pub/c'), a.path!) : '';
    if (saved && existsSync(at) && readFileSync(at, 'utf8') === text) this.uploadsInChild++;
  }

  report() {
    const runs = this.g.db
      .prepare(`SELECT count(*) FROM session_log WHERE group_folder = 'pub/c'`)
      .pluck()
      .get() as number;
    return {
      childRuns: runs,
      answers: this.answers,
      foreignRuns: this.foreign.length,
      foreign: this.foreign.slice(0, 5),
      uploads: this.uploads,
      uploadsInChild: this.uploadsInChild,
    };
  }
}

/**
 * The full campaign on both runtimes (`npm run bench -- --only=folders`): the process runtime with the
 * folder agent of this checkout, then the same agent built into an image on a private dockerd.
 */
export async function folderBench(
  quick: boolean,
): Promise<Array<FolderCampaignReport & { runtime: string }>> {
  const size = quick
    ? { flipMs: 10_000, flipMessages: 40, linkMessages: 5, uploadEvery: 4 }
    : { flipMs: 60_000, flipMessages: 200, linkMessages: 20, uploadEvery: 4 };
  const agent = 'folder-agent.mjs';
  const rows: Array<FolderCampaignReport & { runtime: string }> = [];
  const processEnv = { GATED_RUNTIME: 'process', GATED_AGENT_CMD: `node "$GATED_HOME/test/agents/${agent}"` };
  rows.push({ runtime: 'process', ...(await folderCampaign({ ...size, env: processEnv })) });
  const engine = await startDockerd();
  try {
    const image = await engine.buildAgentImage(
      'gated-folder-agent:bench',
      packageFile('test', 'agents'),
      agent,
    );
    const env = { GATED_RUNTIME: 'docker', DOCKER_HOST: engine.host, GATED_AGENT_IMAGE: image };
    rows.push({ runtime: 'docker', ...(await folderCampaign({ ...size, env })) });
  } finally {
    await engine.stop();
  }
  return rows;
}
