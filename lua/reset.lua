-- Deletes one tenant's keys (admin API `POST /v1/tenants/{id}/reset`, src/quota/peek.rs).
--
-- KEYS  every key of the tenant to delete (all under its hash tag, so one Cluster slot)
--
-- Returns the number of keys that existed and were deleted.
local n = 0
for i = 1, #KEYS do n = n + redis.call('DEL', KEYS[i]) end
return n
