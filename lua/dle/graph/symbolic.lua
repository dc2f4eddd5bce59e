--- dle.graph symbolic building: graphs made without tracing a Lua function, node by node, out of
-- the same nodes the tracer makes (the seeds' "symbolic and imperative from one code base").
--
--   local g = dle.graph.new()
--   local x = g:placeholder("x", {8, 4})                  -- float32 unless a dtype is given
--   local w = g:constant(dle.randn(4, 3))                  -- or a parameter: g:constant(p) with p.requires_grad
--   local h = g:add("matmul", {x, w})
--   local y = g:add("softmax", {h}, 2)                    -- extra arguments follow the tensors
--   g:output(y)
--   local out = g:run(dle.randn(8, 4))                    -- g:dot(), rewrites, compile... as for traces
--
-- How: g:add(name, inputs, ...) traces dle.nn.functional.<name> (or dle.<name>, or a function)
-- once on example values of its input nodes and splices the recorded nodes into g, so a function
-- that dle composes from several engine ops (a loss, a layer) arrives as those ops, exactly as a
-- trace of it would. The example values (random floats, integer ones, or a tensor given to
-- placeholder) are carried through the ops: building costs one run of the graph on them.
local core = require("dle.core")
local check = require("dle.check")
local Nodes = require("dle.graph.node")

return function(graph, Graph)
  local dle -- loaded on first use (dle requires dle.graph)

  local function examples(g)
    g._examples = g._examples or setmetatable({}, {__mode = "k"})
    return g._examples
  end

  local function is_node(v) return getmetatable(v) == Nodes.Node end

  --- g:placeholder(name, shape, dtype) -> an input node (inputs of g:run, in the order made).
  -- @param name string (kept as attrs.name)
  -- @param shape list of sizes, or an example tensor (its shape and dtype; its values are what
  --   g:add runs the ops on: e.g. valid class numbers for a loss)
  -- @param dtype optional dtype name (default float32); the example values are random for floats,
  --   ones for integers (a valid 1-based index) and false for bool
  function Graph:placeholder(name, shape, dtype)
    dle = dle or require("dle")
    check.string(name, "placeholder", "name")
    local ex
    if core.is_tensor(shape) then
      ex = shape
    elseif type(shape) ~= "table" then
      check.error("placeholder: shape must be a list of sizes or an example tensor, got " .. check.typename(shape))
    else
      dtype = dtype or "float32"
      ex = (dtype:match("^float") or dtype == "bfloat16") and dle.randn(shape, {dtype = dtype})
        or dtype == "bool" and dle.zeros(shape, {dtype = dtype}) or dle.ones(shape, {dtype = dtype})
    end
    local n = Nodes.new("input", {}, {index = #self.inputs + 1, name = name}, ex:shape(), ex:dtype())
    n.device = "cpu"
    self.inputs[#self.inputs + 1] = n
    self.example_inputs[#self.inputs] = ex
    self._order[#self._order + 1] = n
    examples(self)[n] = ex
    self._plan = nil
    return n
  end

  --- g:constant(t) -> a node holding tensor t: a "param" when t requires grad (a live reference:
  -- g:run sees its current values), else a "const".
  function Graph:constant(t)
    if not core.is_tensor(t) then check.error("constant: expected a tensor, got " .. check.typename(t)) end
    local n = Nodes.leaf(t)
    self._order[#self._order + 1] = n
    examples(self)[n] = t
    return n
  end

  -- The function g:add calls: a function, or a name looked up in dle.nn.functional (the user-facing
  -- versions: F.cross_entropy, not the raw two-result op), then dle, then as a tensor method.
  local function resolve(what)
    dle = dle or require("dle")
    if type(what) == "function" then return what end
    if type(what) ~= "string" then check.error("add: op must be a name or a function, got " .. check.typename(what)) end
    local f = rawget(dle.nn.functional, what) or dle[what]
    if type(f) == "function" then return f end
    local method = dle.Tensor and dle.Tensor[what]
    if type(method) == "function" then return method end
    check.error("add: no dle function, dle.nn.functional function or tensor method is named " .. what)
  end

  --- g:add(op, inputs, ...) -> the node(s) of op's result(s): op (a dle function name or a
  -- function) applied to the input nodes, then the extra arguments.
  -- @param op "matmul", "relu", "cross_entropy", ... or a function of tensors
  -- @param inputs list of nodes of this graph (placeholders, constants, earlier results)
  function Graph:add(op, inputs, ...)
    local f = resolve(op)
    if type(inputs) ~= "table" then
      check.error("add: inputs must be a list of nodes, got " .. check.typename(inputs))
    end
    local ex = examples(self)
    local values = {}
    for i, n in ipairs(inputs) do
      if not is_node(n) or ex[n] == nil then
        check.error(string.format("add(%s): input %d is not a node of this graph", tostring(op), i))
      end
      values[i] = ex[n]
    end
    local extra = table.pack(...)
    local nin = #values
    local sub, res = graph._trace("add", function(...)
      local args = {...}
      for k = 1, extra.n do args[nin + k] = extra[k] end
      return f(table.unpack(args, 1, nin + extra.n))
    end, table.unpack(values, 1, nin))
    if sub.unsafe then
      check.error(string.format("add(%s): %s (a symbolic graph holds ops only)", tostring(op), sub.unsafe))
    end
    -- splice: the trace's inputs are the given nodes, its other nodes join g
    local map = {}
    for k, n in ipairs(sub.inputs) do map[n] = inputs[k] end
    for _, n in ipairs(sub:nodes()) do
      if not map[n] then
        for k, u in ipairs(n.inputs) do n.inputs[k] = map[u] or u end
        self._order[#self._order + 1] = n
        map[n] = n
      end
    end
    for _, n in ipairs(sub.effects) do self.effects[#self.effects + 1] = map[n] or n end
    local outs = {}
    for k = 1, res.n do
      local o = sub.outputs[k]
      if not core.is_tensor(res[k]) or not o then
        check.error(string.format("add(%s): result %d is not a tensor (%s)", tostring(op), k, check.typename(res[k])))
      end
      outs[k] = map[o] or o
      ex[outs[k]] = res[k]
    end
    self._plan = nil
    return table.unpack(outs, 1, res.n)
  end

  --- g:output(nodes...) -> g, with these nodes as its results (g:run returns them in order).
  function Graph:output(...)
    local outs, items = {}, {}
    for i = 1, select("#", ...) do
      local n = select(i, ...)
      if not is_node(n) then check.error("output: argument " .. i .. " is not a node") end
      outs[i], items[i] = n, {node = true}
    end
    self.outputs = outs
    self.template = {n = #outs, items = items}
    self._plan = nil
    return self
  end
end
