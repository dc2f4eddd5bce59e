--- dle.dist.reducer: how DistributedDataParallel averages gradients (PyTorch's Reducer; internal
-- to lua/dle/dist/ddp.lua).
-- * Buckets: the parameters in reverse order (the order backward produces their gradients), in
--   flat buffers of one dtype and at most cap bytes, kept from step to step; a bucket closes at a
--   module boundary once it holds MIN_BUCKET bytes, so the last layers' gradients leave before the
--   first layers' exist.
-- * Overlap (opts.overlap; on by default for CUDA parameters, whose NCCL collectives progress on
--   their own): a bucket whose gradients are all computed starts a non-blocking all_reduce while
--   backward still runs. Open MPI progresses a non-blocking collective only inside MPI calls, so
--   on CPU tensors an early start overlaps nothing and its non-blocking all-reduce costs about
--   twice the blocking one (bench/RESULTS.md): there every bucket is reduced, blocking, after
--   backward.
-- * Readiness (with overlap): a forward pre-hook on each leaf module owning parameters passes its
--   input through an identity autograd op; that op's backward runs once the module's own backward
--   has run, and so once its parameters' gradients are in .grad (the engine delivers a leaf's
--   gradient when the node using it runs). A module called k times is ready after k such backward
--   calls. Buckets start strictly in plan order so that every rank starts the same collectives in
--   the same order; the in-flight ones are tested at each readiness.
-- * Unused parameters: every bucket is reduced whole, a parameter without a gradient on this rank
--   taking part with zeros. Which parameters have a gradient somewhere rides in the same
--   collectives: one bucket (the flags bucket, the last shared one, reduced after backward) carries
--   after its gradients one element per parameter, 1 where this rank has its gradient. A parameter
--   with a gradient on no rank keeps .grad nil; one with a gradient elsewhere only gets the average.
--   Parameters no readiness covers (of a module with submodules, shared by two modules, of the
--   first layer, whose input needs no gradient) go in finish().
local dle = require("dle")
local dist = require("dle.dist")

local MIN_BUCKET = 64 * 1024   -- bytes: smaller messages cost more in latency than overlap gains
local ALONE = 256 * 1024       -- bytes: a larger gradient costs more to copy than a collective of its own

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

