"""The Lua scripts of :class:`service.store.redis.RedisStore`, one per atomic step.

Each runs on the keys of one model (one ``{name}`` hash-tag slot) and is named by
what it does; the comment above each gives its KEYS, ARGV and results. :func:`sha` is
the name Redis caches a script under (``EVALSHA``).
"""

import hashlib


def sha(src: str) -> str:
    """The SHA-1 Redis names a script by (``SCRIPT LOAD``, ``EVALSHA``)."""
    return hashlib.sha1(src.encode()).hexdigest()


# KEYS: config, seq, log, head[, wake]   ARGV: payload, sha1hex(payload)[, name, writer]
#   ->  {position, head}, or -1 if the model is missing
# head = sha1hex(previous head .. sha1hex(payload)) (service.store.base.chain_head): kept
# beside seq and in the entry (field h), so a worker notices a log that lost its tail;
# the entry keeps the payload's digest too (field d), so a worker applying it checks the
# chain without hashing the payload again.
# With a wake key (a single Redis only: it is in another slot) the wake is added in the
# same step (service.store.redis_wakes): no wake is ever lost, no extra round trip. The
# wake names its writer (w), whose own reader skips it: a worker is not woken by its own
# appends, which its requests apply.
APPEND = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local pos = redis.call('INCR', KEYS[2])
local head = redis.sha1hex((redis.call('GET', KEYS[4]) or '') .. ARGV[2])
redis.call('XADD', KEYS[3], string.format('%d-0', pos), 'p', ARGV[1], 'h', head, 'd', ARGV[2])
redis.call('SET', KEYS[4], head)
if KEYS[5] then
  redis.call('XADD', KEYS[5], 'MAXLEN', '~', 10000, '*', 'm', ARGV[3], 'p', pos, 'w', ARGV[4])
end
return {pos, head}
"""
# An idempotency key's record in idem is "<position> <n> <hash> <gen>", its expiry (ms,
# Redis TIME) the key's score in idemexp; idempos maps a keyed entry's position to its
# key, so whoever applies the entry can record its outcome (RECORD_OUTCOME) in idemout.
# idem_live drops expired records first (at most 100 per call; any left over are ignored
# by their score), with their position index entries and outcomes, and answers the key's
# live record (nil when there is none; a record of another generation, a model deleted
# by an older learnserve that did not know these keys, counts as absent). idem_record
# records a key; the idem keys expire with the last record to expire, so a model that
# stops sending keys leaves nothing behind.
IDEM_FUNCS = """
local function idem_forget(k_idem, k_pos, k_out, keys)
  local recs = redis.call('HMGET', k_idem, unpack(keys))
  for i, r in ipairs(recs) do
    local p = r and string.match(r, '^(%S+)')
    if p and redis.call('HGET', k_pos, p) == keys[i] then redis.call('HDEL', k_pos, p) end
  end
  redis.call('HDEL', k_idem, unpack(keys))
  redis.call('HDEL', k_out, unpack(keys))
end
local function idem_live(k_idem, k_exp, k_pos, k_out, key, gen, now)
  local old = redis.call('ZRANGEBYSCORE', k_exp, '-inf', now, 'LIMIT', 0, 100)
  if #old > 0 then
    idem_forget(k_idem, k_pos, k_out, old)
    redis.call('ZREM', k_exp, unpack(old))
  end
  local rec = redis.call('HGET', k_idem, key)
  if rec then
    local exp = tonumber(redis.call('ZSCORE', k_exp, key) or '0')
    local _, _, rgen = string.find(rec, '^%S+ %S+ %S+ (.*)$')
    if exp > now and rgen == gen then return rec end
    idem_forget(k_idem, k_pos, k_out, {key})
  end
  return nil
end
local function idem_record(k_idem, k_exp, k_pos, k_out, key, pos, n, hash, gen, now, ttl)
  redis.call('HSET', k_idem, key, string.format('%d %s %s %s', pos, n, hash, gen))
  redis.call('HSET', k_pos, pos, key)
  redis.call('ZADD', k_exp, now + ttl, key)
  local last = redis.call('ZREVRANGE', k_exp, 0, 0, 'WITHSCORES')
  for _, k in ipairs({k_idem, k_exp, k_pos, k_out}) do
    redis.call('PEXPIREAT', k, last[2])
  end
