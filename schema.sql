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
  --   running  handed to a run (run_id); back to ready if the run fails before any output
  --   done     part of an answered batch (or answered by the gateway itself)
  --   stopped  its run was stopped with /stop; never retried
  --   parked   its session failed repeatedly; waits for a new message of the chat
  --   command  a sticky or command message, answered by the gateway
  --   dropped  routed to builtin:drop
  --   unrouted no route matched
  --   daemon   waiting to be POSTed to a daemon; then done or failed
  --   failed   a daemon refused it permanently (see error)
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
  dispatched_at    INTEGER, -- epoch ms when it was last handed to an agent (set by a trigger)
  run_id           INTEGER, -- session_log.id of the run that has or had it
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
  kind              TEXT     -- reply | gateway | error | status
);

-- A redelivered platform event is stored once.
CREATE UNIQUE INDEX IF NOT EXISTS idx_messages_platform
  ON messages(chat_jid, platform_msg_id) WHERE platform_msg_id IS NOT NULL;
-- The poll: inbound rows after the cursor, by id; outbound rows never enter it.
CREATE INDEX IF NOT EXISTS idx_messages_inbound ON messages(id) WHERE is_from_me = 0;
-- Work in flight. One partial index per state, because SQLite uses a partial index only when the query
-- names its condition exactly (`state = 'ready'` does not let it use an index on `state IN (...)`). Each
-- leads with what its queries pin, so the planner prefers it to idx_messages_chat, which would walk the
-- chat's whole history.
CREATE INDEX IF NOT EXISTS idx_messages_held
  ON messages(chat_jid, weight, threshold, held_at, max_hold_ms) WHERE state = 'held';
CREATE INDEX IF NOT EXISTS idx_messages_ready
  ON messages(group_folder, session_topic, chat_jid, id) WHERE state = 'ready';
CREATE INDEX IF NOT EXISTS idx_messages_ready_order ON messages(ready_at, id) WHERE state = 'ready';
CREATE INDEX IF NOT EXISTS idx_messages_retry ON messages(not_before) WHERE state = 'ready';
CREATE INDEX IF NOT EXISTS idx_messages_running ON messages(run_id) WHERE state = 'running';
CREATE INDEX IF NOT EXISTS idx_messages_parked
  ON messages(group_folder, session_topic, chat_jid, id) WHERE state = 'parked';
CREATE INDEX IF NOT EXISTS idx_messages_daemon ON messages(id, not_before) WHERE state = 'daemon';
-- Undelivered replies, per chat in order.
CREATE INDEX IF NOT EXISTS idx_messages_outbox
  ON messages(chat_jid, id) WHERE is_from_me = 1 AND delivery = 'pending';
-- A chat's history (web chat replay, /ping facts).
CREATE INDEX IF NOT EXISTS idx_messages_chat ON messages(chat_jid, id);

-- One routing table for the whole instance, walked in (seq, id) order; the first matching row wins.
CREATE TABLE IF NOT EXISTS routes (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,
  seq            INTEGER NOT NULL DEFAULT 0,
  match          TEXT    NOT NULL DEFAULT '',
  target         TEXT    NOT NULL,
  impulse_config TEXT
);
CREATE INDEX IF NOT EXISTS idx_routes_seq ON routes(seq);

-- When a row is handed to an agent (first batch or follow-up), whichever code does it: time in queue is
-- visible to operators and benchmarks without every writer having to remember it.
CREATE TRIGGER IF NOT EXISTS messages_dispatched AFTER UPDATE OF state ON messages
  WHEN NEW.state = 'running' AND OLD.state IS NOT 'running'
BEGIN
  UPDATE messages SET dispatched_at = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
  WHERE id = NEW.id;
END;

-- Registered agent workspaces.
CREATE TABLE IF NOT EXISTS registered_groups (
  folder     TEXT PRIMARY KEY,
  name       TEXT,
  image      TEXT,                       -- docker image for this group (default GATED_AGENT_IMAGE)
  network    INTEGER NOT NULL DEFAULT 0, -- 1: the container may use the network
  mounts     TEXT,                       -- JSON list of extra host paths, checked against the allow-list
  added_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
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
  stderr_tail  TEXT
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
