"""Lua scripts of delayed labels (:mod:`service.store.redis_feedback`): the records of
predictions served with an id, and the append that learns their labels.

Every script touches one model's keys only (one ``{name}`` hash tag, one cluster slot).
"""

from service.store.redis_scripts import IDEM_FUNCS

# The records of predictions served with an id (service.store.redis_feedback): fb holds
# "<gen>\n<record>" by id until the id is labelled, fblab "<gen> <position> <mark>" once
# it is, fbexp every id scored by its expiry (ms, Redis TIME). A value of another
# generation (a model deleted by an older learnserve that did not know these keys)
# counts as absent. The three keys expire with the last id to expire.
_FB_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""
# -> the id's record ("" when none of this generation), its mark's "<position> <mark>"
# ("" when not labelled); both "" when the id is unknown or expired
_FB_READ = """
local function fb_read(id, gen, now, fb, fbexp, fblab)
  if tonumber(redis.call('ZSCORE', fbexp, id) or '0') <= now then return '', '' end
  local mark = ''
  local lab = redis.call('HGET', fblab, id)
  if lab then
    local _, _, lgen, rest = string.find(lab, '^(%S*) (.*)$')
    if lgen == gen then mark = rest end
  end
  local rec = redis.call('HGET', fb, id)
  if rec then
    local i = string.find(rec, '\\n', 1, true)
    if i and string.sub(rec, 1, i - 1) == gen then return string.sub(rec, i + 1), mark end
  end
  return '', mark
end
local function fb_expire(keys, fbexp)
  local last = redis.call('ZREVRANGE', fbexp, 0, 0, 'WITHSCORES')
  if last[2] then
    for _, k in ipairs(keys) do redis.call('PEXPIREAT', k, last[2]) end
  end
end
"""
# KEYS: config, gen, fb, fbexp, fblab   ARGV: ttl ms (negative: keep a stored record, do
#   not replace it), then id, record for each
#   ->  0 stored, -1 no model, j (1-based) the j-th id is labelled already, or holds a
#       record not to be replaced (none stored)
# Expired ids are dropped first (at most 100 + 2 per id stored: faster than they come).
PUT_FEEDBACK = (
    _FB_NOW
    + _FB_READ
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local gen = redis.call('GET', KEYS[2]) or ''
local n = (#ARGV - 1) / 2
local old = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 100 + 2 * n)
for _, id in ipairs(old) do
  redis.call('HDEL', KEYS[3], id)
  redis.call('HDEL', KEYS[5], id)
  redis.call('ZREM', KEYS[4], id)
end
local ttl = tonumber(ARGV[1])
for j = 1, n do
  local rec, mark = fb_read(ARGV[2 * j], gen, now, KEYS[3], KEYS[4], KEYS[5])
  if mark ~= '' or (ttl < 0 and rec ~= '') then return j end
end
local exp = now + math.abs(ttl)
for j = 1, n do
  local id = ARGV[2 * j]
  redis.call('HSET', KEYS[3], id, gen .. '\\n' .. ARGV[2 * j + 1])
  redis.call('HDEL', KEYS[5], id)
  redis.call('ZADD', KEYS[4], exp, id)
end
fb_expire({KEYS[3], KEYS[4], KEYS[5]}, KEYS[4])
return 0
"""
)
# KEYS: gen, fb, fbexp, fblab   ARGV: within ms, limit  ->  the ids stored and unlabelled
# whose expiry is within ms from now, soonest first (a decision's default reward is due)
DUE_FEEDBACK = (
    _FB_NOW
    + _FB_READ
    + """
local gen = redis.call('GET', KEYS[1]) or ''
local limit = tonumber(ARGV[2])
local out, offset = {}, 0
-- labelled ids in the window take no room in the answer: pages of the window until
-- limit ids are found (at most 10 * limit scanned, so a script stays short)
while #out < limit and offset < 10 * limit do
  local ids = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. now, now + tonumber(ARGV[1]),
                         'LIMIT', offset, limit)
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    local rec, mark = fb_read(id, gen, now, KEYS[2], KEYS[3], KEYS[4])
    if rec ~= '' and mark == '' and #out < limit then out[#out + 1] = id end
  end
  offset = offset + #ids
