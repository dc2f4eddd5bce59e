--- dle.func: torch.func-style function transforms on top of dle's autograd: grad, vjp, jvp,
-- jacobian (reverse mode by rows or forward mode by columns), hessian and vmap. Dims are 1-based.
-- vmap runs f once per batch element and stacks the results (a loop, not a batched rewrite of f):
-- the semantics of torch.func.vmap for functions of tensors, without its speed.
local dle = require("dle")
local check = require("dle.check")

local M = {}

local function as_list(v, fn, what)
  if dle.is_tensor(v) then return {v}, true end
  if type(v) ~= "table" or #v == 0 then check.error(fn .. ": " .. what .. " must be a tensor or a list of tensors") end
  for i, t in ipairs(v) do check.tensor(t, fn, what .. "[" .. i .. "]") end
  return v, false
end

-- fresh leaves that require grad, with the values of xs
local function leaves(xs)
  local r = {}
  for i, x in ipairs(xs) do r[i] = x:detach():requires_grad_(true) end
  return r
end

--- grad(f, {argnums = 1}) -> a function of f's arguments returning the gradient of f (a one-element
-- tensor result) with respect to argument argnums (or a list of gradients for a list of argnums).
-- @return function
function M.grad(f, opts)
  check.callable(f, "func.grad", "f")
  opts = check.options(opts, "func.grad", {"argnums"})
  local argnums = opts.argnums or 1
  local many = type(argnums) == "table"
  local nums = many and argnums or {argnums}
  return function(...)
    local args = table.pack(...)
    local wrt = {}
    for i, k in ipairs(nums) do
      check.tensor(args[k], "func.grad", "argument " .. k)
      args[k] = args[k].requires_grad and args[k] or args[k]:detach():requires_grad_(true)
      wrt[i] = args[k]
    end
    return dle.enable_grad(function()
      local y = f(table.unpack(args, 1, args.n))
      check.tensor(y, "func.grad", "f's result")
      if y:numel() ~= 1 then check.error("func.grad: f must return one element, got shape " .. check.shape_str(y)) end
      local g = dle.grad({y}, wrt, {create_graph = dle.is_grad_enabled(), allow_unused = true})
      for i, t in ipairs(wrt) do g[i] = g[i] or dle.zeros_like(t) end
      if many then return g end
      return g[1]
    end)
  end
end

