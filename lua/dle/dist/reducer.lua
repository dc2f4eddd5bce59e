--- dle.dist.reducer: how DistributedDataParallel averages gradients while backward still runs
-- (PyTorch's Reducer; internal to lua/dle/dist/ddp.lua).
-- * Buckets: the parameters in reverse order (the order backward produces their gradients), in
--   flat buffers of one dtype and at most cap bytes; a bucket closes at a module boundary once it
--   holds MIN_BUCKET bytes, so the last layers' gradients leave before the first layers' exist.
-- * Readiness: a forward pre-hook on each leaf module owning parameters passes its input through
--   an identity autograd op; that op's backward runs once the module's own backward has run,
--   and so once its parameters' gradients are in .grad (the engine delivers a leaf's gradient
--   when the node using it runs). A module called k times is ready after k such backward calls.
-- * A bucket whose parameters are all ready (each with a gradient) starts its all_reduce there
--   (MPI_Iallreduce), buckets strictly in plan order so that every rank starts the same
--   collectives in the same order; the in-flight ones are tested at each readiness (Open MPI
--   progresses only inside MPI calls). After backward, finish() exchanges which parameters have a
--   gradient on some rank (on a communicator of its own: a rank may have started more buckets by
--   then), starts the remaining buckets over those (zeros for a rank without one; a parameter
--   without a gradient on every rank keeps .grad nil), waits for all and copies the averages
--   back. Parameters no readiness covers (of a module with submodules, shared by two modules,
--   of the first layer, whose input needs no gradient) go in finish().
local dle = require "dle"
local dist = require "dle.dist"

local MIN_BUCKET = 64 * 1024   -- bytes: smaller messages cost more in latency than overlap gains

local Reducer = {}
Reducer.__index = Reducer

--- Reducer.backward_hook(obj, method) -> handle: obj[method](obj) after every backward
-- (dle.autograd.register_backward_hook), obj held weakly: once obj is collected the hook removes
-- itself. What DistributedDataParallel and ZeRO stage 2 synchronise gradients with.
function Reducer.backward_hook(obj, method)
  local ref = setmetatable({obj = obj}, {__mode = "v"})
  local handle
  handle = dle.autograd.register_backward_hook(function()
    local o = ref.obj
    if o then o[method](o) else handle:remove() end
  end)
  return handle
end

local Ready = dle.autograd.Function{
  name = "ddp_ready",
  forward = function(ctx, x, reducer, m)
    ctx.reducer, ctx.m = reducer, m
    return x
  end,
  backward = function(ctx, g)
    ctx.reducer:_module_done(ctx.m)
    return g
  end,
}

-- The leaf modules of model owning parameters, and for each parameter its one such owner (or none).
local function owners(model)
  local owner, count, leaves = {}, {}, {}
  for _, m in ipairs(model:modules()) do
    if #m:children() == 0 then
      local ps = m:parameters()
      if #ps > 0 then leaves[#leaves + 1] = m end
      for _, p in ipairs(ps) do
        owner[p] = m
        count[p] = (count[p] or 0) + 1
      end
    end
  end
  for p, c in pairs(count) do if c > 1 then owner[p] = nil end end
  return owner, leaves
end