end
return out
"""
)
# KEYS: gen, fb, fbexp, fblab   ARGV: ids  ->  per id: record, "<position> <mark>"
GET_FEEDBACK = (
    _FB_NOW
    + _FB_READ
    + """
local gen = redis.call('GET', KEYS[1]) or ''
local out = {}
for j = 1, #ARGV do
  local rec, mark = fb_read(ARGV[j], gen, now, KEYS[2], KEYS[3], KEYS[4])
  out[2 * j - 1] = rec
  out[2 * j] = mark
end
return out
"""
)
# KEYS: config, seq, log, head, gen, fb, fbexp, fblab, idem, idemexp, idempos, idemout
#   [, wake]
# ARGV: payload, sha1hex(payload), m, then id, sha1hex(record), mark for each, then an
#   idempotency key ('' for none), its hash, n, ttl ms, the mark's keep ms[, name]
#   ->  {-1} no model; {0, "<pos> <n> <hash> <gen>"} the key is recorded (nothing is
#       appended or marked); {-2, j} the j-th id is unknown or expired, {-3, j} labelled,
#       {-4, j} holds another record than the one read; {1, position, head} appended
# (the append as in APPEND), every id marked with the position and its record dropped,
# its expiry moved to keep ms from now if later (fb, fbexp, fblab expire then at the
# latest), and the key recorded as APPEND_ONCE records it: a keyed retry of a batch that mixes
# ids and x learns it once, although its ids are labelled by then.
APPEND_LABELLED = (
    _FB_NOW
    + _FB_READ
    + IDEM_FUNCS
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
local gen = redis.call('GET', KEYS[5]) or ''
local m = tonumber(ARGV[3])
local b = 3 + 3 * m
local key = ARGV[b + 1]
if key ~= '' then
  local rec = idem_live(KEYS[9], KEYS[10], KEYS[11], KEYS[12], key, gen, now)
  if rec then return {0, rec} end
end
for j = 1, m do
  local rec, mark = fb_read(ARGV[1 + 3 * j], gen, now, KEYS[6], KEYS[7], KEYS[8])
  if mark ~= '' then return {-3, j} end
  if rec == '' then return {-2, j} end
  if redis.sha1hex(rec) ~= ARGV[2 + 3 * j] then return {-4, j} end
end
local pos = redis.call('INCR', KEYS[2])
local head = redis.sha1hex((redis.call('GET', KEYS[4]) or '') .. ARGV[2])
redis.call('XADD', KEYS[3], string.format('%d-0', pos), 'p', ARGV[1], 'h', head)
redis.call('SET', KEYS[4], head)
local keep = now + tonumber(ARGV[b + 5])
for j = 1, m do
  local id = ARGV[1 + 3 * j]
  redis.call('HSET', KEYS[8], id, gen .. ' ' .. pos .. ' ' .. ARGV[3 + 3 * j])
  redis.call('HDEL', KEYS[6], id)
  if keep > tonumber(redis.call('ZSCORE', KEYS[7], id)) then
    redis.call('ZADD', KEYS[7], keep, id)
  end
end
fb_expire({KEYS[6], KEYS[7], KEYS[8]}, KEYS[7])
if key ~= '' then
  idem_record(KEYS[9], KEYS[10], KEYS[11], KEYS[12], key, pos, ARGV[b + 3], ARGV[b + 2],
              gen, now, tonumber(ARGV[b + 4]))
end
if KEYS[13] then
  redis.call('XADD', KEYS[13], 'MAXLEN', '~', 10000, '*', 'm', ARGV[b + 6], 'p', pos)
end
return {1, pos, head}
"""
)

# A write that leaves nothing (Store.fence): its WAIT covers every write before it.
FENCE = "redis.call('SET', KEYS[1], '1') redis.call('DEL', KEYS[1]) return 1"
