--- graph_file_spec.lua — dle.graph.save / dle.graph.load and the C API's dle_graph_load /
-- dle_graph_run on the same files: traced, compiled (fused), frozen and symbolic graphs give the
-- same results after a round trip, in Lua and in C; examples/deploy_c classifies the Fashion-MNIST
-- test set from C with the accuracy the Lua model has; bad files and unsavable graphs are errors.
-- Fuzzed with the other loaders (tests/fuzz/file_fuzz.lua: graph, cgraph).
local dle = require("dle")
local H = require("helpers")
local nn = dle.nn

local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/[^/]*$") or "."
local build = os.getenv("DLE_BUILD") or (root .. "/build")
local dir = H.tmpdir()

local function same(a, b) return (a:double() - b:double()):abs():max():item() end

-- saves g, loads it back in Lua and in C; returns both
local function round_trip(g, name)
  local path = dir .. "/" .. name .. ".dleg"
  dle.graph.save(path, g)
  return dle.graph.load(path), dle.core._cgraph_load(path), path
end

describe("graph files", function()
  it("a trace with several results, a view, a detach and a constant replays the same in Lua and in C", function()
    local c = dle.randn(4)
    local f = function(x)
      local v, i = (x * c):max(2)
      return v:tanh(), i, x:detach():t() + 1
    end
    local g = dle.graph.trace(f, dle.randn(3, 4))
    local lg, cg = round_trip(g, "trace")
    local x = dle.randn(3, 4)
    local w1, w2, w3 = f(x)
    local l1, l2, l3 = lg:run(x)
    local c1, c2, c3 = dle.core._cgraph_run(cg, x)
    for _, pair in ipairs({{w1, l1}, {w2, l2}, {w3, l3}, {w1, c1}, {w2, c2}, {w3, c3}}) do
      assert.are.same(pair[1]:shape(), pair[2]:shape())
      assert.are.equal(pair[1]:dtype(), pair[2]:dtype())
      assert.are.equal(0, same(pair[1], pair[2]))
    end
  end)

  it("a compiled graph's fused nodes are written as their ops (a reduction too), with equal results", function()
    local f = function(a, b) return ((a - b) * (a - b)):tanh():mean(2) end
    local R = dle.rewrite
    local g = R.apply(dle.graph.trace(f, dle.randn(5, 7), dle.randn(7)), R.rules.fusion)
    local lg, cg = round_trip(g, "fused")
    local a, b = dle.randn(5, 7), dle.randn(7)
    assert.is_true(same(lg:run(a, b), f(a, b)) < 1e-6)
    assert.is_true(same(dle.core._cgraph_run(cg, a, b), f(a, b)) < 1e-6)
  end)

  it("parameters come back as tensors requiring grad; in-place updates (batch norm in train mode) replay", function()
    local bn = nn.BatchNorm1d(3)
    local p = dle.randn(3, 3, {requires_grad = true})
    local g = dle.graph.trace(function(x) return bn(x:matmul(p)) end, dle.randn(4, 3))
    local lg = round_trip(g, "train")
    local consts = {}
    for _, n in ipairs(lg:nodes()) do if n.op == "param" then consts[#consts + 1] = n end end
    assert.is_true(#consts >= 1)
    local effects = 0
    for _, n in ipairs(lg:nodes()) do if n.inplace then effects = effects + 1 end end
    assert.is_true(effects >= 1, "the running statistics' in-place updates are kept")
    assert.is_true(same(lg:run(dle.ones(4, 3)), g:run(dle.ones(4, 3))) < 1e-6)
  end)

  it("a symbolic graph and a frozen model survive the round trip", function()
    local sg = dle.graph.new()
    local x = sg:placeholder("x", {2, 3})
    sg:output(sg:add("softmax", {sg:add("matmul", {x, sg:constant(dle.randn(3, 4))})}, 2))
    local lg, cg = round_trip(sg, "symbolic")
    local input = dle.randn(2, 3)
    assert.are.equal(0, same(lg:run(input), sg:run(input)))
    assert.are.equal(0, same(dle.core._cgraph_run(cg, input), sg:run(input)))
    local net = nn.Sequential(nn.Linear(3, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Dropout(0.2), nn.Linear(5, 2))
    local frozen = dle.freeze(net, dle.randn(6, 3))
    local fl, fc = round_trip(frozen, "frozen")
    local y = dle.randn(6, 3)
    net:eval()
    assert.is_true(same(fl:run(y), net(y)) < 1e-5)
    assert.is_true(same(dle.core._cgraph_run(fc, y), net(y)) < 1e-5)
  end)

  it("wrong inputs, unsavable graphs and files that are not graphs are errors naming the function", function()
    local g = dle.graph.trace(function(x) return x * 2 end, dle.randn(2))
    local _, cg = round_trip(g, "small")
    assert.matches("dle_graph_run: input 1 must be float32 {2}, got float32 {3}",
      select(2, pcall(dle.core._cgraph_run, cg, dle.randn(3))))
    assert.matches("dle_graph_run: the graph takes 1 inputs, got 0", select(2, pcall(dle.core._cgraph_run, cg)))
    local cf = dle.graph.trace(function(x) return dle.cond(x:sum():gt(0), function(a) return a end,
                                                           function(a) return -a end, x) end, dle.randn(2))
    assert.matches("dle.graph.save: cond nodes %(control flow%) cannot be saved yet",
      select(2, pcall(dle.graph.save, dir .. "/cf.dleg", cf)))
    local junk = dir .. "/junk.dleg"
    H.write_file(junk, "not a graph at all, just some text that is long enough")
    assert.matches("dle.graph.load: .* is not a dle graph file", select(2, pcall(dle.graph.load, junk)))
    assert.matches("dle_graph_load: .* is not a dle graph file", select(2, pcall(dle.core._cgraph_load, junk)))
    -- a failed save leaves the file that was there
    local path = dir .. "/keep.dleg"
    dle.graph.save(path, g)
    local before = H.read_file(path)
    assert.is_false(pcall(dle.graph.save, path, cf))
    assert.are.equal(before, H.read_file(path))
  end)
end)

describe("examples/deploy_c", function()
  local data = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"
  local have = io.open(data, "rb")
  if have then have:close() end
  local name = "classifies the Fashion-MNIST test set from C with the accuracy of the Lua model it was frozen from"
  if not have then pending(name .. " (needs the Debian package dataset-fashion-mnist)"); return end
  it(name, function()
    local models = dofile(root .. "/examples/fashion_mnist/models.lua")
    dle.manual_seed(1)
    local net = models.cnn({width = 8})
    -- a few training steps on the first 2048 training images, so the accuracy means something
    local tx, ty = dle.data.fashion_mnist("train")
    local opt = dle.optim.Adam(net:parameters(), {lr = 3e-3})
    net:train()
    for s = 0, 31 do
      local xb, yb = tx:narrow(1, s * 64 + 1, 64), ty:narrow(1, s * 64 + 1, 64)
      local loss = nn.functional.cross_entropy(net(xb), yb)
      opt:zero_grad(); loss:backward(); opt:step()
    end
    local vx, vy = dle.data.fashion_mnist("test")
    local count, batch = 1000, 100
    local g = dle.freeze(net, dle.zeros(batch, 1, 28, 28))
    local path = dir .. "/cnn.dleg"
    dle.graph.save(path, g)
    -- the frozen graph's accuracy over the first 1000 test images, in Lua
    local correct = 0
    for s = 0, count // batch - 1 do
      local pred = g:run(vx:narrow(1, s * batch + 1, batch)):argmax(2)
      correct = correct + pred:eq(vy:narrow(1, s * batch + 1, batch)):sum():item()
    end
    local p = io.popen(build .. "/bin/deploy_classify " .. path .. " " .. data .. " "
                       .. data:gsub("images%-idx3", "labels-idx1") .. " " .. count .. " 2>&1")
    local out = p:read("a")
    p:close()
    local got = tonumber(out:match("accuracy (%d+)/1000"))
    assert.is_not_nil(got, out)
    assert.are.equal(correct, got, out)
    assert.is_true(correct > 500, "the briefly trained model should beat chance by far: " .. correct)
  end)
end)
