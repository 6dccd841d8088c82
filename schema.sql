-- gated database schema.
--
-- Applied on first start and by `gated init`. Every statement is idempotent, so applying it again is safe;
-- later versions add numbered migrations in gateway/store/migrate.ts and bump PRAGMA user_version.
-- Operators may read and edit every table with sqlite3 while gated runs.

-- Every inbound event and every outbound reply. Inbound rows are written by adapters (or anyone with
-- sqlite3); gated reads them after an integer cursor (router_state 'poll_cursor') and records how each was
-- handled in `state`. Outbound rows have is_from_me = 1 and carry their delivery state.
CREATE TABLE IF NOT EXISTS messages (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  chat_jid         TEXT    NOT NULL,
  sender           TEXT    NOT NULL DEFAULT '',
  sender_name      TEXT,
  content          TEXT    NOT NULL DEFAULT '',
  verb             TEXT    NOT NULL DEFAULT 'message',
  topic            TEXT    NOT NULL DEFAULT '',
  platform_msg_id  TEXT,
  reply_to         TEXT,
  timestamp        TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  is_from_me       INTEGER NOT NULL DEFAULT 0,

  -- Inbound pipeline (NULL until the gateway has seen the row). One of:
  --   held     routed to a session, waiting in the impulse gate
  --   ready    released by the gate, waiting for its lane
  --   running  written to a run (run_id, turn) whose agent has not answered that turn yet
  --   done     its turn was answered (or the gateway answered it itself)
  --   stopped  its run was stopped with /stop; never retried
  --   parked   its session failed repeatedly; waits for a new message of the chat
  --   command  a sticky or command message, answered by the gateway
  --   dropped  routed to builtin:drop, or empty (only whitespace and no files; see error)
  --   unrouted no route matched
  --   daemon   waiting to be POSTed to a daemon; then done or failed
  --   failed   a daemon refused it permanently (see error)
  --   denied   its sender may not reach the group (docs/ACCESS.md); never dispatched
  --   pending  a stranger's message in an approval group, waiting for /approve; then held or denied
  --   limited  over one of the group's limits; `gated access release` puts it back
  --   transcribing  came with audio and waits for its transcript (transcriptions, docs/VOICE.md)
  --   transcribed   its transcript (or the note why there is none) is its content: the poll takes it again
  state            TEXT,
  group_folder     TEXT,    -- the session key the layers chose: group ...
  session_topic    TEXT,    -- ... and topic
  target           TEXT,    -- the target as routed (folder, builtin:*, daemon:*)
  route_id         INTEGER, -- the routes row that matched, when routing decided
  weight           INTEGER, -- impulse weight of this message
  threshold        INTEGER, -- impulse threshold of the route that matched
  max_hold_ms      INTEGER, -- impulse maximum hold of the route that matched
  held_at          INTEGER, -- epoch ms when the gate began holding it
  ready_at         INTEGER, -- epoch ms when it became ready (lane order)
  dispatched_at    INTEGER, -- epoch ms when it was last handed to an agent (set by the UPDATE that hands it)
  run_id           INTEGER, -- session_log.id of the run that has or had it
  turn             INTEGER, -- the turn of that run whose stdin line carried it (1, 2, …)
  attempts         INTEGER NOT NULL DEFAULT 0,
  not_before       INTEGER, -- epoch ms: retry backoff
  error            TEXT,

  -- Outbound delivery (is_from_me = 1). delivery: pending | sent | failed.
  delivery          TEXT,
  delivery_attempts INTEGER NOT NULL DEFAULT 0,
  delivery_error    TEXT,
  delivered_at      TEXT,
  parts_sent        INTEGER NOT NULL DEFAULT 0,
  reply_to_id       INTEGER, -- the inbound messages.id this row answers
  kind              TEXT,    -- reply | gateway | error | status
  -- The text the agent gets when a layer changed it (a stripped @name / #topic prefix); NULL = content.
  -- content itself always stays as the user wrote it.
  agent_content     TEXT,
  -- 1: the text of an /interrupt: it interrupts its session's turn in progress and becomes the next turn.
  interrupts        INTEGER,
  -- 1: routed to a group that limits messages per sender per hour, so the row counts toward that limit.
  counted           INTEGER,
  -- Email rows: 'pass: <how>' when the From address was authenticated (DKIM aligned with From, or a trusted
  -- server's Authentication-Results), else 'fail: <why>'; an email row without 'pass' is a stranger's
  -- (docs/ACCESS.md "Who is the sender"). NULL on other platforms, whose ids the platform vouches for.
  sender_auth       TEXT,
  -- What the platform says of the sender's standing (GitHub's author_association), NULL when nothing.
  platform_role     TEXT,
  -- 1: the row came with an audio attachment (a voice note, an audio file, a video note), set with its
  -- attachments; the transcribe step looks only at these rows (docs/VOICE.md).
  audio             INTEGER,
  -- 1: content is the transcript of the row's audio; 0: the audio was not transcribed and content says why;
  -- NULL: no transcription. A row with a transcript is never a command and never changes routing state.
  transcript        INTEGER,
  -- Columns the layers read must hold text: a BLOB content used to stop every later message. Older
  -- databases lack this CHECK; the poll loop validates the same types when it reads a row.
  CHECK (typeof(chat_jid) = 'text' AND typeof(sender) = 'text' AND typeof(content) = 'text'
         AND typeof(verb) = 'text' AND typeof(topic) = 'text'
         AND typeof(sender_name) IN ('text', 'null') AND typeof(platform_msg_id) IN ('text', 'null')
         AND typeof(reply_to) IN ('text', 'null'))
);

-- A redelivered platform event is stored once.
CREATE UNIQUE INDEX IF NOT EXISTS idx_messages_platform
  ON messages(chat_jid, platform_msg_id) WHERE platform_msg_id IS NOT NULL;
-- The poll: inbound rows after the cursor, by id; outbound rows never enter it.
CREATE INDEX IF NOT EXISTS idx_messages_inbound ON messages(id) WHERE is_from_me = 0;
-- What the poll still has to take: inbound rows not seen yet. Rows gated places in a session itself (a
-- task firing, a delegation) carry a state from the start and are never in it, so however many of those
-- pile up after the cursor, a poll reads only what it has to.
CREATE INDEX IF NOT EXISTS idx_messages_unpolled ON messages(id) WHERE is_from_me = 0 AND state IS NULL;
-- Work in flight. One partial index per state, because SQLite uses a partial index only when the query
-- names its condition exactly (`state = 'ready'` does not let it use an index on `state IN (...)`). Each
-- leads with what its queries pin, so the planner prefers it to idx_messages_chat, which would walk the
-- chat's whole history.
CREATE INDEX IF NOT EXISTS idx_messages_held
  ON messages(chat_jid, weight, threshold, held_at, max_hold_ms) WHERE state = 'held';
CREATE INDEX IF NOT EXISTS idx_messages_ready
  ON messages(group_folder, session_topic, chat_jid, id) WHERE state = 'ready';
-- Ready rows in readiness order, covering what the queue's walks filter on (store/queue.ts nextLanes).
CREATE INDEX IF NOT EXISTS idx_messages_ready_walk
  ON messages(ready_at, id, group_folder, session_topic, not_before) WHERE state = 'ready';
-- Ready rows in backoff (a retry, files still downloading): only those, so the rows that wait for nothing,
-- nearly all of them, are not written into it when they become ready and out again when they run.
CREATE INDEX IF NOT EXISTS idx_messages_backoff
  ON messages(not_before) WHERE state = 'ready' AND not_before IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_messages_running ON messages(run_id) WHERE state = 'running';
CREATE INDEX IF NOT EXISTS idx_messages_parked
  ON messages(group_folder, session_topic, chat_jid, id) WHERE state = 'parked';
CREATE INDEX IF NOT EXISTS idx_messages_daemon ON messages(id, not_before) WHERE state = 'daemon';
-- Undelivered replies, per chat in order.
CREATE INDEX IF NOT EXISTS idx_messages_outbox
  ON messages(chat_jid, id) WHERE is_from_me = 1 AND delivery = 'pending';
-- Replies given up on (the dashboard's outbox view): only those, so a delivered reply never enters it.
CREATE INDEX IF NOT EXISTS idx_messages_failed ON messages(id) WHERE is_from_me = 1 AND delivery = 'failed';
-- A chat's history (web chat replay, /ping facts).
CREATE INDEX IF NOT EXISTS idx_messages_chat ON messages(chat_jid, id);

-- One routing table for the whole instance, walked in (seq, id) order; the first matching row wins.
CREATE TABLE IF NOT EXISTS routes (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,
  seq            INTEGER NOT NULL DEFAULT 0,
  match          TEXT    NOT NULL DEFAULT '',
  target         TEXT    NOT NULL,
  impulse_config TEXT,
  -- Any program may write rows; a wrong-typed one is refused here (new databases) and treated as an
  -- invalid row when read (older ones, which SQLite cannot give a CHECK without rebuilding the table).
  CHECK (typeof(seq) = 'integer' AND typeof(match) = 'text' AND typeof(target) = 'text'
         AND typeof(impulse_config) IN ('text', 'null'))
);
CREATE INDEX IF NOT EXISTS idx_routes_seq ON routes(seq);

-- Registered agent workspaces.
CREATE TABLE IF NOT EXISTS registered_groups (
  folder     TEXT PRIMARY KEY,
  name       TEXT,
  image      TEXT,                       -- docker image for this group (default GATED_AGENT_IMAGE)
  network    TEXT,                       -- the docker network its containers join ('bridge', a user-defined one); NULL: none
  mounts     TEXT,                       -- JSON list of extra host paths, checked against the allow-list
  send_allow TEXT,                       -- globs over JIDs (space/comma separated) `send` actions may reach
  actions    TEXT,                       -- action types the group's agent may use (space/comma separated); NULL: all
  added_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  access     TEXT NOT NULL DEFAULT 'open', -- open | members | approval (docs/ACCESS.md)
  placement  TEXT,                       -- swarm runtime: {"constraints":[…],"reserveMemoryBytes":n,"reserveCpus":n}
  agent      TEXT,                       -- the agent profile the group runs: NULL/'claude', 'codex', or an agent_profiles row
  model      TEXT,                       -- the model its agent uses (NULL: the profile's default)
  -- What a new message does while the session's agent works on a turn (docs/PROTOCOL.md): queue (the next
  -- turn) | steer (written at once with "steer": true) | interrupt (the turn in progress is interrupted first).
  busy       TEXT NOT NULL DEFAULT 'queue',
  -- What a platform thread (a Slack thread, a forum topic, a mail thread) is to the group (docs/CHANNELS.md):
  -- topics (each thread a session of its own) | replies (the chat one session; answers go into the thread).
  threads    TEXT NOT NULL DEFAULT 'topics',
  -- The preset that decides the tool calls no tool rule decides (docs/APPROVALS.md): read_only | supervised
  -- (anything that may write or execute is asked about) | full.
  autonomy   TEXT NOT NULL DEFAULT 'supervised'
);

-- Agents an operator defines (docs/AGENTS.md): a name registered_groups.agent may use, with the image
-- (docker, swarm) or command (process runtime) that runs it. A row named 'claude' or 'codex' overrides
-- the built-in settings of that agent.
CREATE TABLE IF NOT EXISTS agent_profiles (
  name     TEXT PRIMARY KEY,
  image    TEXT,                         -- container image (NULL: the runtime's default image)
  command  TEXT,                         -- shell command for the process runtime (NULL: GATED_AGENT_CMD)
  model    TEXT,                         -- default model of groups that name none
  added_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- Registered daemons for `daemon:NAME` targets.
CREATE TABLE IF NOT EXISTS daemons (
  name     TEXT PRIMARY KEY,
  url      TEXT NOT NULL,
  added_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- Gateway state: the poll cursor, the routes version, adapter cursors.
CREATE TABLE IF NOT EXISTS router_state (
  key   TEXT PRIMARY KEY,
  value TEXT
);

-- Any change to routes or daemons bumps a counter, so a running gated recompiles its table on the next
-- lookup after the change, whichever process made it, without re-reading the table per message.
INSERT OR IGNORE INTO router_state(key, value) VALUES ('routes_version', '0');
CREATE TRIGGER IF NOT EXISTS routes_bump_insert AFTER INSERT ON routes BEGIN
  UPDATE router_state SET value = CAST(value AS INTEGER) + 1 WHERE key = 'routes_version';
END;
CREATE TRIGGER IF NOT EXISTS routes_bump_update AFTER UPDATE ON routes BEGIN
  UPDATE router_state SET value = CAST(value AS INTEGER) + 1 WHERE key = 'routes_version';
END;
CREATE TRIGGER IF NOT EXISTS routes_bump_delete AFTER DELETE ON routes BEGIN
  UPDATE router_state SET value = CAST(value AS INTEGER) + 1 WHERE key = 'routes_version';
END;
CREATE TRIGGER IF NOT EXISTS daemons_bump_insert AFTER INSERT ON daemons BEGIN
  UPDATE router_state SET value = CAST(value AS INTEGER) + 1 WHERE key = 'routes_version';
END;
CREATE TRIGGER IF NOT EXISTS daemons_bump_update AFTER UPDATE ON daemons BEGIN
  UPDATE router_state SET value = CAST(value AS INTEGER) + 1 WHERE key = 'routes_version';
END;
CREATE TRIGGER IF NOT EXISTS daemons_bump_delete AFTER DELETE ON daemons BEGIN
  UPDATE router_state SET value = CAST(value AS INTEGER) + 1 WHERE key = 'routes_version';
END;
CREATE TRIGGER IF NOT EXISTS groups_bump_insert AFTER INSERT ON registered_groups BEGIN
  UPDATE router_state SET value = CAST(value AS INTEGER) + 1 WHERE key = 'routes_version';
END;
CREATE TRIGGER IF NOT EXISTS groups_bump_delete AFTER DELETE ON registered_groups BEGIN
  UPDATE router_state SET value = CAST(value AS INTEGER) + 1 WHERE key = 'routes_version';
END;

-- Sticky group / topic per chat (layer 1).
CREATE TABLE IF NOT EXISTS chat_state (
  chat_jid     TEXT PRIMARY KEY,
  sticky_group TEXT,
  sticky_topic TEXT,
  updated_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- The agent's session id per session key.
CREATE TABLE IF NOT EXISTS sessions (
  group_folder TEXT NOT NULL,
  topic        TEXT NOT NULL DEFAULT '',
  session_id   TEXT NOT NULL,
  updated_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  PRIMARY KEY (group_folder, topic)
);

-- One row per agent run. result: ok | error | timeout | stopped; NULL while running.
CREATE TABLE IF NOT EXISTS session_log (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  group_folder TEXT NOT NULL,
  topic        TEXT NOT NULL DEFAULT '',
  chat_jid     TEXT,
  session_id   TEXT,
  started_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  ended_at     TEXT,
  result       TEXT,
  error        TEXT,
  exit_code    INTEGER,
  messages     INTEGER NOT NULL DEFAULT 0,
  replies      INTEGER NOT NULL DEFAULT 0,
  stderr_tail  TEXT,
  -- Usage the agent reported for the run (summed over its blocks); the daily cost limit reads cost_usd.
  input_tokens  INTEGER,
  output_tokens INTEGER,
  cost_usd      REAL,
  -- Blocks of the run whose agent compacted its session first (its context was full).
  compacted     INTEGER,
  -- Milliseconds the agent sat idle (every turn answered, waiting for a follow-up until the idle timeout)
  -- between started_at and ended_at; the rest of the run is work. NULL: not known (the run is open, or
  -- ended before gated recorded it).
  idle_ms       INTEGER
);
CREATE INDEX IF NOT EXISTS idx_session_log_key ON session_log(group_folder, topic, id);
CREATE INDEX IF NOT EXISTS idx_session_log_open ON session_log(id) WHERE result IS NULL;

-- Notes for a group's next prompt (e.g. "session was reset"); consumed by the next run of the key.
CREATE TABLE IF NOT EXISTS system_messages (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  group_folder TEXT NOT NULL,
  topic        TEXT NOT NULL DEFAULT '',
  content      TEXT NOT NULL,
  created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  consumed_at  TEXT
);
CREATE INDEX IF NOT EXISTS idx_system_messages_pending
  ON system_messages(group_folder, topic, id) WHERE consumed_at IS NULL;

-- Each part of a split reply, once the platform accepted it: a restart resumes after the last one.
CREATE TABLE IF NOT EXISTS outbound_parts (
  message_id      INTEGER NOT NULL,
  part            INTEGER NOT NULL,
  platform_msg_id TEXT,
  sent_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  PRIMARY KEY (message_id, part)
);

-- How often each route took a message (dashboard, `gated routes list`). Kept apart from routes so that
-- counting never looks like an edit of the table.
CREATE TABLE IF NOT EXISTS route_hits (
  route_id    INTEGER PRIMARY KEY,
  hits        INTEGER NOT NULL DEFAULT 0,
  last_hit_at TEXT
);

-- ---------------------------------------------------------------------------------------------------
-- Access (docs/ACCESS.md): who may reach a group's agent, pairing codes, limits, and the audit trail.

-- Roles per group. `sender` is a glob (routing's Go path.Match rules) over `platform:sender_id`, e.g.
-- `telegram:12345` or `discord:*`. blocked beats owner and member; GATED_ADMINS are owners everywhere and
-- cannot be blocked. A group without rows of its own uses its nearest ancestor folder's rows.
CREATE TABLE IF NOT EXISTS members (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  group_folder TEXT NOT NULL,
  sender       TEXT NOT NULL,
  role         TEXT NOT NULL DEFAULT 'member' CHECK (role IN ('owner', 'member', 'blocked')),
  note         TEXT,
  added_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (group_folder, sender)
);

-- Pairing codes of approval groups. A code is open while state = 'open' and expires_at (epoch ms) is in
-- the future. member_folder is where the member row goes on approval: the folder whose rows applied.
CREATE TABLE IF NOT EXISTS approvals (
  code          TEXT PRIMARY KEY,
  group_folder  TEXT NOT NULL,
  member_folder TEXT NOT NULL,
  chat_jid      TEXT NOT NULL,
  sender        TEXT NOT NULL,   -- platform:sender_id
  sender_name   TEXT,
  message_id    INTEGER,         -- the message that asked
  created_at    INTEGER NOT NULL,
  expires_at    INTEGER NOT NULL,
  state         TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'approved', 'rejected')),
  decided_by    TEXT,
  decided_at    INTEGER
);
CREATE INDEX IF NOT EXISTS idx_approvals_sender ON approvals(group_folder, sender, created_at);
CREATE INDEX IF NOT EXISTS idx_approvals_open ON approvals(group_folder, expires_at) WHERE state = 'open';

-- Limits per group; NULL is no limit. Windows are UTC clock hours and UTC days.
CREATE TABLE IF NOT EXISTS limits (
  group_folder     TEXT PRIMARY KEY,
  sender_per_hour  INTEGER, -- messages one sender may send to the group per hour
  runs_per_day     INTEGER, -- agent runs of the group per day
  cost_per_day_usd REAL,    -- agent cost of the group per day (session_log.cost_usd)
  tokens_per_day   INTEGER  -- agent tokens (input and output) of the group per day
);

-- Daily limits per sender of a group (docs/COSTS.md), beside the group's own: sender '*' is every sender
-- of the group without a row of their own. NULL is no limit. Windows are UTC days.
CREATE TABLE IF NOT EXISTS sender_limits (
  group_folder     TEXT NOT NULL,
  sender           TEXT NOT NULL,  -- platform:id (the chat's platform, messages.sender), or '*'
  runs_per_day     INTEGER,
  tokens_per_day   INTEGER,
  cost_per_day_usd REAL,
  PRIMARY KEY (group_folder, sender)
);

-- What a model costs, for usage an agent reports without a cost (docs/COSTS.md): US dollars per million
-- tokens. `model` is the model's name as the run's agent got it, or '*' for any model without a row.
CREATE TABLE IF NOT EXISTS model_prices (
  model          TEXT PRIMARY KEY,
  input_per_mtok  REAL NOT NULL DEFAULT 0,
  output_per_mtok REAL NOT NULL DEFAULT 0
);

-- Every usage report of every run (a block's `usage`), credited to the sender of the turn it belongs to:
-- what `gated usage`, the dashboard's charts and the daily limits per sender read. `cost_usd` is what the
-- report added to the run's cost (a report that settles priced ones may add less than it says, even less
-- than nothing). `at` is epoch ms.
CREATE TABLE IF NOT EXISTS usage_reports (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id        INTEGER NOT NULL,
  group_folder  TEXT    NOT NULL,
  sender        TEXT,  -- platform:id of the turn's newest message
  model         TEXT,
  at            INTEGER NOT NULL,
  input_tokens  INTEGER NOT NULL DEFAULT 0,
  output_tokens INTEGER NOT NULL DEFAULT 0,
  cost_usd      REAL    NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS idx_usage_reports_group ON usage_reports(group_folder, at);
CREATE INDEX IF NOT EXISTS idx_usage_reports_sender ON usage_reports(group_folder, sender, at);

-- One more budget an approver granted a run over a cap (docs/COSTS.md): the cap of `kind` ('cost' or
-- 'tokens') of the group (sender '') or of one sender counts `amount` more on `day` (epoch ms of the UTC
-- day's start). `approval_id` is the tool_approvals row that asked.
CREATE TABLE IF NOT EXISTS budget_grants (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  group_folder TEXT    NOT NULL,
  sender       TEXT    NOT NULL DEFAULT '',
  kind         TEXT    NOT NULL,
  day          INTEGER NOT NULL,
  amount       REAL    NOT NULL,
  approval_id  INTEGER,
  granted_by   TEXT,
  at           INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_budget_grants_day ON budget_grants(group_folder, day);

-- One notice per sender, limit and window: the first message over a limit is told, the rest are quiet.
CREATE TABLE IF NOT EXISTS limit_notices (
  group_folder TEXT NOT NULL,
  sender       TEXT NOT NULL,
  kind         TEXT NOT NULL,
  window_start INTEGER NOT NULL,
  PRIMARY KEY (group_folder, sender, kind, window_start)
);

-- Rows withheld by access, per group (approve releases a sender's pending rows; the dashboard counts).
CREATE INDEX IF NOT EXISTS idx_messages_pending ON messages(group_folder, sender, id) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS idx_messages_limited ON messages(chat_jid, id) WHERE state = 'limited';
-- Messages per sender per hour: the index idx_messages_sender_counted of the counted rows (migration 16 → 17
-- in store/migrate.ts creates it, as it needs the column `counted` that older databases get there). Its
-- predecessors took in every routed row, whether its group had that limit or not.
DROP INDEX IF EXISTS idx_messages_group_sender;
DROP INDEX IF EXISTS idx_messages_sender_hour;
-- The inbound rows of a time window (the access report's last 24 hours): appended at its end as rows arrive.
CREATE INDEX IF NOT EXISTS idx_messages_time ON messages(timestamp) WHERE is_from_me = 0;

-- A running gated caches groups' access modes, members and limits; any change bumps this counter.
INSERT OR IGNORE INTO router_state(key, value) VALUES ('access_version', '0');
CREATE TRIGGER IF NOT EXISTS access_bump_members_insert AFTER INSERT ON members BEGIN
  UPDATE router_state SET value = CAST(value AS INTEGER) + 1 WHERE key = 'access_version';
END;
CREATE TRIGGER IF NOT EXISTS access_bump_members_update AFTER UPDATE ON members BEGIN
  UPDATE router_state SET value = CAST(value AS INTEGER) + 1 WHERE key = 'access_version';
END;
CREATE TRIGGER IF NOT EXISTS access_bump_members_delete AFTER DELETE ON members BEGIN
  UPDATE router_state SET value = CAST(value AS INTEGER) + 1 WHERE key = 'access_version';
END;
CREATE TRIGGER IF NOT EXISTS access_bump_limits_insert AFTER INSERT ON limits BEGIN
  UPDATE router_state SET value = CAST(value AS INTEGER) + 1 WHERE key = 'access_version';
END;
CREATE TRIGGER IF NOT EXISTS access_bump_limits_update AFTER UPDATE ON limits BEGIN
  UPDATE router_state SET value = CAST(value AS INTEGER) + 1 WHERE key = 'access_version';
END;
CREATE TRIGGER IF NOT EXISTS access_bump_limits_delete AFTER DELETE ON limits BEGIN
  UPDATE router_state SET value = CAST(value AS INTEGER) + 1 WHERE key = 'access_version';
END;
CREATE TRIGGER IF NOT EXISTS access_bump_groups_insert AFTER INSERT ON registered_groups BEGIN
  UPDATE router_state SET value = CAST(value AS INTEGER) + 1 WHERE key = 'access_version';
END;
CREATE TRIGGER IF NOT EXISTS access_bump_groups_update AFTER UPDATE ON registered_groups BEGIN
  UPDATE router_state SET value = CAST(value AS INTEGER) + 1 WHERE key = 'access_version';
END;
CREATE TRIGGER IF NOT EXISTS access_bump_groups_delete AFTER DELETE ON registered_groups BEGIN
  UPDATE router_state SET value = CAST(value AS INTEGER) + 1 WHERE key = 'access_version';
END;

-- Every change of the audited tables (store/audit-triggers.ts lists them: routes, registered_groups,
-- members, limits, approvals, daemons, tasks, tool_rules; tool_approvals, its questions and decisions; all made by store/audit-triggers.ts), by whatever process made it,
-- with the whole row before and after. The triggers are generated from that list when the schema is
-- applied (every column the table has then), so edits made with sqlite3 are kept too, INSERT OR REPLACE
-- keeps the replaced rows (action 'replace'), and deleting or changing audit rows is itself recorded
-- (subject 'audit'). `actor` is router_state 'audit_actor' as set by gated's writers inside their own
-- transaction (`cli:<user>`, `dashboard`, `chat:<platform:id>`, `gateway`); any other connection (sqlite3)
-- is recorded as 'sql', whatever it wrote into router_state.
CREATE TABLE IF NOT EXISTS audit (
  id      INTEGER PRIMARY KEY AUTOINCREMENT,
  at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  actor   TEXT NOT NULL,
  subject TEXT NOT NULL, -- the audited table, or 'audit' for a change of the trail itself
  action  TEXT NOT NULL, -- insert | update | delete | replace (INSERT OR REPLACE; before = the replaced rows)
  row_key TEXT,          -- the changed row's key (id, folder or code)
  before  TEXT,          -- JSON of the row before (NULL for insert)
  after   TEXT           -- JSON of the row after (NULL for delete)
);
CREATE INDEX IF NOT EXISTS idx_audit_at ON audit(at);
-- The rows an INSERT OR REPLACE is about to replace, kept by a BEFORE INSERT trigger for the AFTER INSERT
-- trigger of the same row (one slot per audited table, emptied at once).
CREATE TABLE IF NOT EXISTS audit_replaced (
  subject TEXT PRIMARY KEY,
  before  TEXT
);
-- Scheduled tasks (docs/TASKS.md). When due, a task becomes one inbound row (verb 'task', sender
-- 'task:<id>') of its group and topic, answered in chat_jid; that row, the task_runs row and the next due
-- time commit in one transaction, so each due time fires once across restarts. Times are UTC ISO-8601.
CREATE TABLE IF NOT EXISTS tasks (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  group_folder TEXT    NOT NULL,
  topic        TEXT    NOT NULL DEFAULT '',
  chat_jid     TEXT    NOT NULL,
  kind         TEXT    NOT NULL CHECK (kind IN ('cron', 'every', 'at')),
  spec         TEXT    NOT NULL,            -- cron: 5 fields in GATED_TZ; every: a duration (1h30m); at: ISO
  text         TEXT    NOT NULL,            -- what the agent receives when the task fires
  status       TEXT    NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'done')),
  next_run_at  TEXT,                        -- the next due time; NULL once done
  last_run_at  TEXT,                        -- when it last fired
  anchor_at    TEXT    NOT NULL,            -- every: due times are anchor_at + k * interval
  failures     INTEGER NOT NULL DEFAULT 0,  -- runs in a row that ended without answering the task
  error        TEXT,                        -- why it was paused, when gated paused it
  created_by   TEXT    NOT NULL DEFAULT 'cli', -- cli | dashboard | agent:<group>
  created_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX IF NOT EXISTS idx_tasks_due ON tasks(next_run_at) WHERE status = 'active';

-- One row per firing of a task: the due time it answers (missed due times coalesced: `due_count`), the
-- inbound row it became and, once known, how its run went. Unique per due time: a due time fires once.
CREATE TABLE IF NOT EXISTS task_runs (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  task_id       INTEGER NOT NULL,
  due_at        TEXT    NOT NULL,
  due_count     INTEGER NOT NULL DEFAULT 1,
  message_id    INTEGER,
  fired_at      TEXT    NOT NULL,
  outcome       TEXT,                       -- NULL while open, then ok | failed | stopped
  failures_seen INTEGER NOT NULL DEFAULT 0, -- failed runs of its message already counted on the task
  UNIQUE (task_id, due_at)
);
CREATE INDEX IF NOT EXISTS idx_task_runs_open ON task_runs(id) WHERE outcome IS NULL;

-- Every action an agent's output block carried (docs/PROTOCOL.md), written in the transaction that
-- stores the block, before its effect: applied (with the row it made) or refused (with the reason).
CREATE TABLE IF NOT EXISTS actions (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id       INTEGER,                     -- session_log.id of the run
  group_folder TEXT    NOT NULL,
  topic        TEXT    NOT NULL DEFAULT '',
  chat_jid     TEXT,                        -- the chat the run answers
  type         TEXT    NOT NULL,            -- send | delegate | escalate | schedule | react | what was written
  payload      TEXT    NOT NULL,            -- the action as the agent wrote it (JSON, truncated)
  status       TEXT    NOT NULL CHECK (status IN ('applied', 'refused')),
  reason       TEXT,                        -- why it was refused
  message_id   INTEGER,                     -- the row it made: outbound (send, react) or inbound (delegate)
  task_id      INTEGER,                     -- the task it made (schedule)
  created_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX IF NOT EXISTS idx_actions_run ON actions(run_id);

-- A delegate or escalate action: work handed to another group. The inbound row for that group lives in
-- the chat 'delegation:<id>'; each answer block of its runs comes back to (from_group, from_topic,
-- from_chat) as an inbound row with verb 'delegation'. depth is how far the chain has nested (1 = the
-- first delegation; an answer's session delegating again stays at the depth it answered), origin the
-- message whose turn started the chain (docs/SECURITY.md: depth and hops are bounded per originating message).
CREATE TABLE IF NOT EXISTS delegations (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  action_id  INTEGER NOT NULL,
  kind       TEXT    NOT NULL CHECK (kind IN ('delegate', 'escalate')),
  from_group TEXT    NOT NULL,
  from_topic TEXT    NOT NULL DEFAULT '',
  from_chat  TEXT    NOT NULL,
  from_thread TEXT   NOT NULL DEFAULT '', -- the platform thread (messages.topic) answers go back to
  to_group   TEXT    NOT NULL,
  depth      INTEGER NOT NULL,
  message_id INTEGER,
  answers    INTEGER NOT NULL DEFAULT 0,
  created_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  origin     INTEGER
);

-- Every inbound row gated placed for a delegation chain: the delegated row (answer = 0) and each answer
-- that came back (answer = 1). A chain's hops are its rows: all rows of one origin.
CREATE TABLE IF NOT EXISTS delegation_rows (
  message_id    INTEGER PRIMARY KEY,
  delegation_id INTEGER NOT NULL,
  origin        INTEGER NOT NULL,
  answer        INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_delegation_rows_origin ON delegation_rows(origin);

-- Files that came with inbound messages (docs/PROTOCOL.md, "Files"). The channel stores the row and these
-- rows together; the inbox downloader fills the files into the routed group's folder
-- (`inbox/<message id>/<name>`), retrying failures, and the agent's input lists the saved ones.
-- state: pending | saved | failed | too_large.
CREATE TABLE IF NOT EXISTS attachments (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  message_id INTEGER NOT NULL,  -- the inbound messages.id
  seq        INTEGER NOT NULL,  -- order within the message, from 0
  kind       TEXT    NOT NULL,  -- photo | document | voice | audio | video | image
  name       TEXT    NOT NULL,  -- sanitised file name
  mime       TEXT,
  size       INTEGER,           -- announced by the platform, then the bytes saved
  source     TEXT    NOT NULL,  -- where the channel fetches it (file id, URL, did|cid); never shown to agents
  state      TEXT    NOT NULL DEFAULT 'pending',
  path       TEXT,              -- relative to the group folder, once saved
  attempts   INTEGER NOT NULL DEFAULT 0,
  not_before INTEGER,           -- epoch ms: retry backoff
  error      TEXT,
  created_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (message_id, seq)
);
CREATE INDEX IF NOT EXISTS idx_attachments_pending ON attachments(message_id) WHERE state = 'pending';
-- The inbox's next downloads, oldest first (store/attachments.ts `due`): without it the planner reads the
-- whole table in id order to find the few pending rows, on every step of the inbox.
CREATE INDEX IF NOT EXISTS idx_attachments_due ON attachments(id) WHERE state = 'pending';

-- Inbound audio waiting for its transcript (docs/VOICE.md), one row per message in state `transcribing`:
-- the transcriber takes pending rows whose not_before passed, and writes the transcript into the message in
-- the same transaction that finishes this row, so a crash mid-transcription transcribes the row again, once.
CREATE TABLE IF NOT EXISTS transcriptions (
  message_id  INTEGER PRIMARY KEY,  -- the inbound messages.id
  group_folder TEXT,                -- the group the chat's messages go to when it was stored (its language)
  state       TEXT NOT NULL DEFAULT 'pending',  -- pending | done | failed | refused
  attempts    INTEGER NOT NULL DEFAULT 0,
  not_before  INTEGER,              -- epoch ms: retry backoff
  error       TEXT,                 -- the last failure, or why it was refused
  duration_s  REAL,                 -- the audio's length, when ffprobe told it
  transcriber TEXT,                 -- what transcribed it: the endpoint's host or the command's name
  took_ms     INTEGER,              -- how long the successful transcription took
  created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX IF NOT EXISTS idx_transcriptions_due ON transcriptions(not_before) WHERE state = 'pending';
-- Transcribed rows the poll takes again (gateway/loop.ts): almost always none.
CREATE INDEX IF NOT EXISTS idx_messages_transcribed ON messages(id) WHERE state = 'transcribed';

-- Files an agent's block named (`files`), sent after the reply's text parts. Each file is one more part of
-- its reply: part number = text parts + seq, recorded in outbound_parts like text, so a restart neither
-- loses nor repeats one. state: ok (will be sent) | refused (outside the group folder, missing; see error).
CREATE TABLE IF NOT EXISTS outbound_files (
  message_id INTEGER NOT NULL,  -- the outbound messages.id
  seq        INTEGER NOT NULL,
  path       TEXT    NOT NULL,  -- as the agent wrote it, relative to the group folder
  abs_path   TEXT,              -- resolved (symlinks followed) inside the group folder
  name       TEXT    NOT NULL,
  mime       TEXT    NOT NULL,
  state      TEXT    NOT NULL DEFAULT 'ok',
  error      TEXT,
  spoken     INTEGER,               -- 1: the reply's text spoken by the text-to-speech command (docs/VOICE.md)
  PRIMARY KEY (message_id, seq)
);
-- The dashboard's history: one value per (minute, series, label), written once a minute by store/history.ts
-- from the rows the minute produced (messages in by platform and outcome, replies out and their latency,
-- runs by result and their duration, queue depth, delivery failures, agent cost). `minute` is epoch ms /
-- 60000. Kept for GATED_HISTORY_DAYS, then deleted.
CREATE TABLE IF NOT EXISTS metrics_minute (
  minute INTEGER NOT NULL,
  series TEXT    NOT NULL,
  label  TEXT    NOT NULL DEFAULT '',
  value  REAL    NOT NULL,
  PRIMARY KEY (minute, series, label)
) WITHOUT ROWID;
-- Runs and replies by the minute they ended or were delivered (the history's windows; the run view).
CREATE INDEX IF NOT EXISTS idx_session_log_ended ON session_log(ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_messages_delivered ON messages(delivered_at) WHERE delivered_at IS NOT NULL;

-- The draft message a chat thread shows while an agent streams (`partial` blocks; docs/CHANNELS.md,
-- "Drafts"): never a reply, only its platform id, so that after a crash the next answer edits or removes it.
-- thread is the topic of the turn's messages (a web chat tab, a forum thread; '' for most chats), so two
-- topics of one chat stream two drafts. final = 1 once it was edited into an answer's first part, until
-- delivery records that part.
CREATE TABLE IF NOT EXISTS drafts (
  chat_jid        TEXT NOT NULL,
  thread          TEXT NOT NULL DEFAULT '',
  run_id          INTEGER,
  turn            INTEGER,
  platform_msg_id TEXT,
  text            TEXT,
  final           INTEGER NOT NULL DEFAULT 0,
  updated_at      INTEGER,
  PRIMARY KEY (chat_jid, thread)
);

-- Tool rules (docs/APPROVALS.md): the first row by seq of a group, then of its ancestors, whose `tool` glob
-- takes the tool's name and `input` glob its input line decides: allow | ask | deny; `approvers` says who
-- may decide an ask (owners | members; admins always). No CHECK constraints: like routes, a bad row is
-- stored, never matches, and is reported by `gated tools check`.
CREATE TABLE IF NOT EXISTS tool_rules (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  group_folder TEXT NOT NULL,
  seq          INTEGER NOT NULL,
  tool         TEXT NOT NULL,
  input        TEXT NOT NULL DEFAULT '*',
  decision     TEXT NOT NULL,
  approvers    TEXT NOT NULL DEFAULT 'owners'
);
CREATE INDEX IF NOT EXISTS idx_tool_rules_group ON tool_rules(group_folder, seq, id);
-- Any change bumps a counter: the next ask recompiles the rules, whichever process changed them.
INSERT OR IGNORE INTO router_state(key, value) VALUES ('tool_rules_version', '0');
CREATE TRIGGER IF NOT EXISTS tool_rules_bump_insert AFTER INSERT ON tool_rules BEGIN
  UPDATE router_state SET value = CAST(value AS INTEGER) + 1 WHERE key = 'tool_rules_version';
END;
CREATE TRIGGER IF NOT EXISTS tool_rules_bump_update AFTER UPDATE ON tool_rules BEGIN
  UPDATE router_state SET value = CAST(value AS INTEGER) + 1 WHERE key = 'tool_rules_version';
END;
CREATE TRIGGER IF NOT EXISTS tool_rules_bump_delete AFTER DELETE ON tool_rules BEGIN
  UPDATE router_state SET value = CAST(value AS INTEGER) + 1 WHERE key = 'tool_rules_version';
END;

-- Tool approvals (docs/APPROVALS.md): one row per tool call a rule sent to `ask` (pairing codes live in
-- `approvals`; their codes have 8 characters, these 5, so a code names one row of one table). The question
-- is (group_folder, topic, tool, input_json) of the turn whose rows are turn_rows; only a re-run of that same
-- turn (after a restart) that asks it again, while no other ask waits on it, is answered by this row. `used_at`
-- is set when the decision was written to an agent: a decision is used once.
-- state: pending → approved | rejected | expired | cancelled. Times are epoch ms.
CREATE TABLE IF NOT EXISTS tool_approvals (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  code         TEXT NOT NULL UNIQUE,
  group_folder TEXT NOT NULL,
  topic        TEXT NOT NULL DEFAULT '',
  chat_jid     TEXT NOT NULL,
  run_id       INTEGER,
  ask_id       TEXT,            -- the agent's id of the question in the run that asked it last
  turn_rows    TEXT,            -- JSON array of the message ids of the turn that asked: the decision answers only that turn
  tool         TEXT NOT NULL,
  input_json   TEXT NOT NULL,   -- the input as the agent sent it (compact JSON)
  input_line   TEXT NOT NULL,   -- the line the rules matched
  summary      TEXT,
  approvers    TEXT NOT NULL DEFAULT 'owners',
  rule_id      INTEGER,
  state        TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'approved', 'rejected', 'expired', 'cancelled')), -- cancelled: its turn was stopped, interrupted or ended first
  note         TEXT,
  decided_by   TEXT,
  created_at   INTEGER NOT NULL,
  expires_at   INTEGER NOT NULL,
  decided_at   INTEGER,
  used_at      INTEGER,
  platform_id  TEXT,            -- the chat message that asked (its buttons), once sent
  outbound_id  INTEGER,         -- or the outbound row that asked, on a platform without buttons
  announced    INTEGER NOT NULL DEFAULT 0 -- 1 once the chat was told the decision (message edited or followed up)
);
CREATE INDEX IF NOT EXISTS idx_tool_approvals_question ON tool_approvals(group_folder, topic, tool, input_json) WHERE used_at IS NULL;
CREATE INDEX IF NOT EXISTS idx_tool_approvals_pending ON tool_approvals(expires_at) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS idx_tool_approvals_created ON tool_approvals(created_at);
-- Its audit triggers (an insert, a change of state) are made by store/audit-triggers.ts with the others.

-- Every tool call a run's agent asked about or reported (docs/SECURITY.md, "Receipts"), in the order they
-- were asked (id). A call is sealed once it ended (its result reported, refused, or its run ended first):
-- `seq` is then its place in the run's chain (1, 2, …), `prev` the receipt of the record sealed before it in
-- the same run ('' for the first) and `receipt` the HMAC-SHA256 (hex) under the instance's key
-- (GATED_RECEIPT_KEY_FILE) over the record's signed fields and `prev` (store/receipts.ts lists them).
-- `input` is the input as compact JSON cut at 4,096 characters; `input_sha256` covers the whole of it.
-- decision: allow | deny | agent (reported by the agent, never asked); decided_by says what decided it:
-- `rule N`, `preset LEVEL`, `default`, `approval CODE`, `gated` (no turn, cancelled) or `agent`.
-- Times are epoch ms; turn is the run's turn the call belongs to.
CREATE TABLE IF NOT EXISTS tool_calls (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id        INTEGER NOT NULL,
  turn          INTEGER,
  call_id       TEXT    NOT NULL,   -- the agent's id for the call (its ask id)
  tool          TEXT    NOT NULL,
  input         TEXT    NOT NULL,
  input_bytes   INTEGER NOT NULL,
  input_sha256  TEXT    NOT NULL,
  decision      TEXT,               -- NULL while a person is asked
  decided_by    TEXT,
  approval_id   INTEGER,            -- tool_approvals.id when a person was asked
  started_at    INTEGER NOT NULL,
  decided_at    INTEGER,
  ended_at      INTEGER,
  output_bytes  INTEGER,
  output_sha256 TEXT,
  error         TEXT,
  seq           INTEGER,
  prev          TEXT,
  receipt       TEXT
);
CREATE INDEX IF NOT EXISTS idx_tool_calls_run ON tool_calls(run_id, id);
CREATE UNIQUE INDEX IF NOT EXISTS idx_tool_calls_chain ON tool_calls(run_id, seq) WHERE seq IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_tool_calls_open ON tool_calls(run_id, call_id) WHERE seq IS NULL;

-- What the email channel must remember of each mail it stored to answer it in its thread
-- (docs/CHANNELS.md, "Email"): the subject a reply repeats and the References it extends. The row's
-- platform_msg_id is the Message-ID; chat_jid is `email:<sender address>`.
CREATE TABLE IF NOT EXISTS email_mails (
  chat_jid   TEXT NOT NULL,
  message_id TEXT NOT NULL,
  subject    TEXT NOT NULL DEFAULT '',
  refs       TEXT NOT NULL DEFAULT '', -- the mail's References, then its Message-ID, space-separated
  PRIMARY KEY (chat_jid, message_id)
) WITHOUT ROWID;

-- Workflows (docs/WORKFLOWS.md): one workflow_runs row per `/workflow run`, the workflow file as parsed when
-- it started (`definition`, JSON: an edit of the file changes later runs only), and the events of its steps.
-- A step's run is a normal inbound row (verb 'workflow', session topic wf<run>-<step>) inserted in the same
-- transaction as its 'started' event, so each step attempt starts once across crashes; the queue answers
-- the row once; its answer (or its failure) becomes the step's 'done' (or 'failed') event. A gate's
-- question is a tool_approvals row (run_id NULL, ask_id 'workflow:<run>:<step>'), decided like any ask.
-- state: running → done | failed | rejected | cancelled (resume makes a run running again). Times epoch ms.
CREATE TABLE IF NOT EXISTS workflow_runs (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  group_folder TEXT NOT NULL,
  name         TEXT NOT NULL,
  file         TEXT NOT NULL,
  arguments    TEXT NOT NULL DEFAULT '',
  definition   TEXT NOT NULL,
  chat_jid     TEXT NOT NULL,
  thread       TEXT NOT NULL DEFAULT '', -- the platform thread of the chat it was started in
  started_by   TEXT NOT NULL,
  state        TEXT NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'done', 'failed', 'rejected', 'cancelled')),
  note         TEXT,
  created_at   INTEGER NOT NULL,
  ended_at     INTEGER
);
CREATE INDEX IF NOT EXISTS idx_workflow_runs_running ON workflow_runs(id) WHERE state = 'running';
CREATE INDEX IF NOT EXISTS idx_workflow_runs_chat ON workflow_runs(chat_jid, id);
-- kind: started (message_id) | asked (approval_id) | done (output) | approved | failed (note) | rejected
-- (note) | cancelled | resumed (step NULL) | ended (step NULL, note: the run's end).
CREATE TABLE IF NOT EXISTS workflow_events (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id      INTEGER NOT NULL,
  step        TEXT,
  kind        TEXT NOT NULL,
  attempt     INTEGER NOT NULL DEFAULT 0,
  message_id  INTEGER,
  approval_id INTEGER,
  output      TEXT,
  note        TEXT,
  at          INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_workflow_events_run ON workflow_events(run_id, id);
CREATE INDEX IF NOT EXISTS idx_workflow_events_message ON workflow_events(message_id) WHERE message_id IS NOT NULL;
-- A step attempt starts (or asks) once, whatever happens around it.
CREATE UNIQUE INDEX IF NOT EXISTS idx_workflow_events_start ON workflow_events(run_id, step, attempt) WHERE kind IN ('started', 'asked');

-- Memory (docs/MEMORY.md): facts an agent keeps about a group, or about one sender of it, beyond the session.
-- scope: 'group' (every turn of the group may be given it) or a sender as `platform:id` (only turns that
-- sender is part of). provenance: JSON naming the run, turn and chat that led to it and its senders with
-- their roles ({"run","turn","chat","senders":[{"sender","role"}]}), or the operator who added it. actor: who
-- last changed it (`agent:<group>`, `cli:<user>`, `dashboard`, `chat:<platform:id>`). Times UTC ISO-8601.
-- Bounded per group (GATED_MEMORY_MAX_FACTS) and per fact (GATED_MEMORY_MAX_FACT_BYTES); audited.
CREATE TABLE IF NOT EXISTS memories (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  group_folder TEXT NOT NULL,
  scope        TEXT NOT NULL DEFAULT 'group',
  text         TEXT NOT NULL,
  provenance   TEXT NOT NULL DEFAULT '{}',
  created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  updated_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  actor        TEXT NOT NULL DEFAULT 'gated'
);
CREATE INDEX IF NOT EXISTS idx_memories_group ON memories(group_folder, scope, id);

-- Full-text indexes (FTS5, contentless: the text stays in its table, the index keeps only tokens). `grp` is
-- the token 'g' || hex(group folder) and `scope` 's' || hex(scope), so a search names its group inside MATCH
-- and never walks another group's rows (a recall checks the scopes on the memories row: store/memory.ts).
-- memories_fts follows memories by the triggers below; messages_fts is filled behind the pipe by the history
-- indexer (store/history-index.ts), after its cursor (router_state 'history_index_cursor'), never inside the
-- transaction that stores or answers a message.
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
  text, grp, scope, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2');
CREATE TRIGGER IF NOT EXISTS memories_fts_insert AFTER INSERT ON memories BEGIN
  INSERT INTO memories_fts (rowid, text, grp, scope)
  VALUES (NEW.id, NEW.text, 'g' || hex(NEW.group_folder), 's' || hex(NEW.scope));
END;
CREATE TRIGGER IF NOT EXISTS memories_fts_delete AFTER DELETE ON memories BEGIN
  DELETE FROM memories_fts WHERE rowid = OLD.id;
END;
CREATE TRIGGER IF NOT EXISTS memories_fts_update AFTER UPDATE OF text, group_folder, scope ON memories BEGIN
  DELETE FROM memories_fts WHERE rowid = OLD.id;
  INSERT INTO memories_fts (rowid, text, grp, scope)
  VALUES (NEW.id, NEW.text, 'g' || hex(NEW.group_folder), 's' || hex(NEW.scope));
END;
-- `who` is 'u' || hex(platform:sender) of an inbound row, of the row it answers for an outbound one.
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
  content, grp, who, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2');
-- Codebases (docs/WORKTREES.md): a group bound to a git repository. `source` is what the operator gave (a URL
-- gated cloned, or a local repository it adopted); `git_dir` the repository's common git folder on disk
-- (a bare clone of gated's own beside the groups, or the adopted repository's .git); `branch` the base
-- branch new topic branches start from.
CREATE TABLE IF NOT EXISTS group_repos (
  group_folder TEXT PRIMARY KEY,
  source       TEXT NOT NULL,
  git_dir      TEXT NOT NULL,
  branch       TEXT NOT NULL,
  cloned       INTEGER NOT NULL DEFAULT 0,
  added_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
-- One git worktree per topic of a bound group: the agent's folder for that topic's runs, on its own branch.
CREATE TABLE IF NOT EXISTS worktrees (
  group_folder TEXT NOT NULL,
  topic        TEXT NOT NULL,
  path         TEXT NOT NULL,
  branch       TEXT NOT NULL,
  created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  last_run_at  TEXT,
  -- Set when the worktree is to go (/new #topic, its issue or PR closed): removed once no run uses it,
  -- its branch kept when it holds unpushed work, and remove_chat told.
  remove_reason TEXT,
  remove_chat  TEXT,
  PRIMARY KEY (group_folder, topic)
);
