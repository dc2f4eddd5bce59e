--- dle.onnx: ONNX models as dle modules.
--
--   local m = dle.onnx.load("model.onnx")           -- or the file's bytes: dle.onnx.load(s)
--   local y = m(x)                                   -- inputs in graph order, or m{input = x}
--   print(m.input_names[1], m.output_names[1], m.opset)
--
-- The file is decoded by the native binding (bindings/lua_onnx.c: protobuf-c) into plain tables;
-- the model's forward runs the nodes in order with dle's public ops (the mapping tables of
-- dle.onnx.ops_*, keyed by op_type), so an imported model traces, compiles, profiles and trains
-- like any module. Float initializers are its parameters (named as in the file), other
-- initializers constants. Ops without a mapping are all listed in one error at load time.
-- Sequence-typed inputs and outputs are Lua lists of tensors, optional ones a value or nil
-- (dle.onnx.values).
local dle = require("dle")
local check = require("dle.check")
local Module = require("dle.nn.module")
local U = require("dle.onnx.util")
local V = require("dle.onnx.values")

local onnx = {}

--- The op mapping of the default domain: op_type -> fn(ctx, inputs...) -> outputs..., merged
-- from the files by kind.
onnx.ops = {}
for _, kind in ipairs({"elementwise", "reduce", "shape", "nn", "resize", "rnn", "quant", "control", "sequence"}) do
  for name, fn in pairs(require("dle.onnx.ops_" .. kind)) do onnx.ops[name] = fn end
end
--- The op mappings by domain ("" and "ai.onnx" are the default one).
onnx.domains = {[""] = onnx.ops, ["ai.onnx"] = onnx.ops,
                ["ai.onnx.preview.training"] = require("dle.onnx.ops_training")}

-- The mapping of node n, or nil.
local function op_of(n)
  local ops = onnx.domains[n.domain]
  return ops and ops[n.op_type]
end

--- ONNX operators (default domain, opsets 7-17) that dle's public ops cannot express exactly
-- today: a model using them fails to load naming them; each needs a real dle op first.
onnx.missing = {
  "BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor",
  "MaxRoiPool",
  "Multinomial", "NonMaxSuppression",
  "RoiAlign",
  "StringNormalizer", "TfIdfVectorizer", "STFT", "MelWeightMatrix",
  "LpPool", "GlobalLpPool", "CenterCropPad", "Col2Im",
}

local Model = Module:extend("OnnxModel")

-- The module field of initializer `name`: its own name unless that would hide a method or an
-- internal field of the module.
local function field_name(name)
  if name:sub(1, 1) == "_" or Model[name] ~= nil or name == "input_names" or name == "output_names"
      or name == "opset" then
    return "onnx:" .. name
  end
  return name
end

-- Calls fn on each subgraph among node n's attributes (the bodies of If, Loop, Scan).
local function each_subgraph(n, fn)
  for _, attr in pairs(n.attributes) do
    if attr.type == "GRAPH" then fn(attr.value) end
  end
end

