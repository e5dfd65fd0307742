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

A budget period is a hash ``{prefix}:budget:{name}`` (``spent`` and ``held``, integer
nano-dollars) and a sorted set ``…:holds`` of the calls holding part of it (member
``{hold id}:{nanos}``, scored by when the hold lapses). One script checks and takes a hold,
another releases it and counts the cost, so calls on every instance see each other's
holds. A hold lapses after ``HOLD_SECONDS``, so holds of an instance that died free
themselves; the check script drops lapsed holds first. The count starts from the first
caller's own view of the spend and never falls below any caller's, so a Redis that lost
its keys is caught up by the store's totals. The keys expire an hour after their period.
"""

from __future__ import annotations

from collections.abc import Sequence

from parley.limits.base import UNLIMITED, Budget, Decision, Scope
from parley.limits.buckets import Bucket, buckets_for, decide
from parley.limits.redis_batch import ScriptBatcher
from parley.resp import RedisClient

EXPIRY_MARGIN_MS = 1000
"""Kept past the moment a bucket is full again, so a key never expires while it matters."""

HOLD_SECONDS = 3600
"""How long a budget hold lasts in Redis without its release: a call running longer than
this stops holding its worst case, and the holds of an instance that died lapse."""
BUDGET_MARGIN_SECONDS = 3600
"""How long a budget period's keys outlive the period."""

_HOLD = """
-- KEYS: the period's hash, its holds. ARGV: limit, floor, nanos, member, hold ms, keep ms.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
if #lapsed > 0 then
  local gone = 0
  for _, member in ipairs(lapsed) do
    gone = gone + tonumber(string.match(member, ':(%d+)$'))
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  redis.call('HINCRBY', KEYS[1], 'held', string.format('%d', -gone))
end
local saved = redis.call('HMGET', KEYS[1], 'spent', 'held')
local spent = tonumber(saved[1])
if not spent or spent < tonumber(ARGV[2]) then
  spent = tonumber(ARGV[2])
  redis.call('HSET', KEYS[1], 'spent', ARGV[2])
end
local held = tonumber(saved[2]) or 0
if held < 0 then
  held = 0
  redis.call('HSET', KEYS[1], 'held', 0)
end
redis.call('PEXPIRE', KEYS[1], ARGV[6])
if spent + held >= tonumber(ARGV[1]) then
  return 0
end
if tonumber(ARGV[3]) > 0 then
  redis.call('ZADD', KEYS[2], string.format('%d', now + tonumber(ARGV[5])), ARGV[4])
  redis.call('HINCRBY', KEYS[1], 'held', ARGV[3])
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
end
return 1
"""

_RELEASE = """
-- KEYS: the period's hash, its holds. ARGV: member, minus the nanos held, cost, keep ms.
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then
  if redis.call('HINCRBY', KEYS[1], 'held', ARGV[2]) < 0 then
    redis.call('HSET', KEYS[1], 'held', 0)
  end
end
if ARGV[3] ~= '0' and redis.call('HEXISTS', KEYS[1], 'spent') == 1 then
  redis.call('HINCRBY', KEYS[1], 'spent', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
return 1
"""

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

    def __init__(self, client: RedisClient, prefix: str, *, owns_client: bool = False) -> None:
        self._client = client
        self._prefix = prefix
        self._owns_client = owns_client
        self._check = client.script(_CHECK)
        self._settle = client.script(_SETTLE)
        self._hold = client.script(_HOLD)
        self._release = client.script(_RELEASE)
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

    async def hold_spend(self, budget: Budget, hold: str, nanos: int) -> bool:
        args: list[str | int] = [
            budget.limit_nanos,
            budget.spent_nanos,
            nanos,
            f"{hold}:{nanos}",
            HOLD_SECONDS * 1000,
            _keep_ms(budget),
        ]
        reply = await self._batcher.run(self._hold, self._budget_keys(budget), args)
        return bool(reply == 1)

    async def release_spend(self, budget: Budget, hold: str, nanos: int, cost: int) -> None:
        args: list[str | int] = [f"{hold}:{nanos}", -nanos, cost, _keep_ms(budget)]
        await self._batcher.run(self._release, self._budget_keys(budget), args)

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

    def _budget_keys(self, budget: Budget) -> list[str]:
        key = f"{self._prefix}:budget:{budget.name}"
        return [key, f"{key}:holds"]

    def _key(self, bucket: Bucket) -> str:
        suffix = "r" if bucket.dimension == "requests" else "t"
        return f"{self._prefix}:rl:{bucket.scope}:{suffix}"


def _keep_ms(budget: Budget) -> int:
    """How long a budget period's keys are kept: past its end, and past any hold."""
    keep = max(budget.seconds_left + BUDGET_MARGIN_SECONDS, HOLD_SECONDS)
    return int(keep * 1000)


def _parse_check(reply: object, count: int) -> tuple[bool, list[float]]:
    """``[fits, level, level, …]`` from the check script."""
    if not isinstance(reply, list) or len(reply) != count + 1:
        raise TypeError(f"unexpected reply from the rate-limit script: {reply!r}")
    fits, *levels = reply
    return fits == 1, [float(level) for level in levels]
