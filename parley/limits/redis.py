"""Limits shared by every instance, kept in Redis and changed by atomic Lua scripts.

Each bucket is a hash ``{prefix}:rl:{scope}:r`` (requests) or ``…:t`` (tokens) holding
``level`` and ``ts`` (when the level was written), as strings of doubles. The scripts read
the time from the Redis server (``TIME``), never from the caller, so instances whose clocks
disagree still share one clock. Every write sets ``PEXPIRE`` to the time the bucket needs
to fill up again plus a margin: an idle bucket is full, and a missing key reads as full,
so idle keys simply vanish.

One script checks a call against all its buckets and, when it fits everywhere, takes its
cost from each (or only looks, for ``peek``); another applies ``settle``. The scripts return
the levels and ``limits.memory.decide`` computes the ``Decision``, exactly as the memory
limiter does. The calls made within one turn of the event loop go to Redis as one
pipeline (``redis_batch.py``), each script still atomic on its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio import Redis

from parley.limits.base import UNLIMITED, Decision, Scope
from parley.limits.buckets import Bucket, buckets_for, decide
from parley.limits.redis_batch import ScriptBatcher

EXPIRY_MARGIN_MS = 1000
"""Kept past the moment a bucket is full again, so a key never expires while it matters."""

_BUCKET_FUNCTIONS = """
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

local function level_at(key, limit, t)
  local saved = redis.call('HMGET', key, 'level', 'ts')
  if not saved[1] then
    return limit
  end
  local elapsed = math.max(0, t - tonumber(saved[2]))
  return math.min(limit, tonumber(saved[1]) + elapsed * limit / 60)
end

local function store(key, limit, level, t)
  redis.call('HSET', key, 'level', string.format('%.17g', level), 'ts', string.format('%.17g', t))
  local full_ms = math.ceil((limit - level) * 60000 / limit)
  redis.call('PEXPIRE', key, full_ms + tonumber(ARGV[1]))
end
"""

_CHECK = (
    _BUCKET_FUNCTIONS
    + """
-- ARGV: margin, take (1 or 0), then limit and cost for each key.
local t = now()
local levels = {}
local fits = 1
for i, key in ipairs(KEYS) do
  local limit = tonumber(ARGV[2 * i + 1])
  levels[i] = level_at(key, limit, t)
  if levels[i] < tonumber(ARGV[2 * i + 2]) then
    fits = 0
  end
end
if fits == 1 and ARGV[2] == '1' then
  for i, key in ipairs(KEYS) do
    local limit = tonumber(ARGV[2 * i + 1])
    store(key, limit, levels[i] - tonumber(ARGV[2 * i + 2]), t)
  end
end
local reply = {fits}
for i = 1, #levels do
  reply[i + 1] = string.format('%.17g', levels[i])
end
return reply
"""
)

_SETTLE = (
    _BUCKET_FUNCTIONS
    + """
-- ARGV: margin, then limit and delta for each token key.
local t = now()
for i, key in ipairs(KEYS) do
  local limit = tonumber(ARGV[2 * i])
  local level = math.min(limit, level_at(key, limit, t) - tonumber(ARGV[2 * i + 1]))
  store(key, limit, level, t)
end
return 1
"""
)


class RedisLimiter:
    """Token buckets in Redis, shared by every worker and instance using the same prefix.

    ``owns_client`` says whether ``close`` closes the client (leave it False when the
    client is shared with other services).
    """

    def __init__(self, client: Redis, prefix: str, *, owns_client: bool = False) -> None:
        self._client = client
        self._prefix = prefix
        self._owns_client = owns_client
        self._check = client.register_script(_CHECK)
        self._settle = client.register_script(_SETTLE)
        self._batcher = ScriptBatcher(client)

    async def acquire(self, scopes: Sequence[Scope], tokens: int) -> Decision:
        return await self._run_check(buckets_for(scopes, tokens), take=True)

    async def settle(self, scopes: Sequence[Scope], delta_tokens: int) -> None:
        buckets = [b for b in buckets_for(scopes, 0) if b.dimension == "tokens"]
        if delta_tokens == 0 or not buckets:
            return
        args: list[str | int] = [EXPIRY_MARGIN_MS]
        for bucket in buckets:
            args += [bucket.limit, delta_tokens]
        await self._batcher.run(self._settle, [self._key(b) for b in buckets], args)

    async def peek(self, scopes: Sequence[Scope]) -> Decision:
        return await self._run_check(buckets_for(scopes, 0), take=False)

    async def close(self) -> None:
        await self._batcher.close()
        if self._owns_client:
            await self._client.aclose()

    async def _run_check(self, buckets: Sequence[Bucket], *, take: bool) -> Decision:
        if not buckets:
            return UNLIMITED
        args: list[str | int] = [EXPIRY_MARGIN_MS, 1 if take else 0]
        for bucket in buckets:
            args += [bucket.limit, repr(bucket.cost)]
        reply = await self._batcher.run(self._check, [self._key(b) for b in buckets], args)
        allowed, levels = _parse_check(reply, len(buckets))
        return decide(buckets, levels, allowed=allowed, taken=take)

    def _key(self, bucket: Bucket) -> str:
        suffix = "r" if bucket.dimension == "requests" else "t"
        return f"{self._prefix}:rl:{bucket.scope}:{suffix}"


def _parse_check(reply: object, count: int) -> tuple[bool, list[float]]:
    """``[fits, level, level, …]`` from the check script."""
    if not isinstance(reply, list) or len(reply) != count + 1:
        raise TypeError(f"unexpected reply from the rate-limit script: {reply!r}")
    fits, *levels = reply
    return fits == 1, [float(level) for level in levels]
