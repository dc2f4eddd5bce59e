--- MPI worker of tests/dist_spec.lua: ZeroRedundancyOptimizer(Adam) with DistributedDataParallel
-- across the ranks of `mpirun -np 2` against plain Adam in one process on the whole batch;
-- reports lines rank=<r> <key>=<values>.
local dle = require("dle")
local common = require("dist.common")
local dist, nn = dle.dist, dle.nn

local pg <close>, rank, world, emit = common.start() -- luacheck: ignore 211 (pg: used by its <close>)

local X, Y, xr, yr = common.batch(rank, world)
local loss_fn = nn.CrossEntropyLoss()
local opts = {lr = 0.05, betas = {0.8, 0.99}, weight_decay = 0.01}

-- plain Adam on the whole batch; the learning rate halves after step 3
local ref = common.mlp(0)
local ref_opt = dle.optim.Adam(ref:parameters(), opts)
local model = common.mlp(0)
local ddp = dist.DistributedDataParallel(model)
local zero = dle.optim.ZeroRedundancyOptimizer(dle.optim.Adam, ddp:parameters(), opts)
for step = 1, 6 do
  if step == 4 then ref_opt.lr = 0.025; zero.lr = 0.025 end
  local loss = loss_fn(ref(X), Y)
  ref_opt:zero_grad(); loss:backward(); ref_opt:step()
  loss = loss_fn(ddp(xr), yr)
  zero:zero_grad(); loss:backward(); zero:step()
end
emit("zero_diff", common.max_diff(model, ref))
emit("zero_params", common.flat_params(model))
emit("owners", zero.owners)
emit("lr", zero.lr)

-- the state is this rank's shard: its own params' moments only, keyed by global index
local sd = zero:state_dict()
local keys = {}
for i in pairs(sd.state) do keys[#keys + 1] = i end
table.sort(keys)
emit("state_keys", keys)
emit("state_steps", sd.state[keys[1]].step)
-- a round trip restores it; another rank's shard is refused
zero:load_state_dict(sd)
local other = {world_size = sd.world_size, rank = 1 - rank, owners = sd.owners,
               param_groups = sd.param_groups, state = {}}
emit("wrong_rank", select(2, pcall(zero.load_state_dict, zero, other)))
emit("done", 1)
