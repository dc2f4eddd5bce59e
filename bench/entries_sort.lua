--- bench/entries_sort.lua — the sort family over 1M float32 (issue 17's target: at most 1.0x
-- PyTorch's time): sort of one line of 1M (PyTorch with stable=True, as dle's sort always is),
-- sort of 1000 lines of 1000, and topk of the 1000 and the 10 largest of one line of 1M.
return function(ctx)
  local entries = {}
  local entry = require("bench.one_input")(ctx, entries, 1.0, 1)
  entry("sort_1m", "sort, 1M float32 in one line", {1000000},
    function(x) return x:sort() end, "x.sort(stable=True)")
  entry("sort_rows", "sort along dim 2, {1000,1000} float32", {1000, 1000},
    function(x) return x:sort(2) end, "x.sort(dim=1, stable=True)")
  entry("topk_1000", "topk k=1000, 1M float32 in one line", {1000000},
    function(x) return x:topk(1000) end, "x.topk(1000)")
  entry("topk_10", "topk k=10, 1M float32 in one line", {1000000},
    function(x) return x:topk(10) end, "x.topk(10)")
  return entries
end
