/**
 * The cluster database's schema, one step per version, applied in order by the first node that
 * starts on it (under an advisory lock, each step in its own transaction). A released step never
 * changes: a new one is added. A node refuses a database whose version is newer than its own.
 */
export const MIGRATIONS: ReadonlyArray<{ version: number; name: string; sql: string }> = [
  {
    version: 1,
    name: 'shared records, published records, secrets, nodes, commands',
    sql: `
      -- The shared families (store/ keys and JSON values), keys compared byte by byte as LevelDB does.
      CREATE TABLE kv (
        family text NOT NULL,
        key text COLLATE "C" NOT NULL,
        value text NOT NULL,
        PRIMARY KEY (family, key)
      );
      -- What each node publishes of its messages, events and counters, for reads on any node.
      CREATE TABLE published (
        family text NOT NULL,
        key text COLLATE "C" NOT NULL,
        value text NOT NULL,
        PRIMARY KEY (family, key)
      );
      -- Each node's publication cursor: the last event of its outbox published.
      CREATE TABLE publication (
        node_id text PRIMARY KEY,
        cursor text NOT NULL,
        published_at timestamptz NOT NULL DEFAULT now()
      );
      -- The cluster's secrets (VERP, tracking, secret box, webhook and route secrets), sealed with the cluster key.
      CREATE TABLE cluster_secrets (
        name text PRIMARY KEY,
        sealed text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );
      -- DKIM private keys (PEM), sealed with the cluster key.
      CREATE TABLE dkim_keys (
        domain_id text NOT NULL,
        selector text NOT NULL,
        sealed text NOT NULL,
        PRIMARY KEY (domain_id, selector)
      );
      -- The nodes and their heartbeats.
      CREATE TABLE nodes (
        id text PRIMARY KEY,
        instance text NOT NULL,
        started_at timestamptz NOT NULL,
        heartbeat_at timestamptz NOT NULL,
        info jsonb NOT NULL DEFAULT '{}'
      );
      -- Commands for the node that owns a message (cancel, drain), answered by it.
      CREATE TABLE commands (
        id bigserial PRIMARY KEY,
        node_id text NOT NULL,
        kind text NOT NULL,
        payload jsonb NOT NULL,
        state text NOT NULL DEFAULT 'pending',
        result jsonb,
        created_at timestamptz NOT NULL DEFAULT now(),
        done_at timestamptz
      );
      CREATE INDEX commands_pending ON commands (node_id, id) WHERE state = 'pending';
    `,
  },
  {
    version: 2,
    name: 'nodes: when a node stopped',
    sql: `
      -- Set by a node's clean stop: it is gone at once, not 10 s after its last heartbeat; its id is free.
      ALTER TABLE nodes ADD COLUMN stopped_at timestamptz;
    `,
  },
  {
    version: 3,
    name: "commands answered to their asker, drained messages' bodies",
    sql: `
      -- Who asked (told when the command is answered), and when the asker stops waiting: a node
      -- never takes a command past it. A node claims a command ('running') before applying it and
      -- answers it ('done'); an asker that stopped waiting withdraws it ('expired').
      ALTER TABLE commands ADD COLUMN from_node text;
      ALTER TABLE commands ADD COLUMN expires_at timestamptz;
      CREATE INDEX commands_answered ON commands (done_at) WHERE done_at IS NOT NULL;
      -- The bodies of the messages a drain hands over (postilion queue drain), chunk by chunk,
      -- beside the command that carries their records; they go with it.
      CREATE TABLE command_bodies (
        command_id bigint NOT NULL REFERENCES commands (id) ON DELETE CASCADE,
        body_id text NOT NULL,
        chunk integer NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (command_id, body_id, chunk)
      );
    `,
  },
];

/** The newest schema this release knows. */
export const CLUSTER_SCHEMA_VERSION = MIGRATIONS.at(-1)!.version;
