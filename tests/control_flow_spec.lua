-- control_flow_spec: dle.cond, dle.while_loop and dle.scan eagerly, traced (one node holding its
-- subgraphs, replayed by g:run) and compiled, compared on many generated inputs; gradients by
-- float64 gradcheck; errors; the printer, dot, rewrites and backward_graph around the nodes.
local dle = require("dle")
local H = require("helpers")

local max_diff, count = H.max_diff, H.count_ops

-- a small LCG of the test's own, independent of dle's generator
local seed = 20261128
local function r(n)
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % n + 1
end

local function node_of(g, op)
  for _, n in ipairs(g:nodes()) do if n.op == op then return n end end
end

-- Runs f eagerly, as a traced graph (traced once on `example`) and compiled, on each input list;
-- every result must be equal to eager's.
local function agree(f, example, inputs_list)
  local g = dle.graph.trace(f, table.unpack(example))
  local c = dle.compile(f)
  for i, ins in ipairs(inputs_list) do
    local want = table.pack(f(table.unpack(ins)))
    local got_g = table.pack(g:run(table.unpack(ins)))
    local got_c = table.pack(c(table.unpack(ins)))
    assert.equal(want.n, got_g.n)
    for k = 1, want.n do
      local d1, d2 = max_diff(got_g[k], want[k]), max_diff(got_c[k], want[k])
      if d1 ~= 0 or d2 ~= 0 then
        error(string.format("input set %d result %d: graph differs by %g, compiled by %g", i, k, d1, d2))
      end
    end
  end
  return g, c
end

