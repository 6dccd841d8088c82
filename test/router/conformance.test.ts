import { describe, expect, it } from 'vitest';
import { compileRoutes, parseMatch, type RouteRow } from '../../router/index.js';
import type { RouteFields } from '../../core/types.js';

type Expect = 'match' | 'no' | 'invalid';

/** Fields of a Telegram mention in the example group, overridden per case. */
function fields(over: Partial<RouteFields> = {}): RouteFields {
  const base = { platform: 'telegram', room: '-5075870332', sender: '42', verb: 'message' };
  const f = { ...base, ...over };
  return { ...f, chat_jid: over.chat_jid ?? `${f.platform}:${f.room}` };
}

/** (match, fields) → outcome. Each row is resolved through a one-row RouteTable, the production path. */
const CASES: Array<[string, Partial<RouteFields>, Expect, string]> = [
  // empty match
  ['', {}, 'match', 'empty match matches everything'],
  ['   ', { platform: 'discord' }, 'match', 'whitespace-only match matches everything'],
  // literal values
  ['platform=telegram', {}, 'match', 'literal platform'],
  ['platform=discord', {}, 'no', 'other platform'],
  ['platform=Telegram', {}, 'no', 'case-sensitive'],
  ['room=-5075870332', {}, 'match', "a '-' sign in a room"],
  ['room=-507587033', {}, 'no', 'literal is not a prefix'],
  ['room=5075870332', {}, 'no', 'sign matters'],
  ['chat_jid=telegram:-5075870332', {}, 'match', 'chat_jid literal with colon'],
  ['sender=42', {}, 'match', 'sender literal'],
  ['verb=mention', { verb: 'mention' }, 'match', 'verb literal'],
  ['verb=mention', {}, 'no', 'verb literal mismatch'],
  // several pairs: all must match
  ['platform=telegram verb=mention', { verb: 'mention' }, 'match', 'two pairs both match'],
  ['platform=telegram verb=mention', {}, 'no', 'second pair fails'],
  ['platform=telegram   verb=message', {}, 'match', 'several spaces between pairs'],
  ['platform=telegram\tverb=message', {}, 'match', 'tab between pairs'],
  [
    'verb=message platform=telegram room=-5075870332 sender=42 chat_jid=telegram:-5075870332',
    {},
    'match',
    'all five keys',
  ],
  // *
  ['room=*', {}, 'match', '* matches any value'],
  ['room=-50*', {}, 'match', '* as suffix'],
  ['room=*332', {}, 'match', '* as prefix'],
  ['room=-5*8*2', {}, 'match', 'two stars'],
  ['room=*', { room: '' }, 'match', '* matches the empty value (Go)'],
  ['chat_jid=web:*', { chat_jid: 'web:krons/content' }, 'no', '* does not cross /'],
  ['chat_jid=web:*/*', { chat_jid: 'web:krons/content' }, 'match', '*/* crosses one /'],
  ['chat_jid=web:**', { chat_jid: 'web:krons/content' }, 'no', '** is two stars, not globstar'],
  ['room=*', { room: '.hidden' }, 'match', 'leading dot matched by *'],
  ['room=.*', { room: '.hidden' }, 'match', 'explicit leading dot'],
  ['room=*', { room: '..' }, 'match', '* matches .. too (Go)'],
  // ?
  ['verb=?', { verb: 'x' }, 'match', '? one char'],
  ['verb=?', { verb: '' }, 'no', '? needs a char'],
  ['verb=?', { verb: 'xy' }, 'no', '? exactly one'],
  ['verb=mentio?', { verb: 'mention' }, 'match', '? at end'],
  ['chat_jid=web:a?b', { chat_jid: 'web:a/b' }, 'no', '? does not match /'],
  // classes
  ['verb=[abc]', { verb: 'b' }, 'match', '[abc] member'],
  ['verb=[abc]', { verb: 'd' }, 'no', '[abc] non-member'],
  ['verb=[!abc]', { verb: 'd' }, 'match', '[!abc] non-member'],
  ['verb=[!abc]', { verb: 'a' }, 'no', '[!abc] member'],
  ['verb=[^abc]', { verb: 'z' }, 'match', '[^abc] like [!abc]'],
  ['verb=[a-z]', { verb: 'q' }, 'match', 'range member'],
  ['verb=[a-z]', { verb: 'Q' }, 'no', 'range is case-sensitive'],
  ['room=-[0-9]*', {}, 'match', 'range after a literal -'],
  ['room=[\\-]*', {}, 'match', 'escaped - in a class'],
  ['verb=[a-cx-z]', { verb: 'y' }, 'match', 'two ranges'],
  ['verb=[[]', { verb: '[' }, 'match', '[ inside a class is a literal'],
  ['verb=[\\]]', { verb: ']' }, 'match', 'escaped ] in a class'],
  ['chat_jid=web:a[/]b', { chat_jid: 'web:a/b' }, 'match', 'a class may name / (Go)'],
  ['verb=[[:alpha:]]', { verb: 'a' }, 'no', 'no POSIX classes: [[:alpha:] then ]'],
  // escapes
  ['verb=\\*', { verb: '*' }, 'match', '\\* is a literal star'],
  ['verb=\\*', { verb: 'x' }, 'no', '\\* does not wildcard'],
  ['verb=\\?', { verb: '?' }, 'match', '\\? literal'],
  ['verb=a\\d', { verb: 'ad' }, 'match', 'escaped letter means itself'],
  // key= vs key=*
  ['sender=', { sender: '' }, 'match', 'key= matches the empty value'],
  ['sender=', { sender: '42' }, 'no', 'key= does not match a value'],
  ['sender=*', { sender: '42' }, 'match', 'key=* matches any value'],
  // no braces, extglobs, regex, negation
  ['verb={a,b}', { verb: 'a' }, 'no', 'no braces'],
  ['verb={a,b}', { verb: '{a,b}' }, 'match', 'braces are literal'],
  ['verb=+(a)', { verb: 'a' }, 'no', 'no extglob'],
  ['verb=!a', { verb: 'b' }, 'no', 'no negation'],
  ['verb=!a', { verb: '!a' }, 'match', '! is literal outside a class'],
  ['verb=a.c', { verb: 'abc' }, 'no', '. is literal, not regex'],
  ['verb=a|b', { verb: 'a' }, 'no', '| is literal, not regex'],
  ['verb=(x)', { verb: '(x)' }, 'match', 'parentheses are literal'],
  ['verb=^x$', { verb: '^x$' }, 'match', '^ and $ are literal'],
  // invalid rows
  ['telegram', {}, 'invalid', 'token without ='],
  ['platform=telegram mention', {}, 'invalid', 'one bare token spoils the row'],
  ['=telegram', {}, 'invalid', 'empty key'],
  ['colour=red', {}, 'invalid', 'unknown key'],
  ['Platform=telegram', {}, 'invalid', 'keys are case-sensitive'],
  ['platform=telegram platform=discord', {}, 'invalid', 'duplicate key'],
  ['room=[abc', {}, 'invalid', 'unclosed ['],
  ['room=[]', {}, 'invalid', 'empty class'],
  ['room=[]a]', {}, 'invalid', 'unescaped ] first in a class'],
  ['room=[a-]', {}, 'invalid', 'range without end'],
  ['room=[-a]', {}, 'invalid', 'unescaped - first in a class'],
  ['room=[z-a]', {}, 'invalid', 'reversed range'],
  ['room=[!]', {}, 'invalid', 'empty negated class'],
  ['room=abc\\', {}, 'invalid', 'trailing escape'],
];

