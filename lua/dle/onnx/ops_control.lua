--- dle.onnx.ops_control: ONNX's If and Scan (opset 9+) as dle.cond and dle.scan, so an imported
-- model's control flow traces and compiles as one node each, and Loop as dle.while_loop when it
-- has no scan outputs. The bodies are the node's GRAPH attributes, run by ctx.run(graph, inputs)
-- (dle.onnx: a subgraph sees the enclosing scope's values by name). A Loop with scan outputs is
-- refused: they grow with a trip count known only at run time, which dle.while_loop's
-- fixed-shape values cannot hold.
local dle = require "dle"
local U = require "dle.onnx.util"

local C = {}

local function slice(list, i, j) return table.move(list, i, j, 1, {}) end

-- If: then_branch / else_branch take no inputs; cond is a one-element bool tensor.
C.If = function(ctx, cond)
  local a = ctx.a
  local function branch(g) return function() return table.unpack(ctx.run(g, {})) end end
  return dle.cond(cond:reshape({}), branch(a.then_branch), branch(a.else_branch))
end

-- Scan (opset 9+): the body takes the state variables then one slice of each scan input and
-- returns the new states then one slice of each scan output.
C.Scan = function(ctx, ...)
  local a = ctx.a
  if ctx.opset < 9 then U.fail(ctx, "opset 8's batched Scan (with sequence_lens) is not supported") end
  for _, attr in ipairs({"scan_input_axes", "scan_input_directions", "scan_output_axes", "scan_output_directions"}) do
    for _, v in ipairs(a[attr] or {}) do
      if v ~= 0 then U.fail(ctx, attr .. " other than 0 is not supported, got " .. tostring(v)) end
    end
  end
  local args = table.pack(...)
  local nscan = a.num_scan_inputs
  local nstate = args.n - nscan
  if nstate < 1 then U.fail(ctx, "a Scan without state variables is not supported") end
  local body = a.body
  local carry, ys = dle.scan(function(c, x)
    local outs = ctx.run(body, table.move(x, 1, #x, #c + 1, table.move(c, 1, #c, 1, {})))
    return slice(outs, 1, nstate), slice(outs, nstate + 1, #outs)
  end, slice(args, 1, nstate), slice(args, nstate + 1, args.n))
  return table.unpack(table.move(ys, 1, #ys, nstate + 1, carry))
end

-- Loop(M, cond, v...): while iteration < M and cond, (cond, v...) = body(iteration, cond, v...).
-- The loop state of the dle.while_loop is (iteration, trip count, cond, v...); an omitted M or
-- cond is "no limit" / true.
C.Loop = function(ctx, m, cond, ...)
  local carried = table.pack(...)
  local body = ctx.a.body
  local nscan = #body.outputs - 1 - carried.n
  if nscan > 0 then
    U.fail(ctx, ("%d scan outputs (their length is known only at run time) are not supported"):format(nscan))
  end
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
