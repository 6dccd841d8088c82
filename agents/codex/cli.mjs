// Where the Codex CLI binary is, and a wrapper that starts it with hooks allowed to run.
//
// The CLI runs hooks (our PreToolUse hook, hook.mjs, which asks gated about shell commands) only when they
// were trusted interactively, or with `--dangerously-bypass-hook-trust`. The SDK has no option for CLI
// flags, so it is given a shell wrapper that adds the flag (codex-cli.sh). The flag would trust project
// settings' hooks too: projectSettings() finds them, and the agent then does not start the CLI.
import { accessSync, constants, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const TARGETS = {
  'linux-x64': ['x86_64-unknown-linux-musl', '@openai/codex-linux-x64'],
  'linux-arm64': ['aarch64-unknown-linux-musl', '@openai/codex-linux-arm64'],
  'darwin-x64': ['x86_64-apple-darwin', '@openai/codex-darwin-x64'],
  'darwin-arm64': ['aarch64-apple-darwin', '@openai/codex-darwin-arm64'],
};

/**
 * The CLI binary the SDK would start and the folder of its helper programs (put first on PATH, as the SDK
 * does); null where it cannot be found (then the SDK finds it, and hooks do not run).
 */
export function locateCli() {
  const target = TARGETS[`${process.platform}-${process.arch}`];
  if (!target) return null;
  try {
    // The SDK's package exports only `import`: resolved the way it is imported.
    const sdk = fileURLToPath(import.meta.resolve('@openai/codex-sdk'));
    const cli = createRequire(sdk).resolve('@openai/codex/package.json');
    const platform = createRequire(cli).resolve(`${target[1]}/package.json`);
    const root = join(dirname(platform), 'vendor', target[0]);
    for (const [bin, path] of [
      [join(root, 'bin', 'codex'), join(root, 'codex-path')],
      [join(root, 'codex', 'codex'), join(root, 'path')],
    ])
      if (existsSync(bin)) return { binary: bin, pathDir: existsSync(path) ? path : null };
  } catch {
    // Not installed where the SDK would look: leave it to the SDK.
  }
  return null;
}

/** The wrapper the SDK is given instead of the binary (it reads the binary's path from GATED_CODEX_BIN). */
export const WRAPPER = fileURLToPath(new URL('./codex-cli.sh', import.meta.url));

/** True when the wrapper can run here (it is executable and there is a /bin/sh). */
export function wrapperUsable() {
  try {
    accessSync(WRAPPER, constants.X_OK);
    accessSync('/bin/sh', constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
/**
 * Codex settings folders (`.codex/`) the CLI would load as project configuration for `cwd`: in `cwd` and,
 * when `cwd` lies inside a git work tree, in every folder up to its root (the CLI's project root). With
 * hook trust bypassed, hooks from such a folder would run outside the sandbox, so the agent refuses to
 * start the CLI while one exists. The CLI's sandbox keeps `.codex/` read-only for the model's commands;
 * this check also covers anything else that writes into the folder.
 */
export function projectSettings(cwd) {
  const dirs = [];
  for (let d = cwd; ; d = dirname(d)) {
    dirs.push(d);
    if (existsSync(join(d, '.git'))) break;
    if (dirname(d) === d) return existsSync(join(cwd, '.codex')) ? [join(cwd, '.codex')] : [];
  }
  return dirs.map((d) => join(d, '.codex')).filter((p) => existsSync(p));
}