function resolve(match: string, f: RouteFields): Expect {
  const table = compileRoutes([{ id: 1, seq: 0, match, target: 'krons/content', impulse_config: null }]);
  if (table.invalidRows.length) return 'invalid';
  return table.resolve(f) ? 'match' : 'no';
}

describe('routing conformance: match × fields', () => {
  it('has at least 60 cases', () => {
    expect(CASES.length).toBeGreaterThanOrEqual(60);
  });
  it.each(CASES)('%s with %o → %s (%s)', (match, over, want) => {
    expect(resolve(match, fields(over))).toBe(want);
  });
  it('an invalid row never widens to a wildcard, whatever the fields', () => {
    for (const [match, , want] of CASES.filter((c) => c[2] === 'invalid')) {
      const table = compileRoutes([{ id: 1, seq: 0, match, target: 'x', impulse_config: null }]);
      for (const f of [fields(), fields({ platform: '', room: '', sender: '', verb: '' })]) {
        expect(table.resolve(f), `${match} (${want})`).toBeNull();
      }
    }
  });
  it('names the reason of each invalid row', () => {
    const reasons = ['telegram', '=x', 'colour=red', 'verb=a verb=b', 'room=[abc'].map((m) => {
      const p = parseMatch(m);
      return 'error' in p ? p.error : '';
    });
    expect(reasons[0]).toMatch(/has no '='/);
    expect(reasons[1]).toMatch(/empty key/);
    expect(reasons[2]).toMatch(/unknown key 'colour'/);
    expect(reasons[3]).toMatch(/duplicate key 'verb'/);
    expect(reasons[4]).toMatch(/malformed glob '\[abc' for room: unclosed/);
  });
});

