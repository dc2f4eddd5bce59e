--- MPI worker of tests/dist_spec.lua: ZeroRedundancyOptimizer checkpoints across the ranks of
-- `mpirun -np 2`. Consolidation to rank 1 and to rank 0 against a plain optimizer's state, the
-- consolidated checkpoint (rank 0 writes it to $DLE_ZERO_CHECKPOINT for the spec to load in one
-- process) and a plain optimizer's state resumed on 2 ranks, and the errors. Each rank computes
-- the gradient of the whole batch (no DDP): the ranks agree, and a plain optimizer in one process
-- reproduces the run bit for bit. Reports lines rank=<r> <key>=<values>.
local dle = require("dle")
local common = require("dist.common")

local pg <close>, rank, world, emit = common.start() -- luacheck: ignore 211 (pg: used by its <close>)
local path = assert(os.getenv("DLE_ZERO_CHECKPOINT"), "DLE_ZERO_CHECKPOINT: the checkpoint's path")
local X, Y = common.batch(rank, world)   -- the whole batch (every rank's)
local opts = common.ADAM
local Zero = dle.optim.ZeroRedundancyOptimizer

local function kind(sd) return sd.owners and "shard" or "full" end

-- the error message of f(...), or "no error"
local function error_of(f, ...)
  local ok, e = pcall(f, ...)
  return ok and "no error" or tostring(e)
end

-- ZeRO(Adam) and plain Adam trained alike for 3 steps; the learning rate drops at step 3, so the
-- checkpoint carries hyperparameters other than the constructor's
local ref = common.mlp(0)
local ref_opt = dle.optim.Adam(ref:parameters(), opts)
local model = common.mlp(0)
local zero = Zero(dle.optim.Adam, model:parameters(), opts)
for step = 1, 3 do
  if step == 3 then ref_opt.lr = 0.025; zero.lr = 0.025 end
  common.train_step(ref, ref_opt, X, Y)
  common.train_step(model, zero, X, Y)
end
emit("trained_diff", common.max_diff(model, ref))

-- consolidation to rank 1: the full state there, the shard on rank 0
zero:consolidate_state_dict(1)
local sd = zero:state_dict()
emit("to1_kind", kind(sd))
if rank == 1 then emit("to1_vs_plain", common.state_difference(sd, ref_opt:state_dict()) or "same") end

-- then to rank 0 (the default), which writes the checkpoint; rank 1 is back to its shard
zero:consolidate_state_dict()
sd = zero:state_dict()
emit("to0_kind", kind(sd))
if rank == 0 then emit("to0_vs_plain", common.state_difference(sd, ref_opt:state_dict()) or "same") end
if rank == 0 then dle.save(path, {model = model:state_dict(), optim = sd}) end
dle.dist.barrier()

-- uninterrupted training, 2 more steps; a step drops the consolidation
common.train_step(model, zero, X, Y)
emit("params_step4", common.flat_params(model))
emit("after_step_kind", kind(zero:state_dict()))
common.train_step(model, zero, X, Y)

-- the checkpoint resumed by a new ZeRO on 2 ranks (constructed with the initial lr: the state's wins)
local ck = dle.load(path)
local resumed = common.mlp(99)
resumed:load_state_dict(ck.model)
local zero2 = Zero(dle.optim.Adam, resumed:parameters(), opts)
zero2:load_state_dict(ck.optim)
emit("resumed_lr", zero2.lr)
for _ = 1, 2 do common.train_step(resumed, zero2, X, Y) end
emit("resumed_diff", common.max_diff(model, resumed))

-- a plain Adam's state (what one process saves) resumed by ZeRO on 2 ranks
local from_plain = common.mlp(99)
from_plain:load_state_dict(ref:state_dict())
local zero3 = Zero(dle.optim.Adam, from_plain:parameters(), opts)
zero3:load_state_dict(ref_opt:state_dict())
for _ = 1, 2 do
  common.train_step(ref, ref_opt, X, Y)
  common.train_step(from_plain, zero3, X, Y)
end
emit("plain_resumed_diff", common.max_diff(ref, from_plain))
emit("plain_resumed_vs_ref", common.max_diff(model, from_plain))

-- every optimizer class's state, with a param that never had a gradient (param 2, owned by rank
-- 1: no state), consolidated to rank 1 and compared with the plain optimizer's
local CLASSES = {
  {"SGD", {lr = 0.1, momentum = 0.9, nesterov = true}},
  {"RMSprop", {lr = 0.01, momentum = 0.5, centered = true}},
  {"Adagrad", {lr = 0.1, initial_accumulator_value = 0.1}},
  {"AdamW", {lr = 0.01, amsgrad = true}},
}
local function train_without_param2(m, opt)
  local loss = dle.nn.functional.cross_entropy(m(X), Y)
  opt:zero_grad(); loss:backward()
  m:parameters()[2].grad = nil
  opt:step()
end
for _, c in ipairs(CLASSES) do
  local cls = dle.optim[c[1]]
  local a, b = common.mlp(1), common.mlp(1)
  local plain, z = cls(a:parameters(), c[2]), Zero(cls, b:parameters(), c[2])
  for _ = 1, 2 do train_without_param2(a, plain); train_without_param2(b, z) end
  z:consolidate_state_dict(1)
  if rank == 1 then
    emit("class." .. c[1], common.state_difference(z:state_dict(), plain:state_dict()) or "same")
  end
end

-- errors: a bad `to`, another rank's shard, a full state of other shapes
emit("bad_to", error_of(zero.consolidate_state_dict, zero, 2))
local shard_path = path .. ".shard" .. rank
dle.save(shard_path, zero:state_dict())
dle.dist.barrier()
emit("wrong_rank", error_of(zero.load_state_dict, zero, dle.load(path .. ".shard" .. (1 - rank))))
dle.dist.barrier()
os.remove(shard_path)
ck.optim.state[3].exp_avg = dle.zeros(2, 2)
emit("bad_shape", error_of(zero2.load_state_dict, zero2, ck.optim))
emit("done", 1)