end
"""
# KEYS: config, seq, log, idem, idemexp, gen, idempos, idemout, head[, wake]
# ARGV: payload, key, hash, n, ttl ms, sha1hex(payload)[, name, writer]  (wake as in APPEND)
#   ->  {-1} model missing, {1, position} appended, {0, "<pos> <n> <hash> <gen>"} recorded
APPEND_ONCE = (
    IDEM_FUNCS
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local gen = redis.call('GET', KEYS[6]) or ''
local rec = idem_live(KEYS[4], KEYS[5], KEYS[7], KEYS[8], ARGV[2], gen, now)
if rec then return {0, rec} end
local pos = redis.call('INCR', KEYS[2])
local head = redis.sha1hex((redis.call('GET', KEYS[9]) or '') .. ARGV[6])
redis.call('XADD', KEYS[3], string.format('%d-0', pos), 'p', ARGV[1], 'h', head, 'd', ARGV[6])
redis.call('SET', KEYS[9], head)
idem_record(KEYS[4], KEYS[5], KEYS[7], KEYS[8], ARGV[2], pos, ARGV[4], ARGV[3], gen, now,
            tonumber(ARGV[5]))
if KEYS[10] then
  redis.call('XADD', KEYS[10], 'MAXLEN', '~', 10000, '*', 'm', ARGV[7], 'p', pos, 'w', ARGV[8])
end
return {1, pos}
"""
)
# KEYS: config, gen, idem, idemexp, idempos, idemout   ARGV: position, outcome[, generation]
#   ->  1 recorded, 0 not (no live key at that position, already recorded, no model,
#   another generation)
RECORD_OUTCOME = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local gen = redis.call('GET', KEYS[2]) or ''
if ARGV[3] and ARGV[3] ~= gen then return 0 end
local key = redis.call('HGET', KEYS[5], ARGV[1])
if not key then return 0 end
local rec = redis.call('HGET', KEYS[3], key)
if not rec then return 0 end
local _, _, rpos, rgen = string.find(rec, '^(%S+) %S+ %S+ (.*)$')
if tonumber(rpos) ~= tonumber(ARGV[1]) or rgen ~= gen then return 0 end
if redis.call('HSETNX', KEYS[6], key, ARGV[2]) == 0 then return 0 end
local last = redis.call('ZREVRANGE', KEYS[4], 0, 0, 'WITHSCORES')
if last[2] then redis.call('PEXPIREAT', KEYS[6], last[2]) end
return 1
"""
# KEYS: idem, idemexp, gen   ARGV: key  ->  the key's live record "<pos> <n> <hash> <gen>",
# or false
KEY_RECORD = """
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if not rec then return false end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]) or '0')
local _, _, rgen = string.find(rec, '^%S+ %S+ %S+ (.*)$')
if exp <= now or rgen ~= (redis.call('GET', KEYS[3]) or '') then return false end
return rec
"""
# KEYS: idem, idemexp, gen, idemout   ARGV: key  ->  the key's outcome, or false
GET_OUTCOME = """
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if not rec then return false end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]) or '0')
local _, _, rgen = string.find(rec, '^%S+ %S+ %S+ (.*)$')
if exp <= now or rgen ~= (redis.call('GET', KEYS[3]) or '') then return false end
return redis.call('HGET', KEYS[4], ARGV[1])
"""
# KEYS: config, gen   ARGV: canonical config, generation
#   ->  1 created, 0 equal, else the existing config
CREATE = """
local cur = redis.call('GET', KEYS[1])
if not cur then
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('SET', KEYS[2], ARGV[2])
  return 1
end
if cur == ARGV[1] then return 0 end
return cur
"""
# KEYS: config, gen, ckpt, ckptdata   ARGV: config, generation, token, chunks, created_at
#   ->  1 created (with its checkpoint at position 0), 0 equal config exists, -3 a chunk
#   is missing, else the existing config. The chunks were written beforehand under the
#   token (as for CKPT); the model and its checkpoint appear together.
CREATE_FROM_CKPT = """
local cur = redis.call('GET', KEYS[1])
if cur then
  if cur == ARGV[1] then return 0 end
  return cur
end
for i = 0, tonumber(ARGV[4]) - 1 do
  if redis.call('HEXISTS', KEYS[4], ARGV[3] .. ':' .. i) == 0 then return -3 end
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], 'position', '0', 'token', ARGV[3], 'chunks', ARGV[4],
           'created_at', ARGV[5])
