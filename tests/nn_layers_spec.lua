--- nn_layers_spec.lua — F.group_norm, F.instance_norm, F.local_response_norm, F.pixel_shuffle,
-- F.pixel_unshuffle, F.channel_shuffle, F.bilinear and their modules (GroupNorm, InstanceNorm1d/2d/3d,
-- LocalResponseNorm, PixelShuffle, PixelUnshuffle, ChannelShuffle, Bilinear, Unflatten): values and
-- gradients against PyTorch in float64 on odd sizes and non-contiguous inputs (skipped without
-- torch), running statistics, state dict names, float32 / float16 / bfloat16 against float64,
-- hand-worked values and bad arguments.
local dle = require("dle")
local H = require("helpers")
local F = dle.nn.functional
local nn = dle.nn
local F64 = {dtype = "float64"}

local r = H.randn64()
local x4, x3, x5 = r(2, 6, 5, 3), r(3, 4, 7), r(2, 4, 3, 2, 3)
local x4t = r(2, 5, 3, 6):permute({1, 4, 3, 2}) -- {2, 6, 3, 5}, not contiguous
local w6, b6, w4, b4 = r(6), r(6), r(4), r(4)

local T = "torch.nn.functional."
local CASES = {
  {"group_norm 3 groups, affine", function(a, b, c) return F.group_norm(a, 3, b, c) end,
   T .. "group_norm(a, 3, b, c)", {x4, w6, b6}},
  {"group_norm 1 group, no affine, 1-D spatial", function(a) return F.group_norm(a, 1) end,
   T .. "group_norm(a, 1)", {x3}},
  {"group_norm of a permuted input, eps 1e-3", function(a, b) return F.group_norm(a, 2, b, nil, 1e-3) end,
   T .. "group_norm(a, 2, b, None, 1e-3)", {x4t, w6}},
  {"group_norm 3-D spatial", function(a, b, c) return F.group_norm(a, 4, b, c) end,
   T .. "group_norm(a, 4, b, c)", {x5, w4, b4}},
  {"instance_norm, affine", function(a, b, c) return F.instance_norm(a, nil, nil, b, c) end,
   T .. "instance_norm(a, None, None, b, c)", {x3, w4, b4}},
  {"instance_norm 2-D of a permuted input", function(a) return F.instance_norm(a) end,
   T .. "instance_norm(a)", {x4t}},
  {"local_response_norm size 3", function(a) return F.local_response_norm(a, 3) end,
   T .. "local_response_norm(a, 3)", {x4}},
  {"local_response_norm size 4, alpha, beta, k, 3-D", function(a) return F.local_response_norm(a, 4, 0.1, 0.6, 2) end,
   T .. "local_response_norm(a, 4, 0.1, 0.6, 2)", {x3}},
  {"local_response_norm with a window wider than the channels (its pads stop at C - 1)",
   function(a) return F.local_response_norm(a, 15, 0.3) end, T .. "local_response_norm(a, 15, 0.3)", {x3}},
  {"pixel_shuffle", function(a) return F.pixel_shuffle(a, 2) end, T .. "pixel_shuffle(a, 2)", {r(2, 8, 3, 5)}},
  {"pixel_shuffle with two leading dims", function(a) return F.pixel_shuffle(a, 3) end,
   T .. "pixel_shuffle(a, 3)", {r(2, 1, 9, 2, 3)}},
  {"pixel_unshuffle", function(a) return F.pixel_unshuffle(a, 2) end, T .. "pixel_unshuffle(a, 2)", {r(2, 3, 4, 6)}},
  {"pixel_unshuffle of a permuted input", function(a) return F.pixel_unshuffle(a, 3) end,
   T .. "pixel_unshuffle(a, 3)", {r(1, 6, 3, 2):permute({1, 4, 2, 3})}},
  {"channel_shuffle", function(a) return F.channel_shuffle(a, 2) end,
   "a[:, [0, 3, 1, 4, 2, 5]]", {x4}}, -- torch.nn.ChannelShuffle(2) has no derivative
  {"bilinear with bias", function(a, b, c, d) return F.bilinear(a, b, c, d) end,
   T .. "bilinear(a, b, c, d)", {r(5, 3), r(5, 4), r(2, 3, 4), r(2)}},
  {"bilinear with leading dims, transposed input, no bias",
   function(a, b, c) return F.bilinear(a:transpose(1, 2), b, c) end,
   T .. "bilinear(a.transpose(0, 1), b, c)", {r(2, 3, 3), r(3, 2, 2), r(4, 3, 2)}},
}

