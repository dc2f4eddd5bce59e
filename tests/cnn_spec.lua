--- dle.nn convolutional layers: BatchNorm1d/2d (train/eval semantics, running statistics,
-- buffers, gradients), Conv2d/MaxPool2d/AvgPool2d (bookkeeping, and values once the native
-- dle.conv2d/max_pool2d/avg_pool2d exist) and a short CNN training run on Fashion-MNIST.
local dle = require("dle")
local H = require("helpers")
local nn = dle.nn
local F = nn.functional

local have_conv = type(dle.conv2d) == "function" and type(dle.max_pool2d) == "function"
  and type(dle.avg_pool2d) == "function"
local CONV_MISSING = "native dle.conv2d / max_pool2d / avg_pool2d not available yet: skipped"
local FM_PATH = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"

-- it() when the native convolution ops exist, a pending entry saying why otherwise.
local function it_conv(name, fn)
  if have_conv then it(name, fn) else pending(name .. " (" .. CONV_MISSING .. ")") end
end

local EPS = 1e-5
local function norm(v, m, var) return (v - m) / math.sqrt(var + EPS) end

describe("BatchNorm1d", function()
  -- x {N = 2, C = 2}: channel 1 holds 1, 3 (mean 2, biased var 1, unbiased 2),
  -- channel 2 holds 2, 6 (mean 4, biased var 4, unbiased 8).
  local x = {{1, 2}, {3, 6}}

  it("registers weight (ones) and bias (zeros) as parameters and the running statistics as buffers", function()
    local bn = nn.BatchNorm1d(2)
    local names = {}
    for _, e in ipairs(bn:named_parameters()) do names[#names + 1] = e[1] end
    assert.are.same({"weight", "bias"}, names)
    H.assert_close(bn.weight, {1, 1})
    H.assert_close(bn.bias, {0, 0})
    local bufs = {}
    for _, e in ipairs(bn:named_buffers()) do bufs[#bufs + 1] = e[1] end
    assert.are.same({"running_mean", "running_var", "num_batches_tracked"}, bufs)
    H.assert_close(bn.running_mean, {0, 0})
    H.assert_close(bn.running_var, {1, 1})
  end)

  it("normalizes with the batch mean and biased variance in training mode, then scales and shifts", function()
    local bn = nn.BatchNorm1d(2)
    dle.no_grad(function()
      bn.weight:copy_(dle.tensor({2, 3}))
      bn.bias:copy_(dle.tensor({0.5, -1}))
    end)
    local y = bn(dle.tensor(x))
    H.assert_close(y, {{2 * norm(1, 2, 1) + 0.5, 3 * norm(2, 4, 4) - 1},
                       {2 * norm(3, 2, 1) + 0.5, 3 * norm(6, 4, 4) - 1}}, {atol = 1e-5})
  end)

  it("updates running_mean and running_var (unbiased) in place with momentum 0.1, twice", function()
    local bn = nn.BatchNorm1d(2)
    local rm, rv = bn.running_mean, bn.running_var
    bn(dle.tensor(x))
    -- 0.9 * 0 + 0.1 * mean; 0.9 * 1 + 0.1 * unbiased var
    H.assert_close(bn.running_mean, {0.2, 0.4})
    H.assert_close(bn.running_var, {0.9 + 0.2, 0.9 + 0.8})
    assert.are.equal(rm, bn.running_mean)        -- the very same tensors: updated in place
    assert.are.equal(rv, bn.running_var)
    bn(dle.tensor({{0, 0}, {2, 2}}))             -- mean {1, 1}, unbiased var {2, 2}
    H.assert_close(bn.running_mean, {0.9 * 0.2 + 0.1, 0.9 * 0.4 + 0.1})
    H.assert_close(bn.running_var, {0.9 * 1.1 + 0.2, 0.9 * 1.7 + 0.2})
    assert.are.equal(2, bn.num_batches_tracked:item())
    assert.is_false(bn.running_mean.requires_grad)
  end)

  it("honours a custom momentum", function()
    local bn = nn.BatchNorm1d(2, {momentum = 0.5})
    bn(dle.tensor(x))
    H.assert_close(bn.running_mean, {1, 2})
    H.assert_close(bn.running_var, {1.5, 4.5})
  end)

  it("uses the running statistics in eval mode and leaves them unchanged", function()
    local bn = nn.BatchNorm1d(2)
    bn(dle.tensor(x))                            -- running mean {0.2, 0.4}, var {1.1, 1.7}
    bn:eval()
    local y = bn(dle.tensor({{1, 1}, {0, 2}}))
    H.assert_close(y, {{norm(1, 0.2, 1.1), norm(1, 0.4, 1.7)}, {norm(0, 0.2, 1.1), norm(2, 0.4, 1.7)}}, {atol = 1e-5})
    H.assert_close(bn.running_mean, {0.2, 0.4})
    assert.are.equal(1, bn.num_batches_tracked:item())
    -- a single sample is fine in eval mode
    H.assert_close(bn(dle.tensor({{0.2, 0.4}})), {{0, 0}}, {atol = 1e-6})
  end)

  it("normalizes {N, C, L} inputs over N and L", function()
    local bn = nn.BatchNorm1d(2, {momentum = 1})
    -- channel 1: 1, 2, 3, 4 (mean 2.5, biased var 1.25, unbiased 5/3); channel 2: all 7
    local y = bn(dle.tensor({{{1, 2}, {7, 7}}, {{3, 4}, {7, 7}}}))
    H.assert_close(y, {{{norm(1, 2.5, 1.25), norm(2, 2.5, 1.25)}, {0, 0}},
                       {{norm(3, 2.5, 1.25), norm(4, 2.5, 1.25)}, {0, 0}}}, {atol = 1e-5})
    H.assert_close(bn.running_mean, {2.5, 7})
    H.assert_close(bn.running_var, {5 / 3, 0})
  end)

  it("without affine has no parameters; without track_running_stats has no buffers and uses batch stats in eval",
     function()
    local bn = nn.BatchNorm1d(2, {affine = false, track_running_stats = false})
    assert.are.equal(0, #bn:parameters())
    assert.are.equal(0, #bn:named_buffers())
    bn:eval()
    H.assert_close(bn(dle.tensor(x)), {{-1, -1}, {1, 1}}, {atol = 1e-5})
  end)

  it("refuses wrong channel counts, ranks and single-value training batches with clear errors", function()
    local bn = nn.BatchNorm1d(3)
    H.assert_error(function() bn(dle.zeros(4, 2)) end, "BatchNorm1d", "2 channels", "{4,2}", "expected 3")
    H.assert_error(function() bn(dle.zeros(4)) end, "BatchNorm1d", "{4}")
    H.assert_error(function() bn(dle.zeros(1, 3)) end, "batch_norm", "more than 1 value per channel")
    H.assert_error(function() nn.BatchNorm1d(0) end, "BatchNorm1d", "positive integer")
  end)
end)

describe("BatchNorm2d", function()
  -- x {2, 2, 2, 2}: channel 1 holds 1..8 (mean 4.5, biased var 5.25, unbiased 6), channel 2 all 3.
  local function input()
    return dle.tensor({{{{1, 2}, {3, 4}}, {{3, 3}, {3, 3}}}, {{{5, 6}, {7, 8}}, {{3, 3}, {3, 3}}}})
  end

  it("normalizes over N, H and W and updates the running statistics", function()
    local bn = nn.BatchNorm2d(2)
    local y = bn(input())
    local c1 = {}
    for v = 1, 8 do c1[v] = norm(v, 4.5, 5.25) end
    H.assert_close(y, {{{{c1[1], c1[2]}, {c1[3], c1[4]}}, {{0, 0}, {0, 0}}},
                       {{{c1[5], c1[6]}, {c1[7], c1[8]}}, {{0, 0}, {0, 0}}}}, {atol = 1e-5})
    H.assert_close(bn.running_mean, {0.45, 0.3})
    H.assert_close(bn.running_var, {0.9 + 0.6, 0.9})
  end)

  it("uses the running statistics in eval mode", function()
    local bn = nn.BatchNorm2d(2)
    bn(input())
    bn:eval()
    local y = bn(dle.ones(1, 2, 1, 1))
    H.assert_close(y, {{{{norm(1, 0.45, 1.5)}}, {{norm(1, 0.3, 0.9)}}}}, {atol = 1e-5})
  end)

  it("puts parameters and buffers in state_dict, and load_state_dict restores them", function()
    local bn = nn.BatchNorm2d(2)
    bn(input())
    local sd = bn:state_dict()
    local keys = {}
    for k in pairs(sd) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.are.same({"bias", "num_batches_tracked", "running_mean", "running_var", "weight"}, keys)
    H.assert_close(sd.running_mean, {0.45, 0.3})
    local other = nn.BatchNorm2d(2)
    other:load_state_dict(sd)
    H.assert_close(other.running_var, {1.5, 0.9})
    assert.are.equal(1, other.num_batches_tracked:item())
  end)

  it("passes a float64 gradcheck in training mode (input, weight and bias)", function()
    local x = dle.randn(3, 2, 2, 2, {dtype = "float64", generator = dle.Generator(1)})
    local w = dle.tensor({1.5, -0.5}, {dtype = "float64"})
    local b = dle.tensor({0.2, 0.1}, {dtype = "float64"})
    -- a non-uniform weighting of the outputs so the gradient of the normalization is not ~0
    local mix = dle.arange(1, 25, {dtype = "float64"}):reshape(3, 2, 2, 2):sin()
    local ok, err = dle.gradcheck(function(xi, wi, bi)
      return (F.batch_norm(xi, nil, nil, wi, bi, true) * mix):sum()
    end, {x, w, b})
    assert.is_true(ok, "max error " .. tostring(err))
    -- the module itself (float64), gradient with respect to the input
    local bn = nn.BatchNorm2d(2):to("float64")
    local ok2, err2 = dle.gradcheck(function(xi) return bn(xi) * mix end, {x})
    assert.is_true(ok2, "max error " .. tostring(err2))
  end)

  it("backpropagates into weight and bias: d(sum y)/d bias = N*H*W and d(sum y)/d weight = 0", function()
    local bn = nn.BatchNorm2d(2)
    bn(input()):sum():backward()
    H.assert_close(bn.bias.grad, {8, 8})
    H.assert_close(bn.weight.grad, {0, 0}, {atol = 1e-5})
  end)

  it("requires a 4-D input", function()
    H.assert_error(function() nn.BatchNorm2d(2)(dle.zeros(4, 2)) end, "BatchNorm2d", "4-D", "{4,2}")
  end)
end)

describe("Conv2d, MaxPool2d and AvgPool2d bookkeeping", function()
  it("Conv2d registers weight {cout, cin/groups, kh, kw} and bias {cout} with the right counts", function()
    local c = nn.Conv2d(1, 32, 3, {padding = 1})
    assert.are.same({32, 1, 3, 3}, c.weight:shape())
    assert.are.same({32}, c.bias:shape())
    assert.are.equal(320, c:num_parameters())
    assert.are.equal(18496, nn.Conv2d(32, 64, 3):num_parameters())
    local g = nn.Conv2d(4, 8, {3, 5}, {groups = 2, bias = false})
    assert.are.same({8, 2, 3, 5}, g.weight:shape())
    assert.is_nil(g.bias)
    assert.are.equal(8 * 2 * 15, g:num_parameters())
  end)

  it("Conv2d initializes weight and bias in U(-1/sqrt(fan_in), 1/sqrt(fan_in))", function()
    local c = nn.Conv2d(8, 16, 3, {generator = dle.Generator(3)})
    local bound = 1 / math.sqrt(8 * 9)
    assert.is_true(c.weight:abs():max():item() <= bound)
    assert.is_true(c.weight:abs():max():item() > 0.8 * bound)   -- spread over the range
    assert.is_true(c.bias:abs():max():item() <= bound)
    assert.is_true(math.abs(c.weight:mean():item()) < 0.2 * bound)
  end)

  it("Conv2d computes output shapes and FLOPs = 2*N*Hout*Wout*cout*(cin/groups)*kh*kw", function()
    local c = nn.Conv2d(1, 32, 3, {padding = 1})
    assert.are.same({2, 32, 28, 28}, c:output_shape({2, 1, 28, 28}))
    assert.are.equal(2 * 2 * 28 * 28 * 32 * 1 * 9, c:flops({2, 1, 28, 28}))
    local s = nn.Conv2d(4, 6, 3, {stride = 2, padding = 1, dilation = 2, groups = 2})
    -- (9 + 2 - 2*2 - 1) // 2 + 1 = 4
    assert.are.same({1, 6, 4, 4}, s:output_shape({1, 4, 9, 9}))
    assert.are.equal(2 * 1 * 4 * 4 * 6 * 2 * 9, s:flops({1, 4, 9, 9}))
    assert.are.equal(s:flops({1, 4, 9, 9}), s:flops({dle.zeros(1, 4, 9, 9)}))   -- summary() form
  end)

  it("pools default the stride to the kernel size and compute output shapes", function()
    local m = nn.MaxPool2d(2)
    assert.are.same({2, 2}, m.stride)
    assert.are.same({3, 8, 14, 14}, m:output_shape({3, 8, 28, 28}))
    assert.are.same({3, 8, 13, 13}, nn.MaxPool2d(3, 2):output_shape({3, 8, 28, 28}))
    assert.are.same({1, 2, 5, 5}, nn.AvgPool2d(2, 2, {padding = 1}):output_shape({1, 2, 8, 8}))
    assert.are.equal(0, #nn.MaxPool2d(2):parameters())
  end)

  it("refuses bad arguments and inputs with messages naming the layer", function()
    H.assert_error(function() nn.Conv2d(3, 4, 0) end, "Conv2d", "kernel size")
    H.assert_error(function() nn.Conv2d(3, 4, 3, {groups = 2}) end, "Conv2d", "divisible by groups")
    H.assert_error(function() nn.Conv2d(1, 4, 3)(dle.zeros(2, 3, 8, 8)) end, "Conv2d", "3 channels", "expected 1")
    H.assert_error(function() nn.Conv2d(1, 4, 3)(dle.zeros(2, 8)) end, "Conv2d", "4-D", "{2,8}")
    H.assert_error(function() nn.Conv2d(1, 4, 5)(dle.zeros(1, 1, 3, 3)) end, "Conv2d", "smaller than")
    H.assert_error(function() nn.MaxPool2d(2, 2, {padding = 2}) end, "MaxPool2d", "half the kernel")
    H.assert_error(function() nn.AvgPool2d(2)(dle.zeros(3)) end, "AvgPool2d", "4-D")
  end)
end)

describe("Conv2d, MaxPool2d and AvgPool2d values", function()
  -- 1x1x3x3 input 1..9; a 2x2 kernel of ones sums each 2x2 window.
  local function img3() return dle.arange(1, 10):reshape(1, 1, 3, 3) end

  it_conv("Conv2d sums windows with a ones kernel, adds the bias, and pads with zeros", function()
    local c = nn.Conv2d(1, 1, 2)
    dle.no_grad(function() c.weight:fill_(1); c.bias:fill_(0.5) end)
    H.assert_close(c(img3()), {{{{12.5, 16.5}, {24.5, 28.5}}}})
    local p = nn.Conv2d(1, 1, 3, {padding = 1, bias = false})
    dle.no_grad(function() p.weight:fill_(1) end)
    -- corners: 1+2+4+5 = 12, 2+3+5+6 = 16, ...; centre: 45
    H.assert_close(p(img3()), {{{{12, 21, 16}, {27, 45, 33}, {24, 39, 28}}}})
  end)

  it_conv("Conv2d with stride 2 and two groups keeps the groups apart", function()
    local c = nn.Conv2d(2, 2, 1, {groups = 2, stride = 2, bias = false})
    dle.no_grad(function() c.weight:copy_(dle.tensor({2, -1}):reshape(2, 1, 1, 1)) end)
    local x = dle.arange(0, 32):reshape(1, 2, 4, 4)
    H.assert_close(c(x), {{{{0, 4}, {16, 20}}, {{-16, -18}, {-24, -26}}}})
  end)

  it_conv("MaxPool2d and AvgPool2d take the max and mean of 2x2 windows", function()
    local x = dle.arange(0, 16):reshape(1, 1, 4, 4)
    H.assert_close(nn.MaxPool2d(2)(x), {{{{5, 7}, {13, 15}}}})
    H.assert_close(nn.AvgPool2d(2)(x), {{{{2.5, 4.5}, {10.5, 12.5}}}})
    assert.are.same({1, 1, 1, 1}, nn.MaxPool2d(3, 2)(x):shape())
  end)

  it_conv("AvgPool2d with padding counts padded zeros unless count_include_pad is false", function()
    local x = dle.tensor({{{{1, 2}, {3, 4}}}})
    -- 2x2 windows, stride 2, padding 1: each window holds one real value and three pads
    H.assert_close(nn.AvgPool2d(2, 2, {padding = 1})(x), {{{{0.25, 0.5}, {0.75, 1}}}})
    H.assert_close(nn.AvgPool2d(2, 2, {padding = 1, count_include_pad = false})(x), {{{{1, 2}, {3, 4}}}})
  end)

  it_conv("the functional forms accept unbatched {C, H, W} inputs and max_pool2d can return indices", function()
    local x = dle.arange(0, 16):reshape(1, 4, 4)
    local v, i = F.max_pool2d(x, 2, {return_indices = true})
    H.assert_close(v, {{{5, 7}, {13, 15}}})
    assert.are.same({1, 2, 2}, i:shape())
    H.assert_close(F.avg_pool2d(x, 4), {{{7.5}}})
    H.assert_close(F.conv2d(x, dle.ones(1, 1, 4, 4), dle.tensor({1})), {{{121}}})
  end)

  it_conv("gradients flow through Conv2d into weight and bias (d sum / d bias = outputs per channel)", function()
    local c = nn.Conv2d(1, 2, 2)
    c(img3()):sum():backward()
    H.assert_close(c.bias.grad, {4, 4})
    -- d sum / d w[k] = sum of the input values each kernel tap sees: 1+2+4+5, 2+3+5+6, ...
    H.assert_close(c.weight.grad, {{{{12, 16}, {24, 28}}}, {{{12, 16}, {24, 28}}}})
  end)

  it_conv("summary() of a small CNN reports Conv2d FLOPs and the parameter total", function()
    local net = nn.Sequential(nn.Conv2d(1, 4, 3, {padding = 1}), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
      nn.Flatten(), nn.Linear(4 * 4 * 4, 10))
    local s = net:summary({2, 1, 8, 8}, {print = false})
    assert.are.equal(40 + 8 + 650, s.total_params)
    assert.are.equal(2 * 2 * 8 * 8 * 4 * 9, s.layers[1].flops)
    assert.are.same({2, 10}, s.layers[#s.layers].output_shape)
  end)
end)

describe("a small CNN on Fashion-MNIST", function()
  local have_data = io.open(FM_PATH, "rb")
  if have_data then have_data:close() end
  local name = "trains for one epoch on 2000 test images and its loss falls"
  if not have_conv then
    pending(name .. " (" .. CONV_MISSING .. ")")
  elseif not have_data then
    pending(name .. " (Fashion-MNIST files absent: Debian package dataset-fashion-mnist)")
  else
    it(name, function()
      dle.manual_seed(0)
      local x, y = dle.data.fashion_mnist("test")
      x, y = x:narrow(1, 1, 2000), y:narrow(1, 1, 2000)
      x = (x - 0.286) / 0.353
      local net = nn.Sequential(
        nn.Conv2d(1, 8, 3, {padding = 1}), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, {padding = 1}), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 7 * 7, 10))
      local opt = dle.optim.Adam(net:parameters(), {lr = 3e-3})
      local loader = dle.data.DataLoader({x, y}, {batch_size = 50, shuffle = true, generator = dle.Generator(0)})
      local losses = {}
      for xb, yb in loader do
        local loss = F.cross_entropy(net(xb), yb)
        opt:zero_grad()
        loss:backward()
        opt:step()
        losses[#losses + 1] = loss:item()
      end
      assert.are.equal(40, #losses)
      local first = (losses[1] + losses[2] + losses[3]) / 3
      local last = (losses[38] + losses[39] + losses[40]) / 3
      assert.is_true(first > 1.8, "first losses should be near ln 10, got " .. first)
      assert.is_true(last < 0.75 * first, string.format("loss did not fall: %.3f -> %.3f", first, last))
      -- eval mode uses the running statistics: accuracy on the seen images is well above chance
      net:eval()
      local acc = dle.no_grad(function() return net(x:narrow(1, 1, 500)):argmax(2):eq(y:narrow(1, 1,
          500)):sum():item() end) / 500
      assert.is_true(acc > 0.6, "accuracy " .. acc)
    end)
  end
end)

describe("the Fashion-MNIST examples' training loop (examples/fashion_mnist/common.lua)", function()
  local common = dofile("examples/fashion_mnist/common.lua")
  local models = dofile("examples/fashion_mnist/models.lua")

  -- n noisy 28x28 images whose class is which band of 7 rows is brighter (left-right flips, which
  -- fit applies, keep the class)
  local function bands(n, g)
    local x = dle.randn(n, 1, 28, 28, {generator = g}) * 0.5
    local y = dle.randint(1, 5, {n}, {generator = g, dtype = "int64"})
    for i = 1, n do x[i]:narrow(2, (y[i] - 1) * 7 + 1, 7):add_(1.5) end
    return x, y
  end

  it_conv("fit trains a small CNN with flips; weight averaging (ema) changes only what is evaluated", function()
    local g = dle.Generator(3)
    local train_x, train_y = bands(512, g)
    local test_x, test_y = bands(256, g)
    -- the same training twice from the same seed, with and without averaging
    local logs = H.tmpdir()
    local function run(ema)
      dle.manual_seed(0)
      local model = models.cnn({width = 4})
      local opt = dle.optim.AdamW(model:parameters(), {lr = 3e-3, weight_decay = 1e-4})
      local printed = {}
      local real_print = _G.print   -- common.lua, loaded by dofile, prints through the global one
      _G.print = function(s) printed[#printed + 1] = s end
      local ok, acc = pcall(common.fit, model, opt, {train_x, train_y, test_x, test_y},
                            {epochs = 2, batch_size = 32, warmup = 4, flip = true, ema = ema,
                             name = ema and "ema" or "plain", log_dir = logs})
      _G.print = real_print
      assert(ok, acc)
      assert.are.equal(3, #printed)
      assert.truthy(printed[2]:match("^epoch 2 .*test accuracy"), printed[2])
      assert.truthy(printed[3]:find("curves: " .. logs, 1, true), printed[3])
      -- 16 steps of 32 images an epoch, each logged, and a line per epoch
      local rows = H.check_run_files(logs .. "/" .. (ema and "ema" or "plain") .. ".jsonl",
                                     logs .. "/" .. (ema and "ema" or "plain") .. ".svg", "test_accuracy", 2)
      assert.are.equal(34, #rows)
      assert.is_true(model.training, "the model is back in training mode")
      return model, acc
    end
    local plain, acc_plain = run(nil)
    local averaged, acc_avg = run(0.9)
    assert.is_true(acc_plain > 0.9 and acc_avg > 0.9, string.format("accuracy %.3f / %.3f", acc_plain, acc_avg))
    -- after each evaluation the model gets its trained weights back: both runs end on the same bits
    local a, b = plain:parameters(), averaged:parameters()
    for i = 1, #a do assert.is_true(a[i]:equal(b[i]), "parameter " .. i .. " differs") end
  end)

  it("models.cnn has the README's layers, with a BatchNorm on the hidden layer unless fc_bn = false", function()
    local function names(model)
      local out = {}
      for _, m in ipairs(model.layers or model:children()) do out[#out + 1] = m.__name end
      return table.concat(out, " ")
    end
    local conv = "Conv2d BatchNorm2d ReLU MaxPool2d Conv2d BatchNorm2d ReLU MaxPool2d Flatten Linear "
    assert.are.equal(conv .. "BatchNorm1d ReLU Dropout Linear", names(models.cnn()))
    assert.are.equal(conv .. "Identity ReLU Dropout Linear", names(models.cnn({fc_bn = false})))
    local y = models.cnn({width = 4})(dle.randn(3, 1, 28, 28))
    assert.are.same({3, 10}, y:shape())
  end)
end)
