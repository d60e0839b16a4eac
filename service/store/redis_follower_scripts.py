"""The Lua scripts that keep leaders and followers consistent (``redis_followers``).

Each touches the keys of the follower and of its leader (two hash-tag slots: a single
Redis only; see :mod:`service.store.redis_followers` for a cluster). A leader's
``followers`` set names the models that follow it; its ``serving`` string the follower
its last promotion made answer for it. A follower's leader is read from its config
(``cjson``): ``follows.model``.
"""

# A stored config's leader ('' for a model that follows none).
_LEADER_OF = """
local function leader_of(text)
  if not text then return '' end
  local ok, c = pcall(cjson.decode, text)
  if ok and type(c) == 'table' and type(c['follows']) == 'table' then
    return tostring(c['follows']['model'])
  end
  return ''
end
local function from_version(text)
  local ok, c = pcall(cjson.decode, text)
  if ok and type(c) == 'table' and type(c['follows']) == 'table' then
    return tonumber(c['follows']['from_version']) or 0
  end
  return 0
end
"""

# KEYS: config, gen (the follower's); config, gen, followers, seq, log (its leader's)
# ARGV: canonical config, new generation, the leader's generation, the follower's name,
#   from_version
#   ->  1 created, 0 equal, -5 no leader of that generation, -8 the leader's log no
#   longer holds the entry after from_version (trimmed since it was read), else the
#   existing config
CREATE_FOLLOWER = """
if not redis.call('GET', KEYS[3]) or (redis.call('GET', KEYS[4]) or '') ~= ARGV[3] then
  return -5
end
local cur = redis.call('GET', KEYS[1])
if cur then
  if cur == ARGV[1] then return 0 end
  return cur
end
local from = tonumber(ARGV[5])
if tonumber(redis.call('GET', KEYS[6]) or '0') > from then
  local id = string.format('%d-0', from + 1)
  if #redis.call('XRANGE', KEYS[7], id, id) == 0 then return -8 end
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SADD', KEYS[5], ARGV[4])
return 1
"""

# KEYS: every key of the model (redis_keys._keys, in order)[, followers, serving of its
#   leader]
# ARGV: the leader's name as the caller read it ('' none), the model's name, the index
#   of its own followers key in KEYS, the number of its own keys
#   ->  1 deleted, 0 absent, {-5, followers...} it has followers, -6 it is promoted,
#   -9 its config names another leader than the caller read (read it again)
DELETE_MODEL = (
    _LEADER_OF
    + """
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local lead = leader_of(cur)
if lead ~= ARGV[1] then return -9 end
local fs = redis.call('SMEMBERS', KEYS[tonumber(ARGV[3])])
if #fs > 0 then
  table.insert(fs, 1, -5)
  return fs
end
local n = tonumber(ARGV[4])
if lead ~= '' then
  if redis.call('GET', KEYS[n + 2]) == ARGV[2] then return -6 end
  redis.call('SREM', KEYS[n + 1], ARGV[2])
end
redis.call('UNLINK', unpack(KEYS, 1, n))
return 1
"""
)

# KEYS: config, seq, log, head, serving (the leader's), the follower's config (the
#   leader's config again for none)[, wake]
# ARGV: payload, sha1hex(payload), the follower ('' none), the leader's name[, writer]
#   ->  {position, head} as APPEND, -1 no model, -7 the follower does not follow it
# As APPEND (redis_scripts), and the leader's serving set (or cleared) in the same step.
APPEND_SERVING = (
    _LEADER_OF
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if ARGV[3] ~= '' and leader_of(redis.call('GET', KEYS[6])) ~= ARGV[4] then return -7 end
local pos = redis.call('INCR', KEYS[2])
local head = redis.sha1hex((redis.call('GET', KEYS[4]) or '') .. ARGV[2])
redis.call('XADD', KEYS[3], string.format('%d-0', pos), 'p', ARGV[1], 'h', head, 'd', ARGV[2])
redis.call('SET', KEYS[4], head)
if ARGV[3] == '' then
  redis.call('DEL', KEYS[5])
else
  redis.call('SET', KEYS[5], ARGV[3])
end
if KEYS[7] then
  redis.call('XADD', KEYS[7], 'MAXLEN', '~', 10000, '*', 'm', ARGV[4], 'p', pos, 'w', ARGV[5])
end
return {pos, head}
"""
)

# KEYS: log, followers (the leader's), then each follower's config and ckpt
# ARGV: upto, the number of followers the caller read, their names
#   ->  the position trimmed up to (upto, or less: what a follower still needs), or -9
#   when the followers are not those the caller read (read them again)
# A follower needs the entries after its checkpoint's position, or after its
# from_version when it has no checkpoint past it.
TRIM = (
    _LEADER_OF
    + """
local n = tonumber(ARGV[2])
if redis.call('SCARD', KEYS[2]) ~= n then return -9 end
local upto = tonumber(ARGV[1])
for i = 1, n do
  if redis.call('SISMEMBER', KEYS[2], ARGV[2 + i]) == 0 then return -9 end
  local text = redis.call('GET', KEYS[1 + 2 * i])
  if text then
    local need = from_version(text)
    local cp = tonumber(redis.call('HGET', KEYS[2 + 2 * i], 'position') or '-1')
    if cp > need then need = cp end
    if need < upto then upto = need end
  end
end
if upto >= 1 then
  redis.call('XTRIM', KEYS[1], 'MINID', string.format('%d-0', upto + 1))
end
return upto
"""
)
