-- rewrite_tour.lua — graphs, rewrite rules and dle.compile: trace a function, look at its graph,
-- write a rule, check it, apply the built-in rule sets and compile a model. Run it with
-- `scripts/dle examples/rewrite_tour.lua`.
local dle = require("dle")
local nn = dle.nn
local P, B = dle.rewrite.pattern, dle.rewrite.build

local function section(title)
  io.write("\n== ", title, "\n")
end

section("trace: a function's ops as a graph")
local lin = nn.Linear(4, 4)
local f = function(x) return ((lin(x) * 2):tanh() * 1 + 0.5):relu() end
local g = dle.graph.trace(f, dle.randn(3, 4))
io.write(g:dump())
local x = dle.randn(3, 4)
print("replay equals eager:", (g:run(x) - f(x)):abs():max():item() == 0)

section("a user rule: x * 2 -> x + x")
local twice = dle.rewrite.rule{
  name = "x*2 -> x+x",
  pattern = P.mul(P.any "x", P.const(2)),
  replace = function(m) return B.add(m.x, m.x) end,
}
print("verify:", dle.rewrite.verify(twice, {trials = 5}))
local g2, counts = dle.rewrite.apply(g, {twice})
print("fired", counts["x*2 -> x+x"], "times")
io.write(g2:dump())

section("built-in rules: algebra, then fusion")
local g3a, c3 = dle.rewrite.apply(g, dle.rewrite.rules.algebra)
local g3, c3b = dle.rewrite.apply(g3a, dle.rewrite.rules.fusion)
for name, n in pairs(c3b) do c3[name] = n end
for name, n in pairs(c3) do
  if n > 0 then print(name, n) end
end
io.write(g3:dump())
print("same results:", (g3:run(x) - f(x)):abs():max():item() < 1e-6)

section("gradients as a graph")
local bg = g:backward_graph()
print("backward graph:", #bg:nodes(), "nodes; gradients of", #bg.wrt, "values")

section("dle.compile")
local step = dle.compile(function(xb) return f(xb):sum() end, {debug = false})
for _ = 1, 3 do step(dle.randn(3, 4)) end
step(dle.randn(5, 4))                                    -- a new shape: traced again
local info = dle.compile_info(step)
print("traces", info.traces, "replays", info.replays)
