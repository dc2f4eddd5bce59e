--- bench/entries_distance.lua — dle.cdist in milliseconds vs PyTorch (issue 17: at most 1.2x
-- PyTorch's time): 1024x64 against 1024x64 float32 with p = 2 (one matrix product, as PyTorch
-- takes it) and p = 1 (the differences, 1024x1024x64).
return function(ctx)
  local dle = ctx.dle
  local vs_torch = require("bench.vs_torch")
  local entries = {}
  local function add(key, name, opts, torch_p)
    entries[#entries + 1] = vs_torch(key, name, 1.2, 3, function()
      local a, b = dle.randn(1024, 64), dle.randn(1024, 64)
      return function() return dle.cdist(a, b, opts) end
    end, "a = torch.randn(1024, 64); b = torch.randn(1024, 64)", "y = torch.cdist(a, b, p=" .. torch_p .. ")")
  end
  add("cdist_p2", "cdist p=2 of 1024x64 vs 1024x64 float32", {}, "2.0")
  add("cdist_p1", "cdist p=1 of 1024x64 vs 1024x64 float32", {p = 1}, "1.0")
  return entries
end
