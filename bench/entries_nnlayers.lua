--- bench/entries_nnlayers.lua — group_norm and bilinear interpolation next to PyTorch (issue 17's
-- target: at most 1.2x PyTorch's time), forward only, float32:
--   group_norm   x {32, 64, 56, 56}, 32 groups, with weight and bias
--   interpolate  x {8, 64, 64, 64} -> {128, 128}, bilinear (half-pixel centres)
return function(ctx)
  local dle = ctx.dle
  local F = dle.nn.functional
  local vs_torch = require("bench.vs_torch")
  local entries = {}

  local function entry(key, name, shape, setup, dle_call, torch_setup, torch_body)
    entries[#entries + 1] = vs_torch(key, name, 1.2, nil, function()
      local x = dle.randn(table.unpack(shape))
      local extra = setup and setup() or nil
      return function() return dle_call(x, extra) end
    end, "x = torch.randn(" .. table.concat(shape, ", ") .. ")" .. (torch_setup or ""), torch_body)
  end
  entry("group_norm", "group_norm, {32,64,56,56} float32, 32 groups", {32, 64, 56, 56},
    function() return {dle.randn(64), dle.randn(64)} end,
    function(x, wb) return F.group_norm(x, 32, wb[1], wb[2]) end,
    "; w = torch.randn(64); b = torch.randn(64)",
    "torch.nn.functional.group_norm(x, 32, w, b)")
  entry("interpolate_bilinear", "interpolate bilinear, {8,64,64,64} -> 128x128 float32", {8, 64, 64, 64}, nil,
    function(x) return F.interpolate(x, {size = {128, 128}, mode = "bilinear"}) end, nil,
    "torch.nn.functional.interpolate(x, size=(128, 128), mode='bilinear')")
  return entries
end
