--- convnd_spec.lua — conv1d, conv2d's "same" padding, conv3d, conv_transpose1d/2d/3d, unfold, fold,
-- max_pool1d, avg_pool1d and the adaptive pools (compositions of dle's 2-D conv and pool ops,
-- lua/dle/nn/functional_convnd.lua and functional_pool.lua) and their modules: values and
-- gradients against PyTorch in float64 (skipped without it) on odd sizes, strides, dilations and
-- groups, float64 gradchecks in both modes, non-contiguous, unbatched, empty and 16-bit inputs,
-- state dicts loading into PyTorch's modules, bad arguments.
local dle = require("dle")
local H = require("helpers")
local F = dle.nn.functional
local nn = dle.nn
local F64 = {dtype = "float64"}

local r = H.randn64()
local TF = "torch.nn.functional."

-- {name, dle function of the inputs, PyTorch expression of a, b, c, inputs}
local CASES = {
  {"conv1d: groups, stride, padding, dilation, bias",
   function(a, b, c) return F.conv1d(a, b, c, {stride = 2, padding = 1, dilation = 2, groups = 2}) end,
   TF .. "conv1d(a, b, c, stride=2, padding=1, dilation=2, groups=2)", {r(2, 4, 11), r(6, 2, 3), r(6)}},
  {"conv1d: padding same with an even kernel", function(a, b) return F.conv1d(a, b, nil, {padding = "same"}) end,
   TF .. "conv1d(a, b, padding='same')", {r(2, 3, 10), r(4, 3, 4)}},
  {"conv1d: unbatched, padding valid", function(a, b) return F.conv1d(a, b, nil, {padding = "valid"}) end,
   TF .. "conv1d(a, b, padding='valid')", {r(3, 9), r(5, 3, 2)}},
  {"conv1d: a non-contiguous (transposed) input",
   function(a, b) return F.conv1d(a:transpose(2, 3), b, nil, {stride = 3}) end,
   TF .. "conv1d(a.transpose(1, 2), b, stride=3)", {r(2, 13, 4), r(3, 4, 3)}},
  {"conv2d: padding same with dilation",
   function(a, b) return F.conv2d(a, b, nil, {padding = "same", dilation = {2, 1}}) end,
   TF .. "conv2d(a, b, padding='same', dilation=(2, 1))", {r(1, 2, 7, 6), r(3, 2, 2, 3)}},
  {"conv3d: groups, strides, padding, dilation, bias",
   function(a, b, c)
     return F.conv3d(a, b, c, {stride = {2, 1, 2}, padding = {1, 0, 1}, dilation = {1, 2, 1}, groups = 2})
   end,
   TF .. "conv3d(a, b, c, stride=(2, 1, 2), padding=(1, 0, 1), dilation=(1, 2, 1), groups=2)",
   {r(2, 4, 5, 6, 7), r(6, 2, 3, 2, 3), r(6)}},
  {"conv3d: unbatched", function(a, b) return F.conv3d(a, b) end, TF .. "conv3d(a, b)",
   {r(2, 4, 4, 5), r(3, 2, 2, 2, 2)}},
  {"conv3d: padding same, even kernel", function(a, b) return F.conv3d(a, b, nil, {padding = "same"}) end,
   TF .. "conv3d(a, b, padding='same')", {r(1, 2, 4, 3, 5), r(2, 2, 2, 3, 2)}},
  {"conv_transpose1d: groups, stride, padding, output_padding, dilation, bias",
   function(a, b, c)
     return F.conv_transpose1d(a, b, c, {stride = 3, padding = 1, output_padding = 2, groups = 2, dilation = 2})
   end, TF .. "conv_transpose1d(a, b, c, stride=3, padding=1, output_padding=2, groups=2, dilation=2)",
   {r(2, 4, 7), r(4, 3, 3), r(6)}},
  {"conv_transpose2d: strides, padding, output_padding, dilation, bias",
   function(a, b, c)
     return F.conv_transpose2d(a, b, c, {stride = {2, 3}, padding = {1, 2}, output_padding = {1, 0}, dilation = {1, 2}})
   end, TF .. "conv_transpose2d(a, b, c, stride=(2, 3), padding=(1, 2), output_padding=(1, 0), dilation=(1, 2))",
   {r(2, 4, 5, 6), r(4, 3, 4, 3), r(3)}},
  {"conv_transpose2d: output_padding beyond the stride (below the dilation)",
   function(a, b) return F.conv_transpose2d(a, b, nil, {dilation = 3, output_padding = 2, padding = 1}) end,
   TF .. "conv_transpose2d(a, b, dilation=3, output_padding=2, padding=1)", {r(1, 2, 4, 5), r(2, 2, 3, 3)}},
  {"conv_transpose2d: unbatched, transposed input",
   function(a, b) return F.conv_transpose2d(a:transpose(2, 3), b, nil, {stride = 2, groups = 3}) end,
   TF .. "conv_transpose2d(a.transpose(1, 2), b, stride=2, groups=3)", {r(3, 5, 4), r(3, 2, 3, 2)}},
  {"conv_transpose3d: groups, strides, padding, output_padding, dilation, bias",
   function(a, b, c)
     return F.conv_transpose3d(a, b, c, {stride = {2, 1, 2}, padding = {1, 1, 0}, output_padding = {1, 0, 1},
       dilation = {1, 2, 2}, groups = 2})
   end, TF .. "conv_transpose3d(a, b, c, stride=(2, 1, 2), padding=(1, 1, 0), output_padding=(1, 0, 1), "
     .. "dilation=(1, 2, 2), groups=2)", {r(1, 4, 3, 4, 5), r(4, 2, 2, 3, 2), r(4)}},
  {"unfold: dilation, padding, stride", function(a) return F.unfold(a, {2, 3}, {dilation = {2, 1}, padding = {1, 2},
   stride = {2, 3}}) end, TF .. "unfold(a, (2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 3))", {r(2, 3, 7, 8)}},
  {"fold: overlapping blocks, padding",
   function(a) return F.fold(a, {9, 8}, {2, 3}, {padding = 1, stride = {2, 1}}) end,
   TF .. "fold(a, (9, 8), (2, 3), padding=1, stride=(2, 1))", {r(2, 18, 40)}},
  {"max_pool1d: stride, padding", function(a) return F.max_pool1d(a, 3, {stride = 2, padding = 1}) end,
   TF .. "max_pool1d(a, 3, stride=2, padding=1)", {r(2, 3, 11)}},
  {"avg_pool1d: count_include_pad false", function(a)
     return F.avg_pool1d(a, 4, {stride = 3, padding = 2, count_include_pad = false})
   end, TF .. "avg_pool1d(a, 4, stride=3, padding=2, count_include_pad=False)", {r(2, 3, 10)}},
  {"max_pool3d: strides, padding", function(a) return F.max_pool3d(a, {3, 2, 3}, {stride = {2, 1, 2}, padding = 1}) end,
   TF .. "max_pool3d(a, (3, 2, 3), stride=(2, 1, 2), padding=1)", {r(2, 2, 5, 4, 7)}},
  {"avg_pool3d: count_include_pad false, unbatched", function(a)
     return F.avg_pool3d(a, {2, 3, 2}, {stride = {1, 2, 2}, padding = {1, 1, 0}, count_include_pad = false})
   end, TF .. "avg_pool3d(a, (2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0), count_include_pad=False)",
   {r(3, 4, 5, 6)}},
  {"avg_pool3d: padded zeros counted", function(a) return F.avg_pool3d(a, 3, {stride = 2, padding = 1}) end,
   TF .. "avg_pool3d(a, 3, stride=2, padding=1)", {r(1, 2, 5, 6, 5)}},
  {"adaptive_avg_pool1d: windows of several lengths", function(a) return F.adaptive_avg_pool1d(a, 4) end,
   TF .. "adaptive_avg_pool1d(a, 4)", {r(2, 3, 10)}},
  {"adaptive_avg_pool2d", function(a) return F.adaptive_avg_pool2d(a, {3, 4}) end,
   TF .. "adaptive_avg_pool2d(a, (3, 4))", {r(2, 3, 7, 9)}},
  {"adaptive_avg_pool2d: more outputs than inputs, unbatched", function(a) return F.adaptive_avg_pool2d(a, {5, 6}) end,
   TF .. "adaptive_avg_pool2d(a, (5, 6))", {r(2, 3, 4)}},
  {"adaptive_max_pool1d", function(a) return F.adaptive_max_pool1d(a, 4) end, TF .. "adaptive_max_pool1d(a, 4)",
   {r(2, 3, 11)}},
  {"adaptive_max_pool2d of a transposed input", function(a) return F.adaptive_max_pool2d(a:transpose(3, 4), {5, 4}) end,
   TF .. "adaptive_max_pool2d(a.transpose(2, 3), (5, 4))", {r(2, 3, 9, 7)}},
}

