--- graph_symbolic_spec.lua — graphs built without tracing (dle.graph.new, g:placeholder,
-- g:constant, g:add, g:output): the same nodes a trace of the same function makes, replay equal to
-- eager, parameters that get gradients, rewrites on them, several results, and errors.
local dle = require("dle")
local R = require("dle.rewrite")

local function ops_of(g)
  local ops = {}
  for _, n in ipairs(g:nodes()) do ops[#ops + 1] = n.op end
  return table.concat(ops, " ")
end

describe("dle.graph symbolic building", function()
  local w1, b1, w2 = dle.randn(4, 6), dle.randn(6), dle.randn(6, 3)
  local function mlp(x) return dle.softmax((x:matmul(w1) + b1):relu():matmul(w2), 2) end

  local function build()
    local g = dle.graph.new()
    local x = g:placeholder("x", {5, 4})
    local h = g:add("matmul", {x, g:constant(w1)})
    h = g:add("add", {h, g:constant(b1)})
    h = g:add("relu", {h})
    h = g:add("matmul", {h, g:constant(w2)})
    return g:output(g:add("softmax", {h}, 2)), x
  end

  it("makes the nodes a trace of the same function makes, and replays to eager's values", function()
    local g, x = build()
    local traced = dle.graph.trace(mlp, dle.randn(5, 4))
    assert.are.equal(ops_of(traced), ops_of(g))
    assert.are.equal("x", x.attrs.name)
    local input = dle.randn(5, 4)
    assert.are.equal(0, (g:run(input) - mlp(input)):abs():max():item())
    assert.truthy(g:dot():find("softmax", 1, true))
  end)

  it("splices a composite function (cross_entropy) as the engine ops a trace records", function()
    local g = dle.graph.new()
    local logits = g:placeholder("logits", {7, 5})
    local target = g:placeholder("target", {7}, "int64")
    g:output(g:add("cross_entropy", {logits, target}))
    local traced = dle.graph.trace(dle.nn.functional.cross_entropy, dle.randn(7, 5),
                                   dle.randint(1, 6, {7}, {dtype = "int64"}))
    assert.are.equal(ops_of(traced), ops_of(g))
    local l, t = dle.randn(7, 5), dle.randint(1, 6, {7}, {dtype = "int64"})
    assert.is_true(math.abs(g:run(l, t):item() - dle.nn.functional.cross_entropy(l, t):item()) < 1e-6)
  end)

  it("holds parameters by reference: g:run sees their current values and gives them gradients", function()
    local p = dle.randn(3, 3, {requires_grad = true})
    local g = dle.graph.new()
    local x = g:placeholder("x", {2, 3})
    g:output(g:add("sum", {g:add("matmul", {x, g:constant(p)})}))
    local input = dle.randn(2, 3)
    g:run(input):backward()
    assert.is_true((p.grad - input:sum(1):unsqueeze(2):expand(3, 3)):abs():max():item() < 1e-6)
    dle.no_grad(function() p:mul_(2) end)
    assert.is_true(math.abs(g:run(input):item() - input:matmul(p):sum():item()) < 1e-4)
  end)

  it("is rewritten like a traced graph (fusion), and gives several results for multi-result ops", function()
    local g = dle.graph.new()
    local x = g:placeholder("x", {3, 4})
    local y = g:add("tanh", {g:add("mul", {x, x})})
    local v, i = g:add("max", {y}, 2)
    g:output(v, i)
    local f = R.apply(g, R.rules.fusion)
    assert.truthy(ops_of(f):find("fused", 1, true))
    local input = dle.randn(3, 4)
    local gv, gi = f:run(input)
    local wv, wi = (input * input):tanh():max(2)
    assert.are.same(wv:totable(), gv:totable())
    assert.are.same(wi:totable(), gi:totable())
  end)

  it("bad ops, inputs and value reads are errors naming the call", function()
    local g = dle.graph.new()
    local x = g:placeholder("x", {2})
    local other = dle.graph.new():placeholder("y", {2})
    local function err(f) local ok, msg = pcall(f); assert.is_false(ok); return msg end
    assert.matches("add: no dle function", err(function() g:add("no_such_op", {x}) end))
    assert.matches("add%(relu%): input 1 is not a node of this graph", err(function() g:add("relu", {other}) end))
    assert.matches("add%(relu%): input 1 is not a node", err(function() g:add("relu", {42}) end))
    assert.matches("value was read into Lua", err(function() g:add(function(t) return t * t:sum():item() end, {x}) end))
    assert.matches("placeholder: shape must be a list", err(function() g:placeholder("z", 3) end))
    assert.matches("output: argument 1 is not a node", err(function() g:output("x") end))
  end)
end)
