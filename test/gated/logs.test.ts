import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/db.js';
import { exited, gatedEnv, gatedRun, gatedUp, stderrOf, until } from '../helpers/process.js';

/**
 * The keys of a JSON object's top level in the order written, duplicates included (JSON.parse keeps only
 * the last of a repeated key, which is exactly what hides the problem).
 */
function topLevelKeys(line: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (c === '"') {
      let j = i + 1;
      while (line[j] !== '"') j += line[j] === '\\' ? 2 : 1;
      if (depth === 1 && line[j + 1] === ':') keys.push(JSON.parse(line.slice(i, j + 1)) as string);
      i = j;
    } else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
  }
  return keys;
}

describe('logs off a terminal', { timeout: 90_000 }, () => {
  it('are one JSON object per line, none with a key twice, through a message answered and delivered', async () => {
    const dir = tempDir();
    const child = gatedRun(gatedEnv(dir, { GATED_LOG_LEVEL: 'debug' }));
    let out = '';
    child.stdout!.on('data', (d) => (out += String(d)));
    await gatedUp(child);
    const url = /web chat at (http:\/\/127\.0\.0\.1:\d+)/.exec(stderrOf(child) + out)![1]!;
    const sent = await fetch(`${url}/api/chat/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ group: 'demo', content: 'log me' }),
    });
    expect(sent.status).toBe(201);
    await until(() => out.includes('"part delivered"'), 30_000, 'a delivered part in the logs');
    child.kill('SIGTERM');
    expect(await exited(child)).toBe(0);

    const lines = out.trim().split('\n');
    expect(lines.length).toBeGreaterThan(5);
    for (const line of lines) {
      const parsed = JSON.parse(line) as Record<string, unknown>;
      const keys = topLevelKeys(line);
      expect(keys, line).toEqual([...new Set(keys)]);
      expect(keys.length, line).toBe(Object.keys(parsed).length);
    }
    const delivered = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l.msg === 'part delivered');
    expect(delivered).toMatchObject({ part: 'delivery', partIndex: 0, of: 1 });
  });
});
