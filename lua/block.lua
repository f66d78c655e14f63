-- A penalty box (`limits[].block_for`, docs/rules.md#penalty-box): one key per blocked rule key,
-- under the hash tag of the rule's bucket, that expires when the block ends.
--
-- KEYS[1]  the block key
-- ARGV[1]  'check': the block's remaining ms (0: not blocked); with ARGV[3] = '1' a block found
--          is started again for ARGV[2] ms (extend_on_refusal)
--          'set': blocks for ARGV[2] ms (a block already running is kept as it is, unless
--          ARGV[3] = '1'); returns the remaining ms
local key, mode, ms, extend = KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'
local left = redis.call('PTTL', key)
if mode == 'check' then
  if left <= 0 then return 0 end
  if extend then
    redis.call('PEXPIRE', key, ms)
    return ms
  end
  return left
end
if left > 0 and not extend then return left end
redis.call('SET', key, '1', 'PX', ms)
return ms
