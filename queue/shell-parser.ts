import { createRequire } from 'node:module';
import type { ShellNode, ShellParser } from '../router/shell.js';

/**
 * The shell parser tool rules split commands with (router/shell.ts): tree-sitter's bash grammar, compiled
 * to WebAssembly (web-tree-sitter, tree-sitter-bash). Loading it is asynchronous and reads two .wasm files
 * (about 35 ms), so it happens once, started by the wiring while the database opens; parsing afterwards is synchronous (~0.2 ms a
 * command), which keeps the rule table pure and the broker's decision synchronous.
 */

let loading: Promise<ShellParser> | undefined;

/** The bash parser, loaded on the first call and shared afterwards. */
export function loadShellParser(): Promise<ShellParser> {
  loading ??= load();
  return loading;
}

async function load(): Promise<ShellParser> {
  // Imported here, not at the top: a CLI command that judges no command (most of them) does not load it.
  const { Language, Parser } = await import('web-tree-sitter');
  const require = createRequire(import.meta.url);
  await Parser.init();
  const bash = await Language.load(require.resolve('tree-sitter-bash/tree-sitter-bash.wasm'));
  const parser = new Parser();
  parser.setLanguage(bash);
  return <T>(source: string, read: (root: ShellNode) => T): T => {
    const tree = parser.parse(source);
    if (!tree) throw new Error('the shell parser returned no tree');
    try {
      return read(tree.rootNode);
    } finally {
      // The tree lives in the WebAssembly heap: it is freed by hand.
      tree.delete();
    }
  };
}
