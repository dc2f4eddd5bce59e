--- MPI worker of tests/dist_spec.lua: an error on rank 1 while rank 0 waits in a collective. With
-- the process group in a <close> variable the job must end at once (MPI_Abort), not hang.
local dle = require("dle")
local dist = dle.dist

local pg <close> = dist.init() -- luacheck: ignore 211 (used by its <close>)
if dist.rank() == 1 then error("deliberate failure on rank 1") end
dist.all_reduce(dle.ones(1))
print("rank 0 finished the all_reduce alone")