describe("normalization and rearranging layers", function()
  H.torch_and_gradcheck(it, pending, CASES, 1e-9, function(c)
    local ins = {}
    -- the first sample of batched inputs (smaller checks); parameters and bilinear's inputs whole
    for i, t in ipairs(c[4]) do ins[i] = (t:dim() >= 3 and not c[1]:match("^bilinear")) and t:narrow(1, 1, 1) or t end
    return ins
  end)

  it("group_norm: hand-worked values (each group of one sample to mean 0, variance 1)", function()
    local x = dle.tensor({{{1, 3}, {5, 7}, {10, 10}, {10, 14}}}, F64) -- {1, 4, 2}, 2 groups
    local y = F.group_norm(x, 2, nil, nil, 0)
    local s = 1 / math.sqrt(5)
    H.assert_close(y, {{{-3 * s, -s}, {s, 3 * s}, {-1 / math.sqrt(3), -1 / math.sqrt(3)},
                        {-1 / math.sqrt(3), math.sqrt(3)}}}, {atol = 1e-12})
  end)

  it("group_norm in float32, float16 and bfloat16 follows float64, with float32 statistics", function()
    local ref = F.group_norm(x4, 3, w6, b6)
    for dt, tol in pairs({float32 = 1e-5, float16 = 1e-2, bfloat16 = 6e-2}) do
      local y, st = dle.group_norm(x4:to(dt), 3, w6:to(dt), b6:to(dt))
      assert.are.equal(dt, y:dtype())
      assert.are.equal("float32", st:dtype())
      H.assert_close(y:to("float64"), ref:totable(), {atol = tol * 4, rtol = tol})
    end
  end)

  it("group_norm statistics of float32 data with a large offset stay exact (two-pass variance)", function()
    local x = (dle.randn(1, 2, 1000) + 1e4):float()
    local _, st = dle.group_norm(x, 1)
    local x64 = x:double()
    local var = ((x64 - x64:mean()) ^ 2):mean():item()
    local v = st:reshape(-1):totable()[2]
    assert.is_true(math.abs(v - var) < 1e-4 * var, v .. " vs " .. var)
  end)

  it("InstanceNorm with track_running_stats updates the running statistics as PyTorch", function()
    local m = nn.InstanceNorm1d(4, {track_running_stats = true, momentum = 0.3, dtype = "float64"})
    local y = m(x3)
    local eval_in = r(2, 4, 5)
    m:eval()
    local ye = m(eval_in)
    if H.without_torch(pending) then return end
    local out = H.run_torch({a = x3, e = eval_in}, {
      "m = torch.nn.InstanceNorm1d(4, track_running_stats=True, momentum=0.3).double()",
      "p(m(a))", "p(m.running_mean)", "p(m.running_var)", "m.eval()", "p(m(e))"})
    H.assert_torch_numbers(y:reshape(-1):totable(), out[1], 1e-10, "training output")
    H.assert_torch_numbers(m.running_mean:totable(), out[2], 1e-12, "running_mean")
    H.assert_torch_numbers(m.running_var:totable(), out[3], 1e-12, "running_var")
    H.assert_torch_numbers(ye:reshape(-1):totable(), out[4], 1e-10, "eval output")
  end)

  it("modules carry PyTorch's parameter and buffer names and defaults", function()
    local function keys(m)
      local k = {}
      for name in pairs(m:state_dict()) do k[#k + 1] = name end
      table.sort(k)
      return k
    end
    assert.are.same({"bias", "weight"}, keys(nn.GroupNorm(2, 4)))
    assert.are.same({}, keys(nn.GroupNorm(2, 4, {affine = false})))
    assert.are.same({}, keys(nn.InstanceNorm2d(3)))
    assert.are.same({"bias", "num_batches_tracked", "running_mean", "running_var", "weight"},
      keys(nn.InstanceNorm3d(3, {affine = true, track_running_stats = true})))
    assert.are.same({"bias", "weight"}, keys(nn.Bilinear(2, 3, 4)))
    assert.are.same({4, 2, 3}, nn.Bilinear(2, 3, 4).weight:shape())
    assert.are.same({"weight"}, keys(nn.Bilinear(2, 3, 4, {bias = false})))
    assert.are.equal("GroupNorm(2, 4, eps=1e-05, affine=true)", tostring(nn.GroupNorm(2, 4)))
  end)

  it("modules: InstanceNorm takes unbatched input; PixelShuffle, Unflatten, ChannelShuffle, LRN", function()
    local m = nn.InstanceNorm2d(6)
    H.assert_close(m(x4[1]), F.instance_norm(x4:narrow(1, 1, 1))[1]:totable(), {atol = 1e-12})
    assert.are.same({2, 2, 6, 10}, nn.PixelShuffle(2)(r(2, 8, 3, 5)):shape())
    assert.are.same({2, 12, 3, 5}, nn.PixelUnshuffle(2)(r(2, 3, 6, 10)):shape())
    assert.are.same({4, 2, 3, 5}, nn.Unflatten(2, {2, 3})(r(4, 6, 5)):shape())
    assert.are.same({4, 5, 2, 3}, nn.Unflatten(-1, {2, -1})(r(4, 5, 6)):shape())
    assert.are.same({0, 2, 4, 1, 3, 5}, nn.ChannelShuffle(3)(dle.arange(0, 6):reshape(1, 6, 1)):reshape(-1):totable())
    assert.are.same({2, 6, 5, 3}, nn.LocalResponseNorm(2)(x4):shape())
  end)

  it("rejects bad arguments with errors naming the function and the shapes", function()
    local cases = {
      {function() return F.group_norm(x4, 4) end,
       "group_norm: num_groups 4 must be positive and divide the 6 channels of input {2,6,5,3}"},
      {function() return F.group_norm(x4, 3, r(5)) end, "group_norm: weight has shape {5}, expected 6 elements"},
      {function() return F.group_norm(r(3), 1) end, "group_norm: expected an input of at least 2 dimensions"},
      {function() return F.group_norm(x4, 0) end, "group_norm: num_groups 0 must be positive"},
      {function() return nn.GroupNorm(4, 6) end, "GroupNorm: num_channels 6 must be divisible by num_groups 4"},
      {function() return nn.GroupNorm(2, 6)(r(2, 4, 3)) end, "GroupNorm: expected an input {N, 6, ...}, got {2,4,3}"},
      {function() return nn.GroupNorm(2, 6, {bogus = 1}) end, "GroupNorm: unknown option 'bogus'"},
      {function() return F.instance_norm(r(2, 3)) end, "instance_norm: expected an input of at least 3 dimensions"},
      {function() return nn.InstanceNorm1d(3)(r(2, 4, 5)) end, "InstanceNorm1d: input has 4 channels"},
      {function() return nn.InstanceNorm2d(3)(r(2, 3)) end, "InstanceNorm2d: expected a 4-D or 3-D input, got {2,3}"},
      {function() return F.instance_norm(x3, nil, nil, nil, nil, false) end, "use_input_stats = false needs"},
      {function() return F.local_response_norm(r(2, 3), 2) end, "local_response_norm: expected an input of at least 3"},
      {function() return F.local_response_norm(r(2, 3, 2), 2, {1}) end, "local_response_norm: alpha must be a number"},
      {function() return F.local_response_norm(r(2, 3, 2), 2, nil, "x") end,
       "local_response_norm: beta must be a number"},
      {function() return nn.Unflatten(2, {dle.tensor(2), 3}) end, "Unflatten: unflattened_size[1] must be an integer"},
      {function() return F.pixel_shuffle(r(1, 6, 2, 2), 2) end,
       "pixel_shuffle: 6 channels of input {1,6,2,2} are not divisible"},
      {function() return F.pixel_unshuffle(r(1, 1, 3, 4), 2) end, "pixel_unshuffle: spatial sizes of input {1,1,3,4}"},
      {function() return F.channel_shuffle(r(1, 5, 2), 2) end, "channel_shuffle: expected an input {N, C, ...}"},
      {function() return F.bilinear(r(2, 3), r(2, 4), r(5, 3, 3)) end,
       "bilinear: shapes input1 {2,3}, input2 {2,4}, weight {5,3,3} do not fit"},
      {function() return nn.Unflatten(2, {4, 2})(r(3, 6)) end, "Unflatten: cannot split dim 2 of input {3,6}"},
      {function() return dle.group_norm(x4, 3, r(6), nil, -1) end, "group_norm: eps must be a non-negative number"},
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(c[1])
      assert.is_false(ok)
      assert.matches(c[2], err, 1, true)
    end
  end)
end)