--- vjp(f, ...) -> f(...), vjp_fn: vjp_fn(cotangent, ...) returns the gradients of <cotangents, f>
-- with respect to each argument (in order).
-- @return output, function
function M.vjp(f, ...)
  check.callable(f, "func.vjp", "f")
  local xs = leaves(as_list({...}, "func.vjp", "primals"))
  local outs = table.pack(dle.enable_grad(function() return f(table.unpack(xs)) end))
  local function vjp_fn(...)
    local cts = {...}
    local roots = {}
    for i = 1, outs.n do roots[i] = outs[i] end
    local g = dle.grad(roots, xs, {grad_outputs = cts, retain_graph = true, allow_unused = true})
    for i, x in ipairs(xs) do g[i] = g[i] or dle.zeros_like(x) end
    return table.unpack(g, 1, #xs)
  end
  local plain = {}
  for i = 1, outs.n do plain[i] = outs[i]:detach() end
  return table.unpack(plain, 1, outs.n), vjp_fn
end

--- jvp(f, primals, tangents) -> outputs, output tangents (forward mode; dle.jvp).
-- @return outputs, tangents
function M.jvp(f, primals, tangents) return dle.jvp(f, primals, tangents) end

-- J[i][j] {out_i shape ..., in_j shape ...} of f at xs; create: the result stays differentiable
local function jacobian_rows(f, xs, create)
  return dle.enable_grad(function()
    local ins = {}
    for i, x in ipairs(xs) do ins[i] = x.requires_grad and x or x:detach():requires_grad_(true) end
    local outs = table.pack(f(table.unpack(ins)))
    local J = {}
    for i = 1, outs.n do
      local y = check.tensor(outs[i], "func.jacobian", "f's result " .. i)
      local flat, rows = y:reshape(-1), {}
      for j = 1, #ins do rows[j] = {} end
      for k = 1, flat:numel() do
        local g = dle.grad({flat:narrow(1, k, 1)}, ins,
                           {retain_graph = true, create_graph = create, allow_unused = true})
        for j, x in ipairs(ins) do rows[j][k] = (g[j] or dle.zeros_like(x)):reshape(-1) end
      end
      J[i] = {}
      for j, x in ipairs(ins) do
        local shape = y:shape()
        for _, s in ipairs(x:shape()) do shape[#shape + 1] = s end
        J[i][j] = #rows[j] > 0 and dle.stack(rows[j], 1):reshape(shape)
                  or dle.zeros(shape, {dtype = x:dtype()})
      end
    end
    return J
  end)
end

local function jacobian_columns(f, xs)
  local J = {}
  for j, x in ipairs(xs) do
    local cols = {}
    for k = 1, x:numel() do
      local tans = {}
      for m, z in ipairs(xs) do tans[m] = dle.zeros_like(z) end
      tans[j] = dle.zeros(x:numel(), {dtype = x:dtype()})
      tans[j][k] = 1
      tans[j] = tans[j]:reshape(x:shape())
      local outs, touts = dle.jvp(f, xs, tans)
      if dle.is_tensor(outs) then outs, touts = {outs}, {touts} end
      for i, t in ipairs(touts) do
        cols[i] = cols[i] or {}
        cols[i][k] = t:reshape(-1)
        J[i] = J[i] or {}
        J[i].shape = outs[i]:shape()
      end
    end
    for i, c in ipairs(cols) do
      local shape = J[i].shape
      for _, s in ipairs(x:shape()) do shape[#shape + 1] = s end
      J[i][j] = dle.stack(c, 2):reshape(shape)
    end
  end
  for _, row in ipairs(J) do row.shape = nil end
  return J
end

--- jacobian(f, inputs, opts) -> the Jacobian of f at inputs, shaped {output shape..., input
-- shape...}: a tensor for one input and one output, else J[i][j] (output i, input j; J[j] when f
-- has one output). strategy "reverse-mode" (default) builds it a row per output element,
-- "forward-mode" a column per input element (dle.jvp). vectorize is accepted for torch's
-- signature; the rows or columns are computed one at a time either way. create_graph keeps the
-- result differentiable (reverse mode).
-- @param opts optional {strategy = "reverse-mode"|"forward-mode", vectorize = false, create_graph = false}
-- @return tensor or nested list of tensors
function M.jacobian(f, inputs, opts)
  check.callable(f, "func.jacobian", "f")
  opts = check.options(opts, "func.jacobian", {"strategy", "vectorize", "create_graph"})
  local strategy = opts.strategy or "reverse-mode"
  if strategy ~= "reverse-mode" and strategy ~= "forward-mode" then
    check.error("func.jacobian: strategy must be \"reverse-mode\" or \"forward-mode\", got " .. tostring(strategy))
  end
  local xs, single_in = as_list(inputs, "func.jacobian", "inputs")
  local J = strategy == "forward-mode" and jacobian_columns(f, xs) or jacobian_rows(f, xs, opts.create_graph == true)
  if #J == 1 then
    return single_in and J[1][1] or J[1]
  end
  if single_in then
    for i = 1, #J do J[i] = J[i][1] end
  end
  return J
end

--- hessian(f, inputs) -> the Hessian of the scalar f: {input shape..., input shape...} for one
-- input, else H[i][j]. The Jacobian (reverse mode) of f's gradient.
-- @return tensor or nested list of tensors
function M.hessian(f, inputs)
  check.callable(f, "func.hessian", "f")
  local xs, single = as_list(inputs, "func.hessian", "inputs")
  local argnums = {}
  for i = 1, #xs do argnums[i] = i end
  local g = M.grad(f, {argnums = argnums})
  local J = jacobian_rows(function(...) return table.unpack(g(...)) end, xs, false)
  if single then return J[1][1] end
  return J
end

--- vmap(f, {in_dims = 1, out_dims = 1}) -> a function mapping f over dim in_dims of its tensor
-- arguments (in_dims a number for all, or a list with nil/false for arguments not mapped) and
-- stacking each result along out_dims. Runs f once per batch element (a loop).
-- @return function
function M.vmap(f, opts)
  check.callable(f, "func.vmap", "f")
  opts = check.options(opts, "func.vmap", {"in_dims", "out_dims"})
  local in_dims, out_dims = opts.in_dims or 1, opts.out_dims or 1
  return function(...)
    local args = table.pack(...)
    local dims, size = {}, nil
    for i = 1, args.n do
      local d = type(in_dims) == "table" and in_dims[i] or (type(in_dims) ~= "table" and in_dims or nil)
      if d and dle.is_tensor(args[i]) then
        dims[i] = d
        local s = args[i]:size(d)
        if size and s ~= size then
          check.error(string.format("func.vmap: argument %d has size %d along dim %d, others %d", i, s, d, size))
        end
        size = s
      end
    end
    if not size then check.error("func.vmap: no tensor argument is mapped (in_dims)") end
    local results = {}
    for b = 1, size do
      local a = {}
      for i = 1, args.n do a[i] = dims[i] and args[i]:select(dims[i], b) or args[i] end
      local r = table.pack(f(table.unpack(a, 1, args.n)))
      for k = 1, r.n do
        results[k] = results[k] or {}
        results[k][b] = r[k]
      end
    end
    local outs = {}
    for k, list in ipairs(results) do
      local od = type(out_dims) == "table" and out_dims[k] or out_dims
      outs[k] = dle.stack(list, od)
    end
    return table.unpack(outs)
  end
end

return M
