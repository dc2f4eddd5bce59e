-- graph_spec: dle.graph.trace captures a function's ops; the graph's nodes, dump, dot, run
-- (replay on new inputs, input checks, liveness) and backward_graph (against dle.grad).
local dle = require("dle")
local H = require("helpers")
local nn = dle.nn

local function ops_of(g)
  local ops = {}
  for _, n in ipairs(g:nodes()) do ops[#ops + 1] = n.op end
  return ops
end

local count = H.count_ops

local max_diff = H.max_diff

describe("dle.graph.trace", function()
  it("captures an MLP as inputs, parameters and the core ops Linear and ReLU reach", function()
    local net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    local g = dle.graph.trace(function(x) return net(x) end, dle.randn(5, 4))
    assert.same({"input", "param", "permute", "param", "matmul", "relu", "param", "permute", "param", "matmul"},
                ops_of(g))
    assert.equal(1, #g.inputs)
    assert.equal(1, #g.outputs)
    assert.same({5, 3}, g.outputs[1]:shape())
    assert.equal("float32", g.outputs[1]:dtype())
  end)

  it("captures a CNN with conv2d, batch_norm, max_pool2d and its two results", function()
    local net = nn.Sequential(nn.Conv2d(1, 4, 3, {padding = 1}), nn.BatchNorm2d(4), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    net:eval()
    local g = dle.graph.trace(function(x) return net(x) end, dle.randn(2, 1, 8, 8))
    assert.equal(1, count(g, "conv2d"))
    assert.equal(1, count(g, "batch_norm"))
    assert.equal(1, count(g, "max_pool2d"))
    assert.same({2, 3}, g.outputs[1]:shape())
    local x = dle.randn(2, 1, 8, 8)
    assert.is_true(max_diff(g:run(x), net(x)) < 1e-6)
  end)

  it("captures a multi-head attention block and replays it equal to eager", function()
    local mha = nn.MultiheadAttention(8, 2, {causal = true})
    local g = dle.graph.trace(function(x) return mha(x) end, dle.randn(2, 5, 8))
    assert.is_true(count(g, "sdpa") == 1)
    local x = dle.randn(2, 5, 8)
    assert.is_true(max_diff(g:run(x), mha(x)) < 1e-6)
  end)

  it("turns numbers mixed with tensors into scalar constant nodes", function()
    local g = dle.graph.trace(function(x) return x * 2 + 0.5 end, dle.randn(3))
    local consts = {}
    for _, n in ipairs(g:nodes()) do
      if n.op == "const" then consts[#consts + 1] = n end
    end
    assert.equal(2, #consts)
    assert.equal(2, consts[1].attrs.value)
    assert.equal(2, consts[1]:value():item())
    assert.same({}, consts[1]:shape())
    local mul = g.outputs[1].inputs[1]
    assert.equal("mul", mul.op)
    assert.equal(consts[1], mul.inputs[2])
  end)

  it("keeps parameters as live references: a replay sees updated weights", function()
    local lin = nn.Linear(3, 2)
    local g = dle.graph.trace(function(x) return lin(x) end, dle.randn(4, 3))
    local params = {}
    for _, n in ipairs(g:nodes()) do
      if n.op == "param" then params[#params + 1] = n end
    end
    assert.equal(2, #params)
    assert.is_true(dle.same_storage(params[1]:value(), lin.weight))
    dle.no_grad(function() lin.weight:fill_(1); lin.bias:fill_(0) end)
    local x = dle.randn(4, 3)
    H.assert_close(g:run(x), x:sum(2, true):expand(4, 2):totable(), {atol = 1e-5})
  end)

  it("returns several results and tables of tensors in the traced structure", function()
    local g = dle.graph.trace(function(x, s) return x + 1, {a = x * s, list = {x:sum()}}, "tag" end,
                              dle.ones(2), 3)
    assert.equal(3, #g.outputs)
    local r1, r2, r3 = g:run(dle.full({2}, 2))
    H.assert_close(r1, {3, 3})
    H.assert_close(r2.a, {6, 6})
    H.assert_close(r2.list[1], 4)
    assert.equal("tag", r3)
  end)

  it("marks reads of values into Lua unsafe, and run refuses an unsafe graph", function()
    local g = dle.graph.trace(function(x) if x:sum():item() > 0 then return x end return -x end, dle.ones(2))
    assert.is_truthy(g.unsafe and g.unsafe:find("item", 1, true))
    H.assert_error(function() g:run(dle.ones(2)) end, "run", "unsafe", "item")
    local g2 = dle.graph.trace(function(x) return x * 2 end, dle.ones(2))
    assert.is_nil(g2.unsafe)
  end)

  it("replays random ops with new numbers, as eager calls draw", function()
    local g = dle.graph.trace(function(x) return x + dle.rand(4) end, dle.zeros(4))
    local a, b = g:run(dle.zeros(4)), g:run(dle.zeros(4))
    assert.is_true(max_diff(a, b) > 0)
    dle.manual_seed(7)
    local want = dle.zeros(4) + dle.rand(4)
    dle.manual_seed(7)
    H.assert_close(g:run(dle.zeros(4)), want:totable())
    local d = dle.graph.trace(function(x) return dle.dropout(x, 0.5) end, dle.ones(64))
    assert.is_true(max_diff(d:run(dle.ones(64)), d:run(dle.ones(64))) > 0)
  end)

  it("replays in-place writes into the same tensors (BatchNorm's running statistics)", function()
    local bn = nn.BatchNorm1d(3)
    local g = dle.graph.trace(function(x) return bn(x) end, dle.randn(6, 3))
    local before = bn.running_mean:clone()
    local x = dle.randn(6, 3) + 5
    g:run(x)
    assert.is_true(max_diff(bn.running_mean, before) > 0.1)
  end)
end)

describe("graph dump and dot", function()
  local g = dle.graph.trace(function(x, y) return (x:matmul(y) * 2):relu() end, dle.randn(2, 3), dle.randn(3, 4))

  it("dumps one line per node with id, op, inputs, shape and dtype, then the outputs", function()
    local text = g:dump()
    local lines = {}
    for l in text:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.equal(#g:nodes() + 1, #lines)
    assert.equal("%1 = input() {index=1} : {2,3} float32", lines[1])
    assert.truthy(text:find("%3 = matmul(%1, %2) : {2,4} float32", 1, true))
    assert.truthy(text:find("relu(%5)", 1, true))
    assert.equal("return %6", lines[#lines])
  end)

  it("writes valid Graphviz: a node per graph node, an edge per input, balanced braces", function()
    local dot = g:dot()
    assert.truthy(dot:match("^digraph dle {"))
    local nodes = select(2, dot:gsub("\n  n%d+ %[label", ""))
    local edges = select(2, dot:gsub(" %-> ", ""))
    assert.equal(#g:nodes(), nodes)
    assert.equal(5, edges)
    assert.equal(select(2, dot:gsub("{", "")), select(2, dot:gsub("}", "")))
    if H.have_command("dot") then
      local p = io.popen("env -u LD_PRELOAD dot -Tcanon >/dev/null 2>&1 <<'EOF'\n" .. dot .. "EOF\necho $?")
      local rc = p:read("*a"); p:close()
      assert.equal("0", rc:match("%d+"))
    end
  end)

  it("breaks labels into lines with one escaped newline (op on one line, shape and dtype on the next)", function()
    local dot = g:dot()
    -- dot's line break is the two characters \n; a doubled backslash would print "\n" literally
    assert.truthy(dot:find('[label="input 1\\n{2,3} float32"', 1, true))
    assert.falsy(dot:find("\\\\n", 1, true))
    local q = dle.graph.trace(function(x) return x * 2 end, dle.randn(3)):dot()
    assert.truthy(q:find('label="const 2.0\\n{} float32"', 1, true))
    if H.have_command("dot") then
      local f = os.tmpname()
      local out = io.open(f, "w"); out:write(dot); out:close()
      local p = io.popen("env -u LD_PRELOAD dot -Tsvg " .. f .. " 2>&1")
      local svg = p:read("a"); p:close()
      os.remove(f)
      -- one <text> per label line: "input 1" and "{2,3} float32" apart, no backslash drawn
      assert.truthy(svg:find(">input 1</text>", 1, true))
      assert.truthy(svg:find(">{2,3} float32</text>", 1, true))
      assert.falsy(svg:find("\\n", 1, true))
    end
  end)
end)

describe("graph run", function()
  it("equals eager on new inputs, odd sizes included", function()
    local f = function(x, w) return (x:matmul(w):tanh() + x:sum(2, true)):softmax(-1) end
    local g = dle.graph.trace(f, dle.randn(3, 5), dle.randn(5, 5))
    for _ = 1, 3 do
      local x, w = dle.randn(3, 5), dle.randn(5, 5)
      assert.is_true(max_diff(g:run(x, w), f(x, w)) < 1e-6)
    end
  end)

  it("errors naming run and the input on a wrong shape, dtype, count or type", function()
    local g = dle.graph.trace(function(x) return x * 2 end, dle.randn(2, 3))
    H.assert_error(function() g:run(dle.randn(3, 3)) end, "run: input 1 has shape {3,3}", "{2,3}")
    H.assert_error(function() g:run(dle.randn(2, 3, {dtype = "float64"})) end, "run: input 1", "float64")
    H.assert_error(function() g:run() end, "run: expected 1 input tensors, got 0")
    H.assert_error(function() g:run(3) end, "run: input 1 must be a tensor")
  end)

  it("records autograd through a replay: gradients equal eager", function()
    local lin = nn.Linear(3, 2)
    local f = function(x) return (lin(x):sigmoid() * 3):sum() end
    local g = dle.graph.trace(f, dle.randn(4, 3))
    local x = dle.randn(4, 3, {requires_grad = true})
    local gx, gw = table.unpack(dle.grad(g:run(x), {x, lin.weight}))
    local ex, ew = table.unpack(dle.grad(f(x), {x, lin.weight}))
    assert.is_true(max_diff(gx, ex) < 1e-6 and max_diff(gw, ew) < 1e-6)
  end)

  it("frees intermediates after their last use: the peak stays near eager's", function()
    local f = function(x)
      local y = x
      for _ = 1, 8 do y = (y * 1.01):relu() end
      return y
    end
    local x = dle.randn(256, 1024)   -- 1 MB per intermediate
    local g = dle.graph.trace(f, x)
    collectgarbage(); collectgarbage()
    dle.reset_peak_memory_stats()
    local base = dle.memory_stats().allocated
    local r <close> = g:run(x) -- luacheck: ignore 211 (held until the peak is read)
    local peak = dle.memory_stats().peak - base
    assert.is_true(peak <= 4 * 1024 * 1024, "replay peak " .. peak .. " bytes")
  end)
end)

describe("backward_graph", function()
  it("computes the gradients of the outputs' sum equal to dle.grad, for inputs and parameters", function()
    local net = nn.Sequential(nn.Linear(4, 6), nn.GELU(), nn.Linear(6, 2))
    local g = dle.graph.trace(function(x) return net(x) * 2 end, dle.randn(3, 4))
    local bg = g:backward_graph()
    assert.equal(5, #bg.wrt)
    assert.equal("input", bg.wrt[1].op)
    local x = dle.randn(3, 4)
    local got = {bg:run(x)}
    local xr = x:clone():requires_grad_(true)
    local wrt = {xr}
    for i = 2, #bg.wrt do wrt[i] = bg.wrt[i]:value() end
    local want = dle.grad((net(xr) * 2):sum(), wrt)
    for i = 1, #want do assert.is_true(max_diff(got[i], want[i]) < 1e-5, "gradient " .. i) end
  end)

  it("takes given grad outputs after the inputs with grad_outputs = true", function()
    local g = dle.graph.trace(function(x) return x:tanh(), x * 3 end, dle.randn(4))
    local bg = g:backward_graph{grad_outputs = true}
    assert.equal(3, #bg.inputs)
    local x, g1, g2 = dle.randn(4), dle.randn(4), dle.randn(4)
    local gx = bg:run(x, g1, g2)
    local want = g1 * (1 - x:tanh() ^ 2) + g2 * 3
    assert.is_true(max_diff(gx, want) < 1e-6)
  end)

  it("refuses an unsafe graph", function()
    local g = dle.graph.trace(function(x) return x * x:sum():item() end, dle.ones(2))
    H.assert_error(function() g:backward_graph() end, "backward_graph", "unsafe")
  end)
end)
