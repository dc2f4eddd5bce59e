--- bench/entries_elementwise.lua — elementwise math without a bandwidth bound: erf (AVX2 kernel in
-- float32) and atan2 (AVX2 kernel in float32) over 1M float32, side by side with PyTorch. No target:
-- figures for comparison.
return function(ctx)
  local dle = ctx.dle
  local vs_torch = require("bench.vs_torch")
  local N = 1000000
  local function entry(key, name, dle_call, torch_body)
    return vs_torch(key, name, nil, nil, function()
      local x, y = dle.randn(N), dle.randn(N)
      return function() return dle_call(x, y) end
    end, "x = torch.randn(" .. N .. "); y = torch.randn(" .. N .. ")", torch_body)
  end
  return {
    entry("erf_1m", "erf, 1M float32", function(x) return x:erf() end, "x.erf()"),
    entry("atan2_1m", "atan2, 1M float32", function(x, y) return dle.atan2(x, y) end, "torch.atan2(x, y)"),
  }
end
