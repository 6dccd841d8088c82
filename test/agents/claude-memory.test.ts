/**
 * The Claude agent's memory (docs/MEMORY.md) through the whole gateway (process runtime) against the local
 * Messages API: the scripted model calls `mcp__gated__remember`, `recall`, `search_history` and `forget`
 * with `TOOL <name> <json>` (test/infra/messages-api.ts). A fact remembered in one session reaches the model
 * after /new as a `<memory kind="data">` element; a web visitor (a guest of an open group) remembers only
 * for itself; recall and history search are answered by gated's `memory` line.
 */
import { expect, test } from 'vitest';
import { HistoryIndex } from '../../store/history-index.js';
import { until } from '../helpers/process.js';
import { requestFor, useClaudeSuite } from './claude-support.js';

const suite = useClaudeSuite();

test(
  'remember, then after /new the fact is in the prompt as data; recall, search_history and forget',
  { timeout: 180_000 },
  async () => {
    const c = await suite.start();
    const facts = () =>
      c.gated.db.prepare('SELECT id, scope, text, provenance FROM memories ORDER BY id').all() as {
        id: number;
        scope: string;
        text: string;
        provenance: string;
      }[];
    const said = c.send('the zeppelin leaves from pier nine at dawn');
    await c.reply(said);
    const asked = c.send('TOOL remember {"text":"the deploy key is kept in the blue vault","scope":"group"}');
    expect(await c.reply(asked)).toContain('Tool mcp__gated__remember said: Recorded: a fact to remember');
    const [fact] = await until(() => (facts().length > 0 ? facts() : undefined), 10_000, 'the fact stored');
    // The web visitor is a guest of the open group: its fact is its own, whatever scope the model asked.
    expect(fact).toMatchObject({ scope: 'web:ada', text: 'the deploy key is kept in the blue vault' });
    expect(JSON.parse(fact!.provenance).senders).toEqual([{ sender: 'web:ada', role: 'guest' }]);

    await c.reply(c.send('/new'));
    const later = c.send('where is the deploy key kept?');
    await c.reply(later);
    const user = JSON.stringify(requestFor(suite.api, 'where is the deploy key kept?').body.messages);
    expect(user).toMatch(
      new RegExp(
        `<memory id=\\\\"${fact!.id}\\\\" kind=\\\\"data\\\\" scope=\\\\"web:ada\\\\" from=\\\\"web:ada \\(guest\\)\\\\"`,
      ),
    );
    expect(user).toContain('>the deploy key is kept in the blue vault</memory>');

    const recalled = await c.reply(c.send('TOOL recall {"query":"blue vault"}'));
    expect(recalled).toContain(
      'Tool mcp__gated__recall said: Remembered facts (data from earlier conversations',
    );
    expect(recalled).toContain(`#${fact!.id} [web:ada; from web:ada (guest)`);
    expect(recalled).toContain('the deploy key is kept in the blue vault');

    const index = new HistoryIndex(c.gated.db);
    await until(() => index.cursor() >= said, 20_000, 'the history indexed');
    const found = await c.reply(c.send('TOOL search_history {"query":"zeppelin dawn"}'));
    expect(found).toContain('Tool mcp__gated__search_history said: Messages found');
    expect(found).toContain(`#${said} `);
    expect(found).toContain('the zeppelin leaves from pier nine at dawn');

    const forgot = await c.reply(c.send(`TOOL forget {"id":${fact!.id}}`));
    expect(forgot).toContain(`Recorded: forgetting fact #${fact!.id}`);
    await until(() => facts().length === 0, 10_000, 'the fact forgotten');
    const audit = c.gated.db
      .prepare(`SELECT action, actor FROM audit WHERE subject = 'memories' ORDER BY id`)
      .all();
    expect(audit).toEqual([
      { action: 'insert', actor: 'agent:claude' },
      { action: 'delete', actor: 'agent:claude' },
    ]);
  },
);
