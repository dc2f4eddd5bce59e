--- bench/entries_scan.lua — the scan ops over 1M float32 in milliseconds vs PyTorch (issue 17:
-- cumsum at most 1.0x PyTorch's time at 1 and 2 threads): cumsum of one line of 1M (the two-pass
-- parallel scan), cumsum along either dim of a 1024x1024 (many lines, many columns), cummax and
-- logcumsumexp of one line of 1M.
return function(ctx)
  local entries = {}
  local add = require("bench.one_input")(ctx, entries, 1.0)
  add("cumsum_1m", "cumsum of one line of 1M float32", {1048576},
    function(x) return x:cumsum(1) end, "y = x.cumsum(0)")
  add("cumsum_rows", "cumsum along dim 2 of 1024x1024 float32", {1024, 1024},
    function(x) return x:cumsum(2) end, "y = x.cumsum(1)")
  add("cumsum_cols", "cumsum along dim 1 of 1024x1024 float32", {1024, 1024},
    function(x) return x:cumsum(1) end, "y = x.cumsum(0)")
  add("cummax_1m", "cummax of one line of 1M float32", {1048576},
    function(x) return x:cummax(1) end, "y = x.cummax(0)")
  add("logcumsumexp_1m", "logcumsumexp of one line of 1M float32", {1048576},
    function(x) return x:logcumsumexp(1) end, "y = x.logcumsumexp(0)")
  return entries
end
