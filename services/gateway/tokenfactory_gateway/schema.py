"""PostgreSQL schema, applied in order at start-up under an advisory lock (safe with many replicas)."""

from __future__ import annotations

MIGRATIONS = (
    """
    CREATE TABLE tenants (
        name text PRIMARY KEY,
        description text NOT NULL DEFAULT '',
        requests_per_minute integer NOT NULL DEFAULT 0,
        tokens_per_minute integer NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT now(),
        deleted_at timestamptz
    );
    CREATE TABLE tenant_models (
        tenant text NOT NULL REFERENCES tenants(name) ON DELETE CASCADE,
        model text NOT NULL,
        PRIMARY KEY (tenant, model)
    );
    CREATE TABLE api_keys (
        id uuid PRIMARY KEY,
        tenant text NOT NULL REFERENCES tenants(name),
        name text NOT NULL,
        prefix text NOT NULL,
        hash bytea NOT NULL UNIQUE,
        requests_per_minute integer NOT NULL DEFAULT 0,
        tokens_per_minute integer NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz,
        revoked_at timestamptz
    );
    CREATE UNIQUE INDEX api_keys_active_name ON api_keys (tenant, name) WHERE revoked_at IS NULL;
    CREATE TABLE usage_records (
        request_id uuid PRIMARY KEY,
        started_at timestamptz NOT NULL,
        finished_at timestamptz NOT NULL,
        tenant text NOT NULL,
        key_id uuid NOT NULL,
        model text NOT NULL,
        deployment text NOT NULL,
        route text NOT NULL,
        stream boolean NOT NULL,
        status integer NOT NULL,
        error text,
        client_disconnected boolean NOT NULL DEFAULT false,
        usage_estimated boolean NOT NULL DEFAULT false,
        prompt_tokens integer NOT NULL,
        completion_tokens integer NOT NULL,
        latency_ms double precision NOT NULL,
        ttft_ms double precision,
        currency text NOT NULL,
        input_per_1m numeric NOT NULL,
        output_per_1m numeric NOT NULL,
        cost numeric NOT NULL
    );
    CREATE INDEX usage_records_tenant_time ON usage_records (tenant, started_at);
    CREATE INDEX usage_records_key_time ON usage_records (key_id, started_at);
    """,
    # Admin changes that take rights away count up `changed` in their own transaction; `published` follows once
    # every replica was told (Redis). While changed > published an admin call retries telling them, and so does
    # every replica in the background: a change saved while Redis was unreachable is announced when it is back.
    """
    CREATE TABLE auth_changes (
        id integer PRIMARY KEY CHECK (id = 1),
        changed bigint NOT NULL,
        published bigint NOT NULL
    );
    INSERT INTO auth_changes VALUES (1, 0, 0);
    """,
    # Spend budgets (budget.py): per calendar period, an amount (0 = none) and/or tokens (0 = none).
    """
    ALTER TABLE tenants ADD COLUMN budget_period text NOT NULL DEFAULT 'month',
        ADD COLUMN budget_amount numeric NOT NULL DEFAULT 0, ADD COLUMN budget_tokens bigint NOT NULL DEFAULT 0;
    ALTER TABLE api_keys ADD COLUMN budget_period text NOT NULL DEFAULT 'month',
        ADD COLUMN budget_amount numeric NOT NULL DEFAULT 0, ADD COLUMN budget_tokens bigint NOT NULL DEFAULT 0;
    """,
    # A key's scope (store.KEY_SCOPES): "inference" calls the OpenAI routes; "tenant_admin" also manages the
    # tenant's keys and sees the whole tenant's usage in the portal (/portal/).
    """
    ALTER TABLE api_keys ADD COLUMN scope text NOT NULL DEFAULT 'inference';
    """,
)

LOCK_ID = 0x7466_6777  # "tfgw"


async def migrate(conn) -> int:
    """Apply missing migrations; returns the schema version."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", LOCK_ID)
        await conn.execute("CREATE TABLE IF NOT EXISTS tf_schema_version (version integer NOT NULL)")
        version = await conn.fetchval("SELECT max(version) FROM tf_schema_version") or 0
        for number, sql in enumerate(MIGRATIONS[version:], start=version + 1):
            await conn.execute(sql)
            await conn.execute("INSERT INTO tf_schema_version VALUES ($1)", number)
        return len(MIGRATIONS)