--- A reducer over the parameters (requiring grad) of model, world ranks, buckets of at most cap bytes.
function Reducer.new(model, params, cap, world)
  local self = setmetatable({params = params, world = world, plan = {}}, Reducer)
  local owner, leaves = owners(model)
  self.owner = owner
  local cur
  for i = #params, 1, -1 do
    local p = params[i]
    local bytes = p:numel() * p:element_size()
    local boundary = cur and owner[p] ~= cur.last_owner
    if not cur or p:dtype() ~= cur.dtype or (cur.bytes + bytes > cap and #cur.idx > 0)
        or (boundary and cur.bytes >= MIN_BUCKET) then
      cur = {idx = {}, bytes = 0, dtype = p:dtype()}
      self.plan[#self.plan + 1] = cur
    end
    cur.idx[#cur.idx + 1] = i
    cur.bytes = cur.bytes + bytes
    cur.last_owner = owner[p] or false
  end
  self.flags_group = dist.new_group((function()
    local all = {}
    for r = 0, world - 1 do all[r + 1] = r end
    return all
  end)())
  self:_reset()
  -- the hooks hold the reducer weakly: a dropped DDP leaves inert hooks behind
  local ref = setmetatable({r = self}, {__mode = "v"})
  for _, m in ipairs(leaves) do
    m:register_forward_pre_hook(function(mod, args)
      local r = ref.r
      if not (r and r.active and dle.is_grad_enabled()) then return nil end
      for k = 1, args.n do
        local a = args[k]
        if dle.is_tensor(a) and a.requires_grad and a:is_floating_point() then
          r.calls[mod] = (r.calls[mod] or 0) + 1
          args[k] = Ready(a, r, mod)
          return args
        end
      end
      return nil
    end)
  end
  return self
end

function Reducer:_reset()
  self.calls, self.ready, self.started = {}, {}, {}
end

-- The readiness op's backward: module m's backward ran once more.
function Reducer:_module_done(m)
  local left = (self.calls[m] or 1) - 1
  self.calls[m] = left
  if left ~= 0 then return end
  for _, i in ipairs(self:index_of(m)) do
    local g = self.params[i].grad
    if g ~= nil and not g.requires_grad then self.ready[i] = true end
  end
  for _, s in ipairs(self.started) do s.work:is_completed() end
  while #self.started < #self.plan do
    local b = self.plan[#self.started + 1]
    for _, i in ipairs(b.idx) do
      if not self.ready[i] then return end
    end
    self:_start(b, b.idx)
  end
end

-- The indices (into params) of module m's parameters owned by it alone.
function Reducer:index_of(m)
  self._index = self._index or {}
  local list = self._index[m]
  if not list then
    list = {}
    for i, p in ipairs(self.params) do if self.owner[p] == m then list[#list + 1] = i end end
    self._index[m] = list
  end
  return list
end

-- Starts the average of bucket b's parameters idx (each with a .grad) across the ranks.
function Reducer:_start(b, idx)
  local flat = dle.no_grad(function()
    local parts = {}
    for k, i in ipairs(idx) do parts[k] = self.params[i].grad:reshape(-1) end
    local f = #parts == 1 and parts[1]:clone() or dle.cat(parts, 1)
    return f:div_(self.world)   -- before the sum, as PyTorch does: float16 sums stay in range
  end)
  self.started[#self.started + 1] = {idx = idx, flat = flat, work = dist.all_reduce(flat, "sum", {async_op = true})}
  b.started = true
end

--- After backward: the flags, the remaining buckets, the waits, the averages into .grad.
-- check_grad(i, g) vets each gradient that is averaged (param index i).
function Reducer:finish(check_grad)
  self.last_early = #self.started   -- buckets started during this backward (what tests look at)
  local flags = dle.zeros(#self.params, {dtype = "uint8"})
  for i, p in ipairs(self.params) do
    if p.grad ~= nil then flags[i] = 1 end
  end
  dist.all_reduce(flags, "max", {group = self.flags_group})
  local has = flags:totable()
  for i, p in ipairs(self.params) do
    if has[i] == 1 then
      if p.grad == nil then p.grad = dle.zeros_like(p) end   -- unused here, used elsewhere: zeros
      check_grad(i, p.grad)
    end
  end
  for k = #self.started + 1, #self.plan do
    local idx = {}
    for _, i in ipairs(self.plan[k].idx) do
      if has[i] == 1 then idx[#idx + 1] = i end
    end
    if #idx > 0 then self:_start(self.plan[k], idx) else self.started[#self.started + 1] = {idx = {}} end
  end
  dle.no_grad(function()
    for _, s in ipairs(self.started) do
      if s.work then
        s.work:wait()
        local offset = 0
        for _, i in ipairs(s.idx) do
          local g = self.params[i].grad
          local n = g:numel()
          g:copy_(s.flat:narrow(1, offset + 1, n):view(g:shape()))
          offset = offset + n
        end
      end
    end
  end)
  self:_reset()
end

return Reducer
