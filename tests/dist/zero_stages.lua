--- MPI worker of tests/dist_spec.lua: ZeroRedundancyOptimizer stages 1, 2 and 3 on any number of
-- ranks (run with mpirun -np 1, 2 and 4). The model, common.mlp, has 75 parameters (no multiple of 2
-- or 4: the flat shards are padded). Reports lines rank=<r> <key>=<values>.
-- * DLE_ZERO_EQUAL=1: each stage trained 4 steps against plain AdamW in this process, in float32
--   and in bfloat16 with float32 master weights (every rank on the whole batch, so the mean of the
--   ranks' gradients is exactly the one-process gradient: what is left to differ is ZeRO's
--   sharding); and stages 1 (with DDP), 2 and 3 with SGD on each rank's share of the batch, against
--   SGD on the whole batch (gradients averaged across ranks).
-- * DLE_ZERO_DIR=dir: checkpoints. DLE_ZERO_SAVE=1: plain AdamW and stages 1, 2, 3 trained 3 steps
--   save {model, optim} as dir/ck_<world>_<stage>.dle (stage 0: plain). Then every checkpoint in dir
--   is loaded under every stage (and plain AdamW) and trained 2 more steps, against 5 steps of
--   plain AdamW uninterrupted.
local dle = require("dle")
local common = require("dist.common")
local dist, F = dle.dist, dle.nn.functional

local pg <close>, rank, world, emit = common.start() -- luacheck: ignore 211 (pg: used by its <close>)
local X, Y, xr, yr = common.batch(rank, world)
local ADAMW = {lr = 0.05, betas = {0.8, 0.99}, weight_decay = 0.01}
local Zero = dle.optim.ZeroRedundancyOptimizer

local function with(opts, extra)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

-- model in dtype, and an optimizer of class cls over it: stage 0 is the plain one, stepping float32
-- masters of a half model (copied back after each step) as ZeRO does
local function make(stage, dtype, cls, opts, seed)
  local model = common.mlp(seed or 0)
  if dtype ~= "float32" then model:to(dtype) end
  if stage > 0 then return model, Zero(cls, model, with(opts, {stage = stage})) end
  local params = model:parameters()
  if dtype == "float32" then return model, cls(params, opts) end
  local masters = {}
  for i, p in ipairs(params) do masters[i] = p:detach():to("float32"):clone() end
  local opt = cls(masters, opts)
  local step, zero_grad = opt.step, opt.zero_grad
  rawset(opt, "zero_grad", function(self)
    zero_grad(self)
    for _, p in ipairs(params) do p.grad = nil end
  end)
  rawset(opt, "step", function(self)
    dle.no_grad(function()
      for i, p in ipairs(params) do masters[i].grad = p.grad and p.grad:to("float32") end
      step(self)
      for i, p in ipairs(params) do p:copy_(masters[i]) end
    end)
  end)
  return model, opt
end

local function train(model, opt, x, y, steps, dtype)
  for _ = 1, steps do
    opt:zero_grad()
    F.cross_entropy(model(x:to(dtype or "float32")), y):backward()
    opt:step()
  end
end

-- the largest difference between two models' parameters (their full state_dicts)
local function diff(a, b)
  local sa, sb, d = a:state_dict(), b:state_dict(), 0
  for k, v in pairs(sa) do d = math.max(d, (v:float() - sb[k]:float()):abs():max():item()) end
  return d
end

local function bytes_of(model)
  local n = 0
  for _, v in pairs(model:state_dict()) do n = n + v:numel() end
  return n
end

if os.getenv("DLE_ZERO_EQUAL") == "1" then
  for _, dtype in ipairs({"float32", "bfloat16"}) do
    local ref, ref_opt = make(0, dtype, dle.optim.AdamW, ADAMW)
    train(ref, ref_opt, X, Y, 4, dtype)
    for stage = 1, 3 do
      local model, opt = make(stage, dtype, dle.optim.AdamW, ADAMW)
      train(model, opt, X, Y, 4, dtype)
      emit(string.format("equal.%s.%d", dtype, stage), diff(model, ref))
    end
  end
  emit("numel", bytes_of(common.mlp(0)))
  -- each rank its share of the batch: the gradients must be averaged across ranks
  local SGD = {lr = 0.1, momentum = 0.9}
  local ref, ref_opt = make(0, "float32", dle.optim.SGD, SGD)
  train(ref, ref_opt, X, Y, 3)
  for stage = 1, 3 do
    local model, opt = make(stage, "float32", dle.optim.SGD, SGD)
    local net = stage == 1 and dist.DistributedDataParallel(model) or model
    train(net, opt, xr, yr, 3)
    emit("split." .. stage, diff(model, ref))
  end
  -- stage 3 keeps shards only: the model's fields are empty between calls
  local model = make(3, "float32", dle.optim.AdamW, ADAMW)
  local n = 0
  for _, p in ipairs(model:parameters()) do n = n + p:numel() end
  emit("stage3_resident_numel", n)
  emit("stage3_state_numel", bytes_of(model))
  local e = select(2, pcall(Zero, dle.optim.AdamW, model:parameters(), {stage = 3}))
  emit("stage3_list", e)
  e = select(2, pcall(Zero, dle.optim.AdamW, model:parameters(), {stage = 4}))
  emit("bad_stage", e)
end

local dir = os.getenv("DLE_ZERO_DIR")
if dir then
  if os.getenv("DLE_ZERO_SAVE") == "1" then
    for stage = 0, 3 do
      local model, opt = make(stage, "float32", dle.optim.AdamW, ADAMW)
      train(model, opt, X, Y, 3)
      if stage == 1 then opt:consolidate_state_dict(0) end
      local ck = {model = model:state_dict(), optim = opt:state_dict()}
      if rank == 0 then dle.save(string.format("%s/ck_%d_%d.dle", dir, world, stage), ck) end
    end
    dist.barrier()
  end
  local ref, ref_opt = make(0, "float32", dle.optim.AdamW, ADAMW)
  train(ref, ref_opt, X, Y, 5)
  local worst, loaded = 0, {}
  local p = assert(io.popen("ls " .. dir))
  local files = {}
  for f in p:lines() do if f:match("^ck_%d+_%d%.dle$") then files[#files + 1] = f end end
  p:close()
  table.sort(files)
  for _, f in ipairs(files) do
    local ck = dle.load(dir .. "/" .. f)
    for stage = 0, 3 do
      local model, opt = make(stage, "float32", dle.optim.AdamW, with(ADAMW, {lr = 1}), 99)
      model:load_state_dict(ck.model)
      opt:load_state_dict(ck.optim)
      train(model, opt, X, Y, 2)
      worst = math.max(worst, diff(model, ref))
      loaded[#loaded + 1] = f:match("^ck_(%d+_%d)") .. ">" .. stage
    end
  end
  emit("resumed", loaded)
  emit("resumed_diff", worst)
end
emit("done", 1)
