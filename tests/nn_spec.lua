--- dle.nn: modules (registration, naming, modes, state dicts, conversion, summary), layers,
-- losses, functional forms, initializers, gradient clipping and a short training run.
local dle = require("dle")
local H = require("helpers")
local nn = dle.nn
local F = nn.functional

local function lua_matvec(W, b, x)   -- y = W x + b for nested tables
  local y = {}
  for i = 1, #W do
    local s = b and b[i] or 0
    for j = 1, #x do s = s + W[i][j] * x[j] end
    y[i] = s
  end
  return y
end

local function log_softmax_row(row)
  local m = -math.huge
  for _, v in ipairs(row) do m = math.max(m, v) end
  local s = 0
  for _, v in ipairs(row) do s = s + math.exp(v - m) end
  local out = {}
  for i, v in ipairs(row) do out[i] = v - m - math.log(s) end
  return out
end

local function mlp(gen)
  return nn.Sequential(nn.Linear(4, 5, {generator = gen}), nn.Tanh(), nn.Linear(5, 3, {generator = gen}))
end

describe("nn.Linear", function()
  it("computes x W^T + b like a hand-written matrix-vector product", function()
    local lin = nn.Linear(3, 2)
    local W = {{1, -2, 0.5}, {0, 3, -1}}
    local b = {0.25, -0.5}
    dle.no_grad(function()
      lin.weight:copy_(dle.tensor(W))
      lin.bias:copy_(dle.tensor(b))
    end)
    local xs = {{1, 2, 3}, {-1, 0.5, 2}}
    local y = lin(dle.tensor(xs))
    H.assert_close(y, {lua_matvec(W, b, xs[1]), lua_matvec(W, b, xs[2])})
    -- batched 3-D input and no bias
    local nb = nn.Linear(3, 2, {bias = false})
    assert.is_nil(nb.bias)
    assert.are.equal(1, #nb:parameters())
    dle.no_grad(function() nb.weight:copy_(dle.tensor(W)) end)
    H.assert_close(nb(dle.tensor({xs})), {{lua_matvec(W, nil, xs[1]), lua_matvec(W, nil, xs[2])}})
  end)

  it("initializes weight and bias within U(-1/sqrt(in), 1/sqrt(in)) and spreads over the range", function()
    local lin = nn.Linear(64, 200, {generator = dle.Generator(1)})
    local bound = 1 / 8
    assert.is_true(lin.weight:abs():max():item() <= bound + 1e-7)
    assert.is_true(lin.bias:abs():max():item() <= bound + 1e-7)
    assert.is_true(lin.weight:abs():max():item() > 0.9 * bound)
    -- the variance of U(-a, a) is a^2 / 3
    assert.is_true(math.abs(lin.weight:var():item() - bound ^ 2 / 3) < 0.1 * bound ^ 2 / 3)
    assert.is_true(lin.weight.requires_grad and lin.bias.requires_grad)
  end)

  it("names the shapes when the input has the wrong number of features", function()
    local lin = nn.Linear(784, 10)
    H.assert_error(function() lin(dle.zeros(2, 5)) end, "Linear", "5 features", "784")
  end)
end)

describe("nn.Module", function()
  local Net = nn.Module:extend("Net")
  function Net:init()
    self.fc1 = nn.Linear(4, 3)
    self.scale = nn.Parameter(dle.ones(3))
    self.act = nn.ReLU()
    self.fc2 = nn.Linear(3, 2)
    self.not_a_param = dle.ones(2)            -- no requires_grad: a plain field
    self:register_buffer("running", dle.zeros(2))
  end
  function Net:forward(x) return self.fc2(self.act(self.fc1(x)) * self.scale) + self.running end

  it("registers parameters and submodules in assignment order with dotted names", function()
    local net = Net()
    local names = {}
    for name, p in net:named_parameters() do
      assert.is_true(dle.is_tensor(p))
      names[#names + 1] = name
    end
    assert.are.same({"fc1.weight", "fc1.bias", "scale", "fc2.weight", "fc2.bias"}, names)
    local ps = net:parameters()
    assert.are.equal(5, #ps)
    assert.are.equal(net.fc1.weight, ps[1])
    assert.are.equal(net.fc2.bias, ps[5])
    assert.are.equal(4, #net:modules())           -- net, fc1, act, fc2
    assert.are.equal(net, net:modules()[1])
    assert.are.equal(3, #net:children())
    assert.are.equal(3 * 4 + 3 + 3 + 2 * 3 + 2, net:num_parameters())
    local y = net(dle.ones(5, 4))
    assert.are.same({5, 2}, y:shape())
  end)

  it("names parameters of nested modules and lists of modules by their path", function()
    local Block = nn.Module:extend("Block")
    function Block:init() self.inner = nn.Sequential(nn.Linear(2, 2), nn.GELU(), nn.Linear(2, 1)) end
    function Block:forward(x) return self.inner(x) end
    local Outer = nn.Module:extend("Outer")
    function Outer:init() self.blocks = {Block(), Block()}; self.head = nn.Linear(1, 1, {bias = false}) end
    function Outer:forward(x) return self.head(self.blocks[2](x) + self.blocks[1](x)) end
    local m = Outer()
    local names = {}
    for _, e in ipairs(m:named_parameters()) do names[#names + 1] = e[1] end
    assert.are.same({"blocks.1.inner.1.weight", "blocks.1.inner.1.bias", "blocks.1.inner.3.weight",
      "blocks.1.inner.3.bias", "blocks.2.inner.1.weight", "blocks.2.inner.1.bias",
      "blocks.2.inner.3.weight", "blocks.2.inner.3.bias", "head.weight"}, names)
    -- a tensor shared by two modules is listed once
    local shared = nn.Linear(2, 2)
    local seq = nn.Sequential(shared, shared)
    assert.are.equal(2, #seq:parameters())
    assert.are.same({1, 1}, m(dle.ones(1, 2)):shape())
  end)

  it("propagates train() and eval() to every submodule", function()
    local net = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(0.5), nn.ReLU()))
    for _, m in ipairs(net:modules()) do assert.is_true(m.training) end
    assert.are.equal(net, net:eval())
    for _, m in ipairs(net:modules()) do assert.is_false(m.training) end
    assert.is_false(net[2][1].training)
    net:train()
    for _, m in ipairs(net:modules()) do assert.is_true(m.training) end
  end)

  it("zero_grad clears the gradients of all parameters", function()
    local net = mlp(dle.Generator(3))
    net(dle.ones(2, 4)):sum():backward()
    for _, p in ipairs(net:parameters()) do assert.is_not_nil(p.grad) end
    net:zero_grad()
    for _, p in ipairs(net:parameters()) do assert.is_nil(p.grad) end
  end)

  it("state_dict round trip into a fresh model gives identical outputs (buffers included)", function()
    local a, b = Net(), Net()
    dle.no_grad(function() a.running:fill_(0.5) end)
    local x = dle.randn(3, 4, {generator = dle.Generator(5)})
    local sd = a:state_dict()
    local keys = {}
    for k in pairs(sd) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.are.same({"fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight", "running", "scale"}, keys)
    assert.is_false(a(x):equal(b(x)))
    b:load_state_dict(sd)
    assert.is_true(a(x):equal(b(x)))
    assert.is_true(b.fc1.weight.requires_grad)
    -- loading copies: later changes to a do not leak into b
    dle.no_grad(function() a.fc1.weight:fill_(0) end)
    assert.is_false(a(x):equal(b(x)))
  end)

  it("load_state_dict reports missing and unexpected keys, shape and dtype mismatches", function()
    local net = Net()
    local sd = net:state_dict()
    sd["fc1.weight"] = nil
    sd["extra.weight"] = dle.zeros(1)
    H.assert_error(function() net:load_state_dict(sd) end, "load_state_dict", "missing keys: fc1.weight",
      "unexpected keys: extra.weight")
    local missing, unexpected = net:load_state_dict(sd, {strict = false})
    assert.are.same({"fc1.weight"}, missing)
    assert.are.same({"extra.weight"}, unexpected)
    sd = net:state_dict()
    sd["fc2.weight"] = dle.zeros(3, 2)
    H.assert_error(function() net:load_state_dict(sd) end, "fc2.weight", "{3,2}", "{2,3}")
    sd = net:state_dict()
    sd["fc2.bias"] = dle.zeros(2, {dtype = "float64"})
    H.assert_error(function() net:load_state_dict(sd) end, "fc2.bias", "float64", "float32")
  end)

  it("to('float64') converts parameters and buffers in place, keeping requires_grad", function()
    local net = Net()
    local w32 = net.fc1.weight:clone()
    assert.are.equal(net, net:to("float64"))
    for name, p in net:named_parameters() do
      assert.are.equal("float64", p:dtype(), name)
      assert.is_true(p.requires_grad, name)
      assert.is_true(p.is_leaf, name)
    end
    assert.are.equal("float64", net.running:dtype())
    H.assert_close(net.fc1.weight, w32:totable(), {rtol = 0, atol = 0})
    local y = net(dle.ones(2, 4, {dtype = "float64"}))
    assert.are.equal("float64", y:dtype())
    y:sum():backward()
    assert.are.equal("float64", net.fc1.weight.grad:dtype())
    H.assert_error(function() net:to("int64") end, "to", "int64")
  end)

  it("to() with the current dtype keeps the same tensors; zero_grad can zero instead of clearing", function()
    local lin = nn.Linear(2, 2)
    local w = lin.weight
    lin:to("float32"):to("cpu")
    assert.are.equal(w, lin.weight)
    lin(dle.ones(1, 2)):sum():backward()
    lin:zero_grad({set_to_none = false})
    H.assert_close(lin.weight.grad, {{0, 0}, {0, 0}})
  end)

  it("summary reports parameter counts and 2*m*n*k FLOPs for a 784-256-128-10 MLP", function()
    local net = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
      nn.Linear(128, 10))
    local s = net:summary({2, 1, 28, 28}, {print = false})
    assert.are.equal(784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10, s.total_params)
    assert.are.equal(235146, s.trainable_params)
    assert.are.equal(2 * 2 * (784 * 256 + 256 * 128 + 128 * 10), s.total_flops)
    assert.are.equal(6, #s.layers)
    assert.are.same({"1", "Flatten", {2, 784}, 0, 0}, {s.layers[1].name, s.layers[1].type,
      s.layers[1].output_shape, s.layers[1].params, s.layers[1].flops})
    assert.are.same({"2", "Linear", {2, 256}, 200960, 2 * 2 * 784 * 256, 2 * 256 * 4},
      {s.layers[2].name, s.layers[2].type, s.layers[2].output_shape, s.layers[2].params, s.layers[2].flops,
       s.layers[2].memory})
    assert.are.same({2, 10}, s.layers[6].output_shape)
    -- the forward ran without recording: no gradients appear
    for _, p in ipairs(net:parameters()) do assert.is_nil(p.grad) end
  end)

  it("prints its structure and refuses non-module arguments to Sequential", function()
    local s = tostring(nn.Sequential(nn.Linear(2, 3), nn.Softmax(2)))
    assert.truthy(s:find("(1): Linear(in_features=2, out_features=3, bias=true)", 1, true))
    assert.truthy(s:find("(2): Softmax(dim=2)", 1, true))
    H.assert_error(function() nn.Sequential(nn.ReLU(), 3) end, "Sequential", "argument 2")
  end)
end)

describe("nn layers", function()
  it("activations match their elementwise definitions", function()
    local v = {-2, -0.5, 0, 0.5, 3}
    local x = dle.tensor(v)
    local relu, sig, tanh, silu = {}, {}, {}, {}
    for i, a in ipairs(v) do
      relu[i] = math.max(a, 0)
      sig[i] = 1 / (1 + math.exp(-a))
      tanh[i] = (math.exp(a) - math.exp(-a)) / (math.exp(a) + math.exp(-a))
      silu[i] = a * sig[i]
    end
    H.assert_close(nn.ReLU()(x), relu)
    H.assert_close(nn.Sigmoid()(x), sig)
    H.assert_close(nn.Tanh()(x), tanh)
    H.assert_close(nn.SiLU()(x), silu)
    local gelu = {}
    for i, a in ipairs(v) do gelu[i] = 0.5 * a * (1 + H.erf(a / math.sqrt(2))) end
    H.assert_close(nn.GELU()(x), gelu, {rtol = 1e-3, atol = 1e-3})
    local ls = log_softmax_row(v)
    local sm = {}
    for i, l in ipairs(ls) do sm[i] = math.exp(l) end
    H.assert_close(nn.Softmax(1)(x), sm)
    H.assert_close(nn.LogSoftmax()(x), ls)
  end)

  it("Flatten keeps dim 1 and merges the rest", function()
    local x = dle.arange(0, 24):view(2, 3, 4)
    local y = nn.Flatten()(x)
    assert.are.same({2, 12}, y:shape())
    assert.are.equal(13, y[2][2])
    assert.are.same({24}, nn.Flatten(1)(x):shape())
    assert.are.same({2, 12}, nn.Flatten()(x:transpose(2, 3)):shape())
  end)

  it("Dropout is the identity in eval mode and with p = 0", function()
    local x = dle.randn(4, 5)
    local d = nn.Dropout(0.3):eval()
    assert.are.equal(x, d(x))
    assert.is_true(nn.Dropout(0)(x):equal(x))
  end)

  it("Dropout zeroes about p of the elements, scales the rest by 1/(1-p), is deterministic under a seed", function()
    local p = 0.25
    local x = dle.ones(100, 100)
    local y = nn.Dropout(p, {generator = dle.Generator(42)})(x)
    local zeros = y:eq(0):to("float32"):sum():item() / 1e4
    assert.is_true(math.abs(zeros - p) < 0.02, "fraction of zeros " .. zeros)
    local kept = y:ne(0)
    local scale = 1 / (1 - p)
    -- every kept value is exactly 1/(1-p)
    assert.is_true(y:masked_fill(kept:logical_not(), scale):eq(scale):all():item())
    local y2 = nn.Dropout(p, {generator = dle.Generator(42)})(x)
    assert.is_true(y:equal(y2))
    local y3 = nn.Dropout(p, {generator = dle.Generator(43)})(x)
    assert.is_false(y:equal(y3))
    -- the gradient is the same mask times the scale
    local xg = dle.ones(10, 10, {requires_grad = true})
    local out = F.dropout(xg, 0.5, true, {generator = dle.Generator(1)})
    out:sum():backward()
    assert.is_true(xg.grad:equal(out:detach()))
    H.assert_error(function() nn.Dropout(1.5) end, "Dropout", "1.5")
  end)

  it("Embedding picks rows with 1-based int64 ids of any shape and rejects bad ids", function()
    local e = nn.Embedding(5, 3)
    local w = e.weight:totable()
    local ids = dle.tensor({{5, 1}, {2, 5}}, {dtype = "int64"})
    local y = e(ids)
    assert.are.same({2, 2, 3}, y:shape())
    H.assert_close(y, {{w[5], w[1]}, {w[2], w[5]}})
    y:sum():backward()
    H.assert_close(e.weight.grad, {{1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {2, 2, 2}})
    H.assert_error(function() e(dle.tensor({6}, {dtype = "int64"})) end, "embedding", "6", "1..5")
    H.assert_error(function() e(dle.tensor({1})) end, "embedding", "int64", "float32")
    -- N(0, 1) init
    local big = nn.Embedding(200, 50, {generator = dle.Generator(2)})
    assert.is_true(math.abs(big.weight:std():item() - 1) < 0.05)
  end)

  it("LayerNorm matches a Lua reference (biased variance, eps 1e-5) and applies weight and bias", function()
    local rows = {{1, 2, 3, 4}, {-1, 0.5, 0.5, 7}}
    local ln = nn.LayerNorm(4)
    H.assert_close(ln.weight, {1, 1, 1, 1})
    H.assert_close(ln.bias, {0, 0, 0, 0})
    dle.no_grad(function()
      ln.weight:copy_(dle.tensor({1, 2, 0.5, -1}))
      ln.bias:copy_(dle.tensor({0, 1, 0, 0.25}))
    end)
    local w, b = {1, 2, 0.5, -1}, {0, 1, 0, 0.25}
    local expect = {}
    for r, row in ipairs(rows) do
      local m, v = 0, 0
      for _, a in ipairs(row) do m = m + a / 4 end
      for _, a in ipairs(row) do v = v + (a - m) ^ 2 / 4 end
      expect[r] = {}
      for i, a in ipairs(row) do expect[r][i] = (a - m) / math.sqrt(v + 1e-5) * w[i] + b[i] end
    end
    H.assert_close(ln(dle.tensor(rows)), expect, {rtol = 1e-5, atol = 1e-5})
    H.assert_error(function() ln(dle.zeros(2, 3)) end, "LayerNorm", "{2,3}", "4")
  end)

  it("LayerNorm passes gradcheck in float64 for input, weight and bias", function()
    local g = dle.Generator(7)
    local x = dle.randn(3, 5, {dtype = "float64", generator = g}):requires_grad_(true)
    local w = dle.randn(5, {dtype = "float64", generator = g}):requires_grad_(true)
    local b = dle.randn(5, {dtype = "float64", generator = g}):requires_grad_(true)
    local ok, err = dle.gradcheck(function(x_, w_, b_) return F.layer_norm(x_, w_, b_) end, {x, w, b})
    assert.is_true(ok, "max error " .. tostring(err))
  end)

  it("F.layer_norm also takes PyTorch's order (x, normalized_shape, weight, bias, eps)", function()
    local g = dle.Generator(3)
    local x = dle.randn(2, 3, 4, {dtype = "float64", generator = g})
    local w = dle.randn(3, 4, {dtype = "float64", generator = g})
    local b = dle.randn(3, 4, {dtype = "float64", generator = g})
    H.assert_close(F.layer_norm(x, {3, 4}, w, b, 1e-3), F.layer_norm(x, w, b, 1e-3, {3, 4}):totable(),
                   {dtype = "float64"})
    H.assert_close(F.layer_norm(x, 4), F.layer_norm(x, nil, nil, nil, 4):totable(), {dtype = "float64"})
    H.assert_error(function() F.layer_norm(x, {4}, "w") end, "layer_norm", "weight")
  end)

  it("F.one_hot is t:one_hot as a function, as PyTorch's F.one_hot", function()
    local c = dle.tensor({{1, 3}}, {dtype = "int64"})
    assert.same({{{1, 0, 0, 0}, {0, 0, 1, 0}}}, F.one_hot(c, 4):totable())
    assert.same({2, 3}, F.one_hot(dle.tensor({3, 1}, {dtype = "int64"})):shape())
    H.assert_error(function() F.one_hot({1, 2}, 3) end, "one_hot", "classes")
  end)
end)

describe("nn losses", function()
  local logits_t = {{2, 1, 0.1}, {0.5, 2.5, 0.3}, {-1, 0, 1}, {0.2, 0.2, 3}}
  local targets_t = {1, 2, 3, 1}
  local function per_sample(smoothing)
    local out = {}
    for i, row in ipairs(logits_t) do
      local lp = log_softmax_row(row)
      local l = -lp[targets_t[i]]
      if smoothing then
        local s = 0
        for _, v in ipairs(lp) do s = s - v end
        l = (1 - smoothing) * l + smoothing * s / #lp
      end
      out[i] = l
    end
    return out
  end
  local function sum(t) local s = 0 for _, v in ipairs(t) do s = s + v end return s end
  local logits = dle.tensor(logits_t)
  local targets = dle.tensor(targets_t, {dtype = "int64"})

  it("CrossEntropyLoss matches -log softmax at the target for mean, sum and none", function()
    local ref = per_sample()
    H.assert_close(nn.CrossEntropyLoss()(logits, targets), sum(ref) / 4)
    H.assert_close(nn.CrossEntropyLoss({reduction = "sum"})(logits, targets), sum(ref))
    H.assert_close(nn.CrossEntropyLoss({reduction = "none"})(logits, targets), ref)
    H.assert_error(function() nn.CrossEntropyLoss({reduction = "avg"})(logits, targets) end, "reduction", "avg")
    H.assert_error(function() nn.CrossEntropyLoss({typo = 1}) end, "CrossEntropyLoss", "typo")
  end)

  it("CrossEntropyLoss excludes ignore_index targets from the loss and from the mean", function()
    local t = dle.tensor({1, -100, 3, -100}, {dtype = "int64"})
    local ref = per_sample()
    H.assert_close(F.cross_entropy(logits, t, {ignore_index = -100}), (ref[1] + ref[3]) / 2)
    H.assert_close(F.cross_entropy(logits, t, {ignore_index = -100, reduction = "none"}), {ref[1], 0, ref[3], 0})
    -- the ignored rows get no gradient
    local x = dle.tensor(logits_t, {requires_grad = true})
    F.cross_entropy(x, t, {ignore_index = -100}):backward()
    H.assert_close(x.grad[2], {0, 0, 0})
  end)

  it("CrossEntropyLoss with label smoothing mixes in the uniform distribution", function()
    local ref = per_sample(0.1)
    H.assert_close(nn.CrossEntropyLoss({label_smoothing = 0.1})(logits, targets), sum(ref) / 4)
    H.assert_close(F.cross_entropy(logits, targets, {label_smoothing = 0.1, reduction = "none"}), ref)
  end)

  it("cross_entropy's gradient is (softmax - onehot) / N", function()
    local x = dle.tensor(logits_t, {requires_grad = true})
    F.cross_entropy(x, targets):backward()
    local expect = {}
    for i, row in ipairs(logits_t) do
      local lp = log_softmax_row(row)
      expect[i] = {}
      for c = 1, 3 do expect[i][c] = (math.exp(lp[c]) - (c == targets_t[i] and 1 or 0)) / 4 end
    end
    H.assert_close(x.grad, expect)
  end)

  it("cross_entropy takes {N, C, d} logits with {N, d} targets, and probability targets", function()
    -- logits {2, 3, 2}: sample n, position k has the class row logits[n][.][k]
    local l3 = dle.tensor({{{2, 0.5}, {1, 2.5}, {0.1, 0.3}}, {{-1, 0.2}, {0, 0.2}, {1, 3}}})
    local t3 = dle.tensor({{1, 2}, {3, 1}}, {dtype = "int64"})
    local ref = per_sample()
    H.assert_close(F.cross_entropy(l3, t3, {reduction = "none"}), {{ref[1], ref[2]}, {ref[3], ref[4]}})
    -- one-hot probabilities give the same loss as class numbers
    local probs = targets:one_hot(3):to("float32")
    H.assert_close(F.cross_entropy(logits, probs), sum(ref) / 4)
    H.assert_error(function() F.cross_entropy(logits, dle.tensor({1, 2, 4, 1}, {dtype = "int64"})) end,
      "cross_entropy", "target 4", "3 classes")
    H.assert_error(function() F.cross_entropy(logits, dle.tensor({1, 2}, {dtype = "int64"})) end,
      "cross_entropy", "{4,3}", "{4}", "{2}")
  end)

  it("cross_entropy (smoothing, ignore_index) and BCE-with-logits pass gradcheck in float64", function()
    local g = dle.Generator(11)
    local x = dle.randn(5, 4, {dtype = "float64", generator = g}):requires_grad_(true)
    local t = dle.tensor({1, 4, -1, 2, 3}, {dtype = "int64"})
    local ok, err = dle.gradcheck(function(z)
      return F.cross_entropy(z, t, {ignore_index = -1, label_smoothing = 0.2})
    end, {x})
    assert.is_true(ok, "cross_entropy max error " .. tostring(err))
    local y = dle.rand(5, 4, {dtype = "float64", generator = g})
    ok, err = dle.gradcheck(function(z) return F.binary_cross_entropy_with_logits(z, y) end, {x})
    assert.is_true(ok, "bce max error " .. tostring(err))
  end)

  it("NLLLoss picks -logp at the target, with ignore_index and reductions", function()
    local lp = {{-0.1, -2, -3}, {-1.5, -0.5, -2}}
    local x = dle.tensor(lp)
    local t = dle.tensor({2, 1}, {dtype = "int64"})
    H.assert_close(nn.NLLLoss()(x, t), (2 + 1.5) / 2)
    H.assert_close(nn.NLLLoss({reduction = "sum"})(x, t), 3.5)
    H.assert_close(nn.NLLLoss({reduction = "none"})(x, t), {2, 1.5})
    H.assert_close(nn.NLLLoss({ignore_index = 1})(x, t), 2)
  end)

  it("MSELoss is the mean of squared differences and rejects shape mismatches", function()
    local a, b = dle.tensor({{1, 2}, {3, 4}}), dle.tensor({{0, 2}, {5, 3.5}})
    H.assert_close(nn.MSELoss()(a, b), (1 + 0 + 4 + 0.25) / 4)
    H.assert_close(nn.MSELoss({reduction = "sum"})(a, b), 5.25)
    H.assert_close(F.mse_loss(a, b, {reduction = "none"}), {{1, 0}, {4, 0.25}})
    H.assert_error(function() F.mse_loss(a, dle.zeros(2)) end, "mse_loss", "{2,2}", "{2}")
  end)

  it("BCEWithLogitsLoss matches -[y log s(x) + (1-y) log(1-s(x))] and stays finite for large logits", function()
    local xs, ys = {-3, -0.5, 0, 2, 4}, {0, 1, 0.5, 1, 0}
    local ref = {}
    for i, x in ipairs(xs) do
      local s = 1 / (1 + math.exp(-x))
      ref[i] = -(ys[i] * math.log(s) + (1 - ys[i]) * math.log(1 - s))
    end
    local x, y = dle.tensor(xs), dle.tensor(ys)
    H.assert_close(nn.BCEWithLogitsLoss({reduction = "none"})(x, y), ref)
    H.assert_close(nn.BCEWithLogitsLoss()(x, y), sum(ref) / 5)
    H.assert_close(F.binary_cross_entropy_with_logits(dle.tensor({100, -100}), dle.tensor({0, 1}),
      {reduction = "none"}), {100, 100})
    -- pos_weight w multiplies the positive term
    local pw = {}
    for i, xv in ipairs(xs) do
      local s = 1 / (1 + math.exp(-xv))
      pw[i] = -(2 * ys[i] * math.log(s) + (1 - ys[i]) * math.log(1 - s))
    end
    H.assert_close(F.binary_cross_entropy_with_logits(x, y, {pos_weight = 2, reduction = "none"}), pw)
  end)
end)

describe("nn.init", function()
  local I = nn.init
  local function stats(t)
    return t:mean():item(), t:std():item(), t:min():item(), t:max():item()
  end

  it("xavier_uniform_ and kaiming_uniform_ stay within their bounds with the uniform variance", function()
    local t = dle.empty(300, 200)
    assert.are.equal(t, I.xavier_uniform_(t, 1, {generator = dle.Generator(1)}))
    local a = math.sqrt(6 / 500)
    local _, sd, lo, hi = stats(t)
    assert.is_true(lo >= -a and hi <= a and hi > 0.95 * a)
    assert.is_true(math.abs(sd - a / math.sqrt(3)) < 0.02 * a)
    I.kaiming_uniform_(t, {a = math.sqrt(5)})     -- the Linear default: bound 1/sqrt(fan_in)
    _, _, lo, hi = stats(t)
    assert.is_true(lo >= -1 / math.sqrt(200) - 1e-7 and hi <= 1 / math.sqrt(200) + 1e-7)
    I.kaiming_uniform_(t, {nonlinearity = "relu", mode = "fan_out"})
    _, sd = stats(t)
    assert.is_true(math.abs(sd - math.sqrt(2 / 300)) < 0.02 * math.sqrt(2 / 300))
  end)

  it("xavier_normal_ and kaiming_normal_ have the prescribed std", function()
    local t = dle.empty(300, 200)
    local m, sd = stats(I.xavier_normal_(t, 2))
    assert.is_true(math.abs(m) < 0.01)
    assert.is_true(math.abs(sd - 2 * math.sqrt(2 / 500)) < 0.02 * 2 * math.sqrt(2 / 500))
    sd = select(2, stats(I.kaiming_normal_(t, {nonlinearity = "relu"})))
    assert.is_true(math.abs(sd - math.sqrt(2 / 200)) < 0.02 * math.sqrt(2 / 200))
    H.assert_error(function() I.xavier_normal_(dle.empty(5)) end, "xavier_normal_", "2 dims")
  end)

  it("trunc_normal_ keeps every value in [a, b] and defaults to std 1/sqrt(fan_in), +-3 std", function()
    local t = dle.empty(200, 100)
    I.trunc_normal_(t, 1, -0.5, 0.5, {generator = dle.Generator(9)})
    local _, sd, lo, hi = stats(t)
    assert.is_true(lo >= -0.5 and hi <= 0.5 and hi > 0.49)
    -- N(0,1) truncated to [-0.5, 0.5] has std ~0.2863
    assert.is_true(math.abs(sd - 0.2863) < 0.01, "std " .. sd)
    I.trunc_normal_(t)
    _, sd, lo, hi = stats(t)
    assert.is_true(lo >= -0.3 and hi <= 0.3)
    assert.is_true(math.abs(sd - 0.1 * 0.9866) < 0.005, "std " .. sd)
  end)

  it("zeros_, ones_, normal_, uniform_ work in place on parameters that require grad", function()
    local p = dle.empty(50, 40, {requires_grad = true})
    assert.are.equal(p, I.zeros_(p))
    assert.are.equal(0, p:abs():sum():item())
    I.ones_(p)
    assert.are.equal(2000, p:sum():item())
    I.normal_(p, 3, 0.5)
    local m, sd = stats(p)
    assert.is_true(math.abs(m - 3) < 0.05 and math.abs(sd - 0.5) < 0.03)
    I.uniform_(p, 2, 4)
    local _, _, lo, hi = stats(p)
    assert.is_true(lo >= 2 and hi <= 4)
    assert.is_true(p.requires_grad and p.is_leaf)
  end)
end)

describe("nn.utils.clip_grad_norm_", function()
  it("returns the total norm and scales gradients to max_norm only when above it", function()
    local a = dle.zeros(2, {requires_grad = true})
    local b = dle.zeros(1, {requires_grad = true})
    ;((a * dle.tensor({3, 0})):sum() + (b * 4):sum()):backward()   -- grads {3, 0} and {4}: norm 5
    local n = nn.utils.clip_grad_norm_({a, b}, 1)
    assert.are.equal("float", math.type(n))
    assert.is_true(math.abs(n - 5) < 1e-6)
    H.assert_close(a.grad, {0.6, 0}, {atol = 1e-5})
    H.assert_close(b.grad, {0.8}, {atol = 1e-5})
    local n2 = nn.utils.clip_grad_norm_({a, b}, 10)
    assert.is_true(math.abs(n2 - 1) < 1e-5)
    H.assert_close(b.grad, {0.8}, {atol = 1e-5})
  end)

  it("supports norm_type 1, 3 and math.huge (the max norm)", function()
    local function grads()
      local a, b = dle.zeros(2, {requires_grad = true}), dle.zeros(1, {requires_grad = true})
      ;((a * dle.tensor({3, -2})):sum() + (b * 4):sum()):backward()   -- grads {3, -2} and {4}
      return a, b
    end
    local a, b = grads()
    assert.is_true(math.abs(nn.utils.clip_grad_norm_({a, b}, 100, {norm_type = 1}) - 9) < 1e-5)
    assert.is_true(math.abs(nn.utils.clip_grad_norm_({a, b}, 100, {norm_type = 3}) - (27 + 8 + 64) ^ (1 / 3)) < 1e-5)
    local n = nn.utils.clip_grad_norm_({a, b}, 2, {norm_type = math.huge})
    assert.is_true(math.abs(n - 4) < 1e-6)
    H.assert_close(b.grad, {2}, {atol = 1e-5})          -- scaled by 2 / 4
    H.assert_close(a.grad, {1.5, -1}, {atol = 1e-5})
  end)
end)

describe("nn training", function()
  it("a 2-layer MLP trained by plain gradient descent fits a separable dataset", function()
    local g = dle.Generator(123)
    local n = 128
    local x = dle.randn(n, 2, {generator = g})
    -- class 2 when x1 + x2 > 0, else class 1
    local y = (x:sum(2):gt(0)):to("int64") + 1
    local net = nn.Sequential(nn.Linear(2, 16, {generator = g}), nn.ReLU(), nn.Linear(16, 2, {generator = g}))
    local loss_fn = nn.CrossEntropyLoss()
    local lr = 0.5
    local first, last
    for step = 1, 150 do
      net:zero_grad()
      local loss = loss_fn(net(x), y)
      loss:backward()
      dle.no_grad(function()
        for _, p in ipairs(net:parameters()) do p:add_(p.grad * -lr) end
      end)
      if step == 1 then first = loss:item() end
      last = loss:item()
    end
    assert.is_true(first > 0.4, "initial loss " .. first)
    assert.is_true(last < 0.1, "final loss " .. last)
    local acc = net(x):argmax(2):eq(y):to("float32"):mean():item()
    assert.is_true(acc > 0.97, "accuracy " .. acc)
  end)
end)

describe("loading dle.nn, dle.optim and dle.data", function()
  local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/[^/]*$") or "."
  local function run(code)
    local p = assert(io.popen(string.format("%q -e %q 2>&1", root .. "/scripts/dle", code)))
    local out = p:read("a")
    p:close()
    return out
  end

  it("waits until first use, then gives the same tables as require", function()
    local out = run([[
      local dle = require("dle")
      io.write(tostring(package.loaded["dle.nn"] == nil), " ", tostring(package.loaded["dle.optim"] == nil), " ")
      io.write(tostring(dle.nn == require("dle.nn")), " ", tostring(dle.optim.Adam ~= nil), " ")
      io.write(tostring(dle.data == require("dle.data")), " ", tostring(dle.nn.Conv2d ~= nil), " ")
      io.write(tostring(dle.nn.MultiheadAttention ~= nil and dle.nn.TransformerBlock ~= nil), " ")
      io.write(tostring(dle.nope))]])
    assert.equal("true true true true true true true nil", out)
  end)

  it("registers every layer when dle.nn is required before dle", function()
    local out = run([[
      local nn = require("dle.nn")
      io.write(tostring(require("dle").nn == nn), " ", tostring(nn.BatchNorm2d ~= nil and nn.Conv2d ~= nil))]])
    assert.equal("true true", out)
  end)
end)

describe("nn layer sizes", function()
  it("refuse non-positive or non-integer sizes, naming the layer, the sizes expected and those given", function()
    for _, c in ipairs({
      {function() return nn.Linear(0, 3) end, "Linear: expected positive integer sizes (in, out), got 0, 3"},
      {function() return nn.Embedding(2, "x") end, "Embedding: expected positive integer sizes (n, d), got 2, x"},
      {function() return nn.MultiheadAttention(8, 0) end,
       "MultiheadAttention: expected positive integers (d, heads), got 8, 0"},
      {function() return nn.Conv2d(1.5, 2, 3) end,
       "Conv2d: expected positive integer channel counts (cin, cout), got 1.5, 2"},
      {function() return nn.TransformerBlock(-1, 2) end,
       "TransformerBlock: expected a positive integer size d, got -1"},
    }) do
      H.assert_error(c[1], c[2])
    end
  end)
end)

describe("nn.Module forward hooks", function()
  it("a pre-hook sees the arguments and may replace them; a hook sees the output and may replace it", function()
    local lin = nn.Linear(3, 2)
    local seen = {}
    local h1 = lin:register_forward_pre_hook(function(m, args)
      seen[#seen + 1] = {m, args.n, args[1]:size(1)}
      return {args[1] * 0}
    end)
    local h2 = lin:register_forward_hook(function(_, args, out)
      seen[#seen + 1] = {args[1]:sum():item(), out:size(2)}
      return out + 1
    end)
    local x = dle.ones(4, 3)
    local y = lin(x)
    -- the forward saw zeros, so y is the bias plus 1 in every row
    local want = (lin.bias + 1):view(1, 2):expand(4, 2)
    assert.is_true(H.max_diff(y, want) < 1e-6)
    assert.are.equal(lin, seen[1][1])
    assert.are.same({1, 4}, {seen[1][2], seen[1][3]})
    assert.are.same({0, 2}, seen[2])
    h1:remove(); h2:remove(); h2:remove()
    assert.is_true(H.max_diff(lin(x), x:matmul(lin.weight:t()) + lin.bias) < 1e-6)
    assert.are.equal(2, #seen, "removed hooks run no more")
  end)

  it("hooks returning nil keep arguments and output; several run in registration order; a bad one is an error",
     function()
    local lin = nn.Linear(2, 2)
    local order = {}
    lin:register_forward_pre_hook(function() order[#order + 1] = "a" end)
    lin:register_forward_pre_hook(function() order[#order + 1] = "b" end)
    lin:register_forward_hook(function() order[#order + 1] = "c" end)
    local x = dle.randn(1, 2)
    assert.is_true(H.max_diff(lin(x), x:matmul(lin.weight:t()) + lin.bias) < 1e-6)
    assert.are.same({"a", "b", "c"}, order)
    lin:register_forward_pre_hook(function() return 5 end)
    H.assert_error(function() lin(x) end, "Linear: a forward pre-hook returned a number")
    H.assert_error(function() lin:register_forward_hook(3) end, "register_forward_hook")
  end)
end)
