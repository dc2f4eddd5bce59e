--- bench/entries_select.lua — selection over 1M float32 in milliseconds vs PyTorch (issue 17's
-- select ops): masked_select with half the mask true, nonzero of a {1024, 1024} tensor with half
-- its elements nonzero, unique of 1M values drawn from 1000 (sorted, with inverse and counts),
-- scatter_reduce (sum and amax) of 1M values into 1000 slots, and median of one line of 1M.
return function(ctx)
  local dle = ctx.dle
  local vs_torch = require("bench.vs_torch")
  local entries = {}
  -- setup_dle() -> the timed function; torch_setup, torch_body: the PyTorch side
  local function add(key, name, setup_dle, torch_setup, torch_body)
    entries[#entries + 1] = vs_torch(key, name, 1.0, 3, setup_dle, torch_setup, torch_body)
  end
  local N = 1048576
  add("masked_select_1m", "masked_select of 1M float32, half the mask true",
    function()
      local x = dle.randn(N)
      local m = x:gt(0)
      return function() return x:masked_select(m) end
    end, "x = torch.randn(" .. N .. "); m = x > 0", "y = x.masked_select(m)")
  add("nonzero_1m", "nonzero of 1024x1024 float32, half nonzero",
    function()
      local x = dle.randn(1024, 1024):relu()
      return function() return x:nonzero() end
    end, "x = torch.randn(1024, 1024).relu()", "y = x.nonzero()")
  add("unique_1m", "unique of 1M float32 (1000 distinct), inverse and counts",
    function()
      local x = dle.randint(0, 1000, {N}):float()
      return function() return x:unique({return_inverse = true, return_counts = true}) end
    end, "x = torch.randint(0, 1000, (" .. N .. ",)).float()",
    "y = torch.unique(x, sorted=True, return_inverse=True, return_counts=True)")
  for _, reduce in ipairs({"sum", "amax"}) do
    add("scatter_reduce_" .. reduce .. "_1m", "scatter_reduce " .. reduce .. " of 1M float32 into 1000",
      function()
        local src, idx = dle.randn(N), dle.randint(1, 1001, {N}, {dtype = "int64"})
        local z = dle.zeros(1000)
        return function() return z:scatter_reduce(1, idx, src, reduce) end
      end, "src = torch.randn(" .. N .. "); idx = torch.randint(0, 1000, (" .. N .. ",)); z = torch.zeros(1000)",
      "y = z.scatter_reduce(0, idx, src, '" .. reduce .. "')")
  end
  add("median_1m", "median of one line of 1M float32",
    function()
      local x = dle.randn(N)
      return function() return x:median() end
    end, "x = torch.randn(" .. N .. ")", "y = x.median()")
  return entries
end
