--- dle.dist.DistributedDataParallel(model, opts): data-parallel training, PyTorch's DDP.
-- Each rank runs the same script on its own share of the data:
--   local ddp = dle.dist.DistributedDataParallel(model)
--   local opt = dle.optim.Adam(ddp:parameters())
--   local loss = loss_fn(ddp(x), y); opt:zero_grad(); loss:backward(); opt:step()
-- Construction broadcasts rank 0's parameters and buffers to every rank. After each backward
-- that follows a forward of ddp (grad mode on), the gradients of the model's parameters are
-- averaged across ranks (a backward hook, dle.autograd.register_backward_hook), so every rank
-- takes the same step and the parameters stay identical.
-- * Buckets: gradients go in flat buffers of one dtype, at most opts.bucket_cap_mb (25) MB each:
--   each is divided by the world size, then summed by one all_reduce, and copied back. With
--   opts.overlap (default: true for CUDA models, whose NCCL collectives progress on their own;
--   false on the CPU, where Open MPI progresses only inside MPI calls) a bucket's all_reduce starts
--   during backward, as soon as its gradients are computed, and overlaps the rest of the backward
--   (lua/dle/dist/reducer.lua); all are done before backward returns.
-- * Unused parameters: one small all_reduce of flags tells which parameters have a gradient on
--   some rank; a rank without one contributes zeros, and a parameter without a gradient on every
--   rank keeps .grad nil (PyTorch's find_unused_parameters, always on).
-- * Gradient accumulation: each synchronised backward averages the whole accumulated .grad; the
--   part accumulated by earlier synchronised passes is already equal on every rank, and the mean
--   of (c + g_r) is c + mean(g_r), so k backward calls before a step average like one.
--   ddp:no_sync(fn, ...) runs fn (forward and backward) without synchronising: the local
--   gradients then go into the next synchronised backward's average.
-- * Buffers (BatchNorm statistics) are broadcast from rank 0 before each forward in training
--   mode (opts.broadcast_buffers, default true).
-- * parameters(), named_parameters(), named_buffers(), state_dict() and load_state_dict() are the
--   model's own, with the model's names (PyTorch prefixes "module."; here a checkpoint saved
--   through the wrapper loads into the bare model and back). ddp.module is the model; train(),
--   eval(), zero_grad(), to() reach it as a submodule.
local dle = require("dle")
local check = require("dle.check")
local Module = require("dle.nn.module")
local dist = require("dle.dist")
local buckets = require("dle.dist.buckets")
local Reducer = require("dle.dist.reducer")

local DDP = Module:extend("DistributedDataParallel")

local OPTIONS = {broadcast_buffers = "boolean", bucket_cap_mb = "number", overlap = "boolean"}

local function tensors_of(named)
  local out = {}
  for i, e in ipairs(named) do out[i] = e[2] end
  return out
end

local DTYPE_ID = {float32 = 1, float64 = 2, float16 = 3, bfloat16 = 4}

-- Errors on every rank when the ranks' models differ in parameter count, sizes or dtypes (a
-- broadcast between different models would hang or scramble them): compares a signature's max
-- and min.
local function check_same_model(params)
  local n, total, weighted = #params, 0, 0
  for i, p in ipairs(params) do
    total = total + p:numel()
    weighted = (weighted + i * (p:numel() * 5 + (DTYPE_ID[p:dtype()] or 0))) % 1000000007
  end
  local sig = dle.tensor({n, total, weighted, -n, -total, -weighted}, {dtype = "int64"})
  dist.all_reduce(sig, "max")
  local s = sig:totable()
  if s[1] ~= -s[4] or s[2] ~= -s[5] or s[3] ~= -s[6] then
    check.error(string.format("DistributedDataParallel: the model differs across ranks (rank %d has %d "
      .. "parameters of %d elements; every rank must build the same model)", dist.rank(), n, total))
  end
end

