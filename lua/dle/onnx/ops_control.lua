--- dle.onnx.ops_control: ONNX's If and Scan (opset 8's batched form too) as dle.cond and dle.scan, so an imported
-- model's control flow traces and compiles as one node each, and Loop as dle.while_loop. The
-- bodies are the node's GRAPH attributes, run by ctx.run(graph, inputs) (dle.onnx: a subgraph
-- sees the enclosing scope's values by name). What dle's graph ops cannot hold runs as Lua
-- control flow instead, reading the condition and trip count: an If whose branches give
-- sequences or optionals (dle.cond's results are tensors), a Loop carrying them or with scan
-- outputs (those grow with a trip count known only at run time, which dle.while_loop's
-- fixed-shape values cannot hold).
local dle = require("dle")
local U = require("dle.onnx.util")
local V = require("dle.onnx.values")

local C = {}

local function slice(list, i, j) return table.move(list, i, j, 1, {}) end

-- A one-element condition tensor read as a Lua boolean.
local function truth(ctx, c, what)
  if not dle.is_tensor(c) or c:numel() ~= 1 then
    U.fail(ctx, ("%s must be a one-element tensor, got %s"):format(what, V.describe(c)))
  end
  local v = c:reshape(-1):totable()[1]
  return v == true or (type(v) == "number" and v ~= 0)
end

-- Whether a graph's outputs (after the first `skip`) include a sequence or an optional.
local function gives_non_tensors(g, skip)
  for i = skip + 1, #g.outputs do
    local kind = g.outputs[i].type.kind
    if kind == "sequence" or kind == "optional" then return true end
  end
  return false
end

-- If: then_branch / else_branch take no inputs; cond is a one-element bool tensor.
C.If = function(ctx, cond)
  local a = ctx.a
  if gives_non_tensors(a.then_branch, 0) or gives_non_tensors(a.else_branch, 0) then
    return table.unpack(ctx.run(truth(ctx, cond, "cond") and a.then_branch or a.else_branch, {}))
  end
  local function branch(g) return function() return table.unpack(ctx.run(g, {})) end end
  return dle.cond(cond:reshape({}), branch(a.then_branch), branch(a.else_branch))
end

-- One dle.scan of the Scan node's body over `xs` (each sliced along dim 1): the body takes the
-- states then one slice of each scan input and returns the new states then one slice of each
-- scan output. Returns the final states and the stacked scan outputs (lists).
local function scan_body(ctx, states, xs)
  local nstate = #states
  return dle.scan(function(c, x)
    local outs = ctx.run(ctx.a.body, table.move(x, 1, #x, #c + 1, table.move(c, 1, #c, 1, {})))
    return slice(outs, 1, nstate), slice(outs, nstate + 1, #outs)
  end, states, xs)
end

-- Scan (opset 8): sequence_lens (optional, int64 {batch}), then the states {batch, ...} and the
-- scan inputs {batch, steps, ...}; the body sees one batch row. Each row runs as its own dle.scan
-- over its first sequence_lens[b] steps (reversed for an input whose `directions` flag is 1);
-- a row's scan outputs past its length are zeros (as onnxruntime fills them), and a row of
-- length 0 keeps its initial states.
local function scan8(ctx, lens, args)
  local a = ctx.a
  local nscan = a.num_scan_inputs
  local nstate = args.n - nscan
  if nscan < 1 then U.fail(ctx, "Scan needs at least one scan input, num_scan_inputs is " .. tostring(nscan)) end
  local dirs = a.directions or {}
  local batch, steps = nil, nil
  for i = 1, args.n do
    local t, want = args[i], i > nstate and 2 or 1
    if not dle.is_tensor(t) or t:dim() < want or (batch and t:size(1) ~= batch)
        or (i > nstate and steps and t:size(2) ~= steps) then
      U.fail(ctx, ("input %d must be a tensor with a batch dim%s matching the others, got %s")
        :format(i + 1, i > nstate and " and a sequence dim" or "", V.describe(t)))
    end
    batch = t:size(1)
    if i > nstate then steps = t:size(2) end
  end
  local lengths = {}
  for b = 1, batch do lengths[b] = steps end
  if lens then
    if not dle.is_tensor(lens) or lens:numel() ~= batch then
      U.fail(ctx, ("sequence_lens must have %d elements (the batch), got %s"):format(batch, V.describe(lens)))
    end
    lengths = lens:reshape(-1):totable()
    for b, n in ipairs(lengths) do
      if n < 0 or n > steps then
        U.fail(ctx, ("sequence_lens[%d] = %d is outside [0, %d]"):format(b, n, steps))
      end
    end
  end
  local finals, outs, ran = {}, {}, nil
  for b = 1, batch do
    local states = {}
    for i = 1, nstate do states[i] = args[i]:select(1, b) end
    local n = lengths[b]
    if n > 0 then
      local xs = {}
      for k = 1, nscan do
        local x = args[nstate + k]:select(1, b):narrow(1, 1, n)
        xs[k] = dirs[k] == 1 and x:flip(1) or x
      end
      local ys
      states, ys = scan_body(ctx, states, xs)
      for k, y in ipairs(ys) do
        if n < steps then
          local pad = y:shape()
          pad[1] = steps - n
          y = dle.cat({y, dle.zeros(pad, {dtype = y:dtype(), device = y:device()})}, 1)
        end
        ys[k] = y
      end
      outs[b], ran = ys, ys
    end
    finals[b] = states
  end
  if not ran then U.fail(ctx, "every sequence_lens is 0, so the scan outputs' shapes are unknown") end
  local results = {}
  for i = 1, nstate + #ran do
    local rows = {}
    for b = 1, batch do
      if i <= nstate then rows[b] = finals[b][i]
      else rows[b] = outs[b] and outs[b][i - nstate] or dle.zeros_like(ran[i - nstate]) end
    end
    results[i] = dle.stack(rows, 1)
  end
  return table.unpack(results, 1, nstate + #ran)
end

-- Scan (opset 9+): the states, then the scan inputs sliced along dim 1 (axes and directions 0).
C.Scan = function(ctx, ...)
  local a = ctx.a
  if ctx.opset < 9 then return scan8(ctx, ..., table.pack(select(2, ...))) end
  for _, attr in ipairs({"scan_input_axes", "scan_input_directions", "scan_output_axes", "scan_output_directions"}) do
    for _, v in ipairs(a[attr] or {}) do
      if v ~= 0 then U.fail(ctx, attr .. " other than 0 is not supported, got " .. tostring(v)) end
    end
  end
  local args = table.pack(...)
  local nstate = args.n - a.num_scan_inputs
  if nstate < 1 then U.fail(ctx, "a Scan without state variables is not supported") end
  local carry, ys = scan_body(ctx, slice(args, 1, nstate), slice(args, nstate + 1, args.n))
  return table.unpack(table.move(ys, 1, #ys, nstate + 1, carry))
end

-- Loop as Lua control flow: the scan outputs of the iterations stacked along a new first dim
-- (empty ones when no iteration ran take the body's declared element type and shape).
local function lua_loop(ctx, m, cond, carried, nscan)
  local body = ctx.a.body
  local trip = m and math.tointeger(U.scalar(m:reshape(-1))) or math.maxinteger
  local c = cond and cond:reshape({}):to("bool") or dle.tensor(true, {dtype = "bool"})
  local state = table.move(carried, 1, carried.n, 1, {})
  local scans = {}
  for k = 1, nscan do scans[k] = {} end
  local i = 0
  while i < trip and truth(ctx, c, "the condition") do
    local r = ctx.run(body, {dle.tensor(i, {dtype = "int64"}), c, table.unpack(state, 1, carried.n)})
    c = r[1]
    for k = 1, carried.n do state[k] = r[1 + k] end
    for k = 1, nscan do
      local y = r[1 + carried.n + k]
      if not dle.is_tensor(y) then U.fail(ctx, ("scan output %d must be a tensor, got %s"):format(k, V.describe(y))) end
      scans[k][i + 1] = y
    end
    i = i + 1
  end
  for k = 1, nscan do
    if i > 0 then
      state[carried.n + k] = dle.stack(scans[k], 1)
    else
      local ty = body.outputs[1 + carried.n + k].type
      local shape = {0}
      for d, n in ipairs(ty.shape or {false}) do   -- no shape at all: unknown too
        if type(n) ~= "number" then
          U.fail(ctx, ("scan output %d has an unknown shape and no iteration ran"):format(k))
        end
        shape[d + 1] = n
      end
      state[carried.n + k] = dle.zeros(shape, {dtype = U.dtype(ctx, ty.elem_type)})
    end
  end
  return table.unpack(state, 1, carried.n + nscan)
end

-- Loop(M, cond, v...): while iteration < M and cond, (cond, v...) = body(iteration, cond, v...).
-- The loop state of the dle.while_loop is (iteration, trip count, cond, v...); an omitted M or
-- cond is "no limit" / true.
C.Loop = function(ctx, m, cond, ...)
  local carried = table.pack(...)
  local body = ctx.a.body
  local nscan = #body.outputs - 1 - carried.n
  local all_tensors = not gives_non_tensors(body, 1)
  for k = 1, carried.n do all_tensors = all_tensors and dle.is_tensor(carried[k]) end
  if nscan > 0 or not all_tensors then return lua_loop(ctx, m, cond, carried, nscan) end
  local trip = m and m:reshape({}):to("int64") or dle.tensor(math.maxinteger, {dtype = "int64"})
  local c0 = cond and cond:reshape({}):to("bool") or dle.tensor(true, {dtype = "bool"})
  local init = {dle.tensor(0, {dtype = "int64"}), trip, c0}
  for k = 1, carried.n do init[3 + k] = carried[k] end
  local outs = dle.while_loop(function(i, n, c) return i:lt(n):logical_and(c) end, function(i, n, c, ...)
    local r = ctx.run(body, {i, c, ...})
    r[1] = r[1]:reshape({}):to("bool")
    return i + 1, n, table.unpack(r, 1, 1 + carried.n)
  end, init)
  return table.unpack(outs, 4, 3 + carried.n)
end

return C
