--- dle.dist.zero3: ZeRO stage 3's side in the model (internal to dle.optim.ZeroRedundancyOptimizer).
-- Each rank holds only its shard of every unit (dle.dist.zero_shards); between calls, a module's
-- parameter fields hold empty placeholders. A module owning parameters gets an instance forward
-- that all-gathers its units into its fields just before its own forward runs and puts the
-- placeholders back right after. With grad on, that forward runs inside dle.checkpoint: nothing of
-- the gathered parameters is kept for the backward, which gathers them again when it computes the
-- module's gradients; the gather's own backward reduce-scatters the parameters' gradient (averaged
-- over the ranks) into the shard's .grad. The root model's state_dict() and load_state_dict() work
-- on full tensors (collectives: every rank calls them).
local dle = require("dle")
local check = require("dle.check")
local Module = require("dle.nn.module")
local shards = require("dle.dist.zero_shards")

local M = {}

-- full flat parameters from a shard; backward: the mean gradient's shard
local Gather = dle.autograd.Function{
  name = "zero3_gather",
  forward = function(ctx, shard, u)
    ctx.u = u
    return shards.gather(u, shard)
  end,
  backward = function(ctx, g) return shards.reduce_mean(ctx.u, g:contiguous()) end,
}

--- Where each parameter of model sits: tensor -> {module, key, index (in a plain list field) or nil}.
-- A tensor held by two modules is an error (each rank would gather it twice, into one of them).
function M.slots(model, fn)
  local slots = {}
  for _, m in ipairs(model:modules()) do
    local own = rawget(m, "_params")
    for _, k in ipairs(rawget(m, "_order")) do
      local v = rawget(m, k)
      local found = {}
      if dle.is_tensor(v) and own[k] then
        found[1] = {m, k}
      elseif type(v) == "table" and getmetatable(v) == nil then
        for i, e in ipairs(v) do
          if dle.is_tensor(e) and e.requires_grad then found[#found + 1] = {m, k, i} end
        end
      end
      for _, s in ipairs(found) do
        local t = s[3] and v[s[3]] or v
        if slots[t] then
          check.error(string.format("%s: stage 3: a parameter of shape %s is held by two modules (%s and %s); "
            .. "shared parameters are not supported", fn, check.shape_str(t), slots[t][1].__name, m.__name))
        end
        slots[t] = s
      end
    end
  end
  return slots
end

local function set(slot, value)
  if slot[3] then rawget(slot[1], slot[2])[slot[3]] = value else rawset(slot[1], slot[2], value) end
end

-- Gathers the units into their modules' fields (through the autograd Gather when grad is on).
local function fill(units)
  for _, u in ipairs(units) do
    for i, v in ipairs(shards.views(u, Gather(u.shard, u))) do set(u.slots[i], v) end
  end
end

local function empty(units)
  for _, u in ipairs(units) do
    for i, s in ipairs(u.slots) do set(s, u.placeholders[i]) end
  end
end

-- fn(...) with the units filled, emptied again however fn ends.
local function with_filled(units, fn, ...)
  fill(units)
  local r = table.pack(pcall(fn, ...))
  empty(units)
  if not r[1] then error(r[2], 0) end
  return table.unpack(r, 2, r.n)
end

--- Takes over model: units (each with .shard, and .params, the original tensors, dropped here) get
-- their slots, the fields get placeholders (empty tensors that require grad, one per parameter:
-- what model:parameters() lists between calls), and the modules their gathering forwards.
-- on_load() runs after load_state_dict has written the shards.
-- @return the placeholders, in the order of the units' params
function M.install(model, units, slots, on_load)
  local by_module, order, placeholders = {}, {}, {}
  for _, u in ipairs(units) do
    u.slots, u.placeholders = {}, {}
    for i, p in ipairs(u.params) do
      u.slots[i] = slots[p]
      u.placeholders[i] = dle.empty(0, {dtype = p:dtype()}):requires_grad_(true)
      placeholders[#placeholders + 1] = u.placeholders[i]
    end
    u.params = nil
    local m = u.slots[1][1]
    if not by_module[m] then by_module[m] = {}; order[#order + 1] = m end
    table.insert(by_module[m], u)
  end
  for _, m in ipairs(order) do
    local own, forward = by_module[m], m.forward
    empty(own)
    local function run(self, ...) return with_filled(own, forward, self, ...) end
    rawset(m, "forward", function(self, ...)
      if dle.is_grad_enabled() then return dle.checkpoint(run, self, ...) end
      return run(self, ...)
    end)
  end
  local mine = {}
  for _, m in ipairs(order) do for _, u in ipairs(by_module[m]) do mine[#mine + 1] = u end end
  --- model:state_dict(): full tensors (a collective).
  rawset(model, "state_dict", function(self)
    return dle.no_grad(function() return with_filled(mine, Module.state_dict, self) end)
  end)
  --- model:load_state_dict(sd, opts): each rank keeps its shard of sd's parameters (a collective).
  rawset(model, "load_state_dict", function(self, sd, opts)
    return dle.no_grad(function()
      fill(mine)
      local r = table.pack(pcall(Module.load_state_dict, self, sd, opts))
      if r[1] then
        for _, u in ipairs(mine) do
          local views = {}
          for i, s in ipairs(u.slots) do views[i] = s[3] and rawget(s[1], s[2])[s[3]] or rawget(s[1], s[2]) end
          u.shard:copy_(shards.slice(u, shards.flatten(u, views)))
        end
      end
      empty(mine)
      if not r[1] then error(r[2], 0) end
      on_load()
      return table.unpack(r, 2, r.n)
    end)
  end)
  return placeholders
end

return M