describe("N-d convolutions, transposed convolutions, unfold/fold and pools", function()
  H.torch_and_gradcheck(it, pending, CASES, {1e-10, 1e-9})

  it("the max pools' indices match PyTorch's (1-based here)", function()
    if H.without_torch(pending) then return end
    local a, b, c = r(2, 3, 11), r(2, 3, 7, 9), r(1, 2, 10)
    local out = H.run_torch({a = a, b = b, c = c}, {
      "p(" .. TF .. "adaptive_max_pool1d(a, 4, return_indices=True)[1])",
      "p(" .. TF .. "adaptive_max_pool2d(b, (3, 5), return_indices=True)[1])",
      "p(" .. TF .. "max_pool1d(c, 3, stride=2, padding=1, return_indices=True)[1])"})
    local _, i1 = F.adaptive_max_pool1d(a, 4, {return_indices = true})
    local _, i2 = F.adaptive_max_pool2d(b, {3, 5}, {return_indices = true})
    local _, i3 = F.max_pool1d(c, 3, {stride = 2, padding = 1, return_indices = true})
    for k, i in ipairs({i1, i2, i3}) do
      assert.are.equal("int64", i:dtype())
      H.assert_torch_numbers((i - 1):reshape(-1):totable(), out[k], 0.5, "indices " .. k)
    end
  end)

  it("hand-worked values: unfold of a 3x3 plane, fold of non-overlapping blocks undoes unfold", function()
    local x = dle.arange(1, 10, 1, F64):reshape(1, 1, 3, 3)
    assert.are.same({{{1, 2, 4, 5}, {2, 3, 5, 6}, {4, 5, 7, 8}, {5, 6, 8, 9}}}, F.unfold(x, 2):totable())
    local y = r(2, 3, 4, 6)
    local cols = F.unfold(y, 2, {stride = 2})
    assert.are.same({2, 12, 6}, cols:shape())
    assert.are.same(y:totable(), F.fold(cols, {4, 6}, 2, {stride = 2}):totable())
    -- 5 adaptive windows over 3 inputs, [floor(3i/5), ceil(3(i+1)/5)): [0,1) [0,2) [1,2) [1,3) [2,3)
    local v = dle.tensor({{{1, 2, 4}}}, F64)
    assert.are.same({{{1, 1.5, 2, 3, 4}}}, F.adaptive_avg_pool1d(v, 5):totable())
    assert.are.same({{{1, 2, 4}}}, F.adaptive_max_pool1d(v, 3):totable())
  end)

  it("16-bit and float32 inputs agree with float64", function()
    local x, w, wt = r(2, 4, 9), r(6, 4, 3), r(4, 3, 4, 4)
    local img = r(2, 4, 6, 7)
    local cases = {
      function(t, dt) return F.conv1d(t, w:to(dt), nil, {padding = 1}) end,
      function(_, dt) return F.conv_transpose2d(img:to(dt), wt:to(dt), nil, {stride = 2, padding = 1}) end,
      function(_, dt) return F.unfold(img:to(dt), 3, {padding = 1}) end,
      function(_, dt) return F.adaptive_avg_pool2d(img:to(dt), {4, 3}) end,
      function(_, dt) return F.adaptive_max_pool1d(x:to(dt), 4) end,
    }
    for k, f in ipairs(cases) do
      local ref = f(x, "float64")
      for dt, tol in pairs({float32 = 1e-4, float16 = 0.1, bfloat16 = 0.5}) do
        local y = f(x:to(dt), dt)
        assert.are.equal(dt, y:dtype())
        local err = (y:to("float64") - ref):abs():max():item()
        assert.is_true(err < tol, string.format("case %d in %s: max error %g", k, dt, err))
      end
    end
  end)

  it("empty batches give empty results of the right shape", function()
    assert.are.same({0, 5, 7}, F.conv1d(r(0, 3, 9), r(5, 3, 3)):shape())
    assert.are.same({0, 3, 8, 8}, F.conv_transpose2d(r(0, 4, 4, 4), r(4, 3, 2, 2), nil, {stride = 2}):shape())
    assert.are.same({0, 2, 3}, F.adaptive_avg_pool1d(r(0, 2, 7), 3):shape())
    assert.are.same({0, 2, 2, 3, 3}, F.conv3d(r(0, 1, 4, 5, 5), r(2, 1, 3, 3, 3)):shape())
  end)

  it("bad arguments are errors naming the function and the shapes", function()
    local function err(f) local ok, msg = pcall(f); assert.is_false(ok); return msg end
    assert.matches("conv1d: expected a 3%-D input {N, C, L}",
      err(function() return F.conv1d(r(2, 3, 4, 5), r(2, 3, 3)) end))
    assert.matches("conv1d: input {2,4,9} %(4 channels%) and weight {6,3,3} do not match with groups = 1",
      err(function() return F.conv1d(r(2, 4, 9), r(6, 3, 3)) end))
    assert.matches('conv3d: padding "same" needs stride 1',
      err(function() return F.conv3d(r(1, 1, 4, 4, 4), r(1, 1, 3, 3, 3), nil, {padding = "same", stride = 2}) end))
    assert.matches("conv1d: input {1,1,2} padded by {0}, {0} is smaller than the kernel {3}",
      err(function() return F.conv1d(r(1, 1, 2), r(1, 1, 3)) end))
    assert.matches("conv_transpose2d: output_padding {2,2} must be smaller than the stride {2,2} or the dilation {1,1}",
      err(function()
        return F.conv_transpose2d(r(1, 2, 3, 3), r(2, 2, 3, 3), nil, {stride = 2, output_padding = 2})
      end))
    assert.matches("conv_transpose1d: bias must have shape {4}",
      err(function() return F.conv_transpose1d(r(1, 2, 3), r(2, 2, 3), r(3), {groups = 2}) end))
    assert.matches("unfold: input {1,1,2,2} padded to {2,2} is smaller than the kernel {3,3}",
      err(function() return F.unfold(r(1, 1, 2, 2), 3) end))
    assert.matches("fold: input {1,4,5} must be {N, C%*4, 4}", err(function() return F.fold(r(1, 4, 5), 3, 2) end))
    assert.matches("adaptive_avg_pool2d: output_size must be >= 1",
      err(function() return F.adaptive_avg_pool2d(r(1, 2, 3, 3), {0, 2}) end))
    assert.matches("adaptive_max_pool1d: expected a 3%-D input",
      err(function() return F.adaptive_max_pool1d(dle.tensor(1), 2) end))
    -- output sizes no memory holds fail at once (they used to loop over every output first)
    assert.matches("adaptive_avg_pool1d: output size 4611686018427387904 over an input of 2 is too large",
      err(function() return F.adaptive_avg_pool1d(r(1, 2), 1 << 62) end))
    assert.matches("adaptive_max_pool1d: output size 68719476735: .*cannot allocate",
      err(function() return F.adaptive_max_pool1d(r(3, 1), (1 << 36) - 1) end))
    assert.matches("adaptive_avg_pool2d: output size 68719476735: .*cannot allocate",
      err(function() return F.adaptive_avg_pool2d(r(5, 3, 5), {100, (1 << 36) - 1}) end))
    assert.matches("max_pool3d: padding {2,0,0} must be at most half the kernel size {3,3,3}",
      err(function() return F.max_pool3d(r(1, 1, 5, 5, 5), 3, {padding = {2, 0, 0}}) end))
    assert.matches("max_pool3d: unknown option 'return_indices'",
      err(function() return F.max_pool3d(r(1, 1, 5, 5, 5), 3, {return_indices = true}) end))
    assert.matches("max_pool1d: padding 2 must be at most half the kernel size 3",
      err(function() return F.max_pool1d(r(1, 1, 5), 3, {padding = 2}) end))
    assert.matches('Conv1d: padding_mode must be',
      err(function() return nn.Conv1d(2, 2, 3, {padding_mode = "mirror"}) end))
    assert.matches("ConvTranspose2d: in_channels 3 and out_channels 4 must be divisible by groups 2",
      err(function() return nn.ConvTranspose2d(3, 4, 2, {groups = 2}) end))
  end)
end)