-- The nodes without a mapping in graph and in the subgraphs of its nodes' attributes, as labels.
local function unsupported(graph, bad)
  for i, n in ipairs(graph.nodes) do
    if not op_of(n) then
      local label = n.domain ~= "" and n.domain .. "." .. n.op_type or n.op_type
      bad[#bad + 1] = ("%s (node '%s')"):format(label, n.name ~= "" and n.name or "#" .. i)
    end
    each_subgraph(n, function(sub) unsupported(sub, bad) end)
  end
  return bad
end

-- Every node's mapping, or one error listing all the nodes whose op has none.
local function check_ops(graph, opset, what)
  local bad = unsupported(graph, {})
  if #bad > 0 then
    check.error(("%s: unsupported ONNX ops at opset %d: %s"):format(what, opset, table.concat(bad, ", ")))
  end
  -- maps and sparse tensors have no dle counterpart (sequences and optionals: dle.onnx.values)
  for _, list in ipairs({graph.inputs, graph.outputs}) do
    for _, v in ipairs(list) do
      local kind = v.type.kind
      if kind ~= "tensor" and kind ~= "sequence" and kind ~= "optional" then
        check.error(("%s: unsupported value type %s of '%s' (tensors, sequences and optionals are)")
                    :format(what, kind, v.name))
      end
    end
  end
end

-- The steps of a graph, made once: per node its mapping and a context holding its attributes
-- (values only) and the opset; has_graph when a body of it is a subgraph (If, Scan).
local function steps_of(g, opset)
  if g._steps then return g._steps end
  local steps = {}
  for i, n in ipairs(g.nodes) do
    local a, has_graph = {}, false
    for k, attr in pairs(n.attributes) do
      a[k] = attr.value
      has_graph = has_graph or attr.type == "GRAPH"
    end
    if n.name == "" then n.name = "#" .. i end
    steps[i] = {fn = op_of(n), ctx = {a = a, opset = opset, node = n}, has_graph = has_graph}
  end
  g._steps = steps
  -- the subgraphs' steps too, now: a first forward under dle.compile must not change the model
  for _, n in ipairs(g.nodes) do
    each_subgraph(n, function(sub) steps_of(sub, opset) end)
  end
  return steps
end

-- The graph inputs of a call: positional values, or one table keyed by input name (a tensor; a
-- list of tensors for a sequence; a tensor, a list or nil for an optional).
local function bind_inputs(self, env, ...)
  local args = table.pack(...)
  local names = self.input_names
  -- one table of names (not a list: that is a sequence given positionally)
  local t1 = args[1]
  if args.n == 1 and type(t1) == "table" and not dle.is_tensor(t1) and t1[1] == nil
      and (#names == 0 or next(t1) ~= nil) then
    local t = args[1]
    local known = {}
    for i, name in ipairs(names) do args[i] = t[name]; known[name] = true end
    for k in pairs(t) do
      if not known[k] then
        check.error(("%s: unknown input '%s' (inputs: %s)"):format(self._what, tostring(k), table.concat(names, ", ")))
      end
    end
    args.n = #names
  end
  if args.n ~= #names then
    check.error(("%s: expected %d inputs (%s), got %d"):format(self._what, #names, table.concat(names, ", "), args.n))
  end
  for i, name in ipairs(names) do
    local ty = self._input_types[i]
    local x, err = V.from_user(args[i], ty)
    if x == nil then check.error(("%s: input '%s' %s"):format(self._what, name, err)) end
    if ty.kind == "tensor" and ty.shape and #ty.shape ~= x:dim() then
      check.error(("%s: input '%s' must have %d dims, got shape %s"):format(self._what, name, #ty.shape,
                                                                         check.shape_str(x)))
    end
    env[name] = x
  end
end

function Model:init(m, what)
  local g = m.graph
  self._graph = g
  self.opset = m.opset_import[""] or m.opset_import["ai.onnx"] or 1
  self._const = {}        -- name -> tensor: the non-float initializers
  self._param_field = {}  -- initializer name -> module field of its parameter
  for _, init in ipairs(g.initializers) do
    local t = init.tensor
    -- small initializers' values are read into Lua now: ops that take shapes, axes or scales from
    -- them then need no read inside a traced forward (which would make the trace unsafe)
    if t:numel() <= 64 then U.remember(t, t:reshape(-1):totable()) end
    if t:is_floating_point() then
      local field = field_name(init.name)
      self:register_parameter(field, t:requires_grad_(true))
      self._param_field[init.name] = field
    else
      self._const[init.name] = t
    end
  end
  local is_init = {}
  for _, init in ipairs(g.initializers) do is_init[init.name] = true end
  self.input_names, self._input_types = {}, {}
  for _, v in ipairs(g.inputs) do
    if not is_init[v.name] then
      self.input_names[#self.input_names + 1] = v.name
      self._input_types[#self._input_types + 1] = v.type
    end
  end
  self.output_names, self._output_types = {}, {}
  for i, v in ipairs(g.outputs) do self.output_names[i], self._output_types[i] = v.name, v.type end
  self._what = what:gsub("^dle%.onnx%.load: ", "dle.onnx model ")
  steps_of(g, self.opset)
end

-- Runs g's nodes in order over env (name -> tensor; a subgraph's env reads its enclosing
-- scope's through __index); a node with a subgraph gets ctx.run(subgraph, inputs) -> outputs.
local function run_nodes(self, g, env)
  for _, step in ipairs(steps_of(g, self.opset)) do
    local n = step.ctx.node
    local ins, k = {}, 0
    for i, name in ipairs(n.inputs) do
      if name ~= "" then
        local v = env[name]
        if v == nil then
          check.error(("%s: node '%s' (%s): input '%s' is not defined"):format(self._what, n.name, n.op_type, name))
        end
        ins[i] = v
      end
      k = i
    end
    local ctx = step.ctx
    if step.has_graph then
      -- a context of this call's own: the model's tables stay as they are (compile's guards)
      ctx = setmetatable({}, {__index = step.ctx})
      ctx.run = function(sub, inputs)
        local inner = setmetatable({}, {__index = env})
        for _, init in ipairs(sub.initializers) do inner[init.name] = init.tensor end
        for i, v in ipairs(sub.inputs) do inner[v.name] = inputs[i] end
        run_nodes(self, sub, inner)
        local outs = {}
        for i, v in ipairs(sub.outputs) do outs[i] = inner[v.name] end
        return outs
      end
    end
    local outs = table.pack(pcall(step.fn, ctx, table.unpack(ins, 1, k)))
    if not outs[1] then
      -- an op's own error ("mul: shapes ...") gets the node it happened in
      local msg = check.strip_where(tostring(outs[2]))
      if not msg:find("^dle%.onnx: node") then msg = ("node '%s' (%s): %s"):format(n.name, n.op_type, msg) end
      check.error(self._what .. ": " .. msg:gsub("^dle%.onnx: ", ""))
    end
    table.remove(outs, 1)
    for i, name in ipairs(n.outputs) do
      if name ~= "" then env[name] = outs[i] end
    end
  end
end

--- Runs the graph: the inputs as positional tensors (graph order) or one table keyed by input
-- name; returns the graph's outputs in order.
function Model:forward(...)
  local env = {}
  for name, t in pairs(self._const) do env[name] = t end
  for name, field in pairs(self._param_field) do env[name] = self[field] end
  bind_inputs(self, env, ...)
  run_nodes(self, self._graph, env)
  local res = {}
  for i, name in ipairs(self.output_names) do res[i] = V.to_user(env[name]) end
  return table.unpack(res, 1, #self.output_names)
end

--- Loads an ONNX model (a file path, or the file's bytes) as an nn.Module (see the module doc).
-- Options: `requires_grad` (default true: float initializers are trainable parameters).
-- @param src path or bytes of a ModelProto
-- @param[opt] opts `{requires_grad}`
-- @return the model
function onnx.load(src, opts)
  opts = check.options(opts, "dle.onnx.load", {"requires_grad"})
  check.string(src, "dle.onnx.load", "argument #1")
  local m = onnx.parse(src, nil, "dle.onnx.load")
  local what = "dle.onnx.load: " .. (m._is_bytes and "(bytes)" or src)
  local opset = m.opset_import[""] or m.opset_import["ai.onnx"] or 1
  check_ops(m.graph, opset, what)
  local model = Model(m, what)
  if opts.requires_grad == false then
    for _, p in ipairs(model:parameters()) do p:requires_grad_(false) end
  end
  return model
end

-- Whether src holds a message's bytes rather than a path: not an openable file and with a
-- control byte (a serialized message starts with a field tag such as 0x08).
local function bytes_given(src, is_bytes)
  if is_bytes ~= nil then return is_bytes end
  local f = io.open(src, "rb")
  if f then f:close(); return false end
  return src:find("[%z\1-\31]") ~= nil
end

-- Calls the binding's decoder, with errors raised at the user's line.
local function decode(decoder, src, is_bytes, fn)
  check.string(src, fn, "argument #1")
  is_bytes = bytes_given(src, is_bytes)
  local res = table.pack(pcall(decoder, src, is_bytes, fn .. ": " .. (is_bytes and "(bytes)" or src)))
  if not res[1] then check.error(check.strip_where(tostring(res[2]))) end
  return is_bytes, table.unpack(res, 2, res.n)
end

--- Reads a serialized TensorProto (a path, or its bytes) as a tensor; also returns its name.
-- @param src path or bytes
-- @param[opt] is_bytes boolean (default: bytes when src is no file and holds control bytes)
-- @return tensor, name
function onnx.load_tensor(src, is_bytes)
  local _, t, name = decode(dle.core._onnx_tensor, src, is_bytes, "dle.onnx.load_tensor")
  return t, name
end

--- Reads a serialized SequenceProto of tensors (a path, or its bytes, as for load_tensor) as a
-- Lua list of tensors; also returns its name.
-- @return list of tensors, name
function onnx.load_sequence(src, is_bytes)
  local _, list, name = decode(dle.core._onnx_sequence, src, is_bytes, "dle.onnx.load_sequence")
  return V.sequence(list), name
end

--- Reads a serialized OptionalProto (a path, or its bytes): its value (a tensor, a list of
-- tensors, or nil when empty), the kind ("tensor", "sequence", "none") and its name.
-- @return value, kind, name
function onnx.load_optional(src, is_bytes)
  local _, v, kind, name = decode(dle.core._onnx_optional, src, is_bytes, "dle.onnx.load_optional")
  if kind == "sequence" then v = V.sequence(v) end
  return v, kind, name
end

--- The decoded model as plain tables (nodes, initializers as tensors, inputs/outputs with shapes,
-- opset_import), as the native binding returns it (see bindings/lua_onnx.c).
-- @param src path or bytes of a ModelProto
-- @param[opt] is_bytes boolean (default: bytes when src is no file and holds control bytes)
-- @return table
function onnx.parse(src, is_bytes, fn)
  local b, m = decode(dle.core._onnx_model, src, is_bytes, fn or "dle.onnx.parse")
  m._is_bytes = b
  return m
end

--- Traces fn_or_module on example_inputs and writes it as an ONNX model (lua/dle/onnx/export.lua).
-- @param path file to write (atomically: a temporary file renamed over it)
-- @param fn_or_module a function or an nn.Module
-- @param example_inputs list of tensors
-- @param[opt] opts `{opset (13..17, default 17), input_names, output_names, dynamic_axes}`
-- @return path
function onnx.save(path, fn_or_module, example_inputs, opts)
  return require("dle.onnx.export").save(path, fn_or_module, example_inputs, opts)
end

--- The ops of dle's table that dle.onnx.save writes (name -> true, with cond, while_loop and
-- scan), and those it cannot (name -> reason).
function onnx.exportable()
  return require("dle.onnx.export").exportable()
end

return onnx