--- Wraps model (a dle.nn.Module). dle.dist.init() must have been called.
-- @param model the module to train
-- @param opts optional {broadcast_buffers = true, bucket_cap_mb = 25, overlap = (the model is on CUDA)}
function DDP:init(model, opts)
  if not Module.is_module(model) then
    check.error("DistributedDataParallel: model must be a dle.nn.Module, got " .. check.typename(model))
  end
  opts = check.options(opts, "DistributedDataParallel", {"broadcast_buffers", "bucket_cap_mb", "overlap"})
  for k, v in pairs(opts) do
    -- not (v > 0): NaN is refused too
    if type(v) ~= OPTIONS[k] or (k == "bucket_cap_mb" and not (v > 0)) then -- luacheck: ignore 581
      check.error(string.format("DistributedDataParallel: option %s must be a %s%s, got %s", k, OPTIONS[k],
        k == "bucket_cap_mb" and " > 0" or "", tostring(v)))
    end
  end
  if not dist.is_initialized() then
    check.error("DistributedDataParallel: dle.dist is not initialized; call dle.dist.init() first")
  end
  self.module = model   -- a registered submodule: train(), eval(), to() reach it
  rawset(self, "_broadcast_buffers", opts.broadcast_buffers ~= false)
  rawset(self, "_cap", math.floor((opts.bucket_cap_mb or 25) * 1024 * 1024))
  rawset(self, "_sync", true)      -- false inside no_sync
  rawset(self, "_pending", false)  -- a forward ran with grad on: the next backward synchronises
  rawset(self, "_world", dist.world_size())

  if self._world > 1 then
    check_same_model(model:parameters())
    local states = model:parameters()   -- a new list: the buffers join it
    for _, b in ipairs(tensors_of(model:named_buffers())) do states[#states + 1] = b end
    buckets.each(states, self._cap, function(flat) dist.broadcast(flat, 0) end)
    local params = {}
    for _, p in ipairs(model:parameters()) do
      if p.requires_grad then params[#params + 1] = p end
    end
    local overlap = opts.overlap
    if overlap == nil then overlap = #params > 0 and params[1]:device() ~= "cpu" end
    rawset(self, "_reducer", Reducer.new(model, params, self._cap, self._world, overlap))
  end

  -- The hook holds the wrapper weakly: an unused wrapper is collected and its hook removed.
  rawset(self, "_hook", Reducer.backward_hook(self, "_sync_gradients"))
end

--- Calls the model (broadcasting rank 0's buffers first, in training mode).
function DDP:forward(...)
  local model = rawget(self, "module")
  if self._world > 1 and self._broadcast_buffers and self.training then
    local bufs = tensors_of(model:named_buffers())
    if #bufs > 0 then
      buckets.each(bufs, self._cap, function(flat) dist.broadcast(flat, 0) end)
    end
  end
  local sync = self._sync and dle.is_grad_enabled()
  if sync then rawset(self, "_pending", true) end
  local reducer = self._reducer
  if not reducer then return model(...) end
  reducer.active = sync   -- the readiness hooks mark this forward's modules
  local r = table.pack(pcall(model, ...))
  reducer.active = false
  if not r[1] then error(r[2], 0) end
  return table.unpack(r, 2, r.n)
end

-- The backward hook: averages the gradients when a forward of this wrapper preceded.
function DDP:_sync_gradients()
  if not self._pending then return end
  rawset(self, "_pending", false)
  if self._world == 1 then return end
  self._reducer:finish(function(i, g)
    if g.requires_grad then
      check.error(string.format("DistributedDataParallel: the gradient of parameter %d requires grad "
        .. "(a create_graph backward): averaging it across ranks is not supported", i))
    end
  end)
end

--- ddp:no_sync(fn, ...) -> fn's results: runs fn without gradient synchronisation (forward and
-- backward both inside fn), for gradient accumulation; the next synchronised backward averages
-- everything accumulated.
function DDP:no_sync(fn, ...)
  check.callable(fn, "DistributedDataParallel:no_sync", "fn")
  local prev = self._sync
  rawset(self, "_sync", false)
  local r = table.pack(pcall(fn, ...))
  rawset(self, "_sync", prev)
  if not r[1] then error(r[2], 0) end
  return table.unpack(r, 2, r.n)
end

--- The model's parameters (what the optimizer takes).
function DDP:parameters() return rawget(self, "module"):parameters() end
--- The model's named parameters, with the model's names.
function DDP:named_parameters() return rawget(self, "module"):named_parameters() end
--- The model's named buffers, with the model's names.
function DDP:named_buffers() return rawget(self, "module"):named_buffers() end
--- The model's state_dict (its own names: loads into the bare model).
function DDP:state_dict() return rawget(self, "module"):state_dict() end
--- Loads into the model (a state_dict of the bare model or of the wrapper).
function DDP:load_state_dict(sd, opts) return rawget(self, "module"):load_state_dict(sd, opts) end

function DDP:extra_repr() return "world_size=" .. self._world end

return check.export(DDP)