-- The buckets of params (indices into it, in reverse order). Without overlap, module boundaries
-- do not matter: a parameter of at least ALONE bytes has a bucket of its own, reduced in place in
-- its .grad (no copies in and out of a flat buffer), and the others share buckets up to cap. Also
-- returns the flags bucket.
local function plan_buckets(params, owner, cap, overlap)
  local plan, cur = {}, nil
  for i = #params, 1, -1 do
    local p = params[i]
    local bytes = p:numel() * p:element_size()
    local alone = not overlap and bytes >= ALONE
    local bucket = cur
    if alone or not cur or p:dtype() ~= cur.dtype or (cur.bytes + bytes > cap and #cur.idx > 0)
        or (overlap and owner[p] ~= cur.last_owner and cur.bytes >= MIN_BUCKET) then
      bucket = {idx = {}, bytes = 0, numel = 0, dtype = p:dtype(), alone = alone}
      plan[#plan + 1] = bucket
    end
    if not alone then cur = bucket end   -- the next small parameters join the shared bucket
    bucket.idx[#bucket.idx + 1] = i
    bucket.bytes = bucket.bytes + bytes
    bucket.numel = bucket.numel + p:numel()
    bucket.last_owner = owner[p] or false
  end
  -- the flags bucket: the last shared one (in overlap mode the last one: the first layers', whose
  -- gradients come last anyway), or one of its own when every parameter is alone
  local flags
  for _, b in ipairs(plan) do if not b.alone then flags = b end end
  if not flags and #params > 0 then
    flags = {idx = {}, bytes = 0, numel = 0, dtype = params[1]:dtype()}
    plan[#plan + 1] = flags
  end
  if flags then flags.flags = true end
  return plan, flags
end

--- A reducer over the parameters (requiring grad) of model, world ranks, buckets of at most cap
-- bytes; overlap: start buckets during backward (see above).
function Reducer.new(model, params, cap, world, overlap)
  local self = setmetatable({params = params, world = world, overlap = overlap}, Reducer)
  local owner, leaves = owners(model)
  self.owner = owner
  self.plan, self.flag_bucket = plan_buckets(params, owner, cap, overlap)
  self:_reset()
  -- the hooks hold the reducer weakly: a dropped DDP leaves inert hooks behind
  local ref = setmetatable({r = self}, {__mode = "v"})
  if not overlap then return self end
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
    if b.flags then return end   -- (reduced in finish(), once every flag is known)
    for _, i in ipairs(b.idx) do
      if not self.ready[i] then return end
    end
    self:_start(b, true)
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

-- Starts the average of bucket b's gradients across the ranks (zeros for a parameter without
-- one here; the flags bucket's flags after them, from self.missing): in place in the .grad of a
-- parameter alone in its bucket, else in the bucket's own flat buffer, kept with its per-parameter
-- views from step to step; async: without waiting for it.
function Reducer:_start(b, async)
  local p = self.params[b.idx[1]] or self.params[1]
  local part, views
  if b.alone and p.grad:is_contiguous() then
    part = p.grad
  else
    local flat = b.flat
    if not flat or flat:dtype() ~= p:dtype() or flat:device() ~= p:device() then   -- (moved since)
      flat = dle.empty({b.numel + (b.flags and #self.params or 0)}, {dtype = p:dtype(), device = p:device()})
      b.flat, b.views = flat, self:_slices(flat, b.idx)
      b.flag_view = b.flags and flat:narrow(1, b.numel + 1, #self.params) or nil
    end
    views = b.views
    dle.no_grad(function()
      for k, i in ipairs(b.idx) do
        local g = self.params[i].grad
        if g ~= nil then views[k]:copy_(g) else views[k]:zero_() end
      end
      if b.flags then
        if #self.missing == 0 then
          b.flag_view:fill_(1)
        else
          local mine = {}   -- (not from .grad: a zeroed one alone in its bucket has one by now)
          for i = 1, #self.params do mine[i] = 1 end
          for _, i in ipairs(self.missing) do mine[i] = 0 end
          b.flag_view:copy_(dle.tensor(mine, {dtype = p:dtype(), device = p:device()}))
        end
      end
    end)
    part = flat
  end
  -- scaled before the sum, as PyTorch does (float16 sums stay in range); by the reciprocal, which
  -- is exact for a power-of-two world and a multiply instead of a slower divide (a flag stays > 0)
  dle.no_grad(function() part:mul_(1 / self.world) end)
  local work
  if async then
    work = dist.all_reduce(part, "sum", {async_op = true})
  else
    dist.all_reduce(part, "sum")
  end
  self.started[#self.started + 1] = {bucket = b, views = views, work = work}
end

-- Views of flat's first elements, one after another, shaped like the parameters idx.
function Reducer:_slices(flat, idx)
  local views, n = {}, 0
  for k, i in ipairs(idx) do
    local p = self.params[i]
    views[k] = flat:narrow(1, n + 1, p:numel()):view(p:shape())
    n = n + p:numel()
  end
  return views
end

--- After backward: the remaining buckets (the flags bucket among them), the waits, the averages
-- into .grad. check_grad(i, g) vets each gradient this rank contributes (param index i).
function Reducer:finish(check_grad)
  self.last_early = #self.started   -- buckets started during this backward (what tests look at)
  local missing = {}
  for i, p in ipairs(self.params) do
    if p.grad == nil then missing[#missing + 1] = i else check_grad(i, p.grad) end
  end
  self.missing = missing
  local zeroed = {}   -- parameters alone in their bucket without a gradient here: zeros reduced in place
  for k = #self.started + 1, #self.plan do
    local b = self.plan[k]
    local p = self.params[b.idx[1]]
    if b.alone and p.grad == nil then
      p.grad = dle.zeros_like(p)
      zeroed[b.idx[1]] = true
    end
    -- with overlap, non-blocking too: MPI never matches a blocking collective with another rank's
    -- non-blocking one
    self:_start(b, self.overlap)
  end
  local average_of = {}   -- param index -> its average, for the parameters without a .grad here
  dle.no_grad(function()
    for _, s in ipairs(self.started) do
      if s.work then s.work:wait() end
      if s.views then   -- (a parameter reduced in place in its .grad has none)
        for k, i in ipairs(s.bucket.idx) do
          local g = self.params[i].grad
          if g ~= nil then g:copy_(s.views[k]) else average_of[i] = s.views[k] end
        end
      end
    end
  end)
  if #missing > 0 then   -- which of them have a gradient on some rank
    local flags = self.flag_bucket.flag_view:totable()
    for _, i in ipairs(missing) do
      local p = self.params[i]
      if flags[i] > 0 then
        if not zeroed[i] then p.grad = average_of[i]:clone() end
      else
        p.grad = nil
      end
    end
  end
  self:_reset()
end

return Reducer
