--- bench/entries_arrange.lua — the arrange ops (flip, roll, F.pad) over 1M-16M float32 in
-- milliseconds vs PyTorch (issue 17: at most 1.0x PyTorch's time): flip of one line of 1M and of
-- a 4096x4096 along either dim, roll of 16M along the last dim, reflect padding of a batch of
-- images (8x64x128x128, 8M) and of 1M lines of 16.
return function(ctx)
  local dle = ctx.dle
  local F = dle.nn.functional
  local entries = {}
  local add = require("bench.one_input")(ctx, entries, 1.0)
  add("flip_1m", "flip of one line of 1M float32", {1048576},
    function(x) return x:flip(1) end, "y = x.flip(0)")
  add("flip_rows_16m", "flip along dim 1 of 4096x4096 float32", {4096, 4096},
    function(x) return x:flip(1) end, "y = x.flip(0)")
  add("flip_cols_16m", "flip along dim 2 of 4096x4096 float32", {4096, 4096},
    function(x) return x:flip(2) end, "y = x.flip(1)")
  add("roll_16m", "roll by 1000 along dim 2 of 4096x4096 float32", {4096, 4096},
    function(x) return x:roll(1000, 2) end, "y = x.roll(1000, 1)")
  add("pad_reflect_images", "reflect pad {3,3,3,3} of 8x64x128x128 float32", {8, 64, 128, 128},
    function(x) return F.pad(x, {3, 3, 3, 3}, {mode = "reflect"}) end,
    "y = torch.nn.functional.pad(x, (3, 3, 3, 3), mode='reflect')")
  add("pad_reflect_lines", "reflect pad {2,2} of 65536x16 float32 (1M)", {65536, 16},
    function(x) return F.pad(x, {2, 2}, {mode = "reflect"}) end,
    "y = torch.nn.functional.pad(x, (2, 2), mode='reflect')")
  return entries
end