return 1
"""
# KEYS: every key of the model (redis._keys)  ->  1 deleted, 0 absent
DELETE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('UNLINK', unpack(KEYS))
return 1
"""
# KEYS: config, ckpt, gen, ckptdata, seq, log, head
#   ARGV: position, token, chunks, created_at, generation ('' = any), head ('' = unchecked)
#   ->  1 switched, 0 older, -1 no model, -2 another generation, -3 a chunk is missing,
#      -4 the log does not hold that head at that position (the writer applied entries
#      the log has lost in a failover: its state must not become the checkpoint)
# The chunks were written beforehand under the new token; this switches the checkpoint
# to them and drops the previous one's (and those of writers of older positions that
# died before switching: their tokens start with that older position).
CKPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if ARGV[5] ~= '' and (redis.call('GET', KEYS[3]) or '') ~= ARGV[5] then return -2 end
local pos = tonumber(ARGV[1])
if ARGV[6] ~= '' then
  if pos > tonumber(redis.call('GET', KEYS[5]) or '0') then return -4 end
  local e = redis.call('XRANGE', KEYS[6], pos .. '-0', pos .. '-0')
  if #e == 1 then
    local f = e[1][2]
    for i = 1, #f, 2 do
      if f[i] == 'h' and f[i + 1] ~= ARGV[6] then return -4 end
    end
  elseif pos == tonumber(redis.call('GET', KEYS[5]) or '0') then
    local cur = redis.call('GET', KEYS[7])
    if cur and cur ~= ARGV[6] then return -4 end
  end
end
local cur = redis.call('HGET', KEYS[2], 'position')
if cur and tonumber(cur) > pos then return 0 end
local n = tonumber(ARGV[3])
for i = 0, n - 1 do
  if redis.call('HEXISTS', KEYS[4], ARGV[2] .. ':' .. i) == 0 then return -3 end
end
redis.call('HDEL', KEYS[2], 'blob')
redis.call('HSET', KEYS[2], 'position', ARGV[1], 'token', ARGV[2], 'chunks', ARGV[3],
           'created_at', ARGV[4])
for _, f in ipairs(redis.call('HKEYS', KEYS[4])) do
  local fpos = tonumber(string.match(f, '^(%d+)%.'))
  if string.sub(f, 1, #ARGV[2] + 1) ~= ARGV[2] .. ':' and (fpos == nil or fpos <= pos) then
    redis.call('HDEL', KEYS[4], f)
  end
end
return 1
"""
# KEYS: config, lease   ARGV: holder, ttl ms  ->  1 held by holder now, 0 held by another
# (-1 no model). Renewing extends the holder's lease; nobody else can take it meanwhile.
LEASE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local cur = redis.call('GET', KEYS[2])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return 1
"""
# KEYS: config, art, artmeta   ARGV: blob, meta JSON  ->  version, or -1 if no model
ADD_ART = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local v = redis.call('HINCRBY', KEYS[3], 'last', 1)
redis.call('HSET', KEYS[2], v, ARGV[1])
redis.call('HSET', KEYS[3], v, ARGV[2], 'active', v)
return v
"""
# KEYS: config, art, artmeta   ARGV: blob, meta JSON, checksum
#   ->  {version, 1} stored as a new version, {version, 0} a stored version has this
#   checksum (made active, nothing stored), or -1 if no model. Versions are few (the
#   retention setting), so decoding each one's metadata is cheap.
PUT_ART = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local h = redis.call('HGETALL', KEYS[3])
local same = nil
for i = 1, #h, 2 do
  local f = h[i]
  if string.match(f, '^%d+$') and cjson.decode(h[i + 1])['checksum'] == ARGV[3] then
    if same == nil or tonumber(f) > same then same = tonumber(f) end
  end
end
if same ~= nil then
  if redis.call('HGET', KEYS[3], 'active') == tostring(same) then return {same, 0} end
  redis.call('HSET', KEYS[3], 'active', same)
  return {same, 2}
end
local v = redis.call('HINCRBY', KEYS[3], 'last', 1)
redis.call('HSET', KEYS[2], v, ARGV[1])
redis.call('HSET', KEYS[3], v, ARGV[2], 'active', v)
return {v, 1}
"""
# KEYS: config, art, artmeta   ARGV: version
#   ->  1 deleted, 0 no such version, -1 no model, -3 it is the active version
DEL_ART = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HGET', KEYS[3], 'active') == ARGV[1] then return -3 end
redis.call('HDEL', KEYS[2], ARGV[1])
return redis.call('HDEL', KEYS[3], ARGV[1])
"""
# KEYS: config, artmeta   ARGV: version, expected active version ('' for any)
#   ->  1 ok, -1 no model, -2 no such version, {-3, active or false} not the expected one
SET_ACTIVE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then return -2 end
if ARGV[2] ~= '' then
  local active = redis.call('HGET', KEYS[2], 'active')
  if active ~= ARGV[2] then return {-3, active} end
end
redis.call('HSET', KEYS[2], 'active', ARGV[1])
return 1
"""
