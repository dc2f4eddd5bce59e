--- dle.onnx.ops_control: ONNX's If and Scan (opset 9+) as dle.cond and dle.scan, so an imported
-- model's control flow traces and compiles as one node each. The bodies are the node's GRAPH
-- attributes, run by ctx.run(graph, inputs) (dle.onnx: a subgraph sees the enclosing scope's
-- values by name). Loop is not mapped: its scan outputs grow with a trip count known only at run
-- time, which dle.while_loop's fixed-shape values cannot hold.
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

return C