describe("dle.cond", function()
  it("runs only the branch its pred picks: booleans and 0-d bool, float and integer tensors", function()
    local ran = {}
    local function t(a) ran[#ran + 1] = "t"; return a + 1 end
    local function f(a) ran[#ran + 1] = "f"; return a - 1 end
    local x = dle.tensor({1, 2})
    assert.same({2, 3}, dle.cond(true, t, f, x):totable())
    assert.same({0, 1}, dle.cond(false, t, f, x):totable())
    assert.same({2, 3}, dle.cond(dle.tensor(true), t, f, x):totable())
    assert.same({0, 1}, dle.cond(dle.tensor(0.0), t, f, x):totable())
    assert.same({2, 3}, dle.cond(dle.tensor(-2, {dtype = "int64"}), t, f, x):totable())
    assert.same({"t", "f", "t", "f", "t"}, ran)
  end)

  it("passes several operands and returns several results", function()
    local a, b = dle.tensor({1, 2}), dle.tensor({10, 20})
    local s, d = dle.cond(dle.tensor(true), function(u, v) return u + v, v - u end,
                          function(u, v) return u * v, u end, a, b)
    assert.same({11, 22}, s:totable())
    assert.same({9, 18}, d:totable())
  end)

  it("traces as one cond node holding both branches, and the replay picks the branch at run time", function()
    local f = function(p, x) return dle.cond(p:gt(0), function(a) return a:exp() * 2 end,
                                              function(a) return a:sin() - 1 end, x) + x end
    local g = dle.graph.trace(f, dle.tensor(1.0), dle.randn(3))
    assert.equal(1, count(g, "cond"))
    assert.equal(0, count(g, "exp") + count(g, "sin"))   -- both branches only inside the node
    local n = node_of(g, "cond")
    assert.equal(2, #n.subgraphs)
    assert.same({"true_fn", "false_fn"}, n.subgraph_names)
    assert.equal(1, count(n.subgraphs[1], "exp"))
    assert.equal(1, count(n.subgraphs[2], "sin"))
    local x = dle.randn(3)
    assert.equal(0, max_diff(g:run(dle.tensor(-1.0), x), x:sin() - 1 + x))
    assert.equal(0, max_diff(g:run(dle.tensor(2.0), x), x:exp() * 2 + x))
  end)

  it("equals eager traced and compiled over 40 generated functions on inputs with both preds", function()
    local unary = {"exp", "sin", "tanh", "relu", "sigmoid", "abs", "neg"}
    local W = dle.randn(4, 4)
    for _ = 1, 40 do
      local u1, u2, u3 = unary[r(#unary)], unary[r(#unary)], unary[r(#unary)]
      local k = ({0.5, 2, -1})[r(3)]
      local use_w = r(2) == 1
      local f = function(x, y)
        local h = x[u1](x) * k
        local p = (h:sum() - y:sum()):gt(0)
        local out1, out2 = dle.cond(p,
          function(a, b) return a[u2](a) + b, (use_w and a:matmul(W) or a * b) end,
          function(a, b) return b[u3](b) - a * k, h * 2 end,   -- h: an intermediate the branch captures
          h, y)
        return out1 * out2 + h
      end
      local inputs = {}
      for i = 1, 6 do inputs[i] = {dle.randn(3, 4), dle.randn(3, 4) + (i % 2 == 0 and 3 or -3)} end
      local g = agree(f, inputs[1], inputs)
      assert.equal(1, count(g, "cond"))
    end
  end)

  it("replays the branch the current value of a captured pred picks, without retracing", function()
    local flag = dle.tensor(true)
    local f = dle.compile(function(x)
      return dle.cond(flag, function(a) return a * 2 end, function(a) return a * 3 end, x)
    end)
    local x = dle.ones(2)
    assert.same({2, 2}, f(x):totable())
    flag:fill_(false)
    assert.same({3, 3}, f(x):totable())
    flag:fill_(true)
    assert.same({2, 2}, f(x):totable())
    H.assert_compile_info(f, {traces = 1, replays = 2})
  end)

  it("nests: a cond inside a branch of a cond replays both levels at run time", function()
    local f = function(p, q, x)
      return dle.cond(p, function(a)
        return dle.cond(q, function(b) return b + 10 end, function(b) return b - 10 end, a) * 2
      end, function(a) return a end, x)
    end
    -- fresh tensors for each argument: a trace knows tensors by identity (one passed twice is one input)
    local T, F = function() return dle.tensor(true) end, function() return dle.tensor(false) end
    local x = dle.tensor({1.0})
    local g = agree(f, {T(), T(), x}, {{T(), T(), x}, {T(), F(), x}, {F(), T(), x}, {F(), F(), x}})
    assert.equal(1, count(g, "cond"))
    assert.equal(1, count(node_of(g, "cond").subgraphs[1], "cond"))
    assert.same({-18}, g:run(T(), F(), x):totable())
  end)

  it("is differentiable through the branch taken: float64 gradcheck eagerly and through g:run", function()
    local W = dle.randn(3, 3, {dtype = "float64"})
    local function f(p, x, y)
      return dle.cond(p, function(a, b) return (a:matmul(W) * b):tanh() end,
                      function(a, b) return a:exp() * b:sin() end, x, y)
    end
    local x, y = dle.randn(2, 3, {dtype = "float64"}), dle.randn(2, 3, {dtype = "float64"})
    for _, p in ipairs({true, false}) do
      local pt = dle.tensor(p)
      H.gradcheck(function(a, b) return f(pt, a, b) end, {x, y})
      local g = dle.graph.trace(f, pt, x, y)
      H.gradcheck(function(a, b) return g:run(dle.tensor(not p), a, b) end, {x, y}, {forward = false})
      H.gradcheck(function(a, b) return g:run(pt, a, b) end, {x, y}, {forward = false})
    end
  end)

  it("gives compiled functions the gradients eager code gets, for both preds", function()
    local W = dle.randn(3, 3, {requires_grad = true})
    local fn = function(p, x)
      return dle.cond(p:gt(0), function(a) return a:matmul(W):relu() end,
                      function(a) return (a * W:sum()):exp() end, x):sum()
    end
    local c = dle.compile(fn)
    for i = 1, 6 do
      local p, x = dle.tensor(i % 2 == 0 and 1.0 or -1.0), dle.randn(2, 3, {requires_grad = true})
      local want = dle.grad(fn(p, x), {W, x})
      local got = dle.grad(c(p, x), {W, x})
      assert.equal(0, max_diff(got[1], want[1]))
      assert.equal(0, max_diff(got[2], want[2]))
    end
  end)

  it("raises errors naming cond for a bad pred, operands, results, and branches that disagree", function()
    local x = dle.randn(3)
    local id = function(a) return a end
    H.assert_error(function() dle.cond(1, id, id, x) end, "cond: pred must be a boolean or a 0-d tensor, got number")
    H.assert_error(function() dle.cond(dle.tensor({true, false}), id, id, x) end,
                   "cond: pred must be a boolean or a 0-d tensor, got a tensor of shape {2}")
    H.assert_error(function() dle.cond(true, 5, id, x) end, "cond", "true_fn")
    H.assert_error(function() dle.cond(true, id, id, 3) end, "cond: operand 1 must be a tensor, got number")
    H.assert_error(function() dle.cond(true, function() return 1 end, id, x) end,
                   "cond: true_fn must return tensors, got a number as result 1")
    H.assert_error(function() dle.cond(false, id, function() end, x) end,
                   "cond: false_fn must return at least one tensor")
    local traced = function(f1, f2)
      return function() dle.graph.trace(function(p, a) return dle.cond(p, f1, f2, a) end, dle.tensor(true), x) end
    end
    H.assert_error(traced(id, function(a) return a, a end), "cond: true_fn returns 1 tensors, false_fn returns 2")
    H.assert_error(traced(id, function(a) return a:sum() end),
                   "cond: result 1 is {3} float32 in true_fn but {} float32 in false_fn")
    H.assert_error(traced(id, function(a) return a:double() end),
                   "cond: result 1 is {3} float32 in true_fn but {3} float64 in false_fn")
    -- a failed trace leaves no trace running: the next one works
    local g = dle.graph.trace(function(a) return a + 1 end, x)
    assert.equal(1, count(g, "add"))
  end)
end)

describe("dle.while_loop", function()
  local cond_fn = function(i) return i:lt(10) end
  local body_fn = function(i, s) return i + 1, s * 1.5 + i end

  it("iterates while cond_fn is true and returns the final list", function()
    local res = dle.while_loop(cond_fn, body_fn, {dle.tensor(7.0), dle.tensor({1.0, 2.0})})
    assert.equal(10, res[1]:item())
    -- 7 -> 10: s = (s*1.5 + 7)*1.5 + 8, then *1.5 + 9
    local want = {}
    for k, s in ipairs({1.0, 2.0}) do want[k] = ((s * 1.5 + 7) * 1.5 + 8) * 1.5 + 9 end
    H.assert_close(res[2]:totable(), want)
    local none = dle.while_loop(cond_fn, body_fn, {dle.tensor(12.0), dle.tensor(1.0)})
    assert.equal(12, none[1]:item())
  end)

  it("traces as one while_loop node whose replay iterates as many times as the data says", function()
    local f = function(i0, s0)
      -- intermediates as init: with no iteration the replay's results are its inputs (kept alive)
      local res = dle.while_loop(cond_fn, body_fn, {i0 + 0, s0 - 0})
      return res[1], res[2]
    end
    local inputs = {}
    for k = 1, 8 do inputs[k] = {dle.tensor(r(14) - 2.0), dle.randn(3)} end
    local g = agree(f, {dle.tensor(3.0), dle.randn(3)}, inputs)
    assert.equal(1, count(g, "while_loop"))
    assert.equal(0, count(g, "lt") + count(g, "mul"))
    assert.same({"cond_fn", "body_fn"}, node_of(g, "while_loop").subgraph_names)
  end)

  it("lifts captured tensors into inputs: the replay sees their current values", function()
    local step = dle.tensor(1.0)
    local g = dle.graph.trace(function(x)
      return dle.while_loop(function(a) return a:sum():lt(5) end, function(a) return a + step end, {x})[1]
    end, dle.zeros(2))
    assert.same({3, 3}, g:run(dle.zeros(2)):totable())
    step:fill_(2)
    assert.same({4, 4}, g:run(dle.zeros(2)):totable())
  end)

  it("is forward only: a backward pass reaching its results raises an error naming it", function()
    local a = dle.randn(2, {requires_grad = true})
    local double = function(i, s) return i + 1, s * 2 end
    local res = dle.while_loop(function(i) return i:lt(3) end, double, {dle.tensor(0.0), a})
    H.assert_error(function() res[2]:sum():backward() end, "while_loop: is not differentiable")
    local g = dle.graph.trace(function(x)
      return dle.while_loop(function(i) return i:lt(3) end, double, {dle.tensor(0.0), x})[2]
    end, a)
    H.assert_error(function() g:run(a):sum():backward() end, "while_loop: is not differentiable")
  end)

  it("raises errors naming while_loop for bad init, cond_fn results and body_fn results", function()
    local x = dle.zeros(2)
    H.assert_error(function() dle.while_loop(cond_fn, body_fn, x) end, "while_loop: init must be a list of tensors")
    H.assert_error(function() dle.while_loop(cond_fn, body_fn, {}) end,
                   "while_loop: init must hold at least one tensor")
    H.assert_error(function() dle.while_loop(function(a) return a end, body_fn, {x}) end,
                   "while_loop: cond_fn's result must be a boolean or a 0-d tensor, got a tensor of shape {2}")
    H.assert_error(function() dle.while_loop(function() return true end, function(a) return a:sum() end, {x}) end,
                   "while_loop: body_fn returns {} float32 as result 1, init[1] is {2} float32")
    H.assert_error(function() dle.while_loop(function() return true end, function(a) return a, a end, {x}) end,
                   "while_loop: body_fn returns 2 tensors, init has 1")
    H.assert_error(function()
      dle.graph.trace(function(a)
        return dle.while_loop(function() return true end, function(b) return b:double() end, {a})[1]
      end, x)
    end, "while_loop: body_fn returns {2} float64 as result 1, init[1] is {2} float32")
  end)

  it("makes a trace unsafe (compile runs eagerly) when cond_fn returns a Lua boolean", function()
    local f = dle.compile(function(x)
      return dle.while_loop(function(a) return a:sum():item() < 3 end, function(a) return a + 1 end, {x})[1]
    end)
    assert.same({3}, f(dle.zeros(1)):totable())
    assert.same({4}, f(dle.ones(1) * 1.5):totable() and {4} or nil)
    local info = dle.compile_info(f)
    assert.equal(0, info.replays)
  end)
end)

describe("dle.scan", function()
  local W = dle.randn(3, 3, {dtype = "float64"}) * 0.5
  local function rnn(h, x) local n = (h:matmul(W) + x):tanh(); return n, n * 2 + x end

  it("carries through every slice of xs along dim 1 and stacks the ys", function()
    local h0, xs = dle.randn(3, {dtype = "float64"}), dle.randn(5, 3, {dtype = "float64"})
    local h, ys = dle.scan(rnn, h0, xs)
    local want_h, want_ys = h0, {}
    for i = 1, 5 do
      local y
      want_h, y = rnn(want_h, xs[i])
      want_ys[i] = y
    end
    assert.equal(0, max_diff(h, want_h))
    assert.equal(0, max_diff(ys, dle.stack(want_ys, 1)))
    assert.same({5, 3}, ys:shape())
  end)

  it("takes lists of carries and xs, and a nil y", function()
    local c, ys = dle.scan(function(c, x) return {c[1] + x[1], c[2] * x[2]}, nil end,
                           {dle.zeros(2), dle.ones(2)}, {dle.ones(4, 2), dle.full({4, 2}, 2.0)})
    assert.same({4, 4}, c[1]:totable())
    assert.same({16, 16}, c[2]:totable())
    assert.is_nil(ys)
  end)

  it("equals eager traced and compiled over 30 generated step functions", function()
    local unary = {"tanh", "sigmoid", "sin", "relu"}
    for _ = 1, 30 do
      local u1, u2 = unary[r(#unary)], unary[r(#unary)]
      local k = ({0.5, -1, 2})[r(3)]
      local len = r(5)
      local f = function(h0, xs)
        return dle.scan(function(h, x)
          local z = h * k + x:matmul(W)
          local n = z[u1](z)
          return n, {n[u2](n), x * h}
        end, h0, xs)
      end
      local wrap = function(h0, xs) local h, ys = f(h0, xs); return h, ys[1], ys[2] end
      local inputs = {}
      for i = 1, 4 do inputs[i] = {dle.randn(2, 3, {dtype = "float64"}), dle.randn(len, 2, 3, {dtype = "float64"})} end
      local g = agree(wrap, inputs[1], inputs)
      assert.equal(1, count(g, "scan"))
      assert.equal(0, count(g, "matmul"))
    end
  end)

  it("is differentiable through every step: float64 gradcheck reverse and forward, eager and replayed", function()
    local h0, xs = dle.randn(3, {dtype = "float64"}), dle.randn(4, 3, {dtype = "float64"})
    local f = function(h, x) local c, ys = dle.scan(rnn, h, x); return c, ys end
    H.gradcheck(f, {h0, xs})
    local g = dle.graph.trace(f, h0, xs)
    H.gradcheck(function(h, x) return g:run(h, x) end, {h0, xs}, {forward = false})
    -- backward_graph unrolls the steps: it agrees with dle.grad
    local bg = g:backward_graph()
    local gh, gx = bg:run(h0, xs)
    local a, b = h0:clone():requires_grad_(true), xs:clone():requires_grad_(true)
    local c, ys = f(a, b)
    local want = dle.grad(c:sum() + ys:sum(), {a, b})
    assert.is_true(max_diff(gh, want[1]) < 1e-12)
    assert.is_true(max_diff(gx, want[2]) < 1e-12)
  end)

  it("raises errors naming scan for bad xs, a carry that changes shape, and a y that changes form", function()
    local h = dle.zeros(2)
    H.assert_error(function() dle.scan(rnn, h, dle.zeros(0, 2)) end,
                   "scan: xs must have at least one slice along dim 1, got shape {0,2}")
    H.assert_error(function() dle.scan(rnn, h, dle.tensor(1.0)) end, "scan: xs must have at least one slice")
    H.assert_error(function() dle.scan(rnn, h, {dle.zeros(3, 2), dle.zeros(4, 2)}) end,
                   "scan: xs[2] has 4 slices along dim 1, xs[1] has 3")
    H.assert_error(function() dle.scan(function(c, x) return c:sum(), x end, h, dle.zeros(3, 2)) end,
                   "scan: fn's carry returns {} float32 as result 1, init[1] is {2} float32")
    H.assert_error(function()
      dle.graph.trace(function(a, b)
        return dle.scan(function(c, x) return (c + x):double(), x end, a, b)
      end, h, dle.zeros(3, 2))
    end, "scan: fn's carry returns {2} float64 as result 1, init[1] is {2} float32")
    local i = 0
    H.assert_error(function()
      dle.scan(function(c, x) i = i + 1; return c, i == 1 and x or nil end, h, dle.zeros(3, 2))
    end, "scan: fn returned its y as single at one step and none at another")
    H.assert_error(function() dle.scan(rnn, "h", dle.zeros(3, 2)) end,
                   "scan: init must be a tensor or a list of tensors, got string")
  end)
end)

describe("control-flow nodes in graph tools", function()
  local f = function(p, x)
    local h = x * 3
    return dle.cond(p, function(a) return (a:exp() + 1):relu() end, function(a) return a - h end, x)
  end

  it("dump prints each subgraph under its node and dot draws them as clusters", function()
    local g = dle.graph.trace(f, dle.tensor(true), dle.randn(4))
    local text = g:dump()
    assert.truthy(text:find("= cond(", 1, true))
    assert.truthy(text:find("\n  true_fn:\n    %1 = input()", 1, true))
    assert.truthy(text:find("\n  false_fn:\n", 1, true))
    assert.truthy(text:find("    %%%d+ = exp%(") ~= nil)
    local dot = g:dot()
    assert.truthy(dot:find('subgraph cluster_n%d+_1_ {'))
    assert.truthy(dot:find('label="false_fn"', 1, true))
    assert.truthy(dot:find("compound=true", 1, true))
  end)

  it("rewrites recurse into subgraphs (fusion inside a branch) and leave the node's results as they were", function()
    local g = dle.graph.trace(f, dle.tensor(true), dle.randn(4))
    local g2, counts = dle.rewrite.apply(g, dle.rewrite.rules.fusion)
    assert.is_true(counts["fusion.elementwise"] > 0)
    assert.equal(1, count(node_of(g2, "cond").subgraphs[1], "fused"))
    assert.equal(0, count(node_of(g, "cond").subgraphs[1], "fused"))   -- g itself is unchanged
    for _, p in ipairs({true, false}) do
      local x = dle.randn(4)
      assert.is_true(max_diff(g2:run(dle.tensor(p), x), g:run(dle.tensor(p), x)) < 1e-6)
    end
    local g3 = dle.rewrite.apply(g, {dle.rewrite.rules.algebra, dle.rewrite.rules.inference})
    assert.equal(1, count(g3, "cond"))
  end)

  it("backward_graph refuses a cond node, whose gradient depends on the branch taken at run time", function()
    local g = dle.graph.trace(f, dle.tensor(true), dle.randn(4))
    H.assert_error(function() g:backward_graph() end, "backward_graph: the graph has a cond node")
  end)

  it("a branch that reads a value into Lua makes the trace unsafe, and compile runs it eagerly", function()
    local c = dle.compile(function(p, x)
      return dle.cond(p, function(a) return a * a:sum():item() end, function(a) return a end, x)
    end)
    local x = dle.tensor({1.0, 2.0})
    assert.same({3, 6}, c(dle.tensor(true), x):totable())
    assert.same({1, 2}, c(dle.tensor(false), x):totable())
    local info = dle.compile_info(c)
    assert.equal(0, info.replays)
    assert.is_true(info.eager >= 1)
    local g = dle.graph.trace(function(p, a) return dle.cond(p, function(b) return b * b:sum():item() end,
                                                              function(b) return b end, a) end, dle.tensor(true), x)
    assert.truthy(g.unsafe:find("cond: true_fn", 1, true))
  end)

  it("an untaken branch that writes into captured state makes the trace unsafe; the taken one replays", function()
    local bn = dle.nn.BatchNorm1d(2)
    local mean_before = bn.running_mean:clone()
    local fn = function(p, x) return dle.cond(p, function(a) return a * 2 end, function(a) return bn(a) end, x) end
    local g = dle.graph.trace(fn, dle.tensor(true), dle.randn(4, 2))
    assert.truthy(g.unsafe and g.unsafe:find("false_fn writes in place", 1, true))
    local g2 = dle.graph.trace(fn, dle.tensor(false), dle.randn(4, 2) + 5)
    assert.is_nil(g2.unsafe)
    local m1 = bn.running_mean:clone()
    assert.is_true(max_diff(m1, mean_before) > 0)
    g2:run(dle.tensor(false), dle.randn(4, 2) + 5)
    assert.is_true(max_diff(bn.running_mean, m1) > 0)   -- the replay updated the statistics
  end)
end)

describe("ONNX If and Scan as control-flow nodes", function()
  local root = "/usr/share/libonnx-testdata/data/node/"
  local have = H.exists(root .. "test_scan9_sum/model.onnx")

  local function input(dir, k) return dle.onnx.load_tensor(dir .. "/test_data_set_0/input_" .. k .. ".pb") end

  it("an imported Scan traces as one scan node that replays the sums of new inputs", function()
    if not have then return pending("libonnx-testdata is not installed") end
    local dir = root .. "test_scan9_sum"
    local m = dle.onnx.load(dir .. "/model.onnx")
    local init, xs = input(dir, 0), input(dir, 1)
    local g = dle.graph.trace(function(a, b) return m(a, b) end, init, xs)
    assert.equal(1, count(g, "scan"))
    local xs2 = dle.randn(xs:shape())
    local y, z = g:run(init, xs2)
    assert.is_true(max_diff(y, init + xs2:sum(1)) < 1e-5)
    local acc, rows = init, {}
    for i = 1, xs2:size(1) do acc = acc + xs2[i]; rows[i] = acc end
    assert.is_true(max_diff(z, dle.stack(rows, 1)) < 1e-5)
  end)

  it("an imported If traces as one cond node whose replay follows the new cond", function()
    if not have then return pending("libonnx-testdata is not installed") end
    local dir = root .. "test_if"
    local m = dle.onnx.load(dir .. "/model.onnx")
    local g = dle.graph.trace(function(c) return m(c) end, dle.tensor(true))
    assert.equal(1, count(g, "cond"))
    assert.equal(0, max_diff(g:run(dle.tensor(false)), m(dle.tensor(false))))
    assert.equal(0, max_diff(g:run(dle.tensor(true)), m(dle.tensor(true))))
    assert.is_true(max_diff(m(dle.tensor(true)), m(dle.tensor(false))) > 0)
  end)
end)
