/**
 * The Claude agent in its container (the image built offline from agents/claude by docker/build-offline.sh)
 * under the docker runtime on a real dockerd: sessions, tools, the API key kept out of the container's env,
 * a long streamed turn (held while the test inspects its container) and an overloaded API (the engine and image: claude-docker-support.ts). Steering and
 * approvals as on the process runtime (claude-turn-end.test.ts, claude-steering.test.ts): in steer mode a
 * follow-up sent while a Bash command runs and one sent while the command's approval waits, each answered
 * once within seconds with the run ending by its idle timeout, and `/interrupt` cutting a streamed turn. The
 * offline image carries this machine's bash, sh and the few programs the commands run, and allows shell
 * commands in the container as the production image does. One engine and image for all of them.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Chat, User } from 'telegraf/types';
import { expect, test } from 'vitest';
import { INSTANCE_LABEL } from '../../queue/runtime/docker.js';
import { tempDir } from '../helpers/db.js';
import { INSTRUCTION, writeGroupConfig } from '../helpers/group-config.js';
import { until } from '../helpers/process.js';
import { TelegramApiServer } from '../infra/telegram-api.js';
import { checkTelegramHtml } from '../infra/telegram-html.js';
import {
  API_KEY,
  longTurnScenario,
  overloadScenario,
  requestFor,
  runsEnded,
  sessionScenario,
  type ClaudeChat,
} from './claude-support.js';
import { useClaudeDocker } from './claude-docker-support.js';
import {
  interruptScenario,
  RUN_TIMEOUT_MS,
  steerWhileApprovalScenario,
  steerWhileBashScenario,
} from './claude-steer-support.js';

const suite = useClaudeDocker('claude-test');
let chat: ClaudeChat | undefined;
test('first turn, follow-up with a tool call, resume in a new run, /new', { timeout: 180_000 }, async () => {
  chat = await suite.start();
  await sessionScenario(chat, suite.api);
});

test(
  'a 10 s streamed turn arrives intact; the key is in no container env',
  { timeout: 180_000 },
  async () => {
    chat = await suite.start();
    // The stream waits at its first line while the test looks, so the container is up however long that takes.
    const release = suite.api.hold();
    const turn = longTurnScenario(chat, 10);
    try {
      // While the turn streams, the container is up: look at what the engine and its first process hold.
      await until(() => suite.api.turns.length > 0, 60_000, 'the agent to call the API');
      const [info] = await suite.engine.docker.listContainers({
        filters: { label: [`${INSTANCE_LABEL}=${suite.instance}`] },
      });
      expect(info).toBeDefined();
      const inspected = await suite.engine.docker.getContainer(info!.Id).inspect();
      expect(JSON.stringify(inspected)).not.toContain(API_KEY);
      const environ = readFileSync(`/proc/${inspected.State.Pid}/environ`, 'utf8');
      expect(environ).toContain('HOME=/tmp');
      expect(environ).not.toContain(API_KEY);
      expect(environ).not.toContain('ANTHROPIC');
    } finally {
      release();
    }
    await turn;
    // The key did reach the API, from inside the container.
    expect(suite.api.turns.at(-1)!.headers['x-api-key']).toBe(API_KEY);
  },
);

test(
  "the group's configuration is mounted read-only: instructions, skills and a command reach the model; a write is refused",
  { timeout: 180_000 },
  async () => {
    const configDir = tempDir('gated-config-');
    const groupConfig = writeGroupConfig(configDir, 'claude', { mcp: false });
    chat = await suite.start({ env: { GATED_CONFIG_DIR: configDir } });
    const hello = chat.send('/summarize the docker voyage');
    expect(await chat.reply(hello)).toBe('echo: Summarize this in one line: the docker voyage');
    const req = requestFor(suite.api, 'the docker voyage');
    const system = JSON.stringify(req.body.system);
    expect(system).toContain(INSTRUCTION);
    expect(system).toContain('/gated/config/claude/skills/haiku/SKILL.md');

    // While a turn streams (held at its first line while the test looks), the container holds the
    // configuration as a read-only bind mount.
    const release = suite.api.hold();
    const slow = chat.send('SLOW 3');
    try {
      await until(
        () => suite.api.turns.some((t) => suite.api.seenUserWords(t).at(-1) === 'SLOW 3'),
        60_000,
        'the slow turn',
      );
      const [info] = await suite.engine.docker.listContainers({
        filters: { label: [`${INSTANCE_LABEL}=${suite.instance}`] },
      });
      const mounts = (await suite.engine.docker.getContainer(info!.Id).inspect()).Mounts;
      expect(mounts.find((m) => m.Destination === '/gated/config/claude')).toMatchObject({ RW: false });
      expect(mounts.find((m) => m.Destination === '/workspace')).toMatchObject({ RW: true });
    } finally {
      release();
    }
    await chat.reply(slow, 60_000);

    // The agent's own rule refuses a write there before the mount has to.
    const write = chat.send('WRITE /gated/config/claude/commands/evil.md hacked');
    expect(await chat.reply(write)).toContain('The configuration folder is read-only');
    expect(existsSync(join(groupConfig, 'commands', 'evil.md'))).toBe(false);
  },
);

test('an overloaded API: retried runs, then one clear message', { timeout: 180_000 }, async () => {
  chat = await suite.start();
  await overloadScenario(chat, suite.api);
});

test(
  'Telegram: the agent in its container answers through telegraf, with HTML Telegram accepts',
  { timeout: 180_000 },
  async () => {
    const tg = await TelegramApiServer.start();
    try {
      chat = await suite.start({
        // Batch mode: each answer is one sendMessage (drafts edited in place are tested with the drafts).
        env: { TELEGRAM_BOT_TOKEN: tg.token, TELEGRAM_API_ROOT: tg.url, GATED_STREAM_CHANNELS: 'none' },
        routes: ['platform=telegram'],
      });
      const dm: Chat.PrivateChat = { id: 4242, type: 'private', first_name: 'Ada' };
      const ada: User = { id: 4242, is_bot: false, first_name: 'Ada' };
      const said = (n: number) => tg.waitForSent(n).then((s) => s[n - 1]!);

      // A Markdown answer: bold, inline code, a link, a code block, a list, and characters to escape.
      tg.message({
        chat: dm,
        from: ada,
        text: 'SAY **Hello** Ada, `a<b` & [docs](https://example.org/x?a=1&b=2)\n\n```js\nlet ok = 1 < 2;\n```\n\n- one\n- two',
      });
      const first = await said(1);
      expect(first.parse_mode).toBe('HTML');
      expect(checkTelegramHtml(first.text)).toBeNull();
      expect(first.text).toContain(
        '<b>Hello</b> Ada, <code>a&lt;b</code> &amp; <a href="https://example.org/x?a=1&amp;b=2">docs</a>',
      );
      expect(first.text).toContain('<pre><code class="language-js">let ok = 1 &lt; 2;</code></pre>');
      expect(first.text).toContain('• one\n• two');
      // The chat saw typing while the agent worked.
      expect(tg.count('sendChatAction')).toBeGreaterThanOrEqual(1);

      // A follow-up in the same session, with a tool call writing into the group's folder.
      tg.message({ chat: dm, from: ada, text: 'WRITE from-telegram.txt hello-file' });
      expect((await said(2)).text).toContain('The file is written');
      expect(readFileSync(join(chat.groupDir, 'from-telegram.txt'), 'utf8')).toBe('hello-file');
      expect(chat.runs()).toHaveLength(1);

      // After the run ended, a new run resumes the session: the model sees the first turn.
      await runsEnded(chat);
      tg.message({ chat: dm, from: ada, text: 'and now?' });
      expect((await said(3)).text).toBe('echo: and now?');
      expect(chat.runs()).toHaveLength(2);
      expect(suite.api.seenUserWords(requestFor(suite.api, 'and now?')).join('\n')).toContain(
        'SAY **Hello** Ada',
      );
      expect(tg.refusedHtml).toEqual([]);
      expect(tg.sent.every((s) => s.parse_mode === 'HTML' && checkTelegramHtml(s.text) === null)).toBe(true);
    } finally {
      await chat?.gated.close(5000);
      suite.forget();
      await tg.close();
    }
  },
);

const steerEnv = { GATED_RUN_TIMEOUT_MS: RUN_TIMEOUT_MS };

test(
  'docker: steer mode, a follow-up while a Bash command runs is answered once, within seconds',
  { timeout: 120_000 },
  async () => {
    await steerWhileBashScenario(await suite.start({ env: steerEnv }), suite.api);
  },
);

test(
  'docker: steer mode, a follow-up while a Bash command waits for approval is answered once',
  { timeout: 120_000 },
  async () => {
    await steerWhileApprovalScenario(await suite.start({ env: steerEnv }), suite.api);
  },
);

test(
  'docker: /interrupt mid-stream cuts the turn, marks it, and the new message is answered',
  { timeout: 120_000 },
  async () => {
    await interruptScenario(await suite.start(), suite.api);
  },
);