describe("Conv1d, Conv3d, ConvTranspose1d/2d/3d, Unfold, Fold and the 1-D and adaptive pool modules", function()
  -- {dle module, PyTorch constructor, input}
  local MODULES = {
    {function()
       return nn.Conv1d(4, 6, 3, {padding = "same", padding_mode = "reflect", groups = 2, dtype = "float64"})
     end,
     "torch.nn.Conv1d(4, 6, 3, padding='same', padding_mode='reflect', groups=2)", r(2, 4, 9)},
    {function() return nn.Conv1d(3, 5, 4, {padding = 2, padding_mode = "circular", stride = 2, dtype = "float64"}) end,
     "torch.nn.Conv1d(3, 5, 4, padding=2, padding_mode='circular', stride=2)", r(2, 3, 10)},
    {function() return nn.Conv3d(2, 4, {3, 2, 3}, {padding = {1, 1, 2}, padding_mode = "replicate",
       dilation = {1, 2, 1}, dtype = "float64"}) end,
     "torch.nn.Conv3d(2, 4, (3, 2, 3), padding=(1, 1, 2), padding_mode='replicate', dilation=(1, 2, 1))",
     r(1, 2, 4, 5, 6)},
    {function() return nn.Conv2d(2, 4, {2, 3}, {padding = "same", padding_mode = "circular", dtype = "float64"}) end,
     "torch.nn.Conv2d(2, 4, (2, 3), padding='same', padding_mode='circular')", r(2, 2, 5, 6)},
    {function() return nn.Conv2d(2, 3, 3, {padding = 2, padding_mode = "reflect", stride = 2, dtype = "float64"}) end,
     "torch.nn.Conv2d(2, 3, 3, padding=2, padding_mode='reflect', stride=2)", r(1, 2, 7, 6)},
    {function() return nn.ConvTranspose1d(4, 6, 3, {stride = 2, groups = 2, output_padding = 1, padding = 1,
       dtype = "float64"}) end,
     "torch.nn.ConvTranspose1d(4, 6, 3, stride=2, groups=2, output_padding=1, padding=1)", r(2, 4, 7)},
    {function() return nn.ConvTranspose2d(3, 5, 4, {stride = 2, padding = 1, bias = false, dtype = "float64"}) end,
     "torch.nn.ConvTranspose2d(3, 5, 4, stride=2, padding=1, bias=False)", r(2, 3, 5, 4)},
    {function() return nn.ConvTranspose3d(2, 3, 3, {stride = 2, dtype = "float64"}) end,
     "torch.nn.ConvTranspose3d(2, 3, 3, stride=2)", r(1, 2, 3, 2, 3)},
  }

  it("take PyTorch's state dicts one to one and compute PyTorch's outputs", function()
    if H.without_torch(pending) then return end
    local tensors, lines, mods = {}, {}, {}
    for i, c in ipairs(MODULES) do
      local m = c[1]()
      mods[i] = m
      local keys = {}
      for name, t in pairs(m:state_dict()) do
        tensors["s" .. i .. "_" .. name] = t
        keys[#keys + 1] = string.format("'%s': s%d_%s", name, i, name)
      end
      tensors["x" .. i] = c[3]
      lines[#lines + 1] = "m = " .. c[2] .. ".double()"
      lines[#lines + 1] = "m.load_state_dict({" .. table.concat(keys, ", ") .. "})"
      lines[#lines + 1] = "p(m(x" .. i .. "))"
    end
    local out = H.run_torch(tensors, lines)
    assert.are.equal(#MODULES, #out, "PyTorch printed: " .. table.concat(out, "\n"))
    for i, c in ipairs(MODULES) do
      H.assert_torch_numbers(mods[i](c[3]):reshape(-1):totable(), out[i], 1e-10, c[2])
    end
  end)

  it("have PyTorch's weight shapes, and run the functional forms", function()
    assert.are.same({6, 2, 3}, nn.Conv1d(4, 6, 3, {groups = 2}).weight:shape())
    assert.are.same({4, 2, 3, 2, 3}, nn.Conv3d(2, 4, {3, 2, 3}).weight:shape())
    assert.are.same({4, 3, 3}, nn.ConvTranspose1d(4, 6, 3, {groups = 2}).weight:shape())
    assert.are.same({3, 5, 4, 4}, nn.ConvTranspose2d(3, 5, 4).weight:shape())
    assert.is_nil(nn.ConvTranspose2d(3, 5, 4, {bias = false}).bias)
    local x = r(2, 3, 6, 6)
    assert.are.same(F.unfold(x, 3, {padding = 1}):totable(), nn.Unfold(3, {padding = 1})(x):totable())
    local cols = F.unfold(x, 2, {stride = 2})
    assert.are.same(x:totable(), nn.Fold({6, 6}, 2, {stride = 2})(cols):totable())
    local s = r(2, 3, 11)
    assert.are.same(F.max_pool1d(s, 3, {stride = 2}):totable(), nn.MaxPool1d(3, 2)(s):totable())
    local v, i = nn.MaxPool1d(3, {return_indices = true})(s)
    assert.are.same({2, 3, 3}, v:shape())
    assert.are.same({2, 3, 3}, i:shape())
    assert.are.same(F.avg_pool1d(s, 4, {padding = 2, count_include_pad = false}):totable(),
      nn.AvgPool1d(4, nil, {padding = 2, count_include_pad = false})(s):totable())
    assert.are.same({2, 3, 1}, nn.AdaptiveAvgPool1d(1)(s):shape())
    assert.are.same({2, 3, 2, 3}, nn.AdaptiveAvgPool2d({2, 3})(x):shape())
    assert.are.same({2, 3, 5}, nn.AdaptiveMaxPool1d(5)(s):shape())
    local v3 = r(1, 2, 5, 6, 7)
    assert.are.same(F.max_pool3d(v3, 2, {stride = {1, 2, 2}}):totable(), nn.MaxPool3d(2, {1, 2, 2})(v3):totable())
    assert.are.same(F.avg_pool3d(v3, 3, {padding = 1, count_include_pad = false}):totable(),
      nn.AvgPool3d(3, {padding = 1, count_include_pad = false})(v3):totable())
    local mv, mi = nn.AdaptiveMaxPool2d(2, {return_indices = true})(x)
    assert.are.same({2, 3, 2, 2}, mv:shape())
    assert.are.equal("int64", mi:dtype())
    local up, u = nn.ConvTranspose2d(3, 5, 3, {stride = 2, padding = 1}), r(1, 3, 4, 5):float()
    local want = F.conv_transpose2d(u, up.weight, up.bias, {stride = 2, padding = 1, output_padding = {1, 0}})
    assert.are.same({1, 5, 8, 9}, want:shape())
    assert.are.same(want:totable(), up(u, {8, 9}):totable())
    assert.are.same(want:totable(), up(u, {1, 5, 8, 9}):totable())
    assert.has_error(function() up(u, {10, 9}) end,
      "ConvTranspose2d: output_size {10,9} cannot be reached from input {1,3,4,5}: each size must be from {7,9} "
      .. "to less than max(stride, dilation) more")
    local ok, err = pcall(up, true, {8, 9})
    assert.is_false(ok)
    assert.truthy(err:find("ConvTranspose2d: input must be a tensor, got boolean", 1, true), err)
    local same = nn.Conv2d(2, 3, {2, 4}, {padding = "same"})
    assert.are.same({2, 3, 5, 7}, same:output_shape({2, 2, 5, 7}))
    assert.are.same({2, 3, 5, 7}, same(r(2, 2, 5, 7):float()):shape())
    assert.are.equal("6, 6, kernel_size=(3), stride=(1), padding=same, groups=2, padding_mode=reflect",
      nn.Conv1d(6, 6, 3, {padding = "same", groups = 2, padding_mode = "reflect"}):extra_repr())
  end)
end)

-- ---------------------------------------------------------------- conv1d's direct path
-- Float32 conv1d at stride 1 goes to a direct AVX-512 kernel (kernels/cpu/cpu_conv1d_direct.c) on
-- CPUs that have it: tiles of output columns staged with their padding and halo, blocks of 6
-- output channels x 64 columns, the last ones partial. dle.core._tuning("conv1d_direct", 0) sends
-- the same call to the gemm path, so each generated geometry is computed both ways and checked
-- against float64 (a third route, dgemm), within float32 rounding of the sum of |terms|.

local function has_avx512()
  local f = io.open("/proc/cpuinfo")
  local info = f and f:read("a") or ""
  if f then f:close() end
  return info:find("avx512f", 1, true) ~= nil and os.getenv("DLE_SIMD") ~= "0"
end

describe("conv1d's direct float32 path", function()
  local direct_taken = has_avx512()
  local threads
  setup(function() threads = dle.get_num_threads() end)
  teardown(function() dle.set_num_threads(threads); dle.core._tuning("conv1d_direct", -1) end)

  -- x {n, c, w} (or a transposed copy), weight {o, c/groups, k} (or a permuted copy), bias or none
  local function inputs(c, seed)
    local g = dle.Generator(seed)
    local x = c.xt and dle.randn({c.n, c.w, c.c}, {generator = g}):transpose(2, 3)
      or dle.randn({c.n, c.c, c.w}, {generator = g})
    local w = c.wt and dle.randn({c.k, c.o, c.c // c.groups}, {generator = g}):permute({2, 3, 1})
      or dle.randn({c.o, c.c // c.groups, c.k}, {generator = g})
    local b = c.bias and dle.randn({c.o}, {generator = g}) or nil
    return x, w, b
  end

  local function opts(c) return {stride = c.stride, padding = c.pad, dilation = c.dil, groups = c.groups} end
  local function name(c)
    return string.format("{%d,%d,%d} -> %d, k=%d, stride %d, pad %d, dil %d, groups %d%s%s%s", c.n, c.c, c.w, c.o,
      c.k, c.stride, c.pad, c.dil, c.groups, c.bias and ", bias" or "", c.xt and ", x transposed" or "",
      c.wt and ", w permuted" or "")
  end

  -- y (float32) within float32 rounding of the float64 result: |y - y64| <= 2e-6 (|x| * |w| + |b|)
  local function assert_rounding(y, x, w, b, c, what)
    local o = opts(c)
    local y64 = F.conv1d(x:double(), w:double(), b and b:double(), o)
    local scale = F.conv1d(x:double():abs(), w:double():abs(), b and b:double():abs(), o)
    assert.are.same(y64:shape(), y:shape(), what)
    local over = ((y:double() - y64):abs() - scale * 2e-6):max():item()
    assert.is_true(over <= 1e-30, string.format("%s: %s off by %g past the bound", name(c), what, over))
  end

  -- geometries from a fixed pseudo-random stream: batch 1 and odd sizes, channel counts around the
  -- 6-row block, widths around the 64-column block and below the kernel, strides, padding past
  -- the kernel, dilation, groups, bias or none, non-contiguous inputs and weights
  local function generated(count)
    local state = 12345
    local function pick(list)
      state = (state * 1103515245 + 12345) % 2147483648
      return list[state // 65536 % #list + 1]
    end
    local out = {}
    while #out < count do
      local groups = pick({1, 1, 1, 2, 3, 4})
      local c = {n = pick({1, 1, 2, 3, 5}), c = groups * pick({1, 2, 3, 5, 8, 16}),
                 o = groups * pick({1, 2, 5, 6, 7, 13}), k = pick({1, 2, 3, 3, 4, 5, 7}),
                 stride = pick({1, 1, 1, 1, 2, 3}), pad = pick({0, 0, 1, 2, 3, 6}), dil = pick({1, 1, 2, 3}),
                 groups = groups, bias = pick({true, false}), xt = pick({false, false, true}),
                 wt = pick({false, false, true})}
      c.w = pick({1, 2, 5, 15, 16, 17, 63, 64, 65, 100, 129, 300})
      local span = (c.k - 1) * c.dil + 1
      if c.w + 2 * c.pad >= span then out[#out + 1] = c end   -- at least one output column
    end
    return out
  end

  it("gives the gemm path's result within float32 rounding on 120 generated geometries", function()
    dle.set_num_threads(1)
    for _, c in ipairs(generated(120)) do
      local x, w, b = inputs(c, #name(c))
      dle.core._tuning("conv1d_direct", 0)
      local plain = F.conv1d(x, w, b, opts(c))
      dle.core._tuning("conv1d_direct", 1)
      local y = F.conv1d(x, w, b, opts(c))
      assert_rounding(plain, x, w, b, c, "the gemm path")
      assert_rounding(y, x, w, b, c, "the direct path")
    end
  end)

  -- the staging buffer holds 512 KB of input per tile: 512 channels make tiles of 192 columns (the
  -- last one partial); 1 sample at 2 threads is split into tiles for both threads
  local large = {
    {n = 3, c = 64, w = 1024, o = 64, k = 3, stride = 1, pad = 1, dil = 1, groups = 1, bias = true},
    {n = 1, c = 512, w = 700, o = 13, k = 3, stride = 1, pad = 1, dil = 2, groups = 1, bias = true},
    {n = 2, c = 1024, w = 300, o = 8, k = 5, stride = 1, pad = 4, dil = 1, groups = 2, bias = false, xt = true},
    {n = 1, c = 6, w = 500, o = 12, k = 7, stride = 1, pad = 3, dil = 1, groups = 1, bias = true, wt = true},
  }
  for _, c in ipairs(large) do
    it(name(c) .. ": within float32 rounding, the same at 1 and 2 threads, not the gemm path's rounding", function()
      local x, w, b = inputs(c, c.c + c.w)
      dle.set_num_threads(1)
      local y1 = F.conv1d(x, w, b, opts(c))
      dle.set_num_threads(2)
      local y2 = F.conv1d(x, w, b, opts(c))
      assert_rounding(y1, x, w, b, c, "the direct path")
      assert.is_true(y1:equal(y2), "1 and 2 threads give the same sums")
      dle.core._tuning("conv1d_direct", 0)
      local plain = F.conv1d(x, w, b, opts(c))
      dle.core._tuning("conv1d_direct", 1)
      assert_rounding(plain, x, w, b, c, "the gemm path")
      if direct_taken then
        assert.is_false(y1:equal(plain), "the direct path was taken (it rounds differently)")
      end
    end)
  end

  it("matches the definition on a hand-sized case (float32, padding past the kernel, dilation)", function()
    -- y[o][l] = b[o] + sum_c sum_t w[o][c][t] x[c][l + 2t - 3], zero outside x
    local X = {{{1, 2, 3, 4, 5}, {-1, 0.5, 2, 0, 1}}}
    local W = {{{1, 0, -1}, {2, 1, 0}}, {{0.5, 0.5, 0.5}, {0, 0, 1}}}
    local y = F.conv1d(dle.tensor(X), dle.tensor(W), dle.tensor({10, -10}), {padding = 3, dilation = 2})
    local want = {{{}, {}}}
    for o = 1, 2 do
      for l = 1, 7 do
        local s = o == 1 and 10 or -10
        for c = 1, 2 do
          for t = 1, 3 do
            local i = l + 2 * (t - 1) - 3
            if i >= 1 and i <= 5 then s = s + W[o][c][t] * X[1][c][i] end
          end
        end
        want[1][o][l] = s
      end
    end
    H.assert_close(y, want, {rtol = 1e-6, atol = 1e-6})
  end)
end)
