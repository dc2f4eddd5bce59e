--- dle.nn.utils: gradient clipping and parameter-vector helpers.
local dle = require("dle")
local check = require("dle.check")
local core = require("dle.core")

local U = {}

local function param_list(fname, params)
  if dle.is_tensor(params) then return {params} end
  if type(params) == "table" and type(params.parameters) == "function" then return params:parameters() end
  if type(params) ~= "table" then
    check.error(fname .. ": expected a list of tensors, got " .. check.typename(params))
  end
  for i, p in ipairs(params) do
    if not dle.is_tensor(p) then
      check.error(string.format("%s: parameter %d is a %s, not a tensor", fname, i, check.typename(p)))
    end
  end
  return params
end

-- clip_grad_norm_ under a graph trace (a compiled training step, dle.graph.train): the same
-- arithmetic as tensor ops, so that a replay computes the norm of its own gradients: each
-- gradient's norm in its dtype, combined in float64 (as the Lua doubles below), the coefficient
-- clamped at 1 (a multiplication by 1 changes nothing, as skipping it). Returns the total norm as
-- a 0-dim float64 tensor.
local function clip_as_ops(grads, max_norm, norm_type)
  return dle.no_grad(function()
    local total
    for _, g in ipairs(grads) do
      local n
      if norm_type == math.huge then n = g:abs():max():to("float64")
      else n = g:norm(norm_type):to("float64") ^ norm_type end
      total = total and (norm_type == math.huge and dle.maximum(total, n) or total + n) or n
    end
    if norm_type ~= math.huge then total = total ^ (1 / norm_type) end
    local coef = (max_norm / (total + 1e-6)):clamp(nil, 1)
    local as = {}   -- the coefficient in each gradient dtype, converted once
    for _, g in ipairs(grads) do
      local dt = g:dtype()
      as[dt] = as[dt] or coef:to(dt)
      g:mul_(as[dt])
    end
    return total
  end)
end

--- clip_grad_norm_(params, max_norm, {norm_type = 2}): scales all gradients in place (under
-- no_grad) so that their joint norm is at most max_norm. Parameters without .grad are skipped.
-- Under a graph trace (dle.compile of a training step) it is recorded as ops and returns the
-- norm as a 0-dim float64 tensor (see clip_as_ops).
-- @param params list of tensors (or one tensor, or a module)
-- @param max_norm number
-- @param opts optional {norm_type = 2 (or math.huge for the max norm)}
-- @return the total norm before clipping (a Lua float computed in float64)
function U.clip_grad_norm_(params, max_norm, opts)
  local ps = param_list("clip_grad_norm_", params)
  opts = check.options(opts, "clip_grad_norm_", {"norm_type"})
  if type(max_norm) ~= "number" or max_norm < 0 then
    check.error("clip_grad_norm_: max_norm must be a non-negative number, got " .. tostring(max_norm))
  end
  local norm_type = opts and opts.norm_type or 2
  local grads = {}
  for _, p in ipairs(ps) do
    if p.grad ~= nil then grads[#grads + 1] = p.grad end
  end
  if #grads == 0 then return 0.0 end
  if core._trace_active() then return clip_as_ops(grads, max_norm, norm_type) end
  local total = 0.0
  dle.no_grad(function()
    if norm_type == math.huge then
      for _, g in ipairs(grads) do total = math.max(total, g:abs():max():item()) end
    else
      -- one reduction per gradient (t:norm, no temporaries), the per-tensor norms combined in
      -- Lua's doubles: as PyTorch's clip_grad_norm_ does
      for _, g in ipairs(grads) do total = total + g:norm(norm_type):item() ^ norm_type end
      total = total ^ (1 / norm_type)
    end
    local coef = max_norm / (total + 1e-6)
    if coef < 1 then
      for _, g in ipairs(grads) do g:mul_(coef) end
    end
  end)
  return total + 0.0
end

--- parameters_to_vector(params): one flat float tensor of all parameters (a copy).
-- @return tensor {n}
function U.parameters_to_vector(params)
  local flat = {}
  for _, p in ipairs(param_list("parameters_to_vector", params)) do flat[#flat + 1] = p:detach():reshape(-1) end
  if #flat == 0 then check.error("parameters_to_vector: the list of parameters is empty") end
  return dle.cat(flat, 1)
end

--- vector_to_parameters(vec, params): copies consecutive slices of vec into the parameters.
function U.vector_to_parameters(vec, params)
  check.tensor(vec, "vector_to_parameters", "vec")
  local ps = param_list("vector_to_parameters", params)
  local off, total = 1, 0
  for _, p in ipairs(ps) do total = total + p:numel() end
  if vec:dim() ~= 1 or vec:numel() ~= total then
    check.error(string.format("vector_to_parameters: vec has shape %s, expected {%d} (the parameters' elements)",
      check.shape_str(vec), total))
  end
  dle.no_grad(function()
    for _, p in ipairs(ps) do
      local n = p:numel()
      p:copy_(vec:narrow(1, off, n):reshape(p:shape()))
      off = off + n
    end
  end)
end

-- Whether module m is an instance of class cls (or of a subclass).
local function is_instance(m, cls)
  local c = getmetatable(m) and getmetatable(m).__index
  while c do
    if c == cls then return true end
    c = rawget(c, "super")
  end
  return false
end

--- quantize_(model, kind, {tied = false}): replaces the weight of every dle.nn.Linear in model by
-- its quantized form (dle.quantize(weight, kind)), in place; the layers then compute x @ W^T from
-- the blocks (activations in float32) and their weights are no longer parameters. A Linear whose
-- weight is also an Embedding's (a tied output head) stays float unless opts.tied is true (then
-- the head gets a quantized copy and the embedding keeps the float weight). Biases stay float.
-- @param model a dle.nn.Module
-- @param kind "q8_0" | "q4_0" | "q4_k"
-- @param opts optional {tied = false}
-- @return model, and the number of layers converted
function U.quantize_(model, kind, opts)
  local fn = "quantize_"
  if not (type(model) == "table" and type(model.modules) == "function") then
    check.error(fn .. ": model must be a dle.nn.Module, got " .. check.typename(model))
  end
  opts = check.options(opts, fn, {"tied"})
  local nn = dle.nn
  local embedded = {}
  for _, m in ipairs(model:modules()) do
    if is_instance(m, nn.Embedding) and dle.is_tensor(m.weight) then embedded[m.weight] = true end
  end
  local n = 0
  for name, m in model:named_modules() do
    local w = rawget(m, "weight")
    if is_instance(m, nn.Linear) and dle.is_tensor(w) and (opts.tied or not embedded[w]) then
      local ok, q = pcall(dle.quantize, w, kind)
      if not ok then
        check.error(string.format("%s: layer %q: %s", fn, name, (check.strip_where(q):gsub("^quantize: ", ""))))
      end
      rawget(m, "_params").weight = nil
      rawset(m, "weight", q)
      n = n + 1
    end
  end
  return model, n
end

return U