const TARGETS: Array<[string, string | null]> = [
  ['krons/content', null],
  ['folder:krons/content', null],
  ['builtin:ping', null],
  ['builtin:drop', null],
  ['daemon:indexer', null],
  ['../x', 'bad group folder'],
  ['/abs', 'bad group folder'],
  ['a//b', 'bad group folder'],
  ['Krons', 'bad group folder'],
  ['folder:', 'bad group folder'],
  ['builtin:echo', "unknown builtin 'echo'"],
  ['daemon:', 'empty daemon name'],
  ['http://x', 'unknown target kind'],
  ['', 'empty target'],
];

describe('routing conformance: targets', () => {
  it.each(TARGETS)('target %j → %s', (target, reason) => {
    const table = compileRoutes([{ id: 7, seq: 0, match: '', target, impulse_config: null }]);
    if (reason === null) {
      expect(table.invalidRows).toHaveLength(0);
      expect(table.resolve(fields())).not.toBeNull();
    } else {
      expect(table.invalidRows[0]?.reason).toContain(reason);
      expect(table.resolve(fields())).toBeNull();
    }
  });
});

/** The example table of docs/ROUTING.md (routes.example.sql), ids in insertion order. */
export const EXAMPLE_ROWS: RouteRow[] = [
  { id: 1, seq: 0, match: 'room=-5075870332', target: 'krons/content', impulse_config: null },
  { id: 2, seq: 10, match: 'platform=telegram verb=mention', target: 'rhias/mentions', impulse_config: null },
  { id: 3, seq: 20, match: 'verb=follow', target: 'krons/notifs', impulse_config: null },
  { id: 4, seq: 30, match: 'platform=bluesky', target: 'bsky/feed', impulse_config: null },
  { id: 5, seq: 99, match: '', target: 'default/firehose', impulse_config: null },
];

describe('the example table of docs/ROUTING.md', () => {
  const table = compileRoutes(EXAMPLE_ROWS);
  const cases: Array<[Partial<RouteFields>, string]> = [
    [{ platform: 'telegram', room: '-5075870332', verb: 'mention' }, 'krons/content'],
    [{ platform: 'telegram', room: '-100', verb: 'mention' }, 'rhias/mentions'],
    [{ platform: 'bluesky', room: 'did:plc:abc', verb: 'follow' }, 'krons/notifs'],
    [{ platform: 'bluesky', room: 'did:plc:abc', verb: 'mention' }, 'bsky/feed'],
    [{ platform: 'discord', room: '1234', verb: 'message' }, 'default/firehose'],
    [{ platform: 'telegram', room: '-100', verb: 'message' }, 'default/firehose'],
  ];
  it.each(cases)('%o → %s', (over, target) => {
    const hit = table.resolve(fields(over));
    expect(hit?.target).toEqual({ kind: 'folder', folder: target });
  });
  it('takes the first row by seq, then id, whatever the insertion order', () => {
    const shuffled = [...EXAMPLE_ROWS].reverse().map((r, i) => ({ ...r, id: 100 - i }));
    const t2 = compileRoutes(shuffled);
    expect(t2.resolve(fields({ verb: 'mention' }))?.route.row.target).toBe('krons/content');
    const tie = compileRoutes([
      { id: 2, seq: 5, match: '', target: 'b/b', impulse_config: null },
      { id: 1, seq: 5, match: '', target: 'a/a', impulse_config: null },
    ]);
    expect(tie.resolve(fields())?.route.row.target).toBe('a/a');
  });
});
