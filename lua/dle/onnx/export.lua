--- dle.onnx.export: dle.onnx.save (see lua/dle/onnx/init.lua), a traced function written as an
-- ONNX ModelProto.
--
-- The function is traced (dle.graph.trace); each live node becomes ONNX nodes through the op
-- table of dle.onnx.export_ops, parameters and constants become initializers (named as the
-- module's parameters and buffers when a module is given), cond / scan / while_loop nodes become
-- If / Scan / Loop with their subgraphs as GRAPH attributes (values the subgraphs capture are
-- referenced by their outer names, as ONNX's scoping allows). The model is described as plain
-- tables and packed by the native binding (bindings/lua_onnx_save.c: protobuf-c's generated code),
-- into a temporary file renamed over the path. Every op that cannot be written is collected and
-- reported in one error.
--
-- Dynamic axes: a dim named in dynamic_axes is a dim_param of the input; a result's dim is taken
-- as dynamic when an input of its op had a dynamic dim at the same position and size (a permute
-- moves them), and Reshape/Expand then copy that dim from the input (0 / 1) instead of fixing it.
local dle = require("dle")
local core = require("dle.core")
local check = require("dle.check")
local Ops = require("dle.onnx.export_ops")

local M = {}

local ELEM = {float32 = 1, uint8 = 2, int8 = 3, uint16 = 4, int16 = 5, int32 = 6, int64 = 7, bool = 9,
              float16 = 10, float64 = 11, uint32 = 12, uint64 = 13, bfloat16 = 16}

--- The ops of dle's table that export, and those that do not with the reason: two tables
-- name -> true and name -> reason.
function M.exportable()
  local yes, no = {}, {}
  for _, info in ipairs(core.op_table()) do
    if Ops.ops[info.name] then yes[info.name] = true
    else no[info.name] = Ops.not_expressible[info.name] or "no export mapping" end
  end
  for _, c in ipairs({"cond", "while_loop", "scan"}) do yes[c] = true end
  return yes, no
end

-- ---------------------------------------------------------------- the emitter: one ONNX graph

local E = {}
E.__index = E

local function emitter(shared, sub)
  return setmetatable({shared = shared, opset = shared.opset, sub = sub, nodes = {}, initializers = {},
                       scalars = {}, leaf_names = {}}, E)
end

function E:fresh(prefix)
  local s = self.shared
  s.count = s.count + 1
  return (prefix or "v") .. "_" .. s.count
end

function E:elem_type(dtype)
  local t = ELEM[dtype]
  if not t then self.shared.bad[#self.shared.bad + 1] = "dtype " .. dtype .. " (no ONNX type)"; return 1 end
  return t
end

-- An attribute list (sorted by name) from a table name -> Lua value.
local function attributes(a)
  local names, out = {}, {}
  for k in pairs(a or {}) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do
    local v, ty = a[k], nil
    if math.type(v) == "integer" then ty = "INT"
    elseif type(v) == "number" then ty = "FLOAT"
    elseif type(v) == "string" then ty = "STRING"
    elseif type(v) == "table" and v.graph then ty, v = "GRAPH", v.graph
    elseif type(v) == "table" and v.tensor then ty, v = "TENSOR", v.tensor
    elseif type(v) == "table" then
      ty = "INTS"
      for _, x in ipairs(v) do
        if math.type(x) ~= "integer" then ty = "FLOATS" end
      end
    end
    out[#out + 1] = {name = k, type = ty, value = v}
  end
  return out
end

--- e:node(op_type, inputs, attrs, nout) -> the names of its nout (default 1) results.
function E:node(op_type, inputs, attrs, nout)
  local outs = {}
  for k = 1, nout or 1 do outs[k] = self:fresh(op_type) end
  self.nodes[#self.nodes + 1] = {op_type = op_type, name = self:fresh("n_" .. op_type), domain = "",
                                 inputs = inputs, outputs = outs, attributes = attributes(attrs)}
  return table.unpack(outs)
end

--- e:const(t[, name]) -> the name of a constant holding tensor t (an initializer of the main
-- graph; a Constant node inside a subgraph).
function E:const(t, name)
  t = t:detach():contiguous()
  if t:device() ~= "cpu" then t = t:to("cpu") end
  if self.sub then
    return self:node("Constant", {}, {value = {tensor = t}})
  end
  name = name or self:fresh("const")
  self.initializers[#self.initializers + 1] = {name = name, tensor = t}
  return name
end

function E:scalar(v, dtype)
  local key = tostring(v) .. ":" .. dtype
  if not self.scalars[key] then self.scalars[key] = self:const(dle.full({}, v, {dtype = dtype})) end
  return self.scalars[key]
end

--- e:ints(list) -> a 1-d int64 constant; e:ints(number) -> a 0-d one.
function E:ints(v)
  if type(v) == "number" then return self:const(dle.full({}, v, {dtype = "int64"})) end
  return self:const(dle.tensor(v, {dtype = "int64"}):reshape({#v}))
end

--- e:unsupported(n, reason): notes that node n cannot be written; returns a placeholder name.
function E:unsupported(n, reason)
  local bad = self.shared.bad
  bad[#bad + 1] = n.op .. " (" .. reason .. ")"
  return self:fresh("unsupported")
end

--- A result that has no ONNX counterpart: an error only when something uses it.
function E:unsupported_result(n, k, reason)
  return {unsupported = ("result %d of %s (%s)"):format(k, n.op, reason)}
end

--- n's shape as a Reshape/Expand argument: dynamic dims that input u has at the same place are
-- `keep` (0: Reshape copies u's dim; 1: Expand keeps it).
function E:shape_arg(n, u, keep)
  local s, dyn = n:shape(), self.shared.dyn
  for d in pairs(dyn[n] or {}) do
    if dyn[u] and dyn[u][d] and u:shape()[d] == s[d] then s[d] = keep or 0 end
  end
  return s
end

-- The dynamic dims of n from its inputs' (see the header).
local function propagate_dyn(dyn, n)
  local out, shape = {}, n:shape()
  for _, u in ipairs(n.inputs) do
    local du = dyn[u]
    if du then
      local us = u:shape()
      if n.op == "permute" then
        for d, p in ipairs(n.attrs.ints) do
          if du[p + 1] then out[d] = du[p + 1] end
        end
      else
        for d, sym in pairs(du) do
          if shape[d] == us[d] then out[d] = sym end
        end
      end
    end
  end
  if next(out) then dyn[n] = out end
end

local function value_info(name, dtype, shape, dyn, e)
  local s = {}
  for d, v in ipairs(shape) do s[d] = (dyn and dyn[d]) or v end
  return {name = name, elem_type = e:elem_type(dtype), shape = s}
end

-- ---------------------------------------------------------------- graphs

local emit_graph

-- A subgraph of e (a GRAPH attribute): g's first #inputs inputs become the subgraph's inputs
-- (after `pre`, value infos of leading inputs such as Loop's counter), the rest of g's inputs map
-- to outer names through env; returns the graph table. extra(sub, outs) may add outputs first.
local function subgraph(e, g, name, formal, env, pre, extra)
  local sub = emitter(e.shared, true)
  local inputs = {}
  for _, vi in ipairs(pre or {}) do inputs[#inputs + 1] = vi end
  for k = 1, formal do
    local n = g.inputs[k]
    local nm = sub:fresh("in")
    env[n] = nm
    inputs[#inputs + 1] = value_info(nm, n:dtype(), n:shape(), nil, sub)
  end
  local outs = emit_graph(sub, g, env)
  local first = extra and extra(sub, outs) or {}
  local outputs = {}
  for _, vi in ipairs(first) do outputs[#outputs + 1] = vi end
  for k, o in ipairs(g.outputs) do
    local nm = sub:node("Identity", {outs[k]})
    outputs[#outputs + 1] = value_info(nm, o:dtype(), o:shape(), nil, sub)
  end
  return {name = e:fresh(name), nodes = sub.nodes, initializers = {}, inputs = inputs, outputs = outputs,
          value_info = {}}
end

-- env for subgraph g of a control node whose inputs from position `from` on are g's inputs
-- from position `first` on (the captured values and, for If, the operands).
local function outer_env(g, x, first, from)
  local env = {}
  for k = first, #g.inputs do env[g.inputs[k]] = x[from + k - first] end
  return env
end

local function as_bool(e, name, dtype)
  if dtype == "bool" then return name end
  return e:node("Cast", {name}, {to = ELEM.bool})
end

local control = {}

control.cond = function(e, n, x)
  local branches = {}
  for k, g in ipairs(n.subgraphs) do
    branches[k] = subgraph(e, g, k == 1 and "then" or "else", 0, outer_env(g, x, 1, 2))
  end
  return e:node("If", {as_bool(e, x[1], n.inputs[1]:dtype())},
                {then_branch = {graph = branches[1]}, else_branch = {graph = branches[2]}},
                #n.subgraphs[1].outputs)
end

control.scan = function(e, n, x)
  local a = n.attrs
  local g = n.subgraphs[1]
  local formal = a.ncarry + a.nxs
  local body = subgraph(e, g, "scan_body", formal, outer_env(g, x, formal + 1, formal + 1))
  return e:node("Scan", table.move(x, 1, formal, 1, {}), {num_scan_inputs = a.nxs, body = {graph = body}},
                #g.outputs)
end

control.while_loop = function(e, n, x)
  local count = n.attrs.n
  local gc, gb = n.subgraphs[1], n.subgraphs[2]
  -- the first test runs in the enclosing graph; the body tests its new values
  local cenv = outer_env(gc, x, 1, 1)
  local c0 = as_bool(e, emit_graph(e, gc, cenv)[1], gc.outputs[1]:dtype())
  local pre = {{name = e:fresh("iter"), elem_type = ELEM.int64, shape = {}},
               {name = e:fresh("cond_in"), elem_type = ELEM.bool, shape = {}}}
  local body = subgraph(e, gb, "loop_body", count, outer_env(gb, x, count + 1, count + 1), pre,
    function(sub, outs)
      local env = outer_env(gc, x, count + 1, count + 1)
      for k = 1, count do env[gc.inputs[k]] = outs[k] end
      local c = as_bool(sub, emit_graph(sub, gc, env)[1], gc.outputs[1]:dtype())
      return {{name = sub:node("Identity", {c}), elem_type = ELEM.bool, shape = {}}}
    end)
  local ins = {"", c0}
  for k = 1, count do ins[#ins + 1] = x[k] end
  return e:node("Loop", ins, {body = {graph = body}}, count)
end

-- Writes g's live nodes into e; env maps nodes to names already known (inputs). Returns the
-- names of g's outputs.
emit_graph = function(e, g, env)
  local shared = e.shared
  local name, outs_of = env, {}
  for _, n in ipairs(g:nodes()) do
    if name[n] then goto continue end
    if n.op == "input" then
      check.error(("dle.onnx.save: input %d of a subgraph has no value"):format(n.attrs.index))
    elseif n.op == "const" or n.op == "param" then
      local t = n:value()
      local key = core._tensor_id(t)
      if not e.leaf_names[key] then e.leaf_names[key] = e:const(t, shared.names[key]) end
      name[n] = e.leaf_names[key]
    elseif n.op == "output" then
      local r = outs_of[n.inputs[1]]
      local v = r and r[n.attrs.index]
      if type(v) == "table" then name[n] = e:unsupported(n.inputs[1], v.unsupported:match("%((.*)%)$"))
      elseif v == nil then name[n] = e:unsupported(n.inputs[1], "result " .. n.attrs.index .. " is not exported")
      else name[n] = v end
      local dp = shared.dyn[n.inputs[1]]
      if dp then propagate_dyn(shared.dyn, n) end
    else
      local x = {}
      for k, u in ipairs(n.inputs) do x[k] = name[u] end
      propagate_dyn(shared.dyn, n)
      local fn = control[n.op] or Ops.ops[n.op]
      local r
      if n.inplace then
        r = {e:unsupported(n, "an in-place write")}
      elseif fn then
        r = table.pack(fn(e, n, x))
      else
        r = {e:unsupported(n, Ops.not_expressible[n.op] or "no export mapping")}
      end
      outs_of[n] = r
      name[n] = r[1]
    end
    ::continue::
  end
  local outs = {}
  for k, o in ipairs(g.outputs) do outs[k] = name[o] end
  return outs
end

-- ---------------------------------------------------------------- dle.onnx.save

local IR = {[13] = 7, [14] = 7, [15] = 8, [16] = 8, [17] = 8}

local function names_list(v, fname, what, n, default)
  if v == nil then
    local out = {}
    for i = 1, n do out[i] = default .. (n > 1 and tostring(i) or "") end
    return out
  end
  if type(v) ~= "table" or #v ~= n then
    check.error(("%s: %s must be a list of %d names, got %s"):format(fname, what, n,
      type(v) == "table" and (#v .. " names") or check.typename(v)))
  end
  for i = 1, n do
    if type(v[i]) ~= "string" or v[i] == "" then
      check.error(("%s: %s[%d] must be a non-empty string"):format(fname, what, i))
    end
  end
  return v
end

function M.save(path, fn, example_inputs, opts)
  local fname = "dle.onnx.save"
  check.string(path, fname, "argument #1 (path)")
  opts = check.options(opts, fname, {"opset", "input_names", "output_names", "dynamic_axes"})
  local opset = opts.opset or 17
  if math.type(opset) ~= "integer" or not IR[opset] then
    check.error(("%s: opset must be an integer from 13 to 17, got %s"):format(fname, tostring(opset)))
  end
  if type(example_inputs) ~= "table" or dle.is_tensor(example_inputs) then
    check.error(fname .. ": example_inputs must be a list of tensors, got " .. check.typename(example_inputs))
  end
  for i, t in ipairs(example_inputs) do
    if not dle.is_tensor(t) then
      check.error(("%s: example_inputs[%d] must be a tensor, got %s"):format(fname, i, check.typename(t)))
    end
  end
  local names = {}
  local f = fn
  if type(fn) == "table" and fn.named_parameters then
    for _, list in ipairs({fn:named_parameters(), fn:named_buffers()}) do
      for _, entry in ipairs(list) do names[core._tensor_id(entry[2])] = entry[1] end
    end
    f = function(...) return fn(...) end
  else
    check.callable(fn, fname, "argument #2 (fn_or_module)")
  end
  -- traced without recording gradients: a model's inference path, as ONNX holds no backward (and
  -- modules such as nn.LSTM take their plain-op path rather than a custom autograd Function)
  local g = dle.no_grad(dle.graph.trace, f, table.unpack(example_inputs))
  if g.unsafe then check.error(fname .. ": the function cannot be traced faithfully: " .. g.unsafe) end
  if #g.outputs == 0 then check.error(fname .. ": the function returns no tensor") end

  local in_names = names_list(opts.input_names, fname, "input_names", #g.inputs, "input")
  local out_names = names_list(opts.output_names, fname, "output_names", #g.outputs, "output")
  local shared = {opset = opset, count = 0, bad = {}, dyn = {}, names = {}}
  for t, nm in pairs(names) do shared.names[t] = nm end
  local dynamic = opts.dynamic_axes or {}
  local known = {}
  for _, nm in ipairs(in_names) do known[nm] = true end
  for _, nm in ipairs(out_names) do known[nm] = true end
  for k in pairs(dynamic) do
    if not known[k] then
      check.error(("%s: dynamic_axes names '%s', which is no input or output"):format(fname, tostring(k)))
    end
  end

  local e = emitter(shared, false)
  local env, inputs = {}, {}
  for i, n in ipairs(g.inputs) do
    env[n] = in_names[i]
    local dims = dynamic[in_names[i]]
    if dims then
      for d in pairs(dims) do
        if math.type(d) ~= "integer" or d < 1 or d > #n:shape() then
          check.error(("%s: dynamic_axes of '%s': dim %s out of range for shape {%s}"):format(fname, in_names[i],
            tostring(d), table.concat(n:shape(), ",")))
        end
      end
      shared.dyn[n] = dims
    end
    inputs[i] = value_info(in_names[i], n:dtype(), n:shape(), dims, e)
  end
  local outs = emit_graph(e, g, env)
  if #shared.bad > 0 then
    local seen, list = {}, {}
    for _, b in ipairs(shared.bad) do
      if not seen[b] then seen[b] = true; list[#list + 1] = b end
    end
    check.error(("%s: %d op(s) cannot be expressed in ONNX opset %d: %s"):format(fname, #list, opset,
      table.concat(list, "; ")))
  end
  local outputs = {}
  for k, o in ipairs(g.outputs) do
    e.nodes[#e.nodes + 1] = {op_type = "Identity", name = e:fresh("n_output"), domain = "", inputs = {outs[k]},
                             outputs = {out_names[k]}, attributes = {}}
    outputs[k] = value_info(out_names[k], o:dtype(), o:shape(), dynamic[out_names[k]] or shared.dyn[o], e)
  end
  local model = {ir_version = IR[opset], producer_name = "dle", producer_version = "0",
                 opset_import = {{domain = "", version = opset}},
                 graph = {name = "dle", nodes = e.nodes, initializers = e.initializers, inputs = inputs,
                          outputs = outputs, value_info = {}}}
  local tmp = path .. ".tmp" .. tostring(os.time()) .. math.random(1 << 30)
  local ok, err = pcall(core._onnx_save, tmp, model)
  if not ok then
    os.remove(tmp)
    check.error(check.strip_where(tostring(err)))
  end
  local renamed, rerr = os.rename(tmp, path)
  if not renamed then
    os.remove(tmp)
    check.error(("%s: cannot rename the written file to '%s': %s"):format(fname, path, tostring(rerr)))
  end
  return path
end

return M
